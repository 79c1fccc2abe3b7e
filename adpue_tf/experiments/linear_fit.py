"""Fit many independent linear models at once: the engine of the linear benchmark.

The paper's linear table averages 100 trials per setting. Each trial is a
separate linear model ``z = x·w + b`` trained with one risk of
:mod:`adpue_tf.risks` on its own data. :func:`fit_linear` stacks the trials'
data into ``(trials, rows, features)`` tensors, evaluates the risk of every
trial with ``tf.vectorized_map`` and minimises the **sum** of the trials'
risks with full-batch Adam. Sparse features (few non-zero, as in w8a or
mushrooms) are multiplied as one sparse matrix, at a cost that follows their
non-zeros (:func:`fit_linear_models`, ``sparse``).

Each trial follows exactly the full-batch Adam trajectory it would follow alone
(why: ``docs/api/experiments.md``, *Many linear models at once*).

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
from collections.abc import Sequence
from typing import Any, Callable

import numpy as np
import tensorflow as tf

from adpue_tf import risks as risks_lib
from adpue_tf.experiments._linear_steps import CHECK_EVERY, RiskSpec, _models_trainer
from adpue_tf.labels import check_finite

__all__ = ["CHECK_EVERY", "LinearFit", "RiskSpec", "fit_linear", "fit_linear_models"]


@dataclasses.dataclass(frozen=True)
class LinearFit:
    """Weights ``(trials, features)`` and biases ``(trials,)`` of the fitted models.

    From :func:`fit_linear_models`, several models per trial: weights
    ``(trials, models, features)`` and biases ``(trials, models)``. ``steps``:
    the Adam steps each model took (``(trials,)`` or ``(trials, models)``;
    fewer than asked for where a tolerance stopped it), or ``None``.
    """

    weights: np.ndarray
    bias: np.ndarray
    steps: np.ndarray | None = None

    def logits(self, x: np.ndarray) -> np.ndarray:
        """Logits of trial ``t`` on ``x[t]``: ``x`` is ``(trials, rows, features)``.

        ``(trials, rows)``; ``(trials, models, rows)`` for several models per trial.

        Example:
            >>> LinearFit(np.ones((1, 2)), np.zeros(1)).logits(np.ones((1, 3, 2))).tolist()
            [[2.0, 2.0, 2.0]]
        """
        if self.weights.ndim == 3:
            return np.einsum("tnd,tkd->tkn", x, self.weights) + self.bias[..., None]
        return np.einsum("tnd,td->tn", x, self.weights) + self.bias[:, None]


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
    sparse: bool | None = None,
    tol: float = 0.0,
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
        sparse: dense or sparse features (``None``: by their density), as
            :func:`fit_linear_models`.
        tol: stop a trial's model once converged (``0``: never), as
            :func:`fit_linear_models`.
        **risk_options: passed to ``risk`` (``prior=``, ``alpha=``, ...);
            ``from_logits=True`` is implied.

    Returns:
        The fitted :class:`LinearFit`.

    Raises:
        ValueError: on shapes that do not line up, NaN/inf, ``steps < 1`` or a bad ``tol``.
        TypeError: if ``sparse`` is not ``True``, ``False`` or ``None``, or ``tol`` not a number.
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
    init3 = None if init is None else LinearFit(np.asarray(init.weights)[:, None],
                                                np.asarray(init.bias)[:, None])
    fit = fit_linear_models(x, y[:, None], risk, sample_weight=sw[:, None], steps=steps,
                            learning_rate=learning_rate, init=init3, l2=l2, sparse=sparse,
                            tol=tol, **risk_options)
    return LinearFit(fit.weights[:, 0], fit.bias[:, 0],
                     None if fit.steps is None else fit.steps[:, 0])


#: With ``sparse=None``, :func:`fit_linear_models` multiplies the features as a
#: sparse matrix when at most this share of them is non-zero (the measurement
#: behind it: :func:`fit_linear_models`, argument ``sparse``).
SPARSE_DENSITY = 0.1


def _use_sparse(x: np.ndarray, sparse: bool | None) -> bool:
    """Whether to fit ``x`` on the sparse path: ``sparse``, or (``None``) by its density."""
    if sparse is not None and not isinstance(sparse, bool):
        raise TypeError(f"`sparse` must be True, False or None (by density), got {sparse!r}.")
    if sparse is None:
        return bool(x.size > 0 and np.count_nonzero(x) <= SPARSE_DENSITY * x.size)
    return sparse


def fit_linear_models(
    x: Any,
    y: Any,
    risk: Callable[..., risks_lib.RiskTerms] | Sequence[tuple[Callable[..., Any], dict]],
    *,
    sample_weight: Any = None,
    steps: int = 200,
    learning_rate: float = 0.05,
    init: LinearFit | None = None,
    l2: float | Sequence[float] | np.ndarray = 0.0,
    sparse: bool | None = None,
    tol: float = 0.0,
    **risk_options: Any,
) -> LinearFit:
    """:func:`fit_linear` for several models per trial that share the trial's features.

    Model ``k`` of trial ``t`` is fitted on ``x[t]`` with its own labels
    ``y[t, k]``, row weights, L2 strength and risk. The same summed objective
    as :func:`fit_linear` (each model follows the full-batch Adam trajectory it
    would follow alone), but the logits of a trial's models are one matrix
    product with ``x[t]``, read once, instead of one matrix-vector product per
    model: on the benchmark's shapes several times faster per model.

    Args:
        x: features ``(trials, rows, features)``, shared by a trial's models.
        y: packed labels ``(trials, models, rows, 3|4)``.
        risk: one function of :mod:`adpue_tf.risks` for every model, with
            ``**risk_options``; or a sequence of ``(risk, options)`` pairs, one
            per model (then no ``**risk_options``).
        sample_weight: optional row weights ``(trials, models, rows)``.
        steps, learning_rate: as :func:`fit_linear`.
        init: warm start, weights ``(trials, models, features)`` and bias
            ``(trials, models)``.
        l2: the L2 strength of every model, or one per model.
        sparse: how the logits are computed. ``False``: one dense matrix
            product per trial. ``True``: one product of the weights with a
            block-diagonal ``tf.sparse.SparseTensor`` of every trial's non-zero
            features, whose cost follows their number. ``None`` (default):
            sparse when at most :data:`SPARSE_DENSITY` (10 %) of ``x`` is
            non-zero. Both give the same fit up to float32 rounding (the sums
            run in another order; a non-negative correction that switches on
            a rounding difference can amplify it in a rare fit: 3 of the 480
            models of the recipe on mushrooms, none of those it chose). The
            threshold is measured with the engine as it is now (a dense step is
            one XLA program when every risk has a linear form; 2 CPU cores,
            Table 1's recipe on 30 trials, wall time): on mushrooms (112
            features, 18.8 % non-zero) the dense path took 19 s against 28 s,
            on w8a (300 features, 3.9 %) 75 s against 24 s; with a sparse cost
            that follows the non-zeros and a dense one that does not, the two
            cross at about 12 %. (Before the XLA step: 0.75-1.0× at 20 %, and
            the threshold was 20 %.) Table 1's w8a takes the sparse path,
            mushrooms, australian and german the dense one.
        tol: ``0`` (default): every model takes ``steps`` steps. ``> 0``: at
            most ``steps``; every :data:`CHECK_EVERY` (20) steps, a model whose
            objective (its risk plus penalty) changed by at most
            ``tol·max(|objective|, 1e-3)`` since the last check stops there,
            whatever the other models do (so its fit does not depend on what
            it is fitted with). With ``1e-5``, on Table 1's largest fit the
            objectives stop moving beyond float32 rounding by step 120-140.
        **risk_options: passed to a single ``risk``.

    Returns:
        A :class:`LinearFit` with weights ``(trials, models, features)`` and
        the steps each model took.

    Raises:
        ValueError: on shapes that do not line up, NaN/inf, ``steps < 1``,
            ``l2 < 0`` or a ``tol`` that is not a finite number ``>= 0``.
        TypeError: if ``sparse`` is not ``True``, ``False`` or ``None``, or ``tol`` not a number.

    Example:
        >>> from adpue_tf import risks
        >>> from adpue_tf.labels import pack_pu
        >>> x = np.random.default_rng(0).normal(size=(2, 30, 3)).astype("float32")
        >>> y = np.stack([pack_pu(x[t, :, 0] > 0) for t in range(2)])[:, None]
        >>> fit = fit_linear_models(x, np.repeat(y, 2, axis=1), risks.logit, l2=[0.0, 1.0],
        ...                         steps=20)
        >>> fit.weights.shape, fit.logits(x).shape
        ((2, 2, 3), (2, 2, 30))
    """
    x = np.asarray(check_finite("x", x), np.float32)
    y = np.asarray(check_finite("y", y), np.float32)
    if x.ndim != 3 or y.ndim != 4 or (y.shape[0], y.shape[2]) != x.shape[:2]:
        raise ValueError(
            "`x` must be (trials, rows, features) and `y` (trials, models, rows, 3|4) with the "
            f"same trials and rows; got {x.shape} and {y.shape}.")
    if not isinstance(steps, int) or steps < 1:
        raise ValueError(f"`steps` must be an int >= 1, got {steps!r}.")
    trials, k, rows, columns = y.shape
    if callable(risk):
        specs = ((risk, tuple(sorted(risk_options.items()))),) * k
    else:
        specs = tuple((r, tuple(sorted(dict(o).items()))) for r, o in risk)
        if risk_options or len(specs) != k:
            raise ValueError(f"`risk` must be one risk, or one (risk, options) pair per model "
                             f"({k}) without further options; got {len(specs)} pairs.")
    l2_arr = np.asarray(l2, np.float64)
    if l2_arr.shape not in ((), (k,)) or not np.all(l2_arr >= 0.0):
        raise ValueError(f"`l2` must be >= 0, one number or one per model ({k}), got {l2!r}.")
    penalties = tuple(float(v) for v in np.broadcast_to(l2_arr, (k,)))
    tol = _check_tol(tol)
    sw = np.ones((trials, k, rows), np.float32) if sample_weight is None else np.asarray(
        check_finite("sample_weight", sample_weight), np.float32)
    if sw.shape != (trials, k, rows):
        raise ValueError(f"`sample_weight` must have shape {(trials, k, rows)}, got {sw.shape}.")
    use_sparse = _use_sparse(x, sparse)
    w, b, optimizer, train, lock = _models_trainer(specs, x.shape, columns,
                                                   float(learning_rate), penalties, use_sparse,
                                                   tol)
    if use_sparse:
        t_, n_, d_ = np.nonzero(x)     # row-major: the entries in canonical order
        indices = np.stack([t_ * rows + n_, t_ * x.shape[2] + d_], axis=1).astype(np.int64)
    with lock:   # the cached variables are this fit's until it has read them back
        w.assign(np.zeros(w.shape, np.float32) if init is None else init.weights)
        b.assign(np.zeros(b.shape, np.float32) if init is None else init.bias)
        for v in optimizer.variables:  # a fresh Adam: zero moments and step count
            v.assign(tf.zeros_like(v))
        optimizer.learning_rate = learning_rate
        if use_sparse:
            taken = train(indices, x[t_, n_, d_], y, sw, tf.constant(steps))
        else:
            taken = train(x, y, sw, tf.constant(steps))
        return LinearFit(w.numpy(), b.numpy(), taken.numpy())


def _check_tol(tol: Any) -> float:
    """``tol`` as a float, refused unless a finite number ``>= 0``."""
    if isinstance(tol, bool) or not isinstance(tol, (int, float, np.integer, np.floating)):
        raise TypeError(f"`tol` must be a number, got {type(tol).__name__}.")
    if not (np.isfinite(tol) and tol >= 0):
        raise ValueError(f"`tol` must be a finite number >= 0, got {tol!r}.")
    return float(tol)
