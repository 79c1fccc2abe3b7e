"""The LIBSVM files (australian, german, mushrooms, w8a, covtype): found locally or downloaded once, sha256-checked."""

from __future__ import annotations

import hashlib
import math
import numbers
import os
from pathlib import Path

import numpy as np

from adpue_tf.experiments.datasets.common import (
    _LIBSVM,
    LABEL_MAPS,
    Dataset,
    _check_name,
    binarize,
    read_bytes,
    read_text,
)

__all__ = ["CACHE_SUBDIR", "ENV_VAR", "LIBSVM_FILES_URL", "LIBSVM_URL", "data_dir", "libsvm_path",
           "load_libsvm", "read_libsvm"]


LIBSVM_URL = "https://www.csie.ntu.edu.tw/~cjlin/libsvmtools/datasets/binary.html"
#: Where the LIBSVM files are downloaded from (the file name follows).
LIBSVM_FILES_URL = "https://www.csie.ntu.edu.tw/~cjlin/libsvmtools/datasets/binary/"
#: The Keras cache subdirectory of the downloads: ``~/.keras/datasets/adpue_tf/``.
CACHE_SUBDIR = "datasets/adpue_tf"
#: Environment variable naming the data directory (see :func:`data_dir`).
ENV_VAR = "ADPUE_DATA_DIR"
_SHA256 = {
    "australian_scale": "86799bcc4dbcd41929a514fa181d1c1a40e01f009dee139d4141a194d7ecd9e3",
    "german.numer_scale": "97637cc6b994bd3fa78999c771bc044bea7a0cdf91d43b6ecfd10f7e7c4ebc82",
    "mushrooms": "f39a4eb628dc61a7d43760815b061c9e497aa728ce1ad8bde57a09ef6043b538",
    "w8a": "6a9fa8fd5f524303240a5db07d4b3d4a51e8b7b4b20a914105d8e3e8c81640f2",
}


def data_dir(path: str | os.PathLike | None = None) -> Path | None:
    """The local data directory, or ``None`` to use the Keras cache.

    Order: ``path``; the environment variable ``ADPUE_DATA_DIR``; else ``None``:
    the LIBSVM files are then fetched with ``keras.utils.get_file`` into
    ``~/.keras/datasets/adpue_tf/`` (see :func:`libsvm_path`).

    Raises:
        FileNotFoundError: if the chosen directory does not exist.

    Example:
        >>> import tempfile
        >>> data_dir(tempfile.gettempdir()).is_dir()
        True
    """
    for given, what in ((path, "`data_dir`"), (os.environ.get(ENV_VAR) or None, ENV_VAR)):
        if given is not None:
            if not Path(given).is_dir():
                raise FileNotFoundError(f"Data directory {str(given)!r} (from {what}) "
                                        "does not exist.")
            return Path(given)
    return None


_data_dir = data_dir


