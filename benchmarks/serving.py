"""Serving cost: ``export_for_serving`` against Keras's own ``model.export``.

Two architectures, each trained briefly with ``adp.ADPUELoss`` and then exported
twice from the same weights:

* ``dense``: an MLP ``dim``-64-64-1 on one float32 input (``features``);
* ``ads``: a feature-dict model as ads rankers take it: ``user_id`` (int64,
  embedded), ``item`` (string, ``StringLookup`` + embedding), ``campaign``
  (int64, hashed), ``context`` (float32 vector), then 64-64-1.

``ours`` is ``adp.export_for_serving`` (its ``serving_default`` returns
``probability`` and ``logit``, with the shape check and the sigmoid in the
graph); ``keras`` is ``model.export(path, format="tf_saved_model")`` (its
``serving_default`` returns the raw output). Both SavedModels are loaded in
this one process with ``tf.saved_model.load`` and their ``serving_default``
signature is called with prepared tensors at batch 1 and 256. The variants
alternate call by call so drifting machine load affects them alike; each round
starts with untimed warm-up calls. The report gives p50/p99 latency per
call, rows/s at batch 256 (batch / median latency) and the ratio ours/keras
(target: p50 latency <= 1.05x, rows/s >= 1/1.05x).

Usage::

    python -m benchmarks.serving                        # writes benchmarks/results/serving.md
    python -m benchmarks.serving --calls 200 --rounds 5
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras
import numpy as np
import tensorflow as tf

import adpue_tf as adp
from benchmarks.common import RESULTS, command_line, provenance_block, table

BATCHES = (1, 256)
TARGET = 1.05
USERS, ITEMS = 1000, [f"item{i}" for i in range(200)]


def dense_net(dim: int) -> keras.Model:
    x = keras.Input((dim,), name="features")
    h = keras.layers.Dense(64, activation="relu")(x)
    h = keras.layers.Dense(64, activation="relu")(h)
    return keras.Model(x, keras.layers.Dense(1)(h))


def ads_net() -> keras.Model:
    user = keras.Input((1,), dtype="int64", name="user_id")
    item = keras.Input((1,), dtype="string", name="item")
    campaign = keras.Input((1,), dtype="int64", name="campaign")
    context = keras.Input((8,), name="context")
    parts = [keras.layers.Flatten()(keras.layers.Embedding(USERS, 16)(user)),
             keras.layers.Flatten()(keras.layers.Embedding(len(ITEMS) + 1, 16)(
                 keras.layers.StringLookup(vocabulary=ITEMS)(item))),
             keras.layers.Hashing(num_bins=64, output_mode="one_hot")(campaign),
             context]
    h = keras.layers.Dense(64, activation="relu")(keras.layers.Concatenate()(parts))
    h = keras.layers.Dense(64, activation="relu")(h)
    return keras.Model({"user_id": user, "item": item, "campaign": campaign,
                        "context": context}, keras.layers.Dense(1)(h))


def rows(kind: str, n: int, dim: int, rng: np.random.Generator):
    if kind == "dense":
        return rng.normal(size=(n, dim)).astype(np.float32)
    return {"user_id": rng.integers(0, USERS, (n, 1)).astype(np.int64),
            "item": np.array(rng.choice(ITEMS, (n, 1)), dtype=object),
            "campaign": rng.integers(0, 10**6, (n, 1)).astype(np.int64),
            "context": rng.normal(size=(n, 8)).astype(np.float32)}


def train(kind: str, dim: int, seed: int) -> keras.Model:
    """The net, fitted for one short epoch with ADPUELoss on PU + exposure rows."""
    keras.utils.set_random_seed(seed)
    net = dense_net(dim) if kind == "dense" else ads_net()
    rng = np.random.default_rng(seed)
    n = 2048
    x = rows(kind, n, dim, rng)
    y = np.concatenate([adp.pack_labels(adp.Source.PU, w=rng.integers(0, 2, n // 2)),
                        adp.pack_labels(adp.Source.E, e=rng.integers(0, 2, n // 2))])
    order = rng.permutation(n)  # every batch holds PU and exposure rows
    x = tf.constant(x[order]) if kind == "dense" else {
        k: tf.constant(v[order].astype(str) if v.dtype == object else v[order])
        for k, v in x.items()}
    net.compile(keras.optimizers.Adam(1e-3), loss=adp.ADPUELoss(from_logits=True))
    net.fit(tf.data.Dataset.from_tensor_slices((x, y[order])).batch(256), epochs=1, verbose=0)
    return net


def inputs(kind: str, batch: int, dim: int, signature) -> dict[str, tf.Tensor]:
    """Keyword arguments of ``signature`` for ``batch`` rows (dtypes as it declares)."""
    data = rows(kind, batch, dim, np.random.default_rng(batch))
    specs = signature.structured_input_signature[1]
    if kind == "dense":
        (name,) = specs
        return {name: tf.constant(data)}
    return {k: tf.constant(data[k].astype(str) if data[k].dtype == object else data[k],
                           dtype=specs[k].dtype) for k in specs}


def measure(fns: dict[str, object], args: dict[str, dict], calls: int, rounds: int,
            warmup: int) -> dict[str, np.ndarray]:
    """Per-call latencies (seconds) of each variant, alternating call by call.

    Each round warms every variant up, then times ``calls`` calls of each,
    interleaved (the order flips every call), so load from elsewhere on the
    machine falls on both alike.
    """
    times: dict[str, list[float]] = {v: [] for v in fns}
    names = list(fns)
    for _ in range(rounds):
        for variant, fn in fns.items():
            for _ in range(warmup):
                fn(**args[variant])
        for i in range(calls):
            for variant in (names if i % 2 == 0 else names[::-1]):
                fn, kwargs = fns[variant], args[variant]
                start = time.perf_counter()
                out = fn(**kwargs)
                for value in out.values():
                    value.numpy()
                times[variant].append(time.perf_counter() - start)
    return {v: np.array(t) for v, t in times.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.serving",
                                     description=__doc__.splitlines()[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--calls", type=int, default=500, help="timed calls per round")
    parser.add_argument("--rounds", type=int, default=10, help="rounds per model and batch")
    parser.add_argument("--warmup", type=int, default=20, help="untimed calls per round")
    parser.add_argument("--dim", type=int, default=32, help="features of the dense model")
    parser.add_argument("--out", default=str(RESULTS / "serving.md"), help="the report")
    args = parser.parse_args(argv)
    tf.config.threading.set_inter_op_parallelism_threads(1)  # as a serving replica pins it
    work = Path(tempfile.mkdtemp(prefix="adpue-serving-bench-"))
    block, _ = provenance_block(command_line("benchmarks.serving", argv),
                                seeds="0 (the training data and the nets)")
    start, load = time.monotonic(), os.getloadavg()[0]
    rows = []
    try:
        for kind in ("dense", "ads"):
            net = train(kind, args.dim, seed=0)
            ours = adp.export_for_serving(net, str(work / kind / "ours"))
            theirs = str(work / kind / "keras")
            net.export(theirs, format="tf_saved_model", verbose=False)
            fns = {"ours": tf.saved_model.load(ours).signatures["serving_default"],
                   "keras": tf.saved_model.load(theirs).signatures["serving_default"]}
            for batch in BATCHES:
                kwargs = {v: inputs(kind, batch, args.dim, fn) for v, fn in fns.items()}
                got = {v: fn(**kwargs[v]) for v, fn in fns.items()}
                logit = got["ours"]["logit"].numpy()
                (raw,) = got["keras"].values()
                assert np.allclose(logit, raw.numpy().reshape(-1, 1), atol=1e-5), "outputs differ"
                lat = measure(fns, kwargs, args.calls, args.rounds, args.warmup)
                p50 = {v: float(np.percentile(t, 50)) for v, t in lat.items()}
                p99 = {v: float(np.percentile(t, 99)) for v, t in lat.items()}
                per_round = [float(np.median(o) / np.median(k)) for o, k in zip(
                    np.split(lat["ours"], args.rounds), np.split(lat["keras"], args.rounds))]
                rows.append((kind, batch, p50, p99, {v: batch / p50[v] for v in lat},
                              (min(per_round), max(per_round))))
                print(f"{kind} batch {batch}: p50 ours {p50['ours'] * 1e3:.3f} ms, "
                      f"keras {p50['keras'] * 1e3:.3f} ms (x{p50['ours'] / p50['keras']:.3f})")
    finally:
        shutil.rmtree(work, ignore_errors=True)  # the exports this script wrote
    wall = time.monotonic() - start
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(report(rows, args, wall, (load, os.getloadavg()[0]), block))
    print(f"written: {args.out}")
    return 0


def report(results, args, wall: float, load: tuple[float, float], provenance: str) -> str:
    """The Markdown report of the measured latencies."""
    lines = [
        "# Serving cost: `export_for_serving` vs Keras's `model.export`", "", provenance,
        f"Wall time {wall:.0f} s; inter-op "
        f"threads 1; 1-minute load average {load[0]:.1f} at the start, {load[1]:.1f} at the "
        "end (other processes share the cores: p99 reflects them).", "",
        "Same weights exported twice: **ours** = `adp.export_for_serving` (signature "
        "`serving_default` returning `probability` and `logit`, shape checks and sigmoid in "
        "the graph); **keras** = `model.export(format=\"tf_saved_model\")` (raw output). "
        "Both loaded with `tf.saved_model.load` in one process and called through their "
        f"`serving_default` signature; {args.rounds} rounds x {args.calls} timed calls per "
        f"variant and batch (after {args.warmup} warm-up calls per round), alternating call "
        "by call. "
        "Latency includes the Python call and reading the outputs. Models: `dense` = MLP "
        f"{args.dim}-64-64-1 on `features`; `ads` = feature dict (user id int64 + embedding, "
        "item string + StringLookup + embedding, campaign int64 hashed, 8 context floats) "
        "-64-64-1. Both trained for one epoch with `ADPUELoss` before export.", "",
        f"Target: ours ≤ {TARGET}x keras in p50 latency (≥ 1/{TARGET} in rows/s).", ""]
    cells = []
    for kind, batch, p50, p99, rps, spread in results:
        ratio = p50["ours"] / p50["keras"]
        cells.append([kind, batch, f"{p50['ours'] * 1e3:.3f}", f"{p50['keras'] * 1e3:.3f}",
                      f"{ratio:.3f}", f"{spread[0]:.3f}-{spread[1]:.3f}",
                      f"{p99['ours'] * 1e3:.3f}", f"{p99['keras'] * 1e3:.3f}",
                      f"{rps['ours']:,.0f}", f"{rps['keras']:,.0f}",
                      f"{rps['ours'] / rps['keras']:.3f}", "met" if ratio <= TARGET else "missed"])
    lines.append(table(["model", "batch", "p50 ours (ms)", "p50 keras (ms)", "p50 ratio",
                        "ratio per round (min-max)", "p99 ours (ms)", "p99 keras (ms)",
                        "rows/s ours", "rows/s keras", "rows/s ratio", "target"], cells))
    extra = [(p50["ours"] - p50["keras"]) * 1e6 for _, _, p50, _, _, _ in results]
    lines += ["", f"What ours adds per call (p50 difference): {min(extra):.0f} to "
              f"{max(extra):.0f} µs: a second output tensor (`probability`, the sigmoid) and "
              "a shape check per input (`tf.ensure_shape`, which names the input on a wrong "
              "width). The model itself runs the same graph."]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
