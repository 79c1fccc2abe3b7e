"""Small helpers of the experiments wing: a NumPy sigmoid, an int check, a settings check.

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
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

__all__ = ["check_int", "check_settings", "sigmoid"]


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


def check_settings(name: str, values: Any, what: str) -> tuple:
    """``values`` as a tuple: a non-empty list of settings, each given once.

    Each item is a setting a benchmark runs (a split ratio, a data set): an
    empty list would run nothing and report empty tables, and a repeat would
    be computed twice with one copy dropped, so both are refused.

    Args:
        name: the argument's name, for the error.
        values: a tuple, list or array (not a string).
        what: what one item is, e.g. ``"split ratio"``.

    Raises:
        TypeError: ``values`` is a string, a dict or not iterable.
        ValueError: it is empty or repeats an item (named).

    Example:
        >>> check_settings("alphas", [0.3, 0.5], "split ratio")
        (0.3, 0.5)
        >>> check_settings("alphas", (0.3, 0.30), "split ratio")
        Traceback (most recent call last):
        ...
        ValueError: `alphas` repeats 0.3 (0.3, 0.3): each split ratio is run once, so give it once.
    """
    if isinstance(values, (str, bytes, Mapping)) or not isinstance(values, Iterable):
        raise TypeError(f"`{name}` must be a tuple of {what}s, got {values!r}.")
    items = tuple(values)
    if not items:
        raise ValueError(f"`{name}` is empty; give at least one {what}.")
    repeated = [v for i, v in enumerate(items) if v in items[:i]]
    if repeated:
        raise ValueError(f"`{name}` repeats {repeated[0]!r} ({', '.join(map(str, items))}): "
                         f"each {what} is run once, so give it once.")
    return items
