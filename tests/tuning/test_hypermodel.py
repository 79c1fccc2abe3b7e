"""tuning: the pinned search space, observable objectives, searches end to end, bad input."""

from __future__ import annotations

import math

import keras
import keras_tuner
import numpy as np
import pytest

import adpue_tf as adp
from adpue_tf import exposure, synthetic, validation
from adpue_tf.tuning import DebiasedHyperModel, objective

LRS = [1e-3, 3e-3, 1e-2, 3e-2]
ALPHAS = [0.0, 0.25, 0.5, 0.75, 1.0]


def _space(hp: keras_tuner.HyperParameters) -> dict:
    return {p.name: list(p.values) for p in hp.space}


def _built(hm: DebiasedHyperModel) -> keras_tuner.HyperParameters:
    hp = keras_tuner.HyperParameters()
    hm.build(hp)
    return hp


# -- the search space -----------------------------------------------------------
def test_space_adpue_default():
    hp = _built(DebiasedHyperModel(input_shape=(2,)))
    assert hp.values == {"learning_rate": 1e-3}
    assert _space(hp) == {"learning_rate": LRS}


def test_space_double_adss_has_alpha():
    hp = _built(DebiasedHyperModel(loss="double_adss", input_shape=(2,)))
    assert hp.values == {"learning_rate": 1e-3, "alpha": 0.5}
    assert _space(hp) == {"learning_rate": LRS, "alpha": ALPHAS}


def test_space_adpue_tune_beta_gamma():
    hp = _built(DebiasedHyperModel(loss="adpue", input_shape=(2,), tune_beta_gamma=True))
    assert hp.values == {"learning_rate": 1e-3, "beta": 0.0, "gamma": 0.0}
    assert _space(hp) == {"learning_rate": LRS, "beta": [0.0, 0.01, 0.1],
                          "gamma": [0.0, 1.0, 0.5]}


def test_space_other_cases():
    hp = _built(DebiasedHyperModel(loss="ad3se", input_shape=(2,), tune_beta_gamma=True))
    assert hp.values == {"learning_rate": 1e-3, "alpha": 0.5, "beta": 0.0, "gamma": 0.0}
    # no correction in DoubleADSS: tune_beta_gamma adds nothing
    hp = _built(DebiasedHyperModel(loss="double_adss", input_shape=(2,), tune_beta_gamma=True))
    assert hp.values == {"learning_rate": 1e-3, "alpha": 0.5}
    hp = _built(DebiasedHyperModel(loss="adpe", prior=0.3, input_shape=(2,)))
    assert hp.values == {"learning_rate": 1e-3}
    hp = _built(DebiasedHyperModel(loss="adpe", prior=0.3, priors=[0.2, 0.3, 0.4],
                                   input_shape=(2,), learning_rates=[0.01, 0.1]))
    assert hp.values == {"learning_rate": 0.01, "prior": 0.3}
    hp = _built(DebiasedHyperModel(loss="adfpu", prior=0.3, prior_range=(0.1, 0.5),
                                   input_shape=(2,)))
    assert hp.values == {"learning_rate": 1e-3, "prior": 0.3}

    def net(hp):
        units = hp.Int("units", 2, 8, step=2)
        return keras.Sequential([keras.Input((3,)), keras.layers.Dense(units, "relu"),
                                 keras.layers.Dense(1)])

    hm = DebiasedHyperModel(build_net=net, loss="adss", alternate=True)
    hp = keras_tuner.HyperParameters()
    assert isinstance(hm.build(hp), adp.DebiasedModel)
    assert hp.values == {"learning_rate": 1e-3, "units": 2}


def test_make_loss_reads_the_trial_values():
    hm = DebiasedHyperModel(loss="ad3se", input_shape=(2,), tune_beta_gamma=True)
    hp = keras_tuner.HyperParameters()
    hp.Fixed("alpha", 0.25)
    hp.Fixed("beta", 0.1)
    hp.Fixed("gamma", 1.0)
    cfg = hm.make_loss(hp).get_config()
    assert (cfg["alpha"], cfg["beta"], cfg["gamma"], cfg["from_logits"]) == (0.25, 0.1, 1.0, True)
    assert hm.make_loss(keras_tuner.HyperParameters()).get_config()["gamma"] is None  # 0.0


