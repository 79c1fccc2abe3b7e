"""Weighted L2-regularised logistic regressions for many trials at once (liblinear's objective).

:func:`fit_weighted_logistic` minimises ``C·Σ_i (pos_i·ℓ(z_i) + neg_i·ℓ(-z_i)) +
½(‖w‖² + b²)`` for every trial in float64 to a tight tolerance: exact Newton
for few features, Newton-CG (sparse when few entries are non-zero) for many.
It is the M-step of :class:`~adpue_tf.experiments.baselines.BatchedSAREM`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import numpy as np

from adpue_tf.experiments.baselines.common import _check_float
from adpue_tf.experiments.helpers import check_int
from adpue_tf.labels import check_finite

__all__ = ["SPARSE_DENSITY", "fit_weighted_logistic"]

def _softplus(z: np.ndarray) -> np.ndarray:
    return np.logaddexp(0.0, z)


class _Dense:
    """Every trial's design matrix ``(T, n, D)``, dense: the products the solver needs."""

    def __init__(self, x: np.ndarray) -> None:
        self.x = x
        self._sq: np.ndarray | None = None

    def mv(self, v: np.ndarray) -> np.ndarray:
        """``x[t] @ v[t]`` for every trial: ``(T, D) -> (T, n)``."""
        return np.matmul(self.x, v[:, :, None])[:, :, 0]

    def rmv(self, r: np.ndarray) -> np.ndarray:
        """``x[t].T @ r[t]`` for every trial: ``(T, n) -> (T, D)``."""
        return np.matmul(r[:, None, :], self.x)[:, 0, :]

    def sq_rmv(self, h: np.ndarray) -> np.ndarray:
        """``(x[t]**2).T @ h[t]``: the diagonal of ``x[t].T diag(h[t]) x[t]``."""
        if self._sq is None:
            self._sq = self.x * self.x
        return np.matmul(h[:, None, :], self._sq)[:, 0, :]

    def gram(self, h: np.ndarray) -> np.ndarray:
        """``x[t].T diag(h[t]) x[t]``, ``(T, D, D)``."""
        return np.matmul(np.swapaxes(self.x * h[:, :, None], 1, 2), self.x)


class _Sparse(_Dense):
    """The same products through one block-diagonal sparse matrix (SciPy): for sparse data."""

    def __init__(self, x: np.ndarray) -> None:
        from scipy import sparse

        super().__init__(x)
        t, i, j = np.nonzero(x)
        (n_t, n, d) = x.shape
        vals = x[t, i, j]
        a = sparse.csr_matrix((vals, (t * n + i, t * d + j)), shape=(n_t * n, n_t * d))
        self.a, self.at = a, a.T.tocsr()
        self.at2 = self.at.multiply(self.at).tocsr()

    def mv(self, v: np.ndarray) -> np.ndarray:
        return np.asarray(self.a @ v.ravel()).reshape(self.x.shape[:2])

    def rmv(self, r: np.ndarray) -> np.ndarray:
        return np.asarray(self.at @ r.ravel()).reshape(self.x.shape[::2])

    def sq_rmv(self, h: np.ndarray) -> np.ndarray:
        return np.asarray(self.at2 @ h.ravel()).reshape(self.x.shape[::2])


#: Newton-CG runs on a sparse matrix when at most this share of the entries are non-zero.
SPARSE_DENSITY = 0.25


def _design(x: np.ndarray, direct: bool) -> _Dense:
    """``x`` as the products Newton needs: sparse for Newton-CG on sparse data, else dense."""
    if not direct and np.count_nonzero(x) <= SPARSE_DENSITY * x.size:
        try:
            return _Sparse(x)
        except ImportError:  # SciPy (with scikit-learn, the bench extra) not installed
            pass
    return _Dense(x)


def _objective(z: np.ndarray, theta: np.ndarray, pos: np.ndarray, neg: np.ndarray,
               C: float, sp: np.ndarray | None = None) -> np.ndarray:
    """``C·Σ_i [pos_i·softplus(-z_i) + neg_i·softplus(z_i)] + ½‖θ‖²`` per trial.

    ``softplus(z) = softplus(-z) + z``; ``sp``: ``softplus(-z)`` if known.
    """
    sp = _softplus(-z) if sp is None else sp
    return C * np.sum((pos + neg) * sp + neg * z, 1) + 0.5 * np.sum(theta ** 2, 1)


