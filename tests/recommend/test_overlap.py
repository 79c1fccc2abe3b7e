"""Overlap: the share of barely exposed rows fit_pue reports, and its warning."""

from __future__ import annotations

import warnings

import keras
import numpy as np
import pytest

import adpue_tf as adp
from adpue_tf.recommend.overlap import (
    LOW_EXPOSURE,
    WARN_SHARE,
    low_exposure_share,
    overlap_warning,
    weak_theta_warning,
)

FAST = dict(epochs=1, min_steps=500, learning_rate=0.05, batch_size=4096, verbose=0, seed=0,
            candidates=["bce_w", "ratio", "brier"])
#: A logging policy that shows items where positives are likely (θ's score 1.5x p's):
#: about 40 % of rows have θ < 0.05.
TARGETED = dict(y_weights=[2.0, -1.0, 0.0, 0.0], e_weights=[3.0, -1.5, 0.0, 0.0], e_bias=-2.0)
#: The same direction, milder: about 5 % of rows.
MILD = dict(y_weights=[2.0, -1.0, 0.0, 0.0], e_weights=[1.0, -0.5, 0.0, 0.0], e_bias=-1.0)


def _linear():
    return keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])


def _fit(params):
    data = adp.synthetic.synthetic_pue(1000, 1000, dim=4, seed=0, **params)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fit = adp.fit_pue(_linear, data.x_pu, data.w_pu, data.x_e, data.e_e, **FAST)
    overlap = [w for w in caught
               if issubclass(w.category, UserWarning) and "of the held-out rows" in str(w.message)]
    assert all(w.filename == __file__ for w in overlap)  # at the caller of fit_pue
    return data, fit, [str(w.message) for w in overlap]


def test_share_against_numpy():
    theta = np.array([0.0, 0.049999, LOW_EXPOSURE, 0.2, 1.0, 0.01, 0.5, 0.9])
    assert low_exposure_share(theta) == 3 / 8  # 0.05 itself is not below
    assert low_exposure_share(np.full(5, 0.5)) == 0.0
    with pytest.raises(ValueError, match="`theta`"):
        low_exposure_share(np.array([]))


def test_warning_only_from_the_share():
    assert overlap_warning(0.0) is None
    assert overlap_warning(np.nextafter(WARN_SHARE, 0.0)) is None
    assert overlap_warning(float("nan")) is None
    message = overlap_warning(0.37)
    assert message is not None and message.startswith("θ̂ < 0.05 on 37.0% of the held-out rows")
    assert "extrapolation" in message and "low_exposure_share" in message


def test_targeted_exposure_is_reported_and_warned():
    data, fit, overlap = _fit(TARGETED)
    share = fit.theta_calibration["low_exposure_share"]
    # θ̂ on every held-out row, PU and E: fit_pue's split of seed 0 (PU first, then E).
    rng = np.random.default_rng(0)
    pu_ho, e_ho = np.sort(rng.permutation(1000)[:200]), np.sort(rng.permutation(1000)[:200])
    bce = fit.candidates["bce_w"]
    nets = [layer for layer in fit.candidates["ratio"].layers
            if isinstance(layer, keras.Model) and layer is not bce]
    assert len(nets) == 1  # ratio = bce_w and θ̂
    theta = 1.0 / (1.0 + np.exp(-np.concatenate([
        np.asarray(nets[0](data.x_pu[pu_ho])).ravel(),
        np.asarray(nets[0](data.x_e[e_ho])).ravel()]).astype(np.float64)))
    assert share == pytest.approx(np.mean(theta < 0.05), abs=1.5 / 400)  # a row at the edge
    true_share = float(np.mean(data.p_e_e < 0.05))
    assert 0.35 < true_share < 0.45 and WARN_SHARE <= share <= 0.55
    assert len(overlap) == 1 and overlap[0].startswith(f"θ̂ < 0.05 on {100 * share:.1f}%")
    assert f"θ̂ < 0.05 on {100 * share:.1f}% of the held-out rows" in fit.report()


def test_mild_exposure_is_not_warned():
    data, fit, overlap = _fit(MILD)
    assert float(np.mean(data.p_e_e < 0.05)) < 0.1
    assert fit.theta_calibration["low_exposure_share"] < WARN_SHARE
    assert overlap == []


def test_weak_theta_warning_only_clearly_worse_than_the_constant():
    assert weak_theta_warning({}) is None
    assert weak_theta_warning({"log_loss": 0.70, "log_loss_constant": 0.69}) is None  # chance
    assert weak_theta_warning({"log_loss": 0.81, "log_loss_constant": 0.70}) is None  # noise
    assert weak_theta_warning({"log_loss": float("nan"), "log_loss_constant": 0.69}) is None
    message = weak_theta_warning({"log_loss": 1.10, "log_loss_constant": 0.69})
    assert message is not None and "log-loss 1.100 against 0.690" in message


@pytest.mark.slow
def test_an_overfitted_theta_is_warned():
    """A wide net on 300 E rows that do not depend on x: θ̂ memorises E in its first epoch."""
    rng = np.random.default_rng(0)
    x, x_e = rng.normal(size=(2, 300, 8)).astype("float32")
    w, e = (rng.random(300) < 0.2).astype("float32"), (rng.random(300) < 0.5).astype("float32")

    def wide():
        return keras.Sequential([keras.Input((8,)), keras.layers.Dense(256, activation="relu"),
                                 keras.layers.Dense(256, activation="relu"), keras.layers.Dense(1)])

    with pytest.warns(UserWarning, match="worse than the constant exposure rate") as caught:
        fit = adp.fit_pue(wide, x, w, x_e, e, candidates=["bce_w", "brier"], epochs=1,
                          min_steps=300, batch_size=64, verbose=0)
    cal = fit.theta_calibration
    assert cal["log_loss"] > 1.5 * cal["log_loss_constant"]
    assert any(c.filename == __file__ for c in caught)  # at the caller's line
