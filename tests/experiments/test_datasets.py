"""Tests for adpue_tf.experiments.datasets: loaders on tiny fixtures, real files when present."""

from __future__ import annotations

import bz2
import dataclasses
import gzip
import os
from pathlib import Path

import numpy as np
import pytest

from adpue_tf.experiments import datasets as D

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "data"
FASHION = Path(D.FASHION_MNIST_DIR)


@pytest.fixture(autouse=True)
def _no_env(monkeypatch):
    monkeypatch.delenv(D.ENV_VAR, raising=False)


def _svm(path: Path, labels, n_features: int, compress=None) -> Path:
    """Write svmlight rows: feature 1 = row index / 100, feature n_features = -1."""
    lines = "".join(f"{lab} 1:{i / 100} {n_features}:-1\n" for i, lab in enumerate(labels))
    path.parent.mkdir(parents=True, exist_ok=True)
    if compress == "bz2":
        path = path.with_name(path.name + ".bz2")
        path.write_bytes(bz2.compress(lines.encode()))
    else:
        path.write_text(lines)
    return path


def _idx(path: Path, arr: np.ndarray, code: int, gz: bool) -> None:
    big = arr.astype(arr.dtype.newbyteorder(">"))
    raw = bytes([0, 0, code, arr.ndim]) + np.array(arr.shape, ">u4").tobytes() + big.tobytes()
    path.write_bytes(gzip.compress(raw) if gz else raw)


# ------------------------------------------------------------------ LIBSVM fixtures


def test_libsvm_parses_dense_with_declared_features(tmp_path):
    _svm(tmp_path / "libsvm" / "australian_scale", ["+1", "-1", "-1", "+1"], 14)
    ds = D.load_libsvm("australian", data_dir=tmp_path)
    assert ds.x.shape == (4, 14) and ds.x.dtype == np.float32 and ds.y.dtype == np.float32
    np.testing.assert_array_equal(ds.x[:, 0], np.float32([0, 0.01, 0.02, 0.03]))
    np.testing.assert_array_equal(ds.x[:, 13], -np.ones(4, np.float32))
    assert not ds.x[:, 1:13].any()
    np.testing.assert_array_equal(ds.y, [1, 0, 0, 1])
    np.testing.assert_array_equal(ds.labels, [1, -1, -1, 1])
    assert ds.name == "australian" and "+1" in ds.positive and ds.positive_fraction == 0.5


def test_libsvm_mushrooms_label_1_positive_and_bz2_in_flat_dir(tmp_path):
    _svm(tmp_path / "mushrooms", [1, 2, 2, 1, 2], 112, compress="bz2")
    ds = D.load("mushrooms", data_dir=tmp_path)
    assert ds.x.shape == (5, 112)
    np.testing.assert_array_equal(ds.y, [1, 0, 0, 1, 0])
    assert "label 1" in ds.positive


def test_libsvm_subsample_is_seeded_without_replacement(tmp_path):
    _svm(tmp_path / "w8a", [1, -1] * 10, 300)
    a = D.load_libsvm("w8a", data_dir=tmp_path, n_rows=7, seed=3)
    b = D.load_libsvm("w8a", data_dir=tmp_path, n_rows=7, seed=3)
    c = D.load_libsvm("w8a", data_dir=tmp_path, n_rows=7, seed=4)
    rows = np.rint(a.x[:, 0] * 100).astype(int)
    assert a.x.shape == (7, 300) and len(set(rows)) == 7 and np.all(np.diff(rows) > 0)
    np.testing.assert_array_equal(a.x, b.x)
    assert not np.array_equal(a.x, c.x)
    np.testing.assert_array_equal(a.y, (rows % 2 == 0).astype(np.float32))  # labels follow rows
    full = D.load_libsvm("w8a", data_dir=tmp_path, n_rows=20)
    assert full.x.shape == (20, 300)


@pytest.mark.parametrize("n_rows", [0, -1, 2.5, 21])
def test_libsvm_bad_n_rows(tmp_path, n_rows):
    _svm(tmp_path / "w8a", [1, -1] * 10, 300)
    with pytest.raises(ValueError, match="n_rows"):
        D.load_libsvm("w8a", data_dir=tmp_path, n_rows=n_rows)


def test_paper_rows():
    assert [D.paper_rows(n) for n in ("australian", "german", "mushrooms", "w8a", "covtype")] == [
        None, None, 1800, 1800, 1800]


def test_libsvm_unexpected_labels(tmp_path):
    _svm(tmp_path / "german.numer_scale", [1, 2], 24)
    with pytest.raises(ValueError, match=r"unexpected label\(s\) \[2(\.0)?\]"):
        D.load_libsvm("german", data_dir=tmp_path)


