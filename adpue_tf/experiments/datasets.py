"""Loaders for the paper's benchmark data, binarised with the paper's label maps.

Every loader returns a :class:`Dataset`: float32 ``x`` (``(n, d)``, or images
``(n, h, w, c)`` scaled to ``[0, 1]``), float32 ``y`` in {0, 1} and a string
``positive`` saying which original labels became ``y = 1``. Sources: LIBSVM files
(``australian``, ``german``, ``mushrooms``, ``w8a``, ``covtype``) from a local
directory (``data_dir=``, ``--data-dir`` or ``ADPUE_DATA_DIR``) or the Keras cache
``~/.keras/datasets/adpue_tf/`` (downloaded once, sha256-checked; see
:func:`libsvm_path`); ``fashion_mnist`` from the IDX files of the
Debian package ``dataset-fashion-mnist``; ``mnist`` and ``cifar10`` through
``tensorflow-datasets`` (which downloads on first use).

Example:
    >>> binarize("mnist", [0, 1, 2, 3])
    array([1., 0., 1., 0.], dtype=float32)
    >>> load("mnist").y.mean()  # doctest: +SKIP
    0.49...
"""

from __future__ import annotations

import bz2
import dataclasses
import gzip
import hashlib
import math
import numbers
import os
import zlib
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "CACHE_SUBDIR", "ENV_VAR", "FASHION_MNIST_DIR", "LABEL_MAPS", "LIBSVM_FILES_URL",
    "LIBSVM_URL", "NAMES", "Dataset", "LabelMap", "binarize", "data_dir", "libsvm_path", "load",
    "load_fashion_mnist", "load_libsvm", "load_tfds", "paper_rows", "read_idx", "read_libsvm",
]

LIBSVM_URL = "https://www.csie.ntu.edu.tw/~cjlin/libsvmtools/datasets/binary.html"
#: Where the LIBSVM files are downloaded from (the file name follows).
LIBSVM_FILES_URL = "https://www.csie.ntu.edu.tw/~cjlin/libsvmtools/datasets/binary/"
#: The Keras cache subdirectory of the downloads: ``~/.keras/datasets/adpue_tf/``.
CACHE_SUBDIR = "datasets/adpue_tf"
#: Environment variable naming the data directory (see :func:`data_dir`).
ENV_VAR = "ADPUE_DATA_DIR"
FASHION_MNIST_DIR = "/usr/share/datasets/fashion-mnist"


@dataclasses.dataclass(frozen=True)
class LabelMap:
    """Which original labels are positive. ``labels``: every valid original label."""

    labels: tuple[int, ...]
    positive: tuple[int, ...]
    description: str


_FASHION = "T-shirt/top (0), Pullover (2), Coat (4), Shirt (6), Bag (8)"
#: The paper's label maps, by data set name. Fractions are those of the full files.
LABEL_MAPS: dict[str, LabelMap] = {
    "australian": LabelMap((-1, 1), (1,), "+1 (307/690 = 0.445, as in the paper)"),
    "german": LabelMap((-1, 1), (1,), "+1 (300/1000 = 0.300, as in the paper)"),
    "mushrooms": LabelMap((1, 2), (1,), "label 1 (3916/8124 = 0.482; the paper's 0.878 "
                          "matches neither label)"),
    "w8a": LabelMap((-1, 1), (1,), "+1 (1479/49749 = 0.030; the paper's 0.589 matches "
                    "neither label)"),
    "covtype": LabelMap((1, 2), (1,), "label 1 of covtype.binary (the paper lists 0.438)"),
    "fashion_mnist": LabelMap(tuple(range(10)), (0, 2, 4, 6, 8), _FASHION),
    "mnist": LabelMap(tuple(range(10)), (0, 2, 4, 6, 8), "even digits (0, 2, 4, 6, 8)"),
    "cifar10": LabelMap(tuple(range(10)), (0, 1, 8, 9),
                        "airplane (0), automobile (1), ship (8), truck (9)"),
}
#: Every name :func:`load` accepts.
NAMES = tuple(LABEL_MAPS)

# name -> (file, n_features); then the sha256 of the LIBSVM site's files
_LIBSVM = {"australian": ("australian_scale", 14), "german": ("german.numer_scale", 24),
           "mushrooms": ("mushrooms", 112), "w8a": ("w8a", 300),
           "covtype": ("covtype.libsvm.binary.scale", 54)}
