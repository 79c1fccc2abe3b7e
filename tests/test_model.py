"""DebiasedModel: f† sources, refreshes, metrics, saving, bad input (RefreshDagger: test_callbacks)."""

from __future__ import annotations

import json

import keras
import numpy as np
import pytest
import tensorflow as tf

import adpue_tf as adp
from adpue_tf import model as model_lib
from adpue_tf import synthetic


def _net(seed=0, dim=2, units=1):
    keras.utils.set_random_seed(seed)
    return keras.Sequential([keras.Input((dim,)), keras.layers.Dense(units)])


@pytest.fixture(scope="module")
def pue():
    keras.utils.set_random_seed(0)
    s = synthetic.synthetic_pue(800, 800, seed=3)
    ds = adp.data.pue_dataset(s.x_pu, s.w_pu, s.x_e, s.e_e, batch_size=200, shuffle=False)
    return s, ds


def _batch(ds):
    x, y = next(iter(ds))
    return x.numpy(), y.numpy()


def _loss_with_dagger(loss, y, z, dagger):
    y4 = np.concatenate([y, np.asarray(dagger, np.float32).reshape(-1, 1)], axis=1)
    return float(loss(y4, z))


def test_direct_mode_equals_plain_model(pue):
    """Without callback and initial model, training is direct minimisation."""
    _, ds = pue
    plain = _net(1)
    plain.compile(keras.optimizers.SGD(0.5), loss=adp.ADPUELoss(from_logits=True))
    plain.fit(ds, epochs=2, verbose=0)
    wrapped = adp.DebiasedModel(_net(1))
    wrapped.compile(keras.optimizers.SGD(0.5), loss=adp.ADPUELoss(from_logits=True))
    wrapped.fit(ds, epochs=2, verbose=0)
    assert wrapped.dagger_mode == model_lib.DIRECT
    for a, b in zip(plain.get_weights(), wrapped.net.get_weights()):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("constant", [0.0, 0.3, 1.0])
def test_initial_constant_is_the_dagger_before_the_first_refresh(pue, constant):
    _, ds = pue
    x, y = _batch(ds)
    loss = adp.ADPUELoss(from_logits=True, non_negative=False)
    model = adp.DebiasedModel(_net(2), initial_dagger=constant)
    model.compile("sgd", loss=loss)
    direct = model.evaluate(x, y, batch_size=len(x), verbose=0, return_dict=True)
    z = model.predict(x, verbose=0)
    sig = 1 / (1 + np.exp(-z.astype(np.float64)))
    np.testing.assert_allclose(direct["loss"], _loss_with_dagger(loss, y, z, sig), rtol=1e-5)
    model.start_alternate_learning()
    assert model.dagger_mode == model_lib.INITIAL
    got = model.evaluate(x, y, batch_size=len(x), verbose=0, return_dict=True)
    np.testing.assert_allclose(got["loss"], _loss_with_dagger(loss, y, z, np.full(len(x), constant)),
                               rtol=1e-5)


def test_initial_model_is_the_dagger(pue):
    _, ds = pue
    x, y = _batch(ds)
    guess = _net(7)
    loss = adp.ADPUELoss(from_logits=True, non_negative=False)
    model = adp.DebiasedModel(_net(2), initial_dagger=guess)
    assert model.dagger_mode == model_lib.INITIAL
    model.compile("sgd", loss=loss)
    got = model.evaluate(x, y, batch_size=len(x), verbose=0, return_dict=True)["loss"]
    z = model.predict(x, verbose=0)
    d = 1 / (1 + np.exp(-guess.predict(x, verbose=0).astype(np.float64)))
    np.testing.assert_allclose(got, _loss_with_dagger(loss, y, z, d), rtol=1e-5)


