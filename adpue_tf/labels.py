"""The label layout: the contract between the data builders and the losses.

A Keras ``Loss`` only sees ``(y_true, y_pred)``, so every batch carries the
provenance of its rows in ``y_true``, a float32 matrix of shape ``(batch, 3)``
or ``(batch, 4)``:

====== ========== =====================================================
column name       meaning
====== ========== =====================================================
0      ``w``      observed positive ``W = E*Y`` (0 where not observed)
1      ``e``      exposure ``E`` (0 where not observed)
2      ``source`` which data set the row comes from (:class:`Source`)
3      ``dagger`` optional: the proxy ``f†(x)`` in ``[0, 1]``
====== ========== =====================================================

Example:
    >>> import numpy as np
    >>> from adpue_tf.labels import Source, pack_labels
    >>> pack_labels(Source.PU, w=np.array([1, 0]))
    array([[1., 0., 0.],
           [0., 0., 0.]], dtype=float32)
"""

from __future__ import annotations

import enum
import numbers
from typing import Any

import numpy as np

from adpue_tf._internal.checks import check_dense, check_int

__all__ = [
    "Source",
    "W",
    "E",
    "SOURCE",
    "DAGGER",
    "NUM_COLUMNS",
    "OBSERVES_E",
    "OBSERVES_W",
    "UNEXPOSED_POSITIVE",
    "UNOBSERVED",
    "pack_labels",
    "pack_pu",
    "pack_e",
    "pack_p",
    "pack_u",
    "pack_sse",
    "as_real_array",
    "check_binary",
    "check_finite",
    "check_float32_range",
    "check_packed",
    "FLOAT32_MAX",
]

#: Column index of the observed positive ``W``.
W = 0
#: Column index of the exposure ``E``.
E = 1
#: Column index of the source code.
SOURCE = 2
#: Column index of the optional proxy ``f†``.
DAGGER = 3
#: Allowed numbers of columns of a packed ``y_true``.
NUM_COLUMNS = (3, 4)


class Source(enum.IntEnum):
    """Which data set a row comes from (column 2 of a packed ``y_true``).

    Attributes:
        PU: one-sample PU data ``(W, x)``, ``W = E*Y``.
        E: exposure data ``(E, x)``, separate from the PU data.
        P: positives only, ``x ~ ζ(x | w=1)``.
        U: unlabeled ``x ~ ζ``.
        SSE: exposure observed together with ``W``: ``(W, E, x)``.

    Example:
        >>> Source(4).name
        'SSE'
    """

    PU = 0
    E = 1
    P = 2
    U = 3
    SSE = 4


#: The sources whose rows observe ``W`` (column ``w``), and those that observe ``E``
#: (column ``e``); on the other rows the column is 0 (:data:`UNOBSERVED`).
OBSERVES_W = (Source.PU, Source.SSE)
OBSERVES_E = (Source.E, Source.SSE)


def as_real_array(name: str, value: Any) -> np.ndarray:
    """``value`` as a NumPy array of real numbers (bool, int or float).

    Args:
        name: argument name used in the error message.
        value: array-like.

    Returns:
        The input as a NumPy array (not copied when already one).

    Raises:
        ValueError: if ``value`` is a ragged nest of sequences (rows of different lengths).
        TypeError: if the values are complex, strings, objects or otherwise not numbers.

    Example:
        >>> as_real_array("x", [[1, 2], [3, 4]]).shape
        (2, 2)
        >>> as_real_array("x", [[1, 2], [3]])
        Traceback (most recent call last):
        ...
        ValueError: `x` is ragged: its rows have different lengths (...). Pad them, or ...
    """
    check_dense(name, value)
    try:
        arr = np.asarray(value)
    except ValueError as err:  # NumPy >= 1.24 refuses ragged nests
        raise ValueError(
            f"`{name}` is ragged: its rows have different lengths ({err}). Pad them, or "
            "pass a tf.data.Dataset of rows."
        ) from None
    if np.iscomplexobj(arr):
        raise TypeError(f"`{name}` must hold real numbers, got complex dtype {arr.dtype}.")
    if arr.dtype == object or not (
        np.issubdtype(arr.dtype, np.number) or arr.dtype == bool
    ):
        raise TypeError(f"`{name}` must be numeric, got dtype {arr.dtype}.")
    return arr


def _as_1d(name: str, value: Any) -> np.ndarray:
    arr = as_real_array(name, value)
    if arr.ndim == 2 and arr.shape[1] == 1:
        arr = arr[:, 0]
    if arr.ndim != 1:
        raise ValueError(
            f"`{name}` must be a vector of shape (n,) or (n, 1), got shape {arr.shape}."
        )
    return arr.astype(np.float64, copy=False)


