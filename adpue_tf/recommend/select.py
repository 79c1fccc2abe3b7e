"""Choosing in :func:`adpue_tf.fit_pue`: among one net's candidates, then among nets.

:func:`select` scores one net's trained candidates on the pooled held-out rows
and applies :func:`adpue_tf.recommend.rule.choose`; :func:`pick_net` keeps the
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

from adpue_tf.recommend.candidates import PREFERRED, TABLE
from adpue_tf.recommend.folds import Pooled
from adpue_tf.recommend.rule import choose, reference
from adpue_tf.recommend.stage import Stage

__all__ = ["NET_TOLERANCE", "Selection", "pick_net", "select"]

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
    rows = picked[first].pooled.row_nll(picked[first].choice)
    better = {}
    for key, sel in picked.items():
        d = sel.pooled.row_nll(sel.choice) - rows
        if key == first or np.mean(d) < -tolerance * float(np.sqrt(np.var(d) / len(d))):
            better[key] = held[key]
    return held, min(better, key=better.__getitem__)


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
    pooled: Pooled
    theta_ok: bool
    skipped: tuple[str, ...]


def select(stages: list[Stage], names: tuple[str, ...], skipped: tuple[str, ...],
           positives: int, tolerance: float, hint: str | None) -> Selection:
    """Score one net's trained candidates on the held-out rows and choose (``rule.choose``)."""
    failed = {n: next(st.failed[n] for st in stages if n in st.failed)
              for n in (*names, "theta") if any(n in st.failed for st in stages)}
    trained = [n for n in names if n != "average" and n not in failed]
    pooled = Pooled(stages)
    scores = {n: pooled.brier(n) for n in trained}
    _drop_unscored(scores, trained, failed)
    singles = sorted((scores[n], n) for n in trained if TABLE[n].averaged)
    if "average" in names and len(singles) >= 2:
        pair = (singles[0][1], singles[1][1])
        for st in stages:
            st.parts["average"] = pair
        if all(st.trains("average") for st in stages):
            trained.append("average")
            scores["average"] = pooled.brier("average")
            _drop_unscored(scores, trained, failed)
    if not trained:
        raise ValueError("Every candidate diverged: " + "; ".join(
            dict.fromkeys(v for n, v in failed.items() if n != "theta"))
            + ". Lower `learning_rate`." + (f" {hint}" if hint else ""))
    derived = [n for n in names if TABLE[n].derived]
    best = reference(scores, derived, names)
    theta_ok = "theta" not in failed
    if theta_ok and not all(np.all(np.isfinite(z)) for z in pooled.logits("theta")):
        # θ̂ trained, but its outputs on held-out rows blew up (features far out of
        # scale in the exposure log): no likelihood can be scored with it
        failed["theta"] = "θ̂'s outputs on the held-out rows are NaN or infinite"
        theta_ok = False
    nll = {n: pooled.exposure_nll(n) for n in trained} if theta_ok else {}
    gap_se = {n: pooled.paired_se(n, best) for n in trained}
    nll_se = ({n: pooled.nll_paired_se(n, PREFERRED) for n in trained}
              if theta_ok and PREFERRED in trained else {})
    choice = choose(scores, gap_se, nll, tolerance, order=names, prefer=PREFERRED,
                    nll_se=nll_se, derived=derived, positives=positives)
    kept = {n: int(np.median([st.best_epoch[n] for st in stages]))
            for n in stages[0].best_epoch if all(n in st.best_epoch for st in stages)}
    return Selection(choice=choice, trained=trained, scores=scores, nll=nll, gap_se=gap_se,
                     nll_se=nll_se, failed=failed, kept=kept, pooled=pooled,
                     theta_ok=theta_ok, skipped=skipped)


def _drop_unscored(scores: dict[str, float], trained: list[str], failed: dict[str, str]) -> None:
    """Move the candidates whose pooled held-out score is not finite from ``trained`` to ``failed``."""
    for name in [n for n, v in scores.items() if not math.isfinite(v)]:
        failed[name] = (f"{name} has no finite held-out score (its outputs on held-out rows "
                        "are NaN or infinite)")
        trained.remove(name)
        del scores[name]
