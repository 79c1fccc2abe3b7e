"""Attach the propensity ``θ̂(e=1|x)`` to built batches, for the IPS baseline."""

from __future__ import annotations

from typing import Any

import keras
import numpy as np
import tensorflow as tf

from adpue_tf._internal.backend import TENSORFLOW
from adpue_tf._internal.checks import check_bool
from adpue_tf._internal.convention import check_output_convention
from adpue_tf._internal.net_checks import check_takes

__all__ = ["with_propensity"]


def with_propensity(dataset: tf.data.Dataset, exposure_model: Any, *,
                    from_logits: bool = False) -> tf.data.Dataset:
    """Append the propensity ``θ̂(e=1|x)`` of every row as column 3 of the labels.

    For :class:`adpue_tf.IPSLoss`, which weights the cross-entropy on ``W`` by
    ``1/θ̂``: ``exposure_model`` (e.g. :func:`adpue_tf.exposure.fit_exposure_model`,
    fitted on the exposure log) is evaluated on each batch's features.

    Args:
        dataset: batches ``(x, y)`` of a builder of this module, ``y`` of
            shape ``(batch, 3)``; ``x`` a tensor or a dict of tensors.
        exposure_model: a Keras model or callable ``x -> θ̂`` of shape
            ``(batch,)`` or ``(batch, 1)`` (on JAX and PyTorch called on each
            batch's arrays, outside the ``tf.data`` graph).
        from_logits: whether ``exposure_model`` outputs logits (else probabilities).

    Returns:
        The batches ``(x, y)`` with ``y`` of shape ``(batch, 4)``.

    Raises:
        TypeError: if ``dataset`` is not a ``tf.data.Dataset`` of ``(x, y)`` or
            ``exposure_model`` is not callable.
        ValueError: if the labels already have 4 columns; if ``exposure_model``
            has more than one output or output unit, or breaks the convention
            ``from_logits`` says (a sigmoid/softmax output where logits are
            expected; while iterating, an ``InvalidArgumentError`` on values
            outside ``[0, 1]`` where probabilities are expected).

    Example:
        >>> import numpy as np, keras
        >>> from adpue_tf.data import pue_dataset
        >>> ds = pue_dataset(np.zeros((4, 2)), [1, 0, 1, 0], np.zeros((4, 2)), [1, 0, 1, 0],
        ...                  batch_size=4, seed=0)
        >>> half = lambda x: keras.ops.full((keras.ops.shape(x)[0], 1), 0.5)
        >>> x, y = next(iter(with_propensity(ds, half)))
        >>> y.shape, float(y[0, 3])
        (TensorShape([4, 4]), 0.5)
    """
    if not isinstance(dataset, tf.data.Dataset):
        raise TypeError(f"`dataset` must be a tf.data.Dataset of (x, y) batches, "
                        f"got {type(dataset).__name__}.")
    spec = dataset.element_spec
    if not (isinstance(spec, tuple) and len(spec) == 2 and
            isinstance(spec[1], tf.TensorSpec)):
        raise TypeError("`dataset` must yield (x, y) batches with packed labels y, got "
                        f"element spec {spec}.")
    if spec[1].shape.rank != 2 or spec[1].shape[-1] != 3:
        raise ValueError(f"`dataset` labels must have shape (batch, 3) (w, e, source), got "
                         f"{spec[1].shape}; column 3 is where θ̂ goes.")
    if not callable(exposure_model):
        raise TypeError(f"`exposure_model` must be a Keras model or a callable, "
                        f"got {type(exposure_model).__name__}.")
    check_bool("from_logits", from_logits)
    message = ("`exposure_model` must output probabilities θ̂ in [0, 1] (`from_logits=False`); "
               "a batch's outputs leave [0, 1], so they are logits: pass `from_logits=True`.")

    def check_shape(flat: list) -> None:
        shape = tuple(getattr(flat[0], "shape", ())) if len(flat) == 1 else None
        if shape is None or len(shape) not in (1, 2) or (len(shape) == 2 and shape[1] != 1):
            got = f"{len(flat)} outputs" if shape is None else f"output shape {shape}"
            raise ValueError(
                "`exposure_model` must output one propensity per row, shape (batch,) or "
                f"(batch, 1); got {got}. Give a model with a single output unit (e.g. "
                "Dense(1, 'sigmoid')), or a function picking the exposure column.")

    if isinstance(exposure_model, keras.Model):
        try:  # a built model: refused here rather than inside the map
            outputs = tf.nest.flatten(exposure_model.outputs)
        except (AttributeError, ValueError):
            outputs = []
        if outputs:
            check_shape(outputs)
    check_output_convention("`exposure_model`", exposure_model, from_logits=from_logits)
    spec = dataset.element_spec
    check_takes("exposure_model", exposure_model,
                spec[0] if isinstance(spec, tuple) else spec, "the dataset's features")

    def call(x: Any) -> Any:
        out = exposure_model(x, training=False) if isinstance(
            exposure_model, keras.Model) else exposure_model(x)
        flat = tf.nest.flatten(out)
        check_shape(flat)
        return flat[0]

    def eager(*leaves: Any) -> np.ndarray:
        """JAX, PyTorch: the model on one batch's arrays (a tf.data map's tensors are TF's)."""
        out = call(tf.nest.pack_sequence_as(spec[0], list(leaves)))
        return np.asarray(keras.ops.convert_to_numpy(out), np.float32).reshape(-1, 1)

    def attach(x: Any, y: Any) -> tuple[Any, Any]:
        if TENSORFLOW:
            theta = tf.reshape(tf.cast(call(x), tf.float32), (-1, 1))
        else:
            theta = tf.numpy_function(eager, tf.nest.flatten(x), tf.float32, stateful=False)
            theta = tf.reshape(theta, (-1, 1))
        if from_logits:
            theta = tf.sigmoid(theta)
        else:
            inside = tf.reduce_all((theta >= 0.0) & (theta <= 1.0))
            with tf.control_dependencies([tf.debugging.Assert(inside, [message])]):
                theta = tf.identity(theta)
        return x, tf.concat([tf.cast(y, tf.float32), theta], axis=1)

    return dataset.map(attach, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
