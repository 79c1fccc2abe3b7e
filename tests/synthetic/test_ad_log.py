"""The simulated ad log: known truth, selection bias, TFRecord shards, meta.json."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
import tensorflow as tf

from adpue_tf import cli
from adpue_tf.synthetic import (
    AdLogConfig,
    AdLogSimulator,
    read_ad_log_meta,
    write_ad_log,
)
from adpue_tf.synthetic.ad_log import DEVICES


def _sig(z):
    return 1.0 / (1.0 + np.exp(-z))


def _reference(sim, f):
    """p(y=1|x), θ(e=1|x) written out from the module docstring's formulas."""
    rows = []
    for r in range(len(f["user_id"])):
        u, i = sim.user_factors[f["user_id"][r]], sim.item_factors[f["item_id"][r]]
        ctx = f["context"][r].astype(np.float64)
        dev = {b"android": 0.0, b"ios": 0.3, b"web": -0.3}[bytes(f["device"][r])]
        taste = float(u @ i)
        zy = (sim.config.conversion_intercept + taste + sim.item_bias[f["item_id"][r]]
              + sim.campaign_bias[f["campaign_id"][r]] + ctx @ sim.context_weights + dev)
        ze = (sim.config.exposure_intercept + sim.item_score[f["item_id"][r]]
              + sim.config.targeting * taste + ctx @ sim.context_policy)
        rows.append((_sig(zy), _sig(ze)))
    return np.array(rows).T


@pytest.fixture(scope="module")
def sim():
    return AdLogSimulator(AdLogConfig(n_users=300, n_items=60, n_campaigns=6), seed=3)


def test_truth_matches_the_formulas(sim):
    rows = sim.sample(400, seed=0)
    p_y, theta = _reference(sim, rows.features)
    np.testing.assert_allclose(rows.p_y, p_y, rtol=1e-6)
    np.testing.assert_allclose(rows.theta, theta, rtol=1e-6)
    np.testing.assert_array_equal(rows.features["campaign_id"],
                                  sim.item_campaign[rows.features["item_id"]])
    assert set(np.unique(rows.features["device"])) <= {d.encode() for d in DEVICES}
    assert rows.features["context"].dtype == np.float32


def test_labels_follow_the_truth_and_w_is_e_times_y(sim):
    rows = sim.sample(60_000, seed=1)
    np.testing.assert_array_equal(rows.w, rows.e * rows.y)
    for draw, prob in ((rows.y, rows.p_y), (rows.e, rows.theta), (rows.w, rows.p_y * rows.theta)):
        se = np.sqrt(np.mean(prob * (1 - prob)) / len(prob))
        assert abs(draw.mean() - prob.mean()) < 4 * se


def test_strong_selection_bias(sim):
    rows = sim.sample(30_000, seed=2)
    rare = sim.item_score[rows.features["item_id"]] == sim.config.rare_item_score
    assert 0.1 < rare.mean() < 0.35
    assert rows.theta[rare].mean() < 0.1 < 0.4 < rows.theta[~rare].mean()
    # the policy shows what users like: exposure and conversion are correlated,
    # so BCE on W (which learns p·θ) is far from p
    assert np.corrcoef(rows.theta, rows.p_y)[0, 1] > 0.2
    assert np.abs(rows.p_y * rows.theta - rows.p_y).mean() > 0.1


def test_reproducible_and_seeded(sim):
    a, b, c = sim.sample(50, seed=5), sim.sample(50, seed=5), sim.sample(50, seed=6)
    np.testing.assert_array_equal(a.features["user_id"], b.features["user_id"])
    np.testing.assert_array_equal(a.y, b.y)
    assert not np.array_equal(a.features["user_id"], c.features["user_id"])
    other = AdLogSimulator(sim.config, seed=4)
    assert not np.allclose(other.user_factors, sim.user_factors)


def _parse(path, labels):
    spec = {"user_id": tf.io.FixedLenFeature([], tf.int64),
            "item_id": tf.io.FixedLenFeature([], tf.int64),
            "campaign_id": tf.io.FixedLenFeature([], tf.int64),
            "device": tf.io.FixedLenFeature([], tf.string),
            "context": tf.io.FixedLenFeature([4], tf.float32)}
    spec.update({k: tf.io.FixedLenFeature([], v) for k, v in labels.items()})
    rows = list(tf.data.TFRecordDataset(path).map(
        lambda s: tf.io.parse_single_example(s, spec)).as_numpy_iterator())
    return {k: np.array([r[k] for r in rows]) for k in spec}


