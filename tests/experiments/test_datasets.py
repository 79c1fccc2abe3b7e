"""Tests for adpue_tf.experiments.datasets: loaders on tiny fixtures, real files when present."""

from __future__ import annotations

import bz2
import dataclasses
import gzip
import hashlib
import os
import re
import shutil
from pathlib import Path

import keras
import numpy as np
import pytest

import adpue_tf
from adpue_tf.experiments import datasets as D

# The real LIBSVM files: ADPUE_DATA_DIR (the Makefile sets it), else the copy
# beside the repository where this project keeps one (tests only; the package
# knows no such path).
REAL = Path(os.environ.get(D.ENV_VAR) or
            Path(__file__).resolve().parents[2].parent / "shared" / "data" / "libsvm")
FASHION = Path(D.FASHION_MNIST_DIR)


def _offline(*args, **kwargs):
    raise Exception("URL fetch failure: the tests never reach the network")


@pytest.fixture(autouse=True)
def _no_env(monkeypatch):
    monkeypatch.delenv(D.ENV_VAR, raising=False)
    monkeypatch.setattr(keras.utils, "get_file", _offline)


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
    ds = D.load_libsvm("australian", data_dir=tmp_path, verify=False)
    assert ds.x.shape == (4, 14) and ds.x.dtype == np.float32 and ds.y.dtype == np.float32
    np.testing.assert_array_equal(ds.x[:, 0], np.float32([0, 0.01, 0.02, 0.03]))
    np.testing.assert_array_equal(ds.x[:, 13], -np.ones(4, np.float32))
    assert not ds.x[:, 1:13].any()
    np.testing.assert_array_equal(ds.y, [1, 0, 0, 1])
    np.testing.assert_array_equal(ds.labels, [1, -1, -1, 1])
    assert ds.name == "australian" and "+1" in ds.positive and ds.positive_fraction == 0.5


def test_libsvm_mushrooms_label_1_positive_and_bz2_in_flat_dir(tmp_path):
    _svm(tmp_path / "mushrooms", [1, 2, 2, 1, 2], 112, compress="bz2")
    ds = D.load("mushrooms", data_dir=tmp_path, verify=False)
    assert ds.x.shape == (5, 112)
    np.testing.assert_array_equal(ds.y, [1, 0, 0, 1, 0])
    assert "label 1" in ds.positive


def test_libsvm_subsample_is_seeded_without_replacement(tmp_path):
    _svm(tmp_path / "w8a", [1, -1] * 10, 300)
    a = D.load_libsvm("w8a", data_dir=tmp_path, n_rows=7, seed=3, verify=False)
    b = D.load_libsvm("w8a", data_dir=tmp_path, n_rows=7, seed=3, verify=False)
    c = D.load_libsvm("w8a", data_dir=tmp_path, n_rows=7, seed=4, verify=False)
    rows = np.rint(a.x[:, 0] * 100).astype(int)
    assert a.x.shape == (7, 300) and len(set(rows)) == 7 and np.all(np.diff(rows) > 0)
    np.testing.assert_array_equal(a.x, b.x)
    assert not np.array_equal(a.x, c.x)
    np.testing.assert_array_equal(a.y, (rows % 2 == 0).astype(np.float32))  # labels follow rows
    full = D.load_libsvm("w8a", data_dir=tmp_path, n_rows=20, verify=False)
    assert full.x.shape == (20, 300)


@pytest.mark.parametrize("n_rows", [0, -1, 2.5, 21, True, "3"])
def test_libsvm_bad_n_rows(tmp_path, n_rows):
    _svm(tmp_path / "w8a", [1, -1] * 10, 300)
    with pytest.raises(ValueError, match="n_rows"):
        D.load_libsvm("w8a", data_dir=tmp_path, n_rows=n_rows, verify=False)


def test_paper_rows():
    assert [D.paper_rows(n) for n in ("australian", "german", "mushrooms", "w8a", "covtype")] == [
        None, None, 1800, 1800, 1800]


