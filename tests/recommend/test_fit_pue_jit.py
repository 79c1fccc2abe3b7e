"""fit_pue(jit_compile=True): every net's step under XLA, the same choice and scores as without."""

import keras
import numpy as np
import pytest

import adpue_tf as adp

S = adp.synthetic.synthetic_pue(600, 600, seed=2)
# the joint passes (bce_w, brier; likelihood) and a DebiasedModel (adpue_ratio) under XLA
OPTIONS = dict(epochs=2, min_steps=10, verbose=0,
               candidates=["bce_w", "likelihood", "brier", "adpue_ratio"])


def _net():
    return keras.Sequential([keras.Input((2,)), keras.layers.Dense(4, activation="relu"),
                             keras.layers.Dense(1)])


@pytest.mark.slow
def test_xla_gives_the_choice_and_scores_of_the_plain_step():
    plain = adp.fit_pue(_net, S.x_pu, S.w_pu, S.x_e, S.e_e, **OPTIONS)
    xla = adp.fit_pue(_net, S.x_pu, S.w_pu, S.x_e, S.e_e, jit_compile=True, **OPTIONS)
    assert xla.choice == plain.choice
    assert set(xla.scores) == set(plain.scores)
    for name, score in plain.scores.items():
        assert xla.scores[name] == pytest.approx(score, rel=1e-3, abs=1e-5), name
    np.testing.assert_allclose(np.asarray(xla.model(S.x_pu[:64])),
                               np.asarray(plain.model(S.x_pu[:64])), rtol=1e-3, atol=1e-4)


@pytest.mark.slow
def test_under_xla_a_diverging_net_is_caught_by_its_held_out_score():
    """The losses' runtime checks are off under XLA: a net that blows up fails by its score."""
    def exploding():
        return keras.Sequential([keras.Input((2,)), keras.layers.Dense(
            1, kernel_initializer=keras.initializers.Constant(1e6))])

    with pytest.raises(ValueError, match="Every candidate diverged"), \
            pytest.warns(UserWarning, match="far from standardised"):
        adp.fit_pue(exploding, S.x_pu, S.w_pu, S.x_e, S.e_e, jit_compile=True,
                    epochs=2, min_steps=20, verbose=0, candidates=["bce_w", "brier"])


@pytest.mark.parametrize("value", [1, "yes", None])
def test_jit_compile_must_be_a_bool(value):
    with pytest.raises(TypeError, match="`jit_compile` must be a bool"):
        adp.fit_pue(_net, S.x_pu, S.w_pu, S.x_e, S.e_e, jit_compile=value, **OPTIONS)
