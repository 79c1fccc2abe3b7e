"""The debiased risks of SPEC.md as pure functions.

Each function takes a packed ``y_true`` (see :mod:`adpue_tf.labels`) and the
model output, and returns :class:`RiskTerms`. All arithmetic is float32 from
logits: ``ℓ1(z) = softplus(-z)``, ``ℓ0(z) = softplus(z)``.

``R+`` collects the terms on ``ℓ1`` and ``R-`` the terms on ``ℓ0`` (the
non-negative correction acts on ``R-``). For nnPE and FPUE the proxy's
correction ``C`` is reported in neither: ``risk = R+ + max(R-, 0) + C``.

The non-negative correction is in :mod:`adpue_tf.correction`.

One vocabulary, as Keras's ``huber`` / ``Huber`` / ``"huber"``: the function
``adpue`` is wrapped by :class:`adpue_tf.losses.ADPUELoss`, whose registry key
is ``"adpue"`` (:func:`adpue_tf.losses.get`); the same for every risk here.
Function and class take the same options with the same defaults. The former
names ``nnpue``, ``nnpe`` and ``fpue`` (named after the risks rather than the
methods) remain as aliases of ``adpue``, ``adpe`` and ``adfpu``.

Example:
    >>> import numpy as np
    >>> from adpue_tf import risks
    >>> from adpue_tf.labels import pack_pu, pack_e
    >>> y = np.concatenate([pack_pu([1, 0]), pack_e([1, 0])])
    >>> terms = risks.adpue(y, np.zeros((4, 1), "float32"), from_logits=True)
    >>> round(float(terms.risk), 4)
    0.6931
"""

from __future__ import annotations

from typing import Any

from keras import ops

from adpue_tf._batch import Batch, unpack
from adpue_tf._checks import check_options
from adpue_tf.correction import RiskTerms, corrected, global_value, no_correction
from adpue_tf.labels import Source

__all__ = [
    "RiskTerms",
    "adpue",
    "adpe",
    "adfpu",
    "ads",
    "adss",
    "double_adss",
    "ad3se",
    "logit",
    "upu",
    "nnpu",
    "pnu",
    "ips",
]


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
    check_options(from_logits=from_logits, non_negative=non_negative, beta=beta, gamma=gamma,
                  dagger_gradient=dagger_gradient)
    b = unpack(y_true, y_pred, from_logits=from_logits,
               dagger_gradient=dagger_gradient, sample_weight=sample_weight)
    pos, neg = _pue_parts(b, b.is_source(Source.PU), b.is_source(Source.E))
    return corrected(pos, neg, non_negative=non_negative, beta=beta, gamma=gamma)


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
    check_options(from_logits=from_logits, prior=prior, non_negative=non_negative, beta=beta, gamma=gamma,
                  dagger_gradient=dagger_gradient)
    b = unpack(y_true, y_pred, from_logits=from_logits,
               dagger_gradient=dagger_gradient, sample_weight=sample_weight)
    pos, neg, corr = _pe_parts(b, prior, b.is_source(Source.E))
    return corrected(pos, neg, non_negative=non_negative, beta=beta,
                      gamma=gamma, extra=corr)


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
    check_options(from_logits=from_logits, prior=prior, non_negative=non_negative, beta=beta, gamma=gamma,
                  dagger_gradient=dagger_gradient)
    b = unpack(y_true, y_pred, from_logits=from_logits,
               dagger_gradient=dagger_gradient, sample_weight=sample_weight)
    pos, neg, corr = _pe_parts(b, prior, b.is_source(Source.U, Source.E))
    return corrected(pos, neg, non_negative=non_negative, beta=beta,
                      gamma=gamma, extra=corr)


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
    b = unpack(y_true, y_pred, from_logits=from_logits, sample_weight=sample_weight)
    return no_correction(*_l_parts(b))


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
    check_options(from_logits=from_logits, dagger_gradient=dagger_gradient)
    b = unpack(y_true, y_pred, from_logits=from_logits,
               dagger_gradient=dagger_gradient, sample_weight=sample_weight)
    return no_correction(*_ss_parts(b))


