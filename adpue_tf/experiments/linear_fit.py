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
import functools
from collections.abc import Sequence
from typing import Any, Callable

import keras
import numpy as np
import tensorflow as tf

from adpue_tf import risks as risks_lib
from adpue_tf.labels import check_finite

__all__ = ["LinearFit", "fit_linear", "fit_linear_models"]


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


#: One model's objective in :func:`fit_linear_models`: a risk and its options.
RiskSpec = tuple[Callable[..., risks_lib.RiskTerms], tuple]
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


@functools.lru_cache(maxsize=64)
def _models_trainer(specs: tuple[RiskSpec, ...], shape: tuple[int, int, int], columns: int,
                    learning_rate: float, l2: tuple[float, ...], sparse: bool = False,
                    tol: float = 0.0) -> tuple[Any, Any, Any, Any]:
    """Variables, optimizer and traced training loop for ``len(specs)`` models per trial.

    Cached, so that the trials of a benchmark reuse one trace per objective and
    shape. The logits of a trial's models are one matrix product with its
    features: dense, ``train(x, y, sw, n)``; sparse, ``train(indices, values,
    y, sw, n)`` with the non-zero features of every trial as one block-diagonal
    sparse matrix ``(trials·rows, trials·features)`` (entry ``(t·rows + n,
    t·features + d)``; any number of them). Both return the steps each model
    took (:func:`_adam_loop`, which stops converged models given ``tol``). Groups of models whose risk has a
    linear form (:func:`adpue_tf.risks.linear_form`) read their labels once;
    their loss and its gradient with respect to the logits are one XLA
    program, and on the dense path, when every group has one, so is the whole
    gradient (the product included), Adam's update and the check of the logits
    staying outside. (The whole loop is not XLA-compiled: sparse products do
    not compile, and assertions do not run under XLA. Traced without
    AutoGraph, the step loop being an explicit ``tf.while_loop``: converting
    the risks' code took about 3.5 of the 5 CPU seconds a trace of the
    recipe's fit cost, for the same graph.)
    """
    trials, rows, dim = shape
    k = len(specs)
    w = tf.Variable(np.zeros((trials, k, dim), np.float32))
    b = tf.Variable(np.zeros((trials, k), np.float32))
    optimizer = keras.optimizers.Adam(learning_rate)
    optimizer.build([w, b])
    penalty = tf.constant(np.asarray(l2, np.float32)[None, :, None])
    groups, start = [], 0            # runs of models with the same objective
    for j in range(1, k + 1):
        if j == k or specs[j] != specs[start]:
            groups.append((start, j, specs[start]))
            start = j

    def objective(risk: Callable[..., Any], opts: dict) -> Callable[..., tf.Tensor]:
        def one_model(args: tuple[tf.Tensor, tf.Tensor, tf.Tensor]) -> tf.Tensor:
            y_m, z_m, sw_m = args
            return risk(y_m, z_m, from_logits=True, sample_weight=sw_m, **opts).loss
        return one_model

    def steps(logits: Callable[[], tf.Tensor], y: tf.Tensor, sw: tf.Tensor, n: tf.Tensor,
              x_dense: tf.Tensor | None = None, rows_major: bool = False) -> tf.Tensor:
        """The loop; ``logits()`` is ``(trials, models, rows)``, or ``(trials, rows,
        models)`` if ``rows_major`` (then the linear forms' coefficients are
        transposed once, not the logits and their gradient at every step)."""
        labels = []        # loop-invariant: each group's labels and row weights, per model
        for lo, hi, (risk, opts) in groups:
            m = trials * (hi - lo)
            y_g = tf.reshape(y[:, lo:hi], (m, rows, columns))
            sw_g = tf.reshape(sw[:, lo:hi], (m, rows))
            form = risks_lib.linear_form(risk, **dict(opts))
            coef = None if form is None else form.coefficients(y_g, sw_g)
            if coef is not None and rows_major:
                coef = _rows_major(coef, trials, hi - lo)
            labels.append((y_g, sw_g, form, coef))

        objectives: Callable[[], tf.Tensor] | None = None   # when gradients() gives none
        if x_dense is not None and all(coef is not None for *_, coef in labels):
            fused, fused_objectives = _fused_step(x_dense, groups, labels, penalty, trials,
                                                  rows, k)

            def gradients() -> tuple[list[tf.Tensor], tf.Tensor | None]:
                dw, db, ok, low, high = fused(w.value(), b.value())
                with tf.control_dependencies([risks_lib.linear.logits_check(ok, low, high)]):
                    return [tf.identity(dw), tf.identity(db)], None

            def fused_objective_values() -> tf.Tensor:
                return fused_objectives(w.value(), b.value())
            objectives = fused_objective_values
        else:
            def gradients() -> tuple[list[tf.Tensor], tf.Tensor | None]:
                with tf.GradientTape() as tape:
                    z = logits() + (b[:, None, :] if rows_major else b[..., None])
                    q = []     # each model's objective, (trials, models of the group) per group
                    for (lo, hi, (risk, opts)), (y_g, sw_g, form, coef) in zip(groups, labels):
                        z_g = z if hi - lo == k else (z[..., lo:hi] if rows_major
                                                      else z[:, lo:hi])
                        if rows_major and (form is None or coef is None):
                            z_g = tf.transpose(z_g, (0, 2, 1))
                        if not rows_major or form is None or coef is None:
                            z_g = tf.reshape(z_g, (trials * (hi - lo), rows))
                        if form is not None and coef is not None:  # labels read once
                            value = form.loss(coef, z_g, jit_compile=True,
                                              rows_axis=1 if rows_major else -1)
                        else:
                            value = tf.vectorized_map(objective(risk, dict(opts)),
                                                      (y_g, z_g, sw_g))
                        q.append(tf.reshape(value, (trials, hi - lo)))
                    q_all = tf.concat(q, axis=1) + tf.reduce_sum(penalty * tf.square(w), axis=-1)
                    total = tf.reduce_sum(q_all)
                return tape.gradient(total, [w, b]), q_all

        return _adam_loop(gradients, optimizer, w, b, n, tol, objectives)

    labels_spec = [tf.TensorSpec((trials, k, rows, columns), tf.float32),
                   tf.TensorSpec((trials, k, rows), tf.float32), tf.TensorSpec((), tf.int32)]
    if not sparse:
        @tf.function(autograph=False, input_signature=[
            tf.TensorSpec((trials, rows, dim), tf.float32), *labels_spec])
        def train(x: tf.Tensor, y: tf.Tensor, sw: tf.Tensor, n: tf.Tensor) -> tf.Tensor:
            return steps(lambda: tf.einsum("tnd,tkd->tkn", x, w), y, sw, n, x)  # a matmul a trial
        return w, b, optimizer, train

    @tf.function(autograph=False, input_signature=[
        tf.TensorSpec((None, 2), tf.int64), tf.TensorSpec((None,), tf.float32), *labels_spec])
    def train_sparse(indices: tf.Tensor, values: tf.Tensor, y: tf.Tensor, sw: tf.Tensor,
                     n: tf.Tensor) -> tf.Tensor:
        x = tf.SparseTensor(indices, values, (trials * rows, trials * dim))

        def logits() -> tf.Tensor:   # (trials·rows, models) -> (trials, rows, models)
            wt = tf.reshape(tf.transpose(w, (0, 2, 1)), (trials * dim, k))
            return tf.reshape(tf.sparse.sparse_dense_matmul(x, wt), (trials, rows, k))

        return steps(logits, y, sw, n, rows_major=True)

    return w, b, optimizer, train_sparse


