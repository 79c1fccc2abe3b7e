"""The table of candidates: one entry adds a candidate, which fit_pue then trains, scores and chooses."""

from __future__ import annotations

import keras
import numpy as np
import pytest

import adpue_tf as adp
from adpue_tf import risks
from adpue_tf.recommend import candidates as table
from adpue_tf.recommend.candidates import TABLE, Candidate

S = adp.synthetic.synthetic_pue(800, 800, seed=3)
FAST = dict(epochs=2, min_steps=20, batch_size=256, verbose=0)


def _net() -> keras.Model:
    return keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])


def _half_pu(y, z, keep):
    """nnPU of the observed positives against the exposed rows, a step of γ = 0.5."""
    return risks.exposed_pu(y, z, from_logits=True, sample_weight=keep, gamma=0.5).loss


def test_one_entry_adds_a_candidate_that_trains_in_the_joint_pass(monkeypatch):
    from adpue_tf.recommend import stage
    passes = []
    real = stage._pass

    def spy(stages, jobs, spec):
        passes.append(tuple(n for _, n in jobs))
        return real(stages, jobs, spec)

    monkeypatch.setattr(stage, "_pass", spy)
    monkeypatch.setitem(TABLE, "exposed_pu_half", Candidate(risk=_half_pu))
    fit = adp.fit_pue(_net, S.x_pu, S.w_pu, S.x_e, S.e_e,
                      candidates=["bce_w", "brier", "exposed_pu_half"], **FAST)
    assert np.isfinite(fit.scores["exposed_pu_half"]) and fit.epochs["exposed_pu_half"] >= 1
    assert "exposed_pu_half" in passes[0]  # trained with θ̂, bce_w and brier, in one fit
    model = fit.candidates["exposed_pu_half"]
    z = np.asarray(model(S.x_pu[:200]))
    assert z.shape == (200, 1) and np.all(np.isfinite(z))
    # it is a different estimator from the table's exposed_pu (γ = 1), with its own net
    other = adp.fit_pue(_net, S.x_pu, S.w_pu, S.x_e, S.e_e,
                        candidates=["bce_w", "brier", "exposed_pu"], **FAST)
    assert fit.scores["brier"] == other.scores["brier"]  # the other nets: the same seeds
    assert not np.allclose(z, np.asarray(other.candidates["exposed_pu"](S.x_pu[:200])))


@pytest.mark.slow
def test_a_new_entry_changes_no_other_candidates_result(monkeypatch):
    """Seeds come from names: an entry put first in the table leaves every other net as it was.

    (Up to early stopping: a joint pass stops once none of its nets improves.)
    """
    before = adp.fit_pue(_net, S.x_pu, S.w_pu, S.x_e, S.e_e, candidates=["bce_w", "blend"],
                         **FAST)
    first = {"exposed_pu_half": Candidate(risk=_half_pu), **TABLE}
    monkeypatch.setattr(table, "TABLE", first)
    for module in ("stage", "fit", "select", "rule"):
        monkeypatch.setattr(f"adpue_tf.recommend.{module}.TABLE", first)
    after = adp.fit_pue(_net, S.x_pu, S.w_pu, S.x_e, S.e_e,
                        candidates=["exposed_pu_half", "bce_w", "blend"], **FAST)
    for name, score in before.scores.items():
        assert after.scores[name] == score, name


def test_a_composite_entry_is_made_of_its_parts(monkeypatch):
    """A composite: its parts trained, its score the head's on their held-out logits."""
    mean = table._mean(("brier", "likelihood"))
    monkeypatch.setitem(TABLE, "pair", Candidate(parts=mean, needs=("brier", "likelihood")))
    fit = adp.fit_pue(_net, S.x_pu, S.w_pu, S.x_e, S.e_e, candidates=["brier", "likelihood",
                                                                       "pair"], **FAST)
    assert fit.parts["pair"] == ("brier", "likelihood")
    p = lambda m: 1 / (1 + np.exp(-np.asarray(m(S.x_pu[:100]), np.float64)))  # noqa: E731
    np.testing.assert_allclose(p(fit.candidates["pair"]),
                               (p(fit.candidates["brier"]) + p(fit.candidates["likelihood"])) / 2,
                               rtol=1e-4, atol=1e-6)


def test_the_table_declares_each_candidate_once():
    assert table.CANDIDATES == tuple(n for n in TABLE if n != table.THETA)
    assert set(table.DEFAULT_CANDIDATES) <= set(table.CANDIDATES)
    for name, entry in TABLE.items():
        made = [entry.risk is not None, entry.own is not None, entry.parts is not None]
        assert sum(made) == 1, name
        assert entry.reads in ("pu", "e", "pue") and set(entry.needs) <= set(TABLE), name
    assert table.PREDICTS_WITH_THETA == {"ratio", "likelihood_theta"}
    assert set(table.BLEND_PARTS) <= set(table.with_needs(table.PREFERRED))


@pytest.mark.parametrize("name", ["theta", "bce_w", "brier", "exposed_pu", "likelihood"])
def test_seeds_differ_by_name_and_seed_not_by_position(name):
    assert table.net_seed(7, name) != table.net_seed(8, name)
    assert table.net_seed(7, name) == table.net_seed(7, name)
