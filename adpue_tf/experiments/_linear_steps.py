"""The training loop of :mod:`adpue_tf.experiments.linear_fit`: many linear models, full-batch Adam.

:func:`_models_trainer` builds (and caches per objective and shape) the
variables, the optimizer and the traced loop that
:func:`~adpue_tf.experiments.linear_fit.fit_linear_models` runs: the logits
of every model of every trial (a dense product per trial, or one sparse
product), each group's risk (its linear form where it has one), and Adam,
with the divergence stop and, given ``tol``, each model's convergence stop
(:func:`_adam_loop`).
"""

from __future__ import annotations

import functools
import threading
from typing import Any, Callable

import keras
import numpy as np
import tensorflow as tf

from adpue_tf import risks as risks_lib

__all__ = ["CHECK_EVERY", "RiskSpec"]

#: One model's objective in :func:`fit_linear_models`: a risk and its options.
RiskSpec = tuple[Callable[..., risks_lib.RiskTerms], tuple]


@functools.lru_cache(maxsize=64)
def _models_trainer(specs: tuple[RiskSpec, ...], shape: tuple[int, int, int], columns: int,
                    learning_rate: float, l2: tuple[float, ...], sparse: bool = False,
                    tol: float = 0.0) -> tuple[Any, Any, Any, Any, threading.Lock]:
    """Variables, optimizer, traced training loop and its lock for ``len(specs)`` models per trial.

    Cached, so that the trials of a benchmark reuse one trace per objective and
    shape; a fit holds the lock while it uses the variables (fits in several
    threads). The logits of a trial's models are one matrix product with its
    features: dense, ``train(x, y, sw, n)``; sparse, ``train(indices, values,
    y, sw, n)`` with the non-zero features of every trial as one block-diagonal
    sparse matrix ``(trials·rows, trials·features)`` (entry ``(t·rows + n,
    t·features + d)``; any number of them). Both return the steps each model
    took (:func:`_adam_loop`, which stops converged models given ``tol``).
    Groups of models whose risk has a linear form (:func:`adpue_tf.risks.linear_form`) read their labels once;
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
              x_dense: tf.Tensor | None = None, rows_major: bool = False,
              x_sparse: tf.SparseTensor | None = None) -> tf.Tensor:
        """The loop; ``logits()`` is ``(trials, models, rows)``, or ``(trials, rows,
        models)`` if ``rows_major`` (then the linear forms' coefficients are
        transposed once, not the logits and their gradient at every step;
        ``x_sparse``: the features of the sparse path, whose ``logits()`` are
        their product with the weights)."""
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
        elif x_sparse is not None and all(coef is not None for *_, coef in labels):
            losses_of = _fused_losses(groups, labels, k)

            def gradients() -> tuple[list[tf.Tensor], tf.Tensor | None]:
                # the gradient written out: the losses' in one XLA program, the
                # product's as its transpose (what the tape would compute)
                values, dz, ok, low, high = losses_of(logits() + b[:, None, :])
                with tf.control_dependencies([risks_lib.linear.logits_check(ok, low, high)]):
                    dwt = tf.sparse.sparse_dense_matmul(
                        x_sparse, tf.reshape(dz, (trials * rows, k)), adjoint_a=True)
                dw = tf.transpose(tf.reshape(dwt, (trials, dim, k)), (0, 2, 1))
                grads = [dw + 2.0 * penalty * w, tf.reduce_sum(dz, axis=1)]
                return grads, values + tf.reduce_sum(penalty * tf.square(w), axis=-1)
        else:
            def gradients() -> tuple[list[tf.Tensor], tf.Tensor | None]:
                with tf.GradientTape() as tape:
                    z = logits() + (b[:, None, :] if rows_major else b[..., None])
                    q = []     # each model's objective, (trials, models of the group) per group
                    for (lo, hi, (risk, opts)), (y_g, sw_g, form, coef) in zip(groups, labels):
                        if rows_major:   # (trials, rows, m); (trials·m, rows) for the risk
                            z_g = z[..., lo:hi]
                            if coef is None:
                                z_g = tf.reshape(tf.transpose(z_g, (0, 2, 1)),
                                                 (trials * (hi - lo), rows))
                        else:
                            z_g = tf.reshape(z[:, lo:hi], (trials * (hi - lo), rows))
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
        return w, b, optimizer, train, threading.Lock()

    @tf.function(autograph=False, input_signature=[
        tf.TensorSpec((None, 2), tf.int64), tf.TensorSpec((None,), tf.float32), *labels_spec])
    def train_sparse(indices: tf.Tensor, values: tf.Tensor, y: tf.Tensor, sw: tf.Tensor,
                     n: tf.Tensor) -> tf.Tensor:
        x = tf.SparseTensor(indices, values, (trials * rows, trials * dim))

        def logits() -> tf.Tensor:   # (trials·rows, models) -> (trials, rows, models)
            wt = tf.reshape(tf.transpose(w, (0, 2, 1)), (trials * dim, k))
            return tf.reshape(tf.sparse.sparse_dense_matmul(x, wt), (trials, rows, k))

        return steps(logits, y, sw, n, rows_major=True, x_sparse=x)

    return w, b, optimizer, train_sparse, threading.Lock()


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
    computes, at the check steps only. At every :data:`CHECK_EVERY`-th step, a
    model whose objective changed by at most ``tol·max(|objective|, 1e-3)`` since the last check is
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

    The first runs the trials in chunks of about :data:`CHUNK_BYTES` of
    features (:func:`_chunk_trials`), one after the other inside the program,
    so that a chunk's features stay in cache from the product to its
    gradient: Table 1's recipe on mushrooms (100 trials × 1,500 rows × 112
    features, 16 models), 2 rounds, 34-37 s → 26-29 s wall on 2 cores (two
    trials a chunk); german 9-10 → 9 s; the same fits to float32 rounding.
    """
    coefs = tuple(coef for *_, coef in labels)
    forms = [form for *_, form, _ in labels]

    def losses(x: tf.Tensor, w: tf.Tensor, b: tf.Tensor, coefs: tuple
               ) -> tuple[tf.Tensor, list[tf.Tensor]]:
        n = w.shape[0]     # trials of this call (a chunk's, inside `program`)
        z = tf.einsum("tnd,tkd->tkn", x, w) + b[..., None]
        return z, [form.loss(coef, tf.reshape(z if hi - lo == k else z[:, lo:hi],
                                               (n * (hi - lo), rows)), check=False)
                   for (lo, hi, _), form, coef in zip(groups, forms, coefs)]

    def gradient(x: tf.Tensor, w: tf.Tensor, b: tf.Tensor, coefs: tuple
                 ) -> tuple[tf.Tensor, ...]:
        with tf.GradientTape() as tape:
            tape.watch([w, b])
            z, values = losses(x, w, b, coefs)
            total = tf.reduce_sum(penalty * tf.square(w))
            for value in values:
                total += tf.reduce_sum(value)
        dw, db = tape.gradient(total, [w, b])
        return (dw, db, *_logit_bounds(z))

    per = _chunk_trials(trials, rows, int(x.shape[-1]))

    def program(w: tf.Tensor, b: tf.Tensor) -> tuple[tf.Tensor, ...]:
        if per == trials:
            return gradient(x, w, b, coefs)
        # The trials are independent: a loop over chunks of `per` trials keeps a
        # chunk's features in cache from the product to its gradient.
        split = functools.partial(_by_chunk, chunks=trials // per)
        parts = tf.map_fn(lambda a: gradient(a[0], a[1], a[2], _unflatten(a[3], coefs)),
                          (split(x), split(w), split(b), [split(c) for c in _flat(coefs)]),
                          fn_output_signature=(tf.float32, tf.float32, tf.bool, tf.float32,
                                               tf.float32))
        dw, db, ok, low, high = parts
        return (tf.reshape(dw, w.shape), tf.reshape(db, b.shape), tf.reduce_all(ok),
                tf.reduce_min(low), tf.reduce_max(high))

    def objectives(w: tf.Tensor, b: tf.Tensor) -> tf.Tensor:
        _, values = losses(x, w, b, coefs)
        q = [tf.reshape(v, (trials, hi - lo)) for (lo, hi, _), v in zip(groups, values)]
        return tf.concat(q, axis=1) + tf.reduce_sum(penalty * tf.square(w), axis=-1)

    return (tf.function(program, jit_compile=True, autograph=False),
            tf.function(objectives, jit_compile=True, autograph=False))


def _logit_bounds(z: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """``(ok, min, max)`` of the logits for :func:`~adpue_tf.risks.linear.logits_check`."""
    ok = tf.reduce_all(tf.abs(z) <= risks_lib.linear.MAX_LOGIT)   # False for NaN
    return ok, tf.reduce_min(z), tf.reduce_max(z)


def _fused_losses(groups: list, labels: list, k: int) -> Callable[..., Any]:
    """One XLA program for the sparse path's losses: logits ``(trials, rows, models)`` to
    each model's loss ``(trials, models)``, their gradient with respect to the
    logits, and the check of the logits (``ok``, min, max) for
    :func:`~adpue_tf.risks.linear.logits_check` outside the program.

    One program for every group instead of one per group with the slices,
    checks and concatenations between them, and the gradient of the product
    written out (its transpose) instead of a tape: Table 1's PUE group with its
    helpers on w8a (100 trials × 1,500 rows × 300 features, 16 models in 7
    groups), a warm fit 19.6 → 14.5 s, the six plain-risk models alone
    12.0 → 9.3 s (2 CPU cores).
    """
    forms = [(lo, hi, form, coef) for (lo, hi, _), (*_, form, coef) in zip(groups, labels)]

    def program(z: tf.Tensor) -> tuple[tf.Tensor, ...]:
        with tf.GradientTape() as tape:
            tape.watch(z)
            values = [form.loss(coef, z if hi - lo == k else z[..., lo:hi], check=False,
                                rows_axis=1) for lo, hi, form, coef in forms]
            total = tf.add_n([tf.reduce_sum(v) for v in values])
        return (tf.concat(values, axis=1), tape.gradient(total, z), *_logit_bounds(z))

    return tf.function(program, jit_compile=True, autograph=False)


#: Bytes of features per chunk of trials in :func:`_fused_step`'s loop (see there).
CHUNK_BYTES = 2 * 2**20


def _chunk_trials(trials: int, rows: int, dim: int) -> int:
    """Trials per chunk of :func:`_fused_step`'s loop; ``trials``: no loop.

    The largest divisor of ``trials`` whose features fit :data:`CHUNK_BYTES`,
    at least 2 (one-trial chunks ran 1.7x slower than none on mushrooms); no
    loop when every trial fits or no such divisor exists.

    Example:
        >>> _chunk_trials(100, 1500, 112), _chunk_trials(100, 390, 14), _chunk_trials(7, 1500, 112)
        (2, 50, 7)
    """
    per_trial = 4 * rows * dim
    for per in range(trials, 1, -1):
        if trials % per == 0 and per * per_trial <= CHUNK_BYTES:
            return per
    return trials


def _by_chunk(a: tf.Tensor, chunks: int) -> tf.Tensor:
    """``(trials·..., ...)`` (trials leading) as ``(chunks, per·..., ...)``."""
    return tf.reshape(a, (chunks, -1, *a.shape[1:]))


def _flat(coefs: tuple) -> list[tf.Tensor]:
    """Every coefficient tensor of every group, in a fixed order."""
    out = []
    for coef in coefs:
        for terms in coef.terms:
            out += [terms[basis] for basis in sorted(terms)]
        out += [c for c in coef.constant if c is not None]
    return out


def _unflatten(flat: list[tf.Tensor], like: tuple) -> tuple:
    """:func:`_flat`'s tensors (a chunk's) back into the structure of ``like``."""
    it = iter(flat)
    out = []
    for coef in like:
        terms = tuple({basis: next(it) for basis in sorted(t)} for t in coef.terms)
        constant = tuple(None if c is None else next(it) for c in coef.constant)
        out.append(risks_lib.linear.Coefficients(terms, constant))
    return tuple(out)