def test_libsvm_unexpected_labels(tmp_path):
    _svm(tmp_path / "german.numer_scale", [1, 2], 24)
    with pytest.raises(ValueError, match=r"german.numer_scale: .*unexpected label\(s\) \[2(\.0)?\]"):
        D.load_libsvm("german", data_dir=tmp_path, verify=False)


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_libsvm_verify_local_copies(tmp_path, monkeypatch):
    path = _svm(tmp_path / "australian_scale", [1, -1], 14)
    with pytest.raises(ValueError, match="sha256") as err:  # verify is the default
        D.load_libsvm("australian", data_dir=tmp_path)
    assert str(path) in str(err.value) and D.libsvm._SHA256["australian_scale"] in str(err.value)
    monkeypatch.setitem(D.libsvm._SHA256, "australian_scale", _digest(path.read_bytes()))
    assert D.load_libsvm("australian", data_dir=tmp_path).x.shape == (2, 14)
    # a compressed copy is checked by its decompressed bytes
    mush = _svm(tmp_path / "libsvm" / "mushrooms", [1, 2, 1], 112, compress="bz2")
    monkeypatch.setitem(D.libsvm._SHA256, "mushrooms", _digest(bz2.decompress(mush.read_bytes())))
    assert D.load_libsvm("mushrooms", data_dir=tmp_path).x.shape == (3, 112)
    mush.write_bytes(bz2.compress(b"1 1:1\n"))
    with pytest.raises(ValueError, match="mushrooms.bz2: sha256"):
        D.load_libsvm("mushrooms", data_dir=tmp_path)
    # covtype has no published sha256: it loads from a local copy, unverified
    _svm(tmp_path / "covtype.libsvm.binary.scale", [1, 2], 54)
    assert D.load_libsvm("covtype", data_dir=tmp_path).x.shape == (2, 54)


def test_libsvm_missing_local_file_names_file_dirs_url_and_variable(tmp_path, monkeypatch):
    for given in ("arg", "env"):
        if given == "env":
            monkeypatch.setenv(D.ENV_VAR, str(tmp_path))
        with pytest.raises(FileNotFoundError) as err:
            D.load_libsvm("w8a", data_dir=tmp_path if given == "arg" else None)
        msg = str(err.value)
        assert "'w8a'" in msg and str(tmp_path / "libsvm") in msg and str(tmp_path) in msg
        assert D.LIBSVM_FILES_URL + "w8a" in msg and D.ENV_VAR in msg


def test_libsvm_feature_index_beyond_declared(tmp_path):
    _svm(tmp_path / "australian_scale", [1, -1], 15)
    with pytest.raises(ValueError, match=r"australian_scale, line 1: feature index 15 .*1\.\.14"):
        D.load_libsvm("australian", data_dir=tmp_path, verify=False)


# ------------------------------------------------------------------ Keras cache (offline)


def test_libsvm_download_goes_through_keras_get_file(tmp_path, monkeypatch):
    calls = []
    source = _svm(tmp_path / "src" / "german.numer_scale", [1, -1, 1], 24)

    def fake_get_file(fname, origin, file_hash, hash_algorithm, cache_subdir):
        calls.append((fname, origin, file_hash, hash_algorithm, cache_subdir))
        target = tmp_path / "keras" / cache_subdir / fname
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(source, target)
        return str(target)

    monkeypatch.setattr(keras.utils, "get_file", fake_get_file)
    ds = D.load("german")
    assert ds.x.shape == (3, 24) and ds.y.tolist() == [1, 0, 1]
    assert calls == [("german.numer_scale", D.LIBSVM_FILES_URL + "german.numer_scale",
                      "97637cc6b994bd3fa78999c771bc044bea7a0cdf91d43b6ecfd10f7e7c4ebc82",
                      "sha256", "datasets/adpue_tf")]
    # covtype has no published sha256: never fetched, and the message says where to put it
    with pytest.raises(FileNotFoundError, match=D.ENV_VAR) as err:
        D.load_libsvm("covtype")
    assert len(calls) == 1 and D.LIBSVM_FILES_URL + "covtype.libsvm.binary.scale.bz2" in str(err.value)
    with pytest.raises(FileNotFoundError, match="no published sha256, so it is never downloaded"):
        D.load_libsvm("covtype", data_dir=tmp_path)


def test_libsvm_offline_names_file_url_and_variable():
    with pytest.raises(FileNotFoundError) as err:  # get_file fails (the autouse fixture)
        D.load_libsvm("australian")
    msg = str(err.value)
    assert "'australian_scale'" in msg and D.LIBSVM_FILES_URL + "australian_scale" in msg
    assert D.ENV_VAR in msg and "~/.keras/datasets/adpue_tf" in msg and "URL fetch failure" in msg


def test_published_sha256():
    assert D.libsvm._SHA256 == {
        "australian_scale": "86799bcc4dbcd41929a514fa181d1c1a40e01f009dee139d4141a194d7ecd9e3",
        "german.numer_scale": "97637cc6b994bd3fa78999c771bc044bea7a0cdf91d43b6ecfd10f7e7c4ebc82",
        "mushrooms": "f39a4eb628dc61a7d43760815b061c9e497aa728ce1ad8bde57a09ef6043b538",
        "w8a": "6a9fa8fd5f524303240a5db07d4b3d4a51e8b7b4b20a914105d8e3e8c81640f2",
    }


# ------------------------------------------------------------------ corrupt files

