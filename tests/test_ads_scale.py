"""benchmarks.ads_scale on a tiny simulated ad log, so that its code path cannot rot."""

from __future__ import annotations

import json

import numpy as np
import pytest

from adpue_tf.synthetic import read_ad_log_meta
from benchmarks import ads_scale, ads_scale_log, ads_scale_methods, ads_scale_report


def test_auc_counts_tied_pairs_half():
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 300)
    s = np.round(rng.random(300), 1)  # many ties
    pos, neg = s[y == 1], s[y == 0]
    pairs = (pos[:, None] > neg[None, :]).sum() + 0.5 * (pos[:, None] == neg[None, :]).sum()
    truth = {"y": y, "p_y": np.full(300, 0.5), "theta": np.full(300, 0.5)}
    auc = ads_scale_methods.scores(s, truth)["auc"]
    assert auc == pytest.approx(pairs / (len(pos) * len(neg)), abs=1e-12)


def test_scores_exact_values():
    truth = {"y": np.array([1, 0, 1, 0]), "p_y": np.array([0.9, 0.1, 0.6, 0.4]),
             "theta": np.array([0.01, 0.5, 0.5, 0.02])}
    q = np.array([0.85, 0.35, 0.65, 0.15])  # none on a bin edge
    out = ads_scale_methods.scores(q, truth)
    assert out["mae"] == pytest.approx((0.05 + 0.25 + 0.05 + 0.25) / 4)
    assert out["mae_rarely_shown"] == pytest.approx((0.05 + 0.25) / 2)
    ll = -(np.log(0.85) + np.log(0.65) + np.log(0.65) + np.log(0.85)) / 4
    assert out["log_loss"] == pytest.approx(ll)
    p = truth["p_y"]
    to_p = -(p * np.log(q) + (1 - p) * np.log(1 - q)).mean()
    kl = (p * np.log(p / q) + (1 - p) * np.log((1 - p) / (1 - q))).mean()
    assert out["log_loss_to_p"] == pytest.approx(to_p, rel=1e-5)
    assert out["kl_to_p"] == pytest.approx(kl, rel=1e-4)
    assert out["auc"] == 1.0
    cal = {c["bin"]: c for c in out["calibration"] if c["n"]}
    assert sorted(cal) == ["0.1-0.2", "0.3-0.4", "0.6-0.7", "0.8-0.9"]
    assert cal["0.8-0.9"]["mean_true_p"] == pytest.approx(0.9)
    assert out["ece"] == pytest.approx((0.15 + 0.35 + 0.35 + 0.15) / 4)  # one row per bin


def _run(ll: float, mae: float, wall: float = 1.0) -> dict:
    return {"eval": {"log_loss_to_p": ll, "mae": mae}, "fit_wall_s": wall, "fit_cpu_s": wall}


def test_targets_compare_recommended_with_bce_ips_and_direct_adpue():
    methods = {"bce": _run(0.60, 0.10, wall=10.0), "ips": _run(0.55, 0.09),
               "adpue": _run(0.58, 0.08)}
    results = {"rows_10": {"rows": 10, "policy": "logistic",
                           "methods": {**methods, "recommended": _run(0.50, 0.09, wall=15.0)}},
               "rows_10_cloglog": {"rows": 10, "policy": "cloglog",
                                   "methods": {**methods, "recommended": _run(0.56, 0.11,
                                                                              wall=50.0)}}}
    text = "\n".join(ads_scale_report.targets(results, None))
    met = [line.rsplit("|", 2)[-2].strip() for line in text.splitlines()
           if line.startswith("| 10 rows")]
    # logistic: all met (1.5x the cost: the limit); cloglog: IPS is lower, MAE above BCE's,
    # 5x the cost
    assert met == ["yes", "yes", "yes", "**no**", "**no**", "**no**"]
    assert "15 s / 10 s = 1.50" in text and "50 s / 10 s = 5.00" in text
    assert "fit_pue ≤ 1.5 × one streamed BCE fit" in text


