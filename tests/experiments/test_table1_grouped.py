"""Table 1's plain-risk methods, fitted as one group per stack, match fitting each alone."""

from __future__ import annotations

import numpy as np
import pytest

from adpue_tf import risks
from adpue_tf._internal.guards import DivergedError
from adpue_tf.experiments import linear_fit, linear_recipe, simulate, table1

# tiny: 3 trials, few steps; gamma, eta and alpha off their defaults so that a
# method given another's options shows
CFG = table1.LinearBenchConfig(trials=3, n_test=40, steps=25, learning_rate=0.1, gamma=0.5,
                               pnu_eta=0.3, ad3se_alpha=0.7, recipe_l2s=(0.1,),
                               recipe_rounds=1, recommended=False)
ALPHA = 0.5
#: the prior given to uPU, nnPU and PNU: above the data's 0.57, so that nnPU-sig's
#: correction acts and it differs from uPU-sig
PRIOR = 0.9


def _data(n=200, d=13, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, (n, d)).astype(np.float32)
    y = (x[:, 0] - x[:, 1] + 0.5 * rng.normal(size=n) > 0).astype(np.float32)
    return x, y


def _reference(prior):
    """Each method fitted on its own with ``fit_linear``, options written out here."""
    pue = {
        "Logit": (risks.logit, {}),
        "uPU": (risks.upu, {"prior": prior}),
        "nnPU": (risks.nnpu, {"prior": prior, "gamma": CFG.gamma}),
        "uPU-sig": (risks.upu, {"prior": prior, "surrogate": "sigmoid"}),
        "nnPU-sig": (risks.nnpu, {"prior": prior, "gamma": CFG.gamma, "surrogate": "sigmoid"}),
        "ADPUE-direct": (risks.adpue, {"gamma": CFG.gamma}),
    }
    sse = {
        "ADS": (risks.ads, {}),
        "PNU": (risks.pnu, {"prior": prior, "eta": CFG.pnu_eta}),
        "AD3SE": (risks.ad3se, {"alpha": CFG.ad3se_alpha, "gamma": CFG.gamma}),
    }
    x, y = _data()
    out = {}
    for fn, methods in ((simulate.simulate_pue, pue), (simulate.simulate_3se, sse)):
        st = table1._stack(fn, x, y, CFG, ALPHA)
        for name, (risk, opts) in methods.items():
            fit = linear_fit.fit_linear(st.x, st.y, risk, steps=CFG.steps,
                                        learning_rate=CFG.learning_rate, l2=CFG.l2, **opts)
            out[name] = (fit.logits(st.x_test), table1._accuracies(st, fit.logits))
    return out


@pytest.fixture(scope="module")
def reference():
    return _reference(PRIOR)


def _run(monkeypatch):
    """``run_setting`` with the test-set scores of each method and the report calls recorded.

    The methods outside the groups are stubbed (NaN scores): they are not what is tested.
    """
    scores, reported = {}, []
    nan = table1._not_applicable
    for f in ("_sar_em", "_ratio", "_ips"):
        monkeypatch.setattr(table1, f, lambda st, cfg, *group: nan)
    monkeypatch.setattr(table1, "elkan_noto", lambda *a: nan)

    def recipe(st, cfg, details, group=None):
        details["ADPUE-ref"] = {"criterion": "reference_risk"}
        details["_recipe"] = type("R", (), {"logits": staticmethod(lambda x, criterion: nan(x))})
        return nan
    monkeypatch.setattr(table1, "_adpue_recipe", recipe)
    accuracies = table1._accuracies

    def spy(st, score):
        scores[len(scores)] = score(st.x_test)
        return accuracies(st, score)
    monkeypatch.setattr(table1, "_accuracies", spy)
    x, y = _data()
    res = table1.run_setting(x, y, PRIOR, CFG, ALPHA, reported.append)
    canonical = list(table1.pue_methods(CFG) + table1.SSE_METHODS)
    assert list(res) == canonical   # the columns in their order
    last = ["ADPUE", "ADPUE-ref"]   # the recipe ran in a thread: its columns come last
    assert reported == [n for n in canonical if n not in last] + last
    return res, dict(zip(reported, scores.values()))


def _check(res, scores, reference):
    for name, (ref_scores, (ref_ind, ref_trans)) in reference.items():
        np.testing.assert_allclose(scores[name], ref_scores, rtol=1e-4, atol=1e-4,
                                   err_msg=name)
        np.testing.assert_allclose(res[name][0], ref_ind, err_msg=name)
        np.testing.assert_allclose(res[name][1], ref_trans, err_msg=name)


