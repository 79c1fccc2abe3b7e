"""benchmarks/ads_scale.py on a tiny simulated ad log, so that its code path cannot rot."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("keras")
from adpue_tf.synthetic.ad_log import read_ad_log_meta  # noqa: E402


@pytest.fixture(scope="module")
def bench(load_benchmark):
    return load_benchmark("ads_scale")


def test_auc_matches_pair_count(bench):
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 300)
    s = np.round(rng.random(300), 1)  # many ties
    pos, neg = s[y == 1], s[y == 0]
    pairs = (pos[:, None] > neg[None, :]).sum() + 0.5 * (pos[:, None] == neg[None, :]).sum()
    assert bench.auc(y, s) == pytest.approx(pairs / (len(pos) * len(neg)), abs=1e-12)


def test_scores_exact_values(bench):
    truth = {"y": np.array([1, 0, 1, 0]), "p_y": np.array([0.9, 0.1, 0.6, 0.4]),
             "theta": np.array([0.01, 0.5, 0.5, 0.02])}
    out = bench.scores(np.array([0.85, 0.35, 0.65, 0.15]), truth)  # none on a bin edge
    assert out["mae"] == pytest.approx((0.05 + 0.25 + 0.05 + 0.25) / 4)
    assert out["mae_rarely_shown"] == pytest.approx((0.05 + 0.25) / 2)
    ll = -(np.log(0.85) + np.log(0.65) + np.log(0.65) + np.log(0.85)) / 4
    assert out["log_loss"] == pytest.approx(ll)
    assert out["auc"] == 1.0
    cal = {c["bin"]: c for c in out["calibration"] if c["n"]}
    assert sorted(cal) == ["0.1-0.2", "0.3-0.4", "0.6-0.7", "0.8-0.9"]
    assert cal["0.8-0.9"]["mean_true_p"] == pytest.approx(0.9)
    # ECE: |pred - y| per single-row bin
    assert out["ece"] == pytest.approx((0.15 + 0.35 + 0.35 + 0.15) / 4)


@pytest.mark.slow
def test_every_method_end_to_end_on_a_tiny_log(bench, tmp_path):
    log = bench.ensure_log(4000, tmp_path, workers=1)
    meta = read_ad_log_meta(log)
    assert meta["counts"] == {"pu": 2000, "exposure": 2000, "eval": 50_000}
    theta = bench.fit_theta(meta, batch_size=256, epochs=1, lr=0.01)
    theta.save(tmp_path / "theta.keras")
    for method in bench.METHODS:
        out = bench.run_method(log, method, chunks=2, batch_size=256, lr=0.01, val_rows=300,
                               theta_path=str(tmp_path / "theta.keras"))
        assert out["steps"] > 0 and out["train_rows"] == out["steps"] * 256
        assert out["best_chunk"] in (1, 2) and len(out["val_exposure_nll"]) == 2
        assert np.isfinite(out["val_exposure_nll"]).all()
        e = out["eval"]
        assert 0.0 < e["mae"] < 1.0 and 0.0 < e["auc"] < 1.0 and np.isfinite(e["log_loss"])
        assert out["p_hat"].shape == (50_000,) and out["peak_rss_mb"] > 0


@pytest.mark.slow
def test_main_writes_report_plot_and_json(bench, tmp_path):
    out = tmp_path / "res" / "ads.md"
    bench.main(["--rows", "3000", "--log-dir", str(tmp_path / "logs"), "--out", str(out),
                "--batch-size", "256", "--chunks", "2", "--val-rows", "300", "--lr", "0.01",
                "--lrs", "0.01", "0.05",
                "--throughput-steps", "2", "--throughput-repeats", "1", "--workers", "2"])
    text = out.read_text()
    for needle in ("## Accuracy at 3,000 logged rows", "## Training throughput",
                   "## Peak resident memory", "## Targets", "ADPUE MAE to p"):
        assert needle in text
    assert (tmp_path / "res" / "ads_calibration.png").stat().st_size > 1000
    data = json.loads((tmp_path / "res" / "ads.json").read_text())
    assert set(data["results"]["3000"]["methods"]) == set(bench.METHODS)
    assert set(data["throughput"]) >= set(bench.METHODS)
    for m in bench.METHODS:  # each ran at both rates and kept the lower best score
        run = data["results"]["3000"]["methods"][m]
        cands = run["lr_candidates"]
        assert set(cands) == {"0.01", "0.05"}
        assert run["lr"] == float(min(cands, key=lambda lr: cands[lr]["best_val"]))
    assert "Learning rates tried at 3,000 logged rows" in text


def test_the_learning_rate_is_chosen_by_the_validation_score_alone(bench):
    runs = {"0.01": {"val_exposure_nll": [0.40, 0.31, 0.33], "eval": {"mae": 0.9}},
            "0.03": {"val_exposure_nll": [0.35, 0.32], "eval": {"mae": 0.1}},
            "0.1": {"val_exposure_nll": [0.31, 0.50], "eval": {"mae": 0.0}}}
    assert bench.best_val(runs["0.01"]) == 0.31
    # lowest best score wins; a tie goes to the first given; the evaluation MAE is never read
    assert bench.choose_lr(runs) is runs["0.01"]
    # a diverged rate is never kept, and is reported as such
    runs["0.001"] = {"method": "ips", "lr": 0.001, "diverged": "exploded"}
    for r, lr in zip(runs.values(), (0.01, 0.03, 0.1)):
        r.update(method="ips", lr=lr, best_chunk=1, eval={"mae": 0.1, "auc": 0.7})
    kept = bench.with_candidates(runs)
    assert kept["lr"] == 0.01 and kept["lr_candidates"]["0.001"] == {"diverged": "exploded"}
    with pytest.raises(SystemExit, match="every learning rate diverged"):
        bench.with_candidates({"0.1": runs["0.001"]})
