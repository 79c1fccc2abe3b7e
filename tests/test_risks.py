"""Each risk against the independent NumPy reference in tests/reference.py."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from adpue_tf import risks

import reference as ref

CASES = [
    ("nnpue", risks.nnpue, {}),
    ("nnpue", risks.nnpue, {"non_negative": False}),
    ("nnpue", risks.nnpue, {"beta": 0.05, "gamma": 0.5}),
    ("nnpe", risks.nnpe, {"prior": 0.3}),
    ("nnpe", risks.nnpe, {"prior": 0.3, "gamma": 1.0}),
    ("fpue", risks.fpue, {"prior": 0.4}),
    ("ads", risks.ads, {}),
    ("adss", risks.adss, {}),
    ("double_adss", risks.double_adss, {"alpha": 0.3}),
    ("ad3se", risks.ad3se, {"alpha": 0.6}),
    ("ad3se", risks.ad3se, {"alpha": 0.6, "gamma": 1.0}),
    ("logit", risks.logit, {}),
    ("upu", risks.upu, {"prior": 0.35}),
    ("nnpu", risks.nnpu, {"prior": 0.35}),
    ("nnpu", risks.nnpu, {"prior": 0.35, "beta": 0.0, "gamma": 1.0}),
    ("pnu", risks.pnu, {"prior": 0.45, "eta": 0.4}),
    ("pnu", risks.pnu, {"prior": 0.45, "eta": -0.4}),
    ("pnu", risks.pnu, {"prior": 0.45, "eta": 0.0}),
]
IDS = [f"{n}-{'-'.join(f'{k}{v}' for k, v in o.items())}" for n, _, o in CASES]
NO_DAGGER = {"ads", "logit", "upu", "nnpu", "pnu"}


def _check_values(name, fn, opts, y, z, **kw):
    terms = fn(y, z, from_logits=True, **opts, **kw)
    risk, pos, neg, fired = ref.value(name, y, z, **opts)
    np.testing.assert_allclose(float(terms.risk), risk, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(float(terms.loss), risk, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(float(terms.positive), pos, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(float(terms.negative), neg, rtol=1e-5, atol=1e-6)
    assert float(terms.fired) == fired


@pytest.mark.parametrize("name,fn,opts", CASES, ids=IDS)
def test_value_eager(name, fn, opts, batch):
    y, z = batch
    _check_values(name, fn, opts, y, z)


@pytest.mark.parametrize("name,fn,opts", CASES, ids=IDS)
def test_value_graph(name, fn, opts, batch):
    y, z = batch
    traced = tf.function(lambda yy, zz: fn(yy, zz, from_logits=True, **opts))
    terms = traced(tf.constant(y), tf.constant(z))
    risk, pos, neg, fired = ref.value(name, y, z, **opts)
    np.testing.assert_allclose(float(terms.loss), risk, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(float(terms.negative), neg, rtol=1e-5, atol=1e-6)
    assert float(terms.fired) == fired


def _tf_grad(fn, y, z, **kw):
    zv = tf.Variable(z)
    with tf.GradientTape() as tape:
        loss = fn(y, zv, from_logits=True, **kw).loss
    return tape.gradient(loss, zv).numpy().reshape(-1)


@pytest.mark.parametrize("name,fn,opts", CASES, ids=IDS)
def test_gradient_dagger_stopped(name, fn, opts, batch):
    """Default: f† = σ(z) is a constant for the gradient."""
    y, z = batch
    d0 = ref.sig(z.reshape(-1).astype(np.float64))
    expected = ref.num_grad(lambda zz: ref.objective(name, y, zz, d0, **opts), z)
    np.testing.assert_allclose(_tf_grad(fn, y, z, **opts), expected, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize(
    "name,fn,opts", [c for c in CASES if c[0] not in NO_DAGGER],
    ids=[i for i, c in zip(IDS, CASES) if c[0] not in NO_DAGGER],
)
def test_gradient_through_dagger(name, fn, opts, batch):
    """dagger_gradient=True differentiates the literal R(f; f)."""
    y, z = batch
    expected = ref.num_grad(lambda zz: ref.objective(name, y, zz, None, **opts), z)
    got = _tf_grad(fn, y, z, dagger_gradient=True, **opts)
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-6)
    stopped = _tf_grad(fn, y, z, **opts)
    assert np.max(np.abs(got - stopped)) > 1e-4


@pytest.mark.parametrize(
    "name,fn,opts", [c for c in CASES if c[0] not in NO_DAGGER],
    ids=[i for i, c in zip(IDS, CASES) if c[0] not in NO_DAGGER],
)
def test_dagger_column(name, fn, opts, batch):
    """A 4th column supplies f†: values use it, gradients never flow into it."""
    y, z = batch
    dagger = np.random.default_rng(5).uniform(size=len(y)).astype(np.float32)
    y4 = np.concatenate([y, dagger[:, None]], axis=1)
    _check_values(name, fn, opts, y4, z)
    expected = ref.num_grad(lambda zz: ref.objective(name, y4, zz, dagger, **opts), z)
    got = _tf_grad(fn, y4, z, dagger_gradient=True, **opts)
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-6)


def _firing_pue_batch():
    """nnPUE batch whose R- is negative: unexposed E rows with f† = 1, large z."""
    y = np.array(
        [[1, 0, 0, 1.0], [1, 0, 0, 1.0], [0, 0, 0, 1.0],
         [0, 0, 1, 1.0], [0, 0, 1, 1.0], [0, 1, 1, 1.0]], np.float32)
    z = np.array([[1.0], [2.0], [0.5], [3.0], [2.5], [-1.0]], np.float32)
    return y, z


@pytest.mark.parametrize("gamma", [None, 0.5, 1.0])
@pytest.mark.parametrize("beta", [0.0, 0.1])
def test_correction_fires(gamma, beta):
    y, z = _firing_pue_batch()
    pos, neg, _ = ref.parts("nnpue", y, z)
    assert neg < -beta
    terms = risks.nnpue(y, z, from_logits=True, beta=beta, gamma=gamma)
    assert float(terms.fired) == 1.0
    np.testing.assert_allclose(float(terms.risk), pos - beta, rtol=1e-6)
    np.testing.assert_allclose(float(terms.loss), pos - beta, rtol=1e-6)
    grad = _tf_grad(risks.nnpue, y, z, beta=beta, gamma=gamma)
    d = y[:, 3].astype(np.float64)
    if gamma is None:
        expected = ref.num_grad(lambda zz: ref.parts("nnpue", y, zz, d)[0], z)
    else:
        expected = ref.num_grad(lambda zz: -gamma * ref.parts("nnpue", y, zz, d)[1], z)
    np.testing.assert_allclose(grad, expected, rtol=1e-4, atol=1e-7)
    if gamma is not None:  # a gradient step climbs R- back towards 0
        stepped = z.reshape(-1) - 0.1 * grad
        assert ref.parts("nnpue", y, stepped, d)[1] > neg


def test_correction_off_reports_negative_risk():
    y, z = _firing_pue_batch()
    terms = risks.nnpue(y, z, from_logits=True, non_negative=False)
    pos, neg, _ = ref.parts("nnpue", y, z)
    assert float(terms.fired) == 0.0
    np.testing.assert_allclose(float(terms.risk), pos + neg, rtol=1e-6)


@pytest.mark.parametrize("name,fn,opts", CASES, ids=IDS)
@pytest.mark.parametrize("source", [0, 1, 2, 3, 4])
def test_missing_groups_are_zero_not_nan(name, fn, opts, source):
    """A batch holding one source only: absent groups contribute 0."""
    y = np.array([[1, 1, source], [0, 0, source]], np.float32)
    if source in (1,):
        y[:, 0] = 0
    if source in (0,):
        y[:, 1] = 0
    if source in (2, 3):
        y[:, :2] = 0
    z = np.array([[0.3], [-0.7]], np.float32)
    terms = fn(y, z, from_logits=True, **opts)
    risk, pos, neg, _ = ref.value(name, y, z, **opts)
    np.testing.assert_allclose(float(terms.risk), risk, rtol=1e-5, atol=1e-6)
    assert np.all(np.isfinite(_tf_grad(fn, y, z, **opts)))


@pytest.mark.parametrize("name,fn,opts", CASES, ids=IDS)
def test_sample_weight_equals_duplicated_rows(name, fn, opts, batch):
    y, z = batch
    counts = np.random.default_rng(3).integers(0, 3, len(y))
    counts[:5] = 1
    got = fn(y, z, from_logits=True, sample_weight=counts.astype(np.float32), **opts)
    yd, zd = np.repeat(y, counts, axis=0), np.repeat(z, counts, axis=0)
    risk, *_ = ref.value(name, yd, zd, **opts)
    np.testing.assert_allclose(float(got.risk), risk, rtol=1e-5, atol=1e-6)


def test_known_value_by_hand():
    """nnPUE at z = 0 with f† = σ(0) = 1/2: every ℓ is log 2."""
    y = np.array([[1, 0, 0], [0, 0, 0], [0, 1, 1], [0, 0, 1]], np.float32)
    terms = risks.nnpue(y, np.zeros((4, 1), np.float32), from_logits=True)
    ln2 = np.log(2.0)
    np.testing.assert_allclose(float(terms.positive), 0.5 * ln2 + 0.25 * ln2, rtol=1e-6)
    np.testing.assert_allclose(float(terms.negative), 0.5 * ln2 - 0.25 * ln2, rtol=1e-6)
