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


# ------------------------------------------------------------------ feature dicts and yardsticks
def _split(x: np.ndarray, names: tuple[str, str] = ("a", "b")) -> dict:
    return {names[0]: x[:, :1], names[1]: x[:, 1:]}


def _dict_net(names: tuple[str, str] = ("a", "b"), activation: str | None = None) -> Any:
    k = _keras()
    k.utils.set_random_seed(0)
    a, b = k.Input((1,), name=names[0]), k.Input((1,), name=names[1])
    out = k.layers.Dense(1, activation)(k.layers.Concatenate()([a, b]))
    return k.Model({names[0]: a, names[1]: b}, out)


def _dict_score(names: tuple[str, str] = ("a", "b"), **kw: Any) -> float:
    s = _data()
    return _adp().validation_score(_dict_net(names), _split(s.x_pu, names), s.w_pu,
                                   _split(s.x_e, names), s.e_e, from_logits=True, **kw)


def _kept(name: str) -> bool:
    """pue_validation_data keeps a user's feature ``name`` whole in every batch."""
    s = _data()
    ds = _adp().validation.pue_validation_data(_split(s.x_pu, ("a", name)), s.w_pu,
                                               _split(s.x_e, ("a", name)), s.e_e)
    got = np.sort(np.concatenate([np.ravel(x[name]) for x, _ in ds]))
    want = np.sort(np.concatenate([s.x_pu[:, 1], s.x_e[:, 1]]).astype(np.float32))
    return got.shape == want.shape and bool(np.allclose(got, want))


def yardstick_probes() -> list[Probe]:
    """Array models given feature dicts (and the reverse) as yardsticks, and features whose
    names look internal."""
    adp = _adp
    s = _data

    def vd(**kw: Any) -> Any:
        return adp().validation.pue_validation_data(_split(s().x_pu), s().w_pu,
                                                    _split(s().x_e), s().e_e, **kw)

    def vd_arrays(**kw: Any) -> Any:
        return adp().validation.pue_validation_data(s().x_pu, s().w_pu, s().x_e, s().e_e, **kw)

    probes = [
        Probe("validation_score: an array exposure_model on a dict of features", lambda t:
              _dict_score(exposure_model=_dense("sigmoid", dim=2)), r"`exposure_model`.*dict"),
        Probe("validation_score: an array reference on a dict of features", lambda t:
              _dict_score(criterion="reference_risk", reference=_dense("sigmoid", dim=2)),
              r"`reference`.*dict"),
        Probe("pue_validation_data: an array exposure_model on a dict of features", lambda t: vd(
            exposure_model=_dense("sigmoid", dim=2)), r"`exposure_model`.*dict"),
        Probe("pue_validation_data: an array reference on a dict of features", lambda t: vd(
            reference=_dense("sigmoid", dim=2)), r"`reference`.*dict"),
        Probe("pue_validation_data: a dict exposure_model on an array of features", lambda t:
              vd_arrays(exposure_model=_dict_net(activation="sigmoid")),
              r"`exposure_model`.*(dict|array)"),
        Probe("validation_score: a dict model on an array of features", lambda t: adp()
              .validation_score(_dict_net(), s().x_pu, s().w_pu, s().x_e, s().e_e,
                                from_logits=True), r"`model`.*(dict|array)"),
        Probe("validation_score: a dict exposure_model on a dict of features (correct)",
              lambda t: _dict_score(exposure_model=_dict_net(activation="sigmoid")),
              check=np.isfinite),
        Probe("pue_validation_data: a feature named __yardstick__ is kept (correct)", lambda t:
              _kept("__yardstick__"), check=bool),
        Probe("validation_score: a feature named __yardstick__ (correct)", lambda t: _dict_score(
            ("a", "__yardstick__")), check=np.isfinite),
        Probe("validation_score: a feature named __yardstick__, with an exposure_model "
              "(correct)", lambda t: _dict_score(("a", "__yardstick__"), exposure_model=_dict_net(
                  ("a", "__yardstick__"), "sigmoid")), check=np.isfinite),
        Probe("ExposureLikelihood: fit on validation data with a feature named __yardstick__ "
              "(correct)", lambda t: _yardstick_fit(), check=lambda v: np.isfinite(v) and v > 0),
    ]
    for name in ("__dagger__", "__source__", "w", "e", "theta", "_yardstick", "y_true"):
        probes.append(Probe(f"pue_validation_data: a feature named {name} is kept (correct)",
                            lambda t, n=name: _kept(n), check=bool))
    return probes


