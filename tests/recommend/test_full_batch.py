"""Full-batch training of fit_pue's small data: the same rows, the same updates, the same choice."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

import adpue_tf as adp
from adpue_tf.data import pue_dataset
from adpue_tf.recommend import full_batch, stage, train


def _rows_of(x, y) -> np.ndarray:
    """Each row's features and labels as one sorted table (order-free comparison)."""
    cols = [np.reshape(np.asarray(v, np.float64), (len(y), -1)) for v in tf.nest.flatten(x)]
    table = np.concatenate([*cols, np.asarray(y, np.float64)], axis=1)
    return table[np.lexsort(table.T[::-1])]


def _pue(seed: int = 0, dict_features: bool = False):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(23, 3)).astype("float32")
    xe = rng.normal(size=(17, 3)).astype("float32")
    w = (rng.random(23) < .4).astype("float32")
    e = (rng.random(17) < .5).astype("float32")
    if dict_features:
        x = {"dense": x, "id": rng.integers(0, 5, 23)}
        xe = {"dense": xe, "id": rng.integers(0, 5, 17)}
    return x, w, xe, e


@pytest.mark.parametrize("dict_features", [False, True])
def test_the_whole_pue_batch_holds_the_rows_of_every_pipeline_batch(dict_features):
    """With every row in one batch, pue_dataset's batches are whole_pue's rows, reordered."""
    x, w, xe, e = _pue(dict_features=dict_features)
    (xa, ya), = list(full_batch.whole_pue(x, w, xe, e).take(1))
    for xb, yb in pue_dataset(x, w, xe, e, batch_size=40, seed=3, steps_per_epoch=3):
        np.testing.assert_array_equal(_rows_of(xa, ya), _rows_of(xb, yb))
        assert tf.nest.map_structure(lambda t: t.dtype, xa) == \
            tf.nest.map_structure(lambda t: t.dtype, xb)
        assert ya.dtype == yb.dtype and ya.shape == yb.shape
    extra_pu, extra_e = np.full((23, 2), 0.25), np.full((17, 2), 0.75)
    (_, yc), = list(full_batch.whole_pue(x, w, xe, e, extra_pu, extra_e).take(1))
    np.testing.assert_array_equal(yc[:, :3], ya)
    np.testing.assert_array_equal(yc[:, 3:], np.r_[extra_pu, extra_e])


def test_the_whole_batch_of_one_source_holds_the_rows_of_every_pipeline_batch():
    x, w, _, _ = _pue()
    y = adp.labels.pack_pu(w)
    (xa, ya), = list(full_batch.whole(x, y).take(1))
    for xb, yb in train.pu_batches(x, y, batch_size=64, seed=1).take(3):
        np.testing.assert_array_equal(_rows_of(xa, ya), _rows_of(xb, yb))
        assert xa.dtype == xb.dtype and ya.dtype == yb.dtype


def _net(seed: int) -> keras.Model:
    keras.utils.set_random_seed(seed)
    net = keras.Sequential([keras.Input((3,)), keras.layers.Dense(4, "tanh"),
                            keras.layers.Dense(1)])
    return net


@pytest.mark.parametrize("jit", [False, pytest.param(True, marks=pytest.mark.slow)])
def test_the_loop_makes_the_updates_of_kerass_own_steps(jit):
    """install_loop: one call runs steps_per_execution steps, the weights of Keras's own loop."""
    x, w, _, _ = _pue()
    y = adp.labels.pack_pu(w)
    nets = []
    for looped in (False, True):
        net = _net(0)
        net.compile(optimizer=keras.optimizers.Adam(0.05), steps_per_execution=7,
                    loss=adp.LogitLoss(from_logits=True), jit_compile=jit)
        if looped:
            full_batch.install_loop(net)
        history = net.fit(full_batch.whole(x, y), epochs=3, steps_per_epoch=7, verbose=0)
        assert int(net.optimizer.iterations) == 21
        assert np.all(np.isfinite(history.history["loss"]))
        nets.append(net)
    for a, b in zip(*(n.get_weights() for n in nets)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    full_batch.uninstall_loop(nets[1])
    assert nets[1].train_function is None


def test_under_a_distribution_strategy_kerass_function_stays():
    strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
    with strategy.scope():
        net = _net(0)
        net.compile(optimizer="sgd", loss="mse", steps_per_execution=2)
        full_batch.install_loop(net)
    assert net.train_function is None


def _small_fit(monkeypatch, full: bool, jit: bool, names):
    if not full:  # the pipeline's shuffled batches, as for data larger than a batch
        monkeypatch.setattr(stage, "fits", lambda rows, batch: False)
    s = adp.synthetic.synthetic_pue(150, 150, seed=2)
    net = lambda: keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])  # noqa: E731
    fit = adp.fit_pue(net, s.x_pu, s.w_pu, s.x_e, s.e_e, epochs=2, min_steps=60, verbose=0,
                      candidates=names, jit_compile=jit, tolerance=0.0)
    monkeypatch.undo()
    return fit, s


