"""Every validation and exposure entry point takes what the data builders take:
arrays, feature dicts and Datasets of rows — with the same numbers as arrays."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

import adpue_tf as adp
from adpue_tf import exposure, validation


@pytest.fixture(scope="module")
def s():
    return adp.synthetic.synthetic_pue(800, 800, seed=4)


def as_dict(x):
    return {"x": x.astype(np.float32)}


def as_rows(x, y):
    return tf.data.Dataset.from_tensor_slices((x.astype(np.float32), y))


def _p(model, x):
    return np.asarray(model.predict(x, verbose=0)).ravel()


def test_fit_exposure_model_dict_and_dataset_match_arrays(s):
    ref = _p(exposure.fit_exposure_model(s.x_e, s.e_e), s.x_e[:20])
    from_dict = exposure.fit_exposure_model(as_dict(s.x_e), s.e_e)
    np.testing.assert_allclose(_p(from_dict, as_dict(s.x_e[:20])), ref, rtol=1e-5)
    from_rows = exposure.fit_exposure_model(as_rows(s.x_e, s.e_e), None)
    np.testing.assert_allclose(_p(from_rows, s.x_e[:20]), ref, rtol=1e-5)


def test_fit_exposure_model_mixed_dict_and_strings(s):
    x = {"num": s.x_e[:, :1].astype(np.float32), "count": np.round(s.x_e[:, 1]).astype(np.int64)}
    model = exposure.fit_exposure_model(x, s.e_e)
    p = _p(model, {k: v[:5] for k, v in x.items()})
    assert p.shape == (5,) and np.all((p >= 0) & (p <= 1))
    with pytest.raises(TypeError, match=r"`x_e\['id'\]` holds .*logistic regression needs numbers"):
        exposure.fit_exposure_model({**x, "id": np.array(["a"] * 800)}, s.e_e)


def test_fit_ratio_model_dict_and_dataset_match_arrays(s):
    ref = _p(exposure.fit_ratio_model(s.x_pu, s.w_pu, s.x_e, s.e_e), s.x_pu[:20])
    got = exposure.fit_ratio_model(as_dict(s.x_pu), s.w_pu, as_dict(s.x_e), s.e_e)
    np.testing.assert_allclose(_p(got, as_dict(s.x_pu[:20])), ref, rtol=1e-5)
    rows = exposure.fit_ratio_model(as_rows(s.x_pu, s.w_pu), None, as_rows(s.x_e, s.e_e), None)
    np.testing.assert_allclose(_p(rows, s.x_pu[:20]), ref, rtol=1e-5)
    with pytest.raises(ValueError, match="`x_e` has features"):
        exposure.fit_ratio_model(as_dict(s.x_pu), s.w_pu, {"y": s.x_e}, s.e_e)


@pytest.mark.parametrize("criterion", ["exposure_likelihood", "reference_risk",
                                       "exposure_brier"])
def test_validation_score_dict_and_dataset_match_arrays(s, criterion):
    net = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    net.set_weights([s.y_weights.reshape(2, 1).astype(np.float32), np.zeros(1, np.float32)])
    inputs = {"x": keras.Input((2,), name="x")}
    dict_net = keras.Model(inputs, net(inputs["x"]))
    ref = adp.validation_score(net, s.x_pu, s.w_pu, s.x_e, s.e_e, criterion=criterion,
                               from_logits=True)
    got = adp.validation_score(dict_net, as_dict(s.x_pu), s.w_pu, as_dict(s.x_e), s.e_e,
                               criterion=criterion, from_logits=True)
    rows = adp.validation_score(net, as_rows(s.x_pu, s.w_pu), None, as_rows(s.x_e, s.e_e),
                                None, criterion=criterion, from_logits=True)
    assert got == pytest.approx(ref, rel=1e-5) and rows == pytest.approx(ref, rel=1e-5)


def test_exposure_brier_criterion_by_hand_and_prefers_the_truth(s):
    truth = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    truth.set_weights([s.y_weights.reshape(2, 1).astype(np.float32), np.zeros(1, np.float32)])
    score = adp.validation_score(truth, s.x_pu, s.w_pu, s.x_e, s.e_e,
                                 criterion="exposure_brier", from_logits=True)
    f_pu = 1 / (1 + np.exp(-(s.x_pu @ s.y_weights)))
    f_e = 1 / (1 + np.exp(-(s.x_e @ s.y_weights)))
    assert score == pytest.approx(np.mean(s.e_e * f_e ** 2) - 2 * np.mean(s.w_pu * f_pu),
                                  rel=1e-5)
    worse = [adp.validation_score(lambda x, k=k: k * truth(x), s.x_pu, s.w_pu, s.x_e, s.e_e,
                                  criterion="exposure_brier", from_logits=True)
             for k in (0.3, 3.0)]
    assert score < min(worse)
    with pytest.raises(ValueError, match="needs no yardstick"):
        adp.validation_score(truth, s.x_pu, s.w_pu, s.x_e, s.e_e, criterion="exposure_brier",
                             exposure_model=truth, from_logits=True)


def test_pue_validation_data_with_dicts_matches_arrays(s):
    theta = exposure.fit_exposure_model(s.x_e, s.e_e)
    ref = exposure.fit_ratio_model(s.x_pu, s.w_pu, s.x_e, s.e_e, exposure_model=theta)
    arrays = validation.pue_validation_data(s.x_pu, s.w_pu, s.x_e, s.e_e, batch_size=200)
    dicts = validation.pue_validation_data(as_dict(s.x_pu), s.w_pu, as_dict(s.x_e), s.e_e,
                                           batch_size=200)
    (xa, ya), (xd, yd) = next(iter(arrays)), next(iter(dicts))
    np.testing.assert_allclose(xd["x"].numpy(), xa.numpy())
    np.testing.assert_allclose(yd.numpy(), ya.numpy(), rtol=1e-5)
    assert ref is not None  # the default reference is fitted inside, on the same rows


def test_pue_validation_data_keeps_a_feature_named_like_an_internal_key(s):
    """No feature name is taken: ``__yardstick__`` is the user's, kept as under another name."""
    def feats(x, name):
        return {"x": x.astype(np.float32), name: np.arange(len(x), dtype=np.float32)[:, None]}

    out = {}
    for name in ("__yardstick__", "other"):
        ds = validation.pue_validation_data(feats(s.x_pu, name), s.w_pu, feats(s.x_e, name),
                                            s.e_e, batch_size=200)
        x, y = next(iter(ds))
        assert sorted(x) == sorted(["x", name])
        out[name] = (x["x"].numpy(), x[name].numpy(), y.numpy())
    for mine, other in zip(out["__yardstick__"], out["other"]):
        np.testing.assert_allclose(mine, other, rtol=1e-5)