CORRUPT = [  # file content, words the error must contain after the file name
    (b"+1 1:0.5\n-1 1:nan\n", r", line 2: value 'nan' is not finite"),
    (b"+1 1:inf\n", r", line 1: value 'inf' is not finite"),
    (b"+1 1:0.5\n\n-1 2:1e39\n", r", line 3: value '1e39' is not finite in float32"),
    (b"+1 1:0.5\n+1 1:0.", r", line 2: the file ends in the middle of this line \('\+1 1:0\.'\)"),
    (b"", r": the file is empty"),
    (b"\n# only a comment\n", r": the file is empty"),
    (b"+1 1:0.5\nyes 1:1\n", r", line 2: label 'yes' is not a number"),
    (b"+1 1:0.5 x\n", r", line 1: 'x' is not index:value"),
    (b"+1 2:0.5 1:1\n", r", line 1: feature index 1 does not increase"),
    (b"+1 0:0.5\n", r", line 1: feature index 0 is outside 1\.\.14"),
    (b"+1 1:0.5\n-1 1:\xff\n", r", line 2: not a text file"),
    (b"nan 1:0.5\n", r", line 1: label 'nan' is not finite"),
]


@pytest.mark.parametrize("content, words", CORRUPT)
def test_libsvm_corrupt_files_name_file_and_line(tmp_path, content, words):
    path = tmp_path / "australian_scale"
    path.write_bytes(content)
    with pytest.raises(ValueError, match="australian_scale" + words):
        D.load_libsvm("australian", data_dir=tmp_path, verify=False)


# mtime=0 and explicit ids: a gzip header holds the time it was written, and test ids must be the
# same in every pytest-xdist worker (they collect separately, possibly a second apart).
@pytest.mark.parametrize("ext, data", [
    (".gz", gzip.compress(b"+1 1:0.5\n" * 50, mtime=0)[:-12]),  # cut short
    (".gz", b"\x1f\x8b" + b"junk" * 10),
    (".bz2", bz2.compress(b"+1 1:0.5\n" * 50)[:-10]),
    (".bz2", b"BZh9" + b"junk" * 10),
], ids=["gz-cut-short", "gz-junk", "bz2-cut-short", "bz2-junk"])
def test_libsvm_corrupt_archives_name_the_file(tmp_path, ext, data):
    (tmp_path / ("w8a" + ext)).write_bytes(data)
    kind = ext[1:].replace("gz", "gzip")
    with pytest.raises(ValueError, match=rf"w8a{ext}: corrupt {kind} file"):
        D.load_libsvm("w8a", data_dir=tmp_path, verify=False)


def test_read_libsvm_gzip_and_exact_values(tmp_path):
    path = tmp_path / "f.gz"
    path.write_bytes(gzip.compress(b"-1 2:0.25 3:-3.5e2 # comment\n\n+1\n"))
    x, labels = D.read_libsvm(path, 3)
    np.testing.assert_array_equal(x, np.float32([[0, 0.25, -350], [0, 0, 0]]))
    np.testing.assert_array_equal(labels, [-1, 1])


TEXT = "-1 2:0.25 3:-3.5e2 # commentaire: é\r\n\r\n+1\r\n"


@pytest.mark.parametrize("encoding", ["ascii-crlf", "utf-8", "utf-8-sig", "utf-16", "utf-16-le",
                                      "utf-16-be", "utf-32"])
def test_read_libsvm_takes_any_unicode_text_with_its_byte_order_mark(tmp_path, encoding):
    from adpue_tf.experiments.bench import load_file

    text = TEXT.replace("é", "e") if encoding == "ascii-crlf" else TEXT
    raw = text.encode(encoding.removesuffix("-crlf"))
    if encoding in ("utf-16-le", "utf-16-be"):  # what Windows writes: the mark, then the text
        raw = "\ufeff".encode(encoding) + raw
    path = tmp_path / "f.svm"
    path.write_bytes(raw)
    x, labels = D.read_libsvm(path, 3)
    np.testing.assert_array_equal(x, np.float32([[0, 0.25, -350], [0, 0, 0]]))
    np.testing.assert_array_equal(labels, [-1, 1])
    assert load_file(path).x.shape == (2, 3)  # `bench linear --file`: its indices read too


def test_read_libsvm_refuses_bytes_that_are_not_utf8_naming_the_encoding(tmp_path):
    path = tmp_path / "f.svm"
    path.write_bytes("+1 1:0.5 # é\n".encode("latin-1"))
    with pytest.raises(ValueError, match=r"f.svm, line 1: not a text file \(byte 0xe9 is not "
                                         r"UTF-8\); save it as UTF-8"):
        D.read_libsvm(path, 3)


