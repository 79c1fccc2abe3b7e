"""θ̂ and bce_w on the rows their risks read in a joint pass: the same losses, less compute."""

import keras
import numpy as np
import pytest
import tensorflow as tf

import adpue_tf as adp
from adpue_tf.labels import Source
from adpue_tf.recommend import layout, stage
from adpue_tf.recommend.layout import Layout, batch_layout, call_on_rows, pu_first


def _net() -> keras.Model:
    keras.utils.set_random_seed(0)
    return keras.Sequential([keras.Input((3,)), keras.layers.Dense(4, "tanh"),
                             keras.layers.Dense(1)])


@pytest.mark.parametrize("name, rows", [("e", slice(3, 5)), ("pu", slice(0, 3)),
                                        ("pue", slice(0, 5))])
def test_each_net_runs_on_its_rows_and_the_others_hold_zero(name, rows):
    net = _net()
    inputs = keras.Input((3,))
    model = keras.Model(inputs, call_on_rows(net, inputs, name, Layout(3, 2)))
    x = np.random.default_rng(0).normal(size=(5, 3)).astype(np.float32)
    want = np.zeros((5, 1), np.float32)
    want[rows] = np.asarray(net(x[rows]))
    step = tf.function(model, input_signature=[tf.TensorSpec((5, 3), tf.float32)])
    for out in (np.asarray(model(x)), step(x).numpy()):  # eager, graph
        np.testing.assert_allclose(out, want, rtol=1e-5)
        assert not out[np.setdiff1d(np.arange(5), np.arange(5)[rows])].any()
    # the graph multiplies only the rows the net reads
    graph = step.get_concrete_function().graph
    shapes = [tuple(op.inputs[0].shape) for op in graph.get_operations() if op.type == "MatMul"]
    assert shapes == [(rows.stop - rows.start, 3), (rows.stop - rows.start, 4)]


def test_feature_dicts_are_cut_key_by_key():
    """Float, int and string features (a lookup layer in the net) are each cut to the rows."""
    keras.utils.set_random_seed(0)

    def inputs():
        return {"a": keras.Input((2,), name="a"), "b": keras.Input((), dtype="int64", name="b"),
                "c": keras.Input((), dtype="string", name="c")}

    ins = inputs()
    emb = keras.layers.Flatten()(keras.layers.Embedding(4, 2)(ins["b"][:, None]))
    hot = keras.layers.StringLookup(vocabulary=["u", "v"], output_mode="one_hot")(ins["c"])
    net = keras.Model(ins, keras.layers.Dense(1)(keras.layers.Concatenate()([ins["a"], emb, hot])))
    fresh = inputs()
    model = keras.Model(fresh, call_on_rows(net, fresh, "e", Layout(1, 2)))
    x = {"a": np.arange(6, dtype=np.float32).reshape(3, 2), "b": np.array([0, 3, 1]),
         "c": np.array(["u", "v", "u"])}
    out = np.asarray(model(x))
    assert out[0, 0] == 0.0
    np.testing.assert_allclose(out[1:], np.asarray(net({k: v[1:] for k, v in x.items()})),
                               rtol=1e-6)


def test_pu_first_puts_every_batch_in_source_order_with_the_same_rows():
    rng = np.random.default_rng(1)
    x_pu, x_e = rng.normal(size=(120, 2)), rng.normal(size=(60, 2))
    ds = adp.data.pue_dataset(x_pu, rng.integers(0, 2, 120), x_e, rng.integers(0, 2, 60),
                              batch_size=24, seed=0)
    shape = batch_layout(120, 60, 24)
    assert shape == Layout(16, 8)
    reorder = pu_first(shape)
    for x, y in ds:
        x2, y2 = reorder(x, y)
        src = y2.numpy()[:, 2]
        assert src.tolist() == [float(Source.PU)] * 16 + [float(Source.E)] * 8
        assert not np.array_equal(y.numpy()[:, 2], src)  # the builder interleaves them
        before = np.concatenate([x.numpy(), y.numpy()], 1)
        after = np.concatenate([x2.numpy(), y2.numpy()], 1)
        np.testing.assert_array_equal(np.sort(before, 0), np.sort(after, 0))


def test_a_batch_of_another_layout_is_refused():
    """The nets' static slices would read the wrong rows: the pipeline stops instead."""
    y = np.array([[1, 0, 0], [0, 1, 1], [0, 0, 0]], np.float32)  # PU, E, PU: Layout(2, 1)
    with pytest.raises(tf.errors.InvalidArgumentError, match="PU rows first"):
        pu_first(Layout(1, 2))(np.arange(3), y)


def test_layouts_of_shuffled_batches_and_none_under_a_strategy():
    assert batch_layout(1000, 500, 512) == Layout(341, 171)
    assert batch_layout(100, 50, 512) == Layout(100, 50)  # one batch of every row
    with tf.distribute.OneDeviceStrategy("/cpu:0").scope():
        assert batch_layout(1000, 500, 512) is None


def _fit(monkeypatch, cut: bool, full: bool = False, mapping: bool = False, **options):
    if not full:  # the pipeline's shuffled batches, as for data larger than a batch
        monkeypatch.setattr(stage, "fits", lambda rows, batch: False)
    if not cut:
        monkeypatch.setattr(stage, "batch_layout", lambda *a, **k: None)
    used = []
    real = layout.call_on_rows

    def spy(net, inputs, name, shape):
        used.append((name, shape))
        return real(net, inputs, name, shape)

    monkeypatch.setattr(stage, "call_on_rows", spy)
    s = adp.synthetic.synthetic_pue(150, 100, seed=2)
    net = lambda: keras.Sequential([keras.Input((2,)), keras.layers.Dense(3, "tanh"),  # noqa: E731
                                    keras.layers.Dense(1)])
    nets = {"a": net, "b": lambda: keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])}
    fit = adp.fit_pue(nets if mapping else net, s.x_pu, s.w_pu, s.x_e, s.e_e, epochs=2,
                      min_steps=40, verbose=0,
                      candidates=["bce_w", "ratio", "likelihood", "brier", "blend"],
                      tolerance=0.0, **options)
    monkeypatch.undo()
    return fit, s, used


@pytest.mark.slow
@pytest.mark.parametrize("options", [{}, {"mapping": True}, {"jit_compile": True}])
def test_fit_pue_with_nets_on_their_rows_gives_the_results_of_every_row(monkeypatch, options):
    """Rows a risk weighs 0 add exact zeros: only float rounding differs (two nets, XLA too)."""
    cut, s, used = _fit(monkeypatch, cut=True, **options)
    every, _, unused = _fit(monkeypatch, cut=False, **options)
    assert ("e", None) in unused and all(shape is None for _, shape in unused)
    assert {n for n, shape in used if shape is not None} >= {"e", "pu", "pue"}
    assert cut.choice == every.choice and cut.epochs == every.epochs
    for name, score in every.scores.items():
        assert cut.scores[name] == pytest.approx(score, rel=1e-5, abs=1e-7), name
    np.testing.assert_allclose(cut.model.predict(s.x_pu, verbose=0),
                               every.model.predict(s.x_pu, verbose=0), rtol=1e-4, atol=1e-5)


@pytest.mark.slow
def test_a_full_batch_keeps_every_row(monkeypatch):
    """Small data (one batch of every row): the cut would cost more than it saves."""
    _, _, used = _fit(monkeypatch, cut=True, full=True)
    assert used and all(shape is None for _, shape in used)
