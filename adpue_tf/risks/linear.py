"""A risk evaluated from coefficients computed once: the fast path for fits on fixed rows.

For fixed packed labels, row weights and ``f†`` (label column 3), most risks
of this package are a correction of a few group means (their *parts*: ``R+``,
``R-``, ...), each linear in the per-row losses ``ℓ1(z) = softplus(-z)`` and
``ℓ0(z) = softplus(z)``:

``q_k = Σ_n A_k[n]·ℓ1(z_n) + B_k[n]·ℓ0(z_n) + c_k``.

A fit that evaluates the same risk on the same rows at every step (the full-batch
fits of the linear benchmark, :mod:`adpue_tf.experiments.linear_fit`) can
compute ``A``, ``B`` and ``c`` once (:meth:`LinearForm.coefficients`) and at
each step only the sums and the correction (:meth:`LinearForm.loss`), instead
of unpacking, checking and masking the labels again. The coefficients come
from running the risk's own parts on symbolic losses, and the sums go through
the risk's own correction, so this is the same risk, not a second copy of its
formula. Values and gradients agree with the risk function to float32 rounding
(the sums run in another order).

A risk is not linear in this sense when it reads the logits other than through
``ℓ1``/``ℓ0`` (the sigmoid surrogate of uPU and nnPU), when its ``f†`` is
``σ(z)`` (labels of 3 columns for a risk that reads ``f†``), or when it is not
built from parts (the exposure risks): :func:`linear_form` returns ``None`` for
a risk without parts, and :meth:`LinearForm.coefficients` ``None`` for parts
that are not linear; evaluate the risk function itself then.

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

from adpue_tf import labels
from adpue_tf._internal.guards import DIVERGED, MAX_LOGIT, DivergedError, _with_checks
from adpue_tf.risks import baselines, debiasing
from adpue_tf.risks._batch import _validated, _weights, replica_sum
from adpue_tf.risks.parts import Form

__all__ = ["Coefficients", "LinearForm", "linear_form"]

#: The risks with parts, each with its form builder (the risk's options -> Form).
_BUILDERS: dict[Callable[..., Any], Callable[..., Form]] = {**debiasing.FORMS, **baselines.FORMS}


class _NotLinear(Exception):
    """The parts read something other than ``ℓ1``, ``ℓ0`` and fixed labels."""


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
    """``z`` as float32, after one check that every value is finite and within ``±MAX_LOGIT``.

    Graph mode: one reduction and a conditional whose failing branch alone
    computes the minimum and maximum for the message.
    """
    z = tf.cast(z, tf.float32)
    ok = tf.reduce_all(tf.abs(z) <= MAX_LOGIT)  # False for NaN too
    if tf.executing_eagerly():
        if not bool(ok):
            raise DivergedError(f"{_EXPLODED} min {float(tf.reduce_min(z)):.4g}, "
                                f"max {float(tf.reduce_max(z)):.4g}.")
        return z

    def fail() -> Any:  # string data only: no nested conditional
        low, high = (tf.strings.as_string(f(z), precision=4, scientific=True)
                     for f in (tf.reduce_min, tf.reduce_max))
        return tf.debugging.Assert(False, [tf.strings.join([_EXPLODED, " min ", low, ", max ",
                                                            high, "."])])

    return _with_checks(z, [tf.cond(ok, tf.no_op, fail)])


def _plus(x: Any, y: Any) -> Any:
    """``x + y`` where ``None`` is a zero known at trace time (no op for it)."""
    return y if x is None else x if y is None else x + y


def _times(x: Any, k: Any) -> Any:
    return None if x is None else x * k


class _Rows:
    """A per-row expression ``a·ℓ1 + b·ℓ0 + c`` (``(models, rows)`` each; ``None``: zero)."""

    __slots__ = ("a", "b", "c")
    __array_priority__ = 1000  # NumPy defers to the reflected operators below

    def __init__(self, a: Any, b: Any, c: Any) -> None:
        self.a, self.b, self.c = a, b, c

    def _scaled(self, k: Any) -> _Rows:
        if isinstance(k, (_Rows, _Sum)):
            raise _NotLinear  # a product of two losses
        return _Rows(_times(self.a, k), _times(self.b, k), _times(self.c, k))

    def __mul__(self, k: Any) -> _Rows:
        return self._scaled(k)

    __rmul__ = __mul__

    def __truediv__(self, k: Any) -> _Rows:
        return self._scaled(1.0 / k)

    def __neg__(self) -> _Rows:
        return self._scaled(-1.0)

    def __add__(self, other: Any) -> _Rows:
        if isinstance(other, _Rows):
            return _Rows(_plus(self.a, other.a), _plus(self.b, other.b), _plus(self.c, other.c))
        if isinstance(other, _Sum):
            raise _NotLinear
        return _Rows(self.a, self.b, _plus(self.c, other))

    __radd__ = __add__

    def __sub__(self, other: Any) -> _Rows:
        return self + (-other)

    def __rsub__(self, other: Any) -> _Rows:
        return (-self) + other


class _Sum:
    """A group mean ``Σ_n a[n]·ℓ1(z_n) + b[n]·ℓ0(z_n) + c`` per model (``c``: ``(models,)``)."""

    __slots__ = ("a", "b", "c")
    __array_priority__ = 1000

    def __init__(self, a: Any, b: Any, c: Any) -> None:
        self.a, self.b, self.c = a, b, c

    def _scaled(self, k: Any) -> _Sum:
        if not isinstance(k, (int, float)):
            raise _NotLinear  # only constant factors keep the form
        return _Sum(_times(self.a, k), _times(self.b, k), _times(self.c, k))

    def __mul__(self, k: Any) -> _Sum:
        return self._scaled(k)

    __rmul__ = __mul__

    def __neg__(self) -> _Sum:
        return self._scaled(-1.0)

    def __add__(self, other: Any) -> _Sum:
        if isinstance(other, _Sum):
            return _Sum(_plus(self.a, other.a), _plus(self.b, other.b), _plus(self.c, other.c))
        if isinstance(other, (int, float)):
            return _Sum(self.a, self.b, _plus(self.c, float(other)) if other else self.c)
        raise _NotLinear

    __radd__ = __add__

    def __sub__(self, other: Any) -> _Sum:
        return self + (-other)

    def __rsub__(self, other: Any) -> _Sum:
        return (-self) + other


class _Probe:
    """A :class:`~adpue_tf.risks._batch.Batch` of many models whose losses are symbols.

    Labels and weights are ``(models, rows)``; ``l1``/``l0`` are :class:`_Rows`;
    reading ``z`` (or ``f† = σ(z)``) raises :class:`_NotLinear`.
    """

    def __init__(self, y: Any, weight: Any) -> None:
        self._y = y
        self.w, self.e, self.source = y[..., labels.W], y[..., labels.E], y[..., labels.SOURCE]
        self.weight = weight
        one = ops.ones_like(self.w)
        self.l1, self.l0 = _Rows(one, None, None), _Rows(None, one, None)

    @property
    def z(self) -> Any:
        raise _NotLinear

    @property
    def dagger(self) -> Any:
        if self._y.shape[-1] != 4:
            raise _NotLinear  # f† = σ(z)
        return ops.stop_gradient(ops.clip(self._y[..., labels.DAGGER], 0.0, 1.0))

    @property
    def a(self) -> Any:
        return self.dagger * (1.0 - self.e)

    def is_source(self, *sources: labels.Source) -> Any:
        mask = ops.zeros_like(self.w)
        for s in sources:
            mask = mask + ops.cast(ops.equal(self.source, float(int(s))), "float32")
        return mask * self.weight

    def mean(self, values: Any, mask: Any) -> _Sum:
        """As ``Batch.mean``, per model: the coefficients of the group mean (0 for no rows)."""
        count = replica_sum(ops.sum(ops.stop_gradient(mask), axis=-1, keepdims=True))
        share = ops.divide_no_nan(mask, count)
        if isinstance(values, _Rows):
            c = None if values.c is None else ops.sum(values.c * share, axis=-1)
            return _Sum(_times(values.a, share), _times(values.b, share), c)
        if isinstance(values, _Sum):
            raise _NotLinear
        return _Sum(None, None, ops.sum(values * share, axis=-1))


class Coefficients(NamedTuple):
    """The parts of a risk for every model: ``q_k = Σ_n a[k]·ℓ1 + b[k]·ℓ0 + c[k]``.

    Attributes:
        a, b: one float32 ``(models, rows)`` tensor per part, or ``None`` where
            the part has no term on that loss (no work at each step).
        c: one float32 ``(models,)`` tensor per part, or ``None`` (no constant).
    """

    a: Any
    b: Any
    c: Any


@dataclasses.dataclass(frozen=True)
class LinearForm:
    """A risk with its options, as parts and correction (from :func:`linear_form`).

    Example:
        >>> from adpue_tf import risks
        >>> type(linear_form(risks.logit)).__name__
        'LinearForm'
    """

    form: Form

    def coefficients(self, y: Any, sample_weight: Any) -> Coefficients | None:
        """The coefficients of the risk's parts for many models' labels, or ``None``.

        Args:
            y: packed labels ``(models, rows, 3|4)``, checked as the risk checks them
                (eager: ``ValueError``; graph: assertions).
            sample_weight: row weights ``(models, rows)`` (finite, ``>= 0``).

        Returns:
            :class:`Coefficients`; ``None`` when the parts are not linear in
            ``ℓ1``/``ℓ0`` for these labels (they read ``z`` or ``f† = σ(z)``).

        Raises:
            ValueError: on labels or weights the risk would refuse.
        """
        y = ops.convert_to_tensor(y)
        if len(y.shape) != 3:
            raise ValueError(f"`y` must have shape (models, rows, 3|4), got {tuple(y.shape)}.")
        models, rows, cols = y.shape
        flat = _validated(ops.reshape(y, (-1, cols)))
        weight = _weights(ops.reshape(ops.convert_to_tensor(sample_weight), (-1,)), flat[:, 0])
        probe = _Probe(ops.reshape(flat, (models, rows, cols)),
                       ops.reshape(weight, (models, rows)))
        try:
            parts = self.form.parts(probe)
        except _NotLinear:
            return None
        if not all(isinstance(q, _Sum) for q in parts):
            return None
        return Coefficients(tuple(q.a for q in parts), tuple(q.b for q in parts),
                            tuple(q.c for q in parts))

    def loss(self, coefficients: Coefficients, z: Any) -> Any:
        """Each model's loss (the risk's ``loss`` term), float32 ``(models,)``.

        ``z``: logits ``(models, rows)``. Logits that are NaN, infinite or
        beyond ``±1e4`` (the risks' clip) stop the computation with the
        divergence error (:func:`adpue_tf.losses.is_divergence`), so no step is
        taken on them: one check per call, on the values, where the risk
        functions clip and check the gradient.
        """
        z = _checked_logits(z)
        a, b, c = coefficients
        if any(v is not None for v in a) and any(v is not None for v in b):
            l1, l0 = _both_losses(z)
        else:
            l1 = ops.softplus(-z) if any(v is not None for v in a) else None
            l0 = ops.softplus(z) if any(v is not None for v in b) else None
        q = []
        for a_k, b_k, c_k in zip(a, b, c):
            terms = [ops.sum(a_k * l1, axis=-1) if a_k is not None else None,
                     ops.sum(b_k * l0, axis=-1) if b_k is not None else None, c_k]
            value = None
            for t in terms:
                value = _plus(value, t)
            q.append(ops.zeros_like(z[:, 0]) if value is None else value)
        return self.form.combine(tuple(q)).loss


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
    return None if builder is None else LinearForm(builder(**options))
