"""Cross-fitting for :func:`adpue_tf.fit_pue`: folds, scores pooled over every held-out row, fold averages.

With ``K`` folds every PU row and every E row is held out exactly once: stage
``s`` trains every candidate (and its own ``θ̂``) on the rows outside fold
``s`` and predicts fold ``s``. The held-out logits of the stages, put
together, cover every row, and the scores below are computed on them as on
one large held-out set (a single split is the case of one stage).

Example:
    >>> assign_folds(7, 3, np.random.default_rng(0)).tolist()
    [2, 0, 0, 2, 1, 1, 0]
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import keras
import numpy as np

from adpue_tf._internal.numeric import sigmoid
from adpue_tf.data.rows import split_indices
from adpue_tf.recommend.compose import ProbabilityMean, compose
from adpue_tf.recommend.overlap import low_exposure_share
from adpue_tf.recommend.stage import Stage
from adpue_tf.recommend.train import log_loss
from adpue_tf.validation.scores import brier_unchecked, nll_unchecked

__all__ = ["Pooled", "assign_folds", "fold_average", "split_folds"]


def assign_folds(n: int, k: int, rng: np.random.Generator) -> np.ndarray:
    """A fold in ``0..k-1`` for each of ``n`` rows, at random, fold sizes within one row.

    Example:
        >>> np.bincount(assign_folds(10, 3, np.random.default_rng(1))).tolist()
        [4, 3, 3]
    """
    folds = np.empty(n, np.int64)
    folds[rng.permutation(n)] = np.arange(n) % k
    return folds


class Pooled:
    """Held-out logits of every stage, pooled: the scores :func:`adpue_tf.fit_pue` chooses by.

    Args:
        stages: the trained stages (each with held-out rows).
    """

    def __init__(self, stages: Sequence[Stage]) -> None:
        self.stages = stages
        held = [st.held_out for st in stages]
        if any(h is None for h in held):
            raise ValueError("Pooled scores need stages with held-out rows.")
        self.w = np.concatenate([h[0].y for h in held if h is not None])
        self.e = np.concatenate([h[1].y for h in held if h is not None])
        self._z: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self._nll: dict[str, np.ndarray] = {}

    def logits(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """Held-out logits of ``name`` on every held-out PU row and E row."""
        if name not in self._z:
            parts = [st.held(name) for st in self.stages]
            self._z[name] = (np.concatenate([p[0] for p in parts]),
                             np.concatenate([p[1] for p in parts]))
        return self._z[name]

    def brier(self, name: str) -> float:
        """The exposure Brier score of ``name`` over every held-out row."""
        z_pu, z_e = self.logits(name)
        return brier_unchecked(self.w, sigmoid(z_pu), self.e, sigmoid(z_e))

    def paired_se(self, name: str, other: str) -> float:
        """Standard error of the Brier score of ``name`` minus that of ``other``.

        The difference is a mean over E rows of ``E·(f_a² - f_b²)`` minus twice
        a mean over PU rows of ``W·(f_a - f_b)``; the two samples are independent.
        """
        (a_pu, a_e), (b_pu, b_e) = self.logits(name), self.logits(other)
        d_e = self.e * (sigmoid(a_e) ** 2 - sigmoid(b_e) ** 2)
        d_pu = 2.0 * self.w * (sigmoid(a_pu) - sigmoid(b_pu))
        return float(np.sqrt(np.var(d_e) / len(d_e) + np.var(d_pu) / len(d_pu)))

    def row_nll(self, name: str) -> np.ndarray:
        """Per held-out PU row: NLL of ``W`` under ``σ(z)·θ̂`` (cached)."""
        if name not in self._nll:
            theta = sigmoid(self.logits("theta")[0])
            self._nll[name] = np.asarray(nll_unchecked(self.w, self.logits(name)[0], theta))
        return self._nll[name]

    def exposure_nll(self, name: str) -> float:
        """Mean NLL of held-out ``W`` under ``σ(z)·θ̂``, ``θ̂`` cross-fitted (each fold's own)."""
        return float(np.mean(self.row_nll(name)))

    def nll_paired_se(self, name: str, other: str) -> float:
        """Standard error of the held-out NLL of ``name`` minus that of ``other`` (paired over PU rows)."""
        d = self.row_nll(name) - self.row_nll(other)
        return float(np.sqrt(np.var(d) / len(d)))

    def theta_calibration(self, bins: int = 10) -> dict[str, float]:
        """``θ̂`` on the held-out rows: log-loss, that of the constant rate, calibration error, overlap.

        The first three on the held-out E rows; ``low_exposure_share`` is the
        share of every held-out row, PU and E, with ``θ̂`` below
        :data:`adpue_tf.recommend.overlap.LOW_EXPOSURE`.
        """
        z_pu, z = self.logits("theta")
        p = sigmoid(z)
        edges = np.quantile(p, np.linspace(0, 1, bins + 1)[1:-1])
        which = np.searchsorted(edges, p)
        ece = sum(abs(self.e[which == b].mean() - p[which == b].mean()) * np.mean(which == b)
                  for b in range(bins) if np.any(which == b))
        rate = float(np.clip(np.mean([st.e.y.mean() for st in self.stages]), 1e-6, 1 - 1e-6))
        return {"log_loss": log_loss(self.e, z),
                "log_loss_constant": log_loss(self.e, np.full_like(z, math.log(rate / (1 - rate)))),
                "calibration_error": float(ece),
                "low_exposure_share": low_exposure_share(np.concatenate([sigmoid(z_pu), p]))}


def fold_average(stages: Sequence[Stage], name: str) -> keras.Model:
    """The mean probability of the stages' models of ``name``, as one Keras model (→ one logit).

    Every net of every stage appears once in the graph (heads are nested, not
    models), so the result saves, loads and exports like any net. One stage:
    its model itself.
    """
    if len(stages) == 1:
        return stages[0].get(name)
    nets, heads = {}, []
    for s, st in enumerate(stages):
        st.train(name)  # its nets (its own model is not needed here)
        used, head = st.heads[name]
        for n in used:
            nets[f"{n}_{s}"] = st.models[n]
        heads.append((s, used, head))

    def average(z: dict) -> object:
        return ProbabilityMean()([head({n: z[f"{n}_{s}"] for n in used})
                                  for s, used, head in heads])

    return compose(nets, average, name)


def split_folds(n_pu: int, n_e: int, seed: int, k: int, split: float
           ) -> tuple[np.ndarray, np.ndarray]:
    """Each PU and E row's fold: with one split (``k=1``), 0 held out and -1 for training.

    Example:
        >>> pu, e = split_folds(5, 4, seed=0, k=1, split=0.4)
        >>> int((pu == 0).sum()), int((e == 0).sum())
        (2, 2)
    """
    rng = np.random.default_rng(seed)
    if k == 1:
        pu_fold, e_fold = np.full(n_pu, -1), np.full(n_e, -1)
        pu_fold[split_indices(n_pu, split, rng)[1]] = 0
        e_fold[split_indices(n_e, split, rng)[1]] = 0
        return pu_fold, e_fold
    return assign_folds(n_pu, k, rng), assign_folds(n_e, k, rng)