# -- objectives -------------------------------------------------------------------
@pytest.mark.parametrize("loss, name", [
    ("adpue", "val_exposure_nll"), ("adpe", "val_ref_risk"),
    ("adfpu", "val_exposure_nll"),
    ("ads", "val_l_risk"), ("adss", "val_l_risk"), ("double_adss", "val_l_risk"),
    ("ad3se", "val_l_risk"), (adp.NNPULoss, "val_exposure_nll"), (adp.PNULoss, "val_l_risk"),
])
def test_objective_per_loss(loss, name):
    obj = objective(loss)
    assert (obj.name, obj.direction) == (name, "min")
    prior = 0.3 if loss in ("adpe", "adfpu", adp.NNPULoss, adp.PNULoss) else None
    assert DebiasedHyperModel(loss=loss, prior=prior, input_shape=(2,)).objective == obj


def test_objective_by_criterion():
    kw = {"input_shape": (2,)}
    # tuning beta/gamma or the prior no longer changes the yardstick
    assert DebiasedHyperModel(loss="adpue", tune_beta_gamma=True, **kw).objective.name \
        == "val_exposure_nll"
    assert DebiasedHyperModel(loss="adpue", criterion="reference_risk", **kw).objective.name \
        == "val_ref_risk"
    assert DebiasedHyperModel(loss="adpe", prior=0.3, priors=[0.2, 0.3],
                              criterion="reference_risk", **kw).objective.name == "val_ref_risk"
    assert DebiasedHyperModel(loss="ad3se", criterion="reference_risk",
                              **kw).objective.name == "val_l_risk"
    with pytest.raises(ValueError, match="criterion"):
        objective("adpue", "val_risk")
    with pytest.raises(ValueError, match="PE data lacks"):
        DebiasedHyperModel(loss="adpe", prior=0.3, criterion="exposure_likelihood", **kw)


def _half(dim: int) -> keras.Model:
    """A reference f† = 0.5 everywhere."""
    return keras.Sequential([keras.Input((dim,)), keras.layers.Dense(
        1, activation="sigmoid", kernel_initializer="zeros")])


@pytest.mark.slow
def test_ref_risk_uses_the_reference_prior_and_fixed_dagger():
    s = synthetic.synthetic_pue(60, 60, seed=1)
    x_p = s.x_pu[s.w_pu == 1]
    n = len(x_p) + 60  # P rows and E rows: one batch
    ds = validation.pe_validation_data(x_p, s.x_e, s.e_e, reference=_half(2), batch_size=n)
    hm = DebiasedHyperModel(loss="adpe", prior=0.3, priors=[0.3, 0.45], input_shape=(2,),
                            criterion="reference_risk")
    hp = keras_tuner.HyperParameters()
    hp.Fixed("prior", 0.45)
    model = hm.build(hp)
    model.set_weights([np.array([[1.0], [-2.0]]), np.array([0.3])])
    logs = model.evaluate(ds, verbose=0, return_dict=True)
    x, y = next(iter(ds))
    assert y.shape == (n, 4)
    np.testing.assert_allclose(y.numpy()[:, 3], 0.5, atol=1e-7)
    z = model(x)
    ref = adp.ADPELoss(prior=0.3, from_logits=True)(y, z)
    tuned = adp.ADPELoss(prior=0.45, from_logits=True)(y, z)
    assert abs(float(ref) - float(tuned)) > 1e-3
    np.testing.assert_allclose(logs["ref_risk"], float(ref), rtol=1e-5)
    np.testing.assert_allclose(logs["risk"], float(tuned), rtol=1e-5)


@pytest.mark.slow
def test_exposure_nll_objective_equals_validation_score():
    s = synthetic.synthetic_pue(80, 70, seed=2)
    theta = exposure.fit_exposure_model(s.x_e, s.e_e)
    ds = validation.pue_validation_data(s.x_pu, s.w_pu, s.x_e, s.e_e, exposure_model=theta,
                                        reference=_half(2), batch_size=150)
    hm = DebiasedHyperModel(loss="adpue", input_shape=(2,), tune_beta_gamma=True)
    model = hm.build(keras_tuner.HyperParameters())
    model.set_weights([np.array([[2.0], [-1.0]]), np.array([0.5])])
    logs = model.evaluate(ds, verbose=0, return_dict=True)
    expected = adp.validation_score(model, s.x_pu, s.w_pu, s.x_e, s.e_e, exposure_model=theta)
    np.testing.assert_allclose(logs["exposure_nll"], expected, rtol=1e-5)


