"""RefreshDagger: the refresh of the ``f†`` snapshot in alternate learning; BestRound: choosing ``T``.

Example:
    >>> import adpue_tf as adp
    >>> adp.RefreshDagger(every_n_epochs=2).get_config()
    {'every_n_epochs': 2, 'every_n_steps': None}
"""

from __future__ import annotations

import math
from typing import Any

import keras

from adpue_tf._internal.checks import check_bool, check_int

__all__ = ["BestRound", "RefreshDagger"]


def _check_every(name: str, value: Any) -> int | None:
    return None if value is None else check_int(name, value, 1)


@keras.saving.register_keras_serializable(package="adpue_tf")
class RefreshDagger(keras.callbacks.Callback):
    """Copy the live weights into the ``f†`` snapshot of a :class:`DebiasedModel`.

    Each refresh is one round of the paper's Algorithm 1: ``f†_t`` is the
    model after round ``t``; ``T`` refreshes give ``f_T = q·Σ θ0^t + f_0·θ0^T``,
    which tends to ``p(y=1|x)``. When training begins, a model still in direct
    mode switches to its initial guess (``initial_dagger``) until the first
    refresh.

    Steps are counted by the optimizer's ``iterations`` and epochs by Keras's
    absolute epoch index (and the epoch of the last refresh is saved with the
    model, :attr:`DebiasedModel.refresh_epoch`), so a run resumed by
    ``BackupAndRestore`` or ``fit(initial_epoch=...)`` refreshes at the same
    points as an uninterrupted one, whatever the order of the callbacks. Each
    ``fit`` call performs its own refreshes: a later ``fit`` that starts
    again from epoch 0 refreshes again after its epochs.

    Args:
        every_n_epochs: refresh after every ``n``-th epoch (default: 1 when
            ``every_n_steps`` is not given).
        every_n_steps: refresh after every ``n``-th optimizer step instead;
            give at most one of the two.

    Raises:
        TypeError: on a non-integer period, or when used with a model that is
            not a ``DebiasedModel``.
        ValueError: on a period below 1, both periods given (also
            ``every_n_epochs=1`` with ``every_n_steps``), or a compiled loss
            that does not use ``f†``.

    Example:
        >>> import adpue_tf as adp
        >>> adp.RefreshDagger(every_n_steps=100).every_n_steps
        100
    """

    def __init__(self, every_n_epochs: int | None = None,
                 every_n_steps: int | None = None) -> None:
        super().__init__()
        if every_n_steps is not None and every_n_epochs is not None:
            raise ValueError("Give one of `every_n_epochs` and `every_n_steps`, not both, got "
                             f"every_n_epochs={every_n_epochs!r}, every_n_steps={every_n_steps!r}.")
        if every_n_steps is None and every_n_epochs is None:
            every_n_epochs = 1
        self.every_n_steps = _check_every("every_n_steps", every_n_steps)
        self.every_n_epochs = _check_every("every_n_epochs", every_n_epochs)
        self._step_before = 0
        self._first_epoch = True
        # Keras dispatches batch-end hooks off the training thread only for
        # callbacks that say they are safe; otherwise it waits for every step's
        # logs, which stalls the input pipeline. Epoch-period refreshes happen
        # at epoch ends (after Keras flushes pending hooks), so they are safe;
        # step-period refreshes must see each step in order.
        self.async_safe = self.every_n_steps is None

    def on_train_begin(self, logs: dict | None = None) -> None:
        from adpue_tf.model import DebiasedModel

        if not isinstance(self.model, DebiasedModel):
            raise TypeError(
                "RefreshDagger needs an adpue_tf.DebiasedModel, got "
                f"{type(self.model).__name__}; wrap the net: adp.DebiasedModel(net).")
        if not self.model.loss.uses_dagger:
            raise ValueError(
                f"The compiled loss {type(self.model.loss).__name__} does not use f†; "
                "RefreshDagger would have no effect.")
        self.model.start_alternate_learning()
        self._first_epoch = True
        # A step period: the training step refreshes itself where it can (exact for
        # any steps_per_execution); else this callback does after each call of the step.
        self._in_step = False
        if self.every_n_steps is not None and self.model.refresh_every_steps is None:
            try:
                self.model._build_snapshot()
                self.model.schedule_refresh(self.every_n_steps)
                self._in_step = True
            except ValueError:
                steps = int(getattr(self.model, "steps_per_execution", 1) or 1)
                if steps > 1:
                    raise ValueError(
                        f"RefreshDagger(every_n_steps={self.every_n_steps}) with "
                        f"steps_per_execution={steps}: on this backend (or under a "
                        "distribution strategy) the refresh runs between calls of the "
                        "training step, which runs several steps; compile with "
                        "steps_per_execution=1, or refresh every_n_epochs.") from None

    def on_train_end(self, logs: dict | None = None) -> None:
        if getattr(self, "_in_step", False):
            self.model.schedule_refresh(None)
            self._in_step = False

    def _iterations(self) -> int:
        return int(self.model.optimizer.iterations.numpy())

    def on_train_batch_begin(self, batch: int, logs: dict | None = None) -> None:
        if self.every_n_steps is not None and not self._in_step:
            self._step_before = self._iterations()

    def on_train_batch_end(self, batch: int, logs: dict | None = None) -> None:
        if self.every_n_steps is None or self._in_step:
            return
        n = self.every_n_steps
        if self._iterations() // n > self._step_before // n:
            self.model.refresh_dagger()

    def _refresh_for_epoch(self, done: int) -> None:
        """Refresh once after ``done`` epochs when the period says so (not twice)."""
        n = self.every_n_epochs
        if n is None or done <= 0 or done % n:
            return
        if self.model.refresh_epoch < done:
            self.model.refresh_dagger()
            self.model.set_refresh_epoch(done)

    def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
        if self._first_epoch:
            self._first_epoch = False
            # Within one run the last refresh lies at or before the first epoch
            # of a fit; a later count is left by an earlier fit, whose epoch
            # numbering this fit restarts: this fit does its own refreshes.
            if self.model.refresh_epoch > epoch:
                self.model.set_refresh_epoch(epoch)
        # A run resumed by BackupAndRestore may have saved epoch `epoch` before
        # this callback refreshed at its end (callback order): catch up.
        self._refresh_for_epoch(epoch)

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        self._refresh_for_epoch(epoch + 1)

    def get_config(self) -> dict[str, Any]:
        return {"every_n_epochs": self.every_n_epochs, "every_n_steps": self.every_n_steps}

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> "RefreshDagger":
        return cls(**config)


