"""export_for_serving: the SavedModel round trip in a fresh process, dtypes, layout, bad input.

One module fixture trains and exports every kind of model once, then a single
fresh Python process that imports only TensorFlow and NumPy loads all exports
and runs ``serving_default`` at batch sizes 1 and 7, while ``saved_model_cli``
inspects the mixed_float16 one in parallel.
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import keras
import numpy as np
import pytest
import tensorflow as tf

import adpue_tf as adp
from adpue_tf import synthetic
from adpue_tf.serving import export_for_serving, serving_path

DIM = 3
MIXED = ("mixed_float16", "mixed_bfloat16")
SAVED_MODEL_CLI = Path(sys.executable).with_name("saved_model_cli")
CLI_CASES = ("mixed_float16",)  # each saved_model_cli run costs a TensorFlow import

# Runs in a fresh interpreter: TensorFlow and NumPy only, never adpue_tf.
LOADER = textwrap.dedent("""
    import json, sys
    import numpy as np
    import tensorflow as tf

    cfg = json.loads(sys.argv[1])
    inputs = np.load(cfg["inputs"])
    arrays, meta = {}, {}
    for name, path in cfg["exports"].items():
        fn = tf.saved_model.load(path).signatures["serving_default"]
        args, kwargs = fn.structured_input_signature
        info = meta[name] = {
            "args": len(args),
            "inputs": {k: [v.dtype.name, list(v.shape)] for k, v in kwargs.items()},
            "outputs": {k: [v.dtype.name, list(v.shape)]
                        for k, v in fn.structured_outputs.items()},
            "results": {},
        }
        for batch in ("1", "7"):
            res = fn(features=tf.constant(inputs[f"{name}__{batch}"]))
            info["results"][batch] = {k: [v.dtype.name, list(v.shape)] for k, v in res.items()}
            for key, value in res.items():
                arrays[f"{name}__{batch}__{key}"] = value.numpy()
    np.savez(cfg["outputs"], **arrays)
    meta["_modules"] = sorted(m for m in ("adpue_tf", "keras") if m in sys.modules)
    with open(cfg["meta"], "w") as f:
        json.dump(meta, f)
    assert "adpue_tf" not in sys.modules, "the loader imported adpue_tf"
""")


def _sigmoid(z):
    return 1.0 / (1.0 + np.exp(-np.asarray(z, np.float64)))


def _data(seed=3):
    s = synthetic.synthetic_pue(256, 256, dim=DIM, seed=seed)
    return adp.data.pue_dataset(s.x_pu, s.w_pu, s.x_e, s.e_e, batch_size=64, seed=0)


def _net(seed, activation=None, dropout=False):
    keras.utils.set_random_seed(seed)
    layers = [keras.Input((DIM,)), keras.layers.Dense(8, activation="relu")]
    if dropout:
        layers.append(keras.layers.Dropout(0.2))  # holds RNG state: must not be exported
    layers.append(keras.layers.Dense(1, activation=activation))
    return keras.Sequential(layers)


class _Subclassed(keras.Model):
    def __init__(self):
        super().__init__(name="subclassed")  # TF refuses variable paths starting with "_"
        self.hidden = keras.layers.Dense(4, activation="tanh")
        self.out = keras.layers.Dense(1)

    def build(self, input_shape):
        self.hidden.build(input_shape)
        self.out.build((None, 4))

    def call(self, x, training=False):
        return self.out(self.hidden(x))


def _train(model, ds, epochs, from_logits=True, **fit_kwargs):
    model.compile(keras.optimizers.Adam(0.05), loss=adp.ADPUELoss(from_logits=from_logits),
                  jit_compile=False)  # XLA compilation would dominate these tiny fits
    model.fit(ds, epochs=epochs, verbose=0, shuffle=False, **fit_kwargs)
    return model


def _build_models(ds):
    """name -> (model, the from_logits argument to pass to export_for_serving)."""
    models = {"plain": (_train(_net(0, dropout=True), ds, 2), None)}

    debiased = adp.DebiasedModel(_net(1))
    _train(debiased, ds, 3, callbacks=[adp.RefreshDagger(every_n_epochs=2)])
    assert debiased.refreshes == 1  # refreshed after epoch 2, trained on in epoch 3
    models["debiased"] = (debiased, None)

    models["prob"] = (_train(_net(2, activation="sigmoid"), ds, 2, from_logits=False), None)

    keras.utils.set_random_seed(4)
    sub = _Subclassed()
    sub.build((None, DIM))  # known input shape through get_build_config(); not compiled
    models["subclassed"] = (sub, True)

    for i, policy in enumerate(MIXED):
        keras.config.set_dtype_policy(policy)
        try:
            net = _train(_net(5 + i), ds, 1)
        finally:
            keras.config.set_dtype_policy("float32")
        assert net.layers[-1].compute_dtype != "float32"
        models[policy] = (net, None)
    return models


def _cli(path):
    return subprocess.Popen([str(SAVED_MODEL_CLI), "show", "--dir", path, "--all"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """Train and export every case, then load them all in one fresh process."""
    assert SAVED_MODEL_CLI.exists(), f"no saved_model_cli next to {sys.executable}"
    tmp = tmp_path_factory.mktemp("serving")
    models = _build_models(_data())
    rng = np.random.default_rng(0)
    x7 = rng.normal(0.0, 2.0, size=(7, DIM)).astype(np.float32)
    x1 = rng.normal(0.0, 2.0, size=(1, DIM)).astype(np.float32)
    paths, inputs, expected = {}, {}, {}
    for version, (name, (model, from_logits)) in enumerate(models.items(), start=1):
        path = serving_path(tmp / "export", name, version)
        assert export_for_serving(model, path, from_logits=from_logits) == path
        paths[name] = path
        for batch, x in (("1", x1), ("7", x7)):
            inputs[f"{name}__{batch}"] = x
            expected[(name, batch)] = model.predict(x, verbose=0)
    np.savez(tmp / "inputs.npz", **inputs)
    cfg = {"exports": paths, "inputs": str(tmp / "inputs.npz"),
           "outputs": str(tmp / "outputs.npz"), "meta": str(tmp / "meta.json")}
    clis = {name: _cli(paths[name]) for name in CLI_CASES}
    loader = subprocess.run([sys.executable, "-c", LOADER, json.dumps(cfg)], cwd=tmp, check=False,
                            capture_output=True, text=True,
                            env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    cli_out = {}
    for name, proc in clis.items():
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err[-3000:]
        cli_out[name] = out
    assert loader.returncode == 0, loader.stderr[-3000:]
    got = dict(np.load(cfg["outputs"]))
    meta = json.loads(Path(cfg["meta"]).read_text())
    return {"models": models, "paths": paths, "expected": expected, "got": got,
            "meta": meta, "cli": cli_out}


CASES = ["plain", "debiased", "prob", "subclassed", *MIXED]


@pytest.mark.slow
def test_loader_never_imported_adpue_tf(exported):
    assert "adpue_tf" not in exported["meta"]["_modules"]


@pytest.mark.slow
@pytest.mark.parametrize("name", CASES)
def test_round_trip_in_fresh_process(exported, name):
    model, from_logits = exported["models"][name]
    from_logits = model.loss.from_logits if from_logits is None else from_logits
    meta = exported["meta"][name]
    assert meta["args"] == 0
    assert meta["inputs"] == {"features": ["float32", [None, DIM]]}
    assert meta["outputs"] == {"probability": ["float32", [None, 1]],
                               "logit": ["float32", [None, 1]]}
    diffs = {}
    for batch in ("1", "7"):
        assert meta["results"][batch] == {"probability": ["float32", [int(batch), 1]],
                                          "logit": ["float32", [int(batch), 1]]}
        pred = exported["expected"][(name, batch)].astype(np.float64).reshape(-1, 1)
        prob = exported["got"][f"{name}__{batch}__probability"]
        logit = exported["got"][f"{name}__{batch}__logit"]
        if from_logits:
            want_prob, want_logit = _sigmoid(pred), pred
        else:
            p = np.clip(pred, 1e-7, 1 - 1e-7)
            want_prob, want_logit = pred, np.log(p) - np.log1p(-p)
        diffs[batch] = (float(np.max(np.abs(prob - want_prob))),
                        float(np.max(np.abs(logit - want_logit))))
        np.testing.assert_allclose(prob, want_prob, rtol=0, atol=1e-6)
        np.testing.assert_allclose(logit, want_logit, rtol=0,
                                   atol=1e-6 if from_logits else 1e-5)
        np.testing.assert_allclose(_sigmoid(logit), prob, rtol=0, atol=1e-6)
    print(f"\n{name}: max|Δprobability|, max|Δlogit| by batch size: {diffs}")


@pytest.mark.slow
def test_debiased_model_exports_net_not_snapshot(exported):
    model, _ = exported["models"]["debiased"]
    net_w, snap_w = model.net.get_weights(), model.snapshot.get_weights()
    assert any(not np.allclose(a, b) for a, b in zip(net_w, snap_w, strict=True))
    ckpt = os.path.join(exported["paths"]["debiased"], "variables", "variables")
    reader = tf.train.load_checkpoint(ckpt)
    saved = [reader.get_tensor(k) for k in reader.get_variable_to_shape_map()
             if k != "_CHECKPOINTABLE_OBJECT_GRAPH"]
    assert len(saved) == len(model.net.weights) == 4

    def held(value):
        return any(s.shape == value.shape and np.array_equal(s, value) for s in saved)

    assert all(held(w) for w in net_w)
    assert not any(held(w) for w, n in zip(snap_w, net_w, strict=True) if not np.allclose(w, n))


@pytest.mark.slow
def test_only_the_forward_pass_variables_are_exported(exported):
    """Dropout's RNG state, optimizer and metric variables stay out; each weight once."""
    model, _ = exported["models"]["plain"]
    assert len(model.variables) > len(model.weights)  # the seed generator state
    names = [n for n, _ in tf.train.list_variables(
        os.path.join(exported["paths"]["plain"], "variables", "variables"))]
    assert len(names) - 1 == len(model.weights) == 4


