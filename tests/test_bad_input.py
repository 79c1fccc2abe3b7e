"""The bad-input audit, made permanent: one table per public entry point.

Each case is ``(id, call, expected)``: ``call`` is a zero-argument function that
uses the public API as a user would, and ``expected`` is
``(ErrorType, "words the message must contain")``. A case that must succeed
says so in its own test. Every entry point of the library has a table here
(builders, losses, model, callbacks, serving, loaders, tuner, CLI); module
tests keep the finer checks.
"""

from __future__ import annotations

import re

import pytest


def run_case(call, expected):
    """Call ``call()``; it must raise ``expected[0]`` with ``expected[1]`` in its message."""
    error, words = expected
    with pytest.raises(error) as info:
        call()
    message = str(info.value)
    assert re.search(words, message), f"{message!r} does not match {words!r}"
    return message

# Sections below, one per entry point.


# ------------------------------------------------------------------ data builders, pack_labels, loaders
# (adpue_tf.data, adpue_tf.labels, adpue_tf.experiments.datasets). Each call takes a
# scratch directory for the loaders' files; the network is never reached.

import gzip as _gzip  # noqa: E402

import numpy as _np  # noqa: E402

import adpue_tf as _adpc  # noqa: E402
from adpue_tf.experiments import datasets as _datasets  # noqa: E402

_RNG = _np.random.default_rng(0)
_XA, _XB = _RNG.normal(size=(12, 3)), _RNG.normal(size=(8, 3))
_WA, _EB = _np.arange(12) % 2, _np.arange(8) % 3 == 0


def _file(name, content):
    """A loader call on a scratch directory holding one file ``name`` with ``content``."""
    def write(tmp):
        (tmp / name).write_bytes(content)
        return tmp
    return write


class _Table:
    """A table as pandas hands one over (``columns``, ``dtypes``, ``__array__``), without pandas."""

    def __init__(self, **columns):
        self._columns = {k: _np.asarray(v) for k, v in columns.items()}
        self.columns = list(self._columns)
        self.dtypes = [v.dtype for v in self._columns.values()]

    def __array__(self, dtype=None, copy=None):
        return _np.array(list(zip(*self._columns.values())), dtype=object)


def _fashion(tmp, n_images=5, n_labels=3):
    for split in ("train", "t10k"):
        for stem, arr in (("images-idx3", _np.zeros((n_images, 28, 28), _np.uint8)),
                          ("labels-idx1", _np.zeros(n_labels, _np.uint8))):
            raw = bytes([0, 0, 8, arr.ndim]) + _np.array(arr.shape, ">u4").tobytes()
            (tmp / f"{split}-{stem}-ubyte.gz").write_bytes(_gzip.compress(raw + arr.tobytes()))
    return tmp


DATA_CASES = [
    # builders
    ("pue e all 0", lambda t: _adpc.data.pue_dataset(_XA, _WA, _XB, _np.zeros(8)),
     (ValueError, r"`e` holds no exposure \(all 8 values are 0\)")),
    ("sse_pu e_sse all 0", lambda t: _adpc.data.sse_pu_dataset(_XA, 0 * _WA, 0 * _WA, _XB, _EB),
     (ValueError, "`e_sse` holds no exposure")),
    ("pue zero-width x_pu", lambda t: _adpc.data.pue_dataset(_XA[:, :0], _WA, _XB, _EB),
     (ValueError, "`x_pu` has zero-width features")),
    ("pe complex x_p", lambda t: _adpc.data.pe_dataset(_XA * 1j, _XB, _EB),
     (TypeError, "`x_p` must hold real numbers")),
    ("pue ragged x_e", lambda t: _adpc.data.pue_dataset(_XA, _WA, [[1.0, 2.0], [3.0]], [1, 0]),
     (ValueError, "`x_e` is ragged")),
    ("fpue 1e39 in x_u", lambda t: _adpc.data.fpue_dataset(_XA, _XB * 1e39, _XB, _EB),
     (ValueError, "`x_u` holds .*beyond the float32 range")),
    ("sse w where e is 0", lambda t: _adpc.data.sse_dataset(_XA, _np.ones(12), _WA),
     (ValueError, "`w` must be 0 where `e` is 0")),
    ("pue batch_size 0", lambda t: _adpc.data.pue_dataset(_XA, _WA, _XB, _EB, batch_size=0),
     (ValueError, "`batch_size` must be at least 2")),
    ("pue shares of 3", lambda t: _adpc.data.pue_dataset(_XA, _WA, _XB, _EB, shares=[1, 1, 1]),
     (ValueError, r"`shares` needs 2 weight\(s\)")),
    # structured features and TFRecord logs
    ("pue dict keys differ", lambda t: _adpc.data.pue_dataset(
        {"id": _np.arange(12), "ctx": _XA}, _WA, {"id": _np.arange(8)}, _EB),
     (ValueError, "Feature structures differ: `x_pu` rows are .* but `x_e` rows are")),
    ("pue dict leaf with NaN", lambda t: _adpc.data.pue_dataset(
        {"ctx": _XA * _np.nan}, _WA, {"ctx": _XB}, _EB),
     (ValueError, r'`x_pu\["ctx"\]` contains 36 NaN')),
    ("read_tfrecords no file", lambda t: _adpc.data.read_tfrecords(
        str(t / "*.tfrecord"), {"id": __import__("tensorflow").io.FixedLenFeature([], "int64")}),
     (FileNotFoundError, r"`files`: no file matches '.*\*\.tfrecord'")),
    ("pue SciPy sparse x_pu", lambda t: _adpc.data.pue_dataset(
        __import__("scipy.sparse").sparse.csr_matrix(_XA), _WA, _XB, _EB),
     (TypeError, r"`x_pu` is a sparse matrix \(SciPy csr_matrix\); pass a dense array: "
                 r"`x\.toarray\(\)`")),
    ("pue dict leaf tf.SparseTensor", lambda t: _adpc.data.pue_dataset(
        {"ctx": _XA}, _WA, {"ctx": __import__("tensorflow").sparse.from_dense(_XB)}, _EB),
     (TypeError, r'`x_e\["ctx"\]` is a sparse matrix \(tf\.SparseTensor\)')),
    ("pue strings mixed with floats in x_pu", lambda t: _adpc.data.pue_dataset(
        _np.array([[0.5, "a"]] * 12, dtype=object), _WA, _XB, _EB),
     (TypeError, r"`x_pu` mixes strings with float values: one array of features holds one "
                 r"kind\. Encode the text as numbers, or pass a dict of features")),
    ("pue a table with a text column as x_e", lambda t: _adpc.data.pue_dataset(
        _XA, _WA, _Table(age=_XB[:, 0], city=["Oslo"] * 8, n=_np.arange(8)), _EB),
     (TypeError, r"`x_e` mixes strings with float(64)? values \(the non-numeric columns: "
                 r"\['city'\]\)")),
    ("pue objects that are not numbers nor strings", lambda t: _adpc.data.pue_dataset(
        _np.array([[None]] * 12), _WA, _XB, _EB),
     (TypeError, r"`x_pu` must be numeric, got dtype object\.")),
    # pack_labels
    ("pack_labels SciPy sparse w", lambda t: _adpc.pack_labels(
        _adpc.Source.PU, w=__import__("scipy.sparse").sparse.csr_array(_WA[:, None])),
     (TypeError, r"`w` is a sparse matrix \(SciPy csr_array\)")),
    ("pack_labels n=2.7", lambda t: _adpc.pack_labels(_adpc.Source.P, n=2.7),
     (TypeError, r"`n` must be an int, got 2\.7")),
    ("pack_labels n=0", lambda t: _adpc.pack_labels(_adpc.Source.U, n=0),
     (ValueError, "`n` must be at least 1")),
    ("pack_labels ragged w", lambda t: _adpc.pack_labels(_adpc.Source.PU, w=[[1], [0, 1]]),
     (ValueError, "`w` is ragged")),
    ("pack_labels complex e", lambda t: _adpc.pack_labels(_adpc.Source.E, e=[1j, 0]),
     (TypeError, "`e` must hold real numbers")),
    # loaders
    ("libsvm nan", lambda t: _datasets.load_libsvm("german", verify=False, data_dir=_file(
        "german.numer_scale", b"+1 1:0.5\n-1 1:nan\n")(t)),
     (ValueError, r"german.numer_scale, line 2: value 'nan' is not finite")),
    ("libsvm 1e39", lambda t: _datasets.load_libsvm("german", verify=False, data_dir=_file(
        "german.numer_scale", b"+1 3:1e39\n")(t)),
     (ValueError, r"german.numer_scale, line 1: value '1e39' is not finite in float32")),
    ("libsvm truncated", lambda t: _datasets.load_libsvm("german", verify=False, data_dir=_file(
        "german.numer_scale", b"+1 1:0.5\n+1 1:0.")(t)),
     (ValueError, r"german.numer_scale, line 2: the file ends in the middle")),
    ("libsvm empty", lambda t: _datasets.load_libsvm("german", verify=False, data_dir=_file(
        "german.numer_scale", b"")(t)),
     (ValueError, r"german.numer_scale: the file is empty")),
    ("libsvm corrupt gzip", lambda t: _datasets.load_libsvm("w8a", verify=False, data_dir=_file(
        "w8a.gz", _gzip.compress(b"+1 1:1\n" * 9, mtime=0)[:-9])(t)),
     (ValueError, r"w8a.gz: corrupt gzip file")),
    ("libsvm corrupt bz2", lambda t: _datasets.load_libsvm("w8a", verify=False, data_dir=_file(
        "w8a.bz2", b"BZh9 not bz2")(t)),
     (ValueError, r"w8a.bz2: corrupt bz2 file")),
    ("libsvm sha256 mismatch", lambda t: _datasets.load_libsvm("german", data_dir=_file(
        "german.numer_scale", b"+1 1:0.5\n")(t)),
     (ValueError, r"german.numer_scale: sha256 .* differs from the LIBSVM site's")),
    ("libsvm missing, offline", lambda t: _datasets.load_libsvm("australian"),
     (FileNotFoundError, r"'australian_scale'.*https://.*australian_scale.*ADPUE_DATA_DIR")),
    ("libsvm missing in data_dir", lambda t: _datasets.load_libsvm("w8a", data_dir=t),
     (FileNotFoundError, r"'w8a' not found in .*binary/w8a.*ADPUE_DATA_DIR")),
    ("data_dir missing", lambda t: _datasets.load("german", data_dir=t / "nope"),
     (FileNotFoundError, r"nope' \(from `data_dir`\) does not exist")),
    ("fashion 5 images 3 labels", lambda t: _datasets.load_fashion_mnist(path=_fashion(t)),
     (ValueError, r"train-images-idx3-ubyte.gz holds 5 images but .* holds 3 labels")),
    ("load unknown name", lambda t: _datasets.load("imagenet"),
     (ValueError, "Unknown data set 'imagenet'; known names")),
]