_SHA256 = {
    "australian_scale": "86799bcc4dbcd41929a514fa181d1c1a40e01f009dee139d4141a194d7ecd9e3",
    "german.numer_scale": "97637cc6b994bd3fa78999c771bc044bea7a0cdf91d43b6ecfd10f7e7c4ebc82",
    "mushrooms": "f39a4eb628dc61a7d43760815b061c9e497aa728ce1ad8bde57a09ef6043b538",
    "w8a": "6a9fa8fd5f524303240a5db07d4b3d4a51e8b7b4b20a914105d8e3e8c81640f2",
}
_PAPER_ROWS = {"w8a": 1800, "covtype": 1800, "mushrooms": 1800}
_IDX_DTYPES = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}


@dataclasses.dataclass(frozen=True, eq=False)
class Dataset:
    """A fully labeled binary data set.

    Attributes:
        name: the name :func:`load` knows it by.
        x: float32 features ``(n, d)`` or images ``(n, h, w, c)`` in ``[0, 1]``.
        y: float32 labels in {0, 1}, shape ``(n,)``.
        positive: which original labels are ``y = 1``, in words.
        labels: the original labels (int64), shape ``(n,)``.

    Example:
        >>> d = Dataset("toy", np.zeros((2, 3), np.float32), np.array([1, 0], np.float32), "1")
        >>> d, d.positive_fraction
        (Dataset(name='toy', x=(2, 3) float32, y=(2,), positive='1'), 0.5)
    """

    name: str
    x: np.ndarray
    y: np.ndarray
    positive: str
    labels: np.ndarray | None = None

    @property
    def positive_fraction(self) -> float:
        """Share of rows with ``y = 1``."""
        return float(np.mean(self.y))

    def __repr__(self) -> str:
        return (f"Dataset(name={self.name!r}, x={self.x.shape} {self.x.dtype}, "
                f"y={self.y.shape}, positive={self.positive!r})")


def _check_name(name: str, known: Any) -> str:
    if name not in known:
        raise ValueError(f"Unknown data set {name!r}; known names: {', '.join(known)}.")
    return name


def binarize(name: str, labels: Any) -> np.ndarray:
    """Map original labels to float32 {0, 1} with ``LABEL_MAPS[name]``.

    Raises:
        ValueError: on an unknown name, or a label outside the data set's labels.

    Example:
        >>> binarize("cifar10", [0, 2, 8, 9])
        array([1., 0., 1., 1.], dtype=float32)
    """
    lm = LABEL_MAPS[_check_name(name, NAMES)]
    arr = np.asarray(labels).reshape(-1)
    bad = ~np.isin(arr, lm.labels)
    if np.any(bad):
        raise ValueError(f"{name}: unexpected label(s) {np.unique(arr[bad])[:5].tolist()}; "
                         f"expected {list(lm.labels)}.")
    return np.isin(arr, lm.positive).astype(np.float32)


def paper_rows(name: str) -> int | None:
    """The paper's subsample size: 1,800 for w8a, covtype and mushrooms, else ``None``.

    Example:
        >>> paper_rows("w8a"), paper_rows("german")
        (1800, None)
    """
    return _PAPER_ROWS.get(_check_name(name, tuple(_LIBSVM)))


def data_dir(path: str | os.PathLike | None = None) -> Path | None:
    """The local data directory, or ``None`` to use the Keras cache.

    Order: ``path``; the environment variable ``ADPUE_DATA_DIR``; else ``None``:
    the LIBSVM files are then fetched with ``keras.utils.get_file`` into
    ``~/.keras/datasets/adpue_tf/`` (see :func:`libsvm_path`).

    Raises:
        FileNotFoundError: if the chosen directory does not exist.

    Example:
        >>> import tempfile
        >>> data_dir(tempfile.gettempdir()).is_dir()
        True
    """
    for given, what in ((path, "`data_dir`"), (os.environ.get(ENV_VAR) or None, ENV_VAR)):
        if given is not None:
            if not Path(given).is_dir():
                raise FileNotFoundError(f"Data directory {str(given)!r} (from {what}) "
                                        "does not exist.")
            return Path(given)
    return None


_data_dir = data_dir


