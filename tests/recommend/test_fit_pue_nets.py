"""fit_pue with a mapping of nets: every net chosen on the same held-out rows; the lowest score kept."""

import math

import keras
import numpy as np
import pytest

import adpue_tf as adp

S = adp.synthetic.synthetic_pue(600, 600, seed=0)
OPTIONS = dict(epochs=2, min_steps=20, candidates=["bce_w", "brier", "likelihood"], verbose=0)


def _linear(l2: float):
    def build():
        reg = keras.regularizers.L2(l2) if l2 else None
        return keras.Sequential([keras.Input((2,)), keras.layers.Dense(1, kernel_regularizer=reg)])
    return build


@pytest.mark.slow
def test_the_net_whose_choice_scores_lowest_is_returned_as_its_own_fit():
    nets = {"l2_strong": _linear(1.0), "l2_none": _linear(0.0)}
    fit = adp.fit_pue(nets, S.x_pu, S.w_pu, S.x_e, S.e_e, tolerance=0.0, **OPTIONS)
    assert set(fit.net_scores) == set(nets)
    assert all(math.isfinite(v) for v in fit.net_scores.values())
    assert fit.net == min(fit.net_scores, key=fit.net_scores.get)
    # the scores are each fit's own held-out NLL of its choice (every θ̂ trained here)
    alone = {n: adp.fit_pue(b, S.x_pu, S.w_pu, S.x_e, S.e_e, tolerance=0.0, **OPTIONS)
             for n, b in nets.items()}
    for name, single in alone.items():
        assert fit.net_scores[name] == pytest.approx(single.exposure_nll[single.choice])
        assert single.net is None and single.net_scores == {}
    winner = alone[fit.net]
    assert fit.choice == winner.choice and fit.scores == pytest.approx(winner.scores)
    np.testing.assert_allclose(np.asarray(fit.model(S.x_pu[:50])),
                               np.asarray(winner.model(S.x_pu[:50])), rtol=1e-5, atol=1e-6)
    assert f"Net: {fit.net} (" in fit.report()


def _mlp(seed: int):
    def build():
        init = keras.initializers.GlorotUniform(seed=seed)
        return keras.Sequential([keras.Input((2,)),
                                 keras.layers.Dense(8, "relu", kernel_initializer=init),
                                 keras.layers.Dense(1)])
    return build


@pytest.mark.slow
def test_the_first_net_stays_unless_another_is_clearly_better():
    """Two nets alike but for their initial weights: whichever is given first is kept (1 SE)."""
    a, b = _mlp(6), _mlp(7)  # held-out NLL 0.327 and 0.329: within one SE
    first = adp.fit_pue({"a": a, "b": b}, S.x_pu, S.w_pu, S.x_e, S.e_e, **OPTIONS)
    swapped = adp.fit_pue({"b": b, "a": a}, S.x_pu, S.w_pu, S.x_e, S.e_e, **OPTIONS)
    assert (first.net, swapped.net) == ("a", "b")
    assert first.net_scores["a"] != first.net_scores["b"]  # the lower alone would flip one
    assert first.net_scores == pytest.approx(swapped.net_scores)
    assert "Net: a (the first given: the first stays unless" in first.report()


@pytest.mark.slow
def test_a_heavily_penalised_net_loses_to_a_free_one():
    """An L2 of 10 pins the weights near 0: its choice cannot model W as well (given first, overruled)."""
    # trained long enough for the free net to leave the pinned one behind (1.5 SE here)
    fit = adp.fit_pue({"pinned": _linear(10.0), "free": _linear(0.0)}, S.x_pu, S.w_pu,
                      S.x_e, S.e_e, **dict(OPTIONS, min_steps=300))
    assert fit.net == "free"
    assert fit.net_scores["free"] < fit.net_scores["pinned"]
    assert "Net: free (clearly better than the first given:" in fit.report()


@pytest.mark.parametrize("nets,error,match", [
    ({}, ValueError, "at least one net"),
    ({1: _linear(0.0)}, TypeError, "keys must be non-empty names"),
    ({"a": {"b": _linear(0.0)}}, TypeError, r"`build_net\['a'\]` must be a function"),
    ({"a": _linear(0.0), "b": "not a builder"}, TypeError, r"`build_net\['b'\]` must be a function"),
    ({"a": _linear(0.0), "b": _linear(0.0)()}, TypeError, r"`build_net\['b'\]` must be a function"),
    ({"a": lambda: keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])}, ValueError,
     r"`build_net\['a'\]`: "),
])
def test_bad_mappings_are_refused_naming_the_net(nets, error, match):
    with pytest.raises(error, match=match):
        adp.fit_pue(nets, S.x_pu, S.w_pu, S.x_e, S.e_e, **OPTIONS)


