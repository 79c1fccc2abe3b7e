"""Loaders for the paper's benchmark data, binarised with the paper's label maps.

Every loader returns a :class:`Dataset`: float32 ``x`` (``(n, d)``, or images
``(n, h, w, c)`` scaled to ``[0, 1]``), float32 ``y`` in {0, 1} and a string
``positive`` saying which original labels became ``y = 1``. Sources: LIBSVM files
(``australian``, ``german``, ``mushrooms``, ``w8a``, ``covtype``) under
:func:`data_dir`, never downloaded; ``fashion_mnist`` from the IDX files of the
Debian package ``dataset-fashion-mnist``; ``mnist`` and ``cifar10`` through
``tensorflow-datasets`` (which downloads on first use).

Example:
    >>> binarize("mnist", [0, 1, 2, 3])
    array([1., 0., 1., 0.], dtype=float32)
    >>> load("mnist").y.mean()  # doctest: +SKIP
    0.49...
"""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import os
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "ENV_VAR", "FASHION_MNIST_DIR", "LABEL_MAPS", "LIBSVM_URL", "NAMES", "Dataset", "LabelMap",
    "binarize", "data_dir", "load", "load_fashion_mnist", "load_libsvm", "load_tfds",
    "paper_rows", "read_idx",
]

LIBSVM_URL = "https://www.csie.ntu.edu.tw/~cjlin/libsvmtools/datasets/binary.html"
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


def data_dir(path: str | os.PathLike | None = None) -> Path:
    """Resolve the benchmark data directory.

    Order: ``path``; the environment variable ``ADPUE_DATA_DIR``; ``../shared/data``
    relative to the working directory; ``../shared/data`` relative to the
    repository root (the package's parent directory). The first two must exist.

    Raises:
        FileNotFoundError: if the chosen directory does not exist, or none is found.

    Example:
        >>> import tempfile
        >>> data_dir(tempfile.gettempdir()).is_dir()
        True
    """
    for given, what in ((path, "path"), (os.environ.get(ENV_VAR) or None, ENV_VAR)):
        if given is not None:
            if not Path(given).is_dir():
                raise FileNotFoundError(f"Data directory {str(given)!r} (from {what}) "
                                        "does not exist.")
            return Path(given)
    tried = [Path.cwd().parent / "shared" / "data",
             Path(__file__).resolve().parents[2] / "shared" / "data"]
    for cand in tried:
        if cand.is_dir():
            return cand.resolve()
    raise FileNotFoundError(f"No data directory: pass `data_dir=`, set {ENV_VAR}, or create "
                            f"one of {[str(t) for t in tried]}.")


_data_dir = data_dir


def load_libsvm(name: str, *, data_dir: str | os.PathLike | None = None,
                n_rows: int | None = None, seed: int = 0, verify: bool = False) -> Dataset:
    """Load a LIBSVM data set of the paper's Table 1 as a dense float32 matrix.

    The file (or its ``.bz2``/``.gz`` download) is looked up in
    ``<data_dir>/libsvm/`` and then ``<data_dir>/``; see :func:`data_dir`.

    Args:
        name: ``australian``, ``german``, ``mushrooms``, ``w8a`` or ``covtype``.
        data_dir: the data directory (default: :func:`data_dir`'s search).
        n_rows: keep a random subsample of this many rows, drawn without
            replacement from ``seed`` and kept in file order; ``None`` keeps all.
            The paper's size is ``paper_rows(name)``.
        seed: seed of the subsample.
        verify: check the file's sha256 against the LIBSVM site's file.

    Raises:
        ValueError: unknown name, bad ``n_rows``, sha256 mismatch, unexpected labels.
        FileNotFoundError: the file is missing (the message says where to get it).
        ImportError: scikit-learn is not installed.

    Example:
        >>> import tempfile
        >>> d = Path(tempfile.mkdtemp())
        >>> _ = (d / "german.numer_scale").write_text("+1 1:0.5 24:-1\\n-1 2:1\\n")
        >>> ds = load_libsvm("german", data_dir=d)
        >>> ds.x.shape, ds.y
        ((2, 24), array([1., 0.], dtype=float32))
        >>> load_libsvm("w8a", n_rows=paper_rows("w8a")).x.shape  # doctest: +SKIP
        (1800, 300)
    """
    fname, n_features = _LIBSVM[_check_name(name, tuple(_LIBSVM))]
    if n_rows is not None and (int(n_rows) != n_rows or n_rows < 1):
        raise ValueError(f"`n_rows` must be a positive integer or None, got {n_rows!r}.")
    hint = f"Download {fname!r} from the LIBSVM site: {LIBSVM_URL}"
    try:
        base = _data_dir(data_dir)
    except FileNotFoundError as err:
        raise FileNotFoundError(f"{err} {hint}") from None
    folders = [base / "libsvm", base]
    found = [f / (fname + ext) for f in folders for ext in ("", ".bz2", ".gz")]
    found = [p for p in found if p.is_file()]
    if not found:
        raise FileNotFoundError(f"LIBSVM file {fname!r} not found in "
                                f"{[str(f) for f in folders]}. {hint}")
    path = found[0]
    if verify:
        if (digest := _SHA256.get(path.name)) is None:
            raise ValueError(f"No known sha256 for {path.name!r}; cannot verify it.")
        with open(path, "rb") as f:
            got = hashlib.file_digest(f, "sha256").hexdigest()
        if got != digest:
            raise ValueError(f"{path}: sha256 {got} differs from the LIBSVM file's {digest}.")
    try:
        from sklearn.datasets import load_svmlight_file
    except ImportError as err:
        raise ImportError("Reading LIBSVM files needs scikit-learn: "
                          "pip install scikit-learn") from err
    xs, raw = load_svmlight_file(str(path), n_features=n_features, dtype=np.float32)
    x, y = xs.toarray(), binarize(name, raw)
    if n_rows is not None:
        if n_rows > len(y):
            raise ValueError(f"`n_rows`={n_rows} exceeds the {len(y)} rows of {name}.")
        keep = np.sort(np.random.default_rng(seed).choice(len(y), n_rows, replace=False))
        x, y, raw = x[keep], y[keep], raw[keep]
    return Dataset(name, x, y, LABEL_MAPS[name].description, raw.astype(np.int64))


def read_idx(path: str | os.PathLike) -> np.ndarray:
    """Read an IDX file (the MNIST format), gzip-compressed or not, into NumPy.

    Raises:
        ValueError: on a bad magic number, unknown type code or wrong size.

    Example:
        >>> import tempfile
        >>> p = Path(tempfile.mkdtemp()) / "t-idx2-ubyte"
        >>> _ = p.write_bytes(bytes([0, 0, 8, 2, 0, 0, 0, 2, 0, 0, 0, 3]) + bytes(range(6)))
        >>> read_idx(p)
        array([[0, 1, 2],
               [3, 4, 5]], dtype=uint8)
    """
    with open(path, "rb") as f:
        raw = f.read()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
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
        parts.append(read_idx(hits[0]))
    x, y = np.concatenate(parts[:2]), np.concatenate(parts[2:])
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
                          "pip install tensorflow-datasets") from err
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
