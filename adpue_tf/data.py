"""tf.data builders that zip the data sets of each setting into packed batches.

Every builder returns a ``tf.data.Dataset`` of ``(x, y)`` batches: ``x`` float32
``(batch_size, ...)`` (or a structure of features, below) and ``y`` float32
``(batch_size, 3)`` = ``(w, e, source)`` in the layout of :mod:`adpue_tf.labels`.

Inputs: array-likes (features ``(n, ...)``, labels ``(n,)`` or ``(n, 1)`` in
{0, 1}), validated eagerly; or a ``tf.data.Dataset`` of *unbatched* rows
yielding ``(x, w)`` (PU), ``(x, e)`` (E), ``(x, w, e)`` (SSE) or ``x`` (P, U),
whose label arguments are then ``None``. A Dataset's element spec is checked
eagerly and its values by ``tf.debugging`` assertions while it is iterated;
:func:`read_tfrecords` streams such rows from sharded ``tf.Example`` files.

Structured features: ``x`` may also be a dict (or a tuple, nested at will) of
per-row arrays, e.g. ``{"user_id": ids, "device": names, "context": floats}``,
or a Dataset whose rows' features are such a structure; ``x`` of every batch
then has the same structure. Each leaf keeps its kind: floats become float32
(checked finite), integers int64, bools stay bool and strings stay strings
(ids for a ``StringLookup``). A single array (or a list of lists) is one dense
feature tensor, cast to float32 as before. All data sets of a setting need the
same structure, dtypes and row shapes; errors name the argument and the key,
e.g. ```x_pu["user_id"]```.

Batches: each batch holds ``k_i`` rows of every stream ``i``, from ``shares``
(positive weights in argument order, or a mapping by source name such as
``{"pu": 3, "e": 1}``; default: the data set sizes) by the largest-remainder
method, every ``k_i >= 1``, ``sum(k_i) == batch_size`` (:func:`batch_counts`).
The rows are interleaved by one fixed permutation that spreads every stream
evenly over the batch, so when a distribution strategy splits a batch into
``R`` contiguous slices, one per replica, each slice holds every source with
``k_i >= 2R`` (``k_i >= R`` when there are two streams).

A ``batch_size`` larger than the data (default ``shares``) is capped at the
number of rows, with a warning: one batch per epoch holding every row once, as
Keras does with arrays. With explicit ``shares`` a small stream may need more
rows per batch than it has (oversampling); its rows then repeat within a
batch, and a warning says so and which ``batch_size`` avoids it.

Exposure: an exposure vector (``e``, ``e_sse``) given as an array that holds
no exposure at all (every value 0) is refused, because nothing then tells
unexposed negatives from unseen positives and the model learns
``p(y=1|x) ≈ 1``; one with no unexposed row (every value 1) warns, because
the debiasing terms vanish and the risk becomes BCE on ``W``: right only when
every candidate was shown. A ``tf.data.Dataset`` is streamed, so these two
checks apply to arrays only.

Several workers: build one dataset per input pipeline (e.g. inside
``strategy.distribute_datasets_from_function``) with that pipeline's share of
the global batch as ``batch_size`` and :func:`read_tfrecords`'s
``input_context`` so each reads its own files; every per-pipeline batch then
holds every source (``k_i >= 1``), and the shares hold globally as long as the
files split the rows evenly. With one pipeline and a strategy that splits each
global batch, the interleaving above already gives every replica every source.

Epoch: one epoch is ``max_i ceil(n_i / k_i)`` batches (:func:`epoch_length`),
enough that every row of the stream that takes longest is seen at least once;
the other streams repeat, reshuffled, as needed. The dataset has this finite
cardinality, so ``len(ds)`` works and Keras shows progress. A Dataset of
unknown or infinite cardinality needs explicit ``shares`` and
``steps_per_epoch``; ``steps_per_epoch`` also overrides the formula.

Shuffling: with ``shuffle=True`` each stream is reshuffled every time it is
iterated (each pass and each Keras epoch); a fixed ``seed`` makes two builds
yield identical batches. Arrays are shuffled fully (by index), a Dataset with
a buffer of ``min(n, 10_000)`` rows. ``shuffle=False`` gives a deterministic
order (for validation data).
"""

