"""One checklist for every loss class (Keras losses_test style)."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

import adpue_tf as adp

from serialization import assert_round_trip

LOSSES = [
    (adp.ADPUELoss, {}),
    (adp.ADPUELoss, {"gamma": 1.0, "beta": 0.1}),
    (adp.ADPELoss, {"prior": 0.3}),
    (adp.ADFPULoss, {"prior": 0.3}),
    (adp.ADSLoss, {}),
    (adp.ADSSLoss, {}),
    (adp.DoubleADSSLoss, {"alpha": 0.25}),
    (adp.AD3SELoss, {"alpha": 0.75}),
    (adp.LogitLoss, {}),
    (adp.UPULoss, {"prior": 0.4}),
    (adp.NNPULoss, {"prior": 0.4}),
    (adp.PNULoss, {"prior": 0.4, "eta": -0.3}),
    (adp.IPSLoss, {"clip": 0.1}),
    (adp.ExposureLikelihoodLoss, {}),
    (adp.ExposureBrierLoss, {}),
    (adp.ExposedPULoss, {"gamma": 1.0}),
]
IDS = [f"{c.__name__}{'-' + str(o) if o else ''}" for c, o in LOSSES]


@pytest.fixture
def batch(batch, cls):
    """The shared mixed batch cut to the rows ``cls`` reads (a loss refuses other sources)."""
    y, z = batch
    keep = np.isin(y[:, 2], [int(s) for s in (*cls.reads, *cls.ignores)])
    y, z = y[keep], z[keep]
    if getattr(cls, "needs_propensity", False):  # IPS, likelihood: θ̂ of each row in column 3
        theta = np.linspace(0.05, 0.95, len(y), dtype=np.float32)[:, None]
        y = np.concatenate([y, theta], axis=1)
    return y, z


def test_every_public_loss_is_checked():
    public = {getattr(adp, n) for n in adp.__all__}
    classes = {c for c in public if isinstance(c, type) and issubclass(c, adp.DebiasedLoss)}
    assert classes - {adp.DebiasedLoss} == {c for c, _ in LOSSES}


@pytest.mark.parametrize("cls,opts", LOSSES, ids=IDS)
class TestLossChecklist:
    def test_config_round_trip(self, cls, opts):
        loss = cls(from_logits=True, **opts)
        revived = assert_round_trip(loss)
        assert revived.from_logits is True
        for k, v in opts.items():
            assert revived.get_config()[k] == v

    def test_value_matches_risk_function(self, cls, opts, batch):
        y, z = batch
        loss = cls(from_logits=True, **opts)
        expected = cls.risk_fn(y, z, from_logits=True, **opts).risk
        np.testing.assert_allclose(float(loss(y, z)), float(expected), rtol=1e-6)

    def test_from_logits_both_ways(self, cls, opts, batch):
        y, z = batch
        with_logits = cls(from_logits=True, **opts)(y, z)
        probs = tf.sigmoid(tf.constant(z, tf.float64)).numpy().astype(np.float32)
        with_probs = cls(from_logits=False, **opts)(y, probs)
        np.testing.assert_allclose(float(with_probs), float(with_logits), rtol=1e-4, atol=1e-5)

    @pytest.mark.parametrize("from_logits", [True, False])
    def test_finite_at_extreme_logits(self, cls, opts, batch, from_logits):
        y, _ = batch
        z = np.where(np.arange(len(y)) % 2 == 0, 1e4, -1e4).astype(np.float32)[:, None]
        pred = z if from_logits else (z > 0).astype(np.float32)
        var = tf.Variable(pred)
        loss = cls(from_logits=from_logits, **opts)
        with tf.GradientTape() as tape:
            value = loss(y, var)
        grad = tape.gradient(value, var)
        assert np.isfinite(float(value))
        assert np.all(np.isfinite(grad.numpy()))

    def test_eager_equals_tf_function(self, cls, opts, batch):
        y, z = batch
        loss = cls(from_logits=True, **opts)
        eager = float(loss(y, z))
        graph = float(tf.function(loss)(tf.constant(y), tf.constant(z)))
        np.testing.assert_allclose(graph, eager, rtol=1e-6)

    def test_float16_predictions_computed_in_float32(self, cls, opts, batch):
        y, z = batch
        loss = cls(from_logits=True, **opts)
        value = loss(y, z.astype(np.float16))
        assert value.dtype == tf.float32
        np.testing.assert_allclose(float(value), float(loss(y, z.astype(np.float16).astype(np.float32))), rtol=1e-6)

    def test_keras_save_load_compiled_model(self, cls, opts, batch, tmp_path):
        y, z = batch
        x = np.random.default_rng(0).normal(size=(len(y), 3)).astype(np.float32)
        model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
        model.compile(optimizer="sgd", loss=cls(from_logits=True, **opts))
        model.fit(x, y, batch_size=len(y), epochs=1, verbose=0)
        before = model.evaluate(x, y, batch_size=len(y), verbose=0)
        path = tmp_path / "m.keras"
        model.save(path)
        loaded = keras.models.load_model(path)
        assert isinstance(loaded.loss, cls)
        assert loaded.loss.get_config() == model.loss.get_config()
        after = loaded.evaluate(x, y, batch_size=len(y), verbose=0)
        np.testing.assert_allclose(after, before, rtol=1e-6)


BAD_OPTIONS = [
    (adp.ADPELoss, {"prior": 0.0}, ValueError, "prior"),
    (adp.ADPELoss, {"prior": 1.0}, ValueError, "prior"),
    (adp.ADFPULoss, {"prior": -0.2}, ValueError, "prior"),
    (adp.NNPULoss, {"prior": float("nan")}, ValueError, "prior"),
    (adp.UPULoss, {"prior": "0.3"}, TypeError, "prior"),
    (adp.DoubleADSSLoss, {"alpha": 1.5}, ValueError, "alpha"),
    (adp.AD3SELoss, {"alpha": -0.1}, ValueError, "alpha"),
    (adp.ADPUELoss, {"beta": -0.01}, ValueError, "beta"),
    (adp.ADPUELoss, {"gamma": 0.0}, ValueError, "gamma"),
    (adp.NNPULoss, {"prior": 0.3, "gamma": 1.5}, ValueError, "gamma"),
    (adp.PNULoss, {"prior": 0.3, "eta": 2.0}, ValueError, "eta"),
    (adp.ADPUELoss, {"from_logits": 1}, TypeError, "from_logits"),
    (adp.ADPUELoss, {"non_negative": "yes"}, TypeError, "non_negative"),
]


@pytest.mark.parametrize("cls,opts,err,name", BAD_OPTIONS)
def test_bad_options(cls, opts, err, name):
    with pytest.raises(err, match=name):
        cls(**opts)


def test_bad_options_in_risk_functions():
    y = adp.pack_labels(adp.Source.PU, w=[1, 0])
    with pytest.raises(ValueError, match="prior"):
        adp.risks.nnpu(y, [[0.0], [0.0]], prior=1.2)


@pytest.mark.parametrize(
    "y,match",
    [
        (np.zeros((4, 2), np.float32), "y_true.*shape"),
        (np.zeros((4, 5), np.float32), "y_true.*shape"),
        (np.array([[1, 0, 7]] * 4, np.float32), "unknown source"),
        (np.array([[1, 0, 2.5]] * 4, np.float32), "unknown source"),
        (np.array([[0.5, 0, 0]] * 4, np.float32), "0 and 1"),
        (np.array([[np.nan, 0, 0]] * 4, np.float32), "NaN"),
        (np.array([[1, 0, 0, 1.5]] * 4, np.float32), "dagger"),
    ],
)
def test_bad_labels_eager(y, match):
    with pytest.raises(ValueError, match=match):
        adp.ADPUELoss(from_logits=True)(y, np.zeros((4, 1), np.float32))


def test_bad_labels_graph_mode_fail_loudly():
    loss = tf.function(adp.ADPUELoss(from_logits=True))
    y = np.array([[1, 0, 9]] * 4, np.float32)
    with pytest.raises(tf.errors.InvalidArgumentError, match="unknown source"):
        loss(tf.constant(y), tf.zeros((4, 1)))


def _swapped_and_stray():
    y = np.concatenate([adp.pack_labels(adp.Source.PU, w=[1, 0, 1, 0]),
                        adp.pack_labels(adp.Source.E, e=[1, 0, 1, 0])])
    swapped = y.copy()
    swapped[4:, 0], swapped[4:, 1] = y[4:, 1], 0  # the E rows' E in column w
    stray = y.copy()
    stray[:4, 1] = 1  # PU rows claiming an exposure
    unlabeled = np.concatenate([y, adp.pack_labels(adp.Source.U, n=2)])
    unlabeled[-1, 0] = 1  # an unlabeled row with a W
    return {"swapped": swapped, "stray e": stray, "U with w": unlabeled}


@pytest.mark.parametrize("case", ["swapped", "stray e", "U with w"])
def test_a_column_a_source_does_not_observe_must_be_0_eager_and_graph(case):
    """Swapped columns gave another risk silently (0.4995 against 0.4609 here)."""
    y = tf.constant(_swapped_and_stray()[case])
    z = tf.zeros((y.shape[0], 1))
    loss = adp.ADPUELoss(from_logits=True)
    with pytest.raises(ValueError, match="column w must be 0 on rows of a source that observes "
                                         "no W.*are the columns swapped"):
        loss(y, z)
    with pytest.raises(tf.errors.InvalidArgumentError, match="are the columns swapped"):
        tf.function(loss)(y, z)
    with pytest.raises(ValueError, match="are the columns swapped"):
        adp.labels.check_packed("y", y.numpy())


@pytest.mark.parametrize("make, pu", [(lambda: adp.ADSLoss(from_logits=True), False),
                                      (lambda: adp.ADSSLoss(from_logits=True), False),
                                      (lambda: adp.DoubleADSSLoss(alpha=0.5, from_logits=True),
                                       False),
                                      (lambda: adp.PNULoss(prior=0.3, from_logits=True), False),
                                      (lambda: adp.AD3SELoss(alpha=0.5, from_logits=True), True)],
                         ids=["ads", "adss", "double_adss", "pnu", "ad3se"])
def test_an_sse_row_with_w_but_no_exposure_is_refused_eager_and_graph(make, pu):
    """W = E·Y: an SSE row with w = 1 and e = 0 (columns swapped) gave another risk silently."""
    w, e = np.array([1, 0, 0, 1, 0, 0]), np.array([1, 1, 0, 1, 1, 0])
    more = [adp.pack_labels(adp.Source.PU, w=[1, 0, 0])] if pu else []
    swapped = adp.pack_labels(adp.Source.SSE, w=w, e=e)[:, [1, 0, 2]]  # e in column w
    y = np.concatenate([swapped, *more])
    z = tf.zeros((len(y), 1))
    loss = make()
    with pytest.raises(ValueError, match="column w must be 0 where column e is 0 on SSE rows"):
        loss(tf.constant(y), z)
    with pytest.raises(tf.errors.InvalidArgumentError, match="on SSE rows.*columns swapped"):
        tf.function(loss)(tf.constant(y), z)
    fine = np.concatenate([adp.pack_labels(adp.Source.SSE, w=w, e=e), *more])
    assert np.isfinite(float(tf.function(loss)(tf.constant(fine), z)))


def test_every_packed_source_keeps_the_unobserved_columns_at_0():
    y = np.concatenate([adp.pack_labels(adp.Source.PU, w=[1, 0]),
                        adp.pack_labels(adp.Source.E, e=[1, 0]),
                        adp.pack_labels(adp.Source.P, n=2), adp.pack_labels(adp.Source.U, n=2),
                        adp.pack_labels(adp.Source.SSE, w=[1, 0], e=[1, 1])])
    assert adp.labels.check_packed("y", y).shape == (10, 3)


def test_rows_that_differ_under_a_dynamic_batch_are_named_in_graph_mode():
    """A traced step whose batch size is open: TensorFlow's own shape error before."""
    y = np.concatenate([adp.pack_labels(adp.Source.PU, w=[1, 0, 1, 0]),
                        adp.pack_labels(adp.Source.E, e=[1, 0, 1, 0])])
    loss = adp.ADPUELoss(from_logits=True)
    step = tf.function(lambda a, b: loss(a, b), input_signature=[
        tf.TensorSpec([None, 3]), tf.TensorSpec([None, 1])])
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match="`y_true` and `y_pred` must have the same number of rows"):
        step(y, np.zeros((6, 1), np.float32))
    assert np.isfinite(float(step(y, np.zeros((8, 1), np.float32))))


