"""The ``likelihood_theta`` candidate: ``ThetaFeature`` by hand, θ̂ frozen, export, known truth."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

import adpue_tf as adp
from adpue_tf.recommend import ThetaFeature

THETA_FEATURE_NET = "likelihood_theta/net"  # its net, as the stage files it

from serialization import assert_round_trip

FAST = dict(epochs=2, min_steps=8, batch_size=128, verbose=0)


def test_theta_feature_round_trips():
    assert_round_trip(ThetaFeature())


@pytest.mark.parametrize("graph", [False, True], ids=["eager", "graph"])
def test_theta_feature_by_hand_and_its_gradients(graph):
    """``z + a·z_θ``; the gradient reaches ``z`` and ``a`` (``Σ z_θ``), never ``z_θ``."""
    layer = ThetaFeature()
    z = tf.Variable([[0.5], [-1.0], [2.0]])
    z_t = tf.Variable([[1.0], [3.0], [-2.0]])
    layer([z, z_t])
    layer.scale.assign(0.75)

    def step():
        with tf.GradientTape(persistent=True) as tape:
            out = layer([z, z_t])
            total = tf.reduce_sum(out)
        return out, tape.gradient(total, z), tape.gradient(total, z_t), \
            tape.gradient(total, layer.scale)

    out, g_z, g_t, g_a = (tf.function(step) if graph else step)()
    np.testing.assert_allclose(out.numpy().ravel(), [0.5 + 0.75, -1.0 + 2.25, 2.0 - 1.5],
                               rtol=1e-6)
    np.testing.assert_allclose(g_z.numpy(), np.ones((3, 1)))
    assert g_t is None or np.all(g_t.numpy() == 0.0)
    np.testing.assert_allclose(float(g_a), 1.0 + 3.0 - 2.0, rtol=1e-6)
    assert float(ThetaFeature()([tf.constant([[4.0]]), tf.constant([[9.0]])])[0, 0]) == 4.0


USERS = ITEMS = 40


def _id_data(seed: int, n: int, n_e: int | None = None):
    """Users and items whose taste ``u·v`` drives both the conversion and the logging policy.

    ``logit p = -1.5 + u·v``, ``logit θ = 0.5 + 1.5·u·v``: the exposure log
    (every row labelled) teaches the taste far better than the few ``W = 1``
    rows do. Returns the PU rows, the E rows and 20,000 test rows with ``p``.
    """
    rng = np.random.default_rng(seed)
    u, v = rng.normal(0.0, 1.2, USERS), rng.normal(0.0, 1.2, ITEMS)

    def rows(m):
        a, b = rng.integers(0, USERS, m), rng.integers(0, ITEMS, m)
        taste = u[a] * v[b]
        return (np.stack([a, b], 1).astype(np.int64), 1 / (1 + np.exp(1.5 - taste)),
                1 / (1 + np.exp(-0.5 - 1.5 * taste)))

    x_pu, p_pu, t_pu = rows(n)
    w = ((rng.random(n) < p_pu) & (rng.random(n) < t_pu)).astype(np.float32)
    x_e, _, t_e = rows(n_e or n)
    e = (rng.random(n_e or n) < t_e).astype(np.float32)
    x_test, p_test, _ = rows(20_000)
    return x_pu, w, x_e, e, x_test, p_test


def _id_net():
    """A one-factor model of the taste: user and item embeddings of size 1, multiplied."""
    inputs = keras.Input((2,), dtype="int64")
    user = keras.layers.Flatten()(keras.layers.Embedding(USERS, 1)(inputs[:, 0]))
    item = keras.layers.Flatten()(keras.layers.Embedding(ITEMS, 1)(inputs[:, 1]))
    return keras.Model(inputs, keras.layers.Dense(1)(keras.layers.Multiply()([user, item])))


def test_theta_is_not_trained_by_it_and_the_model_exports():
    x_pu, w, x_e, e, _, _ = _id_data(0, 1500)
    fit = adp.fit_pue(_id_net, x_pu, w, x_e, e, candidates=["likelihood_theta", "bce_w"],
                      **FAST)
    model = fit.candidates["likelihood_theta"]
    # its model reads θ̂'s net; training it left θ̂ as the exposure model trained on E
    nets = [layer for layer in model.layers if isinstance(layer, keras.Model)]
    assert len(nets) == 2 and all(n.trainable for n in nets)
    assert fit.epochs["likelihood_theta"] >= 1
    z_net = nets[0].predict(x_pu[:5], verbose=0)
    z_theta = nets[1].predict(x_pu[:5], verbose=0)
    scale = float(next(l for l in model.layers if isinstance(l, ThetaFeature)).scale)
    np.testing.assert_allclose(model.predict(x_pu[:5], verbose=0), z_net + scale * z_theta,
                               rtol=1e-5, atol=1e-6)
    assert THETA_FEATURE_NET not in fit.scores


def test_theta_net_weights_unchanged_by_training_the_candidate():
    from adpue_tf.data.rows import as_rows
    from adpue_tf.recommend.stage import Stage
    from adpue_tf.recommend.train import Settings

    x_pu, w, x_e, e, _, _ = _id_data(1, 1200)
    settings = Settings(epochs=2, batch_size=128, min_steps=8, rounds=1, seed=0,
                        optimizer=lambda: keras.optimizers.Adam(0.01))
    stage = Stage(_id_net, as_rows("x_pu", x_pu, "w", w), as_rows("x_e", x_e, "e", e),
                  settings)
    theta = stage.get("theta")
    before = [v.copy() for v in theta.get_weights()]
    stage.get("likelihood_theta")
    for a, b in zip(before, theta.get_weights()):
        np.testing.assert_array_equal(a, b)
    assert theta.trainable
    assert stage.heads["likelihood_theta"][0] == (THETA_FEATURE_NET, "theta")


def test_average_with_it_saves_and_loads(tmp_path):
    x_pu, w, x_e, e, _, _ = _id_data(2, 1500)
    fit = adp.fit_pue(_id_net, x_pu, w, x_e, e,
                      candidates=["likelihood_theta", "bce_w", "ratio", "average"], **FAST)
    for name in ("likelihood_theta", "average"):
        model = fit.candidates[name]
        path = tmp_path / f"{name}.keras"
        model.save(path)
        np.testing.assert_allclose(keras.models.load_model(path).predict(x_pu[:9], verbose=0),
                                   model.predict(x_pu[:9], verbose=0), rtol=1e-6)


@pytest.mark.slow
def test_recovers_p_better_than_the_plain_likelihood_when_theta_shares_its_signal():
    """Known truth: ``θ̂`` learned ``u`` from the E log; the candidate reuses it."""
    x_pu, w, x_e, e, x_test, p_test = _id_data(2, 3000, 6000)
    fit = adp.fit_pue(_id_net, x_pu, w, x_e, e, candidates=["likelihood", "likelihood_theta"],
                      epochs=10, min_steps=200, batch_size=256, verbose=0, refit=False)
    mae = {n: float(np.mean(np.abs(1 / (1 + np.exp(-m.predict(x_test, verbose=0)[:, 0]))
                                   - p_test)))
           for n, m in fit.candidates.items()}
    assert mae["likelihood_theta"] < 0.8 * mae["likelihood"], mae
    assert fit.scores["likelihood_theta"] < fit.scores["likelihood"]
