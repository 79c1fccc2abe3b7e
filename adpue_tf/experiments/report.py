"""Results as Markdown: mean ± standard error tables, machine description.

Example:
    >>> mean_se([0.5, 0.7])
    (0.6, 0.1)
    >>> cell([0.5, 0.7], paper=0.65)
    '0.600 ± 0.100 (0.650)'
"""

from __future__ import annotations

import datetime
import math
import os
import platform
from collections.abc import Sequence

import numpy as np

__all__ = ["mean_se", "cell", "markdown_table", "machine"]


def mean_se(values: Sequence[float] | np.ndarray) -> tuple[float, float]:
    """Mean and standard error (``ddof=1``) of per-trial values.

    Raises:
        ValueError: with fewer than 2 values (no standard error).
    """
    arr = np.asarray(values, np.float64)
    if arr.size < 2:
        raise ValueError(f"A standard error needs at least 2 trials, got {arr.size}.")
    return (round(float(arr.mean()), 12), round(float(arr.std(ddof=1) / math.sqrt(arr.size)), 12))


def cell(values: Sequence[float], paper: float | None = None) -> str:
    """``mean ± se``, with the paper's number in parentheses when given.

    NaN values (failed trials) are left out and counted: ``[k failed]``.

    Example:
        >>> cell([0.5, float("nan"), 0.7])
        '0.600 ± 0.100 [1 failed]'
    """
    arr = np.asarray(values, np.float64)
    ok = arr[~np.isnan(arr)]
    if ok.size < 2:
        text = f"n/a [{arr.size - ok.size} failed]"
    else:
        m, se = mean_se(ok)
        text = f"{m:.3f} ± {se:.3f}" + (f" [{arr.size - ok.size} failed]" if ok.size < arr.size else "")
    return text if paper is None else f"{text} ({paper:.3f})"


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A GitHub Markdown table.

    Example:
        >>> print(markdown_table(["a", "b"], [["1", "2"]]))
        | a | b |
        |---|---|
        | 1 | 2 |
    """
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def machine() -> str:
    """One line naming the CPU, core count, Python, TensorFlow and Keras versions, and the date."""
    import keras
    import tensorflow as tf

    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name"))
    except (OSError, StopIteration):
        pass
    gpus = tf.config.list_physical_devices("GPU")
    return (f"{cpu}, {os.cpu_count()} cores{', ' + str(len(gpus)) + ' GPU(s)' if gpus else ''}; "
            f"Python {platform.python_version()}, TensorFlow {tf.__version__}, "
            f"Keras {keras.__version__}; {datetime.date.today().isoformat()}")
