"""Baselines that are not a loss: SAR-EM and the two-model ratio (SPEC.md, Baselines).

Both are small estimators with an sklearn-like API: ``fit(...)`` returns the
estimator, ``predict_proba(x)`` returns ``p̂(y=1|x)`` as a ``(n,)`` vector (not
sklearn's ``(n, 2)``) and ``predict(x)`` thresholds it at 0.5. The model class
is a factory ``build_model(dim) -> keras.Model`` with one logit out, called once
per inner model on the number of flattened features: the default,
:func:`linear_logit`, gives the linear models of the paper's Table 1; pass an
MLP factory for Table 2. Features are flattened to ``(n, dim)``.

Training is plain Keras: Adam on ``BinaryCrossentropy(from_logits=True)`` with
sample weights, stepped by ``train_on_batch`` over shuffled batches of
``batch_size`` rows (``>= n``: full batch). On CPU a step of a small model
costs about the same for 100 or 5000 rows, so large batches (1024) and a high
learning rate (0.05) converge a linear model in a few hundred steps, under a
second; the step loop avoids ``Model.fit``'s per-call overhead, which dominated
SAR-EM's many short M-steps. ``fit`` first calls
``keras.utils.set_random_seed(seed)`` and seeds the shuffling: same seed, same fit.

Example:
    >>> import keras
    >>> from adpue_tf.experiments.baselines import SAREM, RatioEstimator
    >>> def mlp(dim):
    ...     return keras.Sequential([keras.Input((dim,)),
    ...                              keras.layers.Dense(16, activation="relu"),
    ...                              keras.layers.Dense(1)])
    >>> table1, table2 = RatioEstimator(), RatioEstimator(mlp, learning_rate=0.01)
    >>> SAREM(propensity_features=[2, 3]).max_iter
    30
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import keras
import numpy as np

from adpue_tf._checks import check_int
from adpue_tf._numpy import sigmoid as _sigmoid
from adpue_tf.labels import check_binary, check_finite

__all__ = ["SAREM", "ModelFactory", "RatioEstimator", "linear_logit"]

#: ``build_model(dim)``: a fresh Keras model mapping ``(batch, dim)`` to one logit.
ModelFactory = Callable[[int], keras.Model]


def linear_logit(dim: int) -> keras.Model:
    """Default model factory: linear logistic model, ``Dense(1)`` giving a logit.

    Example:
        >>> linear_logit(3).output_shape
        (None, 1)
    """
    return keras.Sequential([keras.Input((int(dim),)), keras.layers.Dense(1)])


def sar_em_posterior(f: np.ndarray, e: np.ndarray, s: np.ndarray) -> np.ndarray:
    """SAR-EM's E-step: ``P(y=1 | x, s)`` from classifier ``f``, propensity ``e``, label ``s``.

    Labelled rows (``s = 1``) are positive; for unlabelled rows
    ``P(y=1 | x, s=0) = f·(1-e) / (1 - f·e)`` (Bekker & Davis 2018).

    Example:
        >>> sar_em_posterior(np.array([0.5, 0.5]), np.array([0.5, 0.5]), np.array([1.0, 0.0]))
        array([1.        , 0.33333333])
    """
    return s + (1 - s) * f * (1 - e) / np.maximum(1 - f * e, 1e-12)


def _check_float(name: str, value: Any, positive: bool, high: float = math.inf) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"`{name}` must be a number, got {type(value).__name__}.")
    if not (math.isfinite(value) and (0 < value if positive else 0 <= value) and value < high):
        raise ValueError(f"`{name}` must be finite, {'>' if positive else '>='} 0 and "
                         f"< {high}, got {value}.")
    return float(value)


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


class _KerasBaseline:
    """Shared options, validation and the Keras training loop."""

    def __init__(self, build_model: ModelFactory | None = None, *, epochs: int = 50,
                 batch_size: int = 1024, learning_rate: float = 0.05, seed: int = 0,
                 verbose: int = 0) -> None:
        if build_model is not None and not callable(build_model):
            raise TypeError(f"`build_model` must be callable (dim -> keras.Model) or None, "
                            f"got {type(build_model).__name__}.")
        self.build_model = build_model
        self.epochs = check_int("epochs", epochs, 1)
        self.batch_size = check_int("batch_size", batch_size, 1)
        self.learning_rate = _check_float("learning_rate", learning_rate, positive=True)
        self.seed = check_int("seed", seed, 0)
        self.verbose = check_int("verbose", verbose, 0)
        self.n_features_: int | None = None
        self._rng = np.random.default_rng(self.seed)

    def _start_fit(self) -> None:
        keras.utils.set_random_seed(self.seed)
        self._rng = np.random.default_rng(self.seed)
        self.n_features_ = None

    def _new_model(self, dim: int) -> keras.Model:
        model = (self.build_model or linear_logit)(dim)
        if not isinstance(model, keras.Model):
            raise TypeError(f"`build_model` must return a keras.Model, got {type(model).__name__}.")
        out = tuple(model(np.zeros((2, dim), np.float32)).shape)
        if out not in ((2,), (2, 1)):
            raise ValueError(f"`build_model({dim})` must output one logit per row, "
                             f"got output shape {out} for 2 rows.")
        model.compile(optimizer=keras.optimizers.Adam(self.learning_rate),
                      loss=keras.losses.BinaryCrossentropy(from_logits=True))
        return model

    def _train(self, model: keras.Model, x: np.ndarray, y: np.ndarray, weight: np.ndarray,
               epochs: int) -> None:
        # Batches of exactly `bs` rows cut from a stream of shuffled passes (an epoch is
        # ceil(n/bs) steps): one batch shape, so the train step is traced only once.
        n, bs = len(x), min(self.batch_size, len(x))
        y32, w32 = y.astype(np.float32)[:, None], weight.astype(np.float32)
        stream = np.empty(0, dtype=np.int64)
        for epoch in range(epochs):
            for _ in range(math.ceil(n / bs)):
                if len(stream) < bs:
                    stream = np.concatenate([stream, self._rng.permutation(n)])
                idx, stream = stream[:bs], stream[bs:]
                loss = model.train_on_batch(x[idx], y32[idx], sample_weight=w32[idx])
            if self.verbose:
                print(f"{model.name} epoch {epoch + 1}/{epochs} - loss: {float(loss):.4f}")

    @staticmethod
    def _proba(model: keras.Model, x: np.ndarray, chunk: int = 8192) -> np.ndarray:
        z = [keras.ops.convert_to_numpy(model(x[i:i + chunk], training=False)).reshape(-1)
             for i in range(0, len(x), chunk)]
        return _sigmoid(np.concatenate(z).astype(np.float64))

    def _predict(self, model_attr: str, x: Any, cols: list[int] | None = None) -> np.ndarray:
        if self.n_features_ is None:
            raise RuntimeError(f"This {type(self).__name__} is not fitted; call fit() first.")
        x = _check_x("x", x, self.n_features_)
        return self._proba(getattr(self, model_attr), x if cols is None else x[:, cols])

    def predict(self, x: Any) -> np.ndarray:
        """Hard labels ``predict_proba(x) > 0.5`` as 0/1 integers, shape ``(n,)``."""
        return (self.predict_proba(x) > 0.5).astype(np.int64)


class SAREM(_KerasBaseline):
    """SAR-EM: EM over a classifier ``f(x) = p(y=1|x)`` and a propensity ``e(x)``.

    Bekker, J. and Davis, J. (2018), "Learning from Positive and Unlabeled
    Data under the Selected At Random Assumption", PMLR 94 (LIDTA), 8-22;
    extended as arXiv:1809.03207 (ECML-PKDD 2019). One-sample PU data ``(x, s)``
    with ``s = W = E·Y`` and ``e(x) = p(s=1|y=1, x)``, which for ADPUE data is
    ``θ(e=1|x)``. Initialised as their ``initialize_simple``: ``f`` fit on ``s``
    with classes reweighted to a prior of 0.5, ``e`` on ``s`` with weights
    ``s + (1-s)·f``. Each round: E-step ``P = 1`` on labelled rows,
    ``P = f(1-e)/(1-f·e)`` on the others; M-step ``e`` on target ``s`` with
    weights ``P``, ``f`` on the soft target ``P`` (the same loss as their rows
    duplicated as positive with weight ``P`` and negative with ``1-P``), both
    warm-started for ``m_step_epochs`` epochs (generalised EM). Stops after
    ``max_iter`` rounds or when the mean log-likelihood
    ``s·log(f·e) + (1-s)·log(1-f·e)`` changes by less than ``tol``.

    The likelihood is symmetric in ``(f, e)`` when both see the same features,
    so EM may return the propensity as the classifier; as Bekker & Davis do,
    restrict the propensity to ``propensity_features`` to identify the model.

    Args:
        build_model: model factory for both models (default :func:`linear_logit`).
        propensity_features: column indices (of the flattened ``x``) the
            propensity sees; ``None``: all.
        max_iter: maximum number of EM rounds (``0``: initialisation only).
        tol: stop when the log-likelihood changes by less than this.
        m_step_epochs: epochs of each warm-started M-step.
        epochs: epochs of each initial fit.
        batch_size, learning_rate, seed, verbose: Adam training options.

    Attributes:
        classifier_, propensity_: the fitted Keras models (logit outputs).
        log_likelihoods_: mean log-likelihood after the initialisation and each round.
        n_iter_: EM rounds run. converged_: whether ``tol`` stopped it.

    Example:
        >>> from adpue_tf.experiments.baselines import SAREM
        >>> from adpue_tf.synthetic import synthetic_pue
        >>> s = synthetic_pue(300, 1, seed=0)
        >>> m = SAREM(epochs=2, max_iter=2, propensity_features=[1]).fit(s.x_pu, s.w_pu)
        >>> p = m.predict_proba(s.x_pu)
        >>> p.shape, bool(((p >= 0) & (p <= 1)).all()), m.n_iter_ <= 2
        ((300,), True, True)
    """

    def __init__(self, build_model: ModelFactory | None = None, *,
                 propensity_features: Sequence[int] | None = None, max_iter: int = 30,
                 tol: float = 1e-6, m_step_epochs: int = 2, epochs: int = 50,
                 batch_size: int = 1024, learning_rate: float = 0.05, seed: int = 0,
                 verbose: int = 0) -> None:
        super().__init__(build_model, epochs=epochs, batch_size=batch_size,
                         learning_rate=learning_rate, seed=seed, verbose=verbose)
        if propensity_features is not None:
            if isinstance(propensity_features, (str, bytes)) or not isinstance(
                    propensity_features, (Sequence, np.ndarray)):
                raise TypeError("`propensity_features` must be a sequence of column indices.")
            propensity_features = [check_int("propensity_features", i, 0)
                                   for i in propensity_features]
            if not propensity_features or len(set(propensity_features)) != len(
                    propensity_features):
                raise ValueError("`propensity_features` must be non-empty and unique.")
        self.propensity_features = propensity_features
        self.max_iter = check_int("max_iter", max_iter, 0)
        self.tol = _check_float("tol", tol, positive=False)
        self.m_step_epochs = check_int("m_step_epochs", m_step_epochs, 1)

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
        self._start_fit()
        x = _check_x("x", x)
        s = _check_labels("w", w, len(x), "x")
        if s.min() == s.max():
            raise ValueError("`w` must hold both labelled (1) and unlabelled (0) rows.")
        cols = self.propensity_features or list(range(x.shape[1]))
        if max(cols) >= x.shape[1]:
            raise ValueError(f"`propensity_features` has index {max(cols)} but `x` has "
                             f"{x.shape[1]} features.")
        xp = x[:, cols]
        self.classifier_, self.propensity_ = self._new_model(x.shape[1]), self._new_model(len(cols))
        pl = s.mean()
        self._train(self.classifier_, x, s, s * (1 - pl) + (1 - s) * pl, self.epochs)
        f = self._proba(self.classifier_, x)
        self._train(self.propensity_, xp, s, s + (1 - s) * f, self.epochs)
        e = self._proba(self.propensity_, xp)
        self.log_likelihoods_ = [self._loglik(f, e, s)]
        self.n_iter_, self.converged_ = 0, False
        for _ in range(self.max_iter):
            post = sar_em_posterior(f, e, s)
            self._train(self.propensity_, xp, s, post, self.m_step_epochs)
            self._train(self.classifier_, x, post, np.ones_like(s), self.m_step_epochs)
            f, e = self._proba(self.classifier_, x), self._proba(self.propensity_, xp)
            self.log_likelihoods_.append(self._loglik(f, e, s))
            self.n_iter_ += 1
            if abs(self.log_likelihoods_[-1] - self.log_likelihoods_[-2]) < self.tol:
                self.converged_ = True
                break
        self._cols, self.n_features_ = cols, x.shape[1]
        return self

    @staticmethod
    def _loglik(f: np.ndarray, e: np.ndarray, s: np.ndarray) -> float:
        fe = np.clip(f * e, 1e-12, 1 - 1e-12)
        return float(np.mean(s * np.log(fe) + (1 - s) * np.log1p(-fe)))

    def predict_proba(self, x: Any) -> np.ndarray:
        """``f(x) = p̂(y=1|x)``, shape ``(n,)``."""
        return self._predict("classifier_", x)

    def predict_propensity(self, x: Any) -> np.ndarray:
        """``e(x) = p̂(s=1|y=1, x)`` (``θ̂(e=1|x)`` for ADPUE data), shape ``(n,)``."""
        return self._predict("propensity_", x, self._cols)


class RatioEstimator(_KerasBaseline):
    """Separate estimation: ``p̂(y=1|x) = clip(q̂(w=1|x) / θ̂(e=1|x), 0, 1)``.

    ``q̂`` is a logistic classifier of ``W`` on ``D_PU``, ``θ̂`` one of ``E``
    on ``D_E`` (binary cross-entropy, trained independently). Under strong
    ignorability ``q = p·θ``, so the ratio recovers ``p``; ``θ̂`` is floored
    at ``theta_floor`` before dividing.

    Args:
        build_model: model factory for both models (default :func:`linear_logit`).
        theta_floor: lower bound on ``θ̂`` in the division, in ``(0, 1)``.
        epochs, batch_size, learning_rate, seed, verbose: Adam training options.

    Attributes:
        q_model_, theta_model_: the fitted Keras models (logit outputs).

    Example:
        >>> from adpue_tf.experiments.baselines import RatioEstimator
        >>> from adpue_tf.synthetic import synthetic_pue
        >>> s = synthetic_pue(200, 200, seed=0)
        >>> r = RatioEstimator(epochs=2, seed=1).fit(s.x_pu, s.w_pu, s.x_e, s.e_e)
        >>> bool((r.predict_q(s.x_pu) <= 1).all()), r.predict_proba(s.x_pu[:4]).shape
        (True, (4,))
    """

    def __init__(self, build_model: ModelFactory | None = None, *, theta_floor: float = 1e-6,
                 epochs: int = 50, batch_size: int = 1024, learning_rate: float = 0.05,
                 seed: int = 0, verbose: int = 0) -> None:
        super().__init__(build_model, epochs=epochs, batch_size=batch_size,
                         learning_rate=learning_rate, seed=seed, verbose=verbose)
        self.theta_floor = _check_float("theta_floor", theta_floor, positive=True, high=1.0)

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
        self._start_fit()
        x_pu = _check_x("x_pu", x_pu)
        w = _check_labels("w", w, len(x_pu), "x_pu")
        x_e = _check_x("x_e", x_e, x_pu.shape[1])
        e = _check_labels("e", e, len(x_e), "x_e")
        self.q_model_ = self._new_model(x_pu.shape[1])
        self._train(self.q_model_, x_pu, w, np.ones_like(w), self.epochs)
        self.theta_model_ = self._new_model(x_pu.shape[1])
        self._train(self.theta_model_, x_e, e, np.ones_like(e), self.epochs)
        self.n_features_ = x_pu.shape[1]
        return self

    def predict_q(self, x: Any) -> np.ndarray:
        """``q̂(w=1|x)``, shape ``(n,)``."""
        return self._predict("q_model_", x)

    def predict_theta(self, x: Any) -> np.ndarray:
        """``θ̂(e=1|x)``, shape ``(n,)``."""
        return self._predict("theta_model_", x)

    def predict_proba(self, x: Any) -> np.ndarray:
        """``clip(q̂ / max(θ̂, theta_floor), 0, 1)``, shape ``(n,)``."""
        q, theta = self.predict_q(x), self.predict_theta(x)
        return np.clip(q / np.maximum(theta, self.theta_floor), 0.0, 1.0)
