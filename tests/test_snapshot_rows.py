"""The snapshot of DebiasedModel runs on the rows that read f† only; loss and gradients unchanged.

The reference is the full-batch path (the snapshot on every row), which the
model takes when the loss's ``dagger_sources()`` is None; each test
compares the two on the same weights and batches: eagerly, in a
``tf.function``, under XLA, with an initial-guess model or constant, with a
feature dict, for each loss that reads ``f†``, through ``fit`` and under
``MirroredStrategy``. The snapshot's row count is read from a counting layer.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import keras
import numpy as np
import pytest
import tensorflow as tf
from keras import ops

import adpue_tf as adp
from adpue_tf import synthetic
from adpue_tf.labels import Source
from adpue_tf.risks import _rows

DIM = 4
ROOT = Path(__file__).resolve().parents[1]
MIN_WORK = _rows.MIN_WORK  # the rule's threshold, before the fixture below lowers it


def _mlp(seed: int = 0, dim: int = DIM) -> keras.Model:
    keras.utils.set_random_seed(seed)
    return keras.Sequential([keras.Input((dim,)), keras.layers.Dense(16, activation="relu"),
                             keras.layers.Dense(1)])


@pytest.fixture(autouse=True)
def gather_small_batches(monkeypatch):
    """Gather whatever the batch and model size (the tests' nets are small)."""
    monkeypatch.setattr(_rows, "MIN_WORK", 0)


@pytest.fixture
def full_batch(monkeypatch):
    """``full_batch(True)``: the full-batch path (the snapshot on every row) until ``(False)``."""
    state = {"full": False}
    select = _rows.select
    monkeypatch.setattr(_rows, "select", lambda sources, *a, **k:
                        select(None if state["full"] else sources, *a, **k))

    def use(flag: bool):
        state["full"] = flag
    return use


def _perturb(net: keras.Model, seed: int = 7) -> None:
    rng = np.random.default_rng(seed)
    for v in net.weights:
        v.assign(v.numpy() + rng.normal(0.0, 0.3, v.shape).astype(v.dtype))


def _model(loss, *, initial=0.5, mode="snapshot", net=None):
    """A compiled DebiasedModel whose f† source is ``mode`` and differs from the net."""
    net = net if net is not None else _mlp(0)
    init = _mlp(3) if initial == "model" else initial
    model = adp.DebiasedModel(net, initial_dagger=init)
    model.compile(keras.optimizers.SGD(0.1), loss=loss)
    if mode in ("initial", "snapshot"):
        model.start_alternate_learning()
    if mode == "snapshot":
        model.refresh_dagger()
        _perturb(model.net)
    return model


def _loss_and_grads(model, x, y, *, jit=None):
    """(loss, f† column, gradients) of one step, eagerly (jit None) or traced."""
    def step(x, y):
        with tf.GradientTape() as tape:
            y_pred = model(x, training=True)
            loss = model.compute_loss(x=x, y=y, y_pred=y_pred)
        yt = ops.cast(ops.convert_to_tensor(y), "float32")
        dagger = model._dagger(x, yt, y_pred)
        return loss, dagger, tape.gradient(loss, model.trainable_variables)
    fn = step if jit is None else tf.function(step, jit_compile=jit)
    loss, dagger, grads = fn(x, y)
    return float(loss), dagger.numpy().ravel(), [tf.convert_to_tensor(g).numpy() for g in grads]


def _batch(kind="pue", n=256, seed=0):
    if kind == "sse":
        d = synthetic.synthetic_sse(n, dim=DIM, seed=seed)
        ds = adp.data.sse_dataset(d.x, d.w, d.e, batch_size=n, seed=0)
    elif kind == "pe":
        s = synthetic.synthetic_pue(n, n, dim=DIM, seed=seed)
        ds = adp.data.pe_dataset(s.x_pu[s.w_pu == 1], s.x_e, s.e_e, batch_size=n, seed=0)
    elif kind == "3se":
        d = synthetic.synthetic_sse(n, dim=DIM, seed=seed)
        s = synthetic.synthetic_pue(n, n, dim=DIM, seed=seed + 1)
        ds = adp.data.sse_pu_dataset(d.x, d.w, d.e, s.x_pu, s.w_pu, batch_size=n, seed=0)
    else:
        s = synthetic.synthetic_pue(n, n, dim=DIM, seed=seed)
        ds = adp.data.pue_dataset(s.x_pu, s.w_pu, s.x_e, s.e_e, batch_size=n, seed=0)
    return next(iter(ds))


def _compare(model, x, y, full_batch, jit=None):
    full_batch(True)
    ref_loss, ref_dagger, ref_grads = _loss_and_grads(model, x, y, jit=jit)
    full_batch(False)
    loss, dagger, grads = _loss_and_grads(model, x, y, jit=jit)
    assert loss == pytest.approx(ref_loss, rel=1e-6, abs=1e-7)
    for g, r in zip(grads, ref_grads):
        np.testing.assert_allclose(g, r, rtol=1e-5, atol=1e-7)
    return dagger, ref_dagger


def _read_rows(y, sources):
    y = np.asarray(y)
    return np.isin(y[:, 2], [int(s) for s in sources]) & (y[:, 1] == 0)


LOSSES = [
    ("pue", lambda: adp.ADPUELoss(from_logits=True), (Source.E,)),
    ("pe", lambda: adp.ADPELoss(prior=0.3, from_logits=True), (Source.E,)),
    ("sse", lambda: adp.ADSSLoss(from_logits=True), (Source.SSE,)),
    ("sse", lambda: adp.DoubleADSSLoss(alpha=0.3, from_logits=True), (Source.SSE,)),
    ("3se", lambda: adp.AD3SELoss(alpha=0.5, from_logits=True), (Source.SSE,)),
]


def test_dagger_sources_of_each_loss():
    assert adp.ADPUELoss(from_logits=True).dagger_sources() == (Source.E,)
    assert adp.ADFPULoss(prior=0.3).dagger_sources() == (Source.E,)
    assert adp.ADSSLoss().dagger_sources() == (Source.SSE,)
    assert adp.AD3SELoss().dagger_sources() == (Source.SSE,)
    assert adp.ADSLoss().dagger_sources() is None and adp.UPULoss(prior=0.3).dagger_sources() is None

    class Custom(adp.ADPUELoss):
        def terms(self, y_true, y_pred, sample_weight=None):
            return super().terms(y_true, y_pred, sample_weight)

    assert Custom().dagger_sources() is None  # reads f† its own way: every row

    class OwnRisk(adp.ADPUELoss):
        risk_fn = staticmethod(adp.risks.adpe)

    assert OwnRisk.dagger_sources() is None  # a risk_fn that declares nothing: every row


def test_gather_rule(monkeypatch):
    monkeypatch.setattr(_rows, "MIN_WORK", 2_000_000)
    net = _mlp(0, dim=32)  # 32-16-1: 545 weights
    assert not _rows.worth_gathering(512, net, jit=False)
    assert _rows.worth_gathering(4096, net, jit=False)
    assert _rows.worth_gathering(None, net, jit=False)  # batch size unknown when tracing
    assert not _rows.worth_gathering(None, net, jit=True)  # XLA pads the rows: no gain


@pytest.mark.parametrize("kind,make_loss,sources", LOSSES)
@pytest.mark.parametrize("jit", [None, False, pytest.param(True, marks=pytest.mark.slow)],
                         ids=["eager", "graph", "xla"])
def test_same_loss_and_gradients_as_the_full_batch(kind, make_loss, sources, jit, full_batch):
    x, y = _batch(kind)
    model = _model(make_loss())
    dagger, ref = _compare(model, x, y, full_batch, jit=jit)
    read = _read_rows(y, sources)
    assert 0 < read.sum() < len(read)
    np.testing.assert_allclose(dagger[read], ref[read], rtol=1e-6, atol=1e-7)
    assert np.all(dagger[~read] == 0.0)


@pytest.mark.parametrize("initial,mode", [(0.3, "initial"), ("model", "initial"),
                                          ("model", "snapshot")])
@pytest.mark.parametrize("jit", [False, pytest.param(True, marks=pytest.mark.slow)],
                         ids=["graph", "xla"])
def test_initial_guess_on_the_selected_rows(initial, mode, jit, full_batch):
    x, y = _batch("pue")
    model = _model(adp.ADPUELoss(from_logits=True), initial=initial, mode=mode)
    dagger, ref = _compare(model, x, y, full_batch, jit=jit)
    read = _read_rows(y, (Source.E,))
    np.testing.assert_allclose(dagger[read], ref[read], rtol=1e-6, atol=1e-7)


def test_probabilities_and_sample_weight(full_batch):
    keras.utils.set_random_seed(0)
    net = keras.Sequential([keras.Input((DIM,)), keras.layers.Dense(8, activation="relu"),
                            keras.layers.Dense(1, activation="sigmoid")])
    model = _model(adp.ADPUELoss(from_logits=False), net=net)
    x, y = _batch("pue")
    sw = np.random.default_rng(0).random(len(y)).astype("float32")

    def run():
        y_pred = model(x, training=True)
        return float(model.compute_loss(x=x, y=y, y_pred=y_pred, sample_weight=sw))
    full_batch(True)
    ref = run()
    full_batch(False)
    assert run() == pytest.approx(ref, rel=1e-6)


# ------------------------------------------------------------------ feature dicts
DEVICES = ["android", "ios", "web"]


def _dict_net(seed: int) -> keras.Model:
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


def _dict_batch(n=300):
    rng = np.random.default_rng(0)

    def feats():
        return {"user_id": rng.integers(0, 40, n).astype(np.int64),
                "device": np.array(DEVICES, dtype=object)[rng.integers(0, 3, n)].astype(bytes),
                "context": rng.normal(size=(n, 3)).astype(np.float32)}
    ds = adp.data.pue_dataset(feats(), (rng.random(n) < 0.2).astype(np.int64), feats(),
                              (rng.random(n) < 0.5).astype(np.int64), batch_size=n, seed=0)
    return next(iter(ds))


@pytest.mark.parametrize("jit", [None, False], ids=["eager", "graph"])
def test_feature_dict_gathers_every_feature(jit, full_batch):
    x, y = _dict_batch()
    model = _model(adp.ADPUELoss(from_logits=True), net=_dict_net(0))
    dagger, ref = _compare(model, x, y, full_batch, jit=jit)
    read = _read_rows(y, (Source.E,))
    np.testing.assert_allclose(dagger[read], ref[read], rtol=1e-6, atol=1e-7)
    assert np.all(dagger[~read] == 0.0)


# ------------------------------------------------------------------ fit and the row count
@keras.saving.register_keras_serializable(package="test_snapshot_rows")
class RowCounter(keras.layers.Layer):
    """Identity that adds the rows it sees in inference mode to a non-trainable counter."""

    def build(self, input_shape):
        self.rows = self.add_weight(shape=(), dtype="int64", initializer="zeros",
                                    trainable=False, name="rows")

    def call(self, x, training=None):
        if not training:  # the snapshot's pass; the net trains with training=True
            self.rows.assign_add(ops.cast(ops.shape(x)[0], "int64"))
        return x


class _ReadCounter(keras.callbacks.Callback):
    """The snapshot's row count of each epoch, read before the refresh copies the net's."""

    def __init__(self):
        super().__init__()
        self.seen = []

    def on_epoch_end(self, epoch, logs=None):
        counter = self.model.snapshot.layers[0].rows
        self.seen.append(int(counter.numpy()))
        counter.assign(0)


def _counting_net(seed=0):
    keras.utils.set_random_seed(seed)
    return keras.Sequential([keras.Input((DIM,)), RowCounter(),
                             keras.layers.Dense(16, activation="relu"), keras.layers.Dense(1)])


@pytest.mark.parametrize("jit", [False, pytest.param(True, marks=pytest.mark.slow)],
                         ids=["graph", "xla"])
def test_snapshot_sees_only_the_selected_rows(jit):
    """In graph mode the snapshot runs on the selected rows; under XLA on every row."""
    s = synthetic.synthetic_pue(800, 800, dim=DIM, seed=2)
    ds = adp.data.pue_dataset(s.x_pu, s.w_pu, s.x_e, s.e_e, batch_size=200, seed=0,
                              shuffle=False)
    model = adp.DebiasedModel(_counting_net())
    model.compile(keras.optimizers.SGD(0.1), loss=adp.ADPUELoss(from_logits=True),
                  jit_compile=jit)
    reader = _ReadCounter()
    model.fit(ds, epochs=2, verbose=0, callbacks=[reader, adp.RefreshDagger()])
    read = sum(int(_read_rows(y, (Source.E,)).sum()) for _, y in ds)
    total = sum(int(y.shape[0]) for _, y in ds)
    assert 0 < read < total / 2
    # epoch 1: the initial constant (the snapshot still runs), epoch 2: the snapshot
    expected = total if jit else read
    assert reader.seen == [expected, expected]


def _first_matmul_input(graph, layer):
    """The tensor that the first MatMul reading ``layer.kernel`` in ``graph`` multiplies."""
    handles = {id(ext): internal for ext, internal in graph.captures}
    handle = handles[id(layer.kernel.value.handle)]
    for op in graph.get_operations():
        if op.type == "ReadVariableOp" and op.inputs[0] is handle:
            for consumer in op.outputs[0].consumers():
                if consumer.type == "MatMul":
                    return consumer.inputs[0]
    raise AssertionError(f"no MatMul reads {layer.name}'s kernel")


def test_graph_of_a_step_runs_the_snapshot_on_the_gathered_rows(monkeypatch):
    """The throughput benchmark's setting (32-64-64-1, batch 512) under the default rule."""
    monkeypatch.setattr(_rows, "MIN_WORK", MIN_WORK)
    keras.utils.set_random_seed(0)
    net = keras.Sequential([keras.Input((32,)), keras.layers.Dense(64, activation="relu"),
                            keras.layers.Dense(64, activation="relu"), keras.layers.Dense(1)])
    s = synthetic.synthetic_pue(512, 512, dim=32, seed=0)
    x, y = next(iter(adp.data.pue_dataset(s.x_pu, s.w_pu, s.x_e, s.e_e, batch_size=512,
                                          seed=0)))
    model = adp.DebiasedModel(net)
    model.compile(keras.optimizers.Adam(1e-3), loss=adp.ADPUELoss(from_logits=True))
    model.start_alternate_learning()
    model.refresh_dagger()
    graph = tf.function(model.train_step).get_concrete_function((x, y)).graph
    batch = _first_matmul_input(graph, model.net.layers[0])
    rows = _first_matmul_input(graph, model.snapshot.layers[0])
    assert batch.op.type == "Placeholder" and batch.shape.as_list() == [512, 32]
    assert rows.op.type == "GatherV2" and rows.shape.as_list() == [None, 32]
    assert rows.op.inputs[0] is batch  # the snapshot reads the batch's features, gathered
    selection = {op.type for op in graph.get_operations()}
    assert {"Where", "ScatterNd"} <= selection
    monkeypatch.setattr(_rows, "MIN_WORK", 512 * net.count_params() + 1)  # below the rule
    graph = tf.function(model.train_step).get_concrete_function((x, y)).graph
    assert _first_matmul_input(graph, model.snapshot.layers[0]).op.type == "Placeholder"


@pytest.mark.slow
def test_fit_gives_the_weights_of_the_full_batch(full_batch):
    s = synthetic.synthetic_pue(1200, 1200, dim=DIM, seed=1)

    def train():
        net = _mlp(0)
        model = adp.DebiasedModel(net)
        model.compile(keras.optimizers.SGD(0.5), loss=adp.ADPUELoss(from_logits=True))
        ds = adp.data.pue_dataset(s.x_pu, s.w_pu, s.x_e, s.e_e, batch_size=200, seed=0)
        hist = model.fit(ds, epochs=3, verbose=0, callbacks=[adp.RefreshDagger()])
        return hist.history["loss"], [w.numpy() for w in net.weights]
    full_batch(True)
    ref_loss, ref_w = train()
    full_batch(False)
    loss, w = train()
    np.testing.assert_allclose(loss, ref_loss, rtol=1e-5)
    for a, b in zip(w, ref_w):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


_MIRRORED = textwrap.dedent("""
    import sys
    import numpy as np, tensorflow as tf
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    import keras, adpue_tf as adp
    from adpue_tf import synthetic
    from adpue_tf.risks import _rows
    s = synthetic.synthetic_pue(800, 800, dim=4, seed=1)
    select = _rows.select
    _rows.MIN_WORK = 0  # gather on these small batches too

    def train(gather):
        _rows.select = select if gather else (lambda sources, *a, **k: select(None, *a, **k))
        strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
        with strategy.scope():
            keras.utils.set_random_seed(0)
            net = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8, activation="relu"),
                                    keras.layers.Dense(1)])
            model = adp.DebiasedModel(net)
            model.compile(keras.optimizers.SGD(0.5), loss=adp.ADPUELoss(from_logits=True))
        ds = adp.data.pue_dataset(s.x_pu, s.w_pu, s.x_e, s.e_e, batch_size=200, seed=0,
                                  shuffle=False)
        model.fit(ds, epochs=3, verbose=0, callbacks=[adp.RefreshDagger()])
        return np.concatenate([w.numpy().ravel() for w in net.weights])

    a, b = train(True), train(False)
    print("MAXDIFF", float(np.max(np.abs(a - b))), float(np.max(np.abs(a))))
""")


@pytest.mark.slow
def test_mirrored_strategy_gives_the_weights_of_the_full_batch():
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="",
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    proc = subprocess.run([sys.executable, "-c", _MIRRORED], env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("MAXDIFF")][-1]
    diff, scale = map(float, line.split()[1:])
    assert diff <= 1e-5 * max(scale, 1.0)
