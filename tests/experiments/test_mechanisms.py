"""Exposure mechanisms beyond the paper's formula: calibration, shape, threading through the splits."""

from __future__ import annotations

import numpy as np
import pytest

from adpue_tf.experiments import mechanisms, simulate, table1


def _data(n=2000, d=14, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, (n, d))
    y = (x[:, 0] + 0.3 * rng.standard_normal(n) > 0).astype(int)
    return x, y


@pytest.mark.parametrize("mechanism", simulate.MECHANISMS)
@pytest.mark.parametrize("target", [0.1, 0.5, 0.7, 0.95])
def test_calibrated_mean_matches_the_target(mechanism, target):
    x, _ = _data()
    theta, _ = simulate.exposure_theta(x, target, mechanism)
    assert theta.shape == (len(x),) and ((theta >= 0) & (theta <= 1)).all()
    assert abs(theta.mean() - target) <= 1e-6


def test_paper_mechanism_is_the_paper_formula():
    x, _ = _data()
    theta, C = simulate.exposure_theta(x, 0.4, "paper")
    np.testing.assert_allclose(theta, simulate.exposure_probability(x, C))
    assert C == simulate.calibrate_exposure(x, 0.4)


def test_logistic_and_cloglog_are_their_links_of_one_fixed_score():
    x, _ = _data()
    s = mechanisms.exposure_score(x)
    assert abs(s.mean()) < 1e-9 and abs(s.std() - 2.0) < 1e-9
    np.testing.assert_array_equal(s, mechanisms.exposure_score(x))  # fixed projection
    np.testing.assert_array_equal(s, mechanisms.exposure_score(x[:, :13]))  # x1..x13 only
    th_l, b_l = simulate.exposure_theta(x, 0.5, "logistic")
    np.testing.assert_allclose(th_l, 1 / (1 + np.exp(-(s + b_l))), rtol=1e-12)
    th_c, b_c = simulate.exposure_theta(x, 0.5, "cloglog")
    np.testing.assert_allclose(th_c, 1 - np.exp(-np.exp(s + b_c)), rtol=1e-12)


def test_cloglog_is_not_logistic():
    """logit(θ) is not affine in the score: its slope against s changes along s."""
    x, _ = _data()
    s = mechanisms.exposure_score(x)
    theta, _ = simulate.exposure_theta(x, 0.5, "cloglog")
    ok = (theta > 1e-6) & (theta < 1 - 1e-6)
    logit = np.log(theta[ok]) - np.log1p(-theta[ok])
    fit = np.polyfit(s[ok], logit, 1)
    resid = logit - np.polyval(fit, s[ok])
    assert np.sqrt(np.mean(resid ** 2)) > 0.1 * np.std(logit)
    lo, hi = s[ok] < np.quantile(s[ok], 0.2), s[ok] > np.quantile(s[ok], 0.8)
    slope = lambda m: np.polyfit(s[ok][m], logit[m], 1)[0]  # noqa: E731
    assert slope(hi) > 1.5 * slope(lo)
    # ... while the logistic mechanism's logit is exactly affine in s
    th_l, _ = simulate.exposure_theta(x, 0.5, "logistic")
    lg = np.log(th_l) - np.log1p(-th_l)
    np.testing.assert_allclose(lg - s, (lg - s)[0], atol=1e-8)


@pytest.mark.parametrize("mechanism", ["logistic", "cloglog"])
def test_splits_carry_the_mechanism_and_its_theta(mechanism):
    x, y = _data(600)
    pue = simulate.simulate_pue(x, y, exposure_rate=0.7, n_test=100, seed=3, mechanism=mechanism)
    theta, b = simulate.exposure_theta(x, 0.7, mechanism)
    assert pue.mechanism == mechanism and pue.C == b
    np.testing.assert_allclose(pue.theta_pu, theta[pue.idx_pu])
    sse = simulate.simulate_3se(x, y, exposure_rate=0.7, n_test=100, seed=3, mechanism=mechanism)
    assert sse.mechanism == mechanism
    np.testing.assert_allclose(sse.theta_sse, theta[sse.idx_sse])
    # the default stays the paper's formula, draws unchanged
    a = simulate.simulate_pue(x, y, exposure_rate=0.7, n_test=100, seed=3)
    b2 = simulate.simulate_pue(x, y, exposure_rate=0.7, n_test=100, seed=3, mechanism="paper")
    assert a.mechanism == "paper"
    np.testing.assert_array_equal(a.w_pu, b2.w_pu)


def test_exposure_draws_follow_the_mechanism():
    x, y = _data(20_000)
    s = simulate.simulate_pue(x, y, exposure_rate=0.3, n_test=100, seed=0, mechanism="cloglog")
    assert abs(s.e_e.mean() - s.theta_e.mean()) < 0.02


@pytest.mark.parametrize("bad", ["Paper", "probit", None])
def test_unknown_mechanism_is_refused_by_name(bad):
    x, y = _data(200)
    with pytest.raises(ValueError, match="mechanism"):
        simulate.simulate_pue(x, y, n_test=50, mechanism=bad)
    with pytest.raises(ValueError, match="mechanism"):
        simulate.exposure_theta(x, 0.5, bad)
    with pytest.raises(ValueError, match="exposure_mechanism"):
        table1.LinearBenchConfig(trials=2, exposure_mechanism=bad)


@pytest.mark.parametrize("target", [0.0, 1.0, 1.5, True])
def test_bad_targets_are_refused(target):
    x, _ = _data(200)
    with pytest.raises(ValueError, match="target"):
        mechanisms.calibrated(x, target, "logistic")


def test_too_few_features_are_refused():
    with pytest.raises(ValueError, match="13"):
        mechanisms.exposure_score(np.zeros((5, 4)))
