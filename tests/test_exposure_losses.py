"""The losses without f†: exposure likelihood, exposure Brier, exposed PU — NumPy references,
gradients in eager and graph mode, and recovery of p(y=1|x) on data with known truth."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

import adpue_tf as adp
from adpue_tf.labels import pack_e, pack_pu


def _sig(z):
    return 1.0 / (1.0 + np.exp(-z))


def _likelihood(w, theta, z):
    """-mean(W log(σθ) + (1-W) log(1-σθ)), written directly from the probabilities."""
    s = _sig(z) * np.clip(theta, 1e-7, 1 - 1e-7)
    v = -np.mean(w * np.log(s) + (1 - w) * np.log(1 - s))
    # d/dz: W·(σ-1)·... : -W·(1-σ) + (1-W)·θσ(1-σ)/(1-θσ)
    sg = _sig(z)
    grad = (-w * (1 - sg) + (1 - w) * theta * sg * (1 - sg) / (1 - theta * sg)) / len(z)
    return v, grad


def _brier(w, z_pu, e, z_e):
    f_pu, f_e = _sig(z_pu), _sig(z_e)
    v = np.mean(e * f_e ** 2) - 2 * np.mean(w * f_pu)
    g_pu = -2 * w * f_pu * (1 - f_pu) / len(z_pu)
    g_e = 2 * e * f_e * f_e * (1 - f_e) / len(z_e)
    return v, np.concatenate([g_pu, g_e])


def _exposed_pu(w, z_pu, e, z_e):
    l1 = lambda z: np.log1p(np.exp(-z))  # noqa: E731
    l0 = lambda z: np.log1p(np.exp(z))  # noqa: E731
    pos = np.mean(w * l1(z_pu))
    neg = np.mean(e * l0(z_e)) - np.mean(w * l0(z_pu))
    return pos, neg


@pytest.fixture
def rows():
    rng = np.random.default_rng(3)
    w = rng.integers(0, 2, 10).astype(np.float64)
    theta = rng.uniform(0.05, 0.95, 10)
    z_pu = rng.normal(0.0, 2.0, 10)
    e = rng.integers(0, 2, 7).astype(np.float64)
    z_e = rng.normal(0.0, 2.0, 7)
    return w, theta, z_pu, e, z_e


def _value_and_grad(loss, y, z, mode):
    zz = tf.Variable(z[:, None].astype(np.float32))

    def run():
        with tf.GradientTape() as tape:
            v = loss(tf.constant(y, tf.float32), zz)
        return v, tape.gradient(v, zz)

    v, g = run() if mode == "eager" else tf.function(run)()
    return float(v), g.numpy()[:, 0]


@pytest.mark.parametrize("mode", ["eager", "graph"])
def test_likelihood_value_and_gradient(rows, mode):
    w, theta, z_pu, e, z_e = rows
    y = np.concatenate([np.concatenate([pack_pu(w), theta[:, None]], axis=1),
                        np.concatenate([pack_e(e), np.full((7, 1), 0.5)], axis=1)])
    v, g = _value_and_grad(adp.ExposureLikelihoodLoss(from_logits=True), y,
                           np.concatenate([z_pu, z_e]), mode)
    want, want_grad = _likelihood(w, theta, z_pu)
    np.testing.assert_allclose(v, want, rtol=1e-5)
    np.testing.assert_allclose(g[:10], want_grad, rtol=1e-4, atol=1e-7)
    np.testing.assert_array_equal(g[10:], 0.0)  # E rows are left out


def test_likelihood_exact_value_by_hand():
    # W=1, z=0, θ=0.5: -log(0.25); W=0: -log(0.75); mean = 0.8369882
    y = np.concatenate([pack_pu([1, 0]), [[0.5], [0.5]]], axis=1)
    v = float(adp.ExposureLikelihoodLoss(from_logits=True)(y, np.zeros((2, 1), np.float32)))
    assert v == pytest.approx(0.5 * (np.log(4) + np.log(4 / 3)), rel=1e-6)


def test_likelihood_needs_theta_column():
    with pytest.raises(ValueError, match="4 columns.*with_propensity"):
        adp.ExposureLikelihoodLoss(from_logits=True)(pack_pu([1, 0]), np.zeros((2, 1)))


def test_likelihood_finite_at_extremes():
    y = np.concatenate([pack_pu([1, 0, 1, 0]), [[1e-9], [1.0], [1.0], [1e-9]]], axis=1)
    z = np.array([[-80.0], [80.0], [80.0], [-80.0]], np.float32)
    assert np.isfinite(float(adp.ExposureLikelihoodLoss(from_logits=True)(y, z)))


@pytest.mark.parametrize("mode", ["eager", "graph"])
def test_brier_value_and_gradient(rows, mode):
    w, _, z_pu, e, z_e = rows
    y = np.concatenate([pack_pu(w), pack_e(e)])
    v, g = _value_and_grad(adp.ExposureBrierLoss(from_logits=True), y,
                           np.concatenate([z_pu, z_e]), mode)
    want, want_grad = _brier(w, z_pu, e, z_e)
    np.testing.assert_allclose(v, want, rtol=1e-5)
    np.testing.assert_allclose(g, want_grad, rtol=1e-4, atol=1e-7)


def test_brier_expectation_is_theta_weighted_squared_error():
    """E[score] = E_x[θ(f-p)²] - E_x[θp²]: checked by exact expectation on a 3-point x."""
    p, theta, f = np.array([0.2, 0.5, 0.9]), np.array([0.3, 0.8, 0.6]), np.array([0.1, 0.7, 0.4])
    # exact expectation: mean_x[θ f²] - 2 mean_x[p θ f]
    expected = np.mean(theta * f ** 2) - 2 * np.mean(p * theta * f)
    assert expected == pytest.approx(np.mean(theta * (f - p) ** 2) - np.mean(theta * p ** 2))
    # the risk on rows weighted by their probabilities equals it
    y = np.concatenate([pack_pu([1, 0, 1, 0, 1, 0]), pack_e([1, 0, 1, 0, 1, 0])])
    q = p * theta
    sw = np.concatenate([np.stack([q, 1 - q], 1).ravel(), np.stack([theta, 1 - theta], 1).ravel()])
    z = np.log(f / (1 - f))
    zz = np.concatenate([np.repeat(z, 2), np.repeat(z, 2)])[:, None].astype(np.float32)
    v = adp.risks.exposure_brier(y, zz, from_logits=True, sample_weight=sw * 3)
    # group means divide by the weight totals (3 per source): the expectation itself
    assert float(v.risk) == pytest.approx(expected, rel=1e-5)


def test_exposed_pu_parts_and_correction(rows):
    w, _, z_pu, e, z_e = rows
    y = np.concatenate([pack_pu(w), pack_e(e)])
    z = np.concatenate([z_pu, z_e])[:, None].astype(np.float32)
    t = adp.risks.exposed_pu(y, z, from_logits=True)
    pos, neg = _exposed_pu(w, z_pu, e, z_e)
    np.testing.assert_allclose([float(t.positive), float(t.negative)], [pos, neg], rtol=1e-5)
    np.testing.assert_allclose(float(t.risk), pos + max(neg, 0.0), rtol=1e-5)
    off = adp.risks.exposed_pu(y, z, from_logits=True, non_negative=False)
    np.testing.assert_allclose(float(off.risk), pos + neg, rtol=1e-5)


def _fit_linear(loss, ds, dim, epochs):
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((dim,)), keras.layers.Dense(1)])
    model.compile(keras.optimizers.Adam(0.05), loss=loss)
    model.fit(ds, epochs=epochs, verbose=0, shuffle=False)
    return model


@pytest.mark.slow
def test_brier_and_exposed_pu_recover_p_without_theta_hat():
    """Known truth (logistic p, complementary log-log exposure): both learn p, BCE on W does not."""
    s = adp.synthetic.synthetic_pue(8000, 8000, seed=1, exposure="cloglog")
    ds = adp.data.pue_dataset(s.x_pu, s.w_pu, s.x_e, s.e_e, batch_size=1024, seed=0)
    mae = {}
    for name, loss in (("brier", adp.ExposureBrierLoss(from_logits=True)),
                       ("exposed_pu", adp.ExposedPULoss(from_logits=True)),
                       ("logit", adp.LogitLoss(from_logits=True))):
        model = _fit_linear(loss, ds, 2, 30)
        p = _sig(model.predict(s.x_pu, verbose=0).ravel())
        mae[name] = float(np.mean(np.abs(p - s.p_y_pu)))
    assert mae["brier"] < 0.05 and mae["exposed_pu"] < 0.05, mae
    assert mae["logit"] > 0.2, mae


@pytest.mark.slow
def test_likelihood_recovers_p_with_the_true_theta():
    s = adp.synthetic.synthetic_pue(8000, 10, seed=2)
    theta = _sig(s.x_pu @ s.e_weights + s.e_bias)
    y = np.concatenate([pack_pu(s.w_pu), theta[:, None]], axis=1).astype(np.float32)
    ds = tf.data.Dataset.from_tensor_slices((s.x_pu.astype(np.float32), y)).batch(1024)
    model = _fit_linear(adp.ExposureLikelihoodLoss(from_logits=True), ds, 2, 40)
    p = _sig(model.predict(s.x_pu, verbose=0).ravel())
    assert float(np.mean(np.abs(p - s.p_y_pu))) < 0.04
