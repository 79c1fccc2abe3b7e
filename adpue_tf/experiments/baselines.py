"""Baselines that are not a loss: SAR-EM and the two-model ratio (SPEC.md, Baselines).

One implementation of each, for linear models, used by Table 1
(:mod:`adpue_tf.experiments.table1`) and by the tests:

* :class:`SAREM` follows the reference implementation of Bekker & Davis step
  for step, with its scikit-learn (liblinear) logistic regressions; Table 1
  fits one per trial.
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

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from adpue_tf import risks
from adpue_tf._checks import check_int
from adpue_tf._numpy import sigmoid
from adpue_tf.experiments.linear_fit import LinearFit, fit_linear
from adpue_tf.labels import check_binary, check_finite, pack_pu

__all__ = ["SAREM", "RatioEstimator", "RatioFit", "fit_logistic", "fit_ratio",
           "sar_em_posterior"]


def sar_em_posterior(f: np.ndarray, e: np.ndarray, s: np.ndarray) -> np.ndarray:
    """SAR-EM's E-step: ``P(y=1 | x, s)`` from classifier ``f``, propensity ``e``, label ``s``.

    Labelled rows (``s = 1``) are positive; for unlabelled rows
    ``P(y=1 | x, s=0) = f·(1-e) / (1 - f·e)`` (Bekker & Davis 2018).

    Example:
        >>> sar_em_posterior(np.array([0.5, 0.5]), np.array([0.5, 0.5]), np.array([1.0, 0.0]))
        array([1.        , 0.33333333])
    """
    return s + (1 - s) * f * (1 - e) / np.maximum(1 - f * e, 1e-12)


def _proba(model: Any, x: np.ndarray) -> np.ndarray:
    """Column 1 of a scikit-learn classifier's ``predict_proba``."""
    return model.predict_proba(x)[:, 1]


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


@dataclasses.dataclass(frozen=True)
class RatioFit:
    """What :func:`fit_ratio` returns: ``q̂``'s and ``θ̂``'s linear models per trial."""

    q: LinearFit
    theta: LinearFit
    theta_floor: float

    def predict_proba(self, x: np.ndarray) -> np.ndarray:
        """``clip(q̂ / max(θ̂, theta_floor), 0, 1)`` of trial ``t`` on ``x[t]``."""
        q, theta = sigmoid(self.q.logits(x)), sigmoid(self.theta.logits(x))
        return np.clip(q / np.maximum(theta, self.theta_floor), 0.0, 1.0)


def fit_ratio(x_pu: Any, w: Any, x_e: Any, e: Any, *, theta_floor: float = 1e-6,
              l2: float = 0.0, steps: int = 200, learning_rate: float = 0.05) -> RatioFit:
    """Separate estimation for linear models, every trial at once.

    ``q̂(w=1|x)``: logistic regression of ``W`` on the PU rows; ``θ̂(e=1|x)``:
    logistic regression of ``E`` on the E rows, trained independently
    (:func:`fit_linear` with ``risks.logit``, penalty ``l2·‖w‖²``). Under strong
    ignorability ``q = p·θ``, so ``p̂ = clip(q̂ / max(θ̂, theta_floor), 0, 1)``.

    Args:
        x_pu: PU features ``(trials, n_pu, features)``; ``w``: ``W``, ``(trials, n_pu)``.
        x_e: E features ``(trials, n_e, features)``; ``e``: ``E``, ``(trials, n_e)``.
        theta_floor: lower bound on ``θ̂`` in the division, in ``(0, 1)``.
        l2, steps, learning_rate: :func:`fit_linear`'s options for both models.

    Returns:
        A :class:`RatioFit`.

    Example:
        >>> from adpue_tf.synthetic import synthetic_pue
        >>> d = synthetic_pue(200, 200, seed=0)
        >>> r = fit_ratio(d.x_pu[None], d.w_pu[None], d.x_e[None], d.e_e[None], steps=20)
        >>> r.predict_proba(d.x_pu[None]).shape
        (1, 200)
    """
    theta_floor = _check_float("theta_floor", theta_floor, positive=True, high=1.0)
    x_pu, x_e = (np.asarray(check_finite(n, v), np.float32) for n, v in (("x_pu", x_pu), ("x_e", x_e)))
    if x_pu.ndim == x_e.ndim == 3 and x_pu.shape[::2] != x_e.shape[::2]:
        raise ValueError(f"`x_e` has shape {x_e.shape}; it needs the trials and "
                         f"features of `x_pu` {x_pu.shape}.")
    q, theta = (fit_logistic(x, y, l2=l2, steps=steps, learning_rate=learning_rate,
                             names=names)
                for x, y, names in ((x_pu, w, ("x_pu", "w")), (x_e, e, ("x_e", "e"))))
    return RatioFit(q, theta, theta_floor)


