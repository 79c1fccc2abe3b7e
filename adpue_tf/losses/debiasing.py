"""The paper's debiased losses: ADPUE, ADPE, ADFPU, ADS, ADSS, Double ADSS and AD3SE."""

from __future__ import annotations

import keras

from adpue_tf import risks
from adpue_tf.labels import Source
from adpue_tf.losses.base import REDUCTION, DebiasedLoss

__all__ = ["ADPUELoss", "ADPELoss", "ADFPULoss", "ADSLoss", "ADSSLoss", "DoubleADSSLoss", "AD3SELoss"]

_register = keras.saving.register_keras_serializable(package="adpue_tf")


@_register
class ADPUELoss(DebiasedLoss):
    """nnPUE (method ADPUE): PU data plus a separate exposure log.

    Rows of sources ``PU`` (label ``W``) and ``E`` (label ``E``); build them
    with :func:`adpue_tf.data.pue_dataset`. See :func:`adpue_tf.risks.adpue`.
    Key ``"adpue"``.

    Args:
        from_logits: whether ``y_pred`` holds logits.
        non_negative: apply the non-negative correction to ``R-``.
        beta: threshold of the correction, ``>= 0``.
        gamma: ``None`` (the paper's ``max``) or nnPU's step size in ``(0, 1]``.
        dagger_gradient: let the gradient flow through ``f† = σ(z)`` (study only).
        reduction: only ``"sum_over_batch_size"`` (see :class:`DebiasedLoss`).
        name: name of the loss.

    Example:
        >>> import keras, adpue_tf as adp
        >>> m = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
        >>> m.compile("adam", loss=adp.ADPUELoss(from_logits=True))
    """

    risk_fn = staticmethod(risks.adpue)
    reads = (Source.PU, Source.E)
    needs = ((Source.PU,), (Source.E,))
    dagger_read_on = (Source.E,)

    def __init__(self, *, from_logits: bool = False, non_negative: bool = True,
                 beta: float = 0.0, gamma: float | None = None,
                 dagger_gradient: bool = False, reduction: str = REDUCTION,
                 name: str = "adpue_loss") -> None:
        super().__init__(from_logits=from_logits, reduction=reduction, name=name,
                         non_negative=non_negative, beta=beta, gamma=gamma,
                         dagger_gradient=dagger_gradient)


@_register
class ADPELoss(DebiasedLoss):
    """nnPE (method ADPE): positive-only data, exposure data, known prior.

    Rows of sources ``P`` and ``E`` (:func:`adpue_tf.data.pe_dataset`); the
    ``x`` of the exposure data serve as unlabeled data. See
    :func:`adpue_tf.risks.adpe`. Key ``"adpe"``.

    Args:
        prior: class prior of ``W``, ``π = q(w=1)``, in ``(0, 1)``.
        from_logits, non_negative, beta, gamma, dagger_gradient, reduction, name:
            as :class:`ADPUELoss`.

    Example:
        >>> import adpue_tf as adp
        >>> adp.ADPELoss(prior=0.2, from_logits=True).get_config()["prior"]
        0.2
    """

    risk_fn = staticmethod(risks.adpe)
    reads = (Source.P, Source.E)
    needs = ((Source.P,), (Source.E,))
    dagger_read_on = (Source.E,)

    def __init__(self, *, prior: float, from_logits: bool = False,
                 non_negative: bool = True, beta: float = 0.0,
                 gamma: float | None = None, dagger_gradient: bool = False,
                 reduction: str = REDUCTION, name: str = "adpe_loss") -> None:
        super().__init__(from_logits=from_logits, reduction=reduction, name=name,
                         prior=prior, non_negative=non_negative, beta=beta, gamma=gamma,
                         dagger_gradient=dagger_gradient)


@_register
class ADFPULoss(DebiasedLoss):
    """FPUE (method ADFPU): positive, unlabeled and exposure data, known prior.

    Rows of sources ``P``, ``U`` and ``E`` (:func:`adpue_tf.data.fpue_dataset`);
    the unlabeled mean pools ``U`` and ``E``. See :func:`adpue_tf.risks.adfpu`.
    Key ``"adfpu"``.

    Args:
        prior: class prior of ``W`` in ``(0, 1)``.
        from_logits, non_negative, beta, gamma, dagger_gradient, reduction, name:
            as :class:`ADPUELoss`.

    Example:
        >>> import adpue_tf as adp
        >>> adp.ADFPULoss(prior=0.3).name
        'adfpu_loss'
    """

    risk_fn = staticmethod(risks.adfpu)
    reads = (Source.P, Source.U, Source.E)
    needs = ((Source.P,), (Source.E,))
    dagger_read_on = (Source.E,)

    def __init__(self, *, prior: float, from_logits: bool = False,
                 non_negative: bool = True, beta: float = 0.0,
                 gamma: float | None = None, dagger_gradient: bool = False,
                 reduction: str = REDUCTION, name: str = "adfpu_loss") -> None:
        super().__init__(from_logits=from_logits, reduction=reduction, name=name,
                         prior=prior, non_negative=non_negative, beta=beta, gamma=gamma,
                         dagger_gradient=dagger_gradient)


