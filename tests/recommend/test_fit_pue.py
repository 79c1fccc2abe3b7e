"""fit_pue: the result, determinism, every input form, bad input, export, and known truth."""

from __future__ import annotations

import inspect
import warnings

import keras
import numpy as np
import pytest
import scipy.sparse
import tensorflow as tf

import adpue_tf as adp
from adpue_tf.data.rows import Rows, split_indices
from adpue_tf.recommend import CANDIDATES, FitOptions
from adpue_tf.recommend.compose import ProbabilityMean, RatioLogit
from adpue_tf.recommend.inputs import SATURATED

from serialization import assert_round_trip

FAST = dict(epochs=2, min_steps=8, batch_size=128, verbose=0)


def linear(dim=2):
    return lambda: keras.Sequential([keras.Input((dim,)), keras.layers.Dense(1)])


@pytest.fixture(scope="module")
def data():
    return adp.synthetic.synthetic_pue(500, 500, seed=0)


def _sig(z):
    return 1.0 / (1.0 + np.exp(-np.asarray(z, np.float64)))


def test_result_fields_report_and_model(data):
    fit = adp.fit_pue(linear(), data.x_pu, data.w_pu, data.x_e, data.e_e,
                      candidates=["bce_w", "ratio", "brier"], **FAST)
    assert set(fit.scores) == {"bce_w", "ratio", "brier"}
    best = min(fit.scores, key=fit.scores.get)
    close = [n for n in fit.scores
             if fit.scores[n] - fit.scores[best] <= 2 * fit.brier_gap_se[n]
             and (n == best or n != "ratio")]  # Ratio (q̂/θ̂) only as the Brier best
    assert fit.choice == min(close, key=fit.exposure_nll.get)  # tolerance=2 SE
    assert fit.brier_gap_se[best] == 0.0
    assert set(fit.exposure_nll) == set(fit.scores)
    assert fit.parts["ratio"] == ("bce_w", "theta")
    held = split_indices(500, 0.2, np.random.default_rng(0))[1]  # fit_pue's split, seed 0
    assert fit.rows == {"pu": 500, "e": 500, "pu_held_out": 100, "e_held_out": 100,
                        "w_held_out": int(data.w_pu[held].sum())}
    assert fit.model.output_shape == (None, 1)
    report = fit.report()
    assert report.splitlines()[0].startswith(f"fit_pue: chose {fit.choice} ")
    for name in fit.scores:
        assert f"| {name}" in report
    assert str(fit) == report
    cal = fit.theta_calibration
    assert 0.0 <= cal["calibration_error"] <= 1.0 and cal["log_loss"] > 0


def test_scores_are_the_exposure_brier_of_the_candidates_on_the_held_out_rows(data):
    """Recompute each score from the candidate models and the split fit_pue made."""
    fit = adp.fit_pue(linear(), data.x_pu, data.w_pu, data.x_e, data.e_e,
                      candidates=["bce_w", "brier", "ips"], refit=False, **FAST)
    rng = np.random.default_rng(0)  # the split of fit_pue(seed=0): PU first, then E
    pu_ho = np.sort(rng.permutation(500)[:100])
    e_ho = np.sort(rng.permutation(500)[:100])
    for name, model in fit.candidates.items():
        f_pu = _sig(model.predict(data.x_pu[pu_ho], verbose=0).ravel())
        f_e = _sig(model.predict(data.x_e[e_ho], verbose=0).ravel())
        want = np.mean(data.e_e[e_ho] * f_e ** 2) - 2 * np.mean(data.w_pu[pu_ho] * f_pu)
        assert fit.scores[name] == pytest.approx(want, abs=1e-5), name
    assert fit.model is fit.candidates[fit.choice]  # refit=False keeps the trained one


@pytest.mark.slow
def test_same_seed_same_choice_and_weights(data):
    runs = [adp.fit_pue(linear(), data.x_pu, data.w_pu, data.x_e, data.e_e, seed=3,
                        candidates=["bce_w", "likelihood", "adpue_rounds"], **FAST)
            for _ in range(2)]
    assert runs[0].choice == runs[1].choice
    assert runs[0].scores == pytest.approx(runs[1].scores, abs=1e-6)
    for a, b in zip(runs[0].model.get_weights(), runs[1].model.get_weights()):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