def _signature_block(text):
    start = text.index("signature_def['serving_default']:")
    nxt = [i for i in (text.find("signature_def[", start + 1),
                       text.find("The MetaGraph", start + 1),
                       text.find("Concrete Functions", start + 1)) if i > 0]
    return text[start:min(nxt) if nxt else len(text)]


@pytest.mark.slow
@pytest.mark.parametrize("name", CLI_CASES)
def test_saved_model_cli_lists_predict_signature(exported, name):
    block = _signature_block(exported["cli"][name])
    assert "Method name is: tensorflow/serving/predict" in block
    assert re.search(r"inputs\['features'\] tensor_info:\s+dtype: DT_FLOAT\s+"
                     rf"shape: \(-1, {DIM}\)", block), block
    for key in ("probability", "logit"):
        assert re.search(rf"outputs\['{key}'\] tensor_info:\s+dtype: DT_FLOAT\s+"
                         r"shape: \(-1, 1\)", block), block
    assert len(re.findall(r"inputs\['", block)) == 1


@pytest.mark.slow
@pytest.mark.parametrize("policy", MIXED)
def test_mixed_precision_serves_float32(exported, policy):
    model, _ = exported["models"][policy]
    assert model.predict(np.zeros((1, DIM), np.float32), verbose=0).dtype != np.float32
    meta = exported["meta"][policy]
    assert {k: v[0] for k, v in meta["outputs"].items()} == {"probability": "float32",
                                                             "logit": "float32"}
    assert keras.config.dtype_policy().name == "float32"


@pytest.mark.slow
def test_version_layout_and_no_leftovers(exported):
    paths = exported["paths"]
    for version, name in enumerate(CASES, start=1):
        path = Path(paths[name])
        assert path.name == str(version) and path.parent.name == name
        assert (path / "saved_model.pb").is_file() and (path / "variables").is_dir()
        assert [p.name for p in path.parent.iterdir()] == [str(version)]


# -- in-process checks and bad input ------------------------------------------

def _tiny(units=1, loss=None):
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((DIM,)), keras.layers.Dense(units)])
    model.compile("sgd", loss=loss if loss is not None else adp.ADPUELoss(from_logits=True))
    return model


def _serve(path, x):
    fn = tf.saved_model.load(path).signatures["serving_default"]
    return {k: v.numpy() for k, v in fn(features=tf.constant(x)).items()}


