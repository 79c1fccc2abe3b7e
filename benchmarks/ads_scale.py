"""Ads at scale: an embedding model trained from TFRecord shards of a simulated ad log.

The log comes from :mod:`adpue_tf.synthetic.ad_log` (``adpue-tf simulate-logs``):
a PU log keeping ``W = E·Y``, a separate exposure log keeping ``E``, and an
evaluation set with the true ``p(y=1|x)`` and ``Y``. The same model (user, item
and campaign embeddings, a device ``StringLookup``, the dense context, a small
MLP plus a user·item dot product, one logit) is trained, streaming from the
shards through :func:`adpue_tf.data.read_tfrecords` and
:func:`adpue_tf.data.pue_dataset`, with:

* ``bce``: ``adp.LogitLoss`` (binary cross-entropy on ``W``) — what a model
  trained on the click/conversion log alone learns;
* ``ips``: ``adp.IPSLoss(clip=0.05)`` with ``θ̂`` from the exposure log
  (the same embedding architecture trained with BCE on ``E``), attached by
  :func:`adpue_tf.data.with_propensity` — what ads teams use today;
* ``adpue``: ``adp.ADPUELoss`` (direct minimisation), the recommended recipe;
* ``debiased``: ``adp.DebiasedModel`` + ``adp.RefreshDagger`` (one refresh
  per chunk, below; initial ``f†`` 0.5).

Model selection without ``Y``, the same for every method: training is cut
into ``--chunks`` Keras epochs of consecutive batches of the stream; after
each, the exposure likelihood (``adp.validation.ExposureLikelihood``,
``θ̂`` in column 3 of held-out PU rows: the last shard of the PU and
exposure logs, never used for training) is measured, and the weights of the
best chunk are kept (``EarlyStopping(restore_best_weights=True)`` with a
patience of all chunks). The evaluation set's ``Y`` and ``p`` are read only
to score the final models: MAE to the true ``p(y=1|x)``, log-loss and AUC on
the true ``Y``, calibration in ten bins of the prediction.

Each (log size, method) runs in its own subprocess, which reports its peak
resident memory (``ru_maxrss``) and its training rows/s from disk. The
throughput comparison (``--throughput-steps``) trains the four models round
robin in one process on the same pipeline, ``--throughput-repeats`` timed
units of that many steps each, and reports medians in rows/s and process CPU
time per row (which other processes on a shared machine do not inflate).

Usage::

    python benchmarks/ads_scale.py --quick                     # 100k rows, a minute or two
    python benchmarks/ads_scale.py --rows 1000000 10000000 --epochs 1
    python benchmarks/ads_scale.py --rows 10000000 --log-dir /tmp/adlog   # reuse logs

Logs are written (once, ``--workers`` processes) to ``--log-dir``/``rows_<N>``
when missing, or taken from there when present with the same counts.
Writes ``--out`` (default ``benchmarks/results/ads_scale.md``) and, next to
it, ``ads_scale_calibration.png`` and ``ads_scale.json``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras
import numpy as np
import tensorflow as tf

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from throughput import EpochTimer  # the epoch clock (wall and CPU) of the throughput bench

import adpue_tf as adp
from adpue_tf._guards import DIVERGED  # the words of the error that stops a diverging fit
from adpue_tf.synthetic.ad_log import read_ad_log_meta, write_ad_log

METHODS = ("bce", "ips", "adpue", "debiased")
DESCRIPTIONS = {
    "bce": "`LogitLoss`: binary cross-entropy on W",
    "ips": "`IPSLoss(clip=0.05)`, θ̂ from the exposure log (same architecture, BCE on E)",
    "adpue": "`ADPUELoss`, direct minimisation (f† = σ(z) of the same step: the paper's formulation)",
    "debiased": "`DebiasedModel(initial_dagger=0.5)` + `RefreshDagger` (a refresh per chunk)",
    "recipe": "`DebiasedModel(initial_dagger=mean(W))` + `RefreshDagger` (a refresh per chunk): "
              "the repository's recommended recipe (f†₀ = the PU positive rate of held-out rows, "
              "rounds chosen by the exposure likelihood)",
}
#: Methods run besides METHODS when asked for (``--extra``).
EXTRA = ("recipe",)
#: The ads-scale targets (10M logged rows).
IPS_CLIP = 0.05
RESULT = "RESULT "


# -- the log ------------------------------------------------------------------------
def ensure_log(rows: int, log_dir: Path, workers: int, shards: int = 16) -> Path:
    """The log of ``rows`` logged rows under ``log_dir``, written if missing."""
    path = log_dir / f"rows_{rows}"
    if (path / "meta.json").is_file():
        meta = read_ad_log_meta(path)
        if meta["counts"]["pu"] + meta["counts"]["exposure"] == rows:
            return path
        raise SystemExit(f"{path} holds a log of another size; choose another --log-dir.")
    print(f"writing a log of {rows:,} rows to {path} ({workers} workers)", flush=True)
    start = time.perf_counter()
    write_ad_log(path, rows=rows, shards=shards, seed=0, eval_rows=50_000, workers=workers)
    print(f"  written in {time.perf_counter() - start:.0f} s", flush=True)
    return path


def feature_spec(meta: dict[str, Any], labels: tuple[str, ...]) -> dict[str, Any]:
    """``tf.io.FixedLenFeature`` per feature of the log, plus the given label keys."""
    dtypes = {"int64": tf.int64, "float32": tf.float32, "string": tf.string}
    spec = {k: tf.io.FixedLenFeature(v["shape"], dtypes[v["dtype"]])
            for k, v in meta["features"].items()}
    kinds = {**meta["labels"]["pu"], **meta["labels"]["exposure"], **meta["labels"]["eval"]}
    spec.update({k: tf.io.FixedLenFeature([], dtypes[kinds[k]]) for k in labels})
    return spec


def _file_rows(meta: dict[str, Any], part: str) -> list[int]:
    """Rows of each file of a part, as :func:`write_ad_log` splits them."""
    k = len(meta["files"][part])
    return [int(n) for n in np.diff(np.linspace(0, meta["counts"][part], k + 1).round())]


def log_rows(meta: dict[str, Any], part: str, label: str, *, train: bool,
             limit: int | None = None) -> tuple[tf.data.Dataset, int]:
    """Rows ``(features, label)`` of the training files (all but the last) or the last."""
    files, sizes = meta["files"][part], _file_rows(meta, part)
    if len(files) < 2:
        raise ValueError(f"the {part} log needs at least 2 shards (one is held out).")
    chosen, n = (files[:-1], sum(sizes[:-1])) if train else (files[-1:], sizes[-1])
    ds = adp.data.read_tfrecords(chosen, feature_spec(meta, (label,)), labels=label, rows=n,
                                 parse_batch=1024)
    if limit is not None and limit < n:
        ds, n = ds.take(limit), limit
    return ds, n


def eval_data(meta: dict[str, Any], batch_size: int) -> tuple[tf.data.Dataset, dict]:
    """The evaluation set: batched features, and its ``y``, ``p_y``, ``theta`` in NumPy."""
    spec = feature_spec(meta, ("y", "p_y", "theta"))
    ds = tf.data.TFRecordDataset(meta["files"]["eval"]).batch(batch_size).map(
        lambda s: tf.io.parse_example(s, spec))
    truth: dict[str, list] = {"y": [], "p_y": [], "theta": []}
    for batch in ds:
        for k in truth:
            truth[k].append(batch[k].numpy())
    feats = ds.map(lambda b: {k: b[k] for k in meta["features"]})
    return feats, {k: np.concatenate(v) for k, v in truth.items()}


# -- the model ----------------------------------------------------------------------
def build_net(meta: dict[str, Any], *, dim: int = 8, seed: int = 0,
              name: str = "ads_net") -> keras.Model:
    """Embeddings of the ids, device lookup, dense context, MLP + user·item dot, one logit."""
    keras.utils.set_random_seed(seed)
    f = meta["features"]
    inputs = {
        "user_id": keras.Input((), dtype="int64", name="user_id"),
        "item_id": keras.Input((), dtype="int64", name="item_id"),
        "campaign_id": keras.Input((), dtype="int64", name="campaign_id"),
        "device": keras.Input((), dtype="string", name="device"),
        "context": keras.Input(tuple(f["context"]["shape"]), dtype="float32", name="context"),
    }
    user = keras.layers.Embedding(f["user_id"]["vocabulary"], dim, name="user_emb")(
        inputs["user_id"])
    item = keras.layers.Embedding(f["item_id"]["vocabulary"], dim, name="item_emb")(
        inputs["item_id"])
    campaign = keras.layers.Embedding(f["campaign_id"]["vocabulary"], 4, name="campaign_emb")(
        inputs["campaign_id"])
    device = keras.layers.StringLookup(vocabulary=f["device"]["vocabulary"],
                                       output_mode="one_hot", name="device_lookup")(
        inputs["device"])
    h = keras.layers.Concatenate()([user, item, campaign, device, inputs["context"]])
    h = keras.layers.Dense(32, activation="relu")(h)
    h = keras.layers.Dense(16, activation="relu")(h)
    dot = keras.layers.Dot(axes=1, name="user_item")([user, item])
    logit = keras.layers.Add(name="logit")([keras.layers.Dense(1)(h), dot])
    return keras.Model(inputs, logit, name=name)


def fit_theta(meta: dict[str, Any], *, batch_size: int, epochs: int, lr: float,
              seed: int = 0) -> keras.Model:
    """θ̂(e=1|x) (logits): the same architecture trained with BCE on E of the exposure log."""
    rows, _ = log_rows(meta, "exposure", "e", train=True)
    ds = rows.shuffle(10_000, seed=seed).batch(batch_size, drop_remainder=True).map(
        lambda x, e: (x, tf.cast(e, tf.float32)[:, None]),
        num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)
    net = build_net(meta, seed=seed + 1, name="theta_net")
    net.compile(optimizer=keras.optimizers.Adam(lr),
                loss=keras.losses.BinaryCrossentropy(from_logits=True))
    net.fit(ds.repeat(epochs), epochs=1, verbose=0)
    return net


def train_data(meta: dict[str, Any], batch_size: int, epochs: int, seed: int) -> tf.data.Dataset:
    pu, _ = log_rows(meta, "pu", "w", train=True)
    ex, _ = log_rows(meta, "exposure", "e", train=True)
    ds = adp.data.pue_dataset(pu, None, ex, None, batch_size=batch_size, seed=seed)
    return ds.repeat(epochs) if epochs > 1 else ds


def val_data(meta: dict[str, Any], theta: keras.Model, batch_size: int,
             rows: int) -> tf.data.Dataset:
    """Held-out PU and exposure rows with θ̂ in column 3 (the validation layout)."""
    pu, _ = log_rows(meta, "pu", "w", train=False, limit=rows)
    ex, _ = log_rows(meta, "exposure", "e", train=False, limit=rows)
    ds = adp.data.pue_dataset(pu, None, ex, None, batch_size=batch_size, shuffle=False)
    return adp.data.with_propensity(ds, theta, from_logits=True).cache()


def make_model(method: str, meta: dict[str, Any], lr: float, seed: int,
               theta: keras.Model | None, *, initial: float = 0.5,
               refresh_every: int = 1) -> tuple[keras.Model, list, Any]:
    """(compiled model, its callbacks, a function mapping the training data).

    ``refresh_every``: chunks (Keras epochs) per alternate-learning round of
    ``debiased`` and ``recipe``.
    """
    net = build_net(meta, seed=seed)
    callbacks: list = []
    prepare = None
    metrics = [adp.validation.ExposureLikelihood(from_logits=True)]
    if method == "bce":
        model, loss = net, adp.LogitLoss(from_logits=True)
    elif method == "ips":
        model, loss = net, adp.IPSLoss(clip=IPS_CLIP, from_logits=True)
        prepare = lambda ds: adp.data.with_propensity(ds, theta, from_logits=True)  # noqa: E731
    elif method == "adpue":
        model, loss = net, adp.ADPUELoss(from_logits=True)
    elif method == "debiased":
        model, loss = adp.DebiasedModel(net, initial_dagger=0.5), adp.ADPUELoss(from_logits=True)
        callbacks.append(adp.RefreshDagger(every_n_epochs=refresh_every))
    elif method == "recipe":
        model = adp.DebiasedModel(net, initial_dagger=initial)
        loss = adp.ADPUELoss(from_logits=True)
        callbacks.append(adp.RefreshDagger(every_n_epochs=refresh_every))
    else:
        raise ValueError(f"unknown method {method!r}; choose from {METHODS + EXTRA}.")
    model.compile(optimizer=keras.optimizers.Adam(lr), loss=loss, metrics=metrics)
    return model, callbacks, prepare


# -- evaluation ---------------------------------------------------------------------
def auc(y: np.ndarray, s: np.ndarray) -> float:
    """Area under the ROC curve (Mann-Whitney, ties counted half)."""
    order = np.argsort(s, kind="mergesort")
    ranks = np.empty(len(s))
    sorted_s = s[order]
    # average ranks of ties
    _, first, counts = np.unique(sorted_s, return_index=True, return_counts=True)
    avg = first + (counts - 1) / 2.0 + 1.0
    ranks[order] = np.repeat(avg, counts)
    pos = y == 1
    n_pos, n_neg = pos.sum(), (~pos).sum()
    return float((ranks[pos].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def scores(p_hat: np.ndarray, truth: dict[str, np.ndarray], bins: int = 10) -> dict[str, Any]:
    """MAE to the true p, log-loss and AUC on the true Y, calibration in equal-width bins."""
    p = np.clip(p_hat.astype(np.float64), 1e-7, 1 - 1e-7)
    y = truth["y"]
    edges = np.linspace(0, 1, bins + 1)
    idx = np.clip(np.digitize(p, edges) - 1, 0, bins - 1)
    calib = [{"bin": f"{edges[b]:.1f}-{edges[b + 1]:.1f}", "n": int((idx == b).sum()),
              "mean_pred": float(p[idx == b].mean()) if (idx == b).any() else None,
              "mean_true_p": float(truth["p_y"][idx == b].mean()) if (idx == b).any() else None,
              "mean_y": float(y[idx == b].mean()) if (idx == b).any() else None}
             for b in range(bins)]
    ece = sum(c["n"] * abs(c["mean_pred"] - c["mean_y"]) for c in calib if c["n"]) / len(p)
    rare = truth["theta"] < 0.05
    return {"mae": float(np.abs(p - truth["p_y"]).mean()),
            "mae_rarely_shown": float(np.abs(p - truth["p_y"])[rare].mean()) if rare.any()
            else None,
            "log_loss": float(-(y * np.log(p) + (1 - y) * np.log(1 - p)).mean()),
            "auc": auc(y, p), "ece": float(ece), "mean_pred": float(p.mean()),
            "calibration": calib}


# -- one training run (its own process) ---------------------------------------------
def run_method(log: str | Path, method: str, *, epochs: int = 1, chunks: int = 8,
               batch_size: int = 4096, lr: float = 0.03, val_rows: int = 50_000,
               theta_path: str | None = None, seed: int = 0,
               max_train_rows: int | None = None, refresh_every: int = 1) -> dict[str, Any]:
    """Train ``method`` on the log at ``log``; its scores, rows/s and peak memory.

    ``max_train_rows`` caps the rows trained on (the head of the shuffled
    stream); None: ``epochs`` full passes over the training shards.
    """
    meta = read_ad_log_meta(log)
    start = time.perf_counter()
    if theta_path is not None:
        theta = keras.models.load_model(theta_path)
    else:
        theta = fit_theta(meta, batch_size=batch_size, epochs=epochs, lr=lr, seed=seed)
    theta_s = time.perf_counter() - start
    initial = 0.5
    if method == "recipe":  # f†₀: the positive rate of W on the held-out PU rows
        held, _ = log_rows(meta, "pu", "w", train=False, limit=val_rows)
        initial = float(np.concatenate([w.numpy() for _, w in held.batch(8192)]).mean())
    model, callbacks, prepare = make_model(method, meta, lr, seed, theta, initial=initial,
                                           refresh_every=refresh_every)
    ds = train_data(meta, batch_size, epochs, seed)
    if prepare is not None:
        ds = prepare(ds)
    steps = int(ds.cardinality())
    if max_train_rows is not None:
        steps = max(1, min(steps, max_train_rows // batch_size))
    chunks = max(1, min(chunks, steps))
    timer = EpochTimer()
    stop = keras.callbacks.EarlyStopping("val_exposure_nll", mode="min", patience=chunks,
                                         restore_best_weights=True)
    history = model.fit(ds, epochs=chunks, steps_per_epoch=steps // chunks,
                        validation_data=val_data(meta, theta, batch_size, val_rows),
                        callbacks=[*callbacks, stop, timer], verbose=0, shuffle=False)
    wall, cpu = (sum(t[0] for t in timer.times), sum(t[1] for t in timer.times))
    rows = (steps // chunks) * chunks * batch_size
    feats, truth = eval_data(meta, batch_size)
    net = model.net if isinstance(model, adp.DebiasedModel) else model
    p_hat = tf.sigmoid(net.predict(feats, verbose=0)).numpy().ravel()
    val = [float(v) for v in history.history["val_exposure_nll"]]
    theta_eval = tf.sigmoid(theta.predict(feats, verbose=0)).numpy().ravel()
    return {"method": method, "logged_rows": meta["counts"]["pu"] + meta["counts"]["exposure"],
            "train_rows": rows, "steps": (steps // chunks) * chunks, "chunks": chunks,
            "epochs": epochs, "batch_size": batch_size, "lr": lr,
            "rows_per_s": rows / wall, "cpu_us_per_row": 1e6 * cpu / rows,
            "train_wall_s": wall, "theta_s": theta_s,
            "val_exposure_nll": val, "best_chunk": int(np.argmin(val)) + 1,
            "initial_dagger": initial, "refresh_every": refresh_every,
            "theta_mae": float(np.abs(theta_eval - truth["theta"]).mean()),
            "eval": scores(p_hat, truth), "p_hat": p_hat,
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def _child(args: argparse.Namespace) -> None:
    if args.child == "theta":
        meta = read_ad_log_meta(args.log)
        start = time.perf_counter()
        net = fit_theta(meta, batch_size=args.batch_size, epochs=args.epochs, lr=args.lr)
        net.save(args.theta)
        out = {"theta_s": time.perf_counter() - start,
               "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
    elif args.child == "memory":
        out = stream_memory(args.log, batch_size=args.batch_size)
    elif args.child == "throughput":
        out = throughput(args.log, steps=args.throughput_steps, repeats=args.throughput_repeats,
                         batch_size=args.batch_size, lr=args.lr, theta_path=args.theta)
    else:
        try:
            out = run_method(args.log, args.child, epochs=args.epochs, chunks=args.chunks,
                             batch_size=args.batch_size, lr=args.lr, val_rows=args.val_rows,
                             theta_path=args.theta, max_train_rows=args.max_train_rows,
                             refresh_every=args.refresh_every)
        except tf.errors.InvalidArgumentError as err:
            if DIVERGED not in str(err):
                raise
            # the library stopped a diverging fit: a result of this learning rate, not a crash
            out = {"method": args.child, "lr": args.lr, "diverged": str(err).splitlines()[-1]}
        else:
            np.save(Path(args.theta).with_name(f"p_hat_{args.child}_lr{args.lr:g}.npy"),
                    out.pop("p_hat"))
    print(RESULT + json.dumps(out), flush=True)


def _in_subprocess(args: argparse.Namespace, child: str, log: Path, theta: Path,
                   lr: float | None = None) -> dict:
    cmd = [sys.executable, __file__, "--child", child, "--log", str(log), "--theta", str(theta),
           "--epochs", str(args.epochs), "--chunks", str(args.chunks),
           "--batch-size", str(args.batch_size), "--lr", str(args.lr if lr is None else lr),
           "--val-rows", str(args.val_rows), "--throughput-steps", str(args.throughput_steps),
           "--throughput-repeats", str(args.throughput_repeats),
           "--refresh-every", str(args.refresh_every)]
    if args.max_train_rows is not None:
        cmd += ["--max-train-rows", str(args.max_train_rows)]
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    return _result(proc, child, log, start)


def _result(proc: Any, child: str, log: Path, start: float) -> dict:
    lines = [x for x in proc.stdout.splitlines() if x.startswith(RESULT)]
    if proc.returncode or not lines:
        sys.stderr.write(proc.stderr[-5000:])
        raise SystemExit(f"{child} on {log} failed (exit {proc.returncode}).")
    out = json.loads(lines[-1][len(RESULT):])
    print(f"  {child:10s} {time.perf_counter() - start:6.0f} s  "
          + " ".join(f"{k}={v:.4g}" for k, v in out.items() if isinstance(v, float))
          + ("  " + " ".join(f"{k}={v:.4g}" for k, v in out["eval"].items()
                             if isinstance(v, float)) if "eval" in out else ""), flush=True)
    return out


def stream_memory(log: str | Path, *, batch_size: int) -> dict[str, Any]:
    """Stream every training batch of the log through the pipeline; rows/s and peak RSS."""
    meta = read_ad_log_meta(log)
    ds = train_data(meta, batch_size, 1, seed=0)
    start, cpu, rows = time.perf_counter(), time.process_time(), 0
    for _, y in ds:
        rows += int(y.shape[0])
    wall = time.perf_counter() - start
    return {"rows": rows, "rows_per_s": rows / wall,
            "cpu_us_per_row": 1e6 * (time.process_time() - cpu) / rows,
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


# -- throughput, round robin in one process -----------------------------------------
def throughput(log: str | Path, *, steps: int, repeats: int, batch_size: int, lr: float,
               theta_path: str | None, warmup: int = 1) -> dict[str, Any]:
    """Median rows/s and CPU µs/row of each method on the same pipeline, round robin."""
    meta = read_ad_log_meta(log)
    theta = keras.models.load_model(theta_path) if theta_path else None
    runs = {}
    for method in METHODS:
        if method == "ips" and theta is None:
            continue
        model, callbacks, prepare = make_model(method, meta, lr, 0, theta)
        ds = train_data(meta, batch_size, 1, seed=0).repeat()
        if prepare is not None:
            ds = prepare(ds)
        runs[method] = (model, callbacks, iter([None]), EpochTimer(), ds)
    times: dict[str, list[tuple[float, float]]] = {m: [] for m in runs}
    epoch = 0
    for r in range(warmup + repeats):
        for method, (model, callbacks, _, timer, ds) in runs.items():
            model.fit(ds, initial_epoch=epoch, epochs=epoch + 1, steps_per_epoch=steps,
                      callbacks=[*callbacks, timer], verbose=0, shuffle=False)
            if r >= warmup:
                times[method].append(timer.times[-1])
        epoch += 1
    out: dict[str, Any] = {"steps": steps, "repeats": repeats, "batch_size": batch_size}
    for method, pairs in times.items():
        out[method] = {"rows_per_s": statistics.median(steps * batch_size / w for w, _ in pairs),
                       "cpu_us_per_row": statistics.median(1e6 * c / (steps * batch_size)
                                                           for _, c in pairs),
                       "rows_per_s_all": [steps * batch_size / w for w, _ in pairs]}
    # paired ratios: the variant against bce within the same round (similar load)
    for method in out:
        if method in runs and method != "bce":
            out[method]["paired_ratio"] = statistics.median(
                b[0] / v[0] for b, v in zip(times["bce"], times[method]))
    return out


# -- report -------------------------------------------------------------------------
def _machine() -> list[tuple[str, str]]:
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    gpus = tf.config.list_physical_devices("GPU")
    return [("CPU", f"{cpu}, {os.cpu_count()} cores (shared with other jobs)"),
            ("GPU", ", ".join(g.name for g in gpus) if gpus else "none (CPU only; no GPU numbers)"),
            ("Python / TensorFlow / Keras",
             f"{platform.python_version()} / {tf.__version__} / {keras.__version__}"),
            ("Date (UTC)", datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M"))]


def _lrs(results: dict) -> list[float]:
    """The learning rates the methods were run at (their candidates, else their own)."""
    found = {float(lr) for r in results.values() for x in r["methods"].values()
             for lr in x.get("lr_candidates", {x["lr"]: None})}
    return sorted(found)


def _fmt(v: Any, digits: int = 4) -> str:
    return "—" if v is None else f"{v:.{digits}f}"


def _ran(results: dict) -> list[str]:
    """The methods in the results, in the order of METHODS + EXTRA."""
    first = next(iter(results.values()))["methods"]
    return [m for m in METHODS + EXTRA if m in first]


def report(args: argparse.Namespace, results: dict, tp: dict | None, command: str) -> str:
    sizes = sorted(results, key=int)
    big = sizes[-1]
    res = results[big]
    lines = ["# Ads at scale: dict features from TFRecord shards of a simulated ad log", "",
             f"Generated by `{command}` (`benchmarks/ads_scale.py`); every number below was "
             "measured in that run.", "", "| machine | |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in _machine()]
    meta = read_ad_log_meta(res["log"])
    c = meta["config"]
    lines += ["", "## Set-up", "",
              f"- Log: `adpue_tf.synthetic.AdLogSimulator` defaults ({c['n_users']} users, "
              f"{c['n_items']} items ({c['rare_item_share']:.0%} rarely shown, policy score "
              f"{c['rare_item_score']}), {c['n_campaigns']} campaigns, 3 devices, "
              f"{c['context_dim']}-dim context), seed 0; logged rows "
              + ", ".join(f"{int(s):,}" for s in sizes)
              + " (half PU log, half exposure log, 16 shards each); evaluation set "
              f"{meta['counts']['eval']:,} rows with the true p(y=1|x) and Y.",
              "- Held out for model selection: the last shard of the PU and of the exposure "
              f"log, first {args.val_rows:,} rows of each; training reads the other 15 shards.",
              "- Model: user (8), item (8), campaign (4) embeddings, device StringLookup "
              "(one-hot), 4 dense context floats -> Dense 32 relu -> Dense 16 relu -> Dense 1, "
              "plus the user·item dot product: one logit.",
              f"- Training: Adam, batch {args.batch_size} (PU and exposure rows in "
              "proportion to the logs), "
              + (f"the first {args.max_train_rows:,} rows of the shuffled stream (a cap, "
                 "`--max-train-rows`, not a full pass)" if args.max_train_rows else
                 f"{args.epochs} epoch(s) over the training shards")
              + ", cut "
              f"into {args.chunks} chunks (Keras epochs); after each chunk "
              "`val_exposure_nll` (exposure likelihood of held-out W under σ(z)·θ̂) is "
              "measured and the best chunk's weights are kept; each method runs at every "
              "learning rate of " + ", ".join(f"{lr:g}" for lr in _lrs(results))
              + " and keeps the one whose best chunk scores lowest (the same score) — the "
              "same for every method; no method sees the evaluation set's Y.",
              "- θ̂: the same architecture trained with BCE on E over the exposure log's "
              "training shards (one pass per epoch); used by IPS (clip "
              f"{IPS_CLIP}) and by the validation score.", ""]
    lines += ["| method | what it trains |", "|---|---|"]
    lines += [f"| `{m}` | {DESCRIPTIONS[m]} |" for m in _ran(results)]
    for size in reversed(sizes):
        r = results[size]
        lines += ["", f"## Accuracy at {int(size):,} logged rows", "",
                  f"θ̂: MAE to the true θ(e=1|x) on the evaluation set "
                  f"{_fmt(r['methods']['adpue']['theta_mae'])}; trained in "
                  f"{r['theta']['theta_s']:.0f} s.", "",
                  "| method | MAE to true p | MAE, rarely shown (θ<0.05) | log-loss on Y | "
                  "AUC on Y | ECE on Y | mean p̂ | lr | best chunk | train rows/s | "
                  "peak RSS (MB) |", "|---|---|---|---|---|---|---|---|---|---|---|"]
        for m in _ran(results):
            x = r["methods"][m]
            e = x["eval"]
            lines.append(f"| `{m}` | {_fmt(e['mae'])} | {_fmt(e['mae_rarely_shown'])} | "
                         f"{_fmt(e['log_loss'])} | {_fmt(e['auc'])} | {_fmt(e['ece'])} | "
                         f"{_fmt(e['mean_pred'], 3)} | {x['lr']:g} | "
                         f"{x['best_chunk']}/{x['chunks']} | "
                         f"{x['rows_per_s']:,.0f} | {x['peak_rss_mb']:.0f} |")
        truth = r["truth"]
        lines.append(f"| truth p(y=1\\|x) | 0 | 0 | {_fmt(truth['log_loss'])} | "
                     f"{_fmt(truth['auc'])} | {_fmt(truth['ece'])} | "
                     f"{_fmt(truth['mean_pred'], 3)} | | | | |")
        if any("lr_candidates" in r["methods"][m] for m in _ran(results)):
            lines += ["", f"Learning rates tried at {int(size):,} logged rows (lowest "
                      "`val_exposure_nll` over the chunks picks; MAE and AUC shown only to "
                      "judge the choice):", "",
                      "| method | lr | lowest val_exposure_nll | best chunk | MAE to true p | "
                      "AUC on Y | kept |", "|---|---|---|---|---|---|---|"]
            for m in _ran(results):
                x = r["methods"][m]
                for lr, c in x.get("lr_candidates", {}).items():
                    if "diverged" in c:
                        lines.append(f"| `{m}` | {lr} | diverged: training stopped, outputs "
                                     "beyond ±10⁴ | | | | |")
                        continue
                    lines.append(f"| `{m}` | {lr} | {c['best_val']:.5f} | {c['best_chunk']} | "
                                 f"{c['mae']:.4f} | {c['auc']:.4f} | "
                                 f"{'yes' if float(lr) == x['lr'] else ''} |")
    # calibration of the largest run
    lines += ["", f"## Calibration at {int(big):,} logged rows", "",
              "Ten equal-width bins of the prediction: mean prediction / mean true p / "
              "mean Y (rows). Plot: `ads_scale_calibration.png`.", "",
              "| bin | " + " | ".join(f"`{m}`" for m in _ran(results)) + " |",
              "|---|" + "---|" * len(_ran(results))]
    for b in range(10):
        cells = []
        for m in _ran(results):
            cb = res["methods"][m]["eval"]["calibration"][b]
            cells.append("—" if not cb["n"] else
                         f"{cb['mean_pred']:.3f} / {cb['mean_true_p']:.3f} / {cb['mean_y']:.3f} "
                         f"({cb['n']:,})")
        lines.append(f"| {res['methods']['bce']['eval']['calibration'][b]['bin']} | "
                     + " | ".join(cells) + " |")
    if tp is not None:
        lines += ["", f"## Training throughput from TFRecord ({int(tp['log_rows']):,}-row log)",
                  "",
                  f"One process, the four models take turns (round robin), {tp['repeats']} "
                  f"timed units of {tp['steps']} steps × {tp['batch_size']} rows each (after one "
                  "untimed unit), reading the same training shards through the same "
                  "`read_tfrecords` → `pue_dataset` pipeline (IPS adds θ̂ in the pipeline). "
                  "Medians; the paired ratio is the median over rounds of bce's unit time "
                  "over the method's. CPU µs/row counts all threads of the process (tf.data "
                  "included), which other jobs on the shared machine do not inflate.", "",
                  "| method | rows/s | ratio to bce | paired ratio | CPU µs/row | CPU ratio "
                  "(bce/method) |", "|---|---|---|---|---|---|"]
        b = tp["bce"]
        for m in _ran(results):
            if m not in tp:
                continue
            x = tp[m]
            lines.append(f"| `{m}` | {x['rows_per_s']:,.0f} | "
                         f"{x['rows_per_s'] / b['rows_per_s']:.3f} | "
                         f"{_fmt(x.get('paired_ratio', 1.0), 3)} | {x['cpu_us_per_row']:.2f} | "
                         f"{b['cpu_us_per_row'] / x['cpu_us_per_row']:.3f} |")
    lines += ["", "## Peak resident memory", "",
              "`ru_maxrss` (MB) of each subprocess, TensorFlow runtime included: the θ̂ fit, "
              "each method's training run, and a full pass of the training pipeline "
              "(`read_tfrecords` → `pue_dataset`, every training row of the log, no model).",
              "", "| logged rows | full pipeline pass (rows, rows/s) | θ̂ fit | "
              + " | ".join(f"`{m}`" for m in _ran(results)) + " |",
              "|---|---|---|" + "---|" * len(_ran(results))]
    for size in sizes:
        r = results[size]
        mem = r["memory"]
        lines.append(f"| {int(size):,} | {mem['peak_rss_mb']:.0f} ({mem['rows']:,}, "
                     f"{mem['rows_per_s']:,.0f}) | {r['theta']['peak_rss_mb']:.0f} | "
                     + " | ".join(f"{r['methods'][m]['peak_rss_mb']:.0f}" for m in _ran(results))
                     + " |")
    lines += ["", "## Targets", ""]
    lines += targets(results, tp)
    return "\n".join(lines) + "\n"


def targets(results: dict, tp: dict | None) -> list[str]:
    sizes = sorted(results, key=int)
    r = results[sizes[-1]]["methods"]
    e = {m: r[m]["eval"] for m in METHODS + EXTRA if m in r}
    ours = "recipe" if "recipe" in e else "adpue"
    rows = [f"Checked at {int(sizes[-1]):,} logged rows; ADPUE is `{ours}`"
            + (" (the recommended recipe)" if ours == "recipe" else "") + ".", "",
            "| target | measured | met |", "|---|---|---|"]

    def line(name: str, value: str, ok: bool) -> None:
        rows.append(f"| {name} | {value} | {'yes' if ok else '**no**'} |")

    a = e[ours]
    ratio = a["mae"] / e["bce"]["mae"]
    line("ADPUE MAE to p ≤ 0.5 × BCE on W", f"{a['mae']:.4f} / {e['bce']['mae']:.4f} "
         f"= {ratio:.3f}", ratio <= 0.5)
    line("ADPUE MAE to p < IPS", f"{a['mae']:.4f} vs {e['ips']['mae']:.4f}",
         a["mae"] < e["ips"]["mae"])
    line("ADPUE AUC on Y ≥ IPS", f"{a['auc']:.4f} vs {e['ips']['auc']:.4f}",
         a["auc"] >= e["ips"]["auc"])
    if tp is not None:
        for m, goal in (("adpue", 0.95), ("debiased", 0.90)):
            wall = tp[m]["rows_per_s"] / tp["bce"]["rows_per_s"]
            cpu = tp["bce"]["cpu_us_per_row"] / tp[m]["cpu_us_per_row"]
            line(f"throughput `{m}` ≥ {goal} × bce", f"wall {wall:.3f}, paired "
                 f"{tp[m]['paired_ratio']:.3f}, CPU {cpu:.3f}", wall >= goal)
    if len(sizes) > 1:
        lo, hi = sizes[0], sizes[-1]
        full = {s: results[s]["memory"]["peak_rss_mb"] for s in (lo, hi)}
        ratio = full[hi] / full[lo]
        line(f"peak memory at {int(hi):,} ≤ 1.2 × at {int(lo):,}: full pipeline pass",
             f"{full[hi]:.0f} MB / {full[lo]:.0f} MB = {ratio:.3f}", ratio <= 1.2)
        peak = {s: max([x["peak_rss_mb"] for x in results[s]["methods"].values()]
                       + [results[s]["theta"]["peak_rss_mb"]]) for s in (lo, hi)}
        ratio = peak[hi] / peak[lo]
        line(f"peak memory at {int(hi):,} ≤ 1.2 × at {int(lo):,}: training runs",
             f"{peak[hi]:.0f} MB / {peak[lo]:.0f} MB = {ratio:.3f} (max over θ̂ and the "
             "methods)", ratio <= 1.2)
    return rows


def plot(results: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    size = sorted(results, key=int)[-1]
    r = results[size]["methods"]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.5))
    for m in _ran(results):
        cal = [c for c in r[m]["eval"]["calibration"] if c["n"]]
        axes[0].plot([c["mean_pred"] for c in cal], [c["mean_y"] for c in cal], "o-",
                     label=f"{m} (MAE {r[m]['eval']['mae']:.3f})")
        axes[1].plot([c["mean_pred"] for c in cal], [c["mean_true_p"] for c in cal], "o-",
                     label=m)
    for ax, ylabel in zip(axes, ("mean of true Y", "mean of true p(y=1|x)")):
        ax.plot([0, 1], [0, 1], "k:", lw=1)
        ax.set_xlabel("mean prediction (bin)")
        ax.set_ylabel(ylabel)
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1)
        ax.legend(fontsize=8)
    fig.suptitle(f"Calibration on the evaluation set, {int(size):,} logged rows")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[1_000_000, 10_000_000],
                        help="logged rows (PU + exposure) of each log; the largest is the "
                             "one checked against the targets")
    parser.add_argument("--epochs", type=int, default=1, help="passes over the training shards")
    parser.add_argument("--chunks", type=int, default=8,
                        help="Keras epochs per run (model selection after each)")
    parser.add_argument("--batch-size", type=int, default=4096)
    parser.add_argument("--lr", type=float, default=0.03,
                        help="Adam learning rate of θ̂ and of the throughput run")
    parser.add_argument("--lrs", type=float, nargs="+", default=[0.01, 0.03],
                        help="Adam learning rates tried for each method; each keeps the one "
                             "with the lowest val_exposure_nll")
    parser.add_argument("--val-rows", type=int, default=50_000)
    parser.add_argument("--max-train-rows", type=int, default=None,
                        help="cap on the rows each method trains on (default: full passes)")
    parser.add_argument("--refresh-every", type=int, default=1,
                        help="chunks per alternate-learning round (debiased, recipe)")
    parser.add_argument("--extra", action="store_true",
                        help="also run " + ", ".join(EXTRA) + " (see DESCRIPTIONS)")
    parser.add_argument("--parallel", type=int, default=1,
                        help="method subprocesses run at once")
    parser.add_argument("--throughput-steps", type=int, default=100)
    parser.add_argument("--throughput-repeats", type=int, default=5)
    parser.add_argument("--log-dir", default="/tmp/adpue_ads_scale",
                        help="where the logs are written or found (rows_<N>/)")
    parser.add_argument("--workers", type=int, default=4, help="processes writing a log")
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "ads_scale.md"))
    parser.add_argument("--quick", action="store_true",
                        help="100k logged rows, batch 1024, 4 chunks, short throughput")
    parser.add_argument("--from-json", metavar="JSON",
                        help="re-render the report and plot of an earlier run's JSON")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--log", help=argparse.SUPPRESS)
    parser.add_argument("--theta", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        _child(args)
        return 0
    if args.quick:
        args.rows, args.batch_size, args.chunks = [100_000], 1024, 4
        args.val_rows = min(args.val_rows, 5_000)
        args.throughput_steps, args.throughput_repeats = 20, 3
    command = "python benchmarks/ads_scale.py " + " ".join(
        argv if argv is not None else sys.argv[1:])
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    if args.from_json:
        data = json.loads(Path(args.from_json).read_text())
        _write(args, data["results"], data["throughput"], data.get("command", command), out)
        return 0
    work = Path(args.log_dir)
    results: dict[str, Any] = {}
    methods = METHODS + (EXTRA if args.extra else ())
    for rows in sorted(args.rows):
        log = ensure_log(rows, work, args.workers)
        theta = log / "theta.keras"
        print(f"{rows:,} logged rows ({log})", flush=True)
        res: dict[str, Any] = {"log": str(log), "methods": {}}
        res["theta"] = _in_subprocess(args, "theta", log, theta)
        res["memory"] = _in_subprocess(args, "memory", log, theta)
        if args.parallel > 1:
            import concurrent.futures

            with concurrent.futures.ThreadPoolExecutor(args.parallel) as pool:
                done = {m: pool.submit(_run_method, args, m, log, theta) for m in methods}
                res["methods"] = {m: f.result() for m, f in done.items()}
        else:
            for m in methods:
                res["methods"][m] = _run_method(args, m, log, theta)
        meta = read_ad_log_meta(log)
        _, truth = eval_data(meta, 8192)
        res["truth"] = scores(truth["p_y"], truth)
        results[str(rows)] = res
        out.with_suffix(".partial.json").write_text(json.dumps(results, indent=1, default=float))
    big = str(max(args.rows))
    tp = None
    if args.throughput_steps > 0:
        log = Path(results[big]["log"])
        tp = _in_subprocess(args, "throughput", log, log / "theta.keras")
        tp["log_rows"] = int(big)
    _write(args, results, tp, command, out)
    return 0


def best_val(run: dict[str, Any]) -> float:
    """A run's selection score: its lowest ``val_exposure_nll`` over the chunks (inf if it
    diverged)."""
    return float("inf") if "diverged" in run else float(min(run["val_exposure_nll"]))


def choose_lr(candidates: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The candidate run (one per learning rate) with the lowest selection score.

    Ties go to the first learning rate given. Never looks at the evaluation set.
    """
    return min(candidates.values(), key=best_val)