@pytest.mark.parametrize("shape", [(4, 2), (4, 1, 1), (2, 1)])
def test_bad_prediction_shape(shape):
    y = np.concatenate([adp.pack_labels(adp.Source.PU, w=[1, 0]),
                        adp.pack_labels(adp.Source.E, e=[1, 0])])
    with pytest.raises(ValueError, match="y_pred"):
        adp.ADPUELoss(from_logits=True)(y, np.zeros(shape, np.float32))


def test_negative_sample_weight():
    y = np.concatenate([adp.pack_labels(adp.Source.PU, w=[1, 0]),
                        adp.pack_labels(adp.Source.E, e=[1, 0])])
    with pytest.raises(ValueError, match="sample_weight"):
        adp.ADPUELoss(from_logits=True)(y, np.zeros((4, 1), np.float32),
                                        np.array([1.0, -1.0, 1.0, 1.0]))


# --- one vocabulary: risk function, loss class and registry key -------------------------

import inspect  # noqa: E402
import json  # noqa: E402

from adpue_tf import losses as losses_lib  # noqa: E402
from adpue_tf import risks
from adpue_tf.labels import pack_p, pack_pu, pack_sse, pack_u  # noqa: E402

import reference as ref  # noqa: E402

#: The options that make each loss constructible (its required prior).
REQUIRED = {"adpe": {"prior": 0.3}, "adfpu": {"prior": 0.3}, "upu": {"prior": 0.4},
            "nnpu": {"prior": 0.4}, "pnu": {"prior": 0.4}}


