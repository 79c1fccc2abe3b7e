"""What every benchmark shares: the machine, Markdown tables, provenance, an epoch clock.

The provenance block (command line, commit, seeds, data SHA-256, machine, no
local path) is the wing's own (:func:`adpue_tf.experiments.report.provenance`),
so the tables of ``adpue-tf bench`` and the benchmarks state theirs alike.

Example:
    >>> print(table(["a", "b"], [[1, 2.5]]))
    | a | b |
    |---|---|
    | 1 | 2.5 |
"""

from __future__ import annotations

import datetime
import os
import platform
import shlex
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import keras

from adpue_tf.experiments.report import (
    local_paths_hidden,
    markdown_table,
    provenance,
    provenance_markdown,
    sha256_file,
)

__all__ = ["EpochTimer", "command_line", "cpu_model", "fmt", "local_paths_hidden",
           "machine_rows", "provenance", "provenance_block", "provenance_markdown",
           "sha256_file", "table", "RESULTS"]

#: Where the benchmarks write their results by default.
RESULTS = Path(__file__).resolve().parent / "results"


def command_line(module: str, argv: Sequence[str] | None) -> str:
    """How the benchmark was run, as a user would type it (local paths hidden).

    Example:
        >>> command_line("benchmarks.ads_scale", ["--rows", "1000", "--log-dir", "/tmp/x"])
        'python -m benchmarks.ads_scale --rows 1000 --log-dir <local>/x'
    """
    args = list(sys.argv[1:] if argv is None else argv)
    return local_paths_hidden(" ".join(["python -m", module, *map(shlex.quote, args)]))


def cpu_model() -> str:
    """The CPU's model name from ``/proc/cpuinfo`` (else what ``platform`` knows)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def machine_rows() -> list[tuple[str, str]]:
    """``(what, value)`` rows: CPU, cores, load, GPU, versions and the date."""
    import tensorflow as tf

    gpus = tf.config.list_physical_devices("GPU")
    names = [tf.config.experimental.get_device_details(g).get("device_name", g.name)
             for g in gpus]
    load = ", ".join(f"{v:.1f}" for v in os.getloadavg()) if hasattr(os, "getloadavg") else "?"
    return [("CPU", f"{cpu_model()}, {os.cpu_count()} cores (shared with other jobs)"),
            ("Load average at the start (1, 5, 15 min)", load),
            ("GPU", ", ".join(names) if names else "none (CPU only; no GPU numbers)"),
            ("Python / TensorFlow / Keras",
             f"{platform.python_version()} / {tf.__version__} / {keras.__version__}"),
            ("Date (UTC)",
             datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M"))]


def fmt(value: Any, digits: int = 4) -> str:
    """A number with ``digits`` decimals; ``—`` for None.

    Example:
        >>> fmt(0.123456), fmt(None), fmt(2, 1)
        ('0.1235', '—', '2.0')
    """
    return "—" if value is None else f"{value:.{digits}f}"


def table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A Markdown table; cells that are not strings are written with ``str``."""
    return markdown_table(list(header), [[c if isinstance(c, str) else str(c) for c in r]
                                         for r in rows])


def provenance_block(command: str, *, seeds: str, data: Mapping[str, str] | None = None) -> \
        tuple[str, dict[str, Any]]:
    """The ``## Provenance`` section of a results file, and its dict for the JSON."""
    machine = "; ".join(f"{k}: {v}" for k, v in machine_rows())
    prov = provenance(command, seeds=seeds, data=data, machine_line=machine)
    return "## Provenance\n\n" + provenance_markdown(prov) + "\n", prov


class EpochTimer(keras.callbacks.Callback):
    """Wall and process CPU time of each epoch.

    Last in the callback list, so an epoch's time includes the epoch-end
    callbacks (the refresh). CPU time (all threads of this process, tf.data
    included) is insensitive to other processes competing for the cores.
    """

    def __init__(self) -> None:
        super().__init__()
        self.times: list[tuple[float, float]] = []

    def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
        self._start = (time.perf_counter(), time.process_time())

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        self.times.append((time.perf_counter() - self._start[0],
                           time.process_time() - self._start[1]))
