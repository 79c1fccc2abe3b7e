"""Where an export goes: versioned paths, refusing to replace what is not a SavedModel, an atomic swap."""

from __future__ import annotations

import contextlib
import numbers
import os
import shutil
import tempfile
import threading
from collections.abc import Iterator

try:  # POSIX: an advisory lock that other processes see too
    import fcntl
except ImportError:  # pragma: no cover - Windows: the in-process lock only
    fcntl = None  # type: ignore[assignment]

__all__ = ["serving_path"]


def serving_path(base: str | os.PathLike, name: str, version: int) -> str:
    """The TF Serving layout ``<base>/<name>/<version>`` for one model version.

    TF Serving watches ``<base>/<name>`` (its ``--model_base_path``) and serves
    the highest numeric sub-directory; pass the result to
    :func:`export_for_serving`.

    Args:
        base: the export root, e.g. ``"export"``.
        name: the model name (TF Serving's ``--model_name``); one path component.
        version: the version number, an integer ``>= 0``.

    Returns:
        The version directory as a string.

    Raises:
        TypeError: if ``version`` is not an integer or ``name`` not a string.
        ValueError: if ``version`` is negative or ``name`` is empty, ``.``,
            ``..`` or holds a path separator.

    Example:
        >>> import os
        >>> serving_path("export", "ranker", 1) == os.path.join("export", "ranker", "1")
        True
    """
    if not isinstance(name, str):
        raise TypeError(f"`name` must be a string, got {type(name).__name__}.")
    seps = {os.sep, "/"} | ({os.altsep} if os.altsep else set())
    if name in ("", ".", "..") or any(sep in name for sep in seps):
        raise ValueError(f"`name` must be one non-empty path component, got {name!r}.")
    if isinstance(version, bool) or not isinstance(version, numbers.Integral):
        raise TypeError(f"`version` must be an int >= 0, got {version!r}.")
    if version < 0:
        raise ValueError(f"`version` must be an int >= 0, got {version}.")
    return os.path.join(os.fspath(base), name, str(int(version)))


_SAVED_MODEL_FILES = ("saved_model.pb", "saved_model.pbtxt")
#: The entries a SavedModel directory may hold (files, then directories); anything
#: else in it was put there by someone else, so an overwrite refuses the directory.
_OWN_FILES = frozenset({*_SAVED_MODEL_FILES, "fingerprint.pb", "keras_metadata.pb"})
_OWN_DIRS = frozenset({"variables", "assets", "assets.extra"})


def _is_saved_model(path: str) -> bool:
    """Whether ``path`` is a directory holding ``saved_model.pb`` or ``saved_model.pbtxt``."""
    return any(os.path.isfile(os.path.join(path, f)) for f in _SAVED_MODEL_FILES)


def _foreign_entries(path: str) -> list[str]:
    """The entries of the SavedModel directory ``path`` that are not a SavedModel's own.

    A SavedModel holds ``saved_model.pb`` (or ``.pbtxt``), ``fingerprint.pb``,
    ``keras_metadata.pb`` and the directories ``variables/``, ``assets/`` and
    ``assets.extra/``; any other entry (a version directory ``1/``, a file a
    user put beside the model, a link) is foreign.
    """
    foreign = []
    for name in sorted(os.listdir(path)):
        full = os.path.join(path, name)
        own = (name in _OWN_FILES and os.path.isfile(full) and not os.path.islink(full)) or (
            name in _OWN_DIRS and os.path.isdir(full) and not os.path.islink(full))
        if not own:
            foreign.append(name + ("/" if os.path.isdir(full) else ""))
    return foreign


def _shown(names: list[str]) -> str:
    return ", ".join(names[:6]) + (f", ... ({len(names)} entries)" if len(names) > 6 else "")