@pytest.mark.slow
def _dict_net():
    inputs = {"a": keras.Input((1,), name="a"), "b": keras.Input((1,), name="b")}
    return keras.Model(inputs, keras.layers.Dense(1)(
        keras.layers.Concatenate()([inputs["a"], inputs["b"]])))


@pytest.mark.slow
def test_dict_features_and_datasets_of_rows_give_the_same_fit(data):
    kwargs = dict(candidates=["bce_w", "brier"], **FAST)
    base = adp.fit_pue(linear(), data.x_pu, data.w_pu, data.x_e, data.e_e, **kwargs)
    dict_net = _dict_net

    def as_dict(x):
        return {"a": x[:, :1], "b": x[:, 1:]}

    dicts = adp.fit_pue(dict_net, as_dict(data.x_pu), data.w_pu, as_dict(data.x_e), data.e_e,
                        **kwargs)
    # a feature of shape (n,) for an input of shape (batch, 1), as Keras takes it
    flat = adp.fit_pue(dict_net, {k: v[:, 0] for k, v in as_dict(data.x_pu).items()}, data.w_pu,
                       {k: v[:, 0] for k, v in as_dict(data.x_e).items()}, data.e_e, **kwargs)
    assert flat.scores == pytest.approx(dicts.scores, abs=1e-6)
    rows = adp.fit_pue(
        linear(),
        tf.data.Dataset.from_tensor_slices((data.x_pu.astype("float32"), data.w_pu)), None,
        tf.data.Dataset.from_tensor_slices((data.x_e.astype("float32"), data.e_e)), None,
        **kwargs)
    assert rows.scores == pytest.approx(base.scores, abs=1e-6)
    assert dicts.choice in dicts.scores
    x = as_dict(data.x_pu[:5])
    assert dicts.model.predict(x, verbose=0).shape == (5, 1)


@pytest.mark.slow
def test_composite_choice_exports_and_serves_the_same_probabilities(data, tmp_path):
    fit = adp.fit_pue(linear(), data.x_pu, data.w_pu, data.x_e, data.e_e,
                      candidates=["ratio", "elkan_noto", "average"], **FAST)
    path = adp.export_for_serving(fit.model, tmp_path / "export" / "1", from_logits=True)
    served = tf.saved_model.load(str(path)).signatures["serving_default"](
        features=tf.constant(data.x_pu[:7], tf.float32))
    want = _sig(fit.model.predict(data.x_pu[:7], verbose=0))
    np.testing.assert_allclose(served["probability"].numpy(), want, rtol=1e-5, atol=1e-6)
    reloaded = keras.saving.load_model(_save(fit.model, tmp_path))
    np.testing.assert_allclose(reloaded.predict(data.x_pu[:7], verbose=0),
                               fit.model.predict(data.x_pu[:7], verbose=0), rtol=1e-6)


def _save(model, tmp_path):
    path = tmp_path / "model.keras"
    model.save(path)
    return path


@pytest.mark.parametrize("layer", [RatioLogit(floor=0.1), RatioLogit(constant=0.4),
                                   ProbabilityMean()])
def test_composite_layers_round_trip(layer):
    assert_round_trip(layer)


def test_ratio_logit_by_hand():
    z_q = tf.constant([[0.0], [2.0]])
    z_t = tf.constant([[0.0], [-10.0]])
    out = _sig(RatioLogit(floor=0.05)([z_q, z_t]).numpy())
    # 0.5/0.5 = 1 (clipped just below 1); σ(2)/0.05 > 1 -> clipped
    np.testing.assert_allclose(out.ravel(), [1.0, 1.0], atol=1e-6)
    out = _sig(RatioLogit(constant=0.8)(tf.constant([[0.0]])).numpy())
    np.testing.assert_allclose(out.ravel(), [0.625], rtol=1e-6)


def test_verbose_zero_is_silent_and_lines_off_a_terminal(data, capsys):
    adp.fit_pue(linear(), data.x_pu, data.w_pu, data.x_e, data.e_e,
                candidates=["bce_w"], **FAST)
    assert capsys.readouterr().err == ""
    adp.fit_pue(linear(), data.x_pu, data.w_pu, data.x_e, data.e_e,
                candidates=["bce_w"], **{**FAST, "verbose": 2})
    err = capsys.readouterr().err
    assert "\r" not in err and "fit_pue: 1/" in err


def _two_inputs():
    a, b = keras.Input((1,)), keras.Input((1,))
    return keras.Model([a, b], keras.layers.Dense(1)(keras.layers.Concatenate()([a, b])))


