"""Training one candidate of :func:`adpue_tf.fit_pue`: data pipelines, held-out scoring, best epoch.

Every candidate's net is trained for at most ``epochs`` epochs of at least
``steps`` optimizer steps each; after every epoch :class:`HeldOutScore` scores
it on the held-out rows and the weights of the best epoch are kept (the epoch
count is the candidate's only tuned setting, refitted as is on all rows).

Example:
    >>> import numpy as np
    >>> from adpue_tf.labels import pack_pu
    >>> ds = pu_batches(np.zeros((5, 2), "float32"), pack_pu([1, 0, 1, 0, 1]),
    ...                 batch_size=2, seed=0)
    >>> tuple(next(iter(ds))[1].shape)
    (2, 3)
"""

from __future__ import annotations

import dataclasses
import math
import weakref
from collections.abc import Callable
from typing import Any

import keras
import numpy as np
import tensorflow as tf

from adpue_tf._internal.backend import TENSORFLOW
from adpue_tf._internal.guards import MAX_LOGIT
from adpue_tf._internal.tracing import build_optimizer
from adpue_tf.data._streams import gathered_batches

__all__ = ["HeldOutScore", "Settings", "StopWhenStale", "as_logits", "compile_for_fit",
           "finite_logits", "log_loss", "logits", "outputs", "pu_batches", "steps_per_epoch", "usable_score"]


@dataclasses.dataclass(frozen=True)
class Settings:
    """What every candidate's training shares (see :func:`adpue_tf.fit_pue`)."""

    epochs: int
    batch_size: int
    min_steps: int
    rounds: int
    seed: int
    optimizer: Callable[[], Any]
    patience: int | None = None
    jit_compile: bool = False


#: Rows per call when a net scores held-out rows.
_SCORE_BATCH = 8192


def _forward(model: keras.Model, x: Any) -> Callable[[Any], Any]:
    """``model(x, training=False)``: eager for fewer than :data:`_SCORE_BATCH` rows, else traced.

    A net scores the same held-out rows after every epoch; on large sets a
    traced forward pass (one per model and layout of ``x``, kept with the
    model, traced once for every batch size) is about 4x faster than eager
    calls, and on small ones its tracing would cost more than it saves.
    """
    if len(tf.nest.flatten(x)[0]) < _SCORE_BATCH or not TENSORFLOW:
        return lambda rows: model(rows, training=False)
    specs = tf.nest.map_structure(_any_rows, x)
    key = str(specs)
    traced = _TRACED.setdefault(model, {})
    fn = traced.get(key)
    if fn is None:
        ref = weakref.ref(model)  # the cache must not keep the model alive

        def call(rows: Any) -> Any:
            net = ref()
            assert net is not None  # the cache entry dies with the model
            return net(rows, training=False)

        fn = traced[key] = tf.function(call, input_signature=[specs])
    return fn


def _any_rows(column: Any) -> tf.TensorSpec:
    """A column's spec for any number of rows (the last batch is shorter: not traced again)."""
    head = tf.convert_to_tensor(column[:1])
    return tf.TensorSpec((None, *head.shape[1:]), head.dtype)


#: The traced forward passes of each model that scored a large set (dropped with the model).
_TRACED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def outputs(model: keras.Model, x: Any) -> np.ndarray:
    """The model's outputs on every row of ``x`` (array or dict), as it computes them, in batches."""
    n = len(tf.nest.flatten(x)[0])
    forward = _forward(model, x)
    parts = []
    for i in range(0, n, _SCORE_BATCH):
        rows = tf.nest.map_structure(lambda v, i=i: v[i:i + _SCORE_BATCH], x)
        parts.append(np.asarray(keras.ops.convert_to_numpy(forward(rows))))
    return np.concatenate(parts)


def logits(model: keras.Model, x: Any) -> np.ndarray:
    """The model's logits on every row of ``x`` (array or dict), float64 ``(n,)``, in batches."""
    return as_logits(outputs(model, x))


def as_logits(out: np.ndarray) -> np.ndarray:
    """A one-logit model's :func:`outputs` as float64 logits ``(n,)``."""
    return np.reshape(out, (-1,)).astype(np.float64)


