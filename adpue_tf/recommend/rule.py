"""fit_pue's choice rule on held-out scores: :func:`choose`.

The Brier score (no ``θ̂``) bounds the choice, the likelihood of ``W`` under
``σ(z)·θ̂`` decides among the candidates it cannot tell apart, and the fixed
``blend`` stays unless the held-out rows show another better
(``docs/guide/choosing-models.md``, *The rule*).

Example:
    >>> choose({"blend": -0.30, "brier": -0.31}, {"blend": 0.02, "brier": 0.0},
    ...        {"blend": 0.35, "brier": 0.34}, 2.0, prefer="blend", nll_se={"brier": 0.02})
    'blend'
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence

from adpue_tf.recommend.candidates import PREFERRED, TABLE, with_needs

__all__ = ["HEDGE", "HEDGE_BELOW", "MIN_POSITIVES", "choose", "hedge_share", "overruled_anyway",
           "reference", "skill"]

#: Fewer observed positives (``W = 1``) than this among the held-out PU rows:
#: :func:`choose` keeps ``prefer`` (fit_pue's fixed ``blend``) whatever the scores
#: say (the guide's *Too few positives to overrule blend*).
MIN_POSITIVES = 30

#: Below this held-out :func:`skill` the chosen model is taken as one that cannot
#: resolve ``p(y=1|x)`` and is hedged towards ``bce_w`` (:func:`hedge_share`; the
#: guide's *Where no net resolves p*).
HEDGE_BELOW = 0.15
#: ``bce_w``'s share of the hedged model's logit (chosen on 7 of the 14 ad logs).
HEDGE = 1 / 3


def reference(scores: dict[str, float], derived: Sequence[str] = (),
              order: Sequence[str] = ()) -> str:
    """The candidate the tolerance is measured from: the lowest score not in ``derived``.

    Ties follow ``order`` (then ``scores``'s order); when every candidate is
    derived, the lowest of them.

    Example:
        >>> reference({"likelihood": -0.054, "average": -0.059}, derived=("average",))
        'likelihood'
    """
    rank = list(order) + [n for n in scores if n not in order]
    fair = [n for n in scores if n not in derived] or list(scores)
    return min(fair, key=lambda n: (scores[n], rank.index(n)))


def choose(scores: dict[str, float], gap_se: dict[str, float], nll: dict[str, float],
           tolerance: float, *, order: Sequence[str] = (), prefer: str | None = None,
           nll_se: dict[str, float] | None = None, derived: Sequence[str] = (),
           positives: int | None = None) -> str:
    """fit_pue's rule: the Brier score bounds the choice, the likelihood under ``θ̂`` decides.

    The candidates within ``tolerance`` standard errors of the best held-out
    Brier score (no ``θ̂``) are those it cannot tell apart; among them the
    held-out likelihood of ``W`` under ``σ(z)·θ̂`` chooses. ``prefer`` (fit_pue:
    ``"blend"``), when among them, stays unless that likelihood shows the other
    better by more than ``tolerance`` standard errors of their paired difference
    (``nll_se``). A candidate that predicts with that very ``θ̂``
    (:data:`~adpue_tf.recommend.candidates.PREDICTS_WITH_THETA`) takes part only
    as the best by the Brier score, and never displaces ``prefer``; a candidate
    built from these scores (``derived``) may be chosen but is never the
    reference. Why each part: the guide's *The rule*.

    Args:
        scores: held-out Brier score of each candidate (lower is better).
        gap_se: standard error of each one's paired difference to the best
            candidate not in ``derived``.
        nll: held-out NLL of ``W`` under ``σ(z)·θ̂``; empty: no ``θ̂`` (the
            Brier score alone).
        tolerance: in standard errors; 0: the Brier score alone.
        order: names in order of preference for exact ties (default: ``scores``'s order).
        prefer: a candidate kept whenever it is within ``tolerance`` standard
            errors of the best by the Brier score and no other is better by the
            likelihood beyond ``tolerance`` (None: none).
        nll_se: standard error of each one's held-out NLL minus that of
            ``prefer`` (paired); None or missing: ``prefer`` is never displaced
            by the likelihood.
        derived: candidates whose construction read these held-out scores
            (never the reference; the best overall when none is left).
        positives: observed positives among the held-out PU rows; fewer than
            :data:`MIN_POSITIVES` keeps ``prefer`` (if it has a score). None:
            not counted.

    Returns:
        The chosen candidate's name.

    Example:
        >>> choose({"ratio": -0.30, "likelihood": -0.31}, {"ratio": 0.01, "likelihood": 0.0},
        ...        {"ratio": 0.33, "likelihood": 0.35}, 2.0)
        'likelihood'
        >>> choose({"blend": -0.305, "likelihood": -0.31}, {"blend": 0.01, "likelihood": 0.0},
        ...        {"blend": 0.34, "likelihood": 0.33}, 2.0, prefer="blend")
        'blend'
        >>> choose({"blend": -0.2, "likelihood": -0.31}, {"blend": 0.01, "likelihood": 0.0},
        ...        {"blend": 0.34, "likelihood": 0.33}, 2.0, prefer="blend", positives=5)
        'blend'
        >>> choose({"blend": -0.305, "ratio": -0.31}, {"blend": 0.01, "ratio": 0.0},
        ...        {"blend": 0.34, "ratio": 0.30}, 2.0, prefer="blend", nll_se={"ratio": 0.001})
        'blend'
    """
    if not scores:
        raise ValueError("`scores` must name at least one candidate.")
    for arg, given in (("gap_se", gap_se), ("nll", nll)):
        missing = [n for n in scores if n not in given]
        if missing and (arg == "gap_se" or given):
            raise ValueError(f"`{arg}` must have a value for every candidate of `scores`; "
                             f"missing: {missing}.")
    for arg, given in (("scores", scores), ("gap_se", gap_se), ("nll", nll),
                       ("nll_se", nll_se or {})):
        bad = {n: v for n, v in given.items() if n in scores and not math.isfinite(v)}
        if bad:
            raise ValueError(f"`{arg}` must be finite for every candidate of `scores`; got "
                             f"{bad} (drop a candidate that has no finite score).")
    if isinstance(tolerance, bool) or not isinstance(tolerance, numbers.Real) \
            or not 0.0 <= tolerance < math.inf:
        raise ValueError(f"`tolerance` must be a number >= 0, got {tolerance!r}.")
    if prefer is not None and prefer in scores and positives is not None \
            and positives < MIN_POSITIVES:
        return prefer
    rank = list(order) + [n for n in scores if n not in order]
    best = reference(scores, derived, rank)
    kept = (prefer if prefer is not None and prefer in scores
            and scores[prefer] - scores[best] <= tolerance * gap_se[prefer] else None)
    if not nll:
        return kept or reference(scores, (), rank)
    close = [n for n in scores if scores[n] - scores[best] <= tolerance * gap_se[n]
             and (n == best or not _with_theta(n))]
    challenger = min(close, key=lambda n: (nll[n], rank.index(n)))
    if kept is not None and challenger != kept:
        if _with_theta(challenger):  # its NLL under θ̂: how well it fits W, not p
            return kept
        se = (nll_se or {}).get(challenger)
        if se is None or nll[kept] - nll[challenger] <= tolerance * se:
            return kept
    return challenger


def _with_theta(name: str) -> bool:
    """Whether candidate ``name`` predicts with fit_pue's ``θ̂`` (``Candidate.predicts_with_theta``)."""
    return name in TABLE and TABLE[name].predicts_with_theta


def overruled_anyway(names: Sequence[str], positives: int) -> tuple[str, ...]:
    """The candidates not worth training: the rule keeps ``blend`` whatever they score.

    With fewer than :data:`~adpue_tf.recommend.MIN_POSITIVES` observed
    positives held out, :func:`choose` keeps ``blend`` (if it trains), so only
    it and the candidates it is made of (and their parts) are trained.

    Example:
        >>> overruled_anyway(("bce_w", "ratio", "exposed_pu", "blend"), positives=4)
        ('exposed_pu',)
        >>> overruled_anyway(("bce_w", "ratio", "exposed_pu", "blend"), positives=30)
        ()
    """
    if PREFERRED not in names or positives >= MIN_POSITIVES:
        return ()
    needed = with_needs(PREFERRED)
    return tuple(n for n in names if n not in needed)


def skill(brier: float, w_held: float, e_held: float, rate: float) -> float:
    """A model's Y-free Brier skill on held-out rows: the share of the outcome's variance it explains.

    The exposure Brier score of a model ``f`` (``mean_E[E·f²] - 2·mean_PU[W·f]``)
    plus ``mean_PU[W]`` estimates ``E_x[θ·(f - Y)²]``, the Brier score against
    ``Y`` on exposed rows; the same for the constant ``rate = mean W / mean E``
    (of all rows) is the total to explain. The skill is the share of it the
    model removes: about 0 for a net that ranks no better than chance, 1 for
    one that knows ``Y``; it reads no ``Y`` and no ``θ̂``.

    Args:
        brier: the model's held-out exposure Brier score.
        w_held: mean ``W`` of the held-out PU rows.
        e_held: mean ``E`` of the held-out E rows.
        rate: ``mean(W) / mean(E)`` of every row, the constant model.

    Returns:
        The skill (at most 1; negative when the model is worse than the
        constant), or NaN when the constant explains nothing to compare with.

    Example:
        >>> round(skill(-0.05, w_held=0.1, e_held=0.5, rate=0.2), 4)  # constant: -0.02
        0.375
    """
    constant = rate * rate * e_held - 2.0 * rate * w_held
    total = w_held + constant
    if not (math.isfinite(total) and math.isfinite(brier)) or total <= 0.0:
        return math.nan
    return (constant - brier) / total


def hedge_share(choice: str, model_skill: float) -> float:
    """``bce_w``'s share of fit_pue's model: :data:`HEDGE` where the choice resolves little of p.

    A net that cannot tell rows apart learns ``E[θ·p] / E[θ]`` over them under
    an exposure-weighted risk (above their mean ``p`` when the policy shows
    likely converters) and ``E[θ·p]`` as ``bce_w`` (below it): a choice whose
    held-out :func:`skill` is below :data:`HEDGE_BELOW` is mixed with ``bce_w``
    in logit space, ``bce_w`` taking :data:`HEDGE`; a skilled choice or
    ``bce_w`` itself is kept whole (the guide's *Where no net resolves p*).

    Args:
        choice: the chosen candidate.
        model_skill: its held-out :func:`skill` (NaN: not known; no hedge).

    Returns:
        ``bce_w``'s share of the logit, 0 or :data:`HEDGE`.

    Example:
        >>> hedge_share("blend", 0.05), hedge_share("blend", 0.4), hedge_share("bce_w", 0.05)
        (0.3333333333333333, 0.0, 0.0)
    """
    if choice == "bce_w" or not model_skill < HEDGE_BELOW:
        return 0.0
    return HEDGE
