"""fit_pue's hedge: the Y-free skill, the share, the LogitMix layer, and the hedged model."""

from __future__ import annotations

import math

import keras
import numpy as np
import pytest
import tensorflow as tf

import adpue_tf as adp
from adpue_tf.recommend.compose import LogitMix
from adpue_tf.recommend.rule import HEDGE, HEDGE_BELOW, hedge_share, skill

from serialization import assert_round_trip


def _sig(z):
    return 1.0 / (1.0 + np.exp(-np.asarray(z, np.float64)))


def confounded(n, seed):
    """Rows whose p and θ both rise with ``u``, which no feature shows (a net resolves little)."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 2)).astype("float32")
    u = rng.normal(size=n)
    p = _sig(-2.0 + 0.3 * x[:, 0] + 1.2 * u)
    theta = _sig(-0.3 + 0.5 * x[:, 1] + 2.0 * u)
    return x, p, theta, rng


def confounded_log(n_pu, n_e, seed):
    x, p, theta, rng = confounded(n_pu, seed)
    w = ((rng.random(n_pu) < theta) & (rng.random(n_pu) < p)).astype("float32")
    x_e, _, theta_e, rng_e = confounded(n_e, seed + 1)
    e = (rng_e.random(n_e) < theta_e).astype("float32")
    return x, w, x_e, e


def linear():
    return keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])


# -- skill ---------------------------------------------------------------------------------------
def test_skill_by_hand():
    w_held, e_held, rate, brier = 0.1, 0.5, 0.2, -0.05
    constant = 0.2 ** 2 * 0.5 - 2 * 0.2 * 0.1  # the constant's exposure Brier score: -0.02
    assert skill(brier, w_held, e_held, rate) == pytest.approx((constant - brier)
                                                               / (w_held + constant))
    assert skill(constant, w_held, e_held, rate) == pytest.approx(0.0)  # the constant itself
    assert math.isnan(skill(-0.05, 0.0, 0.5, 0.0))  # nothing to explain
    assert math.isnan(skill(math.nan, w_held, e_held, rate))


def test_skill_estimates_the_exposure_weighted_brier_skill_without_y():
    """On rows with known θ, p and Y: the Y-free skill against ``1 - E[θ(f-Y)²]/E[θ(k-Y)²]``."""
    rng = np.random.default_rng(0)
    n = 400_000
    z = rng.normal(size=n)
    p, theta = _sig(-1.0 + 1.5 * z), _sig(0.5 * z)
    y = rng.random(n) < p
    exposed = rng.random(n) < theta
    w = (exposed & y).astype(np.float64)
    z_e = rng.normal(size=n)
    e = (rng.random(n) < _sig(0.5 * z_e)).astype(np.float64)
    f_pu, f_e = _sig(-1.0 + 1.0 * z), _sig(-1.0 + 1.0 * z_e)  # a model that resolves part of p
    rate = w.mean() / e.mean()
    brier = np.mean(e * f_e ** 2) - 2 * np.mean(w * f_pu)
    with_y = 1 - (np.sum(theta * (f_pu - y) ** 2) / np.sum(theta * (rate - y) ** 2))
    assert skill(brier, w.mean(), e.mean(), rate) == pytest.approx(with_y, abs=0.01)
    assert 0.05 < with_y < 0.5


# -- the share -----------------------------------------------------------------------------------
@pytest.mark.parametrize("choice, model_skill, share", [
    ("blend", 0.05, HEDGE),
    ("blend", -0.2, HEDGE),
    ("blend", HEDGE_BELOW, 0.0),  # at the guard: kept whole
    ("blend", 0.4, 0.0),
    ("bce_w", 0.01, 0.0),  # nothing to hedge towards
    ("blend", math.nan, 0.0),
])
def test_hedge_share(choice, model_skill, share):
    assert hedge_share(choice, model_skill) == share


# -- the layer -----------------------------------------------------------------------------------
def test_logit_mix_by_hand_eager_and_graph():
    layer = LogitMix([0.75, 0.25])
    a, b = tf.constant([[2.0], [-1.0]]), tf.constant([[-2.0], [3.0]])
    expected = [[0.75 * 2 - 0.25 * 2], [-0.75 + 0.75]]
    np.testing.assert_allclose(layer([a, b]).numpy(), expected, atol=1e-7)
    np.testing.assert_allclose(tf.function(lambda u, v: layer([u, v]))(a, b).numpy(),
                               expected, atol=1e-7)


def test_logit_mix_round_trips():
    assert_round_trip(LogitMix([2 / 3, 1 / 3]))


@pytest.mark.parametrize("shares, error", [
    ([0.5, 0.6], ValueError), ([1.5, -0.5], ValueError), ([], TypeError),
    ("0.5", TypeError), ([True, False], TypeError), (0.5, TypeError)])
def test_logit_mix_bad_shares_name_the_argument(shares, error):
    with pytest.raises(error, match="`shares`"):
        LogitMix(shares)


def test_logit_mix_wrong_number_of_logits():
    with pytest.raises(ValueError, match="2 shares but was called on 3"):
        LogitMix([0.5, 0.5])([tf.zeros((1, 1))] * 3)


# -- fit_pue -------------------------------------------------------------------------------------
def test_fit_pue_hedges_a_choice_that_resolves_nothing(tmp_path):
    """Its model is ⅔ of the choice's logit and ⅓ of bce_w's (saved and loaded the same);
    hedge=False: the choice alone."""
    x, w, x_e, e = confounded_log(2000, 2000, seed=0)
    kw = dict(candidates=["bce_w", "brier", "exposed_pu"], epochs=2, min_steps=40,
              batch_size=256, refit=False, verbose=0)
    fit = adp.fit_pue(linear, x, w, x_e, e, **kw)
    assert fit.choice != "bce_w" and fit.skill < HEDGE_BELOW
    assert fit.hedge_share == pytest.approx(HEDGE)
    z = {n: np.asarray(fit.candidates[n].predict(x_e, verbose=0)) for n in (fit.choice, "bce_w")}
    np.testing.assert_allclose(np.asarray(fit.model.predict(x_e, verbose=0)),
                               (1 - HEDGE) * z[fit.choice] + HEDGE * z["bce_w"], atol=1e-5)
    assert f"Hedged: {fit.choice}'s held-out skill" in fit.report()
    fit.model.save(tmp_path / "hedged.keras")
    loaded = keras.saving.load_model(tmp_path / "hedged.keras")
    np.testing.assert_allclose(np.asarray(loaded.predict(x_e, verbose=0)),
                               np.asarray(fit.model.predict(x_e, verbose=0)), atol=1e-6)
    plain = adp.fit_pue(linear, x, w, x_e, e, hedge=False, **kw)
    assert plain.hedge_share == 0.0 and plain.choice == fit.choice
    np.testing.assert_allclose(np.asarray(plain.model.predict(x_e, verbose=0)), z[fit.choice],
                               atol=1e-5)
    assert "Hedged" not in plain.report()


@pytest.mark.slow
def test_fit_pue_keeps_a_skilled_choice_whole():
    s = adp.synthetic.synthetic_pue(1500, 1500, seed=0)
    net = lambda: keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])  # noqa: E731
    fit = adp.fit_pue(net, s.x_pu, s.w_pu, s.x_e, s.e_e, candidates=["bce_w", "exposed_pu"],
                      epochs=3, batch_size=256, verbose=0)
    assert fit.skill > HEDGE_BELOW and fit.hedge_share == 0.0


@pytest.mark.parametrize("bad", ["yes", 1, None])
def test_hedge_option_must_be_a_bool(bad):
    x, w, x_e, e = confounded_log(200, 200, seed=0)
    with pytest.raises(TypeError, match="`hedge`"):
        adp.fit_pue(linear, x, w, x_e, e, hedge=bad, verbose=0)


@pytest.mark.slow
def test_hedged_model_is_closer_to_p_where_no_net_resolves_it():
    """Known truth: p and θ rise together with a variable no feature shows.

    Every exposure-weighted candidate learns ``E[θp]/E[θ]`` over the rows it
    confuses, above their mean ``p``; the hedge brings the mean and KL(p‖p̂)
    closer to the truth (fixed seeds; measured 0.200 against 0.250 for the
    mean, true 0.169, and KL 0.079 against 0.095).
    """
    x, w, x_e, e = confounded_log(4000, 4000, seed=0)
    x_t, p_t, _, _ = confounded(20_000, 2)

    def kl(q):
        q = np.clip(q, 1e-7, 1 - 1e-7)
        return float(np.mean(p_t * np.log(p_t / q) + (1 - p_t) * np.log((1 - p_t) / (1 - q))))

    out = {}
    for hedge in (True, False):
        fit = adp.fit_pue(linear, x, w, x_e, e, epochs=5, batch_size=256, verbose=0,
                          hedge=hedge)
        out[hedge] = (fit, _sig(np.asarray(fit.model.predict(x_t, verbose=0)).ravel()))
    (hedged, q_h), (plain, q_p) = out[True], out[False]
    assert hedged.hedge_share == pytest.approx(HEDGE) and plain.hedge_share == 0.0
    assert abs(q_h.mean() - p_t.mean()) < abs(q_p.mean() - p_t.mean()) - 0.02
    assert kl(q_h) < kl(q_p) - 0.005
