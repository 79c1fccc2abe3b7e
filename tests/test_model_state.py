"""DebiasedModel's counters live where a compiled step on a GPU can read them.

TensorFlow keeps int32 variables in host memory; an XLA step on a GPU that reads
one fails ("Trying to access resource .../dagger_mode located in device CPU:0
from device GPU:0"), which the first H100 run of ``benchmarks/gpu_run.sh`` hit
with ``jit_compile=True``. The state is int64 (as Keras's own step counter), and
weights written while it was int32 still load.
"""

from __future__ import annotations

import warnings

import h5py
import keras
import numpy as np

import adpue_tf as adp


def _model(seed: int = 0) -> adp.DebiasedModel:
    keras.utils.set_random_seed(seed)
    net = keras.Sequential([keras.Input((3,)), keras.layers.Dense(4, activation="relu"),
                            keras.layers.Dense(1)])
    model = adp.DebiasedModel(net)
    model.compile("adam", loss=adp.ADPUELoss(from_logits=True))
    return model


def test_the_state_read_by_the_step_is_int64():
    model = _model()
    assert model._mode.dtype == "int64"
    assert model._refreshes.dtype == "int64"
    assert model._refresh_epoch.dtype == "int64"
    assert all(v.dtype in ("int64", "float32") for v in model.non_trainable_variables)


def test_reading_the_state_warns_nothing():
    model = _model()  # np.array on a Keras variable warns under NumPy 2 (no `copy` keyword)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert (model.dagger_mode, model.refreshes, model.refresh_epoch) == (adp.model.DIRECT, 0, 0)


def test_weights_saved_with_int32_state_load_with_their_values(tmp_path):
    old = _model()
    old.start_alternate_learning()
    old.refresh_dagger()
    old.refresh_dagger()
    old.set_refresh_epoch(5)
    path = tmp_path / "old.weights.h5"
    old.save_weights(path)
    with h5py.File(path, "r+") as f:  # as a file written when the state was int32
        names: list[str] = []
        f.visititems(lambda name, node: names.append(name) if isinstance(node, h5py.Dataset)
                     and node.dtype == np.int64 and "optimizer" not in name else None)
        for name in names:
            value = f[name][()]
            del f[name]
            f.create_dataset(name, data=np.asarray(value, np.int32))
    rewritten = len(names)
    assert rewritten == 3

    new = _model(seed=1)
    new.load_weights(path)
    assert (new.dagger_mode, new.refreshes, new.refresh_epoch) == (adp.model.SNAPSHOT, 2, 5)
    assert new._mode.dtype == "int64"
    x = np.random.default_rng(0).standard_normal((7, 3)).astype("float32")
    np.testing.assert_array_equal(new.predict(x, verbose=0), old.predict(x, verbose=0))