def test_registry_holds_every_public_loss_by_its_risk_function_name():
    public = {c for c, _ in LOSSES}
    assert set(losses_lib.LOSSES.values()) == public
    assert list(losses_lib.LOSSES) == ["adpue", "adpe", "adfpu", "ads", "adss", "double_adss",
                                       "ad3se", "logit", "upu", "nnpu", "pnu", "ips",
                                       "exposure_likelihood", "exposure_brier", "exposed_pu"]
    with pytest.raises(TypeError):
        losses_lib.LOSSES["x"] = adp.ADPUELoss  # read-only


@pytest.mark.parametrize("key", list(losses_lib.LOSSES))
def test_function_class_and_key_agree(key):
    cls = losses_lib.LOSSES[key]
    fn = getattr(risks, key)
    assert cls.risk_fn is fn and key in risks.__all__
    # class name: the key without underscores, upper-cased as in DESIGN.md, plus "Loss"
    assert cls.__name__.lower() == key.replace("_", "") + "loss"
    loss = losses_lib.get(key, **REQUIRED.get(key, {}))
    assert type(loss) is cls and loss.name == f"{key}_loss"
    # same options, same defaults
    fn_params = {n: p.default for n, p in inspect.signature(fn).parameters.items()
                 if p.kind is p.KEYWORD_ONLY and n != "sample_weight"}
    cls_params = {n: p.default for n, p in inspect.signature(cls.__init__).parameters.items()
                  if p.kind is p.KEYWORD_ONLY and n not in ("reduction", "name")}
    assert cls_params == fn_params
    assert cls.option_names() == tuple(fn_params)