def _sha256(path: Path, raw: bytes | None = None) -> str:
    if raw is not None:
        return hashlib.sha256(raw).hexdigest()
    digest = hashlib.sha256()  # not hashlib.file_digest: Python 3.11+
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _read_bytes(path: Path) -> bytes:
    """The file's bytes, decompressed when it is ``.gz``/``.bz2``; clear errors naming it."""
    raw = path.read_bytes()
    kind = {".gz": "gzip", ".bz2": "bz2"}.get(path.suffix)
    if kind is None and raw[:2] == b"\x1f\x8b":
        kind = "gzip"
    if kind is None:
        return raw
    try:
        return gzip.decompress(raw) if kind == "gzip" else bz2.decompress(raw)
    except (OSError, EOFError, ValueError, zlib.error) as err:
        raise ValueError(f"{path}: corrupt {kind} file ({err}); download it again.") from None


def libsvm_path(name: str, *, data_dir: str | os.PathLike | None = None,
                verify: bool = True) -> Path:
    """Where the LIBSVM file of ``name`` is: a local copy, or the Keras cache.

    With ``data_dir`` (or ``ADPUE_DATA_DIR``) the file (or its ``.bz2``/``.gz``)
    must be in that directory or its ``libsvm/`` subdirectory; nothing is
    downloaded. Without, ``keras.utils.get_file`` fetches it from the LIBSVM site
    into ``~/.keras/datasets/adpue_tf/`` (once) and checks its sha256.
    ``covtype`` has no published sha256 and is never downloaded: it loads only
    from a local copy, unverified.

    Args:
        name: ``australian``, ``german``, ``mushrooms``, ``w8a`` or ``covtype``.
        data_dir: a local directory (default: ``ADPUE_DATA_DIR``, else the cache).
        verify: check a local copy's sha256 (of its decompressed bytes)
            against the LIBSVM site's file; downloads are always checked.

    Raises:
        FileNotFoundError: the file is missing and cannot be fetched; the
            message names the file, its URL and ``ADPUE_DATA_DIR``.
        ValueError: unknown name, or a sha256 mismatch.

    Example:
        >>> import tempfile
        >>> d = Path(tempfile.mkdtemp())
        >>> _ = (d / "german.numer_scale").write_text("+1 1:0.5\\n")
        >>> libsvm_path("german", data_dir=d, verify=False).name
        'german.numer_scale'
    """
    fname = _LIBSVM[_check_name(name, tuple(_LIBSVM))][0]
    digest = _SHA256.get(fname)
    url = LIBSVM_FILES_URL + fname + ("" if digest else ".bz2")  # covtype: only its .bz2
    base = _data_dir(data_dir)
    if base is not None:
        what = "`data_dir`" if data_dir is not None else ENV_VAR
        folders = [base, base / "libsvm"]
        found = [p for f in folders for ext in ("", ".bz2", ".gz")
                 if (p := f / (fname + ext)).is_file()]
        if not found:
            fetch = (f"or unset {ENV_VAR} to let the loader fetch it into "
                     f"~/.keras/{CACHE_SUBDIR}/" if digest else
                     "it has no published sha256, so it is never downloaded")
            raise FileNotFoundError(
                f"LIBSVM file {fname!r} not found in {[str(f) for f in folders]} (from {what}). "
                f"Download it from {url} (listed at {LIBSVM_URL}) into that directory; {fetch}.")
        path = found[0]
        if verify and digest is not None:
            got = _sha256(path, None if path.name == fname else _read_bytes(path))
            if got != digest:
                raise ValueError(f"{path}: sha256 {got} differs from the LIBSVM site's file "
                                 f"({digest}); the copy is corrupt or another version. "
                                 f"Download it again from {url}.")
        return path
    if digest is None:
        raise FileNotFoundError(
            f"LIBSVM file {fname!r} has no published sha256, so adpue_tf does not download "
            f"it: get it from {url} (listed at {LIBSVM_URL}), then pass `data_dir=` or set "
            f"{ENV_VAR} to its directory.")
    import keras  # noqa: PLC0415 (only the download needs it)

    try:
        return Path(keras.utils.get_file(fname, origin=url, file_hash=digest,
                                         hash_algorithm="sha256", cache_subdir=CACHE_SUBDIR))
    except Exception as err:  # noqa: BLE001 (get_file raises bare Exception offline)
        raise FileNotFoundError(
            f"LIBSVM file {fname!r} is not in the Keras cache (~/.keras/{CACHE_SUBDIR}/) and "
            f"could not be fetched from {url}: {err}. Download it by hand and pass "
            f"`data_dir=` (or `--data-dir`), or set {ENV_VAR} to its directory.") from None