def _describe(path: str) -> str:
    """What is at ``path``, in words, for error messages."""
    if os.path.islink(path):
        return f"a symbolic link to {os.readlink(path)!r}"
    if not os.path.isdir(path):
        return "a file" if os.path.isfile(path) else "something that is not a directory"
    names = sorted(os.listdir(path))
    versions = [n for n in names if n.isdigit() and os.path.isdir(os.path.join(path, n))]
    if versions and (len(versions) == len(names) or _is_saved_model(path)):
        return (f"a TF Serving base directory holding versions {_shown(versions)}; export "
                "into a new version sub-directory, e.g. serving_path(base, name, version)")
    if _is_saved_model(path):
        return ("a SavedModel directory that also holds entries a SavedModel does not "
                f"have ({_shown(_foreign_entries(path))}); move them out first")
    return f"a directory that is not a SavedModel (it holds {_shown(names)})"


def _file_ancestor(path: str) -> str | None:
    """The nearest existing ancestor of ``path`` that is not a directory, if any."""
    parent = os.path.dirname(os.path.abspath(path))
    while parent and not os.path.isdir(parent):
        if os.path.lexists(parent):
            return parent
        up = os.path.dirname(parent)
        if up == parent:
            break
        parent = up
    return None


def _check_target(raw: str | os.PathLike, overwrite: bool) -> str:
    """The normalised export path; raise unless writing there can lose nothing.

    Only an empty directory or, with ``overwrite``, an existing SavedModel
    directory holding nothing but a SavedModel's own entries may be replaced;
    never the working directory or one above it, nor a path under a file.
    """
    if not isinstance(raw, (str, os.PathLike)):
        raise TypeError(f"`path` must be a str or os.PathLike, got {type(raw).__name__}.")
    text = os.fspath(raw)
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"`path` must name a directory to create, got {text!r}.")
    path = os.path.normpath(text)
    real, cwd = os.path.realpath(path), os.path.realpath(os.getcwd())
    if real == cwd or cwd.startswith(real.rstrip(os.sep) + os.sep):
        where = "the current working directory" if real == cwd else (
            f"an ancestor of the current working directory {cwd!r}")
        raise ValueError(
            f"`path` {text!r} is {where}; export into a new directory, e.g. "
            "serving_path(base, name, version). Nothing was written or deleted.")
    blocker = _file_ancestor(path)
    if blocker is not None:
        raise ValueError(
            f"`path` {text!r} lies under {blocker!r}, which is a file, not a directory; "
            "export into a directory. Nothing was written or deleted.")
    if not os.path.lexists(path):
        return path
    if os.path.isdir(path) and not os.path.islink(path):
        if _is_saved_model(path) and not _foreign_entries(path):
            if not overwrite:
                raise FileExistsError(
                    f"`path` {path!r} already holds a SavedModel; pass overwrite=True to "
                    "replace it.")
            return path
        if not os.listdir(path):
            return path  # an empty directory: nothing to lose
    raise ValueError(
        f"`path` {path!r} exists and is {_describe(path)}. export_for_serving only "
        "replaces a SavedModel directory that holds nothing else (with overwrite=True); "
        "it never deletes anything else. Nothing was written or deleted.")


_THREAD_LOCK = threading.Lock()


@contextlib.contextmanager
def _swap_lock(parent: str) -> Iterator[None]:
    """Hold the exports into ``parent`` back from each other while one is swapped in.

    A process-wide lock for threads, plus ``flock`` on the directory ``parent``
    itself for other processes (POSIX), so no lock file is left behind.
    """
    with _THREAD_LOCK:
        if fcntl is None:
            yield
            return
        fd = os.open(parent, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing releases the lock


def _swap_in(tmp: str, path: str) -> None:
    """Move the complete export ``tmp`` to ``path``, replacing a SavedModel there.

    Two renames on the same file system; if the second fails the old export is
    renamed back, so ``path`` always holds a whole SavedModel (or nothing when
    there was none before).
    """
    if not os.path.lexists(path):
        os.rename(tmp, path)
        return
    if not _is_saved_model(path):  # an empty directory (checked by _check_target)
        os.rmdir(path)
        os.rename(tmp, path)
        return
    parent = os.path.dirname(os.path.abspath(path))
    old = tempfile.mkdtemp(prefix=f".{os.path.basename(path)}.old-", dir=parent)
    os.rename(path, old)  # renaming a directory onto an empty one replaces it (POSIX)
    try:
        os.rename(tmp, path)
    except BaseException:
        os.rename(old, path)
        raise
    shutil.rmtree(old, ignore_errors=True)  # the replaced SavedModel, as asked
