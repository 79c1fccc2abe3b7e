"""Metrics on packed labels: values against NumPy/sklearn, masking, Keras integration."""

from __future__ import annotations

import json

import keras
import numpy as np
import pytest
import tensorflow as tf
from sklearn.metrics import roc_auc_score

import adpue_tf as adp
from adpue_tf import metrics
from adpue_tf.labels import Source, pack_e, pack_p, pack_pu, pack_sse, pack_u

from conftest import mixed_batch
from serialization import assert_round_trip


def _sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z.astype(np.float64)))


def _exact_auc(scores):
    """An AUC with a threshold between every pair of distinct scores (exact ROC)."""
    s = np.unique(np.clip(scores, 1e-6, 1 - 1e-6))
    mids = ((s[1:] + s[:-1]) / 2).tolist()
    return keras.metrics.AUC(thresholds=mids, name="auc")  # not "auc_3": Keras numbers defaults


def _value(metric, y, z, sample_weight=None):
    metric.update_state(y, z, sample_weight=sample_weight)
    return float(metric.result())


# --- SourceMetric: values -------------------------------------------------------------

def test_auc_on_pu_rows_matches_sklearn(batch):
    y, z = batch
    p = _sigmoid(z)
    pu = y[:, 2] == Source.PU
    m = metrics.SourceMetric(_exact_auc(p[pu, 0]), sources=["PU"])
    assert m.name == "pu_w_auc"
    expected = roc_auc_score(y[pu, 0], p[pu, 0])
    np.testing.assert_allclose(_value(m, y, p), expected, atol=1e-6)


def test_observed_auc_logits_and_probabilities(batch):
    y, z = batch
    pu = y[:, 2] == Source.PU
    expected = roc_auc_score(y[pu, 0], z[pu, 0])
    np.testing.assert_allclose(_value(metrics.observed_auc(True), y, z), expected, atol=1e-3)
    p = _sigmoid(z).astype(np.float32)
    np.testing.assert_allclose(_value(metrics.observed_auc(), y, p), expected, atol=1e-3)


def test_exposed_accuracy_matches_numpy(batch):
    y, z = batch
    rows = (y[:, 2] == Source.SSE) & (y[:, 1] == 1)
    expected = np.mean((z[rows, 0] > 0) == (y[rows, 0] == 1))
    m = metrics.exposed_accuracy(from_logits=True)
    assert m.name == "exposed_accuracy" and m.exposed_only
    np.testing.assert_allclose(_value(m, y, z), expected, atol=1e-6)
    p = _sigmoid(z).astype(np.float32)
    np.testing.assert_allclose(_value(metrics.exposed_accuracy(), y, p), expected, atol=1e-6)


def test_label_e_several_sources_and_default_name(batch):
    y, z = batch
    rows = np.isin(y[:, 2], [Source.E, Source.SSE])
    m = metrics.SourceMetric(keras.metrics.BinaryAccuracy(threshold=0.0),
                             sources=[Source.E, 4, "e"], label="e")
    assert m.name == "e_sse_e_binary_accuracy"
    assert m.sources == [Source.E, Source.SSE]
    expected = np.mean((z[rows, 0] > 0) == (y[rows, 1] == 1))
    np.testing.assert_allclose(_value(m, y, z), expected, atol=1e-6)


@pytest.mark.parametrize("inner", ["precision", "recall"])
def test_precision_recall_on_masked_rows(batch, inner):
    y, z = batch
    p = _sigmoid(z).astype(np.float32)
    rows = np.isin(y[:, 2], [Source.PU, Source.SSE])
    pred, true = p[rows, 0] > 0.5, y[rows, 0] == 1
    tp = np.sum(pred & true)
    expected = tp / np.sum(pred) if inner == "precision" else tp / np.sum(true)
    cls = keras.metrics.Precision if inner == "precision" else keras.metrics.Recall
    m = metrics.SourceMetric(cls(), sources=["PU", "SSE"])
    np.testing.assert_allclose(_value(m, y, p), expected, atol=1e-6)


def test_other_rows_are_ignored(batch):
    y, z = batch
    keep = (y[:, 2] == Source.SSE) & (y[:, 1] == 1)
    garbage = np.where(keep[:, None], z, -z * 100.0 + 7.0).astype(np.float32)
    a = _value(metrics.exposed_accuracy(True), y, z)
    b = _value(metrics.exposed_accuracy(True), y, garbage)
    direct = keras.metrics.BinaryAccuracy(threshold=0.0)
    direct.update_state(y[keep, :1], z[keep])
    assert a == b == pytest.approx(float(direct.result()))


