"""KerasTuner integration: a HyperModel and observable objectives.

Requires the ``tune`` extra (``pip install adpue_tf[tune]``).

Example:
    >>> from adpue_tf.tuning import objective
    >>> objective("adpue").name
    'val_risk'
"""

from adpue_tf.tuning.hypermodel import DebiasedHyperModel
from adpue_tf.tuning.objectives import objective

__all__ = ["DebiasedHyperModel", "objective"]
