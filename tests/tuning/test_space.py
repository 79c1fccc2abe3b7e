"""tuning: the search space written in build/fit, its defaults, and narrowing it the KerasTuner way."""

from __future__ import annotations

import keras
import keras_tuner
import pytest

import adpue_tf as adp
from adpue_tf.tuning import DebiasedHyperModel

LRS = [1e-3, 3e-3, 1e-2, 3e-2]
WDS = [0.0, 1e-3, 1e-2, 1e-1]
ALPHAS = [0.0, 0.25, 0.5, 0.75, 1.0]
BETAS = [0.0, 0.01, 0.1]
GAMMAS = [0.0, 0.5, 1.0]


def _space(hp: keras_tuner.HyperParameters) -> dict:
    return {p.name: list(p.values) for p in hp.space}


def _built(hm: DebiasedHyperModel, hp: keras_tuner.HyperParameters | None = None):
    hp = keras_tuner.HyperParameters() if hp is None else hp
    hm.build(hp)
    return hp


def test_the_pinned_values_and_defaults():
    """The space that tuning results were searched over: every entry build can declare."""
    hp = _built(DebiasedHyperModel(loss="ad3se", input_shape=(2,)))
    assert {p.name: (list(p.values), p.default) for p in hp.space} == {
        "learning_rate": (LRS, 1e-3), "weight_decay": (WDS, 0.0), "alpha": (ALPHAS, 0.5),
        "beta": (BETAS, 0.0), "gamma": (GAMMAS, 0.0)}


def test_space_adpue_default():
    hp = _built(DebiasedHyperModel(input_shape=(2,)))
    assert hp.values == {"learning_rate": 1e-3, "weight_decay": 0.0, "beta": 0.0, "gamma": 0.0}
    assert _space(hp) == {"learning_rate": LRS, "weight_decay": WDS, "beta": BETAS,
                          "gamma": GAMMAS}


def test_space_per_loss():
    hp = _built(DebiasedHyperModel(loss="double_adss", input_shape=(2,)))
    assert _space(hp) == {"learning_rate": LRS, "weight_decay": WDS, "alpha": ALPHAS}
    assert hp.values == {"learning_rate": 1e-3, "weight_decay": 0.0, "alpha": 0.5}
    hp = _built(DebiasedHyperModel(loss="ad3se", input_shape=(2,)))
    assert set(hp.values) == {"learning_rate", "weight_decay", "alpha", "beta", "gamma"}
    hp = _built(DebiasedHyperModel(loss="ads", input_shape=(2,)))
    assert set(hp.values) == {"learning_rate", "weight_decay"}
    hp = _built(DebiasedHyperModel(loss="adpe", prior=0.3, input_shape=(2,)))
    assert hp.values == {"learning_rate": 1e-3, "weight_decay": 0.0, "beta": 0.0, "gamma": 0.0,
                         "prior": 0.3}
    prior = next(p for p in hp.space if p.name == "prior")
    assert type(prior).__name__ == "Fixed"  # the reference prior is not tuned by default
    # the correction turned off: no beta/gamma to tune
    hp = _built(DebiasedHyperModel(input_shape=(2,), loss_options={"non_negative": False}))
    assert set(hp.values) == {"learning_rate", "weight_decay"}


def test_build_net_adds_its_own_entries():
    def net(hp):
        units = hp.Int("units", 2, 8, step=2)
        return keras.Sequential([keras.Input((3,)), keras.layers.Dense(units, "relu"),
                                 keras.layers.Dense(1)])

    hm = DebiasedHyperModel(build_net=net, loss="adss", alternate=True)
    hp = keras_tuner.HyperParameters()
    assert isinstance(hm.build(hp), adp.DebiasedModel)
    assert hp.values == {"learning_rate": 1e-3, "weight_decay": 0.0, "units": 2}


