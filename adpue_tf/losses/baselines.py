"""The baselines as losses: Logit (BCE on ``W``), uPU, nnPU, PNU and IPS."""

from __future__ import annotations

from typing import ClassVar

import keras

from adpue_tf import risks
from adpue_tf.labels import Source
from adpue_tf.losses.base import REDUCTION, DebiasedLoss

__all__ = ["LogitLoss", "UPULoss", "NNPULoss", "PNULoss", "IPSLoss"]

_register = keras.saving.register_keras_serializable(package="adpue_tf")


@_register
class LogitLoss(DebiasedLoss):
    """Baseline "Logit": naive cross-entropy with ``W`` as the label.

    Learns ``q(w=1|x)`` ("shown and liked"), not ``p(y=1|x)``. See
    :func:`adpue_tf.risks.logit`. Key ``"logit"``.

    Args:
        from_logits: whether ``y_pred`` holds logits.
        reduction: only ``"sum_over_batch_size"`` (see :class:`DebiasedLoss`).
        name: name of the loss.

    Example:
        >>> import adpue_tf as adp
        >>> adp.LogitLoss(from_logits=True).name
        'logit_loss'
    """

    risk_fn = staticmethod(risks.logit)
    reads = (Source.PU, Source.SSE)
    needs = ((Source.PU, Source.SSE),)
    ignores = (Source.E,)  # the exposure log of PUE data
    uses_dagger = False

    def __init__(self, *, from_logits: bool = False, reduction: str = REDUCTION,
                 name: str = "logit_loss") -> None:
        super().__init__(from_logits=from_logits, reduction=reduction, name=name)


@_register
class UPULoss(DebiasedLoss):
    """Baseline uPU (du Plessis et al. 2015) with class prior ``π_y``.

    See :func:`adpue_tf.risks.upu`. Key ``"upu"``.

    Args:
        prior: ``p(y=1)`` in ``(0, 1)`` (an oracle value in the benchmarks).
        surrogate: the binary loss, ``"logistic"`` (log loss, default) or
            ``"sigmoid"`` (``ℓ1(z) = σ(-z)``, ``ℓ0(z) = σ(z)``: the default of
            Kiryo et al.'s code and of pulearn).
        from_logits: whether ``y_pred`` holds logits.
        reduction: only ``"sum_over_batch_size"`` (see :class:`DebiasedLoss`).
        name: name of the loss.

    Example:
        >>> import adpue_tf as adp
        >>> adp.UPULoss(prior=0.4, surrogate="sigmoid").get_config()["surrogate"]
        'sigmoid'
    """

    risk_fn = staticmethod(risks.upu)
    reads = (Source.PU, Source.P, Source.U)
    needs = ((Source.PU, Source.P), (Source.PU, Source.U))
    ignores = (Source.E,)  # the exposure log of PUE data
    uses_dagger = False

    def __init__(self, *, prior: float, surrogate: str = "logistic",
                 from_logits: bool = False, reduction: str = REDUCTION,
                 name: str = "upu_loss") -> None:
        super().__init__(from_logits=from_logits, reduction=reduction, name=name,
                         prior=prior, surrogate=surrogate)


@_register
class NNPULoss(DebiasedLoss):
    """Baseline nnPU (Kiryo et al. 2017) with class prior ``π_y``.

    See :func:`adpue_tf.risks.nnpu`. Key ``"nnpu"``.

    Args:
        prior: ``p(y=1)`` in ``(0, 1)``.
        surrogate: ``"logistic"`` (default) or ``"sigmoid"``, as :class:`UPULoss`.
        from_logits, non_negative, beta, gamma, reduction, name: as
            :class:`ADPUELoss`.

    Example:
        >>> import adpue_tf as adp
        >>> adp.NNPULoss(prior=0.4, gamma=1.0).get_config()["gamma"]
        1.0
    """

    risk_fn = staticmethod(risks.nnpu)
    reads = (Source.PU, Source.P, Source.U)
    needs = ((Source.PU, Source.P), (Source.PU, Source.U))
    ignores = (Source.E,)  # the exposure log of PUE data
    uses_dagger = False

    def __init__(self, *, prior: float, surrogate: str = "logistic",
                 from_logits: bool = False, non_negative: bool = True,
                 beta: float = 0.0, gamma: float | None = None,
                 reduction: str = REDUCTION, name: str = "nnpu_loss") -> None:
        super().__init__(from_logits=from_logits, reduction=reduction, name=name,
                         prior=prior, surrogate=surrogate, non_negative=non_negative,
                         beta=beta, gamma=gamma)


@_register
class PNULoss(DebiasedLoss):
    """Baseline PNU (Sakai et al. 2017) on SSE data.

    See :func:`adpue_tf.risks.pnu`. Key ``"pnu"``.

    Args:
        prior: ``p(y=1)`` in ``(0, 1)``.
        eta: PN/PU (``η >= 0``) or PN/NU (``η < 0``) mix, in ``[-1, 1]``.
        from_logits: whether ``y_pred`` holds logits.
        reduction: only ``"sum_over_batch_size"`` (see :class:`DebiasedLoss`).
        name: name of the loss.

    Example:
        >>> import adpue_tf as adp
        >>> adp.PNULoss(prior=0.5, eta=-0.2).get_config()["eta"]
        -0.2
    """

    risk_fn = staticmethod(risks.pnu)
    reads = (Source.SSE,)
    needs = ((Source.SSE,),)
    uses_dagger = False

    def __init__(self, *, prior: float, eta: float = 0.0, from_logits: bool = False,
                 reduction: str = REDUCTION, name: str = "pnu_loss") -> None:
        super().__init__(from_logits=from_logits, reduction=reduction, name=name,
                         prior=prior, eta=eta)


@_register
class IPSLoss(DebiasedLoss):
    """Baseline IPS (Saito et al. 2020): BCE on ``W`` weighted by ``1/θ̂`` (clipped).

    What ads teams use today: a propensity model ``θ̂(e=1|x)`` fitted on the
    exposure log (e.g. :func:`adpue_tf.exposure.fit_exposure_model`) reweights
    the cross-entropy on the PU rows. ``y_true`` carries ``θ̂`` of each row in
    column 3: build the batches with :func:`adpue_tf.data.with_propensity`.
    See :func:`adpue_tf.risks.ips`. Key ``"ips"``.

    Args:
        clip: floor of ``θ̂`` in the weight ``W / max(θ̂, clip)``, in (0, 1].
        from_logits: whether ``y_pred`` holds logits.
        reduction: only ``"sum_over_batch_size"`` (see :class:`DebiasedLoss`).
        name: name of the loss.

    Example:
        >>> import adpue_tf as adp
        >>> adp.IPSLoss(clip=0.1, from_logits=True).get_config()["clip"]
        0.1
    """

    risk_fn = staticmethod(risks.ips)
    reads = (Source.PU,)
    needs = ((Source.PU,),)
    ignores = (Source.E,)  # the exposure log of PUE data (θ̂ was fitted on it)
    uses_dagger = False
    #: ``y_true`` carries the propensity ``θ̂`` in column 3.
    needs_propensity: ClassVar[bool] = True

    def __init__(self, *, clip: float = 0.05, from_logits: bool = False,
                 reduction: str = REDUCTION, name: str = "ips_loss") -> None:
        super().__init__(from_logits=from_logits, reduction=reduction, name=name, clip=clip)