#: A model that a bad build_net returns at every call; a layer another one reuses.
_SAME = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
_LAYER = keras.layers.Dense(1)

BAD = [
    (dict(build_net=keras.Sequential()), TypeError, "`build_net` must be a function"),
    (dict(build_net=lambda: 3), TypeError, r"`build_net\(\)` must return a keras.Model"),
    (dict(build_net=lambda dim: None), TypeError, "`build_net` must take no arguments"),
    (dict(build_net=lambda: keras.Sequential([keras.Input((2,)),
                                              keras.layers.Dense(1, "sigmoid")])),
     ValueError, "must output a logit.*sigmoid"),
    (dict(build_net=lambda: keras.Sequential([keras.Input((2,)), keras.layers.Dense(2)])),
     ValueError, "one output of shape"),
    (dict(build_net=lambda: _SAME), ValueError, "returned the same model at two calls"),
    (dict(build_net=lambda: keras.Sequential([keras.Input((2,)), _LAYER])), ValueError,
     "returned models that share trainable weights \\(.*kernel.*\\) at two calls"),
    (dict(build_net=lambda: keras.Sequential([keras.Input((2,), dtype="string"),
                                              keras.layers.Dense(1)])),
     TypeError, "`x_pu` and `x_e` hold float32 values, but `build_net\\(\\)`'s model takes "
     "string there"),
    (dict(x_pu={"a": np.zeros((500, 1)), "b": np.zeros((500, 1))},
          x_e={"a": np.zeros((500, 1)), "b": np.zeros((500, 1))}), ValueError,
     "model takes one array of features \\(rows of shape \\(2,\\)\\), but `x_pu` is a dict "
     "of features \\['a', 'b'\\]"),
    (dict(build_net=lambda: _two_inputs()), ValueError,
     "model takes a list of 2 inputs; fit_pue needs a model that takes one array"),
    (dict(w=np.zeros(500)), ValueError, "`w` has 0 observed positive"),
    (dict(e=np.ones(500)), ValueError, "`e` holds only the value 1"),
    (dict(x_e=np.zeros((500, 3))), ValueError, "same features"),
    (dict(x_pu=np.zeros((500, 3)), x_e=np.zeros((500, 3))), ValueError,
     "rows of shape \\(3,\\) do not fit `build_net\\(\\)`'s model, whose input takes rows of "
     "shape \\(2,\\)"),
    (dict(build_net=lambda: _dict_net(), x_pu={"a": np.zeros((500, 1))},
          x_e={"a": np.zeros((500, 1))}), ValueError, "lack the feature\\(s\\) \\['b'\\]"),
    (dict(build_net=lambda: _dict_net()), ValueError, "takes a dict of features \\['a', 'b'\\], "
     "but `x_pu` is one array of rows \\(2,\\); pass a dict of arrays with those keys "
     "\\(a pandas DataFrame's columns: `dict\\(df\\)`\\)"),
    (dict(x_pu=np.array([[0.5, "Oslo"]] * 500, dtype=object)), TypeError,
     "`x_pu` mixes strings with float values: one array of features holds one kind"),
    (dict(build_net=lambda: _dict_net(), x_pu={"a": np.zeros((500, 1)), "b": np.zeros((500, 4))},
          x_e={"a": np.zeros((500, 1)), "b": np.zeros((500, 4))}), ValueError,
     "feature 'b' of `x_pu`: rows of shape \\(4,\\)"),
    (dict(w=np.full(500, 2.0)), ValueError, "`w`"),
    (dict(w=np.ones(499)), ValueError, "`w` has 499 rows"),
    (dict(x_pu=np.full((500, 2), np.nan)), ValueError, "x_pu"),
    (dict(x_pu=None), TypeError, "`x_pu` must be"),
    (dict(x_pu=scipy.sparse.csr_matrix(np.ones((500, 2)))), TypeError,
     "`x_pu` is a sparse matrix \\(SciPy csr_matrix\\); pass a dense array"),
    (dict(x_e=tf.sparse.from_dense(np.ones((500, 2), np.float32))), TypeError,
     "`x_e` is a sparse matrix \\(tf.SparseTensor\\)"),
    (dict(candidates=["nope"]), ValueError, "`candidates`.*unknown: \\['nope'\\]"),
    (dict(candidates="bce_w"), TypeError, "`candidates` must be a sequence"),
    (dict(candidates="ALL"), TypeError, "`candidates` must be a sequence of names, \"all\""),
    (dict(candidates=[]), ValueError, "`candidates` is empty"),
    (dict(tolerance="2"), TypeError, "`tolerance` must be a number >= 0"),
    (dict(candidates=["average", "ratio", "ratio"]), ValueError,
     "`average` needs at least two other candidates"),
    (dict(validation_split=0.7), ValueError, "`validation_split`"),
    (dict(validation_split="0.2"), TypeError, "`validation_split` must be a number"),
    (dict(epochs=0), ValueError, "`epochs` must be at least 1"),
    (dict(epochs=2.5), TypeError, "`epochs` must be an int"),
    (dict(verbose=5), ValueError, "`verbose`"),
    (dict(refit="yes"), TypeError, "`refit` must be a bool"),
    (dict(learning_rate=-1.0), ValueError, "`learning_rate`"),
    (dict(tolerance=-1.0), ValueError, "`tolerance` must be a number >= 0"),
    (dict(folds=5), TypeError, "no longer takes `folds`: K-fold cross-fitting .* retired"),
    (dict(final="average"), TypeError, "no longer takes `final`: .* pass refit=False"),
    (dict(patience=0), ValueError, "`patience` must be at least 1"),
    (dict(patience=1.5), TypeError, "`patience` must be an int"),
    (dict(fold=5), TypeError, "unexpected keyword argument 'fold'; .*'refit'.*FitOptions"),
]