@pytest.mark.parametrize("call, expected", [c[1:] for c in DATA_CASES],
                         ids=[c[0] for c in DATA_CASES])
def test_bad_input_data_builders_pack_labels_loaders(call, expected, tmp_path, monkeypatch):
    import keras

    def offline(*args, **kwargs):
        raise Exception("URL fetch failure: no network in the tests")

    monkeypatch.setattr(keras.utils, "get_file", offline)
    monkeypatch.delenv(_datasets.ENV_VAR, raising=False)
    run_case(lambda: call(tmp_path), expected)


# --- the loss registry, reduction, surrogate, risk metrics (adp.losses.get, ...) --------

import adpue_tf as _adp  # noqa: E402

_LOSS_KEYS = r"known keys: \['adpue', 'adpe', .*'pnu'.*\].*class names \(ADPUELoss"

LOSS_REGISTRY_CASES = [
    ("unknown key", lambda: _adp.losses.get("nope"), (ValueError, "Unknown loss 'nope'; " + _LOSS_KEYS)),
    ("old risk name", lambda: _adp.losses.get("nnpue"), (ValueError, "Unknown loss 'nnpue'")),
    ("empty key", lambda: _adp.losses.get(""), (ValueError, "Unknown loss ''")),
    ("not a str", lambda: _adp.losses.get(3), (TypeError, "`identifier` must be .*got 3")),
    ("None", lambda: _adp.losses.get(None), (TypeError, "`identifier` must be")),
    ("a keras loss", lambda: _adp.losses.get(__import__("keras").losses.Huber()),
     (TypeError, "Huber is a Keras loss, not an adpue_tf DebiasedLoss")),
    ("missing prior", lambda: _adp.losses.get("adpe"),
     (TypeError, r"ADPELoss needs \['prior'\]")),
    ("option it does not take", lambda: _adp.losses.get("adpue", prior=0.3),
     (TypeError, r"ADPUELoss takes no option \['prior'\]; it takes \['from_logits'")),
    ("bad option value", lambda: _adp.losses.get("nnpu", prior=1.5),
     (ValueError, r"`prior` must be in \(0, 1\)")),
    ("options with an instance", lambda: _adp.losses.get(_adp.ADSLoss(), from_logits=True),
     (TypeError, r"Options \['from_logits'\] apply to a loss key or class")),
    ("options with a config", lambda: _adp.losses.get({"class_name": "ADSLoss"}, name="x"),
     (TypeError, r"Options \['name'\] apply to a loss key or class")),
    ("config without class_name", lambda: _adp.losses.get({"config": {}}),
     (ValueError, "needs a 'class_name'")),
    ("config of an unknown class", lambda: _adp.losses.get({"class_name": "Huber"}),
     (ValueError, "Unknown loss 'Huber'")),
    ("config with a foreign option", lambda: _adp.losses.get(
        {"class_name": "ADSLoss", "config": {"prior": 0.3}}),
     (TypeError, r"ADSLoss takes no option \['prior'\]")),
    ("get_class of an instance", lambda: _adp.losses.get_class(_adp.ADSLoss()),
     (TypeError, "`identifier` must be a loss key or class name")),
    ("reduction sum", lambda: _adp.ADPUELoss(reduction="sum"),
     (ValueError, "reduction='sum'.*group means.*no per-row meaning")),
    ("reduction none", lambda: _adp.NNPULoss(prior=0.3, reduction="none"),
     (ValueError, "NNPULoss does not take reduction='none'")),
    ("surrogate unknown", lambda: _adp.UPULoss(prior=0.3, surrogate="hinge"),
     (ValueError, r"`surrogate` must be one of \['logistic', 'sigmoid'\], got 'hinge'")),
    ("surrogate not a str", lambda: _adp.risks.nnpu(
        _adp.pack_labels(_adp.Source.PU, w=[1, 0]), [[0.0], [0.0]], prior=0.3, surrogate=0),
     (TypeError, "`surrogate` must be a str")),
    ("risk_metrics of a name", lambda: _adp.metrics.risk_metrics("adpue"),
     (TypeError, "`loss` must be an adpue_tf DebiasedLoss")),
    ("tracker fed batches without a loss", lambda: _adp.metrics.RiskTracker().update_state(
        _adp.pack_labels(_adp.Source.PU, w=[1, 0]), [[0.0], [0.0]]),
     (ValueError, "This RiskTracker has no `loss`")),
]


@pytest.mark.parametrize("call, expected", [c[1:] for c in LOSS_REGISTRY_CASES],
                         ids=[c[0] for c in LOSS_REGISTRY_CASES])
def test_bad_input_loss_registry_reduction_surrogate_risk_metrics(call, expected):
    run_case(call, expected)


# --- observable validation, exposure model, Ratio model, tuner (adp.validation_score, ...) ----
import keras as _keras  # noqa: E402
import keras_tuner as _kt  # noqa: E402

from adpue_tf import exposure as _exposure  # noqa: E402
from adpue_tf import validation as _validation  # noqa: E402
from adpue_tf.tuning import DebiasedHyperModel as _HyperModel  # noqa: E402

_V_RNG = _np.random.default_rng(0)
_V_X = _V_RNG.normal(size=(40, 2))
_V_W = _np.r_[_np.ones(10), _np.zeros(30)]
_V_E = _np.r_[_np.ones(20), _np.zeros(20)]
_V_NAN = _V_X.copy()
_V_NAN[3, 1] = _np.nan


def _v_logit(x):
    return _np.asarray(x) @ _np.array([1.0, -1.0])


def _v_score(model=_v_logit, x_pu=_V_X, w=_V_W, x_e=_V_X, e=_V_E, **kw):
    kw.setdefault("from_logits", True)
    return _adp.validation_score(model, x_pu, w, x_e, e, **kw)


def _v_half():
    return _keras.Sequential([_keras.Input((2,)), _keras.layers.Dense(
        1, activation="sigmoid", kernel_initializer="zeros")])


def _narrowed(name, value):
    """KerasTuner HyperParameters with ``name`` narrowed to ``value``."""
    hp = _kt.HyperParameters()
    hp.Fixed(name, value)
    return hp


