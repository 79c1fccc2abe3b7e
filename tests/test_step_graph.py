"""The graph of one training step: how many assertions and conditionals its checks build.

Each ``tf.debugging.Assert`` whose data holds a float builds its own ``If``; the
checks of a step are folded into one assertion per site instead
(``adpue_tf._internal.guards.fold_checks``): the features, output, label and
source checks of a ``DebiasedModel`` step are one ``If``, the loss's finite
check one, the output guard's gradient checks one. These counts pin that.
"""

from __future__ import annotations

import collections

import keras
import numpy as np
import pytest
import tensorflow as tf

import adpue_tf as adp


def _net(dim=3):
    keras.utils.set_random_seed(0)
    return keras.Sequential([keras.Input((dim,)), keras.layers.Dense(4, activation="relu"),
                             keras.layers.Dense(1)])


def _batch(n=8, dim=3):
    y = np.concatenate([adp.pack_labels(adp.Source.PU, w=[1, 0] * (n // 4)),
                        adp.pack_labels(adp.Source.E, e=[1, 0] * (n // 4))]).astype("float32")
    x = np.random.default_rng(0).normal(size=(n, dim)).astype("float32")
    return tf.constant(x), tf.constant(y)


def _op_types(model, x, y):
    graph = tf.function(model.train_step).get_concrete_function((x, y)).graph
    return collections.Counter(op.type for op in graph.get_operations())


@pytest.mark.parametrize("snapshot", [False, True])
def test_a_debiased_model_step_folds_its_checks_into_three_conditionals(snapshot):
    model = adp.DebiasedModel(_net())
    model.compile("sgd", loss=adp.ADPUELoss(from_logits=True))
    if snapshot:
        model.refresh_dagger()
    types = _op_types(model, *_batch())
    # features + output + labels + sources; the loss is finite; the output guard's gradient
    assert types["If"] + types["StatelessIf"] == 3, types
    assert types["Assert"] == 0, types  # every assertion sits in a failure branch


def test_a_plain_model_step_with_a_debiased_loss_folds_its_checks_too():
    net = _net()
    net.compile("sgd", loss=adp.ADPUELoss(from_logits=True))
    types = _op_types(net, *_batch())
    # labels + sources; the loss is finite; the output guard's gradient
    assert types["If"] + types["StatelessIf"] == 3, types
    assert types["Assert"] == 0, types


def test_the_folded_assertion_reports_the_first_failing_check():
    """A NaN feature and an unknown source code: the features are checked first."""
    model = adp.DebiasedModel(_net())
    model.compile("sgd", loss=adp.ADPUELoss(from_logits=True))
    x, y = _batch()
    step = tf.function(model.train_step)
    bad_x = tf.tensor_scatter_nd_update(x, [[1, 0]], [np.nan])
    bad_y = tf.tensor_scatter_nd_update(y, [[2, 2]], [7.0])
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"NaN or inf found in `x\[0\]`"):
        step((bad_x, bad_y))
    with pytest.raises(tf.errors.InvalidArgumentError, match="unknown source code"):
        step((x, bad_y))
    with pytest.raises(tf.errors.InvalidArgumentError, match="ADPUELoss reads rows of"):
        step((x, tf.tensor_scatter_nd_update(y, [[2, 0], [2, 1], [2, 2]],
                                             [0.0, 0.0, 3.0])))  # a U row (no W, no E)
