"""The core on the Keras backend of this process: run by tests/test_backends.py with KERAS_BACKEND set.

Not collected by the suite itself (its name does not start with ``test_``):
Keras fixes its backend at import, so tests/test_backends.py runs this file in
a fresh ``pytest`` per backend (``KERAS_BACKEND=jax``, ``torch``). The values
and gradients are checked against the NumPy reference of tests/reference.py,
the training run against TensorFlow's weights (tests/backend_scenario.py,
computed by the parent under TensorFlow and passed in ``ADPUE_TF_REFERENCE``).
"""

from __future__ import annotations

import os
import subprocess
import sys

import keras
import numpy as np
import pytest

import adpue_tf as adp
from adpue_tf import losses as losses_lib

import backend_scenario
import reference as ref
from conftest import mixed_batch

BACKEND = keras.backend.backend()

#: (reference name, loss key, options): every risk family, corrected or not.
CASES = [
    ("nnpue", "adpue", {}),
    ("nnpue", "adpue", {"beta": 0.05, "gamma": 0.5}),
    ("nnpe", "adpe", {"prior": 0.3}),
    ("fpue", "adfpu", {"prior": 0.4}),
    ("ads", "ads", {}),
    ("adss", "adss", {}),
    ("double_adss", "double_adss", {"alpha": 0.3}),
    ("ad3se", "ad3se", {"alpha": 0.6, "gamma": 1.0}),
    ("logit", "logit", {}),
    ("nnpu", "nnpu", {"prior": 0.35}),
    ("nnpu", "nnpu", {"prior": 0.7, "surrogate": "sigmoid"}),
    ("pnu", "pnu", {"prior": 0.45, "eta": -0.4}),
]
IDS = [f"{k}-{'-'.join(f'{a}{b}' for a, b in o.items())}" for _, k, o in CASES]


def _batch():
    y = mixed_batch(0)
    z = np.random.default_rng(1).normal(0.0, 1.5, size=(len(y), 1)).astype(np.float32)
    return y, z


def _batch_for(name, loss):
    """The mixed batch, restricted to the sources ``loss`` reads or ignores."""
    y, z = _batch()
    allowed = [int(s) for s in (*loss.reads, *loss.ignores)]
    keep = np.isin(y[:, 2], allowed) if allowed else np.ones(len(y), bool)
    return y[keep], z[keep]


def value_and_grad(fn, z, traced=False):
    """``fn(z)`` and its gradient with respect to ``z``, on this backend (traced: under jit)."""
    if BACKEND == "jax":
        import jax

        vg = jax.value_and_grad(lambda t: fn(t))
        value, grad = (jax.jit(vg) if traced else vg)(jax.numpy.asarray(z))
        return float(value), np.asarray(grad).reshape(-1)
    if BACKEND == "torch":
        import torch

        t = torch.tensor(z, requires_grad=True)
        value = fn(t)
        value.backward()
        return float(value.detach()), t.grad.numpy().reshape(-1)
    import tensorflow as tf

    var = tf.Variable(z)
    with tf.GradientTape() as tape:
        value = fn(var)
    return float(value), tape.gradient(value, var).numpy().reshape(-1)


def test_the_backend_is_not_tensorflow():
    assert BACKEND in ("jax", "torch") and BACKEND == os.environ["KERAS_BACKEND"]


