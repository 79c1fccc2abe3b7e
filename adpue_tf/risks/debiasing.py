"""The paper's risks: ADPUE (nnPUE), ADPE (nnPE), ADFPU (FPUE), ADS, ADSS, Double ADSS, AD3SE."""

from __future__ import annotations

from typing import Any

from adpue_tf._internal.checks import check_options
from adpue_tf.labels import Source
from adpue_tf.risks._batch import unpack
from adpue_tf.risks.correction import RiskTerms, corrected, global_value, no_correction
from adpue_tf.risks.parts import Form, _l_parts, _mix, _pe_parts, _pue_parts, _ss_parts

__all__ = ["adpue", "adpe", "adfpu", "ads", "adss", "double_adss", "ad3se"]


def adpue(
    y_true: Any,
    y_pred: Any,
    *,
    from_logits: bool = False,
    non_negative: bool = True,
    beta: float = 0.0,
    gamma: float | None = None,
    dagger_gradient: bool = False,
    sample_weight: Any = None,
) -> RiskTerms:
    """nnPUE (method ADPUE) on rows of sources PU and E.

    ``R+ = Ê_PU[W·ℓ1] + Ê_E[a·ℓ1]``, ``R- = Ê_PU[(1-W)·ℓ0] - Ê_E[a·ℓ0]``
    with ``a = f†·(1-E)``; risk ``R+ + max(R-, 0)`` (``R+ + R-`` when
    ``non_negative=False``: unbiased PUE).

    Args:
        y_true: packed labels ``(batch, 3|4)``.
        y_pred: logits or probabilities, ``(batch,)`` or ``(batch, 1)``.
        from_logits: whether ``y_pred`` holds logits.
        non_negative: apply the non-negative correction.
        beta: threshold of the correction (``>= 0``).
        gamma: ``None`` for the paper's max, a float in ``(0, 1]`` for nnPU's step.
        dagger_gradient: let the gradient flow through ``f† = σ(z)``.
        sample_weight: optional non-negative per-row weights.

    Returns:
        The :class:`RiskTerms`.

    Example:
        >>> from adpue_tf.labels import pack_pu
        >>> float(adpue(pack_pu([1]), [[0.0]], from_logits=True).positive) > 0
        True
    """
    check_options(from_logits=from_logits)
    form = _adpue_form(non_negative=non_negative, beta=beta, gamma=gamma,
                       dagger_gradient=dagger_gradient)
    return form(unpack(y_true, y_pred, from_logits=from_logits,
                       dagger_gradient=dagger_gradient, sample_weight=sample_weight))


def _adpue_form(*, non_negative: bool = True, beta: float = 0.0, gamma: float | None = None,
                dagger_gradient: bool = False) -> Form:
    check_options(non_negative=non_negative, beta=beta, gamma=gamma,
                  dagger_gradient=dagger_gradient)
    return Form(lambda b: _pue_parts(b, b.is_source(Source.PU), b.is_source(Source.E)),
                lambda q: corrected(*q, non_negative=non_negative, beta=beta, gamma=gamma))


def adpe(
    y_true: Any,
    y_pred: Any,
    *,
    prior: float,
    from_logits: bool = False,
    non_negative: bool = True,
    beta: float = 0.0,
    gamma: float | None = None,
    dagger_gradient: bool = False,
    sample_weight: Any = None,
) -> RiskTerms:
    """nnPE (method ADPE) on rows of sources P and E, with ``π = q(w=1)``.

    ``R+ = π·Ê_P[ℓ1]``, ``R- = Ê_E[ℓ0] - π·Ê_P[ℓ0]``,
    ``C = Ê_E[a·ℓ1] - Ê_E[a·ℓ0]``; risk ``R+ + max(R-, 0) + C``.
    Arguments as :func:`adpue`, plus ``prior`` (the class prior of ``W``).

    Example:
        >>> from adpue_tf.labels import pack_p
        >>> round(float(adpe(pack_p(1), [[0.0]], prior=0.5, from_logits=True).positive), 4)
        0.3466
    """
    check_options(from_logits=from_logits)
    form = _pe_form(prior=prior, non_negative=non_negative, beta=beta, gamma=gamma,
                    dagger_gradient=dagger_gradient, unlabeled=(Source.E,))
    return form(unpack(y_true, y_pred, from_logits=from_logits,
                       dagger_gradient=dagger_gradient, sample_weight=sample_weight))