def test_reference_methods_differ(reference):
    """The methods give different models here, so a swap of options would show."""
    names = list(reference)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            assert not np.allclose(reference[a][0], reference[b][0], atol=1e-2), (a, b)


@pytest.mark.slow
def test_grouped_fits_match_separate_fits(monkeypatch, reference):
    calls = []
    original = linear_fit.fit_linear_models

    def counting(x, y, risk, **kw):
        calls.append(callable(risk))
        return original(x, y, risk, **kw)
    monkeypatch.setattr(linear_fit, "fit_linear_models", counting)
    res, scores = _run(monkeypatch)
    assert calls == [False, False]  # one grouped call per stack, no single fits
    _check(res, scores, reference)


def test_a_diverged_group_falls_back_to_separate_fits(monkeypatch, reference):
    original = linear_fit.fit_linear_models

    def diverging(x, y, risk, **kw):
        if not callable(risk):
            raise DivergedError("`y_pred` (the model output) holds NaN, infinite or exploded "
                                "values")
        return original(x, y, risk, **kw)
    monkeypatch.setattr(linear_fit, "fit_linear_models", diverging)
    res, scores = _run(monkeypatch)
    _check(res, scores, reference)


def test_other_errors_of_the_group_are_raised(monkeypatch):
    def broken(x, y, risk, **kw):
        raise ValueError("bad `x`")
    monkeypatch.setattr(linear_fit, "fit_linear_models", broken)
    with pytest.raises(ValueError, match="bad `x`"):
        _run(monkeypatch)


# -- helpers fitted with the PUE group: Ratio's q̂ and θ̂ (IPS's θ̂), the recipe's first fit --

@pytest.fixture(scope="module")
def pue_stack():
    x, y = _data()
    return table1._stack(simulate.simulate_pue, x, y, CFG, ALPHA)


def _groups(st):
    """The PUE group with its helpers, fitted; and one whose fit fell back (no helpers)."""
    group = table1._Group(st, table1._specs(table1.PUE_GROUP, PRIOR, CFG), CFG,
                          table1._pue_helpers(st, CFG))
    fell_back = table1._Group(st, table1._specs(table1.PUE_GROUP, PRIOR, CFG), CFG,
                              table1._pue_helpers(st, CFG))
    fell_back.failed = True
    return group, fell_back


def test_ratio_and_ips_from_the_group_equal_their_own_fits(pue_stack):
    group, alone = _groups(pue_stack)
    assert group.helper("ratio") is not None and alone.helper("ratio") is None
    for method in (table1._ratio, table1._ips):
        np.testing.assert_allclose(method(pue_stack, CFG, group)(pue_stack.x_test),
                                   method(pue_stack, CFG, alone)(pue_stack.x_test),
                                   rtol=1e-4, atol=1e-4, err_msg=method.__name__)
    # the fallback fits q̂ and θ̂ on the sliced rows (baselines.fit_ratio): the models agree
    a, b = (table1._ratio_fit(pue_stack, CFG, g) for g in (group, alone))
    for part in ("q", "theta"):
        np.testing.assert_allclose(getattr(a, part).weights, getattr(b, part).weights,
                                   rtol=1e-4, atol=1e-5, err_msg=part)
    assert np.abs(a.theta.weights).max() > 0.05 and not np.allclose(a.q.weights, a.theta.weights)


def test_the_recipe_from_the_group_equals_the_recipe_alone(pue_stack):
    group, alone = _groups(pue_stack)
    helped, own = {}, {}
    f1 = table1._adpue_recipe(pue_stack, CFG, helped, group)
    f2 = table1._adpue_recipe(pue_stack, CFG, own, alone)
    np.testing.assert_allclose(f1(pue_stack.x_test), f2(pue_stack.x_test), rtol=1e-4, atol=1e-4)
    assert helped["ADPUE"] == own["ADPUE"] and helped["ADPUE-ref"] == own["ADPUE-ref"]
    # the group's helper is the fit of helper_models (the recipe's own first fit)
    labels, weight = linear_recipe.helper_models(pue_stack.y, table1.recipe_config(CFG))
    first = linear_fit.fit_linear_models(pue_stack.x, labels, risks.logit, steps=CFG.steps,
                                         learning_rate=CFG.learning_rate, l2=CFG.l2,
                                         sample_weight=weight)
    np.testing.assert_allclose(group.helper("recipe").weights, first.weights, rtol=1e-4,
                               atol=1e-5)
