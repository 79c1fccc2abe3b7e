"""Tests for adpue_tf.experiments.baselines: SAR-EM and the two-model ratio.

SAR-EM is checked against ``sarpu_reference.py`` (the reference
implementation's steps in our own NumPy/scikit-learn code) on identical data,
and its parts against small NumPy computations; the ratio against
scikit-learn's logistic regression. Accuracy is the mean absolute error (MAE)
to the true probabilities of :mod:`adpue_tf.synthetic` on fresh rows.
Measured on the development machine (SAR data below, 2000 rows): SAR-EM
without the refit 0.034, with the reference's refit 0.139, the naive Logit on
W 0.25; Ratio (linear, 5000 + 5000 rows) 0.12 (``q = p·θ`` is not
logistic-linear, so the linear ``q̂`` is misspecified) against 0.39 for ``q̂``.
"""

from __future__ import annotations

import numpy as np
import pytest
from sarpu_reference import sar_em_reference
from sklearn.linear_model import LogisticRegression

from adpue_tf import synthetic
from adpue_tf.experiments import baselines
from adpue_tf.experiments.baselines import SAREM, RatioEstimator, fit_ratio, sar_em_posterior

# SAR data: p(y=1|x) = σ(2x1 - x2), θ(e=1|x) = σ(-1.5x2 + 2x3); the propensity
# sees (x2, x3) only, which identifies the model (Bekker & Davis).
SAR = {"dim": 3, "y_weights": (2.0, -1.0, 0.0), "e_weights": (0.0, -1.5, 2.0)}
EVAL = synthetic.make_synthetic(20_000, seed=123)
EVAL_SAR = synthetic.make_synthetic(20_000, seed=123, **SAR)


def _mae(a, b):
    return float(np.mean(np.abs(np.asarray(a) - np.asarray(b))))


def _lr(x, y, C=np.inf):
    return LogisticRegression(C=C, tol=1e-10, max_iter=10_000).fit(x, y).predict_proba


@pytest.fixture(scope="module")
def pue():
    return synthetic.synthetic_pue(5000, 5000, seed=0)


@pytest.fixture(scope="module")
def ratio_linear(pue):
    return RatioEstimator().fit(pue.x_pu, pue.w_pu, pue.x_e, pue.e_e)


@pytest.fixture(scope="module")
def sar_small():
    return synthetic.synthetic_pue(500, 1, seed=3, **SAR)


@pytest.fixture(scope="module")
def sarem(sar_small):
    return SAREM(propensity_features=[1, 2], refit_classifier=False).fit(
        sar_small.x_pu, sar_small.w_pu)


# --------------------------------------------------------------- SAR-EM parts


def test_posterior_values():
    f, e, s = np.array([0.5, 0.8, 0.2, 0.9]), np.array([0.5, 0.25, 0.9, 0.1]), np.array([1, 0, 0, 0])
    # 1; 0.8·0.75/(1-0.2) = 0.75; 0.2·0.1/(1-0.18) = 0.02/0.82; 0.9·0.9/(1-0.09) = 0.81/0.91
    np.testing.assert_allclose(sar_em_posterior(f, e, s), [1.0, 0.75, 0.02 / 0.82, 0.81 / 0.91])


def test_expected_loglik_and_slopes():
    f, e, s = np.array([0.5, 0.8]), np.array([0.5, 0.25]), np.array([1.0, 0.0])
    # row 1: log(0.25); row 2: P = 0.75, 0.75·log(0.8·0.75) + 0.25·log(0.2)
    want = (np.log(0.25) + 0.75 * np.log(0.6) + 0.25 * np.log(0.2)) / 2
    assert baselines.sar_em._expected_loglik(f, e, s) == pytest.approx(want, rel=1e-12)
    hist = np.random.default_rng(0).normal(size=(4, 10))
    want = [np.polyfit(np.arange(10), h, 1)[0] for h in hist]
    np.testing.assert_allclose(baselines.sar_em._slopes(hist), want, rtol=1e-10)


def test_stopping_rule_and_round_limit(sar_small):
    x, w = sar_small.x_pu, sar_small.w_pu
    # Loose thresholds: the rule stops at its first check, after window + 2 rounds.
    m = SAREM(propensity_features=[1, 2], window=4, slope_eps=1.0, ll_eps=1.0).fit(x, w)
    assert (m.n_iter_, m.converged_, len(m.log_likelihoods_)) == (6, True, 7)
    m = SAREM(propensity_features=[1, 2], max_iter=3).fit(x, w)
    assert (m.n_iter_, m.converged_, len(m.log_likelihoods_)) == (3, False, 4)
    m = SAREM(propensity_features=[1, 2], max_iter=0, refit_classifier=False).fit(x, w)
    assert (m.n_iter_, len(m.log_likelihoods_)) == (0, 1)


