"""Risk parts as metrics: ``R+``, ``R-``, the risk and how often the correction fired.

:func:`risk_metrics` gives the four :class:`RiskMetric` a plain model logs,
named as in :data:`RISK_METRIC_NAMES`. The four read one :class:`RiskTracker`,
which takes the risk parts the loss computed in the same step: a plain model
computes the risk once per step, exactly as :class:`~adpue_tf.DebiasedModel`
(whose own tracker is fed by its ``compute_loss``).

Example:
    >>> import keras, adpue_tf as adp
    >>> loss = adp.ADPUELoss(from_logits=True)
    >>> model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    >>> model.compile("adam", loss=loss, metrics=risk_metrics(loss))
"""

from __future__ import annotations

import weakref
from typing import Any

import keras
from keras import ops

from adpue_tf._internal.backend import TENSORFLOW
from adpue_tf.losses import DebiasedLoss

if TENSORFLOW:
    import tensorflow as tf

__all__ = ["RISK_METRIC_NAMES", "RiskMetric", "RiskTracker", "risk_metrics"]

_register = keras.saving.register_keras_serializable(package="adpue_tf")

#: Metric name of each part of :class:`adpue_tf.risks.RiskTerms`, as logged by
#: :func:`risk_metrics` (and by ``DebiasedModel``): ``risk`` (the risk's value),
#: ``r_pos`` (``R+``), ``r_neg`` (``R-``) and ``nn_fired`` (the fraction of
#: steps in which the non-negative correction fired).
RISK_METRIC_NAMES: dict[str, str] = {
    "risk": "risk",
    "positive": "r_pos",
    "negative": "r_neg",
    "fired": "nn_fired",
}


class _Untracked:
    """A reference Keras does not track (a plain object, not a list or a Metric)."""

    __slots__ = ("tracker",)

    def __init__(self, tracker: Any) -> None:
        self.tracker = tracker