def test_defaults_that_used_to_differ():
    for fn in (risks.double_adss, risks.ad3se):
        assert inspect.signature(fn).parameters["alpha"].default == 0.5
    assert inspect.signature(risks.pnu).parameters["eta"].default == 0.0
    y = pack_sse([1, 0, 0], [1, 1, 0])
    z = np.array([[0.3], [-0.2], [1.1]], np.float32)
    assert float(risks.double_adss(y, z, from_logits=True).risk) == pytest.approx(
        float(adp.DoubleADSSLoss(from_logits=True)(y, z)), rel=1e-6)


def test_former_function_names_are_aliases():
    assert (risks.nnpue, risks.nnpe, risks.fpue) == (risks.adpue, risks.adpe, risks.adfpu)


@pytest.mark.parametrize("identifier,cls", [
    ("adpue", adp.ADPUELoss), ("ADPUE", adp.ADPUELoss), (" nnPU ", adp.NNPULoss),
    ("uPU", adp.UPULoss), ("Logit", adp.LogitLoss), ("double_adss", adp.DoubleADSSLoss),
    ("AD3SELoss", adp.AD3SELoss), ("adpue_tf>PNULoss", adp.PNULoss), (adp.ADSSLoss, adp.ADSSLoss),
])
def test_get_class(identifier, cls):
    assert losses_lib.get_class(identifier) is cls


def test_get_from_key_class_config_and_instance():
    loss = adp.losses.get("nnPU", prior=0.35, surrogate="sigmoid", from_logits=True, gamma=0.5)
    assert type(loss) is adp.NNPULoss
    assert loss.get_config() == {"name": "nnpu_loss", "reduction": "sum_over_batch_size",
                                 "from_logits": True, "prior": 0.35, "surrogate": "sigmoid",
                                 "non_negative": True, "beta": 0.0, "gamma": 0.5}
    blob = json.loads(json.dumps(keras.saving.serialize_keras_object(loss)))
    revived = adp.losses.get(blob)
    assert type(revived) is adp.NNPULoss and revived.get_config() == loss.get_config()
    assert adp.losses.get(loss) is loss
    assert adp.losses.get(adp.ADSLoss).get_config() == adp.ADSLoss().get_config()
    assert adp.losses.get({"class_name": "adpe", "config": {"prior": 0.2}}).get_config()[
        "prior"] == 0.2


