"""The family of simulated ad logs: what each named log states, determinism, bad input; the benchmark."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from adpue_tf.synthetic import (
    AdFamilyConfig,
    AdFamilyLog,
    AdFamilySimulator,
    AdLogRows,
    ad_log_family,
)
from adpue_tf.synthetic.ad_family import DEVICES, LOW_THETA

FAMILY = ad_log_family()
ROWS = 40_000


def _sig(z):
    return 1.0 / (1.0 + np.exp(-z))


@pytest.fixture(scope="module")
def drawn():
    """Each log's simulator (seed 0) and 40,000 of its rows, drawn once."""
    out = {}
    for name, log in FAMILY.items():
        sim = AdFamilySimulator(log.config, seed=0)
        out[name] = (sim, sim.sample(ROWS, seed=5))
    return out


# -- the grid ---------------------------------------------------------------------------

def test_the_grid_holds_the_extremes_of_every_axis():
    assert len(FAMILY) >= 12 and all(k == v.name for k, v in FAMILY.items())
    configs = [v.config for v in FAMILY.values()]
    users = [c.n_users for c in configs]
    assert min(users) <= 500 and max(users) >= 10_000
    assert {0.01, 0.2} <= {c.base_rate for c in configs}
    assert {0.0, 0.4} <= {c.rare_share for c in configs}
    links = {c.link for c in configs}
    assert min(links) < 0 < max(links) and 0.0 in links
    assert {"logistic", "cloglog", "threshold"} <= {c.conversion for c in configs}
    assert {"logistic", "cloglog", "threshold"} <= {c.policy for c in configs}
    assert "other" in {c.policy_reads for c in configs}
    assert {"embedding", "linear"} == {v.net for v in FAMILY.values()}
    # a linear net on a p with interactions (too weak) and on an additive p (right)
    linear = {v.config.interactions for v in FAMILY.values() if v.net == "linear"}
    assert 0.0 in linear and max(linear) > 1.0
    assert all(v.varies for v in FAMILY.values())


def test_the_family_is_built_afresh_and_the_same_each_call():
    a, b = ad_log_family(), ad_log_family()
    assert a == b and a is not b


# -- what each log states ---------------------------------------------------------------

@pytest.mark.parametrize("name", list(FAMILY))
def test_each_log_has_the_truth_it_states(name, drawn):
    c = FAMILY[name].config
    sim, rows = drawn[name]
    p, theta = rows.p_y, rows.theta
    # base rate as stated (relative error of a mean of 40k rows, plus the bisection's rows)
    assert abs(p.mean() - c.base_rate) < 0.06 * c.base_rate + 0.002
    # the share of rows almost never shown as stated
    assert abs(np.mean(theta < LOW_THETA) - c.rare_share) < 0.015
    # every θ in (0, 1): no row is certainly hidden or certainly shown; p in (0, 1]
    # (cloglog's upper tail rounds to 1 in float64 on a few rows in 10,000)
    assert theta.min() > 0.0 and theta.max() < 0.96
    assert ((0 < p) & (p <= 1)).all() and np.mean(p > 0.999) < 0.005
    # the shown rows' mean exposure as stated
    assert abs(theta[theta >= LOW_THETA].mean() - c.shown_rate) < 0.02
    # the sign of corr(θ, p) as stated
    corr = np.corrcoef(theta, p)[0, 1]
    if c.link > 0:
        assert corr > 0.2
    elif c.link < 0:
        assert corr < -0.2
    else:
        assert abs(corr) < 0.03
    np.testing.assert_array_equal(rows.w, rows.e * rows.y)
    assert abs(rows.e.mean() - theta.mean()) < 0.01 and abs(rows.y.mean() - p.mean()) < 0.01


