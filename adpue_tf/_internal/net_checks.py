"""Internal: the shape and activation checks of a net that :class:`~adpue_tf.DebiasedModel` wraps.

One output (a tensor, not a dict or list) of one unit; a last-layer sigmoid
contradicts ``from_logits=True``. Shared with the KerasTuner hypermodel.
"""

from __future__ import annotations

from typing import Any

import keras

__all__ = ["check_from_logits", "check_one_output", "check_single_tensor", "ends_in_sigmoid",
           "input_shapes"]


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
