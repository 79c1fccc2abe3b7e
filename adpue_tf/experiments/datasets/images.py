"""The image data: Fashion-MNIST from the IDX files of a Debian package; MNIST and
CIFAR-10 through tensorflow-datasets."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from adpue_tf.experiments.datasets.common import (
    LABEL_MAPS,
    Dataset,
    _check_name,
    binarize,
    read_bytes,
)

__all__ = ["FASHION_MNIST_DIR", "load_fashion_mnist", "load_tfds", "read_idx"]


FASHION_MNIST_DIR = "/usr/share/datasets/fashion-mnist"
_IDX_DTYPES = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}


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
    raw = read_bytes(Path(path))
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
