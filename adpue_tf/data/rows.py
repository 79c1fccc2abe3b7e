"""Rows in memory: features (an array or a dict of arrays) and 0/1 labels, from any input form.

Arrays, dicts of arrays and ``tf.data.Dataset``s of unbatched ``(features,
label)`` rows (what :func:`adpue_tf.data.read_tfrecords` yields) all become
one :class:`Rows`; a Dataset is read once, in batches.

Example:
    >>> import numpy as np
    >>> r = as_rows("x_pu", np.zeros((4, 2)), "w", [1, 0, 1, 0])
    >>> len(r), r.take(np.array([0, 2])).y.tolist()
    (4, [1.0, 1.0])
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np
import tensorflow as tf

from adpue_tf.data._streams import _leaf_array, _map_leaves
from adpue_tf.data.tfrecord import parsed_batches
from adpue_tf.labels import check_binary

__all__ = ["Rows", "as_rows", "layout", "split_indices"]

#: Rows per batch when a Dataset is read into memory.
_READ_BATCH = 65_536


@dataclasses.dataclass(frozen=True)
class Rows:
    """Features ``x`` (an array ``(n, ...)`` or a dict of such) and labels ``y`` (float32 ``(n,)``)."""

    x: Any
    y: np.ndarray

    def __len__(self) -> int:
        return len(self.y)

    def take(self, index: np.ndarray) -> Rows:
        """The rows at ``index``."""
        return Rows(_take(self.x, index), self.y[index])


def _take(x: Any, index: np.ndarray) -> Any:
    if isinstance(x, Mapping):
        return {k: _take(v, index) for k, v in x.items()}
    return x[index]


def layout(x: Any) -> Any:
    """The feature layout of ``x``: a row's shape, or a dict of them by key.

    Example:
        >>> layout({"b": np.zeros((3, 2)), "a": np.zeros((3,))})
        {'a': (), 'b': (2,)}
    """
    if isinstance(x, Mapping):
        return {k: layout(v) for k, v in sorted(x.items())}
    return tuple(np.shape(x)[1:])


def _n_rows(name: str, x: Any) -> int:
    sizes = {len(v) for v in tf.nest.flatten(x)}
    if len(sizes) != 1:
        raise ValueError(f"The features of `{name}` have different numbers of rows: "
                         f"{sorted(sizes)}.")
    return sizes.pop()


def _read_dataset(name: str, label_name: str, ds: tf.data.Dataset) -> tuple[Any, Any]:
    spec = ds.element_spec
    if not (isinstance(spec, tuple) and len(spec) == 2):
        raise TypeError(f"`{name}` must be a Dataset of unbatched (features, {label_name}) rows "
                        f"(e.g. read_tfrecords(..., labels={label_name!r})), got element spec "
                        f"{spec}.")
    label_shape = tuple(spec[1].shape) if hasattr(spec[1], "shape") else None
    if label_shape is not None and label_shape not in ((), (1,)):
        if label_shape[0] is not None:  # a fixed size: several values a row, not a batch
            raise ValueError(f"`{name}`: each row's {label_name} must be one value (shape () "
                             f"or (1,)), got shape {label_shape}.")
        raise ValueError(f"`{name}` must be a Dataset of unbatched rows, but its {label_name} "
                         f"has shape {label_shape} (batches?); pass `ds.unbatch()` or the "
                         "rows before `.batch()`.")
    if tf.data.experimental.INFINITE_CARDINALITY == int(ds.cardinality()):
        raise ValueError(f"`{name}` is an infinite Dataset; fit_pue reads every row once: "
                         "drop the `.repeat()`.")
    parsed = parsed_batches(ds)  # read_tfrecords' rows: its parsed batches, not rebatched
    batches = ds.batch(_READ_BATCH) if parsed is None else parsed[0]
    parts: list[tuple[Any, Any]] = list(batches.as_numpy_iterator())
    if not parts:
        raise ValueError(f"`{name}` is an empty Dataset; it needs at least one row.")
    x = tf.nest.map_structure(lambda *leaves: np.concatenate(leaves), *[p[0] for p in parts])
    y = np.concatenate([np.reshape(p[1], (len(p[1]), -1)) for p in parts])
    if parsed is not None and parsed[1] is not None and len(y) != parsed[1]:
        raise ValueError(f"`{name}`: read_tfrecords was given rows={parsed[1]}, but its "
                         f"files hold {len(y)} rows.")
    if y.shape[1] != 1:
        raise ValueError(f"`{name}`: each row's {label_name} must be one value, got "
                         f"{y.shape[1]}.")
    return x, y[:, 0]


def as_rows(name: str, x: Any, label_name: str, label: Any) -> Rows:
    """Check and gather one data set: ``x`` (array, dict of arrays or Dataset) and its labels.

    Args:
        name: the argument name of ``x`` (for messages), e.g. ``"x_pu"``.
        x: features ``(n, ...)``, a dict of such arrays, or a Dataset of
            ``(features, label)`` rows.
        label_name: the argument name of the labels, e.g. ``"w"``.
        label: 0/1 labels ``(n,)``; None when ``x`` is a Dataset.

    Returns:
        The :class:`Rows`; float features as float32.

    Raises:
        TypeError, ValueError: naming the argument and what was wrong.
    """
    if isinstance(x, tf.data.Dataset):
        if label is not None:
            raise ValueError(f"`{label_name}` must be None when `{name}` is a Dataset of "
                             f"(features, {label_name}) rows: the labels come from the rows.")
        x, label = _read_dataset(name, label_name, x)
    elif label is None:
        raise ValueError(f"`{label_name}` is None, but `{name}` is not a Dataset of "
                         f"(features, {label_name}) rows; pass the labels.")
    if x is None or isinstance(x, (str, bytes)):
        raise TypeError(f"`{name}` must be an array, a dict of arrays or a Dataset of rows, "
                        f"got {type(x).__name__}.")
    n_label = len(label) if hasattr(label, "__len__") else None
    if isinstance(x, (list, tuple)) and x and all(hasattr(v, "shape") and np.ndim(v) >= 1
                                                  for v in x) \
            and {len(v) for v in x} == {n_label} and len(x) != n_label:
        raise TypeError(f"`{name}` is a list of {len(x)} arrays of {n_label} rows each (a list "
                        "of inputs); pass one array of features, or a dict of named arrays "
                        "for a model with named inputs (keras.Model({'a': a, 'b': b}, logit)).")
    if isinstance(x, Mapping):
        x = _map_leaves(_leaf_array, name, dict(x))
    else:
        x = _leaf_array(name, x)
        if x.dtype.kind not in "fiub":
            raise TypeError(f"`{name}` must hold numbers (use a dict of features for strings), "
                            f"got dtype {x.dtype}.")
        x = x.astype(np.float32)
        if x.ndim < 2:
            raise ValueError(f"`{name}` must have shape (n, n_features, ...), got {x.shape}.")
    n = _n_rows(name, x)
    y = check_binary(label_name, label).astype(np.float32)
    if len(y) != n:
        raise ValueError(f"`{label_name}` has {len(y)} rows but `{name}` has {n}.")
    if n == 0:
        raise ValueError(f"`{name}` is empty; it needs at least one row.")
    return Rows(x, y)


def split_indices(n: int, fraction: float, rng: np.random.Generator,
                  minimum: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """``(train, held_out)`` row indices: a random ``fraction`` of ``n`` rows held out.

    Example:
        >>> tr, ho = split_indices(10, 0.2, np.random.default_rng(0))
        >>> len(tr), len(ho), sorted(set(tr) | set(ho)) == list(range(10))
        (8, 2, True)
    """
    held = int(round(n * fraction))
    held = min(max(held, minimum), n - minimum)
    order = rng.permutation(n)
    return np.sort(order[held:]), np.sort(order[:held])
