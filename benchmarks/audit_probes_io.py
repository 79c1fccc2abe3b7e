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
        Probe("bench linear: --recommended-min-steps 0", lambda t: _cli(
            "bench", "linear", "--quiet", "--datasets", "australian", "--recommended-min-steps",
            "0", "--out", str(t / "o")), "`recommended_min_steps`"),
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


# ------------------------------------------------------------------ overwrites that keep a user's files
def _served_p(path: Any) -> float:
    return float(_serve(str(path), np.zeros((1, 3)))["probability"][0, 0])


def _is_model(path: Any) -> bool:
    return Path(path, "saved_model.pb").is_file()


def _warm_saved(tmp: Path, *extra: str) -> Path:
    """A SavedModel with warm-up requests (and a user's files) in its assets.extra/."""
    path = Path(_export(tmp / "m" / "1", warmup_rows=np.zeros((2, 3))))
    return _files(path, *extra)


def serving_more_probes() -> list[Probe]:
    """Overwrites over a user's files, unusual paths and models, warm-up rows of every kind."""
    from benchmarks.audit_values import SQUASHED, squashed

    def user(*names: str) -> Any:
        return lambda t: [t / "m" / "1" / "assets.extra" / n for n in names]

    def linked(t: Path) -> Path:
        path = _saved(t, "assets.extra/mine.txt")
        (path / "assets.extra" / "link.txt").symlink_to(path / "assets.extra" / "mine.txt")
        return path

    probes = [
        Probe("export_for_serving: overwrite keeps a user file in assets.extra/ (correct)",
              lambda t: _export(t / "m" / "1", overwrite=True), check=_is_model,
              setup=lambda t: _saved(t, "assets.extra/mine.txt"), protect=user("mine.txt")),
        Probe("export_for_serving: overwrite keeps a nested folder in assets.extra/ (correct)",
              lambda t: _export(t / "m" / "1", overwrite=True), check=_is_model,
              setup=lambda t: _saved(t, "assets.extra/notes/a/deep.txt"),
              protect=user("notes")),
        Probe("export_for_serving: overwrite keeps a binary file in assets.extra/ (correct)",
              lambda t: _export(t / "m" / "1", overwrite=True), check=_is_model,
              setup=lambda t: (_saved(t) / "assets.extra").mkdir() or (
                  t / "m" / "1" / "assets.extra" / "vocab.bin").write_bytes(bytes(range(256))),
              protect=user("vocab.bin")),
        Probe("export_for_serving: overwrite keeps a link in assets.extra/ (correct)",
              lambda t: _export(t / "m" / "1", overwrite=True), check=_is_model, setup=linked,
              protect=user("mine.txt", "link.txt")),
        Probe("export_for_serving: overwrite twice keeps a user file (correct)", lambda t: (
            _export(t / "m" / "1", overwrite=True), _export(t / "m" / "1", overwrite=True))[1],
              check=_is_model, setup=lambda t: _saved(t, "assets.extra/mine.txt"),
              protect=user("mine.txt")),
        Probe("export_for_serving: overwrite of a model with warm-up requests, no warmup_rows",
              lambda t: _export(t / "m" / "1", overwrite=True),
              r"tf_serving_warmup_requests.*warmup_rows",
              setup=lambda t: _warm_saved(t, "assets.extra/mine.txt"),
              protect=lambda t: [t / "m"]),
        Probe("export_for_serving: overwrite with new warm-up rows keeps a user file (correct)",
              lambda t: _export(t / "m" / "1", overwrite=True, warmup_rows=np.ones((3, 3))),
              check=_is_model, setup=lambda t: _warm_saved(t, "assets.extra/mine.txt"),
              protect=user("mine.txt")),
        Probe("export_for_serving: overwrite over a user file in variables/", lambda t: _export(
            t / "m" / "1", overwrite=True), r"variables/mine\.txt",
              setup=lambda t: _saved(t, "variables/mine.txt"), protect=lambda t: [t / "m"]),
        Probe("export_for_serving: overwrite over a user file in assets/", lambda t: _export(
            t / "m" / "1", overwrite=True), r"assets/mine\.txt",
              setup=lambda t: _saved(t, "assets/mine.txt"), protect=lambda t: [t / "m"]),
        Probe("export_for_serving: overwrite=True into a new path (correct)", lambda t: _export(
            t / "new" / "1", overwrite=True), check=_is_model),
        Probe("export_for_serving: a path with brackets, spaces and accents (correct)",
              lambda t: _export(t / "m[v2]" / "modèle 1", overwrite=True), check=_is_model),
        Probe("export_for_serving: a DebiasedModel (correct)", lambda t: _served_p(_export(
            t / "d", model=_adp().DebiasedModel(_dense()))), check=lambda p: abs(p - 0.5) < 1e-6),
        Probe("export_for_serving: from_logits np.bool_(True)", lambda t: _export(
            t / "n", from_logits=np.bool_(True)), "`from_logits`", check=_is_model),
        Probe("export_for_serving: warm-up rows of 0 rows", lambda t: _export(
            t / "n", warmup_rows=np.zeros((0, 3))), "`warmup_rows"),
        Probe("export_for_serving: warm-up rows 1e39", lambda t: _export(
            t / "n", warmup_rows=np.full((2, 3), 1e39)), "`warmup_rows"),
        Probe("export_for_serving: warm-up rows a masked array", lambda t: _export(
            t / "n", warmup_rows=np.ma.masked_array(np.zeros((2, 3)), [[1, 0, 0], [0, 0, 0]])),
              "`warmup_rows.*mask"),
        Probe("export_for_serving: warm-up rows as a list (correct)", lambda t: _export(
            t / "n", warmup_rows=[[0.0, 1.0, 2.0]]), check=lambda p: Path(
            p, "assets.extra", "tf_serving_warmup_requests").is_file()),
        Probe("serving_path: ('export', 'ranker', 1) (correct)", lambda t: _adp().serving_path(
            "export", "ranker", 1), check=lambda p: Path(p).parts[-2:] == ("ranker", "1")),
        Probe("serving_path: version np.int64(3)", lambda t: _adp().serving_path(
            "export", "ranker", np.int64(3)), "`version`",
              check=lambda p: Path(p).parts[-1] == "3"),
    ]
    for how in SQUASHED:
        probes.append(Probe(f"export_for_serving: a net ending in {how} as logits",
                            lambda t, h=how: _export(t / "n", model=squashed(h, dim=3)),
                            r"(sigmoid|probabilit)"))
    return probes


