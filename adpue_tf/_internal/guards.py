"""Internal: the checks on a model's output and on a loss value, in eager and graph mode.

:func:`to_logits` turns a model output into float32 logits, refusing
probabilities given as logits and logits given as probabilities, and guards
its gradient so that a step on NaN, infinite or exploded outputs stops before
any weight is updated; :func:`guard_finite` does the same for a loss value.

Every check runs in eager mode (a ``ValueError`` naming the argument) and
inside ``fit``/``tf.function`` (a ``tf.errors.InvalidArgumentError`` with the
same words, from ``tf.debugging.Assert``). XLA compiles ``Assert`` to a no-op,
so under ``jit_compile=True`` (Keras's ``"auto"`` on a GPU) only the static
(trace-time) checks remain, except where a step records them
(:func:`recording_checks`: :class:`adpue_tf.DebiasedModel` raises a failed
one after the step). On JAX a traced check is a callback into Python
(:func:`adpue_tf._internal.backend.jax_assertion`), kept under ``jax.jit``; on
PyTorch every value is concrete and checked at once.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import keras
import numpy as np
from keras import ops

from adpue_tf._internal.backend import (
    TENSORFLOW,
    can_assert,
    concrete,
    jax_assertion,
    raise_first,
)

if TENSORFLOW:
    import tensorflow as tf

#: Probabilities are clipped to ``[_EPS, 1 - _EPS]`` before taking logits.
_EPS = 1e-7
#: Logits are clipped to ``[-MAX_LOGIT, MAX_LOGIT]`` (as probabilities are
#: clipped): ``±inf`` give a finite loss, never ``0·inf = NaN``.
MAX_LOGIT = 1e4
#: The words of the error that stops a fit whose model output blew up; read by
#: :func:`is_divergence`, never by callers.
DIVERGED = "holds NaN, infinite or exploded values"


class DivergedError(ValueError):
    """Training stopped: the model output blew up (NaN, infinite or beyond the clip).

    Raised before any weight is updated, in eager mode; inside a compiled
    ``fit`` the same stop is a ``tf.errors.InvalidArgumentError`` (a graph
    assertion). :func:`is_divergence` recognises both.

    Example:
        >>> issubclass(DivergedError, ValueError)
        True
    """


def is_divergence(error: BaseException) -> bool:
    """Whether ``error`` is the stop of a diverging fit, in eager or graph mode.

    Use it to record a diverged run (say, one learning rate of a sweep) and
    re-raise every other error.

    Example:
        >>> is_divergence(DivergedError("...")), is_divergence(ValueError("bad `x`"))
        (True, False)
    """
    return isinstance(error, DivergedError) or DIVERGED in str(error)


def error_of(text: str) -> ValueError:
    """The error of a failed check: a :class:`DivergedError` for a blown-up output."""
    return DivergedError(text) if DIVERGED in text else ValueError(text)


def _is_floating(t: Any) -> bool:
    """Whether ``t`` holds floating-point values (any backend's tensors, NumPy arrays)."""
    dtype = getattr(t, "dtype", None)
    if dtype is None:
        return False
    if TENSORFLOW and isinstance(dtype, tf.DType):
        return bool(dtype.is_floating)
    try:
        return "float" in keras.backend.standardize_dtype(dtype)
    except (ValueError, TypeError):
        return False


def _from_sigmoid(y_pred: Any) -> bool:
    """Whether ``y_pred`` is the output of a sigmoid activation.

    Keras's sigmoid caches its logits on the output (``_keras_logits``), which
    is how ``keras.losses.BinaryCrossentropy`` recognises probabilities; a
    traced tensor also shows its op type.
    """
    if hasattr(y_pred, "_keras_logits"):
        return True
    if not TENSORFLOW or tf.executing_eagerly() or not isinstance(y_pred, tf.Tensor):
        return False
    op = getattr(y_pred, "op", None)
    return getattr(op, "type", None) == "Sigmoid"


def _assert(ok: Any, message: str, *data: Any) -> Any:
    """``tf.debugging.Assert`` with a readable message and a summary of ``data``."""
    return tf.debugging.Assert(ok, [message, *data], summarize=8)


#: One check of a group folded by :func:`fold_checks`: the condition (a scalar
#: bool tensor), the message, and the tensors printed after it (a callable that
#: builds them, run only when the check fails, or ``None``).
Check = tuple[Any, str, Callable[[], Sequence[Any]] | None]


_RECORDING = threading.local()


@contextlib.contextmanager
def recording_checks() -> Iterator[list[tuple[Any, str]]]:
    """TensorFlow, while tracing: each check :func:`fold_checks` folds is also recorded.

    Yields a list that fills with ``(condition, message)``, one per check, in
    the order they are made: the condition where the check was made in the
    graph open at entry (usable after the block), ``None`` where it was made
    in a nested graph (a branch, a loop body). A model's step reads them to
    raise its own failed check as a ``ValueError`` (graph mode) and to check
    them after an XLA step, which compiles the assertions away
    (:class:`adpue_tf.DebiasedModel`).

    Example:
        >>> import tensorflow as tf
        >>> def step(x):
        ...     return with_checks(x, fold_checks([(x > 0, "x must be positive", None)]))
        >>> with recording_checks() as found:
        ...     _ = tf.function(step)(tf.constant(1.0))
        >>> [message for _, message in found]
        ['x must be positive']
    """
    outer = getattr(_RECORDING, "found", None)
    found: list[tuple[Any, str]] = []
    _RECORDING.found = (tf.compat.v1.get_default_graph() if TENSORFLOW else None, found)
    try:
        yield found
    finally:
        _RECORDING.found = outer


def _record(checks: Sequence[Check]) -> None:
    """Add ``checks`` to the open :func:`recording_checks` block, if any."""
    open_block = getattr(_RECORDING, "found", None)
    if open_block is None:
        return
    graph, found = open_block
    here = tf.compat.v1.get_default_graph() is graph
    found.extend((tf.convert_to_tensor(ok) if here else None, message)
                 for ok, message, _ in checks)


def fold_checks(checks: Sequence[Check]) -> list:
    """One graph assertion for a group of checks (a list of 0 or 1 op, for :func:`with_checks`).

    Each ``tf.debugging.Assert`` whose data holds a non-string tensor builds its
    own conditional (an ``If``), so that its data is formatted only on failure.
    Here the conditions are reduced to one flag: a single check without data is
    a plain ``Assert``; otherwise one ``tf.cond`` whose failure branch asserts the
    checks in order, so the error is that of the first failing check, with the
    same text as a ``tf.debugging.Assert(ok, [message, *data], summarize=8)``,
    and the data of a check (say, the min and max of a tensor) are computed only
    when it fails.

    JAX: the list holds one float32 ``1`` that :func:`with_checks` multiplies
    into its value (:func:`~adpue_tf._internal.backend.jax_assertion`).
    PyTorch (every value concrete): the checks run now and the list is empty.
    """
    if not checks:
        return []
    if not TENSORFLOW:
        values = [concrete(ok) for ok, _, _ in checks]
        if all(v is not None for v in values):
            data = [[concrete(v) for v in d()] if d is not None and not bool(np.all(v)) else []
                    for v, (_, _, d) in zip(values, checks)]
            raise_first([m for _, m, _ in checks], values, data, error_of)
            return []
        return [jax_assertion(checks, error_of)] if can_assert() else []
    _record(checks)
    if len(checks) == 1 and checks[0][2] is None:
        ok, message, _ = checks[0]
        return [tf.raw_ops.Assert(condition=ok, data=[message], summarize=8)]
    oks = [tf.convert_to_tensor(ok) for ok, _, _ in checks]
    pred = oks[0] if len(oks) == 1 else tf.reduce_all(tf.stack(oks))

    def fail() -> Any:
        deps: list = []
        for ok, (_, message, data) in zip(oks, checks):
            with tf.control_dependencies(deps):
                values = list(data()) if data is not None else []
                deps = [tf.raw_ops.Assert(condition=ok, data=[message, *values], summarize=8)]
        return deps[0]

    result = tf.cond(pred, tf.no_op, fail, name="checks")
    return [getattr(result, "op", result)]


def _with_checks(x: Any, checks: list) -> Any:
    """``x``, evaluated only after the graph assertions ``checks``."""
    if not checks:
        return x
    if not TENSORFLOW:  # JAX: the assertions' 1 multiplied in keeps them in the program
        one = checks[0]
        for more in checks[1:]:
            one = one * more
        if _is_floating(x):
            return x * ops.cast(one, x.dtype)
        return ops.where(ops.cast(one, "bool"), x, ops.zeros_like(x))
    with tf.control_dependencies(checks):
        return tf.identity(x)


def _guard_output(z: Any, name: str, bound: float) -> Any:
    """Identity whose gradient first checks ``|z| <= bound`` and a finite gradient.

    Every weight gradient flows through this op, so a step on a non-finite
    or exploded model output (NaN features, overflow, huge features) stops
    with a clear error before the optimizer can update a weight. The forward
    value is not checked: the loss of ``±inf`` logits is finite (they are
    clipped to ``±MAX_LOGIT``), but beyond the clip they get no gradient, so
    training on them would silently ignore those rows.
    """
    output = (f"{name} (the model output) {DIVERGED} "
              f"(beyond ±{bound:g}), so training stops before the weights are "
              "updated. Look for NaN, inf or huge values in the features, or a "
              "diverging model;")
    gradient = (f"the gradient of the loss with respect to {name} is not finite, "
                "so training stops before the weights are updated.")
    if not TENSORFLOW:
        @ops.custom_gradient
        def checked(x: Any) -> Any:
            def grad(*args: Any, upstream: Any = None) -> Any:
                dy = upstream if upstream is not None else args[0]
                return _with_checks(dy, fold_checks([
                    (ops.all(ops.abs(x) <= bound), output + " min and max:",
                     lambda: [ops.min(x), ops.max(x)]),
                    (ops.all(ops.isfinite(dy)), gradient, None),
                ]))

            return x + 0.0, grad

        return checked(z)

    @tf.custom_gradient
    def guard(x: Any) -> Any:
        def grad(dy: Any) -> Any:
            if tf.executing_eagerly() and hasattr(x, "numpy"):
                arr = x.numpy()
                if not np.all(np.abs(arr) <= bound):
                    raise DivergedError(
                        f"{output} min {np.min(arr):.4g}, max {np.max(arr):.4g}.")
                if not np.all(np.isfinite(dy.numpy())):
                    raise ValueError(gradient)
                return dy
            return _with_checks(dy, fold_checks([
                (tf.reduce_all(tf.abs(x) <= bound), output + " min and max:",
                 lambda: [tf.reduce_min(x), tf.reduce_max(x)]),
                (tf.reduce_all(tf.math.is_finite(dy)), gradient, None),
            ]))

        return tf.identity(x), grad

    return guard(z)


def _check_probabilities(z: Any, name: str) -> Any:
    """Refuse values outside ``[0, 1]`` when ``from_logits=False`` (NaN passes through)."""
    message = (f"{name} holds values outside [0, 1], so it does not hold probabilities, "
               "but the loss has `from_logits=False`. A model that outputs logits (e.g. "
               "Dense(1) without activation) needs `from_logits=True`.")
    arr = concrete(z) if not TENSORFLOW else (
        z.numpy() if tf.executing_eagerly() and hasattr(z, "numpy") else None)
    if arr is not None:
        bad = (arr < 0.0) | (arr > 1.0)
        if np.any(bad):
            raise ValueError(f"{message} Got min {np.nanmin(arr):.4g}, max {np.nanmax(arr):.4g}.")
        return z
    inside = ops.logical_not(ops.any((z < 0.0) | (z > 1.0)))
    return _with_checks(z, fold_checks([(inside, message + " min and max:",
                                         lambda: [ops.min(z), ops.max(z)])]))


def probability_to_logit(p: Any) -> Any:
    """``log(p) - log(1 - p)`` of ``p`` clipped to ``[1e-7, 1 - 1e-7]``, in float32.

    The package's one probability-to-logit conversion (losses, serving, the
    Ratio model): extreme probabilities give finite logits.

    Example:
        >>> [round(float(v), 4) for v in probability_to_logit([0.5, 0.0, 1.0])]
        [0.0, -16.1181, 15.9424]
    """
    p = ops.clip(ops.cast(p, "float32"), _EPS, 1.0 - _EPS)
    return ops.log(p) - ops.log1p(-p)


def to_logits(y_pred: Any, from_logits: bool, name: str = "`y_pred`") -> Any:
    """Model output as float32 logits of shape ``(batch,)``.

    Probabilities are clipped to ``[1e-7, 1 - 1e-7]`` and mapped with
    ``log(p) - log(1 - p)``, so extreme probabilities give finite logits;
    logits are clipped to ``[-1e4, 1e4]``, so ``±inf`` give a finite loss.
    The gradient through the result checks that the output lies within the
    clip (``|z| <= 1e4``; probabilities in ``[0, 1]``) and that its gradient
    is finite: a training step on such outputs stops before any weight is
    updated.

    Raises:
        ValueError: on a wrong shape; with ``from_logits=True``, on the output
            of a sigmoid activation; with ``from_logits=False``, on values
            outside ``[0, 1]`` (in graph mode: ``InvalidArgumentError``).
    """
    if from_logits and _from_sigmoid(y_pred):
        raise ValueError(
            f"{name} is the output of a sigmoid activation, so it holds probabilities, "
            "but the loss has `from_logits=True`. Set `from_logits=False`, or drop the "
            "sigmoid so that the model outputs logits.")
    y_pred = ops.convert_to_tensor(y_pred)
    shape = tuple(y_pred.shape)
    if len(shape) == 2 and shape[1] not in (None, 1):
        raise ValueError(
            f"{name} must have one output unit (shape (batch,) or (batch, 1)), "
            f"got shape {shape}."
        )
    if len(shape) not in (1, 2):
        raise ValueError(
            f"{name} must have shape (batch,) or (batch, 1), got shape {shape}."
        )
    z = _guard_output(ops.reshape(ops.cast(y_pred, "float32"), (-1,)), name,
                      MAX_LOGIT if from_logits else 1.0)
    if from_logits:
        return ops.clip(z, -MAX_LOGIT, MAX_LOGIT)
    return probability_to_logit(_check_probabilities(z, name))


def finite_specs(tensors: dict[str, Any], message: str) -> list[Check]:
    """The checks of :func:`finite_checks`, unfolded (for :func:`fold_checks` with others).

    Eager: raises a ``ValueError`` (``message``, then the offending names) and
    returns no check.
    """
    checks: list[Check] = []
    for name, t in tensors.items():
        if t is None or not _is_floating(t):
            continue
        what = name if " " in name else f"`{name}`"  # a feature's key, or a phrase
        arr = concrete(t) if not TENSORFLOW else (
            t.numpy() if tf.executing_eagerly() and hasattr(t, "numpy") else None)
        if arr is not None:
            bad = int(np.size(arr) - np.count_nonzero(np.isfinite(arr)))
            if bad:
                raise ValueError(f"{message} {what} holds {bad} NaN or infinite value(s).")
            continue
        checks.append((tf.reduce_all(tf.math.is_finite(t)) if TENSORFLOW
                       else ops.all(ops.isfinite(t)),
                       f"{message} NaN or inf found in {what}.", None))
    return checks


def finite_checks(tensors: dict[str, Any], message: str) -> list:
    """Check that the floating tensors of ``tensors`` hold no NaN or inf.

    Eager: raises a ``ValueError`` (``message``, then the offending names).
    Graph: returns the assertion (a list of at most one op, all the tensors
    checked by one :func:`fold_checks`), for :func:`with_checks` or
    :func:`guard_finite`.
    """
    return fold_checks(finite_specs(tensors, message))


def with_checks(x: Any, checks: list) -> Any:
    """``x``, evaluated only after the graph assertions ``checks`` (identity when none)."""
    return _with_checks(x, checks)


def guard_finite(value: Any, message: str, checks: Any = ()) -> Any:
    """``value`` if finite; else a ValueError (eager) or an InvalidArgumentError (graph).

    In graph mode the gradient through the result waits for this check and for
    the assertions ``checks``, so an optimizer never applies a step whose loss
    (or checked input) was NaN or infinite: every weight gradient depends on
    them. Keras's ``TerminateOnNaN`` instead looks at the logged loss after the
    step, when the weights already hold the non-finite update.
    """
    arr = concrete(value) if not TENSORFLOW else (
        value.numpy() if tf.executing_eagerly() and hasattr(value, "numpy") else None)
    if arr is not None:
        if not np.all(np.isfinite(arr)):
            raise ValueError(f"{message} Got {arr}.")
        return value
    if not TENSORFLOW:  # JAX: the step fails as a whole, so no weight is updated
        check = [*fold_checks([(ops.all(ops.isfinite(value)), message + " Got",
                                lambda: [value])]), *checks]
        return _with_checks(value, check)

    @tf.custom_gradient
    def guard(x: Any) -> Any:
        check = [*fold_checks([(tf.reduce_all(tf.math.is_finite(x)), message, lambda: [x])]),
                 *checks]
        out = _with_checks(x, check)

        def grad(dy: Any) -> Any:
            return _with_checks(dy, check)

        return out, grad

    return guard(value)


__all__ = ["DIVERGED", "MAX_LOGIT", "Check", "DivergedError", "error_of", "finite_checks",
           "finite_specs", "fold_checks", "recording_checks",
           "guard_finite", "is_divergence", "probability_to_logit", "to_logits", "with_checks"]
