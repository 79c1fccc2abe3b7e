"""Observable, proper validation scores: choose models without the hidden ``Y``.

Two scores built from ``W`` and ``E`` alone are minimised by the true
``p(y=1|x)`` (SPEC.md, "Observable validation scores"); lower is better:
``"exposure_likelihood"`` (proper when ``θ̂ = θ``) and ``"reference_risk"``
(proper when the reference is ``p``). :func:`validation_score` computes one;
the Keras metrics :class:`ExposureLikelihood` and :class:`ReferenceRisk` log
them in ``fit`` on data built by :func:`pue_validation_data` (the validation
layout). When each is proper, and the layout: ``docs/api/validation.md``.

Example:
    >>> import keras, numpy as np, adpue_tf as adp
    >>> s = adp.synthetic.synthetic_pue(2000, 2000, seed=0)
    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> model.set_weights([s.y_weights.reshape(2, 1), np.zeros(1)])  # the truth
    >>> model.compile(loss=adp.ADPUELoss(from_logits=True))
    >>> score = adp.validation_score(model, s.x_pu, s.w_pu, s.x_e, s.e_e)
    >>> round(score, 2)
    0.37
"""

from adpue_tf.metrics.validation_scores import ExposureLikelihood, ReferenceRisk
from adpue_tf.validation.layout import (
    fpue_validation_data,
    pe_validation_data,
    pue_validation_data,
)
from adpue_tf.validation.scores import (
    CRITERIA,
    exposure_brier_score,
    exposure_nll,
    validation_score,
)

__all__ = [
    "CRITERIA",
    "ExposureLikelihood",
    "ReferenceRisk",
    "exposure_brier_score",
    "exposure_nll",
    "fpue_validation_data",
    "pe_validation_data",
    "pue_validation_data",
    "validation_score",
]