def test_tuner_demo_and_benches_resolve_losses_in_the_registry():
    objectives = pytest.importorskip("adpue_tf.tuning.objectives")
    assert objectives.LOSSES is losses_lib.LOSSES
    assert objectives.loss_class("ADPE") is adp.ADPELoss
    from adpue_tf.experiments import table1
    assert table1._risk("ADPUE") is risks.adpue and table1._risk("uPU") is risks.upu


# --- reduction, call and the config -----------------------------------------------------

@pytest.mark.parametrize("reduction", ["sum", "none", None, "mean"])
def test_reduction_other_than_the_batch_mean_is_refused_with_the_reason(reduction):
    with pytest.raises(ValueError, match="group means.*sum_over_batch_size"):
        adp.ADPUELoss(reduction=reduction)
    with pytest.raises(ValueError, match="reduction"):
        adp.losses.get("upu", prior=0.3, reduction=reduction)


def test_no_per_row_call():
    # the risk is not a reduction of per-row losses: no `call` of our own
    assert all("call" not in vars(c) for c in (adp.DebiasedLoss, *losses_lib.LOSSES.values()))
    loss = adp.ADPUELoss(reduction="sum_over_batch_size")
    assert loss.reduction == "sum_over_batch_size"


#: Every option of every loss at a value other than its default.
ALL_OPTIONS = {
    "adpue": dict(non_negative=False, beta=0.1, gamma=0.5, dagger_gradient=True),
    "adpe": dict(prior=0.3, non_negative=False, beta=0.1, gamma=0.5, dagger_gradient=True),
    "adfpu": dict(prior=0.3, non_negative=False, beta=0.1, gamma=0.5, dagger_gradient=True),
    "ads": {},
    "adss": dict(dagger_gradient=True),
    "double_adss": dict(alpha=0.2, dagger_gradient=True),
    "ad3se": dict(alpha=0.2, non_negative=False, beta=0.1, gamma=0.5, dagger_gradient=True),
    "logit": {},
    "upu": dict(prior=0.4, surrogate="sigmoid"),
    "nnpu": dict(prior=0.4, surrogate="sigmoid", non_negative=False, beta=0.1, gamma=0.5),
    "pnu": dict(prior=0.4, eta=-0.5),
    "ips": dict(clip=0.2),
    "exposure_likelihood": {},
    "exposure_brier": {},
    "exposed_pu": dict(non_negative=False, beta=0.1, gamma=0.5),
}


@pytest.mark.parametrize("key", list(losses_lib.LOSSES))
def test_get_config_round_trips_every_option(key):
    cls = losses_lib.LOSSES[key]
    options = {**ALL_OPTIONS[key], "from_logits": True, "name": "mine"}
    assert set(options) == set(cls.option_names()) | {"name"}
    loss = cls(**options)
    config = loss.get_config()
    assert config == {**options, "reduction": "sum_over_batch_size"}
    revived = assert_round_trip(loss)
    assert revived.get_config() == config


# --- the sigmoid surrogate of uPU / nnPU ------------------------------------------------

def _pu_batch(seed=0):
    rng = np.random.default_rng(seed)
    y = np.concatenate([pack_pu(rng.integers(0, 2, 9)), pack_p(4), pack_u(5)])
    z = rng.normal(0.0, 2.0, (len(y), 1)).astype(np.float32)
    return y, z


def test_sigmoid_surrogate_value_by_hand():
    # P = {PU row with W=1}, U = {both PU rows}: z = (2, -1)
    y, z = pack_pu([1, 0]), np.array([[2.0], [-1.0]], np.float32)
    s = lambda v: 1.0 / (1.0 + np.exp(-v))  # noqa: E731
    r_pos = 0.4 * s(-2.0)
    r_neg = (s(2.0) + s(-1.0)) / 2 - 0.4 * s(2.0)
    terms = risks.upu(y, z, prior=0.4, surrogate="sigmoid", from_logits=True)
    np.testing.assert_allclose([float(terms.positive), float(terms.negative), float(terms.risk)],
                               [r_pos, r_neg, r_pos + r_neg], rtol=1e-6)


