"""Semi-synthetic PUE / 3SE splits: the paper's exposure mechanism and protocol.

Pure NumPy. The semi-synthetic protocol (paper, Sec. 6) starts from a fully
labeled binary data set, draws an exposure ``E ~ θ(e|x)`` with
``θ(e=1|x) = min(1, C·σ(exposure_logit(x)))`` and hides labels: PU rows keep
only ``W = E·Y``, E rows only ``E``, SSE rows ``W`` and ``E``. Fully synthetic
data with known truth lives in :mod:`adpue_tf.synthetic`.
``mechanism`` picks other exposure mechanisms calibrated to the same
``θ(e=1)`` (:func:`exposure_theta`, :mod:`adpue_tf.experiments.mechanisms`).

Example:
    >>> x = np.random.default_rng(0).uniform(-1, 1, (500, 13))
    >>> round(float(exposure_probability(x, calibrate_exposure(x, 0.4)).mean()), 4)
    0.4
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from adpue_tf.experiments.helpers import sigmoid as _sigmoid
from adpue_tf.experiments.mechanisms import MECHANISMS, calibrated, exposure_score
from adpue_tf.labels import check_binary, check_finite

__all__ = [
    "exposure_logit", "exposure_probability", "project_features", "calibrate_exposure",
    "MECHANISMS", "exposure_score", "exposure_theta", "PUESplit", "ThreeSESplit", "simulate_pue", "simulate_3se",
]

#: Number of features the paper's exposure formula reads (x1..x13).
EXPOSURE_FEATURES = 13


def _features(name: str, x: Any) -> np.ndarray:
    arr = np.asarray(check_finite(name, x), dtype=np.float64)
    if arr.ndim != 2 or arr.shape[1] < EXPOSURE_FEATURES:
        raise ValueError(
            f"`{name}` must be a matrix with at least {EXPOSURE_FEATURES} feature columns "
            f"for the exposure formula, got shape {arr.shape}; map it first with "
            f"`project_features({name}, dim={EXPOSURE_FEATURES})` (the documented stand-in "
            "for low-dimensional and image data)."
        )
    return arr


def exposure_logit(x: Any) -> np.ndarray:
    """The paper's exposure logit ``x13·g1(x) + (1-x13)·g2(x)``.

    ``g1 = x2 + 2x3 + 3x4x5 + 4x6 + 5x6²`` and ``g2 = x7 + 2x8 + 3x9x10 + 4x11 +
    5x12²`` with 1-based feature indices (``x2`` is column 1); columns beyond
    the 13th are ignored. ``x1`` is not used, as in the paper.

    Args:
        x: matrix of shape ``(n, d)`` with ``d >= 13``.

    Returns:
        float64 vector of shape ``(n,)``.

    Raises:
        ValueError: on NaN/inf or fewer than 13 columns (use :func:`project_features`).

    Example:
        >>> float(exposure_logit(np.ones((1, 13)))[0])
        15.0
    """
    f = _features("x", x)
    c = lambda i: f[:, i - 1]  # noqa: E731  (1-based column)
    g1 = c(2) + 2 * c(3) + 3 * c(4) * c(5) + 4 * c(6) + 5 * c(6) ** 2
    g2 = c(7) + 2 * c(8) + 3 * c(9) * c(10) + 4 * c(11) + 5 * c(12) ** 2
    return c(13) * g1 + (1 - c(13)) * g2


def exposure_probability(x: Any, C: float) -> np.ndarray:
    """``θ(e=1|x) = min(1, C·σ(exposure_logit(x)))``.

    Example:
        >>> float(exposure_probability(np.zeros((1, 13)), 1.5)[0])
        0.75
    """
    if not np.isfinite(C) or C < 0:
        raise ValueError(f"`C` must be a finite number >= 0, got {C!r}.")
    return np.minimum(1.0, C * _sigmoid(exposure_logit(x)))


def project_features(x: Any, *, dim: int = 13, seed: int = 0) -> np.ndarray:
    """Fixed random projection to ``dim`` features in ``[-1, 1]``.

    The exposure formula needs at least 13 features on the scale of the
    paper's LIBSVM data (roughly ``[-1, 1]``). Low-dimensional data lack them;
    for images the first 13 pixels are nearly constant border pixels, so the
    raw formula would give almost no selection bias. This stand-in flattens
    each row, standardises every column (constant columns become 0),
    multiplies by a fixed Gaussian matrix ``R ~ N(0, 1)^(d_in × dim)`` drawn
    from ``seed``, scales by ``1/sqrt(d_in)`` so every output has unit-order
    variance whatever ``d_in`` is, and squashes with ``tanh``. Every output
    mixes all inputs, the map is deterministic, and the range keeps the
    logit bounded (``|logit| <= 45``). Column statistics come from ``x``
    itself: project the whole data set once, before splitting.

    Args:
        x: array of shape ``(n, ...)``; rows are flattened.
        dim: number of output features (``>= 1``).
        seed: seed of the projection matrix.

    Returns:
        float64 matrix of shape ``(n, dim)`` with values in ``[-1, 1]``.

    Example:
        >>> project_features(np.arange(12.0).reshape(4, 3), dim=13).shape
        (4, 13)
    """
    if int(dim) != dim or dim < 1:
        raise ValueError(f"`dim` must be a positive integer, got {dim!r}.")
    arr = np.asarray(check_finite("x", x), dtype=np.float64)
    if arr.ndim < 1 or arr.shape[0] < 1:
        raise ValueError(f"`x` must have at least one row, got shape {arr.shape}.")
    flat = arr.reshape(arr.shape[0], -1)
    std = flat.std(axis=0)
    z = (flat - flat.mean(axis=0)) / np.where(std > 0, std, 1.0)
    proj = np.random.default_rng(seed).standard_normal((flat.shape[1], int(dim)))
    return np.tanh(z @ proj / np.sqrt(flat.shape[1]))


def _calibrate(s: np.ndarray, target: Any, tol: float, name: str) -> float:
    if not isinstance(target, (int, float, np.number)) or not 0 < float(target) < 1:
        raise ValueError(f"`{name}` must be a number in (0, 1), got {target!r}.")
    target, pos = float(target), s[s > 0]
    sup = pos.size / s.size  # attained at C = 1 / min(s > 0)
    if target > sup:
        raise ValueError(
            f"`{name}`={target} is not reachable: mean(min(1, C·θ)) is at most {sup:.6g} "
            f"(the fraction of rows with σ(logit) > 0)."
        )
    mean = lambda c: float(np.mean(np.minimum(1.0, c * s)))  # noqa: E731
    hi = 1.0
    while mean(hi) < target and hi < 1.0 / pos.min():
        hi *= 2.0
    lo = 0.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        m = mean(mid)
        if abs(m - target) <= tol:
            return mid
        lo, hi = (mid, hi) if m < target else (lo, mid)
    return 0.5 * (lo + hi)


def calibrate_exposure(x: Any, target: float, *, tol: float = 1e-6) -> float:
    """Find ``C`` with ``mean(min(1, C·σ(exposure_logit(x)))) == target`` by bisection.

    The mean is continuous and non-decreasing in ``C``; its supremum is the
    fraction of rows with ``σ(logit) > 0`` (1 unless logits underflow).

    Args:
        x: feature matrix with at least 13 columns.
        target: wanted overall exposure rate ``θ(e=1)``, in ``(0, 1)``.
        tol: tolerance on the mean.

    Returns:
        The constant ``C`` as a float.

    Raises:
        ValueError: if ``target`` is outside ``(0, 1)`` or above the reachable supremum.

    Example:
        >>> x = np.random.default_rng(0).uniform(-1, 1, (500, 13))
        >>> C = calibrate_exposure(x, 0.3)
        >>> round(float(exposure_probability(x, C).mean()), 4)
        0.3
    """
    return _calibrate(_sigmoid(exposure_logit(x)), target, tol, "target")


def exposure_theta(x: Any, target: float, mechanism: str = "paper", *,
                   tol: float = 1e-6) -> tuple[np.ndarray, float]:
    """True ``θ(e=1|x)`` per row under ``mechanism``, calibrated to mean ``target``.

    ``"paper"``: ``min(1, C·σ(exposure_logit(x)))`` (:func:`calibrate_exposure`);
    ``"logistic"`` and ``"cloglog"``: see :mod:`adpue_tf.experiments.mechanisms`.

    Args:
        x: exposure features (at least 13 columns).
        target: wanted ``θ(e=1)``, in ``(0, 1)``.
        mechanism: one of :data:`MECHANISMS`.
        tol: tolerance on the mean.

    Returns:
        ``(theta, constant)``: ``θ`` per row and ``C`` (paper) or the intercept ``b``.

    Example:
        >>> x = np.random.default_rng(0).uniform(-1, 1, (500, 13))
        >>> theta, b = exposure_theta(x, 0.7, "cloglog")
        >>> round(float(theta.mean()), 4)
        0.7
    """
    if mechanism not in MECHANISMS:
        raise ValueError(f"`mechanism` must be one of {list(MECHANISMS)}, got {mechanism!r}.")
    feats = _features("x", x)
    if mechanism == "paper":
        sig = _sigmoid(exposure_logit(feats))
        C = _calibrate(sig, target, tol, "target")
        return np.minimum(1.0, C * sig), C
    return calibrated(feats, target, mechanism, tol=tol)


@dataclasses.dataclass(frozen=True)
class PUESplit:
    """A semi-synthetic PUE split. Observed: ``x_pu, w_pu, x_e, e_e, x_test, y_test``.

    Hidden truth for evaluation: ``y_pu, e_pu, y_e``, ``theta_pu, theta_e``
    (true ``θ(e=1|x)``), ``C`` (the intercept ``b`` for mechanisms other than
    ``"paper"``, see :func:`exposure_theta`), the row indices into the input
    and the ``mechanism``. The rows
    whose label is unknown (transductive accuracy) are the PU rows with
    ``W = 0`` and all E rows; :meth:`unknown` returns them.

    Example:
        >>> s = simulate_pue(np.random.default_rng(0).uniform(-1, 1, (40, 13)),
        ...                  np.arange(40) % 2, n_test=10)
        >>> (len(s.x_pu), len(s.x_e), len(s.x_test))
        (15, 15, 10)
    """

    x_pu: np.ndarray
    w_pu: np.ndarray
    x_e: np.ndarray
    e_e: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    y_pu: np.ndarray
    e_pu: np.ndarray
    y_e: np.ndarray
    theta_pu: np.ndarray
    theta_e: np.ndarray
    C: float
    idx_pu: np.ndarray
    idx_e: np.ndarray
    idx_test: np.ndarray
    mechanism: str = "paper"

    def unknown(self) -> tuple[np.ndarray, np.ndarray]:
        """``(x, y)`` of the training rows whose label is unknown (PU with W=0, all E)."""
        m = self.w_pu == 0
        return (np.concatenate([self.x_pu[m], self.x_e]), np.concatenate([self.y_pu[m], self.y_e]))


@dataclasses.dataclass(frozen=True)
class ThreeSESplit:
    """A semi-synthetic 3SE split. Observed: ``x_pu, w_pu, x_sse, w_sse, e_sse, x_test, y_test``.

    Hidden truth: ``y_pu, e_pu, y_sse, theta_pu, theta_sse, C`` and row
    indices. Unknown labels: PU rows with ``W = 0`` and SSE rows with
    ``E = 0`` (an exposed SSE row reveals ``Y = W``); see :meth:`unknown`.

    Example:
        >>> s = simulate_3se(np.random.default_rng(0).uniform(-1, 1, (40, 13)),
        ...                  np.arange(40) % 2, n_test=10)
        >>> bool(np.all(s.w_sse <= s.e_sse))
        True
    """

    x_pu: np.ndarray
    w_pu: np.ndarray
    x_sse: np.ndarray
    w_sse: np.ndarray
    e_sse: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    y_pu: np.ndarray
    e_pu: np.ndarray
    y_sse: np.ndarray
    theta_pu: np.ndarray
    theta_sse: np.ndarray
    C: float
    idx_pu: np.ndarray
    idx_sse: np.ndarray
    idx_test: np.ndarray
    mechanism: str = "paper"

    def unknown(self) -> tuple[np.ndarray, np.ndarray]:
        """``(x, y)`` of the training rows whose label is unknown (PU with W=0, SSE with E=0)."""
        m, k = self.w_pu == 0, self.e_sse == 0
        return (np.concatenate([self.x_pu[m], self.x_sse[k]]),
                np.concatenate([self.y_pu[m], self.y_sse[k]]))


def _protocol(
    x: Any, y: Any, features: Any, exposure_rate: float, split: float, n_test: int,
    seed: int, other: str, mechanism: str = "paper",
) -> tuple[Any, ...]:
    """Validate, calibrate ``C``, split and draw ``E``; returns arrays and index sets."""
    x = check_finite("x", x)
    y = check_binary("y", y)
    n = len(y)
    if x.ndim < 1 or x.shape[0] != n:
        raise ValueError(f"`x` has {x.shape[0] if x.ndim else 0} rows but `y` has {n}.")
    feats = _features("x" if features is None else "features", x if features is None else features)
    if feats.shape[0] != n:
        raise ValueError(f"`features` has {feats.shape[0]} rows but `y` has {n}.")
    if not isinstance(split, (int, float, np.number)) or not 0 < split < 1:
        raise ValueError(f"`split` must lie strictly between 0 and 1, got {split!r}.")
    if int(n_test) != n_test or not 1 <= n_test < n:
        raise ValueError(f"`n_test` must be an integer in [1, {n - 1}], got {n_test!r}.")
    n_train = n - int(n_test)
    n_pu = int(np.floor(split * n_train + 0.5))
    if not 1 <= n_pu < n_train:
        raise ValueError(
            f"`split`={split} with {n_train} training rows leaves the PU part ({n_pu} rows) "
            f"or the {other} part ({n_train - n_pu} rows) empty."
        )
    if mechanism == "paper":  # its own branch: errors name `exposure_rate`
        sig = _sigmoid(exposure_logit(feats))
        C = _calibrate(sig, exposure_rate, 1e-6, "exposure_rate")
        theta = np.minimum(1.0, C * sig)
    else:
        theta, C = calibrated(feats, exposure_rate, mechanism)
    rng = np.random.default_rng(seed)
    perm = rng.permutation(n)
    idx_test, train = np.sort(perm[: int(n_test)]), perm[int(n_test):]
    e = np.zeros(n)
    e[train] = (rng.random(n_train) < theta[train]).astype(np.float64)
    return x, y, e, theta, C, train[:n_pu], train[n_pu:], idx_test


def simulate_pue(
    x: Any, y: Any, *, exposure_rate: float = 0.5, split: float = 0.5, n_test: int = 300,
    seed: int = 0, features: Any = None, mechanism: str = "paper",
) -> PUESplit:
    """Build a PUE data set from fully labeled ``(x, y)`` (the paper's protocol).

    ``C`` is calibrated on all rows so the mean of ``θ(e=1|x)`` equals
    ``exposure_rate``; ``n_test`` random rows are held out; the rest is split
    ``split : (1-split)`` (PU size rounded half up) into the PU and E parts;
    ``E`` is drawn for every training row; PU rows keep ``W = E·Y``, E rows ``E``.

    Args:
        x: inputs, shape ``(n, ...)`` (returned as given, e.g. images).
        y: binary labels, shape ``(n,)``.
        exposure_rate: target ``θ(e=1)`` in ``(0, 1)``.
        split: the PU share ``α`` of the training rows, in ``(0, 1)``.
        n_test: number of held-out test rows (``1 <= n_test < n``).
        seed: seed of the split and the exposure draw.
        features: matrix with ``>= 13`` columns the exposure is computed
            from; defaults to ``x``. Pass ``project_features(x)`` for images
            or low-dimensional data: nothing is projected silently.
        mechanism: the exposure mechanism, one of :data:`MECHANISMS`
            (:func:`exposure_theta`); ``"paper"`` is the paper's formula.

    Returns:
        A :class:`PUESplit`.

    Raises:
        ValueError: on NaN/inf, non-binary ``y``, fewer than 13 exposure
            features, mismatched rows, or a bad ``split``/``n_test``/``exposure_rate``.

    Example:
        >>> x = np.random.default_rng(0).uniform(-1, 1, (100, 13))
        >>> s = simulate_pue(x, (x[:, 0] > 0), n_test=20, split=0.3)
        >>> (len(s.w_pu), len(s.e_e))
        (24, 56)
    """
    if mechanism not in MECHANISMS:
        raise ValueError(f"`mechanism` must be one of {list(MECHANISMS)}, got {mechanism!r}.")
    x, y, e, th, C, pu, ee, te = _protocol(x, y, features, exposure_rate, split, n_test, seed,
                                           "E", mechanism)
    return PUESplit(
        x_pu=x[pu], w_pu=e[pu] * y[pu], x_e=x[ee], e_e=e[ee], x_test=x[te], y_test=y[te],
        y_pu=y[pu], e_pu=e[pu], y_e=y[ee], theta_pu=th[pu], theta_e=th[ee], C=C,
        idx_pu=pu, idx_e=ee, idx_test=te, mechanism=mechanism,
    )


def simulate_3se(
    x: Any, y: Any, *, exposure_rate: float = 0.5, split: float = 0.5, n_test: int = 300,
    seed: int = 0, features: Any = None, mechanism: str = "paper",
) -> ThreeSESplit:
    """Build a 3SE data set (PU part + SSE part); arguments as :func:`simulate_pue`.

    SSE rows keep both ``W = E·Y`` and ``E``; ``split`` is the PU share.

    Example:
        >>> x = np.random.default_rng(0).uniform(-1, 1, (100, 13))
        >>> s = simulate_3se(x, (x[:, 0] > 0), n_test=20)
        >>> (len(s.w_pu), len(s.w_sse))
        (40, 40)
    """
    if mechanism not in MECHANISMS:
        raise ValueError(f"`mechanism` must be one of {list(MECHANISMS)}, got {mechanism!r}.")
    x, y, e, th, C, pu, ss, te = _protocol(
        x, y, features, exposure_rate, split, n_test, seed, "SSE", mechanism
    )
    return ThreeSESplit(
        x_pu=x[pu], w_pu=e[pu] * y[pu], x_sse=x[ss], w_sse=e[ss] * y[ss], e_sse=e[ss],
        x_test=x[te], y_test=y[te], y_pu=y[pu], e_pu=e[pu], y_sse=y[ss],
        theta_pu=th[pu], theta_sse=th[ss], C=C, idx_pu=pu, idx_sse=ss, idx_test=te,
        mechanism=mechanism)
