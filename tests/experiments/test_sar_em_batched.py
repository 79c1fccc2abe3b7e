"""Tests for BatchedSAREM and its M-step solver fit_weighted_logistic.

BatchedSAREM is SAREM's algorithm with exact M-steps, many trials at once; it
is checked against SAREM (liblinear, which stops at tol=1e-4) on the SAR data
of ``test_baselines.py``, against itself one trial at a time (the lockstep and
the per-trial stopping must not couple trials), and its solver against the
objective's gradient, scipy.optimize and liblinear at tol=1e-10.

Measured on the development machine (``test_matches_sarem``, 2000 rows, seeds
0-2, 20,000 fresh rows): the same rounds as SAREM in every trial; max |Δf|
3.7e-5 with the refit and 1.8e-4 without, max |Δe| 8.6e-5.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from scipy.optimize import minimize
from sklearn.linear_model import LogisticRegression
from threadpoolctl import threadpool_limits

from adpue_tf import synthetic
from adpue_tf.experiments.baselines import (
    SAREM,
    BatchedSAREM,
    fit_weighted_logistic,
    weighted_logistic,
)

SAR: dict[str, Any] = {"dim": 3, "y_weights": (2.0, -1.0, 0.0), "e_weights": (0.0, -1.5, 2.0)}
EVAL_SAR = synthetic.make_synthetic(20_000, seed=123, **SAR)
TOL_F = 5e-4  # max |Δf| to SAREM allowed (measured at most 1.8e-4)


@pytest.fixture(autouse=True, scope="module")
def _one_blas_thread():
    """The references' small BLAS calls on one thread: many threads thrash on a busy machine."""
    with threadpool_limits(1, user_api="blas"):
        yield


def _stack(n, seeds):
    ds = [synthetic.synthetic_pue(n, 1, seed=s, **SAR) for s in seeds]
    return np.stack([d.x_pu for d in ds]), np.stack([d.w_pu for d in ds])


def _tiled(x, trials):
    return np.broadcast_to(x, (trials,) + x.shape)


# ------------------------------------------------------------- against SAREM


@pytest.mark.parametrize("refit", [True, False])
def test_matches_sarem(refit):
    seeds = (0, 1, 2)
    x, s = _stack(2000, seeds)
    b = BatchedSAREM(propensity_features=[1, 2], refit_classifier=refit).fit(x, s)
    pb = b.predict_proba(_tiled(EVAL_SAR.x, len(seeds)))
    eb = b.predict_propensity(_tiled(EVAL_SAR.x, len(seeds)))
    for t in range(len(seeds)):
        m = SAREM(propensity_features=[1, 2], refit_classifier=refit).fit(x[t], s[t])
        df = np.abs(m.predict_proba(EVAL_SAR.x) - pb[t]).max()
        de = np.abs(m.predict_propensity(EVAL_SAR.x) - eb[t]).max()
        print(f"\nrefit={refit} seed {seeds[t]}: rounds {b.n_iter_[t]} (SAREM {m.n_iter_}), "
              f"max |Δf| {df:.1e}, max |Δe| {de:.1e}")
        assert abs(int(b.n_iter_[t]) - m.n_iter_) <= 2
        assert b.converged_[t] == m.converged_
        assert df <= TOL_F and de <= TOL_F
        n = m.n_iter_ + 1
        np.testing.assert_allclose(b.log_likelihoods_[t, :n], m.log_likelihoods_[:n],
                                   atol=1e-4)
        assert np.isnan(b.log_likelihoods_[t, b.n_iter_[t] + 1:]).all()


def test_trials_do_not_couple():
    """Each trial of a stack ends as it does alone: its own rounds, its own stop."""
    x, s = _stack(300, range(5))
    kw: dict[str, Any] = {"propensity_features": [1, 2], "window": 4, "slope_eps": 1e-3}
    b = BatchedSAREM(**kw).fit(x, s)
    assert len(set(b.n_iter_.tolist())) > 1  # the trials stop at different rounds
    for t in range(len(x)):
        one = BatchedSAREM(**kw).fit(x[t:t + 1], s[t:t + 1])
        assert one.n_iter_[0] == b.n_iter_[t] and one.converged_[0] == b.converged_[t]
        np.testing.assert_allclose(one.coef_[0], b.coef_[t], atol=1e-7)
        np.testing.assert_allclose(one.propensity_coef_[0], b.propensity_coef_[t], atol=1e-7)