def test_sample_weight_multiplies_mask(batch):
    y, z = batch
    sw = np.random.default_rng(3).uniform(0.1, 2.0, len(y)).astype(np.float32)
    rows = (y[:, 2] == Source.PU).astype(np.float64)
    correct = (z[:, 0] > 0) == (y[:, 0] == 1)
    expected = np.sum(sw * rows * correct) / np.sum(sw * rows)
    for weight in (sw, sw[:, None]):
        m = metrics.SourceMetric(keras.metrics.BinaryAccuracy(threshold=0.0), sources="PU")
        np.testing.assert_allclose(_value(m, y, z, weight), expected, rtol=1e-5)


def test_shapes_dagger_column_accumulation_and_reset(batch):
    y, z = batch
    y4 = np.concatenate([y, np.full((len(y), 1), 0.5, np.float32)], axis=1)
    ref = _value(metrics.observed_auc(True), y, z)
    m = metrics.observed_auc(True)
    assert len(m.variables) == len(m.metric.variables) > 0
    assert _value(m, y4, z[:, 0]) == pytest.approx(ref)  # (batch, 4) labels, (batch,) output
    y2, z2 = mixed_batch(5), np.random.default_rng(6).normal(size=(30, 1)).astype(np.float32)
    m.update_state(y2, z2)
    both = np.concatenate([y, y2]), np.concatenate([z, z2])
    assert float(m.result()) == pytest.approx(_value(metrics.observed_auc(True), *both))
    m.reset_state()
    assert all(np.all(v.numpy() == 0) for v in m.variables)
    assert _value(m, y, z) == pytest.approx(ref)


def test_no_selected_rows_gives_zero_accuracy():
    m = metrics.exposed_accuracy(True)
    assert _value(m, pack_pu([1, 0]), np.zeros((2, 1), np.float32)) == 0.0


def test_update_inside_jit_function(batch):
    y, z = batch
    m = metrics.exposed_accuracy(True)
    tf.function(m.update_state, jit_compile=True)(tf.constant(y), tf.constant(z))
    assert float(m.result()) == pytest.approx(_value(metrics.exposed_accuracy(True), y, z))


# --- RiskMetric -------------------------------------------------------------------------

def _setting_batch(loss, seed, n=6):
    """Packed labels of the loss's own setting (the sources it reads), shuffled."""
    rng = np.random.default_rng(seed)
    w = lambda: rng.integers(0, 2, n)  # noqa: E731
    by_setting = {
        adp.ADPUELoss: lambda: [pack_pu(w()), pack_e(w())],
        adp.ADPELoss: lambda: [pack_p(n), pack_e(w())],
        adp.AD3SELoss: lambda: [pack_sse(np.minimum(w(), 1) * (e := w()), e), pack_pu(w())],
        adp.NNPULoss: lambda: [pack_pu(w()), pack_p(n), pack_u(n)],
    }
    y = np.concatenate(by_setting[type(loss)]())
    return y[rng.permutation(len(y))]


RISK_LOSSES = [
    adp.ADPUELoss(from_logits=True),
    adp.ADPELoss(prior=0.3, from_logits=True),
    adp.AD3SELoss(alpha=0.5, from_logits=True),
    adp.NNPULoss(prior=0.4, from_logits=True),
]


@pytest.mark.parametrize("loss", RISK_LOSSES, ids=lambda l: type(l).__name__)
@pytest.mark.parametrize("part", list(metrics.RISK_METRIC_NAMES))
def test_risk_metric_equals_terms_and_batch_mean(loss, part):
    rng = np.random.default_rng(0)
    values = []
    m = metrics.RiskMetric(loss, part=part)
    assert m.name == metrics.RISK_METRIC_NAMES[part]
    for seed in range(3):
        y = _setting_batch(loss, seed)
        z = rng.normal(0.0, 2.0, (len(y), 1)).astype(np.float32)
        sw = rng.uniform(0.5, 1.5, len(y)).astype(np.float32)
        values.append(float(getattr(loss.terms(y, z, sw), part)))
        m.update_state(y, z, sample_weight=sw)
    np.testing.assert_allclose(float(m.result()), np.mean(values), rtol=1e-5, atol=1e-7)


