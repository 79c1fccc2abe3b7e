"""Tests for adpue_tf.experiments.simulate (pure NumPy)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from adpue_tf import synthetic as syn
from adpue_tf.experiments import simulate as sim


def _data(n=400, d=13, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, (n, d))
    y = (x[:, 0] + 0.3 * rng.standard_normal(n) > 0).astype(int)
    return x, y


# --------------------------------------------------------------------- exposure


def test_exposure_logit_exact_values():
    x = np.zeros((3, 14))
    x[0, :13] = np.arange(1, 14)  # x_k = k
    x[1, :13] = 0.5
    x[1, 12] = 0.0  # x13 = 0: only g2 counts
    x[1, 13] = 99.0  # 14th column is ignored
    x[2, 12] = 2.0  # x13 = 2, everything else 0
    x[2, 5] = 1.0  # x6 = 1
    # row 0: g1 = 2 + 6 + 3*4*5 + 24 + 5*36 = 272; g2 = 7 + 16 + 270 + 44 + 720 = 1057
    #        13*272 + (1-13)*1057 = 3536 - 12684
    # row 1: g2 = 0.5 + 1 + 0.75 + 2 + 1.25 = 5.5
    # row 2: g1 = 4 + 5 = 9, g2 = 0 -> 2*9
    np.testing.assert_allclose(sim.exposure_logit(x), [3536.0 - 12684.0, 5.5, 18.0])


def test_exposure_logit_matches_formula_random_rows():
    x, _ = _data(5)
    c = lambda i: x[:, i - 1]  # noqa: E731
    g1 = c(2) + 2 * c(3) + 3 * c(4) * c(5) + 4 * c(6) + 5 * c(6) ** 2
    g2 = c(7) + 2 * c(8) + 3 * c(9) * c(10) + 4 * c(11) + 5 * c(12) ** 2
    np.testing.assert_allclose(sim.exposure_logit(x), c(13) * g1 + (1 - c(13)) * g2)


def test_exposure_logit_needs_13_features():
    with pytest.raises(ValueError, match="project_features"):
        sim.exposure_logit(np.zeros((4, 12)))
    with pytest.raises(ValueError, match="`x`"):
        sim.exposure_logit(np.full((2, 13), np.nan))


def test_exposure_probability_clipped():
    x = np.zeros((2, 13))
    np.testing.assert_allclose(sim.exposure_probability(x, 1.0), [0.5, 0.5])
    np.testing.assert_allclose(sim.exposure_probability(x, 3.0), [1.0, 1.0])
    with pytest.raises(ValueError, match="`C`"):
        sim.exposure_probability(x, -1.0)


@pytest.mark.parametrize("target", [0.05, 0.1, 0.3, 0.5, 0.7, 0.9, 0.99])
def test_calibration_hits_target(target):
    x, _ = _data(500)
    C = sim.calibrate_exposure(x, target)
    assert isinstance(C, float) and C > 0
    assert abs(sim.exposure_probability(x, C).mean() - target) < 1e-4


def test_calibration_on_projected_features():
    x = sim.project_features(np.random.default_rng(1).normal(size=(300, 3)))
    C = sim.calibrate_exposure(x, 0.4)
    assert abs(sim.exposure_probability(x, C).mean() - 0.4) < 1e-4


@pytest.mark.parametrize("target", [0.0, 1.0, -0.2, 1.5, float("nan"), "0.5"])
def test_calibration_rejects_bad_target(target):
    with pytest.raises(ValueError, match="`target`"):
        sim.calibrate_exposure(_data(50)[0], target)


def test_calibration_unreachable_target():
    x = np.zeros((4, 13))
    x[:2, 6] = -1000.0  # x7 = -1000 with x13 = 0: σ(logit) underflows to 0
    with pytest.raises(ValueError, match=r"`target`.*not reachable.*0\.5"):
        sim.calibrate_exposure(x, 0.6)
    C = sim.calibrate_exposure(x, 0.5)  # the supremum itself is attained
    assert abs(sim.exposure_probability(x, C).mean() - 0.5) < 1e-4


# ------------------------------------------------------------------- projection


def test_projection_shape_range_determinism():
    imgs = np.random.default_rng(0).uniform(0, 255, (50, 8, 8))
    imgs[:, 0, 0] = 7.0  # a constant column must not produce NaN
    p = sim.project_features(imgs)
    assert p.shape == (50, 13)
    assert np.all(np.abs(p) <= 1) and np.all(np.isfinite(p))
    np.testing.assert_array_equal(p, sim.project_features(imgs))
    assert not np.allclose(p, sim.project_features(imgs, seed=1))
    assert sim.project_features(imgs, dim=5).shape == (50, 5)
    assert p.std(axis=0).min() > 0.1  # not collapsed to a point


def test_projection_bad_inputs():
    with pytest.raises(ValueError, match="`dim`"):
        sim.project_features(np.ones((3, 2)), dim=0)
    with pytest.raises(ValueError, match="`x`"):
        sim.project_features(np.array([[1.0, np.inf]]))


# ------------------------------------------------------------------- protocol


def test_pue_split_sizes_and_fields():
    x, y = _data(400)
    s = sim.simulate_pue(x, y, exposure_rate=0.3, split=0.3, n_test=100, seed=1)
    assert (len(s.x_pu), len(s.x_e), len(s.x_test)) == (90, 210, 100)
    assert (len(s.w_pu), len(s.e_e), len(s.y_test)) == (90, 210, 100)
    idx = np.concatenate([s.idx_pu, s.idx_e, s.idx_test])
    np.testing.assert_array_equal(np.sort(idx), np.arange(400))
    np.testing.assert_array_equal(s.x_pu, x[s.idx_pu])
    np.testing.assert_array_equal(s.y_e, y[s.idx_e])
    np.testing.assert_array_equal(s.w_pu, s.e_pu * s.y_pu)
    np.testing.assert_allclose(s.theta_pu, sim.exposure_probability(x, s.C)[s.idx_pu])
    assert abs(sim.exposure_probability(x, s.C).mean() - 0.3) < 1e-4
    observed = {"x_pu", "w_pu", "x_e", "e_e", "x_test", "y_test"}
    assert observed <= {f.name for f in dataclasses.fields(s)}
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.C = 1.0  # type: ignore[misc]
    xu, yu = s.unknown()
    assert len(xu) == int((s.w_pu == 0).sum()) + 210 and len(yu) == len(xu)


def test_pue_exposure_rate_is_realised():
    x, y = _data(4000)
    s = sim.simulate_pue(x, y, exposure_rate=0.3, n_test=300, seed=2)
    e = np.concatenate([s.e_pu, s.e_e])
    assert abs(e.mean() - 0.3) < 4 * np.sqrt(0.3 * 0.7 / len(e))


def test_3se_split():
    x, y = _data(300)
    s = sim.simulate_3se(x, y, exposure_rate=0.5, split=0.7, n_test=50, seed=3)
    assert (len(s.x_pu), len(s.x_sse), len(s.x_test)) == (175, 75, 50)
    np.testing.assert_array_equal(s.w_pu, s.e_pu * s.y_pu)
    np.testing.assert_array_equal(s.w_sse, s.e_sse * s.y_sse)
    xu, yu = s.unknown()
    assert len(xu) == int((s.w_pu == 0).sum() + (s.e_sse == 0).sum())
    np.testing.assert_array_equal(s.y_test, y[s.idx_test])


def test_seeds_reproducible_and_different():
    x, y = _data(300)
    a = sim.simulate_pue(x, y, n_test=50, seed=5)
    b = sim.simulate_pue(x, y, n_test=50, seed=5)
    c = sim.simulate_pue(x, y, n_test=50, seed=6)
    for f in ("idx_pu", "w_pu", "e_e", "idx_test"):
        np.testing.assert_array_equal(getattr(a, f), getattr(b, f))
    assert not np.array_equal(a.idx_pu, c.idx_pu)


def test_features_argument_for_images():
    imgs = np.random.default_rng(0).uniform(size=(120, 4, 4)).astype(np.float32)
    y = np.arange(120) % 2
    with pytest.raises(ValueError, match="project_features"):
        sim.simulate_pue(imgs, y, n_test=20)
    s = sim.simulate_pue(imgs, y, n_test=20, features=sim.project_features(imgs))
    assert s.x_pu.shape == (50, 4, 4) and s.x_pu.dtype == np.float32


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"split": 0.0}, "split"),
        ({"split": 1.0}, "split"),
        ({"split": 0.001}, "split"),
        ({"n_test": 100}, "n_test"),
        ({"n_test": 0}, "n_test"),
        ({"exposure_rate": 1.0}, "exposure_rate"),
        ({"features": np.zeros((100, 5))}, "features"),
    ],
)
def test_protocol_bad_arguments(kwargs, name):
    x, y = _data(100)
    args = {"n_test": 20, **kwargs}
    for fn in (sim.simulate_pue, sim.simulate_3se):
        with pytest.raises(ValueError, match=f"`{name}`"):
            fn(x, y, **args)


def test_protocol_bad_data():
    x, y = _data(100)
    with pytest.raises(ValueError, match="`y`"):
        sim.simulate_pue(x, np.full(100, 2), n_test=20)
    with pytest.raises(ValueError, match="`y`"):
        sim.simulate_pue(x, y[:90], n_test=20)
    bad = x.copy()
    bad[3, 3] = np.nan
    with pytest.raises(ValueError, match="`x`"):
        sim.simulate_pue(bad, y, n_test=20)
    with pytest.raises(ValueError, match="project_features"):
        sim.simulate_3se(x[:, :5], y, n_test=20)


# ------------------------------------------------------------------- synthetic


def test_synthetic_truth_and_frequencies():
    d = syn.make_synthetic(200_000, seed=11)
    assert d.x.shape == (200_000, 2)
    np.testing.assert_allclose(d.p_w, d.p_y * d.p_e)
    np.testing.assert_array_equal(d.w, d.y * d.e)
    np.testing.assert_allclose(d.p_y, 1 / (1 + np.exp(-(d.x @ [2.0, -1.0]))))
    np.testing.assert_allclose(d.p_e, 1 / (1 + np.exp(-(d.x @ [-1.5, 2.0]))))
    for draw, p in ((d.y, d.p_y), (d.e, d.p_e), (d.w, d.p_w)):
        se = np.sqrt(np.sum(p * (1 - p))) / len(p)
        assert abs(draw.mean() - p.mean()) < 4 * se
        hi = p > np.quantile(p, 0.8)  # conditional frequencies too
        se_hi = np.sqrt(np.sum(p[hi] * (1 - p[hi]))) / hi.sum()
        assert abs(draw[hi].mean() - p[hi].mean()) < 4 * se_hi
    # strong selection bias: exposure is negatively correlated with p(y=1|x)
    assert np.corrcoef(d.p_y, d.p_e)[0, 1] < -0.5


def test_synthetic_options_and_seeds():
    d = syn.make_synthetic(100, dim=4, y_weights=[1, 0, 0, 0], y_bias=-1.0, e_bias=2.0, seed=1)
    np.testing.assert_allclose(d.e_weights, [-1.5, 2.0, 0, 0])
    np.testing.assert_allclose(d.p_y, 1 / (1 + np.exp(-(d.x[:, 0] - 1))))
    assert syn.make_synthetic(10, dim=1).x.shape == (10, 1)
    a, b = syn.make_synthetic(50, seed=3), syn.make_synthetic(50, seed=3)
    np.testing.assert_array_equal(a.y, b.y)
    assert not np.array_equal(syn.make_synthetic(50, seed=3).x, syn.make_synthetic(50, seed=4).x)
    with pytest.raises(ValueError, match="`y_weights`"):
        syn.make_synthetic(10, y_weights=[1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="`dim`"):
        syn.make_synthetic(10, dim=0)
    with pytest.raises(ValueError, match="`n`"):
        syn.make_synthetic(0)
    with pytest.raises(ValueError, match="`e_bias`"):
        syn.make_synthetic(5, e_bias=float("inf"))


def test_synthetic_pue_priors():
    s = syn.synthetic_pue(1000, 500, seed=2)
    assert s.x_pu.shape == (1000, 2) and s.x_e.shape == (500, 2)
    np.testing.assert_array_equal(s.w_pu, s.w_pu * s.y_pu)
    assert not np.array_equal(s.x_pu[:500], s.x_e)  # independent samples
    big = syn.make_synthetic(1_000_000, seed=99)
    assert abs(s.prior_w - big.p_w.mean()) < 1e-3
    assert abs(s.prior_y - big.p_y.mean()) < 1e-3
    assert abs(s.prior_y - 0.5) < 1e-9  # symmetric model with zero bias
    t = syn.synthetic_pue(10, 10, dim=3, y_bias=1.0, e_weights=[1.0, 1.0, 1.0], seed=0)
    big = syn.make_synthetic(1_000_000, dim=3, y_bias=1.0, e_weights=[1, 1, 1], seed=7)
    assert abs(t.prior_w - big.p_w.mean()) < 1e-3
    with pytest.raises(ValueError, match="`n_e`"):
        syn.synthetic_pue(10, 0)


def test_synthetic_sse():
    d = syn.synthetic_sse(1000, seed=4)
    assert np.all(d.w <= d.e)
    np.testing.assert_array_equal(d.w, d.y * d.e)
    assert d.p_y.shape == (1000,)