def test_from_logits_from_keras_loss_and_explicit_override(tmp_path):
    x = np.random.default_rng(1).normal(size=(5, DIM)).astype(np.float32)
    model = _tiny(loss=keras.losses.BinaryCrossentropy(from_logits=True))
    z = model.predict(x, verbose=0)
    out = _serve(export_for_serving(model, str(tmp_path / "a")), x)
    np.testing.assert_allclose(out["logit"], z, atol=1e-6)
    np.testing.assert_allclose(out["probability"], _sigmoid(z), atol=1e-6)
    # Explicit from_logits wins over the loss's: the output is read as a probability.
    model = keras.Sequential([keras.Input((DIM,)), keras.layers.Dense(1, "sigmoid")])
    model.compile("sgd", loss=adp.ADPUELoss(from_logits=True))
    out = _serve(export_for_serving(model, tmp_path / "b", from_logits=False), x)
    np.testing.assert_allclose(out["probability"], model.predict(x, verbose=0), atol=1e-6)
    # ... but never against the model: a logit model is not served as a probability.
    with pytest.raises(ValueError, match="a sample of its outputs spans .*outputs logits"):
        export_for_serving(_tiny(), tmp_path / "c", from_logits=False)
    assert not (tmp_path / "c").exists()


def test_probability_extremes_give_finite_logits(tmp_path):
    a = keras.Input((1,))  # a probability model: whatever comes in, [0, 1] comes out
    model = keras.Model(a, keras.layers.Lambda(lambda t: keras.ops.clip(t, 0.0, 1.0))(a))
    out = _serve(export_for_serving(model, tmp_path / "m", from_logits=False),
                 np.array([[0.0], [1.0], [0.5]], np.float32))
    assert np.all(np.isfinite(out["logit"]))
    np.testing.assert_allclose(out["logit"][:, 0], [-16.118, 15.942, 0.0], atol=1e-2)


def test_rank_one_output_is_served_as_a_column(tmp_path):
    a = keras.Input((DIM,))
    model = keras.Model(a, keras.layers.Reshape(())(keras.layers.Dense(1)(a)))
    x = np.ones((4, DIM), np.float32)
    out = _serve(export_for_serving(model, tmp_path / "m", from_logits=True), x)
    assert out["logit"].shape == (4, 1)
    np.testing.assert_allclose(out["logit"][:, 0], model.predict(x, verbose=0), atol=1e-6)


def _tree(root):
    """Every path under ``root`` with the bytes of each file."""
    root = Path(root)
    return sorted((str(p.relative_to(root)), p.read_bytes() if p.is_file() else None)
                  for p in root.rglob("*"))


def _biased(bias):
    """A tiny model whose logit for zero features is ``bias``."""
    model = _tiny()
    model.layers[-1].bias.assign([bias])
    return model


def _logit0(path):
    return float(_serve(str(path), np.zeros((1, DIM), np.float32))["logit"][0, 0])


def test_existing_saved_model_needs_overwrite_and_is_replaced(tmp_path):
    path = tmp_path / "ranker" / "1"
    export_for_serving(_biased(1.0), path)
    (path / "assets.extra").mkdir()
    (path / "assets.extra" / "old.txt").write_text("old")
    before = _tree(tmp_path)
    with pytest.raises(FileExistsError, match="already holds a SavedModel; pass overwrite=True"):
        export_for_serving(_biased(2.0), path)
    assert _tree(tmp_path) == before and _logit0(path) == 1.0
    assert export_for_serving(_biased(2.0), path, overwrite=True) == str(path)
    assert _logit0(path) == 2.0  # the user's file in assets.extra/ is carried over
    assert (path / "assets.extra" / "old.txt").read_text() == "old"
    assert [p.name for p in path.parent.iterdir()] == ["1"]  # no temporary directory left
    assert export_for_serving(_biased(3.0), f"{path}{os.sep}", overwrite=True) == str(path)
    assert _logit0(path) == 3.0 and [p.name for p in path.parent.iterdir()] == ["1"]
    pbtxt = tmp_path / "text_model"  # a SavedModel in text form counts too
    pbtxt.mkdir()
    (pbtxt / "saved_model.pbtxt").write_text("meta_graphs {}")
    export_for_serving(_biased(4.0), pbtxt, overwrite=True)
    assert _logit0(pbtxt) == 4.0 and not (pbtxt / "saved_model.pbtxt").exists()


def test_an_empty_directory_is_used_without_overwrite(tmp_path):
    path = tmp_path / "m" / "1"
    path.mkdir(parents=True)
    export_for_serving(_biased(0.5), path)
    assert _logit0(path) == 0.5 and [p.name for p in path.parent.iterdir()] == ["1"]


@pytest.mark.parametrize("overwrite", [False, True])
@pytest.mark.parametrize("given", ["", ".", "./", "cwd", "parent", "root"])
def test_working_directory_and_its_ancestors_are_refused(tmp_path, monkeypatch, given,
                                                         overwrite):
    cwd = tmp_path / "project" / "work"
    cwd.mkdir(parents=True)
    (cwd / "notes.txt").write_text("mine")
    (cwd.parent / "data.csv").write_text("1,2")
    monkeypatch.chdir(cwd)
    path = {"cwd": str(cwd), "parent": str(cwd.parent), "root": os.sep}.get(given, given)
    before = _tree(tmp_path)
    words = ("must name a directory" if given == "" else
             "is the current working directory" if given in (".", "./", "cwd") else
             "is an ancestor of the current working directory")
    with pytest.raises(ValueError, match=words):
        export_for_serving(_tiny(), path, overwrite=overwrite)
    assert _tree(tmp_path) == before


def test_serving_base_directory_is_refused(tmp_path):
    base = tmp_path / "export" / "ranker"
    for version in (1, 2):
        export_for_serving(_biased(float(version)), base / str(version))
    before = _tree(tmp_path)
    for overwrite in (False, True):
        with pytest.raises(ValueError, match=r"a TF Serving base directory holding "
                                             r"versions 1, 2.*Nothing was written or deleted"):
            export_for_serving(_tiny(), base, overwrite=overwrite)
    assert _tree(tmp_path) == before
    assert _logit0(base / "1") == 1.0 and _logit0(base / "2") == 2.0


def test_other_files_and_directories_are_refused(tmp_path):
    stale = tmp_path / "stale"
    stale.mkdir()
    (stale / "notes.txt").write_text("old")
    (tmp_path / "file").write_text("x")
    os.symlink(stale, tmp_path / "link")
    before = _tree(tmp_path)
    for name, words in (("stale", r"a directory that is not a SavedModel \(it holds notes.txt\)"),
                        ("file", "exists and is a file"),
                        ("link", "a symbolic link to")):
        for overwrite in (False, True):
            with pytest.raises(ValueError, match=words):
                export_for_serving(_tiny(), tmp_path / name, overwrite=overwrite)
    assert _tree(tmp_path) == before
    with pytest.raises(TypeError, match="`path`"):
        export_for_serving(_tiny(), 3)
    with pytest.raises(TypeError, match="`overwrite`"):
        export_for_serving(_tiny(), tmp_path / "new", overwrite="yes")
    assert _tree(tmp_path) == before


