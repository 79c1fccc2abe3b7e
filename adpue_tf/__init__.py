"""adpue_tf: learning ``p(y=1|x)`` from exposed positives and an exposure log.

Keras losses and data builders for ADPUE (Kato et al., "Automatic Debiased
Learning from Positive, Unlabeled, and Exposure Data"). This package is the
library core; :mod:`adpue_tf.experiments` reproduces the paper and is never
imported by the core.

Example:
    >>> import keras, adpue_tf as adp
    >>> model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    >>> model.compile(optimizer="adam", loss=adp.ADPUELoss(from_logits=True))
"""

from adpue_tf import data, labels, losses, metrics, risks, synthetic
from adpue_tf.callbacks import RefreshDagger
from adpue_tf.labels import Source, pack_labels
from adpue_tf.losses import (
    AD3SELoss,
    ADFPULoss,
    ADPELoss,
    ADPUELoss,
    ADSLoss,
    ADSSLoss,
    DebiasedLoss,
    DoubleADSSLoss,
    LogitLoss,
    NNPULoss,
    PNULoss,
    UPULoss,
)
from adpue_tf.distributed import MultiWorkerModel
from adpue_tf.model import DebiasedModel
from adpue_tf.risks import RiskTerms
from adpue_tf.serving import export_for_serving, serving_path
from adpue_tf.validation import validation_score

__version__ = "0.1.0"

__all__ = [
    "AD3SELoss",
    "ADFPULoss",
    "ADPELoss",
    "ADPUELoss",
    "ADSLoss",
    "ADSSLoss",
    "DebiasedLoss",
    "DebiasedModel",
    "DoubleADSSLoss",
    "LogitLoss",
    "MultiWorkerModel",
    "NNPULoss",
    "PNULoss",
    "RefreshDagger",
    "RiskTerms",
    "Source",
    "UPULoss",
    "data",
    "export_for_serving",
    "serving_path",
    "validation_score",
    "labels",
    "losses",
    "metrics",
    "pack_labels",
    "risks",
    "synthetic",
    "__version__",
]
