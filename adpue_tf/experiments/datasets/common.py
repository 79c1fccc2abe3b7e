"""What every loader shares: the paper's label maps, :class:`Dataset` and :func:`binarize`."""

from __future__ import annotations

import bz2
import codecs
import dataclasses
import gzip
import zlib
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["LABEL_MAPS", "NAMES", "Dataset", "LabelMap", "binarize", "paper_rows", "read_bytes",
           "read_text"]


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
_LIBSVM = {"australian": ("australian_scale", 14), "german": ("german.numer_scale", 24),
           "mushrooms": ("mushrooms", 112), "w8a": ("w8a", 300),
           "covtype": ("covtype.libsvm.binary.scale", 54)}


_PAPER_ROWS = {"w8a": 1800, "covtype": 1800, "mushrooms": 1800}


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


def read_bytes(path: Path) -> bytes:
    """The file's bytes, decompressed when it is ``.gz``/``.bz2``; clear errors naming it.

    Args:
        path: the file; gzip is also recognised by its magic bytes.

    Returns:
        The (decompressed) bytes.

    Raises:
        ValueError: a corrupt compressed file, naming ``path``.

    Example:
        >>> import pathlib, tempfile
        >>> p = pathlib.Path(tempfile.mkdtemp()) / "a.txt"
        >>> _ = p.write_bytes(b"1 1:0.5")
        >>> read_bytes(p)
        b'1 1:0.5'
    """
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


#: Byte-order marks and their codecs; UTF-32's first, as its little-endian mark starts with UTF-16's.
_BOMS = ((codecs.BOM_UTF32_LE, "utf-32"), (codecs.BOM_UTF32_BE, "utf-32"),
         (codecs.BOM_UTF8, "utf-8-sig"), (codecs.BOM_UTF16_LE, "utf-16"),
         (codecs.BOM_UTF16_BE, "utf-16"))


def read_text(path: Path) -> str:
    """The file's text (decompressed as :func:`read_bytes` does): UTF-8, or what its mark says.

    A byte-order mark names the encoding (UTF-8, UTF-16 or UTF-32, as Windows
    editors write them) and is dropped; without one the file is UTF-8 (ASCII
    included). Line ends ``\\n`` and ``\\r\\n`` both read as ``\\n``.

    Raises:
        ValueError: a corrupt compressed file, or bytes that are not text in
            that encoding, naming ``path``, the line and the byte.

    Example:
        >>> import pathlib, tempfile
        >>> p = pathlib.Path(tempfile.mkdtemp()) / "a.txt"
        >>> _ = p.write_bytes(b"\\xef\\xbb\\xbf1 1:0.5\\r\\n")
        >>> read_text(p)
        '1 1:0.5\\n'
    """
    raw = read_bytes(path)
    encoding = next((name for bom, name in _BOMS if raw.startswith(bom)), "utf-8")
    try:
        text = raw.decode(encoding)
    except UnicodeDecodeError as err:
        if encoding in ("utf-8", "utf-8-sig"):
            line_no = raw[: err.start].count(b"\n") + 1
            raise ValueError(f"{path}, line {line_no}: not a text file (byte "
                             f"{raw[err.start]:#04x} is not UTF-8); save it as UTF-8.") from None
        raise ValueError(f"{path}: not a text file (it starts with a {encoding.upper()} "
                         f"byte-order mark, but byte {err.start} is not {encoding.upper()}); "
                         "save it as UTF-8.") from None
    return text.replace("\r\n", "\n")