@pytest.mark.parametrize("change,err,match", BAD, ids=[m for _, _, m in BAD])
def test_bad_input_names_the_argument(data, change, err, match):
    args = dict(build_net=linear(), x_pu=data.x_pu, w=data.w_pu, x_e=data.x_e, e=data.e_e)
    args.update(change)
    options = {**FAST, **{k: v for k, v in change.items() if k not in args or k in FAST}}
    for k in list(change):
        if k not in ("build_net", "x_pu", "w", "x_e", "e"):
            args.pop(k, None)
            options[k] = change[k]
    with pytest.raises(err, match=match):
        adp.fit_pue(args["build_net"], args["x_pu"], args["w"], args["x_e"], args["e"],
                    **options)


def test_the_docstring_says_what_fit_pue_does_in_at_most_40_lines():
    """The details and the evidence live in docs/guide/choosing-models.md."""
    lines = adp.fit_pue.__doc__.splitlines()  # from the opening quotes to the closing ones
    assert len(lines) <= 40, f"fit_pue's docstring has {len(lines)} lines"
    # section headings at the docstring's own indent (Python 3.13 strips it when compiling)
    sections = inspect.cleandoc(adp.fit_pue.__doc__).splitlines()
    assert [h for h in ("Args:", "Returns:", "Raises:", "Example:") if h in sections] \
        == ["Args:", "Returns:", "Raises:", "Example:"]


def test_the_call_is_five_arguments_five_keywords_and_the_options():
    params = inspect.signature(adp.fit_pue).parameters
    assert list(params) == ["build_net", "x_pu", "w", "x_e", "e", "epochs", "batch_size",
                            "validation_split", "seed", "verbose", "options"]
    assert {n: p.default for n, p in params.items() if p.default is not p.empty} == {
        "epochs": 20, "batch_size": 512, "validation_split": 0.2, "seed": 0, "verbose": "auto"}
    assert params["options"].kind is inspect.Parameter.VAR_KEYWORD
    assert FitOptions.__optional_keys__ == {
        "candidates", "tolerance", "refit", "learning_rate", "min_steps", "rounds",
        "patience", "jit_compile", "hedge"}
    documented = inspect.getdoc(FitOptions).split("Attributes:", 1)[1].split("Example:")[0]
    assert all(f"\n    {name}: " in documented for name in FitOptions.__optional_keys__)


def test_a_net_that_diverges_is_recorded_and_every_candidate_failing_is_an_error(data):
    def exploding():
        return keras.Sequential([keras.Input((2,)), keras.layers.Dense(
            1, kernel_initializer=keras.initializers.Constant(1e6))])

    with pytest.raises(ValueError, match="Every candidate diverged: .*diverged in epoch 1.*"
                                         "Lower `learning_rate`. .* far from standardised"), \
            pytest.warns(UserWarning, match="far from standardised"):
        adp.fit_pue(exploding, data.x_pu, data.w_pu, data.x_e, data.e_e,
                    candidates=["bce_w", "brier"], **FAST)


