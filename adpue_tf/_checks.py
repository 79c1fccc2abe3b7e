"""Internal: validation of the risks' hyper-parameters, with clear errors."""

from __future__ import annotations

import math
from numbers import Real
from typing import Any


def _real(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, Real):
        raise TypeError(f"`{name}` must be a real number, got {type(value).__name__}.")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"`{name}` must be finite, got {value}.")
    return value


def check_options(**options: Any) -> dict[str, Any]:
    """Validate the options a risk takes; return them as plain Python values.

    Known names: ``prior`` in (0, 1), ``alpha`` in [0, 1], ``beta >= 0``,
    ``gamma`` None or in (0, 1], ``eta`` in [-1, 1], and the booleans
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
        v = _real(name, value)
        bad = {
            "prior": not 0.0 < v < 1.0,
            "alpha": not 0.0 <= v <= 1.0,
            "beta": v < 0.0,
            "gamma": not 0.0 < v <= 1.0,
            "eta": not -1.0 <= v <= 1.0,
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
            }[name]
            raise ValueError(f"`{name}` must be {allowed}, got {v}.")
        out[name] = v
    return out
