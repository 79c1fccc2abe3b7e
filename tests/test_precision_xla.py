"""Mixed precision and XLA: the losses and DebiasedModel under dtype policies and jit_compile.

* ``mixed_float16`` / ``mixed_bfloat16``: the risk stays float32, Keras wraps the
  optimizer in a ``LossScaleOptimizer`` for float16, training lands close to a
  float32 run, and one SGD step applies the float32 gradient (scaled for the
  float16 backward pass, unscaled before the update).
* ``jit_compile=True``: every loss class trains under XLA and gives the same
  weights as without it; DebiasedModel + RefreshDagger compiles once and does
  not retrace when the source of ``f†`` switches.

The global dtype policy is always restored to ``float32`` (fixture).
"""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf
from keras import ops

import adpue_tf as adp
from adpue_tf import model as model_lib
from adpue_tf import synthetic

pytestmark = pytest.mark.slow

DIM = 4
MIXED = ["mixed_float16", "mixed_bfloat16"]


@pytest.fixture
def policy(request):
    """Set the global dtype policy named by the test's parameter; restore float32 after."""
    keras.mixed_precision.set_dtype_policy(request.param)
    try:
        yield request.param
    finally:
        keras.mixed_precision.set_dtype_policy("float32")


@pytest.fixture(scope="module")
def pue():
    return synthetic.synthetic_pue(1200, 1200, dim=DIM, seed=1)


def _pue_ds(s, batch_size=200, **kw):
    # Built afresh for each run: a reshuffling stream advances its shuffle
    # sequence every time the same Dataset object is iterated again.
    return adp.data.pue_dataset(s.x_pu, s.w_pu, s.x_e, s.e_e, batch_size=batch_size,
                                seed=0, **kw)


def _mlp(seed=0):
    keras.utils.set_random_seed(seed)
    return keras.Sequential([keras.Input((DIM,)), keras.layers.Dense(16, activation="relu"),
                             keras.layers.Dense(1)])


def _prob(model, x):
    out = ops.cast(model(x), "float32")  # eager call: no predict function to trace
    return ops.convert_to_numpy(ops.sigmoid(out)).ravel()


def _train(s, policy_name, debiased, epochs=3):
    """Train from seed 0 under ``policy_name``; return (model, history, probabilities)."""
    keras.mixed_precision.set_dtype_policy(policy_name)
    try:
        net = _mlp(0)
        model = adp.DebiasedModel(net) if debiased else net
        model.compile(keras.optimizers.SGD(0.5), loss=adp.ADPUELoss(from_logits=True))
        callbacks = [adp.RefreshDagger()] if debiased else []
        hist = model.fit(_pue_ds(s), epochs=epochs, verbose=0, callbacks=callbacks)
        return model, hist.history, _prob(model, s.x_pu)
    finally:
        keras.mixed_precision.set_dtype_policy("float32")


# ---------------------------------------------------------------- mixed precision
@pytest.mark.parametrize("policy", MIXED, indirect=True)
def test_loss_is_float32_under_mixed_policy(pue, policy):
    x, y = next(iter(_pue_ds(pue)))
    net = _mlp(0)
    model = adp.DebiasedModel(net)
    model.compile(keras.optimizers.SGD(0.1), loss=adp.ADPUELoss(from_logits=True))
    out = model(x)
    assert model.dtype_policy.name == policy
    assert keras.backend.standardize_dtype(out.dtype) == policy.split("_")[1]
    assert keras.backend.standardize_dtype(model.loss(y, out).dtype) == "float32"
    total = model.compute_loss(x=x, y=y, y_pred=out)
    assert keras.backend.standardize_dtype(total.dtype) == "float32"
    if policy == "mixed_float16":
        assert isinstance(model.optimizer, keras.optimizers.LossScaleOptimizer)
    else:  # bfloat16 has float32's range: no loss scaling
        assert not isinstance(model.optimizer, keras.optimizers.LossScaleOptimizer)


# Measured (CPU, 3 epochs x 12 steps of SGD(0.5), 1200 PU rows): mean |Δp| to
# float32 5e-4 (Sequential) / 7e-5 (DebiasedModel) for mixed_float16 and 8e-4 /
# 9e-4 for mixed_bfloat16; max |Δp| <= 5.2e-3; epoch losses within 2.5e-4.
# Margins: mean < 5e-3, max < 0.03, losses within 2e-3.
@pytest.mark.parametrize("debiased", [False, True], ids=["sequential", "debiased"])
def test_mixed_precision_training_matches_float32(pue, debiased):
    ref_model, ref_hist, ref = _train(pue, "float32", debiased)
    for name in MIXED:
        model, hist, got = _train(pue, name, debiased)
        assert (name == "mixed_float16") == isinstance(model.optimizer,
                                                       keras.optimizers.LossScaleOptimizer)
        assert np.all(np.isfinite(hist["loss"]))
        np.testing.assert_allclose(hist["loss"], ref_hist["loss"], atol=2e-3)
        delta = np.abs(got - ref)
        assert delta.mean() < 5e-3, (name, delta.mean())
        assert delta.max() < 0.03, (name, delta.max())
        if debiased:
            assert model.refreshes == ref_model.refreshes == 3
            assert model.dagger_mode == model_lib.SNAPSHOT
        # the model learned something: far from its initial predictions
        assert np.abs(got - _prob(_mlp(0), pue.x_pu)).mean() > 0.05


