"""fit_pue drops TensorFlow's "triggered tf.function retracing" warning (its fresh nets are by design), nothing else."""

import logging

import tensorflow as tf

import adpue_tf as adp
from adpue_tf._internal.tracing import RETRACING, quiet_retracing


class _Keep(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def _trace_fresh_functions(n: int) -> None:
    """Trace ``n`` fresh tf.functions of one new Python function: TensorFlow's own warning.

    TensorFlow counts traces per code object and warns at most twice per code
    object, so each call compiles a new one (its warnings are its own).
    """
    scope: dict = {"tf": tf}
    exec(compile("def make():\n    @tf.function(autograph=False)\n    def step(x):\n        return x + 1.0\n"
                 "    return step\n", "<fresh>", "exec"), scope)
    for i in range(n):
        scope["make"]()(tf.constant(float(i)))


def _collect(block) -> list[str]:
    """The tensorflow logger's records during ``block``, at WARNING level (the CLI raises it)."""
    keep = _Keep()
    logger = logging.getLogger("tensorflow")
    level = logger.level
    logger.setLevel(logging.WARNING)
    logger.addHandler(keep)
    try:
        block()
    finally:
        logger.removeHandler(keep)
        logger.setLevel(level)
    return keep.messages


def test_tensorflows_own_warning_dropped_inside_only():
    outside = _collect(lambda: _trace_fresh_functions(8))
    assert any(RETRACING in m for m in outside), outside  # the text TensorFlow logs

    def inside():
        with quiet_retracing():
            _trace_fresh_functions(8)
            logging.getLogger("tensorflow").warning("another warning")
    messages = _collect(inside)
    assert not any(RETRACING in m for m in messages)
    assert "another warning" in messages
    assert not logging.getLogger("tensorflow").filters  # removed afterwards


def test_fit_pue_is_wrapped_and_keeps_its_signature():
    import inspect
    assert adp.fit_pue.__wrapped__.__name__ == "fit_pue"
    assert list(inspect.signature(adp.fit_pue).parameters)[:5] == ["build_net", "x_pu", "w",
                                                                   "x_e", "e"]
