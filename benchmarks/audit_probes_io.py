"""The audit's probes of what writes files: ``adp.export_for_serving`` and ``serving_path``,
and the command line (``adpue-tf simulate-logs``, ``adpue-tf bench``).

Every probe that writes protects what a user had there (``protect``): a change
to it is classified as data loss whatever the call returned.
"""

from __future__ import annotations

import contextlib
import io
import threading
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.audit_runner import Probe
from benchmarks.audit_values import _adp, _dense, _files, _keras


def _saved(tmp: Path, *extra: str) -> Path:
    path = Path(_adp().export_for_serving(_dense(), tmp / "m" / "1", from_logits=True))
    return _files(path, *extra)


def _export(path: Any, model: Any = None, **kw: Any) -> Any:
    kw.setdefault("from_logits", True)
    return _adp().export_for_serving(_dense() if model is None else model, path, **kw)


def _serve(path: str, x: Any) -> dict:
    import tensorflow as tf

    fn = tf.saved_model.load(path).signatures["serving_default"]
    return {k: v.numpy() for k, v in fn(features=tf.constant(x, tf.float32)).items()}


def _concurrent(tmp: Path) -> list:
    path = _export(tmp / "c" / "1")
    errors: list = []

    def go() -> None:
        try:
            _export(path, overwrite=True)
        except Exception as err:  # noqa: BLE001
            errors.append(err)

    threads = [threading.Thread(target=go) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors + sorted(p.name for p in (tmp / "c").iterdir())


def serving_probes() -> list[Probe]:
    adp = _adp
    def keep(t: Path) -> list:
        return [t / "keep"]

    probes = [
        Probe("export_for_serving: overwrite a SavedModel with a file beside it",
              lambda t: _export(t / "m" / "1", overwrite=True), "notes.txt",
              setup=lambda t: _saved(t, "notes.txt"), protect=lambda t: [t / "m"]),
        Probe("export_for_serving: overwrite a SavedModel with a directory beside it",
              lambda t: _export(t / "m" / "1", overwrite=True), "runs/",
              setup=lambda t: _saved(t, "runs/x.txt"), protect=lambda t: [t / "m"]),
        Probe("export_for_serving: overwrite a base dir with versions and a stray pb",
              lambda t: _export(t / "keep", overwrite=True), "TF Serving base directory",
              setup=lambda t: _files(t / "keep", "1/", "2/", "saved_model.pb"), protect=keep),
        Probe("export_for_serving: overwrite a base dir of real versions",
              lambda t: _export(t / "keep", overwrite=True), "TF Serving base directory",
              setup=lambda t: (_export(t / "keep" / "1"), _export(t / "keep" / "2")),
              protect=keep),
        Probe("export_for_serving: a directory of notes", lambda t: _export(
            t / "keep", overwrite=True), "not a SavedModel",
              setup=lambda t: _files(t / "keep", "a.txt"), protect=keep),
        Probe("export_for_serving: a file", lambda t: _export(t / "keep", overwrite=True),
              "is a file", setup=lambda t: _files(t, "keep"), protect=keep),
        Probe("export_for_serving: a symbolic link to a SavedModel", lambda t: _export(
            t / "link", overwrite=True), "symbolic link",
              setup=lambda t: (t / "link").symlink_to(_saved(t)), protect=lambda t: [t / "m"]),
        Probe("export_for_serving: a path under a file", lambda t: _export(
            str(t / "keep" / "1")), "which is a file", setup=lambda t: _files(t, "keep"),
              protect=keep),
        Probe("export_for_serving: '.'", lambda t: _export(".", overwrite=True),
              "current working directory", protect=lambda t: [t]),
        Probe("export_for_serving: '..'", lambda t: _export("..", overwrite=True),
              "ancestor of the current working directory", protect=lambda t: [t]),
        Probe("export_for_serving: ''", lambda t: _export(""), "`path`"),
        Probe("export_for_serving: path 3", lambda t: _export(3), "`path`"),
        Probe("export_for_serving: overwrite 1", lambda t: _export(t / "n", overwrite=1),
              "`overwrite`"),
        Probe("export_for_serving: from_logits 'no'", lambda t: _export(t / "n", from_logits="no"),
              "`from_logits`"),
        Probe("export_for_serving: from_logits unknown", lambda t: _export(
            t / "n", from_logits=None), "`from_logits`"),
        Probe("export_for_serving: not a model", lambda t: _export(t / "n", model=lambda x: x),
              "`model`"),
        Probe("export_for_serving: two outputs", lambda t: _export(
            t / "n", model=_dense(outputs=2)), "single output"),
        Probe("export_for_serving: two units", lambda t: _export(t / "n", model=_dense(units=2)),
              "one output unit"),
        Probe("export_for_serving: a sigmoid model as logits", lambda t: _export(
            t / "n", model=_dense("sigmoid")), "sigmoid activation"),
        Probe("export_for_serving: a softmax model as logits", lambda t: _export(
            t / "n", model=_dense("softmax")), "softmax activation"),
        Probe("export_for_serving: a logit model as probabilities", lambda t: _export(
            t / "n", from_logits=False), r"probabilities in \[0, 1\]"),
        Probe("export_for_serving: warm-up rows of the wrong width", lambda t: _export(
            t / "n", warmup_rows=np.zeros((2, 4))), "`warmup_rows"),
        Probe("export_for_serving: warm-up rows with NaN", lambda t: _export(
            t / "n", warmup_rows=np.full((2, 3), np.nan)), "`warmup_rows"),
        Probe("export_for_serving: without overwrite over its own", lambda t: _export(
            t / "m" / "1"), "already holds a SavedModel", error=("FileExistsError",),
              setup=_saved, protect=lambda t: [t / "m"]),
        Probe("export_for_serving: overwrite its own (correct)", lambda t: _export(
            _saved(t), overwrite=True), check=lambda p: Path(p, "saved_model.pb").is_file()),
        Probe("export_for_serving: into an empty directory (correct)", lambda t: _export(
            _files(t / "e")), check=lambda p: Path(p, "saved_model.pb").is_file()),
        Probe("export_for_serving: a probability model (correct)", lambda t: float(_serve(
            _export(t / "p", model=_dense("sigmoid"), from_logits=False),
            np.zeros((1, 3)))["probability"][0, 0]), check=lambda p: abs(p - 0.5) < 1e-6),
        Probe("export_for_serving: concurrent overwrites (correct)", _concurrent,
              check=lambda r: r == ["1"]),
        Probe("export_for_serving: string feature warm-up (correct)", _string_model_export,
              check=lambda p: Path(p, "assets.extra", "tf_serving_warmup_requests").is_file()),
        Probe("serving_path: name ''", lambda t: adp().serving_path("e", "", 1), "`name`"),
        Probe("serving_path: name '..'", lambda t: adp().serving_path("e", "..", 1), "`name`"),
        Probe("serving_path: name 'a/b'", lambda t: adp().serving_path("e", "a/b", 1), "`name`"),
        Probe("serving_path: name 3", lambda t: adp().serving_path("e", 3, 1), "`name`"),
    ]
    probes += [Probe(f"serving_path: version {v!r}", lambda t, v=v: adp().serving_path("e", "m", v),
                     "`version`") for v in (-1, 1.5, "1", True, None)]
    return probes


def _string_model_export(tmp: Path) -> str:
    k = _keras()
    ids = k.Input((), dtype="string", name="country")
    ctx = k.Input((2,), name="ctx")
    looked = k.layers.StringLookup(vocabulary=["fr", "de"], output_mode="one_hot")(ids)
    net = k.Model({"country": ids, "ctx": ctx},
                  k.layers.Dense(1)(k.layers.Concatenate()([looked, ctx])))
    return _export(tmp / "s" / "1", model=net, warmup_rows={
        "country": np.array(["fr", "de"]), "ctx": np.zeros((2, 2))})


# ------------------------------------------------------------------ the command line
def _cli(*argv: str) -> int:
    from adpue_tf import cli

    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            code = cli.main(list(argv))
    except SystemExit as done:
        code = done.code
    if code:
        raise SystemExit(f"exit {code}: {err.getvalue()}")
    return code


def cli_probes() -> list[Probe]:
    def keep(t: Path) -> list:
        return [t / "keep"]

    return [
        Probe("simulate-logs: out holds a file", lambda t: _cli(
            "simulate-logs", "--rows", "20", "--out", str(t / "keep")),
              "`out_dir` .* exists and is not an empty directory",
              setup=lambda t: _files(t / "keep", "a.txt"), protect=keep),
        Probe("simulate-logs: out is a file", lambda t: _cli(
            "simulate-logs", "--rows", "20", "--out", str(t / "keep")), "`out_dir`",
              setup=lambda t: _files(t, "keep"), protect=keep),
        Probe("simulate-logs: out holds an old log", lambda t: _cli(
            "simulate-logs", "--rows", "30", "--out", str(t / "keep")),
              "exists and is not an empty directory", protect=keep, setup=lambda t: _cli(
            "simulate-logs", "--rows", "20", "--eval-rows", "5", "--shards", "1", "--out",
            str(t / "keep"))),
        Probe("simulate-logs: rows 1", lambda t: _cli(
            "simulate-logs", "--rows", "1", "--out", str(t / "o")), "`rows`"),
        Probe("simulate-logs: shards 0", lambda t: _cli(
            "simulate-logs", "--rows", "20", "--shards", "0", "--out", str(t / "o")), "`shards`"),
        Probe("simulate-logs: exposure share 1", lambda t: _cli(
            "simulate-logs", "--rows", "20", "--exposure-share", "1", "--out", str(t / "o")),
              "`exposure_share`"),
        Probe("simulate-logs: eval rows 0", lambda t: _cli(
            "simulate-logs", "--rows", "20", "--eval-rows", "0", "--out", str(t / "o")),
              "`eval_rows`"),
        Probe("simulate-logs: into an empty directory (correct)", lambda t: _cli(
            "simulate-logs", "--rows", "20", "--eval-rows", "5", "--shards", "1", "--out",
            str(_files(t / "o"))), check=lambda c: c == 0),
        Probe("bench linear: --out is a file", lambda t: _cli(
            "bench", "linear", "--datasets", "australian", "--quiet", "--out",
            str(t / "keep")), "`--out`", setup=lambda t: _files(t, "keep"), protect=keep),
        Probe("bench linear: a refused --file keeps --out as it was", lambda t: _cli(
            "bench", "linear", "--quiet", "--out", str(t / "keep"), "--file",
            str(_svm(t, "+1 1:0.5\n-1 2:x\n"))), "line 2",
              setup=lambda t: _files(t / "keep", "linear.md", "linear.json", "mine.txt"),
              protect=keep),
        Probe("bench linear: --file with a huge feature index", lambda t: _cli(
            "bench", "linear", "--quiet", "--out", str(t / "o"), "--file",
            str(_svm(t, "+1 1:0.5\n-1 300000000000:1\n"))), "feature index 300,000,000,000"),
        Probe("bench linear: --file with an index of 5000 digits", lambda t: _cli(
            "bench", "linear", "--quiet", "--out", str(t / "o"), "--file",
            str(_svm(t, "+1 1:0.5\n-1 " + "9" * 5000 + ":1\n"))), "feature index"),
        Probe("bench linear: --file malformed", lambda t: _cli(
            "bench", "linear", "--quiet", "--out", str(t / "o"), "--file",
            str(_svm(t, "+1 1:x\n"))), "line 1"),
        Probe("bench linear: --file missing", lambda t: _cli(
            "bench", "linear", "--quiet", "--out", str(t / "o"), "--file", str(t / "no.svm")),
              "no such file"),
        Probe("bench linear: unknown data set", lambda t: _cli(
            "bench", "linear", "--quiet", "--datasets", "imagenet", "--out", str(t / "o")),
              "(Unknown data set|imagenet)"),
        Probe("bench linear: --exposure-rate 1.5", lambda t: _cli(
            "bench", "linear", "--quiet", "--datasets", "australian", "--exposure-rate", "1.5",
            "--out", str(t / "o")), "`exposure_rate`"),
        Probe("bench linear: --file smaller than its test rows", lambda t: _cli(
            "bench", "linear", "--quiet", "--out", str(t / "o"), "--file",
            str(_svm(t, "".join(f"{(-1) ** i:+d} 1:{i % 5}\n" for i in range(40))))),
              "has 40 rows; each trial holds out `n_test`=300"),
        Probe("bench linear: --recommended-folds 0", lambda t: _cli(
            "bench", "linear", "--quiet", "--datasets", "australian", "--recommended-folds",
            "0", "--out", str(t / "o")), "`recommended_folds`"),
        Probe("bench linear: unknown --recommended-candidates", lambda t: _cli(
            "bench", "linear", "--quiet", "--datasets", "australian",
            "--recommended-candidates", "nope", "--out", str(t / "o")),
              "`recommended_candidates`"),
        Probe("bench neural: --n-test 0", lambda t: _cli(
            "bench", "neural", "--quiet", "--n-test", "0", "--out", str(t / "o")), "`n_test`"),
        Probe("cli: unknown command", lambda t: _cli("train"), "invalid choice"),
        Probe("cli: simulate-logs without --out", lambda t: _cli("simulate-logs", "--rows", "5"),
              "--out"),
    ]


def _svm(tmp: Path, text: str) -> Path:
    (tmp / "d.svm").write_text(text)
    return tmp / "d.svm"


def io_probes() -> list[Probe]:
    """Every probe of serving and the command line."""
    return serving_probes() + cli_probes()


__all__ = ["io_probes"]
