"""One checklist for every loss class (Keras losses_test style)."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
import keras

import adpue_tf as adp
from serialization import assert_round_trip

LOSSES = [
    (adp.ADPUELoss, {}),
    (adp.ADPUELoss, {"gamma": 1.0, "beta": 0.1}),
    (adp.ADPELoss, {"prior": 0.3}),
    (adp.ADFPULoss, {"prior": 0.3}),
    (adp.ADSLoss, {}),
    (adp.ADSSLoss, {}),
    (adp.DoubleADSSLoss, {"alpha": 0.25}),
    (adp.AD3SELoss, {"alpha": 0.75}),
    (adp.LogitLoss, {}),
    (adp.UPULoss, {"prior": 0.4}),
    (adp.NNPULoss, {"prior": 0.4}),
    (adp.PNULoss, {"prior": 0.4, "eta": -0.3}),
]
IDS = [f"{c.__name__}{'-' + str(o) if o else ''}" for c, o in LOSSES]


def test_every_public_loss_is_checked():
    public = {getattr(adp, n) for n in adp.__all__}
    classes = {c for c in public if isinstance(c, type) and issubclass(c, adp.DebiasedLoss)}
    assert classes - {adp.DebiasedLoss} == {c for c, _ in LOSSES}


@pytest.mark.parametrize("cls,opts", LOSSES, ids=IDS)
class TestLossChecklist:
    def test_config_round_trip(self, cls, opts):
        loss = cls(from_logits=True, **opts)
        revived = assert_round_trip(loss)
        assert revived.from_logits is True
        for k, v in opts.items():
            assert revived.get_config()[k] == v

    def test_value_matches_risk_function(self, cls, opts, batch):
        y, z = batch
        loss = cls(from_logits=True, **opts)
        expected = cls.risk_fn(y, z, from_logits=True, **opts).risk
        np.testing.assert_allclose(float(loss(y, z)), float(expected), rtol=1e-6)

    def test_from_logits_both_ways(self, cls, opts, batch):
        y, z = batch
        with_logits = cls(from_logits=True, **opts)(y, z)
        probs = tf.sigmoid(tf.constant(z, tf.float64)).numpy().astype(np.float32)
        with_probs = cls(from_logits=False, **opts)(y, probs)
        np.testing.assert_allclose(float(with_probs), float(with_logits), rtol=1e-4, atol=1e-5)

    @pytest.mark.parametrize("from_logits", [True, False])
    def test_finite_at_extreme_logits(self, cls, opts, batch, from_logits):
        y, _ = batch
        z = np.where(np.arange(len(y)) % 2 == 0, 1e4, -1e4).astype(np.float32)[:, None]
        pred = z if from_logits else (z > 0).astype(np.float32)
        var = tf.Variable(pred)
        loss = cls(from_logits=from_logits, **opts)
        with tf.GradientTape() as tape:
            value = loss(y, var)
        grad = tape.gradient(value, var)
        assert np.isfinite(float(value))
        assert np.all(np.isfinite(grad.numpy()))

    def test_eager_equals_tf_function(self, cls, opts, batch):
        y, z = batch
        loss = cls(from_logits=True, **opts)
        eager = float(loss(y, z))
        graph = float(tf.function(loss)(tf.constant(y), tf.constant(z)))
        np.testing.assert_allclose(graph, eager, rtol=1e-6)

    def test_float16_predictions_computed_in_float32(self, cls, opts, batch):
        y, z = batch
        loss = cls(from_logits=True, **opts)
        value = loss(y, z.astype(np.float16))
        assert value.dtype == tf.float32
        np.testing.assert_allclose(float(value), float(loss(y, z.astype(np.float16).astype(np.float32))), rtol=1e-6)

    def test_keras_save_load_compiled_model(self, cls, opts, batch, tmp_path):
        y, z = batch
        x = np.random.default_rng(0).normal(size=(len(y), 3)).astype(np.float32)
        model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
        model.compile(optimizer="sgd", loss=cls(from_logits=True, **opts))
        model.fit(x, y, batch_size=len(y), epochs=1, verbose=0)
        before = model.evaluate(x, y, batch_size=len(y), verbose=0)
        path = tmp_path / "m.keras"
        model.save(path)
        loaded = keras.models.load_model(path)
        assert isinstance(loaded.loss, cls)
        assert loaded.loss.get_config() == model.loss.get_config()
        after = loaded.evaluate(x, y, batch_size=len(y), verbose=0)
        np.testing.assert_allclose(after, before, rtol=1e-6)


BAD_OPTIONS = [
    (adp.ADPELoss, {"prior": 0.0}, ValueError, "prior"),
    (adp.ADPELoss, {"prior": 1.0}, ValueError, "prior"),
    (adp.ADFPULoss, {"prior": -0.2}, ValueError, "prior"),
    (adp.NNPULoss, {"prior": float("nan")}, ValueError, "prior"),
    (adp.UPULoss, {"prior": "0.3"}, TypeError, "prior"),
    (adp.DoubleADSSLoss, {"alpha": 1.5}, ValueError, "alpha"),
    (adp.AD3SELoss, {"alpha": -0.1}, ValueError, "alpha"),
    (adp.ADPUELoss, {"beta": -0.01}, ValueError, "beta"),
    (adp.ADPUELoss, {"gamma": 0.0}, ValueError, "gamma"),
    (adp.NNPULoss, {"prior": 0.3, "gamma": 1.5}, ValueError, "gamma"),
    (adp.PNULoss, {"prior": 0.3, "eta": 2.0}, ValueError, "eta"),
    (adp.ADPUELoss, {"from_logits": 1}, TypeError, "from_logits"),
    (adp.ADPUELoss, {"non_negative": "yes"}, TypeError, "non_negative"),
]


@pytest.mark.parametrize("cls,opts,err,name", BAD_OPTIONS)
def test_bad_options(cls, opts, err, name):
    with pytest.raises(err, match=name):
        cls(**opts)


def test_bad_options_in_risk_functions():
    y = adp.pack_labels(adp.Source.PU, w=[1, 0])
    with pytest.raises(ValueError, match="prior"):
        adp.risks.nnpu(y, [[0.0], [0.0]], prior=1.2)


@pytest.mark.parametrize(
    "y,match",
    [
        (np.zeros((4, 2), np.float32), "y_true.*shape"),
        (np.zeros((4, 5), np.float32), "y_true.*shape"),
        (np.array([[1, 0, 7]] * 4, np.float32), "unknown source"),
        (np.array([[1, 0, 2.5]] * 4, np.float32), "unknown source"),
        (np.array([[0.5, 0, 0]] * 4, np.float32), "0 and 1"),
        (np.array([[np.nan, 0, 0]] * 4, np.float32), "NaN"),
        (np.array([[1, 0, 0, 1.5]] * 4, np.float32), "dagger"),
    ],
)
def test_bad_labels_eager(y, match):
    with pytest.raises(ValueError, match=match):
        adp.ADPUELoss(from_logits=True)(y, np.zeros((4, 1), np.float32))


def test_bad_labels_graph_mode_fail_loudly():
    loss = tf.function(adp.ADPUELoss(from_logits=True))
    y = np.array([[1, 0, 9]] * 4, np.float32)
    with pytest.raises(tf.errors.InvalidArgumentError, match="unknown source"):
        loss(tf.constant(y), tf.zeros((4, 1)))


@pytest.mark.parametrize("shape", [(4, 2), (4, 1, 1), (2, 1)])
def test_bad_prediction_shape(shape):
    y = adp.pack_labels(adp.Source.PU, w=[1, 0, 1, 0])
    with pytest.raises(ValueError, match="y_pred"):
        adp.ADPUELoss(from_logits=True)(y, np.zeros(shape, np.float32))


def test_negative_sample_weight():
    y = adp.pack_labels(adp.Source.PU, w=[1, 0])
    with pytest.raises(ValueError, match="sample_weight"):
        adp.ADPUELoss(from_logits=True)(y, np.zeros((2, 1), np.float32), np.array([1.0, -1.0]))
