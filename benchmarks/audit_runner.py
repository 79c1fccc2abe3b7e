"""The audit's runner: the Probe type, the classification of one call, the run and the report.

It imports no probe. Each probe family (``audit_probes_*``) builds a list of
:class:`Probe`; ``benchmarks.audit`` collects the families and runs them here.
What happened is classified as:

* ``clear error``: the expected error type (ValueError, TypeError,
  FileNotFoundError, FileExistsError; InvalidArgumentError in graph mode;
  SystemExit for the command line) with the words the probe asks for (the
  argument's name and what was wrong);
* ``correct``: a valid call that returned what its check accepts;
* ``obscure``: an error of an accepted type whose message lacks those words,
  or an error of another type raised by TensorFlow/Keras with a message;
* ``silent``: a bad call that returned (no error), or a valid call whose
  result its check refuses;
* ``data loss``: anything under the probe's protected paths changed or
  vanished, whatever the call did; or the call raised :class:`Lost` (what a
  user had, or a reader looked for, was missing at some moment: a concurrent
  reader, a killed process);
* ``crash``: a Python-internal error (AttributeError, KeyError, IndexError,
  ZeroDivisionError, ...) or a valid call that raised.
"""

from __future__ import annotations

import collections
import hashlib
import os
import re
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CLASSES = ("clear error", "correct", "obscure", "silent", "data loss", "crash")
ACCEPTED = ("ValueError", "TypeError", "FileNotFoundError", "FileExistsError",
            "InvalidArgumentError", "SystemExit")
#: Errors of TensorFlow/Keras whose message may still help (not a Python-internal crash).
FRAMEWORK = ("UnimplementedError", "FailedPreconditionError", "DataLossError",
             "OutOfRangeError", "NotFoundError", "OSError", "PermissionError", "RuntimeError")


class Lost(Exception):
    """Raised by a probe's call when something a user had was missing at some moment.

    The protected paths are compared before and after the call; what a
    concurrent reader found missing in between, or what a killed process left
    behind, the call reports by raising this (classified ``data loss``).
    """


@dataclass
class Probe:
    """One call of the public API and what it must do.

    Attributes:
        id: a unique, readable name (``entry point: what is wrong``).
        call: ``tmp -> result``, run in a fresh scratch directory ``tmp`` (a Path).
        words: a regex the error message must match (None: the call must succeed).
        error: the error type names accepted (default: :data:`ACCEPTED`).
        check: for a valid call, ``result -> bool``; None: any result is fine. Given
            with ``words``, either outcome is right: a refusal with those words (clear
            error), or a result the check accepts (correct), for a call that may
            fairly be refused or carried out (a warning the result carries, say).
        setup: ``tmp -> None``, run first: the files a user had (not judged).
        protect: ``tmp -> [paths]`` whose trees (after ``setup``) must be unchanged
            afterwards, whatever the call did.
    """

    id: str
    call: Callable[[Path], Any]
    words: str | None = None
    error: tuple[str, ...] = ACCEPTED
    check: Callable[[Any], bool] | None = None
    protect: Callable[[Path], list] | None = None
    setup: Callable[[Path], Any] | None = None


def _tree(paths: list) -> dict[str, str]:
    """Every file (with a hash of its bytes) and directory under ``paths``."""
    out = {}
    for root in paths:
        root = Path(root)
        if not root.exists():
            out[str(root)] = "missing"
            continue
        items = [root, *root.rglob("*")] if root.is_dir() else [root]
        for p in items:
            if p.is_file():
                out[str(p)] = hashlib.sha256(p.read_bytes()).hexdigest()
            else:
                out[str(p)] = "dir"
    return out


def _accepts(check: Callable[[Any], bool], result: Any) -> bool:
    """Whether ``check`` accepts ``result``; a result the check cannot read is refused."""
    try:
        return bool(check(result))
    except Exception:  # noqa: BLE001 - a result of the wrong kind
        return False