@pytest.mark.parametrize("call", [
    lambda s, b: exposure.fit_exposure_model(b(s.x_e, s.e_e), None),
    lambda s, b: exposure.fit_ratio_model(b(s.x_pu, s.w_pu), None, s.x_e, s.e_e),
    lambda s, b: validation.pue_validation_data(s.x_pu, s.w_pu, b(s.x_e, s.e_e), None),
    lambda s, b: adp.validation_score(keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)]),
                                      b(s.x_pu, s.w_pu), None, s.x_e, s.e_e, from_logits=True),
], ids=["fit_exposure_model", "fit_ratio_model", "pue_validation_data", "validation_score"])
def test_a_batched_dataset_is_refused_by_name(s, call):
    def batched(x, y):
        return as_rows(x, y).batch(32)

    with pytest.raises(ValueError, match=r"`x_(pu|e)` must be a Dataset of unbatched rows, but "
                                         r"its (w|e) has shape \(None,\)"):
        call(s, batched)


def test_a_logit_exposure_model_is_told_to_end_in_a_sigmoid_not_to_pass_from_logits():
    """The validation-data builders and fit_ratio_model take no `from_logits`: not advised."""
    s = adp.synthetic.synthetic_pue(200, 200, seed=0)
    logit_theta = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    logit_theta.set_weights([np.array([[2.0], [-3.0]], "float32"), np.array([0.5], "float32")])
    for call in (lambda: adp.validation.pue_validation_data(s.x_pu, s.w_pu, s.x_e, s.e_e,
                                                            exposure_model=logit_theta),
                 lambda: adp.exposure.fit_ratio_model(s.x_pu, s.w_pu, s.x_e, s.e_e,
                                                      exposure_model=logit_theta)):
        with pytest.raises(ValueError, match="outputs logits. End the model with a sigmoid: "
                                             "`exposure_model` takes probabilities") as err:
            call()
        assert "from_logits" not in str(err.value)