@pytest.mark.parametrize("name,opts", [
    ("upu", {"prior": 0.3}),
    ("nnpu", {"prior": 0.3}),
    ("nnpu", {"prior": 0.7}),                       # R- < 0: the correction fires
    ("nnpu", {"prior": 0.7, "gamma": 0.5, "beta": 0.01}),
    ("nnpu", {"prior": 0.7, "non_negative": False}),
])
@pytest.mark.parametrize("seed", [0, 1])
def test_sigmoid_surrogate_values_and_gradients_match_the_reference(name, opts, seed):
    y, z = _pu_batch(seed)
    opts = {**opts, "surrogate": "sigmoid"}
    risk, pos, neg, fired = ref.value(name, y, z, **opts)
    loss = losses_lib.get(name, from_logits=True, **opts)
    terms = loss.terms(y, z)
    np.testing.assert_allclose(
        [float(terms.risk), float(terms.positive), float(terms.negative), float(terms.fired)],
        [risk, pos, neg, fired], rtol=1e-5, atol=1e-6)
    var = tf.Variable(z)
    with tf.GradientTape() as tape:
        value = loss(y, var)
    grad = tape.gradient(value, var).numpy().reshape(-1)
    expected = ref.num_grad(lambda zz: ref.objective(name, y, zz, None, **opts), z)
    np.testing.assert_allclose(grad, expected, rtol=1e-4, atol=1e-6)
    graph = tf.function(lambda a, b: loss(a, b))(tf.constant(y), tf.constant(z))
    np.testing.assert_allclose(float(graph), float(value), rtol=1e-6)


def test_sigmoid_differs_from_logistic_and_logistic_is_the_default():
    y, z = _pu_batch(3)
    default = adp.NNPULoss(prior=0.3, from_logits=True)
    assert default.get_config()["surrogate"] == "logistic"
    logistic = ref.value("nnpu", y, z, prior=0.3)[0]
    sigmoid = ref.value("nnpu", y, z, prior=0.3, surrogate="sigmoid")[0]
    assert abs(logistic - sigmoid) > 0.05
    np.testing.assert_allclose(float(default(y, z)), logistic, rtol=1e-5)
    np.testing.assert_allclose(
        float(adp.NNPULoss(prior=0.3, surrogate="sigmoid", from_logits=False)(
            y, 1.0 / (1.0 + np.exp(-z)))), sigmoid, rtol=1e-4)


@pytest.mark.parametrize("value,err", [("hinge", ValueError), ("Sigmoid", ValueError),
                                       (1, TypeError), (None, TypeError)])
def test_bad_surrogate(value, err):
    with pytest.raises(err, match="surrogate"):
        adp.UPULoss(prior=0.3, surrogate=value)
    with pytest.raises(err, match="surrogate"):
        risks.nnpu(pack_pu([1, 0]), [[0.0], [0.0]], prior=0.3, surrogate=value)


# --- wrong data, from_logits, non-finite values, checks in graph mode ------------

from adpue_tf.labels import pack_e  # noqa: E402


def _pue(w=(1, 0), e=(1, 0)):
    return np.concatenate([pack_pu(list(w)), pack_e(list(e))])


WRONG_DATA = [
    # (loss, labels, sources found in the message)
    (adp.ADPUELoss(from_logits=True), pack_sse([1, 0, 0], [1, 1, 0]), "SSE: 3"),
    (adp.ADSLoss(from_logits=True), _pue(), "PU: 2, E: 2"),
    (adp.ADSSLoss(from_logits=True), _pue(), "PU: 2, E: 2"),
    (adp.DoubleADSSLoss(from_logits=True), _pue(), "PU: 2, E: 2"),
    (adp.ADPELoss(prior=0.3, from_logits=True), _pue(), "PU: 2, E: 2"),
    (adp.ADPELoss(prior=0.3, from_logits=True), pack_e([1, 0]), "E: 2"),   # no P rows
    (adp.ADPUELoss(from_logits=True), pack_pu([1, 0]), "PU: 2"),            # no E rows
    (adp.ADFPULoss(prior=0.3, from_logits=True), np.concatenate([pack_u(2), pack_e([1, 0])]),
     "E: 2, U: 2"),
    (adp.NNPULoss(prior=0.3, from_logits=True), pack_sse([1, 0], [1, 1]), "SSE: 2"),
]


@pytest.mark.parametrize("loss,y,found", WRONG_DATA,
                         ids=[f"{type(c[0]).__name__}-{c[2]}" for c in WRONG_DATA])
