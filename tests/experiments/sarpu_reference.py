"""Test-only re-statement of the reference SAR-EM (Bekker & Davis), in NumPy and scikit-learn.

Written from the algorithm of ``sarpu.pu_learning.pu_learn_sar_em`` in
https://github.com/ML-KULeuven/SAR-PU (``sarpu/sarpu/pu_learning.py`` and
``PUmodels.py``), which is not on PyPI; this file is our own code for the same
steps, so that ``adpue_tf.experiments.baselines`` can be compared with it on
identical data:

* models: scikit-learn ``LogisticRegression(C=1, solver="liblinear")`` (L2 on
  the weights and the intercept, ``max_iter=100``, ``tol=1e-4``), refitted from
  scratch at every M-step; the propensity sees ``propensity_features`` only;
* start (``initialize_simple``): classifier on ``s`` with weights
  ``s·(1-c) + (1-s)·c``, ``c`` the labelled share; propensity on ``s`` with
  weights ``s + (1-s)·f``;
* each round: propensity on ``s`` with weights ``P`` (the posterior), classifier
  on the rows doubled (label 1 weight ``P``, label 0 weight ``1-P``), then the
  E-step and the expected log-likelihood;
* stop when, after more than ``window`` rounds, both the mean absolute slope
  (least squares over the last ``window`` rounds) of the unlabelled rows'
  propensities is below ``slope_eps`` and the best log-likelihood of the last
  ``window`` values exceeds the first of them by less than ``ll_eps``;
* optional refit of the classifier on propensity-weighted rows: label 1 with
  weight ``s/e``, label 0 with weight ``(1-s) + s·(1 - 1/e)``.
"""

from __future__ import annotations

import numpy as np
from sklearn.linear_model import LogisticRegression


def _lr(x, y, w, C):
    return LogisticRegression(C=C, solver="liblinear", max_iter=100, tol=1e-4).fit(
        x, y.astype(int), sample_weight=w)


def _p(model, x):
    return model.predict_proba(x)[:, 1]


def _posterior(f, e, s):
    return s + (1 - s) * f * (1 - e) / (1 - f * e)


def _expected_loglik(f, e, s):
    lab, unl_pos, unl_neg = f * e, f * (1 - e), 1 - f
    post = unl_pos / (unl_pos + unl_neg)
    return float(np.mean(s * np.log(lab) + (1 - s) * (
        post * np.log(unl_pos) + (1 - post) * np.log(unl_neg))))


def _slopes(hist):
    """Least-squares slope of each row of ``hist`` (rows, window) over equidistant steps."""
    k = hist.shape[1]
    t = np.arange(k) - (k - 1) / 2
    return ((hist - hist.mean(1, keepdims=True)) @ t / k) / np.mean(t ** 2)


def sar_em_reference(x, s, propensity_features, *, C=1.0, max_its=500, slope_eps=1e-4,
                     ll_eps=1e-4, window=10, refit_classifier=True):
    """Returns ``(classifier, propensity, info)``: fitted sklearn models and the trace."""
    s = np.asarray(s, float)
    xp = x[:, propensity_features]
    c = s.mean()
    clf = _lr(x, s, s * (1 - c) + (1 - s) * c, C)
    prop = _lr(xp, s, s + (1 - s) * _p(clf, x), C)
    f, e = _p(clf, x), _p(prop, xp)
    post = _posterior(f, e, s)
    lls = [_expected_loglik(f, e, s)]
    hist = np.zeros((int((s == 0).sum()), window))
    i = 0
    for i in range(max_its):
        prop = _lr(xp, s, post, C)
        clf = _lr(np.concatenate([x, x]), np.concatenate([np.ones_like(s), np.zeros_like(s)]),
                  np.concatenate([post, 1 - post]), C)
        f, e = _p(clf, x), _p(prop, xp)
        post = _posterior(f, e, s)
        lls.append(_expected_loglik(f, e, s))
        hist = np.concatenate([hist[:, 1:], e[s == 0][:, None]], axis=1)
        if i > window:
            gain = max(lls[-window:]) - lls[-window]
            if np.mean(np.abs(_slopes(hist))) < slope_eps and gain < ll_eps:
                break
    if refit_classifier:
        clf = _lr(np.concatenate([x, x]), np.concatenate([np.ones_like(s), np.zeros_like(s)]),
                  np.concatenate([s / e, (1 - s) + s * (1 - 1 / e)]), C)
    return clf, prop, {"nb_iterations": i, "loglikelihoods": lls}
