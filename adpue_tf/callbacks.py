"""RefreshDagger: the refresh of the ``f†`` snapshot in alternate learning.

Example:
    >>> import adpue_tf as adp
    >>> adp.RefreshDagger(every_n_epochs=2).get_config()
    {'every_n_epochs': 2, 'every_n_steps': None}
"""

from __future__ import annotations

from typing import Any

import keras

from adpue_tf._checks import check_int

__all__ = ["RefreshDagger"]


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

    def _iterations(self) -> int:
        return int(keras.ops.convert_to_numpy(self.model.optimizer.iterations))

    def on_train_batch_begin(self, batch: int, logs: dict | None = None) -> None:
        if self.every_n_steps is not None:
            self._step_before = self._iterations()

    def on_train_batch_end(self, batch: int, logs: dict | None = None) -> None:
        if self.every_n_steps is None:
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
