"""The training helpers of fit_pue: scoring held-out rows, repeated epochs, one trace per step."""

from __future__ import annotations

import gc
import weakref

import keras
import numpy as np

from adpue_tf.data import pue_dataset
from adpue_tf.recommend import train


def test_logits_of_a_large_set_are_the_eager_ones_and_the_cache_dies_with_the_model():
    """Held-out sets of >= 8192 rows are scored by a traced forward pass, kept per model."""
    keras.utils.set_random_seed(0)
    net = keras.Sequential([keras.Input((3,)), keras.layers.Dense(4, "relu"),
                            keras.layers.Dense(1)])
    x = np.random.default_rng(0).normal(size=(20_000, 3)).astype("float32")
    eager = np.concatenate([np.ravel(net(x[i:i + 8192], training=False))
                            for i in range(0, len(x), 8192)])
    np.testing.assert_array_equal(train.logits(net, x), eager.astype(np.float64))
    assert net in train._TRACED
    np.testing.assert_array_equal(train.logits(net, x[:100]), eager[:100])  # small: eager
    ref = weakref.ref(net)
    del net
    gc.collect()
    assert ref() is None


def test_a_large_set_is_traced_once_for_every_batch_size():
    """The last, shorter batch and another set of other length reuse the first trace."""
    keras.utils.set_random_seed(0)
    net = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    rng = np.random.default_rng(0)
    a, b = (rng.normal(size=(n, 3)).astype("float32") for n in (20_000, 9_001))
    for x in (a, b):
        eager = np.concatenate([np.ravel(net(x[i:i + 8192], training=False))
                                for i in range(0, len(x), 8192)])
        np.testing.assert_allclose(train.logits(net, x), eager, rtol=1e-6, atol=1e-6)
    (fn,) = train._TRACED[net].values()
    assert fn.experimental_get_tracing_count() == 1


def test_dict_features_with_strings_are_traced_with_their_dtypes():
    inputs = {"id": keras.Input((1,), dtype="string"), "v": keras.Input((2,))}
    ids = keras.layers.StringLookup(vocabulary=["a", "b"])(inputs["id"])
    net = keras.Model(inputs, keras.layers.Dense(1)(
        keras.layers.Concatenate()([keras.ops.cast(ids, "float32"), inputs["v"]])))
    n = 9_000
    x = {"id": np.array([["a"], ["b"], ["c"]] * (n // 3)),
         "v": np.ones((n, 2), "float32")}
    z = train.logits(net, x)
    np.testing.assert_allclose(z[:3], np.ravel(net({k: v[:3] for k, v in x.items()})),
                               rtol=1e-6)
    assert len(train._TRACED[net]) == 1


def _pue_rows(seed: int = 0) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(50, 2)).astype("float32")
    xe = rng.normal(size=(30, 2)).astype("float32")
    return x, (rng.random(50) < .3).astype("float32"), xe, (rng.random(30) < .5).astype("float32")


def test_a_repeated_epoch_dataset_gives_the_batches_of_a_new_pass_per_epoch():
    """fit_pue repeats its one-epoch PUE datasets (one iterator, not one per epoch): same batches."""
    x, w, xe, e = _pue_rows()

    def build():
        return pue_dataset(x, w, xe, e, batch_size=16, seed=3, steps_per_epoch=4)

    ds = build()
    passes = [b for _ in range(3) for b in ds]  # what Keras does with a finite dataset
    repeated = list(build().repeat().take(12))
    assert len(passes) == len(repeated) == 12
    for (xa, ya), (xb, yb) in zip(passes, repeated):
        np.testing.assert_array_equal(xa.numpy(), xb.numpy())
        np.testing.assert_array_equal(ya.numpy(), yb.numpy())
    # and the passes differ from one another (each epoch is a fresh permutation)
    assert not np.array_equal(passes[0][0].numpy(), passes[4][0].numpy())


class CountSteps(keras.Model):
    traces = 0

    def train_step(self, data):
        type(self).traces += 1
        return super().train_step(data)


def test_compile_for_fit_builds_the_optimizer_so_the_step_is_traced_once():
    """Keras traces a step that creates Adam's slots twice; compile_for_fit builds them first."""
    x, y = np.ones((32, 3), "float32"), np.ones((32, 1), "float32")
    counts = []
    for prepare in (False, True):
        inputs = keras.Input((3,))
        model = CountSteps(inputs, keras.layers.Dense(1)(inputs))
        CountSteps.traces = 0
        kwargs = {"optimizer": keras.optimizers.Adam(), "loss": "mse", "steps_per_execution": 2}
        if prepare:
            train.compile_for_fit(model, **kwargs)
            assert model.optimizer.built
        else:
            model.compile(**kwargs)
        model.fit(x, y, batch_size=8, epochs=2, verbose=0)
        counts.append(CountSteps.traces)
    assert counts == [2, 1]


def test_a_debiased_model_step_is_traced_once():
    """DebiasedModel.fit builds the optimizer first, so its step is traced once."""
    import adpue_tf as adp

    class Counted(adp.DebiasedModel):
        traces = 0

        def train_step(self, data):
            type(self).traces += 1
            return super().train_step(data)

    x, w, xe, e = _pue_rows()
    net = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model = Counted(net)
    model.compile(optimizer=keras.optimizers.Adam(), loss=adp.ADPUELoss(from_logits=True))
    assert not model.optimizer.built
    model.fit(pue_dataset(x, w, xe, e, batch_size=16, seed=0), epochs=2, verbose=0)
    assert model.optimizer.built and Counted.traces == 1
