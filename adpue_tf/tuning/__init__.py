"""KerasTuner integration: a HyperModel and observable objectives.

Requires the ``tune`` extra (``pip install "adpue_tf[tune]"``).

Example:
    >>> from adpue_tf.tuning import objective
    >>> objective("adpue").name
    'val_exposure_nll'
"""

try:
    import keras_tuner  # noqa: F401
except ImportError as err:  # the extra is optional: say which one to install
    raise ImportError(
        'adpue_tf.tuning needs KerasTuner: pip install "adpue_tf[tune]"'
    ) from err

from adpue_tf.tuning.hypermodel import DebiasedHyperModel  # noqa: E402
from adpue_tf.tuning.objectives import objective  # noqa: E402

__all__ = ["DebiasedHyperModel", "objective"]
