"""The audit's probes of concurrency and kills: readers and writers racing, processes killed part-way.

A process is killed with ``SIGKILL`` (nothing of it runs after: no ``finally``,
no ``atexit``) at a controlled point, the k-th file-system call it makes under
the directory it writes to (a dry run counts them), or after a seeded random
delay. To keep each kill cheap, one helper process (the *zygote*) imports
TensorFlow and the library once and forks a child per job; the child is killed,
the zygote reports how it ended. Readers poll from a plain Python process or a
thread. What a user had must survive: the runner's protected paths, and
:class:`~benchmarks.audit_runner.Lost` when a reader found the model missing or
a kill left no whole model. POSIX only (fork, SIGKILL).
"""

from __future__ import annotations

import atexit
import json
import os
import random
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.audit_runner import Lost, Probe
from benchmarks.audit_values import _adp, _dense, _files

ROOT = Path(__file__).resolve().parents[1]
#: Seconds any one job may take before it is killed and the probe fails.
JOB_TIMEOUT = 120

_ZYGOTE = r'''
import json, os, signal, sys, time, traceback
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import warnings
warnings.simplefilter("ignore")
import numpy, tensorflow, keras  # imported once, before any fork; no TensorFlow op runs here
import adpue_tf, adpue_tf.cli, adpue_tf.serving, adpue_tf.synthetic
import adpue_tf.experiments.bench.linear

def arm(root, kill_at):
    """Count the file-system calls under ``root``; SIGKILL this process at the kill_at-th."""
    import builtins, io, shutil, tempfile
    calls = [0]
    def wrap(mod, name):
        real = getattr(mod, name)
        def hooked(*args, **kwargs):
            if any(isinstance(a, (str, bytes, os.PathLike)) and os.fsdecode(a).startswith(root)
                   for a in args):
                calls[0] += 1
                if calls[0] == kill_at:
                    os.kill(os.getpid(), signal.SIGKILL)
            return real(*args, **kwargs)
        setattr(mod, name, hooked)
    for mod, names in ((os, ("rename", "replace", "mkdir", "makedirs", "rmdir", "remove",
                             "unlink", "open", "symlink")), (builtins, ("open",)), (io, ("open",)),
                       (shutil, ("rmtree", "copy2", "copytree", "move", "copyfile")),
                       (tempfile, ("mkdtemp", "mkstemp", "NamedTemporaryFile"))):
        for name in names:
            wrap(mod, name)
    return calls

print("ready", flush=True)
for line in sys.stdin:
    job = json.loads(line)
    pids = []
    for i in range(job.get("n", 1)):
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                sys.stdin.close()
                log = os.open(job["log"] + f".{i}", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
                os.dup2(log, 1)
                os.dup2(log, 2)
                os.chdir(job["cwd"])
                calls = arm(job["root"], job.get("kill_at", 0)) if job.get("root") else [0]
                start = time.perf_counter()
                exec(compile(job["code"], "<audit job>", "exec"), {"JOB": job, "INDEX": i})
                with open(job["log"] + f".{i}.done", "w") as f:
                    json.dump({"calls": calls[0], "seconds": time.perf_counter() - start}, f)
            except BaseException:
                traceback.print_exc()
                code = 1
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        pids.append(pid)
    print(json.dumps({"pids": pids}), flush=True)
    statuses = [os.waitpid(pid, 0)[1] for pid in pids]
    print(json.dumps({"statuses": statuses}), flush=True)
'''