@pytest.mark.parametrize("name,key,opts", CASES, ids=IDS)
def test_values_and_gradients_match_the_reference(name, key, opts):
    loss = losses_lib.get(key, from_logits=True, **opts)
    y, z = _batch_for(name, loss)
    risk, pos, neg, fired = ref.value(name, y, z, **opts)
    terms = loss.terms(y, z)
    np.testing.assert_allclose(
        [float(terms.risk), float(terms.positive), float(terms.negative), float(terms.fired)],
        [risk, pos, neg, fired], rtol=1e-5, atol=1e-6)
    d0 = ref.sig(z.astype(np.float64).reshape(-1))  # f† = σ(z), its gradient stopped
    expected = ref.num_grad(lambda zz: ref.objective(name, y, zz, d0, **opts), z)
    for traced in ((False, True) if BACKEND == "jax" else (False,)):
        value, grad = value_and_grad(lambda t: loss(y, t), z, traced=traced)
        np.testing.assert_allclose(value, risk, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(grad, expected, rtol=1e-4, atol=1e-6)


def test_probabilities_give_the_same_risk_as_their_logits():
    y, z = _batch_for("nnpue", adp.ADPUELoss())
    p = 1.0 / (1.0 + np.exp(-z.astype(np.float64)))
    a = float(adp.ADPUELoss(from_logits=True)(y, z))
    b = float(adp.ADPUELoss(from_logits=False)(y, p.astype(np.float32)))
    np.testing.assert_allclose(a, b, rtol=1e-4)
    with pytest.raises(ValueError, match="outside \\[0, 1\\]"):
        adp.ADPUELoss(from_logits=False)(y, z * 3.0)


@pytest.mark.parametrize("traced", [False, True])
def test_never_silent_in_eager_and_traced_calls(traced):
    if traced and BACKEND != "jax":
        pytest.skip("only JAX traces a loss here")
    loss = adp.ADPUELoss(from_logits=True)
    y, z = _batch_for("nnpue", loss)
    bad_z = z.copy()
    bad_z[0] = np.nan
    with pytest.raises(Exception, match="the loss is NaN or infinite|not finite"):
        value_and_grad(lambda t: loss(y, t), bad_z, traced=traced)
    huge = z * 1e6
    with pytest.raises(Exception, match="holds NaN, infinite or exploded values"):
        value_and_grad(lambda t: loss(y, t), huge, traced=traced)
    bad_y = y.copy()
    bad_y[0, 0] = 2.0
    with pytest.raises(Exception, match="must hold only 0 and 1"):
        value_and_grad(lambda t: loss(bad_y, t), z, traced=traced)
    only_e = y[y[:, 2] == 1]
    with pytest.raises(Exception, match="needs rows of PU and E"):
        value_and_grad(lambda t: loss(only_e, t), z[y[:, 2] == 1], traced=traced)


def test_metrics_on_this_backend():
    y = adp.pack_labels(adp.Source.PU, w=[1, 0], dagger=[0.5, 0.5])
    m = adp.validation.ExposureLikelihood(from_logits=True)
    m.update_state(y, np.zeros((2, 1), np.float32))
    assert round(float(m.result()), 4) == 0.837  # mean of -log(0.25) and -log(0.75)
    loss = adp.ADPUELoss(from_logits=True)
    yb, zb = _batch_for("nnpue", loss)
    tracked = adp.metrics.risk_metrics(loss)
    for metric in tracked:
        metric.update_state(yb, zb)
    risk, pos, neg, fired = ref.value("nnpue", yb, zb)
    np.testing.assert_allclose([float(v.result()) for v in tracked], [risk, pos, neg, fired],
                               rtol=1e-5, atol=1e-6)


def test_training_gives_tensorflows_weights():
    """DebiasedModel + RefreshDagger (every 2 steps; every epoch with BestRound) as on TensorFlow."""
    reference = np.load(os.environ["ADPUE_TF_REFERENCE"])
    got = backend_scenario.run()
    assert sorted(got) == sorted(reference.files)
    for key in reference.files:
        np.testing.assert_allclose(got[key], reference[key], rtol=1e-5, atol=2e-6, err_msg=key)


def _model():
    """A linear net trained one epoch (a linear output explodes with its features)."""
    x, y = backend_scenario.batches()
    net = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    net.set_weights([np.full((4, 1), 0.1, np.float32), np.zeros(1, np.float32)])
    model = adp.DebiasedModel(net, initial_dagger=0.3)
    model.compile("adam", loss=adp.ADPUELoss(from_logits=True))
    model.fit(backend_scenario.dataset(x, y), epochs=1, verbose=0,
              callbacks=[adp.RefreshDagger()])
    return model, x, y


@pytest.mark.parametrize("kind", ["nan", "exploded", "labels"])
def test_a_bad_batch_stops_fit_before_the_weights_change(kind):
    model, x, y = _model()
    before = [w.copy() for w in model.net.get_weights()]
    if kind == "nan":
        x = x.copy()
        x[10, 1] = np.nan  # in the first batch: no step is taken
        expected, match = ValueError, "NaN or inf|NaN or infinite value"
    elif kind == "exploded":
        x = x * 1e30
        expected, match = adp.losses.DivergedError, "exploded values"
    else:
        y = y.copy()
        y[10, 0] = 2.0
        expected, match = ValueError, "must hold only 0 and 1"
    with pytest.raises(expected, match=match) as info:
        model.fit(backend_scenario.dataset(x, y), epochs=1, verbose=0,
                  callbacks=[adp.RefreshDagger()])
    assert adp.losses.is_divergence(info.value) == (kind == "exploded")
    after = model.net.get_weights()
    assert all(np.array_equal(a, b) for a, b in zip(before, after))
    model.fit(backend_scenario.dataset(*backend_scenario.batches()), epochs=1, verbose=0)


def test_saved_and_loaded(tmp_path):
    model, x, _ = _model()
    path = str(tmp_path / "m.keras")
    model.save(path)
    back = keras.models.load_model(path)
    assert (back.refreshes, back.dagger_mode) == (model.refreshes, model.dagger_mode)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(back.predict(x[:20], verbose=0)),
                               keras.ops.convert_to_numpy(model.predict(x[:20], verbose=0)),
                               rtol=1e-6)


