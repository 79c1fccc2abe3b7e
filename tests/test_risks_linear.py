"""`risks.linear_form`: a risk from coefficients computed once equals the risk itself.

Values are checked against the independent NumPy references of tests/reference.py
(float64), gradients against the risk function's own gradient, per model, in eager
and graph mode.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from adpue_tf import losses, risks
from adpue_tf.labels import pack_e, pack_p, pack_pu, pack_sse, pack_u

import reference as ref

MODELS, ROWS = 3, 24


def _labels(kind: str, rng: np.random.Generator) -> np.ndarray:
    """One model's packed labels of ``kind``'s layout, 6 rows per part."""
    b = lambda: rng.random(6) < 0.5  # noqa: E731
    parts = {
        "pue": [pack_pu(b()), pack_pu(b()), pack_e(b()), pack_e(b())],
        "pe": [pack_p(6), pack_p(6), pack_e(b()), pack_e(b())],
        "fpu": [pack_p(6), pack_u(6), pack_e(b()), pack_e(b())],
        "sse": [pack_sse(*(lambda w, e: (w & e, e))(b(), b())) for _ in range(4)],
        "3se": [pack_sse(*(lambda w, e: (w & e, e))(b(), b())) for _ in range(2)]
        + [pack_pu(b()), pack_pu(b())],
        "pu": [pack_pu(b()), pack_p(6), pack_u(6), pack_pu(b())],
        "logit": [pack_pu(b()), pack_pu(b()), pack_sse(b(), np.ones(6, bool)), pack_pu(b())],
    }[kind]
    return np.concatenate(parts).astype(np.float32)


#: (risk, reference name, label layout, with f† column, options)
CASES = [
    (risks.adpue, "nnpue", "pue", True, {"gamma": 1.0}),
    (risks.adpue, "nnpue", "pue", True, {"gamma": None, "beta": 0.05}),
    (risks.adpue, "nnpue", "pue", True, {"non_negative": False}),
    (risks.adpe, "nnpe", "pe", True, {"prior": 0.4, "gamma": 0.5}),
    (risks.adfpu, "fpue", "fpu", True, {"prior": 0.3}),
    (risks.ads, "ads", "sse", False, {}),
    (risks.adss, "adss", "sse", True, {}),
    (risks.double_adss, "double_adss", "sse", True, {"alpha": 0.3}),
    (risks.ad3se, "ad3se", "3se", True, {"alpha": 0.5, "gamma": 1.0}),
    (risks.logit, "logit", "logit", False, {}),
    (risks.upu, "upu", "pu", False, {"prior": 0.4}),
    (risks.nnpu, "nnpu", "pu", False, {"prior": 0.6, "gamma": 1.0}),
    (risks.pnu, "pnu", "sse", False, {"prior": 0.4, "eta": 0.5}),
    (risks.pnu, "pnu", "sse", False, {"prior": 0.4, "eta": -0.5}),
    # the sigmoid surrogate (bases σ(∓z)) and f† = σ(z) without gradient (3 columns)
    (risks.upu, "upu", "pu", False, {"prior": 0.4, "surrogate": "sigmoid"}),
    (risks.nnpu, "nnpu", "pu", False, {"prior": 0.6, "gamma": 1.0, "surrogate": "sigmoid"}),
    (risks.adpue, "nnpue", "pue", False, {"gamma": 1.0}),
    (risks.adss, "adss", "sse", False, {}),
    (risks.ad3se, "ad3se", "3se", False, {"alpha": 0.5, "gamma": 1.0}),
    (risks.adpe, "nnpe", "pe", False, {"prior": 0.4}),
]


def _data(kind: str, dagger: bool, seed: int = 0):
    rng = np.random.default_rng(seed)
    y = np.stack([_labels(kind, rng) for _ in range(MODELS)])
    if dagger:
        y = np.concatenate([y, rng.random((MODELS, ROWS, 1)).astype(np.float32)], axis=-1)
    sw = (rng.random((MODELS, ROWS)) < 0.8).astype(np.float32)  # 0/1: a row in or out
    sw[:, ::6] = 1.0  # every part keeps a row
    z = rng.normal(scale=2.0, size=(MODELS, ROWS)).astype(np.float32)
    return y, sw, z


def _ref_value(name, y, sw, z, opts):
    keep = sw > 0
    return ref.value(name, y[keep], z[keep], **opts)[0]


@pytest.mark.parametrize("graph", [False, True], ids=["eager", "graph"])
@pytest.mark.parametrize("risk,name,kind,dagger,opts", CASES,
                         ids=[f"{c[1]}-{i}" for i, c in enumerate(CASES)])
def test_value_and_gradient_equal_the_risk(risk, name, kind, dagger, opts, graph):
    y, sw, z = _data(kind, dagger)
    form = risks.linear_form(risk, **opts)

    def fast(z_):
        with tf.GradientTape() as tape:
            tape.watch(z_)
            value = form.loss(form.coefficients(y, sw), z_)
            total = tf.reduce_sum(value)
        return value, tape.gradient(total, z_)

    run = tf.function(fast) if graph else fast
    value, grad = (t.numpy() for t in run(tf.constant(z)))
    for m in range(MODELS):
        want = _ref_value(name, y[m], sw[m], z[m], opts)
        np.testing.assert_allclose(value[m], want, rtol=2e-6, atol=1e-6)
        zm = tf.constant(z[m])
        with tf.GradientTape() as tape:
            tape.watch(zm)
            loss = risk(y[m], zm, from_logits=True, sample_weight=sw[m], **opts).loss
        np.testing.assert_allclose(grad[m], tape.gradient(loss, zm).numpy(), rtol=1e-5,
                                   atol=1e-7)


def test_ips_value_equals_the_reference():
    """IPS: ``Ê_PU[t·ℓ1 + (1-t)·ℓ0]``, ``t = W/max(θ̂, clip)`` (θ̂ in column 3)."""
    y, sw, z = _data("pue", True, seed=3)
    y[..., 2] = 0.0  # every row a PU row (which observes no E)
    y[..., 1] = 0.0
    form = risks.linear_form(risks.ips, clip=0.2)
    value = form.loss(form.coefficients(y, np.ones_like(sw)), z).numpy()
    for m in range(MODELS):
        t = y[m, :, 0] / np.maximum(y[m, :, 3], 0.2)
        want = np.mean(t * ref.l1(z[m].astype(np.float64)) + (1 - t) * ref.l0(z[m]))
        np.testing.assert_allclose(value[m], want, rtol=2e-6)


@pytest.mark.parametrize("risk,opts,kind,dagger", [
    (risks.adpue, {"dagger_gradient": True}, "pue", False),   # f† = σ(z) with its gradient
    (risks.adss, {"dagger_gradient": True}, "sse", False),
    (risks.ips, {}, "pue", False),                             # no θ̂ column
])
def test_parts_that_are_not_linear_give_none(risk, opts, kind, dagger):
    y, sw, _ = _data(kind, dagger)
    assert risks.linear_form(risk, **opts).coefficients(y, sw) is None
    if dagger is False and "dagger_gradient" in opts:  # with f† given, they are linear
        y4, sw4, _ = _data(kind, True)
        assert risks.linear_form(risk, **opts).coefficients(y4, sw4) is not None


def test_risks_without_parts_have_no_form():
    assert risks.linear_form(risks.exposure_likelihood) is None
    assert risks.linear_form(lambda *a, **k: None) is None


def test_bad_options_and_labels_are_refused():
    with pytest.raises(ValueError, match="gamma"):
        risks.linear_form(risks.adpue, gamma=2.0)
    with pytest.raises(ValueError, match="prior"):
        risks.linear_form(risks.nnpu, prior=1.5)
    y, sw, z = _data("pue", True)
    bad = y.copy()
    bad[0, 0, 0] = 2.0
    form = risks.linear_form(risks.adpue)
    with pytest.raises(ValueError, match="only 0 and 1"):
        form.coefficients(bad, sw)
    with pytest.raises(tf.errors.InvalidArgumentError, match="only 0 and 1"):
        tf.function(lambda a, b: form.coefficients(a, b).terms[0]["l1"])(tf.constant(bad), tf.constant(sw))
    with pytest.raises(ValueError, match="sample_weight"):
        form.coefficients(y, -sw)
    with pytest.raises(ValueError, match="models, rows"):
        form.coefficients(y[0], sw[0])


def test_a_step_on_exploded_logits_stops_with_the_divergence_error():
    y, sw, z = _data("pue", True)
    form = risks.linear_form(risks.adpue, gamma=1.0)
    z[1, 3] = np.nan

    @tf.function
    def grad(z_):
        with tf.GradientTape() as tape:
            tape.watch(z_)
            total = tf.reduce_sum(form.loss(form.coefficients(y, sw), z_))
        return tape.gradient(total, z_)

    with pytest.raises(tf.errors.InvalidArgumentError) as info:
        grad(tf.constant(z))
    assert losses.is_divergence(info.value) and "min " in str(info.value)


def test_exploded_logits_are_refused_in_eager_mode_too():
    y, sw, z = _data("pue", True)
    form = risks.linear_form(risks.adpue)
    z[0, 0] = 2e4  # beyond the clip of ±1e4
    with pytest.raises(ValueError) as info:
        form.loss(form.coefficients(y, sw), z)
    assert losses.is_divergence(info.value) and "max 2e+04" in str(info.value)


@pytest.mark.parametrize("case", [0, 8, 11, 16], ids=lambda i: CASES[i][1])
def test_the_xla_fused_loss_equals_the_plain_one(case):
    """``jit_compile=True``: value and gradient from one XLA program, as without it."""
    risk, _, kind, dagger, opts = CASES[case]
    y, sw, z = _data(kind, dagger, seed=5)
    form = risks.linear_form(risk, **opts)
    weights = tf.constant([0.5, 1.0, 2.0])  # an upstream gradient per model

    @tf.function
    def run(z_, jit):
        coef = form.coefficients(y, sw)
        with tf.GradientTape() as tape:
            tape.watch(z_)
            value = form.loss(coef, z_, jit_compile=jit)
            total = tf.reduce_sum(weights * value)
        return value, tape.gradient(total, z_)

    plain = [t.numpy() for t in run(tf.constant(z), False)]
    fused = [t.numpy() for t in run(tf.constant(z), True)]
    np.testing.assert_allclose(fused[0], plain[0], rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(fused[1], plain[1], rtol=1e-4, atol=1e-7)
    assert np.abs(plain[1]).max() > 1e-3  # a gradient that moves
    z[2, 0] = np.inf
    with pytest.raises(tf.errors.InvalidArgumentError) as info:
        run(tf.constant(z), True)
    assert losses.is_divergence(info.value)


@pytest.mark.parametrize("jit", [False, True], ids=["plain", "xla"])
@pytest.mark.parametrize("case", [0, 9, 14, 16], ids=lambda i: CASES[i][1])
def test_rows_along_another_axis_give_the_same_loss_and_gradient(case, jit):
    """``rows_axis``: logits and coefficients ``(trials, rows, models)`` = ``(models, rows)``."""
    risk, _, kind, dagger, opts = CASES[case]
    y, sw, z = _data(kind, dagger, seed=7)          # 3 "models" = 1 trial x 3
    form = risks.linear_form(risk, **opts)
    coef = form.coefficients(y, sw)
    moved = type(coef)(
        tuple({b: tf.transpose(c)[None] for b, c in t.items()} for t in coef.terms),
        tuple(None if c is None else c[None] for c in coef.constant))

    @tf.function
    def run(z_, coef_, axis):
        with tf.GradientTape() as tape:
            tape.watch(z_)
            value = form.loss(coef_, z_, jit_compile=jit, rows_axis=axis)
            total = tf.reduce_sum(tf.reshape(value, (-1,)) * tf.constant([0.5, 1.0, 2.0]))
        return value, tape.gradient(total, z_)

    value, grad = run(tf.constant(z), coef, -1)
    value_t, grad_t = run(tf.constant(z.T[None]), moved, 1)
    assert value_t.shape == (1, MODELS)
    np.testing.assert_allclose(value_t.numpy()[0], value.numpy(), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(grad_t.numpy()[0].T, grad.numpy(), rtol=1e-5, atol=1e-8)
    np.testing.assert_allclose(value.numpy(), [_ref_value(CASES[case][1], y[m], sw[m], z[m],
                                                          opts) for m in range(MODELS)],
                               rtol=1e-4, atol=1e-5)


def test_a_bad_rows_axis_is_refused():
    form = risks.linear_form(risks.logit)
    y, sw, z = _data("logit", False)
    coef = form.coefficients(y, sw)
    with pytest.raises(ValueError, match="`rows_axis` 2 is out of range"):
        form.loss(coef, z, rows_axis=2)
    with pytest.raises(TypeError, match="`rows_axis` must be an int"):
        form.loss(coef, z, rows_axis=1.0)