VALIDATION_CASES = [
    ("unknown criterion", lambda: _v_score(criterion="val_risk"),
     (ValueError, r"`criterion` must be one of \['exposure_likelihood', 'reference_risk', "
                  r"'exposure_brier'\]")),
    ("reference with the likelihood", lambda: _v_score(reference=_v_half()),
     (ValueError, "`reference` is used by criterion='reference_risk' only")),
    ("reference and exposure_model", lambda: _v_score(
        criterion="reference_risk", reference=_v_half(), exposure_model=_v_half()),
     (ValueError, "drop one of `exposure_model` and `reference`")),
    ("model a string", lambda: _v_score(model="linear"),
     (TypeError, "`model` must be a keras.Model or a callable, got str")),
    ("from_logits None, not compiled", lambda: _v_score(model=_v_half(), from_logits=None),
     (ValueError, "`from_logits=None` reads the compiled loss.*NoneType")),
    ("from_logits a string", lambda: _v_score(from_logits="yes"),
     (TypeError, "`from_logits` must be a bool")),
    ("w not binary", lambda: _v_score(w=_np.r_[2.0, _V_W[1:]]),
     (ValueError, r"`w` must hold only 0 and 1; found \[2.0\]")),
    ("w too short", lambda: _v_score(w=_V_W[:3]),
     (ValueError, "`w` has 3 rows but `x_pu` has 40")),
    ("x_pu with NaN", lambda: _v_score(x_pu=_V_NAN),
     (ValueError, "`x_pu` contains 1 NaN or infinite")),
    ("x_pu a vector", lambda: _v_score(x_pu=_V_X[:, 0]),
     (ValueError, r"`x_pu` must have shape \(n, n_features, ...\)")),
    ("x_pu feature dict, x_e an array", lambda: _v_score(x_pu={"a": _V_X}),
     (ValueError, r"`x_e` has feature shape \(2,\) but `x_pu` has \{'a': \(2,\)\}")),
    ("x_e other width", lambda: _v_score(x_e=_np.ones((40, 3))),
     (ValueError, r"`x_e` has feature shape \(3,\) but `x_pu` has \(2,\)")),
    ("x_e missing, θ̂ to fit", lambda: _v_score(x_e=None, e=None),
     (TypeError, "`x_e` must be an array of features")),
    ("x_e without e", lambda: _v_score(e=None, exposure_model=_v_half()),
     (ValueError, "Give both `x_e` and `e`")),
    ("e constant", lambda: _v_score(e=_np.zeros(40)),
     (ValueError, "`e` holds only the value 0; θ̂ needs exposed and unexposed rows")),
    ("exposure_model gives logits", lambda: _v_score(exposure_model=_v_logit),
     (ValueError, r"`exposure_model` must give probabilities in \[0, 1\].*logits")),
    ("exposure_model a string", lambda: _v_score(exposure_model="logistic"),
     (TypeError, "`exposure_model` must be a keras.Model or a callable")),
    ("reference gives logits", lambda: _v_score(criterion="reference_risk",
                                                reference=_v_logit),
     (ValueError, r"`reference` must give probabilities in \[0, 1\]")),
    ("model two outputs", lambda: _v_score(model=lambda x: _np.ones((len(x), 2))),
     (ValueError, r"`model` must give one value per row.*shape \(40, 2\)")),
    ("model NaN output", lambda: _v_score(model=lambda x: _np.r_[_np.nan, _v_logit(x)[1:]]),
     (ValueError, "`model` gave 1 NaN or infinite")),
    ("batch_size 0", lambda: _v_score(batch_size=0),
     (ValueError, "`batch_size` must be at least 1")),
    ("batch_size float", lambda: _v_score(batch_size=2.5),
     (TypeError, "`batch_size` must be an int")),
    ("w constant for the Ratio", lambda: _v_score(w=_np.zeros(40), criterion="reference_risk"),
     (ValueError, "`w` holds only the value 0; q̂ needs")),
    ("pue data batch_size 1", lambda: _validation.pue_validation_data(
        _V_X, _V_W, _V_X, _V_E, batch_size=1),
     (ValueError, "`batch_size` must be at least 2")),
    ("pe data without reference", lambda: _validation.pe_validation_data(
        _V_X, _V_X, _V_E, reference=None),
     (ValueError, "`reference` is required for PE/FPUE validation data")),
    ("fpue data without x_u", lambda: _validation.fpue_validation_data(
        _V_X, None, _V_X, _V_E, reference=_v_half()),
     (TypeError, "`x_u` must be an array of features")),
    ("fit_exposure_model strings", lambda: _exposure.fit_exposure_model(
        _np.array([["a", "b"]]), [1]),
     (TypeError, "`x_e` must be numeric")),
    ("fit_exposure_model l2 < 0", lambda: _exposure.fit_exposure_model(_V_X, _V_E, l2=-1.0),
     (ValueError, "`l2` must be >= 0")),
    ("RatioModel floor 0", lambda: _exposure.RatioModel(_v_half(), _v_half(), theta_floor=0.0),
     (ValueError, r"`theta_floor` must lie in \(0, 1\)")),
    ("RatioModel q not a model", lambda: _exposure.RatioModel(_v_logit, _v_half()),
     (TypeError, "`q_model` must be a keras.Model")),
    ("ExposureLikelihood prior 1.5", lambda: _validation.ExposureLikelihood(prior=1.5),
     (ValueError, r"`prior` must be a number in \(0, 1\)")),
    ("ExposureLikelihood from_logits str", lambda: _validation.ExposureLikelihood("no"),
     (TypeError, "`from_logits` must be a bool")),
    ("ReferenceRisk of Logit", lambda: _validation.ReferenceRisk(_adp.LogitLoss()),
     (ValueError, "LogitLoss does not use f")),
    ("metric on 5-column labels",
     lambda: _validation.ExposureLikelihood().update_state(_np.zeros((2, 5)), _np.zeros(2)),
     (ValueError, r"validation layout, shape \(batch, 4\)")),
    ("BestRound mode", lambda: _adp.BestRound(mode="lowest"),
     (ValueError, "`mode` must be 'min' or 'max', got 'lowest'")),
    ("BestRound patience 0", lambda: _adp.BestRound(patience=0),
     (ValueError, "`patience` must be at least 1")),
    ("BestRound monitor not a str", lambda: _adp.BestRound(monitor=None),
     (TypeError, "`monitor` must be the name of a logged value")),
    ("BestRound restore_best 1", lambda: _adp.BestRound(restore_best=1),
     (TypeError, "`restore_best` must be a bool")),
    ("tuner learning_rate narrowed to a str", lambda: _HyperModel(input_shape=(2,)).build(
        _narrowed("learning_rate", "fast")), (ValueError, "`learning_rate` must be > 0")),
    ("tuner learning_rate narrowed to 0", lambda: _HyperModel(input_shape=(2,)).build(
        _narrowed("learning_rate", 0.0)), (ValueError, "`learning_rate` must be > 0")),
    ("tuner unknown criterion", lambda: _HyperModel(input_shape=(2,), criterion="val_risk"),
     (ValueError, "`criterion` must be one of")),
    ("tuner likelihood for PE", lambda: _HyperModel(
        input_shape=(2,), loss="adpe", prior=0.3, criterion="exposure_likelihood"),
     (ValueError, "PE data lacks")),
    ("tuner plain validation data", lambda: _HyperModel(input_shape=(2,)).fit(
        _kt.HyperParameters(), _keras.Sequential([_keras.Input((2,)), _keras.layers.Dense(1)]),
        _adp.data.pue_dataset(_V_X, _V_W, _V_X, _V_E, batch_size=20, shuffle=False),
        validation_data=_adp.data.pue_dataset(_V_X, _V_W, _V_X, _V_E, batch_size=20,
                                              shuffle=False)),
     (ValueError, "labels of 3 columns. Build it with adp.validation.pue_validation_data")),
]


@pytest.mark.parametrize("call, expected", [c[1:] for c in VALIDATION_CASES],
                         ids=[c[0] for c in VALIDATION_CASES])
def test_bad_input_validation_score_exposure_tuner(call, expected):
    run_case(call, expected)


# --- baselines: SAR-EM and the two-model ratio (experiments.baselines.SAREM, RatioEstimator, fit_ratio)

import numpy as _np  # noqa: E402

from adpue_tf.experiments import baselines as _bl  # noqa: E402

_BX = _np.random.default_rng(1).normal(size=(20, 3))
_BW = _np.arange(20) % 2

BASELINE_CASES = [
    ("sarem-w-not-binary", lambda: _bl.SAREM().fit(_BX, _BW * 2), (ValueError, "`w`.*0 and 1")),
    ("sarem-w-all-unlabelled", lambda: _bl.SAREM().fit(_BX, 0 * _BW),
     (ValueError, "`w` must hold both")),
    ("sarem-w-rows", lambda: _bl.SAREM().fit(_BX, _BW[:5]), (ValueError, "`w` has 5 rows")),
    ("sarem-x-nan", lambda: _bl.SAREM().fit(_np.where(_BX > 1, _np.nan, _BX), _BW),
     (ValueError, "`x`.*NaN")),
    ("sarem-x-vector", lambda: _bl.SAREM().fit(_BX[:, 0], _BW), (ValueError, "`x` must have shape")),
    ("sarem-propensity-out-of-range", lambda: _bl.SAREM(propensity_features=[3]).fit(_BX, _BW),
     (ValueError, "`propensity_features` has index 3")),
    ("sarem-propensity-string", lambda: _bl.SAREM(propensity_features="12"),
     (TypeError, "`propensity_features`")),
    ("sarem-C-zero", lambda: _bl.SAREM(C=0), (ValueError, "`C` must be finite, > 0")),
    ("sarem-max-iter-float", lambda: _bl.SAREM(max_iter=1.5), (TypeError, "`max_iter`")),
    ("sarem-window-one", lambda: _bl.SAREM(window=1), (ValueError, "`window`")),
    ("sarem-refit-string", lambda: _bl.SAREM(refit_classifier="yes"),
     (TypeError, "`refit_classifier` must be a bool")),
    ("sarem-predict-unfitted", lambda: _bl.SAREM().predict_proba(_BX),
     (RuntimeError, "not fitted")),
    ("ratio-e-not-binary", lambda: _bl.RatioEstimator().fit(_BX, _BW, _BX, _BW + 0.5),
     (ValueError, "`e`")),
    ("ratio-x-e-features", lambda: _bl.RatioEstimator().fit(_BX, _BW, _BX[:, :2], _BW),
     (ValueError, "`x_e` has 2 \\(flattened\\) features, expected 3")),
    ("ratio-x-pu-inf", lambda: _bl.RatioEstimator().fit(_BX * _np.inf, _BW, _BX, _BW),
     (ValueError, "`x_pu`.*NaN or infinite")),
    ("ratio-theta-floor", lambda: _bl.RatioEstimator(theta_floor=1.0),
     (ValueError, "`theta_floor`")),
    ("ratio-l2-negative", lambda: _bl.RatioEstimator(l2=-1.0), (ValueError, "`l2`")),
    ("ratio-predict-unfitted", lambda: _bl.RatioEstimator().predict_q(_BX),
     (RuntimeError, "not fitted")),
    ("fit-ratio-2d", lambda: _bl.fit_ratio(_BX, _BW, _BX, _BW),
     (ValueError, "`x_pu` must be \\(trials, rows, features\\)")),
    ("fit-ratio-trials", lambda: _bl.fit_ratio(_BX[None], _BW[None], _np.stack([_BX, _BX]),
                                               _np.stack([_BW, _BW])),
     (ValueError, "`x_e` has shape \\(2, 20, 3\\)")),
]


@pytest.mark.parametrize("call, expected", [c[1:] for c in BASELINE_CASES],
                         ids=[c[0] for c in BASELINE_CASES])
def test_bad_input_baselines_sarem_ratio(call, expected):
    run_case(call, expected)


# --- serving and the command line (adp.export_for_serving, adp.serving_path, adpue-tf) ---
# Every export call runs in a scratch working directory (see the test), so a broken
# path check could never touch the repository.

import contextlib as _s_contextlib  # noqa: E402
import io as _s_io  # noqa: E402

import keras as _s_keras  # noqa: E402
import tensorflow as _s_tf  # noqa: E402

from adpue_tf import cli as _s_cli  # noqa: E402


def _s_net(dtype="float32", units=1, outputs=1):
    x = _s_keras.Input((3,), dtype=dtype, name="item_id" if dtype == "string" else "x")
    h = _s_keras.layers.Hashing(num_bins=4, output_mode="one_hot")(x) if dtype == "string" else x
    outs = [_s_keras.layers.Dense(units)(h) for _ in range(outputs)]
    return _s_keras.Model(x, outs[0] if outputs == 1 else outs)


def _s_export(path, model=None, **kw):
    kw.setdefault("from_logits", True)
    return _adp.export_for_serving(_s_net() if model is None else model, path, **kw)


