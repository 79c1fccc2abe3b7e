"""Internal: one data set as a stream of fixed-size batches of packed rows.

A stream comes from NumPy arrays (validated eagerly) or from a
``tf.data.Dataset`` of unbatched rows (element spec checked eagerly, values by
``tf.debugging`` assertions while iterated). :mod:`adpue_tf.data` zips the
streams of a setting into interleaved batches.

Features are one dense tensor per row (cast to float32, as always), or a
*structure*: a dict (or a tuple, nested at will) of per-row tensors, each leaf
kept in its kind: floats as float32, integers as int64, bools, strings (ids).
Messages name a leaf by its path, e.g. ```x_pu["user_id"]```.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import tensorflow as tf

from adpue_tf._internal.checks import check_dense, table_columns
from adpue_tf.data.tfrecord import parsed_batches
from adpue_tf.labels import Source, check_binary, check_finite, check_float32_range, pack_labels

#: Rows a stream from a Dataset of rows is batched in before it is shuffled (read_tfrecords'
#: own rows keep the batches it parsed them in).
_CHUNK = 1024
#: Rows shuffled together: a stream is a sequence of chunks, shuffled in a buffer of about
#: this many rows, then cut into windows of this many rows, each permuted as a whole
#: (:func:`shuffled_rows`).
SHUFFLE_ROWS = 16_384


@dataclasses.dataclass(frozen=True)
class Stream:
    """One data set: how to name it, how many rows, how to batch it."""

    name: str  # argument name of the features, for messages
    source: Source
    rows: int | None  # None: unknown or infinite
    spec: Any  # a tf.TensorSpec of one row's features, or a nest (dict/tuple) of them
    #: ``batches(k, m, shuffle, seed)``: the rows (features, packed labels) in groups of
    #: ``m`` batches of ``k`` rows (every leaf ``(m, k, ...)``), repeated without end.
    batches: Callable[[int, int, bool, int | None], tf.data.Dataset]
    #: The column names of a table given as the features (a pandas DataFrame), else None.
    columns: tuple[str, ...] | None = None

    @property
    def leaves(self) -> list[tuple[str, tf.TensorSpec]]:
        """``(name, spec)`` of every feature leaf, in ``tf.nest`` order."""
        return list(zip(tf.nest.flatten(leaf_names(self.name, self.spec)),
                        tf.nest.flatten(self.spec)))


def is_structure(x: Any) -> bool:
    """Whether features ``x`` are a structure (a dict or a tuple) rather than one array."""
    return isinstance(x, (Mapping, tuple))


def leaf_names(name: str, x: Any) -> Any:
    """The structure of ``x`` with each leaf replaced by its path, e.g. ``x["ids"][0]``."""
    if isinstance(x, Mapping):
        return {k: leaf_names(f"{name}[{k!r}]".replace("'", '"'), v) for k, v in x.items()}
    if isinstance(x, tuple) and not hasattr(x, "_fields"):
        return tuple(leaf_names(f"{name}[{i}]", v) for i, v in enumerate(x))
    return name


def _map_leaves(fn: Callable[[str, Any], Any], name: str, x: Any) -> Any:
    """Apply ``fn(path, leaf)`` to every leaf of a dict/tuple nest, keeping the structure."""
    if isinstance(x, Mapping):
        if not x:
            raise ValueError(f"`{name}` is an empty dict; it needs at least one feature.")
        for k in x:
            if not isinstance(k, str):
                raise TypeError(f"`{name}` must have string keys, got {k!r}.")
        return {k: _map_leaves(fn, f'{name}["{k}"]', v) for k, v in x.items()}
    if isinstance(x, tuple) and not hasattr(x, "_fields"):
        if not x:
            raise ValueError(f"`{name}` is an empty tuple; it needs at least one feature.")
        return tuple(_map_leaves(fn, f"{name}[{i}]", v) for i, v in enumerate(x))
    return fn(name, x)


def _object_message(path: str, value: Any, odd: Any, text: bool) -> str:
    """Why an object array of features is refused: ``odd`` its first value not a string,
    ``text`` whether it holds strings too (then it mixes them with numbers)."""
    if not text:
        return (f"`{path}` must hold numbers or strings, got dtype object with "
                f"{type(odd).__name__} values.")
    # a table (e.g. a pandas DataFrame, duck-typed) whose columns are of several kinds
    kinds = getattr(value, "dtypes", None)
    columns = getattr(value, "columns", None)
    texts = [] if kinds is None or columns is None else [
        str(c) for c, t in zip(columns, kinds) if getattr(t, "kind", "O") not in "biuf"]
    where = f" (the non-numeric columns: {texts})" if texts else ""
    return (f"`{path}` mixes strings with {type(odd).__name__} values{where}: one array of "
            "features holds one kind. Encode the text as numbers, or pass a dict of "
            "features, one entry per column (`{c: df[c].to_numpy() for c in df}` for a "
            "DataFrame), with a net that takes a dict of inputs of those names.")


def _refuse_mixed_text(name: str, x: Any) -> Any:
    """``x``, as an array unless a list, tuple or Tensor; TypeError if it mixes text and numbers.

    A list of strings and numbers NumPy makes all strings ("not numeric" later).
    """
    check_dense(name, x)  # before np.asarray: a sparse matrix would become a 0-d object
    if isinstance(x, (list, tuple, tf.Tensor)):
        return x
    arr = np.asarray(x)  # free for an array; a table's own conversion, done once
    if arr.dtype.kind == "O":
        others = [v for v in arr.flat if not isinstance(v, (str, bytes))]
        if others and len(others) < arr.size:
            raise TypeError(_object_message(name, x, others[0], text=True))
    return arr


def _leaf_array(path: str, value: Any) -> np.ndarray:
    """One leaf of structured features as an array: float32, int64, bool or str/bytes."""
    check_dense(path, value)
    if isinstance(value, tf.Tensor):
        value = value.numpy()
    try:
        arr = np.asarray(value)
    except ValueError:
        arr = None
    if arr is not None and arr.dtype.kind in "USO":
        others = [v for v in arr.flat if not isinstance(v, (str, bytes))]
        if arr.dtype.kind == "O" and others:
            raise TypeError(_object_message(path, value, others[0],
                                            text=len(others) < arr.size))
        if arr.dtype.kind == "O":
            arr = arr.astype(bytes if all(isinstance(v, bytes) for v in arr.flat) else str)
    else:
        arr = check_finite(path, value)
        if arr.dtype.kind == "f":
            arr = check_float32_range(path, arr).astype(np.float32)
        elif arr.dtype.kind in "iu":
            if arr.dtype == np.uint64 and arr.size and arr.max() > np.iinfo(np.int64).max:
                raise ValueError(f"`{path}` holds integers beyond the int64 range.")
            arr = arr.astype(np.int64)
    if arr.ndim < 1:
        raise ValueError(f"`{path}` must have one entry per row, got a scalar.")
    if 0 in arr.shape[1:]:
        raise ValueError(f"`{path}` has zero-width features: shape {arr.shape}; every row "
                         "needs at least one feature.")
    return arr


def _leaf_dtype(path: str, dtype: tf.DType, dense: bool) -> tf.DType:
    """The dtype a Dataset leaf is batched as; TypeError naming ``path`` if it has none."""
    if dtype == tf.string and not dense:
        return tf.string
    if not (dtype.is_floating or dtype.is_integer or dtype.is_bool):
        raise TypeError(f"`{path}` must be numeric{'' if dense else ' or a string'}, got "
                        f"dtype {dtype.name}.")
    if dense or dtype.is_floating:
        return tf.float32
    return tf.bool if dtype.is_bool else tf.int64


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


def index_batches(n_rows: int, k: int, shuffle: bool, seed: int | None) -> tf.data.Dataset:
    """Row indices in batches of ``k``: one pass over all ``n_rows`` per epoch, repeated.

    Each epoch is one permutation tensor (a fresh one per epoch and per
    iteration of the Dataset when shuffling; seeded, two builds agree), cut into
    batches that run on across epoch boundaries, as ``shuffle().repeat().batch()``
    would, but with the work done per batch rather than per row.
    """
    if shuffle:
        zero = tf.constant(0, tf.int64)
        perms = tf.data.Dataset.random(seed=seed, rerandomize_each_iteration=True).map(
            lambda s: tf.random.experimental.stateless_shuffle(
                tf.range(n_rows, dtype=tf.int64), seed=tf.stack([s, zero])))
    else:
        perms = tf.data.Dataset.from_tensors(tf.range(n_rows, dtype=tf.int64)).repeat()
    return perms.rebatch(k, drop_remainder=True)


def gathered_batches(x: Any, y: tf.Tensor, k: int, shuffle: bool,
                     seed: int | None) -> tf.data.Dataset:
    """Batches ``(x[i], y[i])`` of in-memory tensors (``x`` may be a nest) by :func:`index_batches`."""
    return index_batches(int(y.shape[0]), k, shuffle, seed).map(
        lambda i: (tf.nest.map_structure(lambda t: tf.gather(t, i), x), tf.gather(y, i)),
        num_parallel_calls=tf.data.AUTOTUNE)


def stream_features(name: str, x: Any) -> tuple[Any, int]:
    """Array features (or a dict of them) as every array stream batches them, and their rows.

    Floats as float32, integers as int64, strings kept (dict leaves); checked
    (finite, in float32's range, not empty, one row count).
    """
    if is_structure(x):
        x = _map_leaves(_leaf_array, name, x)
        sizes = [(path, len(a)) for path, a in zip(tf.nest.flatten(leaf_names(name, x)),
                                                   tf.nest.flatten(x))]
        if len({n for _, n in sizes}) > 1:
            raise ValueError(f"The features of `{name}` disagree on the number of rows: "
                             + ", ".join(f"`{p}` has {n}" for p, n in sizes) + ".")
        n_rows = sizes[0][1]
    else:
        x = check_float32_range(name, check_finite(name, _refuse_mixed_text(name, x)))
        x = np.asarray(x, dtype=np.float32)
        if x.ndim < 1:
            raise ValueError(f"`{name}` is empty; it needs at least one row, got shape {x.shape}.")
        if 0 in x.shape[1:]:
            raise ValueError(f"`{name}` has zero-width features: shape {x.shape}; every row "
                             "needs at least one feature.")
        n_rows = len(x)
    if n_rows == 0:
        raise ValueError(f"`{name}` is empty; it needs at least one row.")
    return x, n_rows


def _array_stream(name: str, source: Source, x: Any, labels: dict) -> Stream:
    """``labels`` maps the role ``"w"``/``"e"`` to ``(argument name, value)``."""
    x, n_rows = stream_features(name, x)
    packed = {}
    for role, (arg, value) in labels.items():
        if value is None:
            raise ValueError(f"`{arg}` is required when `{name}` is an array.")
        packed[role] = check_binary(arg, value)
        if len(packed[role]) != n_rows:
            raise ValueError(f"`{arg}` has {len(packed[role])} rows but `{name}` has {n_rows}.")
    if "e" in packed:
        check_exposure(labels["e"][0], packed["e"])
    if source == Source.SSE and np.any(packed["w"] > packed["e"]):
        (w_arg, _), (e_arg, _) = labels["w"], labels["e"]
        raise ValueError(f"`{w_arg}` must be 0 where `{e_arg}` is 0 (W = E*Y) in SSE data.")
    xt = tf.nest.map_structure(tf.constant, x)
    yt = tf.constant(pack_labels(source, n=n_rows, **packed))
    spec = tf.nest.map_structure(lambda t: tf.TensorSpec(t.shape[1:], t.dtype), xt)

    def batches(k: int, m: int, shuffle: bool, seed: int | None) -> tf.data.Dataset:
        return gathered_batches(xt, yt, k * m, shuffle, seed).map(
            lambda x, y: _grouped((x, y), m, k))

    return Stream(name, source, n_rows, spec, batches)


def _first_rows(element: Any) -> tf.Tensor:
    """The number of rows of a batched element (any nest of tensors)."""
    return tf.shape(tf.nest.flatten(element)[0], out_type=tf.int64)[0]


def _call(fn: Callable[..., Any], element: Any) -> Any:
    """``fn`` applied to a Dataset element as ``Dataset.map`` would (a tuple: one argument each)."""
    return fn(*element) if isinstance(element, tuple) else fn(element)


def _permuted(element: Any, key: tf.Tensor) -> Any:
    """The rows of a batched element in a uniform random order drawn from ``key``."""
    order = tf.random.experimental.stateless_shuffle(
        tf.range(_first_rows(element)), seed=tf.stack([key, tf.zeros_like(key)]))
    return tf.nest.map_structure(lambda t: tf.gather(t, order), element)


def _grouped(element: Any, groups: int, k: int) -> Any:
    """Each leaf of a batched element of ``groups * k`` rows reshaped to ``(groups, k, ...)``."""
    return tf.nest.map_structure(
        lambda t: tf.reshape(t, tf.concat([[groups, k], tf.shape(t)[1:]], 0)), element)


def stream_groups(chunks: tf.data.Dataset, chunk_rows: int, rows: int | None, k: int, m: int,
                  shuffle: bool, seed: int | None, pack: Callable[..., Any]) -> tf.data.Dataset:
    """Groups of ``m`` batches of ``k`` rows of ``chunks`` (a finite Dataset of batched rows).

    Each element stacks ``m`` consecutive batches (every leaf ``(m, k, ...)``);
    the stream repeats without end. Every operation works on many rows at
    once, none on single rows: ``pack`` (applied to a whole window) and the
    shuffle included.

    The shuffle: a data set of at most :data:`SHUFFLE_ROWS` rows gets a fresh
    uniform permutation of all its rows every pass. A larger one: its chunks
    (e.g. the blocks a TFRecord reader parsed) are shuffled in a buffer of
    about :data:`SHUFFLE_ROWS` rows, a fresh order every pass; the stream is
    cut into windows of about :data:`SHUFFLE_ROWS` rows (a whole number of
    groups), and each window is permuted uniformly. So each batch mixes rows
    of about ``SHUFFLE_ROWS / chunk`` chunks, and a row comes out at most about
    ``2 * SHUFFLE_ROWS`` rows before its place in the files (any number after
    it), against ``SHUFFLE_ROWS`` for a row-level ``shuffle`` buffer of that
    size. Memory stays flat in the data's size. Batches run on across passes,
    as ``shuffle().repeat().batch()`` would. Seeded: two builds agree.

    Args:
        chunks: a finite Dataset of batched rows (any nest of tensors).
        chunk_rows: the most rows a chunk holds.
        rows: the rows in one pass, or None (unknown: treated as a large one).
        k: rows per batch.
        m: batches per group.
        shuffle: whether to shuffle (else the rows' order).
        seed: seed of the chunk shuffle and the permutations; None: random.
        pack: maps an element of ``chunks`` (as ``Dataset.map`` passes it) to
            the element batches are made of.

    Returns:
        An infinite Dataset of groups, every leaf ``(m, k, ...)``.
    """
    keys = tf.data.Dataset.random(seed=seed, rerandomize_each_iteration=True)
    group = m * k
    if rows is not None and rows <= SHUFFLE_ROWS:  # small: one permutation per pass
        passes = chunks.rebatch(rows).map(pack).repeat()
        if shuffle:
            passes = tf.data.Dataset.zip((passes, keys)).map(_permuted)
        return passes.rebatch(group, drop_remainder=True).map(
            lambda *el: _grouped(el[0] if len(el) == 1 else el, m, k))
    per_window = max(1, SHUFFLE_ROWS // group)
    if shuffle:
        chunks = chunks.shuffle(max(2, SHUFFLE_ROWS // chunk_rows), seed=seed,
                                reshuffle_each_iteration=True)
    windows = chunks.repeat().rebatch(per_window * group, drop_remainder=True)

    def cut(element: Any, key: tf.Tensor) -> Any:
        element = _call(pack, element)
        if shuffle:
            element = _permuted(element, key)
        return tf.nest.map_structure(
            lambda t: tf.reshape(t, tf.concat([[per_window, m, k], tf.shape(t)[1:]], 0)),
            element)

    cut_windows = tf.data.Dataset.zip((windows, keys)).map(
        cut, num_parallel_calls=tf.data.AUTOTUNE)
    return cut_windows.unbatch() if per_window > 1 else cut_windows.map(
        lambda *el: tf.nest.map_structure(lambda t: t[0], el[0] if len(el) == 1 else el))


def _counted(chunks: tf.data.Dataset, rows: int, name: str) -> tf.data.Dataset:
    """``chunks``, checked to hold ``rows`` rows each pass (too many: at the chunk that goes
    over; too few: at the end of the pass, an empty chunk added for it), naming ``name``."""
    empty = tf.nest.map_structure(lambda s: tf.zeros([0, *s.shape[1:]], s.dtype),
                                  chunks.element_spec)
    limit = tf.constant(rows, tf.int64)
    message = (f"`{name}`: read_tfrecords was given rows={rows}, but its files hold a "
               "different number of rows.")

    def count(seen: tf.Tensor, *element: Any) -> tuple[tf.Tensor, Any]:
        element = element[0] if len(element) == 1 else element
        n = _first_rows(element)
        seen = seen + n
        ok = tf.logical_and(seen <= limit, tf.logical_or(n > 0, seen == limit))
        tf.debugging.Assert(ok, [message])  # stateful: runs with the function
        return seen, element

    return chunks.concatenate(tf.data.Dataset.from_tensors(empty)).scan(
        tf.constant(0, tf.int64), count)


def _dataset_stream(name: str, source: Source, ds: tf.data.Dataset, labels: dict) -> Stream:
    """A stream over a Dataset of unbatched rows ``x`` or ``(x, *labels)``; ``x`` may be a nest."""
    args = [arg for arg, _ in labels.values()]
    for arg, value in labels.values():
        if value is not None:
            raise ValueError(
                f"`{arg}` must be None when `{name}` is a tf.data.Dataset; "
                f"the Dataset yields ({', '.join(['x'] + args)}) instead."
            )
    spec = ds.element_spec
    unwrap = not labels and isinstance(spec, tuple) and len(spec) == 1  # rows `(x,)`
    if labels:
        if not isinstance(spec, tuple) or len(spec) != 1 + len(labels) or not all(
                isinstance(s, tf.TensorSpec) for s in spec[1:]):
            raise ValueError(
                f"`{name}` must yield unbatched rows `({', '.join(['x'] + args)})`, "
                f"got element_spec {spec}."
            )
        x_spec, lab_specs = spec[0], spec[1:]
    else:
        x_spec, lab_specs = (spec[0] if unwrap else spec), ()
    dense = isinstance(x_spec, tf.TensorSpec)
    names = leaf_names(name, x_spec)
    for path, s in zip(tf.nest.flatten(names), tf.nest.flatten(x_spec)):
        if not isinstance(s, tf.TensorSpec):
            raise ValueError(f"`{path}` must be one dense tensor per row, got {s}"
                             + ("" if labels or dense else
                                f"; `{name}` rows are the features alone, without labels") + ".")
        _leaf_dtype(path, s.dtype, dense)
        if s.shape.rank and 0 in s.shape.as_list():
            raise ValueError(f"`{path}` has zero-width features: rows of shape {s.shape}; "
                             "every row needs at least one feature.")
    for arg, s in zip(args, lab_specs):
        if not (s.dtype.is_floating or s.dtype.is_integer or s.dtype.is_bool):
            raise TypeError(f"`{arg}` must be numeric, got dtype {s.dtype.name}.")
        if s.shape.rank is None or s.shape.as_list() not in ([], [1]):
            raise ValueError(f"`{arg}` rows must have shape () or (1,), got {s.shape}.")
    card = int(ds.cardinality())
    if card == 0:
        raise ValueError(f"`{name}` is empty; it needs at least one row.")
    rows = card if card > 0 else None

    def cast(path: str, t: tf.Tensor) -> tf.Tensor:
        t = tf.cast(t, _leaf_dtype(path, t.dtype, dense))
        if t.dtype.is_floating:
            t = tf.debugging.assert_all_finite(
                t, f"`{path}` contains NaN or infinite values (or values beyond float32).")
        return t

    def pack(x: Any, *labs: tf.Tensor) -> tuple[Any, tf.Tensor]:
        x = tf.nest.map_structure(cast, names, x)
        zeros = tf.zeros(tf.shape(tf.nest.flatten(x)[0])[:1], tf.float32)
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

    if labels or dense or unwrap:
        fn = (lambda *el: pack(el[0])) if unwrap else pack
    elif isinstance(spec, tuple):  # tuple features: tf.data passes them as separate arguments
        fn = lambda *parts: pack(tuple(parts))  # noqa: E731
    else:
        fn = pack
    row_spec = tf.nest.map_structure(
        lambda path, s: tf.TensorSpec(s.shape, _leaf_dtype(path, s.dtype, dense)), names, x_spec)

    parsed = parsed_batches(ds)  # read_tfrecords' rows: the batches it parsed them in

    def batches(k: int, m: int, shuffle: bool, seed: int | None) -> tf.data.Dataset:
        if parsed is None:
            chunks, chunk_rows = ds.batch(_CHUNK), _CHUNK
        else:
            chunks = parsed[0] if rows is None else _counted(parsed[0], rows, name)
            chunk_rows = parsed[2]
        return stream_groups(chunks, chunk_rows, rows, k, m, shuffle, seed, fn)

    return Stream(name, source, rows, row_spec, batches)


def make_stream(name: str, source: Source, x: Any, **labels: tuple[str, Any]) -> Stream:
    """A :class:`Stream` over arrays or a Dataset; ``labels``: role -> (argument, value)."""
    if isinstance(x, tf.data.Dataset):
        return _dataset_stream(name, source, x, labels)
    return dataclasses.replace(_array_stream(name, source, x, labels), columns=table_columns(x))
