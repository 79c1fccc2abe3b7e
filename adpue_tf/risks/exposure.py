"""Risks that learn ``p(y=1|x)`` from PU and exposure rows without the proxy ``f†``.

Three estimators beyond the paper's (the maths: ``docs/guide/choosing-models.md``):

* :func:`exposure_likelihood`: the negative log-likelihood of ``W`` under
  ``P(W=1|x) = σ(z)·θ̂(x)``, ``θ̂`` in column 3 (as for IPS). Bounded, no
  ``1/θ̂`` weights; consistent when ``θ̂ = θ``.
* :func:`exposure_brier`: ``Ê_E[E·f²] - 2·Ê_PU[W·f]`` with ``f = σ(z)``. Its
  expectation is ``E_x[θ(x)·(f(x) - p(x))²]`` minus a constant, so it needs no
  ``θ̂`` at all; bounded in ``[-2, 1]``.
* :func:`exposed_pu`: the ``θ``-weighted cross-entropy
  ``Ê_PU[W·ℓ1] + Ê_E[E·ℓ0] - Ê_PU[W·ℓ0]`` (``E_x[θ·CE(p, f)]``), i.e. nnPU with
  the observed positives as P and the exposed rows of the log as U; its ``R-``
  gets the non-negative correction.

All three read PU rows and (the last two) E rows drawn from the same ``x``
distribution, and compute in float32 from logits.

Example:
    >>> import numpy as np
    >>> from adpue_tf.labels import pack_e, pack_pu
    >>> y = np.concatenate([pack_pu([1, 0]), pack_e([1, 0])])
    >>> round(float(exposure_brier(y, np.zeros((4, 1)), from_logits=True).risk), 4)  # 0.5·0.25 - 2·0.5·0.5
    -0.375
"""

from __future__ import annotations

from typing import Any

from keras import ops

from adpue_tf._internal.checks import check_options
from adpue_tf.labels import Source
from adpue_tf.risks._batch import unpack
from adpue_tf.risks.correction import RiskTerms, corrected, no_correction

__all__ = ["exposure_likelihood", "exposure_brier", "exposed_pu"]

#: ``θ̂`` is clipped to ``[_EPS, 1 - _EPS]`` inside the likelihood.
_EPS = 1e-7


def log_probs(z: Any, theta: Any) -> tuple[Any, Any]:
    """``log s`` and ``log(1 - s)`` for ``s = σ(z)·θ``, stable for any logit ``z``.

    ``θ`` is clipped to ``[1e-7, 1 - 1e-7]``;
    ``log(1 - σ(z)θ) = softplus(z + log(1 - θ)) - softplus(z)``. The one
    implementation behind this risk and :func:`adpue_tf.validation.exposure_nll`.
    """
    theta = ops.clip(ops.cast(theta, "float32"), _EPS, 1.0 - _EPS)
    log_s = -ops.softplus(-z) + ops.log(theta)
    log_not_s = ops.softplus(z + ops.log1p(-theta)) - ops.softplus(z)
    return log_s, log_not_s


def exposure_likelihood(
    y_true: Any, y_pred: Any, *, from_logits: bool = False, sample_weight: Any = None,
) -> RiskTerms:
    """Negative log-likelihood of ``W`` on PU rows under ``P(W=1|x) = σ(z)·θ̂(x)``.

    ``R+ = -Ê_PU[W·log(σ(z)·θ̂)]``, ``R- = -Ê_PU[(1-W)·log(1 - σ(z)·θ̂)]``,
    risk ``R+ + R-`` (both ``>= 0``: no correction). ``θ̂(e=1|x)`` of each PU row
    is column 3 of ``y_true`` (:func:`adpue_tf.data.with_propensity`), clipped
    to ``[1e-7, 1 - 1e-7]``. ``log(1 - σ(z)θ) = softplus(z + log(1-θ)) - softplus(z)``.

    Args:
        y_true: packed labels ``(batch, 4)``: ``(w, e, source, θ̂)``.
        y_pred: logits or probabilities, ``(batch,)`` or ``(batch, 1)``.
        from_logits: whether ``y_pred`` holds logits.
        sample_weight: optional non-negative per-row weights.

    Returns:
        The :class:`RiskTerms`.

    Example:
        >>> import numpy as np
        >>> from adpue_tf.labels import pack_pu
        >>> y = np.concatenate([pack_pu([1, 0]), [[0.5], [0.5]]], axis=1)
        >>> round(float(exposure_likelihood(y, [[0.0], [0.0]], from_logits=True).risk), 4)
        0.837
    """
    check_options(from_logits=from_logits)
    shape = tuple(ops.shape(y_true))
    if len(shape) != 2 or shape[-1] != 4:
        raise ValueError(
            "exposure_likelihood: `y_true` must have 4 columns (w, e, source, propensity θ̂), "
            f"got shape {shape}; attach θ̂ with adpue_tf.data.with_propensity(dataset, "
            "exposure_model).")
    b = unpack(y_true, y_pred, from_logits=from_logits, sample_weight=sample_weight)
    pu = b.is_source(Source.PU)
    log_s, log_not_s = log_probs(b.z, b.dagger)
    return no_correction(b.mean(-b.w * log_s, pu), b.mean(-(1.0 - b.w) * log_not_s, pu))


