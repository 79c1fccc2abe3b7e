"""What both tables' runners share: the dataset lists, the output directory, writing files whole."""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from adpue_tf.experiments import datasets
from adpue_tf.experiments.helpers import check_settings
from adpue_tf.experiments.report import (
    local_paths_hidden,
    provenance,
    provenance_markdown,
    sha256_arrays,
    sha256_file,
)

__all__ = ["LINEAR_DATASETS", "NEURAL_DATASETS", "Results", "prepare_out", "run_provenance"]


LINEAR_DATASETS = ("australian", "w8a", "covtype", "mushrooms", "german")
NEURAL_DATASETS = ("mnist", "fashion_mnist", "cifar10")


def _check_names(names: tuple[str, ...], known: tuple[str, ...]) -> None:
    if not names:
        raise ValueError(f"`datasets` is empty; name at least one of {list(known)}.")
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValueError(f"Unknown data set(s) {unknown}; known: {list(known)}.")
    check_settings("datasets", names, "data set")


def prepare_out(out_dir: str | Path) -> Path:
    """Create ``out_dir`` and check that files can be written there, before any work.

    Args:
        out_dir: the results directory (created with its parents if missing).

    Returns:
        ``out_dir`` as a ``Path``.

    Raises:
        ValueError: naming ``out_dir`` and the reason, if it cannot be created
            or written to.

    Example:
        >>> import tempfile
        >>> from pathlib import Path
        >>> out = prepare_out(Path(tempfile.mkdtemp()) / "results")
        >>> out.is_dir(), list(out.iterdir())
        (True, [])
    """
    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".write-test-", dir=out)
        os.close(fd)
        os.remove(probe)  # the probe file we just created, nothing else
    except OSError as err:
        raise ValueError(
            f"cannot write results to `--out` {str(out)!r}: {err.strerror or err}. Nothing "
            "was computed; choose a writable directory.") from err
    return out


def _write(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` whole (a reader never sees half a file).

    The file gets the permissions ``open`` would give it (``0o666`` less the
    umask), not ``mkstemp``'s owner-only ``0o600``.
    """
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def _status(done: int, total: int) -> str:
    return ("" if done == total else
            f"**Partial: {done} of {total} settings finished** (the run was interrupted or "
            "is still going; settings not finished say `not run` or are left out).  ")


def _settings_done(out: Path, name: str) -> int:
    """The finished settings of the results ``name.json``/``name.md`` in ``out`` (0: none).

    Results whose JSON cannot be read count as finished (they are kept).
    """
    if (out / f"{name}.json").is_file():
        try:
            done = json.loads((out / f"{name}.json").read_text(encoding="utf-8-sig")
                              )["settings_done"]
        except (OSError, ValueError, KeyError, TypeError):
            return 1
        return done if isinstance(done, int) and not isinstance(done, bool) else 1
    return 1 if (out / f"{name}.md").is_file() else 0


class Results:
    """Where a table's runner writes ``NAME.md`` and ``NAME.json``: never over more with less.

    Without finished results in ``out``, the files are written as the run
    goes (an interrupted run keeps its finished settings there). When ``out``
    already holds results with finished settings (a complete earlier run, or
    an interrupted one), this run writes ``NAME.partial.md`` and
    ``NAME.partial.json`` instead and replaces ``NAME.md``/``NAME.json`` only
    once every one of its settings is done (then the partial files are
    removed): stopping a rerun never replaces results with fewer.

    Example:
        >>> import tempfile
        >>> out = Path(tempfile.mkdtemp())
        >>> Results(out, "linear").write(0, 2, "{}", lambda status: status).name
        'linear.md'
        >>> _ = (out / "linear.json").write_text('{"settings_done": 2}')
        >>> files = Results(out, "linear")
        >>> files.write(0, 2, "{}", lambda status: status).name
        'linear.partial.md'
        >>> files.write(2, 2, "{}", lambda status: status).name, sorted(os.listdir(out))
        ('linear.md', ['linear.json', 'linear.md'])
    """

    def __init__(self, out: Path, name: str) -> None:
        self.out, self.name = out, name
        self.keep = _settings_done(out, name) > 0

    def write(self, done: int, total: int, json_text: str,
              markdown: Callable[[str], str]) -> Path:
        """Write the JSON and the Markdown (``markdown(status line)``); return the Markdown's path."""
        final = not self.keep or (done == total and total > 0)
        stem = self.name if final else f"{self.name}.partial"
        status = _status(done, total)
        if not final:
            status += (f"`{self.name}.md` holds the results of an earlier run, kept until this "
                       "run finishes all its settings.  ")
        _write(self.out / f"{stem}.json", json_text)
        _write(self.out / f"{stem}.md", markdown(status))
        if final:
            for suffix in (".md", ".json"):  # the partial files of this run or an earlier one
                partial = self.out / f"{self.name}.partial{suffix}"
                if partial.is_file():
                    os.remove(partial)
        return self.out / f"{stem}.md"


def _load(name: str, *, strict: bool, **kw: Any) -> tuple[datasets.Dataset | None, str]:
    """The data set, or ``(None, reason)`` when its files are missing and not ``strict``."""
    try:
        return datasets.load(name, **kw), ""
    except (FileNotFoundError, ImportError, OSError) as err:
        if strict:
            raise
        print(f"adpue-tf bench: {name}: no data: {err}", file=sys.stderr)
        return None, str(err).splitlines()[0]


def run_provenance(command: str | None, runner: str, *, seed: int, trials: int,
                   loaded: dict[str, tuple[datasets.Dataset | None, str]],
                   files: dict[str, str] | None = None) -> tuple[str, dict[str, Any]]:
    """A table's provenance block (Markdown) and its dict for the JSON.

    Args:
        command: the command line that ran (None: the Python call ``runner``).
        runner: e.g. ``"run_linear"``, named when ``command`` is None.
        seed: the first seed; ``trials``: trials per setting (seeds ``seed..seed+trials-1``).
        loaded: the data sets by name; those read from ``files`` get the
            SHA-256 of the file, the others of their loaded ``x`` and ``y``.
        files: ``{name: path}`` of the data sets read from a file.

    Example:
        >>> text, prov = run_provenance("adpue-tf bench linear --trials 2", "run_linear",
        ...                             seed=0, trials=2, loaded={})
        >>> prov["seeds"]
        '0-1 (trial t uses seed 0 + t)'
    """
    files = files or {}
    data = {}
    for name, (ds, _) in loaded.items():
        if name in files:
            data[f"{name}: {Path(files[name]).name}"] = sha256_file(files[name])
        elif ds is not None:
            data[f"{name}: loaded x and y (float32 arrays)"] = sha256_arrays(ds.x, ds.y)
    prov = provenance(command or f"adpue_tf.experiments.bench.{runner}(...) from Python",
                      seeds=f"{seed}-{seed + trials - 1} (trial t uses seed {seed} + t)",
                      data=data)
    return "## Provenance\n\n" + provenance_markdown(prov), prov


def _hidden(value: Any) -> Any:
    """A config value for the JSON with local paths hidden (strings, in lists too)."""
    if isinstance(value, str):
        return local_paths_hidden(value)
    if isinstance(value, (list, tuple)):
        return [_hidden(v) for v in value]
    return value