def _sha256(path: Path, raw: bytes | None = None) -> str:
    if raw is not None:
        return hashlib.sha256(raw).hexdigest()
    digest = hashlib.sha256()  # not hashlib.file_digest: Python 3.11+
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def libsvm_path(name: str, *, data_dir: str | os.PathLike | None = None,
                verify: bool = True) -> Path:
    """Where the LIBSVM file of ``name`` is: a local copy, or the Keras cache.

    With ``data_dir`` (or ``ADPUE_DATA_DIR``) the file (or its ``.bz2``/``.gz``)
    must be in that directory or its ``libsvm/`` subdirectory; nothing is
    downloaded. Without, ``keras.utils.get_file`` fetches it from the LIBSVM site
    into ``~/.keras/datasets/adpue_tf/`` (once) and checks its sha256.
    ``covtype`` has no published sha256 and is never downloaded: it loads only
    from a local copy, unverified.

    Args:
        name: ``australian``, ``german``, ``mushrooms``, ``w8a`` or ``covtype``.
        data_dir: a local directory (default: ``ADPUE_DATA_DIR``, else the cache).
        verify: check a local copy's sha256 (of its decompressed bytes)
            against the LIBSVM site's file; downloads are always checked.

    Raises:
        FileNotFoundError: the file is missing and cannot be fetched; the
            message names the file, its URL and ``ADPUE_DATA_DIR``.
        ValueError: unknown name, or a sha256 mismatch.

    Example:
        >>> import tempfile
        >>> d = Path(tempfile.mkdtemp())
        >>> _ = (d / "german.numer_scale").write_text("+1 1:0.5\\n")
        >>> libsvm_path("german", data_dir=d, verify=False).name
        'german.numer_scale'
    """
    fname = _LIBSVM[_check_name(name, tuple(_LIBSVM))][0]
    digest = _SHA256.get(fname)
    url = LIBSVM_FILES_URL + fname + ("" if digest else ".bz2")  # covtype: only its .bz2
    base = _data_dir(data_dir)
    if base is not None:
        what = "`data_dir`" if data_dir is not None else ENV_VAR
        folders = [base, base / "libsvm"]
        found = [p for f in folders for ext in ("", ".bz2", ".gz")
                 if (p := f / (fname + ext)).is_file()]
        if not found:
            fetch = (f"or unset {ENV_VAR} to let the loader fetch it into "
                     f"~/.keras/{CACHE_SUBDIR}/" if digest else
                     "it has no published sha256, so it is never downloaded")
            raise FileNotFoundError(
                f"LIBSVM file {fname!r} not found in {[str(f) for f in folders]} (from {what}). "
                f"Download it from {url} (listed at {LIBSVM_URL}) into that directory; {fetch}.")
        path = found[0]
        if verify and digest is not None:
            got = _sha256(path, None if path.name == fname else read_bytes(path))
            if got != digest:
                raise ValueError(f"{path}: sha256 {got} differs from the LIBSVM site's file "
                                 f"({digest}); the copy is corrupt or another version. "
                                 f"Download it again from {url}.")
        return path
    if digest is None:
        raise FileNotFoundError(
            f"LIBSVM file {fname!r} has no published sha256, so adpue_tf does not download "
            f"it: get it from {url} (listed at {LIBSVM_URL}), then pass `data_dir=` or set "
            f"{ENV_VAR} to its directory.")
    import keras  # noqa: PLC0415 (only the download needs it)

    try:
        return Path(keras.utils.get_file(fname, origin=url, file_hash=digest,
                                         hash_algorithm="sha256", cache_subdir=CACHE_SUBDIR))
    except Exception as err:  # noqa: BLE001 (get_file raises bare Exception offline)
        raise FileNotFoundError(
            f"LIBSVM file {fname!r} is not in the Keras cache (~/.keras/{CACHE_SUBDIR}/) and "
            f"could not be fetched from {url}: {err}. Download it by hand and pass "
            f"`data_dir=` (or `--data-dir`), or set {ENV_VAR} to its directory.") from None


def read_libsvm(path: str | os.PathLike, n_features: int) -> tuple[np.ndarray, np.ndarray]:
    """Parse a LIBSVM/svmlight file into dense float32 features and its labels.

    Strict, so that a corrupt file fails with the file and line rather than
    loading wrong numbers: every line is ``label idx:value ...`` with indices in
    ``1..n_features``, strictly increasing, values finite within the float32
    range; the file ends with a newline (a last line without one was cut off);
    ``.gz``/``.bz2`` files are decompressed. Blank lines and ``#`` comments are skipped.

    Args:
        path: the file.
        n_features: the number of feature columns.

    Returns:
        ``(x, labels)``: float32 ``(n, n_features)`` and float64 ``(n,)``.

    Raises:
        ValueError: an empty, truncated or corrupt file, or a malformed line
            (the message names the file and the line number).

    Example:
        >>> import tempfile
        >>> p = Path(tempfile.mkdtemp()) / "f"
        >>> _ = p.write_text("+1 1:0.5 3:-1\\n-1 2:1\\n")
        >>> read_libsvm(p, 3)
        (array([[ 0.5,  0. , -1. ],
               [ 0. ,  1. ,  0. ]], dtype=float32), array([ 1., -1.]))
        >>> _ = p.write_text("+1 1:0.5\\n+1 1:0.")
        >>> read_libsvm(p, 3)
        Traceback (most recent call last):
        ...
        ValueError: ...f, line 2: the file ends in the middle of this line ('+1 1:0.')...
    """
    path = Path(path)
    text = read_text(path)
    lines = text.split("\n")
    if text and not text.endswith("\n"):
        raise ValueError(f"{path}, line {len(lines)}: the file ends in the middle of this line "
                         f"({lines[-1][:60]!r}); it looks truncated. Download it again.")
    limit = float(np.finfo(np.float32).max)
    labels: list[float] = []
    rows: list[int] = []
    cols: list[int] = []
    vals: list[float] = []
    for number, line in enumerate(lines, start=1):
        tokens = line.split("#", 1)[0].split()
        if not tokens:
            continue

        def bad(what: str, number: int = number, line: str = line) -> ValueError:
            return ValueError(f"{path}, line {number}: {what} in {line[:80]!r}.")

        try:
            label = float(tokens[0])
        except ValueError:
            raise bad(f"label {tokens[0]!r} is not a number") from None
        if not math.isfinite(label):
            raise bad(f"label {tokens[0]!r} is not finite")
        last = 0
        for tok in tokens[1:]:
            idx, sep, val = tok.partition(":")
            try:
                j, v = int(idx), float(val)
            except ValueError:
                raise bad(f"{tok!r} is not index:value") from None
            if not sep:
                raise bad(f"{tok!r} is not index:value")
            if not 1 <= j <= n_features:
                raise bad(f"feature index {j} is outside 1..{n_features}")
            if j <= last:
                raise bad(f"feature index {j} does not increase")
            if not (math.isfinite(v) and abs(v) <= limit):
                raise bad(f"value {val!r} is not finite in float32")
            last = j
            rows.append(len(labels))
            cols.append(j - 1)
            vals.append(v)
        labels.append(label)
    if not labels:
        raise ValueError(f"{path}: the file is empty (no data rows); download it again.")
    x = np.zeros((len(labels), n_features), np.float32)
    x[rows, cols] = vals
    return x, np.asarray(labels)


