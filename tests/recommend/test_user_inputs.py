"""fit_pue on what users write: fixed net names, large seeds, probability outputs, labels W = E·Y
cannot give, float ids, masked arrays, huge features; and models of another input form given
as ``exposure_model``. Each case failed (or was silent) before its fix."""

from __future__ import annotations

import warnings

import keras
import numpy as np
import pytest

import adpue_tf as adp
from adpue_tf.recommend.candidates import CANDIDATES, net_seed

FAST = dict(epochs=1, min_steps=4, batch_size=128, verbose=0)
SOME = ["bce_w", "brier", "likelihood", "blend"]


@pytest.fixture(scope="module")
def data():
    return adp.synthetic.synthetic_pue(500, 500, seed=0)


def linear(**kwargs):
    return lambda: keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)], **kwargs)


def _fit(data, build=None, **changes):
    args = dict(x_pu=data.x_pu, w=data.w_pu, x_e=data.x_e, e=data.e_e)
    options = dict(FAST, candidates=["bce_w", "brier", "likelihood"])
    for k, v in changes.items():
        (args if k in args else options)[k] = v
    return adp.fit_pue(build or linear(), args["x_pu"], args["w"], args["x_e"], args["e"],
                       **options)


# -- nets with a fixed name ---------------------------------------------------------------
def test_a_net_with_a_fixed_name_trains_in_the_joint_pass_and_in_the_blend(data, tmp_path):
    fit = _fit(data, linear(name="net"), candidates=SOME)
    assert set(fit.scores) == set(SOME)
    blend = fit.candidates["blend"]  # four nets of one name meet in one model
    names = [layer.name for layer in blend.layers if isinstance(layer, keras.Model)]
    assert len(names) == len(set(names)) >= 3
    path = str(tmp_path / "blend.keras")
    blend.save(path)
    again = keras.models.load_model(path, safe_mode=False)
    np.testing.assert_allclose(again.predict(data.x_pu[:8], verbose=0),
                               blend.predict(data.x_pu[:8], verbose=0), rtol=1e-6, atol=1e-6)


def test_a_mapping_of_nets_with_one_fixed_name(data):
    fit = _fit(data, {"a": linear(name="net"), "b": linear(name="net")})
    assert fit.net in ("a", "b") and set(fit.net_scores) == {"a", "b"}


def test_distinct_names_renames_only_repeats():
    from adpue_tf.recommend.compose import distinct_names

    nets = [linear(name="n")() for _ in range(3)] + [linear(name="other")()]
    distinct_names(nets)
    assert nets[0].name == "n" and nets[3].name == "other"
    assert len({n.name for n in nets}) == 4


# -- seeds of any size --------------------------------------------------------------------
def test_net_seed_takes_any_seed_and_keeps_small_ones():
    """``1009·seed + h(name)`` modulo 2**32, ``h`` 32 bits of BLAKE2b of the name."""
    import hashlib

    def h(name):
        return int.from_bytes(hashlib.blake2b(name.encode(), digest_size=4).digest(), "little")

    assert net_seed(0, "theta") == h("theta")
    assert net_seed(3, "bce_w") == (3 * 1009 + h("bce_w")) % 2**32
    # from the name, not a position: every net of a stage has its own seed
    assert len({net_seed(0, n) for n in ("theta", *CANDIDATES)}) == len(CANDIDATES) + 1
    for seed in (20240601, 2**32 - 1, 2**40, 2**63 + 5):
        assert 0 <= net_seed(seed, "blend") < 2**32
    seeds = [net_seed(s, "bce_w") for s in range(4_000_000, 4_400_000, 997)]
    assert len(set(seeds)) == len(seeds)  # one-to-one below 2**32 (1009 is odd)
    # seeds 2**32 apart do not meet (hashed above 2**32)
    for s in (0, 5, 2**40):
        assert net_seed(s, "bce_w") != net_seed(s + 2**32, "bce_w")
    assert net_seed(0, "theta") != net_seed(2**64, "theta")


