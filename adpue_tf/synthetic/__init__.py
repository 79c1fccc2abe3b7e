"""Synthetic data with known truth.

* :mod:`~adpue_tf.synthetic.tabular`: Gaussian features, logistic ``p(y=1|x)`` and
  ``θ(e=1|x)``: the ground-truth checks of SPEC.md.
* :mod:`~adpue_tf.synthetic.ad_log`: a simulated ad impression log (users,
  items, campaigns, context) with a biased logging policy, written as TFRecord
  shards of ``tf.Example``: ``adpue-tf simulate-logs``.
* :mod:`~adpue_tf.synthetic.ad_family`: a family of named ad logs that differ in
  id cardinality, base rate, exposure skew, the exposure-conversion link and
  the mechanisms (:func:`ad_log_family`).

Example:
    >>> from adpue_tf import synthetic
    >>> synthetic.make_synthetic(10, seed=0).x.shape
    (10, 2)
"""

from adpue_tf.synthetic.ad_family import (
    AdFamilyConfig,
    AdFamilyLog,
    AdFamilySimulator,
    ad_log_family,
)
from adpue_tf.synthetic.ad_log import (
    AdLogConfig,
    AdLogRows,
    AdLogSimulator,
    read_ad_log_meta,
    write_ad_log,
)
from adpue_tf.synthetic.tabular import (
    SyntheticData,
    SyntheticPUE,
    make_synthetic,
    synthetic_pue,
    synthetic_sse,
)

__all__ = [
    "AdFamilyConfig",
    "AdFamilyLog",
    "AdFamilySimulator",
    "AdLogConfig",
    "AdLogRows",
    "AdLogSimulator",
    "SyntheticData",
    "SyntheticPUE",
    "ad_log_family",
    "make_synthetic",
    "read_ad_log_meta",
    "synthetic_pue",
    "synthetic_sse",
    "write_ad_log",
]
