"""Internal: build an optimizer's variables before ``fit`` traces a step (one trace, not two).

Also :func:`quiet_retracing`: TensorFlow's "triggered tf.function retracing"
warning, dropped while fit_pue traces the steps of the fresh nets it builds by
design (the warning tells a user to change code that is not theirs).

Keras creates an optimizer's slots inside the first traced training step when
no distribution strategy is set, and a ``tf.function`` that creates variables
on its first trace is traced again; built first, the step is traced once
(about a third of ``fit_pue``'s time on small data). Under a strategy Keras
builds them itself before tracing, in the strategy's scope, as here.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

import keras

__all__ = ["build_optimizer", "quiet_retracing"]

#: The text of TensorFlow's warning about frequent retracing (polymorphic_function.py).
RETRACING = "triggered tf.function retracing"


class _DropRetracing(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return RETRACING not in record.getMessage()


@contextlib.contextmanager
def quiet_retracing() -> Iterator[None]:
    """Drop TensorFlow's frequent-retracing warning inside the block (nothing else).

    Example:
        >>> import logging
        >>> with quiet_retracing():
        ...     logging.getLogger("tensorflow").warning("5 of 5 calls triggered tf.function retracing")
    """
    drop = _DropRetracing()
    logger = logging.getLogger("tensorflow")
    logger.addFilter(drop)
    try:
        yield
    finally:
        logger.removeFilter(drop)


def build_optimizer(model: keras.Model) -> None:
    """Create ``model.optimizer``'s variables now, if the model is compiled and built."""
    optimizer = getattr(model, "optimizer", None)
    if optimizer is None or optimizer.built or not model.built:
        return
    variables = model.trainable_variables
    if not variables:
        return
    strategy = getattr(model, "distribute_strategy", None)  # TensorFlow only
    if strategy is None:
        optimizer.build(variables)
        return
    with strategy.scope():
        optimizer.build(variables)
