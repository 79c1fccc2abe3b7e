"""The README's training recipes run without warnings a user would worry about.

Keras 3.13+ warns "`shuffle=True` was passed, but will be ignored ..." on every
``fit`` over a ``tf.data.Dataset`` with the default ``shuffle=True``; the data
builders already shuffle (with their ``seed``). ``DebiasedModel.fit`` defaults
``shuffle`` to False over a Dataset; a plain Keras model needs ``shuffle=False``
(the README says so).
"""

from __future__ import annotations

import warnings

import keras
import pytest

import adpue_tf as adp


def _data():
    s = adp.synthetic.synthetic_pue(64, 64, dim=2, seed=0)
    return adp.data.pue_dataset(s.x_pu, s.w_pu, s.x_e, s.e_e, batch_size=32, seed=0)


def _net():
    return keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])


def _fit_warnings(model, ds, **fit_kwargs) -> list[str]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.fit(ds, epochs=1, verbose=0, **fit_kwargs)
    return [str(w.message) for w in caught]


def _shuffle_warnings(messages: list[str]) -> list[str]:
    return [m for m in messages if "shuffle" in m]


def _keras_warns_on_default_shuffle() -> bool:
    model = _net()
    model.compile(optimizer="adam", loss=adp.ADPUELoss(from_logits=True))
    return bool(_shuffle_warnings(_fit_warnings(model, _data())))


def test_debiased_model_fit_over_a_dataset_does_not_warn_about_shuffle():
    model = adp.DebiasedModel(_net())
    model.compile(optimizer="adam", loss=adp.ADPUELoss(from_logits=True))
    messages = _fit_warnings(model, _data(), callbacks=[adp.RefreshDagger(every_n_epochs=1)])
    assert _shuffle_warnings(messages) == []


def test_plain_model_with_shuffle_false_as_the_readme_says_does_not_warn():
    model = _net()
    model.compile(optimizer="adam", loss=adp.ADPUELoss(from_logits=True))
    assert _shuffle_warnings(_fit_warnings(model, _data(), shuffle=False)) == []


@pytest.mark.slow
def test_an_explicit_shuffle_reaches_keras():
    """DebiasedModel only changes the default: ``shuffle=True`` given by the user stays."""
    if not _keras_warns_on_default_shuffle():
        pytest.skip(f"Keras {keras.__version__} does not warn about shuffle for a Dataset")
    model = adp.DebiasedModel(_net())
    model.compile(optimizer="adam", loss=adp.ADPUELoss(from_logits=True))
    assert _shuffle_warnings(_fit_warnings(model, _data(), shuffle=True))
