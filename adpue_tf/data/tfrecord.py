"""Sharded TFRecord logs of ``tf.Example`` as rows for the builders, never all in memory."""

from __future__ import annotations

import mmap
import os
import re
import struct
import weakref
from collections.abc import Mapping, Sequence
from typing import Any

import tensorflow as tf

from adpue_tf._internal.checks import check_bool, check_int

__all__ = ["read_tfrecords"]


def _tfrecord_files(files: Any) -> list[str]:
    patterns = [files] if isinstance(files, (str, os.PathLike)) else files
    if isinstance(patterns, (bytes, Mapping)) or not isinstance(patterns, Sequence) or not patterns:
        raise TypeError("`files` must be a path or glob pattern, or a non-empty sequence of "
                        f"them, got {files!r}.")
    found: list[str] = []
    for pattern in patterns:
        if not isinstance(pattern, (str, os.PathLike)):
            raise TypeError(f"`files` must hold paths or glob patterns, got {pattern!r}.")
        hits = _matches(os.fspath(pattern))
        if not hits:
            raise FileNotFoundError(f"`files`: no file matches {os.fspath(pattern)!r}.")
        found += [h for h in hits if h not in found]
    return found


def _matches(pattern: str) -> list[str]:
    """The files ``pattern`` names: itself if it exists, else its glob matches, sorted.

    ``*``, ``?`` and ``[`` are glob characters only where no such path exists:
    ``"day[1].tfrecord"`` is that file when it exists (not ``day1.tfrecord``),
    and the leading folders that exist are read as named, so
    ``"log[v2]/part-*"`` globs the files of the folder ``log[v2]``.
    """
    if tf.io.gfile.exists(pattern):
        return [pattern]
    if not _GLOB_CHARS.search(pattern):
        return []
    head, tail = pattern.rstrip("/"), ""
    while head and not tf.io.gfile.exists(head):
        parent, name = os.path.split(head)
        if parent == head or not name:  # a root or URL prefix that does not exist
            break
        head, tail = parent, os.path.join(name, tail) if tail else name
    if not head or not tf.io.gfile.exists(head):
        return sorted(tf.io.gfile.glob(pattern))
    literal = _GLOB_CHARS.sub(r"[\g<0>]", head)  # "[" -> "[[]": a character, not a class
    return sorted(tf.io.gfile.glob(os.path.join(literal, tail)))


#: What makes a path a glob pattern (``tf.io.gfile.glob``'s wildcards).
_GLOB_CHARS = re.compile(r"[*?\[]")


#: Uncompressed local files get their record lengths followed up front, up to this many
#: bytes in all (about a second per million records); the rest get their first header checked.
_WALK_BYTES = 256 << 20
#: Each Dataset :func:`read_tfrecords` returned -> (its rows as the parsed batches it
#: unbatches, its ``rows``, its ``parse_batch``): what reads every row at once reads these, ~3x faster
#: than batching the rows again (:func:`parsed_batches`). Only that very object: any
#: transformation of it makes a new Dataset, not here.
_PARSED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_CRC_TABLE = []
for _n in range(256):
    _c = _n
    for _ in range(8):
        _c = (_c >> 1) ^ 0x82F63B78 if _c & 1 else _c >> 1
    _CRC_TABLE.append(_c)


