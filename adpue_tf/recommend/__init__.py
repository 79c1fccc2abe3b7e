"""The recommended pipeline: :func:`fit_pue` trains every estimator, chooses, refits.

See ``docs/guide/choosing-models.md`` for the candidates, the held-out score and
the evidence behind the rule.

Example:
    >>> from adpue_tf.recommend import CANDIDATES
    >>> CANDIDATES[0], CANDIDATES[-1]
    ('bce_w', 'average')
"""

from adpue_tf.recommend.candidates import CANDIDATES, DEFAULT_CANDIDATES, PREDICTS_WITH_THETA
from adpue_tf.recommend.compose import ProbabilityMean, RatioLogit
from adpue_tf.recommend.fit import choose, fit_pue
from adpue_tf.recommend.result import PUEFit

__all__ = ["CANDIDATES", "DEFAULT_CANDIDATES", "PREDICTS_WITH_THETA", "PUEFit", "ProbabilityMean",
           "RatioLogit", "choose", "fit_pue"]
