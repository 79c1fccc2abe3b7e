"""Fit many independent linear models at once: the engine of the linear benchmark.

The paper's linear table averages 100 trials per setting. Each trial is a
separate linear model ``z = x·w + b`` trained with one risk of
:mod:`adpue_tf.risks` on its own data. :func:`fit_linear` stacks the trials'
data into ``(trials, rows, features)`` tensors, evaluates the risk of every
trial with ``tf.vectorized_map`` and minimises the **sum** of the trials'
risks with full-batch Adam.

Why the optimum is the same as fitting each trial alone: the summed
objective separates, so the gradient for trial ``t``'s parameters is that
trial's own gradient; Adam's update is per coordinate (its moments and step
for a coordinate depend only on that coordinate's gradients), so each trial
follows exactly the trajectory it would follow alone with full-batch Adam.
``tests/experiments/test_linear_fit.py`` checks this against one-trial runs.

Full batch (every row of the trial in every step) rather than minibatches:
for linear models on a few thousand rows this is fast, deterministic and
converges to the risk's minimiser without minibatch noise; every trial starts
from zero weights.

Example:
    >>> import numpy as np
    >>> from adpue_tf import risks
    >>> from adpue_tf.experiments import linear_fit
    >>> from adpue_tf.labels import pack_pu
    >>> x = np.random.default_rng(0).normal(size=(3, 40, 2)).astype("float32")
    >>> y = np.stack([pack_pu((x[t, :, 0] > 0).astype(int)) for t in range(3)])
    >>> fit = linear_fit.fit_linear(x, y, risks.logit, steps=50)
    >>> fit.weights.shape, fit.bias.shape
    ((3, 2), (3,))
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Callable

import keras
import numpy as np
import tensorflow as tf

from adpue_tf import risks as risks_lib
from adpue_tf.labels import check_finite

__all__ = ["LinearFit", "fit_linear"]


@dataclasses.dataclass(frozen=True)
class LinearFit:
    """Weights ``(trials, features)`` and biases ``(trials,)`` of the fitted models."""

    weights: np.ndarray
    bias: np.ndarray

    def logits(self, x: np.ndarray) -> np.ndarray:
        """Logits of trial ``t`` on ``x[t]``: ``x`` is ``(trials, rows, features)``.

        Example:
            >>> LinearFit(np.ones((1, 2)), np.zeros(1)).logits(np.ones((1, 3, 2))).tolist()
            [[2.0, 2.0, 2.0]]
        """
        return np.einsum("tnd,td->tn", x, self.weights) + self.bias[:, None]


@functools.lru_cache(maxsize=64)
def _trainer(risk: Callable[..., risks_lib.RiskTerms], options: tuple, shape: tuple[int, int, int],
             columns: int, learning_rate: float, l2: float) -> tuple[Any, Any, Any, Any]:
    """Variables, optimizer and traced training loop for one risk and one shape.

    Cached, so that the trials of a benchmark reuse one trace per risk and shape.
    """
    trials, rows, dim = shape
    w = tf.Variable(np.zeros((trials, dim), np.float32))
    b = tf.Variable(np.zeros((trials,), np.float32))
    optimizer = keras.optimizers.Adam(learning_rate)
    optimizer.build([w, b])
    opts = dict(options)

    def one_trial(args: tuple[tf.Tensor, tf.Tensor, tf.Tensor]) -> tf.Tensor:
        y_t, z_t, sw_t = args
        return risk(y_t, z_t, from_logits=True, sample_weight=sw_t, **opts).loss

    @tf.function(input_signature=[
        tf.TensorSpec((trials, rows, dim), tf.float32),
        tf.TensorSpec((trials, rows, columns), tf.float32),
        tf.TensorSpec((trials, rows), tf.float32),
        tf.TensorSpec((), tf.int32)])
    def train(x: tf.Tensor, y: tf.Tensor, sw: tf.Tensor, n: tf.Tensor) -> None:
        for _ in tf.range(n):
            with tf.GradientTape() as tape:
                z = tf.einsum("tnd,td->tn", x, w) + b[:, None]
                total = tf.reduce_sum(tf.vectorized_map(one_trial, (y, z, sw)))
                total += l2 * tf.reduce_sum(tf.square(w))
            optimizer.apply(tape.gradient(total, [w, b]), [w, b])

    return w, b, optimizer, train


def fit_linear(
    x: Any,
    y: Any,
    risk: Callable[..., risks_lib.RiskTerms],
    *,
    sample_weight: Any = None,
    steps: int = 200,
    learning_rate: float = 0.05,
    init: LinearFit | None = None,
    l2: float = 0.0,
    **risk_options: Any,
) -> LinearFit:
    """Minimise ``risk`` for each trial's linear model, all trials at once.

    Args:
        x: features ``(trials, rows, features)``.
        y: packed labels ``(trials, rows, 3|4)`` (see :mod:`adpue_tf.labels`).
        risk: a function of :mod:`adpue_tf.risks` (e.g. ``risks.nnpue``).
        sample_weight: optional row weights ``(trials, rows)``.
        steps: full-batch Adam steps.
        learning_rate: Adam's learning rate.
        init: start from these parameters (warm start) instead of zeros.
        l2: weight of the penalty ``l2·‖w‖²`` added to each trial's risk (not on
            the bias), as in regularised logistic regression.
        **risk_options: passed to ``risk`` (``prior=``, ``alpha=``, ...);
            ``from_logits=True`` is implied.

    Returns:
        The fitted :class:`LinearFit`.

    Raises:
        ValueError: on shapes that do not line up, NaN/inf, or ``steps < 1``.
    """
    x = np.asarray(check_finite("x", x), np.float32)
    y = np.asarray(check_finite("y", y), np.float32)
    if x.ndim != 3 or y.ndim != 3 or x.shape[:2] != y.shape[:2]:
        raise ValueError(
            "`x` must be (trials, rows, features) and `y` (trials, rows, 3|4) with the "
            f"same trials and rows; got {x.shape} and {y.shape}.")
    if not isinstance(steps, int) or steps < 1:
        raise ValueError(f"`steps` must be an int >= 1, got {steps!r}.")
    if not l2 >= 0.0:
        raise ValueError(f"`l2` must be >= 0, got {l2!r}.")
    trials, rows, dim = x.shape
    sw = np.ones((trials, rows), np.float32) if sample_weight is None else np.asarray(
        check_finite("sample_weight", sample_weight), np.float32)
    if sw.shape != (trials, rows):
        raise ValueError(f"`sample_weight` must have shape {(trials, rows)}, got {sw.shape}.")
    w, b, optimizer, train = _trainer(risk, tuple(sorted(risk_options.items())),
                                      (trials, rows, dim), y.shape[2], float(learning_rate),
                                      float(l2))
    w.assign(np.zeros((trials, dim), np.float32) if init is None else init.weights)
    b.assign(np.zeros((trials,), np.float32) if init is None else init.bias)
    for v in optimizer.variables:  # a fresh Adam: zero moments and step count
        v.assign(tf.zeros_like(v))
    optimizer.learning_rate = learning_rate  # (its variable was zeroed too)
    train(x, y, sw, tf.constant(steps))
    return LinearFit(w.numpy(), b.numpy())
