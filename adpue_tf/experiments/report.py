"""Results as Markdown: mean ± standard error tables, machine description, provenance.

Every results file (the wing's tables and ``benchmarks/``) states what made it
with :func:`provenance` and :func:`provenance_markdown`: the command line, the
commit, the seeds, the data's SHA-256 and the machine, with no local path.

Example:
    >>> mean_se([0.5, 0.7])
    (0.6, 0.1)
    >>> cell([0.5, 0.7], paper=0.65)
    '0.600 ± 0.100 (0.650)'
"""

from __future__ import annotations

import datetime
import hashlib
import math
import os
import platform
import re
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["mean_se", "cell", "markdown_table", "machine", "local_paths_hidden", "sha256_file",
           "sha256_arrays", "git_commit", "provenance", "provenance_markdown"]


def mean_se(values: Sequence[float] | np.ndarray) -> tuple[float, float]:
    """Mean and standard error (``ddof=1``) of per-trial values.

    Raises:
        ValueError: with fewer than 2 values (no standard error).
    """
    arr = np.asarray(values, np.float64)
    if arr.size < 2:
        raise ValueError(f"A standard error needs at least 2 trials, got {arr.size}.")
    return (round(float(arr.mean()), 12), round(float(arr.std(ddof=1) / math.sqrt(arr.size)), 12))


def cell(values: Sequence[float], paper: float | None = None, *,
         skipped: str | None = None) -> str:
    """``mean ± se``, with the paper's number in parentheses when given.

    NaN values (failed trials) are left out and counted: ``[k failed]``. A
    method that does not run on the data by design says so: ``skipped``
    gives the reason, and the cell reads ``skipped: <reason>``.

    Example:
        >>> cell([0.5, float("nan"), 0.7])
        '0.600 ± 0.100 [1 failed]'
        >>> cell([float("nan")] * 3, skipped="needs 13 features")
        'skipped: needs 13 features'
    """
    if skipped is not None:
        return f"skipped: {skipped}"
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


# -- provenance: what made a results file --------------------------------------------------
#: An absolute local path inside text (not part of a URL, not already hidden): ``/``
#: not after a word character, a colon, a dot, another ``/`` or ``<local>``.
_LOCAL_PATH = re.compile(r"(?<![\w:/.~>])(?:~)?/(?:[\w.+@-]+/)*([\w.+@-]+)")


def local_paths_hidden(text: str) -> str:
    """``text`` with every absolute local path replaced by ``<local>/`` and its last part.

    Results files are read on other machines: a path of this one says nothing
    there and may say too much here.

    Example:
        >>> local_paths_hidden("--log-dir /tmp/ads/rows_100 --out results/x.md")
        '--log-dir <local>/rows_100 --out results/x.md'
        >>> local_paths_hidden("see https://example.org/a/b")
        'see https://example.org/a/b'
        >>> local_paths_hidden(local_paths_hidden("/tmp/x"))  # hiding twice changes nothing
        '<local>/x'
    """
    return _LOCAL_PATH.sub(lambda m: f"<local>/{m.group(1)}", text)


def sha256_file(path: str | os.PathLike) -> str:
    """The SHA-256 of a file's bytes, as 64 hex digits (read in 1 MiB blocks).

    Example:
        >>> import tempfile
        >>> p = Path(tempfile.mkdtemp()) / "a.txt"
        >>> _ = p.write_bytes(b"abc")
        >>> sha256_file(p)[:16]
        'ba7816bf8f01cfea'
    """
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def sha256_arrays(*arrays: np.ndarray) -> str:
    """The SHA-256 of arrays' dtypes, shapes and bytes (data loaded without a file at hand).

    Example:
        >>> sha256_arrays(np.zeros(2, np.float32)) == sha256_arrays(np.zeros(2, np.float32))
        True
    """
    digest = hashlib.sha256()
    for a in arrays:
        a = np.ascontiguousarray(a)
        digest.update(f"{a.dtype.str}{a.shape}".encode())
        digest.update(a.tobytes())
    return digest.hexdigest()