def test_libsvm_verify(tmp_path):
    _svm(tmp_path / "australian_scale", [1, -1], 14)
    with pytest.raises(ValueError, match="sha256"):
        D.load_libsvm("australian", data_dir=tmp_path, verify=True)
    _svm(tmp_path / "covtype.libsvm.binary.scale", [1, 2], 54)
    assert D.load_libsvm("covtype", data_dir=tmp_path).x.shape == (2, 54)
    with pytest.raises(ValueError, match="No known sha256"):
        D.load_libsvm("covtype", data_dir=tmp_path, verify=True)


def test_libsvm_missing_file_names_file_dir_and_url(tmp_path):
    with pytest.raises(FileNotFoundError) as err:
        D.load_libsvm("covtype", data_dir=tmp_path)
    msg = str(err.value)
    assert "covtype.libsvm.binary.scale" in msg and str(tmp_path / "libsvm") in msg
    assert D.LIBSVM_URL in msg


def test_libsvm_feature_index_beyond_declared(tmp_path):
    _svm(tmp_path / "australian_scale", [1, -1], 15)
    with pytest.raises(ValueError):
        D.load_libsvm("australian", data_dir=tmp_path)


# ------------------------------------------------------------------ data_dir


def test_data_dir_precedence(tmp_path, monkeypatch):
    arg, env, cwd = tmp_path / "arg", tmp_path / "env", tmp_path / "w" / "repo"
    for p in (arg, env, cwd, tmp_path / "w" / "shared" / "data"):
        p.mkdir(parents=True)
    monkeypatch.chdir(cwd)
    monkeypatch.setattr(D, "__file__", str(tmp_path / "nowhere" / "pkg" / "datasets.py"))
    assert D.data_dir() == (tmp_path / "w" / "shared" / "data").resolve()
    monkeypatch.setenv(D.ENV_VAR, str(env))
    assert D.data_dir() == env
    assert D.data_dir(arg) == arg
    _svm(env / "german.numer_scale", [1, -1], 24)
    assert D.load("german").x.shape == (2, 24)  # read from the env directory


def test_data_dir_repo_root_fallback_and_errors(tmp_path, monkeypatch):
    (tmp_path / "shared" / "data").mkdir(parents=True)
    monkeypatch.chdir(tmp_path)  # cwd/../shared/data does not exist
    monkeypatch.setattr(D, "__file__", str(tmp_path / "repo" / "adpue_tf" / "datasets.py"))
    assert D.data_dir() == (tmp_path / "shared" / "data").resolve()
    monkeypatch.setattr(D, "__file__", str(tmp_path / "a" / "b" / "c" / "datasets.py"))
    with pytest.raises(FileNotFoundError, match=D.ENV_VAR) as err:
        D.load_libsvm("australian")
    assert "australian_scale" in str(err.value) and D.LIBSVM_URL in str(err.value)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        D.data_dir(tmp_path / "missing")
    monkeypatch.setenv(D.ENV_VAR, str(tmp_path / "missing"))
    with pytest.raises(FileNotFoundError, match=D.ENV_VAR):
        D.data_dir()


# ------------------------------------------------------------------ real LIBSVM files

README_TABLE = [  # name, rows, features, positives (the README's label counts)
    ("australian", 690, 14, 307),
    ("german", 1000, 24, 300),
    ("mushrooms", 8124, 112, 3916),
    ("w8a", 49749, 300, 1479),
]


@pytest.mark.parametrize("name,rows,d,pos", README_TABLE)
def test_real_libsvm_files(name, rows, d, pos):
    if not (SHARED / "libsvm").is_dir():
        pytest.skip(f"shared LIBSVM data not found at {SHARED / 'libsvm'}")
    ds = D.load(name, data_dir=SHARED, verify=True)
    assert ds.x.shape == (rows, d) and int(ds.y.sum()) == pos
    assert ds.x.min() >= -1 and ds.x.max() <= 1
    if D.paper_rows(name):
        sub = D.load(name, data_dir=SHARED, n_rows=D.paper_rows(name), seed=1)
        assert sub.x.shape == (1800, d)


# ------------------------------------------------------------------ IDX / Fashion-MNIST


@pytest.mark.parametrize("gz", [False, True])
@pytest.mark.parametrize("dtype,code", [(np.uint8, 0x08), (np.int32, 0x0C), (np.float32, 0x0D)])
def test_read_idx_roundtrip(tmp_path, gz, dtype, code):
    arr = (np.arange(24) - 3).reshape(2, 3, 4).astype(dtype) if dtype != np.uint8 else \
        np.arange(24, dtype=np.uint8).reshape(2, 3, 4)
    _idx(tmp_path / "a", arr, code, gz)
    got = D.read_idx(tmp_path / "a")
    np.testing.assert_array_equal(got, arr)
    assert got.dtype == arr.dtype and got.dtype.isnative


def test_read_idx_rejects_bad_files(tmp_path):
    (tmp_path / "bad").write_bytes(b"\x01\x02\x08\x01\0\0\0\x01\x05")
    with pytest.raises(ValueError, match="not an IDX file"):
        D.read_idx(tmp_path / "bad")
    (tmp_path / "short").write_bytes(bytes([0, 0, 8, 1, 0, 0, 0, 3, 1, 2]))
    with pytest.raises(ValueError, match="header says"):
        D.read_idx(tmp_path / "short")


