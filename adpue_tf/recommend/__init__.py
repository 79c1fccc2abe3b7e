"""The recommended pipeline: :func:`fit_pue` trains every estimator, chooses, refits.

See ``docs/guide/choosing-models.md`` for the candidates, the held-out score and
the evidence behind the rule.

Example:
    >>> from adpue_tf.recommend import CANDIDATES
    >>> CANDIDATES[0], CANDIDATES[-1]
    ('bce_w', 'likelihood_theta')
"""

from adpue_tf.recommend.candidates import (
    CANDIDATES,
    DEFAULT_CANDIDATES,
    DERIVED,
    PREDICTS_WITH_THETA,
)
from adpue_tf.recommend.compose import ThetaFeature
from adpue_tf.recommend.fit import NET_TOLERANCE, FitOptions, fit_pue
from adpue_tf.recommend.result import PUEFit
from adpue_tf.recommend.rule import MIN_POSITIVES, choose

__all__ = ["CANDIDATES", "DEFAULT_CANDIDATES", "DERIVED", "FitOptions", "MIN_POSITIVES",
           "NET_TOLERANCE", "PREDICTS_WITH_THETA", "PUEFit", "ThetaFeature", "choose", "fit_pue"]
