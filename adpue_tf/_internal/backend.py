"""Internal: what the checks need from Keras's backend (TensorFlow, JAX or PyTorch).

The backend is fixed when Keras is imported (``KERAS_BACKEND``). Every check
of the package runs in one of two ways:

* the value is known now (TensorFlow's eager mode, a JAX array outside a
  trace, any PyTorch tensor): :func:`concrete` gives it as a NumPy array and
  the caller raises a ``ValueError`` naming the argument;
* the value is traced (a ``tf.function``, a ``jax.jit``): the checks are
  folded into one runtime assertion, a ``tf.debugging.Assert`` on TensorFlow
  (:mod:`adpue_tf._internal.guards`), here on JAX :func:`jax_assertion`: a
  ``lax.cond`` whose failing branch calls back into Python, which raises the
  same ``ValueError`` (a ``DivergedError`` for a blown-up output); JAX reports
  it as a ``JaxRuntimeError`` carrying the message, and the step that raised it
  returns no new weights.

Example:
    >>> import numpy as np
    >>> concrete(np.ones(2)).tolist()
    [1.0, 1.0]
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

import keras
import numpy as np

#: The backend Keras runs on: "tensorflow", "jax" or "torch" (fixed at import).
BACKEND: str = keras.backend.backend()
#: Whether the backend is TensorFlow (graph assertions, ``tf.distribute``).
TENSORFLOW: bool = BACKEND == "tensorflow"

if BACKEND == "tensorflow":
    import tensorflow as tf
elif BACKEND == "jax":
    import jax

try:  # Keras's shape inference (PyTorch runs it on placeholder tensors of ones)
    from keras.src.backend.common.symbolic_scope import in_symbolic_scope
except ImportError:  # pragma: no cover - a Keras without it
    def in_symbolic_scope() -> bool:
        return False

__all__ = ["BACKEND", "TENSORFLOW", "accelerated", "can_assert", "concrete", "is_traced",
           "jax_assertion", "jax_jit", "raise_first", "recorded_error"]

#: The error the last failing JAX assertion raised (its callback may run on another thread).
_RECORDED: list[Exception] = []
_LOCK = threading.Lock()


def recorded_error() -> Exception | None:
    """The error of the last failing JAX assertion, once (None when there is none).

    JAX wraps an error raised in a callback into a ``JaxRuntimeError``; the
    code that catches it raises this one instead, of the check's own type.
    """
    with _LOCK:
        return _RECORDED.pop() if _RECORDED else None


def accelerated() -> bool:
    """Whether the backend computes on a GPU or TPU (not the CPU) by default."""
    if TENSORFLOW:
        return bool(tf.config.list_logical_devices("GPU") or tf.config.list_logical_devices("TPU"))
    if BACKEND == "jax":
        return jax.default_backend() != "cpu"
    import torch

    return bool(torch.cuda.is_available())


def jax_jit(function: Callable[..., Any]) -> Callable[..., Any]:
    """``jax.jit(function)`` (JAX only), its arguments not donated."""
    return jax.jit(function)


def is_traced(x: Any) -> bool:
    """Whether ``x`` is a symbolic value of a trace (its value is not known now).

    Inside Keras's shape inference (a symbolic scope) every value counts as
    traced: PyTorch runs it on placeholder tensors whose values mean nothing.
    """
    if BACKEND == "tensorflow":
        return not (tf.executing_eagerly() and not isinstance(x, keras.KerasTensor))
    if isinstance(x, keras.KerasTensor) or in_symbolic_scope():
        return True
    return BACKEND == "jax" and isinstance(x, jax.core.Tracer)


def can_assert() -> bool:
    """Whether traced values can be checked at run time (JAX; TensorFlow has its own asserts).

    PyTorch traces only for shape inference, whose placeholder values are not checked.
    """
    return BACKEND == "jax" and not in_symbolic_scope()


def concrete(x: Any) -> np.ndarray | None:
    """``x`` as a NumPy array when its value is known now, else None (traced).

    TensorFlow: an eager tensor (or a NumPy value); JAX: an array that is not a
    tracer; PyTorch: any tensor (detached, copied to the host).
    """
    if isinstance(x, (np.ndarray, np.generic, float, int, bool, list, tuple)):
        return np.asarray(x)
    if x is None or isinstance(x, keras.KerasTensor):
        return None
    if BACKEND == "tensorflow":
        if tf.executing_eagerly() and hasattr(x, "numpy"):
            return np.asarray(x.numpy())
        return None
    if is_traced(x):
        return None
    if hasattr(x, "detach"):  # PyTorch: a tensor that requires grad is read without it
        x = x.detach()
    return np.asarray(keras.ops.convert_to_numpy(x))


def _format(values: Sequence[Any]) -> str:
    parts = []
    for v in values:
        arr = np.asarray(v)
        parts.append(np.array2string(arr, threshold=8, edgeitems=4, precision=6)
                     if arr.ndim else f"{arr.item():.6g}" if arr.dtype.kind == "f"
                     else str(arr.item()))
    return " ".join(parts)


def raise_first(messages: Sequence[str], oks: Sequence[Any], data: Sequence[Sequence[Any]],
                error: Callable[[str], Exception]) -> None:
    """Raise ``error(message data...)`` of the first check whose flag is false (else nothing)."""
    for message, ok, values in zip(messages, oks, data):
        if not bool(np.all(np.asarray(ok))):
            text = f"{message} {_format(values)}".rstrip() if values else message
            raise error(text)


def jax_assertion(checks: Sequence[tuple[Any, str, Callable[[], Sequence[Any]] | None]],
                  error: Callable[[str], Exception]) -> Any:
    """JAX: one runtime assertion for ``checks``; a float32 scalar 1 to multiply into a result.

    The flags are reduced to one predicate; only when it is false does a
    ``lax.cond`` branch compute the checks' data (without gradient) and call
    back into Python, which raises ``error`` for the first failing check. The
    returned ``1.0`` must reach an output of the traced function (multiply it
    into one), else XLA drops the assertion.
    """
    oks = [jax.numpy.asarray(ok) for ok, _, _ in checks]
    messages = [message for _, message, _ in checks]
    pred = jax.numpy.all(jax.numpy.stack([jax.numpy.all(ok) for ok in oks]))

    def fail() -> Any:
        data = [[jax.lax.stop_gradient(jax.numpy.asarray(v)) for v in (d() if d else [])]
                for _, _, d in checks]

        def callback(oks_: Any, data_: Any) -> np.ndarray:
            try:
                raise_first(messages, oks_, data_, error)
            except Exception as err:
                with _LOCK:
                    _RECORDED[:] = [err]
                raise
            return np.float32(1.0)

        return jax.pure_callback(callback, jax.ShapeDtypeStruct((), np.float32), oks, data)

    one = jax.lax.cond(pred, lambda: jax.numpy.float32(1.0), fail)
    return jax.lax.stop_gradient(one)
