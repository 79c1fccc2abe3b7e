"""The snapshot's forward pass on the rows that read f† only, against every row, by batch size.

``adp.DebiasedModel`` runs its frozen snapshot only on the rows whose risk term
reads ``f†`` (for ADPUE the exposure rows with ``E = 0``): it takes their
indices (``tf.where``), gathers them from the features (``tf.gather``), runs
the snapshot, and scatters ``f†`` back into a column of the batch
(``tf.scatter_nd``). This script times exactly those operations against the
snapshot's pass over every row, in one process, alternating short chunks of
calls of the two traced functions, for several batch sizes and MLP widths, on
real PUE batches of :func:`adpue_tf.data.pue_dataset` (the selected share is
what those batches hold). It answers whether a gather costs more than it saves
on small batches, which decides when the model gathers.

``--train-step`` times instead the whole compiled training step of the
variants of :mod:`benchmarks.throughput` (``bce``, ``adpue``,
``debiased_direct``, ``debiased``: one fit epoch each first, so that
``debiased`` reads the snapshot): Keras's ``train_function`` on batches held in
memory, without tf.data or callbacks, the variants alternating every
``--calls`` steps, so that a change in load lands on all of them alike.

Usage::

    python -m benchmarks.throughput_rows --threads 1            # CPU, compute only
    python -m benchmarks.throughput_rows --batch-sizes 16,64,512 --widths 64 --rounds 9
    python -m benchmarks.throughput_rows --threads 1 --train-step --batch-sizes 512 --widths 64 --calls 10 --rounds 100

Writes ``benchmarks/results/throughput_rows.md`` (``--out``) and prints it.
"""

from __future__ import annotations

import argparse
import datetime
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras
import tensorflow as tf

import adpue_tf as adp
from adpue_tf import synthetic
from benchmarks import throughput
from benchmarks.common import cpu_model as _cpu_model
from benchmarks.throughput import _mlp, set_threads  # the same MLP and thread setting

#: The variants whose whole training step ``--train-step`` times (bce first: the reference).
STEP_VARIANTS = ("bce", "adpue", "debiased_direct", "debiased")


def _functions(net: keras.Model, jit: bool):
    """(every row, selected rows): traced functions from (x, y) to the f† column."""
    @tf.function(jit_compile=jit)
    def full(x, y):
        return tf.sigmoid(tf.reshape(net(x, training=False), (-1,)))

    @tf.function(jit_compile=jit)
    def rows(x, y):
        keep = tf.logical_and(tf.equal(y[:, 2], float(int(adp.Source.E))), tf.equal(y[:, 1], 0.0))
        idx = tf.cast(tf.reshape(tf.where(keep), (-1,)), tf.int32)
        out = tf.sigmoid(tf.reshape(net(tf.gather(x, idx), training=False), (-1,)))
        return tf.scatter_nd(tf.expand_dims(idx, 1), out, tf.shape(y, out_type=tf.int32)[:1])

    return full, rows


def _time(fn, batches, calls: int) -> tuple[float, float]:
    """(wall, CPU) seconds per call of ``fn`` over ``calls`` calls cycling through ``batches``."""
    start, cpu = time.perf_counter(), time.process_time()
    for i in range(calls):
        out = fn(*batches[i % len(batches)])
    out.numpy()
    return ((time.perf_counter() - start) / calls, (time.process_time() - cpu) / calls)


def measure(args: argparse.Namespace) -> list[dict]:
    data = synthetic.synthetic_pue(args.rows, args.rows, dim=args.dim, seed=0)
    results = []
    for width in args.widths:
        net = _mlp(args.dim, seed=0, width=width)
        for bs in args.batch_sizes:
            ds = adp.data.pue_dataset(data.x_pu, data.w_pu, data.x_e, data.e_e,
                                      batch_size=bs, seed=0)
            batches = [(x, tf.cast(y, tf.float32)) for x, y in ds.take(16)]
            share = statistics.mean(
                float(tf.reduce_mean(tf.cast((y[:, 2] == 1.0) & (y[:, 1] == 0.0), tf.float32)))
                for _, y in batches)
            full, rows = _functions(net, args.jit)
            for fn in (full, rows):
                _time(fn, batches, 20)  # trace and warm up
            pairs = []
            for _ in range(args.rounds):
                pairs.append((_time(full, batches, args.calls), _time(rows, batches, args.calls)))
            med = statistics.median
            results.append({
                "width": width, "batch": bs, "share": share,
                "full_us": 1e6 * med(f[1] for f, _ in pairs),
                "rows_us": 1e6 * med(r[1] for _, r in pairs),
                "paired_cpu": med(f[1] / r[1] for f, r in pairs),
                "paired_wall": med(f[0] / r[0] for f, r in pairs),
            })
            print(results[-1], flush=True)
    return results


def measure_steps(args: argparse.Namespace) -> dict[str, list[tuple[float, float]]]:
    """(wall, CPU) seconds per step of each variant's train step, by chunk of ``--calls`` steps."""
    targs = throughput.parse_args(["--steps", "20", "--batch-size", str(args.batch_sizes[0]),
                                   "--width", str(args.widths[0]), "--dim", str(args.dim)])
    data = synthetic.synthetic_pue(args.rows, args.rows, dim=args.dim, seed=0)
    runs = {name: throughput._Run(name, targs, data) for name in STEP_VARIANTS}
    batches = {}
    for name, run in runs.items():
        run.epoch_once()  # builds and traces; debiased refreshes into its snapshot
        batches[name] = list(run.ds.take(16))
        for batch in batches[name]:
            run.model.train_function([batch])
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in runs}
    for r in range(args.rounds):
        for name, run in runs.items():
            step, chunk = run.model.train_function, batches[name]
            start, cpu = time.perf_counter(), time.process_time()
            for i in range(args.calls):
                logs = step([chunk[(r * args.calls + i) % len(chunk)]])
            float(logs["loss"])
            times[name].append(((time.perf_counter() - start) / args.calls,
                                (time.process_time() - cpu) / args.calls))
    return times


