"""Table 1's ADPUE recipe (selection on training rows only), `--file`/`--positive`, the JSON schema."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from adpue_tf import risks
from adpue_tf.experiments import bench, linear_fit, linear_recipe, simulate, table1
from adpue_tf.labels import Source, pack_e, pack_pu
from adpue_tf.validation import exposure_nll

# tiny, so that the fits are quick: 2 L2 values, 2 rounds, few steps
CFG = table1.LinearBenchConfig(trials=3, n_test=40, steps=15, recipe_l2s=(0.03, 0.3),
                               recipe_rounds=2)


def _data(n=200, d=13, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, (n, d)).astype(np.float32)
    y = (x[:, 0] - x[:, 1] + 0.5 * rng.normal(size=n) > 0).astype(np.float32)
    return x, y


@pytest.fixture(scope="module")
def pue_stack():
    x, y = _data()
    return table1._stack(simulate.simulate_pue, x, y, CFG, 0.5)


@pytest.fixture(scope="module")
def recipe(pue_stack):
    return linear_recipe.fit_recipe(pue_stack.x, pue_stack.y, table1.recipe_config(CFG))


# -- the selection never reads hidden Y or test labels ---------------------------------

def test_selection_unchanged_when_hidden_and_test_labels_are_permuted(pue_stack, recipe):
    rng = np.random.default_rng(1)
    shuffled = dataclasses.replace(
        pue_stack,
        hidden=np.stack([rng.permutation(h) for h in pue_stack.hidden]),
        y_test=1.0 - pue_stack.y_test)
    first, second = {}, {}
    f1 = table1._adpue_recipe(pue_stack, CFG, first)
    f2 = table1._adpue_recipe(shuffled, CFG, second)
    assert first["ADPUE"] == second["ADPUE"] and first["ADPUE-ref"] == second["ADPUE-ref"]
    np.testing.assert_array_equal(f1(pue_stack.x_test), f2(pue_stack.x_test))
    # ... and the same as the recipe fitted without the stack at all
    np.testing.assert_array_equal(first["ADPUE"]["rounds"], recipe.rounds)


def test_selection_does_read_the_observed_w(pue_stack, recipe):
    """The permutation test above is not vacuous: changing observed W changes the scores."""
    y = pue_stack.y.copy()
    pu = y[..., 2] == int(Source.PU)
    y[..., 0] = np.where(pu, 1.0 - y[..., 0], 0.0)
    other = linear_recipe.fit_recipe(pue_stack.x, y, table1.recipe_config(CFG))
    assert not np.allclose(other.scores["exposure_likelihood"],
                           recipe.scores["exposure_likelihood"])


# -- the recipe's parts against independent references ----------------------------------

def test_choice_is_the_argmin_and_logits_are_its_refit(pue_stack, recipe):
    s = recipe.scores["exposure_likelihood"]
    assert s.shape == (3, 2, 3) and np.isfinite(s).all()
    for t in range(3):
        i, r = np.unravel_index(np.argmin(s[t]), s[t].shape)
        assert (recipe.l2_index[t], recipe.rounds[t]) == (i, r)
        z = pue_stack.x[t] @ recipe.weights[t, i, r] + recipe.bias[t, i, r]
        np.testing.assert_allclose(recipe.logits(pue_stack.x)[t], z, rtol=1e-5, atol=1e-5)
    assert recipe.l2.tolist() == [CFG.recipe_l2s[i] for i in recipe.l2_index]


def test_round_zero_is_the_constant_pu_positive_rate(pue_stack, recipe):
    pu = pue_stack.y[..., 2] == int(Source.PU)
    rate = np.array([pue_stack.y[t, pu[t], 0].mean() for t in range(3)])
    np.testing.assert_array_equal(recipe.weights[:, :, 0], 0.0)
    np.testing.assert_allclose(recipe.bias[:, 0, 0], np.log(rate / (1 - rate)), rtol=1e-5)


def test_folds_deal_each_source_round_robin():
    is_pu = np.array([[True, True, False, True, False, False, True]])
    assert linear_recipe._folds(is_pu, 3).tolist() == [[0, 1, 0, 2, 1, 2, 0]]


def test_exposure_likelihood_score_matches_a_numpy_reference(pue_stack, recipe):
    """Round-0 score (constant σ(z) = mean W) by hand: NLL of W under rate·θ̂ on held-out PU rows."""
    cfg = table1.recipe_config(CFG)
    y, x = pue_stack.y, pue_stack.x
    is_pu = y[..., 2] == int(Source.PU)
    fold = linear_recipe._folds(is_pu, 3)
    # θ̂ of every (trial, fold) model, fitted as the recipe fits it (its stack layout: 3 folds + all)
    xm = np.repeat(x, 4, axis=0)
    weight = np.stack([(fold[t] != k) & ~is_pu[t] for t in range(3) for k in range(4)])
    labels = np.zeros(xm.shape[:2] + (3,), np.float32)
    labels[..., 0] = np.repeat(y[..., 1], 4, axis=0)   # E as the label, rows of source PU
    th = linear_fit.fit_linear(xm, labels, risks.logit, sample_weight=weight.astype(np.float32),
                               steps=cfg.steps, learning_rate=cfg.learning_rate, l2=cfg.theta_l2)
    theta = 1 / (1 + np.exp(-th.logits(xm).astype(np.float64)))
    for t in range(3):
        scores = []
        for k in range(3):
            train, held = fold[t] != k, fold[t] == k
            rate = y[t, train & is_pu[t], 0].mean()
            s = rate * np.clip(theta[4 * t + k], 1e-7, 1 - 1e-7)
            w = y[t, :, 0]
            nll = -(w * np.log(s) + (1 - w) * np.log1p(-s))
            scores.append(nll[held & is_pu[t]].mean())
        for i in range(len(CFG.recipe_l2s)):  # round 0 does not depend on the L2
            np.testing.assert_allclose(recipe.scores["exposure_likelihood"][t, i, 0],
                                       np.mean(scores), rtol=1e-4)


def test_reference_risk_value_equals_the_library_risk():
    rng = np.random.default_rng(0)
    m, n = 3, 12
    w = (rng.random((m, n)) < 0.3).astype(np.float64)
    e = (rng.random((m, n)) < 0.5).astype(np.float64)
    is_pu = np.zeros((m, n), bool)
    is_pu[:, :6] = True
    w[~is_pu] = 0.0
    e[is_pu] = 0.0
    z = rng.normal(size=(m, n)) * 2
    ref = rng.random((m, n))
    mask = (rng.random((m, n)) < 0.7).astype(np.float64)
    mask[:, [0, 6]] = 1.0
    got = linear_recipe.reference_risk_value(w, e, is_pu, z, ref, mask)
    for j in range(m):
        y4 = np.stack([w[j], e[j], np.where(is_pu[j], 0.0, 1.0), ref[j]], 1).astype(np.float32)
        want = risks.adpue(y4, z[j].astype(np.float32)[:, None], from_logits=True,
                           sample_weight=mask[j].astype(np.float32)).risk
        np.testing.assert_allclose(got[j], float(want), rtol=1e-5)
    # and the exposure NLL the recipe calls is the library's
    assert float(exposure_nll([1.0], [0.0], [0.5])[0]) == pytest.approx(np.log(4), rel=1e-6)


@pytest.mark.parametrize("kw,match", [
    ({"l2s": ()}, "l2s"), ({"l2s": (-1.0,)}, "l2s"), ({"max_rounds": -1}, "max_rounds"),
    ({"folds": 1}, "folds"), ({"criterion": "val_risk"}, "criterion"),
    ({"theta_rows": "test"}, "theta_rows")])
def test_recipe_config_refuses_bad_settings(kw, match):
    with pytest.raises(ValueError, match=match):
        linear_recipe.RecipeConfig(**kw)


def test_fit_recipe_refuses_other_sources_and_too_few_rows():
    x = np.zeros((1, 4, 2), np.float32)
    y = np.zeros((1, 4, 3), np.float32)
    y[0, :, 2] = [0, 0, 1, int(Source.SSE)]
    with pytest.raises(ValueError, match="only PU"):
        linear_recipe.fit_recipe(x, y)
    y[0, :, 2] = [0, 0, 1, 1]
    with pytest.raises(ValueError, match="at least `folds`=3 PU rows"):
        linear_recipe.fit_recipe(x, y)
    with pytest.raises(ValueError, match="trials, rows, features"):
        linear_recipe.fit_recipe(x[0], y)


# -- --file / --positive and the JSON schema --------------------------------------------

def _write_libsvm(path, x, labels):
    with open(path, "w") as f:
        for xi, li in zip(x, labels):
            f.write(f"{li:g} " + " ".join(f"{j + 1}:{v:.5f}" for j, v in enumerate(xi) if v)
                    + "\n")


def test_load_file_default_and_given_positive(tmp_path):
    x, y = _data(n=30, d=4)
    _write_libsvm(tmp_path / "toy.svm", x, np.where(y == 1, 1, -1))
    d = bench.load_file(tmp_path / "toy.svm")
    assert d.name == "toy" and d.x.shape == (30, 4)
    np.testing.assert_array_equal(d.y, y)
    np.testing.assert_allclose(d.x, x, atol=1e-5)
    _write_libsvm(tmp_path / "three.svm", x, np.arange(30) % 3 + 1)
    d3 = bench.load_file(tmp_path / "three.svm", positive=3)
    np.testing.assert_array_equal(d3.y, (np.arange(30) % 3 == 2).astype(np.float32))
    with pytest.raises(ValueError, match="no row has the positive label 7"):
        bench.load_file(tmp_path / "three.svm", positive=7)
    with pytest.raises(FileNotFoundError, match="no such file"):
        bench.load_file(tmp_path / "missing.svm")
    (tmp_path / "empty.svm").write_text("1\n-1\n")
    with pytest.raises(ValueError, match="no line has a feature"):
        bench.load_file(tmp_path / "empty.svm")


def test_exposure_features_stand_in_for_small_or_unscaled_data():
    x, _ = _data(n=20, d=13)
    assert bench.linear._exposure_features(x, 0)[0] is None
    small, why = bench.linear._exposure_features(x[:, :5], 0)
    assert small.shape == (20, 13) and "5 features" in why
    assert "outside [-1, 1]" in bench.linear._exposure_features(3 * x, 0)[1]


def _fake_setting(calls):
    def run_setting(x, y, prior, cfg, alpha, report, *, features=None, details=None):
        calls.append((cfg.exposure_rate, alpha, x.shape, None if features is None
                      else features.shape, cfg.n_test))
        details["ADPUE"] = {"l2": [0.1, 0.3], "rounds": [2, 0], "criterion": "x"}
        if cfg.recommended:
            details["Recommended"] = {"choice": ["ratio", "brier"], "score": [-0.1, -0.2],
                                      "seconds": [1.0, 1.0]}
        k = len(calls) / 100
        return {m: (np.array([0.5 + k, 0.6 + k]), np.array([0.7, 0.8]))
                for m in table1.pue_methods(cfg) + table1.SSE_METHODS}
    return run_setting


def test_file_runs_keyed_by_stem_with_the_json_schema(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(table1, "run_setting", _fake_setting(calls))
    x, y = _data(n=60, d=6)
    _write_libsvm(tmp_path / "mydata.txt", x, np.where(y == 1, 2, 1))
    out = tmp_path / "res"
    from adpue_tf import cli

    assert cli.main(["bench", "linear", "--file", str(tmp_path / "mydata.txt"), "--positive",
                     "2", "--trials", "2", "--alphas", "0.3,0.5", "--exposure-rate", "0.5,0.7",
                     "--n-test", "20", "--out", str(out), "--quiet"]) == 0
    assert [c[:2] for c in calls] == [(0.5, 0.3), (0.5, 0.5), (0.7, 0.3), (0.7, 0.5)]
    # 6 features: the projection stand-in; 20 of the 60 rows held out for testing
    assert calls[0][2:] == ((60, 6), (60, 13), 20)
    saved = json.loads((out / "linear.json").read_text())
    assert saved["exposure_rates"] == [0.5, 0.7]
    assert saved["config"]["files"] == ["<local>/mydata.txt"]  # results hold no local paths
    assert saved["config"]["positive"] == 2.0
    # the old schema, for the first rate: results[alpha][dataset][method] = [ind, trans]
    assert saved["results"] == saved["by_exposure_rate"]["0.5"]
    ind, trans = saved["results"]["0.3"]["mydata"]["ADPUE"]
    assert ind == [0.51, 0.61] and trans == [0.7, 0.8]
    assert saved["by_exposure_rate"]["0.7"]["0.5"]["mydata"]["Logit"][0] == [0.54, 0.64]
    assert saved["recipe_choices"]["0.7"]["0.3"]["mydata"]["ADPUE"]["rounds"] == [2, 0]
    text = (out / "linear.md").read_text()
    assert "## θ(e=1) = 0.7, α = 0.5, inductive" in text
    assert "| mydata | 0.590 ± 0.050 |" in text
    assert "- mydata: label 2 of 1, 2 (one vs rest)" in text
    assert "0.1/T2: 1, 0.3/T0: 1" in text
    # the Recommended column, its choices and its comparison with the best other column
    assert " Recommended |" in text and "brier: 1, ratio: 1" in text
    assert saved["recipe_choices"]["0.5"]["0.3"]["mydata"]["Recommended"]["choice"] == [
        "ratio", "brier"]
    assert "| 0.5 | 0.3 | mydata | inductive | 0.560 | 0.560 (Logit) | +0.000 | met |" in text


def test_file_name_clash_and_bad_rates_are_refused(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(table1, "run_setting", _fake_setting([]))
    from adpue_tf import cli

    x, y = _data(n=30, d=4)
    _write_libsvm(tmp_path / "german.svm", x, np.where(y == 1, 1, -1))
    assert cli.main(["bench", "linear", "--datasets", "german", "--file",
                     str(tmp_path / "german.svm"), "--out", str(tmp_path / "o"),
                     "--quiet"]) == 2
    assert "a data set named 'german' is already in the run" in capsys.readouterr().err
    assert cli.main(["bench", "linear", "--file", str(tmp_path / "german.svm"),
                     "--exposure-rate", "0.5,1.5", "--out", str(tmp_path / "o"),
                     "--quiet"]) == 2
    assert "exposure_rate" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


@pytest.mark.slow
def test_bench_linear_on_a_file_end_to_end(tmp_path):
    """The real methods on a small synthetic LIBSVM file (13 features, labels 1/2)."""
    from adpue_tf import cli

    x, y = _data(n=340, d=13)
    _write_libsvm(tmp_path / "synth.svm", x, np.where(y == 1, 2, 1))
    out = tmp_path / "res"
    assert cli.main(["bench", "linear", "--file", str(tmp_path / "synth.svm"), "--positive",
                     "2", "--trials", "2", "--alphas", "0.5", "--steps", "5", "--l2s", "0.1",
                     "--rounds", "1", "--no-recommended", "--out", str(out), "--quiet"]) == 0
    saved = json.loads((out / "linear.json").read_text())
    res = saved["results"]["0.5"]["synth"]
    assert set(res) == set(table1.PUE_METHODS + table1.external_methods()
                           + table1.SSE_METHODS)
    for method, (ind, trans) in res.items():
        assert len(ind) == len(trans) == 2, method
    assert all(0.0 <= a <= 1.0 for a in res["ADPUE"][0] + res["IPS"][0])
    assert saved["recipe_choices"]["0.5"]["0.5"]["synth"]["ADPUE"]["l2"] == [0.1, 0.1]


@pytest.mark.slow
def test_recipe_equals_its_one_l2_at_a_time_chains():
    """Every L2's chain fitted with the others (shared features) equals that L2 fitted alone."""
    rng = np.random.default_rng(3)
    x = rng.normal(size=(2, 48, 3)).astype("float32")
    y = np.stack([np.concatenate([pack_pu(rng.random(24) < 0.3), pack_e(rng.random(24) < 0.5)])
                  for _ in range(2)])
    cfg = linear_recipe.RecipeConfig(l2s=(0.01, 0.3), max_rounds=2, steps=15)
    both = linear_recipe.fit_recipe(x, y, cfg)
    for i, l2 in enumerate(cfg.l2s):
        alone = linear_recipe.fit_recipe(x, y, dataclasses.replace(cfg, l2s=(l2,)))
        np.testing.assert_allclose(both.weights[:, i], alone.weights[:, 0], rtol=1e-4, atol=1e-5)
        for c in linear_recipe.CRITERIA:
            np.testing.assert_allclose(both.scores[c][:, i], alone.scores[c][:, 0], rtol=1e-5)