def _masked_crc32c(data: bytes) -> int:
    """TFRecord's masked CRC-32C of ``data`` (the record headers are 8 bytes: fast enough)."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc = _CRC_TABLE[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    crc ^= 0xFFFFFFFF
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def _compression(value: Any) -> str:
    """``compression_type`` as TensorFlow spells it: ``""``, ``"GZIP"`` or ``"ZLIB"``."""
    if value is None:
        return ""
    if not isinstance(value, str) or value.upper() not in ("", "NONE", "GZIP", "ZLIB"):
        raise ValueError(f"`compression_type` must be None, 'GZIP' or 'ZLIB', got {value!r}.")
    return "" if value.upper() == "NONE" else value.upper()


def _kind(head: bytes) -> str:
    """What the first bytes of a file look like: "GZIP", "ZLIB" or "" (a TFRecord)."""
    if head[:2] == b"\x1f\x8b":
        return "GZIP"
    if len(head) >= 12 and struct.unpack("<I", head[8:12])[0] == _masked_crc32c(head[:8]):
        return ""
    if len(head) >= 2 and head[0] & 0x0F == 8 and (head[0] << 8 | head[1]) % 31 == 0:
        return "ZLIB"
    return "?"


def _truncation(path: str, size: int) -> tuple[str | None, int]:
    """Follow the record lengths of an uncompressed local file: where it breaks, and its records.

    Each record is ``length (8 bytes) | crc (4) | data (length) | crc (4)``, so
    the lengths must chain to the end of the file exactly (a memory map: no
    read of the data, about a second per million records). Returns what is
    broken (None when the file is whole) and the number of records.
    """
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
        pos, record, unpack = 0, 0, struct.unpack_from
        while pos + 12 <= size:
            pos += 16 + unpack("<Q", buf, pos)[0]
            record += 1
    if pos == size:
        return None, record
    if pos < size:
        return f"it ends inside the header of record {record} (byte {pos})", record
    return f"it ends inside record {record - 1} ({pos - size} bytes missing)", record


def _check_files(paths: list[str], compression: str, rows_known: bool) -> tuple[str, int | None]:
    """Refuse files that cannot be read as ``compression``, naming the file and the fix.

    Returns the first file that is not empty, and the records of all the
    files when every one was walked (uncompressed, local, within
    :data:`_WALK_BYTES`; None otherwise).
    """
    empty, budget = [], _WALK_BYTES
    records: int | None = 0
    for path in paths:
        if tf.io.gfile.isdir(path):
            raise ValueError(f"`files`: {path!r} is a directory; give the files in it, e.g. "
                             f"{os.path.join(path, '*.tfrecord')!r}.")
        size = tf.io.gfile.stat(path).length
        if size == 0:
            empty.append(path)
            continue
        with tf.io.gfile.GFile(path, "rb") as f:
            head = f.read(12)
        kind = _kind(head)
        if kind != compression:
            found = {"GZIP": "GZIP-compressed", "ZLIB": "ZLIB-compressed",
                     "": "an uncompressed TFRecord file"}.get(kind, "not a TFRecord file")
            said = f"compression_type={compression!r}" if compression else (
                "compression_type=None (uncompressed)")
            fix = f"pass compression_type={kind!r}" if kind in ("GZIP", "ZLIB") else (
                "pass compression_type=None" if kind == "" else
                "check that it is a TFRecord file of tf.Example, or remove it from `files`")
            raise ValueError(f"`files`: {path!r} is {found}, but {said}; {fix}.")
        if not compression and size <= budget and os.path.isfile(path):
            budget -= size
            broken, count = _truncation(path, size)
            if broken:
                raise ValueError(f"`files`: {path!r} is truncated or corrupt: {broken}. "
                                 "Rewrite it, or remove it from `files`.")
            if records is not None:
                records += count
        else:
            records = None  # not walked: its records are not known here
    if len(empty) == len(paths):
        extra = "" if rows_known else " (and `rows` is unknown)"
        raise ValueError(f"`files`: every file is empty (0 bytes), so there is no row to "
                         f"read{extra}: {empty[:3]}. Point `files` at the written log.")
    skipped = set(empty)
    return next(path for path in paths if path not in skipped), records


def _check_schema(path: str, compression: str, spec: dict[str, Any]) -> None:
    """Parse the first record of ``path`` against ``spec``: a wrong spec is named before training."""
    if not tf.executing_eagerly():  # inside a traced function: the parse fails when it runs
        return
    for record in tf.data.TFRecordDataset(path, compression_type=compression).take(1):
        try:
            tf.io.parse_example(tf.reshape(record, [1]), spec)
        except tf.errors.InvalidArgumentError as err:
            why = re.sub(r"\{\{.*?\}\}|\[Op:.*", "", err.message.split("\n")[0])
            why = why.split("Name: <unknown>, ")[-1].strip().rstrip(".") + "."
            raise ValueError(
                f"`features` does not match the records: the first record of {path!r} "
                f"fails to parse: {why} Fix the spec's shape, dtype or key (a key some "
                "records lack needs a `default_value`).") from None


def read_tfrecords(files: Any, features: Mapping[str, tf.io.FixedLenFeature], *,
                   labels: str | Sequence[str] | None = None, rows: int | None = None,
                   shuffle_files: bool = False, seed: int | None = None,
                   input_context: tf.distribute.InputContext | None = None,
                   compression_type: str | None = None, parse_batch: int = 4096,
                   deterministic: bool = True) -> tf.data.Dataset:
    """Stream the rows of sharded TFRecord files of ``tf.Example`` for the builders.

    Nothing is loaded in memory: the files are read in blocks of
    ``parse_batch`` records, the blocks of several files interleaved in
    parallel (file 1's first block, file 2's first block, ..., then every
    file's second block), parsed a block at a time in parallel, split back
    into rows and prefetched. The result is a Dataset of unbatched rows ``(features,
    *labels)`` (``features`` alone without ``labels``), ready for an ``x_*``
    argument of any builder, e.g. ``pue_dataset(read_tfrecords(pu_files, spec,
    labels="w"), None, read_tfrecords(e_files, spec, labels="e"), None, ...)``.

    Args:
        files: a path or glob pattern (``"log/pu/part-*.tfrecord"``), or a
            sequence of them; matches are sorted, so the order is reproducible.
            A path that exists is read as named, glob characters (``*?[``)
            and all: ``"day[1].tfrecord"`` is that file when it exists, and
            ``"log[v2]/part-*"`` globs the files of the folder ``log[v2]``; a
            glob is a glob only where no such file or folder exists.
        features: ``tf.io.FixedLenFeature`` per key, including the label keys:
            the feature spec of ``tf.io.parse_example``.
        labels: the key (PU: ``"w"``, E: ``"e"``) or keys (SSE: ``("w", "e")``)
            returned after the features, in order; None for P or U rows.
        rows: the number of rows, if known (e.g. from the log's metadata): the
            Dataset then has this cardinality, so the builders can use their
            default ``shares`` and epoch length; a different count fails while
            iterating. Unknown (None): pass ``shares`` and ``steps_per_epoch``.
        shuffle_files: shuffle the file order every pass (the builders shuffle
            the rows too, by whole blocks and windows: ``docs/api/data.md``).
        seed: seed of the file shuffle.
        input_context: from ``strategy.distribute_datasets_from_function``:
            each input pipeline reads its own files (``files[i::n]``; it needs
            at least ``n`` files), so workers never read the same rows.
            ``rows`` is then this pipeline's share.
        compression_type: ``"GZIP"``, ``"ZLIB"`` or None, as for ``TFRecordDataset``
            (any letter case). Checked against each file's first bytes.
        parse_batch: records read and parsed per block (the builders and
            ``fit_pue`` work on these blocks; small ones cost per block).
        deterministic: keep the order of the interleave (False: faster, order varies).

    Returns:
        A Dataset of rows ``(features_dict, label, ...)``, or ``features_dict``.
        What reads every row of this very Dataset at once (``fit_pue`` and the
        validation entry points) reads its parsed batches instead: the same
        rows in the same order, about 3x faster than batching the rows again.

    Raises:
        FileNotFoundError: a pattern matches no file.
        TypeError: a bad ``files`` or a spec that is not a ``FixedLenFeature``
            (naming the key).
        ValueError: a label key missing from ``features``, no feature left
            besides the labels, too few files for the input pipelines, bad sizes,
            an unknown ``compression_type``; a file (named) whose first bytes
            do not match ``compression_type``, an uncompressed local file that
            is truncated or corrupt (checked for the first 256 MiB of files in
            all), a directory, or only empty files; a ``features`` spec that the
            first record does not parse with (a missing key, another shape or dtype).

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
    if labels is not None and (isinstance(labels, bytes) or not isinstance(
            labels, (str, Sequence))):
        raise TypeError(f"`labels` must be a key of `features` (str), a sequence of them or "
                        f"None, got {type(labels).__name__} {labels!r}.")
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
    check_bool("shuffle_files", shuffle_files)
    check_bool("deterministic", deterministic)
    compression_type = _compression(compression_type)
    parse_batch = check_int("parse_batch", parse_batch, 1)
    if seed is not None:
        seed = check_int("seed", seed, -(2**63))
    if input_context is not None:
        n, i = input_context.num_input_pipelines, input_context.input_pipeline_id
        if len(paths) < n:
            raise ValueError(f"`files`: {len(paths)} file(s) for {n} input pipelines; each "
                             "pipeline reads whole files, so write at least one per pipeline.")
        paths = paths[i::n]
    first, records = _check_files(paths, compression_type, rows is not None)
    if rows is not None and records is not None and rows != records:
        raise ValueError(f"`rows`={rows}, but the files hold {records} record(s)"
                         f"{' for this input pipeline' if input_context is not None else ''}; "
                         "give their number, or leave `rows` out.")
    spec = dict(features)
    _check_schema(first, compression_type, spec)

    def parse(serialized: tf.Tensor) -> Any:
        parsed = tf.io.parse_example(serialized, spec)
        x = {k: v for k, v in parsed.items() if k not in keys}
        return (x, *[parsed[k] for k in keys]) if keys else x

    ds = tf.data.Dataset.from_tensor_slices(paths)
    if shuffle_files:
        ds = ds.shuffle(len(paths), seed=seed, reshuffle_each_iteration=True)
    # Each file is read in blocks of parse_batch records, the files' blocks interleaved in
    # parallel: interleaving single records in parallel costs more than parsing them.
    ds = ds.interleave(
        lambda f: tf.data.TFRecordDataset(f, compression_type=compression_type).batch(
            parse_batch),
        cycle_length=min(len(paths), 16), num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=deterministic)
    batches = ds.map(parse, num_parallel_calls=tf.data.AUTOTUNE, deterministic=deterministic)
    ds = batches.unbatch()
    if rows is not None:
        ds = ds.apply(tf.data.experimental.assert_cardinality(rows))
    ds = ds.prefetch(tf.data.AUTOTUNE)
    _PARSED[ds] = (batches.prefetch(tf.data.AUTOTUNE), rows, parse_batch)
    return ds


def parsed_batches(ds: Any) -> tuple[tf.data.Dataset, int | None, int] | None:
    """The rows of a Dataset :func:`read_tfrecords` returned, as the batches it parsed.

    The same rows in the same order, at most ``parse_batch`` at a time
    (without the ``rows`` check: the second item is ``rows``, for the reader to
    check; the third is ``parse_batch``), or None for any other Dataset (a
    transformed one too).

    Example:
        >>> parsed_batches(tf.data.Dataset.range(3)) is None
        True
    """
    try:
        return _PARSED.get(ds)
    except TypeError:  # not weak-referable or not hashable: not ours
        return None