def test_fired_is_fraction_of_batches():
    loss = adp.ADPUELoss(from_logits=True)
    fires = np.concatenate([pack_pu([1, 1]), pack_e([0, 0])])  # R- = -Ê_E[a·ℓ0] < 0
    calm = np.concatenate([pack_pu([0, 0]), pack_e([1, 1])])   # R- = Ê_PU[ℓ0] > 0
    z = np.zeros((4, 1), np.float32)
    m = metrics.RiskMetric(loss, part="fired", name="f")
    for y in (fires, calm, calm, fires):  # the same arrays twice in a row: two batches
        m.update_state(y, z)
    assert m.name == "f" and float(m.result()) == pytest.approx(0.5)


def test_risk_metrics_names():
    ms = metrics.risk_metrics(adp.ADSSLoss())
    assert [m.name for m in ms] == ["risk", "r_pos", "r_neg", "nn_fired"]
    assert [m.part for m in ms] == ["risk", "positive", "negative", "fired"]


def test_risk_metrics_share_one_tracker_updated_once_per_batch():
    loss = adp.ADPUELoss(from_logits=True)
    ms = metrics.risk_metrics(loss)
    assert len({id(m.tracker) for m in ms}) == 1 and ms[0].tracker.loss is loss
    # the shared total is a variable of the first view only
    assert [len(m.variables) for m in ms] == [1, 0, 0, 0]
    rng = np.random.default_rng(0)
    expected = []
    for seed in range(3):
        y = _setting_batch(loss, seed)
        z = rng.normal(0.0, 2.0, (len(y), 1)).astype(np.float32)
        t = loss.terms(y, z)
        expected.append([float(t.risk), float(t.positive), float(t.negative), float(t.fired)])
        for m in reversed(ms):  # every view sees the batch, in any order
            m.update_state(y, z)
    assert float(ms[0].tracker.total[4]) == 3.0  # three batches, not twelve
    np.testing.assert_allclose([float(m.result()) for m in ms], np.mean(expected, axis=0),
                               rtol=1e-6)
    ms[2].reset_state()
    assert all(float(m.result()) == 0.0 for m in ms)


def test_tracker_reuses_the_terms_of_the_loss_call_on_the_same_tensors():
    loss = adp.ADPUELoss(from_logits=True)
    y = tf.constant(_setting_batch(loss, 0))
    z = tf.constant(np.linspace(-2, 2, len(y), dtype=np.float32)[:, None])
    value = loss(y, z)
    terms = loss.last_terms(y, z)
    assert terms is not None and float(terms.loss) == float(value)
    assert loss.last_terms(y, tf.identity(z)) is None  # another tensor
    assert loss.last_terms(y, z, tf.ones(len(y))) is None  # other weights
    assert loss.last_terms(y.numpy(), z.numpy()) is None
    loss(y.numpy(), z.numpy())  # NumPy arrays can change in place: not remembered
    assert loss.last_terms(y.numpy(), z.numpy()) is None


def _count_risk_calls(loss):
    """Wrap ``loss.terms`` to count its calls (each trace of a step calls it)."""
    calls = []
    terms = loss.terms

    def counting(*args, **kwargs):
        calls.append(1)
        return terms(*args, **kwargs)
    loss.terms = counting
    return calls


@pytest.mark.parametrize("jit", [False, pytest.param(True, marks=pytest.mark.slow)])
def test_plain_model_computes_the_risk_once_per_step(jit):
    x, y = _pue_data()
    calls = {}
    for with_metrics in (False, True):
        loss = adp.ADPUELoss(from_logits=True)
        calls[with_metrics] = _count_risk_calls(loss)
        keras.utils.set_random_seed(0)
        model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
        model.compile("adam", loss=loss, jit_compile=jit,
                      metrics=metrics.risk_metrics(loss) if with_metrics else None)
        model.fit(x, y, batch_size=120, epochs=1, verbose=0, shuffle=False)
        model.evaluate(x, y, batch_size=len(y), verbose=0)
    assert len(calls[True]) == len(calls[False]) > 0  # one per traced step, metrics or not
    assert len(model.metrics_variables) == 3  # loss total and count, one risk total


