"""Metrics on packed labels: per-source wrappers of Keras metrics and risk parts.

The usual Keras metrics expect a ``y_true`` of shape ``(batch, 1)`` and break on
the packed ``(batch, 3|4)`` layout of :mod:`adpue_tf.labels`. Two wrappers fix
that, and both work inside a compiled Keras ``fit`` (graph mode, with or without
``jit_compile``) and serialise with the model:

* :class:`SourceMetric` feeds one label column (``w`` or ``e``) of the rows of
  chosen sources (optionally only exposed rows) to any Keras metric;
  :func:`observed_auc` and :func:`exposed_accuracy` are ready-made ones.
* :class:`RiskMetric` averages one part of a :class:`~adpue_tf.losses.DebiasedLoss`
  over batches; :func:`risk_metrics` gives the four a plain model logs, named as
  in :data:`RISK_METRIC_NAMES`. The four read one :class:`RiskTracker`, which
  takes the risk parts the loss computed in the same step: a plain model
  computes the risk once per step, exactly as :class:`~adpue_tf.DebiasedModel`
  (whose own tracker is fed by its ``compute_loss``).

Example:
    >>> import keras, adpue_tf as adp
    >>> from adpue_tf import metrics
    >>> loss = adp.ADPUELoss(from_logits=True)
    >>> model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    >>> model.compile("adam", loss=loss,
    ...               metrics=[*metrics.risk_metrics(loss), metrics.observed_auc(True)])
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable
from typing import Any

import keras
import tensorflow as tf
from keras import ops

from adpue_tf import labels
from adpue_tf.labels import Source
from adpue_tf.losses import DebiasedLoss

__all__ = [
    "RiskTracker",
    "RISK_METRIC_NAMES",
    "RiskMetric",
    "SourceMetric",
    "exposed_accuracy",
    "observed_auc",
    "risk_metrics",
]

_register = keras.saving.register_keras_serializable(package="adpue_tf")

#: Label columns a :class:`SourceMetric` can read, by name.
_LABEL_COLUMNS = {"w": labels.W, "e": labels.E}

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


def _parse_source(item: Any) -> Source:
    """One source given as a :class:`Source`, an int code or a name like ``"PU"``."""
    try:
        if isinstance(item, str):
            return Source[item.strip().upper()]
        if isinstance(item, bool):
            raise TypeError
        return Source(int(item))
    except (KeyError, ValueError, TypeError):
        raise ValueError(
            f"`sources` holds an unknown source {item!r}; known: "
            f"{ {s.name: int(s) for s in Source} }."
        ) from None


def _parse_sources(sources: Any) -> list[Source]:
    """Validate ``sources`` (one source or an iterable of them); keep order, drop repeats."""
    items = [sources] if isinstance(sources, (str, int, Source)) else sources
    if not isinstance(items, Iterable):
        raise ValueError(f"`sources` must be a list of sources, got {sources!r}.")
    out: list[Source] = []
    for src in map(_parse_source, items):
        if src not in out:
            out.append(src)
    if not out:
        raise ValueError("`sources` must name at least one source, got none.")
    return out


@_register
class SourceMetric(keras.metrics.Metric):
    """Any Keras metric, on one label column of the rows of chosen sources.

    On update, the label column ``label`` becomes the inner metric's
    ``y_true`` of shape ``(batch, 1)``; rows whose source is not in
    ``sources`` (and, with ``exposed_only``, rows with ``e != 1``) get weight 0
    through the inner metric's ``sample_weight`` (times any user weights), so
    they are ignored. ``result``/``reset_state`` delegate to the inner metric,
    whose variables this metric tracks.

    Whether ``y_pred`` holds logits or probabilities is the inner metric's
    business: for a model with logit output pass e.g.
    ``keras.metrics.AUC(from_logits=True)`` or
    ``keras.metrics.BinaryAccuracy(threshold=0.0)``.

    Args:
        metric: a Keras metric taking ``(y_true, y_pred, sample_weight)``.
        sources: the sources whose rows count: :class:`Source` members, int
            codes or names such as ``"PU"`` (one or a list).
        label: which column is the label, ``"w"`` or ``"e"``.
        exposed_only: count only rows with ``e == 1``.
        name: metric name; default ``"{sources}_[exposed_]{label}_{metric.name}"``
            in lower case, e.g. ``"pu_w_auc"``.

    Raises:
        TypeError: if ``metric`` is not a Keras metric.
        ValueError: on a ``label`` other than ``"w"``/``"e"``, an unknown
            source or empty ``sources``.

    Example:
        >>> import keras, numpy as np
        >>> from adpue_tf.labels import pack_pu, pack_e
        >>> y = np.concatenate([pack_pu([1, 0]), pack_e([1, 1])])
        >>> m = SourceMetric(keras.metrics.BinaryAccuracy(), sources=["PU"])
        >>> m.name
        'pu_w_binary_accuracy'
        >>> m.update_state(y, np.array([[0.9], [0.8], [0.1], [0.1]]))
        >>> float(m.result())
        0.5
    """

    def __init__(self, metric: keras.metrics.Metric, *, sources: Any, label: str = "w",
                 exposed_only: bool = False, name: str | None = None) -> None:
        if not isinstance(metric, keras.metrics.Metric):
            raise TypeError(f"`metric` must be a keras.metrics.Metric, got {metric!r}.")
        if label not in _LABEL_COLUMNS:
            raise ValueError(f"`label` must be 'w' or 'e', got {label!r}.")
        if not isinstance(exposed_only, bool):
            raise TypeError(f"`exposed_only` must be a bool, got {exposed_only!r}.")
        self._sources = _parse_sources(sources)
        if name is None:
            prefix = "_".join(s.name.lower() for s in self._sources)
            name = f"{prefix}_{'exposed_' if exposed_only else ''}{label}_{metric.name}"
        super().__init__(name=name)
        self.metric = metric
        self.label = label
        self.exposed_only = exposed_only

    @property
    def sources(self) -> list[Source]:
        """The sources whose rows this metric counts."""
        return list(self._sources)

    def update_state(self, y_true: Any, y_pred: Any, sample_weight: Any = None) -> None:
        """Update the inner metric with packed ``y_true``; ``sample_weight`` scales the mask."""
        y = ops.convert_to_tensor(y_true)
        if len(y.shape) != 2 or y.shape[1] not in labels.NUM_COLUMNS:
            raise ValueError("`y_true` must have shape (batch, 3) or (batch, 4) "
                             f"(w, e, source[, dagger]), got shape {tuple(y.shape)}.")
        y = ops.cast(y, "float32")
        src = y[:, labels.SOURCE]
        mask = ops.zeros_like(src)
        for s in self._sources:
            mask = mask + ops.cast(ops.equal(src, float(int(s))), "float32")
        if self.exposed_only:
            mask = mask * ops.cast(ops.equal(y[:, labels.E], 1.0), "float32")
        if sample_weight is not None:
            sw = ops.reshape(ops.cast(sample_weight, "float32"), (-1,))
            mask = mask * ops.broadcast_to(sw, ops.shape(mask))
        col = _LABEL_COLUMNS[self.label]
        self.metric.update_state(
            y[:, col:col + 1],
            ops.reshape(y_pred, (-1, 1)),
            sample_weight=ops.reshape(mask, (-1, 1)),
        )

    def result(self) -> Any:
        """The inner metric's result."""
        return self.metric.result()

    def reset_state(self) -> None:
        """Reset the inner metric."""
        self.metric.reset_state()

    def get_config(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "metric": keras.saving.serialize_keras_object(self.metric),
            "sources": [s.name for s in self._sources],
            "label": self.label,
            "exposed_only": self.exposed_only,
        }

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> "SourceMetric":
        config = dict(config)
        config.pop("dtype", None)
        metric = keras.saving.deserialize_keras_object(config.pop("metric"))
        return cls(metric, **config)


