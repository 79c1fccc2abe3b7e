"""Shuffled batches of a joint pass: ``θ̂`` on their E rows, ``bce_w`` on their PU rows.

In a joint pass (:mod:`adpue_tf.recommend.stage`) over shuffled batches,
:func:`adpue_tf.data.pue_dataset`'s interleaved rows are put back PU rows
first, then E rows (one gather in the input pipeline, :func:`pu_first`). The
risk of ``θ̂`` reads only the E rows and that of ``bce_w`` only the PU rows
(the others weigh 0), so each of these nets runs on its static slice of the
batch, its logits padded with zeros to every row (:func:`call_on_rows`): the
same losses, gradients that differ only in the order of float sums, and a
quarter less of the pass's net compute (``benchmarks/results/fit_pue_cost.md``:
5-10 % of fit_pue's time with a wide net, nothing measurable with a small one).
A full batch keeps every row (the cut costs more than it saves on small data),
and so does a distribution strategy, whose replicas take contiguous parts of a
batch (:func:`batch_layout` gives None).

Example:
    >>> batch_layout(1200, 600, 512)
    Layout(pu=341, e=171)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import keras
import numpy as np
import tensorflow as tf

from adpue_tf.data.builders import batch_counts, interleave_order
from adpue_tf.labels import Source

__all__ = ["Layout", "batch_layout", "call_on_rows", "pu_first"]


class Layout(NamedTuple):
    """Rows of each batch of a pass: ``pu`` PU rows, then ``e`` E rows."""

    pu: int
    e: int


def batch_layout(n_pu: int, n_e: int, batch_size: int) -> Layout | None:
    """:func:`adpue_tf.data.pue_dataset`'s rows of each source per batch of ``n_pu`` + ``n_e`` rows.

    None under a distribution strategy (see above).
    """
    if tf.distribute.has_strategy() or n_pu < 1 or n_e < 1:
        return None
    pu, e = batch_counts([float(n_pu), float(n_e)], min(batch_size, n_pu + n_e))
    return Layout(pu, e)


def pu_first(layout: Layout) -> Callable[[Any, Any], tuple[Any, Any]]:
    """A ``Dataset.map`` function: a ``pue_dataset`` batch's rows, PU rows first.

    Example:
        >>> import numpy as np
        >>> y = np.array([[1, 0, 0], [0, 1, 1], [0, 0, 0]], "float32")  # PU, E, PU
        >>> x, y = pu_first(Layout(2, 1))(np.array([10, 30, 20]), y)
        >>> x.numpy().tolist(), y[:, 2].numpy().tolist()
        ([10, 20, 30], [0.0, 0.0, 1.0])
    """
    back = tf.constant(np.argsort(interleave_order(list(layout))), tf.int64)
    sources = tf.constant([float(Source.PU)] * layout.pu + [float(Source.E)] * layout.e)

    def reorder(x: Any, y: Any) -> tuple[Any, Any]:
        y = tf.gather(y, back)
        # the nets' static slices read these rows: a batch of another layout stops here
        check = tf.debugging.assert_equal(y[:, 2], tf.cast(sources, y.dtype), message=(
            "fit_pue: a batch of a joint pass does not hold its PU rows first, then its E "
            "rows, as the nets' slices expect (adpue_tf.recommend.layout)."))
        with tf.control_dependencies([check]):
            return tf.nest.map_structure(lambda t: tf.gather(t, back), x), tf.identity(y)

    return reorder


def call_on_rows(net: keras.Model, inputs: Any, reads: str, layout: Layout | None) -> Any:
    """``net``'s logits on a batch of ``layout``, computed on the rows its risk ``reads``.

    ``reads``: ``"pu"``, ``"e"`` or ``"pue"`` (``Candidate.reads``). Rows it does
    not read hold 0. Without a layout (or for a net that reads both sources),
    ``net(inputs)``.
    """
    side = reads if reads in ("pu", "e") else None
    if layout is None or side is None:
        return net(inputs)
    start, stop = (0, layout.pu) if side == "pu" else (layout.pu, layout.pu + layout.e)
    part = keras.tree.map_structure(
        lambda t: keras.ops.slice(t, [start] + [0] * (len(t.shape) - 1),
                                  [stop - start] + [-1 if d is None else d for d in t.shape[1:]]),
        inputs)
    return keras.ops.pad(net(part), [[start, layout.pu + layout.e - stop], [0, 0]])