def read_libsvm(path: str | os.PathLike, n_features: int) -> tuple[np.ndarray, np.ndarray]:
    """Parse a LIBSVM/svmlight file into dense float32 features and its labels.

    Strict, so that a corrupt file fails with the file and line rather than
    loading wrong numbers: every line is ``label idx:value ...`` with indices in
    ``1..n_features``, strictly increasing, values finite within the float32
    range; the file ends with a newline (a last line without one was cut off);
    ``.gz``/``.bz2`` files are decompressed. Blank lines and ``#`` comments are skipped.

    Args:
        path: the file.
        n_features: the number of feature columns.

    Returns:
        ``(x, labels)``: float32 ``(n, n_features)`` and float64 ``(n,)``.

    Raises:
        ValueError: an empty, truncated or corrupt file, or a malformed line
            (the message names the file and the line number).

    Example:
        >>> import tempfile
        >>> p = Path(tempfile.mkdtemp()) / "f"
        >>> _ = p.write_text("+1 1:0.5 3:-1\\n-1 2:1\\n")
        >>> read_libsvm(p, 3)
        (array([[ 0.5,  0. , -1. ],
               [ 0. ,  1. ,  0. ]], dtype=float32), array([ 1., -1.]))
        >>> _ = p.write_text("+1 1:0.5\\n+1 1:0.")
        >>> read_libsvm(p, 3)
        Traceback (most recent call last):
        ...
        ValueError: ...f, line 2: the file ends in the middle of this line ('+1 1:0.')...
    """
    path = Path(path)
    raw = _read_bytes(path)
    try:
        text = raw.decode("ascii")
    except UnicodeDecodeError as err:
        line_no = raw[: err.start].count(b"\n") + 1
        raise ValueError(f"{path}, line {line_no}: not a text file (byte "
                         f"{raw[err.start]:#04x}).") from None
    lines = text.split("\n")
    if text and not text.endswith("\n"):
        raise ValueError(f"{path}, line {len(lines)}: the file ends in the middle of this line "
                         f"({lines[-1][:60]!r}); it looks truncated. Download it again.")
    limit = float(np.finfo(np.float32).max)
    labels: list[float] = []
    rows: list[int] = []
    cols: list[int] = []
    vals: list[float] = []
    for number, line in enumerate(lines, start=1):
        tokens = line.split("#", 1)[0].split()
        if not tokens:
            continue

        def bad(what: str, number: int = number, line: str = line) -> ValueError:
            return ValueError(f"{path}, line {number}: {what} in {line[:80]!r}.")

        try:
            label = float(tokens[0])
        except ValueError:
            raise bad(f"label {tokens[0]!r} is not a number") from None
        if not math.isfinite(label):
            raise bad(f"label {tokens[0]!r} is not finite")
        last = 0
        for tok in tokens[1:]:
            idx, sep, val = tok.partition(":")
            try:
                j, v = int(idx), float(val)
            except ValueError:
                raise bad(f"{tok!r} is not index:value") from None
            if not sep:
                raise bad(f"{tok!r} is not index:value")
            if not 1 <= j <= n_features:
                raise bad(f"feature index {j} is outside 1..{n_features}")
            if j <= last:
                raise bad(f"feature index {j} does not increase")
            if not (math.isfinite(v) and abs(v) <= limit):
                raise bad(f"value {val!r} is not finite in float32")
            last = j
            rows.append(len(labels))
            cols.append(j - 1)
            vals.append(v)
        labels.append(label)
    if not labels:
        raise ValueError(f"{path}: the file is empty (no data rows); download it again.")
    x = np.zeros((len(labels), n_features), np.float32)
    x[rows, cols] = vals
    return x, np.asarray(labels)


