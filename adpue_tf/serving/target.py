"""Where an export goes: versioned paths, refusing to replace what is not a SavedModel, an atomic swap.

Standard library only (TensorFlow is imported lazily, to read which assets a
SavedModel references), so the swap can be exercised without TensorFlow.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import numbers
import os
import platform
import re
import shutil
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator

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
        TypeError: if ``version`` is not an integer, ``name`` not a string or
            ``base`` not a path (a leading ``~`` is the home directory).
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
    if not isinstance(base, (str, os.PathLike)):
        raise TypeError(f"`base` must be a str or os.PathLike, got {type(base).__name__}.")
    return os.path.join(os.path.expanduser(os.fspath(base)), name, str(int(version)))


_SAVED_MODEL_FILES = ("saved_model.pb", "saved_model.pbtxt")
#: The entries a SavedModel directory may hold (files, then directories); anything
#: else in it was put there by someone else, so an overwrite refuses the directory.
_OWN_FILES = frozenset({*_SAVED_MODEL_FILES, "fingerprint.pb", "keras_metadata.pb"})
_OWN_DIRS = frozenset({"variables", "assets", "assets.extra"})
#: The files TensorFlow writes in ``variables/``.
_VARIABLE_FILE = re.compile(r"variables\.(index|data-\d{5}-of-\d{5})\Z")
#: The one file of ``assets.extra/`` an export writes (``warmup.WARMUP_FILE``); a user's
#: other files there are carried over to the new export.
_WARMUP_FILE = "assets.extra/tf_serving_warmup_requests"


def _is_saved_model(path: str) -> bool:
    """Whether ``path`` is a directory holding ``saved_model.pb`` or ``saved_model.pbtxt``."""
    return any(os.path.isfile(os.path.join(path, f)) for f in _SAVED_MODEL_FILES)


def _is_file(path: str) -> bool:
    return os.path.isfile(path) and not os.path.islink(path)


def _is_dir(path: str) -> bool:
    return os.path.isdir(path) and not os.path.islink(path)


def _asset_files(path: str) -> set[str]:
    """The file names under ``assets/`` that the SavedModel at ``path`` references.

    Read from the ``asset_file_def`` of its meta graphs (names relative to
    ``assets/``); empty when the SavedModel cannot be read, so that every file
    there is then reported rather than deleted.
    """
    try:  # TensorFlow's own protos; only needed when assets/ is not empty
        from google.protobuf import text_format
        from tensorflow.core.protobuf import saved_model_pb2

        model = saved_model_pb2.SavedModel()
        binary = os.path.join(path, "saved_model.pb")
        if os.path.isfile(binary):
            with open(binary, "rb") as f:
                model.ParseFromString(f.read())
        else:
            with open(os.path.join(path, "saved_model.pbtxt"), encoding="utf-8") as f:
                text_format.Parse(f.read(), model)
    except Exception:  # noqa: BLE001 - unreadable: it references nothing we can name
        return set()
    return {asset.filename for graph in model.meta_graphs for asset in graph.asset_file_def}


def _foreign_entries(path: str) -> list[str]:
    """The entries of the SavedModel directory ``path`` that are not a SavedModel's own.

    A SavedModel holds ``saved_model.pb`` (or ``.pbtxt``), ``fingerprint.pb``,
    ``keras_metadata.pb`` and the directories ``variables/`` (``variables.index``
    and ``variables.data-*-of-*`` only), ``assets/`` (the files the SavedModel
    references only) and ``assets.extra/`` (anything: a user's files, carried
    over by an overwrite); any other entry (a version directory ``1/``, a file a
    user put beside the model or inside ``variables/`` or ``assets/``, a link)
    is foreign, named by its path relative to ``path``.
    """
    foreign = []
    for name in sorted(os.listdir(path)):
        full = os.path.join(path, name)
        own = (name in _OWN_FILES and _is_file(full)) or (name in _OWN_DIRS and _is_dir(full))
        if not own:
            foreign.append(name + ("/" if os.path.isdir(full) else ""))
        elif name in ("variables", "assets") and os.listdir(full):
            ok = (_VARIABLE_FILE.match if name == "variables" else
                  _asset_files(path).__contains__)
            for entry in sorted(os.listdir(full)):
                inner = os.path.join(full, entry)
                if not (_is_file(inner) and ok(entry)):
                    foreign.append(f"{name}/{entry}" + ("/" if os.path.isdir(inner) else ""))
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


def _saved_model_ancestor(path: str) -> str | None:
    """The nearest ancestor of ``path`` (as written, or resolved through links) that is a SavedModel."""
    for start in (os.path.abspath(path), os.path.realpath(path)):
        child, parent = start, os.path.dirname(start)
        while parent != child:
            if _is_saved_model(parent):
                return parent
            child, parent = parent, os.path.dirname(parent)
    return None


def _check_target(raw: str | os.PathLike, overwrite: bool, *, warmup: bool = False) -> str:
    """The normalised export path; raise unless writing there can lose nothing.

    Only an empty directory or, with ``overwrite``, an existing SavedModel
    directory holding nothing but a SavedModel's own entries may be replaced;
    never the working directory or one above it, nor a path under a file or
    inside another SavedModel. The
    user's files in its ``assets.extra/`` are carried over (:func:`_carry_over`),
    but its warm-up requests only make way for new ones (``warmup``): carried
    over they would be replayed against a model they may not fit.
    """
    if not isinstance(raw, (str, os.PathLike)):
        raise TypeError(f"`path` must be a str or os.PathLike, got {type(raw).__name__}.")
    text = os.fspath(raw)
    if isinstance(text, str) and text.startswith("~"):
        text = os.path.expanduser(text)  # as a shell would: never a directory named "~"
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
    inside = _saved_model_ancestor(path)
    if inside is not None:
        raise ValueError(
            f"`path` {text!r} lies inside the SavedModel directory {inside!r}; an export "
            "there would mix two models' files (and the outer one could no longer be "
            "replaced by an export). Export into a directory of its own, e.g. "
            "serving_path(base, name, version). Nothing was written or deleted.")
    if not os.path.lexists(path):
        return path
    if os.path.isdir(path) and not os.path.islink(path):
        if _is_saved_model(path) and not _foreign_entries(path):
            if not overwrite:
                raise FileExistsError(
                    f"`path` {path!r} already holds a SavedModel; pass overwrite=True to "
                    "replace it.")
            if not warmup and os.path.lexists(os.path.join(path, *_WARMUP_FILE.split("/"))):
                raise ValueError(
                    f"`path` {path!r} holds {_WARMUP_FILE}, TF Serving warm-up requests for "
                    "the SavedModel there; they may not fit the new model, so an overwrite "
                    "does not carry them over (it carries over the other files of "
                    "assets.extra/). Pass warmup_rows= to write new ones in their place, or "
                    "move the file out first to keep it. Nothing was written or deleted.")
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


# -- the swap ----------------------------------------------------------------------------

_AT_FDCWD = -100
_RENAME_EXCHANGE = 2  # linux/fs.h
_RENAME_SWAP = 2  # macOS stdio.h, for renamex_np
#: renameat2's system call number where glibc (< 2.28) has no wrapper.
_SYS_RENAMEAT2 = {"x86_64": 316, "amd64": 316, "aarch64": 276, "arm64": 276, "riscv64": 276}
#: What a kernel or file system without an atomic exchange answers: fall back.
_UNSUPPORTED = frozenset({errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOTSUP})


def _find_exchange() -> Callable[[bytes, bytes], int] | None:
    """The C call that atomically exchanges two paths, returning 0 or -1 (``errno``).

    Linux: ``renameat2(..., RENAME_EXCHANGE)`` (glibc >= 2.28, else the raw
    system call on x86-64, ARM64 and RISC-V 64); macOS: ``renamex_np(...,
    RENAME_SWAP)``. None elsewhere (Windows, other systems).
    """
    try:
        if sys.platform.startswith("linux"):
            libc = ctypes.CDLL(None, use_errno=True)
            renameat2 = getattr(libc, "renameat2", None)
            if renameat2 is not None:
                renameat2.argtypes = (ctypes.c_int, ctypes.c_char_p, ctypes.c_int,
                                      ctypes.c_char_p, ctypes.c_uint)
                renameat2.restype = ctypes.c_int
                return lambda src, dst: renameat2(_AT_FDCWD, src, _AT_FDCWD, dst,
                                                  _RENAME_EXCHANGE)
            number = _SYS_RENAMEAT2.get(platform.machine().lower())
            if number is None:
                return None
            syscall = libc.syscall
            syscall.restype = ctypes.c_long
            return lambda src, dst: syscall(
                ctypes.c_long(number), ctypes.c_long(_AT_FDCWD), ctypes.c_char_p(src),
                ctypes.c_long(_AT_FDCWD), ctypes.c_char_p(dst), ctypes.c_long(_RENAME_EXCHANGE))
        if sys.platform == "darwin":
            libc = ctypes.CDLL(None, use_errno=True)
            renamex_np = getattr(libc, "renamex_np", None)
            if renamex_np is not None:
                renamex_np.argtypes = (ctypes.c_char_p, ctypes.c_char_p, ctypes.c_uint)
                renamex_np.restype = ctypes.c_int
                return lambda src, dst: renamex_np(src, dst, _RENAME_SWAP)
    except (OSError, AttributeError):  # no C library to load, or no such call
        return None
    return None


_EXCHANGE = _find_exchange()


def _exchange(src: str, dst: str) -> bool:
    """Atomically exchange the directories ``src`` and ``dst``; False if unsupported.

    Raises OSError for any other failure (nothing was changed then either).
    """
    exchange = _EXCHANGE
    if exchange is None:
        return False
    if exchange(os.fsencode(src), os.fsencode(dst)) == 0:
        return True
    err = ctypes.get_errno()
    if err in _UNSUPPORTED:
        return False
    raise OSError(err, os.strerror(err), src, None, dst)


def _swap_in(tmp: str, path: str) -> None:
    """Move the complete export ``tmp`` to ``path``, replacing a SavedModel there.

    A SavedModel at ``path`` is exchanged with ``tmp`` in one atomic step
    (:func:`_exchange`), so a reader of ``path`` sees the old or the new model,
    never none, and a kill at any point leaves one of them there; the old one,
    now at ``tmp``, is then deleted. Where the system or file system has no
    exchange, two renames (``path`` aside to ``.<name>.old-*``, ``tmp`` to
    ``path``): ``path`` is missing in between, and if the second rename fails
    the old export is renamed back; a kill in between leaves the old model in
    ``.<name>.old-*``, which the next export to ``path`` puts back
    (:func:`_clean_leftovers`).
    """
    if not os.path.lexists(path):
        os.rename(tmp, path)
        return
    if not _is_saved_model(path):  # an empty directory (checked by _check_target)
        os.rmdir(path)
        os.rename(tmp, path)
        return
    if _exchange(tmp, path):
        shutil.rmtree(tmp, ignore_errors=True)  # the replaced SavedModel, as asked
        return
    old = _mkdtemp_marked(path, "old")
    os.rename(path, old)  # renaming a directory onto an empty one replaces it (POSIX)
    try:
        os.rename(tmp, path)
    except BaseException:
        os.rename(old, path)
        _unmark(old)
        raise
    shutil.rmtree(old, ignore_errors=True)  # the replaced SavedModel, as asked
    _unmark(old)


def _carry_over(path: str, tmp: str) -> None:
    """Copy the user's files in ``path/assets.extra/`` into the new export ``tmp``.

    Every entry there (files, directories, links as links) that the new export
    did not write itself; :func:`_check_target` has already refused an old
    warm-up file that the new export does not replace.
    """
    src, dst = os.path.join(path, "assets.extra"), os.path.join(tmp, "assets.extra")
    if not _is_dir(src):
        return
    for name in sorted(os.listdir(src)):
        old, new = os.path.join(src, name), os.path.join(dst, name)
        if os.path.lexists(new):  # the new export's own (its warm-up requests)
            continue
        os.makedirs(dst, exist_ok=True)
        if _is_dir(old):
            shutil.copytree(old, new, symlinks=True)
        else:
            shutil.copy2(old, new, follow_symlinks=False)


# -- the leftovers of killed exports --------------------------------------------------------

#: Staging directories of the exports running in this process (by absolute path).
_LIVE: set[str] = set()
#: The file beside each temporary directory this module makes, ``<directory>`` + this:
#: the proof that the directory is the library's to delete (a look-alike of a user's,
#: however named, has none and is never touched).
MARK = ".adpue_tf"
_MARK_TEXT = "adpue_tf.export_for_serving: the directory of this name beside me is mine\n"


def _mkdtemp_marked(path: str, kind: str) -> str:
    """``tempfile.mkdtemp`` of ``.<name>.<kind>-<id>`` beside ``path``, with its mark."""
    parent, name = os.path.split(os.path.abspath(path))
    made = tempfile.mkdtemp(prefix=f".{name}.{kind}-", dir=parent)
    with open(made + MARK, "x", encoding="utf-8") as mark:
        mark.write(_MARK_TEXT)
    return made


def _ours(directory: str) -> bool:
    """Whether ``directory`` carries the mark :func:`_mkdtemp_marked` leaves beside it."""
    try:
        with open(directory + MARK, encoding="utf-8") as mark:
            return mark.read() == _MARK_TEXT
    except (OSError, UnicodeDecodeError):
        return False


def _unmark(directory: str) -> None:
    """Remove ``directory``'s mark once the directory itself is gone (or put back)."""
    if not os.path.lexists(directory) and _ours(directory):
        os.remove(directory + MARK)