def test_with_propensity_takes_a_keras_model_on_this_backend():
    """The IPS recipe: a Keras exposure model inside the tf.data map failed on JAX and PyTorch
    (a symbolic TF tensor given to the backend's model)."""
    s = adp.synthetic.synthetic_pue(400, 400, dim=2, seed=0)
    ds = adp.data.pue_dataset(s.x_pu, s.w_pu, s.x_e, s.e_e, batch_size=100, seed=0)
    theta = adp.exposure.fit_exposure_model(s.x_e, s.e_e)
    x, y = next(iter(adp.data.with_propensity(ds, theta)))
    assert tuple(y.shape) == (100, 4)
    np.testing.assert_allclose(y.numpy()[:, 3], keras.ops.convert_to_numpy(
        theta.predict(x.numpy(), verbose=0)).ravel(), rtol=1e-6, atol=1e-7)
    batches = adp.data.with_propensity(ds, theta)
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile("sgd", loss=adp.IPSLoss(from_logits=True))
    assert np.isfinite(model.fit(batches, epochs=1, verbose=0).history["loss"][0])


def test_fit_pue_recovers_p_on_this_backend():
    """fit_pue on this backend: its candidates train, its choice beats BCE on W against the truth.

    The backends' random streams differ (initial weights, shuffles), so the
    same seed gives another model than on TensorFlow; its quality is measured
    (TensorFlow, same data and call: MAE 0.249 against 0.321 for ``bce_w``).
    """
    s = adp.synthetic.synthetic_pue(2000, 2000, dim=4, seed=0)
    fit = adp.fit_pue(lambda: keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)]),
                      s.x_pu, s.w_pu, s.x_e, s.e_e, epochs=4, batch_size=512, min_steps=100,
                      verbose=0, candidates=["bce_w", "brier", "likelihood", "ratio", "blend"])
    assert set(fit.scores) == {"bce_w", "brier", "likelihood", "ratio", "blend"} and not fit.failed

    def mae(model):
        z = np.asarray(keras.ops.convert_to_numpy(model.predict(s.x_pu, verbose=0))).ravel()
        return float(np.mean(np.abs(1 / (1 + np.exp(-z)) - s.p_y_pu)))

    assert mae(fit.model) < mae(fit.candidates["bce_w"]) - 0.02
    assert mae(fit.model) < 0.30


def test_served_by_tensorflow_as_trained(tmp_path):
    """The SavedModel of a model trained here gives its outputs in a fresh TensorFlow process."""
    model, x, _ = _model()
    target = str(tmp_path / "export" / "m" / "1")
    if BACKEND == "torch":
        with pytest.raises(RuntimeError, match="'torch'"):
            adp.serving.export_for_serving(model, target)
        return
    adp.serving.export_for_serving(model, target, warmup_rows=x[:4])
    np.save(tmp_path / "x.npy", x[:64])
    code = ("import numpy as np, tensorflow as tf\n"
            f"f = tf.saved_model.load({target!r}).signatures['serving_default']\n"
            f"out = f(features=tf.constant(np.load({str(tmp_path / 'x.npy')!r})))\n"
            f"np.save({str(tmp_path / 'logit.npy')!r}, out['logit'].numpy())\n"
            f"np.save({str(tmp_path / 'p.npy')!r}, out['probability'].numpy())\n")
    env = {**os.environ, "KERAS_BACKEND": "tensorflow", "TF_CPP_MIN_LOG_LEVEL": "3"}
    subprocess.run([sys.executable, "-c", code], check=True, env=env, timeout=300)
    z = np.asarray(keras.ops.convert_to_numpy(model.predict(x[:64], verbose=0)))
    np.testing.assert_allclose(np.load(tmp_path / "logit.npy"), z, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.load(tmp_path / "p.npy"), 1.0 / (1.0 + np.exp(-z)),
                               rtol=1e-5, atol=1e-6)