@pytest.mark.parametrize("seed", [pytest.param(20240601, marks=pytest.mark.slow), 2**40])
def test_fit_pue_takes_a_date_or_a_huge_seed(data, seed):
    a = _fit(data, seed=seed, candidates=["bce_w"])  # one net: the seed reaches every net alike
    b = _fit(data, seed=seed, candidates=["bce_w"])
    assert a.choice == b.choice
    np.testing.assert_array_equal(a.model.predict(data.x_pu[:16], verbose=0),
                                  b.model.predict(data.x_pu[:16], verbose=0))
    other = _fit(data, seed=seed + 2**32, candidates=["bce_w"])  # another seed, another model
    assert not np.array_equal(other.model.predict(data.x_pu[:16], verbose=0),
                              a.model.predict(data.x_pu[:16], verbose=0))


# -- nets that output probabilities -------------------------------------------------------
def _ops_sigmoid():
    x = keras.Input((2,))
    return keras.Model(x, keras.ops.sigmoid(keras.layers.Dense(1)(x)))


def _clip():
    x = keras.Input((2,))
    return keras.Model(x, keras.ops.clip(keras.layers.Dense(1)(x), 0.0, 1.0))


PROBABILITY_NETS = {
    "ops.sigmoid": _ops_sigmoid,
    "hard_sigmoid": lambda: keras.Sequential([keras.Input((2,)),
                                              keras.layers.Dense(1, "hard_sigmoid")]),
    "Activation layer": lambda: keras.Sequential([keras.Input((2,)), keras.layers.Dense(4),
                                                  keras.layers.Dense(1),
                                                  keras.layers.Activation("sigmoid")]),
    "Dense sigmoid": lambda: keras.Sequential([keras.Input((2,)), keras.layers.Dense(1, "sigmoid")]),
    "clip to [0, 1]": _clip,
}


@pytest.mark.parametrize("name", sorted(PROBABILITY_NETS))
def test_a_net_that_outputs_probabilities_is_refused(data, name):
    with pytest.raises(ValueError, match=r"must output a logit, but its model( ends with a "
                                         r"\w*sigmoid activation|'s outputs stay in \[0, 1\] "
                                         r"whatever its weights)"):
        _fit(data, PROBABILITY_NETS[name])


def _tanh_logit():
    x = keras.Input((2,))
    return keras.Model(x, 8.0 * keras.layers.Dense(1, "tanh")(x))


LOGIT_NETS = {
    "leaky relu logit": lambda: keras.Sequential([keras.Input((2,)),
                                                  keras.layers.Dense(1, "leaky_relu")]),
    "scaled tanh": _tanh_logit,
    "mlp": lambda: keras.Sequential([keras.Input((2,)), keras.layers.Dense(8, "sigmoid"),
                                     keras.layers.Dense(1)]),
}


@pytest.mark.parametrize("name", sorted(LOGIT_NETS))
def test_a_logit_net_is_not_mistaken_for_probabilities(data, name):
    from adpue_tf.data.rows import as_rows
    from adpue_tf.recommend.inputs import check_logit

    net = LOGIT_NETS[name]()
    before = [v.numpy().copy() for v in net.weights]
    check_logit(net, as_rows("x_pu", data.x_pu, "w", data.w_pu))
    for old, v in zip(before, net.weights):  # the weights are put back
        np.testing.assert_array_equal(old, v.numpy())


BOUNDED_NETS = {
    "Dense relu": (lambda: keras.Sequential([keras.Input((2,)), keras.layers.Dense(1, "relu")]),
                   "relu"),
    "ReLU layer": (lambda: keras.Sequential([keras.Input((2,)), keras.layers.Dense(1),
                                             keras.layers.ReLU()]), "relu"),
    "Activation tanh": (lambda: keras.Sequential([keras.Input((2,)), keras.layers.Dense(1),
                                                  keras.layers.Activation("tanh")]), "tanh"),
    "functional softplus": (lambda: (lambda x: keras.Model(
        x, keras.layers.Dense(1, "softplus")(keras.layers.Dense(4)(x))))(keras.Input((2,))),
        "softplus"),
}