@_register
class RiskTracker(keras.metrics.Metric):
    """Means over steps of all four parts of :class:`RiskTerms` in one metric.

    One variable holds the four totals and the step count, so a step costs a
    single ``assign_add``; ``result()`` is a dict keyed by
    :data:`RISK_METRIC_NAMES`. Two ways to feed it:

    * ``update_state(terms)``: the terms already computed for the step (as
      :class:`adpue_tf.DebiasedModel` does in ``compute_loss``; Keras logs the
      dict's entries separately for a metric that is a model attribute).
    * ``update_state(y_true, y_pred, sample_weight)`` with a ``loss``: the
      terms that ``loss`` computed on these very tensors in the same step
      (:meth:`~adpue_tf.losses.DebiasedLoss.last_terms`), else computed here
      once. This is how :func:`risk_metrics` logs the parts of a plain
      model's loss without computing the risk again.

    Args:
        name: metric name.
        dtype: ignored (the totals are float32); for Keras's config.
        loss: the :class:`~adpue_tf.losses.DebiasedLoss` whose parts to track
            from ``(y_true, y_pred)``; None to feed terms only.

    Raises:
        TypeError: if ``loss`` is neither None nor a ``DebiasedLoss``.

    Example:
        >>> import numpy as np, adpue_tf as adp
        >>> y = np.concatenate([adp.pack_labels(adp.Source.PU, w=[1, 0]),
        ...                     adp.pack_labels(adp.Source.E, e=[1, 1])])
        >>> t = adp.ADPUELoss(from_logits=True).terms(y, np.zeros((4, 1), "float32"))
        >>> tracker = RiskTracker()
        >>> tracker.update_state(t)
        >>> round(float(tracker.result()["r_pos"]), 4)
        0.3466
    """

    def __init__(self, name: str = "risk_parts", dtype: Any = None, *,
                 loss: DebiasedLoss | None = None) -> None:
        if loss is not None and not isinstance(loss, DebiasedLoss):
            raise TypeError(f"`loss` must be an adpue_tf DebiasedLoss or None, got {loss!r}.")
        super().__init__(name=name, dtype=dtype)
        self.loss = loss
        # totals of risk, R+, R-, fired, then the number of steps
        self.total = self.add_variable(shape=(5,), initializer="zeros", name="total")
        # (id(y_true), id(y_pred), id(sample_weight)) -> (the objects, the readers
        # that have seen that batch): lets the views of risk_metrics share a step.
        self._batches: dict[tuple[int, int, int], tuple[tuple[Any, ...], set[int]]] = {}
        self._views = 0  # how many RiskMetric read this tracker
        self._updates = 0  # update_state calls traced so far (keys the means' cache)
        self._means_cache = _Untracked(None)

    def update_state(self, terms: Any, y_pred: Any = None, sample_weight: Any = None) -> None:
        """Add one step: ``update_state(terms)`` or ``update_state(y_true, y_pred[, sw])``."""
        if y_pred is None:
            parts = [ops.cast(getattr(terms, p), "float32") for p in RISK_METRIC_NAMES]
            self.total.assign_add(ops.stack([*parts, ops.ones((), "float32")]))
            self._updates += 1
            return
        if self.loss is None:
            raise ValueError("This RiskTracker has no `loss`: feed it RiskTerms "
                             "(update_state(terms)), or create it with loss=....")
        y_true = terms
        step = self.loss.last_terms(y_true, y_pred, sample_weight)
        if step is None:
            step = self.loss.terms(y_true, y_pred, sample_weight)
        self.update_state(step)

    def _read_batch(self, reader: object, y_true: Any, y_pred: Any, sample_weight: Any) -> None:
        """Update once per batch however many readers (``RiskMetric`` views) see it.

        A reader that sees a batch it has already seen starts a new step (a
        new batch in the same buffers); another reader of the same batch adds
        nothing.
        """
        objects = (y_true, y_pred, sample_weight)
        key = (id(y_true), id(y_pred), id(sample_weight))
        seen = self._batches.get(key)
        if seen is not None and all(a is b for a, b in zip(seen[0], objects)) \
                and id(reader) not in seen[1]:
            seen[1].add(id(reader))
            return
        self._batches.pop(key, None)
        self._batches[key] = (objects, {id(reader)})
        while len(self._batches) > 16:
            self._batches.pop(next(iter(self._batches)))
        self.update_state(y_true, y_pred, sample_weight)

    def means(self) -> list[Any]:
        """The four means (risk, R+, R-, fired), as :meth:`result` in a list.

        Inside a traced step (without a distribution strategy) they are
        computed once for all the :class:`RiskMetric` views that read them (one
        read, one division), after the step's update.
        """
        if not TENSORFLOW or tf.executing_eagerly() or tf.distribute.has_strategy():
            return self._compute_means()  # replicas read their own (sync-on-read) totals
        graph = tf.compat.v1.get_default_graph()
        cached = self._means_cache.tracker
        if cached is None or cached[0] is not graph or cached[1] != self._updates:
            cached = (graph, self._updates, self._compute_means())
            self._means_cache.tracker = cached
        return cached[2]

    def _compute_means(self) -> list[Any]:
        total = ops.convert_to_tensor(self.total)
        return ops.unstack(ops.divide_no_nan(total, total[4]), num=5)[:4]

    def result(self) -> dict[str, Any]:
        return dict(zip(RISK_METRIC_NAMES.values(), self.means()))

    def reset_state(self) -> None:
        self.total.assign(ops.zeros((5,), "float32"))
        self._batches.clear()
        self._updates += 1

    def get_config(self) -> dict[str, Any]:
        config = {"name": self.name, "dtype": self.dtype}
        if self.loss is not None:
            config["loss"] = keras.saving.serialize_keras_object(self.loss)
        return config

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> "RiskTracker":
        config = dict(config)
        if config.get("loss") is not None:
            config["loss"] = keras.saving.deserialize_keras_object(config["loss"])
        return cls(**config)


#: Trackers of the RiskMetric views revived by ``from_config``, by their loss.
_REVIVED_TRACKERS: "weakref.WeakKeyDictionary[DebiasedLoss, RiskTracker]" = (
    weakref.WeakKeyDictionary())