def _s_dir(path, *files):
    """A directory holding ``files`` (sub-directories where a name ends with '/')."""
    import os

    os.makedirs(path, exist_ok=True)
    for name in files:
        if name.endswith("/"):
            os.makedirs(os.path.join(path, name), exist_ok=True)
        else:
            with open(os.path.join(path, name), "w") as f:
                f.write("x")
    return path


def _s_ragged():
    ids = _s_keras.Input((None,), dtype="int64", name="history")
    pooled = _s_keras.layers.GlobalAveragePooling1D()(_s_keras.layers.Embedding(5, 2)(ids))
    return _s_keras.Model({"history": ids}, _s_keras.layers.Dense(1)(pooled))


def _s_serve_wrong_width():
    fn = _s_tf.saved_model.load(_s_export("m")).signatures["serving_default"]
    fn(features=_s_tf.zeros((2, 4)))


def _s_cli_run(*argv):
    """`adpue-tf argv`; a non-zero exit becomes SystemExit('exit N: <stderr>')."""
    err = _s_io.StringIO()
    try:
        with _s_contextlib.redirect_stderr(err):
            code = _s_cli.main(list(argv))
    except SystemExit as done:
        code = done.code
    if code:
        raise SystemExit(f"exit {code}: {err.getvalue()}")


SERVING_CLI_CASES = [
    ("export path ''", lambda: _s_export(""), (ValueError, "`path` must name a directory")),
    ("export path '.'", lambda: _s_export(".", overwrite=True),
     (ValueError, "is the current working directory.*Nothing was written or deleted")),
    ("export path './'", lambda: _s_export("./", overwrite=True),
     (ValueError, "is the current working directory")),
    ("export path '..'", lambda: _s_export("..", overwrite=True),
     (ValueError, "is an ancestor of the current working directory")),
    ("export path a TF Serving base dir", lambda: _s_export(
        _s_dir("base", "1/", "2/"), overwrite=True),
     (ValueError, "a TF Serving base directory holding versions 1, 2")),
    ("export path a non-SavedModel dir", lambda: _s_export(
        _s_dir("notes", "a.txt"), overwrite=True),
     (ValueError, r"a directory that is not a SavedModel \(it holds a.txt\)")),
    ("export path a file", lambda: _s_export(_s_dir(".", "f.txt") + "/f.txt", overwrite=True),
     (ValueError, "exists and is a file")),
    ("export over a SavedModel without overwrite",
     lambda: _s_export(_s_dir("sm", "saved_model.pb")),
     (FileExistsError, "already holds a SavedModel; pass overwrite=True")),
    ("export path not a path", lambda: _s_export(3), (TypeError, "`path` must be a str")),
    ("export overwrite not a bool", lambda: _s_export("m2", overwrite=1),
     (TypeError, "`overwrite` must be True or False")),
    ("export not a keras model", lambda: _adp.export_for_serving(lambda x: x, "m3"),
     (TypeError, "`model` must be a keras.Model")),
    ("export string input", lambda: _s_export("m4", _s_net("string")),
     (ValueError, "input 'item_id' has dtype string")),
    ("export two outputs", lambda: _s_export("m5", _s_net(outputs=2)),
     (ValueError, "single output")),
    ("export two output units", lambda: _s_export("m6", _s_net(units=2)),
     (ValueError, "one output unit")),
    ("export from_logits unknown", lambda: _s_export("m7", from_logits=None),
     (ValueError, "Pass `from_logits=True` or `from_logits=False`")),
    ("served with the wrong width", _s_serve_wrong_width,
     (_s_tf.errors.InvalidArgumentError,
      r"Shape of tensor features \[2,4\] is not compatible with expected shape \[\?,3\]")),
    ("export feature dict of variable length", lambda: _s_export("m8", _s_ragged()),
     (ValueError, r"feature 'history' has shape \(None, None\): the `examples` signature")),
    ("export warmup_rows of the wrong width", lambda: _s_export(
        "m9", warmup_rows=[[0.0, 1.0]]),
     (ValueError, r"`warmup_rows\['features'\]` has shape \(1, 2\); expected \(None, 3\)")),
    ("export warmup_rows with NaN", lambda: _s_export("m10", warmup_rows=[[0.0, 1.0, _np.nan]]),
     (ValueError, r"`warmup_rows\['features'\]` holds NaN")),
    ("serving_path name with a separator", lambda: _adp.serving_path("e", "a/b", 1),
     (ValueError, "`name` must be one non-empty path component")),
    ("serving_path negative version", lambda: _adp.serving_path("e", "m", -1),
     (ValueError, "`version` must be an int >= 0")),
    ("serving_path version '1'", lambda: _adp.serving_path("e", "m", "1"),
     (TypeError, "`version` must be an int >= 0")),
    ("cli --datasets ''", lambda: _s_cli_run("bench", "linear", "--datasets", ""),
     (SystemExit, "(?s)exit 2: .*argument --datasets: expected comma-separated data set names")),
    ("cli unknown data set", lambda: _s_cli_run("bench", "neural", "--datasets", "svhn"),
     (SystemExit, r"exit 2: adpue-tf: error: Unknown data set\(s\) \['svhn'\]")),
    ("cli unwritable --out", lambda: _s_cli_run(
        "bench", "linear", "--datasets", "australian", "--out", "/proc/forbidden/res"),
     (SystemExit, "exit 2: adpue-tf: error: cannot write results to `--out` "
                  "'/proc/forbidden/res'.*Nothing was computed")),
    ("cli --alphas not numbers", lambda: _s_cli_run("bench", "linear", "--alphas", "a,b"),
     (SystemExit, "(?s)exit 2: .*expected comma-separated numbers, got 'a,b'")),
    ("cli demo --seeds 1", lambda: _s_cli_run("demo", "--seeds", "1"),
     (SystemExit, "exit 2: adpue-tf: error: `seeds` must be an int >= 2")),
    ("cli unknown command", lambda: _s_cli_run("train"),
     (SystemExit, "(?s)exit 2: .*invalid choice: 'train'")),
    ("cli no command", lambda: _s_cli_run(),
     (SystemExit, "(?s)exit 2: .*the following arguments are required: command")),
]


@pytest.mark.parametrize("call, expected", [c[1:] for c in SERVING_CLI_CASES],
                         ids=[c[0] for c in SERVING_CLI_CASES])
def test_bad_input_export_for_serving_serving_path_cli(call, expected, tmp_path, monkeypatch):
    work = tmp_path / "project" / "work"
    work.mkdir(parents=True)
    (work / "keep.txt").write_text("mine")
    monkeypatch.chdir(work)
    run_case(call, expected)
    assert (work / "keep.txt").read_text() == "mine"  # nothing deleted, "." and ".." included
    assert not [p for p in tmp_path.rglob(".*") if ".tmp-" in p.name or ".old-" in p.name]


# --- losses, DebiasedModel, RefreshDagger (adp.*Loss, adp.DebiasedModel, adp.RefreshDagger) ---
# Each case as a user meets it, in eager mode and inside fit / tf.function (graph mode).

import keras as _b1_keras  # noqa: E402
import numpy as _b1_np  # noqa: E402
import tensorflow as _b1_tf  # noqa: E402

_b1_PUE = _b1_np.concatenate([_adp.pack_labels(_adp.Source.PU, w=[1, 0]),
                              _adp.pack_labels(_adp.Source.E, e=[1, 0])])
_b1_SSE = _adp.pack_labels(_adp.Source.SSE, w=[1, 0, 0], e=[1, 1, 0])
_b1_Z4 = _b1_np.zeros((4, 1), _b1_np.float32)
_b1_GRAPH = _b1_tf.errors.InvalidArgumentError


def _b1_graph(loss, y, z, sw=None):
    args = [_b1_tf.constant(y), _b1_tf.constant(z)] + ([] if sw is None else [_b1_tf.constant(sw)])
    return _b1_tf.function(lambda *a: loss(*a))(*args)


def _b1_net(dim=2, activation=None, kernel_initializer="glorot_uniform"):
    return _b1_keras.Sequential([_b1_keras.Input((dim,)),
                                 _b1_keras.layers.Dense(1, activation=activation,
                                                        kernel_initializer=kernel_initializer)])


def _b1_fit(loss, y, x=None, model=None, **fit):
    model = model or _b1_net()
    model.compile("sgd", loss=loss)
    x = _b1_np.ones((len(y), 2), _b1_np.float32) if x is None else x
    return model.fit(x, y, batch_size=len(y), verbose=0, **fit)


def _b1_nan_pipeline(model):
    x = _b1_np.ones((4, 2), _b1_np.float32)
    x[1, 0] = _b1_np.nan
    model.compile("sgd", loss=_adp.ADPUELoss(from_logits=True))
    ds = _b1_tf.data.Dataset.from_tensor_slices((x, _b1_PUE)).batch(4)
    return model.fit(ds, verbose=0)


class _b1_Unregistered(_b1_keras.Model):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.dense = _b1_keras.layers.Dense(1)

    def call(self, x):
        return self.dense(x)


def _b1_load_unregistered(tmp):
    net = _b1_Unregistered()
    net(_b1_np.zeros((1, 2), _b1_np.float32))
    model = _adp.DebiasedModel(net)
    model.compile("sgd", loss=_adp.ADPUELoss(from_logits=True))
    model.save(tmp / "m.keras")
    return _b1_keras.models.load_model(tmp / "m.keras")


