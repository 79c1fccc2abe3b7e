"""Internal: one checker per rule for the arguments of the package, with clear errors.

Every entry point checks a flag with :func:`check_bool`, a count with
:func:`check_int`, a probability with :func:`check_probability`, an initial
guess ``f†`` with :func:`check_initial_guess`, a ``from_logits=None`` with
:func:`resolve_from_logits`, a risk's options with :func:`check_options` and
features or labels that must not be sparse with :func:`check_dense`; each error
names the argument.

Example:
    >>> check_probability("prior", 0.3, interval="(0, 1)")
    0.3
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Mapping, Sequence
from numbers import Real
from typing import Any

import numpy as np


def _real(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, Real):
        raise TypeError(f"`{name}` must be a real number, got {type(value).__name__}.")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"`{name}` must be finite, got {value}.")
    return value


#: The binary losses of uPU/nnPU: the log loss (default) and the sigmoid loss.
SURROGATES = ("logistic", "sigmoid")


def check_options(**options: Any) -> dict[str, Any]:
    """Validate the options a risk takes; return them as plain Python values.

    Known names: ``prior`` in (0, 1), ``alpha`` in [0, 1], ``beta >= 0``,
    ``gamma`` None or in (0, 1], ``eta`` in [-1, 1], ``clip`` in (0, 1], ``surrogate`` one of
    :data:`SURROGATES`, and the booleans
    ``from_logits``, ``non_negative``, ``dagger_gradient``.
    """
    out: dict[str, Any] = {}
    for name, value in options.items():
        if name in ("from_logits", "non_negative", "dagger_gradient"):
            out[name] = check_bool(name, value)
            continue
        if name == "gamma" and value is None:
            out[name] = None
            continue
        if name == "surrogate":
            if not isinstance(value, str):
                raise TypeError(f"`surrogate` must be a str, one of {list(SURROGATES)}, "
                                f"got {value!r}.")
            if value not in SURROGATES:
                raise ValueError(f"`surrogate` must be one of {list(SURROGATES)}, got {value!r}.")
            out[name] = value
            continue
        v = _real(name, value)
        bad = {
            "prior": not 0.0 < v < 1.0,
            "alpha": not 0.0 <= v <= 1.0,
            "beta": v < 0.0,
            "gamma": not 0.0 < v <= 1.0,
            "eta": not -1.0 <= v <= 1.0,
            "clip": not 0.0 < v <= 1.0,
        }
        if name not in bad:
            raise TypeError(f"Unknown option `{name}`.")
        if bad[name]:
            allowed = {
                "prior": "in (0, 1)",
                "alpha": "in [0, 1]",
                "beta": ">= 0",
                "gamma": "None or in (0, 1]",
                "eta": "in [-1, 1]",
                "clip": "in (0, 1]",
            }[name]
            raise ValueError(f"`{name}` must be {allowed}, got {v}.")
        out[name] = v
    return out


def check_dense(name: str, value: Any) -> None:
    """Refuse sparse or ragged features, None and masked entries (a NumPy masked array), naming them.

    A SciPy sparse matrix or array and a ``tf.SparseTensor`` are refused; a
    ``np.ma.MaskedArray`` is refused when some entry is masked (its stored
    value under the mask is no data), taken as it is otherwise.
    ``np.asarray`` would make a sparse one a 0-d object array, refused later
    only as "not numeric", and read a masked one's hidden values; this says
    what it is and how to pass it.

    Example:
        >>> check_dense("x", [[0.0, 1.0]]) is None
        True
    """
    if value is None:
        raise TypeError(f"`{name}` is None; it needs the features, an array (or a dict of "
                        "arrays) with one row per example.")
    if type(value).__name__ == "RaggedTensor":
        raise TypeError(f"`{name}` is a tf.RaggedTensor, whose rows have different lengths; "
                        "pass a dense array (`x.to_tensor()`, padded) or a dict of dense "
                        "features, with a net that takes them.")
    if isinstance(value, np.ma.MaskedArray):
        masked = int(np.ma.count_masked(value))
        if masked:
            raise ValueError(f"`{name}` is a masked array with {masked} masked entr"
                             f"{'y' if masked == 1 else 'ies'}: their stored values would be "
                             "read as data. Fill them (`x.filled(value)`) or drop those rows.")
        return
    if hasattr(value, "toarray") and hasattr(value, "nnz"):  # SciPy, without importing it
        kind = f"SciPy {type(value).__name__}"
    elif type(value).__name__ == "SparseTensor":
        kind = "tf.SparseTensor"
    else:
        return
    raise TypeError(f"`{name}` is a sparse matrix ({kind}); pass a dense array: "
                    "`x.toarray()` (SciPy) or `tf.sparse.to_dense(x)` (features too large to "
                    "densify at once: a tf.data.Dataset of dense rows).")


def check_bool(name: str, value: Any) -> bool:
    """``value`` itself if it is a bool; TypeError naming ``name`` otherwise."""
    if not isinstance(value, bool):
        raise TypeError(f"`{name}` must be a bool, got {value!r}.")
    return value


def check_int(name: str, value: Any, minimum: int, why: str = "") -> int:
    """``value`` as an int ``>= minimum``; TypeError/ValueError naming ``name`` otherwise."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"`{name}` must be an int, got {value!r}.")
    if value < minimum:
        raise ValueError(f"`{name}` must be at least {minimum}{why}, got {value}.")
    return int(value)


