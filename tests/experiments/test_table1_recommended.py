"""Table 1's Recommended column: ``adp.fit_pue`` per trial on the trial's PU and E rows only."""

from __future__ import annotations

import dataclasses
import json
import os
import sys

import numpy as np
import pytest

import adpue_tf as adp
from adpue_tf.experiments import recommended, simulate, table1

# tiny: 2 trials, 3 candidates, a few steps per net
CFG = table1.LinearBenchConfig(trials=2, n_test=40, steps=10, recipe_l2s=(0.1,), recipe_rounds=1,
                               recommended_epochs=2, recommended_min_steps=10,
                               recommended_candidates=("bce_w", "ratio", "brier"))


def _data(n=200, d=13, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, (n, d)).astype(np.float32)
    y = (x[:, 0] - x[:, 1] + 0.5 * rng.normal(size=n) > 0).astype(np.float32)
    return x, y


@pytest.fixture(scope="module")
def stack():
    x, y = _data()
    return table1._stack(simulate.simulate_pue, x, y, CFG, 0.5)


def test_settings_come_from_the_bench_config():
    r = recommended.from_bench(CFG)
    assert (r.epochs, r.min_steps, r.learning_rate, r.candidates) == (
        2, 10, 0.01, ("bce_w", "ratio", "brier"))
    assert table1.LinearBenchConfig().recommended_learning_rate == 0.01
    # the penalty every other column carries, and a tenth of it: one net each
    assert r.l2 == (CFG.l2, CFG.l2 / 10) == (0.01, 0.001)
    assert recommended.from_bench(dataclasses.replace(CFG, recommended_l2=0.0)).l2 == 0.0
    assert recommended.from_bench(dataclasses.replace(CFG, recommended_l2=(0.1,))).l2 == 0.1
    assert recommended.from_bench(dataclasses.replace(CFG, l2=0.0)).l2 == 0.0
    assert r.jit_compile is True  # XLA by default: the same accuracies, 27-55 % less time
    assert not recommended.from_bench(dataclasses.replace(CFG, recommended_jit=False)).jit_compile
    # every paper set's rows in one batch (full-batch steps, as the other columns take)
    assert r.batch_size == 4096 == recommended.RecommendedConfig().batch_size
    assert recommended.from_bench(dataclasses.replace(CFG, recommended_batch_size=64)
                                  ).batch_size == 64
    with pytest.raises(ValueError, match="recommended_batch_size"):
        dataclasses.replace(CFG, recommended_batch_size=0)
    assert sorted(recommended.nets(3, r.l2)) == ["l2=0.001", "l2=0.01"]
    assert callable(recommended.nets(3, 0.01))
    assert "Recommended" in table1.pue_methods(CFG)
    assert "Recommended" not in table1.pue_methods(dataclasses.replace(CFG, recommended=False))


class _FakeFit:
    """Stands in for a PUEFit: the model's logit is the first feature."""

    choice, scores, seconds = "bce_w", {"bce_w": -0.25}, {"select": 1.0, "refit": 0.5}
    net = None

    @staticmethod
    def model(f):
        return np.asarray(f)[:, :1]