def load_libsvm(name: str, *, data_dir: str | os.PathLike | None = None,
                n_rows: int | None = None, seed: int = 0, verify: bool = True) -> Dataset:
    """Load a LIBSVM data set of the paper's Table 1 as a dense float32 matrix.

    The file comes from :func:`libsvm_path`: a local copy in ``data_dir`` (or
    ``ADPUE_DATA_DIR``, directly or in its ``libsvm/`` subdirectory), else the
    Keras cache ``~/.keras/datasets/adpue_tf/``, downloaded once and checked
    against the LIBSVM site's sha256. It is parsed by :func:`read_libsvm`.

    Args:
        name: ``australian``, ``german``, ``mushrooms``, ``w8a`` or ``covtype``.
        data_dir: a local directory with the file (default: ``ADPUE_DATA_DIR``,
            else the Keras cache).
        n_rows: keep a random subsample of this many rows, drawn without
            replacement from ``seed`` and kept in file order; ``None`` keeps all.
            The paper's size is ``paper_rows(name)``.
        seed: seed of the subsample.
        verify: check a local copy's sha256 (``covtype`` has none to check).

    Raises:
        ValueError: unknown name, bad ``n_rows``, sha256 mismatch, a corrupt
            file (naming the file and line), unexpected labels.
        FileNotFoundError: the file is missing (the message names the file,
            its URL and ``ADPUE_DATA_DIR``).

    Example:
        >>> import tempfile
        >>> d = Path(tempfile.mkdtemp())
        >>> _ = (d / "german.numer_scale").write_text("+1 1:0.5 24:-1\\n-1 2:1\\n")
        >>> ds = load_libsvm("german", data_dir=d, verify=False)
        >>> ds.x.shape, ds.y
        ((2, 24), array([1., 0.], dtype=float32))
        >>> load_libsvm("w8a", n_rows=paper_rows("w8a")).x.shape  # doctest: +SKIP
        (1800, 300)
    """
    fname, n_features = _LIBSVM[_check_name(name, tuple(_LIBSVM))]
    if n_rows is not None and (isinstance(n_rows, bool) or not isinstance(n_rows, numbers.Real)
                               or int(n_rows) != n_rows or n_rows < 1):
        raise ValueError(f"`n_rows` must be a positive integer or None, got {n_rows!r}.")
    path = libsvm_path(name, data_dir=data_dir, verify=verify)
    x, raw = read_libsvm(path, n_features)
    try:
        y = binarize(name, raw)
    except ValueError as err:
        raise ValueError(f"{path}: {err}") from None
    if n_rows is not None:
        n_rows = int(n_rows)
        if n_rows > len(y):
            raise ValueError(f"`n_rows`={n_rows} exceeds the {len(y)} rows of {name}.")
        keep = np.sort(np.random.default_rng(seed).choice(len(y), n_rows, replace=False))
        x, y, raw = x[keep], y[keep], raw[keep]
    return Dataset(name, x, y, LABEL_MAPS[name].description, raw.astype(np.int64))


def read_idx(path: str | os.PathLike) -> np.ndarray:
    """Read an IDX file (the MNIST format), gzip-compressed or not, into NumPy.

    Raises:
        ValueError: on a bad magic number, unknown type code, wrong size or a
            corrupt gzip file (naming the file).

    Example:
        >>> import tempfile
        >>> p = Path(tempfile.mkdtemp()) / "t-idx2-ubyte"
        >>> _ = p.write_bytes(bytes([0, 0, 8, 2, 0, 0, 0, 2, 0, 0, 0, 3]) + bytes(range(6)))
        >>> read_idx(p)
        array([[0, 1, 2],
               [3, 4, 5]], dtype=uint8)
    """
    raw = _read_bytes(Path(path))
    if len(raw) < 4 or raw[:2] != b"\0\0" or raw[2] not in _IDX_DTYPES:
        raise ValueError(f"{path}: not an IDX file (magic bytes {raw[:4].hex()}).")
    dtype, ndim = np.dtype(_IDX_DTYPES[raw[2]]), raw[3]
    shape = tuple(int(s) for s in np.frombuffer(raw, ">u4", ndim, 4))
    size, start = int(np.prod(shape)) * dtype.itemsize, 4 + 4 * ndim
    if len(raw) - start != size:
        raise ValueError(f"{path}: header says {shape} ({size} bytes), "
                         f"file holds {len(raw) - start} bytes of data.")
    return np.frombuffer(raw, dtype, offset=start).reshape(shape).astype(dtype.newbyteorder("="))


def _images(name: str, x: np.ndarray, labels: np.ndarray, flatten: bool) -> Dataset:
    x = np.asarray(x, np.float32) / np.float32(255.0)
    x = x.reshape(len(x), -1) if flatten else x.reshape(x.shape[:3] + (-1,))
    labels = np.asarray(labels, np.int64).reshape(-1)
    return Dataset(name, x, binarize(name, labels), LABEL_MAPS[name].description, labels)