# ------------------------------------------------------------------ data_dir


def test_data_dir_precedence(tmp_path, monkeypatch):
    arg, env = tmp_path / "arg", tmp_path / "env"
    for p in (arg, env):
        p.mkdir(parents=True)
    (tmp_path / "w" / "shared" / "data").mkdir(parents=True)  # never searched
    monkeypatch.chdir(tmp_path / "w")
    assert D.data_dir() is None  # the Keras cache
    monkeypatch.setenv(D.ENV_VAR, str(env))
    assert D.data_dir() == env
    assert D.data_dir(arg) == arg
    _svm(env / "german.numer_scale", [1, -1], 24)
    assert D.load("german", verify=False).x.shape == (2, 24)  # read from the env directory


def test_data_dir_errors(tmp_path, monkeypatch):
    with pytest.raises(FileNotFoundError, match="from `data_dir`.*does not exist"):
        D.data_dir(tmp_path / "missing")
    monkeypatch.setenv(D.ENV_VAR, str(tmp_path / "missing"))
    with pytest.raises(FileNotFoundError, match=D.ENV_VAR):
        D.data_dir()
    with pytest.raises(FileNotFoundError, match=D.ENV_VAR):
        D.load_libsvm("german")


def test_package_knows_no_shared_path():
    root = Path(adpue_tf.__file__).resolve().parent
    pattern = r"""[/\\]shared\b|\bshared[/\\]|["']shared["']\s*/|/\s*["']shared["']"""
    assert re.search(pattern, 'Path.cwd().parent / "shared" / "data"')  # what it catches
    assert re.search(pattern, 'env = "../shared/data/libsvm"')
    assert not re.search(pattern, 'config.pop("shared", False)')  # a config key is fine
    for path in root.rglob("*.py"):  # no "shared" as a path component, quoted or joined
        assert not re.search(pattern, path.read_text()), path


# ------------------------------------------------------------------ real LIBSVM files

README_TABLE = [  # name, rows, features, positives (the README's label counts)
    ("australian", 690, 14, 307),
    ("german", 1000, 24, 300),
    ("mushrooms", 8124, 112, 3916),
    ("w8a", 49749, 300, 1479),
]


@pytest.mark.parametrize("name,rows,d,pos", README_TABLE)
def test_real_libsvm_files(name, rows, d, pos, monkeypatch):
    if not REAL.is_dir():
        pytest.skip(f"real LIBSVM files not found at {REAL} (set {D.ENV_VAR})")
    ds = D.load(name, data_dir=REAL)  # verified against the published sha256
    assert ds.x.shape == (rows, d) and int(ds.y.sum()) == pos
    assert ds.x.min() >= -1 and ds.x.max() <= 1
    monkeypatch.setenv(D.ENV_VAR, str(REAL))
    if D.paper_rows(name):
        sub = D.load(name, n_rows=D.paper_rows(name), seed=1)
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


def test_fashion_mnist_counts_and_shapes_must_match(tmp_path):
    _fake_fashion(tmp_path)
    labels = tmp_path / "train-labels-idx1-ubyte.gz"
    _idx(labels, np.arange(3, dtype=np.uint8), 0x08, True)  # 6 images, 3 labels
    with pytest.raises(ValueError, match=r"train-images-idx3-ubyte.gz holds 6 images but "
                                         r".*train-labels-idx1-ubyte.gz holds 3 labels"):
        D.load_fashion_mnist(path=tmp_path)
    _fake_fashion(tmp_path)
    _idx(tmp_path / "t10k-images-idx3-ubyte", np.zeros((4, 32, 32), np.uint8), 0x08, False)
    with pytest.raises(ValueError, match=r"t10k-images-idx3-ubyte holds images of shape "
                                         r"\(4, 32, 32\)"):
        D.load_fashion_mnist(path=tmp_path)
    _fake_fashion(tmp_path)
    _idx(tmp_path / "t10k-labels-idx1-ubyte", np.zeros((4, 2), np.uint8), 0x08, False)
    with pytest.raises(ValueError, match=r"t10k-labels-idx1-ubyte labels of shape \(4, 2\)"):
        D.load_fashion_mnist(path=tmp_path)


def test_fashion_mnist_corrupt_gzip_names_the_file(tmp_path):
    _fake_fashion(tmp_path)
    path = tmp_path / "train-images-idx3-ubyte.gz"
    path.write_bytes(path.read_bytes()[:-30])
    with pytest.raises(ValueError, match=r"train-images-idx3-ubyte.gz: corrupt gzip file"):
        D.load_fashion_mnist(path=tmp_path)


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
    with pytest.raises(ImportError, match=r'pip install "adpue_tf\[data\]"'):
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