def test_fit_refuses_validation_data_without_the_layout(pue):
    train, _ = pue
    s = synthetic.synthetic_pue(50, 50, seed=3)
    plain = adp.data.pue_dataset(s.x_pu, s.w_pu, s.x_e, s.e_e, batch_size=50, shuffle=False)
    hm = DebiasedHyperModel(input_shape=(2,))
    hp = keras_tuner.HyperParameters()
    with pytest.raises(keras_tuner.errors.FatalValueError, match="pue_validation_data"):
        hm.fit(hp, hm.build(hp), train, validation_data=plain, epochs=1, verbose=0)


@pytest.mark.slow
def test_weight_decay_and_refresh_period_are_tuned(pue):
    hm = DebiasedHyperModel(input_shape=(2,), alternate=True, refresh_every=2,
                            refresh_periods=np.array([1, 2, 3]), weight_decays=[0.0, 0.01])
    hp = _built(hm)
    assert hp.values == {"learning_rate": 1e-3, "weight_decay": 0.0, "refresh_every": 2}
    assert _space(hp) == {"learning_rate": LRS, "weight_decay": [0.0, 0.01],
                          "refresh_every": [1, 2, 3]}
    hp = keras_tuner.HyperParameters()
    hp.Fixed("weight_decay", 0.01)
    hp.Fixed("refresh_every", 3)
    model = hm.build(hp)
    assert float(model.optimizer.weight_decay) == pytest.approx(0.01)
    train, val = pue
    hm.fit(hp, model, train, validation_data=val, epochs=3, verbose=0)
    assert model.refreshes == 1  # every 3 epochs: one refresh in 3 epochs
    assert _built(DebiasedHyperModel(input_shape=(2,))).values == {"learning_rate": 1e-3}


def test_learning_rates_as_an_array():
    hm = DebiasedHyperModel(input_shape=(2,), learning_rates=np.array([1e-2, 1e-3]),
                            loss="double_adss", alphas=np.array([0.0, 0.5]))
    hp = _built(hm)
    assert hp.values == {"learning_rate": 1e-3, "alpha": 0.5}
    assert _space(hp) == {"learning_rate": [1e-2, 1e-3], "alpha": [0.0, 0.5]}
    assert all(type(v) is float for v in _space(hp)["learning_rate"])


# -- searches end to end ----------------------------------------------------------
@pytest.fixture(scope="module")
def pue():
    s = synthetic.synthetic_pue(600, 600, seed=0)
    train = adp.data.pue_dataset(s.x_pu[:400], s.w_pu[:400], s.x_e[:400], s.e_e[:400],
                                 batch_size=200, seed=0)
    val = validation.pue_validation_data(s.x_pu[400:], s.w_pu[400:], s.x_e[400:],
                                         s.e_e[400:], batch_size=200)
    return train, val


@pytest.fixture(scope="module")
def sse():
    d = synthetic.synthetic_sse(800, seed=0)
    train = adp.data.sse_dataset(d.x[:600], d.w[:600], d.e[:600], batch_size=200, seed=0)
    val = adp.data.sse_dataset(d.x[600:], d.w[600:], d.e[600:], batch_size=200, shuffle=False)
    return train, val


def _check_done(tuner, trials, names):
    done = [t for t in tuner.oracle.trials.values() if t.status == "COMPLETED"]
    assert len(done) == trials
    best_hp = tuner.get_best_hyperparameters(1)[0]
    assert set(best_hp.values) == set(names)
    best = tuner.oracle.get_best_trials(1)[0]
    assert math.isfinite(best.score)
    assert best.score == min(t.score for t in done)
    return best_hp, best


@pytest.mark.slow
def test_random_search(pue, tmp_path):
    keras.utils.set_random_seed(0)
    train, val = pue
    hm = DebiasedHyperModel(loss="adpue", input_shape=(2,))
    tuner = keras_tuner.RandomSearch(hm, objective=hm.objective, max_trials=3, seed=0,
                                     directory=tmp_path, overwrite=True)
    tuner.search(train, validation_data=val, epochs=2, verbose=0)
    _, best = _check_done(tuner, 3, ["learning_rate"])
    assert best.metrics.exists("val_exposure_nll")


