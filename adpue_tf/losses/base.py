"""The base class of every debiased loss: :class:`DebiasedLoss` (one risk of SPEC.md as a Keras loss)."""

from __future__ import annotations

import inspect
from typing import Any, Callable, ClassVar

import keras

from adpue_tf import risks
from adpue_tf._internal.backend import BACKEND, TENSORFLOW
from adpue_tf._internal.checks import check_options
from adpue_tf._internal.guards import guard_finite
from adpue_tf.labels import Source
from adpue_tf.risks._batch import check_sources

if TENSORFLOW:
    import tensorflow as tf

__all__ = ["REDUCTION", "DebiasedLoss"]


#: The one reduction a debiased loss has (Keras's default): see :class:`DebiasedLoss`.
REDUCTION = "sum_over_batch_size"
#: How many recent calls a loss remembers for :meth:`DebiasedLoss.last_terms`
#: (one per replica of a distribution strategy is enough).
_REMEMBERED_CALLS = 16


def _is_tensor(v: Any) -> bool:
    """Whether ``v`` is an immutable tensor of the backend (not a variable, not a NumPy array).

    TensorFlow and JAX tensors are immutable; a PyTorch tensor can be changed in
    place, so it is never remembered.
    """
    if TENSORFLOW:
        return isinstance(v, tf.Tensor)
    return BACKEND == "jax" and keras.ops.is_tensor(v) and not isinstance(v, keras.Variable)


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
    :func:`adpue_tf.metrics.risk_metrics` reuses them in the same training
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
    #: The sources whose ``E = 0`` rows are the only rows on which :attr:`risk_fn`
    #: reads ``f†`` (through ``f†·(1 - E)``); None: not known, every row. It
    #: lets :class:`~adpue_tf.DebiasedModel` run its snapshot on those rows alone
    #: (:meth:`dagger_sources`).
    dagger_read_on: ClassVar[tuple[Source, ...] | None] = None

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

    @classmethod
    def dagger_sources(cls) -> tuple[Source, ...] | None:
        """The sources whose ``E = 0`` rows read ``f†``; None: every row may read it.

        :attr:`dagger_read_on` where it was declared with the :attr:`risk_fn` in
        use; None for a class that overrides :meth:`terms` or gives a
        ``risk_fn`` of its own without declaring where it reads ``f†``.

        Example:
            >>> import adpue_tf as adp
            >>> adp.ADPUELoss.dagger_sources()
            (<Source.E: 1>,)
        """
        if cls.terms is not DebiasedLoss.terms:
            return None
        owner = next((k for k in cls.__mro__ if "risk_fn" in vars(k)), None)
        declared = next(k for k in cls.__mro__ if "dagger_read_on" in vars(k))
        return cls.dagger_read_on if owner is declared else None

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
        if all(v is None or _is_tensor(v) for v in (y_true, y_pred, sample_weight)):
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
