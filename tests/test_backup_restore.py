"""keras.callbacks.BackupAndRestore with DebiasedModel + RefreshDagger.

Run A trains 4 epochs uninterrupted. Run B is interrupted by an exception at
the end of epoch 2, then resumed by a second ``fit`` on a *fresh* model object
(different initial weights) with the same ``backup_dir``. B must end exactly
where A ends: the net's weights, the snapshot (f†), the refresh count, the
f† mode and the optimizer state.

The data is built with ``shuffle=False``. A reshuffling stream restarts its
shuffle sequence whenever a new Dataset object (or a new process) iterates it,
so the resumed run's epoch 3 would see the permutation of A's epoch 1; a
bit-exact resume needs a deterministic order (or the same number of passes
over the same Dataset object).
"""

from __future__ import annotations

import keras
import numpy as np
import pytest

import adpue_tf as adp
from adpue_tf import model as model_lib
from adpue_tf import synthetic

pytestmark = pytest.mark.slow

DIM, EPOCHS, STOP_AFTER = 3, 4, 2


class _Interrupted(Exception):
    pass


class _InterruptAfter(keras.callbacks.Callback):
    """Raise at the end of epoch ``n`` (1-based), after the other callbacks ran."""

    def __init__(self, n):
        super().__init__()
        self.n = n

    def on_epoch_end(self, epoch, logs=None):
        if epoch + 1 == self.n:
            raise _Interrupted(f"interrupted after epoch {self.n}")


@pytest.fixture(scope="module")
def data():
    return synthetic.synthetic_pue(240, 160, dim=DIM, seed=4)


def _dataset(s):
    # shuffle=False: see the module docstring.
    return adp.data.pue_dataset(s.x_pu, s.w_pu, s.x_e, s.e_e, batch_size=100, shuffle=False)


def _model(seed):
    keras.utils.set_random_seed(seed)
    net = keras.Sequential([keras.Input((DIM,)), keras.layers.Dense(6, activation="tanh"),
                            keras.layers.Dense(1)])
    model = adp.DebiasedModel(net)
    # Adam: its moments must be restored too for an exact resume.
    model.compile(keras.optimizers.Adam(0.05), loss=adp.ADPUELoss(from_logits=True))
    assert model.built  # built from the built net: BackupAndRestore can restore into it
    return model


def _state(model):
    return {
        "net": [np.array(w) for w in model.net.get_weights()],
        "snapshot": [np.array(w) for w in model.snapshot.get_weights()],
        "refreshes": model.refreshes,
        "dagger_mode": model.dagger_mode,
        "iterations": int(model.optimizer.iterations),
        "optimizer": [np.array(v) for v in model.optimizer.variables],
    }


def _assert_same(got, want):
    for key in ("refreshes", "dagger_mode", "iterations"):
        assert got[key] == want[key], key
    for key in ("net", "snapshot", "optimizer"):
        assert len(got[key]) == len(want[key])
        for a, b in zip(got[key], want[key]):
            np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7, err_msg=key)


def _callbacks(refresh, backup, refresh_first):
    pair = [adp.RefreshDagger(**refresh), keras.callbacks.BackupAndRestore(backup)]
    return pair if refresh_first else pair[::-1]


# every_n_steps=3 with 4 steps per epoch: refreshes fall inside epochs, counted by
# the restored optimizer iterations; every_n_epochs=1: one at every epoch end.
CASES = [
    pytest.param({"every_n_epochs": 1}, True, id="every_epoch"),
    pytest.param({"every_n_steps": 3}, True, id="every_3_steps"),
    # BackupAndRestore listed first saves the epoch's state before RefreshDagger
    # refreshes at the same epoch end: the resumed run catches that refresh up.
    pytest.param({"every_n_epochs": 1}, False, id="every_epoch-backup_listed_first"),
]


@pytest.mark.parametrize("refresh,refresh_first", CASES)
def test_resumed_run_equals_uninterrupted_run(data, tmp_path, refresh, refresh_first):
    assert len(_dataset(data)) == 4
    model_a = _model(seed=0)
    model_a.fit(_dataset(data), epochs=EPOCHS, verbose=0,
                callbacks=[adp.RefreshDagger(**refresh)])
    want = _state(model_a)
    assert want["dagger_mode"] == model_lib.SNAPSHOT
    assert want["refreshes"] == (4 if "every_n_epochs" in refresh else 16 // 3)

    backup = str(tmp_path / "backup")
    model_b = _model(seed=0)
    with pytest.raises(_Interrupted):
        model_b.fit(_dataset(data), epochs=EPOCHS, verbose=0,
                    callbacks=[*_callbacks(refresh, backup, refresh_first),
                               _InterruptAfter(STOP_AFTER)])
    assert int(model_b.optimizer.iterations) == 4 * STOP_AFTER

    resumed = _model(seed=123)  # a fresh object with other weights: all must come from disk
    hist = resumed.fit(_dataset(data), epochs=EPOCHS, verbose=0,
                       callbacks=_callbacks(refresh, backup, refresh_first))
    assert len(hist.history["loss"]) == EPOCHS - STOP_AFTER  # it resumed at epoch 3
    _assert_same(_state(resumed), want)


def test_restore_brings_back_the_snapshot_not_only_the_net(data, tmp_path):
    """After restoring, the snapshot and f† mode are those saved, not a fresh model's."""
    backup = str(tmp_path / "backup")
    model = _model(seed=0)
    with pytest.raises(_Interrupted):
        model.fit(_dataset(data), epochs=EPOCHS, verbose=0,
                  callbacks=[adp.RefreshDagger(every_n_epochs=1),
                             keras.callbacks.BackupAndRestore(backup),
                             _InterruptAfter(STOP_AFTER)])
    saved = _state(model)

    class _Probe(keras.callbacks.Callback):
        """Record the state right after BackupAndRestore restored it."""

        def on_train_begin(self, logs=None):
            self.state = _state(self.model)
            self.model.stop_training = True

    probe = _Probe()
    fresh = _model(seed=7)
    fresh.fit(_dataset(data), epochs=EPOCHS, verbose=0,
              callbacks=[keras.callbacks.BackupAndRestore(backup), probe])
    assert probe.state["refreshes"] == STOP_AFTER
    assert probe.state["dagger_mode"] == model_lib.SNAPSHOT
    for a, b in zip(probe.state["snapshot"], saved["snapshot"]):
        np.testing.assert_array_equal(a, b)
    for a, b in zip(probe.state["net"], saved["net"]):
        np.testing.assert_array_equal(a, b)


def test_debiased_model_of_a_built_net_is_built():
    net = keras.Sequential([keras.Input((DIM,)), keras.layers.Dense(1)])
    assert net.built
    assert adp.DebiasedModel(net).built