@pytest.mark.parametrize("name", sorted(BOUNDED_NETS))
def test_a_net_whose_logit_is_bounded_is_refused_by_name(data, name):
    """A ReLU ending gives p >= 0.5 on every row; tanh p in [0.27, 0.73]: no logit."""
    build, act = BOUNDED_NETS[name]
    with pytest.raises(ValueError, match=f"must output a logit, unbounded, but its model ends "
                                         f"with a {act} activation"):
        _fit(data, build)


def test_a_frozen_net_is_refused(data):
    def frozen():
        net = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
        net.trainable = False
        return net

    with pytest.raises(ValueError, match=r"`build_net\(\)` returned a model with no trainable "
                                         "weights"):
        _fit(data, frozen)


def test_a_net_that_outputs_nan_is_refused_before_any_warning(data):
    def nan_net():
        x = keras.Input((2,))
        return keras.Model(x, keras.layers.Dense(1)(keras.ops.log(x - 1e6)))

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no misleading scale hint first
        with pytest.raises(ValueError, match=r"model outputs NaN or inf on \d+ of the first"):
            _fit(data, nan_net)


# -- labels that W = E·Y cannot give -------------------------------------------------------
def test_more_positives_than_exposures_is_refused_with_the_numbers(data):
    rng = np.random.default_rng(0)
    w = (rng.random(500) < 0.9).astype(float)
    e = (rng.random(500) < 0.2).astype(float)
    with pytest.raises(ValueError, match=r"`w` has more observed positives \(mean 0\.\d+ over "
                                         r"500 rows\) than the exposure log has exposed rows "
                                         r"\(`e`: mean 0\.\d+ over 500 rows\)"):
        _fit(data, w=w, e=e)


def test_w_all_ones_is_refused(data):
    with pytest.raises(ValueError, match="`w` is 1 on all 500 rows"):
        _fit(data, w=np.ones(500))


def test_swapped_logs_at_a_small_gap_are_accepted(data):
    # mean(w) a little above mean(e) by chance (well within 4 SE) is no contradiction
    from adpue_tf.data.rows import Rows
    from adpue_tf.recommend.inputs import check_labels

    w = np.r_[np.ones(110), np.zeros(390)]
    e = np.r_[np.ones(100), np.zeros(400)]
    check_labels(Rows(data.x_pu, w), Rows(data.x_e, e), 1)


def test_positives_where_the_log_never_exposes_are_warned_about():
    s = adp.synthetic.synthetic_pue(2000, 2000, dim=3, seed=0)
    rng = np.random.default_rng(0)
    e = np.where(s.x_e[:, 0] > 0, 0.0, s.e_e)  # the exposure log never shows x0 > 0 ...
    w = np.where(s.x_pu[:, 0] > 0, rng.random(2000) < 0.5, 0).astype(float)  # ... W = 1 there
    build = lambda: keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])  # noqa: E731
    with pytest.warns(UserWarning, match=r"W = 1 on \d+ held-out PU rows where θ̂ < 0.05; "
                                         r"W = E·Y allows about [\d.]+ there"):
        adp.fit_pue(build, s.x_pu, w, s.x_e, e, epochs=8, verbose=0,
                    candidates=["bce_w", "brier", "likelihood"])


def test_the_contradiction_warning_keeps_quiet_on_a_consistent_log():
    from adpue_tf.recommend.overlap import unexposed_positives_warning

    rng = np.random.default_rng(1)
    theta = rng.uniform(0.0, 0.1, 20_000)  # many barely exposed rows
    w = (rng.random(20_000) < theta * rng.uniform(0, 1, 20_000)).astype(float)
    assert unexposed_positives_warning(w, theta) is None
    assert unexposed_positives_warning(np.ones(40), np.full(40, 0.01)) is not None