def test_fit_pue_gets_each_trials_pu_w_and_e_rows_only(stack, monkeypatch):
    """What fit_pue is given: trial t's PU rows with W, its E rows with E, seed + t; no Y."""
    seen = []

    def spy(build_net, x_pu, w, x_e, e, **kw):
        seen.append((x_pu, w, x_e, e, kw))
        assert sorted(build_net) == ["l2=0.001", "l2=0.01"]  # two nets: the penalty and a tenth
        for name, build in build_net.items():
            net = build()
            assert net.output_shape == (None, 1) and len(net.layers) == 1  # linear, one logit
            penalty = float(net.losses[0])  # the L2 penalty of the net's initial weights
            kernel = np.asarray(net.layers[0].kernel)
            assert penalty == pytest.approx(float(name[3:]) * np.sum(kernel ** 2), rel=1e-5)
        return _FakeFit()

    monkeypatch.setattr(adp, "fit_pue", spy)
    details = {}
    score = recommended.fit_trials(stack.x, stack.y, recommended.from_bench(CFG), seed=CFG.seed,
                                   details=details)
    np.testing.assert_array_equal(score(stack.x_test), stack.x_test[..., 0])
    assert details["Recommended"] == {"choice": ["bce_w"] * 2, "score": [-0.25] * 2,
                                      "seconds": [1.5] * 2, "net": [None] * 2}
    x, y = _data()
    for t, (x_pu, w, x_e, e, kw) in enumerate(seen):
        s = simulate.simulate_pue(x, y, exposure_rate=CFG.exposure_rate, split=0.5,
                                  n_test=CFG.n_test, seed=CFG.seed + t)
        np.testing.assert_array_equal(x_pu, s.x_pu)
        np.testing.assert_array_equal(w, s.w_pu)
        np.testing.assert_array_equal(x_e, s.x_e)
        np.testing.assert_array_equal(e, s.e_e)
        assert kw["seed"] == CFG.seed + t and kw["learning_rate"] == 0.01
        assert kw["jit_compile"] is True  # the bench default: XLA
    assert len(seen) == CFG.trials


@pytest.mark.slow
def test_same_result_when_hidden_and_test_labels_are_blanked(stack):
    """The real fit_pue, one trial, twice: once as is, once with the hidden labels blanked."""
    one = dataclasses.replace(stack, **{f.name: getattr(stack, f.name)[:1]
                                        for f in dataclasses.fields(stack)})
    blank = dataclasses.replace(one, hidden=np.zeros_like(one.hidden), y_test=1.0 - one.y_test)
    cfg = dataclasses.replace(recommended.from_bench(CFG), candidates=("bce_w", "brier"))
    first, second = {}, {}
    f1 = recommended.fit_trials(one.x, one.y, cfg, seed=0, details=first)
    f2 = recommended.fit_trials(blank.x, blank.y, cfg, seed=0, details=second)
    assert first["Recommended"]["choice"] == second["Recommended"]["choice"]
    np.testing.assert_allclose(f1(one.x_test), f2(one.x_test), rtol=1e-5, atol=1e-6)
    assert f1(one.x_test).shape == one.y_test.shape


@pytest.mark.slow
def test_run_setting_has_the_column_per_trial(monkeypatch):
    x, y = _data()
    details = {}
    res = table1.run_setting(x, y, float(y.mean()), CFG, 0.5, details=details)
    ind, trans = res["Recommended"]
    assert ind.shape == trans.shape == (CFG.trials,)
    assert ((ind >= 0) & (ind <= 1)).all() and ((trans >= 0) & (trans <= 1)).all()
    assert len(details["Recommended"]["choice"]) == CFG.trials
    assert set(details["Recommended"]["choice"]) <= {"bce_w", "ratio", "brier"}
    # the column scores the same model as fit_trials on the same stack, as the others are scored
    st = table1._stack(simulate.simulate_pue, x, y, CFG, 0.5)
    score = recommended.fit_trials(st.x, st.y, recommended.from_bench(CFG), seed=CFG.seed)
    want = table1._accuracies(st, score)
    np.testing.assert_allclose(ind, want[0])
    np.testing.assert_allclose(trans, want[1])
    off = table1.run_setting(x, y, float(y.mean()), dataclasses.replace(CFG, recommended=False),
                             0.5)
    assert "Recommended" not in off
    np.testing.assert_allclose(off["Logit"][0], res["Logit"][0])


def test_bench_linear_cli_runs_recommended_under_xla_unless_told_not_to():
    from adpue_tf import cli

    parse = cli.build_parser().parse_args
    assert parse(["bench", "linear"]).recommended_jit is True
    assert parse(["bench", "linear", "--recommended-jit"]).recommended_jit is True
    assert parse(["bench", "linear", "--no-recommended-jit"]).recommended_jit is False
    assert parse(["bench", "linear"]).recommended_batch_size == 4096
    assert parse(["bench", "linear", "--recommended-batch-size", "512"]
                 ).recommended_batch_size == 512
    assert table1.LinearBenchConfig().recommended_jit is True


