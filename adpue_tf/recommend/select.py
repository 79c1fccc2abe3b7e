"""Choosing in :func:`adpue_tf.fit_pue`: among one net's candidates, then among nets.

:class:`HeldOut` scores a stage's candidates on its held-out rows; :func:`select`
applies :func:`adpue_tf.recommend.rule.choose` to them; :func:`pick_net` keeps the
first net of a mapping unless another's choice is clearly better by the
held-out likelihood of ``W`` (:data:`NET_TOLERANCE`).

Example:
    >>> NET_TOLERANCE
    1.0
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

from adpue_tf._internal.numeric import sigmoid
from adpue_tf.recommend.candidates import PREFERRED, TABLE
from adpue_tf.recommend.overlap import low_exposure_share
from adpue_tf.recommend.rule import choose, reference
from adpue_tf.recommend.stage import Stage
from adpue_tf.recommend.train import log_loss
from adpue_tf.validation.scores import brier_unchecked, nll_unchecked

__all__ = ["NET_TOLERANCE", "HeldOut", "Selection", "pick_net", "select"]

#: A later net of a mapping replaces the first given when its choice's held-out NLL
#: of ``W`` is lower by this many standard errors of the paired difference (measured
#: against 2 and the lower NLL alone: the guide's *Limits, measured*, a mapping of nets).
NET_TOLERANCE = 1.0


def pick_net(picked: dict[Any, Selection], tolerance: float) -> tuple[dict[Any, float], Any]:
    """Each net's held-out score of its choice, and the net kept.

    The score is the NLL of held-out ``W`` under ``σ(z)·θ̂`` (each net's own
    ``θ̂``; the exposure Brier score if some ``θ̂`` failed). The first net
    given stays unless another's choice scores lower by ``tolerance``
    standard errors of the paired difference over the held-out PU rows (the
    lowest of those, then): on a few dozen held-out rows the lower score
    alone picked the weaker penalty about half the time where the stronger
    one was better (:data:`NET_TOLERANCE`).
    """
    held = {key: sel.nll.get(sel.choice, math.nan) for key, sel in picked.items()}
    first = next(iter(picked))
    if not all(math.isfinite(v) for v in held.values()):  # some θ̂ failed: the Brier score
        held = {key: sel.scores[sel.choice] for key, sel in picked.items()}
        return held, min(held, key=held.__getitem__)  # ties: the first given
    rows = picked[first].held.row_nll(picked[first].choice)
    better = {}
    for key, sel in picked.items():
        d = sel.held.row_nll(sel.choice) - rows
        if key == first or np.mean(d) < -tolerance * float(np.sqrt(np.var(d) / len(d))):
            better[key] = held[key]
    return held, min(better, key=better.__getitem__)


class HeldOut:
    """A stage's candidates on its held-out rows: the scores :func:`adpue_tf.fit_pue` chooses by.

    Args:
        stage: the trained stage (with held-out rows).
    """

    def __init__(self, stage: Stage) -> None:
        if stage.held_out is None:
            raise ValueError("Held-out scores need a stage with held-out rows.")
        self.stage = stage
        self.w, self.e = stage.held_out[0].y, stage.held_out[1].y
        self._nll: dict[str, np.ndarray] = {}

    def logits(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """Held-out logits of ``name`` on the held-out PU rows and E rows."""
        return self.stage.held(name)

    def brier(self, name: str) -> float:
        """The exposure Brier score of ``name`` on the held-out rows."""
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
        """Mean NLL of held-out ``W`` under ``σ(z)·θ̂``."""
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
        rate = float(np.clip(self.stage.e.y.mean(), 1e-6, 1 - 1e-6))
        return {"log_loss": log_loss(self.e, z),
                "log_loss_constant": log_loss(self.e, np.full_like(z, math.log(rate / (1 - rate)))),
                "calibration_error": float(ece),
                "low_exposure_share": low_exposure_share(np.concatenate([sigmoid(z_pu), p]))}


@dataclasses.dataclass
class Selection:
    """One net's choice on the held-out rows: its candidates' scores and the chosen one."""

    choice: str
    trained: list[str]
    scores: dict[str, float]
    nll: dict[str, float]
    gap_se: dict[str, float]
    nll_se: dict[str, float]
    failed: dict[str, str]
    kept: dict[str, int]
    held: HeldOut
    theta_ok: bool
    skipped: tuple[str, ...]


def select(stage: Stage, names: tuple[str, ...], skipped: tuple[str, ...], positives: int,
           tolerance: float, hint: str | None) -> Selection:
    """Score one net's trained candidates on the held-out rows and choose (``rule.choose``)."""
    failed = {n: stage.failed[n] for n in (*names, "theta") if n in stage.failed}
    trained = [n for n in names if n != "average" and n not in failed]
    held = HeldOut(stage)
    scores = {n: held.brier(n) for n in trained}
    _drop_unscored(scores, trained, failed)
    singles = sorted((scores[n], n) for n in trained if TABLE[n].averaged)
    if "average" in names and len(singles) >= 2:
        stage.parts["average"] = (singles[0][1], singles[1][1])
        if stage.trains("average"):
            trained.append("average")
            scores["average"] = held.brier("average")
            _drop_unscored(scores, trained, failed)
    if not trained:
        raise ValueError("Every candidate diverged: " + "; ".join(
            dict.fromkeys(v for n, v in failed.items() if n != "theta"))
            + ". Lower `learning_rate`." + (f" {hint}" if hint else ""))
    derived = [n for n in names if TABLE[n].derived]
    best = reference(scores, derived, names)
    theta_ok = "theta" not in failed
    if theta_ok and not all(np.all(np.isfinite(z)) for z in held.logits("theta")):
        # θ̂ trained, but its outputs on held-out rows blew up (features far out of
        # scale in the exposure log): no likelihood can be scored with it
        failed["theta"] = "θ̂'s outputs on the held-out rows are NaN or infinite"
        theta_ok = False
    nll = {n: held.exposure_nll(n) for n in trained} if theta_ok else {}
    gap_se = {n: held.paired_se(n, best) for n in trained}
    nll_se = ({n: held.nll_paired_se(n, PREFERRED) for n in trained}
              if theta_ok and PREFERRED in trained else {})
    choice = choose(scores, gap_se, nll, tolerance, order=names, prefer=PREFERRED,
                    nll_se=nll_se, derived=derived, positives=positives)
    return Selection(choice=choice, trained=trained, scores=scores, nll=nll, gap_se=gap_se,
                     nll_se=nll_se, failed=failed, kept=dict(stage.best_epoch), held=held,
                     theta_ok=theta_ok, skipped=skipped)


def _drop_unscored(scores: dict[str, float], trained: list[str], failed: dict[str, str]) -> None:
    """Move the candidates whose held-out score is not finite from ``trained`` to ``failed``."""
    for name in [n for n, v in scores.items() if not math.isfinite(v)]:
        failed[name] = (f"{name} has no finite held-out score (its outputs on held-out rows "
                        "are NaN or infinite)")
        trained.remove(name)
        del scores[name]