def test_start_is_the_class_balanced_fit(sar_small):
    x, s = sar_small.x_pu, sar_small.w_pu
    m = SAREM(propensity_features=[1, 2], max_iter=0, refit_classifier=False).fit(x, s)
    c = s.mean()
    want = LogisticRegression(solver="liblinear").fit(
        x, s, sample_weight=s * (1 - c) + (1 - s) * c).predict_proba(x)[:, 1]
    np.testing.assert_allclose(m.predict_proba(x), want, rtol=1e-6)


def test_refit_uses_the_non_negative_propensity_weights(sar_small):
    x, s = sar_small.x_pu, sar_small.w_pu
    m = SAREM(propensity_features=[1, 2], max_iter=5).fit(x, s)
    e = m.predict_propensity(x)
    want = LogisticRegression(solver="liblinear").fit(
        np.r_[x, x], np.r_[np.ones(len(s)), np.zeros(len(s))],
        sample_weight=np.r_[s / e, 1 - s]).predict_proba(x)[:, 1]
    np.testing.assert_allclose(m.predict_proba(x), want, rtol=1e-5)


def test_log_likelihood_rises_and_sarem_beats_naive_logit(sarem, sar_small):
    naive = _mae(_lr(sar_small.x_pu, sar_small.w_pu)(EVAL_SAR.x)[:, 1], EVAL_SAR.p_y)
    p, e = sarem.predict_proba(EVAL_SAR.x), sarem.predict_propensity(EVAL_SAR.x)
    print(f"\nSAR-EM: MAE p_y {_mae(p, EVAL_SAR.p_y):.4f} (naive Logit {naive:.4f}), "
          f"propensity {_mae(e, EVAL_SAR.p_e):.4f}, {sarem.n_iter_} rounds")
    assert sarem.converged_ and 12 <= sarem.n_iter_ < 500
    assert _mae(p, EVAL_SAR.p_y) < 0.1 and _mae(p, EVAL_SAR.p_y) < naive - 0.1
    assert _mae(e, EVAL_SAR.p_e) < 0.1
    assert sarem.log_likelihoods_[-1] > sarem.log_likelihoods_[0]


# ------------------------------------------------------ parity with sarpu


@pytest.mark.parametrize("refit", [True, False])
def test_sarem_matches_reference_small(sar_small, refit):
    x, s = sar_small.x_pu, sar_small.w_pu
    clf, prop, info = sar_em_reference(x, s, [1, 2], refit_classifier=refit)
    m = SAREM(propensity_features=[1, 2], refit_classifier=refit).fit(x, s)
    assert m.n_iter_ == info["nb_iterations"] + 1
    np.testing.assert_allclose(m.log_likelihoods_, info["loglikelihoods"], rtol=1e-6)
    np.testing.assert_allclose(m.predict_proba(x), clf.predict_proba(x)[:, 1], atol=1e-6)
    np.testing.assert_allclose(m.predict_propensity(x), prop.predict_proba(x[:, [1, 2]])[:, 1],
                               atol=1e-6)


@pytest.mark.slow
@pytest.mark.parametrize("refit", [True, False])
def test_sarem_matches_reference(refit):
    """The comparison cited in SAREM's docstring (2000 rows, 20,000 fresh rows)."""
    d = synthetic.synthetic_pue(2000, 1, seed=0, **SAR)
    clf, prop, info = sar_em_reference(d.x_pu, d.w_pu, [1, 2], refit_classifier=refit)
    m = SAREM(propensity_features=[1, 2], refit_classifier=refit).fit(d.x_pu, d.w_pu)
    ref = clf.predict_proba(EVAL_SAR.x)[:, 1]
    diff = np.abs(m.predict_proba(EVAL_SAR.x) - ref)
    print(f"\nrefit={refit}: rounds {m.n_iter_} (reference {info['nb_iterations'] + 1}), "
          f"max |Δf| {diff.max():.2e}, MAE to p_y {_mae(ref, EVAL_SAR.p_y):.4f}")
    assert m.n_iter_ == info["nb_iterations"] + 1 == 103
    assert diff.max() < 1e-6
    assert _mae(ref, EVAL_SAR.p_y) == pytest.approx(0.139 if refit else 0.034, abs=0.001)


# --------------------------------------------------------------------- Ratio


def test_ratio_matches_logistic_regression(pue):
    x_pu, w, x_e, e = pue.x_pu[:1000], pue.w_pu[:1000], pue.x_e[:1000], pue.e_e[:1000]
    for l2 in (0.0, 0.01):  # sklearn: C·Σℓ + ½‖w‖² (intercept free) = our mean + l2‖w‖², C = 1/(2·l2·n)
        C = np.inf if l2 == 0 else 1 / (2 * l2 * 1000)
        r = RatioEstimator(l2=l2, steps=500).fit(x_pu, w, x_e, e)
        q, theta = _lr(x_pu, w, C)(EVAL.x)[:, 1], _lr(x_e, e, C)(EVAL.x)[:, 1]
        np.testing.assert_allclose(r.predict_q(EVAL.x), q, atol=2e-5)
        np.testing.assert_allclose(r.predict_theta(EVAL.x), theta, atol=2e-5)
        np.testing.assert_allclose(r.predict_proba(EVAL.x), np.clip(q / theta, 0, 1), atol=1e-4)