@_register
class ADSLoss(DebiasedLoss):
    """L (method ADS): cross-entropy with label ``W`` on exposed SSE rows.

    Unbiased for the true risk on SSE data (:func:`adpue_tf.data.sse_dataset`).
    See :func:`adpue_tf.risks.ads`. Key ``"ads"``.

    Args:
        from_logits: whether ``y_pred`` holds logits.
        reduction: only ``"sum_over_batch_size"`` (see :class:`DebiasedLoss`).
        name: name of the loss.

    Example:
        >>> import adpue_tf as adp
        >>> adp.ADSLoss(from_logits=True).uses_dagger
        False
    """

    risk_fn = staticmethod(risks.ads)
    reads = (Source.SSE,)
    needs = ((Source.SSE,),)
    ignores = (Source.PU,)  # the PU rows of 3SE data
    uses_dagger = False

    def __init__(self, *, from_logits: bool = False, reduction: str = REDUCTION,
                 name: str = "ads_loss") -> None:
        super().__init__(from_logits=from_logits, reduction=reduction, name=name)


@_register
class ADSSLoss(DebiasedLoss):
    """SS (method ADSS): all SSE rows, unexposed ones through the proxy ``f†``.

    See :func:`adpue_tf.risks.adss`. Key ``"adss"``.

    Args:
        from_logits: whether ``y_pred`` holds logits.
        dagger_gradient: let the gradient flow through ``f† = σ(z)``.
        reduction: only ``"sum_over_batch_size"`` (see :class:`DebiasedLoss`).
        name: name of the loss.

    Example:
        >>> import adpue_tf as adp
        >>> adp.ADSSLoss().from_logits
        False
    """

    risk_fn = staticmethod(risks.adss)
    reads = (Source.SSE,)
    needs = ((Source.SSE,),)
    dagger_read_on = (Source.SSE,)

    def __init__(self, *, from_logits: bool = False, dagger_gradient: bool = False,
                 reduction: str = REDUCTION, name: str = "adss_loss") -> None:
        super().__init__(from_logits=from_logits, reduction=reduction, name=name,
                         dagger_gradient=dagger_gradient)


@_register
class DoubleADSSLoss(DebiasedLoss):
    """DoubleADSS (method DADSS): ``α·SS + (1-α)·L`` on SSE rows.

    See :func:`adpue_tf.risks.double_adss`. Key ``"double_adss"``.

    Args:
        alpha: mixing weight in ``[0, 1]``.
        from_logits, dagger_gradient, reduction, name: as :class:`ADSSLoss`.

    Example:
        >>> import adpue_tf as adp
        >>> adp.DoubleADSSLoss(alpha=0.5).get_config()["alpha"]
        0.5
    """

    risk_fn = staticmethod(risks.double_adss)
    reads = (Source.SSE,)
    needs = ((Source.SSE,),)
    dagger_read_on = (Source.SSE,)

    def __init__(self, *, alpha: float = 0.5, from_logits: bool = False,
                 dagger_gradient: bool = False, reduction: str = REDUCTION,
                 name: str = "double_adss_loss") -> None:
        super().__init__(from_logits=from_logits, reduction=reduction, name=name,
                         alpha=alpha, dagger_gradient=dagger_gradient)


@_register
class AD3SELoss(DebiasedLoss):
    """AD3SE: SSE plus PU data, ``α·R3 + (1-α)·L``.

    Rows of sources ``SSE`` and ``PU`` (:func:`adpue_tf.data.sse_pu_dataset`).
    See :func:`adpue_tf.risks.ad3se`. Key ``"ad3se"``.

    Args:
        alpha: mixing weight in ``[0, 1]``.
        from_logits, non_negative, beta, gamma, dagger_gradient, reduction, name:
            as :class:`ADPUELoss`.

    Example:
        >>> import adpue_tf as adp
        >>> adp.AD3SELoss(alpha=0.7).get_config()["alpha"]
        0.7
    """

    risk_fn = staticmethod(risks.ad3se)
    reads = (Source.SSE, Source.PU)
    needs = ((Source.SSE,),)
    dagger_read_on = (Source.SSE,)

    def __init__(self, *, alpha: float = 0.5, from_logits: bool = False,
                 non_negative: bool = True, beta: float = 0.0,
                 gamma: float | None = None, dagger_gradient: bool = False,
                 reduction: str = REDUCTION, name: str = "ad3se_loss") -> None:
        super().__init__(from_logits=from_logits, reduction=reduction, name=name,
                         alpha=alpha, non_negative=non_negative, beta=beta, gamma=gamma,
                         dagger_gradient=dagger_gradient)
