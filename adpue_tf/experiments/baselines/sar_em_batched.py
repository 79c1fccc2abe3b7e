"""SAR-EM for many trials at once: :class:`SAREM`'s algorithm with exact batched M-steps.

:class:`~adpue_tf.experiments.baselines.SAREM` follows the reference step for
step and refits two scikit-learn liblinear logistic regressions per EM round,
one trial at a time. :class:`BatchedSAREM` runs every trial of a setting in
lockstep instead, with the same start, E-step, log-likelihood, stopping rule
(each trial its own) and final refit, but solves the M-steps itself:
:func:`fit_weighted_logistic` minimises liblinear's objective for all trials at
once in float64 to a tight tolerance. Its optimum is unique (the objective is
strictly convex), so the M-steps are the exact ones that liblinear, which stops
at ``tol=1e-4``, approximates; the two therefore agree closely but not to
rounding (:class:`BatchedSAREM` says how closely).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from adpue_tf.experiments.baselines.common import _check_features, _check_float
from adpue_tf.experiments.baselines.sar_em import sar_em_posterior
from adpue_tf.experiments.helpers import check_int, sigmoid
from adpue_tf.labels import check_finite

__all__ = ["BatchedSAREM", "fit_weighted_logistic"]


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


def _slopes(hist: np.ndarray) -> np.ndarray:
    """Least-squares slope over the equidistant axis 1 of ``(trials, rounds, rows)``."""
    k = hist.shape[1]
    t = (np.arange(k) - (k - 1) / 2)[:, None]
    return np.sum((hist - hist.mean(1, keepdims=True)) * t, 1) / np.sum(t ** 2)


def _expected_loglik(f: np.ndarray, e: np.ndarray, s: np.ndarray) -> np.ndarray:
    """:class:`SAREM`'s log-likelihood, one value per trial (row axis 1)."""
    f, e = np.clip(f, 1e-12, 1 - 1e-12), np.clip(e, 1e-12, 1 - 1e-12)
    post = sar_em_posterior(f, e, np.zeros_like(s))
    unl = post * np.log(f * (1 - e)) + (1 - post) * np.log1p(-f)
    return np.asarray(np.mean(s * np.log(f * e) + (1 - s) * unl, axis=1))


