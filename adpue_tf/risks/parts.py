"""The parts the risks share: group means of ``ℓ1``/``ℓ0`` terms over the rows of each source."""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

from adpue_tf.labels import Source
from adpue_tf.risks._batch import Batch
from adpue_tf.risks.correction import RiskTerms

__all__: list[str] = []  # private helpers of the risks


class Form(NamedTuple):
    """A risk as its parts and their combination: ``risk(b) = combine(parts(b))``.

    ``parts(b)`` returns a tuple of group means (``R+``, ``R-``, ...) built
    from ``b.l1``, ``b.l0`` and the labels; for fixed labels, row weights and
    ``f†`` each is linear in the per-row losses ``ℓ1``, ``ℓ0`` (unless it
    reads ``b.z`` itself, as the sigmoid surrogate does). ``combine`` turns
    their values into :class:`RiskTerms` (the correction). The public risk
    functions call a form; :mod:`adpue_tf.risks.linear` evaluates the same
    form from coefficients computed once.
    """

    parts: Callable[[Any], tuple]
    combine: Callable[[tuple], RiskTerms]

    def __call__(self, b: Batch) -> RiskTerms:
        return self.combine(self.parts(b))


def _pue_parts(b: Batch, w_mask: Any, a_mask: Any) -> tuple[Any, Any]:
    """``R+`` and ``R-`` of nnPUE with W means over ``w_mask``, a means over ``a_mask``."""
    pos = b.mean(b.w * b.l1, w_mask) + b.mean(b.a * b.l1, a_mask)
    neg = b.mean((1.0 - b.w) * b.l0, w_mask) - b.mean(b.a * b.l0, a_mask)
    return pos, neg


def _pe_parts(b: Batch, prior: float, u_mask: Any) -> tuple[Any, Any, Any]:
    """``R+``, ``R-`` and ``C`` of nnPE/FPUE with unlabeled rows ``u_mask``."""
    p_mask, e_mask = b.is_source(Source.P), b.is_source(Source.E)
    pos = prior * b.mean(b.l1, p_mask)
    neg = b.mean(b.l0, u_mask) - prior * b.mean(b.l0, p_mask)
    corr = b.mean(b.a * b.l1, e_mask) - b.mean(b.a * b.l0, e_mask)
    return pos, neg, corr


def _l_parts(b: Batch) -> tuple[Any, Any]:
    """``R+`` and ``R-`` of L: cross-entropy with label W on exposed SSE rows."""
    mask = b.is_source(Source.SSE) * b.e
    return b.mean(b.w * b.l1, mask), b.mean((1.0 - b.w) * b.l0, mask)


def _ss_parts(b: Batch) -> tuple[Any, Any]:
    """``R+`` and ``R-`` of SS over the SSE rows."""
    mask = b.is_source(Source.SSE)
    pos = b.mean((b.w + b.a) * b.l1, mask)
    neg = b.mean((1.0 - b.w - b.a) * b.l0, mask)
    return pos, neg


def _mix(alpha: float, first: tuple[Any, Any], second: tuple[Any, Any]) -> tuple[Any, Any]:
    return tuple(alpha * f + (1.0 - alpha) * s for f, s in zip(first, second))


def _pu_parts(b: Batch, prior: float, surrogate: str) -> tuple[Any, Any]:
    """uPU parts: P = P rows and PU rows with W=1; U = U rows and all PU rows.

    ``surrogate="logistic"``: ``ℓ1 = softplus(-z)``, ``ℓ0 = softplus(z)``;
    ``"sigmoid"``: ``ℓ1 = σ(-z)``, ``ℓ0 = σ(z)``.
    """
    if surrogate == "sigmoid":
        l1, l0 = b.s1, b.s0
    else:
        l1, l0 = b.l1, b.l0
    pu = b.is_source(Source.PU)
    p_mask = b.is_source(Source.P) + pu * b.w
    u_mask = b.is_source(Source.U) + pu
    pos = prior * b.mean(l1, p_mask)
    return pos, b.mean(l0, u_mask) - prior * b.mean(l0, p_mask)
