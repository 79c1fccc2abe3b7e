"""Observable tuning objectives: which held-out risk ranks the trials of a search.

Used by :class:`adpue_tf.tuning.DebiasedHyperModel`; see :func:`objective`
for the choice per loss. Needs keras-tuner (the ``tune`` extra).

Example:
    >>> objective("double_adss").name, objective("adpue").name
    ('val_l_risk', 'val_exposure_nll')
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import keras
import keras_tuner

from adpue_tf import losses as losses_lib
from adpue_tf.losses import DebiasedLoss
from adpue_tf.metrics.risk import RiskMetric
from adpue_tf.validation import CRITERIA as SCORES
from adpue_tf.validation import ExposureLikelihood, ReferenceRisk

__all__ = ["CRITERIA", "EXPOSURE_NLL", "LOSSES", "L_RISK", "REF_RISK", "default_criterion",
           "objective", "objective_metric"]

#: The criteria a tuner ranks its trials by, each a Keras metric on the held-out rows.
#: :func:`adpue_tf.validation_score`'s ``"exposure_brier"`` has no such metric.
CRITERIA = ("exposure_likelihood", "reference_risk")

#: The losses by key, for ``DebiasedHyperModel(loss=...)``: the package's
#: registry, :data:`adpue_tf.losses.LOSSES`.
LOSSES = losses_lib.LOSSES

#: Metric name of the L risk (ADS: cross-entropy with ``W`` on exposed SSE rows).
L_RISK = "l_risk"
#: Metric name of the exposure likelihood (:class:`adpue_tf.validation.ExposureLikelihood`).
EXPOSURE_NLL = "exposure_nll"
#: Metric name of the reference risk (:class:`adpue_tf.validation.ReferenceRisk`): the
#: risk at the reference options with ``f†`` fixed to the reference by the data.
REF_RISK = "ref_risk"

#: Losses trained on SSE data, where the L risk is observable; the others
#: (PUE, PE, FPUE and the PU baselines) are scored by their own risk.
_SSE_LOSSES: tuple[type[DebiasedLoss], ...] = (
    losses_lib.ADSLoss,
    losses_lib.ADSSLoss,
    losses_lib.DoubleADSSLoss,
    losses_lib.AD3SELoss,
    losses_lib.PNULoss,
)


def loss_class(loss: str | type[DebiasedLoss]) -> type[DebiasedLoss]:
    """Resolve a loss key, class name or class (:func:`adpue_tf.losses.get_class`)."""
    if isinstance(loss, str) or (isinstance(loss, type) and issubclass(loss, DebiasedLoss)):
        return losses_lib.get_class(loss)
    if isinstance(loss, DebiasedLoss):
        raise TypeError(f"`loss` must be a name or a DebiasedLoss class, not an instance "
                        f"({loss!r}): the hyper-model builds a new loss for every trial; "
                        f"pass {type(loss).__name__} and fixed options in `loss_options`.")
    raise TypeError(f"`loss` must be one of {sorted(LOSSES)} or a DebiasedLoss subclass, "
                    f"got {loss!r}.")


def default_criterion(loss: str | type[DebiasedLoss]) -> str:
    """``"reference_risk"`` for PE (its data has no rows for the likelihood), else
    ``"exposure_likelihood"``.

    Example:
        >>> default_criterion("adpe"), default_criterion("adpue")
        ('reference_risk', 'exposure_likelihood')
    """
    cls = loss_class(loss)
    return "reference_risk" if issubclass(cls, losses_lib.ADPELoss) else "exposure_likelihood"


def objective(loss: str | type[DebiasedLoss],
              criterion: str | None = None) -> keras_tuner.Objective:
    """The observable tuning objective of a loss, to minimise.

    * PUE, PE, FPUE (``adpue``, ``adpe``, ``adfpu``) and the PU baselines: a
      proper observable score of :mod:`adpue_tf.validation`, on held-out data
      in the validation layout (``adp.validation.pue_validation_data`` and
      its PE/FPUE siblings), by ``criterion``:
      ``"exposure_likelihood"`` gives ``val_exposure_nll`` (the likelihood of
      ``W`` under ``σ(z)·θ̂``; proper when ``θ̂ = θ``),
      ``"reference_risk"`` gives ``val_ref_risk`` (the risk at the reference
      options with ``f†`` fixed to one reference for every trial; proper when
      the reference is ``p``). The default (None) is the exposure likelihood,
      except for PE (``adpe``), whose data (P and E rows) carries no sample
      of ``ζ`` with ``θ̂`` and which is scored by the reference risk. Not the loss's own ``val_risk`` with
      ``f† = σ(z)`` of each trial: ``R(f; f)`` is not a proper score and
      rewards over-confidence (on 20k + 20k synthetic rows: the true logit
      0.441, the same logit doubled and shifted by +1: 0.383; see
      ``tests/test_validation.py``).
    * SSE losses (``ads``, ``adss``, ``double_adss``, ``ad3se``, PNU):
      ``val_l_risk``, the L risk (:class:`~adpue_tf.losses.ADSLoss`:
      cross-entropy with ``W`` on the exposed held-out SSE rows). Scoring by
      the trained risk would be circular for DoubleADSS and AD3SE: ``α`` sets
      the mixture ``α·SS + (1-α)·L`` (or ``α·R3 + (1-α)·L``) being measured,
      so each ``α`` would be judged by its own rule. On exposed rows
      ``W = Y``, and under strong ignorability (``Y ⫫ E | x``) they are a fair
      sample of ``Y`` given ``x``: the L risk is an unbiased estimate of the
      true cross-entropy on the exposed population, whatever the model or
      ``α``, and since cross-entropy is a proper scoring rule its minimiser
      is ``p(y=1|x)`` at every ``x``. It is the same for every trial, so it
      ranks ``α`` fairly (SS's risk also reads the model's own ``f†``,
      which is not a fixed yardstick either, hence ADSS uses it too; for
      ADS it equals ``val_risk``).

    Args:
        loss: a name of :data:`LOSSES` or a :class:`DebiasedLoss` subclass.
        criterion: one of :data:`CRITERIA`, or None for :func:`default_criterion`
            (ignored for the SSE losses).

    Returns:
        ``keras_tuner.Objective("val_exposure_nll" | "val_ref_risk" | "val_l_risk",
        direction="min")``.

    Raises:
        ValueError: on an unknown loss name or criterion, or the exposure
            likelihood for PE.
        TypeError: on anything but a name or a DebiasedLoss subclass.

    Example:
        >>> objective("adpue").name, objective("adpe", "reference_risk").name
        ('val_exposure_nll', 'val_ref_risk')
        >>> objective("ad3se").name
        'val_l_risk'
    """
    cls = loss_class(loss)
    if criterion is None:
        criterion = default_criterion(cls)
    if criterion in SCORES and criterion not in CRITERIA:
        raise ValueError(f"`criterion`={criterion!r} is a score of adp.validation_score, not a "
                         f"tuner objective (no Keras metric computes it); give one of "
                         f"{list(CRITERIA)} or None.")
    if criterion not in CRITERIA:
        raise ValueError(f"`criterion` must be one of {list(CRITERIA)} or None, got "
                         f"{criterion!r}.")
    if criterion == "exposure_likelihood" and issubclass(cls, losses_lib.ADPELoss):
        raise ValueError("criterion='exposure_likelihood' needs rows of a sample of ζ with "
                         "θ̂ (PU or U rows), which PE data lacks; use "
                         "criterion='reference_risk' for ADPE (or FPUE data and ADFPU).")
    if issubclass(cls, _SSE_LOSSES):
        name = L_RISK
    else:
        name = EXPOSURE_NLL if criterion == "exposure_likelihood" else REF_RISK
    return keras_tuner.Objective(f"val_{name}", direction="min")


def objective_metric(loss: str | type[DebiasedLoss], criterion: str | None = None, *,
                     prior: float | None = None,
                     loss_options: Mapping[str, Any] | None = None) -> keras.metrics.Metric:
    """The metric :func:`objective` reads (without its ``val_`` prefix), to compile with.

    ``l_risk``: the L risk (:class:`~adpue_tf.losses.ADSLoss`'s risk);
    ``ref_risk``: the loss at the reference options (``prior``, fixed
    ``loss_options``, the tuned entries at the loss's defaults), or nnPUE at
    its defaults for a loss without ``f†`` (the PU baselines, on PUE data);
    ``exposure_nll``: the exposure likelihood, with ``prior`` as ``q(w=1)``
    for PE/FPUE data (a PU baseline's prior is ``p(y=1)``, not used).

    Args:
        loss: a name of :data:`LOSSES` or a :class:`DebiasedLoss` subclass.
        criterion: as for :func:`objective`.
        prior: the reference class prior, for losses that take one.
        loss_options: the loss's fixed options.

    Returns:
        A fresh ``keras.metrics.Metric`` named after the objective.

    Example:
        >>> objective_metric("adpue").name, objective_metric("ads").name
        ('exposure_nll', 'l_risk')
    """
    cls = loss_class(loss)
    name = objective(cls, criterion).name.removeprefix("val_")
    if name == L_RISK:
        return RiskMetric(losses_lib.ADSLoss(from_logits=True), part="risk", name=L_RISK)
    if name == REF_RISK:
        if not cls.uses_dagger:
            return ReferenceRisk(losses_lib.ADPUELoss(from_logits=True), name=REF_RISK)
        kwargs: dict[str, Any] = {"from_logits": True, **(loss_options or {})}
        if prior is not None:
            kwargs["prior"] = prior
        return ReferenceRisk(cls(**kwargs), name=REF_RISK)
    p_data = issubclass(cls, (losses_lib.ADPELoss, losses_lib.ADFPULoss))
    return ExposureLikelihood(from_logits=True, prior=prior if p_data else None,
                              name=EXPOSURE_NLL)
