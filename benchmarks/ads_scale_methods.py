"""The ads-scale benchmark's methods: one training run each, scored against the truth.

``bce``, ``ips``, ``adpue`` and ``debiased`` train the net of
:func:`benchmarks.ads_scale_log.build_net` from the TFRecord stream and keep
their best chunk by ``val_exposure_nll``; ``recommended`` is
:func:`adpue_tf.fit_pue` (its own held-out choice) on the same training rows
and the same net builder.

Example:
    >>> truth = {"y": np.array([1, 0]), "p_y": np.array([0.8, 0.2]),
    ...          "theta": np.array([0.5, 0.5])}
    >>> round(scores(np.array([0.8, 0.2]), truth)["kl_to_p"], 6)
    0.0
"""

from __future__ import annotations

import resource
import statistics
import time
from pathlib import Path
from typing import Any

import keras
import numpy as np
import tensorflow as tf
from sklearn.metrics import log_loss, roc_auc_score

import adpue_tf as adp
from adpue_tf.synthetic import read_ad_log_meta
from benchmarks.ads_scale_log import (
    build_net,
    eval_data,
    fit_theta,
    log_rows,
    train_data,
    val_data,
)
from benchmarks.common import EpochTimer

__all__ = ["DESCRIPTIONS", "IPS_CLIP", "METHODS", "make_model", "peak_rss_mb", "run_method",
           "run_recommended", "scores", "stream_memory", "throughput"]

METHODS = ("bce", "ips", "adpue", "debiased", "recommended")
#: The methods trained by Keras from the stream (``recommended`` is fit_pue).
STREAMED = METHODS[:4]
IPS_CLIP = 0.05
DESCRIPTIONS = {
    "bce": "`LogitLoss`: binary cross-entropy on W",
    "ips": f"`IPSLoss(clip={IPS_CLIP})`, θ̂ from the exposure log (same architecture, BCE on E)",
    "adpue": "`ADPUELoss`, direct minimisation (f† = σ(z) of the same step: the paper's "
             "formulation)",
    "debiased": "`DebiasedModel(initial_dagger=0.5)` + `RefreshDagger` (a refresh per chunk)",
    "recommended": "`adp.fit_pue` on the same training rows and net builder: every default "
                   "candidate trained on 80 % of the PU and E rows, kept by fit_pue's rule "
                   "(the fixed blend of `likelihood`, `brier`, `ratio` and `likelihood_theta` unless the held-out "
                   "scores show another better) and refitted on all (its own "
                   "θ̂ and choice)",
}


def steps_per_execution(value: int | None) -> int:
    """``value``, or the rule ``DebiasedModel.compile``'s ``"auto"`` follows when None:
    ``adp.model.ACCELERATOR_STEPS`` steps a call on a GPU, 1 on a CPU."""
    if value is not None:
        return value
    return adp.model.ACCELERATOR_STEPS if tf.config.list_logical_devices("GPU") else 1


def make_model(method: str, meta: dict[str, Any], lr: float, seed: int,
               theta: keras.Model | None, *, refresh_every: int = 1,
               steps: int | None = None) -> tuple[keras.Model, list, Any]:
    """(compiled model, its callbacks, a function mapping the training data) of a streamed method.

    ``refresh_every``: chunks (Keras epochs) per alternate-learning round of ``debiased``;
    ``steps``: Keras's ``steps_per_execution`` (None: :func:`steps_per_execution`'s rule).
    """
    net = build_net(meta, seed=seed)
    callbacks: list = []
    prepare = None
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
    else:
        raise ValueError(f"unknown method {method!r}; choose from {STREAMED}.")
    model.compile(optimizer=keras.optimizers.Adam(lr), loss=loss,
                  metrics=[adp.validation.ExposureLikelihood(from_logits=True)],
                  steps_per_execution=steps_per_execution(steps))
    return model, callbacks, prepare


