"""Keras ``Loss`` classes: thin wrappers over :mod:`adpue_tf.risks`.

Every class takes a packed ``y_true`` (see :mod:`adpue_tf.labels`) and returns
the batch's scalar risk, computed in float32 from logits whatever the model's
dtype policy. ``sample_weight`` weighs rows inside each group mean.

Example:
    >>> import keras, adpue_tf as adp
    >>> model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    >>> model.compile(optimizer="adam", loss=adp.ADPUELoss(from_logits=True))
"""

from __future__ import annotations

from typing import Any, Callable, ClassVar

import keras

from adpue_tf import risks
from adpue_tf._checks import check_options

__all__ = [
    "DebiasedLoss",
    "ADPUELoss",
    "ADPELoss",
    "ADFPULoss",
    "ADSLoss",
    "ADSSLoss",
    "DoubleADSSLoss",
    "AD3SELoss",
    "LogitLoss",
    "UPULoss",
    "NNPULoss",
    "PNULoss",
]

_register = keras.saving.register_keras_serializable(package="adpue_tf")


class DebiasedLoss(keras.losses.Loss):
    """Base class: a Keras loss whose value is one of the risks of SPEC.md.

    Subclasses set :attr:`risk_fn` and pass their options to ``__init__``.
    :meth:`terms` returns the risk with its parts (``R+``, ``R-``, whether the
    non-negative correction fired), for metrics and debugging.

    Args:
        from_logits: whether ``y_pred`` holds logits (else probabilities).
        name: name of the loss.
        **options: the risk's hyper-parameters, validated here.

    Example:
        >>> import numpy as np, adpue_tf as adp
        >>> y = adp.pack_labels(adp.Source.PU, w=[1, 0])
        >>> loss = adp.ADPUELoss(from_logits=True)
        >>> round(float(loss(y, np.zeros((2, 1), "float32"))), 4)
        0.6931
    """

    #: The pure function of :mod:`adpue_tf.risks` this class wraps.
    risk_fn: ClassVar[Callable[..., risks.RiskTerms]]
    #: Whether the risk reads the proxy ``f†`` (column 3 of ``y_true``).
    uses_dagger: ClassVar[bool] = True

    def __init__(self, *, from_logits: bool = False, name: str | None = None,
                 **options: Any) -> None:
        self._options = check_options(from_logits=from_logits, **options)
        super().__init__(name=name, reduction="sum_over_batch_size", dtype="float32")

    @property
    def from_logits(self) -> bool:
        """Whether ``y_pred`` holds logits."""
        return self._options["from_logits"]

    def terms(self, y_true: Any, y_pred: Any, sample_weight: Any = None) -> risks.RiskTerms:
        """The risk of a batch and its parts.

        Args:
            y_true: packed labels ``(batch, 3|4)``.
            y_pred: model output ``(batch,)`` or ``(batch, 1)``.
            sample_weight: optional non-negative per-row weights.

        Returns:
            :class:`adpue_tf.risks.RiskTerms`.
        """
        return type(self).risk_fn(y_true, y_pred, sample_weight=sample_weight,
                                  **self._options)

    def __call__(self, y_true: Any, y_pred: Any, sample_weight: Any = None) -> Any:
        with keras.name_scope(self.name):
            return self.terms(y_true, y_pred, sample_weight).loss

    def call(self, y_true: Any, y_pred: Any) -> Any:
        return self.terms(y_true, y_pred).loss

    def get_config(self) -> dict[str, Any]:
        return {"name": self.name, **self._options}

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> "DebiasedLoss":
        return cls(**config)


@_register
class ADPUELoss(DebiasedLoss):
    """nnPUE (method ADPUE): PU data plus a separate exposure log.

    Rows of sources ``PU`` (label ``W``) and ``E`` (label ``E``); build them
    with :func:`adpue_tf.data.pue_dataset`. See :func:`adpue_tf.risks.nnpue`.

    Args:
        from_logits: whether ``y_pred`` holds logits.
        non_negative: apply the non-negative correction to ``R-``.
        beta: threshold of the correction, ``>= 0``.
        gamma: ``None`` (the paper's ``max``) or nnPU's step size in ``(0, 1]``.
        dagger_gradient: let the gradient flow through ``f† = σ(z)`` (study only).
        name: name of the loss.

    Example:
        >>> import keras, adpue_tf as adp
        >>> m = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
        >>> m.compile("adam", loss=adp.ADPUELoss(from_logits=True))
    """

    risk_fn = staticmethod(risks.nnpue)

    def __init__(self, *, from_logits: bool = False, non_negative: bool = True,
                 beta: float = 0.0, gamma: float | None = None,
                 dagger_gradient: bool = False, name: str = "adpue_loss") -> None:
        super().__init__(from_logits=from_logits, name=name, non_negative=non_negative,
                         beta=beta, gamma=gamma, dagger_gradient=dagger_gradient)


