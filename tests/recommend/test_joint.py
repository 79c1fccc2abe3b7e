"""The joint pass's objective: each net's risk over the training rows, with static shapes."""

from __future__ import annotations

import functools

import numpy as np
import pytest
import tensorflow as tf

from adpue_tf import risks
from adpue_tf.labels import pack_e, pack_pu
from adpue_tf.recommend import stage

#: (stage, net) of the pass: two stages (the nets of a mapping), each with its own θ̂.
JOBS = [(0, "theta"), (0, "bce_w"), (1, "brier"), (1, "exposed_pu"), (0, "likelihood"),
        (1, "likelihood")]


def _batch(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Labels ``[W, E, source, θ̂ of stage 0, θ̂ of stage 1, part]`` and one logit per job."""
    rng = np.random.default_rng(seed)
    n_pu, n_e = 30, 26
    packed = np.concatenate([pack_pu((rng.random(n_pu) < .4).astype(int)),
                             pack_e((rng.random(n_e) < .5).astype(int))])
    theta = rng.uniform(.1, .9, size=(n_pu + n_e, 2))
    fold = rng.integers(-1, 1, size=(n_pu + n_e, 1))  # 0: held out; -1: a training row
    y = np.concatenate([packed, theta, fold], axis=1).astype(np.float32)
    z = rng.normal(size=(n_pu + n_e, len(JOBS))).astype(np.float32)
    return y, z


def _softplus(v: np.ndarray) -> np.ndarray:
    return np.logaddexp(0.0, v)


def _reference(y: np.ndarray, z: np.ndarray) -> float:
    """The pass's objective in NumPy: each net's risk on the training rows."""
    y, z = y.astype(np.float64), z.astype(np.float64)
    w, e, src, fold = y[:, 0], y[:, 1], y[:, 2], y[:, -1]
    total = 0.0
    for j, (s, name) in enumerate(JOBS):
        keep = fold != 0
        pu, ex = keep & (src == 0), keep & (src == 1)
        zj = z[:, j]
        if name == "theta":
            total += np.mean(_softplus(zj[ex]) - e[ex] * zj[ex])
        elif name == "bce_w":
            total += np.mean(w[pu] * _softplus(-zj[pu]) + (1 - w[pu]) * _softplus(zj[pu]))
        elif name == "brier":
            f = 1 / (1 + np.exp(-zj))
            total += np.mean(e[ex] * f[ex] ** 2) - 2 * np.mean(w[pu] * f[pu])
        else:  # the library's own risk on the kept rows alone (cut out, not weighted)
            cols = [0, 1, 2] + ([3 + s] if name == "likelihood" else [])
            fn = (risks.exposure_likelihood if name == "likelihood"
                  else functools.partial(risks.exposed_pu, gamma=1.0))
            total += float(fn(y[keep][:, cols].astype(np.float32),
                              z[keep, j:j + 1].astype(np.float32), from_logits=True).loss)
    return total


def _objective(y: np.ndarray, z: np.ndarray, mode: str) -> float:
    loss = stage._Joint(JOBS)
    if mode == "eager":
        return float(loss(tf.constant(y), tf.constant(z)))
    fn = tf.function(loss, jit_compile=mode == "xla")
    return float(fn(tf.constant(y), tf.constant(z)))


@pytest.mark.parametrize("mode", ["eager", "graph", "xla"])
def test_each_net_is_trained_on_the_training_rows(mode):
    """The summed objective is each net's risk over the training rows (NumPy reference)."""
    y, z = _batch()
    np.testing.assert_allclose(_objective(y, z, mode), _reference(y, z), rtol=1e-5)


def test_the_gradient_reaches_only_the_kept_rows():
    """A held-out row's logit gets no gradient from any net."""
    y, z = _batch(seed=1)
    zt = tf.Variable(z)
    with tf.GradientTape() as tape:
        value = stage._Joint(JOBS)(tf.constant(y), zt)
    grad = tape.gradient(value, zt).numpy()
    held = y[:, -1] == 0
    for j in range(len(JOBS)):
        assert held.any() and np.all(grad[held, j] == 0.0)
        assert np.any(grad[~held, j] != 0.0)


def test_the_pass_keeps_the_batchs_static_shape():
    """No row is cut out: the traced objective has no dynamic-size op (XLA compiles less)."""
    y, z = _batch()
    fn = tf.function(stage._Joint(JOBS))
    graph = fn.get_concrete_function(tf.constant(y), tf.constant(z)).graph
    dynamic = {op.type for op in graph.get_operations()} & {"Where", "GatherV2"}
    assert not dynamic, dynamic
