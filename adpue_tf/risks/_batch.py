"""Internal: unpack a packed batch into float32 tensors and take group means.

Everything here is shared by the risks of :mod:`adpue_tf.risks`. Group means
divide by the *global* row count of a group (summed over the replicas of a
``tf.distribute`` strategy), so that the per-replica objectives add up to the
objective of the global batch: Keras sums per-replica gradients and does not
rescale a scalar loss.

The label checks here run in eager mode (a ``ValueError`` naming the
argument) and inside ``fit``/``tf.function`` (an ``InvalidArgumentError`` with
the same words), as the output checks of :mod:`adpue_tf._internal.guards`; on
JAX inside ``jax.jit`` as a runtime error with the same words. Replica sums use
``tf.distribute`` on TensorFlow; on JAX a sharded batch is summed by the
compiler, so they are the identity there.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import keras
import numpy as np
from keras import ops

from adpue_tf import labels
from adpue_tf._internal.backend import TENSORFLOW, concrete, is_traced
from adpue_tf._internal.guards import Check, _with_checks, fold_checks, to_logits

if TENSORFLOW:
    import tensorflow as tf


def num_replicas() -> int:
    """Number of replicas the current replica context synchronises."""
    if not TENSORFLOW:
        return 1
    ctx = tf.distribute.get_replica_context()
    return 1 if ctx is None else int(ctx.num_replicas_in_sync)


def replica_sum(value: Any) -> Any:
    """Sum ``value`` over the replicas in sync (identity on one device)."""
    if not TENSORFLOW:
        return value
    ctx = tf.distribute.get_replica_context()
    if ctx is None or ctx.num_replicas_in_sync == 1:
        return value
    return ctx.all_reduce(tf.distribute.ReduceOp.SUM, value)


def _traced(x: Any) -> bool:
    """Whether ``x`` is traced (TensorFlow: graph mode; JAX: a tracer), so checks go in the program."""
    if TENSORFLOW:
        return not tf.executing_eagerly()
    return is_traced(x)


def _check_eager(y_true: Any) -> None:
    """Full value checks when the labels are concrete (eager execution)."""
    if TENSORFLOW:
        if tf.executing_eagerly() and hasattr(y_true, "numpy"):
            labels.check_packed("y_true", y_true.numpy())
        return
    arr = concrete(y_true)
    if arr is not None:
        labels.check_packed("y_true", arr)


def _graph_asserts(y: Any, extra: Sequence[Check] = (), first: Sequence[Check] = ()) -> list:
    """Value checks that run inside a traced function: one assertion (a list of one op).

    The checks ``first``, the label checks and the checks ``extra`` are folded
    into one graph assertion (:func:`~adpue_tf._internal.guards.fold_checks`);
    its error is that of the first failing check, in this order.
    """
    w, e, src = y[:, labels.W], y[:, labels.E], y[:, labels.SOURCE]
    binary = ops.all((w * (1.0 - w) == 0.0) & (e * (1.0 - e) == 0.0))
    known = ops.all((src == ops.round(src)) & (src >= 0.0) & (src <= 4.0))
    has_w, has_e = (ops.any(ops.stack([src == float(s) for s in sources]), axis=0)
                    for sources in (labels.OBSERVES_W, labels.OBSERVES_E))
    observed = ops.all((has_w | (w == 0.0)) & (has_e | (e == 0.0)))
    exposed = ops.all((src != float(labels.Source.SSE)) | (w <= e))
    checks: list[Check] = [
        (binary, "y_true: columns w and e must hold only 0 and 1", None),
        (known, "y_true: unknown source code in column 2", None),
        (observed, "y_true: " + labels.UNOBSERVED, None),
        (exposed, "y_true: " + labels.UNEXPOSED_POSITIVE, None),
    ]
    if y.shape[-1] == 4:
        d = y[:, labels.DAGGER]
        inside = ops.all(ops.isfinite(d) & (d >= 0.0) & (d <= 1.0))
        checks.append((inside, "y_true: column 3 (dagger, f†) must lie in [0, 1] "
                               "and be finite; min and max:",
                       lambda: [ops.min(d), ops.max(d)]))
    return fold_checks([*first, *checks, *extra])


#: Keras retraces a step with a relaxed shape once it has seen labels of 3 and of 4 columns.
UNKNOWN_COLUMNS = (
    "`y_true` has an unknown number of columns (shape {shape}): this model was given labels "
    "of both layouts, 3 columns (training) and 4 (validation, or f† filled in), so Keras "
    "traced the step again with a relaxed shape. Give one model one layout: evaluate "
    "training-layout data and validation-layout data with separate models, or call "
    "model.compile(...) again between them.")


def check_label_dtype(y: Any, name: str = "y_true") -> None:
    """Refuse packed labels that are not numbers (strings), naming ``name``."""
    raw = getattr(y, "dtype", "float32")
    try:
        dtype = keras.backend.standardize_dtype(raw)
    except (ValueError, TypeError):
        dtype = str(raw)
    if not (dtype == "bool" or dtype.startswith(("float", "bfloat", "int", "uint"))):
        raise TypeError(
            f"`{name}` must hold numbers (the packed labels w, e, source[, dagger]: see "
            f"adp.pack_labels), got dtype {dtype}. Convert labels given as strings "
            "to numbers first.")


#: The labels :func:`check_sources` last validated (weak references), so that
#: :func:`unpack` does not check the same tensor again in the same step.
_CHECKED: weakref.WeakValueDictionary = weakref.WeakValueDictionary()


def _validated(y_true: Any, extra: Callable[[Any], list[Check]] | None = None,
               first: Sequence[Check] = ()) -> Any:
    """``y_true`` as float32, its shape and values checked (graph: after the asserts).

    In graph mode the checks ``first`` and ``extra(y)`` (of the float32 labels)
    are folded into the same assertion as the label checks, before and after
    them (and checked even when the labels were validated before).
    """
    seen = _CHECKED.get(id(y_true))
    if seen is not None and seen is y_true:
        if (extra is not None or first) and _traced(y_true):
            more = extra(y_true) if extra is not None else []
            return _with_checks(y_true, fold_checks([*first, *more]))
        return y_true
    y = ops.convert_to_tensor(y_true)
    check_label_dtype(y)
    shape = tuple(y.shape)
    if len(shape) == 2 and shape[1] is None:
        raise ValueError(UNKNOWN_COLUMNS.format(shape=shape))
    if len(shape) != 2 or shape[1] not in labels.NUM_COLUMNS:
        raise ValueError(
            "`y_true` must have shape (batch, 3) or (batch, 4) "
            f"(w, e, source[, dagger]), got shape {shape}."
        )
    y = ops.cast(y, "float32")
    _check_eager(y)
    if _traced(y):
        y = _with_checks(y, _graph_asserts(y, extra(y) if extra is not None else (), first))
    return y


def _weights(sample_weight: Any, z: Any) -> Any:
    """Per-row weights ``(batch,)``: finite, ``>= 0``, one per row (or one for all)."""
    sw = ops.convert_to_tensor(sample_weight)
    known = concrete(sample_weight) if isinstance(sample_weight, np.ndarray) else (
        (sw.numpy() if tf.executing_eagerly() and hasattr(sw, "numpy") else None)
        if TENSORFLOW else concrete(sw))
    if known is not None:
        arr = labels.check_finite("sample_weight", np.asarray(known))
        if np.any(arr < 0):
            raise ValueError(
                f"`sample_weight` must be non-negative, got min {float(np.min(arr)):.4g}.")
    weight = ops.reshape(ops.cast(sw, "float32"), (-1,))
    n, rows = weight.shape[0], z.shape[0]
    if n is not None and rows is not None and n not in (1, rows):
        raise ValueError(
            f"`sample_weight` has {n} values but the batch has {rows} rows; give one "
            "weight per row.")
    if _traced(weight):
        count, batch = ops.size(weight), ops.size(z)
        checked = weight
        weight = _with_checks(weight, fold_checks([
            (ops.logical_or(ops.equal(count, 1), ops.equal(count, batch)),
             "`sample_weight` must hold one weight per row; values and rows:",
             lambda: [count, batch]),
            (ops.all(ops.isfinite(checked) & (checked >= 0.0)),
             "`sample_weight` must be finite and non-negative; min:",
             lambda: [ops.min(checked)]),
        ]))
    return ops.broadcast_to(weight, ops.shape(z))


def source_counts(y: Any) -> Any:
    """Rows of each source (``PU, E, P, U, SSE``) in the global batch, float32 ``(5,)``."""
    src = ops.cast(ops.convert_to_tensor(y)[:, labels.SOURCE], "int32")
    return replica_sum(ops.sum(ops.one_hot(src, len(labels.Source), dtype="float32"), axis=0))


def _names(sources: Any) -> str:
    return ", ".join(labels.Source(int(s)).name for s in sources)


def check_sources(y: Any, *, loss: str, reads: tuple, needs: tuple,
                  ignores: tuple = (), first: Sequence[Check] = ()) -> Any:
    """Refuse a batch with rows of a source ``loss`` does not read, or missing a needed one.

    The decision uses the global counts of a distribution strategy (a
    replica's slice may lack a source). Returns ``y`` validated, as float32
    (in graph mode, after the checks), which :func:`unpack` does not check again.

    Args:
        y: packed labels.
        loss: the loss's name, for the message.
        reads: the sources whose rows the risk reads.
        needs: groups of sources; each group must have at least one row.
        ignores: sources whose rows are allowed and left out of the risk.
        first: graph mode: the caller's checks (say, finite features), folded
            into the same assertion, before the label checks. Checking the
            returned labels again with the same sources is then free.
    """
    allowed = {int(s) for s in (*reads, *ignores)}
    foreign = [int(s) for s in labels.Source if int(s) not in allowed]
    needed = " and ".join("/".join(labels.Source(int(s)).name for s in g) for g in needs)
    about = (f"{loss} reads rows of source(s) {_names(reads)}"
             + (f" (and ignores {_names(ignores)})" if ignores else "")
             + f" and needs rows of {needed} in every batch")
    hint = ("Build the batches with the data builder of the loss's setting "
            "(adpue_tf.data.*_dataset), or choose the loss that matches your data.")
    if not _traced(y):
        t = _validated(y)
        c = concrete(source_counts(t))
        if c is not None:
            found = ", ".join(f"{s.name}: {int(c[int(s)])}" for s in labels.Source
                              if c[int(s)] > 0)
            if any(c[i] > 0 for i in foreign) or any(sum(c[int(s)] for s in g) == 0
                                                     for g in needs):
                raise ValueError(
                    f"{about}; the batch holds rows of {found or 'no source'}. {hint}")
            return _remember(t)
        # JAX: constant labels staged into a jax.jit are traced all the same: checked at run time.
    key = ("sources", id(y), loss, tuple(reads), tuple(needs), tuple(ignores))
    if not first and _CHECKED.get(key) is y:
        return y  # these labels, already checked for these sources

    def sources(labels_: Any) -> list[Check]:
        # In the assertion of the label checks (_validated), after them.
        counts = source_counts(labels_)
        ok = ops.equal(ops.sum(ops.take(counts, foreign)), 0.0) if foreign else ops.array(True)
        for g in needs:
            ok = ops.logical_and(ok, ops.sum(ops.take(counts, [int(s) for s in g])) > 0.0)
        return [(ok, f"{about}. {hint} Rows per source (PU, E, P, U, SSE):",
                 lambda: [counts])]

    t = _remember(_validated(y, extra=sources, first=first))
    try:
        _CHECKED[("sources", id(t)) + key[2:]] = t
    except TypeError:  # an object that takes no weak reference is simply checked again
        pass
    return t


def _remember(t: Any) -> Any:
    """Mark ``t`` (validated float32 labels) so that :func:`unpack` takes it as it is."""
    try:
        _CHECKED[id(t)] = t
    except TypeError:  # an object that takes no weak reference is simply checked again
        pass
    return t


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
        mask = ops.zeros_like(self.weight)  # the shape of z (read by risks.linear's probe too)
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
    def s1(self) -> Any:
        """Sigmoid loss for "positive": ``σ(-z)`` (the sigmoid surrogate of uPU/nnPU)."""
        return ops.sigmoid(-self.z)

    @property
    def s0(self) -> Any:
        """Sigmoid loss for "negative": ``σ(z)``."""
        return ops.sigmoid(self.z)

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
    if TENSORFLOW and (shape[0] is None or z.shape[0] is None) and _traced(z):
        # rows known only when the step runs: checked before anything reads z (one Assert
        # op without data: no conditional, nothing formatted unless it fails)
        z = _with_checks(z, fold_checks([(
            tf.equal(tf.shape(y)[0], tf.shape(z)[0]),
            "`y_true` and `y_pred` must have the same number of rows", None)]))
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


__all__ = ["Batch", "check_label_dtype", "check_sources", "num_replicas", "replica_sum",
           "source_counts", "unpack"]