class _Lagged:
    """Exact Hessian inverses from earlier Newton steps, kept as CG's preconditioner.

    The M-step Hessians change little from one EM round to the next, so an
    inverse computed once serves many rounds; a trial's is recomputed at its
    next Newton step when its last CG solve needed more than ``REFRESH_AFTER``
    iterations.
    """

    REFRESH_AFTER = 4

    def __init__(self, trials: int, dim: int) -> None:
        self.inv = np.zeros((trials, dim, dim))
        self.ok = np.zeros(trials, bool)

    def refresh(self, x: _Dense, h: np.ndarray, C: float, which: np.ndarray) -> None:
        i = np.flatnonzero(which & ~self.ok)
        if len(i):
            hess = C * _Dense(x.x[i]).gram(h[i]) + np.eye(x.x.shape[2])
            self.inv[i] = np.linalg.inv(hess)
            self.ok[i] = True

    def __call__(self, r: np.ndarray) -> np.ndarray:
        return np.matmul(self.inv, r[:, :, None])[:, :, 0]

    def take(self, idx: np.ndarray) -> _Lagged:
        out = _Lagged(0, 0)
        out.inv, out.ok = self.inv[idx], self.ok[idx]
        return out


def _cg(x: _Dense, h: np.ndarray, C: float, g: np.ndarray, rtol: np.ndarray, max_iter: int,
        precond: _Lagged | None) -> tuple[np.ndarray, np.ndarray]:
    """Preconditioned CG on ``H p = -g``, ``H = C·xᵀ diag(h) x + I``, matrix-free.

    The preconditioner is ``precond`` or else Jacobi (``diag(H)``). Each trial
    stops when its residual norm is at most ``rtol``. Returns the solutions and
    each trial's iterations.
    """
    if precond is None:
        diag = C * x.sq_rmv(h) + 1.0

        def apply(r: np.ndarray) -> np.ndarray:
            return r / diag
    else:
        apply = precond
    p_sol = np.zeros_like(g)
    r = -g
    zr = apply(r)
    d = zr.copy()
    rz = np.sum(r * zr, 1)
    iters = np.zeros(len(g), np.int64)
    for _ in range(max_iter):
        run = np.linalg.norm(r, axis=1) > rtol
        if not run.any():
            break
        iters += run
        hd = C * x.rmv(h * x.mv(d)) + d
        alpha = np.where(run, rz / np.where(run, np.sum(d * hd, 1), 1.0), 0.0)
        p_sol += alpha[:, None] * d
        r -= alpha[:, None] * hd
        zr = apply(r)
        rz_new = np.sum(r * zr, 1)
        beta = np.where(run & (rz > 0), rz_new / np.where(rz > 0, rz, 1.0), 0.0)
        d = zr + beta[:, None] * d
        rz = np.where(run, rz_new, rz)
    return p_sol, iters


