"""Internal: the rows of a batch that read ``f†``, and a model run on those rows only.

Every risk of :mod:`adpue_tf.risks` that reads ``f†`` reads it through
``a = f†·(1 - E)`` averaged over the rows of one source (``Batch.a`` in
:mod:`adpue_tf.risks._batch`): the exposure rows (source ``E``) for ADPUE, ADPE and
ADFPU, the SSE rows for ADSS, Double ADSS and AD3SE. Only those rows with
``E = 0`` give ``a`` a weight that can differ from zero; on every other row
``a`` is multiplied by zero (``E = 1``, or a mask of another source), so the
value of ``f†`` there never reaches the loss or its gradient.

:class:`~adpue_tf.DebiasedModel` therefore runs its frozen snapshot (and an
initial-guess model) on the selected rows alone: :func:`dagger_rows` gives
their indices, :func:`gather_rows` takes them from every tensor of the
features (a tensor, a list or a dict), and :func:`scatter_rows` puts ``f†``
back into a batch-long column that holds 0 on the rows nobody reads (0 lies in
``[0, 1]``, so the label checks pass, and ``0 · ℓ`` is the ``0`` the full
batch gave). Which sources those are is declared by each loss class
(:meth:`adpue_tf.losses.DebiasedLoss.dagger_sources`); a loss that does not
declare them (a user's own ``risk_fn``, an overridden ``terms``) keeps the full batch.

When to gather was chosen by measurement: see :func:`worth_gathering` and
``benchmarks/results/throughput_rows.md``.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from adpue_tf import labels
from adpue_tf._internal.backend import TENSORFLOW
from adpue_tf.labels import Source

__all__ = ["MIN_WORK", "dagger_rows", "gather_rows", "scatter_rows", "can_gather", "select",
           "worth_gathering"]

#: Rows × weights of the snapshot from which gathering the selected rows pays (see worth_gathering).
MIN_WORK = 2_000_000


def dagger_rows(y: Any, sources: tuple[Source, ...]) -> Any:
    """Indices (int32, ``(k,)``) of the rows of ``sources`` with ``E = 0``.

    Args:
        y: packed labels ``(batch, 3|4)``, float32.
        sources: from :meth:`~adpue_tf.losses.DebiasedLoss.dagger_sources`.
    """
    src, e = y[:, labels.SOURCE], y[:, labels.E]
    keep = tf.zeros_like(e, dtype=tf.bool)
    for s in sources:
        keep = tf.logical_or(keep, tf.equal(src, float(int(s))))
    keep = tf.logical_and(keep, tf.equal(e, 0.0))
    return tf.cast(tf.reshape(tf.where(keep), (-1,)), tf.int32)


def can_gather(x: Any) -> bool:
    """Whether every feature of ``x`` can be gathered by rows (dense or ragged tensors).

    A sparse tensor, a scalar or a value that is not a tensor keeps the full batch.
    """
    for t in tf.nest.flatten(x):
        if isinstance(t, tf.RaggedTensor):
            continue
        if not isinstance(t, (tf.Tensor, tf.Variable)) or t.shape.rank in (None, 0):
            return False
    return True


def gather_rows(x: Any, rows: Any) -> Any:
    """``x`` (a tensor, or a list, tuple or dict of them) restricted to ``rows``."""
    return tf.nest.map_structure(lambda t: tf.gather(t, rows), x)


def worth_gathering(rows: int | None, model: Any, jit: bool) -> bool:
    """Whether to gather: not under XLA, nor for a small batch of a small model.

    Chosen by measurement (``benchmarks/throughput_rows.py``,
    ``benchmarks/results/throughput_rows.md``): the gather, the scatter and the
    extra ops cost a few tens of µs per step whatever the batch, and save part of
    the snapshot's forward pass (three quarters of its rows), which grows with the
    rows times the model's size. On one CPU thread a 32-64-64-1 MLP (6.4k weights)
    gained 3-12 % of that pass at 512 rows and 0.87-1.04× at 16-128 rows; a
    32-256-256-1 MLP (75k weights) gained from 64 rows on (1.5-2× at 512 rows). So
    the model gathers when ``rows × weights ≥`` :data:`MIN_WORK` (2 million) or
    when the batch size is not known when tracing, and keeps the full batch
    otherwise. Under XLA (``jit_compile=True``) the selected rows have a dynamic
    size, which XLA pads to the batch size: the snapshot's pass costs the same and
    the gather comes on top (0.82-1.05× on a CPU), so a model compiled with XLA
    keeps the full batch.
    """
    if jit:
        return False
    if rows is None:
        return True
    try:
        weights = int(model.count_params())
    except (AttributeError, ValueError, TypeError, RuntimeError):
        return True
    return rows * weights >= MIN_WORK


def select(sources: tuple[Source, ...] | None, x: Any, y: Any, model: Any, *,
           jit: bool = False) -> tuple[Any, Any]:
    """``(x restricted to the rows that read f†, their indices)``, or ``(x, None)``: every row.

    Args:
        sources: the sources whose ``E = 0`` rows read ``f†`` (the compiled loss's
            :meth:`~adpue_tf.losses.DebiasedLoss.dagger_sources`); None: every row.
        x: the batch's features.
        y: its packed labels ``(batch, 3)``, float32.
        model: the model that will run on the rows (the snapshot), for its size.
        jit: whether the step is compiled with XLA.
    """
    if not TENSORFLOW:  # JAX compiles a fixed shape (as XLA); PyTorch: not measured
        return x, None
    if sources is None or not can_gather(x) or not worth_gathering(y.shape[0], model, jit):
        return x, None
    rows = dagger_rows(y, sources)
    return gather_rows(x, rows), rows


def scatter_rows(values: Any, rows: Any, like: Any) -> Any:
    """A ``(batch,)`` float32 vector: ``values`` at ``rows``, 0 elsewhere.

    Args:
        values: ``(k,)`` values of the selected rows (``(batch,)`` when ``rows`` is None).
        rows: their indices, from :func:`dagger_rows`; None: ``values`` as they are.
        like: any ``(batch, ...)`` tensor of the batch (for its row count).
    """
    if rows is None:
        return values
    n = tf.shape(like, out_type=tf.int32)[:1]
    return tf.scatter_nd(tf.expand_dims(rows, 1), tf.cast(values, tf.float32), n)
