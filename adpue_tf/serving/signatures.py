"""The serving signatures: their names, the inputs a model is served with, ``tf.Example`` parsing."""

from __future__ import annotations

import numbers
import re

import keras
import tensorflow as tf

__all__ = ["EXAMPLES_INPUT", "EXAMPLES_SIGNATURE", "INPUT_NAME", "SIGNATURE_NAME", "example_spec"]


#: Name of the exported signature (the one TF Serving uses by default).
SIGNATURE_NAME = "serving_default"
#: Name of the signature's only input (dense models).
INPUT_NAME = "features"
#: Signature of a feature-dict model that takes serialized ``tf.Example`` protos...
EXAMPLES_SIGNATURE = "examples"
#: ... in its one input of this name (``tf.string``, shape ``[None]``).
EXAMPLES_INPUT = "examples"
#: Signature keys TF accepts (they become op names).
_KEY = re.compile(r"[A-Za-z0-9.][A-Za-z0-9_.\-/]*")


def _feature_shape(net: keras.Model) -> tuple[int | None, ...]:
    """The shape of one example (without the batch axis) that ``net`` takes."""
    try:
        inputs = net.inputs  # Functional and Sequential models with an Input
    except (AttributeError, ValueError):
        inputs = None
    if inputs:
        if len(inputs) != 1:
            raise ValueError(
                f"`model` must take a single input tensor (served as `{INPUT_NAME}`), "
                f"got {len(inputs)} inputs.")
        dtype = keras.backend.standardize_dtype(inputs[0].dtype)
        if not dtype.startswith(("float", "bfloat")):
            raise ValueError(
                f"`model` input {inputs[0].name!r} has dtype {dtype}, but a single-input "
                f"model is served with a float32 input `{INPUT_NAME}`; take a dict of named "
                "keras.Input (served by name, ids included) or a float input.")
        return tuple(inputs[0].shape[1:])
    config = net.get_build_config() if net.built else None
    shape = (config or {}).get("input_shape")
    if (isinstance(shape, (tuple, list)) and len(shape) >= 1
            and all(d is None or isinstance(d, numbers.Integral) for d in shape)):
        return tuple(None if d is None else int(d) for d in shape[1:])
    if shape is not None:
        raise ValueError(
            f"`model` must take a single input tensor (served as `{INPUT_NAME}`), "
            f"got input shapes {shape}.")
    raise ValueError(
        "`model` has no known input shape: start it with `keras.Input(shape)`, or "
        "build it (`model.build((None, *feature_shape))`) or call it on data first.")


def _feature_specs(net: keras.Model) -> dict[str, tf.TensorSpec] | None:
    """The named inputs of a feature-dict model, or None when ``net`` takes one tensor."""
    try:
        structure = net.input
    except (AttributeError, ValueError):
        return None
    if not isinstance(structure, dict):
        return None
    specs = {}
    for key, tensor in structure.items():
        if not isinstance(key, str) or not _KEY.fullmatch(key):
            raise ValueError(
                f"`model` input key {key!r} cannot name a serving input: use letters, digits, "
                "'_', '.', '-' or '/', starting with a letter, digit or '.'.")
        dtype = tf.as_dtype(keras.backend.standardize_dtype(tensor.dtype))
        specs[key] = tf.TensorSpec((None, *tensor.shape[1:]), dtype, name=key)
    return specs


def example_spec(specs: dict[str, tf.TensorSpec]) -> dict[str, tf.io.FixedLenFeature]:
    """The ``tf.io.parse_example`` spec of the named features of a model.

    ``tf.Example`` stores int64, float32 and bytes lists, so integer and bool
    features are parsed as int64, float features as float32 (then cast to the
    input's dtype) and strings as bytes. Every feature is required and has the
    fixed shape of its ``keras.Input``.

    Args:
        specs: feature name -> ``tf.TensorSpec`` with the batch axis first.

    Returns:
        feature name -> ``tf.io.FixedLenFeature``.

    Raises:
        ValueError: a feature has an unknown dimension or a dtype ``tf.Example``
            cannot carry.

    Example:
        >>> import tensorflow as tf
        >>> spec = example_spec({"user": tf.TensorSpec((None, 1), tf.int32)})
        >>> spec["user"].shape, spec["user"].dtype.name
        ((1,), 'int64')
    """
    parsed = {}
    for key, spec in specs.items():
        dims = tuple(spec.shape[1:])
        if any(d is None for d in dims):
            raise ValueError(
                f"feature {key!r} has shape {tuple(spec.shape)}: the `{EXAMPLES_SIGNATURE}` "
                "signature needs a fixed shape per feature (keras.Input(shape=...) without None).")
        if spec.dtype == tf.string:
            kind = tf.string
        elif spec.dtype.is_floating:
            kind = tf.float32
        elif spec.dtype.is_integer or spec.dtype == tf.bool:
            kind = tf.int64
        else:
            raise ValueError(f"feature {key!r} has dtype {spec.dtype.name}, which tf.Example "
                             "cannot carry (int64, float32 and bytes lists only).")
        parsed[key] = tf.io.FixedLenFeature(dims, kind)
    return parsed


def _lookup_layers(layer: keras.layers.Layer) -> list[keras.layers.Layer]:
    """The layers under ``layer`` that hold lookup tables (not variables) to export."""
    kinds = (keras.layers.StringLookup, keras.layers.IntegerLookup,
             keras.layers.TextVectorization)
    found = [layer] if isinstance(layer, kinds) else []
    for sub in getattr(layer, "layers", []):
        found += _lookup_layers(sub)
    return found
