"""The audit's probes of what takes a model: DebiasedModel, RefreshDagger, BestRound, the
validation metrics and scores, the exposure and Ratio models, the tuner, the synthetic data.

The logits/probabilities convention is probed everywhere a model is read: a
sigmoid output where logits are expected, logits where probabilities are.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from benchmarks.audit_runner import Probe
from benchmarks.audit_values import _adp, _data, _dense, _keras, bad_binary, bad_ints


def _train() -> Any:
    s = _data()
    return _adp().data.pue_dataset(s.x_pu, s.w_pu, s.x_e, s.e_e, batch_size=120, seed=0)


def _val() -> Any:
    s = _data()
    return _adp().validation.pue_validation_data(s.x_pu, s.w_pu, s.x_e, s.e_e, batch_size=120)


def _fit(metric: Any, callbacks: tuple = (), alternate: bool = True, layout: bool = True,
         epochs: int = 1, net: Any = None) -> Any:
    k = _keras()
    k.utils.set_random_seed(0)
    net = net or _dense(dim=2)
    model = _adp().DebiasedModel(net, initial_dagger=0.5) if alternate else net
    model.compile("sgd", loss=_adp().ADPUELoss(from_logits=True),
                  metrics=[metric] if metric is not None else [])
    return model.fit(_train(), validation_data=_val() if layout else _train(), epochs=epochs,
                     verbose=0, callbacks=list(callbacks))


def _plain(metric: Any) -> Any:
    model = _dense(dim=2)
    model.compile("sgd", loss=_adp().ADPUELoss(from_logits=True), metrics=[metric])
    return model


def _el() -> Any:
    return _adp().validation.ExposureLikelihood(from_logits=True)


def _rr() -> Any:
    return _adp().validation.ReferenceRisk(_adp().ADPUELoss(from_logits=True))


def metric_callback_probes() -> list[Probe]:
    adp = _adp
    def y3() -> Any:
        return adp().pack_labels(adp().Source.PU, w=[1, 0])

    probes = [
        Probe("ExposureLikelihood: validation data without the layout", lambda t: _fit(
            _el(), layout=False), "without yardsticks"),
        Probe("ReferenceRisk: validation data without the layout", lambda t: _fit(
            _rr(), layout=False), "without yardsticks"),
        Probe("ExposureLikelihood: evaluate on training batches", lambda t: _fit(
            _el(), alternate=False).model.evaluate(_train(), verbose=0),
              "(without yardsticks|unknown number of columns .*one model one layout)"),
        Probe("ExposureLikelihood: evaluate a fresh model on training batches", lambda t:
              _plain(_el()).evaluate(_train(), verbose=0), "without yardsticks"),
        Probe("ExposureLikelihood: called on 3 columns", lambda t: _el().update_state(
            y3(), np.zeros((2, 1))), "without yardsticks"),
        Probe("ReferenceRisk: called on 3 columns", lambda t: _rr().update_state(
            y3(), np.zeros((2, 1))), "without yardsticks"),
        Probe("ExposureLikelihood: string labels", lambda t: _el().update_state(
            np.array([["1", "0", "0", "0.5"]]), np.zeros((1, 1))), "`y_true` must hold numbers"),
        Probe("ExposureLikelihood: from_logits 'yes'", lambda t: adp().validation
              .ExposureLikelihood(from_logits="yes"), "`from_logits`"),
        Probe("ExposureLikelihood: prior 1.5", lambda t: adp().validation.ExposureLikelihood(
            prior=1.5), "`prior`"),
        Probe("ExposureLikelihood: 5 columns", lambda t: _el().update_state(
            np.zeros((2, 5)), np.zeros((2, 1))), "validation layout"),
        Probe("ReferenceRisk: a loss without f-dagger", lambda t: adp().validation.ReferenceRisk(
            adp().ADSLoss()), "does not use f"),
        Probe("ReferenceRisk: a name", lambda t: adp().validation.ReferenceRisk("adpue"),
              "`loss`"),
        Probe("ExposureLikelihood: fit with the layout (correct)", lambda t: _fit(_el()).history[
            "val_exposure_nll"][-1], check=lambda v: np.isfinite(v) and v > 0),
        Probe("BestRound: validation data without the layout", lambda t: _fit(
            _el(), (adp().RefreshDagger(), adp().BestRound()), layout=False),
              "without yardsticks"),
        Probe("BestRound: without RefreshDagger", lambda t: _fit(
            _el(), (adp().BestRound(),), epochs=2), "no round ended .*RefreshDagger"),
        Probe("BestRound: a refresh period longer than the fit", lambda t: _fit(
            _el(), (adp().RefreshDagger(every_n_epochs=4), adp().BestRound()), epochs=2),
              "no round ended"),
        Probe("BestRound: a monitor never logged", lambda t: _fit(
            None, (adp().RefreshDagger(), adp().BestRound())), "BestRound monitors"),
        Probe("BestRound: on a plain model", lambda t: _fit(
            _el(), (adp().BestRound(),), alternate=False), "DebiasedModel"),
        Probe("BestRound: mode 'up'", lambda t: adp().BestRound(mode="up"), "`mode`"),
        Probe("BestRound: monitor 3", lambda t: adp().BestRound(monitor=3), "`monitor`"),
        Probe("BestRound: restore_best 1", lambda t: adp().BestRound(restore_best=1),
              "`restore_best`"),
        Probe("BestRound: with RefreshDagger (correct)", lambda t: _best_round(),
              check=lambda r: r == (True, 2)),
        Probe("RefreshDagger: both periods", lambda t: adp().RefreshDagger(
            every_n_epochs=2, every_n_steps=3), "`every_n_epochs` and `every_n_steps`"),
        Probe("RefreshDagger: on a plain model", lambda t: _fit(
            None, (adp().RefreshDagger(),), alternate=False), "DebiasedModel"),
    ]
    probes += [Probe(f"BestRound: {w}", lambda t, v=v: adp().BestRound(patience=v), "`patience`")
               for w, v, _ in bad_ints("patience", 1)]
    probes += [Probe(f"RefreshDagger: every_n_epochs {w}", lambda t, v=v: adp().RefreshDagger(
        every_n_epochs=v), "`every_n_epochs`") for w, v, _ in bad_ints("every_n_epochs", 1)]
    probes += [Probe(f"RefreshDagger: every_n_steps {w}", lambda t, v=v: adp().RefreshDagger(
        every_n_steps=v), "`every_n_steps`") for w, v, _ in bad_ints("every_n_steps", 1)[:3]]
    return probes


def _best_round() -> Any:
    best = _adp().BestRound()
    history = _fit(_el(), (_adp().RefreshDagger(), best), epochs=2)
    return best.best_round == history.model.refreshes, len(best.rounds)


def model_tuner_probes() -> list[Probe]:
    adp = _adp
    def kt() -> Any:
        import keras_tuner

        return keras_tuner

    def hm(**k: Any) -> Any:
        from adpue_tf.tuning import DebiasedHyperModel

        return DebiasedHyperModel(**k)

    return [
        Probe("DebiasedModel: two outputs", lambda t: adp().DebiasedModel(_dense(outputs=2)),
              "`net`"),
        Probe("DebiasedModel: two units", lambda t: adp().DebiasedModel(_dense(units=2)), "`net`"),
        Probe("DebiasedModel: not a model", lambda t: adp().DebiasedModel(lambda x: x), "`net`"),
        Probe("DebiasedModel: initial_dagger 1.5", lambda t: adp().DebiasedModel(
            _dense(), initial_dagger=1.5), "`initial_dagger`"),
        Probe("DebiasedModel: initial_dagger 'half'", lambda t: adp().DebiasedModel(
            _dense(), initial_dagger="half"), "`initial_dagger`"),
        Probe("DebiasedModel: initial_dagger a two-unit model", lambda t: adp().DebiasedModel(
            _dense(), initial_dagger=_dense(units=2)), "`initial_dagger`"),
        # with from_logits=True the initial guess speaks logits, like the net (documented)
        Probe("DebiasedModel: a logit model as initial_dagger, from_logits=True",
              lambda t: _compile_fit(adp().ADPUELoss(from_logits=True), initial=_dense(dim=2))),
        Probe("DebiasedModel: a logit model as initial_dagger, from_logits=False",
              lambda t: _compile_fit(adp().ADPUELoss(from_logits=False),
                                     initial=_dense(dim=2)), "`initial_dagger`"),
        Probe("DebiasedModel: a loss without f-dagger", lambda t: _compile_fit(
            adp().ADSLoss()), "(f†|dagger|ADSLoss)"),
        Probe("DebiasedHyperModel: build_net with two outputs", lambda t: hm(
            build_net=lambda hp: _dense(outputs=2, dim=2)).build(kt().HyperParameters()),
              r"`build_net\(hp\)` must have a single output"),
        Probe("DebiasedHyperModel: build_net with two units", lambda t: hm(
            build_net=lambda hp: _dense(units=2, dim=2)).build(kt().HyperParameters()),
              r"`build_net\(hp\)` must have one output unit"),
        Probe("DebiasedHyperModel: build_net ending in a sigmoid", lambda t: hm(
            build_net=lambda hp: _dense("sigmoid", dim=2)).build(kt().HyperParameters()),
              r"`build_net\(hp\)` ends with a sigmoid"),
        Probe("DebiasedHyperModel: build_net returns a function", lambda t: hm(
            build_net=lambda hp: (lambda x: x)).build(kt().HyperParameters()), "`build_net`"),
        Probe("DebiasedHyperModel: build_net not callable", lambda t: hm(build_net=3),
              "`build_net`"),
        Probe("DebiasedHyperModel: unknown criterion", lambda t: hm(
            input_shape=(2,), criterion="val_risk"), "`criterion`"),
        Probe("DebiasedHyperModel: learning_rate narrowed to 0", lambda t: hm(
            input_shape=(2,)).build(_fixed(kt(), "learning_rate", 0.0)), "`learning_rate`",
              error=("FatalValueError",)),
        Probe("DebiasedHyperModel: input_shape 0", lambda t: hm(input_shape=0), "`input_shape`"),
        Probe("DebiasedHyperModel: a linear model (correct)", lambda t: hm(
            input_shape=(2,)).build(kt().HyperParameters()).count_params(),
              check=lambda n: n >= 3),
    ]


def _fixed(kt: Any, name: str, value: Any) -> Any:
    """KerasTuner ``HyperParameters`` with ``name`` narrowed to ``value``."""
    hp = kt.HyperParameters()
    hp.Fixed(name, value)
    return hp


def _compile_fit(loss: Any, initial: Any = 0.5) -> Any:
    model = _adp().DebiasedModel(_dense(dim=2), initial_dagger=initial)
    model.compile("sgd", loss=loss)
    return model.fit(_train(), epochs=1, verbose=0, callbacks=[_adp().RefreshDagger()])


def score_exposure_probes() -> list[Probe]:
    adp = _adp

    def score(model: Any = None, **kw: Any) -> Any:
        s = _data()
        kw.setdefault("from_logits", True)
        return adp().validation_score(model if model is not None else _dense(dim=2),
                                      s.x_pu, s.w_pu, s.x_e, s.e_e, **kw)

    probes = [
        Probe("validation_score: a sigmoid model as logits", lambda t: score(
            _dense("sigmoid", dim=2)), "sigmoid"),
        Probe("validation_score: logits as probabilities", lambda t: score(
            _dense(dim=2), from_logits=False), r"(\[0, 1\]|probabilit)"),
        Probe("validation_score: a logit exposure_model", lambda t: score(
            exposure_model=_dense(dim=2)), r"`exposure_model`"),
        Probe("validation_score: a logit reference", lambda t: score(
            criterion="reference_risk", reference=_dense(dim=2)), "`reference`"),
        Probe("pue_validation_data: a logit exposure_model", lambda t: adp().validation
              .pue_validation_data(_data().x_pu, _data().w_pu, _data().x_e, _data().e_e,
                                   exposure_model=_dense(dim=2)), "`exposure_model`"),
        Probe("pue_validation_data: a logit reference", lambda t: adp().validation
              .pue_validation_data(_data().x_pu, _data().w_pu, _data().x_e, _data().e_e,
                                   reference=_dense(dim=2)), "`reference`"),
        Probe("validation_score: unknown criterion", lambda t: score(criterion="auc"),
              "`criterion`"),
        Probe("validation_score: two units", lambda t: score(_dense(units=2, dim=2)),
              "(output unit|`model`)"),
        Probe("validation_score: correct", lambda t: score(), check=lambda v: np.isfinite(v)),
        Probe("exposure_brier_score: NaN p_pu", lambda t: adp().validation.exposure_brier_score(
            [1, 0], [np.nan, 0.5], [1, 0], [0.5, 0.5]), "`p_pu`.*NaN"),
        Probe("exposure_brier_score: p_e 1.5", lambda t: adp().validation.exposure_brier_score(
            [1, 0], [0.5, 0.5], [1, 0], [0.5, 1.5]), r"`p_e`.*\[0, 1\]"),
        Probe("exposure_brier_score: lengths", lambda t: adp().validation.exposure_brier_score(
            [1, 0], [0.5], [1, 0], [0.5, 0.5]), "`p_pu` must be a vector of 2"),
        Probe("exposure_brier_score: correct", lambda t: adp().validation.exposure_brier_score(
            [1, 0], [0.5, 0.5], [1, 0], [0.5, 0.5]), check=lambda v: abs(v + 0.375) < 1e-12),
        Probe("exposure_nll: theta 1.5", lambda t: adp().validation.exposure_nll(
            [1, 0], [0.0, 0.0], [0.5, 1.5]), "`theta`"),
        Probe("exposure_nll: w 2", lambda t: adp().validation.exposure_nll(
            [2, 0], [0.0, 0.0], [0.5, 0.5]), "`w`"),
        Probe("fit_ratio_model: a logit exposure_model", lambda t: adp().exposure.fit_ratio_model(
            _data().x_pu, _data().w_pu, _data().x_e, _data().e_e, exposure_model=_dense(dim=2)),
              "`exposure_model`"),
        Probe("fit_exposure_model: e all 1", lambda t: adp().exposure.fit_exposure_model(
            _data().x_e, np.ones(len(_data().e_e))), "`e`"),
        Probe("fit_exposure_model: l2 -1", lambda t: adp().exposure.fit_exposure_model(
            _data().x_e, _data().e_e, l2=-1.0), "`l2`"),
    ]
    for what, value, _ in bad_binary(120):
        if value is not None:
            probes.append(Probe(f"validation_score: w {what}", lambda t, v=value: adp()
                                .validation_score(_dense(dim=2), _data().x_pu, v, _data().x_e,
                                                  _data().e_e, from_logits=True), "`w`"))
            probes.append(Probe(f"fit_exposure_model: e {what}", lambda t, v=value: adp()
                                .exposure.fit_exposure_model(_data().x_e, v), "`e`"))
    return probes


def synthetic_probes() -> list[Probe]:
    adp = _adp
    probes = []
    for what, value, _ in bad_ints("n_pu", 1):
        probes.append(Probe(f"synthetic_pue: {what}", lambda t, v=value: adp().synthetic
                            .synthetic_pue(v, 10), "`n_pu`"))
    for what, value, _ in bad_ints("dim", 1)[:3]:
        probes.append(Probe(f"synthetic_pue: {what}", lambda t, v=value: adp().synthetic
                            .synthetic_pue(10, 10, dim=v), "`dim`"))
    probes.append(Probe("synthetic_pue: correct", lambda t: adp().synthetic.synthetic_pue(
        10, 7, seed=0).x_e.shape, check=lambda s: s == (7, 2)))
    return probes


def model_probes() -> list[Probe]:
    """Every probe of what takes a model."""
    return (metric_callback_probes() + model_tuner_probes() + score_exposure_probes()
            + synthetic_probes())


__all__ = ["model_probes"]