def test_round_limit_and_start():
    x, s = _stack(300, (0, 1))
    b = BatchedSAREM(propensity_features=[1, 2], max_iter=3).fit(x, s)
    assert b.n_iter_.tolist() == [3, 3] and not b.converged_.any()
    assert b.log_likelihoods_.shape == (2, 4) and np.isfinite(b.log_likelihoods_).all()
    # max_iter=0 without the refit is the start: the class-balanced fit of f on s
    b0 = BatchedSAREM(propensity_features=[1, 2], max_iter=0, refit_classifier=False).fit(x, s)
    for t in range(2):
        m = SAREM(propensity_features=[1, 2], max_iter=0, refit_classifier=False).fit(x[t], s[t])
        np.testing.assert_allclose(b0.predict_proba(x)[t], m.predict_proba(x[t]), atol=1e-4)


def test_bad_input():
    x, s = _stack(50, (0, 1))
    with pytest.raises(ValueError, match="`w`"):
        BatchedSAREM().fit(x, s[:, :10])
    with pytest.raises(ValueError, match="both labelled"):
        BatchedSAREM().fit(x, np.zeros_like(s))
    with pytest.raises(ValueError, match="`x`"):
        BatchedSAREM().fit(x[0], s[0])
    with pytest.raises(ValueError, match="`tol`"):
        BatchedSAREM(tol=0.0)
    with pytest.raises(RuntimeError, match="not fitted"):
        BatchedSAREM().predict_proba(x)
    m = BatchedSAREM(propensity_features=[1, 2], max_iter=1).fit(x, s)
    with pytest.raises(ValueError, match="trials"):
        m.predict_proba(x[:1])


# ------------------------------------------------------------ the M-step solver