def _mix(alpha: float, first: tuple[Any, Any], second: tuple[Any, Any]) -> tuple[Any, Any]:
    return tuple(alpha * f + (1.0 - alpha) * s for f, s in zip(first, second))


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
    check_options(from_logits=from_logits, alpha=alpha,
                  dagger_gradient=dagger_gradient)
    b = unpack(y_true, y_pred, from_logits=from_logits,
               dagger_gradient=dagger_gradient, sample_weight=sample_weight)
    return no_correction(*_mix(alpha, _ss_parts(b), _l_parts(b)))


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
    check_options(from_logits=from_logits, alpha=alpha, non_negative=non_negative, beta=beta, gamma=gamma,
                  dagger_gradient=dagger_gradient)
    b = unpack(y_true, y_pred, from_logits=from_logits,
               dagger_gradient=dagger_gradient, sample_weight=sample_weight)
    sse = b.is_source(Source.SSE)
    r3 = corrected(*_pue_parts(b, b.is_source(Source.SSE, Source.PU), sse),
                    non_negative=non_negative, beta=beta, gamma=gamma)
    l_loss = sum(_l_parts(b))
    g_l = global_value(l_loss)
    return RiskTerms(
        loss=alpha * r3.loss + (1.0 - alpha) * l_loss,
        risk=alpha * r3.risk + (1.0 - alpha) * g_l,
        positive=r3.positive,
        negative=r3.negative,
        fired=r3.fired,
    )


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
    b = unpack(y_true, y_pred, from_logits=from_logits, sample_weight=sample_weight)
    mask = b.is_source(Source.PU, Source.SSE)
    return no_correction(b.mean(b.w * b.l1, mask), b.mean((1.0 - b.w) * b.l0, mask))


def _pu_parts(b: Batch, prior: float, surrogate: str) -> tuple[Any, Any]:
    """uPU parts: P = P rows and PU rows with W=1; U = U rows and all PU rows.

    ``surrogate="logistic"``: ``ℓ1 = softplus(-z)``, ``ℓ0 = softplus(z)``;
    ``"sigmoid"``: ``ℓ1 = σ(-z)``, ``ℓ0 = σ(z)``.
    """
    if surrogate == "sigmoid":
        l1, l0 = ops.sigmoid(-b.z), ops.sigmoid(b.z)
    else:
        l1, l0 = b.l1, b.l0
    pu = b.is_source(Source.PU)
    p_mask = b.is_source(Source.P) + pu * b.w
    u_mask = b.is_source(Source.U) + pu
    pos = prior * b.mean(l1, p_mask)
    return pos, b.mean(l0, u_mask) - prior * b.mean(l0, p_mask)


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
    check_options(from_logits=from_logits, prior=prior, surrogate=surrogate)
    b = unpack(y_true, y_pred, from_logits=from_logits, sample_weight=sample_weight)
    return no_correction(*_pu_parts(b, prior, surrogate))


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
    check_options(from_logits=from_logits, prior=prior, surrogate=surrogate,
                  non_negative=non_negative, beta=beta, gamma=gamma)
    b = unpack(y_true, y_pred, from_logits=from_logits, sample_weight=sample_weight)
    return corrected(*_pu_parts(b, prior, surrogate), non_negative=non_negative,
                     beta=beta, gamma=gamma)


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
    check_options(from_logits=from_logits, prior=prior, eta=eta)
    b = unpack(y_true, y_pred, from_logits=from_logits, sample_weight=sample_weight)
    sse = b.is_source(Source.SSE)
    p_mask, n_mask = sse * b.w, sse * b.e * (1.0 - b.w)
    p1, p0 = b.mean(b.l1, p_mask), b.mean(b.l0, p_mask)
    n1, n0 = b.mean(b.l1, n_mask), b.mean(b.l0, n_mask)
    u1, u0 = b.mean(b.l1, sse), b.mean(b.l0, sse)
    pn = (prior * p1, (1.0 - prior) * n0)
    if eta >= 0:
        other = (prior * p1, u0 - prior * p0)
        return no_correction(*_mix(1.0 - eta, pn, other))
    other = (u1 - (1.0 - prior) * n1, (1.0 - prior) * n0)
    return no_correction(*_mix(1.0 + eta, pn, other))


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
    check_options(from_logits=from_logits, clip=clip)
    shape = tuple(ops.shape(y_true))
    if len(shape) != 2 or shape[-1] != 4:
        raise ValueError(
            "ips: `y_true` must have 4 columns (w, e, source, propensity θ̂), got shape "
            f"{shape}; attach θ̂ with adpue_tf.data.with_propensity(dataset, exposure_model).")
    b = unpack(y_true, y_pred, from_logits=from_logits, sample_weight=sample_weight)
    pu = b.is_source(Source.PU)
    t = b.w / ops.maximum(b.dagger, clip)
    return no_correction(b.mean(t * b.l1, pu), b.mean((1.0 - t) * b.l0, pu))


#: Former names of :func:`adpue`, :func:`adpe` and :func:`adfpu` (kept as aliases).
nnpue = adpue
nnpe = adpe
fpue = adfpu
