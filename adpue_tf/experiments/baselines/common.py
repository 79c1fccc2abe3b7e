"""What the baselines share: argument checks, the one-trial estimator API, :func:`fit_logistic`."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from adpue_tf import risks
from adpue_tf.experiments.helpers import check_int
from adpue_tf.experiments.linear_fit import LinearFit, fit_linear
from adpue_tf.labels import check_binary, check_finite, pack_pu

__all__ = ["fit_logistic"]


def _proba(model: Any, x: np.ndarray) -> np.ndarray:
    """Column 1 of a scikit-learn classifier's ``predict_proba``."""
    return model.predict_proba(x)[:, 1]


def fit_logistic(x: Any, y: Any, *, l2: float = 0.0, steps: int = 200,
                 learning_rate: float = 0.05, names: tuple[str, str] = ("x", "y"),
                 tol: float = 0.0) -> LinearFit:
    """Logistic regression of a 0/1 label, every trial at once: the ratio's ``q̂`` and ``θ̂``.

    :func:`fit_linear` with ``risks.logit`` (the label as ``W`` of PU rows):
    minimises ``mean(BCE) + l2·‖w‖²`` by full-batch Adam from zero. Table 1's
    IPS column takes its ``θ̂`` from here too.

    Args:
        x: features ``(trials, rows, features)``.
        y: labels in {0, 1}, ``(trials, rows)``.
        l2, steps, learning_rate, tol: :func:`fit_linear`'s options.
        names: the names of ``x`` and ``y`` in error messages.

    Returns:
        The fitted :class:`~adpue_tf.experiments.linear_fit.LinearFit`.

    Example:
        >>> x = np.array([[[-1.0], [1.0], [-2.0], [2.0]]])
        >>> fit = fit_logistic(x, [[0, 1, 1, 0]], steps=5)
        >>> fit.weights.shape, fit.bias.shape
        ((1, 1), (1,))
    """
    xn, yn = names
    x = np.asarray(check_finite(xn, x), np.float32)
    y = _binary(yn, y)
    if x.ndim != 3 or y.shape != x.shape[:2]:
        raise ValueError(f"`{xn}` must be (trials, rows, features) and `{yn}` (trials, rows) "
                         f"with the same trials and rows; got {x.shape} and {y.shape}.")
    packed = np.stack([pack_pu(r) for r in y])
    return fit_linear(x, packed, risks.logit, steps=steps, learning_rate=learning_rate, l2=l2,
                      tol=tol)


def _check_float(name: str, value: Any, positive: bool, high: float = math.inf) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"`{name}` must be a number, got {type(value).__name__}.")
    if not (math.isfinite(value) and (0 < value if positive else 0 <= value) and value < high):
        raise ValueError(f"`{name}` must be finite, {'>' if positive else '>='} 0 and "
                         f"< {high}, got {value}.")
    return float(value)


def _binary(name: str, value: Any) -> np.ndarray:
    """``value`` as float64, any shape, holding only 0 and 1."""
    arr = np.asarray(check_finite(name, value), np.float64)
    if not np.all((arr == 0) | (arr == 1)):
        raise ValueError(f"`{name}` must hold only 0 and 1.")
    return arr


def _check_features(cols: Any, dim: int | None = None) -> tuple[int, ...]:
    if isinstance(cols, (str, bytes)) or not isinstance(cols, (Sequence, np.ndarray)):
        raise TypeError("`propensity_features` must be a sequence of column indices, "
                        f"got {type(cols).__name__}.")
    out = tuple(check_int("propensity_features", i, 0) for i in cols)
    if not out or len(set(out)) != len(out):
        raise ValueError(f"`propensity_features` must be non-empty and unique, got {list(out)}.")
    if dim is not None and max(out) >= dim:
        raise ValueError(f"`propensity_features` has index {max(out)} but `x` has {dim} "
                         "features.")
    return out


def _check_x(name: str, x: Any, dim: int | None = None) -> np.ndarray:
    arr = check_finite(name, x)
    if arr.ndim < 2:
        raise ValueError(f"`{name}` must have shape (n, features...), got shape {arr.shape}.")
    if arr.shape[0] == 0 or arr.size == 0:
        raise ValueError(f"`{name}` is empty (shape {arr.shape}); it needs rows and features.")
    arr = arr.reshape(arr.shape[0], -1)
    if np.issubdtype(arr.dtype, np.floating) and np.abs(arr).max() > np.finfo(np.float32).max:
        raise ValueError(f"`{name}` has values too large for float32.")
    arr = arr.astype(np.float32)
    if dim is not None and arr.shape[1] != dim:
        raise ValueError(f"`{name}` has {arr.shape[1]} (flattened) features, expected {dim}.")
    return arr


def _check_labels(name: str, y: Any, rows: int, x_name: str) -> np.ndarray:
    arr = check_binary(name, y)
    if len(arr) != rows:
        raise ValueError(f"`{name}` has {len(arr)} rows but `{x_name}` has {rows}.")
    return arr


class _OneTrial:
    """One fitted data set: features flattened to ``(n, dim)``; ``fit_`` predicts."""

    n_features_: int | None = None
    fit_: Any

    def _x(self, x: Any) -> np.ndarray:
        if self.n_features_ is None:
            raise RuntimeError(f"This {type(self).__name__} is not fitted; call fit() first.")
        return _check_x("x", x, self.n_features_)[None]

    def predict_proba(self, x: Any) -> np.ndarray:
        """``p̂(y=1|x)``, shape ``(n,)``."""
        x = self._x(x)
        return self.fit_.predict_proba(x)[0]

    def predict(self, x: Any) -> np.ndarray:
        """Hard labels ``predict_proba(x) > 0.5`` as 0/1 integers, shape ``(n,)``."""
        return (self.predict_proba(x) > 0.5).astype(np.int64)