def report_steps(args: argparse.Namespace, times: dict) -> str:
    med = statistics.median
    lines = ["## The whole training step (`--train-step`)", "",
             "Generated by `python -m benchmarks.throughput_rows"
             + "".join(f" {a}" for a in sys.argv[1:]) + "`; "
             f"{datetime.datetime.now(datetime.UTC).strftime('%Y-%m-%d %H:%M')} UTC, "
             f"MLP {args.dim}-{args.widths[0]}-{args.widths[0]}-1, batch {args.batch_sizes[0]}, "
             f"{args.rounds} rounds of {args.calls} steps per variant. Paired: median over "
             "rounds of the reference's time over the variant's (< 1: slower).", "",
             "| variant | CPU µs/step | paired CPU to bce | paired wall to bce "
             "| paired CPU to adpue |", "|---|---:|---:|---:|---:|"]
    for name, pairs in times.items():
        ratio = {ref: (med(b[1] / v[1] for b, v in zip(times[ref], pairs)),
                       med(b[0] / v[0] for b, v in zip(times[ref], pairs)))
                 for ref in ("bce", "adpue")}
        lines.append(f"| `{name}` | {1e6 * med(c for _, c in pairs):.0f} | "
                     f"{ratio['bce'][0]:.3f} | {ratio['bce'][1]:.3f} | {ratio['adpue'][0]:.3f} |")
    snap = med(d[1] / s[1] for d, s in zip(times["debiased_direct"], times["debiased"]))
    lines += ["", f"`debiased` against `debiased_direct` (the snapshot's pass): paired CPU "
              f"{snap:.3f}."]
    return "\n".join(lines) + "\n"


def report(args: argparse.Namespace, results: list[dict]) -> str:
    lines = ["# The snapshot on the rows that read f† only: gather + forward + scatter vs "
             "forward on every row", "",
             "Generated by `python -m benchmarks.throughput_rows"
             + "".join(f" {a}" for a in sys.argv[1:]) + "`; see benchmarks/README.md.", "",
             f"CPU: {_cpu_model()}, {os.cpu_count()} logical cores; TensorFlow {tf.__version__} "
             f"(threads intra/inter: "
             f"{tf.config.threading.get_intra_op_parallelism_threads() or 'default'}/"
             f"{tf.config.threading.get_inter_op_parallelism_threads() or 'default'}), "
             f"Keras {keras.__version__}; jit_compile={args.jit}; "
             f"{datetime.datetime.now(datetime.UTC).strftime('%Y-%m-%d %H:%M')} UTC.", "",
             f"MLP {args.dim}-W-W-1 (ReLU), forward only (the snapshot's pass); PUE batches of "
             f"`pue_dataset(seed=0)` over `synthetic_pue({args.rows}, {args.rows}, "
             f"dim={args.dim})`; {args.rounds} rounds of {args.calls} calls of each function, "
             "alternating. CPU µs per call: median over rounds of process CPU time; speed-up: "
             "median over rounds of the every-row / selected-rows time ratio (> 1: the "
             "gather pays).", "",
             "| width W | batch | selected share | every row, CPU µs | selected rows, CPU µs "
             "| speed-up (CPU) | speed-up (wall) |",
             "|---:|---:|---:|---:|---:|---:|---:|"]
    for r in results:
        lines.append(f"| {r['width']} | {r['batch']} | {r['share']:.2f} | {r['full_us']:.0f} | "
                     f"{r['rows_us']:.0f} | {r['paired_cpu']:.2f} | {r['paired_wall']:.2f} |")
    return "\n".join(lines) + "\n"


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batch-sizes", default="16,32,64,128,512,4096")
    p.add_argument("--widths", default="64,512")
    p.add_argument("--dim", type=int, default=32)
    p.add_argument("--rows", type=int, default=50_000, help="rows of each of PU and E")
    p.add_argument("--rounds", type=int, default=9)
    p.add_argument("--calls", type=int, default=100, help="calls per function per round")
    p.add_argument("--jit", action="store_true", help="jit_compile=True (XLA)")
    p.add_argument("--threads", type=int, default=0, help="TensorFlow threads (0: default)")
    p.add_argument("--train-step", action="store_true",
                   help="time the whole train step of bce, adpue, debiased_direct, debiased "
                   "(first batch size and width)")
    p.add_argument("--out", default=str(Path(__file__).parent / "results" / "throughput_rows.md"))
    args = p.parse_args(argv)
    args.batch_sizes = [int(v) for v in args.batch_sizes.split(",")]
    args.widths = [int(v) for v in args.widths.split(",")]
    return args


def main(argv=None) -> None:
    args = parse_args(argv)
    if args.threads:
        set_threads(args.threads)
    text = report_steps(args, measure_steps(args)) if args.train_step else report(
        args, measure(args))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(text)
    print(text)


if __name__ == "__main__":
    main()