TINY = 2.0 ** -20  # output kernel: float16 backprop underflows without loss scaling


def _tiny_net():
    return keras.Sequential([
        keras.Input((DIM,)),
        keras.layers.Dense(8, activation="relu",
                           kernel_initializer=keras.initializers.RandomNormal(0.0, 1.0, seed=3),
                           bias_initializer=keras.initializers.Constant(0.5)),
        keras.layers.Dense(1, kernel_initializer=keras.initializers.Constant(TINY)),
    ])


def _one_sgd_step(policy_name, debiased, batch, auto_scale_loss=True):
    """Weight changes of one SGD step (``-LR * gradient``) from fixed weights; and the model.

    ``LR = 1 / TINY`` lifts the ~1e-9 first-layer gradients above float32's
    resolution of weights ~1, so the weight change shows the applied gradient.
    """
    keras.mixed_precision.set_dtype_policy(policy_name)
    try:
        net = _tiny_net()
        model = adp.DebiasedModel(net) if debiased else net
        model.compile(keras.optimizers.SGD(1.0 / TINY), loss=adp.ADPUELoss(from_logits=True),
                      auto_scale_loss=auto_scale_loss)
        x, y = batch
        before = [w.copy() for w in net.get_weights()]
        model.train_on_batch(x, y)
        return [a - b for a, b in zip(net.get_weights(), before)], model
    finally:
        keras.mixed_precision.set_dtype_policy("float32")


@pytest.mark.parametrize("debiased", [False, True], ids=["sequential", "debiased"])
def test_loss_scaling_applies_the_float32_gradient(pue, debiased):
    x, y = next(iter(_pue_ds(pue)))
    batch = (x.numpy(), y.numpy())
    ref, _ = _one_sgd_step("float32", debiased, batch)
    scaled, model = _one_sgd_step("mixed_float16", debiased, batch)
    assert isinstance(model.optimizer, keras.optimizers.LossScaleOptimizer)
    assert int(model.optimizer.iterations) == 1  # the step was applied, not skipped
    # The scale stayed at its initial 2**15 (no overflow): the gradients were
    # computed on loss * 2**15 and divided by it before the update.
    assert float(model.optimizer.dynamic_scale) == 2.0 ** 15
    # The backward pass through the output kernel gives per-row float16 values
    # dL/dh ~ (σ(z) - w) / 100 * TINY ~ 5e-9, below float16's smallest subnormal
    # (6e-8): the first layer's gradient (a sum over rows, ~1e-7) exists only
    # thanks to the scale.
    assert 0 < TINY * np.abs(ref[0]).max() < 1e-6
    for got, want in zip(scaled, ref):
        np.testing.assert_allclose(got, want, rtol=2e-2, atol=1e-3 * np.abs(want).max())
    if debiased:
        return  # the underflow below is a property of the net, shown once
    # Without loss scaling the float16 backward pass underflows to exactly 0.
    unscaled, model = _one_sgd_step("mixed_float16", debiased, batch, auto_scale_loss=False)
    assert not isinstance(model.optimizer, keras.optimizers.LossScaleOptimizer)
    assert np.all(unscaled[0] == 0.0) and np.all(unscaled[1] == 0.0)
    # output layer: no underflow
    np.testing.assert_allclose(unscaled[2], ref[2], rtol=2e-2, atol=1e-3 * np.abs(ref[2]).max())


# ---------------------------------------------------------------- XLA
@pytest.fixture(scope="module")
def datasets():
    """One tiny packed dataset per setting (2 batches of 48 rows, deterministic)."""
    s = synthetic.synthetic_pue(96, 96, dim=DIM, seed=2)
    sse = synthetic.synthetic_sse(96, dim=DIM, seed=3)
    x_p = s.x_pu[s.w_pu == 1]
    kw = {"batch_size": 48, "shuffle": False, "steps_per_epoch": 2}
    return {
        "pue": adp.data.pue_dataset(s.x_pu, s.w_pu, s.x_e, s.e_e, **kw),
        "pe": adp.data.pe_dataset(x_p, s.x_e, s.e_e, **kw),
        "fpue": adp.data.fpue_dataset(x_p, s.x_pu, s.x_e, s.e_e, **kw),
        "sse": adp.data.sse_dataset(sse.x, sse.w, sse.e, **kw),
        "sse_pu": adp.data.sse_pu_dataset(sse.x, sse.w, sse.e, s.x_pu, s.w_pu, **kw),
    }


