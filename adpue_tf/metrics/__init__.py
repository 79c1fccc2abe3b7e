"""Keras metrics that read the packed labels of :mod:`adpue_tf.labels`.

One module per kind, all re-exported here; each works inside a compiled
``fit`` (graph mode, with or without ``jit_compile``) and is saved with the
model:

* :mod:`adpue_tf.metrics.source`: :class:`SourceMetric`, any Keras metric on
  the rows of chosen sources; :func:`observed_auc`, :func:`exposed_accuracy`.
* :mod:`adpue_tf.metrics.risk`: the parts of a
  :class:`~adpue_tf.losses.DebiasedLoss` (``R+``, ``R-``, the risk, how often
  the correction fired), computed once per step: :func:`risk_metrics`,
  :class:`RiskMetric`, :class:`RiskTracker`.
* ``adpue_tf.metrics.validation_scores``: the observable validation scores
  (:class:`ExposureLikelihood`, :class:`ReferenceRisk`), also exported by
  :mod:`adpue_tf.validation`, which documents them.

Example:
    >>> import keras, adpue_tf as adp
    >>> from adpue_tf import metrics
    >>> loss = adp.ADPUELoss(from_logits=True)
    >>> model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    >>> model.compile("adam", loss=loss,
    ...               metrics=[*metrics.risk_metrics(loss), metrics.observed_auc(True)])
"""

from adpue_tf.metrics.risk import RISK_METRIC_NAMES, RiskMetric, RiskTracker, risk_metrics
from adpue_tf.metrics.source import SourceMetric, exposed_accuracy, observed_auc
from adpue_tf.metrics.validation_scores import ExposureLikelihood, ReferenceRisk

__all__ = [
    "RISK_METRIC_NAMES",
    "ExposureLikelihood",
    "ReferenceRisk",
    "RiskMetric",
    "RiskTracker",
    "SourceMetric",
    "exposed_accuracy",
    "observed_auc",
    "risk_metrics",
]