def test_refresh_copies_weights_and_snapshot_is_the_dagger(pue):
    _, ds = pue
    x, y = _batch(ds)
    loss = adp.ADPUELoss(from_logits=True, non_negative=False)
    model = adp.DebiasedModel(_net(3))
    model.compile(keras.optimizers.SGD(0.5), loss=loss)
    model.fit(ds, epochs=2, verbose=0, callbacks=[adp.RefreshDagger()])
    assert (model.refreshes, model.dagger_mode) == (2, model_lib.SNAPSHOT)
    for a, b in zip(model.net.get_weights(), model.snapshot.get_weights()):
        np.testing.assert_array_equal(a, b)
    frozen = [w.copy() for w in model.snapshot.get_weights()]
    model.fit(ds, epochs=1, verbose=0)  # no callback: snapshot stays frozen
    for a, b in zip(frozen, model.snapshot.get_weights()):
        np.testing.assert_array_equal(a, b)
    assert not np.allclose(model.net.get_weights()[0], frozen[0])
    z = model.predict(x, verbose=0)
    d = 1 / (1 + np.exp(-model.snapshot.predict(x, verbose=0).astype(np.float64)))
    got = model.evaluate(x, y, batch_size=len(x), verbose=0, return_dict=True)["loss"]
    np.testing.assert_allclose(got, _loss_with_dagger(loss, y, z, d), rtol=1e-5)


def test_risk_metrics_logged_for_training_and_validation(pue):
    _, ds = pue
    model = adp.DebiasedModel(_net(6))
    model.compile("adam", loss=adp.ADPUELoss(from_logits=True))
    hist = model.fit(ds, validation_data=ds, epochs=2, verbose=0,
                     callbacks=[adp.RefreshDagger()]).history
    for name in ("risk", "r_pos", "r_neg", "nn_fired"):
        assert name in hist and f"val_{name}" in hist
    np.testing.assert_allclose(hist["risk"], hist["loss"], rtol=1e-6)
    assert all(0.0 <= v <= 1.0 for v in hist["nn_fired"])


def test_regularisation_losses_are_added(pue):
    _, ds = pue
    x, y = _batch(ds)
    keras.utils.set_random_seed(0)
    net = keras.Sequential([keras.Input((2,)), keras.layers.Dense(
        1, kernel_regularizer=keras.regularizers.L2(0.5))])
    model = adp.DebiasedModel(net)
    model.compile("sgd", loss=adp.ADPUELoss(from_logits=True))
    res = model.evaluate(x, y, batch_size=len(x), verbose=0, return_dict=True)
    l2 = 0.5 * float(np.sum(net.get_weights()[0] ** 2))
    np.testing.assert_allclose(res["loss"], res["risk"] + l2, rtol=1e-5)


def test_call_and_predict_return_the_net_output(pue):
    _, ds = pue
    x, _ = _batch(ds)
    model = adp.DebiasedModel(_net(8))
    np.testing.assert_array_equal(model.predict(x, verbose=0), model.net.predict(x, verbose=0))


@pytest.mark.parametrize("initial", [pytest.param("constant", marks=pytest.mark.slow), "model"])
def test_keras_save_load_keeps_net_snapshot_and_initial_guess(pue, tmp_path, initial):
    _, ds = pue
    x, y = _batch(ds)
    guess = 0.2 if initial == "constant" else _net(11)
    model = adp.DebiasedModel(_net(9), initial_dagger=guess)
    model.compile(keras.optimizers.Adam(0.01), loss=adp.ADPUELoss(from_logits=True, gamma=1.0))
    model.fit(ds, epochs=2, verbose=0, callbacks=[adp.RefreshDagger(every_n_epochs=1)])
    model.fit(ds, epochs=1, verbose=0)
    path = tmp_path / "debiased.keras"
    model.save(path)
    loaded = keras.models.load_model(path)
    assert isinstance(loaded, adp.DebiasedModel)
    assert (loaded.refreshes, loaded.dagger_mode) == (model.refreshes, model.dagger_mode)
    for part in ("net", "snapshot"):
        for a, b in zip(getattr(model, part).get_weights(), getattr(loaded, part).get_weights()):
            np.testing.assert_array_equal(a, b)
    if initial == "model":
        for a, b in zip(guess.get_weights(), loaded.initial_model.get_weights()):
            np.testing.assert_array_equal(a, b)
    else:
        assert loaded.get_config()["initial_dagger"] == 0.2
    assert loaded.loss.get_config() == model.loss.get_config()
    np.testing.assert_allclose(loaded.evaluate(x, y, verbose=0), model.evaluate(x, y, verbose=0),
                               rtol=1e-6)
    np.testing.assert_array_equal(loaded.predict(x, verbose=0), model.predict(x, verbose=0))


