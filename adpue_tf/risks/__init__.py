"""The debiased risks of SPEC.md as pure functions.

Each function takes a packed ``y_true`` (see :mod:`adpue_tf.labels`) and the
model output, and returns :class:`RiskTerms` (``R+``, ``R-``, the risk, whether
the correction fired), in float32 from logits. The function ``adpue`` is
wrapped by :class:`adpue_tf.losses.ADPUELoss` (key ``"adpue"``), and so on for
every risk; the non-negative correction is in :mod:`adpue_tf.risks.correction`.
Conventions and aliases: ``docs/api/risks.md``.

Example:
    >>> import numpy as np
    >>> from adpue_tf import risks
    >>> from adpue_tf.labels import pack_pu, pack_e
    >>> y = np.concatenate([pack_pu([1, 0]), pack_e([1, 0])])
    >>> terms = risks.adpue(y, np.zeros((4, 1), "float32"), from_logits=True)
    >>> round(float(terms.risk), 4)
    0.6931
"""

from adpue_tf.risks.baselines import ips, logit, nnpu, pnu, upu
from adpue_tf.risks.correction import RiskTerms, corrected, global_value, no_correction
from adpue_tf.risks.debiasing import (
    ad3se,
    adfpu,
    adpe,
    adpue,
    ads,
    adss,
    double_adss,
)
from adpue_tf.risks.exposure import exposed_pu, exposure_brier, exposure_likelihood
from adpue_tf.risks.linear import Coefficients, LinearForm, linear_form

__all__ = [
    "RiskTerms",
    "corrected",
    "global_value",
    "no_correction",
    "adpue",
    "adpe",
    "adfpu",
    "ads",
    "adss",
    "double_adss",
    "ad3se",
    "logit",
    "upu",
    "nnpu",
    "pnu",
    "ips",
    "exposure_likelihood",
    "exposure_brier",
    "exposed_pu",
    "Coefficients",
    "LinearForm",
    "linear_form",
]

#: Former names of :func:`adpue`, :func:`adpe` and :func:`adfpu` (kept as aliases).
nnpue = adpue
nnpe = adpe
fpue = adfpu
