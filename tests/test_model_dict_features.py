"""DebiasedModel, RefreshDagger and the risk metrics over a Keras functional model of a feature dict.

The net takes int64 ids through an ``Embedding``, string ids through a
``StringLookup`` and a float vector; data come from ``pue_dataset`` over dicts
of arrays (a few thousand rows). The risk is checked against a NumPy
reference of nnPUE with ``f†`` read from the snapshot / initial model.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

keras = pytest.importorskip("keras")
import adpue_tf as adp  # noqa: E402
from adpue_tf.labels import Source  # noqa: E402
from adpue_tf.model import INITIAL, SNAPSHOT  # noqa: E402

DEVICES = ["android", "ios", "web"]
N = 2000


def _features(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    return {"user_id": rng.integers(0, 40, n).astype(np.int64),
            "device": np.array(DEVICES, dtype=object)[rng.integers(0, 3, n)].astype(bytes),
            "context": rng.normal(size=(n, 3)).astype(np.float32)}


def _net(seed: int) -> keras.Model:
    keras.utils.set_random_seed(seed)
    inputs = {"user_id": keras.Input((), dtype="int64", name="user_id"),
              "device": keras.Input((), dtype="string", name="device"),
              "context": keras.Input((3,), dtype="float32", name="context")}
    user = keras.layers.Embedding(40, 4)(inputs["user_id"])
    device = keras.layers.StringLookup(vocabulary=DEVICES, output_mode="one_hot")(
        inputs["device"])
    h = keras.layers.Concatenate()([user, device, inputs["context"]])
    h = keras.layers.Dense(8, activation="relu")(h)
    return keras.Model(inputs, keras.layers.Dense(1)(h))


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    x_pu, x_e = _features(N, rng), _features(N, rng)
    w = (rng.random(N) < 0.2).astype(np.int64)
    e = (rng.random(N) < 0.5).astype(np.int64)
    ds = adp.data.pue_dataset(x_pu, w, x_e, e, batch_size=500, seed=0)
    return ds


def _softplus(z):
    return np.logaddexp(0.0, z)


def _nnpue_reference(z, y, dagger):
    """nnPUE (SPEC 1) in NumPy: R+ + max(R-, 0), f† per row, a = f†·(1 - E)."""
    z, w, e, src = z.astype(np.float64).ravel(), y[:, 0], y[:, 1], y[:, 2]
    pu, ex = src == int(Source.PU), src == int(Source.E)
    l1, l0 = _softplus(-z), _softplus(z)
    a = dagger * (1.0 - e)
    r_pos = (w * l1)[pu].mean() + (a * l1)[ex].mean()
    r_neg = ((1.0 - w) * l0)[pu].mean() - (a * l0)[ex].mean()
    return r_pos + max(r_neg, 0.0), r_pos, r_neg


def _sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z.astype(np.float64).ravel()))


@pytest.mark.parametrize("run_eagerly", [False, True])
def test_refresh_fills_dagger_from_snapshot_of_dict_net(data, run_eagerly):
    model = adp.DebiasedModel(_net(1), initial_dagger=0.5)
    model.compile(optimizer=keras.optimizers.Adam(0.01), loss=adp.ADPUELoss(from_logits=True),
                  run_eagerly=run_eagerly)
    model.fit(data, epochs=2, verbose=0, callbacks=[adp.RefreshDagger()])
    assert (model.refreshes, model.dagger_mode) == (2, SNAPSHOT)
    x, y = next(iter(data))
    # after the last refresh the snapshot equals the net
    np.testing.assert_array_equal(model.snapshot(x).numpy(), model.net(x).numpy())
    # one more step moves the net away from the snapshot; the risk uses the snapshot's f†
    model.fit(data.take(1), epochs=1, verbose=0)
    z, z_snap = model.net(x).numpy(), model.snapshot(x).numpy()
    assert np.abs(z - z_snap).max() > 1e-4
    risk, r_pos, r_neg = _nnpue_reference(z, y.numpy(), _sigmoid(z_snap))
    got = model.compute_loss(x, y, model(x))
    np.testing.assert_allclose(float(got), risk, rtol=1e-5)
    direct = _nnpue_reference(z, y.numpy(), _sigmoid(z))[0]
    assert abs(direct - risk) > 1e-6  # the snapshot's f† is not the net's own


def test_initial_model_over_dict_gives_dagger_until_first_refresh(data):
    guess = _net(7)
    model = adp.DebiasedModel(_net(1), initial_dagger=guess)
    model.compile(optimizer="adam", loss=adp.ADPUELoss(from_logits=True))
    assert model.dagger_mode == INITIAL
    x, y = next(iter(data))
    z = model.net(x).numpy()
    risk = _nnpue_reference(z, y.numpy(), _sigmoid(guess(x).numpy()))[0]
    np.testing.assert_allclose(float(model.compute_loss(x, y, model(x))), risk, rtol=1e-5)
    model.fit(data, epochs=1, verbose=0, callbacks=[adp.RefreshDagger()])
    assert (model.refreshes, model.dagger_mode) == (1, SNAPSHOT)


def test_keras_round_trip_of_dict_debiased_model(data, tmp_path):
    model = adp.DebiasedModel(_net(1), initial_dagger=_net(3))
    model.compile(optimizer=keras.optimizers.Adam(0.01), loss=adp.ADPUELoss(from_logits=True))
    model.fit(data, epochs=2, verbose=0, callbacks=[adp.RefreshDagger()])
    model.fit(data.take(1), epochs=1, verbose=0)  # net != snapshot when saved
    path = tmp_path / "dict.keras"
    model.save(path)
    loaded = keras.models.load_model(path)
    assert isinstance(loaded, adp.DebiasedModel)
    assert (loaded.refreshes, loaded.dagger_mode) == (2, SNAPSHOT)
    x, y = next(iter(data))
    for a, b in ((loaded.net, model.net), (loaded.snapshot, model.snapshot),
                 (loaded.initial_model, model.initial_model)):
        np.testing.assert_array_equal(a(x).numpy(), b(x).numpy())
    np.testing.assert_allclose(float(loaded.compute_loss(x, y, loaded(x))),
                               float(model.compute_loss(x, y, model(x))), rtol=1e-6)
    preds = loaded.predict(tf.data.Dataset.from_tensors(x), verbose=0)
    np.testing.assert_allclose(preds, model.net(x).numpy(), rtol=1e-6, atol=1e-6)
    loaded.fit(data, epochs=1, verbose=0, callbacks=[adp.RefreshDagger()])
    assert loaded.refreshes == 3


def test_risk_metrics_of_plain_dict_model_match_reference(data):
    net = _net(2)
    loss = adp.ADPUELoss(from_logits=True)
    net.compile(optimizer="sgd", loss=loss, metrics=adp.metrics.risk_metrics(loss))
    x, y = next(iter(data))
    logs = net.evaluate(tf.data.Dataset.from_tensors((x, y)), verbose=0, return_dict=True)
    z = net(x).numpy()
    risk, r_pos, r_neg = _nnpue_reference(z, y.numpy(), _sigmoid(z))
    np.testing.assert_allclose([logs["risk"], logs["r_pos"], logs["r_neg"]],
                               [risk, r_pos, r_neg], rtol=1e-5)
    assert logs["nn_fired"] == float(r_neg < 0)


def test_nan_in_dict_float_feature_is_refused(data):
    model = adp.DebiasedModel(_net(1))
    model.compile(optimizer="sgd", loss=adp.ADPUELoss(from_logits=True))
    x, y = next(iter(data))
    bad = dict(x, context=tf.tensor_scatter_nd_update(x["context"], [[0, 0]], [np.nan]))
    before = [v.numpy().copy() for v in model.net.weights]
    with pytest.raises((ValueError, tf.errors.InvalidArgumentError), match="finite|NaN"):
        model.fit(tf.data.Dataset.from_tensors((bad, y)), epochs=1, verbose=0)
    for v, b in zip(model.net.weights, before):
        np.testing.assert_array_equal(v.numpy(), b)