def _train_step_nodes(loss, metric_list):
    """Nodes of one traced train step (its graph and the functions it calls)."""
    x, y = _pue_data(n=40)
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    model.compile("adam", loss=loss, metrics=metric_list)
    model.optimizer.build(model.trainable_variables)
    graph = tf.function(model.train_step).get_concrete_function(
        (tf.constant(x), tf.constant(y))).graph.as_graph_def()
    return len(graph.node) + sum(len(f.node_def) for f in graph.library.function)


@pytest.mark.slow  # traces three train steps (~40 s)
def test_risk_metrics_add_a_few_graph_nodes_not_a_risk_per_metric():
    without = _train_step_nodes(adp.ADPUELoss(from_logits=True), None)
    loss = adp.ADPUELoss(from_logits=True)
    shared = _train_step_nodes(loss, metrics.risk_metrics(loss))
    # each metric of its own computes the risk again (the former risk_metrics)
    own = _train_step_nodes(loss, [metrics.RiskMetric(adp.ADPUELoss(from_logits=True), part=p)
                                   for p in metrics.RISK_METRIC_NAMES])
    # one update (read, add, assign) and one division/unstack for the four results
    assert shared - without <= 20
    assert own - without > 10 * (shared - without)


def test_weighted_metrics_read_the_weighted_terms_and_metrics_the_unweighted():
    x, y = _pue_data()
    sw = np.random.default_rng(1).uniform(0.2, 2.0, len(y)).astype(np.float32)
    loss = adp.ADPUELoss(from_logits=True)
    plain, weighted = metrics.risk_metrics(loss), metrics.risk_metrics(loss)
    for m in weighted:
        m.name = f"w_{m.name}"
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    model.compile("sgd", loss=loss, metrics=plain, weighted_metrics=weighted)
    out = model.evaluate(x, y, sample_weight=sw, batch_size=len(y), verbose=0, return_dict=True)
    z = model.predict(x, verbose=0)
    unweighted, with_w = loss.terms(y, z), loss.terms(y, z, sw)
    assert out["r_pos"] == pytest.approx(float(unweighted.positive), rel=1e-5)
    assert out["w_r_pos"] == pytest.approx(float(with_w.positive), rel=1e-5)
    assert out["w_risk"] == pytest.approx(out["loss"], rel=1e-5)
    assert abs(out["r_pos"] - out["w_r_pos"]) > 1e-3


def test_risk_tracker_bad_input():
    with pytest.raises(TypeError, match="loss"):
        metrics.RiskTracker(loss="adpue")
    with pytest.raises(ValueError, match="no `loss`"):
        metrics.RiskTracker().update_state(pack_pu([1, 0]), np.zeros((2, 1), np.float32))
    loss = adp.ADPUELoss()
    with pytest.raises(ValueError, match="same `loss`"):
        metrics.RiskMetric(loss, tracker=metrics.RiskTracker(loss=adp.ADPUELoss()))
    with pytest.raises(TypeError, match="tracker"):
        metrics.RiskMetric(loss, tracker="x")


# --- serialisation ----------------------------------------------------------------------

@pytest.mark.parametrize("make", [
    lambda: metrics.SourceMetric(keras.metrics.AUC(from_logits=True), sources=["PU", 4],
                                 label="e", exposed_only=True, name="x"),
    lambda: metrics.observed_auc(True),
    lambda: metrics.exposed_accuracy(),
    lambda: metrics.RiskMetric(adp.ADPELoss(prior=0.3, gamma=0.5), part="negative"),
    lambda: metrics.RiskMetric(adp.DoubleADSSLoss(alpha=0.2), part="fired", name="y"),
])
def test_config_round_trip(make):
    obj = make()
    revived = assert_round_trip(obj)
    assert revived.name == obj.name
    json.dumps(obj.get_config())
    if isinstance(obj, metrics.SourceMetric):
        assert type(revived.metric) is type(obj.metric)
        assert revived.sources == obj.sources and revived.exposed_only == obj.exposed_only
    else:
        assert revived.loss.get_config() == obj.loss.get_config()


# --- Keras integration ------------------------------------------------------------------