def test_a_failed_export_keeps_the_old_one(tmp_path, monkeypatch):
    path = tmp_path / "m" / "1"
    export_for_serving(_biased(1.0), path)
    before = _tree(tmp_path)

    def broken_write(self, *args, **kwargs):
        raise OSError("disk full")

    with monkeypatch.context() as m:  # the new export fails half-way through writing
        # the class Keras builds for the TF backend (a private subclass of ExportArchive)
        m.setattr(type(keras.export.ExportArchive()), "write_out", broken_write)
        with pytest.raises(OSError, match="disk full"):
            export_for_serving(_biased(2.0), path, overwrite=True)
    assert _tree(tmp_path) == before

    from adpue_tf.serving import target

    def refused(src, dst):  # the atomic exchange fails for a reason other than support
        ctypes.set_errno(errno.EACCES)
        return -1

    with monkeypatch.context() as m:
        m.setattr(target, "_EXCHANGE", refused)
        with pytest.raises(PermissionError):
            export_for_serving(_biased(2.0), path, overwrite=True)
    assert _tree(tmp_path) == before and _logit0(path) == 1.0

    real_rename, calls = os.rename, []

    def rename(src, dst):  # the swap fails after the old export was moved aside
        calls.append((src, dst))
        if len(calls) == 2:
            raise OSError("rename failed")
        real_rename(src, dst)

    with monkeypatch.context() as m:  # where there is no exchange: two renames
        m.setattr(target, "_EXCHANGE", None)
        m.setattr(os, "rename", rename)
        with pytest.raises(OSError, match="rename failed"):
            export_for_serving(_biased(2.0), path, overwrite=True)
    assert len(calls) == 3 and calls[2] == (calls[0][1], str(path))  # moved back
    assert _tree(tmp_path) == before and _logit0(path) == 1.0


def test_wrong_width_or_rank_names_the_input(tmp_path):
    path = export_for_serving(_tiny(), tmp_path / "m")
    for shape, got in (((2, DIM + 1), "[2,4]"), ((DIM,), "[3]"), ((1, 2, DIM), "[1,2,3]")):
        with pytest.raises(tf.errors.InvalidArgumentError,
                           match=re.escape(f"Shape of tensor features {got} is not compatible "
                                           f"with expected shape [?,{DIM}]")):
            _serve(path, np.zeros(shape, np.float32))
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match="expected to be a float tensor but is a double tensor"):
        _serve(path, np.zeros((2, DIM), np.float64))  # TF's own check of the dtype
    # Python 3.13's inspect says "keyword-only argument"
    with pytest.raises(TypeError, match="missing a required (keyword-only )?argument: 'features'"):
        tf.saved_model.load(path).signatures["serving_default"](x=tf.zeros((2, DIM)))


def test_string_input_is_refused_naming_it(tmp_path):
    ids = keras.Input((1,), dtype="string", name="item_id")
    hashed = keras.layers.Hashing(num_bins=8, output_mode="one_hot")(ids)
    model = keras.Model(ids, keras.layers.Dense(1)(hashed))
    with pytest.raises(ValueError, match="input 'item_id' has dtype string"):
        export_for_serving(model, tmp_path / "m", from_logits=True)
    assert not (tmp_path / "m").exists()


def _two_outputs():
    a = keras.Input((DIM,))
    return keras.Model(a, [keras.layers.Dense(1)(a), keras.layers.Dense(1)(a)])


def _dict_output():
    a = keras.Input((DIM,))
    return keras.Model(a, {"z": keras.layers.Dense(1)(a)})


def _rank_three_output():
    a = keras.Input((DIM,))
    return keras.Model(a, keras.layers.Reshape((1, 1))(keras.layers.Dense(1)(a)))


def _two_inputs():
    a, b = keras.Input((DIM,)), keras.Input((2,))  # both used: Keras 3.12 refuses a dangling input
    return keras.Model([a, b], keras.layers.Dense(1)(keras.layers.Concatenate()([a, b])))


@pytest.mark.parametrize("make, match", [
    (_two_outputs, "single output"),
    (_dict_output, "single output"),
    (lambda: _tiny(units=2), "one output unit"),
    (_rank_three_output, "one output unit"),
    (_two_inputs, "single input"),
    (lambda: keras.Sequential([keras.layers.Dense(1)]), "`model` has no known input shape"),
    (_Subclassed, "`model` has no known input shape"),
    (lambda: adp.DebiasedModel(keras.Sequential([keras.layers.Dense(1)])),
     "`model` has no known input shape"),
])
def test_bad_models_raise_before_writing(tmp_path, make, match):
    path = tmp_path / "export" / "m" / "1"
    with pytest.raises(ValueError, match=match):
        export_for_serving(make(), path, from_logits=True)
    assert not (tmp_path / "export").exists()


def test_unknown_from_logits_asks_for_it(tmp_path):
    for model in (_tiny(loss="binary_crossentropy"),
                  keras.Sequential([keras.Input((DIM,)), keras.layers.Dense(1)])):
        with pytest.raises(ValueError, match="from_logits"):
            export_for_serving(model, tmp_path / "m")
    with pytest.raises(TypeError, match="from_logits"):
        export_for_serving(_tiny(), tmp_path / "m", from_logits=1)
    with pytest.raises(TypeError, match="keras.Model"):
        export_for_serving(lambda x: x, tmp_path / "m", from_logits=True)
    assert not (tmp_path / "m").exists()


def test_serving_path():
    assert serving_path(Path("export"), "ranker", 12) == os.path.join("export", "ranker", "12")
    assert serving_path("e", "m", np.int64(0)) == os.path.join("e", "m", "0")
    for bad in ("", ".", "..", "a/b"):
        with pytest.raises(ValueError, match="`name`"):
            serving_path("e", bad, 1)
    with pytest.raises(ValueError, match="`version`"):
        serving_path("e", "m", -1)
    for bad in (1.0, True, "1"):
        with pytest.raises(TypeError, match="`version`"):
            serving_path("e", "m", bad)
    with pytest.raises(TypeError, match="`name`"):
        serving_path("e", 3, 1)
    with pytest.raises(TypeError, match="`base` must be a str or os.PathLike, got NoneType"):
        serving_path(None, "m", 1)
    assert serving_path("~/export", "m", 1) == os.path.join(os.path.expanduser("~"), "export",
                                                            "m", "1")