def git_commit(where: str | os.PathLike | None = None) -> str:
    """``git describe --always --dirty`` of the checkout holding ``where`` (default: this package).

    Returns ``"unknown (not a git checkout)"`` outside one or without git.

    Example:
        >>> isinstance(git_commit(), str)
        True
    """
    folder = Path(where) if where is not None else Path(__file__).resolve().parent
    try:
        out = subprocess.run(["git", "describe", "--always", "--dirty", "--abbrev=12"],
                             cwd=folder, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return "unknown (not a git checkout)"
    text = out.stdout.strip()
    if out.returncode or not text:
        return "unknown (not a git checkout)"
    return text + (" (uncommitted changes in the working tree)" if text.endswith("-dirty")
                   else "")


def provenance(command: str, *, seeds: str, data: Mapping[str, str] | None = None,
               machine_line: str | None = None) -> dict[str, Any]:
    """What made a results file: command, commit, seeds, data checksums, machine.

    Args:
        command: the command line that wrote the file (local paths are hidden).
        seeds: the seed range in words, e.g. ``"0-99 (one per trial)"``.
        data: ``{name: sha256}`` of the data read (:func:`sha256_file` of each
            file; :func:`sha256_arrays` where data sets load without a file).
        machine_line: the machine in words (default :func:`machine`).

    Returns:
        A JSON-ready dict; :func:`provenance_markdown` renders it.

    Example:
        >>> p = provenance("adpue-tf bench linear --out /tmp/r", seeds="0-2",
        ...                machine_line="a laptop")
        >>> p["command"], p["seeds"], p["machine"]
        ('adpue-tf bench linear --out <local>/r', '0-2', 'a laptop')
    """
    if not isinstance(command, str) or not command.strip():
        raise ValueError(f"`command` must be a non-empty string, got {command!r}.")
    if not isinstance(seeds, str) or not seeds.strip():
        raise ValueError(f"`seeds` must be a non-empty string, got {seeds!r}.")
    return {"command": local_paths_hidden(command), "commit": git_commit(), "seeds": seeds,
            "data_sha256": {local_paths_hidden(str(k)): str(v) for k, v in (data or {}).items()},
            "machine": machine() if machine_line is None else machine_line}


def provenance_markdown(prov: Mapping[str, Any], *, listed: int = 12) -> str:
    """A results file's provenance block (Markdown) from :func:`provenance`'s dict.

    Up to ``listed`` data checksums are listed; beyond that, one SHA-256 over
    the listed names and digests (sorted by name) stands for them, and the
    JSON written beside the file holds each.

    Example:
        >>> print(provenance_markdown({"command": "x", "commit": "abc", "seeds": "0",
        ...                            "data_sha256": {}, "machine": "m"}))
        - Command: `x`
        - Commit: `abc`
        - Seeds: 0
        - Data: none read from files (generated in the run)
        - Machine: m
    """
    data = dict(prov.get("data_sha256") or {})
    lines = [f"- Command: `{prov['command']}`", f"- Commit: `{prov['commit']}`",
             f"- Seeds: {prov['seeds']}"]
    if not data:
        lines.append("- Data: none read from files (generated in the run)")
    elif len(data) <= listed:
        lines.append("- Data (SHA-256):")
        lines += [f"  - `{name}`: `{digest}`" for name, digest in data.items()]
    else:
        joined = "".join(f"{k}:{data[k]}\n" for k in sorted(data))
        lines.append(f"- Data: {len(data)} files, SHA-256 of their `name:sha256` lines in name "
                     f"order `{hashlib.sha256(joined.encode()).hexdigest()}` (each in the JSON)")
    lines.append(f"- Machine: {prov['machine']}")
    return "\n".join(lines)