def _pue_data(n=240, d=3, seed=0):
    """PU and E rows interleaved (every batch of 40 holds both), features shifted by W."""
    rng = np.random.default_rng(seed)
    y = np.empty((n, 3), np.float32)
    y[0::2], y[1::2] = pack_pu(rng.integers(0, 2, n // 2)), pack_e(rng.integers(0, 2, n // 2))
    x = rng.normal(size=(n, d)).astype(np.float32) + y[:, :1]
    return x, y


_data = _pue_data


def _compiled(jit):
    loss = adp.ADPUELoss(from_logits=True)
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    model.compile(optimizer="adam", loss=loss, jit_compile=jit,
                  metrics=[*metrics.risk_metrics(loss), metrics.observed_auc(True),
                           metrics.exposed_accuracy(True)])
    return model


NAMES = ["risk", "r_pos", "r_neg", "nn_fired", "observed_auc", "exposed_accuracy"]


@pytest.mark.parametrize("jit", [False, True])
def test_compile_and_fit(jit):
    x, y = _data()
    model = _compiled(jit)
    hist = model.fit(x, y, batch_size=40, epochs=2, verbose=0, shuffle=False)
    for name in NAMES:
        assert len(hist.history[name]) == 2 and np.all(np.isfinite(hist.history[name]))
    assert 0.0 <= min(hist.history["nn_fired"]) <= max(hist.history["nn_fired"]) <= 1.0
    if jit:  # XLA compiles are slow on CPU; the values are checked without jit
        return
    # evaluate resets the states: one full batch gives the values of the whole data.
    out = model.evaluate(x, y, batch_size=len(x), verbose=0, return_dict=True)
    z = model.predict(x, verbose=0)
    pu = y[:, 2] == Source.PU
    assert out["observed_auc"] == pytest.approx(roc_auc_score(y[pu, 0], z[pu, 0]), abs=5e-3)
    terms = model.loss.terms(y, z)
    assert out["r_pos"] == pytest.approx(float(terms.positive), rel=1e-4)


def test_keras_save_and_load(tmp_path):
    x, y = _data()
    model = _compiled(False)
    model.fit(x, y, batch_size=40, epochs=1, verbose=0)
    path = tmp_path / "m.keras"
    model.save(path)
    loaded = keras.saving.load_model(path)
    before = model.evaluate(x, y, batch_size=60, verbose=0, return_dict=True)
    after = loaded.evaluate(x, y, batch_size=60, verbose=0, return_dict=True)
    assert set(NAMES) <= set(after)
    for name in NAMES:
        assert after[name] == pytest.approx(before[name], rel=1e-5, abs=1e-6)
    # the revived risk metrics still share one tracker, fed by the revived loss
    views = [m for m in loaded.metrics[1].metrics if isinstance(m, metrics.RiskMetric)]
    assert len(views) == 4 and len({id(m.tracker) for m in views}) == 1
    assert all(m.loss is loaded.loss for m in views)


# --- bad input --------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs,match", [
    ({"sources": ["PU"], "label": "y"}, "label"),
    ({"sources": []}, "sources"),
    ({"sources": ["XX"]}, "sources"),
    ({"sources": [7]}, "sources"),
    ({"sources": [True]}, "sources"),
    ({"sources": None}, "sources"),
])
def test_source_metric_bad_values(kwargs, match):
    with pytest.raises(ValueError, match=match):
        metrics.SourceMetric(keras.metrics.AUC(), **kwargs)


def test_source_metric_bad_types_and_shapes():
    with pytest.raises(TypeError, match="metric"):
        metrics.SourceMetric("auc", sources=["PU"])
    with pytest.raises(TypeError, match="exposed_only"):
        metrics.SourceMetric(keras.metrics.AUC(), sources=["PU"], exposed_only=1)
    m = metrics.observed_auc()
    with pytest.raises(ValueError, match="y_true"):
        m.update_state(np.zeros((4, 1), np.float32), np.zeros((4, 1), np.float32))


def test_risk_metric_bad_input():
    with pytest.raises(ValueError, match="part"):
        metrics.RiskMetric(adp.ADPUELoss(), part="r_pos")
    with pytest.raises(TypeError, match="loss"):
        metrics.RiskMetric(keras.losses.BinaryCrossentropy(), part="risk")
    with pytest.raises(TypeError, match="loss"):
        metrics.risk_metrics("adpue")


@pytest.mark.parametrize("make", [metrics.observed_auc, metrics.exposed_accuracy])
def test_from_logits_must_be_a_bool(make):
    with pytest.raises(TypeError, match="`from_logits` must be a bool, got 'no'"):
        make(from_logits="no")