def test_the_learning_rate_is_chosen_by_the_validation_score_alone():
    runs = {"0.01": {"val_exposure_nll": [0.40, 0.31, 0.33], "eval": {"mae": 0.9}},
            "0.03": {"val_exposure_nll": [0.35, 0.32], "eval": {"mae": 0.1}},
            "0.1": {"val_exposure_nll": [0.31, 0.50], "eval": {"mae": 0.0}}}
    assert ads_scale.best_val(runs["0.01"]) == 0.31
    # lowest best score wins; a tie goes to the first given; the evaluation MAE is never read
    assert ads_scale.choose_lr(runs) is runs["0.01"]
    # a diverged rate is never kept, and is reported as such
    runs["0.001"] = {"method": "ips", "lr": 0.001, "diverged": "exploded"}
    for r, lr in zip(runs.values(), (0.01, 0.03, 0.1)):
        r.update(method="ips", lr=lr, best_chunk=1, eval={"mae": 0.1, "auc": 0.7})
    kept = ads_scale.with_candidates(runs)
    assert kept["lr"] == 0.01 and kept["lr_candidates"]["0.001"] == {"diverged": "exploded"}
    alone = ads_scale.with_candidates({"0.001": runs["0.001"]})  # reported, not a crash
    assert alone["diverged"] == "at every learning rate tried" and "eval" not in alone


@pytest.mark.slow
def test_a_log_with_a_base_rate_is_its_own_folder_and_has_that_mean_p(tmp_path):
    low = ads_scale_log.ensure_log(2000, tmp_path, workers=1, eval_rows=2000, policy="cloglog",
                                   base_rate=0.1)
    assert low.name == "rows_2000_cloglog_base0.1"
    meta = read_ad_log_meta(low)
    assert meta["config"]["base_rate"] == 0.1 and meta["config"]["policy"] == "cloglog"
    _, truth = ads_scale_log.eval_data(meta, 512)
    assert abs(float(np.mean(truth["p_y"])) - 0.1) < 0.02
    assert ads_scale_log.ensure_log(2000, tmp_path, workers=1, eval_rows=2000, policy="cloglog",
                                    base_rate=0.1) == low  # found, not written again
    default = ads_scale_log.ensure_log(2000, tmp_path, workers=1, eval_rows=2000,
                                       policy="cloglog")
    assert default.name == "rows_2000_cloglog" and default != low
    with pytest.raises(ValueError, match="base_rate"):
        ads_scale_log.ensure_log(2000, tmp_path, workers=1, policy="cloglog", base_rate=1.5)


@pytest.mark.slow
def test_every_method_end_to_end_on_a_tiny_log(tmp_path):
    log = ads_scale_log.ensure_log(4000, tmp_path, workers=1, eval_rows=2000)
    meta = read_ad_log_meta(log)
    assert meta["counts"] == {"pu": 2000, "exposure": 2000, "eval": 2000}
    theta = ads_scale_log.fit_theta(meta, batch_size=256, epochs=1, lr=0.01)
    theta.save(tmp_path / "theta.keras")
    for method in ads_scale_methods.STREAMED:
        out = ads_scale_methods.run_method(log, method, chunks=2, batch_size=256, lr=0.01,
                                           val_rows=300, theta_path=str(tmp_path / "theta.keras"),
                                           steps=3 if method == "debiased" else None)
        assert out["steps"] > 0 and out["train_rows"] == out["steps"] * 256
        assert out["best_chunk"] in (1, 2) and len(out["val_exposure_nll"]) == 2
        assert np.isfinite(out["val_exposure_nll"]).all()
        e = out["eval"]
        assert 0.0 < e["mae"] < 1.0 and 0.0 < e["auc"] < 1.0 and np.isfinite(e["kl_to_p"])
        assert out["p_hat"].shape == (2000,) and out["peak_rss_mb"] > 0
    rec = ads_scale_methods.run_recommended(log, epochs=1, batch_size=256, lr=0.01)
    assert rec["choice"] in rec["scores"] and rec["fit_wall_s"] > 0
    assert rec["train_rows"] == 2 * 2000 * 15 // 16 and 0.0 < rec["eval"]["mae"] < 1.0
    assert set(rec["candidates"]) == set(rec["scores"])  # each candidate against the truth
    assert all(0.0 < c["mae"] < 1.0 and 0.0 < c["mean_pred"] < 1.0
               for c in rec["candidates"].values())


