"""The ads-scale benchmark's data and model: the simulated log, its pipelines, the net.

The log comes from :func:`adpue_tf.synthetic.write_ad_log` (``adpue-tf
simulate-logs``): a PU log keeping ``W = E·Y``, an exposure log keeping ``E``
(16 shards each; the last shard of each is held out for model selection) and
an evaluation set with the true ``p(y=1|x)``, ``θ(e=1|x)`` and ``Y``.

Example:
    >>> log_name(100_000, "cloglog")
    'rows_100000_cloglog'
    >>> log_name(100_000, "logistic", seed=2)
    'rows_100000_seed2'
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import keras
import numpy as np
import tensorflow as tf

import adpue_tf as adp
from adpue_tf.synthetic import AdLogConfig, read_ad_log_meta, write_ad_log

__all__ = ["POLICIES", "build_net", "ensure_log", "eval_data", "feature_spec", "fit_theta",
           "log_name", "log_rows", "train_data", "val_data"]

#: The logging policies a log can be written with (``AdLogConfig.policy``).
POLICIES = ("logistic", "cloglog")


def log_name(rows: int, policy: str, base_rate: float | None = None, seed: int = 0) -> str:
    """The folder of a log of ``rows`` logged rows under ``policy`` (``base_rate``, ``seed``).

    Seed 0 has no suffix (the names of earlier logs); another seed ends in ``_seed{seed}``.

    Example:
        >>> log_name(1000, "cloglog", 0.1), log_name(1000, "logistic")
        ('rows_1000_cloglog_base0.1', 'rows_1000')
    """
    return (f"rows_{rows}" + ("" if policy == "logistic" else f"_{policy}")
            + ("" if base_rate is None else f"_base{base_rate:g}")
            + ("" if seed == 0 else f"_seed{seed}"))


def ensure_log(rows: int, log_dir: Path, workers: int, *, policy: str = "logistic",
               shards: int = 16, eval_rows: int = 50_000,
               base_rate: float | None = None, seed: int = 0) -> Path:
    """The log of ``rows`` logged rows under ``log_dir``, written (generator ``seed``) if missing.

    ``base_rate``: the simulator's mean ``p(y=1|x)`` (``AdLogConfig.base_rate``;
    None: its default conversion intercept).
    """
    if policy not in POLICIES:
        raise ValueError(f"`policy` must be one of {list(POLICIES)}, got {policy!r}.")
    config = AdLogConfig(policy=policy, base_rate=base_rate)  # checks base_rate
    path = Path(log_dir).resolve() / log_name(rows, policy, base_rate, seed)
    if (path / "meta.json").is_file():
        meta = read_ad_log_meta(path)
        if (meta["counts"]["pu"] + meta["counts"]["exposure"] == rows
                and meta["counts"]["eval"] == eval_rows
                and meta["config"].get("policy", "logistic") == policy
                and meta["config"].get("base_rate") == base_rate
                and meta.get("seed", 0) == seed):
            return path
        raise SystemExit(f"{path} holds another log; choose another --log-dir.")
    print(f"writing a {policy} log of {rows:,} rows ({workers} workers)", flush=True)
    start = time.perf_counter()
    write_ad_log(path, rows=rows, shards=shards, seed=seed, eval_rows=eval_rows, workers=workers,
                 config=config)
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
    ds = adp.data.read_tfrecords(chosen, feature_spec(meta, (label,)), labels=label, rows=n)
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


def build_net(meta: dict[str, Any], *, dim: int = 8, seed: int | None = 0,
              name: str | None = "ads_net") -> keras.Model:
    """Embeddings of the ids, device lookup, dense context, MLP + user·item dot, one logit.

    ``seed`` seeds Keras before the layers are made; None leaves the seeding
    to the caller (``fit_pue`` seeds each of its nets). ``name`` None: a
    unique name per call (nets trained side by side need distinct names).
    """
    if seed is not None:
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
    """The training shards of both logs as packed PUE batches, ``epochs`` passes."""
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