LOSS_MODEL_CALLBACK_CASES = [
    # wrong loss for the data
    ("ADPUELoss on SSE rows", lambda t: _adp.ADPUELoss(from_logits=True)(_b1_SSE, _b1_Z4[:3]),
     (ValueError, r"ADPUELoss reads rows of source\(s\) PU, E .* holds rows of SSE: 3")),
    ("ADPUELoss on SSE rows, graph", lambda t: _b1_graph(
        _adp.ADPUELoss(from_logits=True), _b1_SSE, _b1_Z4[:3]),
     (_b1_GRAPH, r"ADPUELoss reads rows of source\(s\) PU, E")),
    ("ADSLoss on PUE rows", lambda t: _adp.ADSLoss(from_logits=True)(_b1_PUE, _b1_Z4),
     (ValueError, r"ADSLoss reads rows of source\(s\) SSE .* holds rows of PU: 2, E: 2")),
    ("ADPELoss on PUE rows (no P)", lambda t: _adp.ADPELoss(prior=0.3, from_logits=True)(
        _b1_PUE, _b1_Z4), (ValueError, r"ADPELoss .* needs rows of P and E")),
    ("DoubleADSSLoss on PUE rows in fit", lambda t: _b1_fit(
        _adp.DoubleADSSLoss(from_logits=True), _b1_PUE),
     (_b1_GRAPH, r"DoubleADSSLoss reads rows of source\(s\) SSE")),
    # from_logits mismatch
    ("logits with from_logits=False", lambda t: _adp.ADPUELoss()(_b1_PUE, _b1_Z4 + 2.0),
     (ValueError, r"outside \[0, 1\].*from_logits=False")),
    ("logits with from_logits=False in fit", lambda t: _b1_fit(
        _adp.ADPUELoss(), _b1_PUE, x=_b1_np.full((4, 2), 3.0, _b1_np.float32),
        # fixed weights: every output is 6, outside [0, 1] (a random init could land inside)
        model=_b1_net(kernel_initializer="ones")),
     (_b1_GRAPH, r"outside \[0, 1\].*from_logits=False")),
    ("sigmoid output with from_logits=True in fit", lambda t: _b1_fit(
        _adp.ADPUELoss(from_logits=True), _b1_PUE, model=_b1_net(activation="sigmoid")),
     (ValueError, "sigmoid activation.*from_logits=True")),
    ("sigmoid net in DebiasedModel with from_logits=True", lambda t: _adp.DebiasedModel(
        _b1_net(activation="sigmoid")).compile("sgd", loss=_adp.ADPUELoss(from_logits=True)),
     (ValueError, "`net` ends in a sigmoid.*from_logits=True")),
    ("sigmoid initial_dagger with from_logits=True", lambda t: _adp.DebiasedModel(
        _b1_net(), initial_dagger=_b1_net(activation="sigmoid")).compile(
            "sgd", loss=_adp.ADPUELoss(from_logits=True)),
     (ValueError, "`initial_dagger` ends with a sigmoid")),
    # non-finite values
    ("NaN logits", lambda t: _adp.ADPUELoss(from_logits=True)(
        _b1_PUE, _b1_np.array([[_b1_np.nan], [0], [0], [0]], _b1_np.float32)),
     (ValueError, "ADPUELoss: the loss is NaN or infinite")),
    ("NaN feature in a tf.data pipeline, DebiasedModel", lambda t: _b1_nan_pipeline(
        _adp.DebiasedModel(_b1_net())), (ValueError, r"NaN or inf found in `x\[0\]`")),
    ("NaN feature in a tf.data pipeline, plain model", lambda t: _b1_nan_pipeline(_b1_net()),
     (_b1_GRAPH, "the loss is NaN or infinite|exploded values")),
    # checks inside fit / tf.function
    ("negative sample_weight in fit", lambda t: _b1_fit(
        _adp.ADPUELoss(from_logits=True), _b1_PUE, sample_weight=-_b1_np.ones(4)),
     (_b1_GRAPH, "`sample_weight` must be finite and non-negative")),
    ("NaN dagger, graph", lambda t: _b1_graph(_adp.ADPUELoss(from_logits=True), _b1_np.c_[
        _b1_PUE, [0.5, _b1_np.nan, 0.5, 0.5]].astype(_b1_np.float32), _b1_Z4),
     (_b1_GRAPH, r"column 3 \(dagger, f†\) must lie in \[0, 1\]")),
    ("dagger 3.0, graph", lambda t: _b1_graph(_adp.ADPUELoss(from_logits=True), _b1_np.c_[
        _b1_PUE, [0.5, 3.0, 0.5, 0.5]].astype(_b1_np.float32), _b1_Z4),
     (_b1_GRAPH, r"column 3 \(dagger, f†\) must lie in \[0, 1\]")),
    ("sample_weight of the wrong length", lambda t: _adp.ADPUELoss(from_logits=True)(
        _b1_PUE, _b1_Z4, _b1_np.ones(3)),
     (ValueError, "`sample_weight` has 3 values but the batch has 4 rows")),
    # obscure errors made clear
    ("dict-output net", lambda t: _adp.DebiasedModel(_b1_keras.Model(
        inp := _b1_keras.Input((2,)), {"p": _b1_keras.layers.Dense(1)(inp)})),
     (ValueError, r"`net` must have a single output .*dict with keys \['p'\]")),
    ("initial_dagger of the wrong width", lambda t: _adp.DebiasedModel(
        _b1_net(2), initial_dagger=_b1_net(3)),
     (ValueError, r"`initial_dagger` takes inputs of shape \[\(3,\)\] but `net` takes")),
    ("unregistered subclassed net in a .keras file", _b1_load_unregistered,
     (ValueError, r"could not rebuild its `net` \('_b1_Unregistered'\).*register")),
    # RefreshDagger
    ("RefreshDagger both periods", lambda t: _adp.RefreshDagger(every_n_epochs=1,
                                                                every_n_steps=5),
     (ValueError, "Give one of `every_n_epochs` and `every_n_steps`, not both")),
    ("RefreshDagger period 0", lambda t: _adp.RefreshDagger(every_n_steps=0),
     (ValueError, "`every_n_steps` must be at least 1")),
    ("RefreshDagger on a plain model", lambda t: _b1_fit(
        _adp.ADPUELoss(from_logits=True), _b1_PUE, callbacks=[_adp.RefreshDagger()]),
     (TypeError, "RefreshDagger needs an adpue_tf.DebiasedModel")),
]


@pytest.mark.parametrize("call, expected", [c[1:] for c in LOSS_MODEL_CALLBACK_CASES],
                         ids=[c[0] for c in LOSS_MODEL_CALLBACK_CASES])
def test_bad_input_losses_model_callbacks(call, expected, tmp_path):
    run_case(lambda: call(tmp_path), expected)


# ------------------------------------------------------------------ bench linear: --file, the ADPUE recipe
# (adpue_tf.experiments.bench.load_file, linear_recipe.RecipeConfig / fit_recipe,
# table1.LinearBenchConfig's recipe grid, `adpue-tf bench linear --file/--exposure-rate`).
# Each call takes a scratch directory; nothing is fitted.

from adpue_tf.experiments import bench as _h_bench  # noqa: E402
from adpue_tf.experiments import linear_recipe as _h_recipe  # noqa: E402
from adpue_tf.experiments import table1 as _h_table1  # noqa: E402
from adpue_tf.experiments import table2 as _h_table2  # noqa: E402


def _h_file(content, **kw):
    def call(tmp):
        (tmp / "d.svm").write_text(content)
        return _h_bench.load_file(tmp / "d.svm", **kw)
    return call


def _h_recipe_call(sources, rows=6, x=None):
    y = _np.zeros((1, rows, 3), _np.float32)
    y[0, :, 2] = sources
    return lambda tmp: _h_recipe.fit_recipe(
        _np.zeros((1, rows, 2), _np.float32) if x is None else x, y)


def _h_cli(*argv):
    def call(tmp):
        import contextlib
        import io

        from adpue_tf import cli

        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            code = cli.main(["bench", "linear", *argv, "--out", str(tmp / "o"), "--quiet"])
        if code != 0:
            raise ValueError(err.getvalue())
        return code
    return call


def _h_cli_rows(rows, *argv):
    """``bench linear --file`` on a ``rows``-row LIBSVM file (two features, both labels)."""
    def call(tmp):
        tmp.mkdir(parents=True, exist_ok=True)
        (tmp / "d.svm").write_text("".join(f"{1 if i % 3 == 0 else -1} 1:{i % 7} 2:{i % 5}\n"
                                           for i in range(rows)))
        return _h_cli("--file", str(tmp / "d.svm"), *argv)(tmp)
    return call