# -- ids, masked arrays, huge features -------------------------------------------------------
def _id_net():
    u = keras.Input((1,), dtype="int64", name="user")
    f = keras.Input((2,), name="f")
    z = keras.layers.Concatenate()([keras.layers.Flatten()(keras.layers.Embedding(10, 2)(u)), f])
    return keras.Model({"user": u, "f": f}, keras.layers.Dense(1)(z))


def test_float_ids_with_fractions_are_refused_by_feature(data):
    rng = np.random.default_rng(0)
    x_pu = {"user": rng.integers(0, 9, 500) + 0.5, "f": data.x_pu}
    x_e = {"user": rng.integers(0, 9, 500) + 0.5, "f": data.x_e}
    with pytest.raises(TypeError, match=r"feature 'user' of `x_pu` holds 500 non-integer "
                                        r"value\(s\) \(e.g. \d\.5\), but `build_net\(\)`'s "
                                        r"model takes int64 there"):
        _fit(data, _id_net, x_pu=x_pu, x_e=x_e)


def test_whole_float_ids_train(data):
    rng = np.random.default_rng(0)
    x_pu = {"user": rng.integers(0, 9, 500).astype(float), "f": data.x_pu}
    x_e = {"user": rng.integers(0, 9, 500).astype(float), "f": data.x_e}
    assert _fit(data, _id_net, x_pu=x_pu, x_e=x_e).model is not None


@pytest.mark.parametrize("arg", ["x_pu", "w", "x_e", "e"])
def test_a_masked_entry_is_refused_by_name(data, arg):
    value = {"x_pu": data.x_pu, "w": data.w_pu, "x_e": data.x_e, "e": data.e_e}[arg]
    masked = np.ma.masked_array(value, mask=np.zeros(np.shape(value), bool))
    masked.mask.flat[3] = True
    with pytest.raises(ValueError, match=f"`{arg}` is a masked array with 1 masked entry"):
        _fit(data, **{arg: masked})


def test_a_masked_array_with_nothing_masked_is_its_data(data):
    from adpue_tf.data.rows import as_rows

    x = np.ma.masked_array(data.x_pu, mask=False)
    np.testing.assert_array_equal(as_rows("x_pu", x, "w", data.w_pu).x,
                                  data.x_pu.astype(np.float32))


def test_features_near_float32s_limit_end_in_the_divergence_message(data):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the scale hint
        with pytest.raises(ValueError, match="Every candidate diverged"):
            _fit(data, x_pu=data.x_pu * 1e30, x_e=data.x_e * 1e30)


def test_fit_exposure_model_names_values_beyond_float32(data):
    x = data.x_e.astype(np.float64) * 1e300
    with pytest.raises(ValueError, match=r"`x_e` holds [\d.e+]+, beyond the float32 range"):
        adp.exposure.fit_exposure_model(x, data.e_e)


def test_array_only_entry_points_say_a_dict_must_be_stacked(data):
    with pytest.raises(TypeError, match=r"`x` must be one array of features \(n, ...\) here, "
                                        r"got a dict of features \['a'\]; stack them"):
        adp.exposure.fit_logistic({"a": data.x_e}, data.e_e)
    with pytest.raises(TypeError, match=r"`x_e` must be one array of features \(n, ...\) "
                                        r"here, got a dict of features \['a'\]"):
        adp.validation.pe_validation_data(data.x_pu, {"a": data.x_e}, data.e_e,
                                          reference=lambda x: np.full(len(x), 0.5))


# -- an exposure model of another input form ----------------------------------------------------
def _dict_rows(x):
    return {"a": x[:, :1], "b": x[:, 1:]}


def _dict_net():
    a, b = keras.Input((1,), name="a"), keras.Input((1,), name="b")
    return keras.Model({"a": a, "b": b}, keras.layers.Dense(1)(keras.layers.Concatenate()([a, b])))


def test_a_feature_no_net_takes_is_left_out_with_one_warning(data):
    extra = lambda x: {**_dict_rows(x), "extra": np.ones((len(x), 3), "float32")}  # noqa: E731
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        fit = _fit(data, _dict_net, x_pu=extra(data.x_pu), x_e=extra(data.x_e))
    ours = [str(w.message) for w in seen if "no net of `build_net` takes" in str(w.message)]
    assert len(ours) == 1 and "['extra']" in ours[0]
    assert not [w for w in seen if "structure" in str(w.message)]  # Keras's, once a batch
    assert fit.model.output_shape == (None, 1)