def scores(p_hat: np.ndarray, truth: dict[str, np.ndarray], bins: int = 10) -> dict[str, Any]:
    """Error to the true p (MAE, log-loss, KL), log-loss and AUC on Y, calibration in bins."""
    p = np.clip(p_hat.astype(np.float64), 1e-7, 1 - 1e-7)
    y, p_true = truth["y"], truth["p_y"].astype(np.float64)
    edges = np.linspace(0, 1, bins + 1)
    idx = np.clip(np.digitize(p, edges) - 1, 0, bins - 1)
    calib = [{"bin": f"{edges[b]:.1f}-{edges[b + 1]:.1f}", "n": int((idx == b).sum()),
              "mean_pred": float(p[idx == b].mean()) if (idx == b).any() else None,
              "mean_true_p": float(p_true[idx == b].mean()) if (idx == b).any() else None,
              "mean_y": float(y[idx == b].mean()) if (idx == b).any() else None}
             for b in range(bins)]
    ece = sum(c["n"] * abs(c["mean_pred"] - c["mean_y"]) for c in calib if c["n"]) / len(p)
    rare = truth["theta"] < 0.05
    # log-loss to the true p: cross-entropy with p as the soft label; KL = that - H(p)
    to_p = keras.ops.convert_to_numpy(keras.losses.binary_crossentropy(
        p_true[:, None], p[:, None]))
    kl = keras.ops.convert_to_numpy(keras.losses.kl_divergence(
        np.stack([p_true, 1 - p_true], -1), np.stack([p, 1 - p], -1)))
    return {"mae": float(np.abs(p - p_true).mean()),
            "mae_rarely_shown": float(np.abs(p - p_true)[rare].mean()) if rare.any() else None,
            "log_loss_to_p": float(np.mean(to_p)), "kl_to_p": float(np.mean(kl)),
            "log_loss": float(log_loss(y, p, labels=[0, 1])),
            "auc": float(roc_auc_score(y, p)), "ece": float(ece), "mean_pred": float(p.mean()),
            "calibration": calib}


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _probabilities(model: keras.Model, feats: Any) -> np.ndarray:
    """``σ(model(feats))`` of every evaluation row, ``(n,)``."""
    return tf.sigmoid(model.predict(feats, verbose=0)).numpy().ravel()