def observed_auc(from_logits: bool = False, *, name: str = "observed_auc") -> SourceMetric:
    """AUC of ``W`` on the PU rows: the ranking quality a user can observe.

    It scores the model against ``W = E·Y``, not ``Y``, so it is biased
    towards exposure; use it to monitor, not to compare debiased methods.

    Args:
        from_logits: whether the model outputs logits.
        name: metric name.

    Returns:
        A :class:`SourceMetric` wrapping ``keras.metrics.AUC``.

    Example:
        >>> import numpy as np
        >>> from adpue_tf.labels import pack_pu
        >>> m = observed_auc(from_logits=True)
        >>> m.update_state(pack_pu([1, 0, 0]), np.array([[2.0], [-1.0], [0.5]]))
        >>> float(m.result())
        1.0
    """
    return SourceMetric(keras.metrics.AUC(from_logits=from_logits), sources=[Source.PU],
                        label="w", name=name)


def exposed_accuracy(from_logits: bool = False, *,
                     name: str = "exposed_accuracy") -> SourceMetric:
    """Accuracy of ``W`` on the exposed SSE rows.

    On exposed rows ``W = Y``, and under strong ignorability (``Y ⫫ E | x``)
    they are a fair sample given ``x``, so this estimates the accuracy against
    the true label ``Y`` on the exposed population. The threshold is 0.5 on
    probabilities, 0 on logits.

    Args:
        from_logits: whether the model outputs logits.
        name: metric name.

    Returns:
        A :class:`SourceMetric` wrapping ``keras.metrics.BinaryAccuracy``.

    Example:
        >>> import numpy as np
        >>> from adpue_tf.labels import pack_sse
        >>> m = exposed_accuracy()
        >>> m.update_state(pack_sse([1, 0, 0], [1, 1, 0]), np.array([[0.9], [0.7], [0.9]]))
        >>> float(m.result())
        0.5
    """
    acc = keras.metrics.BinaryAccuracy(threshold=0.0 if from_logits else 0.5)
    return SourceMetric(acc, sources=[Source.SSE], label="w", exposed_only=True, name=name)


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
        if tf.executing_eagerly() or tf.distribute.has_strategy():
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