def test_narrowing_through_hyperparameters():
    hp = keras_tuner.HyperParameters()
    hp.Choice("learning_rate", [0.01, 0.1])
    hp.Choice("prior", [0.2, 0.3, 0.4], default=0.3)
    hp.Fixed("gamma", 1.0)
    hm = DebiasedHyperModel(loss="adpe", prior=0.3, input_shape=(2,))
    model = hm.build(hp)
    assert hp.values == {"learning_rate": 0.01, "prior": 0.3, "gamma": 1.0,
                         "weight_decay": 0.0, "beta": 0.0}
    assert _space(hp)["learning_rate"] == [0.01, 0.1]  # the user's entry, not the default one
    assert float(model.optimizer.learning_rate) == pytest.approx(0.01)
    assert model.loss.get_config()["gamma"] == 1.0
    hp = keras_tuner.HyperParameters()
    hp.Float("prior", 0.1, 0.5, default=0.25)
    assert hm.make_loss(hp).get_config()["prior"] == 0.25


def test_make_loss_reads_the_trial_values():
    hm = DebiasedHyperModel(loss="ad3se", input_shape=(2,))
    hp = keras_tuner.HyperParameters()
    hp.Fixed("alpha", 0.25)
    hp.Fixed("beta", 0.1)
    hp.Fixed("gamma", 1.0)
    cfg = hm.make_loss(hp).get_config()
    assert (cfg["alpha"], cfg["beta"], cfg["gamma"], cfg["from_logits"]) == (0.25, 0.1, 1.0, True)
    assert hm.make_loss(keras_tuner.HyperParameters()).get_config()["gamma"] is None  # 0.0


def test_weight_decay_reaches_adam():
    hp = keras_tuner.HyperParameters()
    hp.Fixed("weight_decay", 0.01)
    model = DebiasedHyperModel(input_shape=(2,)).build(hp)
    assert float(model.optimizer.weight_decay) == pytest.approx(0.01)
    assert DebiasedHyperModel(input_shape=(2,)).build(
        keras_tuner.HyperParameters()).optimizer.weight_decay is None  # 0.0: none


@pytest.mark.parametrize("name, value, loss, allowed", [
    ("learning_rate", 0.0, "adpue", "> 0"),
    ("learning_rate", "fast", "adpue", "> 0"),
    ("weight_decay", -0.1, "adpue", ">= 0"),
    ("alpha", 1.5, "double_adss", r"in \[0, 1\]"),
    ("beta", -0.01, "adpue", ">= 0"),
    ("gamma", 1.5, "adpue", r"in \[0, 1\]"),
    ("prior", 1.0, "adpe", r"in \(0, 1\)"),
])
def test_a_narrowed_value_out_of_bounds_stops_the_search(name, value, loss, allowed):
    hp = keras_tuner.HyperParameters()
    hp.Fixed(name, value)
    hm = DebiasedHyperModel(loss=loss, prior=0.3 if loss == "adpe" else None, input_shape=(2,))
    with pytest.raises(keras_tuner.errors.FatalValueError, match=f"`{name}` must be {allowed}"):
        hm.build(hp)


def test_a_refresh_period_below_one_stops_the_search():
    hm = DebiasedHyperModel(input_shape=(2,), alternate=True)
    hp = keras_tuner.HyperParameters()
    hp.Fixed("refresh_every", 0)
    model = hm.build(hp)
    x = keras.ops.zeros((4, 2))
    y = keras.ops.zeros((4, 4))
    with pytest.raises(keras_tuner.errors.FatalValueError, match="`refresh_every` must be"):
        hm.fit(hp, model, x, y, validation_data=(x, y), epochs=1, verbose=0)


def test_untunable_hypermodel_leaves_the_space_alone():
    hp = keras_tuner.HyperParameters()
    DebiasedHyperModel(input_shape=(2,), tunable=False).build(hp)
    assert hp.space == []  # KerasTuner's tunable=False: built on a copy, defaults used
