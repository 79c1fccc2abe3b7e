"""The training helpers of fit_pue: scoring held-out rows."""

from __future__ import annotations

import gc
import weakref

import keras
import numpy as np

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