def test_write_ad_log_shards_and_meta(tmp_path):
    out = tmp_path / "log"
    meta = write_ad_log(out, rows=301, shards=3, seed=7, eval_rows=40, exposure_share=0.4,
                        config=AdLogConfig(n_users=30, n_items=10, n_campaigns=2), chunk=17)
    assert meta["counts"] == {"pu": 181, "exposure": 120, "eval": 40}
    assert json.loads((out / "meta.json").read_text()) == meta
    read = read_ad_log_meta(out)
    assert [len(read["files"][k]) for k in ("pu", "exposure", "eval")] == [3, 3, 1]
    sim = AdLogSimulator(AdLogConfig(n_users=30, n_items=10, n_campaigns=2), seed=7)
    n = {}
    for part, labels in (("pu", {"w": tf.int64}), ("exposure", {"e": tf.int64})):
        rows = [_parse(f, labels) for f in read["files"][part]]
        n[part] = sum(len(r["user_id"]) for r in rows)
        for r in rows:
            assert set(np.unique(r[next(iter(labels))])) <= {0, 1}
    assert n == {"pu": 181, "exposure": 120}
    ev = _parse(read["files"]["eval"][0], {"y": tf.int64, "p_y": tf.float32,
                                           "theta": tf.float32})
    assert len(ev["y"]) == 40
    # the stored truth is the generator's truth of the stored features
    np.testing.assert_allclose(ev["p_y"], sim.p_y(ev), rtol=1e-5)
    np.testing.assert_allclose(ev["theta"], sim.theta(ev), rtol=1e-5)


@pytest.mark.slow
def test_parallel_workers_write_the_same_files(tmp_path):
    kwargs = dict(rows=301, shards=3, seed=7, eval_rows=40, chunk=17,
                  config=AdLogConfig(n_users=30, n_items=10, n_campaigns=2))
    one = write_ad_log(tmp_path / "one", **kwargs)
    two = write_ad_log(tmp_path / "two", workers=2, **kwargs)
    assert one == two
    labels = {"pu": {"w": tf.int64}, "exposure": {"e": tf.int64},
              "eval": {"y": tf.int64, "p_y": tf.float32, "theta": tf.float32}}
    for part, spec in labels.items():
        for name in one["files"][part]:
            a, b = _parse(tmp_path / "one" / name, spec), _parse(tmp_path / "two" / name, spec)
            assert len(a["user_id"]) > 0
            for key in a:  # the same rows (a tf.Example's map may serialise in another order)
                np.testing.assert_array_equal(a[key], b[key])


def test_write_refuses_a_non_empty_directory_and_touches_nothing(tmp_path):
    (tmp_path / "keep.txt").write_text("mine")
    with pytest.raises(ValueError, match="not an empty directory"):
        write_ad_log(tmp_path, rows=10)
    assert [p.name for p in tmp_path.iterdir()] == ["keep.txt"]
    assert (tmp_path / "keep.txt").read_text() == "mine"


@pytest.mark.parametrize("kwargs, error, words", [
    (dict(rows=1), ValueError, "rows"),
    (dict(rows=10, shards=0), ValueError, "shards"),
    (dict(rows=10, exposure_share=1.0), ValueError, "exposure_share"),
    (dict(rows=10, eval_rows=0), ValueError, "eval_rows"),
    (dict(rows=2.5), TypeError, "rows"),
    (dict(rows=10, workers=0), ValueError, "workers"),
])
def test_write_bad_arguments(tmp_path, kwargs, error, words):
    with pytest.raises(error, match=words):
        write_ad_log(tmp_path / "x", **kwargs)
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize("kwargs, words", [
    (dict(n_users=0), "n_users"),
    (dict(n_campaigns=300), "n_campaigns"),
    (dict(rare_item_share=1.0), "rare_item_share"),
    (dict(targeting=float("nan")), "targeting"),
    (dict(policy="probit"), "policy"),
    (dict(base_rate=0.0), "base_rate"),
    (dict(base_rate=1.0), "base_rate"),
    (dict(base_rate=True), "base_rate"),
])
def test_config_bad_values(kwargs, words):
    with pytest.raises((ValueError, TypeError), match=words):
        AdLogConfig(**kwargs)


def test_meta_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="simulate-logs"):
        read_ad_log_meta(tmp_path)
    (tmp_path / "meta.json").write_text(json.dumps({"format": "other"}))
    with pytest.raises(ValueError, match="format"):
        read_ad_log_meta(tmp_path)
    (tmp_path / "meta.json").write_text("{broken")
    with pytest.raises(ValueError, match="meta.json is not valid JSON .*simulate-logs"):
        read_ad_log_meta(tmp_path)
    (tmp_path / "meta.json").write_text("[1, 2]")
    with pytest.raises(ValueError, match="not an ad log of format .* \\(format: 'list'\\)"):
        read_ad_log_meta(tmp_path)
    from adpue_tf.synthetic.ad_log import FORMAT

    (tmp_path / "meta.json").write_text(json.dumps({"format": FORMAT, "files": {"pu": 3}}))
    with pytest.raises(ValueError, match="lists no files"):
        read_ad_log_meta(tmp_path)


