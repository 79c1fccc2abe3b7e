"""benchmarks.fit_pue_cost on a tiny log, so that its options cannot rot."""

from __future__ import annotations

import json
import math

import pytest


@pytest.mark.slow
def test_candidates_refit_policy_and_seed_reach_the_run(tmp_path):
    from benchmarks import fit_pue_cost

    out = tmp_path / "cost.json"
    res = fit_pue_cost.main(["--pu", "600", "--e", "300", "--epochs", "1", "--policy", "cloglog",
                             "--seed", "1", "--candidates", "bce_w,ratio", "--no-refit",
                             "--out", str(out)])
    assert json.loads(out.read_text()) == json.loads(json.dumps(res))
    assert (res["policy"], res["seed"], res["refit"]) == ("cloglog", 1, False)
    assert res["candidates"] == ["bce_w", "ratio"] and res["choice"] in ("bce_w", "ratio")
    assert res["fit_pue_seconds"]["refit"] < 0.5 * res["fit_pue_seconds"]["select"]
    for key in ("mae_to_p", "kl_to_p"):
        assert set(res[key]) == {"bce_w_fit", "fit_pue"}
        assert all(math.isfinite(v) and v >= 0.0 for v in res[key].values())
    assert all(v <= 1.0 for v in res["mae_to_p"].values())