BENCH_RECIPE_CASES = [
    ("load_file missing", lambda t: _h_bench.load_file(t / "nope.svm"),
     (FileNotFoundError, "`--file` .*nope.svm': no such file")),
    ("load_file no feature", _h_file("1\n-1\n"), (ValueError, "no line has a feature")),
    ("load_file positive absent", _h_file("1 1:0.5\n-1 2:1\n", positive=3),
     (ValueError, r"no row has the positive label 3 \(labels found: -1, 1\)")),
    ("load_file every row positive", _h_file("1 1:0.5\n1 2:1\n"),
     (ValueError, "every row has the positive label 1")),
    ("load_file corrupt line", _h_file("1 1:0.5\n-1 2:x\n"),
     (ValueError, r"line 2: '2:x' is not index:value")),
    ("RecipeConfig empty l2s", lambda t: _h_recipe.RecipeConfig(l2s=()),
     (ValueError, "`l2s` must be a non-empty tuple")),
    ("RecipeConfig negative l2", lambda t: _h_recipe.RecipeConfig(l2s=(0.1, -1.0)),
     (ValueError, "`l2s` must be a non-empty tuple of numbers >= 0")),
    ("RecipeConfig one fold", lambda t: _h_recipe.RecipeConfig(folds=1),
     (ValueError, "`folds` must be an int >= 2")),
    ("RecipeConfig rounds float", lambda t: _h_recipe.RecipeConfig(max_rounds=2.5),
     (ValueError, "`max_rounds` must be an int >= 0")),
    ("RecipeConfig val_risk", lambda t: _h_recipe.RecipeConfig(criterion="val_risk"),
     (ValueError, "`criterion` must be one of")),
    ("LinearBenchConfig recipe grid", lambda t: _h_table1.LinearBenchConfig(recipe_folds=1),
     (ValueError, "`folds` must be an int >= 2")),
    ("fit_recipe SSE rows", _h_recipe_call([0, 0, 0, 1, 1, 4]),
     (ValueError, r"only PU \(source 0\) and E \(source 1\) rows")),
    ("fit_recipe too few E rows", _h_recipe_call([0, 0, 0, 0, 1, 1]),
     (ValueError, "at least `folds`=3 E rows")),
    ("fit_recipe 2-D x", lambda t: _h_recipe.fit_recipe(_np.zeros((6, 2)), _np.zeros((6, 3))),
     (ValueError, r"`x` must be \(trials, rows, features\)")),
    ("fit_recipe NaN x", _h_recipe_call([0, 0, 0, 1, 1, 1],
                                        x=_np.full((1, 6, 2), _np.nan, _np.float32)),
     (ValueError, "`x`.*(NaN|finite)")),
    ("cli --file missing", _h_cli("--file", "/nonexistent/d.svm"),
     (ValueError, "no such file")),
    ("cli --exposure-rate 1.5", _h_cli("--datasets", "australian", "--exposure-rate",
                                       "0.5,1.5"),
     (ValueError, r"`exposure_rate` must be a number in \(0, 1\), got 1.5")),
    ("cli --file fewer rows than the test rows", _h_cli_rows(40),
     (ValueError, r"d.svm' has 40 rows; each trial holds out `n_test`=300 test rows "
                  r"\(`--n-test`\) .* give `--n-test` at most 20 or a larger file")),
    ("cli --file of 15 rows", _h_cli_rows(15, "--n-test", "5"),
     (ValueError, "has 15 rows; .* give a file of more than 20 rows")),
    ("cli --n-test 0", _h_cli_rows(400, "--n-test", "0"), (ValueError, "`n_test`")),
    ("cli --recommended-min-steps 0", _h_cli("--datasets", "australian",
                                             "--recommended-min-steps", "0"),
     (ValueError, "`recommended_min_steps` must be an int >= 1, got 0")),
    ("cli --recommended-candidates nope", _h_cli("--datasets", "australian",
                                                 "--recommended-candidates", "blend,nope"),
     (ValueError, "`recommended_candidates` must be a non-empty list of fit_pue candidates")),
    ("cli --recommended-lr 0", _h_cli("--datasets", "australian", "--recommended-lr", "0"),
     (ValueError, "`recommended_learning_rate` must be a finite number > 0")),
    ("cli --recommended-l2 -1", _h_cli("--datasets", "australian", "--recommended-l2",
                                       "0.01,-1"),
     (ValueError, "`recommended_l2` must be a finite number >= 0 or a non-empty tuple")),
    ("cli --recommended-l2 twice", _h_cli("--datasets", "australian", "--recommended-l2",
                                          "0.01,0.01"),
     (ValueError, r"of distinct ones, got \(0.01, 0.01\)")),
    ("LinearBenchConfig recommended_l2 empty",
     lambda t: _h_table1.LinearBenchConfig(recommended_l2=()),
     (ValueError, "`recommended_l2` must be a finite number >= 0 or a non-empty tuple")),
    ("LinearBenchConfig recommended_jit str",
     lambda t: _h_table1.LinearBenchConfig(recommended_jit="yes"),
     (TypeError, "`recommended_jit` must be a bool, got 'yes'")),
    ("LinearBenchConfig recommended_l2 str",
     lambda t: _h_table1.LinearBenchConfig(recommended_l2="0.01"),
     (ValueError, "`recommended_l2` must be")),
    ("NeuralBenchConfig n_test 0", lambda t: _h_table2.NeuralBenchConfig(n_test=0),
     (ValueError, "`n_test` must be an int >= 1, got 0")),
    ("cli --exposure-rate ''", _h_cli("--datasets", "australian", "--exposure-rate", ","),
     (ValueError, "`--exposure-rate` is empty")),
]


@pytest.mark.parametrize("call, expected", [c[1:] for c in BENCH_RECIPE_CASES],
                         ids=[c[0] for c in BENCH_RECIPE_CASES])
def test_bad_input_bench_file_recipe(call, expected, tmp_path):
    run_case(lambda: call(tmp_path), expected)
    assert not (tmp_path / "o").exists()  # refused before anything is written


# --- what export_for_serving replaces: only a SavedModel's own entries; the convention it serves ---
# (adp.export_for_serving). Each call takes a scratch directory; the table checks that a
# refused export deleted nothing and left no temporary directory behind.

def _x_dense(activation=None):
    return _s_keras.Sequential([_s_keras.Input((3,)), _s_keras.layers.Dense(1, activation)])


def _x_saved(tmp, *extra):
    """A real SavedModel at ``tmp/m/1`` with ``extra`` entries put beside it (as _s_dir)."""
    path = _adp.export_for_serving(_x_dense(), tmp / "m" / "1", from_logits=True)
    return _s_dir(path, *extra)


EXPORT_REPLACE_CASES = [
    ("overwrite a SavedModel with a user file beside it", lambda t: _adp.export_for_serving(
        _x_dense(), _x_saved(t, "notes.txt"), from_logits=True, overwrite=True),
     (ValueError, r"also holds entries a SavedModel does not have \(notes.txt\)")),
    ("overwrite a SavedModel with a sub-directory beside it", lambda t: _adp.export_for_serving(
        _x_dense(), _x_saved(t, "runs/"), from_logits=True, overwrite=True),
     (ValueError, r"does not have \(runs/\).*Nothing was written or deleted")),
    ("overwrite a base directory with versions and a stray saved_model.pb",
     lambda t: _adp.export_for_serving(_x_dense(), _s_dir(str(t / "b"), "1/", "2/", "saved_model.pb"),
                                       from_logits=True, overwrite=True),
     (ValueError, "a TF Serving base directory holding versions 1, 2")),
    ("export to a path under a file", lambda t: _adp.export_for_serving(
        _x_dense(), _s_dir(str(t), "f.txt") + "/f.txt/1", from_logits=True),
     (ValueError, r"lies under .*f.txt', which is a file, not a directory")),
    ("export into another SavedModel's variables/", lambda t: _adp.export_for_serving(
        _x_dense(), _x_saved(t) + "/variables/inner", from_logits=True),
     (ValueError, r"lies inside the SavedModel directory .*m/1'.*Nothing was written")),
    ("export into another SavedModel's assets.extra/", lambda t: _adp.export_for_serving(
        _x_dense(), _x_saved(t) + "/assets.extra/a/b", from_logits=True),
     (ValueError, r"lies inside the SavedModel directory .*m/1'")),
    ("export a sigmoid model as logits", lambda t: _adp.export_for_serving(
        _x_dense("sigmoid"), t / "s", from_logits=True),
     (ValueError, "`model` ends with a sigmoid activation, so it outputs probabilities")),
    ("export a softmax model as logits (loss says so)", lambda t: _adp.export_for_serving(
        _s_keras.Sequential([_s_keras.Input((3,)), _s_keras.layers.Dense(1, "softmax")]),
        t / "s"),
     (ValueError, "Cannot tell whether `model` outputs logits")),
    ("export a logit model as probabilities", lambda t: _adp.export_for_serving(
        _x_dense(), t / "l", from_logits=False),
     (ValueError, r"`model` must output probabilities in \[0, 1\].*it outputs logits")),
    ("export a logit model as probabilities, judged on warm-up rows",
     lambda t: _adp.export_for_serving(_x_dense(), t / "l", from_logits=False,
                                       warmup_rows=_np.full((2, 3), 5.0)),
     (ValueError, r"`model` must output probabilities in \[0, 1\]")),
]


@pytest.mark.parametrize("call, expected", [c[1:] for c in EXPORT_REPLACE_CASES],
                         ids=[c[0] for c in EXPORT_REPLACE_CASES])
def test_bad_input_export_replaces_only_its_own(call, expected, tmp_path, monkeypatch):
    import os

    monkeypatch.chdir(tmp_path)

    def snapshot():
        return sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*"))

    seen = []

    def call_and_record():
        try:
            return call(tmp_path)
        finally:
            seen.append(snapshot())

    real = _adp.export_for_serving
    calls = []

    def counting(*args, **kwargs):  # the table's setup exports too: snapshot before the last
        calls.append(snapshot())
        return real(*args, **kwargs)

    monkeypatch.setattr(_adp, "export_for_serving", counting)
    run_case(call_and_record, expected)
    assert seen[-1] == calls[-1], "a refused export changed the directory tree"
    assert not [p for p in os.listdir(tmp_path) if ".tmp-" in p or ".old-" in p]