def _yardstick_fit() -> float:
    s = _data()
    names = ("a", "__yardstick__")
    model = _adp().DebiasedModel(_dict_net(names))
    model.compile("sgd", loss=_adp().ADPUELoss(from_logits=True), metrics=[_el()])
    val = _adp().validation.pue_validation_data(_split(s.x_pu, names), s.w_pu,
                                                _split(s.x_e, names), s.e_e)
    train = _adp().data.pue_dataset(_split(s.x_pu, names), s.w_pu, _split(s.x_e, names), s.e_e,
                                    batch_size=120, seed=0)
    return model.fit(train, validation_data=val, epochs=1, verbose=0).history[
        "val_exposure_nll"][-1]


def huge_value_probes() -> list[Probe]:
    """Finite float64 values beyond float32 where an exposure model or a score reads them."""
    adp = _adp
    s = _data

    def at(x: np.ndarray, value: float, cell: bool = False) -> np.ndarray:
        out = np.array(x, np.float64)
        if cell:
            out[5, 1] = value
        else:
            out[:] = value
        return out

    return [
        Probe("fit_exposure_model: x_e 1e300", lambda t: adp().exposure.fit_exposure_model(
            at(s().x_e, 1e300), s().e_e), r"`x_e`.*float32"),
        Probe("fit_exposure_model: x_e -1e300", lambda t: adp().exposure.fit_exposure_model(
            at(s().x_e, -1e300), s().e_e), r"`x_e`.*float32"),
        Probe("fit_exposure_model: one cell 1e300", lambda t: adp().exposure.fit_exposure_model(
            at(s().x_e, 1e300, True), s().e_e), r"`x_e`.*float32"),
        Probe("fit_exposure_model: x_e 3e38, within float32 (correct)", lambda t: adp().exposure
              .fit_exposure_model(at(s().x_e, 3e38, True), s().e_e).count_params(),
              r"`x_e`", check=lambda n: n == 3),
        Probe("fit_ratio_model: x_pu 1e300", lambda t: adp().exposure.fit_ratio_model(
            at(s().x_pu, 1e300), s().w_pu, s().x_e, s().e_e), r"`x_pu`.*float32"),
        Probe("validation_score: x_pu 1e300", lambda t: adp().validation_score(
            _dense(dim=2), at(s().x_pu, 1e300, True), s().w_pu, s().x_e, s().e_e,
            from_logits=True), r"`x_pu`.*float32"),
        Probe("pue_validation_data: x_e 1e300", lambda t: adp().validation.pue_validation_data(
            s().x_pu, s().w_pu, at(s().x_e, 1e300, True), s().e_e), r"`x_e`.*float32"),
        Probe("fit_exposure_model: x_e a masked array", lambda t: adp().exposure
              .fit_exposure_model(np.ma.masked_array(s().x_e, np.eye(120, 2, dtype=bool)),
                                  s().e_e), r"`x_e`.*mask"),
        Probe("fit_exposure_model: e as bools (correct)", lambda t: adp().exposure
              .fit_exposure_model(s().x_e, s().e_e.astype(bool)).count_params(),
              check=lambda n: n == 3),
        Probe("exposure_nll: lists of bools and floats (correct)", lambda t: float(np.mean(
            adp().validation.exposure_nll([True, False], [0.0, 1.0], [0.5, 0.5]))),
              check=np.isfinite),
    ]


# ------------------------------------------------------------------ DebiasedModel, callbacks, tuner
def _dm_fit(net: Any = None, *, loss: Any = None, initial: Any = 0.5, callbacks: tuple = (),
            epochs: int = 1, train: Any = None, **compile_kw: Any) -> Any:
    model = _adp().DebiasedModel(net if net is not None else _dense(dim=2),
                                 initial_dagger=initial)
    model.compile("sgd", loss=loss if loss is not None else _adp().ADPUELoss(from_logits=True),
                  **compile_kw)
    return model.fit(train if train is not None else _train(), epochs=epochs, verbose=0,
                     callbacks=list(callbacks))