@pytest.mark.slow
def test_main_writes_report_plot_and_json(tmp_path):
    out = tmp_path / "res" / "ads.md"
    ads_scale.main(["--rows", "3000", "--log-dir", str(tmp_path / "logs"), "--out", str(out),
                    "--policies", "cloglog", "--methods", "bce", "recommended",
                    "--batch-size", "256", "--chunks", "2", "--val-rows", "300", "--lr", "0.01",
                    "--lrs", "0.01", "0.05", "--eval-rows", "1000", "--epochs", "1",
                    "--throughput-steps", "2", "--throughput-repeats", "1", "--workers", "1",
                    "--seed", "3"])
    text = out.read_text()
    for needle in ("## Provenance", "- Command: `python -m benchmarks.ads_scale --rows 3000",
                   "## Accuracy: 3,000 logged rows, `cloglog` policy", "## Targets",
                   "## Training throughput", "## Peak resident memory", "fit_pue: chose",
                   "fit_pue's candidates against the truth", "- Seeds: 3 (the logs' generator",
                   "-dim context), seed 3, logging policy"):
        assert needle in text, needle
    assert str(tmp_path) not in text and "<local>/logs" in text
    assert (tmp_path / "res" / "ads_calibration.png").stat().st_size > 1000
    data = json.loads((tmp_path / "res" / "ads.json").read_text())
    run = data["results"]["rows_3000_cloglog_seed3"]  # a log per seed, its generator's seed
    assert run["seed"] == 3 and data["provenance"]["seeds"].startswith("3 ")
    assert read_ad_log_meta(tmp_path / "logs" / "rows_3000_cloglog_seed3")["seed"] == 3
    assert set(run["methods"]) == {"bce", "recommended"} and str(tmp_path) not in json.dumps(data)
    assert len(data["provenance"]["data_sha256"]) == 33  # 16 + 16 shards and the eval set
    cands = run["methods"]["bce"]["lr_candidates"]  # both rates ran; the lower score kept
    assert set(cands) == {"0.01", "0.05"}
    assert run["methods"]["bce"]["lr"] == float(min(cands, key=lambda lr: cands[lr]["best_val"]))


def _children(monkeypatch) -> list:
    """The command lines of the child processes ads_scale starts (none is run)."""
    seen: list = []

    class Done:
        returncode, stderr = 0, ""
        stdout = ads_scale.RESULT + "{}"

    monkeypatch.setattr(ads_scale.subprocess, "run",
                        lambda cmd, **kw: seen.append(cmd) or Done())
    return seen


def test_the_seed_names_the_log_and_reaches_every_child(monkeypatch):
    assert ads_scale.parse_args([]).seed == 0
    assert ads_scale_log.log_name(10, "logistic") == "rows_10"  # seed 0: the old names
    assert ads_scale_log.log_name(10, "cloglog", 0.1, seed=2) == "rows_10_cloglog_base0.1_seed2"
    seen = _children(monkeypatch)
    args = ads_scale.parse_args(["--seed", "5"])
    ads_scale._in_subprocess(args, "bce", ads_scale.Path("log"), ads_scale.Path("t"), lr=0.01)
    child = ads_scale.parse_args(seen[0][3:])
    assert child.seed == 5 and child.child == "bce"


def test_steps_per_execution_reaches_the_streamed_models_and_their_children(tmp_path, monkeypatch):
    log = ads_scale_log.ensure_log(400, tmp_path, workers=1, shards=2, eval_rows=100)
    meta = read_ad_log_meta(log)
    model, _, _ = ads_scale_methods.make_model("debiased", meta, 0.01, 0, None, steps=6)
    assert model.steps_per_execution == 6
    model, _, _ = ads_scale_methods.make_model("bce", meta, 0.01, 0, None)
    assert model.steps_per_execution == 1  # the CPU's, by DebiasedModel's "auto" rule
    seen = _children(monkeypatch)
    args = ads_scale.parse_args(["--steps-per-execution", "16"])
    ads_scale._in_subprocess(args, "adpue", ads_scale.Path("log"), ads_scale.Path("t"))
    assert ads_scale.parse_args(seen[0][3:]).steps_per_execution == 16


def test_targets_tell_a_rival_not_run_from_one_that_diverged():
    methods = {"bce": _run(0.60, 0.10), "ips": {"diverged": "at every learning rate tried"},
               "recommended": _run(0.50, 0.09)}
    results = {"rows_10": {"rows": 10, "policy": "logistic", "methods": methods}}
    text = "\n".join(ads_scale_report.targets(results, None))
    assert "ips diverged, adpue not run" in text
