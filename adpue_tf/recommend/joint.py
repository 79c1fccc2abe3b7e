"""One pass for several nets: :func:`train_together` trains candidates of every fold in one ``fit``.

The candidates whose risks read only the packed labels of a PUE batch (``θ̂``,
``bce_w``, ``brier``, ``exposed_pu``; then ``likelihood`` with ``θ̂`` as a
label column, over the PU rows alone) need nothing from each other during
training. So one Keras model holds all their nets — one per candidate and
fold, their logits side by side — and one pass over the batches feeds them
all: each net's risk (:mod:`adpue_tf.risks`) sees only
the rows of its training part (a fold column in the labels says which rows a
fold holds out), the nets share no weights, so the summed loss gives each net
exactly its own gradient, and Adam's per-weight updates keep them independent.
A net whose outputs explode stops the pass (the risks' guard); the stages
then train those nets one by one, as without this module.
Each net still keeps its own best epoch (``HeldOutScore`` of ``adpue_tf.recommend.train``);
the pass ends early once no net has improved for ``patience`` epochs.

Example:
    >>> TOGETHER[0], LATER
    ('theta', ('likelihood',))
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import keras
import numpy as np
import tensorflow as tf

from adpue_tf import risks
from adpue_tf._internal.guards import DIVERGED
from adpue_tf.data import pue_dataset
from adpue_tf.data.rows import Rows
from adpue_tf.labels import Source, pack_pu
from adpue_tf.recommend.alone import Failed
from adpue_tf.recommend.compose import distinct_names, inputs_like
from adpue_tf.recommend.full_batch import fit, fits, install_loop, whole, whole_pue
from adpue_tf.recommend.layout import Layout, batch_layout, call_on_rows, pu_first
from adpue_tf.recommend.reuse import compiled, described, feature_layout, probe_rows
from adpue_tf.recommend.train import (
    HeldOutScore,
    StopWhenStale,
    compile_for_fit,
    pu_batches,
    steps_per_epoch,
)

if TYPE_CHECKING:  # pragma: no cover
    from adpue_tf.recommend.candidates import Stage

__all__ = ["LATER", "TOGETHER", "train_together"]

#: Nets trained together first (no ``θ̂`` needed).
TOGETHER = ("theta", "bce_w", "brier", "exposed_pu")
#: Nets trained together once every fold's ``θ̂`` is known (a label column).
LATER = ("likelihood",)
#: Nets whose risks read PU rows alone: a pass of only these sees only PU rows.
PU_ONLY = ("likelihood",)
_E = float(Source.E)


def _risk(name: str, y: Any, z: Any, keep: Any) -> Any:
    """The training objective of net ``name`` on packed labels ``y`` and logits ``z``.

    ``keep``: 1 on the rows the net trains on, 0 on those it holds out (the
    risks' row weights: each mean runs over the kept rows of its source).
    """
    if name == "theta":  # cross-entropy on E over the exposure rows
        kept = tf.cast(tf.equal(y[:, 2], _E), tf.float32) * keep
        per_row = tf.nn.softplus(z[:, 0]) - y[:, 1] * z[:, 0]
        return tf.reduce_sum(per_row * kept) / tf.maximum(tf.reduce_sum(kept), 1.0)
    fns: dict[str, Callable[..., Any]] = {
        "bce_w": risks.logit, "brier": risks.exposure_brier,
        "exposed_pu": functools.partial(risks.exposed_pu, gamma=1.0),
        "likelihood": risks.exposure_likelihood}
    fn = fns[name]
    return fn(y, z, from_logits=True, sample_weight=keep).loss


class _Joint:
    """The summed objective of the nets ``jobs`` (``(stage, name)``), one logit column each.

    Labels: ``y = [W, E, source, θ̂ of each stage..., fold]``; the net of stage
    ``s`` sees only the rows whose fold is not ``folds[s]`` (stages of several
    nets may hold out the same fold).
    """

    def __init__(self, jobs: Sequence[tuple[int, str]], folds: Sequence[int]) -> None:
        self.jobs, self.folds = list(jobs), list(folds)

    def __call__(self, y_true: Any, y_pred: Any) -> Any:
        y_true = tf.cast(y_true, tf.float32)
        y_pred = tf.cast(y_pred, tf.float32)
        total = 0.0
        # A fold's rows are weighted 0 (not cut out: a mask of every row keeps the
        # batch's static shape, so XLA compiles no dynamic-size gather), once for all
        # the nets that hold it out (every net of a mapping), so that they read the
        # same label tensor (checked once: risks._batch); a LATER net's labels carry
        # its own stage's θ̂ column.
        rows: dict[tuple[int, int | None], tuple[Any, Any]] = {}
        # One split (its gradient one concat), not a slice a net (each slice's gradient
        # a full-width pad, all summed).
        columns = tf.split(y_pred, len(self.jobs), axis=1)
        for j, (s, name) in enumerate(self.jobs):
            key = (self.folds[s], s if name in LATER else None)
            if key not in rows:
                keep = tf.cast(tf.not_equal(y_true[:, -1], float(self.folds[s])), tf.float32)
                y = y_true[:, :3]
                if name in LATER:
                    y = tf.concat([y, y_true[:, 3 + s:4 + s]], axis=1)
                rows[key] = (y, keep)
            y, keep = rows[key]
            total += _risk(name, y, columns[j], keep)
        return total


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
             theta_pu: np.ndarray, *, batch_size: int, seed: int,
             steps: int, pu_only: bool = False, full: bool = False,
             layout: Layout | None = None) -> tf.data.Dataset:
    """PUE batches (``pu_only``: PU rows alone) whose labels carry each fold's ``θ̂`` and the row's fold.

    ``full``: every row in one batch, repeated (:mod:`adpue_tf.recommend.full_batch`).
    ``layout``: shuffled batches' rows PU first (:mod:`adpue_tf.recommend.layout`).
    """
    def feats(rows: Rows, fold: np.ndarray, theta: np.ndarray) -> dict:
        return {"x": rows.x, "fold": fold.astype(np.float32)[:, None], "theta": theta}

    if pu_only:  # risks that read PU rows alone: no E rows in the batches
        y = np.concatenate([pack_pu(pu.y), theta_pu, pu_fold.astype(np.float32)[:, None]],
                           axis=1)
        return whole(pu.x, y) if full else pu_batches(pu.x, y, batch_size=batch_size, seed=seed)
    theta_e = np.full((len(e), theta_pu.shape[1]), 0.5, np.float32)
    if full:
        return whole_pue(pu.x, pu.y, e.x, e.y,
                         np.concatenate([theta_pu, pu_fold.astype(np.float32)[:, None]], 1),
                         np.concatenate([theta_e, e_fold.astype(np.float32)[:, None]], 1))
    ds = pue_dataset(feats(pu, pu_fold, theta_pu), pu.y, feats(e, e_fold, theta_e), e.y,
                     batch_size=min(batch_size, len(pu) + len(e)), seed=seed,
                     steps_per_epoch=steps)

    reorder = pu_first(layout) if layout is not None else None

    def split(x: dict, y: Any) -> tuple[Any, Any]:
        y = tf.concat([tf.cast(y, tf.float32), x["theta"], x["fold"]], axis=1)
        return (x["x"], y) if reorder is None else reorder(x["x"], y)

    # Repeated: one iterator for every epoch, the same batches (see Stage._pue_data).
    return ds.map(split, num_parallel_calls=tf.data.AUTOTUNE).repeat()


def train_together(stages: Sequence[Stage], names: Sequence[str], pu: Rows, e: Rows,
                   pu_fold: np.ndarray, e_fold: np.ndarray) -> None:
    """Train ``names`` of every stage in one pass; install each net in its stage.

    A stage trains on the rows whose fold is not its ``fold`` (``-1``: no stage
    holds the row out); in one batch of every row (full-batch), rows that every
    net of the pass holds out (one split) are left out of it. Nets a stage has
    already are skipped.

    Args:
        stages: the stages, one per fold and net (``held_out``: the rows of
            their ``fold``; the nets of a mapping share the folds).
        names: nets of :data:`TOGETHER` or of :data:`LATER` (not both).
        pu, e: every PU and E row.
        pu_fold, e_fold: each row's fold.

    A net with no finite held-out score in any epoch is recorded as failed
    in its stage. If a net's outputs explode (the risks' guard stops the
    step), nothing is installed and the stages train these nets one by one
    (each failure then recorded for its own net).
    """
    jobs = [(s, n) for s, st in enumerate(stages) for n in names
            if n not in st.models and n not in st.failed]
    if not jobs:
        return
    first = stages[0]
    cfg = first.cfg
    folds = len(stages)
    theta_pu = np.full((len(pu), folds), 0.5, np.float32)
    if any(n in LATER for _, n in jobs):
        for s, st in enumerate(stages):
            try:
                theta_pu[:, s] = st.probabilities("theta", pu.x)
            except Failed as err:  # no θ̂ column: this stage's nets of the pass fail with it
                for _, name in (job for job in jobs if job[0] == s):
                    st.failed[name] = f"{name} needs θ̂: {err}"
        jobs = [(s, n) for s, n in jobs if n not in stages[s].failed]
        if not jobs:
            return
    fresh = []
    for s, name in jobs:
        stages[s].progress(name)
        fresh.append(stages[s].net(name))
    pu_only = all(n in PU_ONLY for _, n in jobs)
    rows = len(pu) + (0 if pu_only else len(e))
    steps = steps_per_epoch(rows, cfg.batch_size, cfg.epochs, cfg.min_steps)
    full = fits(rows, cfg.batch_size)  # one batch of every row (full_batch.py)
    # shuffled batches: θ̂ and bce_w on the rows their risks read (layout.py)
    layout = None if pu_only or full else batch_layout(len(pu), len(e), cfg.batch_size)

    def build(nets: Sequence[keras.Model]) -> keras.Model:
        distinct_names(list(nets))
        inputs = inputs_like(nets[0])
        outs = [call_on_rows(net, inputs, name, layout) for net, (_, name) in zip(nets, jobs)]
        model = keras.Model(inputs, outs[0] if len(outs) == 1 else
                            keras.layers.Concatenate()(outs))
        compile_for_fit(model, optimizer=cfg.optimizer(), steps_per_execution=steps,
                        jit_compile=cfg.jit_compile,
                        loss=_Joint(jobs, [st.fold for st in stages]))
        if full:
            install_loop(model)  # kept with the model (an internal one: never a user's)
        return model

    optimizer, features, probe = described(cfg.optimizer()), feature_layout(pu.x), probe_rows(pu.x)
    joint = compiled([stages[s].build_net for s, _ in jobs],
                     (tuple(jobs), tuple(st.fold for st in stages), pu_only, steps, optimizer,
                      features, id(tf.distribute.get_strategy()), cfg.jit_compile, full,
                      layout),
                     fresh, build, probe)
    model, live = joint.model, joint.nets
    callbacks: list[keras.callbacks.Callback] = []
    for (s, name), net in zip(jobs, live):
        fixed = stages[s].fixed
        if fixed is None:
            callbacks.append(HeldOutScore(net, stages[s].monitor(name, net)))
        else:
            callbacks.append(_KeepEpoch(net, fixed[name]))
    epochs = cfg.epochs if first.fixed is None else max(
        [(stages[s].fixed or {})[n] for s, n in jobs] + [1])
    if full:  # rows every net of the pass holds out (one split): left out of the batch
        out = {stages[s].fold for s, _ in jobs}
        if len(out) == 1:
            fold = out.pop()
            pu_in, e_in = np.flatnonzero(pu_fold != fold), np.flatnonzero(e_fold != fold)
            pu, pu_fold, theta_pu = pu.take(pu_in), pu_fold[pu_in], theta_pu[pu_in]
            e, e_fold = e.take(e_in), e_fold[e_in]
    data = _batches(pu, e, pu_fold, e_fold, theta_pu, batch_size=cfg.batch_size,
                    seed=first.seed_of(names[0]), steps=steps, pu_only=pu_only, full=full,
                    layout=layout)
    watches = [c for c in callbacks if isinstance(c, HeldOutScore)]
    stop = [StopWhenStale(watches, cfg.patience)] if watches else []
    try:
        fit(model, data, epochs=epochs, steps=steps, callbacks=[*callbacks, *stop])
    except tf.errors.InvalidArgumentError as err:
        if DIVERGED not in str(err):
            raise
        return  # a net's outputs exploded: the stages train these nets one by one
    joint.give(fresh)  # the kept model's nets stay its own
    for (s, name), net, watch in zip(jobs, fresh, callbacks):
        assert isinstance(watch, (HeldOutScore, _KeepEpoch))
        kept = watch.best_epoch if isinstance(watch, HeldOutScore) else watch.epoch
        if isinstance(watch, HeldOutScore) and watch.best_epoch == 0:
            stages[s].failed[name] = (f"{name} diverged in epoch 1 (no finite held-out "
                                      "score)")
            continue
        stages[s].install(name, net, kept)


#: What a candidate needs trained besides its own net (if it has one).
_NEEDS = {"ratio": ("bce_w", "theta"), "elkan_noto": ("bce_w",), "ips": ("theta",),
          "likelihood": ("theta",), "adpue_ratio": ("ratio",),
          "likelihood_theta": ("theta",)}


def train_needed(stages: Sequence[Stage], names: Sequence[str], pu: Rows, e: Rows,
                 pu_fold: np.ndarray, e_fold: np.ndarray) -> None:
    """Train, in at most two passes, the nets of :data:`TOGETHER` and :data:`LATER` that ``names`` need.

    ``θ̂`` is always trained when the stages have held-out rows (the
    tie-break reads it). The other nets (IPS, direct ADPUE, the alternate-learning
    ones) are left to the stages, which train them one by one when asked.
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
