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

#: Names this package no longer has, and where they went.
_MOVED = {"keep_compiled": "adpue_tf.experiments.keep_compiled (a loop's block; a plain "
                           "fit_pue call keeps nothing)"}


def __getattr__(name: str) -> object:
    if name in _MOVED:
        raise AttributeError(f"adpue_tf.recommend.{name} moved to {_MOVED[name]}.")
    raise AttributeError(f"module 'adpue_tf.recommend' has no attribute {name!r}")

