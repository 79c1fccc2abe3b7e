"""tf.distribute exactness: 2 replicas give the loss and gradients of one device.

Logical CPU devices must be configured before TensorFlow initialises, so the
training runs in subprocesses (``tests/dist_step.py``): one with
``MirroredStrategy`` over two logical CPUs, and two ``MultiWorkerMirroredStrategy``
workers on 127.0.0.1 (one CPU replica each), all with ``model.fit``. All start
together (module fixture) and each compares with a one-device run of the same
model, weights, global batch and SGD(learning_rate=1.0) step, so weight deltas
are -gradients.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.slow

HELPER = Path(__file__).with_name("dist_step.py")
ROOT = HELPER.parent.parent
RTOL, ATOL = 1e-5, 1e-6
TIMEOUT = 400
MWMS_CASES = ["pue_debiased", "fired", "pue_rounds"]


def _env(**extra):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="",
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT),
                                                        os.environ.get("PYTHONPATH")])))
    env.pop("TF_CONFIG", None)
    env.update(extra)
    return env


def _free_ports(n):
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def _wait_all(jobs):
    """Wait for every job; if one MWMS worker fails, stop its peer (it would hang)."""
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline and any(p.poll() is None for p, _ in jobs.values()):
        failed = [n for n, (p, _) in jobs.items() if n.startswith("worker") and p.poll()]
        if failed:
            for name, (proc, _) in jobs.items():
                if name.startswith("worker") and proc.poll() is None:
                    proc.kill()
        time.sleep(0.2)
    results = {}
    for name, (proc, out) in jobs.items():
        timed_out = proc.poll() is None
        if timed_out:
            proc.kill()
        proc.wait()
        proc.stderr_file.close()
        err = out.with_suffix(".err").read_text()[-3000:]
        if proc.returncode != 0 or not out.exists():
            why = f"timed out after {TIMEOUT} s" if timed_out else f"exit {proc.returncode}"
            results[name] = (None, f"{why}\n{err}")
        else:
            results[name] = (json.loads(out.read_text()), None)
    return results


def _write_logs(root):
    """TFRecord shards for the file-sharded case, written in a subprocess (TF starts there)."""
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import dist_step; "
            "dist_step.write_tfrecords(sys.argv[2])")
    subprocess.run([sys.executable, "-c", code, str(HELPER.parent), root], check=True,
                   env=_env(), cwd=ROOT, capture_output=True)


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    """Start the MirroredStrategy run and the two MWMS workers; wait for all."""
    tmp = tmp_path_factory.mktemp("dist")

    def start(name, args, env):
        out = tmp / f"{name}.json"
        # stderr to a file, not a pipe: a full pipe would block the child while we poll
        err = (tmp / f"{name}.err").open("w")
        proc = subprocess.Popen([sys.executable, str(HELPER), str(out), *args], env=env,
                                cwd=ROOT, stdout=subprocess.DEVNULL, stderr=err)
        proc.stderr_file = err
        return proc, out

    logs = tmp / "logs"
    logs.mkdir()
    _write_logs(str(logs))
    jobs = {"mirrored": start("mirrored", [], _env())}
    cluster = {"worker": [f"127.0.0.1:{p}" for p in _free_ports(2)]}
    for i in range(2):
        tf_config = json.dumps({"cluster": cluster, "task": {"type": "worker", "index": i}})
        jobs[f"worker{i}"] = start(f"worker{i}", ["--worker", str(i), "--cases",
                                                  ",".join(MWMS_CASES),
                                                  # Keras 3's BackupAndRestore writes one
                                                  # file: one directory per worker
                                                  "--backup", str(tmp / f"backup{i}"),
                                                  "--tfrecords", str(logs)],
                                   _env(TF_CONFIG=tf_config))
    return _wait_all(jobs)


@pytest.fixture(scope="module")
def mirrored(reports):
    report, err = reports["mirrored"]
    assert err is None, err
    return report["cases"]


def _close(a, b, what):
    np.testing.assert_allclose(np.asarray(a, np.float64), np.asarray(b, np.float64),
                               rtol=RTOL, atol=ATOL, err_msg=what)


def _assert_same_step(single, dist, losses=True):
    if losses:
        assert set(single["logs"]) == set(dist["logs"])
        for key in single["logs"]:
            _close(dist["logs"][key], single["logs"][key], key)
    assert len(single["deltas"]) == len(dist["deltas"])
    for i, (a, b) in enumerate(zip(dist["deltas"], single["deltas"])):
        _close(a, b, f"weight delta {i}")
        assert np.abs(np.asarray(b)).max() > 1e-3  # the step moved this weight
    for key in ("refreshes", "dagger_mode"):
        assert dist.get(key) == single.get(key)
    for i, (a, b) in enumerate(zip(dist.get("snapshot", []), single.get("snapshot", []))):
        _close(a, b, f"snapshot weight {i}")


def test_two_replicas_on_two_logical_cpus(reports, mirrored):
    report, _ = reports["mirrored"]
    assert report["logical_cpus"] == 2
    for case in mirrored.values():
        assert case["single"]["replicas"] == 1
        assert case["mirrored"]["replicas"] == 2


@pytest.mark.parametrize("name", ["pue_plain", "pue_debiased", "ad3se", "fired",
                                  "fired_gamma"])
def test_mirrored_step_equals_one_device(mirrored, name):
    case = mirrored[name]
    _assert_same_step(case["single"], case["mirrored"])
    assert {"loss"} <= set(case["single"]["logs"])
    if name != "ad3se":
        assert {"risk", "r_pos", "r_neg", "nn_fired"} <= set(case["single"]["logs"])


def test_debiased_model_state_after_refresh(mirrored):
    single = mirrored["pue_debiased"]["single"]
    assert single["refreshes"] == 3  # one before fit, one after each of the 2 steps
    assert single["dagger_mode"] == 2  # SNAPSHOT


@pytest.mark.parametrize("name", ["pue_plain", "pue_debiased", "ad3se", "fired"])
def test_replicas_see_different_rows(mirrored, name):
    """Not vacuous: each replica gets half the batch, every source, different rows."""
    halves = mirrored[name]["view"]
    assert len(halves) == 2 and halves[0]["rows"] == halves[1]["rows"] == 16
    sources = [s for s, n in halves[0]["counts"].items() if n]
    assert len(sources) == 2  # both sources of the setting in each half
    assert all(halves[1]["counts"][s] > 0 for s in sources)
    assert not np.allclose(halves[0]["x"], halves[1]["x"])
    assert (halves[0]["sum_x"], halves[0]["sum_w"], halves[0]["sum_e"]) != \
        (halves[1]["sum_x"], halves[1]["sum_w"], halves[1]["sum_e"])


@pytest.mark.parametrize("name", ["fired", "fired_gamma"])
def test_correction_decided_on_the_global_batch(mirrored, name):
    case = mirrored[name]
    ref = case["reference"]
    logs = case["mirrored"]["logs"]
    # R- < 0 globally, but the first replica's half alone has R- > 0.
    assert ref["global_r_neg"] < 0
    assert ref["local_r_neg"][0] > 0 > ref["local_r_neg"][1]
    assert logs["nn_fired"] == 1.0
    _close(logs["r_neg"], ref["global_r_neg"], "r_neg")
    _close(logs["risk"], logs["r_pos"], "risk = R+ when fired (beta=0)")
    deltas = case["mirrored"]["deltas"]
    for got, want in zip(deltas, ref["correct"]):  # independent NumPy gradient
        _close(got, want, "NumPy reference")
    # The check can fail: a per-replica decision, or no correction, moves the
    # weights differently by far more than the tolerance.
    for wrong in ("naive", "uncorrected"):
        gap = max(np.abs(np.subtract(a, b)).max() for a, b in zip(deltas, ref[wrong]))
        assert gap > 1e-2, (wrong, gap)


def test_gamma_step_differs_from_max_step(mirrored):
    a, b = mirrored["fired"]["mirrored"]["deltas"], mirrored["fired_gamma"]["mirrored"]["deltas"]
    assert max(np.abs(np.subtract(x, y)).max() for x, y in zip(a, b)) > 1e-2


@pytest.mark.parametrize("name", MWMS_CASES)
def test_multi_worker_fit_equals_one_device(reports, mirrored, name):
    """``model.fit`` on two workers: the one-device step, the same state on both."""
    single = mirrored[name]["single"]  # same model, batch and steps on one device
    workers = []
    for i in range(2):
        report, err = reports[f"worker{i}"]
        assert err is None, f"worker {i}: {err}"
        assert report["worker"] == i
        workers.append(report["cases"][name]["multiworker"])
    for dist in workers:
        assert dist["replicas"] == 2
        assert dist["epochs"] == single["epochs"]
        # fit averages the workers' logs: the global loss and risk parts
        _assert_same_step(single, dist)
    # in sync: the same weights, snapshot and refresh count on both workers
    assert workers[0]["deltas"] == workers[1]["deltas"]
    assert workers[0].get("snapshot") == workers[1].get("snapshot")
    assert workers[0].get("refreshes") == workers[1].get("refreshes")


def test_refreshes_happen_on_every_worker(reports, mirrored):
    for i in range(2):
        case = reports[f"worker{i}"][0]["cases"]["pue_rounds"]["multiworker"]
        # one refresh by hand before fit (dist_step._debiased), then one per epoch
        assert case["refreshes"] == 1 + 3 == mirrored["pue_rounds"]["single"]["refreshes"]
        assert case["dagger_mode"] == 2


def test_file_sharded_tfrecords_fit_on_two_workers(reports):
    """Each worker reads its own TFRecord files; training stays in sync across workers."""
    runs = []
    for i in range(2):
        report, err = reports[f"worker{i}"]
        assert err is None, f"worker {i}: {err}"
        runs.append(report["tfrecords"])
    assert sorted(tuple(r["pipeline"]) for r in runs) == [(0, 2), (1, 2)]
    files = [set(r["files"]) for r in runs]
    assert files[0] and files[1] and not files[0] & files[1]  # disjoint shards
    assert files[0] | files[1] == {0, 1, 2, 3}
    assert runs[0]["weights"] == runs[1]["weights"]  # identical after training
    assert runs[0]["epochs"] == runs[1]["epochs"] == 2
    assert runs[0]["refreshes"] == runs[1]["refreshes"] == 2
    assert runs[0]["loss"] == runs[1]["loss"]  # fit averages the workers' logs
    assert np.abs(np.asarray(runs[0]["weights"][0])).max() > 0  # it trained