def fit_logistic(x: Any, y: Any, *, l2: float = 0.0, steps: int = 200,
                 learning_rate: float = 0.05, names: tuple[str, str] = ("x", "y")) -> LinearFit:
    """Logistic regression of a 0/1 label, every trial at once: the ratio's ``q̂`` and ``θ̂``.

    :func:`fit_linear` with ``risks.logit`` (the label as ``W`` of PU rows):
    minimises ``mean(BCE) + l2·‖w‖²`` by full-batch Adam from zero. Table 1's
    IPS column takes its ``θ̂`` from here too.

    Args:
        x: features ``(trials, rows, features)``.
        y: labels in {0, 1}, ``(trials, rows)``.
        l2, steps, learning_rate: :func:`fit_linear`'s options.
        names: the names of ``x`` and ``y`` in error messages.

    Returns:
        The fitted :class:`~adpue_tf.experiments.linear_fit.LinearFit`.

    Example:
        >>> x = np.array([[[-1.0], [1.0], [-2.0], [2.0]]])
        >>> fit = fit_logistic(x, [[0, 1, 1, 0]], steps=5)
        >>> fit.weights.shape, fit.bias.shape
        ((1, 1), (1,))
    """
    xn, yn = names
    x = np.asarray(check_finite(xn, x), np.float32)
    y = _binary(yn, y)
    if x.ndim != 3 or y.shape != x.shape[:2]:
        raise ValueError(f"`{xn}` must be (trials, rows, features) and `{yn}` (trials, rows) "
                         f"with the same trials and rows; got {x.shape} and {y.shape}.")
    packed = np.stack([pack_pu(r) for r in y])
    return fit_linear(x, packed, risks.logit, steps=steps, learning_rate=learning_rate, l2=l2)


# --------------------------------------------------------- one-trial views


def _check_float(name: str, value: Any, positive: bool, high: float = math.inf) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"`{name}` must be a number, got {type(value).__name__}.")
    if not (math.isfinite(value) and (0 < value if positive else 0 <= value) and value < high):
        raise ValueError(f"`{name}` must be finite, {'>' if positive else '>='} 0 and "
                         f"< {high}, got {value}.")
    return float(value)


def _binary(name: str, value: Any) -> np.ndarray:
    """``value`` as float64, any shape, holding only 0 and 1."""
    arr = np.asarray(check_finite(name, value), np.float64)
    if not np.all((arr == 0) | (arr == 1)):
        raise ValueError(f"`{name}` must hold only 0 and 1.")
    return arr


def _check_features(cols: Any, dim: int | None = None) -> tuple[int, ...]:
    if isinstance(cols, (str, bytes)) or not isinstance(cols, (Sequence, np.ndarray)):
        raise TypeError("`propensity_features` must be a sequence of column indices, "
                        f"got {type(cols).__name__}.")
    out = tuple(check_int("propensity_features", i, 0) for i in cols)
    if not out or len(set(out)) != len(out):
        raise ValueError(f"`propensity_features` must be non-empty and unique, got {list(out)}.")
    if dim is not None and max(out) >= dim:
        raise ValueError(f"`propensity_features` has index {max(out)} but `x` has {dim} "
                         "features.")
    return out


def _check_x(name: str, x: Any, dim: int | None = None) -> np.ndarray:
    arr = check_finite(name, x)
    if arr.ndim < 2:
        raise ValueError(f"`{name}` must have shape (n, features...), got shape {arr.shape}.")
    if arr.shape[0] == 0 or arr.size == 0:
        raise ValueError(f"`{name}` is empty (shape {arr.shape}); it needs rows and features.")
    arr = arr.reshape(arr.shape[0], -1)
    if np.issubdtype(arr.dtype, np.floating) and np.abs(arr).max() > np.finfo(np.float32).max:
        raise ValueError(f"`{name}` has values too large for float32.")
    arr = arr.astype(np.float32)
    if dim is not None and arr.shape[1] != dim:
        raise ValueError(f"`{name}` has {arr.shape[1]} (flattened) features, expected {dim}.")
    return arr