def load_fashion_mnist(*, path: str | os.PathLike = FASHION_MNIST_DIR,
                       flatten: bool = True) -> Dataset:
    """Fashion-MNIST train + test (70,000 rows) from the original IDX files.

    Args:
        path: folder with ``{train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz]``.
        flatten: ``(n, 784)`` if true, else ``(n, 28, 28, 1)``.

    Raises:
        FileNotFoundError: a file is missing (install ``dataset-fashion-mnist``).
        ValueError: a corrupt file, or images and labels that do not match
            (counts or shapes), naming the files.

    Example:
        >>> load_fashion_mnist().x.shape  # doctest: +SKIP
        (70000, 784)
    """
    parts = []
    for stem in ("train-images-idx3", "t10k-images-idx3", "train-labels-idx1", "t10k-labels-idx1"):
        hits = [p for e in (".gz", "") if (p := Path(path) / f"{stem}-ubyte{e}").is_file()]
        if not hits:
            raise FileNotFoundError(
                f"Fashion-MNIST file {stem}-ubyte[.gz] not found in {str(path)!r}. On Debian: "
                "apt-get install dataset-fashion-mnist (it installs them in "
                f"{FASHION_MNIST_DIR}), or see https://github.com/zalandoresearch/fashion-mnist.")
        parts.append((hits[0], read_idx(hits[0])))
    (tr_x, x_tr), (te_x, x_te), (tr_y, y_tr), (te_y, y_te) = parts
    for (fx, x), (fy, y) in (((tr_x, x_tr), (tr_y, y_tr)), ((te_x, x_te), (te_y, y_te))):
        if x.ndim != 3 or x.shape[1:] != x_tr.shape[1:] or y.ndim != 1:
            raise ValueError(f"Fashion-MNIST: {fx} holds images of shape {x.shape} and {fy} "
                             f"labels of shape {y.shape}; expected (n, 28, 28) and (n,) in both "
                             "splits.")
        if len(x) != len(y):
            raise ValueError(f"Fashion-MNIST: {fx} holds {len(x)} images but {fy} holds "
                             f"{len(y)} labels; the files do not belong together.")
    x, y = np.concatenate([x_tr, x_te]), np.concatenate([y_tr, y_te])
    return _images("fashion_mnist", x, y, flatten)


def load_tfds(name: str, *, flatten: bool | None = None, split: str = "train+test",
              tfds_data_dir: str | None = None, download: bool = True,
              batch_size: int = 10_000) -> Dataset:
    """MNIST (even digits positive) or CIFAR-10 through ``tensorflow-datasets``.

    Args:
        name: ``mnist`` or ``cifar10``.
        flatten: ``(n, h*w*c)`` if true, else ``(n, h, w, c)``; default true for
            MNIST (the paper's MLP) and false for CIFAR-10 (its LeNet).
        split: TFDS split; the paper uses all 70,000 / 60,000 images.
        tfds_data_dir: TFDS's own data directory (its default if ``None``).
        download: let TFDS download and prepare the data if it is missing.
        batch_size: rows read per step (the result is one array).

    Raises:
        ValueError: unknown name.
        ImportError: ``tensorflow-datasets`` is not installed.

    Example:
        >>> load_tfds("cifar10").x.shape  # doctest: +SKIP
        (60000, 32, 32, 3)
    """
    _check_name(name, ("mnist", "cifar10"))
    try:
        import tensorflow_datasets as tfds
    except ImportError as err:
        raise ImportError(f"Loading {name!r} needs tensorflow-datasets: "
                          'pip install "adpue_tf[data]"') from err
    ds = tfds.load(name, split=split, as_supervised=True, data_dir=tfds_data_dir,
                   download=download)
    # Not batch_size=-1: it batches by the split size from metadata, which mocks lack.
    batches = list(tfds.as_numpy(ds.batch(batch_size)))
    if not batches:
        raise ValueError(f"{name}: split {split!r} holds no examples.")
    xs, ys = zip(*batches)
    flat = name == "mnist" if flatten is None else flatten
    return _images(name, np.concatenate(xs), np.concatenate(ys), flat)


def load(name: str, **kwargs: Any) -> Dataset:
    """Load any data set of :data:`NAMES`; ``kwargs`` go to the matching loader.

    Example:
        >>> load("imagenet")
        Traceback (most recent call last):
        ...
        ValueError: Unknown data set 'imagenet'; known names: australian, ...
    """
    _check_name(name, NAMES)
    if name in _LIBSVM:
        return load_libsvm(name, **kwargs)
    if name == "fashion_mnist":
        return load_fashion_mnist(**kwargs)
    return load_tfds(name, **kwargs)