#: The intervals :func:`check_probability` knows, by how they are written.
_INTERVALS: dict[str, Callable[[float], bool]] = {
    "[0, 1]": lambda v: 0.0 <= v <= 1.0,
    "(0, 1)": lambda v: 0.0 < v < 1.0,
    "[0, 1)": lambda v: 0.0 <= v < 1.0,
    "(0, 1]": lambda v: 0.0 < v <= 1.0,
}


def check_probability(name: str, value: Any, *, interval: str = "[0, 1]") -> float:
    """``value`` as a float in ``interval`` (one of ``"[0, 1]"``, ``"(0, 1)"``, ...).

    Raises:
        TypeError: if ``value`` is not a real number (a bool is not one).
        ValueError: if it is NaN or outside ``interval``; both name ``name``.
    """
    inside = _INTERVALS[interval]
    message = f"`{name}` must be a number in {interval}, got {value!r}."
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(message)
    if not inside(float(value)):  # NaN is inside no interval
        raise ValueError(message)
    return float(value)


def check_initial_guess(value: Any, *, name: str = "initial_dagger",
                        models: bool = True) -> Any:
    """The initial guess ``f†`` before the first refresh: a probability, or a Keras model.

    Args:
        value: a number in ``[0, 1]`` (returned as a float), or a
            ``keras.Model`` mapping features to ``f†`` (returned as it is;
            its output convention is checked where the loss is known).
        name: how errors name the argument.
        models: whether a model is allowed (else only a number).

    Raises:
        TypeError: neither a number nor (where allowed) a keras.Model.
        ValueError: a number outside ``[0, 1]`` (or NaN).
    """
    if models:
        import keras  # here, not at the top: this module stays free of TensorFlow

        if isinstance(value, keras.Model):
            return value
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise TypeError(f"`{name}` must be a number in [0, 1] or a keras.Model, "
                            f"got {type(value).__name__}.")
    return check_probability(name, value)