#: With a tolerance, :func:`fit_linear_models` compares each model's objective
#: every this many steps (see its ``tol``).
CHECK_EVERY = 20


def _adam_loop(gradients: Callable[[], tuple[list[tf.Tensor], tf.Tensor | None]],
               optimizer: Any, w: tf.Variable, b: tf.Variable, n: tf.Tensor, tol: float,
               objectives: Callable[[], tf.Tensor] | None = None) -> tf.Tensor:
    """Up to ``n`` Adam steps; with ``tol > 0``, each model stops once it has converged.

    ``gradients()`` gives the gradients of the summed objective with respect to
    ``[w, b]`` and each model's objective ``(trials, models)`` at the current
    weights, or ``None`` for the objectives, which ``objectives()`` then
    computes, at the check steps only. At every :data:`CHECK_EVERY`-th step, a model whose objective
    changed by at most ``tol·max(|objective|, 1e-3)`` since the last check is
    frozen: its result is its weights of that step (kept aside; it is updated
    with the others until the loop ends, so that no step pays for a masked
    update). A model's steps therefore depend on its own objective alone, not
    on the others fitted with it, and the loop ends when every model is frozen.
    Returns the steps each model took, int32 ``(trials, models)``.
    """
    shape = tf.shape(b)
    if not tol:
        def step(i: tf.Tensor) -> tf.Tensor:
            grads, _ = gradients()
            optimizer.apply(grads, [w, b])
            return i + 1

        (done,) = tf.while_loop(lambda i: i < n, step, [tf.constant(0)])
        return tf.fill(shape, done)

    def tolerant_step(i: tf.Tensor, frozen: tf.Tensor, last: tf.Tensor, taken: tf.Tensor,
                      w_kept: tf.Tensor, b_kept: tf.Tensor) -> tuple[tf.Tensor, ...]:
        grads, q = gradients()
        check = tf.equal(i % CHECK_EVERY, 0)
        if q is None:
            assert objectives is not None
            q = tf.cond(check, objectives, lambda: last)
        assert q is not None
        settled = (tf.abs(q - last) <= tol * tf.maximum(tf.abs(q), 1e-3)) & check & (i > 0)
        new = settled & ~frozen
        # A model that settles keeps the weights it has now (before this step's
        # update); it goes on being updated with the others (the models are
        # independent), and its kept weights are restored when the loop ends.
        w_kept, b_kept = tf.cond(
            tf.reduce_any(new),
            lambda: (tf.where(new[..., None], w.value(), w_kept), tf.where(new, b.value(), b_kept)),
            lambda: (w_kept, b_kept))
        with tf.control_dependencies([w_kept, b_kept, q]):
            optimizer.apply(grads, [w, b])
        with tf.control_dependencies([w.value(), b.value()]):
            return (i + 1, frozen | settled, tf.where(check, q, last), tf.where(new, i, taken),
                    tf.identity(w_kept), tf.identity(b_kept))

    _, frozen, _, taken, w_kept, b_kept = tf.while_loop(
        lambda i, frozen, *_: (i < n) & ~tf.reduce_all(frozen), tolerant_step,
        [tf.constant(0), tf.zeros(shape, tf.bool), tf.zeros(shape), tf.fill(shape, n),
         tf.zeros_like(w), tf.zeros_like(b)])
    w.assign(tf.where(frozen[..., None], w_kept, w.value()))
    with tf.control_dependencies([w.value()]):
        b.assign(tf.where(frozen, b_kept, b.value()))
    with tf.control_dependencies([w.value(), b.value()]):
        return tf.identity(taken)


