"""Where the exposure log barely reaches: fit_pue's error there, and what it reports.

A simulator none of the library's estimators was tuned on: ``x ~ N(0, I_8)``,
a non-linear ``p(y=1|x) = σ(z)``, ``z = -1 + x₁ + sin(2x₂) + 0.8·x₃x₄ - 0.5·|x₅|``,
and three logging policies:

* ``targeted``: ``θ = σ(-0.5 + 1.5·z)``, exposure where positives are likely (an
  ads policy ranking by a good score): about 40 % of rows have ``θ < 0.05``;
* ``threshold``: ``θ = 0.9`` where an old score ``z + 0.5·x₆ > 0``, else ``0.1``;
* ``other``: ``θ = 1 - exp(-exp(0.7·x₆ - 0.3·x₇))``, on features ``p`` does not read.

For each policy, net (``linear``: misspecified; ``mlp``: 32-32) and seed it runs
``adp.fit_pue`` on 20,000 PU + 20,000 E rows (``epochs=10``, defaults otherwise)
and measures on 20,000 fresh rows the MAE to the true ``p`` of the returned
model, of ``bce_w`` (BCE on ``W``) and of the best candidate, on every row and
on the rows with ``θ < 0.05`` and ``θ ≥ 0.05`` separately, beside the share of
barely exposed rows fit_pue reports (``theta_calibration["low_exposure_share"]``)
and whether it warned.

Usage::

    python -m benchmarks.overlap                       # writes benchmarks/results/overlap.{md,json}
    python -m benchmarks.overlap --seeds 1 --rows 5000 --out /tmp/overlap.md   # a quick look
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras
import numpy as np

import adpue_tf as adp
from adpue_tf.experiments.helpers import sigmoid
from adpue_tf.recommend.overlap import LOW_EXPOSURE
from benchmarks.common import RESULTS, command_line, fmt, provenance_block, table

POLICIES = ("targeted", "threshold", "other")
NETS: dict[str, Callable[[int], keras.Model]] = {
    "linear": lambda d: keras.Sequential([keras.Input((d,)), keras.layers.Dense(1)]),
    "mlp": lambda d: keras.Sequential([keras.Input((d,)), keras.layers.Dense(32, "relu"),
                                       keras.layers.Dense(32, "relu"), keras.layers.Dense(1)]),
}
DIM = 8


def draw(n: int, policy: str, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray,
                                                                 np.ndarray]:
    """``(x, p, θ)`` for ``n`` rows of the simulator under ``policy``."""
    x = rng.normal(size=(n, DIM)).astype(np.float32)
    z = (-1.0 + x[:, 0] + np.sin(2 * x[:, 1]) + 0.8 * x[:, 2] * x[:, 3]
         - 0.5 * np.abs(x[:, 4])).astype(np.float64)
    if policy == "targeted":
        theta = sigmoid(-0.5 + 1.5 * z)
    elif policy == "threshold":
        theta = np.where(z + 0.5 * x[:, 5] > 0, 0.9, 0.1)
    elif policy == "other":
        theta = 1.0 - np.exp(-np.exp(0.7 * x[:, 5] - 0.3 * x[:, 6]))
    else:
        raise ValueError(f"`policy` must be one of {list(POLICIES)}, got {policy!r}.")
    return x, sigmoid(z), theta


def run_one(policy: str, net: str, seed: int, rows: int, epochs: int) -> dict:
    """One fit_pue run and its errors to the truth, overall and by exposure region."""
    rng = np.random.default_rng(seed)
    x, p, theta = draw(2 * rows, policy, rng)
    y, e = rng.random(2 * rows) < p, rng.random(2 * rows) < theta
    w = (y & e)[:rows].astype(np.float32)
    start = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fit = adp.fit_pue(lambda: NETS[net](DIM), x[:rows], w, x[rows:],
                          e[rows:].astype(np.float32), epochs=epochs, seed=seed, verbose=0)
    seconds = time.perf_counter() - start
    xt, pt, tt = draw(20_000, policy, np.random.default_rng(10_000 + seed))
    low = tt < LOW_EXPOSURE

    def errors(model: keras.Model) -> dict[str, float]:
        err = np.abs(sigmoid(np.asarray(model.predict(xt, batch_size=8192, verbose=0))
                              .ravel()) - pt)
        return {"all": float(err.mean()),
                "low": float(err[low].mean()) if low.any() else float("nan"),
                "exposed": float(err[~low].mean())}

    cands = {name: errors(m) for name, m in fit.candidates.items()}
    best = min(cands, key=lambda n: cands[n]["all"])
    return {"policy": policy, "net": net, "seed": seed, "seconds": seconds,
            "choice": fit.choice, "chosen": errors(fit.model), "candidates": cands,
            "best": best, "true_low_share": float(low.mean()),
            "reported_low_share": fit.theta_calibration.get("low_exposure_share"),
            "warned": any("of the held-out rows" in str(c.message) for c in caught)}


def report(results: Sequence[dict], command: str, provenance: str) -> str:
    """The Markdown results file."""
    keys = sorted({(r["policy"], r["net"]) for r in results},
                  key=lambda k: (POLICIES.index(k[0]), k[1]))
    rows = []
    for policy, net in keys:
        rs = [r for r in results if (r["policy"], r["net"]) == (policy, net)]

        def mean(get: Callable[[dict], float], rs: list[dict] = rs) -> str:
            return fmt(float(np.mean([get(r) for r in rs])))
        rows.append([policy, net, str(len(rs)), fmt(np.mean([r["true_low_share"] for r in rs]), 3),
                     fmt(np.mean([r["reported_low_share"] for r in rs]), 3),
                     f"{sum(r['warned'] for r in rs)}/{len(rs)}",
                     mean(lambda r: r["chosen"]["all"]),
                     mean(lambda r: r["candidates"]["bce_w"]["all"]),
                     mean(lambda r: r["candidates"][r["best"]]["all"]),
                     mean(lambda r: r["chosen"]["exposed"]),
                     mean(lambda r: r["candidates"]["bce_w"]["exposed"]),
                     mean(lambda r: r["chosen"]["low"]),
                     mean(lambda r: r["candidates"]["bce_w"]["low"]),
                     ", ".join(r["choice"] for r in rs), ", ".join(r["best"] for r in rs)])
    head = ["policy", "net", "seeds", "share θ < 0.05 (true)", "reported (θ̂)", "warned",
            "MAE fit_pue", "MAE bce_w", "MAE best candidate", "fit_pue, θ ≥ 0.05",
            "bce_w, θ ≥ 0.05", "fit_pue, θ < 0.05", "bce_w, θ < 0.05", "choices",
            "best candidates"]
    seconds = np.mean([r["seconds"] for r in results])
    return "\n".join([
        "# Overlap: fit_pue where the exposure log barely reaches", "", provenance,
        (__doc__ or "").split("Usage::")[0].strip(), "",
        "## Mean over seeds (MAE to the true p on 20,000 fresh rows)", "",
        table(head, rows), "", f"fit_pue took {seconds:.0f} s a run on average.", ""])


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--policies", default=",".join(POLICIES), help="logging policies")
    ap.add_argument("--nets", default="linear,mlp", help="networks")
    ap.add_argument("--seeds", type=int, default=3, help="seeds per setting (0, 1, ...)")
    ap.add_argument("--rows", type=int, default=20_000, help="PU rows and E rows each")
    ap.add_argument("--epochs", type=int, default=10, help="fit_pue's epochs")
    ap.add_argument("--out", default=str(RESULTS / "overlap.md"),
                    help="the Markdown report (a .json beside it)")
    args = ap.parse_args(argv)
    command = command_line("benchmarks.overlap", argv)
    prov_md, prov = provenance_block(command, seeds=f"0-{args.seeds - 1}")
    out, results = Path(args.out), []
    for policy in args.policies.split(","):
        for net in args.nets.split(","):
            for seed in range(args.seeds):
                r = run_one(policy, net, seed, args.rows, args.epochs)
                results.append(r)
                print(f"{policy} {net} seed {seed}: {r['choice']} MAE "
                      f"{r['chosen']['all']:.4f}, bce_w {r['candidates']['bce_w']['all']:.4f}, "
                      f"reported share {r['reported_low_share']:.3f}, {r['seconds']:.0f} s",
                      flush=True)
                out.with_suffix(".json").write_text(json.dumps(
                    {"provenance": prov, "results": results}, indent=1))
                out.write_text(report(results, command, prov_md))
    print(out.read_text())


if __name__ == "__main__":
    main()