def test_a_path_from_home_is_expanded_never_a_directory_named_tilde(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    got = export_for_serving(_tiny(), "~/models/1")
    assert got == str(tmp_path / "home" / "models" / "1")
    assert (tmp_path / "home" / "models" / "1" / "saved_model.pb").exists()
    assert not (tmp_path / "~").exists()


# -- feature-dict models: named features and serialized tf.Example -------------

# Runs in a fresh interpreter without adpue_tf; builds the tf.Example protos itself.
DICT_LOADER = textwrap.dedent("""
    import json, sys
    import numpy as np
    import tensorflow as tf

    cfg = json.loads(sys.argv[1])
    rows = dict(np.load(cfg["inputs"]))
    arrays, meta = {}, {}

    def example(i, names):
        feature = {}
        for name in names:
            v = rows[name][i].reshape(-1)
            if v.dtype.kind == "S":
                feature[name] = tf.train.Feature(bytes_list=tf.train.BytesList(value=list(v)))
            elif v.dtype.kind == "f":
                feature[name] = tf.train.Feature(float_list=tf.train.FloatList(value=v.tolist()))
            else:
                feature[name] = tf.train.Feature(int64_list=tf.train.Int64List(value=v.tolist()))
        return tf.train.Example(
            features=tf.train.Features(feature=feature)).SerializeToString()

    for case, path in cfg["exports"].items():
        loaded = tf.saved_model.load(path)
        named, examples = loaded.signatures["serving_default"], loaded.signatures["examples"]
        specs = named.structured_input_signature[1]
        meta[case] = {
            "signatures": sorted(loaded.signatures),
            "inputs": {k: [v.dtype.name, list(v.shape)] for k, v in specs.items()},
            "examples_inputs": {k: [v.dtype.name, list(v.shape)] for k, v in
                                examples.structured_input_signature[1].items()},
            "outputs": {k: [v.dtype.name, list(v.shape)]
                        for k, v in named.structured_outputs.items()},
        }
        for batch in cfg["batches"]:
            feats = {k: tf.constant(rows[k][:batch], dtype=specs[k].dtype) for k in specs}
            for sig, out in (("named", named(**feats)),
                             ("examples", examples(examples=tf.constant(
                                 [example(i, list(specs)) for i in range(batch)])))):
                for key, value in out.items():
                    arrays[f"{case}__{batch}__{sig}__{key}"] = value.numpy()
    np.savez(cfg["outputs"], **arrays)
    meta["_modules"] = sorted(m for m in ("adpue_tf", "keras") if m in sys.modules)
    with open(cfg["meta"], "w") as f:
        json.dump(meta, f)
""")
DICT_BATCHES = (1, 7, 64)
USERS, ITEMS = 20, ["shoes", "hats", "bags", "socks"]


def _ads_net(seed, activation=None, int32_ids=False):
    """An ads-style model: user id (int64), item (string, looked up), campaign (int32 or
    int64, hashed), context floats."""
    keras.utils.set_random_seed(seed)
    user = keras.Input((1,), dtype="int64", name="user_id")
    item = keras.Input((1,), dtype="string", name="item")
    campaign = keras.Input((1,), dtype="int32" if int32_ids else "int64", name="campaign")
    context = keras.Input((3,), name="context")
    parts = [
        keras.layers.Flatten()(keras.layers.Embedding(USERS, 4)(user)),
        keras.layers.Flatten()(keras.layers.Embedding(len(ITEMS) + 1, 4)(
            keras.layers.StringLookup(vocabulary=ITEMS)(item))),
        keras.layers.Hashing(num_bins=8, output_mode="one_hot")(campaign),
        context,
    ]
    h = keras.layers.Dense(8, activation="relu")(keras.layers.Concatenate()(parts))
    out = keras.layers.Dense(1, activation=activation)(h)
    return keras.Model({"user_id": user, "item": item, "campaign": campaign,
                        "context": context}, out)


def _ads_rows(n, seed=0):
    rng = np.random.default_rng(seed)
    return {"user_id": rng.integers(0, USERS, (n, 1)).astype(np.int64),
            "item": rng.choice(ITEMS + ["unknown"], (n, 1)).astype("S"),
            "campaign": rng.integers(0, 1000, (n, 1)).astype(np.int64),
            "context": rng.normal(0, 1, (n, 3)).astype(np.float32)}


def _ads_models():
    """name -> (model, from_logits); the debiased one trained on feature-dict rows."""
    models = {"ads_plain": (_ads_net(0), True),
              "ads_prob": (_ads_net(1, activation="sigmoid"), False),
              "ads_int32": (_ads_net(2, int32_ids=True), True)}
    debiased = adp.DebiasedModel(_ads_net(3))
    rows = _ads_rows(64, seed=1)
    x = {k: tf.constant(v) for k, v in rows.items()}
    y = np.concatenate([adp.pack_labels(adp.Source.PU, w=np.arange(32) % 2),
                        adp.pack_labels(adp.Source.E, e=(np.arange(32) % 3 == 0) * 1.0)])
    debiased.compile(keras.optimizers.Adam(0.05), loss=adp.ADPUELoss(from_logits=True))
    debiased.fit(tf.data.Dataset.from_tensor_slices((x, y)).batch(64), epochs=2, verbose=0)
    models["ads_debiased"] = (debiased, None)
    keras.config.set_dtype_policy("mixed_float16")
    try:
        models["ads_mixed_float16"] = (_ads_net(4), True)
    finally:
        keras.config.set_dtype_policy("float32")
    return models


@pytest.fixture(scope="module")
def exported_dicts(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("serving_dicts")
    models = _ads_models()
    rows = _ads_rows(max(DICT_BATCHES))
    paths, expected = {}, {}
    for version, (name, (model, from_logits)) in enumerate(models.items(), start=1):
        paths[name] = export_for_serving(model, serving_path(tmp, name, version),
                                         from_logits=from_logits)
        feats = {k: tf.constant(v.astype(np.int32) if k == "campaign" and "int32" in name
                                else v) for k, v in rows.items()}
        net = model.net if isinstance(model, adp.DebiasedModel) else model
        expected[name] = (np.asarray(net.predict(feats, verbose=0, batch_size=64), np.float64)
                          .reshape(-1, 1), from_logits is not False)
    np.savez(tmp / "inputs.npz", **rows)
    cfg = {"exports": paths, "inputs": str(tmp / "inputs.npz"), "batches": DICT_BATCHES,
           "outputs": str(tmp / "outputs.npz"), "meta": str(tmp / "meta.json")}
    loader = subprocess.run([sys.executable, "-c", DICT_LOADER, json.dumps(cfg)], cwd=tmp,
                            capture_output=True, text=True, check=False,
                            env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    assert loader.returncode == 0, loader.stderr[-3000:]
    return {"got": dict(np.load(cfg["outputs"])), "expected": expected,
            "meta": json.loads(Path(cfg["meta"]).read_text()), "paths": paths}


DICT_CASES = ["ads_plain", "ads_prob", "ads_int32", "ads_debiased", "ads_mixed_float16"]


@pytest.mark.slow
@pytest.mark.parametrize("name", DICT_CASES)
def test_feature_dict_export_round_trip_in_fresh_process(exported_dicts, name):
    meta = exported_dicts["meta"][name]
    assert "adpue_tf" not in exported_dicts["meta"]["_modules"]
    assert meta["signatures"] == ["examples", "serving_default"]
    campaign = "int32" if name == "ads_int32" else "int64"
    assert meta["inputs"] == {"user_id": ["int64", [None, 1]], "item": ["string", [None, 1]],
                              "campaign": [campaign, [None, 1]],
                              "context": ["float32", [None, 3]]}
    assert meta["examples_inputs"] == {"examples": ["string", [None]]}
    assert meta["outputs"] == {"probability": ["float32", [None, 1]],
                               "logit": ["float32", [None, 1]]}
    pred, from_logits = exported_dicts["expected"][name]
    worst = 0.0
    for batch in DICT_BATCHES:
        want = _sigmoid(pred[:batch]) if from_logits else pred[:batch]
        for sig in ("named", "examples"):
            prob = exported_dicts["got"][f"{name}__{batch}__{sig}__probability"]
            logit = exported_dicts["got"][f"{name}__{batch}__{sig}__logit"]
            assert prob.shape == logit.shape == (batch, 1) and prob.dtype == np.float32
            worst = max(worst, float(np.max(np.abs(prob - want))))
            np.testing.assert_allclose(prob, want, rtol=0, atol=1e-5)
            np.testing.assert_allclose(_sigmoid(logit), prob, rtol=0, atol=1e-6)
    print(f"\n{name}: max|Δp| over batches {DICT_BATCHES} and both signatures: {worst:.2e}")


@pytest.mark.slow
def test_feature_dict_export_holds_only_forward_variables(exported_dicts):
    names = [n for n, _ in tf.train.list_variables(
        os.path.join(exported_dicts["paths"]["ads_plain"], "variables", "variables"))]
    assert len(names) - 1 == len(_ads_net(0).weights) == 6  # 2 embeddings, 2 dense layers


def test_feature_dict_bad_inputs_are_refused_before_writing(tmp_path):
    ragged = keras.Input((None,), dtype="int64", name="history")
    model = keras.Model({"history": ragged}, keras.layers.Dense(1)(
        keras.layers.GlobalAveragePooling1D()(keras.layers.Embedding(5, 2)(ragged))))
    with pytest.raises(ValueError, match=r"feature 'history' has shape \(None, None\)"):
        export_for_serving(model, tmp_path / "m", from_logits=True)
    a = keras.Input((2,), name="bad key")
    with pytest.raises(ValueError, match="input key 'bad key' cannot name a serving input"):
        export_for_serving(keras.Model({"bad key": a}, keras.layers.Dense(1)(a)),
                           tmp_path / "m", from_logits=True)
    assert not (tmp_path / "m").exists()


def test_feature_dict_wrong_shape_names_the_feature(tmp_path):
    path = export_for_serving(_ads_net(0), tmp_path / "m", from_logits=True)
    fn = tf.saved_model.load(path).signatures["serving_default"]
    rows = {k: tf.constant(v) for k, v in _ads_rows(2).items()}
    rows["context"] = tf.zeros((2, 4))
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match=re.escape("Shape of tensor context [2,4] is not compatible with "
                                       "expected shape [?,3]")):
        fn(**rows)
    examples = tf.saved_model.load(path).signatures["examples"]
    empty = tf.train.Example().SerializeToString()
    with pytest.raises(tf.errors.InvalidArgumentError, match="is required but could not be found"):
        examples(examples=tf.constant([empty]))


# -- TF Serving warm-up requests ------------------------------------------------

def _prediction_log_class():
    """PredictionLog -> PredictLog -> PredictRequest -> ModelSpec, declared here from the
    field numbers of tensorflow_serving/apis/*.proto (the TensorProto values kept as bytes),
    and parsed by protobuf itself: a check independent of the exporter's encoder."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    f = descriptor_pb2.FileDescriptorProto(name="warmup_test.proto", package="t",
                                           syntax="proto3")
    T = descriptor_pb2.FieldDescriptorProto

    def message(name, fields, nested=()):
        m = f.message_type.add(name=name) if not nested else nested[0].nested_type.add(name=name)
        for fname, number, ftype, type_name, label in fields:
            m.field.add(name=fname, number=number, type=ftype, type_name=type_name,
                        label=label)
        return m

    opt, rep = T.LABEL_OPTIONAL, T.LABEL_REPEATED
    message("ModelSpec", [("name", 1, T.TYPE_STRING, None, opt),
                          ("signature_name", 3, T.TYPE_STRING, None, opt)])
    req = message("PredictRequest", [("model_spec", 1, T.TYPE_MESSAGE, ".t.ModelSpec", opt),
                                     ("inputs", 2, T.TYPE_MESSAGE,
                                      ".t.PredictRequest.InputsEntry", rep)])
    entry = req.nested_type.add(name="InputsEntry")
    entry.options.map_entry = True
    entry.field.add(name="key", number=1, type=T.TYPE_STRING, label=opt)
    entry.field.add(name="value", number=2, type=T.TYPE_BYTES, label=opt)
    message("PredictLog", [("request", 1, T.TYPE_MESSAGE, ".t.PredictRequest", opt)])
    message("PredictionLog", [("predict_log", 6, T.TYPE_MESSAGE, ".t.PredictLog", opt)])
    pool = descriptor_pool.DescriptorPool()
    pool.Add(f)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("t.PredictionLog"))


def _replay(path):
    """Each warm-up request of the export at ``path``: (model, signature, kwargs)."""
    log_class = _prediction_log_class()
    tensor_class = type(tf.make_tensor_proto(0.0))
    out = []
    for record in tf.data.TFRecordDataset(os.path.join(path, "assets.extra",
                                                       "tf_serving_warmup_requests")):
        req = log_class.FromString(record.numpy()).predict_log.request
        kwargs = {k: tf.constant(tf.make_ndarray(tensor_class.FromString(v)))
                  for k, v in req.inputs.items()}
        out.append((req.model_spec.name, req.model_spec.signature_name, kwargs))
    return out


def test_warmup_requests_replay_like_tf_serving(tmp_path):
    rows = _ads_rows(3, seed=5)
    net = _ads_net(0)
    path = export_for_serving(net, serving_path(tmp_path, "ranker", 1), from_logits=True,
                              warmup_rows=rows)
    requests = _replay(path)
    assert [(m, s) for m, s, _ in requests] == [("ranker", "serving_default"),
                                                ("ranker", "examples")]
    loaded = tf.saved_model.load(path)
    want = net.predict({k: tf.constant(v) for k, v in rows.items()}, verbose=0)
    for _, signature, kwargs in requests:
        got = loaded.signatures[signature](**kwargs)["logit"].numpy()
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-6)
    assert sorted(requests[0][2]) == sorted(rows)
    assert requests[1][2]["examples"].shape == (3,)

    dense = export_for_serving(_tiny(), tmp_path / "dense" / "2",
                               warmup_rows=np.ones((2, DIM), np.float32))
    ((model_name, signature, kwargs),) = _replay(dense)
    assert (model_name, signature, list(kwargs)) == ("dense", "serving_default", ["features"])
    assert kwargs["features"].dtype == tf.float32 and kwargs["features"].shape == (2, DIM)


@pytest.mark.parametrize("rows, match", [
    (np.ones((2, DIM + 1)), r"`warmup_rows\['features'\]` has shape \(2, 4\)"),
    (np.ones((0, DIM)), "with at least one row"),
    (np.full((1, DIM), np.nan), "NaN or infinite"),
    ({"x": np.ones((1, DIM))}, r"must hold the serving inputs \['features'\]"),
    (np.array([["a", "b", "c"]]), r"`warmup_rows\['features'\]` cannot be float32"),
])
def test_bad_warmup_rows_are_refused_before_writing(tmp_path, rows, match):
    with pytest.raises(ValueError, match=match):
        export_for_serving(_tiny(), tmp_path / "m", warmup_rows=rows)
    assert not (tmp_path / "m").exists()


# -- overwriting: a user's files, readers during the swap, killed exports -------

def test_overwrite_keeps_a_users_files_inside_the_saved_model(tmp_path):
    """Files a user put in assets.extra/ (where TensorFlow tells them to) are carried over;
    anything else inside the SavedModel that it does not reference is refused by name."""
    from adpue_tf.serving import target
    from adpue_tf.serving.warmup import WARMUP_FILE

    assert target._WARMUP_FILE == WARMUP_FILE  # the one file of assets.extra/ that is ours
    path = tmp_path / "ranker" / "1"
    export_for_serving(_biased(1.0), path, warmup_rows=np.ones((2, DIM), np.float32))
    extra = path / "assets.extra"
    (extra / "notes.txt").write_text("mine")
    (extra / "deep" / "er").mkdir(parents=True)
    (extra / "deep" / "er" / "table.bin").write_bytes(b"\x00\x01")
    export_for_serving(_biased(2.0), path, overwrite=True,
                       warmup_rows=np.zeros((3, DIM), np.float32))
    assert _logit0(path) == 2.0
    assert (extra / "notes.txt").read_text() == "mine"
    assert (extra / "deep" / "er" / "table.bin").read_bytes() == b"\x00\x01"
    ((_, _, kwargs),) = _replay(path)  # the warm-up requests are the new export's own
    assert kwargs["features"].shape == (3, DIM)
    assert sorted(p.name for p in path.parent.iterdir()) == ["1"]

    # Without warmup_rows the old warm-up requests would neither fit the new model nor
    # be kept: refused by name, before anything is written.
    before = _tree(tmp_path)
    with pytest.raises(ValueError, match=r"assets\.extra/tf_serving_warmup_requests.*"
                                         r"warmup_rows=.*Nothing was written or deleted"):
        export_for_serving(_biased(3.0), path, overwrite=True)
    assert _tree(tmp_path) == before
    (extra / "tf_serving_warmup_requests").unlink()
    export_for_serving(_biased(3.0), path, overwrite=True)
    assert _logit0(path) == 3.0 and (extra / "notes.txt").read_text() == "mine"

    # A user's file deeper in the SavedModel's own directories is named, not deleted.
    for where in ("variables", "assets"):
        (path / where / "mine.txt").write_text("mine")
        before = _tree(tmp_path)
        with pytest.raises(ValueError, match=rf"does not have \({where}/mine\.txt\).*"
                                             "Nothing was written or deleted"):
            export_for_serving(_biased(4.0), path, overwrite=True)
        assert _tree(tmp_path) == before
        (path / where / "mine.txt").unlink()


# Runs in its own process, like a server: polls `saved_model.pb` until told to stop.
POLLER = textwrap.dedent("""
    import os, sys, time
    pb, stop = sys.argv[1], sys.argv[2]
    polls = misses = 0
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        for _ in range(1000):
            polls += 1
            misses += not os.path.exists(pb)
        if os.path.exists(stop):
            break
    print(polls, misses)
""")


def test_a_reader_never_sees_the_export_missing_during_overwrites(tmp_path):
    path = tmp_path / "m" / "1"
    export_for_serving(_biased(0.0), path)
    stop = tmp_path / "stop"
    poller = subprocess.Popen([sys.executable, "-c", POLLER, str(path / "saved_model.pb"),
                               str(stop)], stdout=subprocess.PIPE, text=True)
    try:
        for bias in (1.0, 2.0, 3.0, 4.0):
            export_for_serving(_biased(bias), path, overwrite=True)
    finally:
        stop.write_text("")
        polls, misses = map(int, poller.communicate(timeout=180)[0].split())
    assert polls > 0 and misses == 0, f"saved_model.pb was missing in {misses} of {polls} polls"
    assert _logit0(path) == 4.0 and [p.name for p in path.parent.iterdir()] == ["1"]


def test_an_exchange_the_file_system_lacks_falls_back_to_two_renames(tmp_path, monkeypatch):
    from adpue_tf.serving import target

    path = tmp_path / "m" / "1"
    export_for_serving(_biased(1.0), path)
    for err in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
        def unsupported(src, dst, err=err):
            ctypes.set_errno(err)
            return -1

        monkeypatch.setattr(target, "_EXCHANGE", unsupported)
        export_for_serving(_biased(float(err)), path, overwrite=True)
        assert _logit0(path) == float(err) and [p.name for p in path.parent.iterdir()] == ["1"]
    monkeypatch.setattr(target, "_EXCHANGE", None)  # no renameat2 / renamex_np at all
    export_for_serving(_biased(5.0), path, overwrite=True)
    assert _logit0(path) == 5.0 and [p.name for p in path.parent.iterdir()] == ["1"]


# Runs target.py alone (standard library only, no TensorFlow): one export that stages
# a copy of a finished SavedModel and swaps it in, killed (os._exit) at `where`.
KILLED_EXPORT = textwrap.dedent("""
    import importlib.util, os, shutil, sys
    spec = importlib.util.spec_from_file_location("target", sys.argv[1])
    target = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(target)
    path, new, where = sys.argv[2:5]

    def die(*args):
        os._exit(9)

    def write(tmp):
        shutil.copytree(new, tmp, dirs_exist_ok=True)
        if where == "while writing":
            die()

    if where == "after the exchange":
        exchange = target._exchange
        target._exchange = lambda src, dst: exchange(src, dst) and die()
    elif where == "between the two renames":
        target._EXCHANGE = None
        rename, calls = os.rename, []

        def killing_rename(src, dst):
            calls.append(src)
            if len(calls) == 2:
                die()
            rename(src, dst)

        os.rename = killing_rename
    target._export_into(path, write, overwrite=True)
    sys.exit(3)  # never reached: every case dies
""")


@pytest.mark.parametrize("where", ["while writing", "after the exchange",
                                   "between the two renames"])
def test_a_killed_export_leaves_a_whole_model_and_the_next_one_cleans_up(tmp_path, where):
    from adpue_tf.serving import target

    path = tmp_path / "m" / "1"
    export_for_serving(_biased(1.0), path)
    new = export_for_serving(_biased(2.0), tmp_path / "new")
    # Not ours: a user's look-alike, another target's leftovers, a longer suffix, a file.
    decoys = [".1.old-mine/", ".2.tmp-abcdefgh/", ".1.tmp-abcdefghi/", ".1.tmp-abcdefgh.bak/",
              ".10.old-abcdefgh/", ".1.tmp-ABCDEFGH/", ".1.tmp-zzzzzzzz"]
    for name in decoys:
        if name.endswith("/"):
            (path.parent / name / "keep.txt").parent.mkdir()
            (path.parent / name / "keep.txt").write_text("mine")
        else:
            (path.parent / name).write_text("mine")
    proc = subprocess.run([sys.executable, "-c", KILLED_EXPORT, target.__file__, str(path),
                           new, where], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 9, proc.stderr
    left = sorted(set(os.listdir(path.parent)) - {"1"} - {d.rstrip("/") for d in decoys})
    ours = [n for n in left if not n.endswith(target.MARK)]
    assert sorted(n + target.MARK for n in ours) == [n for n in left if n.endswith(target.MARK)]
    assert [re.sub("-.*", "", n) for n in ours] == {
        "while writing": [".1.tmp"], "after the exchange": [".1.tmp"],
        "between the two renames": [".1.old", ".1.tmp"]}[where], ours
    if where == "between the two renames":  # the fallback's window: nothing at `path`
        assert not path.exists()
        # The next export puts the old model back before anything else ...
        with pytest.raises(FileExistsError, match="already holds a SavedModel"):
            export_for_serving(_biased(3.0), path)
        assert _logit0(path) == 1.0
    else:  # the old or the new model, whole, at `path`
        assert _logit0(path) == (1.0 if where == "while writing" else 2.0)
    export_for_serving(_biased(3.0), path, overwrite=True)
    assert _logit0(path) == 3.0
    assert sorted(os.listdir(path.parent)) == sorted(["1"] + [d.rstrip("/") for d in decoys])
    for name in decoys:
        keep = path.parent / name / "keep.txt" if name.endswith("/") else path.parent / name
        assert keep.read_text() == "mine"


def test_an_export_in_progress_is_not_taken_for_a_leftover(tmp_path):
    import fcntl

    path = tmp_path / "m" / "1"
    export_for_serving(_biased(1.0), path)
    from adpue_tf.serving import target

    live, dead = path.parent / ".1.tmp-abcdefgh", path.parent / ".1.old-abcdefgh"
    for d in (live, dead):
        d.mkdir()
        (d / "saved_model.pb").write_bytes(b"")
        (d.parent / (d.name + target.MARK)).write_text(target._MARK_TEXT)  # an export's own
    fd = os.open(live, os.O_RDONLY)  # what a running export holds on its directory
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        export_for_serving(_biased(2.0), path, overwrite=True)
    finally:
        os.close(fd)
    assert sorted(os.listdir(path.parent)) == sorted(["1", live.name, live.name + target.MARK])
    assert _logit0(path) == 2.0


def test_a_users_directory_named_like_a_leftover_is_never_touched(tmp_path):
    """Only directories this module made (its mark beside them) are leftovers to clean."""
    from adpue_tf.serving import target

    path = tmp_path / "m" / "1"
    export_for_serving(_biased(1.0), path)
    mine = [path.parent / ".1.tmp-abcdefgh", path.parent / ".1.old-abcdefgh"]
    for d in mine:
        d.mkdir()
        (d / "notes.txt").write_text("mine")
    # a mark of another text is no mark either
    (path.parent / (".1.old-abcdefgh" + target.MARK)).write_text("mine too")
    old = os.stat(mine[0]).st_mtime - 7200
    os.utime(mine[0], (old, old))  # old, as a killed export's would be
    export_for_serving(_biased(2.0), path, overwrite=True)
    assert _logit0(path) == 2.0
    for d in mine:
        assert (d / "notes.txt").read_text() == "mine"
    assert (path.parent / (".1.old-abcdefgh" + target.MARK)).read_text() == "mine too"
    assert sorted(os.listdir(path.parent)) == sorted(
        ["1", *(d.name for d in mine), ".1.old-abcdefgh" + target.MARK])