def test_rows_and_their_types(drawn):
    sim, rows = drawn["reference"]
    assert isinstance(rows, AdLogRows) and len(rows) == ROWS
    f = rows.features
    assert sorted(f) == ["category_id", "context", "device", "item_id", "user_id"]
    for k in ("user_id", "item_id", "category_id"):
        assert f[k].dtype == np.int64 and f[k].shape == (ROWS,)
    assert f["context"].dtype == np.float32 and f["context"].shape == (ROWS, 4)
    assert f["device"].dtype.kind == "S" and set(np.unique(f["device"])) == {
        d.encode() for d in DEVICES}
    np.testing.assert_array_equal(f["category_id"], sim.item_category[f["item_id"]])
    assert f["user_id"].max() < sim.config.n_users and f["item_id"].max() < sim.config.n_items
    np.testing.assert_allclose(sim.p_y(f), rows.p_y)
    np.testing.assert_allclose(sim.theta(f), rows.theta)
    # devices given as str read the same as bytes
    as_str = dict(f, device=f["device"].astype(str))
    np.testing.assert_allclose(sim.p_y(as_str), rows.p_y)


def test_logistic_p_and_theta_follow_the_formulas(drawn):
    sim, rows = drawn["reference"]
    f, c = rows.features, sim.config
    u, i = f["user_id"], f["item_id"]
    ctx = f["context"].astype(np.float64)
    dev = np.array([DEVICES.index(d.decode()) for d in f["device"]])
    taste = np.sum(sim.user_factors[u] * sim.item_factors[i], axis=1)
    s_y = (sim.user_bias[u] + sim.item_bias[i] + sim.category_bias[sim.item_category[i]]
           + ctx[:, :-1] @ sim.context_weights + np.array([0.0, 0.3, -0.3])[dev]
           + c.interactions * (taste + 0.5 * ctx[:, 0] * ctx[:, 1]))
    my, sy, mo, so = sim._scale
    np.testing.assert_allclose(rows.p_y, _sig(sim.conversion_intercept + s_y - my), rtol=1e-9)
    s_o = sim.item_policy[i] + sim.device_policy[dev] + ctx[:, -1]
    s_e = c.link * (s_y - my) / sy + np.sqrt(1 - c.link**2) * (s_o - mo) / so
    shown = s_e >= sim.rare_cut
    want = 0.05 + 0.9 * _sig(sim.exposure_intercept + c.sharpness * s_e)
    np.testing.assert_allclose(rows.theta[shown], want[shown], rtol=1e-9)
    assert (rows.theta[~shown] < 0.03).all() and (rows.theta[~shown] >= 0.001).all()


def test_mechanisms(drawn):
    _, thr = drawn["threshold"]
    assert len(np.unique(np.round(thr.p_y, 12))) == 3
    shown = thr.theta[thr.theta >= LOW_THETA]
    np.testing.assert_allclose(np.unique(np.round(shown, 12)), [0.095, 0.905])
    # cloglog: θ = 0.05 + 0.9·(1 - exp(-exp(z))) is not a logistic function of any score
    # (its log-odds are not symmetric); at least its values stay in range
    _, clog = drawn["cloglog"]
    assert clog.theta.max() <= 0.95 + 1e-12
    # a policy on a feature p does not read: θ is a function of the last context feature only
    sim, rows = drawn["policy_other"]
    f = dict(rows.features)
    moved = dict(f, user_id=np.roll(f["user_id"], 1), item_id=np.roll(f["item_id"], 7),
                 category_id=np.roll(f["category_id"], 7), device=np.roll(f["device"], 3))
    moved["context"] = f["context"].copy()
    moved["context"][:, :-1] = np.roll(f["context"][:, :-1], 11, axis=0)
    np.testing.assert_allclose(sim.theta(moved), rows.theta)
    # ... and p never reads it
    shifted = dict(f, context=f["context"].copy())
    shifted["context"][:, -1] += 1.0
    np.testing.assert_allclose(sim.p_y(shifted), rows.p_y)


def test_an_additive_p_has_no_interaction(drawn):
    sim, rows = drawn["linear_additive"]
    f = rows.features
    swapped = dict(f, context=f["context"].copy())
    swapped["context"][:, 1] = -swapped["context"][:, 1]  # would flip ctx0·ctx1
    logit = lambda p: np.log(p / (1 - p))  # noqa: E731
    diff = logit(sim.p_y(swapped)) - logit(rows.p_y)
    np.testing.assert_allclose(diff, -2 * sim.context_weights[1] * f["context"][:, 1], atol=1e-6)


# -- determinism ------------------------------------------------------------------------

