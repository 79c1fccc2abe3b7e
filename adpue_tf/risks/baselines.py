"""The baselines' risks: Logit (cross-entropy on ``W``), uPU, nnPU, PNU and IPS."""

from __future__ import annotations

from typing import Any

from keras import ops

from adpue_tf._internal.checks import check_options
from adpue_tf.labels import Source
from adpue_tf.risks._batch import unpack
from adpue_tf.risks.correction import RiskTerms, corrected, no_correction
from adpue_tf.risks.parts import Form, _mix, _pu_parts

__all__ = ["logit", "upu", "nnpu", "pnu", "ips"]


def logit(
    y_true: Any, y_pred: Any, *, from_logits: bool = False, sample_weight: Any = None
) -> RiskTerms:
    """Baseline "Logit": cross-entropy with label ``W`` on the PU and SSE rows.

    Example:
        >>> from adpue_tf.labels import pack_pu
        >>> round(float(logit(pack_pu([1]), [[0.0]], from_logits=True).risk), 4)
        0.6931
    """
    check_options(from_logits=from_logits)
    return _logit_form()(unpack(y_true, y_pred, from_logits=from_logits,
                                sample_weight=sample_weight))


def _logit_parts(b: Any) -> tuple:
    mask = b.is_source(Source.PU, Source.SSE)
    return b.mean(b.w * b.l1, mask), b.mean((1.0 - b.w) * b.l0, mask)


def _logit_form() -> Form:
    return Form(_logit_parts, lambda q: no_correction(*q))


def upu(
    y_true: Any, y_pred: Any, *, prior: float, surrogate: str = "logistic",
    from_logits: bool = False, sample_weight: Any = None,
) -> RiskTerms:
    """uPU (du Plessis et al. 2015): ``π·Ê_P[ℓ1] + Ê_U[ℓ0] - π·Ê_P[ℓ0]``.

    P: rows of source P and PU rows with ``W = 1``; U: rows of source U and
    all PU rows. ``prior`` is ``π_y = p(y=1)``.

    ``surrogate`` picks the binary loss: ``"logistic"`` (default, the log
    loss of the rest of the library: ``ℓ1(z) = softplus(-z)``,
    ``ℓ0(z) = softplus(z)``) or ``"sigmoid"`` (``ℓ1(z) = σ(-z)``,
    ``ℓ0(z) = σ(z)``), the default of Kiryo et al.'s nnPU code and of
    pulearn. The sigmoid loss is bounded and symmetric (``ℓ1 + ℓ0 = 1``), so
    uPU's ``R-`` cannot run away to ``-∞`` with it.

    Example:
        >>> from adpue_tf.labels import pack_pu
        >>> round(float(upu(pack_pu([1, 0]), [[0.0], [0.0]], prior=0.5, from_logits=True).risk), 4)
        0.6931
        >>> round(float(upu(pack_pu([1, 0]), [[0.0], [0.0]], prior=0.5, surrogate="sigmoid",
        ...                 from_logits=True).risk), 4)
        0.5
    """
    check_options(from_logits=from_logits)
    return _upu_form(prior=prior, surrogate=surrogate)(
        unpack(y_true, y_pred, from_logits=from_logits, sample_weight=sample_weight))


def _upu_form(*, prior: float, surrogate: str = "logistic") -> Form:
    check_options(prior=prior, surrogate=surrogate)
    return Form(lambda b: _pu_parts(b, prior, surrogate), lambda q: no_correction(*q))


def nnpu(
    y_true: Any, y_pred: Any, *, prior: float, surrogate: str = "logistic",
    from_logits: bool = False, non_negative: bool = True, beta: float = 0.0,
    gamma: float | None = None, sample_weight: Any = None,
) -> RiskTerms:
    """nnPU (Kiryo et al. 2017): :func:`upu` with the non-negative correction.

    ``surrogate``: ``"logistic"`` (default) or ``"sigmoid"`` (Kiryo et al.'s
    default), as in :func:`upu`.

    Example:
        >>> from adpue_tf.labels import pack_pu
        >>> float(nnpu(pack_pu([1, 0]), [[9.0], [-9.0]], prior=0.9, from_logits=True).fired)
        1.0
    """
    check_options(from_logits=from_logits)
    form = _nnpu_form(prior=prior, surrogate=surrogate, non_negative=non_negative, beta=beta,
                      gamma=gamma)
    return form(unpack(y_true, y_pred, from_logits=from_logits, sample_weight=sample_weight))


def _nnpu_form(*, prior: float, surrogate: str = "logistic", non_negative: bool = True,
               beta: float = 0.0, gamma: float | None = None) -> Form:
    check_options(prior=prior, surrogate=surrogate, non_negative=non_negative, beta=beta,
                  gamma=gamma)
    return Form(lambda b: _pu_parts(b, prior, surrogate),
                lambda q: corrected(*q, non_negative=non_negative, beta=beta, gamma=gamma))


