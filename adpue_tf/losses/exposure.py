"""Losses that need no proxy ``f†``: the exposure likelihood, the exposure Brier risk, exposed PU.

Thin wrappers over :mod:`adpue_tf.risks.exposure`; the candidates of
:func:`adpue_tf.fit_pue` beyond the paper's.
"""

from __future__ import annotations

from typing import ClassVar

import keras

from adpue_tf import risks
from adpue_tf.labels import Source
from adpue_tf.losses.base import REDUCTION, DebiasedLoss

__all__ = ["ExposureLikelihoodLoss", "ExposureBrierLoss", "ExposedPULoss"]

_register = keras.saving.register_keras_serializable(package="adpue_tf")


@_register
class ExposureLikelihoodLoss(DebiasedLoss):
    """NLL of ``W`` under ``P(W=1|x) = σ(z)·θ̂(x)`` on PU rows (maximum likelihood of ``p``).

    ``y_true`` carries ``θ̂`` of each row in column 3: build the batches with
    :func:`adpue_tf.data.with_propensity`. See :func:`adpue_tf.risks.exposure_likelihood`.
    Key ``"exposure_likelihood"``.

    Args:
        from_logits: whether ``y_pred`` holds logits.
        reduction: only ``"sum_over_batch_size"`` (see :class:`DebiasedLoss`).
        name: name of the loss.

    Example:
        >>> import adpue_tf as adp
        >>> adp.ExposureLikelihoodLoss(from_logits=True).name
        'exposure_likelihood_loss'
    """

    risk_fn = staticmethod(risks.exposure_likelihood)
    reads = (Source.PU,)
    needs = ((Source.PU,),)
    ignores = (Source.E,)  # the exposure log of PUE data (θ̂ was fitted on it)
    uses_dagger = False
    #: ``y_true`` carries the propensity ``θ̂`` in column 3.
    needs_propensity: ClassVar[bool] = True

    def __init__(self, *, from_logits: bool = False, reduction: str = REDUCTION,
                 name: str = "exposure_likelihood_loss") -> None:
        super().__init__(from_logits=from_logits, reduction=reduction, name=name)


@_register
class ExposureBrierLoss(DebiasedLoss):
    """``Ê_E[E·f²] - 2·Ê_PU[W·f]``: squared error to ``p`` weighted by ``θ``, no ``θ̂`` needed.

    Rows of sources PU and E (:func:`adpue_tf.data.pue_dataset`). See
    :func:`adpue_tf.risks.exposure_brier`. Key ``"exposure_brier"``.

    Args:
        from_logits: whether ``y_pred`` holds logits.
        reduction: only ``"sum_over_batch_size"`` (see :class:`DebiasedLoss`).
        name: name of the loss.

    Example:
        >>> import adpue_tf as adp
        >>> adp.ExposureBrierLoss(from_logits=True).get_config()["from_logits"]
        True
    """

    risk_fn = staticmethod(risks.exposure_brier)
    reads = (Source.PU, Source.E)
    needs = ((Source.PU,), (Source.E,))
    uses_dagger = False

    def __init__(self, *, from_logits: bool = False, reduction: str = REDUCTION,
                 name: str = "exposure_brier_loss") -> None:
        super().__init__(from_logits=from_logits, reduction=reduction, name=name)


@_register
class ExposedPULoss(DebiasedLoss):
    """nnPU with the observed positives as P and the exposed log rows as U (``θ``-weighted BCE).

    Rows of sources PU and E (:func:`adpue_tf.data.pue_dataset`). See
    :func:`adpue_tf.risks.exposed_pu`. Key ``"exposed_pu"``.

    Args:
        from_logits: whether ``y_pred`` holds logits.
        non_negative: apply the non-negative correction to ``R-``.
        beta: threshold of the correction (``>= 0``).
        gamma: ``None`` for the paper's max, a float in ``(0, 1]`` for nnPU's step.
        reduction: only ``"sum_over_batch_size"`` (see :class:`DebiasedLoss`).
        name: name of the loss.

    Example:
        >>> import adpue_tf as adp
        >>> adp.ExposedPULoss(gamma=1.0).get_config()["gamma"]
        1.0
    """

    risk_fn = staticmethod(risks.exposed_pu)
    reads = (Source.PU, Source.E)
    needs = ((Source.PU,), (Source.E,))
    uses_dagger = False

    def __init__(self, *, from_logits: bool = False, non_negative: bool = True,
                 beta: float = 0.0, gamma: float | None = None, reduction: str = REDUCTION,
                 name: str = "exposed_pu_loss") -> None:
        super().__init__(from_logits=from_logits, reduction=reduction, name=name,
                         non_negative=non_negative, beta=beta, gamma=gamma)
