"""Internal: validation of the risks' hyper-parameters, with clear errors."""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Sequence
from numbers import Real
from typing import Any


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
            if not isinstance(value, bool):
                raise TypeError(f"`{name}` must be a bool, got {value!r}.")
            out[name] = value
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
