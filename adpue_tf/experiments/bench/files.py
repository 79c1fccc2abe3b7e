"""Any LIBSVM/svmlight file as a Table 1 data set: :func:`load_file` (``bench linear --file``).

Example:
    >>> import tempfile
    >>> p = Path(tempfile.mkdtemp()) / "toy.svm"
    >>> _ = p.write_text("+1 1:0.5 3:-1\\n-1 2:1\\n")
    >>> load_file(p).x.shape
    (2, 3)
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from adpue_tf.experiments import datasets
from adpue_tf.experiments.datasets.common import read_text

__all__ = ["load_file"]


def _max_index(path: Path) -> tuple[int, int, int]:
    """``(largest feature index, its line number, rows)`` of a LIBSVM file (index 0: none)."""
    text = read_text(path)  # decompressed and decoded as read_libsvm reads it
    best, where = 0, 0
    for m in re.finditer(r"[ \t]([0-9]+):", text):
        digits = m.group(1).lstrip("0") or "0"
        index = int(digits) if len(digits) <= 18 else 10**18  # no 4300-digit int, no overflow
        if index > best:
            best, where = index, m.start()
    rows = len(re.findall(r"^[ \t]*[^#\s]", text, flags=re.M))
    return best, text[:where].count("\n") + 1, rows


def _memory_budget() -> int:
    """Bytes a dense feature matrix may take: half the available memory (4 GiB if unknown)."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024 // 2
    except (OSError, ValueError, IndexError):
        pass
    return 4 << 30


def load_file(path: str | Path, *, positive: float | None = None) -> datasets.Dataset:
    """Any LIBSVM/svmlight file as a binary data set, named by the file's stem.

    Args:
        path: the file (``.gz``/``.bz2`` are decompressed); parsed strictly by
            :func:`adpue_tf.experiments.datasets.read_libsvm`, with as many
            feature columns as its largest index.
        positive: the label that becomes ``y = 1``, every other label ``y = 0``
            (one-vs-rest); ``None``: ``+1`` (written ``+1`` or ``1``).

    Returns:
        A :class:`~adpue_tf.experiments.datasets.Dataset` named ``Path(path).stem``.

    Raises:
        FileNotFoundError: no such file.
        ValueError: a malformed file (naming the line), no feature, a
            positive label that no row (or every row) has, or a feature index
            so large that the dense matrix would exceed half the available
            memory (refused before allocating; the message names the index,
            its line and the memory).

    Example:
        >>> import tempfile
        >>> p = Path(tempfile.mkdtemp()) / "toy.svm"
        >>> _ = p.write_text("+1 1:0.5 3:-1\\n-1 2:1\\n")
        >>> d = load_file(p)
        >>> d.name, d.x.shape, d.y.tolist()
        ('toy', (2, 3), [1.0, 0.0])
    """
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"`--file` {str(p)!r}: no such file.")
    n_features, line, rows = _max_index(p)
    if n_features < 1:
        raise ValueError(f"`--file` {str(p)!r}: no line has a feature (index:value).")
    need, budget = 4 * rows * n_features, _memory_budget()
    if need > budget:  # refused before the dense matrix is allocated
        raise ValueError(
            f"`--file` {str(p)!r}, line {line}: feature index {n_features:,} makes a dense "
            f"float32 matrix of {rows} rows x {n_features} columns, {need / 2**30:.3g} GiB, "
            f"over the {budget / 2**30:.3g} GiB this run may use (half the available "
            "memory). Renumber the features (a wrong index?) or reduce the file.")
    x, labels = datasets.read_libsvm(p, n_features)
    pos = 1.0 if positive is None else float(positive)
    y = (labels == pos).astype(np.float32)
    found = ", ".join(f"{v:g}" for v in np.unique(labels)[:10])
    if y.min() == y.max():
        what = "no" if y.max() == 0 else "every"
        raise ValueError(f"`--file` {str(p)!r}: {what} row has the positive label {pos:g} "
                         f"(labels found: {found}); pass `--positive LABEL`.")
    return datasets.Dataset(p.stem, x, y, f"label {pos:g} of {found} (one vs rest)",
                            labels.astype(np.int64))
