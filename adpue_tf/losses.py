"""Keras ``Loss`` classes: thin wrappers over :mod:`adpue_tf.risks`.

Every class takes a packed ``y_true`` (see :mod:`adpue_tf.labels`) and returns
the batch's scalar risk, computed in float32 from logits whatever the model's
dtype policy. ``sample_weight`` weighs rows inside each group mean.

One vocabulary, as Keras's ``huber`` / ``Huber`` / ``"huber"``: the risk
function :func:`adpue_tf.risks.adpue`, the class :class:`ADPUELoss` and the
key ``"adpue"`` name the same thing, with the same options and defaults; the
same holds for every loss here (:data:`LOSSES`). :func:`get` resolves a key, a
class name, a serialized config or an instance to a loss; :func:`get_class`
gives the class (whose ``risk_fn`` is the function).

Example:
    >>> import keras, adpue_tf as adp
    >>> model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    >>> model.compile(optimizer="adam", loss=adp.ADPUELoss(from_logits=True))
    >>> adp.losses.get("adpe", prior=0.3, from_logits=True).name
    'adpe_loss'
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Callable, ClassVar, cast

import keras
import tensorflow as tf

from adpue_tf import risks
from adpue_tf._batch import check_sources
from adpue_tf._checks import check_options
from adpue_tf._guards import guard_finite
from adpue_tf.labels import Source

__all__ = [
    "LOSSES",
    "REDUCTION",
    "get",
    "get_class",
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

#: The one reduction a debiased loss has (Keras's default): see :class:`DebiasedLoss`.
REDUCTION = "sum_over_batch_size"
#: How many recent calls a loss remembers for :meth:`DebiasedLoss.last_terms`
#: (one per replica of a distribution strategy is enough).
_REMEMBERED_CALLS = 16


def _check_reduction(cls_name: str, reduction: Any) -> str:
    if reduction != REDUCTION:
        raise ValueError(
            f"{cls_name} does not take reduction={reduction!r}: its value is a risk "
            "made of group means, each divided by the global row count of its source "
            "(PU, E, P, U, SSE) in the batch, with the non-negative correction applied "
            "to their combination, not a reduction of per-row losses, so 'sum' and "
            f"'none' have no per-row meaning. Keep the default reduction={REDUCTION!r}; "
            "to weigh rows, pass `sample_weight`.")
    return reduction


class DebiasedLoss(keras.losses.Loss):
    """Base class: a Keras loss whose value is one of the risks of SPEC.md.

    Subclasses set :attr:`risk_fn` and pass their options to ``__init__``.
    :meth:`terms` returns the risk with its parts (``R+``, ``R-``, whether the
    non-negative correction fired), for metrics and debugging.

    A Keras loss usually computes per-row losses in ``call`` and reduces them
    in ``__call__`` by its ``reduction``. A debiased risk has no per-row
    losses: it combines group means, each divided by the global row count of
    its source, and the non-negative correction acts on the combination. So
    ``__call__`` returns the batch's risk directly (``terms(...).loss``), there
    is no ``call``, and ``reduction`` is always ``"sum_over_batch_size"`` (a
    batch mean, as Keras's default): ``"sum"`` and ``"none"`` are refused with
    a ValueError that says why.

    Each call remembers its terms for the tensors it was given, so that
    :func:`adpue_tf.risk_tracking.risk_metrics` reuses them in the same training
    step instead of computing the risk again (:meth:`last_terms`).

    Args:
        from_logits: whether ``y_pred`` holds logits (else probabilities).
        reduction: only ``"sum_over_batch_size"`` (see above).
        name: name of the loss.
        **options: the risk's hyper-parameters, validated here.

    Raises:
        ValueError: on a ``reduction`` other than ``"sum_over_batch_size"`` or
            an option out of range.
        TypeError: on an option of the wrong type.

    Example:
        >>> import numpy as np, adpue_tf as adp
        >>> y = np.concatenate([adp.pack_labels(adp.Source.PU, w=[1, 0]),
        ...                     adp.pack_labels(adp.Source.E, e=[1, 1])])
        >>> loss = adp.ADPUELoss(from_logits=True)
        >>> round(float(loss(y, np.zeros((4, 1), "float32"))), 4)
        0.6931
    """

    #: The pure function of :mod:`adpue_tf.risks` this class wraps.
    risk_fn: ClassVar[Callable[..., risks.RiskTerms]]
    #: Whether the risk reads the proxy ``f†`` (column 3 of ``y_true``).
    uses_dagger: ClassVar[bool] = True
    #: The sources whose rows the risk reads; a batch with rows of any other
    #: source (except :attr:`ignores`) is refused, naming the sources found
    #: (ValueError in eager mode, InvalidArgumentError inside ``fit``).
    reads: ClassVar[tuple[Source, ...]] = ()
    #: Groups of sources: a batch needs at least one row of each group
    #: (counted over all replicas of a distribution strategy).
    needs: ClassVar[tuple[tuple[Source, ...], ...]] = ()
    #: Sources whose rows a batch may hold and the risk leaves out.
    ignores: ClassVar[tuple[Source, ...]] = ()

    def __init__(self, *, from_logits: bool = False, reduction: str = REDUCTION,
                 name: str | None = None, **options: Any) -> None:
        _check_reduction(type(self).__name__, reduction)
        self._options = check_options(from_logits=from_logits, **options)
        super().__init__(name=name, reduction=reduction, dtype="float32")
        self._calls: dict[tuple[int, int, int], tuple[Any, ...]] = {}

    @property
    def from_logits(self) -> bool:
        """Whether ``y_pred`` holds logits."""
        return self._options["from_logits"]

    @classmethod
    def option_names(cls) -> tuple[str, ...]:
        """The options of this loss: its keyword arguments but ``reduction`` and ``name``.

        Example:
            >>> import adpue_tf as adp
            >>> adp.UPULoss.option_names()
            ('prior', 'surrogate', 'from_logits')
        """
        params = inspect.signature(cls.__init__).parameters.values()
        return tuple(p.name for p in params if p.kind is p.KEYWORD_ONLY
                     and p.name not in ("reduction", "name"))

    def terms(self, y_true: Any, y_pred: Any, sample_weight: Any = None) -> risks.RiskTerms:
        """The risk of a batch and its parts.

        Args:
            y_true: packed labels ``(batch, 3|4)``.
            y_pred: model output ``(batch,)`` or ``(batch, 1)``.
            sample_weight: optional non-negative per-row weights.

        Returns:
            :class:`adpue_tf.risks.RiskTerms`.
        """
        name = type(self).__name__
        if self.reads:  # a subclass that declares no sources is not checked
            y_true = check_sources(y_true, loss=name, reads=self.reads, needs=self.needs,
                                   ignores=self.ignores)
        terms = type(self).risk_fn(y_true, y_pred, sample_weight=sample_weight,
                                   **self._options)
        return terms._replace(loss=guard_finite(
            terms.loss, f"{name}: the loss is NaN or infinite, so training stops before "
            "the weights are updated. Look for NaN, inf or huge values in the features "
            "or `sample_weight`."))

    def __call__(self, y_true: Any, y_pred: Any, sample_weight: Any = None) -> Any:
        """The batch's risk: ``terms(y_true, y_pred, sample_weight).loss``."""
        with keras.name_scope(self.name):
            terms = self.terms(y_true, y_pred, sample_weight)
        if all(v is None or isinstance(v, tf.Tensor) for v in (y_true, y_pred, sample_weight)):
            # Tensors are immutable: the terms stay valid for these very objects.
            key = (id(y_true), id(y_pred), id(sample_weight))
            self._calls.pop(key, None)
            self._calls[key] = (y_true, y_pred, sample_weight, terms)
            while len(self._calls) > _REMEMBERED_CALLS:
                self._calls.pop(next(iter(self._calls)))
        return terms.loss

    def last_terms(self, y_true: Any, y_pred: Any,
                   sample_weight: Any = None) -> risks.RiskTerms | None:
        """The terms a recent call computed on these very tensors, else None.

        In a Keras training or test step the loss and the metrics receive the
        same ``y_true`` and ``y_pred`` objects, so a metric can read the
        step's risk parts without computing the risk again. Only tensors
        (immutable) are remembered, never NumPy arrays or variables.

        Args:
            y_true, y_pred, sample_weight: the objects the loss was called with.

        Returns:
            The :class:`~adpue_tf.risks.RiskTerms` of that call, or None.
        """
        hit = self._calls.get((id(y_true), id(y_pred), id(sample_weight)))
        if hit is None or hit[0] is not y_true or hit[1] is not y_pred \
                or hit[2] is not sample_weight:
            return None
        return hit[3]

    def __deepcopy__(self, memo: dict) -> "DebiasedLoss":
        return type(self).from_config(self.get_config())

    def get_config(self) -> dict[str, Any]:
        return {"name": self.name, "reduction": self.reduction, **self._options}

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> "DebiasedLoss":
        return cls(**config)


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

    def __init__(self, *, alpha: float = 0.5, from_logits: bool = False,
                 non_negative: bool = True, beta: float = 0.0,
                 gamma: float | None = None, dagger_gradient: bool = False,
                 reduction: str = REDUCTION, name: str = "ad3se_loss") -> None:
        super().__init__(from_logits=from_logits, reduction=reduction, name=name,
                         alpha=alpha, non_negative=non_negative, beta=beta, gamma=gamma,
                         dagger_gradient=dagger_gradient)


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


# -- the registry -------------------------------------------------------------------

#: Every loss by its key, the name of its risk function in :mod:`adpue_tf.risks`
#: (``"adpue"`` -> :class:`ADPUELoss`, whose ``risk_fn`` is ``risks.adpue``).
LOSSES: Mapping[str, type[DebiasedLoss]] = MappingProxyType({
    cls.risk_fn.__name__: cls
    for cls in (ADPUELoss, ADPELoss, ADFPULoss, ADSLoss, ADSSLoss, DoubleADSSLoss,
                AD3SELoss, LogitLoss, UPULoss, NNPULoss, PNULoss, IPSLoss)
})


def _known() -> str:
    return (f"known keys: {list(LOSSES)} (case-insensitive), or their class names "
            f"({', '.join(c.__name__ for c in LOSSES.values())})")


def get_class(identifier: str | type[DebiasedLoss]) -> type[DebiasedLoss]:
    """The loss class of a key, a class name or a class.

    Args:
        identifier: a key of :data:`LOSSES` (``"adpue"``, any case, e.g. the
            method name ``"nnPU"``), a class name (``"ADPUELoss"`` or the
            registered ``"adpue_tf>ADPUELoss"``), or a :class:`DebiasedLoss`
            subclass (returned as is).

    Returns:
        The :class:`DebiasedLoss` subclass; its ``risk_fn`` is the function of
        :mod:`adpue_tf.risks` it wraps.

    Raises:
        ValueError: on an unknown name (the message lists the known ones).
        TypeError: on anything but a str or a DebiasedLoss subclass.

    Example:
        >>> get_class("nnPU").__name__, get_class("ADPUELoss").risk_fn.__name__
        ('NNPULoss', 'adpue')
    """
    if isinstance(identifier, type) and issubclass(identifier, DebiasedLoss):
        return identifier
    if not isinstance(identifier, str):
        raise TypeError(f"`identifier` must be a loss key or class name (str) or a "
                        f"DebiasedLoss subclass, got {identifier!r}; {_known()}.")
    text = identifier.strip()
    if text.startswith("adpue_tf>"):
        text = text[len("adpue_tf>"):]
    key = text.lower()
    if key in LOSSES:
        return LOSSES[key]
    for cls in LOSSES.values():
        if cls.__name__.lower() == key:
            return cls
    raise ValueError(f"Unknown loss {identifier!r}; {_known()}.")


def _check_option_names(cls: type[DebiasedLoss], options: Mapping[str, Any]) -> None:
    params = inspect.signature(cls.__init__).parameters
    takes = [n for n, p in params.items() if p.kind is p.KEYWORD_ONLY]
    unknown = sorted(set(options) - set(takes))
    if unknown:
        raise TypeError(f"{cls.__name__} takes no option {unknown}; it takes {takes}.")
    missing = [n for n in takes
               if params[n].default is inspect.Parameter.empty and n not in options]
    if missing:
        raise TypeError(f"{cls.__name__} needs {missing} (e.g. "
                        f"get({cls.risk_fn.__name__!r}, {missing[0]}=...)).")


def get(identifier: str | type[DebiasedLoss] | DebiasedLoss | Mapping[str, Any],
        **options: Any) -> DebiasedLoss:
    """A debiased loss from a key, a class name, a serialized config or an instance.

    The registry of the package, as ``keras.losses.get`` is Keras's: the tuner,
    the demo and the benchmarks resolve their losses here.

    Args:
        identifier: a key of :data:`LOSSES` (``"adpue"``, case-insensitive), a
            class name (``"ADPUELoss"``), a :class:`DebiasedLoss` subclass, a
            config dict as produced by ``keras.saving.serialize_keras_object``
            (``{"class_name": "ADPUELoss", "config": {...}, ...}``), or a
            :class:`DebiasedLoss` instance (returned as is).
        **options: the loss's options (``prior=``, ``from_logits=``, ...);
            only with a key, a class name or a class.

    Returns:
        A :class:`DebiasedLoss`.

    Raises:
        ValueError: on an unknown key or class name (the message lists the
            known ones), a config dict without ``class_name``, or bad option
            values.
        TypeError: on options the loss does not take, a missing required
            option (``prior``), options given with a config or an instance, or
            an identifier of another type.

    Example:
        >>> import keras
        >>> loss = get("nnpu", prior=0.4, surrogate="sigmoid")
        >>> type(loss).__name__
        'NNPULoss'
        >>> get(keras.saving.serialize_keras_object(loss)).get_config() == loss.get_config()
        True
    """
    if isinstance(identifier, DebiasedLoss) or isinstance(identifier, Mapping):
        if options:
            raise TypeError(f"Options {sorted(options)} apply to a loss key or class, not "
                            f"to a {type(identifier).__name__}; set them in the loss.")
    if isinstance(identifier, DebiasedLoss):
        # cast: Keras's Loss is untyped, so mypy cannot rule out type[DebiasedLoss] here
        return cast(DebiasedLoss, identifier)
    if isinstance(identifier, Mapping):
        if not isinstance(identifier.get("class_name"), str):
            raise ValueError("A loss config dict needs a 'class_name' (as produced by "
                             "keras.saving.serialize_keras_object), got keys "
                             f"{sorted(identifier)}.")
        cls = get_class(identifier["class_name"])
        config = identifier.get("config") or {}
        if not isinstance(config, Mapping):
            raise ValueError(f"The 'config' of a loss config dict must be a dict, got {config!r}.")
        _check_option_names(cls, config)
        return cls.from_config(dict(config))
    if isinstance(identifier, keras.losses.Loss):
        raise TypeError(f"{type(identifier).__name__} is a Keras loss, not an adpue_tf "
                        f"DebiasedLoss; {_known()}.")
    cls = get_class(identifier)
    _check_option_names(cls, options)
    return cls(**options)
