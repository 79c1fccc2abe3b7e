"""fit_pue's choice rule on hand-made scores (``adp.recommend.choose``)."""

from __future__ import annotations

import dataclasses

import keras
import numpy as np
import pytest

import adpue_tf as adp
from adpue_tf.recommend import PREDICTS_WITH_THETA, choose
from adpue_tf.recommend.candidates import BLEND_PARTS, PREFERRED
from adpue_tf.recommend.rule import MIN_POSITIVES

BRIER = {"bce_w": -0.20, "ratio": -0.259, "likelihood": -0.260, "average": -0.261}
SE = {"bce_w": 0.009, "ratio": 0.004, "likelihood": 0.001, "average": 0.0}
NLL = {"bce_w": 0.405, "ratio": 0.338, "likelihood": 0.345, "average": 0.347}


def _small_fit(names: list[str], rows: int = 1500
               ) -> tuple[adp.recommend.PUEFit, adp.synthetic.SyntheticPUE]:
    """fit_pue on a small synthetic set with a linear net, no refit: its result and the data.

    1,500 PU rows hold out more than MIN_POSITIVES observed positives (the rule decides).
    """
    s = adp.synthetic.synthetic_pue(rows, rows, seed=1)
    net = lambda: keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])  # noqa: E731
    return adp.fit_pue(net, s.x_pu, s.w_pu, s.x_e, s.e_e, epochs=2, min_steps=8,
                       batch_size=128, verbose=0, refit=False, candidates=names), s


def test_ratio_and_likelihood_theta_read_the_shared_theta():
    assert PREDICTS_WITH_THETA == frozenset({"ratio", "likelihood_theta"})


def test_likelihood_theta_takes_part_only_as_the_brier_best():
    scores = {"likelihood": -0.31, "likelihood_theta": -0.305}
    gap = {"likelihood": 0.0, "likelihood_theta": 0.01}
    nll = {"likelihood": 0.35, "likelihood_theta": 0.30}
    assert choose(scores, gap, nll, 2.0) == "likelihood"
    assert choose({"likelihood": -0.305, "likelihood_theta": -0.31},
                  {"likelihood": 0.01, "likelihood_theta": 0.0}, nll, 2.0) == "likelihood_theta"


def test_the_likelihood_decides_among_the_close_but_never_for_ratio_unless_it_is_best():
    # Fashion-MNIST, ratio 0.9, seed 0 (rounded): Ratio is within 2 SE and has the
    # lowest NLL under θ̂, but σ(z)·θ̂ of q̂/θ̂ is q̂: the likelihood cannot judge it.
    assert choose(BRIER, SE, NLL, 2.0) == "likelihood"
    # Without Ratio's exemption the rule would take it: the exemption is what decides.
    assert min(NLL, key=NLL.get) == "ratio"
    # bce_w is outside 2 SE: (−0.20 + 0.261) / 0.009 > 2.
    assert choose(BRIER, SE, {**NLL, "bce_w": 0.1}, 2.0) == "likelihood"


def test_ratio_takes_part_when_it_is_the_best_by_the_brier_score():
    brier = {**BRIER, "ratio": -0.262}
    se = {**SE, "ratio": 0.0, "average": 0.001}
    assert choose(brier, se, NLL, 2.0) == "ratio"


def test_tolerance_zero_or_no_theta_is_the_brier_score_alone():
    assert choose(BRIER, SE, NLL, 0.0) == "average"
    assert choose(BRIER, SE, {}, 2.0) == "average"


def test_exact_ties_follow_the_order():
    brier = {"a": -0.1, "b": -0.1}
    assert choose(brier, {"a": 0.0, "b": 0.0}, {}, 2.0, order=("b", "a")) == "b"
    assert choose(brier, {"a": 0.0, "b": 0.0}, {"a": 0.3, "b": 0.3}, 2.0) == "a"


def test_fit_pue_uses_the_rule():
    fit, _ = _small_fit(["bce_w", "ratio", "likelihood", "brier"])
    assert fit.choice == choose(fit.scores, fit.brier_gap_se, fit.exposure_nll, 2.0,
                                order=("bce_w", "ratio", "likelihood", "brier"))