@pytest.mark.slow
def test_ratio_batched_equals_one_trial_at_a_time():
    ds = [synthetic.synthetic_pue(300, 200, seed=t) for t in range(2)]
    fit = fit_ratio(np.stack([d.x_pu for d in ds]), np.stack([d.w_pu for d in ds]),
                    np.stack([d.x_e for d in ds]), np.stack([d.e_e for d in ds]), steps=50)
    together = fit.predict_proba(np.stack([EVAL.x[:500]] * 2))
    for t, d in enumerate(ds):
        alone = RatioEstimator(steps=50).fit(d.x_pu, d.w_pu, d.x_e, d.e_e)
        np.testing.assert_allclose(together[t], alone.predict_proba(EVAL.x[:500]), atol=1e-5)
    assert not np.allclose(together[0], together[1])


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


def test_theta_floor_keeps_ratio_finite():
    s = synthetic.synthetic_pue(200, 200, seed=2)
    r = RatioEstimator(theta_floor=1e-3).fit(s.x_pu, np.ones(200), s.x_e, np.zeros(200))
    p = r.predict_proba(s.x_pu)
    assert np.all(r.predict_theta(s.x_pu) < 0.5) and np.all(np.isfinite(p))
    assert np.all((p >= 0) & (p <= 1)) and p.max() == 1.0


def test_image_shaped_features_are_flattened():
    s = synthetic.synthetic_pue(300, 300, dim=4, seed=1)
    x_pu, x_e = s.x_pu.reshape(-1, 2, 2), s.x_e.reshape(-1, 2, 2)
    m = SAREM(propensity_features=[2, 3], max_iter=2).fit(x_pu, s.w_pu)
    np.testing.assert_array_equal(m.predict_proba(x_pu), m.predict_proba(s.x_pu))
    r = RatioEstimator(steps=20).fit(x_pu, s.w_pu, x_e, s.e_e.reshape(-1, 1))
    np.testing.assert_allclose(r.predict_proba(x_e), r.predict_proba(s.x_e))


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
        RatioEstimator(steps=1).fit(*args)


@pytest.mark.parametrize("args, exc, name", [
    ((X[None], Y[None] * 2, X[None], Y[None]), ValueError, "`w`"),
    ((X, Y, X, Y), ValueError, "`x_pu`"),
    ((X[None], Y[None], X[None, :, :1], Y[None]), ValueError, "`x_e`"),
    ((X[None], Y[None], np.stack([X, X]), np.stack([Y, Y])), ValueError, "`x_e`"),
    ((X[None], Y[None, :5], X[None], Y[None]), ValueError, "`x_pu`"),
])
def test_fit_ratio_bad_input(args, exc, name):
    with pytest.raises(exc, match=name):
        fit_ratio(*args, steps=1)


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
        SAREM(max_iter=1).fit(*args)


@pytest.mark.parametrize("cls, kwargs, exc, name", [
    (RatioEstimator, {"steps": 0}, ValueError, "`steps`"),
    (RatioEstimator, {"steps": 2.5}, TypeError, "`steps`"),
    (RatioEstimator, {"learning_rate": -1.0}, ValueError, "`learning_rate`"),
    (RatioEstimator, {"learning_rate": 0.0}, ValueError, "`learning_rate`"),
    (RatioEstimator, {"learning_rate": "fast"}, TypeError, "`learning_rate`"),
    (RatioEstimator, {"l2": -0.1}, ValueError, "`l2`"),
    (RatioEstimator, {"theta_floor": 0.0}, ValueError, "`theta_floor`"),
    (RatioEstimator, {"theta_floor": 1.0}, ValueError, "`theta_floor`"),
    (SAREM, {"max_iter": -1}, ValueError, "`max_iter`"),
    (SAREM, {"C": 0.0}, ValueError, "`C`"),
    (SAREM, {"C": float("inf")}, ValueError, "`C`"),
    (SAREM, {"window": 1}, ValueError, "`window`"),
    (SAREM, {"slope_eps": float("nan")}, ValueError, "`slope_eps`"),
    (SAREM, {"ll_eps": -1.0}, ValueError, "`ll_eps`"),
    (SAREM, {"refit_classifier": 1}, TypeError, "`refit_classifier`"),
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
        SAREM(propensity_features=[2]).fit(X, Y)


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


def test_fit_logistic_names_its_arguments():
    with pytest.raises(ValueError, match="`x_e` must be \\(trials, rows, features\\)"):
        baselines.fit_logistic(X, Y, names=("x_e", "e"))
    with pytest.raises(ValueError, match="`y` must hold only 0 and 1"):
        baselines.fit_logistic(X[None], Y[None] * 2)
    fit = baselines.fit_logistic(X[None], Y[None], steps=300)
    want = _lr(X, Y)(X)[:, 1]
    np.testing.assert_allclose(fit.logits(X[None])[0], np.log(want / (1 - want)), atol=1e-3)