from __future__ import annotations

import math
import numbers
import os
import warnings
from collections.abc import Mapping, Sequence
from typing import Any, Union

import keras
import numpy as np
import tensorflow as tf

from adpue_tf._checks import check_int
from adpue_tf._streams import Stream, make_stream
from adpue_tf.labels import Source

__all__ = ["pue_dataset", "pe_dataset", "fpue_dataset", "sse_dataset", "sse_pu_dataset",
           "batch_counts", "epoch_length", "read_tfrecords", "with_propensity"]

#: A data set argument: array-like features or a ``tf.data.Dataset`` of rows.
Input = Union[np.ndarray, tf.data.Dataset, Any]
#: ``shares``: positive weights in argument order, or keyed by source name.
Shares = Union[Sequence[float], Mapping[Union[str, Source], float], None]



def batch_counts(shares: Sequence[float], batch_size: int) -> list[int]:
    """Split ``batch_size`` into integer per-stream counts proportional to ``shares``.

    Uses the largest-remainder method (ties go to the earlier stream), then
    lifts any zero count to 1 by taking rows from the largest count.

    Args:
        shares: positive weights, one per stream.
        batch_size: rows per batch, at least ``len(shares)``.

    Returns:
        Counts ``k_i >= 1`` with ``sum(k_i) == batch_size``.

    Raises:
        TypeError: if ``batch_size`` is not an int or a share is not a number.
        ValueError: if ``batch_size < len(shares)`` or a share is not positive and finite.

    Example:
        >>> batch_counts([3, 1], 10)
        [8, 2]
    """
    check_int("batch_size", batch_size, max(1, len(shares)), " (one row per stream)")
    w = np.array([_check_share(s) for s in shares], dtype=np.float64)
    raw = batch_size * w / w.sum()
    counts = np.floor(raw).astype(int)
    order = np.argsort(-(raw - counts), kind="stable")
    counts[order[: batch_size - counts.sum()]] += 1
    while np.any(counts == 0):
        counts[np.argmax(counts)] -= 1
        counts[np.argmin(counts)] += 1
    return counts.tolist()


def epoch_length(rows: Sequence[int], counts: Sequence[int]) -> int:
    """Number of batches in one epoch: ``max_i ceil(rows[i] / counts[i])``.

    Args:
        rows: size of each data set.
        counts: rows of each data set per batch (see :func:`batch_counts`).

    Returns:
        Batches needed so every row of the slowest stream is seen at least once.

    Example:
        >>> epoch_length([100, 10], [8, 2])
        13
    """
    return max(math.ceil(n / k) for n, k in zip(rows, counts))


def _check_share(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"`shares` must hold numbers, got {value!r}.")
    if not (math.isfinite(float(value)) and float(value) > 0):
        raise ValueError(f"`shares` must be positive and finite, got {value!r}.")
    return float(value)


def _share_weights(shares: Shares, streams: Sequence[Stream]) -> list[float]:
    keys = [s.source.name.lower() for s in streams]
    if shares is None:
        return [float(s.rows or 0) for s in streams]  # known: _build checked
    if isinstance(shares, Mapping):
        given = {(k.name if isinstance(k, Source) else str(k)).lower(): v
                 for k, v in shares.items()}
        if set(given) != set(keys):
            raise ValueError(f"`shares` must have exactly the keys {keys}, got {list(shares)}.")
        shares = [given[k] for k in keys]
    if isinstance(shares, np.ndarray):
        shares = shares.tolist()
    if isinstance(shares, (str, bytes)) or not isinstance(shares, Sequence):
        raise TypeError(f"`shares` must be a sequence or a mapping, got {type(shares).__name__}.")
    if len(shares) != len(streams):
        raise ValueError(f"`shares` needs {len(streams)} weight(s) {keys}, got {len(shares)}.")
    return [_check_share(s) for s in shares]