def _pe_form(*, prior: float, non_negative: bool = True, beta: float = 0.0,
             gamma: float | None = None, dagger_gradient: bool = False,
             unlabeled: tuple[Source, ...]) -> Form:
    """nnPE (``unlabeled``: E rows) or FPUE (U and E rows)."""
    check_options(prior=prior, non_negative=non_negative, beta=beta, gamma=gamma,
                  dagger_gradient=dagger_gradient)

    def combine(q: tuple) -> RiskTerms:
        pos, neg, corr = q
        return corrected(pos, neg, non_negative=non_negative, beta=beta, gamma=gamma, extra=corr)

    return Form(lambda b: _pe_parts(b, prior, b.is_source(*unlabeled)), combine)


def _adpe_form(**options: Any) -> Form:
    return _pe_form(**options, unlabeled=(Source.E,))


def _adfpu_form(**options: Any) -> Form:
    return _pe_form(**options, unlabeled=(Source.U, Source.E))


def adfpu(
    y_true: Any,
    y_pred: Any,
    *,
    prior: float,
    from_logits: bool = False,
    non_negative: bool = True,
    beta: float = 0.0,
    gamma: float | None = None,
    dagger_gradient: bool = False,
    sample_weight: Any = None,
) -> RiskTerms:
    """FPUE (method ADFPU) on rows of sources P, U and E.

    As :func:`adpe`, but the unlabeled mean in ``R-`` runs over the pooled
    rows of U and E.

    Example:
        >>> from adpue_tf.labels import pack_u
        >>> round(float(adfpu(pack_u(1), [[0.0]], prior=0.5, from_logits=True).negative), 4)
        0.6931
    """
    check_options(from_logits=from_logits)
    form = _pe_form(prior=prior, non_negative=non_negative, beta=beta, gamma=gamma,
                    dagger_gradient=dagger_gradient, unlabeled=(Source.U, Source.E))
    return form(unpack(y_true, y_pred, from_logits=from_logits,
                       dagger_gradient=dagger_gradient, sample_weight=sample_weight))


def ads(
    y_true: Any, y_pred: Any, *, from_logits: bool = False, sample_weight: Any = None
) -> RiskTerms:
    """L (method ADS): cross-entropy with label ``W`` on the exposed SSE rows.

    Example:
        >>> from adpue_tf.labels import pack_sse
        >>> round(float(ads(pack_sse([1, 0], [1, 0]), [[0.0], [5.0]], from_logits=True).risk), 4)
        0.6931
    """
    check_options(from_logits=from_logits)
    return _ads_form()(unpack(y_true, y_pred, from_logits=from_logits,
                              sample_weight=sample_weight))


def _ads_form() -> Form:
    return Form(_l_parts, lambda q: no_correction(*q))


def adss(
    y_true: Any,
    y_pred: Any,
    *,
    from_logits: bool = False,
    dagger_gradient: bool = False,
    sample_weight: Any = None,
) -> RiskTerms:
    """SS (method ADSS): ``Ê_SSE[(W + a)·ℓ1 + (1 - W - a)·ℓ0]``.

    No correction is needed: ``1 - W - a >= 0`` when ``f† <= 1``.

    Example:
        >>> from adpue_tf.labels import pack_sse
        >>> round(float(adss(pack_sse([0], [0]), [[0.0]], from_logits=True).risk), 4)
        0.6931
    """
    check_options(from_logits=from_logits)
    form = _adss_form(dagger_gradient=dagger_gradient)
    return form(unpack(y_true, y_pred, from_logits=from_logits,
                       dagger_gradient=dagger_gradient, sample_weight=sample_weight))


def _adss_form(*, dagger_gradient: bool = False) -> Form:
    check_options(dagger_gradient=dagger_gradient)
    return Form(_ss_parts, lambda q: no_correction(*q))