def test_meta_saved_with_a_byte_order_mark_reads(tmp_path):
    """A meta.json saved again by an editor that writes UTF-8 with a byte-order mark."""
    meta = write_ad_log(tmp_path / "log", rows=10, shards=1, eval_rows=2)
    (tmp_path / "log" / "meta.json").write_text(json.dumps(meta), encoding="utf-8-sig")
    assert read_ad_log_meta(tmp_path / "log")["counts"] == meta["counts"]


def test_cli_simulate_logs(tmp_path, capsys):
    out = tmp_path / "cli"
    assert cli.main(["simulate-logs", "--rows", "60", "--shards", "2", "--out", str(out),
                     "--eval-rows", "10"]) == 0
    assert "pu: 30 rows, exposure: 30 rows, eval: 10 rows" in capsys.readouterr().out
    assert read_ad_log_meta(out)["counts"]["eval"] == 10
    assert cli.main(["simulate-logs", "--rows", "60", "--out", str(out)]) == 2
    assert "not an empty directory" in capsys.readouterr().err


# ------------------------------------------------------ the cloglog policy, the base rate
def test_cloglog_policy_is_one_minus_exp_of_minus_lambda(sim):
    clog = AdLogSimulator(dataclasses.replace(sim.config, policy="cloglog"), seed=3)
    a, b = sim.sample(500, seed=0), clog.sample(500, seed=0)
    # same parameters, same requests, same conversion truth; only θ's link differs
    np.testing.assert_array_equal(a.features["user_id"], b.features["user_id"])
    np.testing.assert_allclose(a.p_y, b.p_y)
    z_e = np.log(a.theta) - np.log1p(-a.theta)  # the policy score, from the logistic truth
    np.testing.assert_allclose(b.theta, 1 - np.exp(-np.exp(z_e)), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(clog.theta(b.features), b.theta)
    # not logistic: logit(θ) is not an affine function of the score
    ok = (b.theta > 1e-6) & (b.theta < 1 - 1e-6)
    logit = np.log(b.theta[ok]) - np.log1p(-b.theta[ok])
    resid = logit - np.polyval(np.polyfit(z_e[ok], logit, 1), z_e[ok])
    assert np.sqrt(np.mean(resid ** 2)) > 0.1
    # the draws follow the new θ
    rows = clog.sample(60_000, seed=1)
    se = np.sqrt(np.mean(rows.theta * (1 - rows.theta)) / len(rows))
    assert abs(rows.e.mean() - rows.theta.mean()) < 4 * se


@pytest.mark.parametrize("policy", ["logistic", "cloglog"])
@pytest.mark.parametrize("rate", [0.1, 0.03])
def test_base_rate_sets_the_mean_conversion_probability(sim, policy, rate):
    base = AdLogSimulator(dataclasses.replace(sim.config, policy=policy, base_rate=rate), seed=3)
    rows = base.sample(100_000, seed=9)
    assert abs(rows.p_y.mean() - rate) < 0.1 * rate
    # only the intercept moves: the other parameters are those of the same seed
    np.testing.assert_array_equal(base.user_factors, sim.user_factors)
    shift = base.conversion_intercept - sim.config.conversion_intercept
    z = lambda p: np.log(p) - np.log1p(-p)  # noqa: E731
    ref = sim.sample(100_000, seed=9)
    np.testing.assert_allclose(z(rows.p_y), z(ref.p_y) + shift, rtol=1e-6, atol=1e-6)
    assert sim.conversion_intercept == sim.config.conversion_intercept  # no base rate: y0


def test_meta_records_the_policy_and_the_intercept(tmp_path):
    cfg = AdLogConfig(n_users=30, n_items=10, n_campaigns=2, policy="cloglog", base_rate=0.1)
    meta = write_ad_log(tmp_path / "log", rows=40, shards=1, eval_rows=10, config=cfg)
    saved = read_ad_log_meta(tmp_path / "log")
    assert saved["config"]["policy"] == meta["policy"] == "cloglog"
    assert saved["config"]["base_rate"] == 0.1
    assert saved["conversion_intercept"] == AdLogSimulator(cfg, seed=0).conversion_intercept
    ev = _parse(saved["files"]["eval"][0], {"y": tf.int64, "p_y": tf.float32,
                                              "theta": tf.float32})
    sim = AdLogSimulator(cfg, seed=0)
    np.testing.assert_allclose(ev["theta"], sim.theta(ev), rtol=1e-5)