def test_unscaled_features_are_warned_about_and_scaled_ones_are_not(data):
    from adpue_tf.recommend.inputs import scale_hint

    with pytest.warns(UserWarning, match=r"logits of median \|z\| = .* the features look far "
                                         "from standardised") as caught:
        adp.fit_pue(linear(), data.x_pu + 1e3, data.w_pu, data.x_e + 1e3, data.e_e,
                    candidates=["bce_w"], **FAST)
    hint = [w for w in caught if "standardised" in str(w.message)]
    assert hint and all(w.filename == __file__ for w in hint)  # at the caller of fit_pue
    net = linear()()
    with warnings.catch_warnings():  # no DeprecationWarning either (NumPy 2 on a Keras variable)
        warnings.simplefilter("error")
        assert scale_hint(net, Rows(data.x_pu, data.w_pu)) is None
    rare = keras.Sequential([keras.Input((2,)), keras.layers.Dense(
        1, bias_initializer=keras.initializers.Constant(-11.5))])  # a base rate of 1e-5
    assert scale_hint(rare, Rows(data.x_pu, data.w_pu)) is None
    big = Rows(data.x_pu * 1e4, data.w_pu)
    z = np.abs(net(data.x_pu * 1e4).numpy())
    assert np.median(z) > SATURATED and "Normalization" in scale_hint(net, big)


def test_a_frozen_part_may_be_shared_between_the_nets(data):
    frozen = keras.layers.Dense(3, trainable=False)

    def build():
        x = keras.Input((2,))
        return keras.Model(x, keras.layers.Dense(1)(frozen(x)))

    build()  # the shared layer's weights exist from here on
    before = [w.copy() for w in frozen.get_weights()]
    fit = adp.fit_pue(build, data.x_pu, data.w_pu, data.x_e, data.e_e,
                      candidates=["bce_w", "brier"], **FAST)
    assert fit.choice in ("bce_w", "brier")
    assert all(np.array_equal(a, b) for a, b in zip(before, frozen.get_weights()))


def test_an_exposure_log_of_another_population_is_warned_about(data):
    from adpue_tf.recommend.inputs import shift_hint

    x_e = data.x_e.copy()
    x_e[:, 1] += 1.0  # the exposure log drawn elsewhere: one feature shifted by ~1 SD
    with pytest.warns(UserWarning, match=r"`x_pu` and `x_e` do not look like draws from one "
                                         r"feature distribution: 1 feature\(s\) .* column 1"):
        adp.fit_pue(linear(), data.x_pu, data.w_pu, x_e, data.e_e, candidates=["bce_w"],
                    **FAST)
    # Random splits of one population never trip it, from 20 rows to 5,000 (100 draws;
    # 800 draws measured, none tripped it).
    for seed in range(25):
        for n in (20, 50, 400, 5000):
            s = adp.synthetic.synthetic_pue(n, n, dim=8, seed=seed)
            assert shift_hint(Rows(s.x_pu, s.w_pu), Rows(s.x_e, s.e_e)) is None, (seed, n)


def _id_net():
    ids, num = keras.Input((), dtype="int64", name="id"), keras.Input((1,), name="num")
    h = keras.layers.Concatenate()([keras.layers.Embedding(10, 2)(ids), num])
    return keras.Model({"id": ids, "num": num}, keras.layers.Dense(1)(h))


@pytest.mark.parametrize("bad_id, where", [(10, "x_pu"), (-1, "x_e")])
def test_ids_outside_an_embedding_are_refused_by_feature(data, bad_id, where):
    def rows(n, seed):
        ids = np.random.default_rng(seed).integers(0, 10, n)
        return {"id": ids, "num": np.zeros((n, 1), "float32")}

    x = {"x_pu": rows(500, 0), "x_e": rows(500, 1)}
    x[where]["id"][7] = bad_id
    with pytest.raises(ValueError, match=f"feature 'id' of `{where}` holds ids in "
                                         f"\\[{min(bad_id, 0)}, {max(bad_id, 9)}\\], but "
                                         "`build_net\\(\\)`'s Embedding .* takes ids in "
                                         "\\[0, 10\\)"):
        adp.fit_pue(_id_net, x["x_pu"], data.w_pu, x["x_e"], data.e_e, **FAST)


