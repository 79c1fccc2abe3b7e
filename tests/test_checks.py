"""The one checker per argument rule (adpue_tf._internal.checks)."""

import math
import re

import keras
import pytest

import adpue_tf as adp
from adpue_tf._internal.checks import (
    check_bool,
    check_initial_guess,
    check_int,
    check_probability,
    resolve_from_logits,
)


def _net():
    return keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])


@pytest.mark.parametrize("value", [True, False])
def test_bool_passes_a_bool(value):
    assert check_bool("flag", value) is value


@pytest.mark.parametrize("value", [1, 0, "yes", None, 1.0])
def test_bool_refuses_anything_else(value):
    with pytest.raises(TypeError, match="`flag` must be a bool"):
        check_bool("flag", value)


def test_int_refuses_a_bool_a_float_and_a_small_value():
    assert check_int("n", 3, 1) == 3
    for bad in (True, 2.0, "3"):
        with pytest.raises(TypeError, match="`n` must be an int"):
            check_int("n", bad, 1)
    with pytest.raises(ValueError, match="`n` must be at least 1"):
        check_int("n", 0, 1)


@pytest.mark.parametrize("interval, inside, outside", [
    ("[0, 1]", [0.0, 1.0, 0.5], [-0.1, 1.1, math.nan]),
    ("(0, 1)", [0.5, 1e-9], [0.0, 1.0]),
    ("[0, 1)", [0.0], [1.0]),
])
def test_probability_intervals(interval, inside, outside):
    for v in inside:
        assert check_probability("p", v, interval=interval) == v
    for v in outside:
        with pytest.raises(ValueError, match="`p` must be a number in " + re.escape(interval)):
            check_probability("p", v, interval=interval)


@pytest.mark.parametrize("value", [True, "0.5", None])
def test_probability_refuses_non_numbers(value):
    with pytest.raises(TypeError, match="`p` must be a number"):
        check_probability("p", value)


def test_initial_guess_number_or_model():
    net = _net()
    assert check_initial_guess(0.25) == 0.25
    assert check_initial_guess(net) is net
    with pytest.raises(TypeError, match="number in .0, 1. or a keras.Model, got str"):
        check_initial_guess("half")
    with pytest.raises(TypeError, match="`initial_dagger` must be a number in"):
        check_initial_guess(net, models=False)
    with pytest.raises(ValueError, match="`initial_dagger` must be a number in"):
        check_initial_guess(1.5)


def test_from_logits_explicit_wins_and_must_be_bool_or_none():
    net = _net()
    net.compile(loss=adp.ADPUELoss(from_logits=True))
    assert resolve_from_logits(net, False) is False
    with pytest.raises(TypeError, match="`from_logits` must be a bool or None"):
        resolve_from_logits(net, "yes")


@pytest.mark.parametrize("loss, expected", [
    (adp.ADPUELoss(from_logits=True), True),
    (adp.ADPUELoss(from_logits=False), False),
    (keras.losses.BinaryCrossentropy(from_logits=True), True),
])
def test_from_logits_none_reads_the_compiled_loss(loss, expected):
    net = _net()
    net.compile(loss=loss)
    assert resolve_from_logits(net, None) is expected


@pytest.mark.parametrize("loss", [None, "mse"])
def test_from_logits_none_without_a_loss_that_says_is_refused(loss):
    net = _net()
    if loss is not None:
        net.compile(loss=loss)
    with pytest.raises(ValueError, match="Cannot tell whether `model` outputs logits.*"
                                         "reads the compiled loss"):
        resolve_from_logits(net, None)


@pytest.mark.parametrize("mode", ["eager", "graph"])
def test_a_diverging_step_is_recognised_in_both_modes(mode):
    """The public test for a stopped, diverging fit: no caller matches the error's words."""
    import numpy as np
    import tensorflow as tf

    from adpue_tf.labels import pack_e, pack_pu

    y = tf.constant(np.concatenate([pack_pu([1, 0]), pack_e([1, 0])]))
    var = tf.Variable(np.array([[3e30], [0.0], [0.0], [0.0]], np.float32))
    loss = adp.ADPUELoss(from_logits=True)

    def grad(labels):
        with tf.GradientTape() as tape:
            value = loss(labels, var)
        return tape.gradient(value, var)

    fn = grad if mode == "eager" else tf.function(grad)
    with pytest.raises(Exception) as info:
        fn(y)
    assert adp.losses.is_divergence(info.value)
    assert isinstance(info.value, adp.losses.DivergedError) == (mode == "eager")
    assert not adp.losses.is_divergence(ValueError("`x` must be an int"))


def test_finite_specs_names_a_key_in_backticks_and_a_phrase_as_it_is():
    """A feature's key reads `x`; a phrase that holds its own backticks is not wrapped again."""
    import tensorflow as tf

    from adpue_tf._internal.guards import finite_specs

    bad = tf.constant([[1.0], [float("nan")]])
    with pytest.raises(ValueError, match=r"^stop: the output of `net` holds 1 NaN or infinite"):
        finite_specs({"the output of `net`": bad}, "stop:")
    with pytest.raises(ValueError, match=r"^stop: `x` holds 1 NaN or infinite"):
        finite_specs({"x": bad}, "stop:")
    assert finite_specs({"x": tf.constant([1.0])}, "stop:") == []