def _leftover_pattern(name: str) -> re.Pattern[str]:
    """The names this module gives the temporary directories of an export to ``name``.

    ``.<name>.tmp-<id>`` (the export being written) and
    ``.<name>.old-<id>`` (the replaced one, two-rename swap only), where
    ``<id>`` are the 8 characters :func:`tempfile.mkdtemp` draws.
    """
    return re.compile(rf"\.{re.escape(name)}\.(tmp|old)-[a-z0-9_]{{8}}\Z")


def _lock_if_dead(path: str) -> int | None:
    """A descriptor holding ``path``'s lock, or None if a running export holds it."""
    if fcntl is None or path in _LIVE:
        return None
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:  # held by a running export (or no locks here): leave it alone
        os.close(fd)
        return None
    return fd


def _clean_leftovers(path: str) -> None:
    """Remove what killed exports to ``path`` left beside it; call under :func:`_swap_lock`.

    Only directories named by :func:`_leftover_pattern` for this very ``path``,
    carrying this module's mark beside them (:data:`MARK`: a directory of that
    name that the user made is never touched), and locked by no running
    export (each export holds an ``flock`` on its staging directory until it
    ends; POSIX only, so nothing is cleaned without ``fcntl``). An ``.old-`` directory holding a SavedModel while
    ``path`` is missing (a two-rename swap killed between its renames) is put
    back at ``path``; the rest is deleted.
    """
    if fcntl is None:
        return
    parent, name = os.path.split(os.path.abspath(path))
    pattern = _leftover_pattern(name)
    found = []
    for entry in os.listdir(parent):
        full = os.path.join(parent, entry)
        match = pattern.match(entry)
        if match and _is_dir(full) and _ours(full):
            found.append((match.group(1) == "tmp", -os.lstat(full).st_ctime, full))
        elif entry.endswith(MARK) and pattern.match(entry[:-len(MARK)]):
            _unmark(full[:-len(MARK)])  # a mark whose directory went (killed in between)
    for is_tmp, _, full in sorted(found):  # the most recently moved-aside old export first
        fd = _lock_if_dead(full)
        if fd is None:
            continue
        try:
            if not is_tmp and not os.path.lexists(path) and _is_saved_model(full):
                os.rename(full, path)
            else:
                shutil.rmtree(full, ignore_errors=True)
            _unmark(full)
        finally:
            os.close(fd)