def _rows_major(coef: risks_lib.linear.Coefficients, trials: int, models: int
               ) -> risks_lib.linear.Coefficients:
    """Coefficients ``(trials·models, rows)`` as ``(trials, rows, models)``, constants ``(trials, models)``."""
    def layout(c: tf.Tensor) -> tf.Tensor:
        return tf.transpose(tf.reshape(c, (trials, models, -1)), (0, 2, 1))

    return risks_lib.linear.Coefficients(
        tuple({basis: layout(c) for basis, c in terms.items()} for terms in coef.terms),
        tuple(None if c is None else tf.reshape(c, (trials, models)) for c in coef.constant))


def _fused_step(x: tf.Tensor, groups: list, labels: list, penalty: tf.Tensor, trials: int,
                rows: int, k: int) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """XLA programs for a dense step when every group has a linear form: gradients, objectives.

    The first: the logits (one matrix product per trial), every group's loss
    (:meth:`~adpue_tf.risks.LinearForm.loss`), the penalty and their gradients
    with respect to the weights and biases, with the check of the logits handed
    out (``ok``, min, max) for :func:`~adpue_tf.risks.linear.logits_check`
    outside the program, where an assertion runs; Adam's update stays outside.
    The second: each model's objective ``(trials, models)``, for ``tol``'s
    checks. (Separate programs: handing the objectives out of the first split
    XLA's fusion of the element-wise work, 30 % slower on mushrooms.)
    """
    coefs = tuple(coef for *_, coef in labels)

    def losses(w: tf.Tensor, b: tf.Tensor) -> tuple[tf.Tensor, list[tf.Tensor]]:
        z = tf.einsum("tnd,tkd->tkn", x, w) + b[..., None]
        return z, [form.loss(coef, tf.reshape(z if hi - lo == k else z[:, lo:hi],
                                               (trials * (hi - lo), rows)), check=False)
                   for (lo, hi, _), (*_, form, _), coef in zip(groups, labels, coefs)]

    def program(w: tf.Tensor, b: tf.Tensor) -> tuple[tf.Tensor, ...]:
        with tf.GradientTape() as tape:
            tape.watch([w, b])
            z, values = losses(w, b)
            total = tf.reduce_sum(penalty * tf.square(w))
            for value in values:
                total += tf.reduce_sum(value)
        dw, db = tape.gradient(total, [w, b])
        ok = tf.reduce_all(tf.abs(z) <= risks_lib.linear.MAX_LOGIT)   # False for NaN
        return dw, db, ok, tf.reduce_min(z), tf.reduce_max(z)

    def objectives(w: tf.Tensor, b: tf.Tensor) -> tf.Tensor:
        _, values = losses(w, b)
        q = [tf.reshape(v, (trials, hi - lo)) for (lo, hi, _), v in zip(groups, values)]
        return tf.concat(q, axis=1) + tf.reduce_sum(penalty * tf.square(w), axis=-1)

    return (tf.function(program, jit_compile=True, autograph=False),
            tf.function(objectives, jit_compile=True, autograph=False))


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
    w, b, optimizer, train = _models_trainer(specs, x.shape, columns, float(learning_rate),
                                             penalties, use_sparse, tol)
    w.assign(np.zeros(w.shape, np.float32) if init is None else init.weights)
    b.assign(np.zeros(b.shape, np.float32) if init is None else init.bias)
    for v in optimizer.variables:  # a fresh Adam: zero moments and step count
        v.assign(tf.zeros_like(v))
    optimizer.learning_rate = learning_rate
    if use_sparse:
        t_, n_, d_ = np.nonzero(x)     # row-major: the entries in canonical order
        indices = np.stack([t_ * rows + n_, t_ * x.shape[2] + d_], axis=1).astype(np.int64)
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