@pytest.mark.slow
def test_helpers_fitted_by_the_caller_give_the_same_recipe(pue_stack, recipe):
    """`helper_models` fitted outside (as Table 1 fits it with its group) = the recipe's own first fit."""
    cfg = dataclasses.replace(table1.recipe_config(CFG), max_floats=25_000)  # 2 chunks of 2: padded
    labels, weight = linear_recipe.helper_models(pue_stack.y, cfg)
    assert labels.shape == (3, 8, pue_stack.y.shape[1], 3) and weight.shape == labels.shape[:3]
    first = linear_fit.fit_linear_models(pue_stack.x, labels, risks.logit, steps=cfg.steps,
                                         learning_rate=cfg.learning_rate, l2=cfg.theta_l2,
                                         sample_weight=weight)
    helped = linear_recipe.fit_recipe(pue_stack.x, pue_stack.y, cfg, helpers=first)
    own = linear_recipe.fit_recipe(pue_stack.x, pue_stack.y, cfg)
    for c in linear_recipe.CRITERIA:
        np.testing.assert_array_equal(helped.scores[c], own.scores[c])
        np.testing.assert_allclose(own.scores[c], recipe.scores[c], rtol=1e-4)
    np.testing.assert_array_equal(helped.weights, own.weights)
    with pytest.raises(ValueError, match="`helpers` must be the fit of helper_models"):
        linear_recipe.fit_recipe(pue_stack.x, pue_stack.y, cfg,
                                 helpers=linear_fit.LinearFit(first.weights[:, :2], first.bias))


@pytest.mark.slow
def test_the_recipe_in_its_thread_gives_the_columns_of_the_recipe_alone():
    """run_setting runs the recipe in a thread beside the other methods: same accuracies and
    choices as the recipe called on the same stack in the main thread."""
    x, y = _data()
    cfg = dataclasses.replace(CFG, recommended=False)
    details = {}
    res = table1.run_setting(x, y, 0.5, cfg, 0.5, details=details)
    st = table1._stack(simulate.simulate_pue, x, y, cfg, 0.5)
    group = table1._Group(st, table1._specs(table1.PUE_GROUP, 0.5, cfg), cfg,
                          table1._pue_helpers(st, cfg))
    own = {}
    score = table1._adpue_recipe(st, cfg, own, group)
    ind, trans = table1._accuracies(st, score)
    np.testing.assert_array_equal(res["ADPUE"][0], ind)
    np.testing.assert_array_equal(res["ADPUE"][1], trans)
    assert details["ADPUE"] == own["ADPUE"] and details["ADPUE-ref"] == own["ADPUE-ref"]
    assert list(res) == list(table1.pue_methods(cfg) + table1.SSE_METHODS)
