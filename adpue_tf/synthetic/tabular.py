"""Fully synthetic data with known ``p(y=1|x)`` and ``θ(e=1|x)``.

``x ~ N(0, I)``, ``p(y=1|x) = σ(x·a + b)``, ``θ(e=1|x) = σ(x·c + d)``, ``Y`` and
``E`` independent given ``x`` (strong ignorability), ``W = E·Y``. A learner's
output can be compared with the true probabilities: the ground-truth check of
SPEC.md.

Example:
    >>> d = make_synthetic(1000, seed=1)
    >>> bool(np.allclose(d.p_w, d.p_y * d.p_e))
    True
"""

from __future__ import annotations

import dataclasses
import numbers
from typing import Any

import numpy as np

from adpue_tf._internal.numeric import sigmoid as _sigmoid
from adpue_tf.labels import check_finite

__all__ = ["EXPOSURES", "SyntheticData", "SyntheticPUE", "make_synthetic", "synthetic_pue", "synthetic_sse"]

@dataclasses.dataclass(frozen=True)
class SyntheticData:
    """Synthetic rows with known truth; ``W = E·Y``, ``Y ⫫ E | x``.

    Fields: ``x`` (``(n, dim)``), draws ``y, e, w``, true probabilities
    ``p_y = p(y=1|x)``, ``p_e = θ(e=1|x)``, ``p_w = q(w=1|x) = p_y·p_e``, and the
    parameters ``y_weights, y_bias, e_weights, e_bias``.

    Example:
        >>> bool(np.all(make_synthetic(50).w <= make_synthetic(50).e))
        True
    """

    x: np.ndarray
    y: np.ndarray
    e: np.ndarray
    w: np.ndarray
    p_y: np.ndarray
    p_e: np.ndarray
    p_w: np.ndarray
    y_weights: np.ndarray
    y_bias: float
    e_weights: np.ndarray
    e_bias: float


def _params(dim: int, y_weights: Any, e_weights: Any) -> tuple[np.ndarray, np.ndarray]:
    if not _positive_int(dim):
        raise ValueError(f"`dim` must be a positive integer, got {dim!r}.")
    out = []
    defaults = {"y_weights": (2.0, -1.0), "e_weights": (-1.5, 2.0)}
    for (name, default), w in zip(defaults.items(), (y_weights, e_weights)):
        if w is None:  # first two coordinates as for dim=2, the others pure noise
            w = np.zeros(int(dim))
            w[: min(2, int(dim))] = default[: min(2, int(dim))]
        w = np.asarray(check_finite(name, w), dtype=np.float64)
        if w.shape != (dim,):
            raise ValueError(f"`{name}` must have shape ({dim},), got {w.shape}.")
        out.append(w)
    return out[0], out[1]


#: Exposure mechanisms: ``θ(e=1|x)`` as a function of the linear score ``s = x·c + d``.
EXPOSURES = {
    "logistic": _sigmoid,
    # complementary log-log: not logistic in x, so a logistic θ̂ is misspecified
    "cloglog": lambda s: -np.expm1(-np.exp(np.minimum(s, 50.0))),
}


def _exposure(name: Any) -> Any:
    if name not in EXPOSURES:
        raise ValueError(f"`exposure` must be one of {list(EXPOSURES)}, got {name!r}.")
    return EXPOSURES[name]


def _positive_int(value: Any) -> bool:
    """Whether ``value`` is an int >= 1 (``True`` and ``2.0`` are not: never read as sizes)."""
    return not isinstance(value, bool) and isinstance(value, numbers.Integral) and int(value) >= 1


def _draw(
    rng: np.random.Generator, n: int, a: np.ndarray, b: float, c: np.ndarray, d: float,
    name: str = "n", exposure: str = "logistic",
) -> SyntheticData:
    if not _positive_int(n):
        raise ValueError(f"`{name}` (number of rows) must be a positive integer, got {n!r}.")
    for name, v in (("y_bias", b), ("e_bias", d)):
        if not np.isfinite(v):
            raise ValueError(f"`{name}` must be finite, got {v!r}.")
    x = rng.standard_normal((int(n), len(a)))
    p_y, p_e = _sigmoid(x @ a + b), _exposure(exposure)(x @ c + d)
    y = (rng.random(int(n)) < p_y).astype(np.float64)
    e = (rng.random(int(n)) < p_e).astype(np.float64)
    return SyntheticData(x, y, e, y * e, p_y, p_e, p_y * p_e, a, float(b), c, float(d))