def test_the_preferred_candidate_wins_whenever_the_brier_score_cannot_reject_it():
    brier, nll = {**BRIER, "blend": -0.255}, {**NLL, "blend": 0.35}
    # (−0.255 + 0.261) / 0.004 = 1.5 SE from the best: kept (no SE of the likelihood given).
    se = {**SE, "blend": 0.004}
    assert choose(brier, se, nll, 2.0, prefer="blend") == "blend"
    assert choose(brier, se, {}, 2.0, prefer="blend") == "blend"
    # 3 SE from the best: the held-out rows show a better one; the usual rule decides.
    se = {**SE, "blend": 0.002}
    assert choose(brier, se, nll, 2.0, prefer="blend") == "likelihood"
    # tolerance 0: only if it is the best itself.
    assert choose(brier, {**SE, "blend": 0.004}, nll, 0.0, prefer="blend") == "average"
    # Not trained (a part diverged): the rule without it.
    assert choose(BRIER, SE, NLL, 2.0, prefer="blend") == "likelihood"


def test_the_likelihood_displaces_the_preferred_candidate_only_beyond_tolerance():
    brier = {**BRIER, "blend": -0.255}
    se = {**SE, "blend": 0.004}
    nll = {**NLL, "blend": 0.352}
    # likelihood is the NLL choice among the close (Ratio exempt): 0.352 − 0.345 = 0.007.
    assert choose(brier, se, nll, 2.0, prefer="blend", nll_se={"likelihood": 0.004}) == "blend"
    assert choose(brier, se, nll, 2.0, prefer="blend",
                  nll_se={"likelihood": 0.003}) == "likelihood"
    # The blend with the lowest NLL stays, whatever the SEs.
    assert choose(brier, se, {**nll, "blend": 0.3}, 2.0, prefer="blend",
                  nll_se={"likelihood": 0.0}) == "blend"
    # No SE for the challenger: the blend is never displaced by the likelihood.
    assert choose(brier, se, nll, 2.0, prefer="blend", nll_se={}) == "blend"


@pytest.mark.parametrize("theta_reader", sorted(PREDICTS_WITH_THETA))
def test_the_likelihood_never_displaces_the_preferred_candidate_for_one_that_reads_theta(
        theta_reader):
    # Table 2, ratio 0.9, trial 0 (rounded): Ratio the best by the Brier score, the blend
    # 0.66 SE behind it, Ratio's NLL under θ̂ lower by 6.9 SE: but σ(z)·θ̂ of q̂/θ̂ is q̂
    # (the model of W), so that NLL measures how well it fits W, not how close it is to p.
    brier = {theta_reader: -0.2632, "blend": -0.2619, "likelihood": -0.2603}
    se = {theta_reader: 0.0, "blend": 0.0019, "likelihood": 0.0024}
    nll = {theta_reader: 0.3372, "blend": 0.3431, "likelihood": 0.3428}
    nll_se = {theta_reader: 0.00086, "blend": 0.0, "likelihood": 0.00066}
    assert choose(brier, se, nll, 2.0, prefer="blend", nll_se=nll_se) == "blend"
    # Without the blend the Brier best that reads θ̂ is chosen as before ...
    del brier["blend"], se["blend"], nll["blend"]
    assert choose(brier, se, nll, 2.0) == theta_reader
    # ... and with the blend out of the Brier score's reach as well (3 SE behind).
    assert choose({**brier, "blend": -0.2575}, {**se, "blend": 0.0019},
                  {**nll, "blend": 0.3431}, 2.0, prefer="blend", nll_se=nll_se) == theta_reader
    # A candidate that does not read θ̂ still displaces it by the likelihood beyond tolerance.
    brier = {"likelihood": -0.2632, "blend": -0.2619}
    se = {"likelihood": 0.0, "blend": 0.0019}
    assert choose(brier, se, {"likelihood": 0.3372, "blend": 0.3431}, 2.0, prefer="blend",
                  nll_se={"likelihood": 0.00086}) == "likelihood"


def test_fit_pue_prefers_the_blend_and_the_blend_is_the_mean_of_its_parts():
    names = ["bce_w", "ratio", "likelihood", "brier", "likelihood_theta", "blend"]
    fit, s = _small_fit(names)
    assert BLEND_PARTS == ("likelihood", "brier", "ratio", "likelihood_theta")
    assert PREFERRED == "blend"
    assert fit.parts["blend"] == BLEND_PARTS
    assert fit.rows["w_held_out"] >= MIN_POSITIVES
    assert fit.choice == choose(fit.scores, fit.brier_gap_se, fit.exposure_nll, 2.0,
                                order=names, prefer="blend", nll_se=fit.nll_gap_se,
                                positives=fit.rows["w_held_out"])
    assert set(fit.nll_gap_se) == set(names) and fit.nll_gap_se["blend"] == 0.0
    assert all(v > 0 for n, v in fit.nll_gap_se.items() if n != "blend")
    x = s.x_e[:9]
    prob = lambda m: 1.0 / (1.0 + np.exp(-m.predict(x, verbose=0).astype(np.float64)))  # noqa: E731
    want = np.mean([prob(fit.candidates[n]) for n in BLEND_PARTS], axis=0)
    np.testing.assert_allclose(prob(fit.candidates["blend"]), want, rtol=1e-5, atol=1e-6)


