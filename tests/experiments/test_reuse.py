"""fit_pue keeps its compiled joint models between passes inside ``keep_compiled``: the same
results, nets never shared, nothing kept after a plain call."""

from __future__ import annotations

import functools

import keras
import numpy as np
import pytest

import adpue_tf as adp
from adpue_tf.experiments import reuse
from adpue_tf.recommend import full_batch

FAST = dict(epochs=1, min_steps=40, batch_size=128, verbose=0)


@pytest.fixture(autouse=True)
def _nothing_kept_yet():
    """Each test starts outside any block, with no kept models."""
    assert reuse._KEPT is None and reuse._OPEN == 0


@pytest.fixture
def kept():
    """The test runs inside a ``keep_compiled`` block (``_mlp``'s builders share their code)."""
    with reuse.keep_compiled():
        yield


def _data(seed: int, rows: int = 200):
    return adp.synthetic.synthetic_pue(rows, rows, seed=seed)


def _mlp(dropout: float = 0.0):
    def build():
        return keras.Sequential([keras.Input((2,)), keras.layers.Dense(4, activation="relu"),
                                 keras.layers.Dropout(dropout), keras.layers.Dense(1)])
    return build


def _fits(build, seeds=(0, 1), **options):
    out = []
    for seed in seeds:
        s = _data(seed)
        out.append(adp.fit_pue(build, s.x_pu, s.w_pu, s.x_e, s.e_e, seed=seed,
                               **{**FAST, **options}))
    return out


def _same(a, b, final_ulp=False):
    """The same choice, scores and candidates bit for bit; the final model too, or with
    ``final_ulp`` within a float32 rounding (what a full-batch refit of a kept model gave)."""
    assert a.choice == b.choice and a.scores == b.scores
    for name in a.candidates:
        for u, v in zip(a.candidates[name].get_weights(), b.candidates[name].get_weights()):
            np.testing.assert_array_equal(u, v)
    for u, v in zip(a.model.get_weights(), b.model.get_weights()):
        if final_ulp:
            np.testing.assert_allclose(u, v, rtol=1e-6, atol=1e-7)
        else:
            np.testing.assert_array_equal(u, v)


@pytest.mark.slow
@pytest.mark.parametrize("dropout", [0.0, 0.3])
def test_kept_models_give_the_results_of_new_ones(dropout):
    """Two calls with one build_net in a block (the second reuses), against plain calls."""
    with reuse.keep_compiled():
        kept = _fits(_mlp(dropout))
        lives = [n for entries in reuse._KEPT.values() for e in entries.values() for n in e.nets]
    assert lives and not any(fit.candidates[c] is n for fit in kept for c in fit.candidates
                             for n in lives)
    new = _fits(_mlp(dropout))  # plain calls: nothing kept from one to the next
    for a, b in zip(kept, new):
        _same(a, b)


#: Candidates whose nets train in a model of their own (alternate learning's
#: DebiasedModel with its snapshot, likelihood_theta's learned scale), and some that do not.
ALONE = ["bce_w", "ratio", "ips", "likelihood_theta", "adpue_direct", "adpue_rounds",
         "adpue_ratio"]


@pytest.mark.slow  # 50-100 s a case; the joint passes' kept models are tested above
@pytest.mark.parametrize("options", [
    dict(batch_size=128),  # batches of the shuffled pipeline
    dict(batch_size=512),  # every row in one batch: an epoch in one call
    dict(batch_size=512, jit_compile=True)])
def test_kept_models_of_candidates_trained_alone_give_the_results_of_new_ones(
        monkeypatch, options):
    """Their compiled models are kept too: the next call's results are a new model's, bit for bit.

    Except, full-batch without XLA, the refit: 2 of its 8 weights differed by 3e-8 (one
    float32 rounding of values near 0.45), measured; the candidates and scores are equal.
    """
    build = _mlp(0.2)
    with reuse.keep_compiled():
        kept = _fits(build, candidates=ALONE, epochs=2, rounds=2, **options)
        alone = {key[0][0][1] for key in reuse._KEPT[reuse.owner(build)]
                 if key[0][0][0] == "own"}
    # adpue_rounds' step holds f†₀ = mean(W) of the call's rows: never kept
    assert alone == {"likelihood_theta", "adpue_ratio"}
    monkeypatch.setattr(reuse, "MAX_PARAMS", -1)  # nothing kept
    new = _fits(_mlp(0.2), candidates=ALONE, epochs=2, rounds=2, **options)
    for a, b in zip(kept, new):
        _same(a, b, final_ulp=options == dict(batch_size=512))
        assert a.candidates["adpue_ratio"].train_function is None  # Keras's own for the user


