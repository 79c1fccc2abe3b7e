"""Ads at scale: an embedding model trained from TFRecord shards of a simulated ad log.

Run from the repository root::

    python -m benchmarks.ads_scale --quick                      # 100k rows, a few minutes
    python -m benchmarks.ads_scale --rows 1000000 10000000 --policies logistic cloglog

The same net (:func:`benchmarks.ads_scale_log.build_net`) is trained with BCE
on ``W``, IPS, direct ADPUE and ``DebiasedModel`` streaming from the shards
(:mod:`benchmarks.ads_scale_methods`), and by ``adp.fit_pue`` (``recommended``)
on the same rows; each (log, method, learning rate) in its own subprocess,
which reports its peak memory. The evaluation set's ``Y`` and true ``p`` only
score the results (:mod:`benchmarks.ads_scale_report`). Logs are written once
to ``--log-dir`` and reused. Writes ``--out`` and, beside it, ``ads_scale.json``
and ``ads_scale_calibration.png``.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from adpue_tf.losses import is_divergence  # noqa: E402
from adpue_tf.synthetic import read_ad_log_meta  # noqa: E402
from benchmarks.ads_scale_log import POLICIES, ensure_log, eval_data, fit_theta  # noqa: E402
from benchmarks.ads_scale_methods import (  # noqa: E402
    METHODS,
    peak_rss_mb,
    run_method,
    run_recommended,
    scores,
    stream_memory,
    throughput,
)
from benchmarks.ads_scale_report import plot, report  # noqa: E402
from benchmarks.common import (  # noqa: E402
    RESULTS,
    command_line,
    provenance_block,
    provenance_markdown,
    sha256_file,
)

__all__ = ["best_val", "choose_lr", "main", "parse_args", "with_candidates"]

RESULT = "RESULT "
ROOT = Path(__file__).resolve().parents[1]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The options; ``--help`` shows every default."""
    p = argparse.ArgumentParser(prog="python -m benchmarks.ads_scale",
                                description=__doc__.split("\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--rows", type=int, nargs="+", default=[1_000_000, 10_000_000],
                   help="logged rows (PU + exposure) of each log")
    p.add_argument("--policies", nargs="+", choices=POLICIES, default=["logistic"],
                   help="logging policies: a log per policy and size")
    p.add_argument("--base-rate", type=float, default=None,
                   help="the logs' mean p(y=1|x) (the simulator's base_rate, e.g. 0.1); "
                        "None: its default conversion intercept")
    p.add_argument("--methods", nargs="+", choices=METHODS, default=list(METHODS),
                   help="methods to run")
    p.add_argument("--epochs", type=int, default=1, help="passes over the training shards")
    p.add_argument("--chunks", type=int, default=8,
                   help="Keras epochs per streamed run (model selection after each)")
    p.add_argument("--batch-size", type=int, default=4096, help="rows per batch")
    p.add_argument("--lr", type=float, default=0.03,
                   help="Adam learning rate of θ̂, of fit_pue and of the throughput run")
    p.add_argument("--lrs", type=float, nargs="+", default=[0.01, 0.03],
                   help="learning rates tried per streamed method (lowest val_exposure_nll "
                        "keeps)")
    p.add_argument("--val-rows", type=int, default=50_000, help="held-out rows of each log")
    p.add_argument("--eval-rows", type=int, default=50_000, help="rows of the evaluation set")
    p.add_argument("--max-train-rows", type=int, default=None,
                   help="cap on the rows each method trains on (None: full passes)")
    p.add_argument("--refresh-every", type=int, default=1,
                   help="chunks per alternate-learning round of debiased")
    p.add_argument("--steps-per-execution", type=int, default=None,
                   help="Keras steps_per_execution of the streamed methods (None: "
                        "DebiasedModel's 'auto' rule, 32 on a GPU and 1 on a CPU)")
    p.add_argument("--parallel", type=int, default=1, help="method subprocesses at once")
    p.add_argument("--throughput-steps", type=int, default=100,
                   help="steps per timed unit of the round-robin throughput run (0: none)")
    p.add_argument("--throughput-repeats", type=int, default=5, help="timed units per method")
    p.add_argument("--log-dir", default=str(Path(tempfile.gettempdir()) / "adpue_ads_scale"),
                   help="where the logs are written or found")
    p.add_argument("--workers", type=int, default=4, help="processes writing a log")
    p.add_argument("--seed", type=int, default=0,
                   help="seed of the logs' generator (a log folder per seed: `_seed{S}` unless "
                        "0), every net's initialisation, θ̂'s fit, fit_pue and the shuffles")
    p.add_argument("--out", default=str(RESULTS / "ads_scale.md"), help="the Markdown report")
    p.add_argument("--note", default="", help="a sentence on the size, printed in the report")
    p.add_argument("--quick", action="store_true",
                   help="100k logged rows, batch 1024, 4 chunks, short throughput")
    p.add_argument("--from-json", metavar="JSON", default=None,
                   help="re-render the report and plot of an earlier run's JSON")
    for hidden in ("--child", "--log", "--theta"):
        p.add_argument(hidden, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.quick:
        args.rows, args.batch_size, args.chunks = [100_000], 1024, 4
        args.val_rows = min(args.val_rows, 5_000)
        args.throughput_steps, args.throughput_repeats = 20, 3
    return args


def _child(args: argparse.Namespace) -> None:
    kw: dict[str, Any] = dict(epochs=args.epochs, batch_size=args.batch_size, lr=args.lr,
                              max_train_rows=args.max_train_rows, seed=args.seed)
    if args.child == "theta":
        start = time.perf_counter()
        net = fit_theta(read_ad_log_meta(args.log), batch_size=args.batch_size,
                        epochs=args.epochs, lr=args.lr, seed=args.seed)
        net.save(args.theta)
        out = {"theta_s": time.perf_counter() - start,
               "peak_rss_mb": peak_rss_mb()}
    elif args.child == "memory":
        out = stream_memory(args.log, batch_size=args.batch_size)
    elif args.child == "throughput":
        out = throughput(args.log, steps=args.throughput_steps, repeats=args.throughput_repeats,
                         batch_size=args.batch_size, lr=args.lr, theta_path=args.theta)
    else:
        try:
            if args.child == "recommended":
                out = run_recommended(args.log, **kw)
            else:
                out = run_method(args.log, args.child, chunks=args.chunks,
                                 val_rows=args.val_rows, theta_path=args.theta,
                                 refresh_every=args.refresh_every,
                                 steps=args.steps_per_execution, **kw)
        except tf.errors.InvalidArgumentError as err:
            if not is_divergence(err):
                raise
            # the library stopped a diverging fit: a result of this learning rate, not a crash
            out = {"method": args.child, "lr": args.lr, "diverged": str(err).splitlines()[-1]}
        else:
            np.save(Path(args.theta).with_name(f"p_hat_{args.child}_lr{args.lr:g}.npy"),
                    out.pop("p_hat"))
    print(RESULT + json.dumps(out), flush=True)


def _in_subprocess(args: argparse.Namespace, child: str, log: Path, theta: Path,
                   lr: float | None = None) -> dict:
    cmd = [sys.executable, "-m", "benchmarks.ads_scale", "--child", child, "--log", str(log),
           "--theta", str(theta), "--epochs", str(args.epochs), "--chunks", str(args.chunks),
           "--batch-size", str(args.batch_size), "--lr", str(args.lr if lr is None else lr),
           "--val-rows", str(args.val_rows), "--throughput-steps", str(args.throughput_steps),
           "--throughput-repeats", str(args.throughput_repeats),
           "--refresh-every", str(args.refresh_every), "--seed", str(args.seed)]
    if args.max_train_rows is not None:
        cmd += ["--max-train-rows", str(args.max_train_rows)]
    if args.steps_per_execution is not None:
        cmd += ["--steps-per-execution", str(args.steps_per_execution)]
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    lines = [x for x in proc.stdout.splitlines() if x.startswith(RESULT)]
    if proc.returncode or not lines:
        sys.stderr.write(proc.stderr[-5000:])
        raise SystemExit(f"{child} on {log.name} failed (exit {proc.returncode}).")
    out = json.loads(lines[-1][len(RESULT):])
    shown = {**{k: v for k, v in out.items() if isinstance(v, float)}, **out.get("eval", {})}
    print(f"  {log.name} {child:11s} {time.perf_counter() - start:6.0f} s  " + " ".join(
        f"{k}={v:.4g}" for k, v in shown.items() if isinstance(v, float)), flush=True)
    return out


def best_val(run: dict[str, Any]) -> float:
    """A run's selection score: its lowest ``val_exposure_nll`` (inf if it diverged)."""
    return float("inf") if "diverged" in run else float(min(run["val_exposure_nll"]))


def choose_lr(candidates: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The run (one per learning rate) with the lowest score; ties go to the first given.

    Never looks at the evaluation set.
    """
    return min(candidates.values(), key=best_val)


def with_candidates(candidates: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The chosen run, with a summary of every candidate under ``lr_candidates``.

    When every learning rate diverged, the run says so (``diverged``) and has no scores.
    """
    chosen = dict(choose_lr(candidates))
    if "diverged" in chosen:  # a result to report, not a reason to lose the other methods'
        chosen["diverged"] = "at every learning rate tried"
    chosen["lr_candidates"] = {
        lr: {"diverged": c["diverged"]} if "diverged" in c else
        {"best_val": best_val(c), "best_chunk": c["best_chunk"], "mae": c["eval"]["mae"],
         "auc": c["eval"]["auc"]} for lr, c in candidates.items()}
    return chosen


def _run(args: argparse.Namespace, method: str, log: Path, theta: Path) -> dict[str, Any]:
    """fit_pue once at ``--lr``; a streamed method at every rate of ``--lrs``."""
    if method == "recommended":
        out = _in_subprocess(args, method, log, theta)
        if "diverged" in out:
            raise SystemExit(f"recommended on {log.name}: {out['diverged']}")
        return out
    return with_candidates({f"{lr:g}": _in_subprocess(args, method, log, theta, lr=lr)
                            for lr in args.lrs})


def _one_log(args: argparse.Namespace, log: Path, rows: int, policy: str) -> dict[str, Any]:
    theta = log / "theta.keras"
    meta = read_ad_log_meta(log)
    res: dict[str, Any] = {"rows": rows, "policy": policy, "log": log.name,
                           "seed": meta.get("seed", 0), "config": meta["config"],
                           "counts": meta["counts"], "methods": {}}
    res["theta"] = _in_subprocess(args, "theta", log, theta)
    res["memory"] = _in_subprocess(args, "memory", log, theta)
    with concurrent.futures.ThreadPoolExecutor(max(1, args.parallel)) as pool:
        done = {m: pool.submit(_run, args, m, log, theta) for m in args.methods}
        res["methods"] = {m: f.result() for m, f in done.items()}
    res["theta_mae"] = next((x["theta_mae"] for x in res["methods"].values()
                             if "theta_mae" in x), None)
    _, truth = eval_data(meta, 8192)
    res["truth"] = scores(truth["p_y"], truth)
    res["data_sha256"] = {f"{log.name}/{Path(f).relative_to(log)}": sha256_file(f)
                          for part in ("pu", "exposure", "eval") for f in meta["files"][part]}
    return res


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark (or one ``--child`` part of it); write the report."""
    args = parse_args(argv)
    if args.child:
        _child(args)
        return 0
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    if args.from_json:
        data = json.loads(Path(args.from_json).read_text())  # its provenance, not today's
        _write(args, data["results"], data["throughput"], data["command"], out,
               data.get("provenance"))
        return 0
    command = command_line("benchmarks.ads_scale", argv)
    results: dict[str, Any] = {}
    logs: dict[str, Path] = {}
    for policy in args.policies:
        for rows in sorted(args.rows):
            log = ensure_log(rows, Path(args.log_dir), args.workers, policy=policy,
                             eval_rows=args.eval_rows, base_rate=args.base_rate,
                             seed=args.seed)
            print(f"{rows:,} logged rows, {policy} policy", flush=True)
            results[log.name], logs[log.name] = _one_log(args, log, rows, policy), log
            out.with_suffix(".partial.json").write_text(json.dumps(results, default=float))
    tp = None
    if args.throughput_steps > 0:
        big = max(results, key=lambda k: results[k]["rows"])
        tp = _in_subprocess(args, "throughput", logs[big], logs[big] / "theta.keras")
        tp["log"] = big
    _write(args, results, tp, command, out)
    out.with_suffix(".partial.json").unlink(missing_ok=True)
    return 0


def _write(args: argparse.Namespace, results: dict, tp: dict | None, command: str,
           out: Path, prov: dict[str, Any] | None = None) -> None:
    """Write the report, the plot and the JSON; ``prov``: the provenance of an earlier run."""
    if prov is None:
        data = {k: v for r in results.values() for k, v in r.get("data_sha256", {}).items()}
        block, prov = provenance_block(command, seeds=f"{args.seed} (the logs' generator and "
                                       "rows, every net's initialisation, θ̂'s fit, fit_pue, "
                                       "the shuffles)", data=data)
    else:
        block = "## Provenance\n\n" + provenance_markdown(prov) + "\n"
    text = report(args, results, tp, block)
    out.write_text(text)
    plot(results, out.with_name(out.stem + "_calibration.png"))
    out.with_suffix(".json").write_text(json.dumps(
        {"command": command, "provenance": prov, "results": results, "throughput": tp},
        indent=1, default=float))
    print(text)


if __name__ == "__main__":
    raise SystemExit(main())