def _interleave_order(counts: Sequence[int]) -> np.ndarray:
    """Permutation of the concatenated rows that spreads every stream evenly.

    Slot ``m`` of a batch of ``B`` rows takes the next row of the stream that is
    furthest behind its target ``(m + 1/2) * k_i / B`` (ties: larger ``k_i``,
    then the earlier stream); rows keep their order within each stream.
    """
    total, taken, order = sum(counts), [0] * len(counts), []
    starts = np.cumsum([0, *counts[:-1]])
    for m in range(total):
        i = max((i for i, k in enumerate(counts) if taken[i] < k),
                key=lambda i: ((2 * m + 1) * counts[i] - 2 * total * taken[i], counts[i]))
        order.append(starts[i] + taken[i])
        taken[i] += 1
    return np.array(order, dtype=np.int64)


def _check_shapes(streams: Sequence[Stream]) -> None:
    """Every stream's features must have the same structure, dtypes and row shapes."""
    first = streams[0]
    for s in streams[1:]:
        try:
            tf.nest.assert_same_structure(first.spec, s.spec)
        except (ValueError, TypeError):
            def keys(st: Stream) -> Any:
                return tf.nest.map_structure(lambda _: "...", st.spec)
            raise ValueError(
                f"Feature structures differ: `{first.name}` rows are {keys(first)} but "
                f"`{s.name}` rows are {keys(s)}; every data set needs the same features."
            ) from None
        for (pa, a), (pb, b) in zip(first.leaves, s.leaves):
            if a.dtype != b.dtype:
                raise ValueError(f"Feature dtypes differ: `{pa}` is {a.dtype.name} but "
                                 f"`{pb}` is {b.dtype.name}.")
            if not a.shape.is_compatible_with(b.shape):
                what = "shapes" if pa == first.name else "shapes of a feature"
                raise ValueError(
                    f"Feature {what} differ: `{pa}` rows have shape {a.shape} "
                    f"but `{pb}` rows have shape {b.shape}."
                )


def _zip(streams: Sequence[Stream], counts: list[int], shuffle: bool,
         seed: int | None) -> tf.data.Dataset:
    """Zip the streams' batches and interleave their rows into one batch."""
    parts = tuple(s.batches(k, shuffle, None if seed is None else seed + i)
                  for i, (s, k) in enumerate(zip(streams, counts)))
    order = tf.constant(_interleave_order(counts))

    def merge(*batches: tuple[Any, tf.Tensor]) -> tuple[Any, tf.Tensor]:
        x = tf.nest.map_structure(lambda *leaves: tf.gather(tf.concat(leaves, axis=0), order),
                                  *[b[0] for b in batches])
        y = tf.concat([b[1] for b in batches], axis=0)
        return x, tf.gather(y, order)

    return tf.data.Dataset.zip(parts).map(merge, num_parallel_calls=tf.data.AUTOTUNE)


def _fit_batch_size(streams: Sequence[Stream], weights: list[float], batch_size: int,
                    default_shares: bool) -> int:
    """Cap ``batch_size`` at the data's size (default shares) or warn of repeated rows."""
    total = sum(s.rows or 0 for s in streams)  # default shares: every size is known
    if default_shares and batch_size > total:
        warnings.warn(
            f"`batch_size`={batch_size} is larger than the data ({total} rows in all); "
            f"using batch_size={total}: one batch per epoch, every row once.",
            UserWarning, stacklevel=4)
        return total
    counts = batch_counts(weights, batch_size)
    over = [(s, k, s.rows) for s, k in zip(streams, counts) if s.rows is not None and k > s.rows]
    if over:
        fit = max(len(streams), min(
            int(s.rows * sum(weights) / w) for s, w in zip(streams, weights) if s.rows))
        fit = min(fit, batch_size)
        while fit > len(streams) and any(
                s.rows is not None and k > s.rows
                for s, k in zip(streams, batch_counts(weights, fit))):
            fit -= 1
        said = "; ".join(f"{k} rows of `{s.name}` in each batch but it has only {s.rows}, "
                         f"so each of its rows repeats about {k / n:.1f}x within a batch"
                         for s, k, n in over)
        warnings.warn(
            f"`batch_size`={batch_size} with these `shares` puts {said}. "
            f"batch_size <= {fit} avoids it.", UserWarning, stacklevel=4)
    return batch_size