def test_config_round_trips():
    model = adp.DebiasedModel(_net(0), initial_dagger=0.25)
    config = model.get_config()
    revived = adp.DebiasedModel.from_config(json.loads(json.dumps(config)))
    assert revived.get_config()["initial_dagger"] == 0.25


# -- bad input -----------------------------------------------------------------

def test_net_with_two_output_units():
    with pytest.raises(ValueError, match="net.*one output unit"):
        adp.DebiasedModel(_net(0, units=2))


def test_net_with_two_outputs():
    inp = keras.Input((2,))
    two = keras.Model(inp, [keras.layers.Dense(1)(inp), keras.layers.Dense(1)(inp)])
    with pytest.raises(ValueError, match="net.*single output"):
        adp.DebiasedModel(two)


@pytest.mark.parametrize("value,err", [(-0.1, ValueError), (1.5, ValueError),
                                       ("half", TypeError), (True, TypeError)])
def test_initial_guess_outside_unit_interval(value, err):
    with pytest.raises(err, match="initial_dagger"):
        adp.DebiasedModel(_net(0), initial_dagger=value)


def test_initial_model_that_is_the_net_or_shares_its_weights_is_refused():
    net = _net(0)
    with pytest.raises(ValueError, match="`initial_dagger` must be a model of its own.*is `net`"):
        adp.DebiasedModel(net, initial_dagger=net)
    wrapper = keras.Sequential([keras.Input((2,)), net])  # the net's own layers inside
    with pytest.raises(ValueError, match="shares weights with `net`"):
        adp.DebiasedModel(net, initial_dagger=wrapper)
    assert net.trainable  # nothing was frozen


def test_initial_model_with_two_units():
    with pytest.raises(ValueError, match="initial_dagger"):
        adp.DebiasedModel(_net(0), initial_dagger=_net(1, units=2))


def test_net_not_a_model():
    with pytest.raises(TypeError, match="net"):
        adp.DebiasedModel(keras.layers.Dense(1))


def test_initial_model_with_a_loss_that_cannot_use_it():
    with_guess = adp.DebiasedModel(_net(0), initial_dagger=_net(1))
    with pytest.raises(ValueError, match="does not use f"):
        with_guess.compile("sgd", loss=adp.NNPULoss(prior=0.3, from_logits=True))


def test_loss_not_a_debiased_loss():
    model = adp.DebiasedModel(_net(0))
    with pytest.raises(TypeError, match="loss"):
        model.compile("sgd", loss="binary_crossentropy")


# -- from_logits mismatch, non-finite values, obscure errors made clear ------

def _sigmoid_net(seed=0, dim=2):
    keras.utils.set_random_seed(seed)
    return keras.Sequential([keras.Input((dim,)), keras.layers.Dense(1, activation="sigmoid")])


def test_sigmoid_net_or_initial_model_with_from_logits_true_is_refused_at_compile():
    with pytest.raises(ValueError, match="`net` ends in a sigmoid.*from_logits=True"):
        adp.DebiasedModel(_sigmoid_net()).compile("sgd", loss=adp.ADPUELoss(from_logits=True))
    model = adp.DebiasedModel(_net(0), initial_dagger=_sigmoid_net(1))
    with pytest.raises(ValueError, match="`initial_dagger` ends with a sigmoid.*from_logits=True"):
        model.compile("sgd", loss=adp.ADPUELoss(from_logits=True))


