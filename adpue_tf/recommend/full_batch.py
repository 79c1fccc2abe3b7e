"""Full-batch training for :func:`adpue_tf.fit_pue`: one batch, every step of an epoch in one call.

When a net's training rows fit in one batch, every batch held every row (in a
new order) and the risks are means over each source's rows: so the batch is
built once (:func:`whole`, :func:`whole_pue`) and an epoch's steps run in one
``tf.while_loop`` in one traced function, compiled whole under XLA
(:func:`install_loop`). The same updates up to the order of a float sum;
measured in docs/guide/choosing-models.md (*Cost*).

Example:
    >>> import numpy as np, tensorflow as tf, keras
    >>> net = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> net.compile(optimizer="sgd", loss="mse", steps_per_execution=5)
    >>> install_loop(net)
    >>> data = whole(np.ones((4, 2), "float32"), np.ones((4, 1)))
    >>> _ = net.fit(data, epochs=1, steps_per_epoch=5, verbose=0)
    >>> int(net.optimizer.iterations)
    5
"""

from __future__ import annotations

from typing import Any

import keras
import numpy as np
import tensorflow as tf

from adpue_tf._internal.backend import TENSORFLOW
from adpue_tf.data._streams import stream_features
from adpue_tf.labels import pack_e, pack_pu

__all__ = ["fits", "install_loop", "uninstall_loop", "whole", "whole_pue"]


def fits(rows: int, batch_size: int) -> bool:
    """Whether ``rows`` training rows fit in one batch: every batch then holds every row."""
    return rows <= batch_size


def _repeated(batch: tuple[Any, Any]) -> tf.data.Dataset:
    """``batch`` for ever, as a Dataset that also holds it (``adpue_batch``: a kept model reads it)."""
    ds = tf.data.Dataset.from_tensors(batch).repeat()
    ds.adpue_batch = batch  # a kept model's epochs (experiments.reuse.fit): no iterator
    return ds


def whole(x: Any, y: np.ndarray) -> tf.data.Dataset:
    """Every row of ``(x, y)`` as one batch, repeated: ``pu_batches``' batches when they fit."""
    return _repeated((tf.nest.map_structure(tf.constant, x),
                      tf.constant(np.asarray(y, np.float32))))


def whole_pue(x_pu: Any, w: np.ndarray, x_e: Any, e: np.ndarray,
              extra_pu: np.ndarray | None = None,
              extra_e: np.ndarray | None = None) -> tf.data.Dataset:
    """Every PU and E row as one batch, repeated: :func:`adpue_tf.data.pue_dataset`'s batches when they fit.

    The features as the data builders batch them, the labels packed ``(W, E,
    source)``, then the columns ``extra_pu``/``extra_e`` of each source's rows.
    """
    xp, _ = stream_features("x_pu", x_pu)
    xe, _ = stream_features("x_e", x_e)
    x = tf.nest.map_structure(lambda a, b: np.concatenate([a, b]), xp, xe)
    y = np.concatenate([pack_pu(w), pack_e(e)])
    if extra_pu is not None and extra_e is not None:
        y = np.concatenate([y, np.concatenate([extra_pu, extra_e]).astype(np.float32)], axis=1)
    return _repeated((tf.nest.map_structure(tf.constant, x), tf.constant(y)))


def install_loop(model: keras.Model) -> None:
    """Make ``model.fit`` run each execution's ``steps_per_execution`` steps on one batch, in one call.

    The model must be compiled (its ``steps_per_execution`` is the loop's
    length, its ``jit_compile`` whether the loop is compiled by XLA) and fed
    a batch that is the same every step (:func:`whole`, :func:`whole_pue`): each call of the
    train function takes one batch from Keras's iterator and runs every step
    of the execution on it. Under a distribution strategy Keras's own
    function stays (it runs the step per replica). :func:`uninstall_loop`
    gives Keras's back.
    """
    if not TENSORFLOW or tf.distribute.has_strategy():
        return  # Keras's own train function: each call takes the same batch
    steps = int(model.steps_per_execution)

    def run(data: Any) -> Any:
        def body(i: Any, logs: Any) -> tuple[Any, Any]:
            return i + 1, model.train_step(data)

        _, logs = tf.while_loop(lambda i, _: i < steps, body,
                                (tf.constant(0), model.get_metrics_result()))
        return logs

    loop = tf.function(run, jit_compile=bool(model.jit_compile), reduce_retracing=True)

    def function(iterator: Any) -> Any:
        return loop(iterator.get_next())

    function.adpue_loop = True  # type: ignore[attr-defined]
    function.on_batch = loop  # type: ignore[attr-defined]  # the batch itself (reuse.fit)
    model.train_function = function


def uninstall_loop(model: keras.Model) -> None:
    """Give ``model`` Keras's own train function again (built at its next ``fit``)."""
    model.train_function = None
