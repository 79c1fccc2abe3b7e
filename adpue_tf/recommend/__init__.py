"""The recommended pipeline: :func:`fit_pue` trains every estimator, chooses, refits.

See ``docs/guide/choosing-models.md`` for the candidates, the held-out score and
the evidence behind the rule.

Example:
    >>> from adpue_tf.recommend import CANDIDATES
    >>> CANDIDATES[0], CANDIDATES[-1]
    ('bce_w', 'likelihood_theta')
"""

# Not in __all__: the rule's and the composites' internals (BLEND_PARTS, PREFERRED,
# ProbabilityMean, RatioLogit), importable here for their present callers; import them
# from their modules (names, compose).
from adpue_tf.recommend.compose import ProbabilityMean, RatioLogit, ThetaFeature  # noqa: F401
from adpue_tf.recommend.fit import NET_TOLERANCE, fit_pue
from adpue_tf.recommend.names import (  # noqa: F401
    BLEND_PARTS,
    CANDIDATES,
    DEFAULT_CANDIDATES,
    DERIVED,
    PREDICTS_WITH_THETA,
    PREFERRED,
)
from adpue_tf.recommend.result import PUEFit
from adpue_tf.recommend.rule import MIN_POSITIVES, choose

__all__ = ["CANDIDATES", "DEFAULT_CANDIDATES", "DERIVED", "MIN_POSITIVES", "NET_TOLERANCE",
           "PREDICTS_WITH_THETA", "PUEFit", "ThetaFeature", "choose", "fit_pue"]