class BatchedSAREM:
    """SAR-EM (Bekker & Davis 2018) on many trials at once, in lockstep, with exact M-steps.

    The algorithm of :class:`~adpue_tf.experiments.baselines.SAREM` (see there:
    start, M-step, E-step, log-likelihood, stopping rule, final refit), run for
    every trial together: each round updates the trials that have not stopped;
    a trial that meets the stopping rule keeps its models from then on, and the
    loop ends when every trial has stopped or after ``max_iter`` rounds. The
    M-step fits minimise the same objective as SAREM's liblinear fits,
    ``C·Σ_i v_i·ℓ_i + ½(‖w‖² + b²)``, but to its optimum
    (:func:`fit_weighted_logistic`, gradient norm ``tol``), each started from
    the trial's previous solution extrapolated along its last change (the
    optimum does not depend on the start). liblinear stops at ``tol=1e-4``,
    so the fitted models differ from SAREM's by the tolerance of its fits,
    and a stopping round could move. Measured on SAREM's SAR data
    (``synthetic_pue(2000, 1, seed=s, dim=3)``, ``s = 0, 1, 2``, 20,000 fresh
    rows): the same rounds as SAREM in every trial, ``f`` within 4.8e-5 of
    SAREM's with the refit and 1.8e-4 without, ``e`` within 8.6e-5
    (``tests/experiments/test_sar_em_batched.py``). Table 1 on 20 trials
    (``α = 0.3``): the same mean accuracies as SAREM to 0.0002 or better on
    australian, w8a and mushrooms, at 6-20x less CPU time.

    Args:
        propensity_features, C, max_iter, window, slope_eps, ll_eps,
            refit_classifier: as :class:`SAREM`.
        tol: gradient norm to which each M-step fit is solved.
        direct_max_features: fits with at most this many coefficients (features
            + intercept) use exact Newton steps, larger ones Newton-CG.

    Attributes:
        coef_, intercept_: the classifier ``f``, ``(trials, features)`` and ``(trials,)``.
        propensity_coef_, propensity_intercept_: the propensity ``e``, on
            ``propensity_features``.
        n_iter_: EM rounds each trial ran, ``(trials,)``. converged_: whether
            the stopping rule ended it.
        log_likelihoods_: ``(trials, max_iter + 1)``, the start and each round;
            NaN after a trial stopped.

    Example:
        >>> from adpue_tf.synthetic import synthetic_pue
        >>> ds = [synthetic_pue(300, 1, seed=s, dim=3) for s in (0, 1)]
        >>> x = np.stack([d.x_pu for d in ds]); w = np.stack([d.w_pu for d in ds])
        >>> m = BatchedSAREM(propensity_features=[1, 2], max_iter=2).fit(x, w)
        >>> p = m.predict_proba(x)
        >>> p.shape, bool(((p >= 0) & (p <= 1)).all()), m.n_iter_.tolist()
        ((2, 300), True, [2, 2])
    """

    def __init__(self, *, propensity_features: Sequence[int] | None = None, C: float = 1.0,
                 max_iter: int = 500, window: int = 10, slope_eps: float = 1e-4,
                 ll_eps: float = 1e-4, refit_classifier: bool = True, tol: float = 1e-9,
                 direct_max_features: int = 64) -> None:
        self.propensity_features = (None if propensity_features is None
                                    else _check_features(propensity_features))
        self.C = _check_float("C", C, positive=True)
        self.max_iter = check_int("max_iter", max_iter, 0)
        self.window = check_int("window", window, 2)
        self.slope_eps = _check_float("slope_eps", slope_eps, positive=False)
        self.ll_eps = _check_float("ll_eps", ll_eps, positive=False)
        if not isinstance(refit_classifier, bool):
            raise TypeError(f"`refit_classifier` must be a bool, got {refit_classifier!r}.")
        self.refit_classifier = refit_classifier
        self.tol = _check_float("tol", tol, positive=True)
        self.direct_max_features = check_int("direct_max_features", direct_max_features, 1)
        self.n_features_: int | None = None

    def fit(self, x: Any, w: Any) -> BatchedSAREM:
        """Fit every trial on its one-sample PU data.

        Args:
            x: features ``(trials, n, ...)`` (flattened to ``(trials, n, features)``).
            w: observed labels ``s = W`` in {0, 1}, ``(trials, n)``; every trial
                needs both values.

        Returns:
            ``self``.

        Raises:
            ValueError, TypeError: on bad input, naming the argument.
        """
        with _one_blas_thread():
            return self._fit(x, w)

    def _fit(self, x: Any, w: Any) -> BatchedSAREM:
        x = self._check_x(x, None)
        s = np.asarray(check_finite("w", w), np.float64)
        if s.shape != x.shape[:2]:
            raise ValueError(f"`w` must have shape {x.shape[:2]} (trials, n), got {s.shape}.")
        if not np.all((s == 0) | (s == 1)):
            raise ValueError("`w` must hold only 0 and 1.")
        if (s.min(1) == s.max(1)).any():
            raise ValueError("`w` must hold both labelled (1) and unlabelled (0) rows in "
                             "every trial.")
        cols = list(_check_features(self.propensity_features or range(x.shape[2]), x.shape[2]))
        trials, window = len(x), self.window
        xa_all, xpa_all = _with_ones(x), _with_ones(x[:, :, cols])
        xa, xpa = (_System(v, self.C, self.tol, self.direct_max_features)
                   for v in (xa_all, xpa_all))
        c = s.mean(1, keepdims=True)
        th_f = xa.solve(s * (1 - c), (1 - s) * c, np.zeros(xa_all.shape[::2]))
        f = sigmoid(xa.design.mv(th_f))
        th_e = xpa.solve(s, (1 - s) * f, np.zeros(xpa_all.shape[::2]))
        e = sigmoid(xpa.design.mv(th_e))
        lls = np.full((trials, self.max_iter + 1), np.nan)
        lls[:, 0] = _expected_loglik(f, e, s)
        hist = np.zeros((trials, window, x.shape[1]))
        n_iter = np.zeros(trials, np.int64)
        converged = np.zeros(trials, bool)
        prev_e, prev_f = th_e.copy(), th_f.copy()
        idx = np.arange(trials)  # the trials still running
        held, ss = idx, s        # the trials xa, xpa and ss hold: a superset of idx
        for i in range(self.max_iter):
            if len(idx) == 0:
                break
            if len(idx) <= 0.75 * len(held):  # drop the stopped trials' rows, now and then
                keep = np.isin(held, idx)
                held, ss, xa, xpa = idx, s[idx], xa.take(keep), xpa.take(keep)
            run = np.isin(held, idx)
            post = sar_em_posterior(f[held], e[held], ss)
            # warm starts, extrapolated along the last round's change (the optimum
            # does not depend on the start; this one is usually nearer)
            start_e = 2 * th_e[held] - prev_e[held]
            start_f = 2 * th_f[held] - prev_f[held]
            prev_e[idx], prev_f[idx] = th_e[idx], th_f[idx]
            new_e = xpa.solve(ss * post, (1 - ss) * post, start_e, ~run)
            new_f = xa.solve(post, 1 - post, start_f, ~run)
            th_e[idx], th_f[idx] = new_e[run], new_f[run]
            f[idx] = sigmoid(xa.design.mv(new_f))[run]
            e[idx] = sigmoid(xpa.design.mv(new_e))[run]
            lls[idx, i + 1] = _expected_loglik(f[idx], e[idx], s[idx])
            hist[idx] = np.concatenate([hist[idx, 1:], e[idx, None]], axis=1)
            n_iter[idx] = i + 1
            if i > window:
                last = lls[idx, i + 2 - window:i + 2]
                gain = last.max(1) - last[:, 0]
                unl = 1 - s[idx]
                slope = np.sum(unl * np.abs(_slopes(hist[idx])), 1) / unl.sum(1)
                stop = (slope < self.slope_eps) & (gain < self.ll_eps)
                converged[idx[stop]] = True
                idx = idx[~stop]
        if self.refit_classifier:
            th_f = _System(xa_all, self.C, self.tol, self.direct_max_features).solve(
                s / e, 1 - s, th_f)
        self.coef_, self.intercept_ = th_f[:, :-1], th_f[:, -1]
        self.propensity_coef_, self.propensity_intercept_ = th_e[:, :-1], th_e[:, -1]
        self.n_iter_, self.converged_, self.log_likelihoods_ = n_iter, converged, lls
        self._cols = cols
        self.n_features_ = x.shape[2]
        return self

    def _check_x(self, x: Any, dim: int | None) -> np.ndarray:
        arr = check_finite("x", x)
        if arr.ndim < 3 or 0 in arr.shape:
            raise ValueError(f"`x` must be non-empty (trials, n, features...), got {arr.shape}.")
        arr = arr.reshape(arr.shape[0], arr.shape[1], -1)
        if dim is not None and arr.shape[2] != dim:
            raise ValueError(f"`x` has {arr.shape[2]} (flattened) features, expected {dim}.")
        # float32 first, as SAREM (and the rest of the package) reads features
        return arr.astype(np.float32).astype(np.float64)

    def _x(self, x: Any) -> np.ndarray:
        if self.n_features_ is None:
            raise RuntimeError("This BatchedSAREM is not fitted; call fit() first.")
        arr = self._check_x(x, self.n_features_)
        if len(arr) != len(self.coef_):
            raise ValueError(f"`x` has {len(arr)} trials, the fit {len(self.coef_)}.")
        return arr

    def predict_proba(self, x: Any) -> np.ndarray:
        """``f(x) = p̂(y=1|x)`` of each trial on its rows: ``x`` ``(trials, m, ...)`` -> ``(trials, m)``."""
        x = self._x(x)
        return sigmoid(_Dense(x).mv(self.coef_) + self.intercept_[:, None])

    def predict_propensity(self, x: Any) -> np.ndarray:
        """``e(x) = p̂(s=1|y=1, x)`` of each trial, ``(trials, m)``."""
        x = self._x(x)[:, :, self._cols]
        return sigmoid(_Dense(x).mv(self.propensity_coef_) + self.propensity_intercept_[:, None])

    def predict(self, x: Any) -> np.ndarray:
        """Hard labels ``predict_proba(x) > 0.5`` as 0/1 integers, ``(trials, m)``."""
        return (self.predict_proba(x) > 0.5).astype(np.int64)
