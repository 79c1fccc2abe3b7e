"""Exposure mechanisms beyond the paper's formula, for the semi-synthetic protocol.

:func:`adpue_tf.experiments.simulate.exposure_theta` dispatches here for
``"logistic"`` and ``"cloglog"``. Both read a score ``s(x)``: a fixed random
projection of the 13 exposure features (:func:`exposure_score`), and add an
intercept ``b`` found by bisection so that the mean of ``θ(e=1|x)`` over the
rows is the target ``θ(e=1)``:

* ``"logistic"``: ``θ = σ(s(x) + b)``;
* ``"cloglog"``: ``θ = 1 - exp(-λ(x))`` with ``λ(x) = exp(s(x) + b)`` (the chance
  of at least one showing among Poisson(``λ``) opportunities; not a logistic
  function of any linear score, its link is the complementary log-log).

Example:
    >>> x = np.random.default_rng(0).uniform(-1, 1, (500, 13))
    >>> theta, b = calibrated(x, 0.5, "logistic")
    >>> round(float(theta.mean()), 4)
    0.5
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from adpue_tf.experiments.helpers import sigmoid

__all__ = ["MECHANISMS", "DESCRIPTIONS", "SCORE_SEED", "exposure_score", "calibrated",
           "cloglog"]

#: Exposure mechanisms of ``simulate.exposure_theta``: the paper's formula and two others.
MECHANISMS = ("paper", "logistic", "cloglog")
#: Seed of the fixed projection ``r`` in :func:`exposure_score` (the same for every trial).
SCORE_SEED = 20_240_601
#: Feature columns the score reads (those of the paper's formula, x1..x13).
SCORE_FEATURES = 13
#: One sentence per mechanism other than the paper's, for the results pages.
DESCRIPTIONS = {
    "logistic": "θ(e=1|x) = σ(s(x) + b), s a fixed random projection of the 13 exposure "
                "features (standard deviation 2), b calibrated to the target θ(e=1) "
                "(`adpue_tf.experiments.mechanisms`).",
    "cloglog": "θ(e=1|x) = 1 − exp(−λ(x)), λ(x) = exp(s(x) + b), s a fixed random "
               "projection of the 13 exposure features (standard deviation 2), b calibrated "
               "to the target θ(e=1): not a logistic function of any linear score "
               "(`adpue_tf.experiments.mechanisms`).",
}


def _matrix(x: Any) -> np.ndarray:
    f = np.asarray(x, dtype=np.float64)
    if f.ndim != 2 or f.shape[1] < SCORE_FEATURES or not np.isfinite(f).all():
        raise ValueError(f"`x` must be a finite matrix with at least {SCORE_FEATURES} columns "
                         f"(the exposure features), got shape {f.shape}.")
    return f[:, :SCORE_FEATURES]


def exposure_score(x: Any, *, strength: float = 2.0) -> np.ndarray:
    """Score ``s(x)`` of the ``"logistic"`` and ``"cloglog"`` mechanisms.

    ``v = x[:, :13] @ r`` with a fixed ``r ~ N(0, 1)^13`` (seed
    :data:`SCORE_SEED`, the same for every data set and trial), standardised
    over the rows of ``x`` and times ``strength``: ``s`` has mean 0 and
    standard deviation ``strength`` (0 where ``v`` is constant).

    Args:
        x: exposure features, a matrix with at least 13 columns (as the
            paper's formula reads; ``simulate.project_features`` for other data).
        strength: standard deviation of the score (selection-bias strength), >= 0.

    Returns:
        float64 vector ``(n,)``.

    Example:
        >>> s = exposure_score(np.random.default_rng(0).uniform(-1, 1, (500, 13)))
        >>> round(float(s.mean()), 6) + 0.0, round(float(s.std()), 6)
        (0.0, 2.0)
    """
    f = _matrix(x)
    if isinstance(strength, bool) or not np.isfinite(strength) or strength < 0:
        raise ValueError(f"`strength` must be a finite number >= 0, got {strength!r}.")
    v = f @ np.random.default_rng(SCORE_SEED).standard_normal(SCORE_FEATURES)
    sd = v.std()
    return float(strength) * (v - v.mean()) / (sd if sd > 0 else 1.0)


def cloglog(s: Any) -> np.ndarray:
    """``1 - exp(-exp(s))``, the inverse complementary log-log link.

    Example:
        >>> round(float(cloglog(np.array([0.0]))[0]), 4)
        0.6321
    """
    return -np.expm1(-np.exp(np.minimum(np.asarray(s, np.float64), 50.0)))


def _intercept(link: Callable[[np.ndarray], np.ndarray], s: np.ndarray, target: float,
               tol: float) -> float:
    """``b`` with ``mean(link(s + b)) == target`` by bisection (the mean rises with ``b``)."""
    lo, hi = -60.0 - float(s.max()), 60.0 - float(s.min())
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        m = float(np.mean(link(s + mid)))
        if abs(m - target) <= tol:
            return mid
        lo, hi = (mid, hi) if m < target else (lo, mid)
    return 0.5 * (lo + hi)


def calibrated(x: Any, target: float, mechanism: str, *, strength: float = 2.0,
               tol: float = 1e-6) -> tuple[np.ndarray, float]:
    """``(θ(e=1|x) per row, intercept b)`` of ``"logistic"`` or ``"cloglog"``, mean ``target``.

    Args:
        x: exposure features (at least 13 columns).
        target: wanted mean ``θ(e=1)``, in ``(0, 1)``.
        mechanism: ``"logistic"`` or ``"cloglog"``.
        strength: standard deviation of the score (see :func:`exposure_score`).
        tol: tolerance on the mean.

    Raises:
        ValueError: on another mechanism, a bad target or bad features.

    Example:
        >>> x = np.random.default_rng(0).uniform(-1, 1, (500, 13))
        >>> theta, b = calibrated(x, 0.7, "cloglog")
        >>> round(float(theta.mean()), 4)
        0.7
    """
    links = {"logistic": sigmoid, "cloglog": cloglog}
    if mechanism not in links:
        raise ValueError(f"`mechanism` must be one of {list(links)}, got {mechanism!r}.")
    if isinstance(target, bool) or not isinstance(target, (int, float, np.number)) \
            or not 0 < float(target) < 1:
        raise ValueError(f"`target` must be a number in (0, 1), got {target!r}.")
    s = exposure_score(x, strength=strength)
    b = _intercept(links[mechanism], s, float(target), tol)
    return links[mechanism](s + b), b
