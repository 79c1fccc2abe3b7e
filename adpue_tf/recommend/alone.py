"""A candidate of :func:`adpue_tf.fit_pue` trained alone, in a compiled model kept across calls.

:func:`train_alone` compiles ``make(nets)`` (or takes the kept one,
:mod:`adpue_tf.recommend.reuse`), trains it from the fresh nets' state for
its epochs, keeps the best held-out epoch and gives the fresh nets the
trained state. Rows that fit one batch train full-batch
(:mod:`adpue_tf.recommend.full_batch`).

Example:
    >>> train_alone.__name__
    'train_alone'
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import Any

import keras
import tensorflow as tf

from adpue_tf._internal.guards import DIVERGED
from adpue_tf.recommend.full_batch import fit, fits, install_loop, uninstall_loop
from adpue_tf.recommend.reuse import compiled, described, feature_layout, probe_rows
from adpue_tf.recommend.train import (
    HeldOutScore,
    Settings,
    StopWhenStale,
    compile_for_fit,
    steps_per_epoch,
)

__all__ = ["Failed", "train_alone"]


class Failed(Exception):
    """A candidate could not be trained (its net diverged before any usable epoch)."""


def train_alone(name: str, fresh: list[keras.Model],
                make: Callable[[list[keras.Model]], keras.Model], loss: Any, data: Any,
                rows: int, cfg: Settings, build_net: Callable[[], keras.Model], features: Any, *,
                epochs: int, monitor: Callable[[keras.Model], float] | None,
                callbacks: tuple = (),
                watched: Callable[[keras.Model], keras.Model] = lambda model: model,
                key: Hashable = (), keep: bool = True) -> tuple[keras.Model, int]:
    """Fit ``make(nets)`` from the state of ``fresh``; the trained model and its kept epoch.

    ``fresh[0]`` is the candidate's new net; the rest are trained nets its
    model reads (``θ̂``...). The compiled model is kept for the next fit of
    the same kind: it trains from ``fresh``'s state, which then takes its
    trained state, so ``fresh[0]`` ends trained as a new model would have
    left it. ``monitor(watched(model))`` is the held-out score the best epoch
    is kept by (None: no held-out rows, every epoch kept); ``key`` holds what
    else the traced step depends on (``keep=False``: a step that holds a
    constant of these rows, never kept); ``features``: rows whose first eight
    probe a kept model (:func:`adpue_tf.recommend.reuse.compiled`).

    Raises:
        Failed: if the net diverged before any usable epoch.
    """
    steps = steps_per_epoch(rows, cfg.batch_size, cfg.epochs, cfg.min_steps)
    full = fits(rows, cfg.batch_size)  # one batch of every row (full_batch.py)

    def build(nets: Sequence[keras.Model]) -> keras.Model:
        model = make(list(nets))
        # One call of the training function per epoch (the small nets of tabular
        # data spend most of a step in Python dispatch otherwise).
        compile_for_fit(model, optimizer=cfg.optimizer(), loss=loss,
                        steps_per_execution=steps, jit_compile=cfg.jit_compile)
        if full:
            install_loop(model)
        return model

    entry = compiled([build_net] * len(fresh),
                     ("stage", name, key, steps, full, described(cfg.optimizer()),
                      described(loss), feature_layout(features),
                      id(tf.distribute.get_strategy()), cfg.jit_compile),
                     fresh, build, probe_rows(features), keep=keep)
    model = entry.model
    watch = None
    if monitor is not None:
        watch = HeldOutScore(watched(model), monitor)
        callbacks = (*callbacks, watch, StopWhenStale([watch], cfg.patience))
    if epochs > 0:
        try:
            fit(model, data, epochs=epochs, steps=steps, callbacks=list(callbacks))
        except tf.errors.InvalidArgumentError as err:
            if DIVERGED not in str(err):
                raise
            # The guard stopped the step before a bad update; keep the best epoch
            # before it, if there was one.
            if watch is None or watch.best_epoch == 0:
                raise Failed(f"{name} diverged in epoch {len(watch.history) + 1 if watch else '?'}"
                             f" (outputs {DIVERGED})") from None
            watch.on_train_end()
        finally:
            if full and not entry.kept:
                uninstall_loop(model)  # the net a user gets keeps Keras's own fit
    entry.give(fresh)
    return model, watch.best_epoch if watch else epochs