def test_a_list_of_input_arrays_is_named(data):
    with pytest.raises(TypeError, match=r"`x_pu` is a list of 2 arrays of 500 rows each"):
        _fit(data, x_pu=[data.x_pu[:, :1], data.x_pu[:, 1:]])


def test_an_array_exposure_model_on_dict_features_is_named(data):
    theta = adp.exposure.fit_exposure_model(data.x_e, data.e_e)
    x_pu, x_e = _dict_rows(data.x_pu), _dict_rows(data.x_e)
    match = r"`exposure_model` takes one array of features \(rows of shape \(2,\)\), but "
    with pytest.raises(ValueError, match=match + "the features are a dict"):
        adp.validation.validation_score(_dict_net(), x_pu, data.w_pu, x_e, data.e_e,
                                        exposure_model=theta, from_logits=True)
    with pytest.raises(ValueError, match=match + "the features are a dict"):
        adp.validation.pue_validation_data(x_pu, data.w_pu, x_e, data.e_e, exposure_model=theta)
    ds = adp.data.pue_dataset(x_pu, data.w_pu, x_e, data.e_e, batch_size=64)
    with pytest.raises(ValueError, match=match + "the dataset's features are a dict"):
        adp.data.with_propensity(ds, theta)


def test_a_dict_exposure_model_on_array_features_is_named(data):
    theta = adp.exposure.fit_exposure_model(_dict_rows(data.x_e), data.e_e)
    with pytest.raises(ValueError, match=r"`exposure_model` takes a dict of features "
                                         r"\['a', 'b'\], but the features are one array"):
        adp.validation.validation_score(linear()(), data.x_pu, data.w_pu, data.x_e, data.e_e,
                                        exposure_model=theta, from_logits=True)


# -- found by the audit: softmax over one unit, one log out of scale, tiny logs -------------------
def test_a_net_of_one_value_whatever_its_weights_is_refused(data):
    with pytest.raises(ValueError, match="must output a logit, but its model ends with a softmax"):
        _fit(data, lambda: keras.Sequential([keras.Input((2,)), keras.layers.Dense(1, "softmax")]))
    x = keras.Input((2,))
    one = keras.Model(x, keras.ops.softmax(keras.layers.Dense(1)(x), axis=-1))
    from adpue_tf._internal.convention import squashes

    assert squashes(one, data.x_pu[:16]) == "constant"


def test_the_exposure_log_alone_out_of_scale_is_warned_about(data):
    with pytest.warns(UserWarning, match="logits of median .* on `x_e` .* far from standardised"):
        _fit(data, x_e=data.x_e * 1e30)


def test_a_feature_spread_wider_in_one_log_is_warned_about():
    from adpue_tf.data.rows import Rows
    from adpue_tf.recommend.inputs import shift_hint

    s = adp.synthetic.synthetic_pue(2000, 2000, dim=3, seed=0)
    x_e = s.x_e.copy()
    x_e[:, 2] *= 3.0  # same mean, three times the spread
    hint = shift_hint(Rows(s.x_pu, s.w_pu), Rows(x_e, s.e_e))
    assert hint is not None and "column 2 (one log's SD 3" in hint


