"""fit_pue's choice rule on hand-made scores (``adp.recommend.choose``)."""

from __future__ import annotations

import keras

import adpue_tf as adp
from adpue_tf.recommend import PREDICTS_WITH_THETA, choose

BRIER = {"bce_w": -0.20, "ratio": -0.259, "likelihood": -0.260, "average": -0.261}
SE = {"bce_w": 0.009, "ratio": 0.004, "likelihood": 0.001, "average": 0.0}
NLL = {"bce_w": 0.405, "ratio": 0.338, "likelihood": 0.345, "average": 0.347}


def test_only_ratio_divides_by_the_shared_theta():
    assert PREDICTS_WITH_THETA == frozenset({"ratio"})


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
    s = adp.synthetic.synthetic_pue(400, 400, seed=1)
    net = lambda: keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])  # noqa: E731
    fit = adp.fit_pue(net, s.x_pu, s.w_pu, s.x_e, s.e_e, epochs=2, min_steps=8,
                      batch_size=128, verbose=0, refit=False,
                      candidates=["bce_w", "ratio", "likelihood", "brier"])
    assert fit.choice == choose(fit.scores, fit.brier_gap_se, fit.exposure_nll, 2.0,
                                order=("bce_w", "ratio", "likelihood", "brier"))