def classify(probe: Probe, tmp: Path) -> tuple[str, str]:
    """Run ``probe`` in ``tmp``; return ``(class, what happened)``."""
    if probe.setup is not None:
        probe.setup(tmp)
    protected = probe.protect(tmp) if probe.protect else []
    before = _tree(protected)
    outcome: tuple[str, str]
    try:
        result = probe.call(tmp)
    except BaseException as err:  # noqa: BLE001 - classifying every outcome is the point
        if isinstance(err, KeyboardInterrupt):
            raise
        kind, message = type(err).__name__, str(err)
        short = f"{kind}: {message[:300]}"
        if isinstance(err, Lost):
            outcome = ("data loss", message[:300])
        elif probe.words is None:
            outcome = ("crash", short)
        elif kind in probe.error:
            outcome = (("clear error", short) if re.search(probe.words, message, re.S)
                       else ("obscure", short))
        elif kind in ACCEPTED or kind in FRAMEWORK or kind.endswith("Error") and "tensorflow" in (
                type(err).__module__ or ""):
            outcome = ("obscure", short)
        else:
            outcome = ("crash", short)
    else:
        if probe.words is not None and probe.check is None:
            outcome = ("silent", f"returned {type(result).__name__}; expected an error "
                                 f"matching {probe.words!r}")
        elif probe.check is not None and not _accepts(probe.check, result):
            outcome = ("silent", f"returned a wrong result: {repr(result)[:200]}")
        else:
            outcome = ("correct", f"returned {type(result).__name__}")
    if protected and _tree(protected) != before:
        gone = sorted(set(before) - set(_tree(protected)))
        outcome = ("data loss", f"protected paths changed ({gone[:3]}); then {outcome[1]}")
    return outcome


def run(probes: list[Probe], only: str | None = None) -> list[tuple[Probe, str, str, float]]:
    """Run every probe (those whose id holds ``only``), each in its own scratch directory."""
    seen = collections.Counter(p.id for p in probes)
    repeated = [i for i, n in seen.items() if n > 1]
    if repeated:
        raise ValueError(f"probe ids must be unique; repeated: {repeated[:5]}")
    results = []
    cwd = os.getcwd()
    for probe in probes:
        if only and only not in probe.id:
            continue
        with tempfile.TemporaryDirectory(prefix="audit-") as scratch:
            tmp = Path(scratch)
            os.chdir(tmp)  # a probe that writes to "." writes here, never to the repository
            start = time.perf_counter()
            try:
                kind, what = classify(probe, tmp)
            finally:
                os.chdir(cwd)
            results.append((probe, kind, what, time.perf_counter() - start))
    return results


def report(results: list[tuple[Probe, str, str, float]], wall: float,
           provenance: str = "") -> str:
    """The results as markdown: counts by class, then every probe that needs a look."""
    counts = collections.Counter(kind for _, kind, _, _ in results)
    entries = collections.Counter(p.id.split(":")[0] for p, _, _, _ in results)
    lines = [
        "# Reliability audit", "",
        f"{len(results)} probes of {len(entries)} entry points, {wall:.0f} s wall. Classes "
        "are defined in benchmarks/audit_runner.py's docstring.", "", *([provenance] if provenance else []),
        "| class | probes |", "|---|---|",
        *[f"| {c} | {counts.get(c, 0)} |" for c in CLASSES],
        f"| **total** | {len(results)} |", "",
        "## Probes by entry point", "",
        "| entry point | probes |", "|---|---|",
        *[f"| {name} | {n} |" for name, n in sorted(entries.items())], "",
        "## Probes that are neither a clear error nor correct", "",
    ]
    flagged = [(p, k, w) for p, k, w, _ in results if k not in ("clear error", "correct")]
    if not flagged:
        lines.append("None.")
    for probe, kind, what in flagged:
        lines.append(f"- **{kind}** `{probe.id}`: {what.splitlines()[0] if what else ''}")
    return "\n".join(lines) + "\n"


__all__ = ["ACCEPTED", "CLASSES", "FRAMEWORK", "Lost", "Probe", "classify", "report", "run"]