def _problem(trials, n, d, density, seed):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(trials, n, d)) * (rng.random((trials, n, d)) < density)
    pos, neg = rng.random((trials, n)) * 2, rng.random((trials, n))
    neg[:, : n // 4] = 0.0  # rows of one label only, as SAR-EM's propensity fits have
    return x, pos, neg


def _grad(x, pos, neg, w, b, C):
    """Gradient of C·Σ[pos·ℓ(1,z) + neg·ℓ(0,z)] + ½(‖w‖² + b²), computed here afresh."""
    xa = np.concatenate([x, np.ones(x.shape[:1] + (1,))], 1)
    th = np.append(w, b)
    sig = 1 / (1 + np.exp(-(xa @ th)))
    return C * xa.T @ ((pos + neg) * sig - pos) + th


CASES = {  # name: (trials, n, features, density, direct_max_features)
    "direct": (3, 200, 5, 1.0, 64),
    "cg-lagged": (3, 200, 5, 1.0, 1),
    "cg-sparse-jacobi": (3, 200, 150, 0.05, 64),
}


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("C", [1.0, 30.0])
def test_solver_reaches_the_optimum(case, C):
    trials, n, d, density, dmax = CASES[case]
    x, pos, neg = _problem(trials, n, d, density, seed=len(case))
    w, b = fit_weighted_logistic(x, pos, neg, C=C, direct_max_features=dmax)
    for t in range(trials):
        g = np.linalg.norm(_grad(x[t], pos[t], neg[t], w[t], b[t], C))
        assert g <= 1e-8, (case, t, g)

        def obj(th, t=t):
            z = x[t] @ th[:-1] + th[-1]
            loss = pos[t] * np.logaddexp(0, -z) + neg[t] * np.logaddexp(0, z)
            return C * loss.sum() + 0.5 * th @ th

        def jac(th, t=t):
            return _grad(x[t], pos[t], neg[t], th[:-1], th[-1], C)

        def hess(th, t=t):
            xa = np.concatenate([x[t], np.ones((n, 1))], 1)
            sig = 1 / (1 + np.exp(-(xa @ th)))
            return C * (xa.T * ((pos[t] + neg[t]) * sig * (1 - sig))) @ xa + np.eye(d + 1)

        ref = minimize(obj, np.zeros(d + 1), jac=jac, hess=hess, method="trust-exact",
                       options={"gtol": 1e-8})
        assert np.linalg.norm(jac(ref.x)) <= 1e-6  # the reference is at the optimum too
        ours = np.append(w[t], b[t])
        assert obj(ours) <= ref.fun + 1e-9 * abs(ref.fun)
        np.testing.assert_allclose(ours, ref.x, atol=1e-5)
        # liblinear on the rows doubled, with the same objective, to tol=1e-10
        keep = np.concatenate([pos[t], neg[t]]) > 0
        lib = LogisticRegression(C=C, solver="liblinear", tol=1e-10, max_iter=100_000).fit(
            np.concatenate([x[t], x[t]])[keep], np.repeat([1, 0], n)[keep],
            sample_weight=np.concatenate([pos[t], neg[t]])[keep])
        np.testing.assert_allclose(w[t], lib.coef_[0], atol=1e-5)
        np.testing.assert_allclose(b[t], lib.intercept_[0], atol=1e-5)


def test_solver_paths_agree_and_warm_start_is_harmless():
    x, pos, neg = _problem(4, 150, 30, 0.2, seed=7)
    direct = fit_weighted_logistic(x, pos, neg, direct_max_features=64)
    cg = fit_weighted_logistic(x, pos, neg, direct_max_features=1)
    start = (np.full((4, 30), 3.0), np.full(4, -5.0))
    warm = fit_weighted_logistic(x, pos, neg, start=start, direct_max_features=1)
    for other in (cg, warm):
        np.testing.assert_allclose(other[0], direct[0], atol=1e-9)
        np.testing.assert_allclose(other[1], direct[1], atol=1e-9)


def test_solver_uses_the_sparse_path_on_sparse_data():
    x, _, _ = _problem(2, 100, 100, 0.05, seed=0)
    assert isinstance(weighted_logistic._design(x, direct=False), weighted_logistic._Sparse)
    assert not isinstance(weighted_logistic._design(x, direct=True), weighted_logistic._Sparse)


def test_solver_bad_input():
    x, pos, neg = _problem(2, 10, 3, 1.0, seed=0)
    with pytest.raises(ValueError, match="`neg`"):
        fit_weighted_logistic(x, pos, -neg)
    with pytest.raises(ValueError, match="`pos`"):
        fit_weighted_logistic(x, pos[:, :5], neg)
    with pytest.raises(ValueError, match="`start`"):
        fit_weighted_logistic(x, pos, neg, start=(np.zeros((2, 2)), np.zeros(2)))
    with pytest.raises(ValueError, match="`C`"):
        fit_weighted_logistic(x, pos, neg, C=0.0)


# ------------------------------------------------------------------ Table 1


def test_table1_em_column_is_sarem_batched():
    """Table 1's EM column: every trial at once, scores ``f - 0.5`` as SAREM's per trial."""
    from adpue_tf.experiments import simulate, table1
    from adpue_tf.labels import Source

    rng = np.random.default_rng(0)
    x = rng.normal(size=(800, 14))
    y = (x[:, 0] - x[:, 3] + rng.normal(size=800) > 0).astype(float)
    cfg = table1.LinearBenchConfig(trials=3, em_max_iter=40, recommended=False)
    st = table1._stack(simulate.simulate_pue, x, y, cfg, 0.5)
    scores = table1._sar_em(st, cfg)(st.x_test)
    assert scores.shape == st.x_test.shape[:2]
    for t in range(cfg.trials):
        pu = table1._parts(st, t, Source.PU)
        m = SAREM(propensity_features=table1.PROPENSITY_FEATURES, C=cfg.em_C,
                  max_iter=cfg.em_max_iter, refit_classifier=cfg.em_refit).fit(
            st.x[t, pu], st.y[t, pu, 0])
        diff = np.abs(scores[t] - (m.predict_proba(st.x_test[t]) - 0.5)).max()
        print(f"\ntrial {t}: rounds {m.n_iter_}, max |Δscore| {diff:.1e}")
        assert diff <= TOL_F
