"""The builders: zip the data sets of each setting into packed, interleaved batches.

How batches are composed (shares, interleaving, epochs, shuffling, structured
features): :mod:`adpue_tf.data`.
"""

from __future__ import annotations

import math
import numbers
import warnings
import weakref
from collections.abc import Mapping, Sequence
from typing import Any, Union

import numpy as np
import tensorflow as tf

from adpue_tf._internal.checks import check_int, check_same_columns
from adpue_tf.data._streams import Stream, make_stream
from adpue_tf.labels import Source

__all__ = ["pue_dataset", "pe_dataset", "fpue_dataset", "sse_dataset", "sse_pu_dataset",
           "batch_counts", "epoch_length", "features_checked", "interleave_order"]

#: A data set argument: array-like features or a ``tf.data.Dataset`` of rows.
Input = Union[np.ndarray, tf.data.Dataset, Any]
#: ``shares``: positive weights in argument order, or keyed by source name.
Shares = Union[Sequence[float], Mapping[Union[str, Source], float], None]


#: The Datasets the builders returned: their features were checked finite (arrays when
#: built, a Dataset's rows in the pipeline) and their labels packed and checked there.
_CHECKED: weakref.WeakSet = weakref.WeakSet()


def features_checked(ds: Any) -> bool:
    """Whether ``ds`` is a Dataset a builder returned (its features checked finite there).

    Only that very object: any transformation of it makes a new Dataset.

    Example:
        >>> features_checked(pue_dataset(np.ones((4, 2)), [1, 0, 1, 0], np.ones((4, 2)),
        ...                              [1, 0, 1, 0], batch_size=4))
        True
        >>> features_checked(tf.data.Dataset.range(3))
        False
    """
    try:
        return ds in _CHECKED
    except TypeError:  # not weak-referable
        return False


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

    Raises:
        TypeError: if ``rows`` or ``counts`` is not a sequence of ints.
        ValueError: if they differ in length or are empty, a size is negative,
            or a count is below 1.

    Example:
        >>> epoch_length([100, 10], [8, 2])
        13
    """
    lists = {}
    for name, values, low in (("rows", rows, 0), ("counts", counts, 1)):
        if isinstance(values, (str, bytes)) or not isinstance(values, (Sequence, np.ndarray)):
            raise TypeError(f"`{name}` must be a sequence of ints, got {values!r}.")
        lists[name] = [check_int(f"{name}[{i}]", v, low) for i, v in enumerate(values)]
    if len(lists["rows"]) != len(lists["counts"]) or not lists["rows"]:
        raise ValueError(
            f"`rows` and `counts` must have one entry per stream, the same number (at least "
            f"one); got {len(lists['rows'])} and {len(lists['counts'])}.")
    return max(math.ceil(n / k) for n, k in zip(lists["rows"], lists["counts"]))


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


def interleave_order(counts: Sequence[int]) -> np.ndarray:
    """Permutation of the concatenated rows that spreads every stream evenly.

    Row ``m`` of a batch is row ``order[m]`` of the streams' rows concatenated
    (``counts[0]`` rows of the first stream, then the second's...). Slot ``m``
    of a batch of ``B`` rows takes the next row of the stream that is
    furthest behind its target ``(m + 1/2) * k_i / B`` (ties: larger ``k_i``,
    then the earlier stream); rows keep their order within each stream.

    Example:
        >>> interleave_order([2, 1]).tolist()
        [0, 2, 1]
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
    """Every stream's features must have the same structure, dtypes, row shapes and columns."""
    check_same_columns([(s.name, s.columns) for s in streams])
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


#: Rows the builders merge at once: the streams' batches are zipped and interleaved about
#: this many rows at a time (whole batches), then split into batches.
_GROUP_ROWS = 16_384


def _zip(streams: Sequence[Stream], counts: list[int], shuffle: bool,
         seed: int | None) -> tf.data.Dataset:
    """Zip the streams' batches and interleave their rows into one batch.

    The streams give groups of ``m`` batches at once, merged group by group
    (fewer, larger operations than batch by batch), then split into batches.
    """
    m = max(1, _GROUP_ROWS // sum(counts))
    parts = tuple(s.batches(k, m, shuffle, None if seed is None else seed + i)
                  for i, (s, k) in enumerate(zip(streams, counts)))
    order = tf.constant(interleave_order(counts))

    def interleave(*leaves: tf.Tensor) -> tf.Tensor:
        return tf.gather(tf.concat(leaves, axis=1), order, axis=1)

    def merge(*groups: tuple[Any, tf.Tensor]) -> tuple[Any, tf.Tensor]:
        x = tf.nest.map_structure(interleave, *[g[0] for g in groups])
        return x, interleave(*[g[1] for g in groups])

    merged = tf.data.Dataset.zip(parts).map(merge, num_parallel_calls=tf.data.AUTOTUNE)
    return merged.unbatch() if m > 1 else merged.map(
        lambda x, y: (tf.nest.map_structure(lambda t: t[0], x), y[0]))


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
    for s in streams:  # of unknown size: one that yields nothing ends every epoch at once
        if s.rows is None and tf.executing_eagerly() \
                and not any(True for _ in s.batches(1, 1, False, 0).take(1)):
            raise ValueError(f"`{s.name}` is empty: the Dataset (of unknown cardinality, a "
                             "`filter` say) yields no rows, and every batch needs some.")
    if seed is not None:
        check_int("seed", seed, -(2**63))
    if not isinstance(shuffle, (bool, np.bool_)):
        raise TypeError(f"`shuffle` must be True or False, got {shuffle!r}.")
    weights = _share_weights(shares, streams)
    batch_size = _fit_batch_size(streams, weights, batch_size, shares is None)
    counts = batch_counts(weights, batch_size)
    n = (epoch_length([s.rows or 0 for s in streams], counts) if steps_per_epoch is None
         else check_int("steps_per_epoch", steps_per_epoch, 1))
    ds = _zip(streams, counts, bool(shuffle), seed).take(n)
    ds = ds.apply(tf.data.experimental.assert_cardinality(n)).prefetch(tf.data.AUTOTUNE)
    _CHECKED.add(ds)
    return ds


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