# ------------------------------------------------------------------ bench options, text files
def _complete(t: Path) -> Path:
    """An --out holding a complete earlier run (as its files say) and a note of the user's."""
    import json

    out = _files(t / "out", "linear.md", "mine.txt")
    (out / "linear.json").write_text(json.dumps({"settings_done": 2, "settings_total": 2}))
    return out


def _tiny(t: Path, text: str | bytes, name: str = "d.svm") -> Path:
    path = t / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return path


_ROWS = "".join(f"{(-1) ** i:+d} 1:{(i * 37 % 17) / 8 - 1:.3f} 2:{(i * 11 % 13) / 6 - 1:.3f}\n"
                for i in range(120))


def _bench(t: Path, *options: str, file: str | bytes | None = None) -> int:
    """``adpue-tf bench linear`` on a tiny LIBSVM file, cheap settings, ``options`` last."""
    svm = _tiny(t, _ROWS if file is None else file)
    return _cli("bench", "linear", "--quiet", "--file", str(svm), "--trials", "2",
                "--no-recommended", "--steps", "3", "--n-test", "30", "--l2s", "0.1",
                "--rounds", "1", "--alphas", "0.3", "--out", str(t / "out"), *options)


def bench_option_probes() -> list[Probe]:
    """bench's list options (repeated, empty, out of range) over a complete --out, and
    LIBSVM files as editors save them."""
    def keep(t: Path) -> list:
        return [t / "out"]

    bad = (("--alphas", "0.3,0.3", "alphas"), ("--alphas", "", "alphas"),
           ("--alphas", "1.5", "alphas"),
           ("--alphas", "nan", "alphas"), ("--alphas", "0.3;0.5", "alphas"),
           ("--exposure-rate", "0.5,0.5", "exposure.rate"), ("--exposure-rate", "",
                                                             "exposure.rate"),
           ("--l2s", "0.1,0.1", "l2s"), ("--l2s", "", "l2s"), ("--l2s", "-1", "l2s"),
           ("--trials", "1", "trials"), ("--jobs", "0", "jobs"), ("--steps", "0", "steps"),
           ("--tol", "-1", "tol"), ("--rounds", "-1", "rounds"),
           ("--recommended-candidates", "bce_w,bce_w", "recommended_candidates"),
           ("--datasets", "australian,australian", "datasets"))
    probes = [Probe(f"bench linear: {flag} {value!r} over a complete --out", lambda t, f=flag,
                    v=value: _bench(t, f, v), rf"{words}", setup=_complete, protect=keep)
              for flag, value, words in bad]
    probes += [
        # an empty item is refused (docs/never-lost.md); accepted, the run replaces the
        # results whole, as a finished run may: silent, not data loss
        Probe("bench linear: --alphas '0.3,' (an empty item)", lambda t: _bench(
            t, "--alphas", "0.3,"), "alphas", setup=_complete),
        Probe("bench neural: --ratios 0.3,0.3", lambda t: _cli(
            "bench", "neural", "--quiet", "--trials", "2", "--epochs", "1", "--ratios",
            "0.3,0.3", "--out", str(t / "out")), "ratios"),
        Probe("bench neural: --ratios ''", lambda t: _cli(
            "bench", "neural", "--quiet", "--trials", "2", "--epochs", "1", "--ratios", "",
            "--out", str(t / "out")), "ratios"),
        Probe("bench linear: --file with a UTF-8 byte-order mark (correct)", lambda t: _bench(
            t, file=b"\xef\xbb\xbf" + _ROWS.encode()), check=lambda c: c == 0),
        Probe("bench linear: --file saved as UTF-16 with its mark (correct)", lambda t: _bench(
            t, file=_ROWS.encode("utf-16")), check=lambda c: c == 0),
        Probe("bench linear: --file with CRLF lines (correct)", lambda t: _bench(
            t, file=_ROWS.replace("\n", "\r\n").encode()), check=lambda c: c == 0),
        Probe("bench linear: --file with a Latin-1 byte", lambda t: _bench(
            t, file=_ROWS.encode() + b"+1 1:0.5 # caf\xe9\n"), "UTF-8"),
        Probe("bench linear: --file with a UTF-8 mark in the middle", lambda t: _bench(
            t, file=_ROWS.encode() + b"\xef\xbb\xbf+1 1:0.5\n"), r"line 121"),
        Probe("simulate-logs: --seed 2**40 (correct)", lambda t: _cli(
            "simulate-logs", "--rows", "20", "--eval-rows", "5", "--shards", "1", "--seed",
            str(2**40), "--out", str(t / "o")), check=lambda c: c == 0),
        Probe("simulate-logs: --out in a folder named log[v2] (correct)", lambda t: (_cli(
            "simulate-logs", "--rows", "20", "--eval-rows", "5", "--shards", "1", "--out",
            str(t / "log[v2]")), _adp().synthetic.read_ad_log_meta(t / "log[v2]"))[1]["counts"],
              check=lambda c: c["pu"] == 10),
    ]
    return probes


def io_probes() -> list[Probe]:
    """Every probe of serving and the command line."""
    return serving_probes() + cli_probes() + serving_more_probes() + bench_option_probes()


__all__ = ["io_probes"]