def test_the_same_seeds_give_the_same_rows_and_others_differ():
    config = FAMILY["users_500"].config
    a = AdFamilySimulator(config, seed=3).sample(500, seed=1)
    b = AdFamilySimulator(config, seed=3).sample(500, seed=1)
    for k in a.features:
        np.testing.assert_array_equal(a.features[k], b.features[k])
    for k in ("p_y", "theta", "y", "e", "w"):
        np.testing.assert_array_equal(getattr(a, k), getattr(b, k))
    other_rows = AdFamilySimulator(config, seed=3).sample(500, seed=2)
    other_world = AdFamilySimulator(config, seed=4)
    assert not np.array_equal(a.features["user_id"], other_rows.features["user_id"])
    assert not np.allclose(other_world.p_y(a.features), a.p_y)


# -- bad input, named -------------------------------------------------------------------

@pytest.mark.parametrize("changes, error, name", [
    ({"n_users": 0}, ValueError, "n_users"),
    ({"n_users": 1.5}, TypeError, "n_users"),
    ({"n_items": True}, TypeError, "n_items"),
    ({"context_dim": 2}, ValueError, "context_dim"),
    ({"n_categories": 400}, ValueError, "n_categories"),
    ({"base_rate": 0.0}, ValueError, "base_rate"),
    ({"base_rate": "0.1"}, TypeError, "base_rate"),
    ({"rare_share": -0.1}, ValueError, "rare_share"),
    ({"rare_share": 0.95}, ValueError, "rare_share"),
    ({"rare_share": float("nan")}, ValueError, "rare_share"),
    ({"link": 1.5}, ValueError, "link"),
    ({"link": None}, TypeError, "link"),
    ({"shown_rate": 0.05}, ValueError, "shown_rate"),
    ({"sharpness": 0.0}, ValueError, "sharpness"),
    ({"interactions": -1.0}, ValueError, "interactions"),
    ({"conversion": "probit"}, ValueError, "conversion"),
    ({"policy": 3}, TypeError, "policy"),
    ({"policy_reads": "all"}, ValueError, "policy_reads"),
])
def test_a_bad_config_is_refused_by_name(changes, error, name):
    with pytest.raises(error, match=f"`{name}`"):
        AdFamilyConfig(**changes)


def test_bad_simulator_log_and_sample_arguments_are_named():
    with pytest.raises(TypeError, match="`config`"):
        AdFamilySimulator(dataclasses.asdict(AdFamilyConfig()))
    with pytest.raises(ValueError, match="`seed`"):
        AdFamilySimulator(seed=-1)
    with pytest.raises(ValueError, match="`net`"):
        AdFamilyLog("x", AdFamilyConfig(), "deep")
    with pytest.raises(TypeError, match="`config`"):
        AdFamilyLog("x", {"n_users": 3})
    with pytest.raises(TypeError, match="`name`"):
        AdFamilyLog("", AdFamilyConfig())
    sim = AdFamilySimulator(AdFamilyConfig(n_users=20, n_items=10, n_categories=2))
    with pytest.raises(ValueError, match="`n`"):
        sim.sample(0, seed=0)
    with pytest.raises(TypeError, match="`seed`"):
        sim.sample(10, seed=True)
    rows = sim.sample(3, seed=0)
    with pytest.raises(ValueError, match="`device`"):
        sim.p_y(dict(rows.features, device=np.array([b"tv"] * 3)))


# -- the benchmark's pieces -------------------------------------------------------------

def test_snips_mean_is_the_mean_p_where_theta_is_known():
    from benchmarks.ad_family import snips_mean

    sim = AdFamilySimulator(FAMILY["rare_0"].config, seed=1)
    pu, ex = sim.sample(200_000, seed=1), sim.sample(100_000, seed=2)
    est = snips_mean(pu.w, pu.theta, ex.e, ex.theta)
    assert abs(est - pu.p_y.mean()) < 0.004
    # a θ̂ that cannot tell rows apart gives E[θp]/E[θ] instead (here above the mean p)
    flat = snips_mean(pu.w, np.full(len(pu), 0.5), ex.e, np.full(len(ex), 0.5))
    assert abs(flat - np.mean(pu.theta * pu.p_y) / np.mean(pu.theta)) < 0.004
    assert flat > pu.p_y.mean() + 0.02
    for kwargs, name in (({"clip": 0.0}, "clip"), ({"theta_pu": np.ones(3)}, "theta_pu")):
        args = {"w": np.ones(4), "theta_pu": np.ones(4), "e": np.ones(2),
                "theta_e": np.ones(2)} | kwargs
        with pytest.raises(ValueError, match=f"`{name}`"):
            snips_mean(**args)
    with pytest.raises(ValueError, match="`e`"):
        snips_mean(np.ones(2), np.ones(2), np.zeros(2), np.ones(2))