def _build(streams: Sequence[Stream], batch_size: int, shares: Shares, seed: int | None,
           shuffle: bool, steps_per_epoch: int | None) -> tf.data.Dataset:
    """Validate, count, zip, interleave, cut to one epoch and prefetch."""
    check_int("batch_size", batch_size, max(1, len(streams)), " (one row per stream)")
    _check_shapes(streams)
    unknown = [s.name for s in streams if s.rows is None]
    if unknown and (shares is None or steps_per_epoch is None):
        raise ValueError(
            f"{', '.join(f'`{n}`' for n in unknown)} has unknown or infinite "
            "cardinality: pass `shares` and `steps_per_epoch` explicitly."
        )
    if seed is not None:
        check_int("seed", seed, -(2**63))
    weights = _share_weights(shares, streams)
    batch_size = _fit_batch_size(streams, weights, batch_size, shares is None)
    counts = batch_counts(weights, batch_size)
    n = (epoch_length([s.rows or 0 for s in streams], counts) if steps_per_epoch is None
         else check_int("steps_per_epoch", steps_per_epoch, 1))
    ds = _zip(streams, counts, bool(shuffle), seed).take(n)
    ds = ds.apply(tf.data.experimental.assert_cardinality(n))
    return ds.prefetch(tf.data.AUTOTUNE)


def pue_dataset(x_pu: Input, w: Any, x_e: Input, e: Any, *, batch_size: int = 512,
                shares: Shares = None, seed: int | None = None, shuffle: bool = True,
                steps_per_epoch: int | None = None) -> tf.data.Dataset:
    """Batches of the PUE setting: one-sample PU data ``(W, x)`` and exposure data ``(E, x)``.

    Args:
        x_pu: PU features ``(n_pu, ...)``, or a Dataset of ``(x, w)`` rows.
        w: observed positives ``W`` of ``x_pu`` (None for a Dataset).
        x_e: exposure features ``(n_e, ...)``, or a Dataset of ``(x, e)`` rows.
        e: exposures ``E`` of ``x_e`` (None for a Dataset).
        batch_size: rows per batch, at least the number of streams.
        shares: per-batch weights ``(pu, e)``; default: the data set sizes.
        seed: shuffling seed; fixed, two builds yield identical batches.
        shuffle: shuffle each stream (False for validation data).
        steps_per_epoch: batches per epoch; default ``max_i ceil(n_i / k_i)``.

    Returns:
        A finite Dataset of ``(x, y)`` batches, ``y = (w, e, source)``.

    Raises:
        TypeError: on non-numeric or complex data or a wrongly typed argument.
        ValueError: on labels outside {0, 1}, NaN/inf or values beyond float32,
            mismatched shapes or lengths, ragged, empty or zero-width data, an
            ``e`` with no exposure (all 0), or bad ``batch_size``/``shares``.

    Warns:
        UserWarning: an ``e`` with no unexposed row (all 1: no debiasing); a
            ``batch_size`` larger than the data (capped), or ``shares`` that
            repeat a stream's rows within a batch.

    Example:
        >>> ds = pue_dataset(np.ones((6, 2)), [0, 1, 0, 1, 0, 1],
        ...                  np.ones((3, 2)), [1, 0, 1], batch_size=3, seed=0)
        >>> len(ds), [tuple(t.shape) for t in next(iter(ds))]
        (3, [(3, 2), (3, 3)])
    """
    streams = [make_stream("x_pu", Source.PU, x_pu, w=("w", w)),
               make_stream("x_e", Source.E, x_e, e=("e", e))]
    return _build(streams, batch_size, shares, seed, shuffle, steps_per_epoch)