def _check_labels(name: str, y: Any, rows: int, x_name: str) -> np.ndarray:
    arr = check_binary(name, y)
    if len(arr) != rows:
        raise ValueError(f"`{name}` has {len(arr)} rows but `{x_name}` has {rows}.")
    return arr


class _OneTrial:
    """One fitted data set: features flattened to ``(n, dim)``; ``fit_`` predicts."""

    n_features_: int | None = None
    fit_: Any

    def _x(self, x: Any) -> np.ndarray:
        if self.n_features_ is None:
            raise RuntimeError(f"This {type(self).__name__} is not fitted; call fit() first.")
        return _check_x("x", x, self.n_features_)[None]

    def predict_proba(self, x: Any) -> np.ndarray:
        """``p̂(y=1|x)``, shape ``(n,)``."""
        x = self._x(x)
        return self.fit_.predict_proba(x)[0]

    def predict(self, x: Any) -> np.ndarray:
        """Hard labels ``predict_proba(x) > 0.5`` as 0/1 integers, shape ``(n,)``."""
        return (self.predict_proba(x) > 0.5).astype(np.int64)


class SAREM(_OneTrial):
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


class RatioEstimator(_OneTrial):
    """Separate estimation on one data set: a one-trial view of :func:`fit_ratio`.

    ``p̂(y=1|x) = clip(q̂(w=1|x) / max(θ̂(e=1|x), theta_floor), 0, 1)`` with
    ``q̂`` a linear logistic regression of ``W`` on ``D_PU`` and ``θ̂`` one of
    ``E`` on ``D_E``.

    Args:
        theta_floor: lower bound on ``θ̂`` in the division, in ``(0, 1)``.
        l2, steps, learning_rate: as :func:`fit_ratio`.

    Attributes:
        fit_: the :class:`RatioFit` (one trial).

    Example:
        >>> from adpue_tf.synthetic import synthetic_pue
        >>> d = synthetic_pue(200, 200, seed=0)
        >>> r = RatioEstimator(steps=20).fit(d.x_pu, d.w_pu, d.x_e, d.e_e)
        >>> bool((r.predict_q(d.x_pu) <= 1).all()), r.predict_proba(d.x_pu[:4]).shape
        (True, (4,))
    """

    def __init__(self, *, theta_floor: float = 1e-6, l2: float = 0.0, steps: int = 200,
                 learning_rate: float = 0.05) -> None:
        self.theta_floor = _check_float("theta_floor", theta_floor, positive=True, high=1.0)
        self.l2 = _check_float("l2", l2, positive=False)
        self.steps = check_int("steps", steps, 1)
        self.learning_rate = _check_float("learning_rate", learning_rate, positive=True)

    def fit(self, x_pu: Any, w: Any, x_e: Any, e: Any) -> RatioEstimator:
        """Fit ``q̂`` on ``(x_pu, w)`` and ``θ̂`` on ``(x_e, e)``.

        Args:
            x_pu: PU features, shape ``(n_pu, ...)``.
            w: observed positives ``W`` in {0, 1}, shape ``(n_pu,)``.
            x_e: exposure-log features, same feature shape as ``x_pu``.
            e: exposures ``E`` in {0, 1}, shape ``(n_e,)``.

        Returns:
            ``self``.

        Raises:
            ValueError, TypeError: on bad input, naming the argument.
        """
        x_pu = _check_x("x_pu", x_pu)
        w = _check_labels("w", w, len(x_pu), "x_pu")
        x_e = _check_x("x_e", x_e, x_pu.shape[1])
        e = _check_labels("e", e, len(x_e), "x_e")
        self.fit_ = fit_ratio(x_pu[None], w[None], x_e[None], e[None],
                              theta_floor=self.theta_floor, l2=self.l2, steps=self.steps,
                              learning_rate=self.learning_rate)
        self.n_features_ = x_pu.shape[1]
        return self

    def predict_q(self, x: Any) -> np.ndarray:
        """``q̂(w=1|x)``, shape ``(n,)``."""
        x = self._x(x)
        return sigmoid(self.fit_.q.logits(x))[0]

    def predict_theta(self, x: Any) -> np.ndarray:
        """``θ̂(e=1|x)``, shape ``(n,)``."""
        x = self._x(x)
        return sigmoid(self.fit_.theta.logits(x))[0]
