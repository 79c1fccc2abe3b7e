"""Tests for adpue_tf.experiments.baselines: SAR-EM and the two-model ratio.

Accuracy is measured as the mean absolute error (MAE) to the true
probabilities of :mod:`adpue_tf.synthetic` on fresh rows. Measured on the
development machine: Ratio linear 0.12 to p(y=1|x) (q(w=1|x) = p·θ is not
logistic-linear, so the linear q̂ is misspecified), Ratio with a tiny ReLU MLP
0.066 (0.035-0.079 over seeds 0-3 and widths 16/32), SAR-EM (linear,
propensity on x2, x3) 0.04-0.06 against 0.25 for the naive Logit fit on W.
"""

from __future__ import annotations

import keras
import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression

from adpue_tf import synthetic
from adpue_tf.experiments.baselines import SAREM, RatioEstimator, linear_logit

# SAR data: p(y=1|x) = σ(2x1 - x2), θ(e=1|x) = σ(-1.5x2 + 2x3); the propensity
# sees (x2, x3) only, which identifies the model (Bekker & Davis).
SAR = {"dim": 3, "y_weights": (2.0, -1.0, 0.0), "e_weights": (0.0, -1.5, 2.0)}
EVAL = synthetic.make_synthetic(20_000, seed=123)
EVAL_SAR = synthetic.make_synthetic(20_000, seed=123, **SAR)


def _mae(a, b):
    return float(np.mean(np.abs(np.asarray(a) - np.asarray(b))))


def _mlp(dim):
    return keras.Sequential([keras.Input((dim,)), keras.layers.Dense(16, activation="relu"),
                             keras.layers.Dense(1)])


@pytest.fixture(scope="module")
def pue():
    return synthetic.synthetic_pue(5000, 5000, seed=0)


@pytest.fixture(scope="module")
def ratio_linear(pue):
    return RatioEstimator().fit(pue.x_pu, pue.w_pu, pue.x_e, pue.e_e)


@pytest.fixture(scope="module")
def ratio_mlp(pue):
    return RatioEstimator(_mlp).fit(pue.x_pu, pue.w_pu, pue.x_e, pue.e_e)


@pytest.fixture(scope="module")
def sar_data():
    return synthetic.synthetic_pue(5000, 1, seed=0, **SAR)


@pytest.fixture(scope="module")
def sarem(sar_data):
    return SAREM(propensity_features=[1, 2]).fit(sar_data.x_pu, sar_data.w_pu)


# ------------------------------------------------------------------- accuracy


def test_ratio_mlp_recovers_p_y(ratio_mlp):
    p, q = ratio_mlp.predict_proba(EVAL.x), ratio_mlp.predict_q(EVAL.x)
    print(f"\nRatio MLP: MAE p_y {_mae(p, EVAL.p_y):.4f}, q to p_w {_mae(q, EVAL.p_w):.4f}")
    assert _mae(p, EVAL.p_y) < 0.1  # dividing by θ̂ amplifies q̂'s error where θ is small
    assert _mae(q, EVAL.p_w) < 0.04
    assert _mae(ratio_mlp.predict_theta(EVAL.x), EVAL.p_e) < 0.04


def test_ratio_linear_beats_naive(ratio_linear):
    p, q = ratio_linear.predict_proba(EVAL.x), ratio_linear.predict_q(EVAL.x)
    theta = ratio_linear.predict_theta(EVAL.x)
    print(f"\nRatio linear: MAE p_y {_mae(p, EVAL.p_y):.4f}, q to p_w {_mae(q, EVAL.p_w):.4f}, "
          f"theta {_mae(theta, EVAL.p_e):.4f}, naive q to p_y {_mae(q, EVAL.p_y):.4f}")
    assert _mae(theta, EVAL.p_e) < 0.03  # θ is logistic-linear: well specified
    assert _mae(q, EVAL.p_w) < 0.1  # q = p·θ is not: best linear fit
    assert _mae(p, EVAL.p_y) < 0.17
    assert _mae(p, EVAL.p_y) < _mae(q, EVAL.p_y) - 0.15


def test_ratio_output_range_and_predict(ratio_linear):
    p = ratio_linear.predict_proba(EVAL.x[:500])
    assert p.shape == (500,) and p.dtype == np.float64
    assert np.all((p >= 0) & (p <= 1))
    np.testing.assert_array_equal(ratio_linear.predict(EVAL.x[:500]), (p > 0.5).astype(int))


