"""A risk evaluated from coefficients computed once: the fast path for fits on fixed rows.

For fixed labels, row weights and ``f†``, most risks are a correction of a few
group means (their parts), each linear in a few functions of the logits
(:data:`BASES`: ``ℓ1``, ``ℓ0``, ``σ(∓z)``, ``f† = σ(z)`` without gradient and
its products with ``ℓ1``/``ℓ0``). :meth:`LinearForm.coefficients` runs the
risk's own parts once on symbolic losses; :meth:`LinearForm.loss` computes the
sums and the risk's own correction at each step. Why, what is linear, and the
measurements: ``docs/api/risks.md`` (*Coefficients computed once*).

Example:
    >>> import numpy as np
    >>> from adpue_tf import risks
    >>> from adpue_tf.labels import pack_e, pack_pu
    >>> y = np.concatenate([pack_pu([1, 0, 0]), pack_e([1, 0, 0])])
    >>> y = np.concatenate([y, np.full((6, 1), 0.4)], axis=1).astype("float32")
    >>> z = np.linspace(-1.0, 1.0, 6).astype("float32")
    >>> form = linear_form(risks.adpue, gamma=1.0)
    >>> coef = form.coefficients(y[None], np.ones((1, 6), "float32"))
    >>> fast = float(form.loss(coef, z[None])[0])
    >>> direct = float(risks.adpue(y, z, from_logits=True, gamma=1.0).loss)
    >>> abs(fast - direct) < 1e-6
    True
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, NamedTuple

import tensorflow as tf
from keras import ops

from adpue_tf._internal.guards import (
    DIVERGED,
    MAX_LOGIT,
    DivergedError,
    _with_checks,
    fold_checks,
)
from adpue_tf.risks import baselines, debiasing
from adpue_tf.risks._batch import _validated, _weights
from adpue_tf.risks._symbolic import BASES, NotLinear, Probe, Sum, plus
from adpue_tf.risks.parts import Form

__all__ = ["BASES", "Coefficients", "LinearForm", "linear_form", "logits_check"]

#: The risks with parts, each with its form builder (the risk's options -> Form).
_BUILDERS: dict[Callable[..., Any], Callable[..., Form]] = {**debiasing.FORMS, **baselines.FORMS}


@tf.custom_gradient
def _both_losses(z: Any) -> Any:
    """``(softplus(-z), softplus(z))`` from one ``softplus(-|z|)``; gradient from one ``σ(z)``.

    Half the transcendental work of two softplus calls and their gradients, at the
    same precision (``softplus(±z) = softplus(-|z|) + max(±z, 0)``).
    """
    small = tf.math.softplus(-tf.abs(z))
    l1, l0 = small + tf.nn.relu(-z), small + tf.nn.relu(z)

    def grad(g1: Any, g0: Any) -> Any:
        s = tf.sigmoid(z)
        return g1 * (s - 1.0) + g0 * s

    return (l1, l0), grad


_EXPLODED = (f"the logits {DIVERGED} (beyond ±{MAX_LOGIT:g}), so training stops before the "
             "weights are updated. Look for NaN, inf or huge values in the features, or a "
             "diverging model;")


def _checked_logits(z: Any) -> Any:
    """``z`` as float32, after one check that every value is finite and within ``±MAX_LOGIT``."""
    z = tf.cast(z, tf.float32)
    check = logits_check(tf.reduce_all(tf.abs(z) <= MAX_LOGIT), lambda: tf.reduce_min(z),
                         lambda: tf.reduce_max(z))
    return z if check is None else _with_checks(z, [check])


def logits_check(ok: Any, low: Any, high: Any) -> Any:
    """Stop with the divergence error unless ``ok`` (every logit finite and within ``±1e4``).

    Args:
        ok: scalar bool, ``all(|z| <= 1e4)`` (``False`` for NaN).
        low, high: the logits' minimum and maximum, for the message: tensors, or
            callables that compute them (graph mode: only when the check fails).

    Returns:
        ``None`` in eager mode (where it raises :class:`DivergedError` itself); in
        graph mode the op to depend on: the project's folded check
        (``guards.fold_checks``: one conditional whose failing branch alone
        computes the minimum and maximum).

    Example:
        >>> import tensorflow as tf
        >>> logits_check(tf.constant(True), 0.0, 1.0) is None
        True
    """
    def value(v: Any) -> Any:
        return v() if callable(v) else v

    if tf.executing_eagerly():
        if not bool(ok):
            raise DivergedError(f"{_EXPLODED} min {float(value(low)):.4g}, "
                                f"max {float(value(high)):.4g}.")
        return None
    return fold_checks([(ok, _EXPLODED + " min and max:", lambda: [value(low), value(high)])])[0]


class Coefficients(NamedTuple):
    """The parts of a risk for every model: ``q_k = Σ_basis Σ_n coef[n]·basis(z_n) + c``.

    Attributes:
        terms: per part, ``{basis: coef}`` with float32 ``(models, rows)``
            coefficients of the bases of :data:`BASES` it reads (no work at each
            step for the others).
        constant: per part, its constant term ``(models,)``, or ``None``.

    Example:
        >>> import numpy as np
        >>> from adpue_tf import risks
        >>> from adpue_tf.labels import pack_pu
        >>> coef = linear_form(risks.logit).coefficients(pack_pu([1, 0])[None], np.ones((1, 2)))
        >>> [sorted(t) for t in coef.terms]  # R+ reads ℓ1, R- reads ℓ0
        [['l1'], ['l0']]
    """

    terms: tuple[dict, ...]
    constant: tuple[Any, ...]


@dataclasses.dataclass(frozen=True)
class LinearForm:
    """A risk with its options, as parts and correction (from :func:`linear_form`).

    Attributes:
        form: the risk's parts and correction.
        dagger_gradient: whether ``f† = σ(z)`` (3-column labels) carries gradient
            (then the parts are not linear).

    Example:
        >>> from adpue_tf import risks
        >>> type(linear_form(risks.logit)).__name__
        'LinearForm'
    """

    form: Form
    dagger_gradient: bool = False

    def coefficients(self, y: Any, sample_weight: Any) -> Coefficients | None:
        """The coefficients of the risk's parts for many models' labels, or ``None``.

        Args:
            y: packed labels ``(models, rows, 3|4)``, checked as the risk checks them
                (eager: ``ValueError``; graph: assertions).
            sample_weight: row weights ``(models, rows)`` (finite, ``>= 0``).

        Returns:
            :class:`Coefficients`; ``None`` when the parts are not linear in the
            functions of :data:`BASES` (say, ``f† = σ(z)`` with its gradient, or
            a risk that needs labels these are not: evaluate the risk itself,
            which says what is wrong).

        Raises:
            ValueError: on labels or weights the risk would refuse.
        """
        y = ops.convert_to_tensor(y)
        if len(y.shape) != 3:
            raise ValueError(f"`y` must have shape (models, rows, 3|4), got {tuple(y.shape)}.")
        models, rows, cols = y.shape
        flat = _validated(ops.reshape(y, (-1, cols)))
        weight = _weights(ops.reshape(ops.convert_to_tensor(sample_weight), (-1,)), flat[:, 0])
        probe = Probe(ops.reshape(flat, (models, rows, cols)),
                       ops.reshape(weight, (models, rows)), self.dagger_gradient)
        try:
            parts = self.form.parts(probe)
        except (NotLinear, TypeError, ValueError):
            return None  # e.g. IPS given no θ̂ column: the risk itself explains
        if not all(isinstance(q, Sum) for q in parts):
            return None
        return Coefficients(
            tuple({b: c for b, c in q.terms.items() if b != "1" and c is not None}
                  for q in parts),
            tuple(None if q.terms.get("1") is None else ops.sum(q.terms["1"], axis=-1)
                  for q in parts))

    def loss(self, coefficients: Coefficients, z: Any, *, jit_compile: bool = False,
             check: bool = True, rows_axis: int = -1) -> Any:
        """Each model's loss (the risk's ``loss`` term), float32 ``(models,)``.

        Args:
            coefficients: from :meth:`coefficients`.
            z: logits ``(models, rows)``, or any layout with the rows along
                ``rows_axis`` and the coefficients' arrays in the same layout
                (the result then has the other axes: the linear engine's
                sparse path passes ``(trials, rows, models)`` with the
                coefficients transposed once, instead of transposing the
                logits and their gradient at every step). Logits that are NaN, infinite or
                beyond ``±1e4`` (the risks' clip) stop the computation with the
                divergence error (:func:`adpue_tf.losses.is_divergence`), so no
                step is taken on them: one check per call, on the values, where
                the risk functions clip and check the gradient.
            jit_compile: compute the loss and its gradient with respect to ``z``
                in one XLA program (the gradient is computed with the value and
                handed back when asked for). The element-wise work over
                ``(models, rows)`` then runs fused: on 2 CPU cores, 1,600 models ×
                1,500 rows, 11 ms a step instead of 28. Inside a ``tf.function``.
            check: check the logits (``False``: the caller checks them, say with
                :func:`logits_check` outside an XLA program, where assertions
                do not run).
            rows_axis: the axis of ``z`` (and of the coefficients) that holds the rows.
        """
        if isinstance(rows_axis, bool) or not isinstance(rows_axis, int):
            raise TypeError(f"`rows_axis` must be an int, got {type(rows_axis).__name__}.")
        z = _checked_logits(z) if check else tf.cast(z, tf.float32)
        if not -z.shape.rank <= rows_axis < z.shape.rank:
            raise ValueError(f"`rows_axis` {rows_axis} is out of range for logits of rank "
                             f"{z.shape.rank}.")
        axis = rows_axis % z.shape.rank
        if not jit_compile:
            return self._loss(coefficients, z, axis)

        def value_and_gradient(coef: Coefficients, z_: Any) -> tuple[Any, Any]:
            with tf.GradientTape() as tape:
                tape.watch(z_)
                value = self._loss(coef, z_, axis)
                total = tf.reduce_sum(value)
            return value, tape.gradient(total, z_)   # model m's loss reads row m only

        compiled = tf.function(value_and_gradient, jit_compile=True, autograph=False)

        @tf.custom_gradient
        def fused(z_: Any) -> Any:
            value, dz = compiled(coefficients, z_)
            return value, lambda g: tf.expand_dims(g, axis) * dz

        return fused(z)

    def _loss(self, coefficients: Coefficients, z: Any, axis: int) -> Any:
        bases = _bases(z, {b for t in coefficients.terms for b in t})
        q = []
        for terms, constant in zip(*coefficients):
            value = None
            for b, c in terms.items():
                value = plus(value, ops.sum(c * bases[b], axis=axis))
            value = plus(value, constant)
            q.append(ops.sum(ops.zeros_like(z), axis=axis) if value is None else value)
        return self.form.combine(tuple(q)).loss


def _bases(z: Any, needed: set) -> dict:
    """The functions of :data:`BASES` in ``needed``, each computed once."""
    out: dict = {}
    if needed & {"l1", "dl1"} and needed & {"l0", "dl0"}:
        out["l1"], out["l0"] = _both_losses(z)
    else:
        if needed & {"l1", "dl1"}:
            out["l1"] = tf.math.softplus(-z)
        if needed & {"l0", "dl0"}:
            out["l0"] = tf.math.softplus(z)
    if "s1" in needed:
        out["s1"] = tf.sigmoid(-z)
    if needed & {"s0", "d", "dl1", "dl0"}:
        out["s0"] = tf.sigmoid(z)
        out["d"] = tf.stop_gradient(out["s0"])
    for b in ("dl1", "dl0"):
        if b in needed:
            out[b] = out["d"] * out[b[1:]]
    return out


def linear_form(risk: Callable[..., Any], **options: Any) -> LinearForm | None:
    """The :class:`LinearForm` of ``risk`` with ``options``, or ``None`` if it has no parts.

    Args:
        risk: a function of :mod:`adpue_tf.risks` (``risks.adpue``, ``risks.logit``, ...).
        **options: its options (``gamma=``, ``prior=``, ...), checked as the risk checks them.

    Raises:
        ValueError, TypeError: on options the risk refuses.

    Example:
        >>> from adpue_tf import risks
        >>> linear_form(risks.exposure_likelihood) is None
        True
    """
    builder = _BUILDERS.get(risk)
    if builder is None:
        return None
    return LinearForm(builder(**options), bool(options.get("dagger_gradient", False)))