class Zygote:
    """A process that imports TensorFlow once and forks a child per job (started on first use)."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen | None = None

    def _line(self, timeout: float) -> dict | str:
        assert self.proc is not None and self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        if not ready:
            raise TimeoutError(f"the audit's helper process said nothing in {timeout:.0f} s")
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError("the audit's helper process ended")
        return json.loads(line) if line.startswith("{") else line.strip()

    def start(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            return
        env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONPATH": str(ROOT)}
        self.proc = subprocess.Popen([sys.executable, "-c", _ZYGOTE], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     text=True, cwd=ROOT, env=env)
        atexit.register(self.stop)
        if self._line(JOB_TIMEOUT) != "ready":
            raise RuntimeError("the audit's helper process did not start")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc is not None and self.proc.stdout is not None:
            self.proc.stdout.close()

    def run(self, code: str, tmp: Path, *, root: Path | None = None, kill_at: int = 0,
            kill_after: float | None = None, n: int = 1, kill: tuple[int, ...] = (0,),
            **job: Any) -> list[dict]:
        """Run ``code`` in ``n`` forked children (cwd ``tmp``); kill some; return their ends.

        ``kill_at``: SIGKILL each child at its k-th file-system call under ``root``;
        ``kill_after``: SIGKILL the children numbered in ``kill`` after that many
        seconds. Each end is ``{"killed": bool, "exit": code or None, "calls":,
        "seconds":, "log": text}``.
        """
        self.start()
        log = str(tmp / ".job")
        job.update(code=code, cwd=str(tmp), log=log, n=n, kill_at=kill_at,
                   root=str(root) if root else None)
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(job) + "\n")
        self.proc.stdin.flush()
        pids = self._line(JOB_TIMEOUT)["pids"]
        if kill_after is not None:
            time.sleep(kill_after)
            for i in kill:
                try:
                    os.kill(pids[i], signal.SIGKILL)
                except ProcessLookupError:
                    pass  # ended before
        try:
            statuses = self._line(JOB_TIMEOUT)["statuses"]
        except TimeoutError:
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            self._line(30)
            raise
        ends = []
        for i, status in enumerate(statuses):
            done = Path(f"{log}.{i}.done")
            info = json.loads(done.read_text()) if done.is_file() else {}
            text = Path(f"{log}.{i}").read_text(errors="replace") if Path(
                f"{log}.{i}").is_file() else ""
            for p in (done, Path(f"{log}.{i}")):
                p.unlink(missing_ok=True)
            ends.append({"killed": os.WIFSIGNALED(status) and os.WTERMSIG(status) == 9,
                         "exit": os.WEXITSTATUS(status) if os.WIFEXITED(status) else None,
                         "calls": info.get("calls"), "seconds": info.get("seconds"),
                         "log": text[-2000:]})
        return ends


ZYGOTE = Zygote()


# ------------------------------------------------------------------ export_for_serving killed
#: The child's export: a model whose probability at x = 0 is sigmoid(bias) (old: 0.5, new: ~0.99).
_EXPORT = r'''
import keras, numpy as np, adpue_tf as adp
keras.utils.set_random_seed(1)
bias = keras.initializers.Constant(JOB["bias"])
net = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1, bias_initializer=bias)])
for _ in range(JOB.get("times", 1)):
    adp.export_for_serving(net, JOB["path"], from_logits=True, overwrite=True)
'''

OLD_BIAS, NEW_BIAS, NEXT_BIAS = 0.0, 5.0, -5.0


def _prob(bias: float) -> float:
    return float(1.0 / (1.0 + np.exp(-bias)))


def _served(path: Path) -> float | None:
    """The probability the SavedModel at ``path`` serves at x = 0, or None if none whole is there."""
    import tensorflow as tf

    if not (path / "saved_model.pb").is_file():
        return None
    try:
        fn = tf.saved_model.load(str(path)).signatures["serving_default"]
        return float(fn(features=tf.zeros((1, 3)))["probability"].numpy().ravel()[0])
    except Exception:  # noqa: BLE001 - anything unreadable is not a whole model
        return None


def _biased(bias: float) -> Any:
    model = _dense()
    model.layers[-1].bias.assign(np.full((1,), bias, np.float32))
    return model


#: Leftover-like directories of OTHER targets beside ``m/1`` (``m/11``, ``m/2``): never removed.
#: A user's directories beside the export: other targets' names, and two named exactly as
#: this path's leftovers would be (but made by the user: no mark), all to be kept.
_OTHERS = (".11.tmp-abcdefgh", ".2.old-abcd1234", ".1.tmp-notmine", "1.tmp-abcdefgh",
           ".1.tmp-zz99zz99", ".1.old-yy88yy88")


def _setup_export(tmp: Path) -> None:
    path = Path(_adp().export_for_serving(_biased(OLD_BIAS), tmp / "m" / "1", from_logits=True))
    _files(path, "assets.extra/mine.txt", "assets.extra/notes/deep.txt")
    for name in _OTHERS:
        _files(tmp / "m" / name, "x.txt")


def _protect_export(tmp: Path) -> list:
    return [tmp / "m" / "1" / "assets.extra" / "mine.txt",
            tmp / "m" / "1" / "assets.extra" / "notes", *[tmp / "m" / n for n in _OTHERS]]


def _after_kill(tmp: Path, ends: list[dict], may_fail: bool = False) -> dict:
    """What a kill left at ``m/1``, then what the next export there leaves beside it.

    Raises Lost when ``m/1`` holds neither the old nor the new model.
    """
    path = tmp / "m" / "1"
    got = _served(path)
    state = ("old" if got is not None and abs(got - _prob(OLD_BIAS)) < 1e-4 else
             "new" if got is not None and abs(got - _prob(NEW_BIAS)) < 1e-4 else None)
    if state is None:
        raise Lost(f"after the kill `path` holds no whole old or new model (served {got}); "
                   f"beside it: {sorted(p.name for p in path.parent.iterdir())}; "
                   f"children: {[(e['killed'], e['exit']) for e in ends]}")
    failed = [e["log"][-300:] for e in ends if not e["killed"] and e["exit"] and not may_fail]
    _adp().export_for_serving(_biased(NEXT_BIAS), path, from_logits=True, overwrite=True)
    left = sorted(p.name for p in path.parent.iterdir()
                  if p.name.startswith((".1.tmp-", ".1.old-")) and p.name not in _OTHERS)
    served = _served(path)
    return {"state": state, "leftovers": left, "next": served is not None and abs(
        served - _prob(NEXT_BIAS)) < 1e-4, "failed": failed,
            "killed": sum(e["killed"] for e in ends)}


def _clean(r: dict) -> bool:
    return not r["leftovers"] and r["next"] and not r["failed"]


_DRY: dict = {}


def _dry(what: str, tmp: Path, code: str, setup: Any, root: str, **job: Any) -> tuple[int, float]:
    """An uninterrupted run of ``code`` after ``setup`` (once per ``what``): its file calls
    under ``root`` (a path relative to the scratch directory) and its seconds.

    Job values naming ``{tmp}`` are filled with the dry run's own directory.
    """
    if what not in _DRY:
        dry = tmp / f"dry-{len(_DRY)}"
        dry.mkdir()
        setup(dry)
        job = {k: v.format(tmp=dry) if isinstance(v, str) else
               [a.format(tmp=dry) for a in v] if isinstance(v, list) else v
               for k, v in job.items()}
        end = ZYGOTE.run(code, dry, root=dry / root, **job)[0]
        if end["calls"] is None:
            raise RuntimeError(f"the dry run of {what} failed: {end['log'][-500:]}")
        _DRY[what] = (end["calls"], end["seconds"])
    return _DRY[what]


def _export_steps(tmp: Path) -> tuple[int, float]:
    """The file-system calls under ``m/`` of an overwrite, and its seconds."""
    return _dry("an export", tmp, _EXPORT, _setup_export, "m", path="{tmp}/m/1", bias=NEW_BIAS)


def _kill_export_at(tmp: Path, fraction: float) -> dict:
    steps, _ = _export_steps(tmp)
    k = max(1, min(steps, round(fraction * steps)))
    ends = ZYGOTE.run(_EXPORT, tmp, root=tmp / "m", kill_at=k, path=str(tmp / "m" / "1"),
                      bias=NEW_BIAS)
    return {**_after_kill(tmp, ends), "step": f"{k}/{steps}"}


def _kill_export_after(tmp: Path, share: float) -> dict:
    _, seconds = _export_steps(tmp)
    ends = ZYGOTE.run(_EXPORT, tmp, kill_after=share * seconds * 1.5,
                      path=str(tmp / "m" / "1"), bias=NEW_BIAS)
    return _after_kill(tmp, ends)


def _two_exporters(tmp: Path, kill_one: bool) -> dict:
    _, seconds = _export_steps(tmp)
    ends = ZYGOTE.run(_EXPORT, tmp, n=2, times=3, path=str(tmp / "m" / "1"), bias=NEW_BIAS,
                      kill_after=1.2 * seconds if kill_one else None, kill=(0,))
    return _after_kill(tmp, ends)


# ------------------------------------------------------------------ readers during overwrites
_READER = r'''
import os, sys
path, stop, out = sys.argv[1:4]
reads = missing = half = 0
while not os.path.exists(stop):
    reads += 1
    if not os.path.exists(os.path.join(path, "saved_model.pb")):
        missing += 1
    elif not os.path.exists(os.path.join(path, "variables", "variables.index")):
        half += 1
with open(out, "w") as f:
    f.write(f"{reads} {missing} {half}")
'''


def _overwrites(path: Path, times: int) -> None:
    for i in range(times):
        _adp().export_for_serving(_biased(float(i)), path, from_logits=True, overwrite=True)


def _poll_process(tmp: Path, times: int = 6) -> tuple[int, int, int]:
    """Overwrite ``m/1`` ``times`` times while another process polls it; its counts."""
    path, stop, out = tmp / "m" / "1", tmp / "stop", tmp / "reads"
    reader = subprocess.Popen([sys.executable, "-c", _READER, str(path), str(stop), str(out)])
    try:
        time.sleep(0.2)
        _overwrites(path, times)
    finally:
        stop.write_text("")
        try:
            reader.wait(30)
        except subprocess.TimeoutExpired:
            reader.kill()
            reader.wait()
    reads, missing, half = map(int, out.read_text().split())
    return reads, missing, half


def _poll_thread(tmp: Path, times: int = 6) -> tuple[int, int, int]:
    path, counts, done = tmp / "m" / "1", [0, 0, 0], threading.Event()

    def poll() -> None:
        while not done.is_set():
            counts[0] += 1
            if not (path / "saved_model.pb").exists():
                counts[1] += 1
            elif not (path / "variables" / "variables.index").exists():
                counts[2] += 1

    reader = threading.Thread(target=poll)
    reader.start()
    try:
        _overwrites(path, times)
    finally:
        done.set()
        reader.join()
    return tuple(counts)


def _never_missing(counts: tuple[int, int, int], half: bool = False) -> int:
    reads, missing, halves = counts
    if missing or (half and halves):
        raise Lost(f"a reader found `path/saved_model.pb` missing {missing} times"
                   + (f" and without its variables {halves} times" if half else "")
                   + f" in {reads} reads during the overwrites")
    return reads


# ------------------------------------------------------------------ the bench killed
_SVM = "".join(f"{(-1) ** i:+d} 1:{(i * 37 % 17) / 8 - 1:.3f} 2:{(i * 11 % 13) / 6 - 1:.3f}\n"
               for i in range(400))
_BENCH = r'''
import sys
from adpue_tf import cli
try:
    cli.main(JOB["argv"])
except SystemExit as done:
    if done.code:
        raise
'''


def _bench_argv(tmp: Any, trials: int = 3, alphas: str = "0.3,0.5") -> list[str]:
    return ["bench", "linear", "--quiet", "--file", f"{tmp}/d.svm", "--trials", str(trials),
            "--no-recommended", "--steps", "5", "--n-test", "50", "--l2s", "0.1",
            "--rounds", "1", "--alphas", alphas, "--exposure-rate", "0.3,0.5", "--out",
            f"{tmp}/out"]


_BENCH_RUN: list = []


def _setup_bench(tmp: Path) -> None:
    """A complete earlier run in ``out/`` (two settings), and a note of the user's beside it.

    The run is made once (in a forked child) and copied into each probe's directory.
    """
    import shutil
    import tempfile

    if not _BENCH_RUN:
        first = Path(tempfile.mkdtemp(prefix="audit-bench-"))
        atexit.register(shutil.rmtree, first, True)
        (first / "d.svm").write_text(_SVM)
        end = ZYGOTE.run(_BENCH, first, argv=_bench_argv(first, 2, "0.3"))[0]
        if end["exit"] != 0 or not (first / "out" / "linear.md").is_file():
            raise RuntimeError(f"the first bench run failed: {end['log'][-500:]}")
        _BENCH_RUN.append(first)
    shutil.copytree(_BENCH_RUN[0], tmp, dirs_exist_ok=True)
    _files(tmp / "out", "mine.txt")


def _protect_bench(tmp: Path) -> list:
    """The user's note; the results may be replaced only whole (checked by :func:`_kill_bench`)."""
    return [tmp / "out" / "mine.txt"]


