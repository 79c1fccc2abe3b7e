"""The two-model ratio ``q̂/θ̂``: many trials at once (:func:`fit_ratio`), or one (:class:`RatioEstimator`)."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from adpue_tf.experiments.baselines.common import (
    _check_float,
    _check_labels,
    _check_x,
    _OneTrial,
    fit_logistic,
)
from adpue_tf.experiments.helpers import check_int, sigmoid
from adpue_tf.experiments.linear_fit import LinearFit
from adpue_tf.labels import check_finite

__all__ = ["RatioEstimator", "RatioFit", "fit_ratio"]


@dataclasses.dataclass(frozen=True)
class RatioFit:
    """What :func:`fit_ratio` returns: ``q̂``'s and ``θ̂``'s linear models per trial."""

    q: LinearFit
    theta: LinearFit
    theta_floor: float

    def predict_proba(self, x: np.ndarray) -> np.ndarray:
        """``clip(q̂ / max(θ̂, theta_floor), 0, 1)`` of trial ``t`` on ``x[t]``."""
        q, theta = sigmoid(self.q.logits(x)), sigmoid(self.theta.logits(x))
        return np.clip(q / np.maximum(theta, self.theta_floor), 0.0, 1.0)


def fit_ratio(x_pu: Any, w: Any, x_e: Any, e: Any, *, theta_floor: float = 1e-6,
              l2: float = 0.0, steps: int = 200, learning_rate: float = 0.05,
              tol: float = 0.0) -> RatioFit:
    """Separate estimation for linear models, every trial at once.

    ``q̂(w=1|x)``: logistic regression of ``W`` on the PU rows; ``θ̂(e=1|x)``:
    logistic regression of ``E`` on the E rows, trained independently
    (:func:`fit_linear` with ``risks.logit``, penalty ``l2·‖w‖²``). Under strong
    ignorability ``q = p·θ``, so ``p̂ = clip(q̂ / max(θ̂, theta_floor), 0, 1)``.

    Args:
        x_pu: PU features ``(trials, n_pu, features)``; ``w``: ``W``, ``(trials, n_pu)``.
        x_e: E features ``(trials, n_e, features)``; ``e``: ``E``, ``(trials, n_e)``.
        theta_floor: lower bound on ``θ̂`` in the division, in ``(0, 1)``.
        l2, steps, learning_rate, tol: :func:`fit_linear`'s options for both models.

    Returns:
        A :class:`RatioFit`.

    Example:
        >>> from adpue_tf.synthetic import synthetic_pue
        >>> d = synthetic_pue(200, 200, seed=0)
        >>> r = fit_ratio(d.x_pu[None], d.w_pu[None], d.x_e[None], d.e_e[None], steps=20)
        >>> r.predict_proba(d.x_pu[None]).shape
        (1, 200)
    """
    theta_floor = _check_float("theta_floor", theta_floor, positive=True, high=1.0)
    x_pu, x_e = (np.asarray(check_finite(n, v), np.float32) for n, v in (("x_pu", x_pu), ("x_e", x_e)))
    if x_pu.ndim == x_e.ndim == 3 and x_pu.shape[::2] != x_e.shape[::2]:
        raise ValueError(f"`x_e` has shape {x_e.shape}; it needs the trials and "
                         f"features of `x_pu` {x_pu.shape}.")
    q, theta = (fit_logistic(x, y, l2=l2, steps=steps, learning_rate=learning_rate,
                             names=names, tol=tol)
                for x, y, names in ((x_pu, w, ("x_pu", "w")), (x_e, e, ("x_e", "e"))))
    return RatioFit(q, theta, theta_floor)


class RatioEstimator(_OneTrial):
    """Separate estimation on one data set: a one-trial view of :func:`fit_ratio`.

    ``p̂(y=1|x) = clip(q̂(w=1|x) / max(θ̂(e=1|x), theta_floor), 0, 1)`` with
    ``q̂`` a linear logistic regression of ``W`` on ``D_PU`` and ``θ̂`` one of
    ``E`` on ``D_E``.

    Args:
        theta_floor: lower bound on ``θ̂`` in the division, in ``(0, 1)``.
        l2, steps, learning_rate: as :func:`fit_ratio`.

    Attributes:
        fit_: the :class:`RatioFit` (one trial).

    Example:
        >>> from adpue_tf.synthetic import synthetic_pue
        >>> d = synthetic_pue(200, 200, seed=0)
        >>> r = RatioEstimator(steps=20).fit(d.x_pu, d.w_pu, d.x_e, d.e_e)
        >>> bool((r.predict_q(d.x_pu) <= 1).all()), r.predict_proba(d.x_pu[:4]).shape
        (True, (4,))
    """

    def __init__(self, *, theta_floor: float = 1e-6, l2: float = 0.0, steps: int = 200,
                 learning_rate: float = 0.05) -> None:
        self.theta_floor = _check_float("theta_floor", theta_floor, positive=True, high=1.0)
        self.l2 = _check_float("l2", l2, positive=False)
        self.steps = check_int("steps", steps, 1)
        self.learning_rate = _check_float("learning_rate", learning_rate, positive=True)

    def fit(self, x_pu: Any, w: Any, x_e: Any, e: Any) -> RatioEstimator:
        """Fit ``q̂`` on ``(x_pu, w)`` and ``θ̂`` on ``(x_e, e)``.

        Args:
            x_pu: PU features, shape ``(n_pu, ...)``.
            w: observed positives ``W`` in {0, 1}, shape ``(n_pu,)``.
            x_e: exposure-log features, same feature shape as ``x_pu``.
            e: exposures ``E`` in {0, 1}, shape ``(n_e,)``.

        Returns:
            ``self``.

        Raises:
            ValueError, TypeError: on bad input, naming the argument.
        """
        x_pu = _check_x("x_pu", x_pu)
        w = _check_labels("w", w, len(x_pu), "x_pu")
        x_e = _check_x("x_e", x_e, x_pu.shape[1])
        e = _check_labels("e", e, len(x_e), "x_e")
        self.fit_ = fit_ratio(x_pu[None], w[None], x_e[None], e[None],
                              theta_floor=self.theta_floor, l2=self.l2, steps=self.steps,
                              learning_rate=self.learning_rate)
        self.n_features_ = x_pu.shape[1]
        return self

    def predict_q(self, x: Any) -> np.ndarray:
        """``q̂(w=1|x)``, shape ``(n,)``."""
        x = self._x(x)
        return sigmoid(self.fit_.q.logits(x))[0]

    def predict_theta(self, x: Any) -> np.ndarray:
        """``θ̂(e=1|x)``, shape ``(n,)``."""
        x = self._x(x)
        return sigmoid(self.fit_.theta.logits(x))[0]
