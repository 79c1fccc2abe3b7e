"""SAR-EM (Bekker & Davis), step for step as its reference implementation, one trial at a time."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from adpue_tf.experiments.baselines.common import (
    _check_features,
    _check_float,
    _check_labels,
    _check_x,
    _OneTrial,
    _proba,
)
from adpue_tf.experiments.helpers import check_int

__all__ = ["SAREM", "sar_em_posterior"]


def sar_em_posterior(f: np.ndarray, e: np.ndarray, s: np.ndarray) -> np.ndarray:
    """SAR-EM's E-step: ``P(y=1 | x, s)`` from classifier ``f``, propensity ``e``, label ``s``.

    Labelled rows (``s = 1``) are positive; for unlabelled rows
    ``P(y=1 | x, s=0) = f·(1-e) / (1 - f·e)`` (Bekker & Davis 2018).

    Example:
        >>> sar_em_posterior(np.array([0.5, 0.5]), np.array([0.5, 0.5]), np.array([1.0, 0.0]))
        array([1.        , 0.33333333])
    """
    return s + (1 - s) * f * (1 - e) / np.maximum(1 - f * e, 1e-12)


def _expected_loglik(f: np.ndarray, e: np.ndarray, s: np.ndarray) -> float:
    """SAR-EM's score: mean expected complete-data log-likelihood (the reference's)."""
    f, e = np.clip(f, 1e-12, 1 - 1e-12), np.clip(e, 1e-12, 1 - 1e-12)
    post = sar_em_posterior(f, e, np.zeros_like(s))
    unl = post * np.log(f * (1 - e)) + (1 - post) * np.log1p(-f)
    return float(np.mean(s * np.log(f * e) + (1 - s) * unl))


def _slopes(hist: np.ndarray) -> np.ndarray:
    """Least-squares slope of each row over its equidistant columns."""
    k = hist.shape[1]
    t = np.arange(k) - (k - 1) / 2
    return (hist - hist.mean(1, keepdims=True)) @ t / np.sum(t ** 2)


class EMSettings:
    """SAR-EM's settings, checked once for :class:`SAREM` and ``BatchedSAREM``."""

    propensity_features: tuple[int, ...] | None
    C: float
    max_iter: int
    window: int
    slope_eps: float
    ll_eps: float
    refit_classifier: bool

    def _set_settings(self, propensity_features: Sequence[int] | None, C: float,
                      max_iter: int, window: int, slope_eps: float, ll_eps: float,
                      refit_classifier: bool) -> None:
        self.propensity_features = (None if propensity_features is None
                                    else _check_features(propensity_features))
        self.C = _check_float("C", C, positive=True)
        self.max_iter = check_int("max_iter", max_iter, 0)
        self.window = check_int("window", window, 2)
        self.slope_eps = _check_float("slope_eps", slope_eps, positive=False)
        self.ll_eps = _check_float("ll_eps", ll_eps, positive=False)
        if not isinstance(refit_classifier, bool):
            raise TypeError(f"`refit_classifier` must be a bool, got {refit_classifier!r}.")
        self.refit_classifier = refit_classifier