def make_synthetic(
    n: int, *, dim: int = 2, seed: int = 0, y_weights: Any = None, y_bias: float = 0.0,
    e_weights: Any = None, e_bias: float = 0.0,
) -> SyntheticData:
    """Draw ``x ~ N(0, I_dim)``, ``Y ~ Bern(σ(x·a+b))``, ``E ~ Bern(σ(x·c+d))``, ``W = E·Y``.

    Defaults ``a = (2, -1)``, ``c = (-1.5, 2)``, ``b = d = 0`` make exposure
    rare where positives are common (strong selection bias); other ``dim``
    keep these first two coordinates (truncated for ``dim=1``) and put zero
    weight on the rest.

    Example:
        >>> make_synthetic(10, dim=3).x.shape
        (10, 3)
    """
    a, c = _params(dim, y_weights, e_weights)
    return _draw(np.random.default_rng(seed), n, a, y_bias, c, e_bias)


def _priors(
    a: np.ndarray, b: float, c: np.ndarray, d: float, h: float = 0.04,
    exposure: str = "logistic",
) -> tuple[float, float]:
    """``(p(y=1), q(w=1))`` by quadrature: ``(x·a, x·c)`` is bivariate normal.

    Trapezoid rule on a ``[-9, 9]²`` standard-normal grid, exponentially
    accurate for these smooth integrands (error < 1e-9 for weight norms up to ~20).
    """
    t = np.arange(-9.0, 9.0 + h / 2, h)
    wt = np.exp(-0.5 * t**2) * h / np.sqrt(2 * np.pi)
    val, vec = np.linalg.eigh(np.array([[a @ a, a @ c], [a @ c, c @ c]]))
    grid = np.stack(np.meshgrid(t, t, indexing="ij")).reshape(2, -1)
    u, v = (vec * np.sqrt(np.clip(val, 0.0, None))) @ grid
    ww, s_y = np.outer(wt, wt).ravel(), _sigmoid(u + b)
    return float(ww @ s_y), float(ww @ (s_y * _exposure(exposure)(v + d)))


@dataclasses.dataclass(frozen=True)
class SyntheticPUE:
    """Independent synthetic PU and E samples.

    Observed: ``x_pu, w_pu`` and ``x_e, e_e``. Truth: ``p_y_pu, p_w_pu``
    (``p(y=1|x)``, ``q(w=1|x)`` on the PU rows), ``y_pu``, ``p_e_e``
    (``θ(e=1|x)`` on the E rows), the priors ``prior_y = p(y=1)`` and
    ``prior_w = q(w=1)`` (2-D quadrature, error far below 1e-6), and the
    parameters.

    Example:
        >>> s = synthetic_pue(100, 50)
        >>> 0 < s.prior_w < s.prior_y < 1
        True
    """

    x_pu: np.ndarray
    w_pu: np.ndarray
    p_y_pu: np.ndarray
    p_w_pu: np.ndarray
    y_pu: np.ndarray
    x_e: np.ndarray
    e_e: np.ndarray
    p_e_e: np.ndarray
    prior_y: float
    prior_w: float
    y_weights: np.ndarray
    y_bias: float
    e_weights: np.ndarray
    e_bias: float


def synthetic_pue(
    n_pu: int, n_e: int, *, dim: int = 2, seed: int = 0, y_weights: Any = None,
    y_bias: float = 0.0, e_weights: Any = None, e_bias: float = 0.0,
    exposure: str = "logistic",
) -> SyntheticPUE:
    """Independent PU (``n_pu`` rows) and E (``n_e`` rows) samples; model as :func:`make_synthetic`.

    ``exposure`` picks ``θ(e=1|x)`` from the score ``s = x·c + d``:
    ``"logistic"`` (``σ(s)``) or ``"cloglog"`` (``1 - exp(-exp(s))``, not
    logistic in ``x``: a logistic ``θ̂`` is then misspecified).

    Example:
        >>> s = synthetic_pue(20, 30, seed=3)
        >>> (s.x_pu.shape, s.e_e.shape)
        ((20, 2), (30,))
    """
    a, c = _params(dim, y_weights, e_weights)
    rng = np.random.default_rng(seed)
    _exposure(exposure)
    pu = _draw(rng, n_pu, a, y_bias, c, e_bias, "n_pu", exposure)
    e = _draw(rng, n_e, a, y_bias, c, e_bias, "n_e", exposure)
    prior_y, prior_w = _priors(a, float(y_bias), c, float(e_bias), exposure=exposure)
    return SyntheticPUE(pu.x, pu.w, pu.p_y, pu.p_w, pu.y, e.x, e.e, e.p_e, prior_y, prior_w,
                        a, float(y_bias), c, float(e_bias))


def synthetic_sse(
    n: int, *, dim: int = 2, seed: int = 0, y_weights: Any = None, y_bias: float = 0.0,
    e_weights: Any = None, e_bias: float = 0.0,
) -> SyntheticData:
    """SSE sample: observed ``(x, w, e)``; ``y`` and ``p_y`` (and ``p_e, p_w``) are the truth.

    Same model as :func:`make_synthetic`.

    Example:
        >>> d = synthetic_sse(10)
        >>> bool(np.all(d.w <= d.e))
        True
    """
    return make_synthetic(n, dim=dim, seed=seed, y_weights=y_weights, y_bias=y_bias,
                          e_weights=e_weights, e_bias=e_bias)
