"""Internal: one data set as a stream of fixed-size batches of packed rows.

A stream comes from NumPy arrays (validated eagerly) or from a
``tf.data.Dataset`` of unbatched rows (element spec checked eagerly, values by
``tf.debugging`` assertions while iterated). :mod:`adpue_tf.data` zips the
streams of a setting into interleaved batches.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import tensorflow as tf

from adpue_tf.labels import Source, check_binary, check_finite, pack_labels

_SHUFFLE_BUFFER = 10_000


@dataclasses.dataclass(frozen=True)
class Stream:
    """One data set: how to name it, how many rows, how to batch it."""

    name: str  # argument name of the features, for messages
    source: Source
    rows: int | None  # None: unknown or infinite
    shape: tf.TensorShape  # shape of one row's features
    batches: Callable[[int, bool, int | None], tf.data.Dataset]


def check_exposure(arg: str, e: np.ndarray) -> None:
    """Refuse an exposure vector with no exposure; warn when nothing is unexposed.

    ``e`` all 0: nothing tells unexposed negatives from unseen positives, and a
    PUE/PE model then predicts ``p(y=1|x) ≈ 1`` everywhere; the ``a = f†·(1-E)``
    terms would self-label every row. Refused. ``e`` all 1: the terms in ``a``
    vanish and the risk reduces to BCE on ``W`` (no debiasing). That is right
    when every candidate was shown, but it is also what an impression log that
    records only the shown items looks like, so it warns.
    """
    if not np.any(e):
        raise ValueError(
            f"`{arg}` holds no exposure (all {len(e)} values are 0): the risk cannot tell "
            "unexposed negatives from unseen positives, and the model would predict "
            "p(y=1|x) ≈ 1 everywhere. Pass an exposure log with its exposed rows (E=1)."
        )
    if np.all(e):
        warnings.warn(
            f"`{arg}` has no unexposed rows (all {len(e)} values are 1): the debiasing "
            "terms vanish and the risk reduces to BCE on W. That is right only if every "
            "candidate was shown; a log of impressions alone needs the candidates that "
            "were not shown (E=0) too.", UserWarning, stacklevel=5)


def _array_stream(name: str, source: Source, x: Any, labels: dict) -> Stream:
    """``labels`` maps the role ``"w"``/``"e"`` to ``(argument name, value)``."""
    x = check_finite(name, x)
    if x.size and np.issubdtype(x.dtype, np.floating):
        big = float(np.max(np.abs(x)))
        if big > float(np.finfo(np.float32).max):
            raise ValueError(f"`{name}` holds {big:g}, beyond the float32 range (±3.4e38).")
    x = np.asarray(x, dtype=np.float32)
    if x.ndim < 1 or len(x) == 0:
        raise ValueError(f"`{name}` is empty; it needs at least one row, got shape {x.shape}.")
    if 0 in x.shape[1:]:
        raise ValueError(f"`{name}` has zero-width features: shape {x.shape}; every row "
                         "needs at least one feature.")
    packed = {}
    for role, (arg, value) in labels.items():
        if value is None:
            raise ValueError(f"`{arg}` is required when `{name}` is an array.")
        packed[role] = check_binary(arg, value)
        if len(packed[role]) != len(x):
            raise ValueError(f"`{arg}` has {len(packed[role])} rows but `{name}` has {len(x)}.")
    if "e" in packed:
        check_exposure(labels["e"][0], packed["e"])
    if source == Source.SSE and np.any(packed["w"] > packed["e"]):
        (w_arg, _), (e_arg, _) = labels["w"], labels["e"]
        raise ValueError(f"`{w_arg}` must be 0 where `{e_arg}` is 0 (W = E*Y) in SSE data.")
    xt = tf.constant(x)
    yt = tf.constant(pack_labels(source, n=len(x), **packed))

    def batches(k: int, shuffle: bool, seed: int | None) -> tf.data.Dataset:
        idx = tf.data.Dataset.range(len(x))
        if shuffle:
            idx = idx.shuffle(len(x), seed=seed, reshuffle_each_iteration=True)
        idx = idx.repeat().batch(k, drop_remainder=True)
        return idx.map(lambda i: (tf.gather(xt, i), tf.gather(yt, i)))

    return Stream(name, source, len(x), tf.TensorShape(x.shape[1:]), batches)


def _dataset_stream(name: str, source: Source, ds: tf.data.Dataset, labels: dict) -> Stream:
    """A stream over a Dataset of unbatched rows ``x`` or ``(x, *labels)``."""
    args = [arg for arg, _ in labels.values()]
    for arg, value in labels.values():
        if value is not None:
            raise ValueError(
                f"`{arg}` must be None when `{name}` is a tf.data.Dataset; "
                f"the Dataset yields ({', '.join(['x'] + args)}) instead."
            )
    spec = ds.element_spec
    specs = spec if isinstance(spec, tuple) else (spec,)
    if len(specs) != 1 + len(labels) or not all(isinstance(s, tf.TensorSpec) for s in specs):
        raise ValueError(
            f"`{name}` must yield unbatched rows `{', '.join(['x'] + args)}`, "
            f"got element_spec {spec}."
        )
    for arg, s in zip([name] + args, specs):
        if not (s.dtype.is_floating or s.dtype.is_integer or s.dtype.is_bool):
            raise TypeError(f"`{arg}` must be numeric, got dtype {s.dtype.name}.")
    if specs[0].shape.rank and 0 in specs[0].shape.as_list():
        raise ValueError(f"`{name}` has zero-width features: rows of shape {specs[0].shape}; "
                         "every row needs at least one feature.")
    for arg, s in zip(args, specs[1:]):
        if s.shape.rank is None or s.shape.as_list() not in ([], [1]):
            raise ValueError(f"`{arg}` rows must have shape () or (1,), got {s.shape}.")
    card = int(ds.cardinality())
    if card == 0:
        raise ValueError(f"`{name}` is empty; it needs at least one row.")
    rows = card if card > 0 else None

    def pack(x: tf.Tensor, *labs: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        x = tf.debugging.assert_all_finite(
            tf.cast(x, tf.float32), f"`{name}` contains NaN or infinite values.")
        zeros = tf.zeros(tf.shape(x)[:1], tf.float32)
        cols, checks = {"w": zeros, "e": zeros}, []
        for (role, (arg, _)), lab in zip(labels.items(), labs):
            cols[role] = tf.reshape(tf.cast(lab, tf.float32), [-1])
            ok = tf.reduce_all((cols[role] == 0.0) | (cols[role] == 1.0))
            checks.append(tf.debugging.assert_equal(
                ok, True, message=f"`{arg}` must hold only 0 and 1 (no NaN/inf)."))
        if source == Source.SSE:
            checks.append(tf.debugging.assert_less_equal(
                cols["w"], cols["e"], message=f"`{args[0]}` must be 0 where `{args[1]}` is 0."))
        with tf.control_dependencies(checks):
            y = tf.stack([cols["w"], cols["e"], zeros + float(source)], axis=1)
        return x, y

    def batches(k: int, shuffle: bool, seed: int | None) -> tf.data.Dataset:
        d = ds
        if shuffle:
            buffer = min(rows or _SHUFFLE_BUFFER, _SHUFFLE_BUFFER)
            d = d.shuffle(buffer, seed=seed, reshuffle_each_iteration=True)
        d = d.repeat().batch(k, drop_remainder=True)
        return d.map(pack, num_parallel_calls=tf.data.AUTOTUNE)

    return Stream(name, source, rows, specs[0].shape, batches)


def make_stream(name: str, source: Source, x: Any, **labels: tuple[str, Any]) -> Stream:
    """A :class:`Stream` over arrays or a Dataset; ``labels``: role -> (argument, value)."""
    if isinstance(x, tf.data.Dataset):
        return _dataset_stream(name, source, x, labels)
    return _array_stream(name, source, x, labels)
