"""Internal: unpack a packed batch into float32 tensors and take group means.

Everything here is shared by the risks of :mod:`adpue_tf.risks`. Group means
divide by the *global* row count of a group (summed over the replicas of a
``tf.distribute`` strategy), so that the per-replica objectives add up to the
objective of the global batch: Keras sums per-replica gradients and does not
rescale a scalar loss.

Every check here runs in eager mode (a ``ValueError`` naming the argument) and
inside ``fit``/``tf.function`` (a ``tf.errors.InvalidArgumentError`` with the
same words, from ``tf.debugging.Assert``). XLA compiles ``Assert`` to a no-op,
so under ``jit_compile=True`` (Keras's ``"auto"`` on a GPU) only the static
(trace-time) checks remain.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
import tensorflow as tf
from keras import ops

from adpue_tf import labels

#: Probabilities are clipped to ``[_EPS, 1 - _EPS]`` before taking logits.
_EPS = 1e-7
#: Logits are clipped to ``[-MAX_LOGIT, MAX_LOGIT]`` (as probabilities are
#: clipped): ``±inf`` give a finite loss, never ``0·inf = NaN``.
MAX_LOGIT = 1e4


#: The words of the error that stops a fit whose model output blew up; callers that
#: record a diverged run (the benchmarks) match on them.
DIVERGED = "holds NaN, infinite or exploded values"

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


def _from_sigmoid(y_pred: Any) -> bool:
    """Whether ``y_pred`` is the output of a sigmoid activation.

    Keras's sigmoid caches its logits on the output (``_keras_logits``), which
    is how ``keras.losses.BinaryCrossentropy`` recognises probabilities; a
    traced tensor also shows its op type.
    """
    if hasattr(y_pred, "_keras_logits"):
        return True
    if tf.executing_eagerly() or not isinstance(y_pred, tf.Tensor):
        return False
    op = getattr(y_pred, "op", None)
    return getattr(op, "type", None) == "Sigmoid"


def _assert(ok: Any, message: str, *data: Any) -> Any:
    """``tf.debugging.Assert`` with a readable message and a summary of ``data``."""
    return tf.debugging.Assert(ok, [message, *data], summarize=8)


def _with_checks(x: Any, checks: list) -> Any:
    """``x``, evaluated only after the graph assertions ``checks``."""
    if not checks:
        return x
    with tf.control_dependencies(checks):
        return tf.identity(x)


def _guard_output(z: Any, name: str, bound: float) -> Any:
    """Identity whose gradient first checks ``|z| <= bound`` and a finite gradient.

    Every weight gradient flows through this op, so a step on a non-finite
    or exploded model output (NaN features, overflow, huge features) stops
    with a clear error before the optimizer can update a weight. The forward
    value is not checked: the loss of ``±inf`` logits is finite (they are
    clipped to ``±MAX_LOGIT``), but beyond the clip they get no gradient, so
    training on them would silently ignore those rows.
    """

    @tf.custom_gradient
    def guard(x: Any) -> Any:
        def grad(dy: Any) -> Any:
            output = (f"{name} (the model output) {DIVERGED} "
                      f"(beyond ±{bound:g}), so training stops before the weights are "
                      "updated. Look for NaN, inf or huge values in the features, or a "
                      "diverging model;")
            gradient = (f"the gradient of the loss with respect to {name} is not finite, "
                        "so training stops before the weights are updated.")
            if tf.executing_eagerly() and hasattr(x, "numpy"):
                arr = x.numpy()
                if not np.all(np.abs(arr) <= bound):
                    raise ValueError(f"{output} min {np.min(arr):.4g}, max {np.max(arr):.4g}.")
                if not np.all(np.isfinite(dy.numpy())):
                    raise ValueError(gradient)
                return dy
            return _with_checks(dy, [
                _assert(tf.reduce_all(tf.abs(x) <= bound), output + " min and max:",
                        tf.reduce_min(x), tf.reduce_max(x)),
                _assert(tf.reduce_all(tf.math.is_finite(dy)), gradient),
            ])

        return tf.identity(x), grad

    return guard(z)


def _check_probabilities(z: Any, name: str) -> Any:
    """Refuse values outside ``[0, 1]`` when ``from_logits=False`` (NaN passes through)."""
    message = (f"{name} holds values outside [0, 1], so it does not hold probabilities, "
               "but the loss has `from_logits=False`. A model that outputs logits (e.g. "
               "Dense(1) without activation) needs `from_logits=True`.")
    if tf.executing_eagerly() and hasattr(z, "numpy"):
        arr = z.numpy()
        bad = (arr < 0.0) | (arr > 1.0)
        if np.any(bad):
            raise ValueError(f"{message} Got min {np.nanmin(arr):.4g}, max {np.nanmax(arr):.4g}.")
        return z
    inside = ops.logical_not(ops.any((z < 0.0) | (z > 1.0)))
    return _with_checks(z, [_assert(inside, message + " min and max:",
                                    tf.reduce_min(z), tf.reduce_max(z))])


def probability_to_logit(p: Any) -> Any:
    """``log(p) - log(1 - p)`` of ``p`` clipped to ``[1e-7, 1 - 1e-7]``, in float32.

    The package's one probability-to-logit conversion (losses, serving, the
    Ratio model): extreme probabilities give finite logits.

    Example:
        >>> [round(float(v), 4) for v in probability_to_logit([0.5, 0.0, 1.0])]
        [0.0, -16.1181, 15.9424]
    """
    p = ops.clip(ops.cast(p, "float32"), _EPS, 1.0 - _EPS)
    return ops.log(p) - ops.log1p(-p)


def to_logits(y_pred: Any, from_logits: bool, name: str = "`y_pred`") -> Any:
    """Model output as float32 logits of shape ``(batch,)``.

    Probabilities are clipped to ``[1e-7, 1 - 1e-7]`` and mapped with
    ``log(p) - log(1 - p)``, so extreme probabilities give finite logits;
    logits are clipped to ``[-1e4, 1e4]``, so ``±inf`` give a finite loss.
    The gradient through the result checks that the output lies within the
    clip (``|z| <= 1e4``; probabilities in ``[0, 1]``) and that its gradient
    is finite: a training step on such outputs stops before any weight is
    updated.

    Raises:
        ValueError: on a wrong shape; with ``from_logits=True``, on the output
            of a sigmoid activation; with ``from_logits=False``, on values
            outside ``[0, 1]`` (in graph mode: ``InvalidArgumentError``).
    """
    if from_logits and _from_sigmoid(y_pred):
        raise ValueError(
            f"{name} is the output of a sigmoid activation, so it holds probabilities, "
            "but the loss has `from_logits=True`. Set `from_logits=False`, or drop the "
            "sigmoid so that the model outputs logits.")
    y_pred = ops.convert_to_tensor(y_pred)
    shape = tuple(y_pred.shape)
    if len(shape) == 2 and shape[1] not in (None, 1):
        raise ValueError(
            f"{name} must have one output unit (shape (batch,) or (batch, 1)), "
            f"got shape {shape}."
        )
    if len(shape) not in (1, 2):
        raise ValueError(
            f"{name} must have shape (batch,) or (batch, 1), got shape {shape}."
        )
    z = _guard_output(ops.reshape(ops.cast(y_pred, "float32"), (-1,)), name,
                      MAX_LOGIT if from_logits else 1.0)
    if from_logits:
        return ops.clip(z, -MAX_LOGIT, MAX_LOGIT)
    return probability_to_logit(_check_probabilities(z, name))


def _check_eager(y_true: Any) -> None:
    """Full value checks when the labels are concrete (eager execution)."""
    if tf.executing_eagerly() and hasattr(y_true, "numpy"):
        labels.check_packed("y_true", y_true.numpy())


def _graph_asserts(y: Any) -> list:
    """Value checks that run inside a traced function."""
    w, e, src = y[:, labels.W], y[:, labels.E], y[:, labels.SOURCE]
    binary = ops.all((w * (1.0 - w) == 0.0) & (e * (1.0 - e) == 0.0))
    known = ops.all((src == ops.round(src)) & (src >= 0.0) & (src <= 4.0))
    checks = [
        tf.debugging.assert_equal(
            binary, True, message="y_true: columns w and e must hold only 0 and 1"
        ),
        tf.debugging.assert_equal(
            known, True, message="y_true: unknown source code in column 2"
        ),
    ]
    if y.shape[-1] == 4:
        d = y[:, labels.DAGGER]
        inside = ops.all(ops.isfinite(d) & (d >= 0.0) & (d <= 1.0))
        checks.append(_assert(inside, "y_true: column 3 (dagger, f†) must lie in [0, 1] "
                                      "and be finite; min and max:",
                              tf.reduce_min(d), tf.reduce_max(d)))
    return checks


def _validated(y_true: Any) -> Any:
    """``y_true`` as float32, its shape and values checked (graph: after the asserts)."""
    y = ops.convert_to_tensor(y_true)
    shape = tuple(y.shape)
    if len(shape) != 2 or shape[1] not in labels.NUM_COLUMNS:
        raise ValueError(
            "`y_true` must have shape (batch, 3) or (batch, 4) "
            f"(w, e, source[, dagger]), got shape {shape}."
        )
    y = ops.cast(y, "float32")
    _check_eager(y)
    if not tf.executing_eagerly():
        y = _with_checks(y, _graph_asserts(y))
    return y


def _weights(sample_weight: Any, z: Any) -> Any:
    """Per-row weights ``(batch,)``: finite, ``>= 0``, one per row (or one for all)."""
    sw = ops.convert_to_tensor(sample_weight)
    if isinstance(sample_weight, np.ndarray) or (tf.executing_eagerly() and hasattr(sw, "numpy")):
        arr = labels.check_finite("sample_weight", np.asarray(sw))
        if np.any(arr < 0):
            raise ValueError(
                f"`sample_weight` must be non-negative, got min {float(np.min(arr)):.4g}.")
    weight = ops.reshape(ops.cast(sw, "float32"), (-1,))
    n, rows = weight.shape[0], z.shape[0]
    if n is not None and rows is not None and n not in (1, rows):
        raise ValueError(
            f"`sample_weight` has {n} values but the batch has {rows} rows; give one "
            "weight per row.")
    if not tf.executing_eagerly():
        count, batch = tf.size(weight), tf.size(z)
        weight = _with_checks(weight, [
            _assert(ops.logical_or(ops.equal(count, 1), ops.equal(count, batch)),
                    "`sample_weight` must hold one weight per row; values and rows:",
                    count, batch),
            _assert(ops.all(ops.isfinite(weight) & (weight >= 0.0)),
                    "`sample_weight` must be finite and non-negative; min:",
                    tf.reduce_min(weight)),
        ])
    return ops.broadcast_to(weight, ops.shape(z))


def source_counts(y: Any) -> Any:
    """Rows of each source (``PU, E, P, U, SSE``) in the global batch, float32 ``(5,)``."""
    src = ops.cast(ops.convert_to_tensor(y)[:, labels.SOURCE], "int32")
    return replica_sum(ops.sum(ops.one_hot(src, len(labels.Source), dtype="float32"), axis=0))


def _names(sources: Any) -> str:
    return ", ".join(labels.Source(int(s)).name for s in sources)


def check_sources(y: Any, *, loss: str, reads: tuple, needs: tuple,
                  ignores: tuple = ()) -> Any:
    """Refuse a batch with rows of a source ``loss`` does not read, or missing a needed one.

    The decision uses the global counts of a distribution strategy (a
    replica's slice may lack a source). Returns ``y`` (in graph mode, after
    the check).

    Args:
        y: packed labels.
        loss: the loss's name, for the message.
        reads: the sources whose rows the risk reads.
        needs: groups of sources; each group must have at least one row.
        ignores: sources whose rows are allowed and left out of the risk.
    """
    allowed = {int(s) for s in (*reads, *ignores)}
    foreign = [int(s) for s in labels.Source if int(s) not in allowed]
    needed = " and ".join("/".join(labels.Source(int(s)).name for s in g) for g in needs)
    about = (f"{loss} reads rows of source(s) {_names(reads)}"
             + (f" (and ignores {_names(ignores)})" if ignores else "")
             + f" and needs rows of {needed} in every batch")
    hint = ("Build the batches with the data builder of the loss's setting "
            "(adpue_tf.data.*_dataset), or choose the loss that matches your data.")
    t = _validated(y)
    counts = source_counts(t)
    if tf.executing_eagerly() and hasattr(counts, "numpy"):
        c = counts.numpy()
        found = ", ".join(f"{s.name}: {int(c[int(s)])}" for s in labels.Source if c[int(s)] > 0)
        if any(c[i] > 0 for i in foreign) or any(sum(c[int(s)] for s in g) == 0 for g in needs):
            raise ValueError(f"{about}; the batch holds rows of {found or 'no source'}. {hint}")
        return y
    ok = ops.equal(ops.sum(ops.take(counts, foreign)), 0.0) if foreign else ops.array(True)
    for g in needs:
        ok = ops.logical_and(ok, ops.sum(ops.take(counts, [int(s) for s in g])) > 0.0)
    return _with_checks(y, [_assert(ok, f"{about}. {hint} Rows per source (PU, E, P, U, SSE):",
                                    counts)])


def finite_checks(tensors: dict[str, Any], message: str) -> list:
    """Check that the floating tensors of ``tensors`` hold no NaN or inf.

    Eager: raises a ``ValueError`` (``message``, then the offending names).
    Graph: returns the assertions, for :func:`with_checks` or :func:`guard_finite`.
    """
    checks = []
    for name, t in tensors.items():
        if t is None or not getattr(getattr(t, "dtype", None), "is_floating", False):
            continue
        if tf.executing_eagerly() and hasattr(t, "numpy"):
            bad = int(np.size(t.numpy()) - np.count_nonzero(np.isfinite(t.numpy())))
            if bad:
                raise ValueError(f"{message} `{name}` holds {bad} NaN or infinite value(s).")
            continue
        checks.append(_assert(tf.reduce_all(tf.math.is_finite(t)),
                              f"{message} NaN or inf found in `{name}`."))
    return checks


def with_checks(x: Any, checks: list) -> Any:
    """``x``, evaluated only after the graph assertions ``checks`` (identity when none)."""
    return _with_checks(x, checks)


def guard_finite(value: Any, message: str, checks: Any = ()) -> Any:
    """``value`` if finite; else a ValueError (eager) or an InvalidArgumentError (graph).

    In graph mode the gradient through the result waits for this check and for
    the assertions ``checks``, so an optimizer never applies a step whose loss
    (or checked input) was NaN or infinite: every weight gradient depends on
    them. Keras's ``TerminateOnNaN`` instead looks at the logged loss after the
    step, when the weights already hold the non-finite update.
    """
    if tf.executing_eagerly() and hasattr(value, "numpy"):
        if not np.all(np.isfinite(value.numpy())):
            raise ValueError(f"{message} Got {value.numpy()}.")
        return value

    @tf.custom_gradient
    def guard(x: Any) -> Any:
        check = [_assert(tf.reduce_all(tf.math.is_finite(x)), message, x), *checks]
        out = _with_checks(x, check)

        def grad(dy: Any) -> Any:
            return _with_checks(dy, check)

        return out, grad

    return guard(value)


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
    y = _validated(y_true)
    shape = tuple(y.shape)
    z = to_logits(y_pred, from_logits)
    if shape[0] is not None and z.shape[0] is not None and shape[0] != z.shape[0]:
        raise ValueError(
            f"`y_true` has {shape[0]} rows but `y_pred` has {z.shape[0]}."
        )
    if shape[1] == 4:
        dagger = ops.stop_gradient(ops.clip(y[:, labels.DAGGER], 0.0, 1.0))
    else:
        dagger = ops.sigmoid(z)
        if not dagger_gradient:
            dagger = ops.stop_gradient(dagger)
    weight = ops.ones_like(z) if sample_weight is None else _weights(sample_weight, z)
    return Batch(
        z=z,
        w=y[:, labels.W],
        e=y[:, labels.E],
        source=y[:, labels.SOURCE],
        dagger=dagger,
        weight=weight,
    )


__all__ = ["Batch", "unpack", "to_logits", "replica_sum", "num_replicas", "source_counts",
           "check_sources", "guard_finite", "finite_checks", "with_checks", "MAX_LOGIT"]