def _saved_debiased(tmp: Any) -> float:
    model = _dm_fit().model
    x = _data().x_pu[:5]
    model.save(tmp / "d.keras")
    again = _keras().models.load_model(tmp / "d.keras")
    return float(np.max(np.abs(np.asarray(model.predict(x, verbose=0))
                               - np.asarray(again.predict(x, verbose=0)))))


def _refreshes(every: dict, epochs: int = 2) -> int:
    return _dm_fit(callbacks=(_adp().RefreshDagger(**every),), epochs=epochs).model.refreshes


def debiased_probes() -> list[Probe]:
    """DebiasedModel with nets ending in a probability, odd initial guesses, saving and
    loading, compiled options; RefreshDagger and BestRound with NumPy integers."""
    from benchmarks.audit_values import SQUASHED, squashed

    adp = _adp
    s = _data
    probes = [Probe(f"DebiasedModel: a net ending in {how} with from_logits=True",
                    lambda t, h=how: _dm_fit(squashed(h)), r"(sigmoid|probabilit)")
              for how in SQUASHED]
    probes += [
        Probe("DebiasedModel: initial_dagger NaN", lambda t: adp().DebiasedModel(
            _dense(), initial_dagger=float("nan")), "`initial_dagger`"),
        Probe("DebiasedModel: initial_dagger True", lambda t: adp().DebiasedModel(
            _dense(), initial_dagger=True), "`initial_dagger`"),
        Probe("DebiasedModel: initial_dagger 0.0 (correct)", lambda t: _dm_fit(initial=0.0)
              .history["loss"][-1], check=np.isfinite),
        Probe("DebiasedModel: initial_dagger np.float32(0.3) (correct)", lambda t: _dm_fit(
            initial=np.float32(0.3)).history["loss"][-1], check=np.isfinite),
        Probe("DebiasedModel: compiled with 'binary_crossentropy'", lambda t: _dm_fit(
            loss="binary_crossentropy"), r"(DebiasedLoss|f†|dagger|binary_crossentropy)"),
        Probe("DebiasedModel: saved as .keras and loaded (correct)", _saved_debiased,
              check=lambda d: d < 1e-6),
        Probe("DebiasedModel: a dict-input net (correct)", lambda t: _dm_fit(
            _dict_net(), train=adp().data.pue_dataset(_split(s().x_pu), s().w_pu,
                                                      _split(s().x_e), s().e_e,
                                                      batch_size=120, seed=0))
              .history["loss"][-1], check=np.isfinite),
        Probe("DebiasedModel: jit_compile=True (correct)", lambda t: _dm_fit(jit_compile=True)
              .history["loss"][-1], check=np.isfinite),
        Probe("DebiasedModel: fit on labels of 2 columns", lambda t: _dm_fit(
            train=_two_columns()), r"`y_true`.*(shape|columns)"),
        Probe("RefreshDagger: every_n_steps=1 (correct)", lambda t: _refreshes(
            {"every_n_steps": 1}), check=lambda n: n >= 2),
        Probe("RefreshDagger: every_n_epochs np.int64(1)", lambda t: _refreshes(
            {"every_n_epochs": np.int64(1)}), "`every_n_epochs`", check=lambda n: n == 2),
        Probe("RefreshDagger: one callback for two fits (correct)", lambda t: _two_fits(),
              check=lambda r: r == (2, 2)),
        Probe("BestRound: patience np.int64(1)", lambda t: adp().BestRound(patience=np.int64(1)),
              "`patience`", check=lambda b: b is not None),
        Probe("BestRound: monitor 'val_loss' (correct)", lambda t: _fit(
            _el(), (adp().RefreshDagger(), adp().BestRound(monitor="val_loss")), epochs=2)
              .history["val_loss"][-1], check=np.isfinite),
        Probe("BestRound: restore_best=False (correct)", lambda t: _fit(
            _el(), (adp().RefreshDagger(), adp().BestRound(restore_best=False)), epochs=2)
              .history["val_exposure_nll"][-1], check=np.isfinite),
    ]
    return probes


def _two_columns() -> Any:
    import tensorflow as tf

    s = _data()
    return tf.data.Dataset.from_tensor_slices((s.x_pu.astype("float32"), np.stack(
        [s.w_pu, np.zeros(120)], 1).astype("float32"))).batch(60)


