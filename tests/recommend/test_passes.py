"""fit_pue's independent passes: run side by side on large data, with the answers of one at a time."""

from __future__ import annotations

import threading
import time

import keras
import numpy as np
import pytest

import adpue_tf as adp
from adpue_tf.recommend import stage

#: Every default candidate (own passes and two joint ones) on rows that take several batches.
SETTINGS = dict(epochs=2, min_steps=4, batch_size=64, verbose=0)
_PASS = stage._pass


def _net():
    return keras.Sequential([keras.Input((2,)), keras.layers.Dense(3, "relu"),
                             keras.layers.Dense(1)])


@pytest.fixture(scope="module")
def data():
    return adp.synthetic.synthetic_pue(400, 400, seed=3)


def _fit(data, monkeypatch, workers):
    monkeypatch.setattr(stage, "PARALLEL_PASSES", workers)
    threads = set()

    def recorded(*args):
        threads.add(threading.current_thread().name)
        return _PASS(*args)

    monkeypatch.setattr(stage, "_pass", recorded)
    fit = adp.fit_pue(_net, data.x_pu, data.w_pu, data.x_e, data.e_e, **SETTINGS)
    return fit, threads


@pytest.mark.slow
def test_passes_side_by_side_give_the_answers_of_one_at_a_time(data, monkeypatch):
    alone, one = _fit(data, monkeypatch, 1)
    both, two = _fit(data, monkeypatch, 2)
    assert one == {threading.main_thread().name}
    assert len(two - one) >= 1  # some passes ran in workers
    assert both.choice == alone.choice
    assert both.scores == alone.scores
    assert both.epochs == alone.epochs
    x = data.x_pu[:50]
    np.testing.assert_array_equal(both.model.predict(x, verbose=0),
                                  alone.model.predict(x, verbose=0))


def _spec(rows: int, batch_size: int = 64):
    cfg = stage.Settings(epochs=1, batch_size=batch_size, min_steps=1, rounds=1, seed=0,
                         optimizer=lambda: keras.optimizers.Adam())

    class _Stage:
        pass

    st = _Stage()
    st.cfg = cfg
    spec = stage._Spec([], lambda nets: (None, None), (), lambda steps, full: None, rows,
                       None, True, lambda *a: None, lambda *a: None)
    return [st], [(0, "bce_w")], spec


def test_workers_see_the_callers_dtype_policy_and_raise_in_the_caller(monkeypatch):
    seen = []

    def fake(stages, jobs, spec):
        seen.append((threading.current_thread().name, keras.config.dtype_policy().name))
        if spec.rows == 300:
            raise RuntimeError("a pass failed")

    monkeypatch.setattr(stage, "_pass", fake)
    before = keras.config.dtype_policy()
    keras.config.set_dtype_policy("mixed_float16")
    try:
        stage._run([_spec(1000), _spec(2000)])
        assert {name for name, _ in seen} - {threading.main_thread().name}
        assert {policy for _, policy in seen} == {"mixed_float16"}
        with pytest.raises(RuntimeError, match="a pass failed"):
            stage._run([_spec(1000), _spec(300)])
    finally:
        keras.config.set_dtype_policy(before)


def test_small_data_single_passes_and_gpu_hosts_run_in_the_callers_thread(monkeypatch):
    seen = []
    monkeypatch.setattr(stage, "_pass",
                        lambda *a: seen.append(threading.current_thread().name))
    stage._run([_spec(1000), _spec(50)])  # one fits in a batch: full-batch data is tabular
    stage._run([_spec(1000)])
    assert set(seen) == {threading.main_thread().name} and len(seen) == 3
    # a caller's tf.device scope holds in its thread only: never side by side beside a GPU
    monkeypatch.setattr(stage.tf.config, "list_logical_devices",
                        lambda kind=None: ["GPU:0"] if kind == "GPU" else [])
    stage._run([_spec(1000), _spec(2000)])
    assert set(seen) == {threading.main_thread().name} and len(seen) == 5


def test_an_error_is_raised_after_the_passes_under_way_have_ended(monkeypatch):
    ended = []

    def fake(stages, jobs, spec):
        if spec.rows == 3000:
            raise RuntimeError("the longest pass failed")
        time.sleep(0.3)
        ended.append(spec.rows)

    monkeypatch.setattr(stage, "_pass", fake)
    with pytest.raises(RuntimeError, match="longest"):
        stage._run([_spec(2000), _spec(3000)])
    assert ended == [2000]  # no pass left training behind the caller's back