@pytest.mark.slow
def test_a_mapping_of_one_net_is_that_net_with_every_option():
    """Non-default options (refit, seed, candidates) reach the nets of a mapping."""
    options = dict(OPTIONS, seed=3, refit=False, candidates=["bce_w", "brier", "ratio"])
    single = adp.fit_pue(_linear(0.0), S.x_pu, S.w_pu, S.x_e, S.e_e, **options)
    mapped = adp.fit_pue({"only": _linear(0.0)}, S.x_pu, S.w_pu, S.x_e, S.e_e, **options)
    assert mapped.net == "only" and set(mapped.net_scores) == {"only"}
    assert mapped.final == "average" and mapped.choice == single.choice
    assert mapped.scores == pytest.approx(single.scores)
    np.testing.assert_allclose(np.asarray(mapped.model(S.x_pu[:50])),
                               np.asarray(single.model(S.x_pu[:50])), rtol=1e-5, atol=1e-6)


def test_the_nets_train_together_in_one_pass(monkeypatch):
    """The nets of every net that train jointly (θ̂, bce_w, brier; then likelihood) share a pass."""
    from adpue_tf.recommend import stage
    passes = []
    real = stage._pass

    def spy(stages, jobs, spec):
        passes.append((len(stages), tuple(dict.fromkeys(n for _, n in jobs))))
        return real(stages, jobs, spec)

    monkeypatch.setattr(stage, "_pass", spy)
    adp.fit_pue({"a": _linear(0.0), "b": _linear(0.1)}, S.x_pu, S.w_pu, S.x_e, S.e_e,
                **OPTIONS)
    # selection: two passes over both nets' stages; the refit: the winner's alone
    assert passes[:2] == [(2, ("theta", "bce_w", "brier")), (2, ("likelihood",))]
    assert all(n == 1 for n, _ in passes[2:])


@pytest.mark.slow
def test_a_net_whose_every_candidate_diverges_is_named():
    """One net exploding stops the joint pass; the nets then train one by one, and the error names it."""
    def exploding():
        return keras.Sequential([keras.Input((2,)), keras.layers.Dense(
            1, kernel_initializer=keras.initializers.Constant(1e6))])

    with pytest.raises(ValueError, match=r"`build_net\['exploding'\]`: Every candidate diverged"), \
            pytest.warns(UserWarning, match="far from standardised"):
        adp.fit_pue({"fine": _linear(0.0), "exploding": exploding}, S.x_pu, S.w_pu, S.x_e,
                    S.e_e, **OPTIONS)


@pytest.mark.parametrize("mapping", [False, pytest.param(True, marks=pytest.mark.slow)])
def test_the_nets_the_checks_build_are_trained(monkeypatch, mapping):
    """The checks' two calls of each build_net give θ̂'s and bce_w's nets: two builds fewer, the same fit."""
    from adpue_tf._internal.seeding import seed_net
    from adpue_tf.recommend.stage import Stage
    calls = []

    def counted(l2):
        inner = _linear(l2)

        def build():
            calls.append(l2)
            return inner()
        return build

    def fit():
        calls.clear()
        nets = {"a": counted(0.0), "b": counted(0.1)} if mapping else counted(0.0)
        out = adp.fit_pue(nets, S.x_pu, S.w_pu, S.x_e, S.e_e, **OPTIONS)
        return out, len(calls)

    fit()  # the compiled models kept (their own nets built once) for the calls compared
    taken, builds = fit()

    def fresh_net(self, name):  # every net built where it is needed, as before
        seed_net(self.seed_of(name))
        return self.build_net()

    monkeypatch.setattr(Stage, "net", fresh_net)
    anew, more = fit()
    assert more == builds + (4 if mapping else 2)
    assert taken.choice == anew.choice and taken.net == anew.net
    assert taken.scores == anew.scores  # the same nets, bit for bit
    np.testing.assert_array_equal(np.asarray(taken.model(S.x_pu[:50])),
                                  np.asarray(anew.model(S.x_pu[:50])))
