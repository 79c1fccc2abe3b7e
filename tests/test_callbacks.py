"""RefreshDagger: the refresh schedule, one set of refreshes per fit, config, bad input."""

from __future__ import annotations

import keras
import numpy as np
import pytest

import adpue_tf as adp
from adpue_tf import synthetic

from serialization import assert_round_trip


def _net(seed=0, dim=2):
    keras.utils.set_random_seed(seed)
    return keras.Sequential([keras.Input((dim,)), keras.layers.Dense(1)])


@pytest.fixture(scope="module")
def pue():
    keras.utils.set_random_seed(0)
    s = synthetic.synthetic_pue(800, 800, seed=3)
    return adp.data.pue_dataset(s.x_pu, s.w_pu, s.x_e, s.e_e, batch_size=200, shuffle=False)


def _model(seed=4):
    model = adp.DebiasedModel(_net(seed))
    model.compile("sgd", loss=adp.ADPUELoss(from_logits=True))
    return model


@pytest.mark.parametrize("kwargs,epochs,expected", [
    ({}, 3, 3),
    ({"every_n_epochs": 1}, 3, 3),
    ({"every_n_epochs": 2}, 5, 2),
    ({"every_n_steps": 3}, 2, 5),   # 8 steps per epoch: after steps 3, 6, 9, 12, 15
    ({"every_n_steps": 1}, 2, 16),
])
def test_refresh_schedule(pue, kwargs, epochs, expected):
    model = _model()
    model.fit(pue, epochs=epochs, verbose=0, callbacks=[adp.RefreshDagger(**kwargs)])
    assert model.refreshes == expected


def _weights_after(pue, steps_per_execution, jit_compile=False, epochs=2, every=3):
    model = adp.DebiasedModel(_net(4), initial_dagger=0.3)
    model.compile(keras.optimizers.Adam(0.05), loss=adp.ADPUELoss(from_logits=True),
                  steps_per_execution=steps_per_execution, jit_compile=jit_compile)
    model.fit(pue, epochs=epochs, verbose=0,
              callbacks=[adp.RefreshDagger(every_n_steps=every)])
    return model, [w.numpy() for w in model.net.weights + model.snapshot.weights]


@pytest.fixture(scope="module")
def one_step_per_call(pue):
    return _weights_after(pue, 1)


@pytest.mark.parametrize("steps, jit", [(5, False), (16, False),
                                        pytest.param(4, True, marks=pytest.mark.slow)])