def _run_method(args: argparse.Namespace, method: str, log: Path, theta: Path) -> dict[str, Any]:
    """One method at every learning rate of ``--lrs``; the chosen run, with the others."""
    candidates = {f"{lr:g}": _in_subprocess(args, method, log, theta, lr=lr) for lr in args.lrs}
    return with_candidates(candidates)


def with_candidates(candidates: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The chosen run, with a summary of every candidate under ``lr_candidates``."""
    chosen = dict(choose_lr(candidates))
    if "diverged" in chosen:
        raise SystemExit(f"{chosen['method']}: every learning rate diverged.")
    chosen["lr_candidates"] = {
        lr: {"diverged": c["diverged"]} if "diverged" in c else
        {"best_val": best_val(c), "best_chunk": c["best_chunk"], "mae": c["eval"]["mae"],
         "auc": c["eval"]["auc"]} for lr, c in candidates.items()}
    return chosen


def _write(args: argparse.Namespace, results: dict, tp: dict | None, command: str,
           out: Path) -> None:
    text = report(args, results, tp, command)
    out.write_text(text)
    plot(results, out.with_name(out.stem + "_calibration.png"))
    out.with_suffix(".json").write_text(json.dumps(
        {"command": command, "results": results, "throughput": tp}, indent=1, default=float))
    print(text)


if __name__ == "__main__":
    raise SystemExit(main())