def _fake_fashion(path: Path) -> None:
    rng = np.random.default_rng(0)
    for split, n, gz in (("train", 6, True), ("t10k", 4, False)):
        suffix = ".gz" if gz else ""
        _idx(path / f"{split}-images-idx3-ubyte{suffix}",
             rng.integers(0, 256, (n, 28, 28)).astype(np.uint8), 0x08, gz)
        _idx(path / f"{split}-labels-idx1-ubyte{suffix}",
             (np.arange(n) + (0 if split == "train" else 6)).astype(np.uint8), 0x08, gz)


def test_fashion_mnist_fixture(tmp_path):
    _fake_fashion(tmp_path)
    ds = D.load("fashion_mnist", path=tmp_path)
    assert ds.x.shape == (10, 784) and ds.x.dtype == np.float32
    assert 0 <= ds.x.min() and ds.x.max() <= 1
    np.testing.assert_array_equal(ds.labels, np.arange(10))
    np.testing.assert_array_equal(ds.y, [1, 0, 1, 0, 1, 0, 1, 0, 1, 0])
    img = D.load_fashion_mnist(path=tmp_path, flatten=False)
    assert img.x.shape == (10, 28, 28, 1)
    np.testing.assert_array_equal(img.x.reshape(10, -1), ds.x)


def test_fashion_mnist_missing(tmp_path):
    with pytest.raises(FileNotFoundError) as err:
        D.load_fashion_mnist(path=tmp_path)
    assert str(tmp_path) in str(err.value)
    assert "apt-get install dataset-fashion-mnist" in str(err.value)


def test_real_fashion_mnist():
    if not (FASHION / "train-images-idx3-ubyte.gz").is_file():
        pytest.skip(f"Fashion-MNIST not installed at {FASHION} (apt-get install "
                    "dataset-fashion-mnist)")
    ds = D.load_fashion_mnist()
    assert ds.x.shape == (70000, 784) and int(ds.y.sum()) == 35000
    assert ds.x.min() == 0 and ds.x.max() == 1
    np.testing.assert_array_equal(np.bincount(ds.labels), np.full(10, 7000))


# ------------------------------------------------------------------ TFDS (mocked)


@pytest.mark.parametrize("name,shape,flat,positive", [
    ("mnist", (784,), (784,), [0, 2, 4, 6, 8]),
    ("cifar10", (32, 32, 3), (3072,), [0, 1, 8, 9]),
])
def test_tfds_mock(name, shape, flat, positive):
    tfds = pytest.importorskip("tensorflow_datasets")
    with tfds.testing.mock_data(num_examples=20):
        ds = D.load(name)
        flat_ds = D.load_tfds(name, flatten=True, split="train")
    assert ds.x.shape[1:] == shape and ds.x.dtype == np.float32 and len(ds.x) > 0
    assert 0 <= ds.x.min() and ds.x.max() <= 1 and flat_ds.x.shape[1:] == flat
    np.testing.assert_array_equal(ds.y, np.isin(ds.labels, positive).astype(np.float32))
    assert set(np.unique(ds.y)) <= {0.0, 1.0}


def test_tfds_missing_package(monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "tensorflow_datasets", None)
    with pytest.raises(ImportError, match="pip install tensorflow-datasets"):
        D.load_tfds("mnist")


# ------------------------------------------------------------------ names and label maps


@pytest.mark.parametrize("call", [
    lambda: D.load("imagenet"),
    lambda: D.load_libsvm("mnist"),
    lambda: D.load_tfds("fashion_mnist"),
    lambda: D.binarize("nope", [1]),
    lambda: D.paper_rows("mnist"),
])
def test_unknown_names_list_known(call):
    with pytest.raises(ValueError, match="known names"):
        call()


def test_label_maps_and_binarize():
    assert set(D.LABEL_MAPS) == set(D.NAMES) == {
        "australian", "german", "mushrooms", "w8a", "covtype", "fashion_mnist", "mnist",
        "cifar10"}
    for lm in D.LABEL_MAPS.values():
        assert set(lm.positive) < set(lm.labels) and lm.description
    np.testing.assert_array_equal(D.binarize("mnist", np.arange(10)), np.arange(10) % 2 == 0)
    np.testing.assert_array_equal(D.binarize("cifar10", [[0], [3], [9]]), [1, 0, 1])
    with pytest.raises(ValueError, match="unexpected"):
        D.binarize("mnist", [10])


def test_dataset_is_frozen():
    ds = D.Dataset("t", np.zeros((1, 2), np.float32), np.ones(1, np.float32), "1")
    with pytest.raises(dataclasses.FrozenInstanceError):
        ds.name = "u"
    assert "x=(1, 2) float32" in repr(ds) and ds.positive_fraction == 1.0
    assert os.fspath(D.data_dir(Path("."))) == "."