def test_a_step_period_is_exact_under_steps_per_execution(pue, one_step_per_call, steps, jit):
    """The step refreshes itself after every 3rd update (15 of 16 here), whatever number
    of steps one call runs: the same weights and snapshot as one step per call."""
    reference, expected = one_step_per_call
    model, got = _weights_after(pue, steps, jit)
    assert model.refreshes == reference.refreshes == 5  # after steps 3, 6, 9, 12, 15
    assert model.refresh_every_steps is None  # the step's own refresh ends with the fit
    for a, b in zip(got, expected):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    # the snapshot holds the weights after step 15, not the last ones (16)
    assert not np.allclose(got[0], got[len(got) // 2])


def test_a_step_period_refresh_without_the_callback_is_exact_too(pue):
    model = adp.DebiasedModel(_net(4), initial_dagger=0.3)
    model.compile("sgd", loss=adp.ADPUELoss(from_logits=True), steps_per_execution=8)
    model.start_alternate_learning()
    model.schedule_refresh(4)
    model.fit(pue, epochs=1, verbose=0)
    assert (model.refreshes, model.dagger_mode) == (2, adp.model.SNAPSHOT)
    model.schedule_refresh(None)
    model.fit(pue, epochs=1, verbose=0)
    assert model.refreshes == 2
    with pytest.raises(ValueError, match="`every_n_steps` must be"):
        model.schedule_refresh(0)


@pytest.mark.parametrize("kwargs,first,second", [
    ({"every_n_epochs": 1}, 3, 6),
    ({"every_n_epochs": 2}, 1, 2),   # each fit of 3 epochs refreshes after its 2nd
    ({"every_n_steps": 5}, 4, 9),    # steps are counted by the optimizer across fits
])
def test_every_fit_does_its_own_refreshes(pue, kwargs, first, second):
    """A second fit() used to refresh 0 times (Keras restarts epochs at 0)."""
    model = _model()
    model.fit(pue, epochs=3, verbose=0, callbacks=[adp.RefreshDagger(**kwargs)])
    assert model.refreshes == first
    model.fit(pue, epochs=3, verbose=0, callbacks=[adp.RefreshDagger(**kwargs)])
    assert model.refreshes == second


def test_initial_epoch_resumption_neither_repeats_nor_skips(pue):
    model = _model()
    callback = adp.RefreshDagger()
    model.fit(pue, epochs=2, verbose=0, callbacks=[callback])
    assert (model.refreshes, model.refresh_epoch) == (2, 2)
    model.fit(pue, epochs=4, initial_epoch=2, verbose=0, callbacks=[callback])
    assert (model.refreshes, model.refresh_epoch) == (4, 4)


def test_resume_catches_up_a_refresh_saved_before_it_happened(pue):
    """The state BackupAndRestore saves when it runs before RefreshDagger at an epoch end."""
    model = _model()
    model.fit(pue, epochs=2, verbose=0, callbacks=[adp.RefreshDagger()])
    model.set_refresh_epoch(1)  # as if the backup of epoch 2 preceded its refresh
    model.fit(pue, epochs=3, initial_epoch=2, verbose=0, callbacks=[adp.RefreshDagger()])
    # one catch-up refresh at the start of epoch 3 (index 2), one after it
    assert (model.refreshes, model.refresh_epoch) == (4, 3)


def test_refresh_epoch_is_public_and_checked():
    model = _model()
    assert model.refresh_epoch == 0
    model.set_refresh_epoch(3)
    assert model.refresh_epoch == 3
    with pytest.raises(ValueError, match="epoch"):
        model.set_refresh_epoch(-1)
    with pytest.raises(TypeError, match="epoch"):
        model.set_refresh_epoch(1.5)


@pytest.mark.slow
def test_alternate_learning_recovers_p():
    """Algorithm 1 with T = 25 rounds, one epoch each, on data with known truth.

    Direct minimisation reaches a MAE of about 0.039 on this sample (finite-sample
    error); alternate learning must do as well.
    """
    keras.utils.set_random_seed(0)
    s = synthetic.synthetic_pue(20_000, 20_000, seed=5)
    ds = adp.data.pue_dataset(s.x_pu, s.w_pu, s.x_e, s.e_e, batch_size=2000, seed=0)
    model = adp.DebiasedModel(_net(5), initial_dagger=0.5)
    model.compile(keras.optimizers.Adam(0.05), loss=adp.ADPUELoss(from_logits=True))
    model.fit(ds, epochs=25, verbose=0, shuffle=False, callbacks=[adp.RefreshDagger()])
    assert model.refreshes == 25
    test = synthetic.make_synthetic(20_000, seed=99)
    f = 1 / (1 + np.exp(-model.predict(test.x, batch_size=8192, verbose=0).reshape(-1)))
    mae = float(np.mean(np.abs(f - test.p_y)))
    print(f"\nalternate learning, T=25: MAE to p(y=1|x) {mae:.4f}")
    assert mae < 0.045


def test_config_round_trips():
    for callback in (adp.RefreshDagger(), adp.RefreshDagger(every_n_epochs=3),
                     adp.RefreshDagger(every_n_steps=10)):
        revived = assert_round_trip(callback)
        assert (revived.every_n_epochs, revived.every_n_steps) == (
            callback.every_n_epochs, callback.every_n_steps)
    assert adp.RefreshDagger().get_config() == {"every_n_epochs": 1, "every_n_steps": None}


# -- bad input -----------------------------------------------------------------

@pytest.mark.parametrize("kwargs,err,match", [
    ({"every_n_epochs": 0}, ValueError, "every_n_epochs"),
    ({"every_n_steps": 0}, ValueError, "every_n_steps"),
    ({"every_n_epochs": 1.5}, TypeError, "every_n_epochs"),
    ({"every_n_steps": True}, TypeError, "every_n_steps"),
    ({"every_n_epochs": 2, "every_n_steps": 3}, ValueError, "not both"),
    ({"every_n_epochs": 1, "every_n_steps": 5}, ValueError, "not both"),
])
def test_bad_refresh_period(kwargs, err, match):
    with pytest.raises(err, match=match):
        adp.RefreshDagger(**kwargs)


def test_loss_that_cannot_use_the_snapshot(pue):
    model = adp.DebiasedModel(_net(0))
    model.compile("sgd", loss=adp.LogitLoss(from_logits=True))
    with pytest.raises(ValueError, match="does not use f"):
        model.fit(pue, epochs=1, verbose=0, callbacks=[adp.RefreshDagger()])


def test_refresh_on_a_plain_model(pue):
    plain = _net(0)
    plain.compile("sgd", loss=adp.ADPUELoss(from_logits=True))
    with pytest.raises(TypeError, match="DebiasedModel"):
        plain.fit(pue, epochs=1, verbose=0, callbacks=[adp.RefreshDagger()])


def test_steps_per_execution_auto_is_one_on_a_cpu_and_more_on_an_accelerator(monkeypatch):
    from adpue_tf import model as model_module

    model = _model()
    assert model.steps_per_execution == 1  # this machine computes on its CPU
    monkeypatch.setattr(model_module, "accelerated", lambda: True)
    model.compile("sgd", loss=adp.ADPUELoss(from_logits=True))
    assert model.steps_per_execution == model_module.ACCELERATOR_STEPS == 32
    model.compile("sgd", loss=adp.ADPUELoss(from_logits=True), steps_per_execution=3)
    assert model.steps_per_execution == 3
    with pytest.raises(TypeError, match="`steps_per_execution` must be 'auto' or an int"):
        model.compile("sgd", loss=adp.ADPUELoss(from_logits=True), steps_per_execution="fast")
    with pytest.raises(ValueError, match="`steps_per_execution` must be at least 1"):
        model.compile("sgd", loss=adp.ADPUELoss(from_logits=True), steps_per_execution=0)
