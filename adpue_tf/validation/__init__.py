"""Observable, proper validation scores: choose models without the hidden ``Y``.

A user of PUE data observes ``W = E·Y`` on PU rows and ``E`` on an exposure
log, never ``Y``. Two scores built from those alone are minimised by the
true ``p(y=1|x)`` (SPEC.md, "Observable validation scores"); lower is better:

* ``"exposure_likelihood"``: the mean negative log-likelihood of ``W`` on
  PU rows under ``P(W=1|x) = σ(z(x))·θ̂(x)``, ``θ̂`` a classifier of ``E``
  fitted on the exposure log. **Proper when** ``θ̂ = θ``: strong
  ignorability gives ``q(w=1|x) = p(y=1|x)·θ(e=1|x)``, the cross-entropy of
  ``W`` is minimised by ``σ(z)·θ = q``, i.e. ``σ(z) = p``. A misspecified
  ``θ̂`` shifts the minimiser to ``min(1, q/θ̂)``; where ``θ ≈ 0`` ``W`` is
  always 0 and the score cannot tell models apart.
* ``"reference_risk"``: the nnPUE risk (:func:`adpue_tf.risks.nnpue`, its
  default options) with ``f†`` **fixed** to one reference ``f_ref`` for every
  candidate. Its minimiser is ``q + f_ref·θ0`` (``θ0 = 1 - θ``): **proper
  when** ``f_ref = p``, and close to ``p`` where the reference is close or
  where exposure is high. The default reference is the Ratio estimate
  ``q̂/θ̂`` (:func:`adpue_tf.exposure.fit_ratio_model`).

Not proper, and not offered: the risk with ``f† = σ(z)`` of the scored model
itself (the old tuner objective ``val_risk``); over-confident models score
lower (see ``tests/test_validation.py`` for measured numbers).

The same scores as Keras metrics, for ``model.fit(validation_data=...)`` and
the KerasTuner objective: a Keras metric sees only ``(y_true, y_pred)``, so
the yardsticks are computed once, before training, and carried in column 3
of the packed labels by the *validation layout* that :func:`pue_validation_data`
(and :func:`pe_validation_data`, :func:`fpue_validation_data`) build:

* on the exposure-log rows (source ``E``) column 3 is ``f_ref(x)``: there it
  is the ``f†`` of the label layout, so every debiased risk computed on this
  data, including the ``val_risk`` a ``DebiasedModel`` logs, is the
  reference risk;
* on the PU rows (PUE) and the P and U rows (FPUE), where no risk of these
  settings reads ``f†``, column 3 is ``θ̂(x)``, which
  :class:`ExposureLikelihood` reads. PE data (P and E rows only; its loss
  refuses other rows) carries ``f_ref`` on every row and supports the
  reference risk only.

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