def test_sarem_beats_naive_logit(sarem, sar_data):
    naive = LogisticRegression().fit(sar_data.x_pu, sar_data.w_pu)
    mae_naive = _mae(naive.predict_proba(EVAL_SAR.x)[:, 1], EVAL_SAR.p_y)
    p = sarem.predict_proba(EVAL_SAR.x)
    e = sarem.predict_propensity(EVAL_SAR.x)
    print(f"\nSAR-EM: MAE p_y {_mae(p, EVAL_SAR.p_y):.4f} (naive Logit {mae_naive:.4f}), "
          f"propensity to theta {_mae(e, EVAL_SAR.p_e):.4f}, {sarem.n_iter_} rounds")
    assert _mae(p, EVAL_SAR.p_y) < 0.15
    assert _mae(p, EVAL_SAR.p_y) < mae_naive - 0.1
    assert _mae(e, EVAL_SAR.p_e) < 0.15
    assert np.all((p >= 0) & (p <= 1)) and np.all((e >= 0) & (e <= 1))
    assert 1 <= sarem.n_iter_ <= 30 and len(sarem.log_likelihoods_) == sarem.n_iter_ + 1
    assert sarem.log_likelihoods_[-1] > sarem.log_likelihoods_[0]


# ------------------------------------------------- reproducibility and models


def test_reproducible_with_seed():
    s = synthetic.synthetic_pue(400, 400, seed=5)
    fit = lambda seed: RatioEstimator(epochs=3, batch_size=64, seed=seed).fit(
        s.x_pu, s.w_pu, s.x_e, s.e_e).predict_proba(s.x_pu)
    np.testing.assert_array_equal(fit(7), fit(7))
    assert not np.array_equal(fit(7), fit(8))
    sar = lambda: SAREM(epochs=3, max_iter=2, batch_size=64, seed=2).fit(
        s.x_pu, s.w_pu).predict_proba(s.x_pu)
    np.testing.assert_array_equal(sar(), sar())


def test_custom_model_and_image_shaped_features(capsys):
    s = synthetic.synthetic_pue(300, 300, dim=4, seed=1)
    x_pu, x_e = s.x_pu.reshape(-1, 2, 2), s.x_e.reshape(-1, 2, 2)  # flattened to 4 features
    m = SAREM(_mlp, epochs=2, max_iter=2).fit(x_pu, s.w_pu)
    p = m.predict_proba(x_pu)
    assert p.shape == (300,) and np.all((p >= 0) & (p <= 1))
    assert isinstance(m.classifier_.layers[0], keras.layers.Dense) and len(m.classifier_.layers) == 2
    r = RatioEstimator(_mlp, epochs=2, verbose=1).fit(x_pu, s.w_pu, x_e, s.e_e.reshape(-1, 1))
    assert r.predict_proba(x_e).shape == (300,)
    assert capsys.readouterr().out.count("epoch 2/2 - loss: ") == 2


def test_theta_floor_keeps_ratio_finite():
    s = synthetic.synthetic_pue(200, 200, seed=2)
    r = RatioEstimator(epochs=20, theta_floor=1e-3).fit(s.x_pu, np.ones(200), s.x_e, np.zeros(200))
    p = r.predict_proba(s.x_pu)
    assert np.all(r.predict_theta(s.x_pu) < 0.5) and np.all(np.isfinite(p))
    assert np.all((p >= 0) & (p <= 1)) and p.max() == 1.0


def test_linear_logit_default():
    assert linear_logit(5).count_params() == 6


# ----------------------------------------------------------------- bad input

X, Y = np.random.default_rng(0).normal(size=(20, 2)), np.tile([0.0, 1.0], 10)


def _nan(a):
    a = a.copy()
    a[3, 1] = np.nan
    return a


