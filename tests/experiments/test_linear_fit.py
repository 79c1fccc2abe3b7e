"""fit_linear: batching trials gives each trial the fit it would get alone."""

from __future__ import annotations

import numpy as np
import pytest

from adpue_tf import risks, synthetic
from adpue_tf.experiments import linear_fit
from adpue_tf.labels import pack_e, pack_pu


def _stack(trials=2, n=300):
    xs, ys = [], []
    for t in range(trials):
        s = synthetic.synthetic_pue(n, n, seed=t)
        xs.append(np.concatenate([s.x_pu, s.x_e]))
        ys.append(np.concatenate([pack_pu(s.w_pu), pack_e(s.e_e)]))
    return np.stack(xs).astype(np.float32), np.stack(ys)


@pytest.mark.parametrize("risk,opts", [(risks.nnpue, {}), (risks.nnpu, {"prior": 0.4})])
def test_batched_equals_one_trial_at_a_time(risk, opts):
    x, y = _stack()
    together = linear_fit.fit_linear(x, y, risk, steps=40, **opts)
    for t in range(len(x)):
        alone = linear_fit.fit_linear(x[t:t + 1], y[t:t + 1], risk, steps=40, **opts)
        np.testing.assert_allclose(together.weights[t], alone.weights[0], rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(together.bias[t], alone.bias[0], rtol=1e-4, atol=1e-5)
    assert not np.allclose(together.weights[0], together.weights[1])


def test_sample_weight_zero_rows_are_ignored():
    x, y = _stack(trials=2)
    sw = np.ones(x.shape[:2], np.float32)
    sw[:, ::2] = 0.0
    weighted = linear_fit.fit_linear(x, y, risks.logit, sample_weight=sw, steps=40)
    dropped = linear_fit.fit_linear(x[:, 1::2], y[:, 1::2], risks.logit, steps=40)
    np.testing.assert_allclose(weighted.weights, dropped.weights, rtol=1e-4, atol=1e-5)


def test_warm_start_continues_the_trajectory_of_the_parameters():
    x, y = _stack(trials=2)
    first = linear_fit.fit_linear(x, y, risks.logit, steps=30)
    more = linear_fit.fit_linear(x, y, risks.logit, steps=30, init=first)
    assert np.linalg.norm(more.weights - first.weights) > 0
    np.testing.assert_allclose(more.logits(x)[0], x[0] @ more.weights[0] + more.bias[0], rtol=1e-5)


@pytest.mark.parametrize("kwargs,match", [
    ({"x": np.zeros((2, 3)), "y": np.zeros((2, 3, 3))}, "x"),
    ({"x": np.zeros((2, 3, 1)), "y": np.zeros((2, 4, 3))}, "same trials"),
    ({"steps": 0}, "steps"),
    ({"sample_weight": np.ones((2, 2))}, "sample_weight"),
    ({"x": np.full((2, 3, 1), np.nan)}, "NaN"),
    ({"l2": -1.0}, "`l2` must be >= 0"),
    ({"l2": float("nan")}, "`l2` must be >= 0"),
    ({"tol": -1e-5}, "`tol` must be a finite number >= 0"),
    ({"tol": float("inf")}, "`tol` must be a finite number >= 0"),
])
def test_bad_input(kwargs, match):
    args = {"x": np.zeros((2, 3, 1)), "y": np.zeros((2, 3, 3)), "steps": 1}
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        linear_fit.fit_linear(args.pop("x"), args.pop("y"), risks.logit, **args)


@pytest.mark.slow
def test_models_sharing_features_equal_separate_fits():
    """Several models per trial (own labels, weights, L2 and risk) follow their separate fits."""
    x, y = _stack(trials=2, n=60)
    sw = np.ones(x.shape[:2], np.float32)
    sw[:, ::3] = 0.0
    specs = [(risks.logit, {}), (risks.nnpu, {"prior": 0.4}), (risks.nnpu, {"prior": 0.4})]
    l2 = [0.0, 0.1, 0.01]
    weights = np.stack([np.ones_like(sw), sw, np.ones_like(sw)], axis=1)
    together = linear_fit.fit_linear_models(x, np.repeat(y[:, None], 3, axis=1), specs,
                                            sample_weight=weights, l2=l2, steps=30)
    assert together.weights.shape == (2, 3, x.shape[2]) and together.logits(x).shape == (2, 3, 120)
    for k, (risk, opts) in enumerate(specs):
        alone = linear_fit.fit_linear(x, y, risk, sample_weight=weights[:, k], l2=l2[k], steps=30,
                                      **opts)
        np.testing.assert_allclose(together.weights[:, k], alone.weights, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(together.bias[:, k], alone.bias, rtol=1e-4, atol=1e-5)
    assert not np.allclose(together.weights[:, 1], together.weights[:, 2])


@pytest.mark.parametrize("kwargs,match", [
    ({"y": np.zeros((2, 3, 3))}, "models"),
    ({"l2": [0.1, 0.2, 0.3]}, "one per model"),
    ({"risk": [(risks.logit, {})]}, "one .risk, options. pair per model"),
])
def test_models_bad_input(kwargs, match):
    args = {"x": np.zeros((2, 3, 1)), "y": np.zeros((2, 2, 3, 3)), "risk": risks.logit, "steps": 1}
    with pytest.raises(ValueError, match=match):
        linear_fit.fit_linear_models(**{**args, **kwargs})


def _adpue_without_form(*args, **kwargs):
    """risks.adpue, wrapped so that it has no linear form: the risk under vectorized_map."""
    return risks.adpue(*args, **kwargs)


@pytest.mark.parametrize("sparse", [False, pytest.param(True, marks=pytest.mark.slow)],
                         ids=["dense-xla", "sparse"])
def test_the_linear_form_path_gives_the_fit_of_the_risk_itself(sparse):
    """Every step from coefficients (dense: one XLA program) = the risk evaluated per model."""
    x, y = _stack(trials=2, n=120)
    x = np.where(np.abs(x) > 1.0, x, 0.0).astype(np.float32)  # some zeros, for the sparse path
    rng = np.random.default_rng(0)
    y4 = np.concatenate([y, rng.uniform(0.1, 0.9, (*y.shape[:2], 1)).astype(np.float32)], -1)
    specs = [(risks.adpue, {"gamma": 1.0}), (risks.logit, {}), (risks.nnpu, {"prior": 0.4})]
    ys = np.repeat(y4[:, None], len(specs), axis=1)
    fast = linear_fit.fit_linear_models(x, ys, specs, steps=60, l2=0.01, sparse=sparse)
    slow = linear_fit.fit_linear_models(
        x, ys, [(_adpue_without_form, {"gamma": 1.0}), (risks.logit, {}),
                (risks.nnpu, {"prior": 0.4})], steps=60, l2=0.01, sparse=sparse)
    assert np.abs(fast.weights).max() > 0.1
    np.testing.assert_allclose(fast.weights, slow.weights, atol=3e-4)
    np.testing.assert_allclose(fast.bias, slow.bias, atol=3e-4)


def test_exploded_logits_stop_the_dense_xla_fit_with_the_divergence_error():
    from adpue_tf import losses
    x, y = _stack(trials=2, n=60)
    x[1, 5, 0] = 1e30   # the logits of that row leave ±1e4 at the first step that moves w
    with pytest.raises(Exception) as info:
        linear_fit.fit_linear(x, y, risks.logit, steps=5, sparse=False)
    assert losses.is_divergence(info.value)


def _chunks_of(monkeypatch, per: int, x: np.ndarray) -> None:
    """Make the dense step run ``per`` trials a chunk (a fresh trace)."""
    from adpue_tf.experiments import _linear_steps
    monkeypatch.setattr(_linear_steps, "CHUNK_BYTES", per * 4 * x.shape[1] * x.shape[2])
    _linear_steps._models_trainer.cache_clear()
    assert _linear_steps._chunk_trials(len(x), x.shape[1], x.shape[2]) == per


@pytest.mark.slow
def test_the_dense_step_in_chunks_of_trials_gives_the_fit_of_one_program(monkeypatch):
    """Chunks of 2 of 6 trials (the loop inside the XLA step): the same fit as all at once,
    several risks with constants, weights and L2 per model, a warm start."""
    x, y = _stack(trials=6, n=60)
    rng = np.random.default_rng(1)
    y4 = np.concatenate([y, rng.uniform(0.1, 0.9, (*y.shape[:2], 1)).astype(np.float32)], -1)
    specs = [(risks.adpue, {"gamma": 1.0}), (risks.adpue, {"gamma": 1.0}), (risks.logit, {}),
             (risks.nnpu, {"prior": 0.4})]
    ys = np.repeat(y4[:, None], len(specs), axis=1)
    sw = (rng.random(ys.shape[:3]) < 0.8).astype(np.float32)
    kw = {"sample_weight": sw, "steps": 40, "l2": [0.0, 0.1, 0.01, 0.03], "sparse": False}
    whole = linear_fit.fit_linear_models(x, ys, specs, **kw)
    again = linear_fit.fit_linear_models(x, ys, specs, init=whole, **kw)
    _chunks_of(monkeypatch, 2, x)
    chunked = linear_fit.fit_linear_models(x, ys, specs, **kw)
    np.testing.assert_allclose(chunked.weights, whole.weights, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(chunked.bias, whole.bias, rtol=1e-4, atol=1e-5)
    more = linear_fit.fit_linear_models(x, ys, specs, init=chunked, **kw)
    np.testing.assert_allclose(more.weights, again.weights, rtol=1e-4, atol=1e-5)
    assert np.abs(whole.weights).max() > 0.1 and not np.allclose(whole.weights[0], whole.weights[3])


def test_exploded_logits_in_one_chunk_stop_the_chunked_fit(monkeypatch):
    from adpue_tf import losses
    x, y = _stack(trials=4, n=60)
    x[3, 5, 0] = 1e30   # the last chunk's logits leave ±1e4
    _chunks_of(monkeypatch, 2, x)
    with pytest.raises(Exception) as info:
        linear_fit.fit_linear(x, y, risks.logit, steps=5, sparse=False)
    assert losses.is_divergence(info.value)


def test_bad_tol_type():
    with pytest.raises(TypeError, match="`tol` must be a number, got str"):
        linear_fit.fit_linear(np.zeros((2, 3, 1)), np.zeros((2, 3, 3)), risks.logit, steps=1,
                              tol="1e-5")


def test_without_tol_every_model_takes_every_step():
    x, y = _stack(trials=2, n=100)
    fit = linear_fit.fit_linear(x, y, risks.logit, steps=30)
    np.testing.assert_array_equal(fit.steps, [30, 30])


@pytest.mark.parametrize("sparse", [False, pytest.param(True, marks=pytest.mark.slow)],
                         ids=["dense-xla", "sparse"])
def test_tol_stops_each_model_at_its_own_convergence(sparse):
    """A converged model stops at a check step, with the weights of that step, whatever the
    others do: the same steps and weights in a batch, alone, and without a tolerance."""
    x, y = _stack(trials=3, n=150)
    x = np.where(np.abs(x) > 0.5, x, 0.0).astype(np.float32)
    specs = [(risks.logit, {}), (risks.adpue, {})]
    ys = np.repeat(y[:, None], 2, axis=1)
    l2 = [1.0, 0.0]     # a strongly penalised, fast model and a slow one
    batch = linear_fit.fit_linear_models(x, ys, specs, steps=400, l2=l2, sparse=sparse,
                                         tol=1e-4)
    steps = batch.steps
    assert steps.shape == (3, 2) and steps.dtype.kind == "i"
    assert (steps % linear_fit.CHECK_EVERY == 0).all()
    assert (steps[:, 0] < steps[:, 1]).all() and steps[:, 0].max() < 400   # each its own
    for t in range(3):
        alone = linear_fit.fit_linear_models(x[t:t + 1], ys[t:t + 1], specs, steps=400, l2=l2,
                                             sparse=sparse, tol=1e-4)
        np.testing.assert_array_equal(alone.steps[0], steps[t])
        np.testing.assert_allclose(alone.weights[0], batch.weights[t], atol=1e-5)
        for k in range(2):   # the weights of the step it stopped at, as a fit of that length
            fixed = linear_fit.fit_linear_models(
                x[t:t + 1], ys[t:t + 1, k:k + 1], [specs[k]], steps=int(steps[t, k]),
                l2=l2[k], sparse=sparse)
            np.testing.assert_allclose(fixed.weights[0, 0], batch.weights[t, k], atol=1e-5)
            np.testing.assert_allclose(fixed.bias[0, 0], batch.bias[t, k], atol=1e-5)


def test_fits_of_one_shape_in_several_threads_are_those_made_one_at_a_time():
    """Fits that share a cached trainer (same risks and shapes) hold its lock: no fit reads
    another's variables (Table 1 runs its recipe in a thread beside other fits)."""
    import concurrent.futures
    x, y = _stack(trials=2, n=60)
    datas = [(x * s, y) for s in (1.0, -1.0, 0.5, 2.0)]
    alone = [linear_fit.fit_linear(a, b, risks.nnpue, steps=60).weights for a, b in datas]
    with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
        together = list(pool.map(lambda d: linear_fit.fit_linear(*d, risks.nnpue, steps=60).weights,
                                 datas * 3))
    for i, got in enumerate(together):
        np.testing.assert_array_equal(got, alone[i % 4])
    assert not np.allclose(alone[0], alone[1])