@pytest.mark.slow
def test_bench_linear_cli_writes_the_column(tmp_path):
    from adpue_tf import cli

    x, y = _data(n=420)  # 300 test rows (the bench's n_test), 120 training rows
    lines = [f"{2 if yi else 1} " + " ".join(f"{j + 1}:{v:.4f}" for j, v in enumerate(row))
             for row, yi in zip(x, y)]
    (tmp_path / "synth.svm").write_text("\n".join(lines) + "\n")
    out = tmp_path / "res"
    assert cli.main(["bench", "linear", "--file", str(tmp_path / "synth.svm"), "--positive", "2",
                     "--trials", "2", "--alphas", "0.5", "--steps", "5", "--l2s", "0.1",
                     "--rounds", "1", "--recommended-epochs", "2", "--recommended-min-steps",
                     "10", "--recommended-candidates", "bce_w,brier", "--exposure-mechanism",
                     "cloglog", "--recommended-jit", "--out", str(out), "--quiet"]) == 0
    saved = json.loads((out / "linear.json").read_text())
    ind, trans = saved["results"]["0.5"]["synth"]["Recommended"]
    assert len(ind) == len(trans) == 2
    assert saved["config"]["exposure_mechanism"] == "cloglog"
    assert saved["config"]["recommended_candidates"] == ["bce_w", "brier"]
    assert saved["config"]["recommended_jit"] is True
    choice = saved["recipe_choices"]["0.5"]["0.5"]["synth"]["Recommended"]["choice"]
    assert len(choice) == 2 and set(choice) <= {"bce_w", "brier"}
    text = (out / "linear.md").read_text()
    assert "Exposure mechanism: cloglog" in text and " Recommended |" in text
    assert "every step under XLA" in text
    assert "Recommended against the best column without oracle inputs" in text


def test_comparison_rows_flag_a_miss():
    res = {0.5: {"d": {"Logit": [[0.8, 0.8], [0.7, 0.7]], "nnPU": [[0.99, 0.99], [0.9, 0.9]],
                       "Recommended": [[0.78, 0.78], [0.7, 0.7]]}}}
    rows = recommended.comparison_rows(res, 0.7)
    assert rows[0][-4:] == ["0.780", "0.800 (Logit)", "-0.020", "**missed**"]  # nnPU: oracle
    assert rows[1][-1] == "met"


@pytest.mark.slow
def test_settings_in_worker_processes_give_the_same_tables(tmp_path):
    """``--jobs 2``: the settings run in two processes, the results files hold the same numbers."""
    from adpue_tf import cli

    x, y = _data(n=400)
    lines = [f"{2 if yi else 1} " + " ".join(f"{j + 1}:{v:.4f}" for j, v in enumerate(row))
             for row, yi in zip(x, y)]
    (tmp_path / "synth.svm").write_text("\n".join(lines) + "\n")
    saved = {}
    for jobs in (1, 2):
        out = tmp_path / f"jobs{jobs}"
        assert cli.main(["bench", "linear", "--file", str(tmp_path / "synth.svm"),
                         "--positive", "2", "--trials", "2", "--alphas", "0.3,0.5",
                         "--exposure-rate", "0.5,0.7", "--steps", "5", "--l2s", "0.1",
                         "--rounds", "1", "--recommended-epochs", "1",
                         "--recommended-min-steps", "10", "--recommended-candidates",
                         "bce_w,brier", "--jobs", str(jobs), "--out", str(out), "--quiet"]) == 0
        saved[jobs] = json.loads((out / "linear.json").read_text())
    one, two = saved[1], saved[2]
    assert two["settings_done"] == two["settings_total"] == 4
    assert json.dumps(one["by_exposure_rate"]) == json.dumps(two["by_exposure_rate"])  # same order
    for by_alpha in (one["recipe_choices"], two["recipe_choices"]):
        for table in by_alpha.values():
            for res in table.values():
                res["synth"]["Recommended"].pop("seconds")
    assert one["recipe_choices"] == two["recipe_choices"]