def test_missing_values_are_refused_by_name():
    with pytest.raises(ValueError, match="`gap_se` must have a value for every candidate"):
        choose(BRIER, {"bce_w": 0.0}, NLL, 2.0)
    with pytest.raises(ValueError, match="`nll` must have a value .* missing: \\['ratio'\\]"):
        choose(BRIER, SE, {n: v for n, v in NLL.items() if n != "ratio"}, 2.0)
    with pytest.raises(ValueError, match="`scores` must name at least one"):
        choose({}, {}, {}, 2.0)


def test_non_finite_values_and_a_negative_tolerance_are_refused_by_name():
    with pytest.raises(ValueError, match="`scores` must be finite .* \\{'ratio': nan\\}"):
        choose({**BRIER, "ratio": float("nan")}, SE, NLL, 2.0)
    with pytest.raises(ValueError, match="`gap_se` must be finite"):
        choose(BRIER, {**SE, "bce_w": float("inf")}, NLL, 2.0)
    with pytest.raises(ValueError, match="`tolerance` must be a number >= 0, got -1.0"):
        choose(BRIER, SE, NLL, -1.0)


def test_fit_pue_records_a_candidate_without_a_finite_score_as_failed(monkeypatch):
    from adpue_tf.recommend import select

    brier = select.HeldOut.brier
    monkeypatch.setattr(select.HeldOut, "brier", lambda self, name: float("nan")
                        if name == "ratio" else brier(self, name))
    fit, _ = _small_fit(["bce_w", "ratio", "likelihood", "brier"])
    assert "ratio" not in fit.scores and fit.choice != "ratio"
    assert "no finite held-out score" in fit.failed["ratio"]


def test_a_derived_candidate_is_never_the_reference_of_the_tolerance():
    # Table 1, australian, θ 0.7, α 0.3, trial 5 (rounded): `average` (the two best by
    # these scores) is best; against it the blend is 2.5 SE out, against the best
    # single candidate (likelihood) 1.4 SE in.
    brier = {"likelihood": -0.054, "bce_w": -0.045, "blend": -0.043, "average": -0.059}
    nll = {"likelihood": 0.375, "bce_w": 0.409, "blend": 0.418, "average": 0.380}
    to_average = {"likelihood": 0.020, "bce_w": 0.020, "blend": 0.0066, "average": 0.0}
    to_single = {"likelihood": 0.0, "bce_w": 0.008, "blend": 0.008, "average": 0.004}
    nll_se = {"likelihood": 0.032, "bce_w": 0.039, "average": 0.014}
    assert choose(brier, to_average, nll, 2.0, prefer="blend", nll_se=nll_se) == "likelihood"
    assert choose(brier, to_single, nll, 2.0, prefer="blend", nll_se=nll_se,
                  derived=("average",)) == "blend"
    # `average` can still be chosen: by the likelihood among the close ...
    assert choose(brier, to_single, {**nll, "average": 0.30}, 2.0, prefer="blend",
                  nll_se=nll_se, derived=("average",)) == "average"
    # ... or as the best by the Brier score when there is no θ̂.
    assert choose(brier, to_single, {}, 2.0, derived=("average",)) == "average"
    # Every candidate derived: the best of them is the reference.
    assert choose({"average": -0.1}, {"average": 0.0}, {}, 2.0, derived=("average",)) == "average"


def test_fit_pue_measures_the_tolerance_from_the_best_candidate_not_derived():
    names = ["bce_w", "likelihood", "brier", "average", "blend"]
    fit, _ = _small_fit(names)
    assert adp.recommend.DERIVED == ("average",) and "average" in fit.scores
    ref = min((n for n in fit.scores if n != "average"), key=fit.scores.get)
    assert fit.brier_gap_se[ref] == 0.0 and fit.brier_gap_se["average"] > 0.0
    assert fit.choice == choose(fit.scores, fit.brier_gap_se, fit.exposure_nll, 2.0,
                                order=names, prefer="blend", nll_se=fit.nll_gap_se,
                                derived=("average",), positives=fit.rows["w_held_out"])


