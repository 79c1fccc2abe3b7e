"""Internal: the symbolic parts behind :mod:`adpue_tf.risks.linear`.

A risk's parts run on a :class:`Probe` (a batch of many models whose per-row
losses are symbols); the group means come out as :class:`Sum`, coefficients on
the functions of the logits of :data:`BASES`. Anything else a part does with the
logits raises :class:`NotLinear`.
"""

from __future__ import annotations

from typing import Any

from keras import ops

from adpue_tf import labels
from adpue_tf.risks._batch import Batch, replica_sum

__all__: list[str] = []  # private to adpue_tf.risks.linear


class NotLinear(Exception):
    """The parts read something other than the functions of :data:`BASES` and fixed labels."""


def plus(x: Any, y: Any) -> Any:
    """``x + y`` where ``None`` is a zero known at trace time (no op for it)."""
    return y if x is None else x if y is None else x + y


def _merge(x: dict, y: dict) -> dict:
    return {k: plus(x.get(k), y.get(k)) for k in {**x, **y}}


#: The functions of the logits a part may be linear in: the logistic losses, the
#: sigmoid losses (uPU/nnPU's sigmoid surrogate), ``f† = σ(z)`` without gradient
#: (labels of 3 columns) alone and times each logistic loss, and ``1``.
BASES = ("l1", "l0", "s1", "s0", "d", "dl1", "dl0", "1")


def _product(x: str, y: str) -> str:
    """The basis of ``x(z)·y(z)``; :class:`NotLinear` if it is none of :data:`BASES`."""
    if x == "1" or y == "1":
        return y if x == "1" else x
    pair = {x, y}
    if pair in ({"d", "l1"}, {"d", "l0"}):
        return "d" + (pair - {"d"}).pop()
    raise NotLinear  # e.g. ℓ1·ℓ0, or f† twice


class Rows:
    """A per-row expression ``Σ_basis coef·basis(z)`` (coefficients ``(models, rows)``)."""

    __slots__ = ("terms",)
    __array_priority__ = 1000  # NumPy defers to the reflected operators below

    def __init__(self, terms: dict) -> None:
        self.terms = terms

    def __mul__(self, k: Any) -> Rows:
        if isinstance(k, Sum):
            raise NotLinear
        if isinstance(k, Rows):  # term by term, while each product is a basis
            out: dict = {}
            for b1, c1 in self.terms.items():
                for b2, c2 in k.terms.items():
                    out = _merge(out, {_product(b1, b2): c1 * c2})
            return Rows(out)
        return Rows({b: c * k for b, c in self.terms.items()})

    __rmul__ = __mul__

    def __truediv__(self, k: Any) -> Rows:
        if isinstance(k, (Rows, Sum)):
            raise NotLinear
        return self * (1.0 / k)

    def __neg__(self) -> Rows:
        return self * -1.0

    def __add__(self, other: Any) -> Rows:
        if isinstance(other, Sum):
            raise NotLinear
        return Rows(_merge(self.terms, other.terms if isinstance(other, Rows)
                            else {"1": other}))

    __radd__ = __add__

    def __sub__(self, other: Any) -> Rows:
        return self + (-other)

    def __rsub__(self, other: Any) -> Rows:
        return (-self) + other


class Sum:
    """A group mean ``Σ_basis Σ_n coef[n]·basis(z_n)`` per model (``coef``: ``(models, rows)``)."""

    __slots__ = ("terms",)
    __array_priority__ = 1000

    def __init__(self, terms: dict) -> None:
        self.terms = terms

    def __mul__(self, k: Any) -> Sum:
        if not isinstance(k, (int, float)):
            raise NotLinear  # only constant factors keep the form
        return Sum({b: c * k for b, c in self.terms.items()})

    __rmul__ = __mul__

    def __neg__(self) -> Sum:
        return self * -1.0

    def __add__(self, other: Any) -> Sum:
        if isinstance(other, Sum):
            return Sum(_merge(self.terms, other.terms))
        if isinstance(other, (int, float)) and other == 0:
            return self  # sum() starts from 0
        raise NotLinear

    __radd__ = __add__

    def __sub__(self, other: Any) -> Sum:
        return self + (-other)

    def __rsub__(self, other: Any) -> Sum:
        return (-self) + other


class Probe:
    """A :class:`~adpue_tf.risks._batch.Batch` of many models whose losses are symbols.

    Labels and weights are ``(models, rows)``; ``l1``, ``l0``, ``s1``, ``s0``
    and (3-column labels) ``dagger`` are :class:`Rows`; reading ``z`` raises
    :class:`NotLinear`, as does ``f† = σ(z)`` with its gradient.
    """

    def __init__(self, y: Any, weight: Any, dagger_gradient: bool) -> None:
        self._y, self._dagger_gradient = y, dagger_gradient
        self.w, self.e, self.source = y[..., labels.W], y[..., labels.E], y[..., labels.SOURCE]
        self.weight = weight
        self._one = ops.ones_like(self.w)

    def _basis(self, name: str) -> Rows:
        return Rows({name: self._one})

    l1 = property(lambda self: self._basis("l1"))
    l0 = property(lambda self: self._basis("l0"))
    s1 = property(lambda self: self._basis("s1"))
    s0 = property(lambda self: self._basis("s0"))

    @property
    def z(self) -> Any:
        raise NotLinear

    @property
    def dagger(self) -> Any:
        if self._y.shape[-1] == 4:
            return ops.stop_gradient(ops.clip(self._y[..., labels.DAGGER], 0.0, 1.0))
        if self._dagger_gradient:
            raise NotLinear  # f† = σ(z) with its gradient
        return self._basis("d")

    @property
    def a(self) -> Any:
        return self.dagger * (1.0 - self.e)

    is_source = Batch.is_source  # reads source and weight only

    def mean(self, values: Any, mask: Any) -> Sum:
        """As ``Batch.mean``, per model: the coefficients of the group mean (0 for no rows)."""
        count = replica_sum(ops.sum(ops.stop_gradient(mask), axis=-1, keepdims=True))
        share = ops.divide_no_nan(mask, count)
        if isinstance(values, Sum):
            raise NotLinear
        if not isinstance(values, Rows):
            values = Rows({"1": values})
        return Sum({b: c * share for b, c in values.terms.items()})
