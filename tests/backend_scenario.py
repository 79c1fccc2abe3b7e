"""A training run that every Keras backend must reproduce: DebiasedModel, RefreshDagger, BestRound.

Imported by tests/test_backends.py (on TensorFlow, for the reference weights)
and by tests/backend_suite.py (on the backend under test). The batches are
fixed arrays (no reshuffling: Keras's JAX and PyTorch ``fit`` read one batch
before the first epoch to build the model, which would draw another shuffle).
"""

from __future__ import annotations

import numpy as np


def batches():
    """600 PU and E rows (four features) in a fixed order, as ``(x, y)`` arrays.

    Built with NumPy alone: a shuffle of ``tf.data`` would read TensorFlow's
    global seed, which differs between the processes.
    """
    import adpue_tf as adp

    s = adp.synthetic.synthetic_pue(300, 300, dim=4, seed=0)
    x = np.concatenate([s.x_pu, s.x_e]).astype(np.float32)
    y = np.concatenate([adp.labels.pack_pu(s.w_pu), adp.labels.pack_e(s.e_e)])
    order = np.random.default_rng(0).permutation(len(y))
    return x[order], y[order].astype(np.float32)


def dataset(x, y):
    import tensorflow as tf

    return tf.data.Dataset.from_tensor_slices((x, y)).batch(100)


def net():
    """A 4-8-1 tanh net with fixed weights."""
    import keras

    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8, activation="tanh"),
                              keras.layers.Dense(1)])
    rng = np.random.default_rng(0)
    model.set_weights([rng.normal(size=w.shape).astype(np.float32) * 0.5
                       for w in model.get_weights()])
    return model


def run() -> dict[str, np.ndarray]:
    """Train twice: refreshes every 2 steps (Adam); every epoch, with BestRound (SGD)."""
    import keras

    import adpue_tf as adp

    x, y = batches()
    ds = dataset(x, y)
    first = adp.DebiasedModel(net(), initial_dagger=0.3)
    first.compile(keras.optimizers.Adam(0.01), loss=adp.ADPUELoss(from_logits=True))
    history = first.fit(ds, epochs=2, verbose=0,
                        callbacks=[adp.RefreshDagger(every_n_steps=2)])
    second = adp.DebiasedModel(net(), initial_dagger=0.3)
    second.compile(keras.optimizers.SGD(0.1), loss=adp.ADPUELoss(from_logits=True))
    best = adp.callbacks.BestRound(monitor="risk")  # a round's training risk (DebiasedModel logs it)
    second.fit(ds, epochs=3, verbose=0, callbacks=[adp.RefreshDagger(), best])
    out = {f"first_{i}": w for i, w in enumerate(first.net.get_weights())}
    out.update({f"snapshot_{i}": w for i, w in enumerate(first.snapshot.get_weights())})
    out.update({f"second_{i}": w for i, w in enumerate(second.net.get_weights())})
    out["loss"] = np.asarray(history.history["loss"])
    out["refreshes"] = np.asarray([first.refreshes, first.dagger_mode, second.refreshes])
    out["rounds"] = np.asarray(best.rounds, dtype=np.float64)
    out["best_round"] = np.asarray(best.best_round)
    return out
