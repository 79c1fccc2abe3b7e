"""Synthetic data with known truth.

* :mod:`~adpue_tf.synthetic.tabular`: Gaussian features, logistic ``p(y=1|x)`` and
  ``θ(e=1|x)``: the ground-truth checks of SPEC.md.
* :mod:`~adpue_tf.synthetic.ad_log`: a simulated ad impression log (users,
  items, campaigns, context) with a biased logging policy, written as TFRecord
  shards of ``tf.Example``: ``adpue-tf simulate-logs``.

Example:
    >>> from adpue_tf import synthetic
    >>> synthetic.make_synthetic(10, seed=0).x.shape
    (10, 2)
"""

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
    "AdLogConfig",
    "AdLogRows",
    "AdLogSimulator",
    "SyntheticData",
    "SyntheticPUE",
    "make_synthetic",
    "read_ad_log_meta",
    "synthetic_pue",
    "synthetic_sse",
    "write_ad_log",
]