def test_wrong_data_for_the_loss_is_refused_in_eager_and_graph_mode(loss, y, found):
    name = type(loss).__name__
    z = np.zeros((len(y), 1), np.float32)
    with pytest.raises(ValueError) as info:
        loss(y, z)
    message = str(info.value)
    assert message.startswith(f"{name} reads rows of source(s) ")
    assert f"the batch holds rows of {found}." in message
    for source in loss.reads:
        assert source.name in message.split(";")[0]
    with pytest.raises(tf.errors.InvalidArgumentError, match=f"{name} reads rows of source"):
        tf.function(lambda a, b: loss(a, b))(tf.constant(y), tf.constant(z))


def test_wrong_data_stops_a_fit():
    """ADPUELoss on sse_dataset batches used to train to loss 0.0 without a word."""
    x = np.random.default_rng(0).normal(size=(40, 2)).astype(np.float32)
    ds = adp.data.sse_dataset(x, [1, 0] * 20, [1, 1] * 20, batch_size=20, seed=0)
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile("sgd", loss=adp.ADPUELoss(from_logits=True))
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"ADPUELoss reads rows of "
                       r"source\(s\) PU, E.*Rows per source \(PU, E, P, U, SSE\):\] \[0 0 0 0 20\]"):
        model.fit(ds, epochs=1, verbose=0)


def test_declared_sources_match_the_reference_and_tolerated_rows_are_left_out():
    assert adp.ADPUELoss.reads == (adp.Source.PU, adp.Source.E)
    assert adp.LogitLoss.ignores == (adp.Source.E,)
    # Logit on PUE batches (the benches' baseline): E rows are left out.
    y = _pue(w=(1, 0, 1), e=(1, 0))
    z = np.array([[0.3], [-1.2], [2.0], [0.7], [-0.4]], np.float32)
    np.testing.assert_allclose(float(adp.LogitLoss(from_logits=True)(y, z)),
                               ref.value("logit", y, z)[0], rtol=1e-6)
    # ADS on 3SE batches (the tuner's l_risk on AD3SE data): PU rows are left out.
    y3 = np.concatenate([pack_sse([1, 0, 0], [1, 1, 0]), pack_pu([1, 0])])
    np.testing.assert_allclose(float(adp.ADSLoss(from_logits=True)(y3, z)),
                               ref.value("ads", y3, z)[0], rtol=1e-6)


def test_logits_with_from_logits_false_are_refused():
    y, z = _pue(), np.array([[2.5], [-1.0], [0.2], [0.4]], np.float32)
    loss = adp.ADPUELoss()  # from_logits=False, the Keras default
    with pytest.raises(ValueError, match=r"outside \[0, 1\].*from_logits=False.*Got min -1, max 2.5"):
        loss(y, z)
    with pytest.raises(tf.errors.InvalidArgumentError, match="from_logits=False"):
        tf.function(lambda a, b: loss(a, b))(tf.constant(y), tf.constant(z))


def test_sigmoid_output_with_from_logits_true_is_refused_in_fit():
    x = np.random.default_rng(0).normal(size=(4, 2)).astype(np.float32)
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1, activation="sigmoid")])
    model.compile("sgd", loss=adp.ADPUELoss(from_logits=True))
    with pytest.raises(ValueError, match="sigmoid activation.*from_logits=True"):
        model.fit(x, _pue(), verbose=0)
    with pytest.raises(ValueError, match="sigmoid activation.*from_logits=True"):
        model.evaluate(x, _pue(), verbose=0)
    # the same model with from_logits=False trains
    model.compile("sgd", loss=adp.ADPUELoss(from_logits=False))
    assert np.isfinite(model.fit(x, _pue(), verbose=0).history["loss"][0])


def test_infinite_logits_give_the_limit_loss_and_no_silent_step():
    """±inf logits used to give NaN (0·inf); they now count as ±1e4 (MAX_LOGIT).

    A training step on them is refused: beyond the clip they get no gradient.
    """
    y = _pue(w=(1, 0), e=(1, 0))
    z = np.array([[np.inf], [-np.inf], [np.inf], [-np.inf]], np.float32)
    var = tf.Variable(z)
    loss = adp.ADPUELoss(from_logits=True, non_negative=False)
    with tf.GradientTape() as tape:
        value = loss(y, var)
    # correct side everywhere: ℓ1(+inf) = ℓ0(-inf) = 0, and a = f†·(1-E) = σ(-inf) = 0
    assert float(value) == 0.0
    wrong = loss(y, -z)  # wrong side: the loss of logits ±1e4, ℓ = 1e4 per row
    np.testing.assert_allclose(float(wrong), ref.value("nnpue", y, -np.clip(z, -1e4, 1e4),
                                                       non_negative=False)[0], rtol=1e-6)
    assert 1e3 < float(wrong) < 1e5
    graph = tf.function(lambda a, b: loss(a, b))(tf.constant(y), tf.constant(-z))
    assert float(graph) == float(wrong)
    with pytest.raises(ValueError, match="exploded values"):
        tape.gradient(value, var)
    finite = tf.Variable(np.clip(z, -1e4, 1e4))  # the bound itself still trains
    with tf.GradientTape() as tape:
        value = loss(y, finite)
    assert np.all(np.isfinite(tape.gradient(value, finite).numpy()))