def resolve_from_logits(model: Any, from_logits: Any, name: str = "model") -> bool:
    """Whether ``model`` outputs logits: ``from_logits`` if given, else its compiled loss's.

    ``from_logits=None`` reads the model's ``adpue_from_logits`` mark (True on
    the models :func:`adpue_tf.fit_pue` returns, until saved), else the
    ``from_logits`` attribute of the loss ``model`` was compiled with (an
    adpue_tf loss, or a Keras loss such as ``BinaryCrossentropy``); a model
    compiled with no such loss, or not compiled, is refused rather than guessed.

    Raises:
        TypeError: ``from_logits`` neither a bool nor None.
        ValueError: ``from_logits=None`` and the compiled loss does not say.
    """
    if from_logits is not None:
        if not isinstance(from_logits, bool):
            raise TypeError(f"`from_logits` must be a bool or None, got {from_logits!r}.")
        return from_logits
    marked = getattr(model, "adpue_from_logits", None)  # fit_pue's models: logits
    if isinstance(marked, bool):
        return marked
    loss = getattr(model, "loss", None)
    value = getattr(loss, "from_logits", None)
    if isinstance(value, bool):
        return value
    raise ValueError(
        f"Cannot tell whether `{name}` outputs logits or probabilities: `from_logits=None` "
        f"reads the compiled loss, but `{name}`'s loss ({type(loss).__name__}) has no "
        "`from_logits`. Pass `from_logits=True` or `from_logits=False`: True for a logit "
        "output, False for probabilities.")


def check_choices(name: str, values: Any, check: Callable[[float], bool],
                  allowed: str) -> list[float]:
    """Validate a non-empty sequence of distinct finite numbers; return floats."""
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence) or not values:
        raise ValueError(f"`{name}` must be a non-empty sequence of numbers, got {values!r}.")
    out = []
    for v in values:
        if isinstance(v, bool) or not isinstance(v, numbers.Real) or not math.isfinite(v):
            raise ValueError(f"`{name}` must hold finite numbers, got {v!r}.")
        if not check(float(v)):
            raise ValueError(f"`{name}` values must be {allowed}, got {v!r}.")
        out.append(float(v))
    if len(set(out)) != len(out):
        raise ValueError(f"`{name}` holds repeated values: {values!r}.")
    return out


def check_shape(name: str, shape: Any) -> tuple[int, ...]:
    """A feature shape (an int or a tuple of ints) as a tuple of positive ints."""
    dims = (shape,) if isinstance(shape, numbers.Integral) else shape
    try:
        dims = tuple(dims)
    except TypeError:
        raise TypeError(f"`{name}` must be an int or a tuple of ints, got {shape!r}.") from None
    if not dims or any(isinstance(d, bool) or not isinstance(d, numbers.Integral) or d < 1
                       for d in dims):
        raise TypeError(f"`{name}` must hold positive ints, got {shape!r}.")
    return tuple(int(d) for d in dims)


def table_columns(x: Any) -> tuple[str, ...] | None:
    """The column names of a table (a pandas DataFrame, duck-typed), else None.

    Example:
        >>> table_columns(np.ones((2, 3))) is None
        True
    """
    if isinstance(x, (np.ndarray, Mapping, tuple, list)):
        return None
    columns = getattr(x, "columns", None)
    if columns is None or not hasattr(x, "dtypes"):
        return None
    return tuple(str(c) for c in columns)


def check_same_columns(tables: Sequence[tuple[str, tuple[str, ...] | None]]) -> None:
    """Tables given as the features of one net name the same columns in the same order.

    Their rows are read by position, so a column of another name or place
    would feed one feature's values to another's weights, silently.

    Args:
        tables: ``(argument name, table_columns(x))`` of each argument (None: not a table).

    Raises:
        ValueError: naming both arguments and their columns.

    Example:
        >>> check_same_columns([("x_pu", ("a", "b")), ("x_e", ("a", "b")), ("x_u", None)])
    """
    named = [(n, c) for n, c in tables if c is not None]
    if not named:
        return
    first, expected = named[0]
    for name, columns in named[1:]:
        if columns != expected:
            how = ("the same names in another order" if sorted(columns) == sorted(expected)
                   else "other names")
            raise ValueError(
                f"`{first}` and `{name}` are tables with different columns ({how}): "
                f"{list(expected)} and {list(columns)}. Their rows are read by position, so "
                f"each column must be the same feature in both: give `{name}` the columns "
                f"of `{first}` in its order (e.g. `{name}[list({first}.columns)]`).")