def test_columns_almost_always_one_value_are_not_flagged_by_chance():
    """An image's corner pixel, a rare one-hot: spreads of two halves of one sample differ
    by chance by far more than twice (Fashion-MNIST's halves were flagged); the spread's own
    standard error says so. Such a column is still flagged when one log alone holds it."""
    from adpue_tf.data.rows import Rows
    from adpue_tf.recommend.inputs import shift_hint

    rng = np.random.default_rng(0)
    n = 10_000
    x = rng.normal(size=(2 * n, 4))
    x[:, 1] = np.where(rng.random(2 * n) < 5e-4, rng.uniform(0.1, 1.0, 2 * n), 0.0)
    x[:, 2] = (rng.random(2 * n) < 2e-3) * 255.0  # a rare bright pixel
    x[:, 3] = 0.0
    x[:3, 3] = [0.2, 0.9, 0.4]  # three rows of one log: its SD "inf x" the other's
    a, b = x[:n], x[n:]
    ratios = [np.sqrt(max(a[:, j].var(), b[:, j].var()) / min(a[:, j].var(), b[:, j].var()))
              for j in (1, 2)]
    assert max(ratios) > 2.0  # the plain ratio would flag these halves
    assert shift_hint(Rows(a, np.zeros(n)), Rows(b, np.zeros(n))) is None
    b = b.copy()
    b[:, 1] = 0.0
    a = a.copy()
    a[:200, 1] = rng.uniform(0.1, 1.0, 200)  # 200 rows of one log, none in the other
    hint = shift_hint(Rows(a, np.zeros(n)), Rows(b, np.zeros(n)))
    assert hint is not None and "column 1" in hint


@pytest.mark.parametrize("arg", ["x_pu", "x_e"])
def test_too_few_held_out_rows_are_refused(data, arg):
    rows = {"x_pu": (data.x_pu[:20], data.w_pu[:20]), "x_e": (data.x_e[:20], data.e_e[:20])}
    x, y = rows[arg]
    y = y.copy()
    y[:2] = 1.0
    y[2] = 0.0
    change = {arg: x, "w" if arg == "x_pu" else "e": y}
    with pytest.raises(ValueError, match=fr"on 4 held-out row\(s\) of `{arg}` \(20 rows, "
                                         r"`validation_split`=0.2\); it needs at least 5"):
        _fit(data, **change)


# -- the same rule where logits are expected elsewhere ---------------------------------------
def _hard_sigmoid_net():
    x = keras.Input((2,))
    return keras.Model(x, keras.ops.hard_sigmoid(keras.layers.Dense(1)(x)))


def test_a_squashed_net_is_refused_where_logits_are_expected(data, tmp_path):
    with pytest.raises(ValueError, match="`net` outputs probabilities: its outputs stay in "
                                         r"\[0, 1\] whatever its weights"):
        adp.DebiasedModel(_hard_sigmoid_net()).compile(loss=adp.ADPUELoss(from_logits=True))
    with pytest.raises(ValueError, match="outputs probabilities: its outputs stay in"):
        adp.export_for_serving(_hard_sigmoid_net(), str(tmp_path / "1"), from_logits=True)
    assert not (tmp_path / "1").exists()
    ds = adp.data.pue_dataset(data.x_pu, data.w_pu, data.x_e, data.e_e, batch_size=64)
    with pytest.raises(ValueError, match="`exposure_model` outputs probabilities: its outputs"):
        adp.data.with_propensity(ds, _hard_sigmoid_net(), from_logits=True)
    # a logit net passes, untouched by the check
    net = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    before = [w.copy() for w in net.get_weights()]
    adp.DebiasedModel(net).compile(loss=adp.ADPUELoss(from_logits=True))
    for a, b in zip(before, net.get_weights()):
        np.testing.assert_array_equal(a, b)


def test_masked_warmup_rows_are_refused(tmp_path):
    net = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    rows = np.ma.masked_array(np.zeros((3, 2), np.float32), mask=[[0, 1], [0, 0], [0, 0]])
    with pytest.raises(ValueError, match="`warmup_rows` is a masked array with 1 masked entry"):
        adp.export_for_serving(net, str(tmp_path / "1"), from_logits=True, warmup_rows=rows)
    assert not (tmp_path / "1").exists()


