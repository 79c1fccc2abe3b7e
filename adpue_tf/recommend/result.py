"""What :func:`adpue_tf.fit_pue` returns: :class:`PUEFit`, with a readable report.

Example:
    >>> _example_fit().choice
    'bce_w'
"""

from __future__ import annotations

import dataclasses

import keras

from adpue_tf.recommend.candidates import PREFERRED, TABLE
from adpue_tf.recommend.overlap import LOW_EXPOSURE
from adpue_tf.recommend.rule import HEDGE_BELOW, MIN_POSITIVES, reference
from adpue_tf.recommend.select import NET_TOLERANCE

__all__ = ["PUEFit"]


@dataclasses.dataclass(frozen=True)
class PUEFit:
    """What :func:`fit_pue` returns.

    Attributes:
        model: the chosen estimator as a Keras model, features -> one logit
            (``σ(logit)`` estimates ``p(y=1|x)``): refitted on all rows, or as
            trained on the training part (see ``final``); hedged towards
            ``bce_w`` where ``hedge_share`` > 0.
        choice: the chosen candidate's name.
        scores: ``{candidate: held-out exposure Brier score}``, lower is better.
        exposure_nll: ``{candidate: held-out NLL of W under σ(z)·θ̂}``: decides
            among the candidates the Brier score cannot tell apart
            (:func:`adpue_tf.recommend.choose`).
        epochs: ``{net: epochs kept}`` (``"theta"`` is ``θ̂``).
        theta_calibration: ``θ̂`` on held-out E rows: ``log_loss``,
            ``log_loss_constant`` (of the constant rate) and ``calibration_error``;
            ``low_exposure_share``: the share of held-out PU and E rows with
            ``θ̂ < 0.05``, where ``p(y=1|x)`` is barely observed (fit_pue
            warns from 15 %; :mod:`adpue_tf.recommend.overlap`).
        parts: the candidates a composite is made of (``"ratio"``, ``"average"``, ...).
        rows: ``{"pu": n, "e": n, "pu_held_out": n, "e_held_out": n,
            "w_held_out": n}`` (the last: observed positives held out; fewer
            than :data:`~adpue_tf.recommend.MIN_POSITIVES` keep ``blend``).
        seconds: ``{"select": s, "refit": s}`` of wall time.
        candidates: ``{candidate: model}``, each trained on the training part
            only.
        brier_gap_se: ``{candidate: standard error}`` of its Brier score minus
            the best one not built from these scores (not ``average``; paired
            over the held-out rows).
        nll_gap_se: ``{candidate: standard error}`` of its held-out NLL minus
            that of ``blend`` (paired; empty without ``blend`` or ``θ̂``).
        final: what ``model`` is: ``"refit"`` (on every row) or ``"average"``
            (the training part's model: ``refit=False``, or a refit that diverged).
        failed: ``{candidate: why}`` for candidates whose net diverged before
            any usable epoch (left out of the choice), and a refit that
            diverged (then ``model`` is the one trained on the training part).
        skipped: default candidates not trained because the rule keeps
            ``blend`` whatever they score (fewer than
            :data:`~adpue_tf.recommend.MIN_POSITIVES` observed positives held
            out); name the candidates (``candidates=``) to train them all.
        net: with a mapping of nets (``build_net={name: ...}``), the chosen
            net's name; else None.
        net_scores: ``{net: held-out score of its choice}`` that chose
            ``net``: the NLL of ``W`` under ``σ(z)·θ̂``, or the exposure
            Brier score if some net's ``θ̂`` failed (empty with one net).
        skill: the choice's held-out Y-free Brier skill
            (:func:`adpue_tf.recommend.rule.skill`: about 0 for a net that
            resolves nothing of ``p``).
        hedge_share: ``bce_w``'s share of ``model``'s logit: 0 (the choice itself)
            or :data:`~adpue_tf.recommend.rule.HEDGE`, where ``skill`` is below
            :data:`~adpue_tf.recommend.rule.HEDGE_BELOW`
            (:func:`adpue_tf.recommend.rule.hedge_share`).
    """

    model: keras.Model
    choice: str
    scores: dict[str, float]
    exposure_nll: dict[str, float]
    epochs: dict[str, int]
    theta_calibration: dict[str, float]
    parts: dict[str, tuple[str, ...]]
    rows: dict[str, int]
    seconds: dict[str, float]
    candidates: dict[str, keras.Model] = dataclasses.field(default_factory=dict, repr=False)
    failed: dict[str, str] = dataclasses.field(default_factory=dict)
    brier_gap_se: dict[str, float] = dataclasses.field(default_factory=dict)
    nll_gap_se: dict[str, float] = dataclasses.field(default_factory=dict)
    final: str = "refit"
    skipped: tuple[str, ...] = ()
    net: str | None = None
    net_scores: dict[str, float] = dataclasses.field(default_factory=dict)
    skill: float = float("nan")
    hedge_share: float = 0.0

    def report(self) -> str:
        """A table of the candidates, best first, and the choice.

        Example:
            >>> print(_example_fit().report().splitlines()[0])
            fit_pue: chose bce_w (held-out exposure Brier score -0.1000; lower is better)
        """
        derived = [n for n in self.scores if n in TABLE and TABLE[n].derived]
        best = self.scores[reference(self.scores, derived)]  # the rule's reference
        lines = [f"fit_pue: chose {self.choice} (held-out exposure Brier score "
                 f"{self.scores[self.choice]:.4f}; lower is better)", "",
                 "| candidate | Brier | vs best (SE) | W NLL under θ̂ | epochs |",
                 "|---|---:|---:|---:|---:|"]
        for name, score in sorted(self.scores.items(), key=lambda kv: kv[1]):
            made = self.parts.get(name)
            epochs = "+".join(self.parts[name]) if made else str(self.epochs.get(name, ""))
            se = self.brier_gap_se.get(name, float("nan"))
            lines.append(f"| {name}{' ←' if name == self.choice else ''} | {score:.4f} | "
                         f"{score - best:+.4f} ({se:.4f}) | "
                         f"{self.exposure_nll.get(name, float('nan')):.4f} | {epochs} |")
        for name, why in self.failed.items():
            lines.append(f"| {name} | failed: {why} | | | |")
        few = self.rows.get("w_held_out")
        if self.choice == PREFERRED and few is not None and few < MIN_POSITIVES:
            lines += ["", f"Kept {PREFERRED}: {few} observed positive(s) held out, fewer than "
                          f"{MIN_POSITIVES}, too few for the held-out scores to overrule it."]
            if self.skipped:
                lines.append(f"Not trained, as they could not overrule it: "
                             f"{', '.join(self.skipped)}.")
        if self.net_scores:
            first = next(iter(self.net_scores))
            why = "the first given" if self.net == first else "clearly better than the first given"
            lines += ["", f"Net: {self.net} ({why}: the first stays unless another's choice has "
                          f"a held-out NLL of W lower by {NET_TOLERANCE:g} standard error(s) of "
                          "the paired difference; the lowest Brier score if some θ̂ failed). "
                          "Held-out score of each net's choice: "
                          + ", ".join(f"{n} {v:.4f}" for n, v in self.net_scores.items())
                          + " (every net chosen on the same held-out rows)."]
        if self.hedge_share:
            lines += ["", f"Hedged: {self.choice}'s held-out skill {self.skill:.3f} is below "
                          f"{HEDGE_BELOW:g} (it resolves little of p), so the model's logit is "
                          f"{1 - self.hedge_share:.2f}·{self.choice} + "
                          f"{self.hedge_share:.2f}·bce_w. An exposure-weighted net that cannot "
                          "tell rows apart over-predicts them if the logging policy shows likely "
                          "converters, and is right if exposure is unrelated to conversion: then "
                          "pass hedge=False (a randomised policy, say) for the choice alone."]
        cal = self.theta_calibration or {"log_loss": float("nan"),
                                         "log_loss_constant": float("nan"),
                                         "calibration_error": float("nan")}
        lines += ["", f"θ̂ on held-out E rows: log-loss {cal['log_loss']:.4f} (constant rate "
                      f"{cal['log_loss_constant']:.4f}), calibration error "
                      f"{cal['calibration_error']:.4f}"
                      + (f"; θ̂ < {LOW_EXPOSURE:g} on {100 * cal['low_exposure_share']:.1f}% of "
                         "the held-out rows (p(y=1|x) barely observed there)"
                         if cal.get("low_exposure_share") else "") + ".",
                  f"Rows: {self.rows['pu']} PU + {self.rows['e']} E "
                  f"({self.rows['pu_held_out']} + {self.rows['e_held_out']} held out); "
                  f"model: {self.final}; "
                  f"{self.seconds['select']:.0f} s choosing, {self.seconds['refit']:.0f} s for the final model."]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.report()


def _example_fit() -> PUEFit:
    """A hand-made result for the doctests."""
    return PUEFit(keras.Sequential([keras.Input((1,)), keras.layers.Dense(1)]), "bce_w",
                  {"bce_w": -0.1, "ratio": -0.05}, {"bce_w": 0.3, "ratio": 0.31},
                  {"bce_w": 3, "theta": 2}, {"log_loss": 0.6, "log_loss_constant": 0.69,
                                              "calibration_error": 0.01},
                  {"ratio": ("bce_w", "theta")}, {"pu": 8, "e": 8, "pu_held_out": 2,
                                                  "e_held_out": 2},
                  {"select": 1.0, "refit": 0.5})