def _newton(x: _Dense, pos: np.ndarray, neg: np.ndarray, C: float, theta: np.ndarray,
            tol: float, max_iter: int, direct: bool, skip: np.ndarray | None = None,
            precond: _Lagged | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Batched damped Newton on :func:`_objective`; ``x`` already holds the constant column.

    Exact Newton steps if ``direct``, else Newton-CG (with ``precond`` as the
    preconditioner when given, refreshed as it says). Returns the solutions
    and each trial's final gradient norm. A trial stops when its gradient norm
    is at most ``tol``, or when rounding leaves no step that lowers the
    objective; trials marked in ``skip`` keep their start.
    """
    theta = theta.copy()
    tot = pos + neg
    slack = 1e-13  # relative rounding allowance of the objective in the line search
    stalled = np.zeros(len(theta), bool) if skip is None else skip.copy()
    gnorm = np.full(len(theta), np.inf)
    for it in range(max_iter + 1):
        z = x.mv(theta)
        sp = _softplus(-z)
        sig = np.exp(-sp)
        g = C * x.rmv(tot * sig - pos) + theta
        gnorm = np.linalg.norm(g, axis=1)
        active = (gnorm > tol) & ~stalled
        if not active.any() or it == max_iter:
            break
        h = tot * sig * (1.0 - sig)
        if direct:
            hess = C * x.gram(h) + np.eye(theta.shape[1])
            step = np.linalg.solve(hess, -g[:, :, None])[:, :, 0]
        else:
            # inexact Newton: a tight constant forcing term, and no tighter than tol needs
            rtol = np.maximum(1e-3 * gnorm, 0.5 * tol)
            if precond is not None:
                precond.refresh(x, h, C, active)
            step, iters = _cg(x, h, C, g, rtol, 2 * theta.shape[1], precond)
            if precond is not None:
                precond.ok &= iters <= precond.REFRESH_AFTER
        step[~active] = 0.0
        zs = x.mv(step)
        f0 = _objective(z, theta, pos, neg, C, sp)
        slope = np.sum(g * step, 1)
        alpha = np.ones(len(theta))
        ok = ~active
        for _k in range(60):
            cand = theta + alpha[:, None] * step
            f1 = _objective(z + alpha[:, None] * zs, cand, pos, neg, C)
            ok = ok | (f1 <= f0 + 1e-4 * alpha * slope + slack * np.abs(f0))
            if ok.all():
                break
            alpha = np.where(ok, alpha, alpha / 2)
        stalled |= active & ~ok
        theta = np.where((active & ok)[:, None], theta + alpha[:, None] * step, theta)
    return theta, gnorm


class _System:
    """One model's rows for every trial, and how Newton solves its fits.

    Exact Newton when ``features + 1 <= direct_max``; otherwise Newton-CG, on
    a sparse matrix for sparse data, preconditioned by lagged exact Hessians
    (:class:`_Lagged`) when applying one costs about a Hessian-vector product
    or less (``D² <= 2·nnz`` per trial), else by Jacobi.
    """

    #: lagged preconditioning when ``D² <= LAGGED_COST · nnz`` per trial
    LAGGED_COST = 2.0

    def __init__(self, x: np.ndarray, C: float, tol: float, direct_max: int) -> None:
        trials, _, dim = x.shape
        self.x, self.C, self.tol, self.direct_max = x, C, tol, direct_max
        self.direct = dim <= direct_max
        self.design = _design(x, self.direct)
        cheap = dim * dim <= self.LAGGED_COST * np.count_nonzero(x) / trials
        self.precond = None if self.direct or not cheap else _Lagged(trials, dim)

    def take(self, idx: np.ndarray) -> _System:
        """The same for the trials ``idx`` (keeping their preconditioners)."""
        out = _System(self.x[idx], self.C, self.tol, self.direct_max)
        if self.precond is not None:
            out.precond = self.precond.take(idx)
        return out

    def solve(self, pos: np.ndarray, neg: np.ndarray, theta: np.ndarray,
              skip: np.ndarray | None = None, max_iter: int = 100) -> np.ndarray:
        """The fits' optima (``theta``: the start; ``skip``: trials left at their start)."""
        return _newton(self.design, pos, neg, self.C, theta, self.tol, max_iter, self.direct,
                       skip, self.precond)[0]


@contextlib.contextmanager
def _one_blas_thread() -> Iterator[None]:
    """BLAS on one thread (threadpoolctl, installed with scikit-learn), if available.

    The solver's BLAS calls are small (batched ``D×D`` matrices, Gram
    matrices of a few hundred rows); threading them gains nothing, and on a
    busy machine spinning BLAS threads cost several times the work (measured
    on a loaded 2-core machine: 14.3 s against 2.5 s of CPU for SAR-EM on one
    mushrooms setting of 20 trials).
    """
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        yield
        return
    with threadpool_limits(1, user_api="blas"):
        yield


def _with_ones(x: np.ndarray) -> np.ndarray:
    """``x`` with a constant-1 last column (liblinear's intercept, ``intercept_scaling=1``)."""
    out = np.empty(x.shape[:2] + (x.shape[2] + 1,), np.float64)
    out[:, :, :-1] = x
    out[:, :, -1] = 1.0
    return out


def fit_weighted_logistic(x: Any, pos: Any, neg: Any, *, C: float = 1.0,
                          start: tuple[np.ndarray, np.ndarray] | None = None,
                          tol: float = 1e-9, max_iter: int = 100,
                          direct_max_features: int = 64) -> tuple[np.ndarray, np.ndarray]:
    """L2-regularised weighted logistic regressions, every trial at once, solved exactly.

    For each trial minimises liblinear's objective (scikit-learn's
    ``LogisticRegression(solver="liblinear", C=C)`` with ``fit_intercept=True``,
    ``intercept_scaling=1``: the intercept is penalised)
    ``C·Σ_i [pos_i·ℓ(1, z_i) + neg_i·ℓ(0, z_i)] + ½(‖w‖² + b²)``, ``z = x·w + b``,
    ``ℓ`` the logistic loss: row ``i`` enters as label 1 with weight ``pos_i``
    and as label 0 with weight ``neg_i`` (so a fit on rows doubled, as SAR-EM's
    classifier, is one fit here). Strictly convex, so its optimum is unique;
    damped Newton (Armijo backtracking) reaches it to gradient norm ``tol``:
    exact Newton steps (a batched linear solve) when ``features + 1 <=
    direct_max_features``, otherwise inexact Newton-CG steps (matrix-free
    Hessian-vector products, through a SciPy sparse matrix when at most a
    quarter of ``x`` is non-zero; preconditioned by an exact Hessian inverse
    kept from an earlier step where that is cheap, by Jacobi otherwise). BLAS
    runs on one thread meanwhile (threadpoolctl, when installed).

    Args:
        x: features ``(trials, rows, features)``.
        pos, neg: non-negative row weights of label 1 and label 0, ``(trials, rows)``.
        C: inverse regularisation strength (> 0).
        start: ``(w, b)`` to start from (``(trials, features)``, ``(trials,)``); zero if None.
        tol: gradient norm at which a trial stops (> 0).
        max_iter: maximum Newton steps.
        direct_max_features: the largest ``features + 1`` solved by exact Newton.

    Returns:
        ``(w, b)``: weights ``(trials, features)`` and intercepts ``(trials,)``.

    Example:
        >>> x = np.array([[[-1.0], [1.0], [2.0]]])
        >>> w, b = fit_weighted_logistic(x, [[0.0, 1.0, 1.0]], [[1.0, 0.0, 0.5]])
        >>> w.shape, b.shape, bool(w[0, 0] > 0)
        ((1, 1), (1,), True)
    """
    xa, p, q = _check_weighted(x, pos, neg)
    C = _check_float("C", C, positive=True)
    tol = _check_float("tol", tol, positive=True)
    max_iter = check_int("max_iter", max_iter, 0)
    direct_max_features = check_int("direct_max_features", direct_max_features, 1)
    if start is None:
        theta0 = np.zeros(xa.shape[::2])
    else:
        w0, b0 = (np.asarray(check_finite("start", v), np.float64) for v in start)
        if w0.shape != (len(xa), xa.shape[2] - 1) or b0.shape != (len(xa),):
            raise ValueError(f"`start` must be (w, b) of shapes {(len(xa), xa.shape[2] - 1)} "
                             f"and {(len(xa),)}, got {w0.shape} and {b0.shape}.")
        theta0 = np.concatenate([w0, b0[:, None]], 1)
    with _one_blas_thread():
        theta = _System(xa, C, tol, direct_max_features).solve(p, q, theta0, max_iter=max_iter)
    return theta[:, :-1], theta[:, -1]


def _check_weighted(x: Any, pos: Any, neg: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    arr = np.asarray(check_finite("x", x), np.float64)
    if arr.ndim != 3 or 0 in arr.shape:
        raise ValueError(f"`x` must be non-empty (trials, rows, features), got {arr.shape}.")
    out = []
    for name, v in (("pos", pos), ("neg", neg)):
        a = np.asarray(check_finite(name, v), np.float64)
        if a.shape != arr.shape[:2] or (a < 0).any():
            raise ValueError(f"`{name}` must be non-negative of shape {arr.shape[:2]}, "
                             f"got shape {a.shape}.")
        out.append(a)
    return _with_ones(arr), out[0], out[1]