# -- the caller's random state -----------------------------------------------------------
def test_fit_pue_leaves_the_callers_global_random_state_as_it_was(data):
    """A bootstrap loop around fit_pue drew the same rows every time: its nets' seeding reset
    NumPy's and Python's global generators. (TensorFlow's global seed stays pinned: setting it
    back would clear the kernel cache at every call; test_reuse.py.)"""
    import random

    def draws(between):
        np.random.seed(0)
        random.seed(0)
        out = []
        for _ in range(2):
            out.append((np.random.randint(0, 500, 5).tolist(), random.random()))
            between()
        out.append((np.random.randint(0, 500, 5).tolist(), random.random()))
        return out

    expected = draws(lambda: None)
    assert draws(lambda: _fit(data, candidates=["bce_w"])) == expected
    assert expected[1] != expected[2]


class _Table:
    """A table as pandas' DataFrame presents one (columns, dtypes, the array protocol)."""

    def __init__(self, values, columns):
        self._values = np.asarray(values, np.float32)
        self.columns = list(columns)
        self.dtypes = [self._values.dtype] * len(self.columns)
        self.shape = self._values.shape

    def __array__(self, dtype=None, copy=None):
        return self._values if dtype is None else self._values.astype(dtype)

    def __len__(self):
        return len(self._values)


@pytest.mark.parametrize("columns,how", [(["age", "price"], "the same names in another order"),
                                         (["price", "agx"], "other names")])
def test_tables_with_other_columns_are_refused_by_name(data, columns, how):
    """Two DataFrames were read by position: reordered or renamed columns trained silently."""
    pu = _Table(data.x_pu, ["price", "age"])
    ex = _Table(data.x_e[:, [1, 0]] if how.startswith("the same") else data.x_e, columns)
    match = rf"`x_pu` and `x_e` are tables with different columns \({how}\)"
    with pytest.raises(ValueError, match=match):
        adp.fit_pue(linear(), pu, data.w_pu, ex, data.e_e, **FAST)
    with pytest.raises(ValueError, match=match):
        adp.data.pue_dataset(pu, data.w_pu, ex, data.e_e)
    with pytest.raises(ValueError, match=r"`x_p` and `x_u` are tables with different"):
        adp.data.fpue_dataset(pu, ex, data.x_e, data.e_e)
    with pytest.raises(ValueError, match=match):  # scored by position: 0.42 against 0.64
        adp.validation_score(linear()(), pu, data.w_pu, ex, data.e_e, from_logits=True)
    with pytest.raises(ValueError, match=match):
        adp.exposure.fit_ratio_model(pu, data.w_pu, ex, data.e_e)
    with pytest.raises(ValueError, match=match):
        adp.validation.pue_validation_data(pu, data.w_pu, ex, data.e_e)
    # the same columns in the same order are taken, as arrays are
    same = _Table(data.x_e, ["price", "age"])
    fit = adp.fit_pue(linear(), pu, data.w_pu, same, data.e_e, **dict(FAST, candidates=["bce_w"]))
    ref = adp.fit_pue(linear(), data.x_pu, data.w_pu, data.x_e, data.e_e,
                      **dict(FAST, candidates=["bce_w"]))
    assert fit.scores == ref.scores


def test_fit_pues_models_go_to_the_exporter_and_the_scorer_as_logits(data, tmp_path):
    """fit.model outputs a logit, but export_for_serving and validation_score asked for
    `from_logits` (an uncompiled model has no loss to read it from)."""
    import tensorflow as tf

    fit = _fit(data, candidates=["bce_w", "brier"])
    x = data.x_pu[:5].astype(np.float32)
    path = adp.export_for_serving(fit.model, tmp_path / "m")
    served = tf.saved_model.load(path).signatures["serving_default"](features=tf.constant(x))
    probability = served["probability"].numpy().ravel()
    np.testing.assert_allclose(probability, 1 / (1 + np.exp(-fit.model(x).numpy().ravel())),
                               rtol=1e-5, atol=1e-6)
    score = adp.validation_score(fit.candidates["brier"], data.x_pu, data.w_pu, data.x_e,
                                 data.e_e, criterion="exposure_brier")
    assert score == adp.validation_score(fit.candidates["brier"], data.x_pu, data.w_pu,
                                         data.x_e, data.e_e, criterion="exposure_brier",
                                         from_logits=True)