class SAREM(_OneTrial, EMSettings):
    """SAR-EM (Bekker & Davis 2018): EM over a classifier ``f(x)`` and a propensity ``e(x)``.

    Bekker, J. and Davis, J. (2018), "Learning from Positive and Unlabeled
    Data under the Selected At Random Assumption", PMLR 94 (LIDTA), 8-22. This
    follows their reference implementation, ``sarpu.pu_learning.pu_learn_sar_em``
    (https://github.com/ML-KULeuven/SAR-PU), step for step and with its
    defaults. One-sample PU data ``(x, s)`` with ``s = W = E·Y``; the propensity
    ``e(x) = p(s=1|y=1, x)`` is ``θ(e=1|x)`` for ADPUE data.

    * Models, and the M-step's regularisation: linear logistic regressions,
      scikit-learn's ``LogisticRegression(C=C, solver="liblinear",
      max_iter=100, tol=1e-4)`` as in the reference: each fit minimises
      ``C·Σ_i v_i·ℓ_i + ½(‖w‖² + b²)`` (``v_i`` the row weights; liblinear
      penalises the intercept too), refitted from scratch at every M-step.
      ``f`` reads every feature, ``e`` only ``propensity_features``.
    * Start (their ``initialize_simple``): ``f`` fit on ``s`` with weights
      ``s·(1-c) + (1-s)·c`` (``c`` the labelled share: a class prior of 0.5),
      then ``e`` on ``s`` with weights ``s + (1-s)·f``.
    * Each round: M-step ``e`` on ``s`` with weights ``P``, then ``f`` on the
      rows doubled (label 1 with weight ``P``, label 0 with weight ``1-P``);
      E-step ``P = 1`` on labelled rows, ``f(1-e)/(1-f·e)`` on the others
      (:func:`sar_em_posterior`).
    * Stopping rule: after more than ``window`` rounds, stop when the mean
      absolute least-squares slope of the unlabelled rows' propensities over
      the last ``window`` rounds is below ``slope_eps`` **and** the best of the
      last ``window`` log-likelihoods exceeds the first of them by less than
      ``ll_eps``; at most ``max_iter`` rounds. The log-likelihood is the
      reference's expected complete-data one,
      ``mean(s·log(f·e) + (1-s)·[P·log(f·(1-e)) + (1-P)·log(1-f)])``.
    * Optional final refit (on by default, as in the reference): ``f`` refit on
      propensity-weighted rows, each row as label 1 with weight ``s/e`` and
      label 0 with weight ``(1-s) + s·(1-1/e)``. That last weight is negative
      on labelled rows, and liblinear drops rows of non-positive weight: the
      reference's refit is in fact label 1 with weight ``s/e``, label 0 with
      weight ``1-s`` (we measured its coefficients equal to that fit's to
      1e-7). We pass those non-negative weights, so the refit is the same.
      It re-weights every labelled row by ``1/e``, which pushes ``f`` up: on
      the data below it raised the mean absolute error of ``f`` to the true
      ``p(y=1|x)`` from 0.034 to 0.139.

    Parity with the reference: ``tests/experiments/sarpu_reference.py`` states
    the reference's steps in our own NumPy/scikit-learn code, with the
    negative weights passed to liblinear as the reference passes them. On
    identical data, ``synthetic_pue(2000, 1, seed=0, dim=3)`` with
    ``p(y=1|x) = σ(2x1 - x2)``, ``θ = σ(-1.5x2 + 2x3)``, propensity on
    ``(x2, x3)``, both ran 103 rounds and their fitted ``f`` on 20,000 fresh rows
    differ by at most 4.3e-8 with the refit and 4.9e-8 without (float32
    rounding of our copy of ``x``); the propensities by at most 6.6e-8
    (``test_sarem_matches_reference``).

    The likelihood depends on ``f·e`` only, so the propensity must read a
    restricted set of features to identify the model (Bekker & Davis).
    Needs scikit-learn (the ``bench`` extra).

    Args:
        propensity_features: column indices (of the flattened ``x``) the
            propensity reads; ``None``: all (then ``f`` and ``e`` are not
            identified; pass the columns that drive the labelling).
        C: inverse regularisation strength of every fit (scikit-learn's ``C``).
        max_iter: maximum EM rounds (``0``: the start, then the refit if on).
        window: rounds the stopping rule looks back over (>= 2).
        slope_eps, ll_eps: the stopping rule's thresholds (>= 0).
        refit_classifier: refit ``f`` on propensity-weighted rows at the end.

    Attributes:
        classifier_, propensity_: the fitted scikit-learn models.
        n_iter_: EM rounds run. converged_: whether the stopping rule ended it.
        log_likelihoods_: the log-likelihood after the start and each round.

    Example:
        >>> from adpue_tf.synthetic import synthetic_pue
        >>> d = synthetic_pue(300, 1, seed=0, dim=3)
        >>> m = SAREM(propensity_features=[1, 2], max_iter=2).fit(d.x_pu, d.w_pu)
        >>> p = m.predict_proba(d.x_pu)
        >>> p.shape, bool(((p >= 0) & (p <= 1)).all()), m.n_iter_
        ((300,), True, 2)
    """

    def __init__(self, *, propensity_features: Sequence[int] | None = None, C: float = 1.0,
                 max_iter: int = 500, window: int = 10, slope_eps: float = 1e-4,
                 ll_eps: float = 1e-4, refit_classifier: bool = True) -> None:
        self._set_settings(propensity_features, C, max_iter, window, slope_eps, ll_eps,
                           refit_classifier)

    def _lr(self, x: np.ndarray, y: np.ndarray, v: np.ndarray) -> Any:
        try:
            from sklearn.linear_model import LogisticRegression
        except ImportError as err:
            raise ImportError('SAR-EM needs scikit-learn: pip install "adpue_tf[bench]"') from err

        return LogisticRegression(C=self.C, solver="liblinear", max_iter=100, tol=1e-4).fit(
            x, y.astype(np.int64), sample_weight=v)

    def fit(self, x: Any, w: Any) -> SAREM:
        """Fit on one-sample PU data.

        Args:
            x: features, shape ``(n, ...)``.
            w: observed labels ``s = W`` in {0, 1}, shape ``(n,)``; needs both values.

        Returns:
            ``self``.

        Raises:
            ValueError, TypeError: on bad input, naming the argument.
        """
        x = _check_x("x", x).astype(np.float64)
        s = _check_labels("w", w, len(x), "x").astype(np.float64)
        if s.min() == s.max():
            raise ValueError("`w` must hold both labelled (1) and unlabelled (0) rows.")
        cols = list(_check_features(self.propensity_features or range(x.shape[1]), x.shape[1]))
        xp, x2 = x[:, cols], np.concatenate([x, x])
        y2 = np.concatenate([np.ones_like(s), np.zeros_like(s)])
        c = s.mean()
        clf = self._lr(x, s, s * (1 - c) + (1 - s) * c)
        prop = self._lr(xp, s, s + (1 - s) * _proba(clf, x))
        f, e = _proba(clf, x), _proba(prop, xp)
        lls = [_expected_loglik(f, e, s)]
        hist = np.zeros((int((s == 0).sum()), self.window))
        self.n_iter_, self.converged_ = 0, False
        for i in range(self.max_iter):
            post = sar_em_posterior(f, e, s)
            prop = self._lr(xp, s, post)
            clf = self._lr(x2, y2, np.concatenate([post, 1 - post]))
            f, e = _proba(clf, x), _proba(prop, xp)
            lls.append(_expected_loglik(f, e, s))
            hist = np.concatenate([hist[:, 1:], e[s == 0, None]], axis=1)
            self.n_iter_ = i + 1
            if i > self.window:
                gain = max(lls[-self.window:]) - lls[-self.window]
                if np.mean(np.abs(_slopes(hist))) < self.slope_eps and gain < self.ll_eps:
                    self.converged_ = True
                    break
        if self.refit_classifier:
            clf = self._lr(x2, y2, np.concatenate([s / e, 1 - s]))
        self.classifier_, self.propensity_, self._cols = clf, prop, cols
        self.log_likelihoods_ = lls
        self.n_features_ = x.shape[1]
        return self

    def predict_proba(self, x: Any) -> np.ndarray:
        """``f(x) = p̂(y=1|x)``, shape ``(n,)``."""
        x = self._x(x)
        return _proba(self.classifier_, x[0])

    def predict_propensity(self, x: Any) -> np.ndarray:
        """``e(x) = p̂(s=1|y=1, x)`` (``θ̂(e=1|x)`` for ADPUE data), shape ``(n,)``."""
        x = self._x(x)
        return _proba(self.propensity_, x[0][:, self._cols])