@pytest.mark.parametrize("run_eagerly", [False, True])
def test_logit_net_or_initial_model_with_from_logits_false_is_refused_in_fit(pue, run_eagerly):
    """Dense(1) logits with the default from_logits=False used to be clipped into [0, 1]."""
    _, ds = pue
    err = ValueError  # compiled too: the graph assertion raised again as the check's ValueError
    model = adp.DebiasedModel(_net(0))
    model.compile("sgd", loss=adp.ADPUELoss(), run_eagerly=run_eagerly)
    with pytest.raises(err, match=r"`y_pred` holds values outside \[0, 1\].*from_logits=False"):
        model.fit(ds, epochs=1, verbose=0)
    model = adp.DebiasedModel(_sigmoid_net(0), initial_dagger=_net(1))
    # refused before training: the shared convention check samples its outputs
    with pytest.raises(ValueError, match=r"`initial_dagger` must output probabilities in "
                       r"\[0, 1\] \(`from_logits=False`\).*it outputs logits"):
        model.compile("sgd", loss=adp.ADPUELoss(), run_eagerly=run_eagerly)


def _poisoned(value, row=3):
    s = synthetic.synthetic_pue(200, 200, seed=3)
    ds = adp.data.pue_dataset(s.x_pu, s.w_pu, s.x_e, s.e_e, batch_size=100, shuffle=False)
    return ds.map(lambda x, y: (tf.tensor_scatter_nd_update(x, [[row, 0]], [value]), y))


def _deep(seed=0):
    keras.utils.set_random_seed(seed)
    return keras.Sequential([keras.Input((2,)), keras.layers.Dense(4, activation="relu"),
                             keras.layers.Dense(1)])


@pytest.mark.parametrize("value,match", [
    (np.nan, r"NaN or inf found in `x\[0\]`|`x\[0\]` holds 1 NaN"),
    (np.float32(3e38), "exploded values"),
])
@pytest.mark.parametrize("kind", ["debiased", "debiased-eager", "plain"])
def test_non_finite_or_huge_features_stop_training_before_any_update(value, match, kind):
    """A NaN or 3e38 in a user's pipeline used to make loss and weights NaN silently."""
    net = _deep(0)
    if kind == "plain":
        net = _net(0)  # a ReLU can hide a NaN feature from the output of a plain model
        match = "exploded values|the loss is NaN"
    model = net if kind == "plain" else adp.DebiasedModel(net)
    model.compile(keras.optimizers.Adam(0.1), loss=adp.ADPUELoss(from_logits=True),
                  run_eagerly=kind.endswith("eager"))
    before = [w.copy() for w in net.get_weights()]
    # DebiasedModel raises its failed check as a ValueError in graph mode too
    err = tf.errors.InvalidArgumentError if kind == "plain" else ValueError
    with pytest.raises(err, match=match):
        model.fit(_poisoned(np.float32(value)), epochs=1, verbose=0)
    for a, b in zip(before, net.get_weights()):
        np.testing.assert_array_equal(a, b)
    assert all(np.all(np.isfinite(np.asarray(v))) for v in model.optimizer.variables
               if "float" in str(v.dtype))


def test_dict_output_nets_are_refused_clearly(pue):
    inp = keras.Input((2,))
    functional = keras.Model(inp, {"logit": keras.layers.Dense(1)(inp)})
    with pytest.raises(ValueError, match=r"`net` must have a single output.*dict with keys"):
        adp.DebiasedModel(functional)

    class DictNet(keras.Model):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.dense = keras.layers.Dense(1)

        def call(self, x):
            return {"logit": self.dense(x)}

    _, ds = pue
    model = adp.DebiasedModel(DictNet())
    model.compile("sgd", loss=adp.ADPUELoss(from_logits=True))
    with pytest.raises(ValueError, match=r"`net` must have a single output.*dict with keys \['logit'\]"):
        model.fit(ds, epochs=1, verbose=0)


def test_initial_model_of_the_wrong_width_is_refused_at_construction():
    with pytest.raises(ValueError, match=r"`initial_dagger` takes inputs of shape \[\(3,\)\] "
                                         r"but `net` takes \[\(2,\)\]"):
        adp.DebiasedModel(_net(0, dim=2), initial_dagger=_net(1, dim=3))


def test_unregistered_subclassed_net_names_the_real_cause(tmp_path):
    class Unregistered(keras.Model):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.dense = keras.layers.Dense(1)

        def call(self, x):
            return self.dense(x)

    net = Unregistered()
    net(np.zeros((1, 2), np.float32))
    model = adp.DebiasedModel(net)
    model.compile("sgd", loss=adp.ADPUELoss(from_logits=True))
    path = tmp_path / "m.keras"
    model.save(path)
    with pytest.raises(ValueError, match=r"could not rebuild its `net` \('Unregistered'\).*"
                                         r"Could not locate class 'Unregistered'.*register"):
        keras.models.load_model(path)