def test_a_plain_call_keeps_nothing_after_it_returns():
    build = _mlp()
    fit, = _fits(build, seeds=(0,))
    assert reuse._KEPT is None and reuse.kept_for(build) == {}
    assert fit.model.count_params() > 0


@pytest.mark.slow
def test_blocks_nest_the_outermost_keeps_and_drops():
    build = _mlp()
    with reuse.keep_compiled():
        with reuse.keep_compiled():
            _fits(build, seeds=(0,))
        inner = reuse.kept_for(build)
        assert len(inner) == 3  # still kept after the inner block and after the call
        _fits(build, seeds=(1,))
        assert reuse.kept_for(build).keys() == inner.keys()
    assert reuse._KEPT is None and reuse.kept_for(build) == {}


def test_one_block_object_may_be_entered_again():
    block = reuse.keep_compiled()
    for _ in range(2):
        with block as entered:
            assert entered is block and reuse._KEPT is not None
        assert reuse._KEPT is None


@pytest.mark.slow
def test_the_second_call_reuses_the_joint_steps_and_returns_nets_of_its_own(kept):
    build = _mlp()
    first, = _fits(build, seeds=(0,))
    before = [w.copy() for w in first.model.get_weights()]
    entries = reuse._KEPT[reuse.owner(build)]
    # the first pass (θ̂, bce_w, brier), the likelihood pass and likelihood_theta's (blend's parts)
    assert len(entries) == 3
    steps = {k: e.model.train_function for k, e in entries.items()}
    second, = _fits(build, seeds=(1,))
    assert {k: e.model.train_function for k, e in entries.items()} == steps  # the same step
    for entry in entries.values():  # trained again from a reset optimizer: one pass of steps
        assert int(entry.model.optimizer.iterations.numpy()) == entry.model.steps_per_execution
    for entry in entries.values():
        for live in entry.nets:
            for result in (first, second):
                assert all(live is not m for m in result.candidates.values())
    for u, v in zip(before, first.model.get_weights()):  # the first result is untouched
        np.testing.assert_array_equal(u, v)


@pytest.mark.slow
def test_a_build_net_that_changes_its_nets_is_not_given_a_kept_model(kept):
    width = [4]

    def build():
        return keras.Sequential([keras.Input((2,)), keras.layers.Dense(width[0], activation="tanh"),
                                 keras.layers.Dense(1)])

    _fits(build, seeds=(0,))
    width[0] = 6
    fit, = _fits(build, seeds=(1,))
    assert fit.model.count_params() > 0
    assert fit.candidates["brier"].layers[0].units == 6
    sigs = {reuse.signature(e.nets[0]) for e in reuse.kept_for(build).values()}
    assert len(sigs) == 2  # one kept model per architecture


@pytest.mark.slow
def test_a_new_builder_from_one_factory_each_call_reuses_the_compiled_steps(monkeypatch, kept):
    """A lambda made in a loop (or a factory's closure per call) leaves no compiled model behind.

    TensorFlow never frees a compiled model's traced steps, so a call that built
    its own would grow the process (benchmarks/results/linear.recommended.md).
    """
    first, = _fits(_mlp(), seeds=(0,))
    steps = {k: e.model.train_function for k, e in reuse.kept_for(_mlp()).items()}
    assert len(steps) == 3
    second, = _fits(_mlp(), seeds=(1,))  # a new closure, the same code
    assert {k: e.model.train_function for k, e in reuse.kept_for(_mlp()).items()} == steps
    monkeypatch.setattr(reuse, "MAX_PARAMS", -1)  # nothing kept: the results are the same
    for got, seed in ((first, 0), (second, 1)):
        _same(got, _fits(_mlp(), seeds=(seed,))[0])


def _linear_net():
    return keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])


def _one_net_model(nets):
    """A compiled model of one net: the ``build`` of a pass, for :func:`reuse.compiled`."""
    from adpue_tf.recommend.train import compile_for_fit

    model = keras.Sequential([keras.Input((2,)), nets[0]])
    compile_for_fit(model, optimizer=keras.optimizers.Adam(0.1), loss="mse")
    return model