@pytest.mark.slow
def test_bayesian_search_double_adss_alternate(sse, tmp_path):
    keras.utils.set_random_seed(0)
    train, val = sse
    hm = DebiasedHyperModel(loss="double_adss", input_shape=(2,), alternate=True)
    tuner = keras_tuner.BayesianOptimization(hm, objective=hm.objective, max_trials=2,
                                             num_initial_points=1, seed=0,
                                             directory=tmp_path, overwrite=True)
    tuner.search(train, validation_data=val, epochs=2, verbose=0)
    _, best = _check_done(tuner, 2, ["learning_rate", "alpha"])
    assert best.metrics.exists("val_l_risk")
    model = tuner.get_best_models(1)[0]
    assert isinstance(model, adp.DebiasedModel)
    assert model.refreshes >= 1  # RefreshDagger was added by fit


@pytest.mark.slow
def test_missing_validation_data(pue, tmp_path):
    train, _ = pue
    hm = DebiasedHyperModel(input_shape=(2,))
    hp = keras_tuner.HyperParameters()
    with pytest.raises(ValueError, match="needs data that was not given"):
        hm.fit(hp, hm.build(hp), train, epochs=1, verbose=0)
    tuner = keras_tuner.RandomSearch(hm, objective=hm.objective, max_trials=1,
                                     directory=tmp_path, overwrite=True)
    with pytest.raises(ValueError, match="validation_data"):  # not retried as a failed trial
        tuner.search(train, epochs=1, verbose=0)


# -- bad arguments ------------------------------------------------------------------
@pytest.mark.parametrize("kwargs, error, match", [
    ({"loss": "nnpue"}, ValueError, "Unknown loss"),
    ({"loss": "adpe"}, ValueError, "needs the class prior"),
    ({"loss": "adfpu"}, ValueError, "needs the class prior"),
    ({"loss": "adpue", "prior": 0.3}, ValueError, "takes no class prior"),
    ({"loss": "adpe", "prior": 1.5}, ValueError, "prior"),
    ({"loss": "adpe", "prior": 0.3, "priors": [0.2], "prior_range": (0.1, 0.4)},
     ValueError, "not both"),
    ({"loss": "adpe", "prior": 0.5, "prior_range": (0.1, 0.4)}, ValueError, "must lie"),
    ({"loss": adp.ADPUELoss(from_logits=True)}, TypeError, "not an instance"),
    ({"loss": "double_adss", "alphas": [0.5, 1.5]}, ValueError, r"in \[0, 1\]"),
    ({"learning_rates": []}, ValueError, "non-empty"),
    ({"learning_rates": [0.0]}, ValueError, "positive"),
    ({"loss": "ads", "alternate": True}, ValueError, "uses f"),
    ({"loss_options": {"from_logits": False}}, ValueError, "from_logits"),
    ({"loss_options": {"alpha": 0.5}}, ValueError, "alpha"),
    ({"loss_options": {"eta": 0.5}}, ValueError, "not options"),
    ({"loss_options": {"beta": 0.1}, "tune_beta_gamma": True}, ValueError, "conflicts"),
    ({"refresh_every": 0}, ValueError, "refresh_every"),
    ({"alternate": True, "initial_dagger": 1.5}, ValueError, "initial_dagger"),
    ({"loss": "adpe", "prior": 0.3, "prior_range": (0.4, 0.1)}, ValueError, "low < high"),
    ({"loss": "adpe", "prior": 0.3, "prior_range": (0.1,)}, ValueError, "low < high"),
    ({"loss": "adpe", "prior": 0.3, "priors": [0.3, 0.3]}, ValueError, "repeated"),
    ({"input_shape": None}, ValueError, "input_shape"),
    ({"input_shape": (0,)}, TypeError, "positive ints"),
    ({"build_net": "dense"}, TypeError, "callable"),
    ({"criterion": "val_risk"}, ValueError, "criterion"),
    ({"refresh_periods": [1, 2]}, ValueError, "alternate=True"),
    ({"alternate": True, "refresh_periods": [0, 2]}, ValueError, "ints >= 1"),
    ({"alternate": True, "refresh_periods": [1.5]}, ValueError, "ints >= 1"),
    ({"weight_decays": [-0.1]}, ValueError, ">= 0"),
    ({"learning_rates": np.array([[1e-3, 1e-2]])}, ValueError, "1-D"),
])
def test_bad_arguments(kwargs, error, match):
    kwargs = {"input_shape": (2,), **kwargs}
    with pytest.raises(error, match=match):
        DebiasedHyperModel(**kwargs)


def test_build_net_must_return_a_model():
    hm = DebiasedHyperModel(build_net=lambda hp: "not a model")
    with pytest.raises(TypeError, match="keras.Model"):
        hm.build(keras_tuner.HyperParameters())
