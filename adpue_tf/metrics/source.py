"""Any Keras metric on the rows of chosen sources: :class:`SourceMetric`.

The usual Keras metrics expect a ``y_true`` of shape ``(batch, 1)`` and break on
the packed ``(batch, 3|4)`` layout of :mod:`adpue_tf.labels`.
:class:`SourceMetric` feeds one label column (``w`` or ``e``) of the rows of
chosen sources (optionally only exposed rows) to any Keras metric, inside a
compiled ``fit`` and through a saved model; :func:`observed_auc` and
:func:`exposed_accuracy` are ready-made ones.

Example:
    >>> from adpue_tf.metrics import observed_auc
    >>> observed_auc(from_logits=True).name
    'observed_auc'
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import keras
from keras import ops

from adpue_tf import labels
from adpue_tf._internal.checks import check_bool
from adpue_tf.labels import Source

__all__ = ["SourceMetric", "exposed_accuracy", "observed_auc"]

_register = keras.saving.register_keras_serializable(package="adpue_tf")

#: Label columns a :class:`SourceMetric` can read, by name.
_LABEL_COLUMNS = {"w": labels.W, "e": labels.E}


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
        check_bool("exposed_only", exposed_only)
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
    check_bool("from_logits", from_logits)
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
    check_bool("from_logits", from_logits)
    acc = keras.metrics.BinaryAccuracy(threshold=0.0 if from_logits else 0.5)
    return SourceMetric(acc, sources=[Source.SSE], label="w", exposed_only=True, name=name)