def check_finite(name: str, value: Any) -> np.ndarray:
    """Return ``value`` as an array, raising if it holds NaN or inf.

    Args:
        name: argument name used in the error message.
        value: array-like of numbers.

    Returns:
        The input as a NumPy array.

    Raises:
        TypeError: if the values are not real numbers (complex, strings, objects).
        ValueError: if any value is NaN or infinite, or ``value`` is ragged.

    Example:
        >>> check_finite("x", [1.0, 2.0]).shape
        (2,)
    """
    arr = as_real_array(name, value)
    if np.issubdtype(arr.dtype, np.floating) and not np.all(np.isfinite(arr)):
        bad = int(np.size(arr) - np.count_nonzero(np.isfinite(arr)))
        raise ValueError(f"`{name}` contains {bad} NaN or infinite value(s).")
    return arr


#: The largest finite float32: features beyond it would become ``inf`` when cast.
FLOAT32_MAX = float(np.finfo(np.float32).max)


def check_float32_range(name: str, arr: np.ndarray) -> np.ndarray:
    """Return ``arr``, raising if a float in it lies beyond the float32 range (``±3.4e38``).

    Features become float32 for the models; ``1e300`` is finite in float64
    but ``inf`` after the cast, so it is refused here by name, with its value.

    Example:
        >>> check_float32_range("x", np.array([1e30])).shape
        (1,)
    """
    if arr.size and arr.dtype.kind == "f":
        big = float(np.max(np.abs(arr)))
        if big > FLOAT32_MAX:
            raise ValueError(f"`{name}` holds {big:g}, beyond the float32 range (±3.4e38); "
                             "scale the features.")
    return arr


def check_binary(name: str, value: Any) -> np.ndarray:
    """Return ``value`` as a float vector, raising unless every entry is 0 or 1.

    Args:
        name: argument name used in the error message.
        value: array-like of shape ``(n,)`` or ``(n, 1)``.

    Returns:
        A float64 vector of zeros and ones.

    Raises:
        TypeError: if the values are not numeric.
        ValueError: on NaN/inf, a wrong shape or a value outside {0, 1}.

    Example:
        >>> check_binary("w", [0, 1, 1])
        array([0., 1., 1.])
    """
    arr = _as_1d(name, check_finite(name, value))
    bad = (arr != 0) & (arr != 1)
    if np.any(bad):
        raise ValueError(
            f"`{name}` must hold only 0 and 1; found {np.unique(arr[bad])[:5].tolist()}."
        )
    return arr


def pack_labels(
    source: Source | int,
    *,
    w: Any = None,
    e: Any = None,
    dagger: Any = None,
    n: int | None = None,
) -> np.ndarray:
    """Pack the labels of one data set into the ``(n, 3|4)`` layout.

    Args:
        source: the data set the rows come from.
        w: observed positives ``W`` (required for ``PU`` and ``SSE``; not
            allowed for the other sources).
        e: exposures ``E`` (required for ``E`` and ``SSE``; not allowed for
            the other sources).
        dagger: optional proxy ``f†`` per row, in ``[0, 1]`` (adds column 3).
        n: number of rows (an int ``>= 1``), required when neither ``w`` nor
            ``e`` is given (sources ``P`` and ``U``).

    Returns:
        A float32 array of shape ``(n, 3)``, or ``(n, 4)`` with ``dagger``.

    Raises:
        TypeError: if ``n`` is not an int, or labels are not real numbers.
        ValueError: on an unknown source (anything but a Source or its int
            code: ``2.5`` is never rounded), a missing or extra label, labels
            outside {0, 1}, NaN/inf, mismatched lengths, ``dagger`` outside
            ``[0, 1]`` or an empty data set.

    Example:
        >>> pack_labels(Source.SSE, w=[1, 0], e=[1, 1])[:, :3]
        array([[1., 1., 4.],
               [0., 1., 4.]], dtype=float32)
    """
    try:
        if isinstance(source, bool) or not isinstance(source, numbers.Integral):
            raise TypeError  # 2.5 is never rounded to 2, True never read as 1
        src = Source(int(source))
    except (ValueError, TypeError):
        raise ValueError(
            f"`source` must be one of {[s.name for s in Source]} "
            f"({[int(s) for s in Source]}), got {source!r}."
        ) from None
    needs_w, needs_e = src in OBSERVES_W, src in OBSERVES_E
    if needs_w and w is None:
        raise ValueError(f"Source {src.name} needs `w`.")
    if needs_e and e is None:
        raise ValueError(f"Source {src.name} needs `e`.")
    if not needs_w and w is not None:
        raise ValueError(f"Source {src.name} has no observed `w`; pass w=None.")
    if not needs_e and e is not None:
        raise ValueError(f"Source {src.name} has no observed `e`; pass e=None.")
    w_arr = check_binary("w", w) if w is not None else None
    e_arr = check_binary("e", e) if e is not None else None
    lengths = {len(a) for a in (w_arr, e_arr) if a is not None}
    if n is not None:
        lengths.add(check_int("n", n, 1, " (the number of rows)"))
    if not lengths:
        raise ValueError(f"Source {src.name} needs `n`, the number of rows.")
    if len(lengths) > 1:
        raise ValueError(f"`w`, `e` and `n` disagree on the number of rows: {sorted(lengths)}.")
    rows = lengths.pop()
    if rows <= 0:
        raise ValueError(f"The {src.name} data set is empty; it needs at least one row.")
    if src == Source.SSE and w_arr is not None and e_arr is not None and np.any(w_arr > e_arr):
        raise ValueError("`w` must be 0 where `e` is 0 (W = E*Y) in SSE data.")
    cols = 4 if dagger is not None else 3
    out = np.zeros((rows, cols), dtype=np.float32)
    if w_arr is not None:
        out[:, W] = w_arr
    if e_arr is not None:
        out[:, E] = e_arr
    out[:, SOURCE] = int(src)
    if dagger is not None:
        d = _as_1d("dagger", check_finite("dagger", dagger))
        if len(d) != rows:
            raise ValueError(f"`dagger` has {len(d)} rows, expected {rows}.")
        if np.any((d < 0) | (d > 1)):
            raise ValueError("`dagger` must lie in [0, 1].")
        out[:, DAGGER] = d
    return out