def test_concurrent_overwrites_end_with_one_model_and_no_leftovers(tmp_path):
    import os
    import threading

    path = _adp.export_for_serving(_x_dense(), tmp_path / "m" / "1", from_logits=True)
    errors = []

    def export(bias):
        net = _x_dense()
        net.layers[-1].bias.assign([bias])
        try:
            _adp.export_for_serving(net, path, from_logits=True, overwrite=True)
        except Exception as err:  # noqa: BLE001 - recorded and checked below
            errors.append(err)

    threads = [threading.Thread(target=export, args=(float(i),)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert os.listdir(tmp_path / "m") == ["1"]  # no .tmp- or .old- directory left
    assert sorted(os.listdir(path)) == ["assets", "fingerprint.pb", "saved_model.pb", "variables"]
    serve = _s_tf.saved_model.load(path).signatures["serving_default"]
    logit = float(serve(features=_s_tf.zeros((1, 3)))["logit"][0, 0])
    assert logit in (0.0, 1.0, 2.0, 3.0)  # one complete model: the last swapped in


def test_warmup_rows_with_a_string_feature_are_exported(tmp_path):
    ids = _s_keras.Input((), dtype="string", name="country")
    ctx = _s_keras.Input((2,), name="ctx")
    looked = _s_keras.layers.StringLookup(vocabulary=["fr", "de"], output_mode="one_hot")(ids)
    out = _s_keras.layers.Dense(1)(_s_keras.layers.Concatenate()([looked, ctx]))
    net = _s_keras.Model({"country": ids, "ctx": ctx}, out)
    path = _adp.export_for_serving(net, tmp_path / "m" / "1", from_logits=True, warmup_rows={
        "country": _np.array(["fr", "de"]), "ctx": _np.zeros((2, 2))})
    import os

    assert os.path.getsize(os.path.join(path, "assets.extra", "tf_serving_warmup_requests")) > 0


# --- labels as the entry points read them: pack_labels, epoch_length, string labels -----------
# (adp.pack_labels, adp.data.epoch_length, every loss and metric reading packed labels),
# eager and inside tf.function.

def _l_graph(fn):
    return lambda: _s_tf.function(fn)()


_L_STR = _np.array([["1", "0", "0"], ["0", "0", "1"]])

LABELS_CASES = [
    ("pack_labels source 2.5", lambda: _adp.pack_labels(2.5, n=2),
     (ValueError, r"`source` must be one of \['PU', .*got 2\.5")),
    ("pack_labels source 2.0", lambda: _adp.pack_labels(2.0, n=2),
     (ValueError, r"`source` must be one of .*got 2\.0")),
    ("pack_labels source True", lambda: _adp.pack_labels(True, e=[1, 0]),
     (ValueError, r"`source` must be one of .*got True")),
    ("pack_labels source '2'", lambda: _adp.pack_labels("2", n=2),
     (ValueError, r"`source` must be one of .*got '2'")),
    ("epoch_length lists of different lengths",
     lambda: _adp.data.epoch_length([10, 20, 30], [2, 3]),
     (ValueError, r"`rows` and `counts` must have one entry per stream.*got 3 and 2")),
    ("epoch_length count 0", lambda: _adp.data.epoch_length([2, 3], [2, 0]),
     (ValueError, r"`counts\[1\]` must be at least 1, got 0")),
    ("epoch_length empty", lambda: _adp.data.epoch_length([], []),
     (ValueError, "at least one")),
    ("epoch_length count 1.5", lambda: _adp.data.epoch_length([2], [1.5]),
     (TypeError, r"`counts\[0\]` must be an int")),
    ("epoch_length negative rows", lambda: _adp.data.epoch_length([-4], [2]),
     (ValueError, r"`rows\[0\]` must be at least 0")),
    ("loss with string labels", lambda: _adp.ADPUELoss(from_logits=True)(
        _L_STR, _np.zeros((2, 1))),
     (TypeError, "`y_true` must hold numbers .*got dtype string")),
    ("loss with string labels, graph", _l_graph(lambda: _adp.ADPUELoss(from_logits=True)(
        _s_tf.constant(_L_STR), _s_tf.zeros((2, 1)))),
     (TypeError, "`y_true` must hold numbers .*got dtype string")),
    ("risk with string labels", lambda: _adp.risks.nnpue(_L_STR, _np.zeros((2, 1))),
     (TypeError, "`y_true` must hold numbers")),
    ("ExposureLikelihood with string labels", lambda: _validation.ExposureLikelihood(
        from_logits=True).update_state(_np.array([["1", "0", "0", "0.5"]]), _np.zeros((1, 1))),
     (TypeError, "`y_true` must hold numbers")),
]


@pytest.mark.parametrize("call, expected", [c[1:] for c in LABELS_CASES],
                         ids=[c[0] for c in LABELS_CASES])
def test_bad_input_pack_labels_epoch_length_string_labels(call, expected):
    run_case(call, expected)


# --- TFRecord logs (adp.data.read_tfrecords): the file and the fix named up front -----------

def _r_write(path, rows=6, compression=None, cut=0):
    with _s_tf.io.TFRecordWriter(str(path), compression) as writer:
        for i in range(rows):
            writer.write(_s_tf.train.Example(features=_s_tf.train.Features(feature={
                "x": _s_tf.train.Feature(float_list=_s_tf.train.FloatList(value=[i, 1.0])),
                "w": _s_tf.train.Feature(int64_list=_s_tf.train.Int64List(value=[i % 2])),
            })).SerializeToString())
    if cut:
        raw = path.read_bytes()
        path.write_bytes(raw[:-cut])
    return str(path)


_R_SPEC = {"x": _s_tf.io.FixedLenFeature([2], _s_tf.float32),
           "w": _s_tf.io.FixedLenFeature([], _s_tf.int64)}


def _r_read(make, **kw):
    return lambda t: _adp.data.read_tfrecords(make(t), _R_SPEC, labels="w", **kw)


def _r_spec(changes, compression=None):
    """read_tfrecords of a good log with some keys of the spec changed (shape, dtype)."""
    spec = {**_R_SPEC, **{k: _s_tf.io.FixedLenFeature(shape, getattr(_s_tf, dtype))
                          for k, (shape, dtype) in changes.items()}}
    return lambda t: _adp.data.read_tfrecords(_r_write(t / "s.tfrecord", 6, compression), spec,
                                              labels="w", compression_type=compression)


TFRECORD_CASES = [
    ("an empty file, rows unknown", _r_read(lambda t: _s_dir(str(t), "e.tfrecord") and (
        (t / "e.tfrecord").write_bytes(b"") or str(t / "e.tfrecord"))),
     (ValueError, r"`files`: every file is empty .*`rows` is unknown.*e.tfrecord")),
    ("a truncated file", _r_read(lambda t: _r_write(t / "cut.tfrecord", cut=5)),
     (ValueError, r"`files`: '.*cut.tfrecord' is truncated or corrupt: it ends inside record 5")),
    ("a file cut inside a header", _r_read(lambda t: _r_write(t / "cut.tfrecord", cut=30)),
     (ValueError, r"cut.tfrecord' is truncated or corrupt")),
    ("a GZIP file read as uncompressed", _r_read(lambda t: _r_write(t / "g.tfrecord", 6, "GZIP")),
     (ValueError, r"g.tfrecord' is GZIP-compressed, but compression_type=None .*pass "
                  r"compression_type='GZIP'")),
    ("a ZLIB file read as GZIP", _r_read(lambda t: _r_write(t / "z.tfrecord", 6, "ZLIB"),
                                         compression_type="GZIP"),
     (ValueError, r"z.tfrecord' is ZLIB-compressed, but compression_type='GZIP'; pass "
                  r"compression_type='ZLIB'")),
    ("an uncompressed file read as GZIP", _r_read(lambda t: _r_write(t / "u.tfrecord"),
                                                  compression_type="GZIP"),
     (ValueError, r"u.tfrecord' is an uncompressed TFRecord file.*pass compression_type=None")),
    ("not a TFRecord file", _r_read(lambda t: _s_dir(str(t), "n.tfrecord") + "/n.tfrecord"),
     (ValueError, r"n.tfrecord' is not a TFRecord file")),
    ("a directory", _r_read(lambda t: _s_dir(str(t / "logs"))),
     (ValueError, r"`files`: '.*logs' is a directory; give the files in it, e\.g\. "
                  r"'.*logs/\*\.tfrecord'")),
    ("an unknown compression_type", _r_read(lambda t: _r_write(t / "u.tfrecord"),
                                            compression_type="snappy"),
     (ValueError, r"`compression_type` must be None, 'GZIP' or 'ZLIB', got 'snappy'")),
    ("a spec of another shape", _r_spec({"x": ([3], "float32")}),
     (ValueError, r"`features` does not match the records: the first record of '.*s.tfrecord' "
                  r"fails to parse: Key: x, .*Values size: 2 but output shape: \[3\]")),
    ("a spec of another dtype", _r_spec({"x": ([2], "int64")}),
     (ValueError, r"first record of .* Key: x, .*Data type: float but expected type: int64")),
    ("a spec with a key the records lack", _r_spec({"q": ([], "float32")}),
     (ValueError, r"first record of .* Feature: q .* is required but could not be found\. "
                  r"Fix the spec.*`default_value`")),
    ("a GZIP log and a spec of another shape", _r_spec({"x": ([1], "float32")}, "GZIP"),
     (ValueError, r"first record of '.*s.tfrecord' fails to parse: Key: x")),
]


@pytest.mark.parametrize("call, expected", [c[1:] for c in TFRECORD_CASES],
                         ids=[c[0] for c in TFRECORD_CASES])
def test_bad_input_read_tfrecords(call, expected, tmp_path):
    run_case(lambda: call(tmp_path), expected)


def test_read_tfrecords_takes_a_missing_key_with_a_default(tmp_path):
    spec = {**_R_SPEC, "q": _s_tf.io.FixedLenFeature([], _s_tf.float32, default_value=-1.0)}
    rows = list(_adp.data.read_tfrecords(_r_write(tmp_path / "d.tfrecord", 3), spec, labels="w"))
    assert [float(x["q"]) for x, _ in rows] == [-1.0, -1.0, -1.0]


@pytest.mark.parametrize("spelling", ["gzip", "Gzip", "GZIP"])
def test_read_tfrecords_takes_compression_in_any_case(tmp_path, spelling):
    path = _r_write(tmp_path / "g.tfrecord", 6, "GZIP")
    rows = list(_adp.data.read_tfrecords(path, _R_SPEC, labels="w", compression_type=spelling))
    assert [int(w) for _, w in rows] == [0, 1, 0, 1, 0, 1]


# --- with_propensity (adp.data.with_propensity): one output, the convention it was told ------

_p_DS = _adp.data.pue_dataset(_XA, _WA, _XB, _EB, batch_size=6, seed=0)


def _p_model(units=1, activation=None, outputs=1):
    a = _s_keras.Input((3,))
    outs = [_s_keras.layers.Dense(units, activation)(a) for _ in range(outputs)]
    return _s_keras.Model(a, outs[0] if outputs == 1 else outs)


PROPENSITY_CASES = [
    ("two output units", lambda: _adp.data.with_propensity(_p_DS, _p_model(units=2)),
     (ValueError, r"`exposure_model` must output one propensity per row.*shape \(None, 2\)")),
    ("two outputs", lambda: _adp.data.with_propensity(_p_DS, _p_model(outputs=2)),
     (ValueError, "`exposure_model` must output one propensity per row.*got 2 outputs")),
    ("a function with two columns", lambda: _adp.data.with_propensity(
        _p_DS, lambda x: _s_tf.ones((_s_tf.shape(x)[0], 2))),
     (ValueError, r"`exposure_model` must output one propensity per row")),
    ("a sigmoid model as logits", lambda: _adp.data.with_propensity(
        _p_DS, _p_model(activation="sigmoid"), from_logits=True),
     (ValueError, "`exposure_model` ends with a sigmoid activation.*Pass `from_logits=False`")),
    ("a logit model as probabilities", lambda: _adp.data.with_propensity(_p_DS, _p_model()),
     (ValueError, r"`exposure_model` must output probabilities in \[0, 1\].*`from_logits=True`")),
    ("logits as probabilities (graph: while iterating)", lambda: list(
        _adp.data.with_propensity(_p_DS, lambda x: 5.0 * _s_tf.ones((_s_tf.shape(x)[0], 1)))),
     (_s_tf.errors.InvalidArgumentError,
      r"`exposure_model` must output probabilities .*pass `from_logits=True`")),
]


@pytest.mark.parametrize("call, expected", [c[1:] for c in PROPENSITY_CASES],
                         ids=[c[0] for c in PROPENSITY_CASES])
def test_bad_input_with_propensity(call, expected):
    run_case(call, expected)


# --- metrics and callbacks that cannot do their job raise (ExposureLikelihood, ReferenceRisk,
# BestRound), and the tuner's build_net with two outputs (DebiasedHyperModel.build) ----------

_m_S = None


def _m_data():
    global _m_S
    if _m_S is None:
        _m_S = _adp.synthetic.synthetic_pue(120, 120, seed=0)
    return _m_S


def _m_model(metric, alternate=False):
    _s_keras.utils.set_random_seed(0)
    net = _s_keras.Sequential([_s_keras.Input((2,)), _s_keras.layers.Dense(1)])
    model = _adp.DebiasedModel(net, initial_dagger=0.5) if alternate else net
    model.compile("sgd", loss=_adp.ADPUELoss(from_logits=True), metrics=[metric])
    return model


def _m_train():
    s = _m_data()
    return _adp.data.pue_dataset(s.x_pu, s.w_pu, s.x_e, s.e_e, batch_size=120, seed=0)


def _m_fit(metric, callbacks=(), alternate=True, validation=True, epochs=1):
    def call():
        s = _m_data()
        val = _m_train() if not validation else _adp.validation.pue_validation_data(
            s.x_pu, s.w_pu, s.x_e, s.e_e, batch_size=120)
        return _m_model(metric, alternate).fit(
            _m_train(), validation_data=val, epochs=epochs, verbose=0,
            callbacks=list(callbacks))
    return call


def _m_two_outputs(hp):
    a = _s_keras.Input((2,))
    return _s_keras.Model(a, [_s_keras.layers.Dense(1)(a), _s_keras.layers.Dense(1)(a)])


def _m_sigmoid(hp):
    return _s_keras.Sequential([_s_keras.Input((2,)), _s_keras.layers.Dense(1, "sigmoid")])


METRIC_CALLBACK_TUNER_CASES = [
    ("ExposureLikelihood on validation data without the layout", _m_fit(
        _validation.ExposureLikelihood(from_logits=True), validation=False),
     (ValueError, r"ExposureLikelihood got labels without yardsticks .*pue_validation_data")),
    ("ReferenceRisk on validation data without the layout", _m_fit(
        _validation.ReferenceRisk(_adp.ADPUELoss(from_logits=True)), validation=False),
     (ValueError, r"ReferenceRisk got labels without yardsticks")),
    ("ExposureLikelihood in evaluate on training batches",
     lambda: _m_model(_validation.ExposureLikelihood(from_logits=True)).evaluate(
         _m_train(), verbose=0),
     (ValueError, r"ExposureLikelihood got labels without yardsticks")),
    ("ExposureLikelihood called on 3 columns", lambda: _validation.ExposureLikelihood(
        from_logits=True).update_state(_adp.pack_labels(_adp.Source.PU, w=[1, 0]),
                                       _np.zeros((2, 1))),
     (ValueError, r"ExposureLikelihood got labels without yardsticks \(shape \(2, 3\)")),
    ("BestRound fed validation data without the layout", _m_fit(
        _validation.ExposureLikelihood(from_logits=True), validation=False,
        callbacks=[_adp.RefreshDagger(), _adp.BestRound()]),
     (ValueError, r"got labels without yardsticks")),
    ("BestRound without RefreshDagger", _m_fit(
        _validation.ExposureLikelihood(from_logits=True), epochs=2,
        callbacks=[_adp.BestRound()]),
     (ValueError, r"BestRound saw 2 epoch\(s\) but no round ended .*RefreshDagger")),
    ("BestRound with a period longer than the fit", _m_fit(
        _validation.ExposureLikelihood(from_logits=True),
        callbacks=[_adp.RefreshDagger(every_n_epochs=3), _adp.BestRound()]),
     (ValueError, r"no round ended")),
    ("DebiasedHyperModel build_net with two outputs", lambda: _HyperModel(
        build_net=_m_two_outputs).build(_kt.HyperParameters()),
     (ValueError, r"`build_net\(hp\)` must have a single output")),
    ("DebiasedHyperModel build_net ending in sigmoid with a logit loss", lambda: _HyperModel(
        build_net=_m_sigmoid).build(_kt.HyperParameters()),
     (ValueError, r"`build_net\(hp\)` ends with a sigmoid activation")),
]


@pytest.mark.parametrize("call, expected", [c[1:] for c in METRIC_CALLBACK_TUNER_CASES],
                         ids=[c[0] for c in METRIC_CALLBACK_TUNER_CASES])
def test_bad_input_metrics_callbacks_tuner_that_cannot_do_their_job(call, expected):
    run_case(call, expected)


def test_bench_file_with_a_huge_feature_index_is_refused_before_allocating(tmp_path,
                                                                             monkeypatch):
    from adpue_tf.experiments.bench import linear as bench_linear

    def no_read(*args, **kwargs):
        raise AssertionError("the dense matrix was about to be allocated")

    monkeypatch.setattr(bench_linear.datasets, "read_libsvm", no_read)
    (tmp_path / "d.svm").write_text("+1 1:0.5\n-1 300000000000:1\n")
    run_case(lambda: _h_bench.load_file(tmp_path / "d.svm"),
             (ValueError, r"d.svm', line 2: feature index 300,000,000,000 makes a dense float32 "
                          r"matrix of 2 rows x 300000000000 columns, 2.24e\+03 GiB, over the "
                          r".* GiB this run may use"))
    run_case(lambda: _h_cli("--file", str(tmp_path / "d.svm"))(tmp_path),
             (ValueError, r"feature index 300,000,000,000"))
    assert not (tmp_path / "o").exists()


# --- flags and sizes that must not be read loosely (builders' shuffle, synthetic sizes) -------

FLAG_SIZE_CASES = [
    ("pue_dataset shuffle 'yes'", lambda: _adp.data.pue_dataset(_XA, _WA, _XB, _EB, shuffle="yes"),
     (TypeError, "`shuffle` must be True or False, got 'yes'")),
    ("sse_dataset shuffle 1", lambda: _adp.data.sse_dataset(_XA, _WA, _WA, shuffle=1),
     (TypeError, "`shuffle` must be True or False, got 1")),
    ("synthetic_pue n_pu True", lambda: _adp.synthetic.synthetic_pue(True, 10),
     (ValueError, r"`n_pu` \(number of rows\) must be a positive integer, got True")),
    ("synthetic_pue n_pu 2.0", lambda: _adp.synthetic.synthetic_pue(2.0, 10),
     (ValueError, r"`n_pu` \(number of rows\) must be a positive integer, got 2.0")),
    ("synthetic_pue dim True", lambda: _adp.synthetic.synthetic_pue(10, 10, dim=True),
     (ValueError, "`dim` must be a positive integer, got True")),
    ("loss on labels of an unknown column count (graph)", lambda: _s_tf.function(
        lambda y: _adp.ADPUELoss(from_logits=True)(y, _s_tf.zeros((2, 1))),
        input_signature=[_s_tf.TensorSpec((None, None), _s_tf.float32)])(
        _s_tf.zeros((2, 3))),
     (ValueError, r"`y_true` has an unknown number of columns .*Give one model one layout")),
    ("pue_dataset x_pu None", lambda: _adp.data.pue_dataset(None, _WA, _XA, _WA),
     (TypeError, "`x_pu` is None; it needs the features")),
    ("fpue_dataset x_u None", lambda: _adp.data.fpue_dataset(_XA, None, _XA, _WA),
     (TypeError, "`x_u` is None; it needs the features")),
    ("pue_dataset ragged x_e", lambda: _adp.data.pue_dataset(
        _XA, _WA, _s_tf.ragged.constant([[1.0, 2.0], [3.0]] * (len(_WA) // 2)), _WA),
     (TypeError, "`x_e` is a tf.RaggedTensor, whose rows have different lengths")),
]


@pytest.mark.parametrize("call, expected", [c[1:] for c in FLAG_SIZE_CASES],
                         ids=[c[0] for c in FLAG_SIZE_CASES])
def test_bad_input_builder_flags_synthetic_sizes_label_columns(call, expected):
    run_case(call, expected)


def test_export_through_a_link_into_another_savedmodel_is_refused(tmp_path):
    """A link to another SavedModel's variables/ is inside it too: nothing is written."""
    import os

    inner = _adp.export_for_serving(_x_dense(), tmp_path / "m" / "1", from_logits=True)
    os.symlink(os.path.join(inner, "variables"), tmp_path / "ln")
    before = sorted(os.listdir(os.path.join(inner, "variables")))
    with pytest.raises(ValueError, match=r"lies inside the SavedModel directory .*m/1'"):
        _adp.export_for_serving(_x_dense(), tmp_path / "ln" / "x", from_logits=True)
    assert sorted(os.listdir(os.path.join(inner, "variables"))) == before