@pytest.mark.slow
@pytest.mark.skipif(sys.version_info < (3, 11), reason="max_tasks_per_child needs 3.11")
def test_each_setting_runs_in_a_fresh_worker_process():
    """What a worker keeps after a setting (fit_pue under XLA keeps memory) goes with it."""
    from adpue_tf.experiments.bench.parallel import run_settings

    pids = []
    run_settings([(k, {}) for k in range(3)], 2, lambda key, pid: pids.append(pid),
                 work=os.getpid)
    assert len(pids) == 3 and len(set(pids)) == 3 and os.getpid() not in pids


@pytest.mark.slow
@pytest.mark.skipif(sys.version_info < (3, 11), reason="max_tasks_per_child needs 3.11")
def test_settings_run_together_share_one_worker_process_each_group_its_own():
    """``together``: a group's settings one after another in one process, in order."""
    from adpue_tf.experiments.bench.parallel import run_settings

    got = []
    tasks = [((rate, alpha), {}) for rate in (0.5, 0.7) for alpha in (0.3, 0.5)]
    run_settings(tasks, 2, lambda key, pid: got.append((key, pid)), work=os.getpid,
                 together=lambda key: key[1])
    assert sorted(k for k, _ in got) == sorted(k for k, _ in tasks)
    pid = dict(got)
    assert pid[(0.5, 0.3)] == pid[(0.7, 0.3)] and pid[(0.5, 0.5)] == pid[(0.7, 0.5)]
    assert pid[(0.5, 0.3)] != pid[(0.5, 0.5)] and os.getpid() not in pid.values()
    order = [k for k, _ in got]  # a group's keys come in the order of the tasks
    assert order.index((0.5, 0.3)) < order.index((0.7, 0.3))


def _keeping() -> bool:
    from adpue_tf.experiments import reuse

    return reuse._KEPT is not None


def test_the_settings_keep_fit_pues_compiled_passes_while_they_run():
    """Table 1's loops of fit_pue calls run inside one keep_compiled block per process."""
    from adpue_tf.experiments import reuse
    from adpue_tf.experiments.bench import parallel

    got = []
    parallel.run_settings([(k, {}) for k in range(2)], 1, lambda key, kept: got.append(kept),
                          work=_keeping)
    assert got == [True, True]
    assert parallel._run_group(_keeping, [{}, {}]) == [True, True]  # a worker's group
    assert reuse._KEPT is None  # each block ended with its settings


def test_jobs_must_be_a_positive_int(tmp_path):
    from adpue_tf.experiments.bench import run_linear

    for bad in (0, 1.5, True):
        with pytest.raises(ValueError, match="`jobs` must be a positive int"):
            run_linear(table1.LinearBenchConfig(trials=2), tmp_path / "o", jobs=bad)
    assert not (tmp_path / "o").exists()


def test_a_trial_whose_rows_fit_pue_refuses_fails_alone():
    """w8a at 100 trials: one trial's PU rows held a single observed positive."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(2, 120, 2)).astype("float32")
    src = np.r_[np.full(60, float(adp.Source.PU)), np.full(60, float(adp.Source.E))]
    w = np.where(src == adp.Source.PU, rng.random((2, 120)) < 0.3, 0).astype("float32")
    w[1] = 0.0
    w[1, 0] = 1.0  # trial 1: one observed positive
    e = np.where(src == adp.Source.E, rng.random((2, 120)) < 0.5, 0).astype("float32")
    y = np.stack([w, e, np.broadcast_to(src, (2, 120))], -1).astype("float32")
    details = {}
    score = recommended.fit_trials(x, y, recommended.RecommendedConfig(
        epochs=1, min_steps=5, candidates=("bce_w", "brier")), details=details)
    s = score(x)
    assert np.isfinite(s[0]).all() and np.isnan(s[1]).all()
    choice = details["Recommended"]["choice"]
    assert choice[0] in ("bce_w", "brier")
    assert choice[1].startswith("failed: `w` has 1 observed positive(s)")
    assert np.isnan(details["Recommended"]["score"][1])