def double_adss(
    y_true: Any,
    y_pred: Any,
    *,
    alpha: float = 0.5,
    from_logits: bool = False,
    dagger_gradient: bool = False,
    sample_weight: Any = None,
) -> RiskTerms:
    """DoubleADSS (method DADSS): ``α·SS + (1-α)·L``; ``R±`` mixed the same way.

    Example:
        >>> from adpue_tf.labels import pack_sse
        >>> round(float(double_adss(pack_sse([1], [1]), [[0.0]], alpha=0.5, from_logits=True).risk), 4)
        0.6931
    """
    check_options(from_logits=from_logits)
    form = _double_adss_form(alpha=alpha, dagger_gradient=dagger_gradient)
    return form(unpack(y_true, y_pred, from_logits=from_logits,
                       dagger_gradient=dagger_gradient, sample_weight=sample_weight))


def _double_adss_form(*, alpha: float = 0.5, dagger_gradient: bool = False) -> Form:
    check_options(alpha=alpha, dagger_gradient=dagger_gradient)
    return Form(lambda b: _mix(alpha, _ss_parts(b), _l_parts(b)), lambda q: no_correction(*q))


def ad3se(
    y_true: Any,
    y_pred: Any,
    *,
    alpha: float = 0.5,
    from_logits: bool = False,
    non_negative: bool = True,
    beta: float = 0.0,
    gamma: float | None = None,
    dagger_gradient: bool = False,
    sample_weight: Any = None,
) -> RiskTerms:
    """AD3SE on rows of sources SSE and PU: ``α·R3 + (1-α)·L``.

    ``R3`` is nnPUE with the ``W`` means over the pooled SSE and PU rows and
    the ``a`` means over the SSE rows; the correction acts on ``R3``'s ``R-``
    (when it fires with ``gamma``, the step is ``α·(-γ·R3-) + (1-α)·L``).
    ``positive``/``negative`` report ``R3``'s parts.

    Example:
        >>> from adpue_tf.labels import pack_sse
        >>> round(float(ad3se(pack_sse([1], [1]), [[0.0]], alpha=0.5, from_logits=True).risk), 4)
        0.6931
    """
    check_options(from_logits=from_logits)
    form = _ad3se_form(alpha=alpha, non_negative=non_negative, beta=beta, gamma=gamma,
                       dagger_gradient=dagger_gradient)
    return form(unpack(y_true, y_pred, from_logits=from_logits,
                       dagger_gradient=dagger_gradient, sample_weight=sample_weight))


def _ad3se_form(*, alpha: float = 0.5, non_negative: bool = True, beta: float = 0.0,
                gamma: float | None = None, dagger_gradient: bool = False) -> Form:
    check_options(alpha=alpha, non_negative=non_negative, beta=beta, gamma=gamma,
                  dagger_gradient=dagger_gradient)

    def parts(b: Any) -> tuple:
        pos, neg = _pue_parts(b, b.is_source(Source.SSE, Source.PU), b.is_source(Source.SSE))
        return (pos, neg, *_l_parts(b))

    def combine(q: tuple) -> RiskTerms:
        pos, neg, l_pos, l_neg = q
        r3 = corrected(pos, neg, non_negative=non_negative, beta=beta, gamma=gamma)
        l_loss = l_pos + l_neg
        g_l = global_value(l_loss)
        return RiskTerms(
            loss=alpha * r3.loss + (1.0 - alpha) * l_loss,
            risk=alpha * r3.risk + (1.0 - alpha) * g_l,
            positive=r3.positive,
            negative=r3.negative,
            fired=r3.fired,
        )

    return Form(parts, combine)


#: Each risk's form builder (its options -> :class:`~adpue_tf.risks.parts.Form`), read by
#: :mod:`adpue_tf.risks.linear`.
FORMS: dict[Any, Any] = {adpue: _adpue_form, adpe: _adpe_form, adfpu: _adfpu_form,
                         ads: _ads_form, adss: _adss_form, double_adss: _double_adss_form,
                         ad3se: _ad3se_form}
