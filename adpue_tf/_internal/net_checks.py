"""Internal: the shape and activation checks of a net that :class:`~adpue_tf.DebiasedModel` wraps.

One output (a tensor, not a dict or list) of one unit; a last-layer sigmoid
contradicts ``from_logits=True``. Shared with the KerasTuner hypermodel.
"""

from __future__ import annotations

from typing import Any

import keras

__all__ = ["check_from_logits", "check_one_output", "check_single_tensor", "check_takes",
           "ends_in_sigmoid", "input_shapes"]


def check_one_output(name: str, net: Any) -> None:
    if not isinstance(net, keras.Model):
        raise TypeError(f"`{name}` must be a keras.Model, got {type(net).__name__}.")
    try:
        output = net.output  # a dict of one output has an output_shape like a tensor
    except (AttributeError, ValueError, RuntimeError):
        output = None
    check_single_tensor(name, output)
    try:
        shape = net.output_shape
    except (AttributeError, ValueError, RuntimeError):
        return  # subclassed and not built: checked on the first batch by the loss
    if isinstance(shape, (list, dict)) or (isinstance(shape, tuple) and shape and
                                           isinstance(shape[0], tuple)):
        raise ValueError(f"`{name}` must have a single output, got output shapes {shape}.")
    if len(shape) > 2 or (len(shape) == 2 and shape[-1] != 1):
        raise ValueError(
            f"`{name}` must have one output unit (logit or probability), got output "
            f"shape {shape}."
        )


def ends_in_sigmoid(model: keras.Model) -> bool:
    """Whether the last layer of ``model`` applies a sigmoid (its output is a probability)."""
    layers = getattr(model, "layers", None)
    if not layers:
        return False
    return getattr(getattr(layers[-1], "activation", None), "__name__", None) == "sigmoid"


def check_from_logits(name: str, model: keras.Model, from_logits: bool) -> None:
    if from_logits and ends_in_sigmoid(model):
        raise ValueError(
            f"`{name}` ends in a sigmoid activation, so it outputs probabilities, but the "
            "loss has `from_logits=True`. Compile with `from_logits=False`, or drop the "
            "sigmoid so that the model outputs logits.")


def input_shapes(model: keras.Model) -> list[tuple] | None:
    inputs = getattr(model, "inputs", None) if model.built else None
    return [tuple(t.shape[1:]) for t in inputs] if inputs else None


def check_single_tensor(name: str, out: Any) -> None:
    if isinstance(out, dict):
        raise ValueError(f"`{name}` must have a single output (one tensor: a logit or "
                         f"probability per row), got a dict with keys {sorted(out)}.")
    if isinstance(out, (list, tuple)):
        raise ValueError(f"`{name}` must have a single output (one tensor: a logit or "
                         f"probability per row), got a {type(out).__name__} of {len(out)}.")


def check_takes(name: str, model: Any, x: Any, features: str = "the features") -> None:
    """Refuse features of another form than ``model``'s inputs, naming ``name``.

    A model of one array given a dict of features (or the reverse, or a dict
    that lacks one of its keys) otherwise fails inside Keras with a structure
    error that names neither the argument nor the way out. ``x`` is an array,
    a dict of arrays, or a ``tf.data`` element spec of the same forms. Models
    whose inputs are not known (subclassed, not built) and callables pass.

    Example:
        >>> m = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
        >>> check_takes("exposure_model", m, [[0.0, 1.0]]) is None
        True
    """
    if not isinstance(model, keras.Model):
        return
    try:
        taken = model.inputs[0] if isinstance(model, keras.Sequential) else model.input
    except (AttributeError, ValueError, IndexError, TypeError):
        return
    if isinstance(taken, (list, tuple)) and len(taken) == 1:
        taken = taken[0]
    if isinstance(taken, dict):
        if not isinstance(x, dict):
            raise ValueError(f"`{name}` takes a dict of features {sorted(taken)}, but "
                             f"{features} are one array; give a model built on the same "
                             "features as the data.")
        missing = sorted(set(taken) - set(x))
        if missing:
            raise ValueError(f"`{name}` takes the feature(s) {missing}, which {features} "
                             f"lack (they have {sorted(x)}).")
    elif isinstance(x, dict) and not isinstance(taken, (list, tuple)):
        raise ValueError(f"`{name}` takes one array of features (rows of shape "
                         f"{tuple(taken.shape[1:])}), but {features} are a dict "
                         f"{sorted(x)}; give a model built on the same features as the data "
                         "(a dict of named keras.Input).")