def test_subclassed_net_that_cannot_be_cloned_is_explained():
    class NoKwargs(keras.Model):
        def __init__(self):
            super().__init__()
            self.dense = keras.layers.Dense(1)

        def call(self, x):
            return self.dense(x)

    with pytest.raises(TypeError, match=r"(?s)clone_model.*NoKwargs.*\*\*kwargs"):
        adp.DebiasedModel(NoKwargs())


def _packed_rows(n=32, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(2 * n, 2)).astype("float32")
    w, e = (rng.random(n) < 0.4).astype("float32"), (rng.random(n) < 0.6).astype("float32")
    from adpue_tf.labels import pack_e, pack_pu
    order = np.arange(2 * n).reshape(2, n).T.ravel()  # PU and E rows alternate
    return x[order], np.concatenate([pack_pu(w), pack_e(e)]).astype("float32")[order]


def _xla_model(steps=1):
    model = adp.DebiasedModel(_net(0), initial_dagger=0.3)
    model.compile(keras.optimizers.Adam(0.01), loss=adp.ADPUELoss(from_logits=True),
                  jit_compile=True, steps_per_execution=steps)
    return model


@pytest.mark.parametrize("poison,match", [
    ("feature", r"NaN or inf found in `x\[0\]`.*jit_compile=False"),
    ("label", r"columns w and e must hold only 0 and 1.*jit_compile=False"),
])
@pytest.mark.parametrize("steps", [1, pytest.param(4, marks=pytest.mark.slow)])
def test_xla_step_raises_its_failed_check_after_the_step(poison, match, steps):
    """Under XLA the assertions compile away: a NaN feature or a label of 2 trained silently."""
    x, y = _packed_rows()
    if poison == "feature":
        x[40, 0] = np.nan
    else:
        y[5, 0] = 2.0
    ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(16)  # the poison in batch 3
    model = _xla_model(steps)
    with pytest.raises(ValueError, match=match) as caught:
        model.fit(ds, epochs=2, verbose=0)
    assert "training stops before the weights" not in str(caught.value)
    # The flag is cleared: on clean rows the same model trains on (a label of 2 left the
    # weights finite) or stops at its NaN weights, the NaN feature's update (as documented).
    clean = tf.data.Dataset.from_tensor_slices(_packed_rows(seed=1)).batch(16)
    if poison == "label":
        model.fit(clean, epochs=1, verbose=0)
        assert all(np.all(np.isfinite(w)) for w in model.net.get_weights())
    else:
        assert not all(np.all(np.isfinite(w)) for w in model.net.get_weights())
        with pytest.raises(ValueError, match="NaN or inf found in the output of `net`"):
            model.fit(clean, epochs=1, verbose=0)


def test_xla_validation_step_raises_its_failed_check():
    x, y = _packed_rows()
    bad = x.copy()
    bad[3, 1] = np.inf
    model = _xla_model()
    with pytest.raises(ValueError, match=r"NaN or inf found in `x\[0\]`"):
        model.fit(tf.data.Dataset.from_tensor_slices((x, y)).batch(16), epochs=1, verbose=0,
                  validation_data=tf.data.Dataset.from_tensor_slices((bad, y)).batch(16))


def test_xla_step_on_clean_rows_trains_as_without_the_recorded_checks():
    """The recorded checks only read the step's values: XLA weights equal a plain XLA step's."""
    x, y = _packed_rows()
    ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(16)
    model = _xla_model()
    model.fit(ds, epochs=2, verbose=0)
    plain = _xla_model()
    plain._step_checks.traced = lambda kind, step, *a, **k: step(*a, **k)
    plain.make_train_function()
    plain.train_function = None  # Keras's own function, nothing recorded or read
    plain.fit(ds, epochs=2, verbose=0)
    for a, b in zip(model.net.get_weights(), plain.net.get_weights()):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