def pe_dataset(x_p: Input, x_e: Input, e: Any, *, batch_size: int = 512,
               shares: Shares = None, seed: int | None = None, shuffle: bool = True,
               steps_per_epoch: int | None = None) -> tf.data.Dataset:
    """Batches of the PE setting: positives ``x`` and exposure data ``(E, x)``.

    Args:
        x_p: positive features, or a Dataset of ``x`` rows.
        x_e: exposure features, or a Dataset of ``(x, e)`` rows.
        e: exposures of ``x_e`` (None for a Dataset).
        batch_size, shares, seed, shuffle, steps_per_epoch: as in
            :func:`pue_dataset`; ``shares`` is ordered ``(p, e)``.

    Returns:
        A finite Dataset of ``(x, y)`` batches; errors as in :func:`pue_dataset`.

    Example:
        >>> ds = pe_dataset(np.ones((4, 2)), np.ones((4, 2)), [1, 0, 1, 0],
        ...                 batch_size=4, shares=[1, 1], shuffle=False)
        >>> next(iter(ds))[1][:, 2].numpy().tolist()
        [2.0, 1.0, 2.0, 1.0]
    """
    streams = [make_stream("x_p", Source.P, x_p), make_stream("x_e", Source.E, x_e, e=("e", e))]
    return _build(streams, batch_size, shares, seed, shuffle, steps_per_epoch)


def fpue_dataset(x_p: Input, x_u: Input, x_e: Input, e: Any, *, batch_size: int = 512,
                 shares: Shares = None, seed: int | None = None, shuffle: bool = True,
                 steps_per_epoch: int | None = None) -> tf.data.Dataset:
    """Batches of the FPUE setting: positives, unlabeled ``x`` and exposure data.

    Args:
        x_p: positive features, or a Dataset of ``x`` rows.
        x_u: unlabeled features, or a Dataset of ``x`` rows.
        x_e: exposure features, or a Dataset of ``(x, e)`` rows.
        e: exposures of ``x_e`` (None for a Dataset).
        batch_size, shares, seed, shuffle, steps_per_epoch: as in
            :func:`pue_dataset`; ``shares`` is ordered ``(p, u, e)``.

    Returns:
        A finite Dataset of ``(x, y)`` batches; errors as in :func:`pue_dataset`.

    Example:
        >>> ds = fpue_dataset(np.ones((2, 1)), np.ones((4, 1)), np.ones((2, 1)),
        ...                   [1, 0], batch_size=4, shuffle=False)
        >>> sorted(next(iter(ds))[1][:, 2].numpy().tolist())
        [1.0, 2.0, 3.0, 3.0]
    """
    streams = [make_stream("x_p", Source.P, x_p), make_stream("x_u", Source.U, x_u),
               make_stream("x_e", Source.E, x_e, e=("e", e))]
    return _build(streams, batch_size, shares, seed, shuffle, steps_per_epoch)


def sse_dataset(x_sse: Input, w: Any, e: Any, *, batch_size: int = 512,
                shares: Shares = None, seed: int | None = None, shuffle: bool = True,
                steps_per_epoch: int | None = None) -> tf.data.Dataset:
    """Batches of SSE data ``(W, E, x)``: exposure observed together with ``W``.

    Args:
        x_sse: SSE features, or a Dataset of ``(x, w, e)`` rows.
        w: observed positives (None for a Dataset); must be 0 wherever ``e`` is 0.
        e: exposures (None for a Dataset).
        batch_size, shares, seed, shuffle, steps_per_epoch: as in
            :func:`pue_dataset`; ``shares`` has one weight (``sse``).

    Returns:
        A finite Dataset of ``(x, y)`` batches; errors as in :func:`pue_dataset`,
        and a ValueError where ``w`` is 1 but ``e`` is 0.

    Example:
        >>> ds = sse_dataset(np.ones((5, 2)), [1, 0, 0, 1, 0], [1, 1, 0, 1, 0],
        ...                  batch_size=2, shuffle=False)
        >>> len(ds), next(iter(ds))[1].numpy().tolist()
        (3, [[1.0, 1.0, 4.0], [0.0, 1.0, 4.0]])
    """
    streams = [make_stream("x_sse", Source.SSE, x_sse, w=("w", w), e=("e", e))]
    return _build(streams, batch_size, shares, seed, shuffle, steps_per_epoch)