def _bench_dry(tmp: Path) -> tuple[int, float]:
    """The rerun's file calls under ``out/`` and its seconds."""
    return _dry("a bench rerun", tmp, _BENCH, _setup_bench, "out", argv=_bench_argv("{tmp}"))


def _kill_bench(tmp: Path, fraction: float) -> list:
    """Rerun the bench over the complete ``out/`` (four settings, more trials); kill it at
    ``fraction`` of its file calls under ``out/``."""
    calls, _ = _bench_dry(tmp)
    at = max(1, round(fraction * calls))
    before = {n: (tmp / "out" / n).read_bytes() for n in ("linear.md", "linear.json")}
    ends = ZYGOTE.run(_BENCH, tmp, root=tmp / "out", kill_at=at, argv=_bench_argv(tmp))
    if not ends[0]["killed"]:  # finished first: it may replace the results (not a probe)
        raise RuntimeError(f"the rerun ended before its kill: {ends[0]['log'][-300:]}")
    for name in ("linear.md", "linear.json"):
        now = tmp / "out" / name
        if not now.is_file() or now.read_bytes() != before[name]:
            done = _settings_done(tmp / "out" / "linear.json")
            if done != 4:  # replaced, and not by the rerun's complete results
                raise Lost(f"the killed rerun replaced {name} of the complete earlier run "
                           f"(2 settings) with results of {done} settings")
    return sorted(p.name for p in (tmp / "out").iterdir())