@_register
class RiskMetric(keras.metrics.Metric):
    """Mean over batches of one part of a debiased loss's :meth:`~DebiasedLoss.terms`.

    Lets a plain Keras model log ``R+``, ``R-`` and how often the non-negative
    correction fired (the mean of ``fired`` is the fraction of batches). The
    metric is a view of a :class:`RiskTracker`: its own, or one shared with the
    other parts of the same loss (what :func:`risk_metrics` builds), so the
    four parts cost one update per step; and the tracker takes the terms the
    loss computed in the same step, so the risk is not computed again. A
    saved ``.keras`` model keeps the sharing (Keras's shared-object scope).

    As for any Keras metric, ``compile(metrics=...)`` passes no sample
    weights (the parts are those of the unweighted risk, computed once more
    when the loss had weights), ``compile(weighted_metrics=...)`` passes them.

    Args:
        loss: the :class:`~adpue_tf.losses.DebiasedLoss` whose terms to read.
        part: ``"risk"``, ``"positive"`` (``R+``), ``"negative"`` (``R-``) or
            ``"fired"``.
        name: metric name; default :data:`RISK_METRIC_NAMES` ``[part]``.
        tracker: a :class:`RiskTracker` of the same ``loss`` to share; None for
            a tracker of its own.

    Raises:
        TypeError: if ``loss`` is not a ``DebiasedLoss`` or ``tracker`` not a
            ``RiskTracker``.
        ValueError: on an unknown ``part``, or a ``tracker`` of another loss.

    Example:
        >>> import numpy as np, adpue_tf as adp
        >>> m = RiskMetric(adp.ADPUELoss(from_logits=True), part="positive")
        >>> y = np.concatenate([adp.pack_labels(adp.Source.PU, w=[1, 1]),
        ...                     adp.pack_labels(adp.Source.E, e=[1, 1])])
        >>> m.update_state(y, np.zeros((4, 1)))
        >>> m.name, round(float(m.result()), 4)
        ('r_pos', 0.6931)
    """

    def __init__(self, loss: DebiasedLoss, *, part: str = "risk", name: str | None = None,
                 tracker: RiskTracker | None = None) -> None:
        if not isinstance(loss, DebiasedLoss):
            raise TypeError(f"`loss` must be an adpue_tf DebiasedLoss, got {loss!r}.")
        if part not in RISK_METRIC_NAMES:
            raise ValueError(f"`part` must be one of {list(RISK_METRIC_NAMES)}, got {part!r}.")
        if tracker is None:
            tracker = RiskTracker(name="risk_parts", loss=loss)
        elif not isinstance(tracker, RiskTracker):
            raise TypeError(f"`tracker` must be a RiskTracker or None, got {tracker!r}.")
        elif tracker.loss is not loss:
            raise ValueError("`tracker` must track the same `loss` object as this metric.")
        super().__init__(name=RISK_METRIC_NAMES[part] if name is None else name,
                         dtype="float32")
        self.loss = loss
        self.part = part
        # The first view of a tracker owns it (Keras tracks its variable there);
        # the others read it through an untracked reference, so that a model's
        # metric variables hold the shared total once.
        self._tracker_ref = _Untracked(tracker)
        tracker._views += 1
        if tracker._views == 1:
            self._owned_tracker = tracker

    @property
    def tracker(self) -> RiskTracker:
        """The :class:`RiskTracker` this metric reads (shared by :func:`risk_metrics`)."""
        return self._tracker_ref.tracker

    def update_state(self, y_true: Any, y_pred: Any, sample_weight: Any = None) -> None:
        """Add this batch (once for all views of the tracker); weights go to ``loss.terms``."""
        self.tracker._read_batch(self, y_true, y_pred, sample_weight)

    def result(self) -> Any:
        return self.tracker.means()[list(RISK_METRIC_NAMES).index(self.part)]

    def reset_state(self) -> None:
        self.tracker.reset_state()

    def get_config(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "loss": keras.saving.serialize_keras_object(self.loss),
            "part": self.part,
            "shared": self.tracker._views > 1,
        }

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> "RiskMetric":
        config = dict(config)
        config.pop("dtype", None)
        loss = keras.saving.deserialize_keras_object(config.pop("loss"))
        tracker = None
        if config.pop("shared", False):
            # Views revived with one loss object (a .keras model: Keras's
            # shared-object scope) share one tracker again.
            tracker = _REVIVED_TRACKERS.get(loss)
            if tracker is None:
                tracker = _REVIVED_TRACKERS[loss] = RiskTracker(name="risk_parts", loss=loss)
        return cls(loss, tracker=tracker, **config)


def risk_metrics(loss: DebiasedLoss) -> list[RiskMetric]:
    """The four :class:`RiskMetric` of ``loss``, for ``compile(metrics=...)``.

    Named by :data:`RISK_METRIC_NAMES`: ``risk``, ``r_pos``, ``r_neg``,
    ``nn_fired``. They share one :class:`RiskTracker`, which reads the terms
    ``loss`` computed in the same step: compiled with ``loss`` itself, a
    plain model computes the risk once per step, as
    :class:`~adpue_tf.DebiasedModel` (which logs these four itself).

    Args:
        loss: the model's debiased loss (pass the same object to ``compile``).

    Returns:
        A list of four metrics, in the order risk, positive, negative, fired.

    Raises:
        TypeError: if ``loss`` is not a ``DebiasedLoss``.

    Example:
        >>> import adpue_tf as adp
        >>> [m.name for m in risk_metrics(adp.ADPUELoss())]
        ['risk', 'r_pos', 'r_neg', 'nn_fired']
    """
    if not isinstance(loss, DebiasedLoss):
        raise TypeError(f"`loss` must be an adpue_tf DebiasedLoss, got {loss!r}.")
    tracker = RiskTracker(name="risk_parts", loss=loss)
    return [RiskMetric(loss, part=part, tracker=tracker) for part in RISK_METRIC_NAMES]