def test_outside_a_block_compiled_gives_a_new_model_each_time():
    fresh = [_linear_net()]
    a = reuse.compiled(_linear_net, "pass", fresh, _one_net_model)
    assert not a.kept and a.nets[0] is fresh[0]
    a.give(fresh)
    b = reuse.compiled(_linear_net, "pass", [_linear_net()], _one_net_model)
    assert b.model is not a.model and reuse.kept_for(_linear_net) == {}


def test_owner_files_functions_and_methods_under_their_code():
    class Nets:
        def __init__(self, units):
            self.units = units

        def build(self):
            return keras.Sequential([keras.Input((2,)), keras.layers.Dense(self.units)])

    assert reuse.owner(Nets(1).build) == reuse.owner(Nets(2).build) == Nets.build.__code__
    assert reuse.owner(_mlp()) == reuse.owner(_mlp(0.5)) != reuse.owner(Nets(1).build)
    partial = functools.partial(_mlp(), )
    assert reuse.owner(partial) is partial
    assert reuse.kept_for(_mlp()) == {}


def test_signature_tells_architectures_apart():
    a = keras.Sequential([keras.Input((2,)), keras.layers.Dense(3, activation="relu")])
    b = keras.Sequential([keras.Input((2,)), keras.layers.Dense(3, activation="tanh")])
    c = keras.Sequential([keras.Input((2,)), keras.layers.Dense(3, activation="relu")])
    assert reuse.signature(a) != reuse.signature(b)
    assert reuse.signature(a) == reuse.signature(c)
    assert reuse.unnamed({"name": "x", "layers": [{"name": "y", "units": 3}]}) == {
        "layers": [{"units": 3}]}


@pytest.mark.slow
def test_large_nets_are_not_kept(monkeypatch, kept):
    monkeypatch.setattr(reuse, "MAX_PARAMS", 5)
    build = _mlp()
    _fits(build, seeds=(0,))
    assert not reuse.kept_for(build)


def test_a_kept_model_is_handed_out_once_at_a_time_and_loaded_with_the_fresh_state(kept):
    fresh = [_linear_net()]
    a = reuse.compiled(_linear_net, "pass", fresh, _one_net_model)
    assert a.nets[0] is not fresh[0]
    for u, v in zip(a.nets[0].get_weights(), fresh[0].get_weights()):
        np.testing.assert_array_equal(u, v)
    x, y = np.ones((4, 2), "float32"), np.zeros((4, 1), "float32")
    a.model.fit(x, y, epochs=1, verbose=0)
    b = reuse.compiled(_linear_net, "pass", [_linear_net()], _one_net_model)  # a is in use: a new one
    assert b.model is not a.model
    a.give(fresh)  # fresh gets the trained weights; a is free again
    np.testing.assert_array_equal(fresh[0].get_weights()[0], a.nets[0].get_weights()[0])
    other = [_linear_net()]
    c = reuse.compiled(_linear_net, "pass", other, _one_net_model)
    assert c.model is a.model and int(c.model.optimizer.iterations.numpy()) == 0
    np.testing.assert_array_equal(c.nets[0].get_weights()[0], other[0].get_weights()[0])


class _Scale(keras.layers.Layer):
    """A layer whose configuration leaves out its factor (as a careless one might)."""

    def __init__(self, factor: float = 1.0, **kwargs):
        super().__init__(**kwargs)
        self.factor = factor

    def call(self, x):
        return x * self.factor

    def get_config(self):
        return super().get_config()


def test_a_change_the_configuration_hides_is_caught_by_the_probe(kept):
    from adpue_tf.recommend.train import compile_for_fit

    factor = [1.0]

    def build_net():
        return keras.Sequential([keras.Input((2,)), keras.layers.Dense(1), _Scale(factor[0])])

    def build(nets):
        model = keras.Sequential([keras.Input((2,)), nets[0]])
        compile_for_fit(model, optimizer=keras.optimizers.Adam(0.1), loss="mse")
        return model

    probe = np.ones((3, 2), "float32")
    fresh = [build_net()]
    a = reuse.compiled(build_net, "pass", fresh, build, probe)
    a.give(fresh)
    factor[0] = 3.0
    changed = [build_net()]
    assert reuse.signature(changed[0]) == reuse.signature(fresh[0])  # the config cannot tell
    b = reuse.compiled(build_net, "pass", changed, build, probe)
    assert b.model is not a.model and b.nets[0] is changed[0]  # a new model, the fresh net