def pack_pu(w: Any) -> np.ndarray:
    """Pack one-sample PU labels ``W``. Example: ``pack_pu([1, 0]).shape == (2, 3)``."""
    return pack_labels(Source.PU, w=w)


def pack_e(e: Any) -> np.ndarray:
    """Pack exposure labels ``E``. Example: ``pack_e([1, 0]).shape == (2, 3)``."""
    return pack_labels(Source.E, e=e)


def pack_p(n: int) -> np.ndarray:
    """Pack ``n`` positive-only rows. Example: ``pack_p(3).shape == (3, 3)``."""
    return pack_labels(Source.P, n=n)


def pack_u(n: int) -> np.ndarray:
    """Pack ``n`` unlabeled rows. Example: ``pack_u(3).shape == (3, 3)``."""
    return pack_labels(Source.U, n=n)


def pack_sse(w: Any, e: Any) -> np.ndarray:
    """Pack SSE labels ``(W, E)``. Example: ``pack_sse([1], [1]).shape == (1, 3)``."""
    return pack_labels(Source.SSE, w=w, e=e)


#: The rule that a source's unobserved columns are 0 (what ``pack_labels`` writes); a
#: label matrix whose columns were swapped breaks it.
UNOBSERVED = ("column w must be 0 on rows of a source that observes no W (E, P, U), and "
              "column e 0 on rows of a source that observes no E (PU, P, U): are the "
              "columns swapped? Pack them with pack_labels")

#: On SSE rows ``W = E·Y``: ``w`` is 0 wherever ``e`` is 0.
UNEXPOSED_POSITIVE = ("column w must be 0 where column e is 0 on SSE rows (W = E·Y: a row "
                      "not exposed is not an observed positive): are the columns swapped? "
                      "Pack them with pack_labels")


def check_packed(name: str, y: Any) -> np.ndarray:
    """Validate a packed label matrix held in NumPy.

    Args:
        name: argument name used in the error message.
        y: array of shape ``(n, 3)`` or ``(n, 4)``.

    Returns:
        The matrix as float32.

    Raises:
        ValueError: on a wrong number of columns, NaN/inf, ``w``/``e``
            outside {0, 1}, an unknown source code, ``dagger`` outside
            ``[0, 1]``, or a ``w``/``e`` not 0 on a row whose source does not
            observe it (:data:`UNOBSERVED`).

    Example:
        >>> check_packed("y", pack_pu([1, 0])).shape
        (2, 3)
    """
    arr = check_finite(name, y)
    if arr.ndim != 2 or arr.shape[1] not in NUM_COLUMNS:
        raise ValueError(
            f"`{name}` must have shape (batch, 3) or (batch, 4) "
            f"(w, e, source[, dagger]), got shape {arr.shape}."
        )
    check_binary(f"{name}[:, {W}] (w)", arr[:, W])
    check_binary(f"{name}[:, {E}] (e)", arr[:, E])
    codes = arr[:, SOURCE]
    known = np.isin(codes, [int(s) for s in Source])
    if not np.all(known):
        raise ValueError(
            f"`{name}[:, {SOURCE}]` holds unknown source code(s) "
            f"{np.unique(codes[~known])[:5].tolist()}; known: "
            f"{ {s.name: int(s) for s in Source} }."
        )
    if arr.shape[1] == 4 and np.any((arr[:, DAGGER] < 0) | (arr[:, DAGGER] > 1)):
        raise ValueError(f"`{name}[:, {DAGGER}]` (dagger) must lie in [0, 1].")
    stray_w = (arr[:, W] != 0) & ~np.isin(codes, OBSERVES_W)
    stray_e = (arr[:, E] != 0) & ~np.isin(codes, OBSERVES_E)
    if np.any(stray_w) or np.any(stray_e):
        raise ValueError(
            f"`{name}`: {UNOBSERVED} ({int(np.sum(stray_w))} row(s) with w != 0 from "
            f"E, P or U, {int(np.sum(stray_e))} with e != 0 from PU, P or U).")
    unexposed = (codes == int(Source.SSE)) & (arr[:, W] > arr[:, E])
    if np.any(unexposed):
        raise ValueError(f"`{name}`: {UNEXPOSED_POSITIVE} ({int(np.sum(unexposed))} SSE "
                         "row(s) with w = 1 and e = 0).")
    return arr.astype(np.float32, copy=False)