def sse_pu_dataset(x_sse: Input, w_sse: Any, e_sse: Any, x_pu: Input, w_pu: Any, *,
                   batch_size: int = 512, shares: Shares = None, seed: int | None = None,
                   shuffle: bool = True, steps_per_epoch: int | None = None) -> tf.data.Dataset:
    """Batches of the 3SE setting: SSE data ``(W, E, x)`` and PU data ``(W, x)``.

    Args:
        x_sse: SSE features, or a Dataset of ``(x, w, e)`` rows.
        w_sse: observed positives of ``x_sse`` (None for a Dataset).
        e_sse: exposures of ``x_sse`` (None for a Dataset).
        x_pu: PU features, or a Dataset of ``(x, w)`` rows.
        w_pu: observed positives of ``x_pu`` (None for a Dataset).
        batch_size, shares, seed, shuffle, steps_per_epoch: as in
            :func:`pue_dataset`; ``shares`` is ordered ``(sse, pu)``.

    Returns:
        A finite Dataset of ``(x, y)`` batches; errors as in :func:`sse_dataset`.

    Example:
        >>> ds = sse_pu_dataset(np.ones((2, 3)), [1, 0], [1, 0],
        ...                     np.ones((6, 3)), [0, 1, 0, 0, 1, 0], batch_size=4)
        >>> len(ds), sorted(next(iter(ds))[1][:, 2].numpy().tolist())
        (2, [0.0, 0.0, 0.0, 4.0])
    """
    streams = [make_stream("x_sse", Source.SSE, x_sse, w=("w_sse", w_sse), e=("e_sse", e_sse)),
               make_stream("x_pu", Source.PU, x_pu, w=("w_pu", w_pu))]
    return _build(streams, batch_size, shares, seed, shuffle, steps_per_epoch)


def with_propensity(dataset: tf.data.Dataset, exposure_model: Any, *,
                    from_logits: bool = False) -> tf.data.Dataset:
    """Append the propensity ``θ̂(e=1|x)`` of every row as column 3 of the labels.

    For :class:`adpue_tf.IPSLoss`, which weights the cross-entropy on ``W`` by
    ``1/θ̂``: ``exposure_model`` (e.g. :func:`adpue_tf.exposure.fit_exposure_model`,
    fitted on the exposure log) is evaluated on each batch's features.

    Args:
        dataset: batches ``(x, y)`` of a builder of this module, ``y`` of
            shape ``(batch, 3)``; ``x`` a tensor or a dict of tensors.
        exposure_model: a Keras model or callable ``x -> θ̂`` of shape
            ``(batch,)`` or ``(batch, 1)``.
        from_logits: whether ``exposure_model`` outputs logits (else probabilities).

    Returns:
        The batches ``(x, y)`` with ``y`` of shape ``(batch, 4)``.

    Raises:
        TypeError: if ``dataset`` is not a ``tf.data.Dataset`` of ``(x, y)`` or
            ``exposure_model`` is not callable.
        ValueError: if the labels already have 4 columns.

    Example:
        >>> import numpy as np, keras
        >>> ds = pue_dataset(np.zeros((4, 2)), [1, 0, 1, 0], np.zeros((4, 2)), [1, 0, 1, 0],
        ...                  batch_size=4, seed=0)
        >>> half = lambda x: keras.ops.full((keras.ops.shape(x)[0], 1), 0.5)
        >>> x, y = next(iter(with_propensity(ds, half)))
        >>> y.shape, float(y[0, 3])
        (TensorShape([4, 4]), 0.5)
    """
    if not isinstance(dataset, tf.data.Dataset):
        raise TypeError(f"`dataset` must be a tf.data.Dataset of (x, y) batches, "
                        f"got {type(dataset).__name__}.")
    spec = dataset.element_spec
    if not (isinstance(spec, tuple) and len(spec) == 2 and
            isinstance(spec[1], tf.TensorSpec)):
        raise TypeError("`dataset` must yield (x, y) batches with packed labels y, got "
                        f"element spec {spec}.")
    if spec[1].shape.rank != 2 or spec[1].shape[-1] != 3:
        raise ValueError(f"`dataset` labels must have shape (batch, 3) (w, e, source), got "
                         f"{spec[1].shape}; column 3 is where θ̂ goes.")
    if not callable(exposure_model):
        raise TypeError(f"`exposure_model` must be a Keras model or a callable, "
                        f"got {type(exposure_model).__name__}.")
    if not isinstance(from_logits, bool):
        raise TypeError(f"`from_logits` must be a bool, got {from_logits!r}.")

    def attach(x: Any, y: Any) -> tuple[Any, Any]:
        out = exposure_model(x, training=False) if isinstance(
            exposure_model, keras.Model) else exposure_model(x)
        theta = tf.reshape(tf.cast(out, tf.float32), (-1, 1))
        if from_logits:
            theta = tf.sigmoid(theta)
        return x, tf.concat([tf.cast(y, tf.float32), theta], axis=1)

    return dataset.map(attach, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)