def test_the_nets_fit_the_features_and_the_linear_one_is_additive():
    import keras

    from benchmarks.ad_family import build_net

    config = FAMILY["users_500"].config
    rows = AdFamilySimulator(config, seed=0).sample(8, seed=0)
    for kind in ("embedding", "linear"):
        net = build_net(config, kind)
        import tensorflow as tf

        out = net(dict((k, tf.constant(v)) for k, v in rows.features.items()))
        assert tuple(out.shape) == (8, 1)
    linear = build_net(config, "linear")
    assert not any(isinstance(layer, keras.layers.Dot) for layer in linear.layers)
    with pytest.raises(ValueError, match="`kind`"):
        build_net(config, "deep")


@pytest.mark.slow
def test_the_benchmark_runs_end_to_end_on_a_tiny_grid(tmp_path):
    from benchmarks import ad_family

    out, records = tmp_path / "ad_family.md", tmp_path / "records.json"
    results = ad_family.main(["--logs", "rare_0,linear_net", "--seeds", "1", "--rows", "1500",
                              "--test-rows", "1000", "--epochs", "2", "--out", str(out),
                              "--json", str(records)])
    assert [r["log"] for r in results] == ["rare_0", "linear_net"]
    assert json.loads(records.read_text()) == json.loads(json.dumps(results))
    for r in results:
        assert set(r["methods"]) == set(ad_family.METHODS)
        for m, s in r["methods"].items():
            assert all(np.isfinite(s[k]) for k in ("mae", "kl", "mean_pred", "auc")), m
            assert 0 <= s["mae"] <= 1 and s["kl"] >= 0
        assert r["methods"]["const_oracle"]["auc"] == 0.5
        assert "choice" in r["methods"]["fit_pue"]
        assert isinstance(r["methods"]["adpue_alt"]["best_round"], int)
    text = out.read_text()
    assert "python -m benchmarks.ad_family --logs rare_0,linear_net" in text
    assert "## Provenance" in text and "### rare_0" in text and "### linear_net" in text
    summary = text.split("## Summary")[1].split("## Per log")[0]
    assert "| rare_0 | 1 |" in summary and "| linear_net | 1 |" in summary
    assert ("**met**" in summary) or ("not met" in summary)
    with pytest.raises(SystemExit):
        ad_family.main(["--logs", "nowhere", "--out", str(out)])


@pytest.mark.slow
def test_the_snips_constant_reads_exposure_rows_theta_was_not_trained_on(monkeypatch):
    """On its own training rows θ̂ is over-confident (mean E/θ̂ below 1): the denominator skips them."""
    from benchmarks import ad_family

    seen = {}
    real = ad_family.snips_mean

    def spy(w, theta_pu, e, theta_e, **kw):
        seen.update(n_pu=len(w), n_e=len(e), n_theta_e=len(theta_e))
        return real(w, theta_pu, e, theta_e, **kw)

    monkeypatch.setattr(ad_family, "snips_mean", spy)
    log = ad_family.ad_log_family()["rare_0"]
    record = ad_family.run_one(log, 0, rows=1000, test_rows=200, epochs=1, batch_size=256,
                               methods=("const_snips",))
    d = ad_family.draw(log, 0, 1000, 200)
    assert seen == {"n_pu": len(d.w), "n_e": len(d.e) - d.n_e_train,
                    "n_theta_e": len(d.e) - d.n_e_train}
    assert 0 < d.n_e_train < len(d.e)
    assert 0.0 < record["methods"]["const_snips"]["mean_pred"] < 1.0