@_register
class ADPELoss(DebiasedLoss):
    """nnPE (method ADPE): positive-only data, exposure data, known prior.

    Rows of sources ``P`` and ``E`` (:func:`adpue_tf.data.pe_dataset`); the
    ``x`` of the exposure data serve as unlabeled data. See
    :func:`adpue_tf.risks.nnpe`.

    Args:
        prior: class prior of ``W``, ``π = q(w=1)``, in ``(0, 1)``.
        from_logits, non_negative, beta, gamma, dagger_gradient, name: as
            :class:`ADPUELoss`.

    Example:
        >>> import adpue_tf as adp
        >>> adp.ADPELoss(prior=0.2, from_logits=True).get_config()["prior"]
        0.2
    """

    risk_fn = staticmethod(risks.nnpe)

    def __init__(self, *, prior: float, from_logits: bool = False,
                 non_negative: bool = True, beta: float = 0.0,
                 gamma: float | None = None, dagger_gradient: bool = False,
                 name: str = "adpe_loss") -> None:
        super().__init__(from_logits=from_logits, name=name, prior=prior,
                         non_negative=non_negative, beta=beta, gamma=gamma,
                         dagger_gradient=dagger_gradient)


@_register
class ADFPULoss(DebiasedLoss):
    """FPUE (method ADFPU): positive, unlabeled and exposure data, known prior.

    Rows of sources ``P``, ``U`` and ``E`` (:func:`adpue_tf.data.fpue_dataset`);
    the unlabeled mean pools ``U`` and ``E``. See :func:`adpue_tf.risks.fpue`.

    Args:
        prior: class prior of ``W`` in ``(0, 1)``.
        from_logits, non_negative, beta, gamma, dagger_gradient, name: as
            :class:`ADPUELoss`.

    Example:
        >>> import adpue_tf as adp
        >>> adp.ADFPULoss(prior=0.3).name
        'adfpu_loss'
    """

    risk_fn = staticmethod(risks.fpue)

    def __init__(self, *, prior: float, from_logits: bool = False,
                 non_negative: bool = True, beta: float = 0.0,
                 gamma: float | None = None, dagger_gradient: bool = False,
                 name: str = "adfpu_loss") -> None:
        super().__init__(from_logits=from_logits, name=name, prior=prior,
                         non_negative=non_negative, beta=beta, gamma=gamma,
                         dagger_gradient=dagger_gradient)


@_register
class ADSLoss(DebiasedLoss):
    """L (method ADS): cross-entropy with label ``W`` on exposed SSE rows.

    Unbiased for the true risk on SSE data (:func:`adpue_tf.data.sse_dataset`).

    Args:
        from_logits: whether ``y_pred`` holds logits.
        name: name of the loss.

    Example:
        >>> import adpue_tf as adp
        >>> adp.ADSLoss(from_logits=True).uses_dagger
        False
    """

    risk_fn = staticmethod(risks.ads)
    uses_dagger = False

    def __init__(self, *, from_logits: bool = False, name: str = "ads_loss") -> None:
        super().__init__(from_logits=from_logits, name=name)


@_register
class ADSSLoss(DebiasedLoss):
    """SS (method ADSS): all SSE rows, unexposed ones through the proxy ``f†``.

    Args:
        from_logits: whether ``y_pred`` holds logits.
        dagger_gradient: let the gradient flow through ``f† = σ(z)``.
        name: name of the loss.

    Example:
        >>> import adpue_tf as adp
        >>> adp.ADSSLoss().from_logits
        False
    """

    risk_fn = staticmethod(risks.adss)

    def __init__(self, *, from_logits: bool = False, dagger_gradient: bool = False,
                 name: str = "adss_loss") -> None:
        super().__init__(from_logits=from_logits, name=name,
                         dagger_gradient=dagger_gradient)


@_register
class DoubleADSSLoss(DebiasedLoss):
    """DoubleADSS (method DADSS): ``α·SS + (1-α)·L`` on SSE rows.

    Args:
        alpha: mixing weight in ``[0, 1]``.
        from_logits, dagger_gradient, name: as :class:`ADSSLoss`.

    Example:
        >>> import adpue_tf as adp
        >>> adp.DoubleADSSLoss(alpha=0.5).get_config()["alpha"]
        0.5
    """

    risk_fn = staticmethod(risks.double_adss)

    def __init__(self, *, alpha: float = 0.5, from_logits: bool = False,
                 dagger_gradient: bool = False, name: str = "double_adss_loss") -> None:
        super().__init__(from_logits=from_logits, name=name, alpha=alpha,
                         dagger_gradient=dagger_gradient)