def test_nan_logits_give_a_clear_error_not_a_nan_loss():
    y = _pue()
    z = np.array([[np.nan], [0.0], [0.0], [0.0]], np.float32)
    loss = adp.ADPUELoss(from_logits=True)
    with pytest.raises(ValueError, match="ADPUELoss: the loss is NaN or infinite"):
        loss(y, z)
    with pytest.raises(tf.errors.InvalidArgumentError, match="ADPUELoss: the loss is NaN"):
        tf.function(lambda a, b: loss(a, b))(tf.constant(y), tf.constant(z))


@pytest.mark.parametrize("mode", ["eager", "graph"])
def test_gradient_through_exploded_logits_is_refused(mode):
    """A step on outputs beyond ±1e4 (huge features) would give those rows no gradient."""
    y = _pue()
    var = tf.Variable(np.array([[3e30], [0.0], [0.0], [0.0]], np.float32))
    loss = adp.ADPUELoss(from_logits=True)

    def grad(a):
        with tf.GradientTape() as tape:
            value = loss(a, var)
        return tape.gradient(value, var)

    fn = grad if mode == "eager" else tf.function(grad)
    err = ValueError if mode == "eager" else tf.errors.InvalidArgumentError
    with pytest.raises(err, match=r"model output\) holds NaN, infinite or exploded values"):
        fn(tf.constant(y))


@pytest.mark.parametrize("dagger,match", [(np.nan, "NaN"), (3.0, "dagger")])
def test_bad_dagger_column_in_eager_and_graph_mode(dagger, match):
    y = np.concatenate([_pue(), np.array([[0.5], [dagger], [0.5], [0.5]], np.float32)], axis=1)
    z = np.zeros((4, 1), np.float32)
    loss = adp.ADPUELoss(from_logits=True)
    with pytest.raises(ValueError, match=match):
        loss(y, z)
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"column 3 \(dagger"):
        tf.function(lambda a, b: loss(a, b))(tf.constant(y), tf.constant(z))


@pytest.mark.parametrize("weights,eager,graph", [
    ([1.0, -1.0, 1.0, 1.0], "non-negative", "finite and non-negative"),
    ([-1.0] * 4, "non-negative", "finite and non-negative"),
    ([1.0, np.nan, 1.0, 1.0], "NaN", "finite and non-negative"),
    ([1.0, 1.0, 1.0], "has 3 values but the batch has 4 rows", "one weight per row"),
])
def test_bad_sample_weight_in_eager_and_graph_mode(weights, eager, graph):
    y, z = _pue(), np.zeros((4, 1), np.float32)
    loss = adp.ADPUELoss(from_logits=True)
    sw = np.asarray(weights, np.float32)
    with pytest.raises(ValueError, match=eager):
        loss(y, z, sw)
    fn = tf.function(lambda a, b, c: loss(a, b, c),
                     input_signature=[tf.TensorSpec([None, 3]), tf.TensorSpec([None, 1]),
                                      tf.TensorSpec([None])])
    with pytest.raises(tf.errors.InvalidArgumentError, match=graph):
        fn(tf.constant(y), tf.constant(z), tf.constant(sw))


def test_negative_sample_weight_stops_a_fit():
    """All -1 weights used to train silently (loss 0.8585) inside fit."""
    x = np.random.default_rng(0).normal(size=(4, 2)).astype(np.float32)
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile("sgd", loss=adp.ADPUELoss(from_logits=True))
    before = model.get_weights()
    with pytest.raises(tf.errors.InvalidArgumentError, match="sample_weight"):
        model.fit(x, _pue(), sample_weight=-np.ones(4, np.float32), verbose=0)
    for a, b in zip(before, model.get_weights()):
        np.testing.assert_array_equal(a, b)
