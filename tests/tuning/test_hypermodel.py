"""tuning: observable objectives, searches end to end (narrowed too), bad arguments."""

from __future__ import annotations

import math

import keras
import keras_tuner
import numpy as np
import pytest

import adpue_tf as adp
from adpue_tf import exposure, synthetic, validation
from adpue_tf.tuning import DebiasedHyperModel, objective


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
    assert DebiasedHyperModel(loss="adpue", criterion="reference_risk", **kw).objective.name \
        == "val_ref_risk"
    assert DebiasedHyperModel(loss="ad3se", criterion="reference_risk",
                              **kw).objective.name == "val_l_risk"
    with pytest.raises(ValueError, match="criterion"):
        objective("adpue", "val_risk")
    with pytest.raises(ValueError, match="PE data lacks"):
        DebiasedHyperModel(loss="adpe", prior=0.3, criterion="exposure_likelihood", **kw)
    # a score of validation_score without a metric: tuned by val_ref_risk silently before
    with pytest.raises(ValueError, match="'exposure_brier' is a score of adp.validation_score, "
                                         "not a tuner objective"):
        DebiasedHyperModel(loss="adpue", criterion="exposure_brier", **kw)


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
    hm = DebiasedHyperModel(loss="adpe", prior=0.3, input_shape=(2,),
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
    hm = DebiasedHyperModel(loss="adpue", input_shape=(2,))
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
def test_refresh_period_is_declared_in_fit(pue):
    train, val = pue
    hm = DebiasedHyperModel(input_shape=(2,), alternate=True)
    hp = keras_tuner.HyperParameters()
    model = hm.build(hp)
    assert "refresh_every" not in hp.values  # a training choice: declared by fit
    hm.fit(hp, model, train, validation_data=val, epochs=2, verbose=0)
    assert (hp.values["refresh_every"], model.refreshes) == (1, 2)
    every = next(p for p in hp.space if p.name == "refresh_every")
    assert (list(every.values), every.default) == ([1, 2, 4], 1)
    hp = keras_tuner.HyperParameters()
    hp.Fixed("refresh_every", 3)
    model = hm.build(hp)
    hm.fit(hp, model, train, validation_data=val, epochs=3, verbose=0)
    assert model.refreshes == 1  # every 3 epochs: one refresh in 3 epochs


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
def test_random_search_narrowed(pue, tmp_path):
    keras.utils.set_random_seed(0)
    train, val = pue
    hm = DebiasedHyperModel(loss="adpue", input_shape=(2,))
    hp = keras_tuner.HyperParameters()
    hp.Choice("learning_rate", [1e-2, 3e-2])
    tuner = keras_tuner.RandomSearch(hm, objective=hm.objective, max_trials=2, seed=0,
                                     hyperparameters=hp, tune_new_entries=False,
                                     directory=tmp_path, overwrite=True)
    tuner.search(train, validation_data=val, epochs=2, verbose=0)
    _, best = _check_done(tuner, 2, ["learning_rate", "weight_decay", "beta", "gamma"])
    assert best.metrics.exists("val_exposure_nll")
    assert [p.name for p in tuner.oracle.get_space().space] == ["learning_rate"]
    trials = [t.hyperparameters.values for t in tuner.oracle.trials.values()]
    assert {v["learning_rate"] for v in trials} <= {1e-2, 3e-2}
    assert all((v["weight_decay"], v["beta"], v["gamma"]) == (0.0,) * 3 for v in trials)


@pytest.mark.slow
def test_bayesian_search_double_adss_alternate(sse, tmp_path):
    keras.utils.set_random_seed(0)
    train, val = sse
    hm = DebiasedHyperModel(loss="double_adss", input_shape=(2,), alternate=True)
    hp = keras_tuner.HyperParameters()
    hp.Fixed("refresh_every", 1)  # the rest of the space is searched (tune_new_entries)
    tuner = keras_tuner.BayesianOptimization(hm, objective=hm.objective, max_trials=2,
                                             num_initial_points=1, seed=0, hyperparameters=hp,
                                             directory=tmp_path, overwrite=True)
    tuner.search(train, validation_data=val, epochs=2, verbose=0)
    _, best = _check_done(tuner, 2, ["refresh_every", "learning_rate", "weight_decay", "alpha"])
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
    ({"loss": "adpe", "prior": 1.5}, ValueError, r"`prior` must be in \(0, 1\)"),
    ({"loss": adp.ADPUELoss(from_logits=True)}, TypeError, "not an instance"),
    ({"loss": "ads", "alternate": True}, ValueError, "uses f"),
    ({"alternate": 1}, TypeError, "`alternate` must be a bool"),
    ({"loss_options": {"from_logits": False}}, ValueError, "from_logits"),
    ({"loss": "double_adss", "loss_options": {"alpha": 0.5}}, ValueError,
     r"hp.Fixed\('alpha', 0.5\)"),
    ({"loss_options": {"beta": 0.1}}, ValueError, r"hp.Fixed\('beta', 0.1\)"),
    ({"loss": "adpe", "prior": 0.3, "loss_options": {"prior": 0.3}}, ValueError, "prior="),
    ({"loss_options": {"eta": 0.5}}, ValueError, "not options"),
    ({"alternate": True, "initial_dagger": 1.5}, ValueError, "initial_dagger"),
    ({"input_shape": None}, ValueError, "input_shape"),
    ({"input_shape": (0,)}, TypeError, "positive ints"),
    ({"build_net": "dense"}, TypeError, "callable"),
    ({"criterion": "val_risk"}, ValueError, "criterion"),
])
def test_bad_arguments(kwargs, error, match):
    kwargs = {"input_shape": (2,), **kwargs}
    with pytest.raises(error, match=match):
        DebiasedHyperModel(**kwargs)


def test_build_net_must_return_a_model():
    hm = DebiasedHyperModel(build_net=lambda hp: "not a model")
    with pytest.raises(TypeError, match="keras.Model"):
        hm.build(keras_tuner.HyperParameters())


@pytest.mark.parametrize("override", [{"loss": "mse"}, {"metrics": ["mae"]},
                                      {"optimizer": "sgd"}])
def test_a_tuner_that_compiles_the_trials_again_is_refused(pue, tmp_path, override):
    """loss= trained every trial on MSE of the packed labels; metrics= left no score."""
    train, val = pue
    hm = DebiasedHyperModel(loss="adpue", input_shape=(2,))
    tuner = keras_tuner.RandomSearch(hm, objective=hm.objective, max_trials=1, seed=0,
                                     directory=tmp_path, overwrite=True, **override)
    with pytest.raises(keras_tuner.errors.FatalValueError,
                       match="The tuner compiled the trial's model again"):
        tuner.search(train, validation_data=val, epochs=1, verbose=0)
    # without an override the same trial runs
    keras_tuner.RandomSearch(hm, objective=hm.objective, max_trials=1, seed=0,
                             directory=tmp_path / "plain", overwrite=True).search(
        train, validation_data=val, epochs=1, verbose=0)