def test_too_few_held_out_positives_keep_the_blend_whatever_the_scores():
    scores, gap = {"blend": -0.1, "likelihood": -0.3}, {"blend": 0.01, "likelihood": 0.0}
    nll, nll_se = {"blend": 0.4, "likelihood": 0.2}, {"likelihood": 0.01}
    args = (scores, gap, nll, 2.0)
    assert choose(*args, prefer="blend", nll_se=nll_se) == "likelihood"  # 20 SE worse
    assert choose(*args, prefer="blend", nll_se=nll_se, positives=MIN_POSITIVES) == "likelihood"
    assert choose(*args, prefer="blend", nll_se=nll_se, positives=MIN_POSITIVES - 1) == "blend"
    assert choose(*args, nll_se=nll_se, positives=0) == "likelihood"  # no prefer: the rule
    assert choose({"likelihood": -0.3}, {"likelihood": 0.0}, {}, 2.0, prefer="blend",
                  positives=0) == "likelihood"  # prefer without a score: the rule


def test_fit_pue_on_few_held_out_positives_keeps_the_blend_and_says_why():
    names = ["bce_w", "likelihood", "brier", "blend"]
    fit, s = _small_fit(names, rows=200)
    assert fit.choice == "blend" and fit.rows["w_held_out"] < MIN_POSITIVES
    assert f"Kept blend: {fit.rows['w_held_out']} observed positive(s) held out" in fit.report()


def _few_positives(**options):
    s = adp.synthetic.synthetic_pue(200, 200, seed=1)
    net = lambda: keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])  # noqa: E731
    return adp.fit_pue(net, s.x_pu, s.w_pu, s.x_e, s.e_e, epochs=2, min_steps=8,
                       batch_size=128, verbose=0, **options)


def test_with_few_held_out_positives_the_default_trains_only_the_blend_it_keeps():
    fit = _few_positives()
    assert fit.rows["w_held_out"] < MIN_POSITIVES and fit.choice == PREFERRED
    assert fit.skipped == ("exposed_pu", "adpue_ratio", "average")
    assert set(fit.scores) == {"bce_w", "ratio", "likelihood", "brier", "likelihood_theta",
                               "blend"}
    assert "Not trained, as they could not overrule it: exposed_pu, adpue_ratio" in fit.report()


@pytest.mark.slow
def test_skipping_the_overruled_candidates_gives_the_same_model():
    fit = _few_positives()
    named = _few_positives(candidates=list(adp.recommend.DEFAULT_CANDIDATES))
    assert named.skipped == () and set(named.scores) == set(adp.recommend.DEFAULT_CANDIDATES)
    assert named.choice == PREFERRED
    x = np.random.default_rng(0).normal(size=(64, 2)).astype("float32")
    np.testing.assert_allclose(fit.model.predict(x, verbose=0), named.model.predict(x, verbose=0),
                               rtol=1e-5, atol=1e-6)


def test_if_the_blend_fails_the_skipped_candidates_are_trained_and_the_rule_chooses(monkeypatch):
    from adpue_tf.recommend.candidates import TABLE, Candidate
    from adpue_tf.recommend.stage import Failed

    def diverged(stage):
        raise Failed("brier diverged in epoch 1 (no finite held-out score)")

    monkeypatch.setitem(TABLE, "brier", Candidate(own=diverged, default=True))
    fit = _few_positives(refit=False)
    assert fit.rows["w_held_out"] < MIN_POSITIVES and fit.skipped == ()
    assert "brier" in fit.failed and "blend" in fit.failed
    assert {"exposed_pu", "adpue_ratio", "likelihood_theta"} <= set(fit.scores)
    assert fit.choice != PREFERRED and fit.choice in fit.scores


def test_the_report_measures_from_the_rules_reference():
    from adpue_tf.recommend.result import _example_fit

    fit = dataclasses.replace(_example_fit(), scores={"bce_w": -0.10, "ratio": -0.05, "average": -0.12},
                              brier_gap_se={"bce_w": 0.0, "ratio": 0.02, "average": 0.01})
    rows = {line.split("|")[1].strip(" ←"): line.split("|")[3].strip()
            for line in fit.report().splitlines() if line.startswith("| ") and "Brier" not in line}
    assert rows == {"average": "-0.0200 (0.0100)", "bce_w": "+0.0000 (0.0000)",
                    "ratio": "+0.0500 (0.0200)"}