@pytest.mark.parametrize("args, exc, name", [
    ((X, Y * 2, X, Y), ValueError, "`w`"),
    ((X, Y, X, Y - 1), ValueError, "`e`"),
    ((_nan(X), Y, X, Y), ValueError, "`x_pu`"),
    ((X, Y, X * np.inf, Y), ValueError, "`x_e`"),
    ((X, Y[:-1], X, Y), ValueError, "`w`"),
    ((X, Y, X[:-2], Y), ValueError, "`e`"),
    ((X, Y, X[:, :1], Y), ValueError, "`x_e`"),
    ((X[:0], Y[:0], X, Y), ValueError, "`x_pu`"),
    ((X, Y, X[:0], Y[:0]), ValueError, "`x_e`"),
    ((X[:, 0], Y, X, Y), ValueError, "`x_pu`"),
    ((X, Y.astype(str), X, Y), TypeError, "`w`"),
    ((X.astype(object), Y, X, Y), TypeError, "`x_pu`"),
    ((X * 1e300, Y, X, Y), ValueError, "`x_pu`"),
])
def test_ratio_bad_input(args, exc, name):
    with pytest.raises(exc, match=name):
        RatioEstimator(epochs=1).fit(*args)


@pytest.mark.parametrize("args, exc, name", [
    ((X, Y + 0.5), ValueError, "`w`"),
    ((_nan(X), Y), ValueError, "`x`"),
    ((X, Y[:5]), ValueError, "`w`"),
    ((X[:0], Y[:0]), ValueError, "`x`"),
    ((X, np.zeros(20)), ValueError, "`w`"),
    ((X, np.ones(20)), ValueError, "`w`"),
    ((X, [None] * 20), TypeError, "`w`"),
])
def test_sarem_bad_input(args, exc, name):
    with pytest.raises(exc, match=name):
        SAREM(epochs=1, max_iter=1).fit(*args)


@pytest.mark.parametrize("cls, kwargs, exc, name", [
    (RatioEstimator, {"epochs": 0}, ValueError, "`epochs`"),
    (RatioEstimator, {"epochs": 2.5}, TypeError, "`epochs`"),
    (RatioEstimator, {"batch_size": 0}, ValueError, "`batch_size`"),
    (RatioEstimator, {"learning_rate": -1.0}, ValueError, "`learning_rate`"),
    (RatioEstimator, {"learning_rate": 0.0}, ValueError, "`learning_rate`"),
    (RatioEstimator, {"learning_rate": "fast"}, TypeError, "`learning_rate`"),
    (RatioEstimator, {"seed": -1}, ValueError, "`seed`"),
    (RatioEstimator, {"verbose": True}, TypeError, "`verbose`"),
    (RatioEstimator, {"theta_floor": 0.0}, ValueError, "`theta_floor`"),
    (RatioEstimator, {"theta_floor": 1.0}, ValueError, "`theta_floor`"),
    (RatioEstimator, {"build_model": 3}, TypeError, "`build_model`"),
    (SAREM, {"max_iter": -1}, ValueError, "`max_iter`"),
    (SAREM, {"tol": float("nan")}, ValueError, "`tol`"),
    (SAREM, {"m_step_epochs": 0}, ValueError, "`m_step_epochs`"),
    (SAREM, {"propensity_features": "01"}, TypeError, "`propensity_features`"),
    (SAREM, {"propensity_features": []}, ValueError, "`propensity_features`"),
    (SAREM, {"propensity_features": [1, 1]}, ValueError, "`propensity_features`"),
    (SAREM, {"propensity_features": [0.5]}, TypeError, "`propensity_features`"),
])
def test_bad_options(cls, kwargs, exc, name):
    with pytest.raises(exc, match=name):
        cls(**kwargs)


def test_propensity_feature_out_of_range():
    with pytest.raises(ValueError, match="`propensity_features`"):
        SAREM(propensity_features=[2], epochs=1).fit(X, Y)


@pytest.mark.parametrize("factory, exc", [
    (lambda d: "not a model", TypeError),
    (lambda d: keras.Sequential([keras.Input((d,)), keras.layers.Dense(2)]), ValueError),
])
def test_bad_build_model(factory, exc):
    with pytest.raises(exc, match="`build_model"):
        RatioEstimator(factory, epochs=1).fit(X, Y, X, Y)


def test_predict_checks(ratio_linear, sarem):
    with pytest.raises(RuntimeError, match="not fitted"):
        RatioEstimator().predict_proba(X)
    with pytest.raises(RuntimeError, match="not fitted"):
        SAREM().predict(X)
    with pytest.raises(ValueError, match="`x`"):
        ratio_linear.predict_proba(X[:, :1])
    with pytest.raises(ValueError, match="`x`"):
        ratio_linear.predict(_nan(X))
    with pytest.raises(ValueError, match="`x`"):
        sarem.predict_propensity(X)  # fitted on 3 features
