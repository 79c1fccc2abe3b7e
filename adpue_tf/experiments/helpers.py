"""Small helpers of the experiments wing: a NumPy sigmoid and an int check.

The wing uses only public names of the core, so it keeps its own copies of
these two (the core's are private). Nothing here is needed by a user of the
library: :mod:`adpue_tf` trains with Keras ops.

Example:
    >>> from adpue_tf.experiments.helpers import sigmoid
    >>> sigmoid([0.0, 1000.0, -1000.0]).tolist()
    [0.5, 1.0, 0.0]
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

__all__ = ["check_int", "sigmoid"]


def sigmoid(z: Any) -> np.ndarray:
    """``1 / (1 + exp(-z))`` in float64, without overflow for any finite ``z``.

    Args:
        z: logits, any array-like.

    Returns:
        The probabilities, a float64 array of ``z``'s shape.

    Example:
        >>> float(sigmoid(0.0))
        0.5
    """
    return np.exp(-np.logaddexp(0.0, -np.asarray(z, np.float64)))


def check_int(name: str, value: Any, minimum: int, why: str = "") -> int:
    """``value`` as an int ``>= minimum``; TypeError/ValueError naming ``name`` otherwise.

    Args:
        name: the argument's name, for the error.
        value: what was passed (a bool or a float such as ``2.0`` is refused).
        minimum: the smallest value allowed.
        why: words appended to the ValueError, e.g. ``" (the number of rows)"``.

    Returns:
        ``value`` as a Python int.

    Raises:
        TypeError: ``value`` is not an int.
        ValueError: ``value < minimum``.

    Example:
        >>> check_int("trials", 3, 1)
        3
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"`{name}` must be an int, got {value!r}.")
    if value < minimum:
        raise ValueError(f"`{name}` must be at least {minimum}{why}, got {value}.")
    return int(value)
