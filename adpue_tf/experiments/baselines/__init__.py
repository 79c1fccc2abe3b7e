"""Baselines that are not a loss: SAR-EM and the two-model ratio (SPEC.md, Baselines).

One implementation of each, for linear models, used by Table 1
(:mod:`adpue_tf.experiments.table1`) and by the tests:

* :class:`SAREM` follows the reference implementation of Bekker & Davis step
  for step, with its scikit-learn (liblinear) logistic regressions, one trial
  at a time; :class:`BatchedSAREM` runs the same algorithm for many trials at
  once with exact M-steps (:func:`fit_weighted_logistic`), as Table 1 does.
* :func:`fit_ratio` fits the ratio's two models for many trials at once with
  :func:`adpue_tf.experiments.linear_fit.fit_linear`, as Table 1's other
  methods; :class:`RatioEstimator` is its one-trial view.

Both estimators have an sklearn-like API: ``fit(...)`` returns the estimator,
``predict_proba(x)`` returns ``p̂(y=1|x)`` as a ``(n,)`` vector (not sklearn's
``(n, 2)``) and ``predict(x)`` thresholds it at 0.5. Features are flattened to
``(n, features)``. Both fits are deterministic (no seed).

Example:
    >>> from adpue_tf.experiments.baselines import SAREM, RatioEstimator
    >>> SAREM(propensity_features=[2, 3]).max_iter, RatioEstimator().theta_floor
    (500, 1e-06)
"""

from adpue_tf.experiments.baselines.common import fit_logistic
from adpue_tf.experiments.baselines.ratio import RatioEstimator, RatioFit, fit_ratio
from adpue_tf.experiments.baselines.sar_em import SAREM, sar_em_posterior
from adpue_tf.experiments.baselines.sar_em_batched import BatchedSAREM
from adpue_tf.experiments.baselines.weighted_logistic import fit_weighted_logistic

__all__ = ["SAREM", "BatchedSAREM", "RatioEstimator", "RatioFit", "fit_logistic", "fit_ratio",
           "fit_weighted_logistic", "sar_em_posterior"]