def log_loss(y: np.ndarray, z: np.ndarray) -> float:
    """Mean cross-entropy of 0/1 labels ``y`` under logits ``z``."""
    return float(np.mean(np.logaddexp(0.0, z) - y * z))


def finite_logits(*zs: np.ndarray) -> bool:
    """Whether every logit is finite and inside the losses' clip (what their guard allows).

    Under XLA (``jit_compile``) the guard's runtime check is off; a net whose
    held-out logits blew up then gets no score for that epoch, as the guard
    would have stopped it.
    """
    return all(bool(np.all(np.abs(z) < MAX_LOGIT)) for z in zs)


def usable_score(score: Callable[[np.ndarray, np.ndarray], float], y: np.ndarray,
                 z: np.ndarray) -> float:
    """``score(y, z)``, or inf when the logits blew up (:func:`finite_logits`)."""
    return score(y, z) if finite_logits(z) else math.inf


def compile_for_fit(model: keras.Model, **kwargs: Any) -> None:
    """``model.compile(**kwargs)``, then the optimizer's variables built before ``fit``.

    So each training step is traced once, not twice (:mod:`adpue_tf._internal.tracing`).
    """
    model.compile(**kwargs)
    build_optimizer(model)


def steps_per_epoch(rows: int, batch_size: int, epochs: int, min_steps: int) -> int:
    """Steps of one epoch: a pass over ``rows``, more if ``epochs`` passes fall short of ``min_steps``.

    Example:
        >>> steps_per_epoch(1000, 512, 20, 400), steps_per_epoch(10**6, 512, 20, 400)
        (20, 1954)
    """
    return max(math.ceil(rows / batch_size), math.ceil(min_steps / epochs))


def pu_batches(x: Any, y: np.ndarray, *, batch_size: int, seed: int) -> tf.data.Dataset:
    """Shuffled, repeated batches ``(x, y)`` of one source's rows (for ``steps_per_epoch``).

    Each pass over the rows is one seeded permutation, cut into batches (the
    work is per batch, not per row), as the data builders do with arrays.
    """
    n = len(y)
    ds = gathered_batches(tf.nest.map_structure(tf.constant, x),
                          tf.constant(y.astype(np.float32)), min(batch_size, n), True, seed)
    return ds.prefetch(tf.data.AUTOTUNE)


class HeldOutScore(keras.callbacks.Callback):
    """Scores a net on held-out rows after each epoch; restores the best epoch's weights at the end.

    Args:
        net: the model whose logits are scored (the live net, also inside a
            ``DebiasedModel``).
        score: ``score(net) -> float``, lower is better.

    Attributes:
        best: the lowest score seen; ``best_epoch``: its epoch (1-based);
        history: the score of every epoch.
    """

    def __init__(self, net: keras.Model, score: Callable[[keras.Model], float]) -> None:
        super().__init__()
        self.net = net
        self.score = score
        self.best = math.inf
        self.best_epoch = 0
        self.history: list[float] = []
        self._weights: list[np.ndarray] | None = None

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        value = self.score(self.net)
        if not math.isfinite(value):
            value = math.inf
        self.history.append(value)
        if value < self.best:
            self.best, self.best_epoch = value, epoch + 1
            self._weights = self.net.get_weights()

    def on_train_end(self, logs: dict | None = None) -> None:
        if self._weights is not None:
            self.net.set_weights(self._weights)


class StopWhenStale(keras.callbacks.Callback):
    """Stops training once every watched net has gone ``patience`` epochs without a better score.

    Put it after the :class:`HeldOutScore` callbacks it reads (they score
    first). Each net still keeps its own best epoch; the epochs skipped are
    ones that no net was improving in.

    Args:
        watches: the nets' :class:`HeldOutScore` callbacks.
        patience: epochs without improvement, >= 1; None: never stop early.

    Example:
        >>> StopWhenStale([], 2).patience
        2
    """

    def __init__(self, watches: list[HeldOutScore], patience: int | None) -> None:
        super().__init__()
        self.watches, self.patience = list(watches), patience
        self.stopped_epoch = 0

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        if self.patience is None or not self.watches:
            return
        if all(len(w.history) - w.best_epoch >= self.patience for w in self.watches):
            self.model.stop_training = True
            self.stopped_epoch = epoch + 1
