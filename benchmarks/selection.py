"""Which held-out score ranks fit_pue's candidates right? Known truth, two exposure mechanisms.

For each setting (exposure mechanism × network × seed) it runs
``adp.fit_pue(..., refit=False)`` on synthetic PU and E rows with known
``p(y=1|x)`` and compares, over the candidates (each trained on the training
part), two observable held-out scores with the truth:

* ``brier``: the exposure Brier score ``mean_E[E·f²] - 2·mean_PU[W·f]``
  (fit_pue's rule; no exposure model);
* ``nll``: the NLL of ``W`` under ``σ(z)·θ̂`` (``θ̂`` the same network trained on
  the E rows): leans on ``θ̂``;
* ``hybrid1``/``hybrid2``: the Brier score, with the candidates within 1 or 2
  standard errors of the best decided by the NLL;
* ``fit_pue_rule``: fit_pue's own rule (``adp.recommend.choose``, ``tolerance`` 2):
  ``hybrid2``, where Ratio (``q̂/θ̂``, which the NLL under the same ``θ̂`` cannot
  judge) takes part only as the best by the Brier score.

Truth: the mean absolute error of each candidate to ``p`` on 20,000 fresh rows.
For each score: the regret of its choice (MAE of the chosen candidate minus the
best candidate's MAE) and the Spearman rank correlation with the true MAE.

Usage::

    python -m benchmarks.selection                    # writes benchmarks/results/selection.{md,json}
    python -m benchmarks.selection --seeds 1 --rows 1000 --out /tmp/sel.md   # a quick look
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras
import numpy as np

import adpue_tf as adp
from adpue_tf.experiments.helpers import sigmoid

NETS = {
    "linear": lambda d: keras.Sequential([keras.Input((d,)), keras.layers.Dense(1)]),
    "mlp": lambda d: keras.Sequential([keras.Input((d,)), keras.layers.Dense(32, "relu"),
                                       keras.layers.Dense(32, "relu"), keras.layers.Dense(1)]),
}


def _ranks(v: np.ndarray) -> np.ndarray:
    return np.argsort(np.argsort(v)).astype(float)


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    """Spearman's rank correlation (no ties expected among float scores)."""
    return float(np.corrcoef(_ranks(a), _ranks(b))[0, 1])


def run_one(exposure: str, net: str, seed: int, rows: int, dim: int, epochs: int) -> dict:
    data = adp.synthetic.synthetic_pue(rows, rows, dim=dim, seed=seed, exposure=exposure)
    test = adp.synthetic.synthetic_pue(20_000, 10, dim=dim, seed=10_000 + seed,
                                       exposure=exposure)
    start = time.perf_counter()
    fit = adp.fit_pue(lambda: NETS[net](dim), data.x_pu, data.w_pu, data.x_e, data.e_e,
                      epochs=epochs, seed=seed, verbose=0, refit=False, candidates="all")
    seconds = time.perf_counter() - start
    mae = {}
    for name, model in fit.candidates.items():
        p = sigmoid(np.asarray(model.predict(test.x_pu, batch_size=8192, verbose=0)).ravel())
        mae[name] = float(np.mean(np.abs(p - test.p_y_pu)))
    names = sorted(mae)
    truth = np.array([mae[n] for n in names])
    out = {"exposure": exposure, "net": net, "seed": seed, "seconds": seconds, "mae": mae,
           "brier": fit.scores, "nll": fit.exposure_nll, "gap_se": fit.brier_gap_se,
           "nll_se": fit.nll_gap_se, "theta": fit.theta_calibration, "fit_pue_choice": fit.choice}
    for score in ("brier", "nll"):
        values = np.array([out[score][n] for n in names])
        out[f"{score}_spearman"] = spearman(values, truth)
    out["best"] = names[int(np.argmin(truth))]
    return rescore(out)


def rescore(r: dict) -> dict:
    """``r`` with each rule's choice and regret (re)computed from its stored scores."""
    best = min(r["mae"].values())
    for rule in RULES:
        r[f"{rule}_choice"] = choose(r, rule)
        r[f"{rule}_regret"] = r["mae"][r[f"{rule}_choice"]] - best
    return r


#: The selection rules compared: the Brier score alone, the NLL under θ̂ alone, the
#: Brier score with ties (within k standard errors) broken by the NLL, ``exemption``
#: (``hybrid2`` with Ratio only as the Brier best, without ``blend``: fit_pue's rule
#: before the blend) and fit_pue's rule (``exemption`` with ``blend`` kept unless
#: shown worse: ``adp.recommend.choose``'s ``prefer``).
RULES = ("brier", "nll", "hybrid1", "hybrid2", "exemption", "fit_pue_rule")


def choose(r: dict, rule: str) -> str:
    """The candidate ``rule`` picks from the held-out scores of one run."""
    names = sorted(r["brier"])
    if rule == "fit_pue_rule":
        return adp.recommend.choose(r["brier"], r["gap_se"], r["nll"], 2.0, order=names,
                                    prefer="blend", nll_se=r.get("nll_se"),
                                    derived=adp.recommend.DERIVED)
    if rule == "exemption":
        drop = lambda d: {n: v for n, v in d.items() if n != "blend"}  # noqa: E731
        return adp.recommend.choose(drop(r["brier"]), r["gap_se"], drop(r["nll"]), 2.0,
                                    order=[n for n in names if n != "blend"])
    if rule in ("brier", "nll"):
        return min(names, key=lambda n: r[rule][n])
    k = float(rule[len("hybrid"):])
    best = min(r["brier"].values())
    close = [n for n in names if r["brier"][n] - best <= k * r["gap_se"][n]]
    return min(close, key=lambda n: r["nll"][n])