@keras.saving.register_keras_serializable(package="adpue_tf")
class BestRound(keras.callbacks.Callback):
    """Keep the round of alternate learning with the best validation score.

    As ``EarlyStopping(restore_best_weights=True)`` does for epochs, but for
    the rounds of :class:`RefreshDagger`: the number of rounds ``T`` acts as a
    regulariser (many rounds drift to the direct fixed point, which can
    over-predict positives), so choose it by an observable, proper score such
    as ``val_exposure_nll`` (:class:`adpue_tf.validation.ExposureLikelihood` on
    data from :func:`adpue_tf.validation.pue_validation_data`).

    A candidate is the model at the end of a round: after an epoch in which
    the snapshot was refreshed, its score is that epoch's ``monitor`` value
    (the validation of the net that has just become ``f†_T``). Epochs inside a
    round, and a last epoch that ends no round, are not candidates (with
    ``RefreshDagger(every_n_steps=...)`` a candidate is every epoch in which
    a refresh happened, scored at the epoch's end). The state is read after
    the epoch's refresh, whatever the order of ``BestRound`` and
    ``RefreshDagger`` in ``callbacks``; put ``BestRound`` after
    ``RefreshDagger`` so that ``patience`` stops at once (else one more step
    runs before the stop).
    When training ends, all the weights of the ``DebiasedModel`` (net,
    snapshot, round counter) are set back to the best round's, in memory;
    :attr:`best_round` is the chosen ``T``.

    Args:
        monitor: the logged value to compare, e.g. ``"val_exposure_nll"``.
        mode: ``"min"`` (lower is better) or ``"max"``.
        patience: stop training after this many rounds without improvement
            (None: never stop early).
        restore_best: set the weights back to the best round at the end.

    Attributes:
        best_round: the number of refreshes ``T`` of the best round (None
            before any round ended).
        best_score: its ``monitor`` value.
        best_epoch: the 0-based index of the epoch that ended it.
        rounds: ``[(T, score), ...]`` for every round that ended.

    Raises:
        TypeError: on a non-string ``monitor``, a non-int ``patience`` or a
            non-bool ``restore_best``; when the model is not a ``DebiasedModel``.
        ValueError: on an unknown ``mode`` or ``patience < 1``; at the end of
            a round, when the logs lack ``monitor`` (their keys are listed)
            or it is not finite; when training ends without any round ended
            (no ``RefreshDagger``, or a period longer than the epochs trained).

    Example:
        >>> import numpy as np, adpue_tf as adp
        >>> from adpue_tf.callbacks import BestRound
        >>> s = adp.synthetic.synthetic_pue(400, 400, seed=0)
        >>> import keras
        >>> net = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
        >>> model = adp.DebiasedModel(net, initial_dagger=0.5)
        >>> model.compile("adam", loss=adp.ADPUELoss(from_logits=True),
        ...               metrics=[adp.validation.ExposureLikelihood(from_logits=True)])
        >>> val = adp.validation.pue_validation_data(s.x_pu, s.w_pu, s.x_e, s.e_e)
        >>> train = adp.data.pue_dataset(s.x_pu, s.w_pu, s.x_e, s.e_e, batch_size=200, seed=0)
        >>> best = BestRound(monitor="val_exposure_nll")
        >>> _ = model.fit(train, validation_data=val, epochs=3, verbose=0,
        ...               callbacks=[adp.RefreshDagger(), best])
        >>> best.best_round == model.refreshes, len(best.rounds)
        (True, 3)
    """

    def __init__(self, monitor: str = "val_exposure_nll", mode: str = "min",
                 patience: int | None = None, restore_best: bool = True) -> None:
        super().__init__()
        if not isinstance(monitor, str) or not monitor:
            raise TypeError(f"`monitor` must be the name of a logged value, got {monitor!r}.")
        if mode not in ("min", "max"):
            raise ValueError(f"`mode` must be 'min' or 'max', got {mode!r}.")
        check_bool("restore_best", restore_best)
        self.monitor = monitor
        self.mode = mode
        self.patience = None if patience is None else check_int("patience", patience, 1)
        self.restore_best = restore_best
        self._reset()

    def _reset(self) -> None:
        self.best_round: int | None = None
        self.best_score: float | None = None
        self.best_epoch: int | None = None
        self.rounds: list[tuple[int, float]] = []
        self._best_weights: list[Any] | None = None
        self._pending: tuple[int, float | None, dict] | None = None
        self._refreshes_at_begin = 0
        self._since_best = 0
        self._epochs_seen = 0

    def on_train_begin(self, logs: dict | None = None) -> None:
        from adpue_tf.model import DebiasedModel

        if not isinstance(self.model, DebiasedModel):
            raise TypeError(
                "BestRound needs an adpue_tf.DebiasedModel trained with RefreshDagger, got "
                f"{type(self.model).__name__}.")
        self._reset()
        self._refreshes_at_begin = self.model.refreshes

    def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
        self._settle()

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        logs = dict(logs or {})
        self._epochs_seen += 1
        self._pending = (epoch, logs.get(self.monitor), logs)
        if self.model.refreshes > self._refreshes_at_begin:
            self._settle()  # RefreshDagger came first: judge now (patience stops at once)

    def on_train_end(self, logs: dict | None = None) -> None:
        self._settle()
        if self.restore_best and self._best_weights is not None:
            self.model.set_weights(self._best_weights)
        if not self.rounds and self._epochs_seen:
            raise ValueError(
                f"BestRound saw {self._epochs_seen} epoch(s) but no round ended (the f† "
                "snapshot was never refreshed), so it chose nothing. Pass "
                "adp.RefreshDagger(...) in `callbacks` too, with a period that ends at "
                "least one round within the epochs trained.")

    def _better(self, score: float) -> bool:
        if self.best_score is None:
            return True
        return score < self.best_score if self.mode == "min" else score > self.best_score

    def _settle(self) -> None:
        """Judge the last finished epoch, once every callback is done with it."""
        refreshes = self.model.refreshes
        pending, self._pending = self._pending, None
        ended_round = refreshes > self._refreshes_at_begin
        self._refreshes_at_begin = refreshes
        if pending is None or not ended_round:
            return
        epoch, score, logs = pending
        if score is None:
            raise ValueError(
                f"BestRound monitors {self.monitor!r}, which the logs of epoch {epoch} lack "
                f"(they hold {sorted(logs)}). Pass `validation_data` (for val_exposure_nll: "
                "adp.validation.pue_validation_data) and compile with the metric.")
        score = float(score)
        if not math.isfinite(score):
            raise ValueError(f"BestRound: {self.monitor!r} is {score} after round {refreshes}.")
        self.rounds.append((refreshes, score))
        if self._better(score):
            self.best_round, self.best_score, self.best_epoch = refreshes, score, epoch
            self._best_weights = [w.copy() for w in self.model.get_weights()]
            self._since_best = 0
            return
        self._since_best += 1
        if self.patience is not None and self._since_best >= self.patience:
            self.model.stop_training = True

    def get_config(self) -> dict[str, Any]:
        return {"monitor": self.monitor, "mode": self.mode, "patience": self.patience,
                "restore_best": self.restore_best}

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> "BestRound":
        return cls(**config)