@contextlib.contextmanager
def _staging(path: str) -> Iterator[str]:
    """A new staging directory ``.<name>.tmp-<id>`` beside ``path``, removed on exit.

    Cleans the leftovers of killed exports to ``path`` first; both under
    :func:`_swap_lock`, and the staging directory stays locked (``flock``)
    while in use, so no other export takes it for a leftover.
    """
    parent = os.path.dirname(os.path.abspath(path))
    os.makedirs(parent, exist_ok=True)
    fd = None
    with _swap_lock(parent):
        _clean_leftovers(path)
        tmp = _mkdtemp_marked(path, "tmp")
        _LIVE.add(tmp)
        if fcntl is not None:
            fd = os.open(tmp, os.O_RDONLY)
            fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        yield tmp
    finally:
        try:
            if os.path.lexists(tmp):
                shutil.rmtree(tmp, ignore_errors=True)
            _unmark(tmp)
        finally:
            _LIVE.discard(tmp)
            if fd is not None:
                os.close(fd)


def _export_into(path: str, write: Callable[[str], None], *, overwrite: bool,
                 warmup: bool = False) -> None:
    """Write an export with ``write(directory)`` and swap it in at ``path``.

    ``path`` comes from :func:`_check_target`, which is asked again under the
    lock (something may have appeared meanwhile); ``warmup``: whether
    ``write`` writes ``assets.extra/tf_serving_warmup_requests``.
    """
    parent = os.path.dirname(os.path.abspath(path))
    with _staging(path) as tmp:
        write(tmp)
        with _swap_lock(parent):  # concurrent exports to one path take turns here
            _check_target(path, overwrite, warmup=warmup)
            _carry_over(path, tmp)
            _swap_in(tmp, path)
