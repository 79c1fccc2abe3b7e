"""One pass for several nets: :func:`train_together` trains candidates of every fold in one ``fit``.

The candidates whose losses read only the packed labels of a PUE batch (``θ̂``,
``bce_w``, ``brier``, ``exposed_pu``, ``adpue_direct``; then ``likelihood``
and ``ips`` with ``θ̂`` as a label column) need nothing from each other during
training. So one Keras model holds all their nets — one per candidate and
fold — and one pass over the batches feeds them all: each net's loss sees only
the rows of its training part (a fold column in the labels says which rows a
fold holds out), the nets share no weights, so the summed loss gives each net
exactly its own gradient, and Adam's per-weight updates keep them independent.
Each net still keeps its own best epoch (:class:`~adpue_tf.recommend.train.HeldOutScore`).

Example:
    >>> TOGETHER[0], LATER
    ('theta', ('likelihood', 'ips'))
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import keras
import numpy as np
import tensorflow as tf

from adpue_tf import losses
from adpue_tf._internal.guards import DIVERGED
from adpue_tf.data import pue_dataset
from adpue_tf.data.rows import Rows
from adpue_tf.labels import Source
from adpue_tf.recommend.compose import inputs_like
from adpue_tf.recommend.train import HeldOutScore, logits, steps_per_epoch

if TYPE_CHECKING:  # pragma: no cover
    from adpue_tf.recommend.candidates import Stage

__all__ = ["LATER", "TOGETHER", "train_together"]

#: Nets trained together first (no ``θ̂`` needed).
TOGETHER = ("theta", "bce_w", "brier", "exposed_pu", "adpue_direct")
#: Nets trained together once every fold's ``θ̂`` is known (a label column).
LATER = ("likelihood", "ips")
_E = float(Source.E)


def _loss(name: str) -> Any:
    return {"bce_w": losses.LogitLoss(from_logits=True),
            "brier": losses.ExposureBrierLoss(from_logits=True),
            "exposed_pu": losses.ExposedPULoss(from_logits=True, gamma=1.0),
            "adpue_direct": losses.ADPUELoss(from_logits=True),
            "likelihood": losses.ExposureLikelihoodLoss(from_logits=True),
            "ips": losses.IPSLoss(clip=0.05, from_logits=True)}[name]


class _OnFold:
    """A loss on the rows a fold trains on: ``y = [W, E, source, θ̂ per fold..., fold]``."""

    def __init__(self, name: str, fold: int, folds: int) -> None:
        self.name, self.fold, self.folds = name, fold, folds
        self.loss = None if name == "theta" else _loss(name)

    def __call__(self, y_true: Any, y_pred: Any) -> Any:
        y_true = tf.cast(y_true, tf.float32)
        keep = tf.not_equal(y_true[:, -1], float(self.fold))
        z = tf.cast(tf.reshape(y_pred, (-1,)), tf.float32)
        if self.name == "theta":  # cross-entropy on E over the kept exposure rows
            keep = tf.logical_and(keep, tf.equal(y_true[:, 2], _E))
            per_row = tf.nn.softplus(z) - y_true[:, 1] * z
            kept = tf.cast(keep, tf.float32)
            return tf.reduce_sum(per_row * kept) / tf.maximum(tf.reduce_sum(kept), 1.0)
        y = y_true[:, :3]
        if self.name in LATER:
            y = tf.concat([y, y_true[:, 3 + self.fold:4 + self.fold]], axis=1)
        return self.loss(tf.boolean_mask(y, keep), tf.boolean_mask(y_pred, keep))


class _KeepEpoch(keras.callbacks.Callback):
    """Keeps a net's weights at a given epoch (the refit's epoch count)."""

    def __init__(self, net: keras.Model, epoch: int) -> None:
        super().__init__()
        self.net, self.epoch, self.weights = net, epoch, None

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        if epoch + 1 == self.epoch:
            self.weights = self.net.get_weights()

    def on_train_end(self, logs: dict | None = None) -> None:
        if self.weights is not None:
            self.net.set_weights(self.weights)


def _batches(pu: Rows, e: Rows, pu_fold: np.ndarray, e_fold: np.ndarray,
             theta_pu: np.ndarray, names: Sequence[str], *, batch_size: int, seed: int,
             steps: int) -> tf.data.Dataset:
    """PUE batches whose labels carry each fold's ``θ̂`` and the row's fold."""
    def feats(rows: Rows, fold: np.ndarray, theta: np.ndarray) -> dict:
        return {"x": rows.x, "fold": fold.astype(np.float32)[:, None], "theta": theta}

    theta_e = np.full((len(e), theta_pu.shape[1]), 0.5, np.float32)
    ds = pue_dataset(feats(pu, pu_fold, theta_pu), pu.y, feats(e, e_fold, theta_e), e.y,
                     batch_size=min(batch_size, len(pu) + len(e)), seed=seed,
                     steps_per_epoch=steps)

    def split(x: dict, y: Any) -> tuple[Any, dict]:
        full = tf.concat([tf.cast(y, tf.float32), x["theta"], x["fold"]], axis=1)
        return x["x"], {n: full for n in names}

    return ds.map(split, num_parallel_calls=tf.data.AUTOTUNE)


def train_together(stages: Sequence[Stage], names: Sequence[str], pu: Rows, e: Rows,
                   pu_fold: np.ndarray, e_fold: np.ndarray) -> bool:
    """Train ``names`` of every stage in one pass; install each net in its stage.

    Stage ``s`` trains on the rows whose fold is not ``s`` (``-1``: no stage
    holds the row out). Nets a stage has already are skipped.

    Args:
        stages: the stages, one per fold (their ``held_out`` are fold ``s``).
        names: nets of :data:`TOGETHER` or of :data:`LATER` (not both).
        pu, e: every PU and E row.
        pu_fold, e_fold: each row's fold.

    Returns:
        False if a net diverged (nothing is installed; train them one by one).
    """
    jobs = [(s, n) for s, st in enumerate(stages) for n in names
            if n not in st.models and n not in st.failed]
    if not jobs:
        return True
    first = stages[0]
    cfg = first.cfg
    folds = len(stages)
    theta_pu = np.full((len(pu), folds), 0.5, np.float32)
    if any(n in LATER for _, n in jobs):
        for s, st in enumerate(stages):
            theta_pu[:, s] = 1.0 / (1.0 + np.exp(-logits(st.get("theta"), pu.x)))
    nets, keys, callbacks = {}, [], []
    for s, name in jobs:
        stages[s].progress(name)
        key = f"{name}_{s}"
        nets[key] = stages[s].net(name)
        keys.append(key)
        if stages[s].fixed is None:
            callbacks.append(HeldOutScore(nets[key], stages[s].monitor(name, nets[key])))
        else:
            callbacks.append(_KeepEpoch(nets[key], stages[s].fixed[name]))
    inputs = inputs_like(next(iter(nets.values())))
    model = keras.Model(inputs, {k: net(inputs) for k, net in nets.items()})
    rows = len(pu) + len(e)
    steps = steps_per_epoch(rows, cfg.batch_size, cfg.epochs, cfg.min_steps)
    model.compile(optimizer=cfg.optimizer(), steps_per_execution=steps,
                  loss={k: _OnFold(n, s, folds) for k, (s, n) in zip(keys, jobs)})
    epochs = cfg.epochs if first.fixed is None else max(
        [st.fixed[n] for s, n in jobs for st in (stages[s],)] + [1])
    data = _batches(pu, e, pu_fold, e_fold, theta_pu, keys, batch_size=cfg.batch_size,
                    seed=first.seed_of(names[0]), steps=steps)
    try:
        model.fit(data, epochs=epochs, steps_per_epoch=steps, verbose=0, shuffle=False,
                  callbacks=callbacks)
    except tf.errors.InvalidArgumentError as err:
        if DIVERGED not in str(err):
            raise
        return False
    for (s, name), key, watch in zip(jobs, keys, callbacks):
        kept = watch.best_epoch if isinstance(watch, HeldOutScore) else stages[s].fixed[name]
        if isinstance(watch, HeldOutScore) and watch.best_epoch == 0:
            stages[s].failed[name] = f"{name} had no finite held-out score"
            continue
        stages[s].install(name, nets[key], kept)
    return True


#: What a candidate needs trained besides its own net (if it has one).
_NEEDS = {"ratio": ("bce_w", "theta"), "elkan_noto": ("bce_w",), "ips": ("theta",),
          "likelihood": ("theta",), "adpue_ratio": ("ratio",)}


def train_needed(stages: Sequence[Stage], names: Sequence[str], pu: Rows, e: Rows,
                 pu_fold: np.ndarray, e_fold: np.ndarray) -> None:
    """Train, in at most two passes, the nets of :data:`TOGETHER` and :data:`LATER` that ``names`` need.

    ``θ̂`` is always trained when the stages have held-out rows (the
    tie-break reads it). The other nets (the alternate-learning ones) and any
    net of a pass that diverged are left to the stages, which train them one
    by one when asked.
    """
    wanted: set[str] = {"theta"} if stages[0].held_out is not None else set()
    todo = list(names)
    while todo:
        name = todo.pop()
        if name not in wanted:
            wanted.add(name)
            todo += [*_NEEDS.get(name, ()), *stages[0].parts.get(name, ())]
    for group in (TOGETHER, LATER):
        chosen = [n for n in group if n in wanted]
        if chosen and all(st.try_get("theta") is not None for st in stages
                          if group is LATER):
            train_together(stages, chosen, pu, e, pu_fold, e_fold)
