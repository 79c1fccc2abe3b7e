"""Internal: unpack a packed batch into float32 tensors and take group means.

Everything here is shared by the risks of :mod:`adpue_tf.risks`. Group means
divide by the *global* row count of a group (summed over the replicas of a
``tf.distribute`` strategy), so that the per-replica objectives add up to the
objective of the global batch: Keras sums per-replica gradients and does not
rescale a scalar loss.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
import tensorflow as tf
from keras import ops

from adpue_tf import labels

#: Probabilities are clipped to ``[_EPS, 1 - _EPS]`` before taking logits.
_EPS = 1e-7


def num_replicas() -> int:
    """Number of replicas the current replica context synchronises."""
    ctx = tf.distribute.get_replica_context()
    return 1 if ctx is None else int(ctx.num_replicas_in_sync)


def replica_sum(value: Any) -> Any:
    """Sum ``value`` over the replicas in sync (identity on one device)."""
    ctx = tf.distribute.get_replica_context()
    if ctx is None or ctx.num_replicas_in_sync == 1:
        return value
    return ctx.all_reduce(tf.distribute.ReduceOp.SUM, value)


def to_logits(y_pred: Any, from_logits: bool) -> Any:
    """Model output as float32 logits of shape ``(batch,)``.

    Probabilities are clipped to ``[1e-7, 1 - 1e-7]`` and mapped with
    ``log(p) - log(1 - p)``, so extreme probabilities give finite logits.
    """
    y_pred = ops.convert_to_tensor(y_pred)
    shape = tuple(y_pred.shape)
    if len(shape) == 2 and shape[1] not in (None, 1):
        raise ValueError(
            "`y_pred` must have one output unit (shape (batch,) or (batch, 1)), "
            f"got shape {shape}."
        )
    if len(shape) not in (1, 2):
        raise ValueError(
            f"`y_pred` must have shape (batch,) or (batch, 1), got shape {shape}."
        )
    z = ops.reshape(ops.cast(y_pred, "float32"), (-1,))
    if from_logits:
        return z
    p = ops.clip(z, _EPS, 1.0 - _EPS)
    return ops.log(p) - ops.log1p(-p)


def _check_eager(y_true: Any) -> None:
    """Full value checks when the labels are concrete (eager execution)."""
    if tf.executing_eagerly() and hasattr(y_true, "numpy"):
        labels.check_packed("y_true", y_true.numpy())


def _graph_asserts(y: Any) -> list:
    """Value checks that run inside a traced function."""
    w, e, src = y[:, labels.W], y[:, labels.E], y[:, labels.SOURCE]
    binary = ops.all((w * (1.0 - w) == 0.0) & (e * (1.0 - e) == 0.0))
    known = ops.all((src == ops.round(src)) & (src >= 0.0) & (src <= 4.0))
    return [
        tf.debugging.assert_equal(
            binary, True, message="y_true: columns w and e must hold only 0 and 1"
        ),
        tf.debugging.assert_equal(
            known, True, message="y_true: unknown source code in column 2"
        ),
    ]


class Batch(NamedTuple):
    """A packed batch as float32 vectors of shape ``(batch,)``."""

    z: Any
    w: Any
    e: Any
    source: Any
    dagger: Any
    weight: Any

    def is_source(self, *sources: labels.Source) -> Any:
        """Float mask (times the sample weights) of the rows of ``sources``."""
        mask = ops.zeros_like(self.z)
        for s in sources:
            mask = mask + ops.cast(ops.equal(self.source, float(int(s))), "float32")
        return mask * self.weight

    def mean(self, values: Any, mask: Any) -> Any:
        """This replica's share of the global mean of ``values`` over ``mask``.

        The sum runs over this replica's rows, the count over all replicas, so
        summing the result over replicas gives the global group mean. A group
        with no rows in the batch gives 0.
        """
        count = replica_sum(ops.sum(ops.stop_gradient(mask)))
        return ops.divide_no_nan(ops.sum(mask * values), count)

    @property
    def l1(self) -> Any:
        """Loss for "positive": ``-log σ(z) = softplus(-z)``."""
        return ops.softplus(-self.z)

    @property
    def l0(self) -> Any:
        """Loss for "negative": ``-log(1 - σ(z)) = softplus(z)``."""
        return ops.softplus(self.z)

    @property
    def a(self) -> Any:
        """``f†(x)·(1 - E)``, the weight of the proxy's correction."""
        return self.dagger * (1.0 - self.e)


def unpack(
    y_true: Any,
    y_pred: Any,
    *,
    from_logits: bool,
    dagger_gradient: bool = False,
    sample_weight: Any = None,
) -> Batch:
    """Validate and unpack ``(y_true, y_pred)`` into a :class:`Batch`.

    ``f†`` is column 3 of ``y_true`` when present (clipped to ``[0, 1]``,
    never differentiated); otherwise ``σ(z)``, with the gradient stopped
    unless ``dagger_gradient``.
    """
    y = ops.convert_to_tensor(y_true)
    shape = tuple(y.shape)
    if len(shape) != 2 or shape[1] not in labels.NUM_COLUMNS:
        raise ValueError(
            "`y_true` must have shape (batch, 3) or (batch, 4) "
            f"(w, e, source[, dagger]), got shape {shape}."
        )
    y = ops.cast(y, "float32")
    _check_eager(y)
    z = to_logits(y_pred, from_logits)
    if shape[0] is not None and z.shape[0] is not None and shape[0] != z.shape[0]:
        raise ValueError(
            f"`y_true` has {shape[0]} rows but `y_pred` has {z.shape[0]}."
        )
    if not tf.executing_eagerly():
        with tf.control_dependencies(_graph_asserts(y)):
            y = tf.identity(y)
    if shape[1] == 4:
        dagger = ops.stop_gradient(ops.clip(y[:, labels.DAGGER], 0.0, 1.0))
    else:
        dagger = ops.sigmoid(z)
        if not dagger_gradient:
            dagger = ops.stop_gradient(dagger)
    if sample_weight is None:
        weight = ops.ones_like(z)
    else:
        sw = ops.convert_to_tensor(sample_weight)
        if isinstance(sample_weight, np.ndarray) or (
            tf.executing_eagerly() and hasattr(sw, "numpy")
        ):
            arr = labels.check_finite("sample_weight", np.asarray(sw))
            if np.any(arr < 0):
                raise ValueError("`sample_weight` must be non-negative.")
        weight = ops.reshape(ops.cast(sw, "float32"), (-1,))
        weight = ops.broadcast_to(weight, ops.shape(z))
    return Batch(
        z=z,
        w=y[:, labels.W],
        e=y[:, labels.E],
        source=y[:, labels.SOURCE],
        dagger=dagger,
        weight=weight,
    )


__all__ = ["Batch", "unpack", "to_logits", "replica_sum", "num_replicas"]