def load_libsvm(name: str, *, data_dir: str | os.PathLike | None = None,
                n_rows: int | None = None, seed: int = 0, verify: bool = True) -> Dataset:
    """Load a LIBSVM data set of the paper's Table 1 as a dense float32 matrix.

    The file comes from :func:`libsvm_path`: a local copy in ``data_dir`` (or
    ``ADPUE_DATA_DIR``, directly or in its ``libsvm/`` subdirectory), else the
    Keras cache ``~/.keras/datasets/adpue_tf/``, downloaded once and checked
    against the LIBSVM site's sha256. It is parsed by :func:`read_libsvm`.

    Args:
        name: ``australian``, ``german``, ``mushrooms``, ``w8a`` or ``covtype``.
        data_dir: a local directory with the file (default: ``ADPUE_DATA_DIR``,
            else the Keras cache).
        n_rows: keep a random subsample of this many rows, drawn without
            replacement from ``seed`` and kept in file order; ``None`` keeps all.
            The paper's size is ``paper_rows(name)``.
        seed: seed of the subsample.
        verify: check a local copy's sha256 (``covtype`` has none to check).

    Raises:
        ValueError: unknown name, bad ``n_rows``, sha256 mismatch, a corrupt
            file (naming the file and line), unexpected labels.
        FileNotFoundError: the file is missing (the message names the file,
            its URL and ``ADPUE_DATA_DIR``).

    Example:
        >>> import tempfile
        >>> d = Path(tempfile.mkdtemp())
        >>> _ = (d / "german.numer_scale").write_text("+1 1:0.5 24:-1\\n-1 2:1\\n")
        >>> ds = load_libsvm("german", data_dir=d, verify=False)
        >>> ds.x.shape, ds.y
        ((2, 24), array([1., 0.], dtype=float32))
        >>> load_libsvm("w8a", n_rows=paper_rows("w8a")).x.shape  # doctest: +SKIP
        (1800, 300)
    """
    fname, n_features = _LIBSVM[_check_name(name, tuple(_LIBSVM))]
    if n_rows is not None and (isinstance(n_rows, bool) or not isinstance(n_rows, numbers.Real)
                               or int(n_rows) != n_rows or n_rows < 1):
        raise ValueError(f"`n_rows` must be a positive integer or None, got {n_rows!r}.")
    path = libsvm_path(name, data_dir=data_dir, verify=verify)
    x, raw = read_libsvm(path, n_features)
    try:
        y = binarize(name, raw)
    except ValueError as err:
        raise ValueError(f"{path}: {err}") from None
    if n_rows is not None:
        n_rows = int(n_rows)
        if n_rows > len(y):
            raise ValueError(f"`n_rows`={n_rows} exceeds the {len(y)} rows of {name}.")
        keep = np.sort(np.random.default_rng(seed).choice(len(y), n_rows, replace=False))
        x, y, raw = x[keep], y[keep], raw[keep]
    return Dataset(name, x, y, LABEL_MAPS[name].description, raw.astype(np.int64))