def run_method(log: str | Path, method: str, *, epochs: int = 1, chunks: int = 8,
               batch_size: int = 4096, lr: float = 0.03, val_rows: int = 50_000,
               theta_path: str | None = None, seed: int = 0,
               max_train_rows: int | None = None, refresh_every: int = 1,
               steps: int | None = None) -> dict[str, Any]:
    """Train a streamed ``method`` on the log at ``log``; its scores, rows/s and peak memory.

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
    model, callbacks, prepare = make_model(method, meta, lr, seed, theta,
                                           refresh_every=refresh_every, steps=steps)
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
    fit_start, fit_cpu = time.perf_counter(), time.process_time()
    history = model.fit(ds, epochs=chunks, steps_per_epoch=steps // chunks,
                        validation_data=val_data(meta, theta, batch_size, val_rows),
                        callbacks=[*callbacks, stop, timer], verbose=0, shuffle=False)
    fit_wall, fit_cpu = time.perf_counter() - fit_start, time.process_time() - fit_cpu
    wall, cpu = (sum(t[0] for t in timer.times), sum(t[1] for t in timer.times))
    rows = (steps // chunks) * chunks * batch_size
    feats, truth = eval_data(meta, batch_size)
    net = model.net if isinstance(model, adp.DebiasedModel) else model
    p_hat = _probabilities(net, feats)
    val = [float(v) for v in history.history["val_exposure_nll"]]
    theta_eval = _probabilities(theta, feats)
    return {"method": method, "logged_rows": meta["counts"]["pu"] + meta["counts"]["exposure"],
            "train_rows": rows, "steps": (steps // chunks) * chunks, "chunks": chunks,
            "epochs": epochs, "batch_size": batch_size, "lr": lr,
            "rows_per_s": rows / wall, "cpu_us_per_row": 1e6 * cpu / rows,
            "train_wall_s": wall, "fit_wall_s": fit_wall, "fit_cpu_s": fit_cpu,
            "theta_s": theta_s, "val_exposure_nll": val, "best_chunk": int(np.argmin(val)) + 1,
            "refresh_every": refresh_every,
            "theta_mae": float(np.abs(theta_eval - truth["theta"]).mean()),
            "eval": scores(p_hat, truth), "p_hat": p_hat, "peak_rss_mb": peak_rss_mb()}


def run_recommended(log: str | Path, *, epochs: int = 1, batch_size: int = 4096,
                    lr: float = 0.03, seed: int = 0,
                    max_train_rows: int | None = None) -> dict[str, Any]:
    """``adp.fit_pue`` on the training shards of both logs, with the streamed methods' net.

    ``epochs`` passes per net (each keeps its best epoch on fit_pue's own
    held-out 20 %), so every net trains as long as one streamed run. The
    wall and CPU time cover the whole call: reading the rows, every
    candidate, θ̂, the choice and the refit.
    """
    meta = read_ad_log_meta(log)
    limits: dict[str, int | None] = {"pu": None, "exposure": None}
    if max_train_rows is not None:
        total = meta["counts"]["pu"] + meta["counts"]["exposure"]
        limits = {k: max(2, max_train_rows * meta["counts"][k] // total) for k in limits}
    pu, n_pu = log_rows(meta, "pu", "w", train=True, limit=limits["pu"])
    ex, n_e = log_rows(meta, "exposure", "e", train=True, limit=limits["exposure"])
    start, cpu = time.perf_counter(), time.process_time()
    fit = adp.fit_pue(lambda: build_net(meta, seed=None, name=None), pu, None, ex, None, epochs=epochs,
                      batch_size=batch_size, learning_rate=lr, seed=seed, min_steps=1,
                      verbose=0)
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    feats, truth = eval_data(meta, batch_size)
    p_hat = _probabilities(fit.model, feats)
    # Each candidate as trained for the choice (80 % of the rows), against the truth:
    # whether the rule chose well among them (never read by fit_pue).
    candidates = {}
    for name, model in fit.candidates.items():
        e = scores(_probabilities(model, feats), truth)
        candidates[name] = {k: e[k] for k in ("mae", "log_loss_to_p", "mean_pred")}
    return {"method": "recommended", "logged_rows": meta["counts"]["pu"]
            + meta["counts"]["exposure"], "train_rows": n_pu + n_e, "epochs": epochs,
            "batch_size": batch_size, "lr": lr, "fit_wall_s": wall, "fit_cpu_s": cpu,
            "choice": fit.choice, "scores": fit.scores, "failed": fit.failed,
            "seconds": fit.seconds, "report": fit.report(), "candidates": candidates,
            "eval": scores(p_hat, truth), "p_hat": p_hat, "peak_rss_mb": peak_rss_mb()}


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
            "peak_rss_mb": peak_rss_mb()}


def throughput(log: str | Path, *, steps: int, repeats: int, batch_size: int, lr: float,
               theta_path: str | None, warmup: int = 1) -> dict[str, Any]:
    """Median rows/s and CPU µs/row of each streamed method on one pipeline, round robin."""
    meta = read_ad_log_meta(log)
    theta = keras.models.load_model(theta_path) if theta_path else None
    runs = {}
    for method in STREAMED:
        if method == "ips" and theta is None:
            continue
        model, callbacks, prepare = make_model(method, meta, lr, 0, theta)
        ds = train_data(meta, batch_size, 1, seed=0).repeat()
        if prepare is not None:
            ds = prepare(ds)
        runs[method] = (model, callbacks, EpochTimer(), ds)
    times: dict[str, list[tuple[float, float]]] = {m: [] for m in runs}
    for r in range(warmup + repeats):
        for method, (model, callbacks, timer, ds) in runs.items():
            model.fit(ds, initial_epoch=r, epochs=r + 1, steps_per_epoch=steps,
                      callbacks=[*callbacks, timer], verbose=0, shuffle=False)
            if r >= warmup:
                times[method].append(timer.times[-1])
    out: dict[str, Any] = {"steps": steps, "repeats": repeats, "batch_size": batch_size}
    for method, pairs in times.items():
        out[method] = {"rows_per_s": statistics.median(steps * batch_size / w for w, _ in pairs),
                       "cpu_us_per_row": statistics.median(1e6 * c / (steps * batch_size)
                                                           for _, c in pairs),
                       "rows_per_s_all": [steps * batch_size / w for w, _ in pairs]}
        if method != "bce":  # the method against bce within the same round (similar load)
            out[method]["paired_ratio"] = statistics.median(
                b[0] / v[0] for b, v in zip(times["bce"], times[method]))
    return out