def _mean(v: list[float]) -> str:
    return f"{np.mean(v):.4f}"


def report(results: list[dict], argv: list[str]) -> str:
    commit = results[0].get("commit") or subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    lines = ["# Selection: which held-out score ranks fit_pue's candidates right", "",
             f"Generated by `python -m benchmarks.selection {' '.join(argv)}` at commit "
             f"`{commit}` on {platform.machine()} ({os.cpu_count()} cores), Python "
             f"{platform.python_version()}, TensorFlow/Keras {keras.__version__}.", "",
             "Synthetic PU and E rows (`adp.synthetic.synthetic_pue`, x ~ N(0, I), "
             "p = σ(linear), θ logistic or complementary log-log in x); truth = MAE to p on "
             "20,000 fresh rows. Regret: MAE of the candidate a score chooses minus the best "
             "candidate's MAE. ρ: Spearman correlation of the score with the true MAE over "
             "the candidates.", "",
             "## Per setting (mean over seeds)", "",
             "| exposure | net | seeds | best MAE | regret: Brier | NLL(θ̂) | Brier, ties "
             "within 1 SE by NLL | within 2 SE | … Ratio only as the Brier best (no blend) | "
             "fit_pue's rule (… blend kept unless shown worse by 2 SE) | Brier ρ | NLL(θ̂) ρ | "
             "fit_pue's rule picks | θ̂ calibration error |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|"]
    keys = sorted({(r["exposure"], r["net"]) for r in results})
    for exposure, net in keys:
        rs = [r for r in results if (r["exposure"], r["net"]) == (exposure, net)]
        best = [min(r["mae"].values()) for r in rs]
        lines.append(
            f"| {exposure} | {net} | {len(rs)} | {_mean(best)} | "
            + " | ".join(_mean([r[f"{rule}_regret"] for r in rs]) for rule in RULES) + " | "
            f"{np.mean([r['brier_spearman'] for r in rs]):.2f} | "
            f"{np.mean([r['nll_spearman'] for r in rs]):.2f} | "
            f"{', '.join(r['fit_pue_rule_choice'] for r in rs)} | "
            f"{np.mean([r['theta']['calibration_error'] for r in rs]):.3f} |")
    lines += ["", "## MAE to the true p of every candidate (mean over seeds)", ""]
    names = sorted(results[0]["mae"])
    lines += ["| exposure | net | " + " | ".join(names) + " |",
              "|---|---|" + "---:|" * len(names)]
    for exposure, net in keys:
        rs = [r for r in results if (r["exposure"], r["net"]) == (exposure, net)]
        lines.append(f"| {exposure} | {net} | " + " | ".join(
            _mean([r["mae"][n] for r in rs]) for n in names) + " |")
    total = [r["seconds"] for r in results]
    lines += ["", f"fit_pue (refit=False) took {np.mean(total):.0f} s per setting on average.",
              ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--exposures", default="logistic,cloglog", help="exposure mechanisms")
    p.add_argument("--nets", default="linear,mlp", help="networks")
    p.add_argument("--seeds", type=int, default=3, help="seeds per setting")
    p.add_argument("--rows", type=int, default=3000, help="PU rows and E rows each")
    p.add_argument("--dim", type=int, default=6, help="features")
    p.add_argument("--epochs", type=int, default=20, help="fit_pue's epochs")
    p.add_argument("--out", default=str(Path(__file__).parent / "results" / "selection.md"),
                   help="the markdown report (a .json beside it)")
    p.add_argument("--report-only", action="store_true",
                   help="re-render the report from the .json beside --out (no training)")
    args = p.parse_args(argv)
    if args.report_only:
        out = Path(args.out)
        results = [rescore(r) for r in json.loads(out.with_suffix(".json").read_text())]
        out.write_text(report(results, results[0].get("argv", argv)))
        return
    results = []
    for exposure in args.exposures.split(","):
        for net in args.nets.split(","):
            for seed in range(args.seeds):
                r = run_one(exposure, net, seed, args.rows, args.dim, args.epochs)
                r["argv"], r["commit"] = argv, subprocess.run(
                    ["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                    text=True).stdout.strip()
                print(f"{exposure} {net} seed {seed}: best {r['best']}, brier picks "
                      f"{r['brier_choice']} (regret {r['brier_regret']:.4f}), nll picks "
                      f"{r['nll_choice']} (regret {r['nll_regret']:.4f}), {r['seconds']:.0f} s",
                      flush=True)
                results.append(r)
                out = Path(args.out)
                out.with_suffix(".json").write_text(json.dumps(results, indent=1))
                out.write_text(report(results, argv))
    print(report(results, argv))


if __name__ == "__main__":
    with adp.experiments.keep_compiled():  # the loop of fit_pue calls: each step traced once
        main()