LOSSES = [
    (lambda: adp.ADPUELoss(from_logits=True), "pue"),
    (lambda: adp.ADPELoss(prior=0.2, from_logits=True), "pe"),
    (lambda: adp.ADFPULoss(prior=0.2, from_logits=True, gamma=0.5), "fpue"),
    (lambda: adp.ADSLoss(from_logits=True), "sse"),
    (lambda: adp.ADSSLoss(from_logits=True), "sse"),
    (lambda: adp.DoubleADSSLoss(alpha=0.3, from_logits=True), "sse"),
    (lambda: adp.AD3SELoss(alpha=0.6, from_logits=True), "sse_pu"),
    (lambda: adp.LogitLoss(from_logits=True), "pue"),
    (lambda: adp.UPULoss(prior=0.5, from_logits=True), "pue"),
    (lambda: adp.NNPULoss(prior=0.5, from_logits=True, gamma=1.0), "pue"),
    (lambda: adp.PNULoss(prior=0.5, eta=-0.3, from_logits=True), "sse"),
]


def _plain_net():
    keras.utils.set_random_seed(5)
    return keras.Sequential([keras.Input((DIM,)), keras.layers.Dense(4, activation="tanh"),
                             keras.layers.Dense(1)])


def _eager_sgd(make_loss, ds, lr):
    """Reference: the same net trained by eager SGD steps with tf.GradientTape."""
    net, loss_fn, losses = _plain_net(), make_loss(), []
    for x, y in ds:
        with tf.GradientTape() as tape:
            loss = loss_fn(y, net(x))
        grads = tape.gradient(loss, net.trainable_variables)
        for v, g in zip(net.trainable_variables, grads):
            v.assign_sub(lr * g)
        losses.append(float(loss))
    return net, float(np.mean(losses))


@pytest.mark.parametrize("make_loss,setting", LOSSES,
                         ids=[type(f()).__name__ for f, _ in LOSSES])
def test_every_loss_trains_under_xla(datasets, make_loss, setting):
    ds = datasets[setting]
    model = _plain_net()
    model.compile(keras.optimizers.SGD(0.5), loss=make_loss(), jit_compile=True)
    loss = model.fit(ds, epochs=1, verbose=0).history["loss"]
    assert model.jit_compile is True
    assert np.all(np.isfinite(loss))
    # XLA computes the same risk and gradients as eager execution.
    ref, ref_loss = _eager_sgd(make_loss, ds, 0.5)
    np.testing.assert_allclose(loss[0], ref_loss, rtol=1e-5, atol=1e-6)
    for a, b in zip(model.get_weights(), ref.get_weights()):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


class CountingModel(adp.DebiasedModel):
    """DebiasedModel that counts how often ``compute_loss`` runs in Python (= traces)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.traces = [0]

    def compute_loss(self, *args, **kwargs):
        self.traces[0] += 1  # Python runs only while tracing the step
        return super().compute_loss(*args, **kwargs)


class _Recorder(keras.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.rows = []

    def on_train_batch_end(self, batch, logs=None):
        self.rows.append((self.model.traces[0], self.model.dagger_mode, self.model.refreshes))


@pytest.mark.parametrize("jit", [True, False], ids=["xla", "graph"])
def test_debiased_model_compiles_once_across_refreshes(datasets, jit):
    ds = datasets["pue"]
    model = CountingModel(_plain_net())
    model.compile(keras.optimizers.SGD(0.5), loss=adp.ADPUELoss(from_logits=True),
                  jit_compile=jit)
    recorder = _Recorder()
    hist = model.fit(ds, epochs=4, verbose=0,
                     callbacks=[adp.RefreshDagger(every_n_steps=2), recorder])
    assert model.jit_compile is jit
    traces, modes, refreshes = zip(*recorder.rows)
    assert len(traces) == 8
    assert traces[0] >= 1
    assert set(traces) == {traces[0]}, traces  # no retrace after the first step
    # the source of f† switched INITIAL -> SNAPSHOT during training without a retrace
    assert modes[0] == model_lib.INITIAL and modes[-1] == model_lib.SNAPSHOT
    assert refreshes == (0, 1, 1, 2, 2, 3, 3, 4)
    assert np.all(np.isfinite(hist.history["loss"]))
    assert {"r_pos", "r_neg", "nn_fired", "risk"} <= set(hist.history)
    # A second fit reuses the compiled step as well.
    model.fit(ds, epochs=1, verbose=0, callbacks=[adp.RefreshDagger(every_n_steps=2)])
    assert model.traces[0] == traces[0]