def pnu(
    y_true: Any, y_pred: Any, *, prior: float, eta: float = 0.0, from_logits: bool = False,
    sample_weight: Any = None,
) -> RiskTerms:
    """PNU (Sakai et al. 2017) on SSE rows.

    P: SSE rows with ``W = 1``; N: exposed SSE rows with ``W = 0``; U: all
    SSE rows. ``R_PN = π·Ê_P[ℓ1] + (1-π)·Ê_N[ℓ0]``,
    ``R_PU = π·Ê_P[ℓ1] + Ê_U[ℓ0] - π·Ê_P[ℓ0]``,
    ``R_NU = (1-π)·Ê_N[ℓ0] + Ê_U[ℓ1] - (1-π)·Ê_N[ℓ1]``; the risk is
    ``(1-η)·R_PN + η·R_PU`` for ``η >= 0`` and ``(1+η)·R_PN - η·R_NU`` for
    ``η < 0``. ``R±`` gather the terms on ``ℓ1`` and ``ℓ0``.

    Example:
        >>> from adpue_tf.labels import pack_sse
        >>> round(float(pnu(pack_sse([1, 0], [1, 1]), [[0.0], [0.0]], prior=0.5, eta=0.0, from_logits=True).risk), 4)
        0.6931
    """
    check_options(from_logits=from_logits)
    return _pnu_form(prior=prior, eta=eta)(
        unpack(y_true, y_pred, from_logits=from_logits, sample_weight=sample_weight))


def _pnu_form(*, prior: float, eta: float = 0.0) -> Form:
    check_options(prior=prior, eta=eta)
    return Form(lambda b: _pnu_parts(b, prior, eta), lambda q: no_correction(*q))


def _pnu_parts(b: Any, prior: float, eta: float) -> tuple:
    sse = b.is_source(Source.SSE)
    p_mask, n_mask = sse * b.w, sse * b.e * (1.0 - b.w)
    p1, p0 = b.mean(b.l1, p_mask), b.mean(b.l0, p_mask)
    n1, n0 = b.mean(b.l1, n_mask), b.mean(b.l0, n_mask)
    u1, u0 = b.mean(b.l1, sse), b.mean(b.l0, sse)
    pn = (prior * p1, (1.0 - prior) * n0)
    if eta >= 0:
        other = (prior * p1, u0 - prior * p0)
        return _mix(1.0 - eta, pn, other)
    other = (u1 - (1.0 - prior) * n1, (1.0 - prior) * n0)
    return _mix(1.0 + eta, pn, other)


def ips(
    y_true: Any, y_pred: Any, *, clip: float = 0.05, from_logits: bool = False,
    sample_weight: Any = None,
) -> RiskTerms:
    """Baseline IPS (Saito et al. 2020): cross-entropy on ``W`` reweighted by ``1/θ̂``.

    ``Ê_PU[t·ℓ1 + (1 - t)·ℓ0]`` with ``t = W / max(θ̂(x), clip)``, where the
    propensity ``θ̂(e=1|x)`` of each PU row is column 3 of ``y_true`` (see
    :func:`adpue_tf.data.with_propensity`). Unbiased for the true
    cross-entropy when ``θ̂ = θ`` and ``θ ≥ clip`` (strong ignorability:
    ``E[W/θ | x] = p(y=1|x)``), the "relevance" weighting that ads teams use
    today; clipping trades that bias for variance. ``R+ = Ê_PU[t·ℓ1]``,
    ``R- = Ê_PU[(1-t)·ℓ0]`` (negative on rows with ``W = 1``; no correction).

    Example:
        >>> import numpy as np
        >>> from adpue_tf.labels import pack_pu
        >>> y = np.concatenate([pack_pu([1, 0]), [[0.5], [0.5]]], axis=1)
        >>> round(float(ips(y, [[0.0], [0.0]], from_logits=True).risk), 4)
        0.6931
    """
    check_options(from_logits=from_logits)
    form = _ips_form(clip=clip)
    shape = tuple(ops.shape(y_true))
    if len(shape) != 2 or shape[-1] != 4:
        raise ValueError(
            "ips: `y_true` must have 4 columns (w, e, source, propensity θ̂), got shape "
            f"{shape}; attach θ̂ with adpue_tf.data.with_propensity(dataset, exposure_model).")
    return form(unpack(y_true, y_pred, from_logits=from_logits, sample_weight=sample_weight))


def _ips_form(*, clip: float = 0.05) -> Form:
    check_options(clip=clip)

    def parts(b: Any) -> tuple:
        pu = b.is_source(Source.PU)
        t = b.w / ops.maximum(b.dagger, clip)
        return b.mean(t * b.l1, pu), b.mean((1.0 - t) * b.l0, pu)

    return Form(parts, lambda q: no_correction(*q))


#: Each risk's form builder (its options -> :class:`~adpue_tf.risks.parts.Form`), read by
#: :mod:`adpue_tf.risks.linear`.
FORMS: dict[Any, Any] = {logit: _logit_form, upu: _upu_form, nnpu: _nnpu_form, pnu: _pnu_form,
                         ips: _ips_form}