@pytest.mark.slow
def test_no_call_clears_tensorflows_kernel_cache(monkeypatch, kept):
    """``tf.random.set_seed`` clears the eager kernel cache: kept steps are instantiated again,
    and under XLA each instantiation keeps ~3 MB (benchmarks/results/linear.recommended.md)."""
    import tensorflow as tf

    from adpue_tf._internal.seeding import pin_tf_seed

    tf.random.set_seed(5)  # a caller's own seed: pinned once, by the first call
    eager = []
    real = tf.random.set_seed

    def spy(seed):
        if tf.executing_eagerly():
            eager.append(seed)
        real(seed)

    monkeypatch.setattr(tf.random, "set_seed", spy)
    _fits(_mlp(), seeds=(0,))
    assert len(eager) == 1
    _fits(_mlp(), seeds=(1, 2))
    assert len(eager) == 1  # fresh nets are seeded without it
    pin_tf_seed()
    assert len(eager) == 1


@pytest.mark.slow
def test_the_callers_tensorflow_seed_does_not_change_the_result():
    import tensorflow as tf

    tf.random.set_seed(123)
    a, = _fits(_mlp(0.3), seeds=(0,))
    tf.random.set_seed(999)
    b, = _fits(_mlp(0.3), seeds=(0,))
    _same(a, b)


def _pue(seed: int = 0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(23, 3)).astype("float32"), (rng.random(23) < .4).astype("float32"), \
        None, None


def _net(seed: int) -> keras.Model:
    keras.utils.set_random_seed(seed)
    return keras.Sequential([keras.Input((3,)), keras.layers.Dense(4, "tanh"),
                             keras.layers.Dense(1)])


class _Hooks(keras.callbacks.Callback):
    """Records the hooks called, and stops training after epoch ``stop`` (0-based) if given."""

    def __init__(self, stop: int | None = None) -> None:
        super().__init__()
        self.calls, self.stop = [], stop

    def on_train_begin(self, logs=None):
        self.calls.append(("train_begin",))

    def on_epoch_begin(self, epoch, logs=None):
        self.calls.append(("epoch_begin", epoch))

    def on_train_batch_begin(self, batch, logs=None):
        self.calls.append(("batch_begin", batch))

    def on_train_batch_end(self, batch, logs=None):
        self.calls.append(("batch_end", batch))

    def on_epoch_end(self, epoch, logs=None):
        self.calls.append(("epoch_end", epoch, [w.copy() for w in self.model.get_weights()]))
        if epoch == self.stop:
            self.model.stop_training = True

    def on_train_end(self, logs=None):
        self.calls.append(("train_end",))


@pytest.mark.parametrize("jit", [False, pytest.param(True, marks=pytest.mark.slow)])
@pytest.mark.parametrize("stop", [None, 1])
def test_a_kept_models_fit_calls_the_hooks_and_makes_the_updates_of_kerass_fit(jit, stop):
    """reuse.fit after a model's first fit: Keras's hooks, epochs and weights, bit for bit."""
    x, w, _, _ = _pue()
    data = full_batch.whole(x, adp.labels.pack_pu(w))
    net = _net(0)
    net.compile(optimizer=keras.optimizers.Adam(0.05), steps_per_execution=7,
                loss=adp.LogitLoss(from_logits=True), jit_compile=jit)
    full_batch.install_loop(net)
    reuse.fit(net, data, epochs=1, steps=7, callbacks=[])  # the first: Keras's fit
    state = [v.numpy().copy() for v in [*net.variables, *net.optimizer.variables]]
    runs = {}
    for fast in (True, False):
        for v, value in zip([*net.variables, *net.optimizer.variables], state):
            v.assign(value)
        net._adpue_fitted = fast  # False: the next fit is Keras's own
        hooks = _Hooks(stop)
        reuse.fit(net, data, epochs=3, steps=7, callbacks=[hooks])
        runs[fast] = (hooks.calls, int(net.optimizer.iterations), net.get_weights())
    (calls, steps, weights), (want_calls, want_steps, want_weights) = runs[True], runs[False]
    assert [c[:2] for c in calls] == [c[:2] for c in want_calls]
    assert steps == want_steps == 7 * (3 if stop is None else 2) + 7
    for got, want in zip(weights, want_weights):
        np.testing.assert_array_equal(got, want)
    epoch_ends = [(c, d) for c, d in zip(calls, want_calls) if c[0] == "epoch_end"]
    for c, d in epoch_ends:  # the weights each epoch's hooks saw
        for got, want in zip(c[2], d[2]):
            np.testing.assert_array_equal(got, want)