def test_graph_mode_check_is_a_value_error_caused_by_tensorflows():
    x, y = _packed_rows()
    x[2, 0] = np.nan
    model = adp.DebiasedModel(_net(0))
    model.compile("sgd", loss=adp.ADPUELoss(from_logits=True))
    with pytest.raises(ValueError, match=r"NaN or inf found in `x\[0\]`"):
        model.fit(tf.data.Dataset.from_tensor_slices((x, y)).batch(16), epochs=1, verbose=0)
    assert all(np.all(np.isfinite(w)) for w in model.net.get_weights())


def test_a_step_traced_on_direct_f_dagger_is_not_reused_after_alternate_learning_starts():
    """The train functions kept across fits hold whether f† was direct when traced."""
    x, y = _packed_rows()
    ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(16)
    model = adp.DebiasedModel(_net(0), initial_dagger=0.3)
    model.compile(keras.optimizers.SGD(0.1), loss=adp.ADPUELoss(from_logits=True))
    model.fit(ds, epochs=1, verbose=0)  # direct: f† = σ(z) of the step itself
    start = [w.copy() for w in model.net.get_weights()]
    model.start_alternate_learning()  # now the constant 0.3 until a refresh
    model.fit(ds, epochs=1, verbose=0)
    fresh_net = _net(1)
    fresh_net.set_weights(start)
    fresh = adp.DebiasedModel(fresh_net, initial_dagger=0.3)
    fresh.compile(keras.optimizers.SGD(0.1), loss=adp.ADPUELoss(from_logits=True))
    fresh.start_alternate_learning()
    fresh.fit(ds, epochs=1, verbose=0)
    for a, b in zip(model.net.get_weights(), fresh.net.get_weights()):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


def test_graph_mode_source_check_is_a_value_error_in_fit_and_evaluate():
    """A check whose message holds a quote (TensorFlow escapes it) is raised as its ValueError."""
    x, y = _packed_rows()
    only_e = y[:, 2] == float(adp.Source.E)
    ds = tf.data.Dataset.from_tensor_slices((x[only_e], y[only_e])).batch(64)
    model = adp.DebiasedModel(_net(0), initial_dagger=0.3)
    model.compile("sgd", loss=adp.ADPUELoss(from_logits=True))
    for run in (lambda: model.fit(ds, epochs=1, verbose=0),
                lambda: model.evaluate(ds, verbose=0),
                lambda: model.fit(x[:16], y[:16], validation_data=ds, epochs=1, verbose=0)):
        with pytest.raises(ValueError, match=r"needs rows of PU and E in every batch.*loss's"):
            run()


def test_class_weight_is_refused_by_name():
    """Keras's class of a packed row is the argmax of (w, e, source): not W."""
    x, y = _packed_rows()
    model = adp.DebiasedModel(_net(0), initial_dagger=0.3)
    model.compile("sgd", loss=adp.ADPUELoss(from_logits=True))
    with pytest.raises(ValueError, match="`class_weight`.*sample_weight"):
        model.fit(x, y, epochs=1, verbose=0, class_weight={0: 1.0, 1: 5.0})
    with pytest.raises(ValueError, match="`class_weight`"):
        model.fit(x, y, 16, 1, 0, None, 0.0, None, True, {0: 1.0, 1: 5.0})
    model.fit(x, y, epochs=1, verbose=0, class_weight=None)  # None: as Keras


def test_an_initial_model_may_share_a_frozen_part_with_the_net():
    """A frozen layer both use (a pretrained encoder) is no reason to refuse: it stays frozen
    and the net's own layers stay trainable."""
    frozen = keras.layers.Dense(3, name="shared_frozen")
    frozen.trainable = False
    net = keras.Sequential([keras.Input((2,)), frozen, keras.layers.Dense(1)])
    dagger = keras.Sequential([keras.Input((2,)), frozen, keras.layers.Dense(1)])
    model = adp.DebiasedModel(net, initial_dagger=dagger)
    assert model.initial_model is dagger and not frozen.trainable
    assert net.layers[-1].trainable and not dagger.layers[-1].trainable
