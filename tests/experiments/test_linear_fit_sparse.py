"""The sparse path of fit_linear_models: the same fits and recipe choices as the dense one."""

from __future__ import annotations

import numpy as np
import pytest

from adpue_tf import risks
from adpue_tf.experiments import linear_fit, linear_recipe
from adpue_tf.labels import pack_e, pack_pu

#: Max abs difference of weights and biases between the paths after 200 Adam
#: steps (float32; the sparse product sums in another order, and near the optimum
#: Adam's normalised step g/√v turns rounding in a small gradient into a step of up
#: to the learning rate: measured 1.2e-4 on the L2-penalised Logit model, 0 to 7e-5
#: on the others; a wrong product differs by more than 0.1).
TOL = 3e-4


def _sparse_problem(trials=3, rows=80, features=25, density=0.1, seed=0):
    """Sparse features (binary and real non-zeros) and PU/E labels with f† in column 3."""
    rng = np.random.default_rng(seed)
    mask = rng.random((trials, rows, features)) < density
    x = (mask * np.where(rng.random(mask.shape) < 0.5, 1.0, rng.normal(size=mask.shape)))
    half = rows // 2
    y = np.stack([np.concatenate([pack_pu(rng.random(half) < 0.3 + 0.4 * (x[t, :half, 0] != 0)),
                                  pack_e(rng.random(rows - half) < 0.5)])
                  for t in range(trials)]).astype(np.float32)
    dagger = rng.uniform(0.1, 0.9, size=(trials, rows, 1)).astype(np.float32)
    return x.astype(np.float32), np.concatenate([y, dagger], axis=-1)


@pytest.mark.slow
def test_sparse_path_gives_the_dense_fit():
    """Mixed risks, options, L2 and row weights per model; warm start included."""
    x, y = _sparse_problem()
    assert 0.05 < np.mean(x != 0) < 0.15
    trials, rows, _ = x.shape
    specs = [(risks.adpue, {"gamma": 1.0}), (risks.adpue, {"gamma": 1.0}), (risks.adpue, {}),
             (risks.logit, {}), (risks.nnpu, {"prior": 0.4})]
    k = len(specs)
    rng = np.random.default_rng(1)
    sw = (rng.random((trials, k, rows)) < 0.8).astype(np.float32)
    l2 = [0.0, 0.1, 0.01, 0.03, 0.0]
    ys = np.repeat(y[:, None], k, axis=1)
    fits = {}
    for sparse in (False, True):
        first = linear_fit.fit_linear_models(x, ys, specs, sample_weight=sw, l2=l2, steps=150,
                                             sparse=sparse)
        fits[sparse] = linear_fit.fit_linear_models(x, ys, specs, sample_weight=sw, l2=l2,
                                                    steps=50, init=first, sparse=sparse)
    dense, sparse_fit = fits[False], fits[True]
    assert np.abs(dense.weights).max() > 0.1                  # the models moved
    assert np.abs(sparse_fit.weights - dense.weights).max() <= TOL
    assert np.abs(sparse_fit.bias - dense.bias).max() <= TOL
    # Columns that are zero in every row of a trial keep weight 0 on both paths.
    x0 = x.copy()
    x0[:, :, -3:] = 0.0
    one = linear_fit.fit_linear(x0, y, risks.adpue, steps=200, l2=0.01, sparse=True, gamma=1.0)
    ref = linear_fit.fit_linear(x0, y, risks.adpue, steps=200, l2=0.01, sparse=False, gamma=1.0)
    assert np.abs(one.weights - ref.weights).max() <= TOL and np.all(one.weights[:, -3:] == 0)


def test_density_chooses_the_path():
    x, _ = _sparse_problem(density=0.05)
    assert linear_fit._use_sparse(x, None)
    assert not linear_fit._use_sparse(np.ones_like(x), None)
    assert not linear_fit._use_sparse(x, False) and linear_fit._use_sparse(np.ones_like(x), True)
    at = np.zeros((1, 10, 10), np.float32)
    at.flat[:int(linear_fit.SPARSE_DENSITY * 100)] = 1.0      # exactly at the threshold: sparse
    assert linear_fit._use_sparse(at, None)
    at.flat[int(linear_fit.SPARSE_DENSITY * 100)] = 1.0
    assert not linear_fit._use_sparse(at, None)


@pytest.mark.parametrize("bad", ["yes", 1, 0.0])
def test_sparse_must_be_a_bool_or_none(bad):
    x, y = _sparse_problem(trials=1, rows=10, features=3)
    with pytest.raises(TypeError, match="`sparse`"):
        linear_fit.fit_linear_models(x, y[:, None], risks.adpue, steps=1, sparse=bad)
    with pytest.raises(TypeError, match="`sparse`"):
        linear_fit.fit_linear(x, y, risks.adpue, steps=1, sparse=bad)
    with pytest.raises(TypeError, match="`sparse`"):
        linear_recipe.fit_recipe(x, y[..., :3], sparse=bad)


@pytest.mark.slow
def test_recipe_makes_the_same_choices_on_both_paths():
    x, y = _sparse_problem(trials=4, rows=90, features=30, density=0.08, seed=3)
    cfg = linear_recipe.RecipeConfig(l2s=(0.001, 0.03, 0.3), max_rounds=2, steps=40)
    dense = linear_recipe.fit_recipe(x, y[..., :3], cfg, sparse=False)
    sparse = linear_recipe.fit_recipe(x, y[..., :3], cfg, sparse=True)
    np.testing.assert_array_equal(sparse.l2_index, dense.l2_index)
    np.testing.assert_array_equal(sparse.rounds, dense.rounds)
    for c in linear_recipe.CRITERIA:
        np.testing.assert_array_equal(sparse.choice(c)[0], dense.choice(c)[0])
        np.testing.assert_array_equal(sparse.choice(c)[1], dense.choice(c)[1])
        # float32 sums in another order (the sparse path sums the rows along axis 1 of
        # (trials, rows, models)): 1.4e-5 relative measured after 40 steps
        np.testing.assert_allclose(sparse.scores[c], dense.scores[c], rtol=5e-5, atol=1e-6)
    assert np.abs(sparse.weights - dense.weights).max() <= TOL
    np.testing.assert_allclose(sparse.logits(x), dense.logits(x), atol=1e-4)
