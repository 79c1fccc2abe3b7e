"""The recommended ADPUE recipe for linear models, every trial at once (Table 1's ``ADPUE``).

Per trial it chooses the L2 strength and the number of alternate-learning rounds
``T`` by cross-validation on the trial's **training** PU/E rows with an observable
proper score, never reading a hidden ``Y`` or a test label, and refits the choice
on every training row. All models of a chunk of trials (every ``l2``, the folds
and the refit) are fitted together by
:func:`adpue_tf.experiments.linear_fit.fit_linear_models`. The steps, the scores
and why: ``docs/api/experiments.md`` (*The linear recipe*).

Example:
    >>> import numpy as np
    >>> from adpue_tf.labels import pack_e, pack_pu
    >>> rng = np.random.default_rng(0)
    >>> x = rng.normal(size=(2, 60, 3)).astype("float32")
    >>> y = np.stack([np.concatenate([pack_pu(rng.random(30) < 0.3),
    ...                               pack_e(rng.random(30) < 0.5)]) for _ in range(2)])
    >>> res = fit_recipe(x, y, RecipeConfig(l2s=(0.1,), max_rounds=1, steps=5))
    >>> res.rounds.shape, res.logits(x).shape
    ((2,), (2, 60))
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

from adpue_tf import risks
from adpue_tf.experiments.helpers import check_settings, sigmoid
from adpue_tf.experiments.linear_fit import LinearFit, _check_tol, fit_linear_models
from adpue_tf.labels import Source, check_finite
from adpue_tf.validation import exposure_nll

__all__ = ["CRITERIA", "RecipeConfig", "RecipeResult", "fit_recipe", "helper_models",
           "reference_risk_value"]

#: The selection criteria (SPEC.md, observable validation scores).
CRITERIA = ("exposure_likelihood", "reference_risk")
#: Floor on θ̂ in the Ratio reference ``q̂/θ̂``.
THETA_FLOOR = 1e-6


@dataclasses.dataclass(frozen=True)
class RecipeConfig:
    """Settings of :func:`fit_recipe`.

    Attributes:
        l2s: the grid of L2 strengths (penalty ``l2·‖w‖²`` on the mean risk).
        max_rounds: the largest number of alternate-learning rounds ``T``
            (candidates ``T = 0 .. max_rounds``).
        folds: cross-validation folds over the training PU and E rows (>= 2).
        criterion: which score chooses: ``"exposure_likelihood"`` or
            ``"reference_risk"``.
        steps: full-batch Adam steps per round (at most, with ``tol``).
        learning_rate: Adam's learning rate.
        tol: stop each model once its objective has converged
            (:func:`~adpue_tf.experiments.linear_fit.fit_linear_models`'s
            ``tol``; ``0``: every model takes ``steps``).
        gamma: nnPUE's correction step (``None``: the paper's plain max).
        theta_l2: L2 of the logistic regressions ``θ̂`` (of ``E``) and ``q̂``
            (of ``W``, for the reference).
        theta_rows: the E rows ``θ̂`` is fitted on for a fold's scores:
            ``"training"`` (the training folds') or ``"all"`` (every E row of
            the trial: they carry no ``W``, so nothing held out leaks).
        max_floats: fit at most this many floats at once, counting each trial's
            features and ``8 × rows`` per model (trials are processed in equal chunks).

    Example:
        >>> RecipeConfig().criterion
        'exposure_likelihood'
    """

    l2s: tuple[float, ...] = (0.01, 0.03, 0.1, 0.3)
    max_rounds: int = 5
    folds: int = 3
    criterion: str = "exposure_likelihood"
    steps: int = 200
    learning_rate: float = 0.05
    tol: float = 0.0
    gamma: float | None = 1.0
    theta_l2: float = 0.01
    theta_rows: str = "training"
    max_floats: int = 40_000_000

    def __post_init__(self) -> None:
        if not self.l2s or not all(isinstance(v, (int, float)) and math.isfinite(v) and v >= 0
                                   for v in self.l2s):
            raise ValueError(f"`l2s` must be a non-empty tuple of numbers >= 0, got {self.l2s!r}.")
        check_settings("l2s", self.l2s, "L2 strength")
        for name, low in (("max_rounds", 0), ("folds", 2), ("steps", 1), ("max_floats", 1)):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < low:
                raise ValueError(f"`{name}` must be an int >= {low}, got {v!r}.")
        _check_tol(self.tol)
        if self.criterion not in CRITERIA:
            raise ValueError(f"`criterion` must be one of {CRITERIA}, got {self.criterion!r}.")
        if self.theta_rows not in ("training", "all"):
            raise ValueError(f"`theta_rows` must be 'training' or 'all', got {self.theta_rows!r}.")


@dataclasses.dataclass(frozen=True)
class RecipeResult:
    """What :func:`fit_recipe` returns.

    Attributes:
        config: the settings.
        scores: ``{criterion: (trials, len(l2s), max_rounds + 1)}``, the mean
            held-out score of each candidate over the folds.
        weights: ``(trials, len(l2s), max_rounds + 1, features)``, the refitted
            (all training rows) model of each candidate; ``T = 0``: zeros.
        bias: ``(trials, len(l2s), max_rounds + 1)``; ``T = 0``: ``logit(mean W)``.
        l2_index, rounds: ``(trials,)``, the chosen candidate by ``config.criterion``.
    """

    config: RecipeConfig
    scores: dict[str, np.ndarray]
    weights: np.ndarray
    bias: np.ndarray
    l2_index: np.ndarray
    rounds: np.ndarray

    @property
    def l2(self) -> np.ndarray:
        """The chosen L2 strength of each trial, ``(trials,)``."""
        return np.asarray(self.config.l2s, np.float64)[self.l2_index]

    def choice(self, criterion: str) -> tuple[np.ndarray, np.ndarray]:
        """``(l2_index, rounds)`` chosen by ``criterion`` (ties: first in grid order)."""
        if criterion not in self.scores:
            raise ValueError(f"`criterion` must be one of {tuple(self.scores)}, got {criterion!r}.")
        s = self.scores[criterion]
        flat = np.argmin(s.reshape(len(s), -1), axis=1)
        return np.unravel_index(flat, s.shape[1:])

    def logits(self, x: np.ndarray, criterion: str | None = None) -> np.ndarray:
        """Logits of each trial's chosen model on ``x[t]`` (``x``: ``(trials, rows, features)``)."""
        i, r = (self.l2_index, self.rounds) if criterion is None else self.choice(criterion)
        t = np.arange(len(i))
        return LinearFit(self.weights[t, i, r], self.bias[t, i, r]).logits(x)

    def candidate_logits(self, x: np.ndarray, l2_index: int, rounds: int) -> np.ndarray:
        """Logits of one fixed candidate ``(l2s[l2_index], rounds)`` in every trial."""
        return LinearFit(self.weights[:, l2_index, rounds], self.bias[:, l2_index, rounds]
                         ).logits(x)