@pytest.mark.slow
@pytest.mark.parametrize("jit", [False, True])
def test_fit_pue_on_one_batch_gives_the_pipelines_scores_and_choice(monkeypatch, jit):
    """Every row in one batch: the same held-out scores, choice and model as the shuffled batches.

    The batches differ only in row order, so the results only in float rounding.
    """
    names = ["bce_w", "ratio", "likelihood", "brier", "ips", "adpue_ratio", "blend"]
    piped, s = _small_fit(monkeypatch, False, jit, names)
    looped, _ = _small_fit(monkeypatch, True, jit, names)
    assert looped.choice == piped.choice
    assert looped.epochs == piped.epochs
    for name, score in piped.scores.items():
        assert looped.scores[name] == pytest.approx(score, rel=1e-4, abs=1e-6), name
    np.testing.assert_allclose(looped.model.predict(s.x_pu, verbose=0),
                               piped.model.predict(s.x_pu, verbose=0), rtol=1e-3, atol=1e-4)
    # the nets a user gets back fit as Keras would (the loop was for fit_pue only)
    assert looped.candidates["ips"].train_function is None


@pytest.mark.slow
def test_held_out_logits_are_those_of_each_returned_model():
    """Stage.held (kept from the scoring of the best epoch, or a composite's head on its
    nets' outputs) equals each trained model's own logits on the held-out rows, bit for bit."""
    from adpue_tf.data.rows import as_rows
    from adpue_tf.recommend.candidates import CANDIDATES
    from adpue_tf.recommend.stage import Stage
    from adpue_tf.recommend.train import Settings

    s = adp.synthetic.synthetic_pue(300, 300, seed=4)
    pu, ex = as_rows("x_pu", s.x_pu, "w", s.w_pu), as_rows("x_e", s.x_e, "e", s.e_e)
    index = np.arange(300)
    settings = Settings(epochs=4, batch_size=512, min_steps=40, rounds=2, seed=0,
                        optimizer=lambda: keras.optimizers.Adam(0.3), patience=None)
    stage = Stage(lambda: _net2(), pu.take(index[60:]), ex.take(index[60:]), settings,
                  held_out=(pu.take(index[:60]), ex.take(index[:60])))
    for name in CANDIDATES:
        stage.try_get(name)
    assert "average" in stage.models and "likelihood_theta" in stage.models
    assert any(0 < stage.best_epoch[n] < 4 for n in stage.best_epoch)  # a kept earlier epoch
    held_pu, held_e = stage.held_out
    for name, model in stage.models.items():
        z_pu, z_e = stage.held(name)
        np.testing.assert_array_equal(z_pu, train.logits(model, held_pu.x), err_msg=name)
        np.testing.assert_array_equal(z_e, train.logits(model, held_e.x), err_msg=name)


def test_a_composite_is_scored_by_its_head_and_its_model_built_only_when_asked_for():
    """Stage.trains trains and scores composites without building their Keras models;
    Stage.get builds the one asked for, whose logits are the held-out ones its score read."""
    from adpue_tf.data.rows import as_rows
    from adpue_tf.recommend.stage import Stage
    from adpue_tf.recommend.train import Settings

    s = adp.synthetic.synthetic_pue(300, 300, seed=5)
    pu, ex = as_rows("x_pu", s.x_pu, "w", s.w_pu), as_rows("x_e", s.x_e, "e", s.e_e)
    index = np.arange(300)
    settings = Settings(epochs=1, batch_size=512, min_steps=20, rounds=1, seed=0,
                        optimizer=lambda: keras.optimizers.Adam(0.1))
    stage = Stage(lambda: _net2(), pu.take(index[60:]), ex.take(index[60:]), settings,
                  held_out=(pu.take(index[:60]), ex.take(index[:60])))
    composites = ("ratio", "likelihood_theta", "blend")
    assert all(stage.trains(name) for name in composites)
    assert not set(composites) & set(stage.models)  # scored, not built
    assert all(np.isfinite(stage.scores[name]) for name in composites)
    model = stage.get("blend")
    assert "blend" in stage.models and stage.get("blend") is model  # built once
    assert not {"ratio", "likelihood_theta"} & set(stage.models)  # its parts' models: not needed
    held_pu, held_e = stage.held_out
    for name in composites:  # each model, built now, computes what its score read
        z_pu, z_e = stage.held(name)
        np.testing.assert_array_equal(z_pu, train.logits(stage.get(name), held_pu.x), name)
        np.testing.assert_array_equal(z_e, train.logits(stage.get(name), held_e.x), name)


def _net2() -> keras.Model:
    return keras.Sequential([keras.Input((2,)), keras.layers.Dense(3, "tanh"),
                             keras.layers.Dense(1)])


def test_rows_every_net_of_a_pass_holds_out_are_left_out_of_its_batch(monkeypatch):
    """The held-out rows (no net of the pass trains on them) are not in the batch."""
    seen = []
    real = stage._batches

    def spy(pu, e, pu_fold, e_fold, theta_pu, **kw):
        seen.append((len(pu), len(e), set(pu_fold.tolist()) | set(e_fold.tolist()), kw["full"]))
        return real(pu, e, pu_fold, e_fold, theta_pu, **kw)

    monkeypatch.setattr(stage, "_batches", spy)
    s = adp.synthetic.synthetic_pue(150, 100, seed=2)
    net = lambda: keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])  # noqa: E731
    adp.fit_pue(net, s.x_pu, s.w_pu, s.x_e, s.e_e, epochs=1, min_steps=10, verbose=0,
                candidates=["bce_w", "likelihood"], validation_split=0.2)
    choose, refit = seen[:2], seen[2:]
    assert all(full for *_, full in seen)
    # 30 of 150 PU rows and 20 of 100 E rows held out
    assert [(n_pu, n_e, f) for n_pu, n_e, f, _ in choose] == [(120, 80, {-1})] * 2
    assert [(n_pu, n_e) for n_pu, n_e, *_ in refit] == [(150, 100)] * len(refit)
