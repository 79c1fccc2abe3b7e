"""IPS (Saito et al. 2020): values and gradients against NumPy, θ̂ attached to batches."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

import adpue_tf as adp
from adpue_tf import risks
from adpue_tf.labels import pack_e, pack_pu


def _reference(w, theta, z, clip):
    """SPEC.md's IPS on PU rows: mean((W/θ̂)·ℓ1 + (1 - W/θ̂)·ℓ0), θ̂ floored at clip."""
    t = w / np.maximum(theta, clip)
    l1, l0 = np.logaddexp(0.0, -z), np.logaddexp(0.0, z)
    value = np.mean(t * l1 + (1 - t) * l0)
    grad = (t * (-(1 - 1 / (1 + np.exp(-z)))) + (1 - t) / (1 + np.exp(-z))) / len(z)
    return value, grad


@pytest.fixture
def rows():
    rng = np.random.default_rng(0)
    w = rng.integers(0, 2, 12).astype(np.float64)
    theta = rng.uniform(0.01, 1.0, 12)
    theta[:2] = [0.02, 0.03]  # below the clip
    z = rng.normal(0.0, 2.0, 12)
    y_pu = np.concatenate([pack_pu(w), theta[:, None]], axis=1).astype(np.float32)
    y_e = np.concatenate([pack_e([1, 0, 1]), np.full((3, 1), 0.5)], axis=1).astype(np.float32)
    return w, theta, z, y_pu, y_e


@pytest.mark.parametrize("clip", [0.05, 0.5])
@pytest.mark.parametrize("mode", ["eager", "graph"])
def test_value_and_gradient_match_numpy(rows, clip, mode):
    w, theta, z, y_pu, y_e = rows
    # E rows of a PUE batch are left out (theta was fitted on them)
    y = np.concatenate([y_pu, y_e])
    zz = tf.Variable(np.concatenate([z, [3.0, -1.0, 0.5]])[:, None].astype(np.float32))
    loss = adp.IPSLoss(clip=clip, from_logits=True)

    def value_and_grad():
        with tf.GradientTape() as tape:
            v = loss(tf.constant(y), zz)
        return v, tape.gradient(v, zz)

    v, g = value_and_grad() if mode == "eager" else tf.function(value_and_grad)()
    want, want_grad = _reference(w, theta, z, clip)
    np.testing.assert_allclose(float(v), want, rtol=1e-5)
    np.testing.assert_allclose(g.numpy()[:12, 0], want_grad, rtol=1e-4, atol=1e-7)
    np.testing.assert_array_equal(g.numpy()[12:, 0], 0.0)


def test_clip_changes_only_rows_below_it(rows):
    w, theta, z, y_pu, _ = rows
    a = float(risks.ips(y_pu, z[:, None], clip=0.01, from_logits=True).risk)
    b = float(risks.ips(y_pu, z[:, None], clip=0.05, from_logits=True).risk)
    assert a != pytest.approx(b) or w[:2].sum() == 0
    np.testing.assert_allclose(b, _reference(w, theta, z, 0.05)[0], rtol=1e-5)


def test_without_propensity_column_says_how_to_attach_it():
    with pytest.raises(ValueError, match="with_propensity"):
        adp.IPSLoss(from_logits=True)(pack_pu([1, 0]), np.zeros((2, 1), np.float32))


def test_with_propensity_attaches_the_model_output():
    rng = np.random.default_rng(1)
    x_pu, x_e = rng.normal(size=(40, 2)), rng.normal(size=(40, 2))
    ds = adp.data.pue_dataset(x_pu, rng.integers(0, 2, 40), x_e, rng.integers(0, 2, 40),
                              batch_size=16, seed=0)
    theta = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1, activation="sigmoid")])
    for x, y in adp.data.with_propensity(ds, theta).take(2):
        assert y.shape[1] == 4
        np.testing.assert_allclose(y[:, 3], theta(x)[:, 0], rtol=1e-6)
    logits = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    for x, y in adp.data.with_propensity(ds, logits, from_logits=True).take(1):
        np.testing.assert_allclose(y[:, 3], tf.sigmoid(logits(x))[:, 0], rtol=1e-6)


@pytest.mark.parametrize("make, error, words", [
    (lambda ds: adp.data.with_propensity([1, 2], lambda x: x), TypeError, "dataset"),
    (lambda ds: adp.data.with_propensity(ds, 0.5), TypeError, "exposure_model"),
    (lambda ds: adp.data.with_propensity(adp.data.with_propensity(ds, lambda x: x[:, :1]),
                                         lambda x: x[:, :1]), ValueError, "column 3"),
    (lambda ds: adp.data.with_propensity(ds, lambda x: x, from_logits=1), TypeError,
     "from_logits"),
])
def test_with_propensity_bad_input(make, error, words):
    ds = adp.data.pue_dataset(np.zeros((8, 2)), [1, 0] * 4, np.zeros((8, 2)), [1, 0] * 4,
                              batch_size=8, seed=0)
    with pytest.raises(error, match=words):
        make(ds)


@pytest.mark.parametrize("clip", [0.0, 1.5, float("nan")])
def test_clip_out_of_range(clip):
    with pytest.raises(ValueError, match="clip"):
        adp.IPSLoss(clip=clip)


@pytest.mark.slow
def test_ips_with_the_true_propensity_recovers_p():
    """Where θ is bounded away from 0, IPS with the true θ learns p(y=1|x), BCE on W learns q."""
    s = adp.synthetic.make_synthetic(40_000, seed=5, e_weights=(-0.5, 0.5))
    assert s.p_e.min() > 0.05
    y = np.concatenate([pack_pu(s.w), s.p_e[:, None]], axis=1).astype(np.float32)
    x = s.x.astype(np.float32)

    def fit(loss):
        keras.utils.set_random_seed(0)
        net = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
        net.compile(keras.optimizers.Adam(0.05), loss=loss)
        net.fit(x, y, batch_size=4096, epochs=40, verbose=0)
        return 1 / (1 + np.exp(-net.predict(x, batch_size=8192, verbose=0)[:, 0]))

    ips = fit(adp.IPSLoss(clip=0.01, from_logits=True))
    naive = fit(adp.LogitLoss(from_logits=True))
    mae_ips, mae_naive = np.abs(ips - s.p_y).mean(), np.abs(naive - s.p_y).mean()
    print(f"\nMAE to p(y=1|x): IPS {mae_ips:.3f}, BCE on W {mae_naive:.3f}")
    assert mae_ips < 0.03 < 0.1 < mae_naive