def reference_risk_value(w: np.ndarray, e: np.ndarray, is_pu: np.ndarray, z: np.ndarray,
                         ref: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """The nnPUE risk value per model on the rows of ``mask``, ``f†`` fixed to ``ref``.

    ``R+ = Ê_PU[W·ℓ1] + Ê_E[a·ℓ1]``, ``R- = Ê_PU[(1-W)·ℓ0] - Ê_E[a·ℓ0]``,
    ``a = ref·(1-E)``, value ``R+ + max(R-, 0)``; the means run over the
    masked rows of each source (:func:`adpue_tf.risks.adpue` with ``f†`` in
    column 3 and ``sample_weight=mask``, in NumPy over a leading model axis).

    Args:
        w, e: ``W`` and ``E`` columns, ``(models, rows)``.
        is_pu: bool ``(models, rows)``, PU rows (the others are E rows).
        z: logits; ``ref``: ``f†`` in ``[0, 1]``; ``mask``: row weights; all ``(models, rows)``.

    Returns:
        float64 ``(models,)``.

    Example:
        >>> one = np.ones((1, 2))
        >>> v = reference_risk_value(np.array([[1.0, 0.0]]), np.zeros((1, 2)),
        ...                          np.array([[True, False]]), 0 * one, 0.5 * one, one)
        >>> round(float(v[0]), 4)
        1.0397
    """
    l1, l0 = np.logaddexp(0.0, -z), np.logaddexp(0.0, z)
    a = np.clip(ref, 0.0, 1.0) * (1.0 - e)
    pu, ee = mask * is_pu, mask * ~is_pu

    def mean(v: np.ndarray, m: np.ndarray) -> np.ndarray:
        n = m.sum(1)
        return np.where(n > 0, (v * m).sum(1) / np.maximum(n, 1e-12), 0.0)

    pos = mean(w * l1, pu) + mean(a * l1, ee)
    neg = mean((1.0 - w) * l0, pu) - mean(a * l0, ee)
    return pos + np.maximum(neg, 0.0)


def _masked_mean(v: np.ndarray, m: np.ndarray) -> np.ndarray:
    return (v * m).sum(1) / np.maximum(m.sum(1), 1e-12)


def _folds(is_pu: np.ndarray, k: int) -> np.ndarray:
    """Fold of each row: its rank among its source's rows, modulo ``k``."""
    rank_pu = np.cumsum(is_pu, axis=1) - 1
    rank_e = np.cumsum(~is_pu, axis=1) - 1
    return np.where(is_pu, rank_pu, rank_e) % k


def helper_models(y: Any, cfg: RecipeConfig) -> tuple[np.ndarray, np.ndarray]:
    """The recipe's first fit: ``θ̂`` (of ``E``) and ``q̂`` (of ``W``) of every data view.

    A trial's views are its ``cfg.folds`` training folds and all its rows
    (view ``folds``). Fit them with ``risks.logit``, L2 ``cfg.theta_l2``,
    ``cfg.steps`` steps at ``cfg.learning_rate`` and ``cfg.tol``
    (:func:`~adpue_tf.experiments.linear_fit.fit_linear_models`) and give the
    fit to :func:`fit_recipe` as ``helpers``: a caller that fits other models
    on the same features can fit these with them, in one pass over the features.

    Args:
        y: packed labels ``(trials, rows, 3)`` of PU and E rows (as :func:`fit_recipe`).
        cfg: the settings.

    Returns:
        ``(labels, sample_weight)``: ``(trials, 2·(folds + 1), rows, 3)`` and
        ``(trials, 2·(folds + 1), rows)``, float32; per trial the ``θ̂`` of each
        view, then the ``q̂`` of each view.

    Example:
        >>> from adpue_tf.labels import pack_e, pack_pu
        >>> y = np.concatenate([pack_pu([1, 0, 0]), pack_e([1, 0, 1])])[None]
        >>> labels, weight = helper_models(y, RecipeConfig(folds=3))
        >>> labels.shape, weight.shape
        ((1, 8, 6, 3), (1, 8, 6))
    """
    y = np.asarray(y, np.float32)
    trials, n = y.shape[:2]
    v = cfg.folds + 1                         # view j of a trial: fold j held out; j = folds: none
    ym = np.repeat(y, v, axis=0)
    fold_of_model = np.tile(np.arange(v), trials)
    w, e = ym[..., 0], ym[..., 1]
    is_pu = ym[..., 2] == int(Source.PU)
    train = (_folds(is_pu, cfg.folds) != fold_of_model[:, None]).astype(np.float32)
    theta_w = (train if cfg.theta_rows == "training" else np.ones_like(train)) * ~is_pu
    labels = np.zeros((2, trials, v, n, 3), np.float32)          # θ̂ of E, then q̂ of W
    labels[..., 0] = np.stack([e, w]).reshape(2, trials, v, n)
    labels[..., 2] = int(Source.PU)
    weight = np.stack([theta_w, train * is_pu]).reshape(2, trials, v, n)
    return (labels.swapaxes(0, 1).reshape(trials, 2 * v, n, 3),
            weight.swapaxes(0, 1).reshape(trials, 2 * v, n).astype(np.float32))


def _fit_helpers(x: np.ndarray, y: np.ndarray, cfg: RecipeConfig, sparse: bool | None
                 ) -> LinearFit:
    labels, weight = helper_models(y, cfg)
    return fit_linear_models(x, labels, risks.logit, steps=cfg.steps,
                             learning_rate=cfg.learning_rate, l2=cfg.theta_l2, sparse=sparse,
                             tol=cfg.tol, sample_weight=weight)


def _chunk(x: np.ndarray, y: np.ndarray, cfg: RecipeConfig, sparse: bool | None = None,
           helpers: LinearFit | None = None) -> tuple[dict, np.ndarray, np.ndarray]:
    """Scores of every candidate and the refitted chains for one chunk of trials.

    A trial's ``folds + 1`` data views (fold ``folds``: all rows) are row
    weights on its one feature matrix, so its models share it
    (:func:`~adpue_tf.experiments.linear_fit.fit_linear_models`): ``θ̂`` and
    ``q̂`` of every view in one fit (:func:`helper_models`; ``helpers``: that
    fit, made by the caller), and each round of every ``l2``'s chain in one fit.
    """
    trials, n, d = x.shape
    k = cfg.folds
    v = k + 1                                 # model j = trial * (k + 1) + fold; fold k: all rows
    m = trials * v
    ym = np.repeat(y, v, axis=0)
    fold_of_model = np.tile(np.arange(v), trials)
    w, e = ym[..., 0].astype(np.float64), ym[..., 1].astype(np.float64)
    is_pu = ym[..., 2] == int(Source.PU)
    row_fold = _folds(is_pu, k)
    held = (row_fold == fold_of_model[:, None]).astype(np.float64)   # none for the full models
    train = 1.0 - held

    def per_trial(a: np.ndarray, views: int) -> np.ndarray:   # (views·m', ...) -> (trials, ...)
        return a.reshape(views, trials, v, *a.shape[1:]).swapaxes(0, 1).reshape(
            trials, views * v, *a.shape[1:])

    def per_model(a: np.ndarray, views: int) -> np.ndarray:   # inverse of per_trial
        return a.reshape(trials, views, v, *a.shape[2:]).swapaxes(0, 1).reshape(
            views * m, *a.shape[2:])

    tq = _fit_helpers(x, y, cfg, sparse) if helpers is None else helpers
    theta, q = np.split(sigmoid(per_model(tq.logits(x), 2)), 2)
    ref = np.clip(q / np.maximum(theta, THETA_FLOOR), 0.0, 1.0)
    pi_w = np.clip(_masked_mean(w, train * is_pu), 1e-6, 1 - 1e-6)
    held_pu = held * is_pu
    n_l2, r_max = len(cfg.l2s), cfg.max_rounds
    scores = {c: np.zeros((m, n_l2, r_max + 1)) for c in CRITERIA}
    weights = np.zeros((m, n_l2, r_max + 1, d), np.float32)
    bias = np.zeros((m, n_l2, r_max + 1), np.float32)
    z0 = np.broadcast_to(np.log(pi_w / (1 - pi_w))[:, None], (m, n))
    bias[:, :, 0] = z0[:, :1]

    def score(z: np.ndarray, i: int, t: int) -> None:
        nll = np.asarray(exposure_nll(w.ravel(), z.ravel(), theta.ravel()), np.float64)
        scores["exposure_likelihood"][:, i, t] = _masked_mean(nll.reshape(m, n), held_pu)
        scores["reference_risk"][:, i, t] = reference_risk_value(w, e, is_pu, z, ref, held)

    for i in range(n_l2):
        score(z0, i, 0)
    l2 = np.repeat(np.asarray(cfg.l2s, np.float64), v)          # per model of a trial, l2-major
    chain_w = per_trial(np.tile(train, (n_l2, 1)), n_l2)
    y3 = per_trial(np.tile(ym[..., :3], (n_l2, 1, 1)), n_l2)
    dagger, prev = per_trial(np.broadcast_to(np.tile(pi_w, n_l2)[:, None], (n_l2 * m, n)),
                             n_l2), None
    for t in range(1, r_max + 1):
        y4 = np.concatenate([y3, dagger[..., None]], axis=-1).astype(np.float32)
        prev = fit_linear_models(x, y4, risks.adpue, sample_weight=chain_w, steps=cfg.steps,
                                 learning_rate=cfg.learning_rate, init=prev, l2=l2,
                                 sparse=sparse, tol=cfg.tol, gamma=cfg.gamma)
        z = prev.logits(x).astype(np.float64)                   # (trials, n_l2 · v, n)
        zm, wm, bm = (per_model(a, n_l2) for a in (z, prev.weights, prev.bias))
        for i in range(n_l2):
            score(zm[i * m:(i + 1) * m], i, t)
            weights[:, i, t], bias[:, i, t] = wm[i * m:(i + 1) * m], bm[i * m:(i + 1) * m]
        dagger = sigmoid(z)
    cv = fold_of_model < k
    full = fold_of_model == k
    mean_scores = {c: s[cv].reshape(trials, k, n_l2, r_max + 1).mean(1) for c, s in scores.items()}
    return mean_scores, weights[full], bias[full]


def fit_recipe(x: Any, y: Any, cfg: RecipeConfig | None = None, *,
               sparse: bool | None = None, helpers: LinearFit | None = None) -> RecipeResult:
    """Choose ``(l2, T)`` per trial by cross-validation on its PU/E rows; refit on all rows.

    Args:
        x: features ``(trials, rows, features)``.
        y: packed labels ``(trials, rows, 3)`` of PU rows (source 0, ``W``) and E
            rows (source 1, ``E``) only, in the same layout for every trial; each
            source needs at least ``folds`` rows per trial. No hidden ``Y``.
        cfg: the settings (default :class:`RecipeConfig`).
        sparse: how the fits multiply the features (``None``: sparse when few
            are non-zero), as in
            :func:`~adpue_tf.experiments.linear_fit.fit_linear_models`, whose
            fits agree to float32 rounding (see there).
        helpers: the fit of :func:`helper_models` on ``x`` (weights
            ``(trials, 2·(folds + 1), features)``), made by the caller; None:
            fitted here.

    Returns:
        A :class:`RecipeResult` (its :meth:`RecipeResult.logits` are the
        recipe's predictions).

    Raises:
        ValueError: on bad shapes or labels, sources other than PU/E, or too few rows.
        TypeError: if ``sparse`` is not ``True``, ``False`` or ``None``.
    """
    cfg = cfg or RecipeConfig()
    if sparse is not None and not isinstance(sparse, bool):
        raise TypeError(f"`sparse` must be True, False or None (by density), got {sparse!r}.")
    x = np.asarray(check_finite("x", x), np.float32)
    y = np.asarray(check_finite("y", y), np.float32)
    if x.ndim != 3 or y.ndim != 3 or y.shape[2] != 3 or x.shape[:2] != y.shape[:2]:
        raise ValueError("`x` must be (trials, rows, features) and `y` (trials, rows, 3) with "
                         f"the same trials and rows; got {x.shape} and {y.shape}.")
    src = y[..., 2]
    if not np.isin(src, (int(Source.PU), int(Source.E))).all():
        raise ValueError("`y` must hold only PU (source 0) and E (source 1) rows.")
    for s, name in ((Source.PU, "PU"), (Source.E, "E")):
        if ((src == int(s)).sum(1) < cfg.folds).any():
            raise ValueError(f"every trial needs at least `folds`={cfg.folds} {name} rows.")
    trials, n, d = x.shape
    views = 2 * (cfg.folds + 1)
    if helpers is not None and (np.shape(helpers.weights) != (trials, views, d)
                                or np.shape(helpers.bias) != (trials, views)):
        raise ValueError(f"`helpers` must be the fit of helper_models: weights {(trials, views, d)} "
                         f"and bias {(trials, views)}, got {np.shape(helpers.weights)} and "
                         f"{np.shape(helpers.bias)}.")
    per_trial = n * d + len(cfg.l2s) * (cfg.folds + 1) * n * 8  # features; each model's rows
    per = max(1, min(trials, cfg.max_floats // per_trial))
    chunks = math.ceil(trials / per)
    per = math.ceil(trials / chunks)          # equal chunks: one trace per shape
    pad = chunks * per - trials
    xp = np.concatenate([x, np.repeat(x[:1], pad, axis=0)]) if pad else x
    yp = np.concatenate([y, np.repeat(y[:1], pad, axis=0)]) if pad else y
    parts = []
    for c in range(chunks):
        rows = np.arange(c * per, (c + 1) * per)
        rows[rows >= trials] = 0                  # the padding repeats trial 0, as xp and yp
        part = None if helpers is None else LinearFit(np.asarray(helpers.weights)[rows],
                                                      np.asarray(helpers.bias)[rows])
        parts.append(_chunk(xp[c * per:(c + 1) * per], yp[c * per:(c + 1) * per], cfg, sparse,
                            part))
    scores = {c: np.concatenate([p[0][c] for p in parts])[:trials] for c in CRITERIA}
    weights = np.concatenate([p[1] for p in parts])[:trials]
    bias = np.concatenate([p[2] for p in parts])[:trials]
    res = RecipeResult(cfg, scores, weights, bias, np.zeros(trials, int), np.zeros(trials, int))
    i, r = res.choice(cfg.criterion)
    return dataclasses.replace(res, l2_index=np.asarray(i), rounds=np.asarray(r))