def _settings_done(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))["settings_done"]
    except (OSError, ValueError, KeyError, TypeError) as err:
        return f"none readable ({type(err).__name__})"


# ------------------------------------------------------------------ simulate-logs killed
_LOG = r'''
from adpue_tf import cli
cli.main(["simulate-logs", "--rows", "3000", "--eval-rows", "200", "--shards", "3",
          "--out", JOB["out"]])
'''


def _kill_log(tmp: Path, *, last: bool = False, share: float = 0.0) -> Any:
    """Kill simulate-logs at its last file call (``meta.json``) or after ``share`` of its
    time; the half-written log must then be refused by name when read."""
    calls, seconds = _dry("simulate-logs", tmp, _LOG, lambda t: None, "log[v2]",
                          out="{tmp}/log[v2]")
    ends = ZYGOTE.run(_LOG, tmp, root=tmp / "log[v2]", kill_at=calls if last else 0,
                      kill_after=None if last else share * seconds, out=str(tmp / "log[v2]"))
    if not ends[0]["killed"]:
        raise RuntimeError(f"simulate-logs ended before its kill: {ends[0]['log'][-300:]}")
    return _adp().synthetic.read_ad_log_meta(tmp / "log[v2]")


# ------------------------------------------------------------------ threads at once
def _threads(*calls: Any) -> list:
    """Run each call in its own thread at once; their results (an exception is re-raised)."""
    results: list = [None] * len(calls)

    def go(i: int) -> None:
        try:
            results[i] = calls[i]()
        except BaseException as err:  # noqa: BLE001 - handed to the caller
            results[i] = err

    threads = [threading.Thread(target=go, args=(i,)) for i in range(len(calls))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for r in results:
        if isinstance(r, BaseException):
            raise r
    return results


def _thread_probes() -> list[Probe]:
    from benchmarks.audit_values import XE, E, W, X, _data

    def export(tmp: Path, name: str) -> Any:
        model = _dense()  # built here: Keras' seeding is not for threads
        return lambda: _adp().export_for_serving(model, tmp / "m" / name, from_logits=True)

    def batches(ds: Any) -> Any:
        return lambda: sum(int(b[1].shape[0]) for b in ds.take(3))

    def scores() -> list:
        s, model = _data(), _dense(dim=2)  # one model, scored by two threads

        def score() -> float:
            return _adp().validation_score(model, s.x_pu, s.w_pu, s.x_e, s.e_e,
                                           from_logits=True)

        return _threads(score, score)

    return [
        Probe("export_for_serving: threads exporting to m/1 and m/11 at once (correct)",
              lambda t: _threads(export(t, "1"), export(t, "11")), check=lambda r: all(
                  Path(p, "saved_model.pb").is_file() for p in r) and len(r) == 2),
        Probe("pue_dataset: one Dataset iterated by three threads at once (correct)", lambda t: (
            lambda ds: _threads(batches(ds), batches(ds), batches(ds)))(
            _adp().data.pue_dataset(X, W, XE, E, batch_size=8, seed=0)),
              check=lambda r: r == [24, 24, 24]),
        Probe("validation_score: one model scored by two threads at once (correct)",
              lambda t: scores(), check=lambda r: np.isfinite(r).all() and abs(r[0] - r[1])
              < 1e-6),
    ]


def kill_probes() -> list[Probe]:
    """Every probe of concurrency and kills."""
    if not hasattr(os, "fork"):
        return []
    rng = random.Random(0)
    probes = []
    for fraction in (0.05, 0.2, 0.35, 0.5, 0.65, 0.8, 0.9, 1.0):
        probes.append(Probe(
            f"export_for_serving: SIGKILL at {fraction:.0%} of an overwrite's file calls",
            lambda t, f=fraction: _kill_export_at(t, f), check=lambda r: _clean(r) and r[
                "killed"] == 1, setup=_setup_export,
            protect=_protect_export))
    for i in range(6):
        share = rng.random()
        probes.append(Probe(
            f"export_for_serving: SIGKILL after a random delay ({i + 1}: {share:.2f} x its time)",
            lambda t, s=share: _kill_export_after(t, s), check=_clean, setup=_setup_export,
            protect=_protect_export))
    probes += [
        Probe("export_for_serving: two processes overwriting one path at once", lambda t:
              _two_exporters(t, False), check=_clean, setup=_setup_export,
              protect=_protect_export),
        Probe("export_for_serving: two processes overwriting one path, one SIGKILLed", lambda t:
              _two_exporters(t, True), check=_clean, setup=_setup_export,
              protect=_protect_export),
        Probe("export_for_serving: a reader process polling saved_model.pb during overwrites",
              lambda t: _never_missing(_poll_process(t)), check=lambda n: n > 0,
              setup=_setup_export, protect=_protect_export),
        Probe("export_for_serving: a reader process never finds saved_model.pb without its "
              "variables", lambda t: _never_missing(_poll_process(t), half=True),
              check=lambda n: n > 0, setup=_setup_export, protect=_protect_export),
        Probe("export_for_serving: a reader thread polling saved_model.pb during overwrites",
              lambda t: _never_missing(_poll_thread(t), half=True), check=lambda n: n > 0,
              setup=_setup_export, protect=_protect_export),
        Probe("export_for_serving: a user's directories named exactly like this path's "
              "leftovers are kept (correct)",
              lambda t: _after_kill(t, []),
              check=_clean, setup=_setup_export, protect=_protect_export),
    ]
    for fraction in (0.5, 1.0):  # of the rerun's file calls under out/
        probes.append(Probe(
            f"bench linear: a rerun over a complete --out SIGKILLed at {fraction:.0%} of its "
            "file calls", lambda t, f=fraction: _kill_bench(t, f),
            check=lambda files: "linear.md" in files, setup=_setup_bench,
            protect=_protect_bench))
    share = rng.random()  # a point drawn at random (timings on a shared machine vary too much)
    probes.append(Probe(
        f"bench linear: a rerun over a complete --out SIGKILLed at a random file call "
        f"({share:.0%} of them)", lambda t, s=share: _kill_bench(t, s),
        check=lambda files: "linear.md" in files, setup=_setup_bench, protect=_protect_bench))
    words = r"log\[v2\].*(meta\.json|interrupted|incomplete)"
    probes.append(Probe("simulate-logs: SIGKILLed at its last file call, the log is refused "
                        "when read", lambda t: _kill_log(t, last=True), words,
                        error=("ValueError", "FileNotFoundError")))
    for i in range(2):
        share = 0.2 + 0.6 * rng.random()
        probes.append(Probe(
            f"simulate-logs: SIGKILLed after a random delay ({i + 1}: {share:.2f} x its time), "
            "the log is refused when read", lambda t, s=share: _kill_log(t, share=s), words,
            error=("ValueError", "FileNotFoundError")))
    return probes + _thread_probes()


__all__ = ["ZYGOTE", "kill_probes"]