def test_a_batched_dataset_is_refused_before_it_is_read(data):
    ds = tf.data.Dataset.from_tensor_slices((data.x_pu, data.w_pu)).batch(32)
    with pytest.raises(ValueError, match="`x_pu` must be a Dataset of unbatched rows, but its w "
                                         "has shape \\(None,\\) \\(batches\\?\\)"):
        adp.fit_pue(linear(), ds, None, data.x_e, data.e_e, **FAST)


def test_a_dataset_with_two_labels_a_row_is_named(data):
    two = np.stack([data.w_pu, data.w_pu], axis=1)
    ds = tf.data.Dataset.from_tensor_slices((data.x_pu, two))
    with pytest.raises(ValueError, match=r"`x_pu`: each row's w must be one value \(shape \(\) "
                                         r"or \(1,\)\), got shape \(2,\)"):
        adp.fit_pue(linear(), ds, None, data.x_e, data.e_e, **FAST)


def test_a_dataset_with_labels_given_twice_is_refused(data):
    ds = tf.data.Dataset.from_tensor_slices((data.x_pu, data.w_pu))
    with pytest.raises(ValueError, match="`w` must be None when `x_pu` is a Dataset"):
        adp.fit_pue(linear(), ds, data.w_pu, data.x_e, data.e_e, **FAST)


def test_every_candidate_is_known():
    assert CANDIDATES[0] == "bce_w" and "likelihood" in CANDIDATES and "average" in CANDIDATES


@pytest.mark.slow
def test_beats_bce_on_w_against_the_truth_with_non_logistic_exposure():
    """Known truth, complementary log-log exposure (a logistic θ̂ is misspecified)."""
    s = adp.synthetic.synthetic_pue(2000, 2000, dim=4, seed=5, exposure="cloglog")
    test = adp.synthetic.synthetic_pue(5000, 10, dim=4, seed=6, exposure="cloglog")
    fit = adp.fit_pue(linear(4), s.x_pu, s.w_pu, s.x_e, s.e_e, epochs=10, min_steps=300,
                      learning_rate=0.01, verbose=0)
    mae = {n: float(np.mean(np.abs(_sig(m.predict(test.x_pu, verbose=0).ravel())
                                   - test.p_y_pu)))
           for n, m in {**fit.candidates, "chosen": fit.model}.items()}
    assert mae["chosen"] < 0.5 * mae["bce_w"], mae
    assert mae[fit.choice] <= sorted(mae.values())[3] + 0.01, mae  # among the best few


def test_stop_when_stale_stops_once_no_net_improves():
    from adpue_tf.recommend.train import HeldOutScore, StopWhenStale

    class Model:
        stop_training = False

    def watch(history, best_epoch):
        w = HeldOutScore(None, lambda net: 0.0)
        w.history, w.best_epoch = list(history), best_epoch
        return w

    improving, stale = watch([3, 2, 1], 3), watch([1, 2, 3], 1)
    cb = StopWhenStale([improving, stale], 2)
    cb.set_model(Model())
    cb.on_epoch_end(2)
    assert not cb.model.stop_training  # one net still improves
    cb = StopWhenStale([watch([1, 2, 3], 1), watch([2, 1, 3], 2)], 1)
    cb.set_model(Model())
    cb.on_epoch_end(2)
    assert cb.model.stop_training and cb.stopped_epoch == 3
    cb = StopWhenStale([stale], None)
    cb.set_model(Model())
    cb.on_epoch_end(2)
    assert not cb.model.stop_training


@pytest.mark.parametrize("patience", [1, None])
def test_patience_ends_a_pass_once_its_nets_stop_improving(data, monkeypatch, patience):
    from adpue_tf.recommend import train

    watches = []
    init = train.HeldOutScore.__init__

    def record(self, *a, **k):
        init(self, *a, **k)
        watches.append(self)

    monkeypatch.setattr(train.HeldOutScore, "__init__", record)
    fit = adp.fit_pue(linear(), data.x_pu, data.w_pu, data.x_e, data.e_e,
                      candidates=["bce_w", "brier"], refit=False, patience=patience,
                      **{**FAST, "epochs": 16, "learning_rate": 0.3})
    assert watches and set(fit.scores) == {"bce_w", "brier"}
    ran = [len(w.history) for w in watches]
    if patience is None:
        assert ran == [16] * len(watches)
    else:  # a pass ends one epoch after the last improvement of any of its nets
        assert min(ran) < 16
        assert max(w.best_epoch for w in watches) + patience >= max(ran) or max(ran) == 16