def exposure_brier(
    y_true: Any, y_pred: Any, *, from_logits: bool = False, sample_weight: Any = None,
) -> RiskTerms:
    """The exposure-weighted squared error ``Ê_E[E·f²] - 2·Ê_PU[W·f]``, ``f = σ(z)``.

    With ``q = p·θ`` (strong ignorability) and PU and E rows from the same
    ``x`` distribution, its expectation is ``E_x[θ·(f - p)²] - E_x[θ·p²]``:
    minimised by ``f = p`` wherever ``θ > 0``, without an estimate of ``θ``.
    ``R+ = Ê_E[E·f²]`` (in ``[0, 1]``), ``R- = -2·Ê_PU[W·f]`` (in ``[-2, 0]``),
    risk ``R+ + R-``.

    Args:
        y_true: packed labels ``(batch, 3|4)`` of PU and E rows (column 3 unused).
        y_pred: logits or probabilities, ``(batch,)`` or ``(batch, 1)``.
        from_logits: whether ``y_pred`` holds logits.
        sample_weight: optional non-negative per-row weights.

    Returns:
        The :class:`RiskTerms`.

    Example:
        >>> from adpue_tf.labels import pack_e
        >>> round(float(exposure_brier(pack_e([1, 1]), [[0.0], [0.0]], from_logits=True).risk), 4)
        0.25
    """
    check_options(from_logits=from_logits)
    b = unpack(y_true, y_pred, from_logits=from_logits, sample_weight=sample_weight)
    f = ops.sigmoid(b.z)
    pos = b.mean(b.e * f * f, b.is_source(Source.E))
    neg = -2.0 * b.mean(b.w * f, b.is_source(Source.PU))
    return no_correction(pos, neg)


def exposed_pu(
    y_true: Any, y_pred: Any, *, from_logits: bool = False, non_negative: bool = True,
    beta: float = 0.0, gamma: float | None = None, sample_weight: Any = None,
) -> RiskTerms:
    """The exposure-weighted cross-entropy: nnPU with P = observed positives, U = exposed rows.

    ``R+ = Ê_PU[W·ℓ1]``, ``R- = Ê_E[E·ℓ0] - Ê_PU[W·ℓ0]``; risk
    ``R+ + max(R-, 0)`` (``R+ + R-`` with ``non_negative=False``). In
    expectation ``R+ + R- = E_x[θ·CE(p, σ(z))]``, minimised by ``σ(z) = p``
    wherever ``θ > 0``, without an estimate of ``θ``; ``E[R-] = E_x[θ·(1-p)·ℓ0] >= 0``.

    Args:
        y_true: packed labels ``(batch, 3|4)`` of PU and E rows (column 3 unused).
        y_pred: logits or probabilities, ``(batch,)`` or ``(batch, 1)``.
        from_logits: whether ``y_pred`` holds logits.
        non_negative: apply the non-negative correction.
        beta: threshold of the correction (``>= 0``).
        gamma: ``None`` for the paper's max, a float in ``(0, 1]`` for nnPU's step.
        sample_weight: optional non-negative per-row weights.

    Returns:
        The :class:`RiskTerms`.

    Example:
        >>> import numpy as np
        >>> from adpue_tf.labels import pack_e, pack_pu
        >>> y = np.concatenate([pack_pu([1, 0]), pack_e([1, 0])])
        >>> round(float(exposed_pu(y, np.zeros((4, 1)), from_logits=True).risk), 4)
        0.3466
    """
    check_options(from_logits=from_logits, non_negative=non_negative, beta=beta, gamma=gamma)
    b = unpack(y_true, y_pred, from_logits=from_logits, sample_weight=sample_weight)
    pu, ee = b.is_source(Source.PU), b.is_source(Source.E)
    pos = b.mean(b.w * b.l1, pu)
    neg = b.mean(b.e * b.l0, ee) - b.mean(b.w * b.l0, pu)
    return corrected(pos, neg, non_negative=non_negative, beta=beta, gamma=gamma)