def _tfrecord_files(files: Any) -> list[str]:
    patterns = [files] if isinstance(files, (str, os.PathLike)) else files
    if isinstance(patterns, (bytes, Mapping)) or not isinstance(patterns, Sequence) or not patterns:
        raise TypeError("`files` must be a path or glob pattern, or a non-empty sequence of "
                        f"them, got {files!r}.")
    found: list[str] = []
    for pattern in patterns:
        if not isinstance(pattern, (str, os.PathLike)):
            raise TypeError(f"`files` must hold paths or glob patterns, got {pattern!r}.")
        hits = sorted(tf.io.gfile.glob(os.fspath(pattern)))
        if not hits:
            raise FileNotFoundError(f"`files`: no file matches {os.fspath(pattern)!r}.")
        found += [h for h in hits if h not in found]
    return found


def read_tfrecords(files: Any, features: Mapping[str, tf.io.FixedLenFeature], *,
                   labels: str | Sequence[str] | None = None, rows: int | None = None,
                   shuffle_files: bool = False, seed: int | None = None,
                   input_context: tf.distribute.InputContext | None = None,
                   compression_type: str | None = None, parse_batch: int = 256,
                   deterministic: bool = True) -> tf.data.Dataset:
    """Stream the rows of sharded TFRecord files of ``tf.Example`` for the builders.

    Nothing is loaded in memory: the files are read by a parallel interleave,
    parsed ``parse_batch`` records at a time in parallel, split back into rows
    and prefetched. The result is a Dataset of unbatched rows ``(features,
    *labels)`` (``features`` alone without ``labels``), ready for an ``x_*``
    argument of any builder, e.g. ``pue_dataset(read_tfrecords(pu_files, spec,
    labels="w"), None, read_tfrecords(e_files, spec, labels="e"), None, ...)``.

    Args:
        files: a path or glob pattern (``"log/pu/part-*.tfrecord"``), or a
            sequence of them; matches are sorted, so the order is reproducible.
        features: ``tf.io.FixedLenFeature`` per key, including the label keys:
            the feature spec of ``tf.io.parse_example``.
        labels: the key (PU: ``"w"``, E: ``"e"``) or keys (SSE: ``("w", "e")``)
            returned after the features, in order; None for P or U rows.
        rows: the number of rows, if known (e.g. from the log's metadata): the
            Dataset then has this cardinality, so the builders can use their
            default ``shares`` and epoch length; a different count fails while
            iterating. Unknown (None): pass ``shares`` and ``steps_per_epoch``.
        shuffle_files: shuffle the file order every pass (the builders shuffle
            rows within a buffer of 10,000).
        seed: seed of the file shuffle.
        input_context: from ``strategy.distribute_datasets_from_function``:
            each input pipeline reads its own files (``files[i::n]``; it needs
            at least ``n`` files), so workers never read the same rows.
            ``rows`` is then this pipeline's share.
        compression_type: ``"GZIP"``, ``"ZLIB"`` or None, as for ``TFRecordDataset``.
        parse_batch: records parsed per call.
        deterministic: keep the order of the interleave (False: faster, order varies).

    Returns:
        A Dataset of rows ``(features_dict, label, ...)``, or ``features_dict``.

    Raises:
        FileNotFoundError: a pattern matches no file.
        TypeError: a bad ``files`` or a spec that is not a ``FixedLenFeature``
            (naming the key).
        ValueError: a label key missing from ``features``, no feature left
            besides the labels, too few files for the input pipelines, bad sizes.

    Example:
        >>> import tempfile, os
        >>> path = os.path.join(tempfile.mkdtemp(), "part-0.tfrecord")
        >>> with tf.io.TFRecordWriter(path) as f:
        ...     for i in range(4):
        ...         f.write(tf.train.Example(features=tf.train.Features(feature={
        ...             "id": tf.train.Feature(int64_list=tf.train.Int64List(value=[i])),
        ...             "w": tf.train.Feature(int64_list=tf.train.Int64List(value=[i % 2]))})
        ...         ).SerializeToString())
        >>> spec = {"id": tf.io.FixedLenFeature([], tf.int64),
        ...         "w": tf.io.FixedLenFeature([], tf.int64)}
        >>> rows = read_tfrecords(path, spec, labels="w", rows=4)
        >>> [(int(x["id"]), int(w)) for x, w in rows]
        [(0, 0), (1, 1), (2, 0), (3, 1)]
    """
    paths = _tfrecord_files(files)
    if not isinstance(features, Mapping) or not features:
        raise TypeError("`features` must be a non-empty dict of tf.io.FixedLenFeature, got "
                        f"{features!r}.")
    for key, spec in features.items():
        if not isinstance(key, str):
            raise TypeError(f"`features` keys must be strings, got {key!r}.")
        if not isinstance(spec, tf.io.FixedLenFeature):
            raise TypeError(
                f'`features["{key}"]` must be a tf.io.FixedLenFeature (one dense value per '
                f"row), got {type(spec).__name__}.")
    keys = [] if labels is None else [labels] if isinstance(labels, str) else list(labels)
    for key in keys:
        if not isinstance(key, str) or key not in features:
            raise ValueError(f"`labels`: {key!r} is not a key of `features` "
                             f"({sorted(features)}).")
    if len(set(keys)) != len(keys):
        raise ValueError(f"`labels` repeats a key: {keys}.")
    if not set(features) - set(keys):
        raise ValueError("`features` has no feature besides the labels.")
    if rows is not None:
        rows = check_int("rows", rows, 1)
    parse_batch = check_int("parse_batch", parse_batch, 1)
    if seed is not None:
        seed = check_int("seed", seed, -(2**63))
    if input_context is not None:
        n, i = input_context.num_input_pipelines, input_context.input_pipeline_id
        if len(paths) < n:
            raise ValueError(f"`files`: {len(paths)} file(s) for {n} input pipelines; each "
                             "pipeline reads whole files, so write at least one per pipeline.")
        paths = paths[i::n]
    spec = dict(features)

    def parse(serialized: tf.Tensor) -> Any:
        parsed = tf.io.parse_example(serialized, spec)
        x = {k: v for k, v in parsed.items() if k not in keys}
        return (x, *[parsed[k] for k in keys]) if keys else x

    ds = tf.data.Dataset.from_tensor_slices(paths)
    if shuffle_files:
        ds = ds.shuffle(len(paths), seed=seed, reshuffle_each_iteration=True)
    ds = ds.interleave(
        lambda f: tf.data.TFRecordDataset(f, compression_type=compression_type),
        cycle_length=min(len(paths), 16), num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=deterministic)
    ds = ds.batch(parse_batch).map(parse, num_parallel_calls=tf.data.AUTOTUNE,
                                   deterministic=deterministic).unbatch()
    if rows is not None:
        ds = ds.apply(tf.data.experimental.assert_cardinality(rows))
    return ds.prefetch(tf.data.AUTOTUNE)