@pytest.mark.parametrize("candidate, built", [
    # check (two calls: fresh models? they are θ̂'s and q̂'s nets) + the likelihood net
    # to choose + the likelihood net again: θ̂ is shared
    ("likelihood", 4),
    # Ratio predicts with q̂ and θ̂ (the checks' nets): both are retrained on every row
    pytest.param("ratio", 4, marks=pytest.mark.slow),
])
def test_the_refit_retrains_the_nets_the_choice_predicts_with_and_shares_the_rest(
        data, candidate, built):
    calls = []  # a plain call keeps no compiled model: build_net's calls are nets

    def build():
        calls.append(1)
        return linear()()

    fit = adp.fit_pue(build, data.x_pu, data.w_pu, data.x_e, data.e_e,
                      candidates=[candidate], **FAST)
    assert fit.choice == candidate and fit.final == "refit"
    assert len(calls) == built
    chosen = fit.candidates[candidate]
    assert fit.model is not chosen
    assert not all(np.array_equal(a, b) for a, b in
                   zip(fit.model.get_weights(), chosen.get_weights()))


@pytest.mark.parametrize("kw, err, match", [
    (dict(floor="a"), TypeError, "`floor` must be a number, got 'a'"),
    (dict(floor=0.0), ValueError, r"`floor` must lie in \(0, 1\)"),
    (dict(constant=1.5), ValueError, r"`constant` must lie in \(0, 1\]"),
    (dict(constant=True), TypeError, "`constant` must be a number"),
])
def test_ratio_logit_refuses_bad_options_by_name(kw, err, match):
    with pytest.raises(err, match=match):
        RatioLogit(**kw)


def _partly_frozen():
    """A net whose first layer the user froze (a pretrained part, say)."""
    first = keras.layers.Dense(4, activation="tanh", name="frozen")
    first.trainable = False
    return keras.Sequential([keras.Input((2,)), first, keras.layers.Dense(1)])


def test_passes_side_by_side_share_the_trained_nets_they_read_and_leave_user_frozen_parts(
        data):
    """Own passes that read one θ̂ run side by side on data larger than a batch (each
    freezes it) without an optimizer error, and the parts the user froze stay frozen.

    Each of these passes freezes the trained nets it reads; they stay frozen until every
    pass has ended (one pass thawing them mid-way broke the other's optimizer:
    "Unknown variable"), then each layer is as it was, not all made trainable.
    """
    fit = adp.fit_pue(_partly_frozen, data.x_pu, data.w_pu, data.x_e, data.e_e, epochs=1,
                      min_steps=10, batch_size=128, verbose=0,
                      candidates=["adpue_ratio", "likelihood_theta"])
    theta_and_net = [m for m in fit.candidates["likelihood_theta"]._flatten_layers(
        include_self=False) if isinstance(m, keras.Model)]
    assert len(theta_and_net) == 2  # θ̂, read by both passes, and likelihood_theta's own net
    for net in [*theta_and_net, fit.candidates["adpue_ratio"]]:
        assert not net.get_layer("frozen").trainable
        assert net.layers[-1].trainable


def test_the_moved_keep_compiled_says_where_it_went():
    import adpue_tf as adp_

    with pytest.raises(AttributeError, match="moved to adpue_tf.experiments.keep_compiled"):
        adp_.recommend.keep_compiled  # noqa: B018
    with pytest.raises(AttributeError, match="has no attribute 'nothing_here'"):
        adp_.recommend.nothing_here  # noqa: B018
    assert callable(adp_.experiments.keep_compiled)


def test_a_frozen_part_shared_by_every_net_trains_alternate_learning_from_the_ratio(data):
    """adpue_ratio's f†₀ (the Ratio model of bce_w and θ̂) shares the user's frozen part
    with its net: allowed, and it stays frozen (it was refused as `initial_dagger`)."""
    frozen = keras.layers.Dense(4, activation="tanh", name="frozen_shared")
    frozen.trainable = False

    def build():
        return keras.Sequential([keras.Input((2,)), frozen, keras.layers.Dense(1)])

    fit = adp.fit_pue(build, data.x_pu, data.w_pu, data.x_e, data.e_e, epochs=1,
                      min_steps=10, batch_size=128, verbose=0, candidates=["adpue_ratio"])
    assert fit.choice == "adpue_ratio" and not frozen.trainable