def _two_fits() -> tuple[int, int]:
    refresh = _adp().RefreshDagger()
    first = _dm_fit(callbacks=(refresh,), epochs=2).model.refreshes
    second = _dm_fit(callbacks=(refresh,), epochs=2).model.refreshes
    return first, second


def tuner_more_probes() -> list[Probe]:
    """DebiasedHyperModel's other options, and one real search."""
    def kt() -> Any:
        import keras_tuner

        return keras_tuner

    def hm(**k: Any) -> Any:
        from adpue_tf.tuning import DebiasedHyperModel

        return DebiasedHyperModel(**k)

    return [
        Probe("DebiasedHyperModel: input_shape [2] (correct)", lambda t: hm(input_shape=[2])
              .build(kt().HyperParameters()).count_params(), check=lambda n: n >= 3),
        Probe("DebiasedHyperModel: input_shape np.int64(2)", lambda t: hm(
            input_shape=np.int64(2)).build(kt().HyperParameters()).count_params(),
              "`input_shape`", check=lambda n: n >= 3),
        Probe("DebiasedHyperModel: loss 'nope'", lambda t: hm(input_shape=(2,), loss="nope"),
              "(`loss`|nope)"),
        Probe("DebiasedHyperModel: prior 1.5", lambda t: hm(input_shape=(2,), loss="adpe",
                                                            prior=1.5), "`prior`"),
        Probe("DebiasedHyperModel: initial_dagger 1.5", lambda t: hm(
            input_shape=(2,), alternate=True, initial_dagger=1.5), "`initial_dagger`"),
        Probe("DebiasedHyperModel: alternate 'yes'", lambda t: hm(input_shape=(2,),
                                                                   alternate="yes"),
              "`alternate`"),
        Probe("DebiasedHyperModel: loss_options with an unknown option", lambda t: hm(
            input_shape=(2,), loss_options={"bogus": 1}).build(kt().HyperParameters()),
              "bogus"),
        Probe("DebiasedHyperModel: neither build_net nor input_shape", lambda t: hm(),
              "(`build_net`|`input_shape`)"),
        Probe("DebiasedHyperModel: a one-trial RandomSearch (correct)", lambda t: _search(t),
              check=lambda v: v is not None and np.isfinite(v)),
        Probe("tuning.objective: unknown loss", lambda t: __import__(
            "adpue_tf.tuning.objectives", fromlist=["objective"]).objective("nope"),
              "(`loss`|nope)"),
    ]


def _search(tmp: Any) -> Any:
    import keras_tuner

    from adpue_tf.tuning import DebiasedHyperModel

    hyper = DebiasedHyperModel(input_shape=(2,), alternate=True)
    tuner = keras_tuner.RandomSearch(hyper, objective=hyper.objective, max_trials=1,
                                     directory=str(tmp), project_name="p", seed=0)
    tuner.search(_train(), validation_data=_val(), epochs=1, verbose=0)
    best = tuner.oracle.get_best_trials(1)[0]
    return best.score


def synthetic_more_probes() -> list[Probe]:
    adp = _adp
    return [
        Probe("synthetic_pue: seed 2**40 (correct)", lambda t: adp().synthetic.synthetic_pue(
            10, 10, seed=2**40).x_pu.shape, check=lambda s: s == (10, 2)),
        Probe("synthetic_pue: exposure 'nope'", lambda t: adp().synthetic.synthetic_pue(
            10, 10, exposure="nope"), "`exposure`"),
        Probe("synthetic_sse: n 0", lambda t: adp().synthetic.synthetic_sse(0), "`n`"),
        Probe("synthetic_sse: seed 2**40 (correct)", lambda t: len(adp().synthetic.synthetic_sse(
            10, seed=2**40).x), check=lambda n: n == 10),
    ]


def model_probes() -> list[Probe]:
    """Every probe of what takes a model."""
    return (metric_callback_probes() + model_tuner_probes() + score_exposure_probes()
            + synthetic_probes() + yardstick_probes() + huge_value_probes() + debiased_probes()
            + tuner_more_probes() + synthetic_more_probes())


__all__ = ["model_probes"]