@_register
class AD3SELoss(DebiasedLoss):
    """AD3SE: SSE plus PU data, ``α·R3 + (1-α)·L``.

    Rows of sources ``SSE`` and ``PU`` (:func:`adpue_tf.data.sse_pu_dataset`).
    See :func:`adpue_tf.risks.ad3se`.

    Args:
        alpha: mixing weight in ``[0, 1]``.
        from_logits, non_negative, beta, gamma, dagger_gradient, name: as
            :class:`ADPUELoss`.

    Example:
        >>> import adpue_tf as adp
        >>> adp.AD3SELoss(alpha=0.7).get_config()["alpha"]
        0.7
    """

    risk_fn = staticmethod(risks.ad3se)

    def __init__(self, *, alpha: float = 0.5, from_logits: bool = False,
                 non_negative: bool = True, beta: float = 0.0,
                 gamma: float | None = None, dagger_gradient: bool = False,
                 name: str = "ad3se_loss") -> None:
        super().__init__(from_logits=from_logits, name=name, alpha=alpha,
                         non_negative=non_negative, beta=beta, gamma=gamma,
                         dagger_gradient=dagger_gradient)


@_register
class LogitLoss(DebiasedLoss):
    """Baseline "Logit": naive cross-entropy with ``W`` as the label.

    Learns ``q(w=1|x)`` ("shown and liked"), not ``p(y=1|x)``.

    Args:
        from_logits: whether ``y_pred`` holds logits.
        name: name of the loss.

    Example:
        >>> import adpue_tf as adp
        >>> adp.LogitLoss(from_logits=True).name
        'logit_loss'
    """

    risk_fn = staticmethod(risks.logit)
    uses_dagger = False

    def __init__(self, *, from_logits: bool = False, name: str = "logit_loss") -> None:
        super().__init__(from_logits=from_logits, name=name)


@_register
class UPULoss(DebiasedLoss):
    """Baseline uPU (du Plessis et al. 2015) with class prior ``π_y``.

    Args:
        prior: ``p(y=1)`` in ``(0, 1)`` (an oracle value in the benchmarks).
        from_logits: whether ``y_pred`` holds logits.
        name: name of the loss.

    Example:
        >>> import adpue_tf as adp
        >>> adp.UPULoss(prior=0.4).get_config()["prior"]
        0.4
    """

    risk_fn = staticmethod(risks.upu)
    uses_dagger = False

    def __init__(self, *, prior: float, from_logits: bool = False,
                 name: str = "upu_loss") -> None:
        super().__init__(from_logits=from_logits, name=name, prior=prior)


@_register
class NNPULoss(DebiasedLoss):
    """Baseline nnPU (Kiryo et al. 2017) with class prior ``π_y``.

    Args:
        prior: ``p(y=1)`` in ``(0, 1)``.
        from_logits, non_negative, beta, gamma, name: as :class:`ADPUELoss`.

    Example:
        >>> import adpue_tf as adp
        >>> adp.NNPULoss(prior=0.4, gamma=1.0).get_config()["gamma"]
        1.0
    """

    risk_fn = staticmethod(risks.nnpu)
    uses_dagger = False

    def __init__(self, *, prior: float, from_logits: bool = False,
                 non_negative: bool = True, beta: float = 0.0,
                 gamma: float | None = None, name: str = "nnpu_loss") -> None:
        super().__init__(from_logits=from_logits, name=name, prior=prior,
                         non_negative=non_negative, beta=beta, gamma=gamma)


@_register
class PNULoss(DebiasedLoss):
    """Baseline PNU (Sakai et al. 2017) on SSE data.

    Args:
        prior: ``p(y=1)`` in ``(0, 1)``.
        eta: PN/PU (``η >= 0``) or PN/NU (``η < 0``) mix, in ``[-1, 1]``.
        from_logits: whether ``y_pred`` holds logits.
        name: name of the loss.

    Example:
        >>> import adpue_tf as adp
        >>> adp.PNULoss(prior=0.5, eta=-0.2).get_config()["eta"]
        -0.2
    """

    risk_fn = staticmethod(risks.pnu)
    uses_dagger = False

    def __init__(self, *, prior: float, eta: float = 0.0, from_logits: bool = False,
                 name: str = "pnu_loss") -> None:
        super().__init__(from_logits=from_logits, name=name, prior=prior, eta=eta)
