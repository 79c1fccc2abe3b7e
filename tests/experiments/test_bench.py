"""Smoke runs of `adpue-tf demo` and both `adpue-tf bench` commands, and their bad input."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from adpue_tf import cli
from adpue_tf.experiments import datasets, table1, table2
from adpue_tf.experiments.bench import prepare_out
from adpue_tf.experiments.demo import DemoConfig, format_table, run_demo


def _australian_scale():
    """The LIBSVM site's `australian_scale` (the loader checks its sha256), if present."""
    for base in (os.environ.get(datasets.ENV_VAR),
                 Path(__file__).resolve().parents[3] / "shared" / "data"):
        for folder in ([Path(base), Path(base) / "libsvm"] if base else []):
            if (folder / "australian_scale").is_file():
                return folder / "australian_scale"
    return None


@pytest.fixture
def libsvm_dir(tmp_path, monkeypatch):
    """A data dir holding only the real `australian_scale` (so covtype is missing)."""
    source = _australian_scale()
    if source is None:
        pytest.skip(f"australian_scale not found (set {datasets.ENV_VAR})")
    (tmp_path / "libsvm").mkdir()
    shutil.copyfile(source, tmp_path / "libsvm" / "australian_scale")
    monkeypatch.setenv(datasets.ENV_VAR, str(tmp_path))
    return tmp_path


@pytest.mark.slow
def test_bench_linear_smoke(libsvm_dir, tmp_path, capsys):
    out = tmp_path / "results"
    code = cli.main(["bench", "linear", "--trials", "2", "--datasets", "australian",
                     "--alphas", "0.3", "--steps", "5", "--out", str(out), "--quiet"])
    assert code == 0
    text = (out / "linear.md").read_text()
    assert "| australian |" in text and "(0.742)" in text  # the paper's ADPUE number
    for method in ("Logit", "uPU", "nnPU", "EM", "Ratio", "ADPUE", "ADS", "PNU", "AD3SE"):
        assert f" {method} |" in text
    assert "oracle" in text and "2 trials" in text
    assert (out / "linear.json").exists()


@pytest.mark.slow
@pytest.mark.skipif(not os.path.exists(datasets.FASHION_MNIST_DIR),
                    reason="Debian's dataset-fashion-mnist is not installed (make test installs it)")
def test_bench_neural_smoke(tmp_path):
    out = tmp_path / "results"
    code = cli.main(["bench", "neural", "--trials", "2", "--epochs", "1", "--datasets",
                     "fashion_mnist", "--ratios", "0.5", "--rows", "1200", "--n-test", "300",
                     "--out", str(out), "--quiet"])
    assert code == 0
    text = (out / "neural.md").read_text()
    assert "fashion_mnist, inductive" in text and "(0.950)" in text
    assert "2 trials per setting, 1 epochs" in text
    assert "f†₀ = mean(W)" in text and "fashion_mnist: ADPUE's rounds kept" in text
    assert "| 0.5 | 1, 1 |" in text  # one epoch: one round per trial
    for png in ("neural_fashion_mnist_accuracy.png", "neural_fashion_mnist_precision_recall.png"):
        assert (out / png).stat().st_size > 1000


@pytest.mark.slow
@pytest.mark.parametrize("argv,match", [
    (["bench", "linear", "--datasets", "iris"], "Unknown data set"),
    (["bench", "neural", "--datasets", "svhn"], "Unknown data set"),
    (["bench", "linear", "--datasets", "covtype"], "covtype.libsvm.binary.scale"),
    (["bench", "linear", "--trials", "1", "--datasets", "australian"], "trials"),
    (["bench", "linear", "--alphas", "1.2", "--datasets", "australian"], "alphas"),
    (["bench", "neural", "--ratios", "0", "--datasets", "fashion_mnist"], "ratios"),
    (["bench", "linear", "--trials", "2", "--datasets", "australian", "--steps", "1",
      "--exposure-rate", "1.0"], "exposure_rate"),
])
def test_bench_bad_input(libsvm_dir, tmp_path, capsys, argv, match):
    assert cli.main(argv + ["--out", str(tmp_path / "o"), "--quiet"]) == 2
    assert match in capsys.readouterr().err


@pytest.mark.slow
def test_demo_runs_and_reports_mean_and_se():
    scores = run_demo(DemoConfig(seeds=2, epochs=2), progress=None)
    assert [s.method for s in scores] == ["BCE on W", "ADPUE (direct)", "fit_pue"]
    for s in scores:
        (m, se), _ = s.summary()["inductive"], s.summary()["transductive"]
        assert 0.0 <= m <= 1.0 and se >= 0.0 and len(s.inductive) == 2
    assert len(scores[-1].choices) == 2  # fit_pue's choice in each trial
    text = format_table(scores, DemoConfig(seeds=2, epochs=2))
    assert "Verdict: fit_pue is " in text and "test accuracy: on held-out rows" in text


def test_demo_progress_has_no_carriage_return_off_a_terminal():
    import io

    from adpue_tf.experiments.progress import Progress

    out = io.StringIO()
    bar = Progress(2, stream=out)
    bar.step("a")
    bar.step("b")
    bar.close()
    assert "\r" not in out.getvalue() and len(out.getvalue().splitlines()) == 2


@pytest.mark.slow
def test_demo_bad_input(capsys):
    assert cli.main(["demo", "--seeds", "1"]) == 2
    assert "seeds" in capsys.readouterr().err


# -- the output directory first, results as they finish ------------------------

def _no_compute(monkeypatch):
    """Make any data loading or computing fail the test: the check must come first."""
    def forbidden(*args, **kwargs):
        raise AssertionError("computed before checking --out")

    for module, name in ((datasets, "load"), (table1, "run_setting"), (table2, "run_trial")):
        monkeypatch.setattr(module, name, forbidden)


@pytest.mark.parametrize("table", ["linear", "neural"])
def test_unwritable_out_fails_before_computing(tmp_path, monkeypatch, capsys, table):
    _no_compute(monkeypatch)
    (tmp_path / "a_file").write_text("mine")
    for out, why in (("/proc/forbidden/res", "No such file or directory"),
                     (str(tmp_path / "a_file" / "res"), "Not a directory")):
        argv = ["bench", table, "--trials", "2", "--out", out, "--quiet"]
        assert cli.main(argv) == 2
        err = capsys.readouterr().err
        assert f"cannot write results to `--out` {out!r}: {why}. Nothing was computed" in err
    assert (tmp_path / "a_file").read_text() == "mine"


def test_prepare_out_creates_parents_and_leaves_nothing(tmp_path):
    out = prepare_out(tmp_path / "a" / "b")
    assert out.is_dir() and list(out.iterdir()) == []
    (out / "linear.md").write_text("kept")
    assert prepare_out(out) == out and [p.name for p in out.iterdir()] == ["linear.md"]


@pytest.mark.parametrize("table", ["linear", "neural"])
@pytest.mark.parametrize("given", ["", ",", " , "])
def test_empty_datasets_is_refused(tmp_path, monkeypatch, capsys, table, given):
    _no_compute(monkeypatch)
    with pytest.raises(SystemExit) as info:
        cli.main(["bench", table, "--datasets", given, "--out", str(tmp_path / "o")])
    assert info.value.code == 2
    assert "argument --datasets: expected comma-separated data set names" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_run_linear_refuses_an_empty_datasets_config(tmp_path):
    from adpue_tf.experiments.bench import run_linear

    with pytest.raises(ValueError, match="`datasets` is empty"):
        run_linear(table1.LinearBenchConfig(trials=2, datasets=()), tmp_path / "o")
    assert not (tmp_path / "o").exists()


@pytest.mark.slow
def test_interrupted_linear_run_keeps_finished_settings(libsvm_dir, tmp_path, monkeypatch):
    real, calls = table1.run_setting, []

    def run_setting(*args, **kwargs):
        calls.append(args[4])  # alpha
        if len(calls) == 2:
            raise KeyboardInterrupt  # the user stops the run during the second setting
        return real(*args, **kwargs)

    monkeypatch.setattr(table1, "run_setting", run_setting)
    out = tmp_path / "results"
    with pytest.raises(KeyboardInterrupt):
        cli.main(["bench", "linear", "--trials", "2", "--datasets", "australian",
                  "--alphas", "0.3,0.5", "--steps", "3", "--out", str(out), "--quiet"])
    assert calls == [0.3, 0.5]
    saved = json.loads((out / "linear.json").read_text())
    assert (saved["settings_done"], saved["settings_total"]) == (1, 2)
    assert list(saved["results"]["0.3"]["australian"]) and saved["results"]["0.5"] == {}
    assert len(saved["results"]["0.3"]["australian"]["ADPUE"][0]) == 2  # both trials
    text = (out / "linear.md").read_text()
    assert "**Partial: 1 of 2 settings finished**" in text
    first, second = text.split("## α = 0.5, inductive")
    assert "| australian | 0." in first and "(0.742)" in first
    assert "| australian | not run |" in second
    assert sorted(p.name for p in out.iterdir()) == ["linear.json", "linear.md"]  # no temp files


def test_interrupted_neural_run_keeps_finished_settings(tmp_path, monkeypatch):
    """Stand-ins for the loader and the trials: what is checked is what gets written."""
    rng = np.random.default_rng(0)
    fake = datasets.Dataset("fashion_mnist", rng.uniform(size=(400, 20)).astype(np.float32),
                            (rng.uniform(size=400) < 0.4).astype(np.float32), "items 0-3")
    monkeypatch.setattr(datasets, "load", lambda name, **kw: fake)
    calls = []

    def run_trial(x, y, features, prior, cfg, ratio, seed, report):
        calls.append(ratio)
        if len(calls) == 3:
            raise KeyboardInterrupt  # during the first trial of the second ratio
        curve = {"accuracy": [0.6, 0.7], "precision": [0.5, 0.6], "recall": [0.4, 0.5]}
        return {m: {"inductive": 0.7, "transductive": 0.8, "curves": curve}
                for m in table2.PUE_METHODS + table2.SSE_METHODS}

    monkeypatch.setattr(table2, "run_trial", run_trial)
    out = tmp_path / "results"
    with pytest.raises(KeyboardInterrupt):
        cli.main(["bench", "neural", "--trials", "2", "--epochs", "2", "--datasets",
                  "fashion_mnist", "--ratios", "0.3,0.5", "--out", str(out), "--quiet"])
    assert calls == [0.3, 0.3, 0.5]
    saved = json.loads((out / "neural.json").read_text())
    assert (saved["settings_done"], saved["settings_total"]) == (1, 2)
    assert list(saved["results"]["fashion_mnist"]) == ["0.3"]
    assert len(saved["results"]["fashion_mnist"]["0.3"]) == 2
    text = (out / "neural.md").read_text()
    assert "**Partial: 1 of 2 settings finished**" in text
    assert "| 0.3 | 0.700 ± 0.000" in text and "| 0.5 |" not in text
    assert sorted(p.name for p in out.iterdir()) == ["neural.json", "neural.md"]


def test_results_files_get_the_usual_permissions(tmp_path):
    """A results file is as readable as one ``open`` creates (not mkstemp's 0o600)."""
    from adpue_tf.experiments.bench.common import _write
    old = os.umask(0o022)
    try:
        _write(tmp_path / "linear.md", "x")
    finally:
        os.umask(old)
    assert (tmp_path / "linear.md").stat().st_mode & 0o777 == 0o644
    assert (tmp_path / "linear.md").read_text() == "x"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["linear.md"]


# -- every list-valued option: checked before anything runs ---------------------

@pytest.mark.parametrize("table, option, given, words", [
    ("linear", "--alphas", "0.3,0.3", "`alphas` repeats 0.3"),
    ("linear", "--alphas", "0.3,0.30", "`alphas` repeats 0.3"),
    ("linear", "--alphas", "", "`alphas` is empty"),
    ("linear", "--alphas", "0.3,1", "`alphas` must lie in (0, 1), got 1.0"),
    ("linear", "--exposure-rate", "0.5,0.5", "`exposure_rates` repeats 0.5"),
    ("linear", "--exposure-rate", "", "`--exposure-rate` is empty"),
    ("linear", "--exposure-rate", "0.5,0", "`exposure_rate` must be a number in (0, 1), got 0.0"),
    ("linear", "--l2s", "0.1,0.1", "`l2s` repeats 0.1"),
    ("linear", "--l2s", "", "`l2s` must be a non-empty tuple"),
    ("linear", "--l2s", "0.1,-1", "`l2s` must be a non-empty tuple of numbers >= 0"),
    ("linear", "--recommended-l2", "0.1,0.1", "`recommended_l2` must be a finite number >= 0 or "
                                              "a non-empty tuple of distinct ones"),
    ("linear", "--recommended-l2", "", "`recommended_l2` must be a finite number >= 0 or a "
                                       "non-empty tuple"),
    ("linear", "--recommended-candidates", "blend,blend", "`recommended_candidates` repeats "
                                                          "'blend'"),
    ("linear", "--datasets", "australian,australian", "`datasets` repeats 'australian'"),
    ("neural", "--datasets", "mnist,mnist", "`datasets` repeats 'mnist'"),
    ("neural", "--ratios", "0.5,0.5", "`ratios` repeats 0.5"),
    ("neural", "--ratios", "", "`ratios` is empty"),
    ("neural", "--ratios", "0.5,1", "`ratios` must lie in (0, 1), got 1.0"),
])
def test_every_list_option_is_checked_before_anything_runs(tmp_path, monkeypatch, capsys, table,
                                                           option, given, words):
    """No setting runs twice (a repeat would be computed and one copy dropped), none is empty."""
    _no_compute(monkeypatch)
    out = tmp_path / "o"
    assert cli.main(["bench", table, option, given, "--trials", "2", "--out", str(out),
                     "--quiet"]) == 2
    assert f"adpue-tf: error: {words}" in capsys.readouterr().err
    assert not out.exists()


@pytest.mark.parametrize("option, given, words", [
    ("--alphas", "0.3,", "argument --alphas: expected comma-separated numbers, got '0.3,', "
                         "which has an empty item"),
    ("--datasets", "australian,,german", "argument --datasets: expected comma-separated data "
                                         "set names, got 'australian,,german', which has an "
                                         "empty item"),
])
def test_an_empty_item_in_a_list_option_is_a_usage_error(tmp_path, monkeypatch, capsys, option,
                                                         given, words):
    _no_compute(monkeypatch)
    out = tmp_path / "o"
    with pytest.raises(SystemExit) as stop:
        cli.main(["bench", "linear", option, given, "--trials", "2", "--out", str(out),
                  "--quiet"])
    assert stop.value.code == 2 and words in capsys.readouterr().err
    assert not out.exists()


@pytest.mark.parametrize("make, words", [
    (lambda: table1.LinearBenchConfig(trials=2, alphas=()), "`alphas` is empty"),
    (lambda: table1.LinearBenchConfig(trials=2, alphas=(0.5, 0.5)), "`alphas` repeats 0.5"),
    (lambda: table1.LinearBenchConfig(trials=2, exposure_rates=(0.5, 0.5)),
     "`exposure_rates` repeats 0.5"),
    (lambda: table1.LinearBenchConfig(trials=2, exposure_rates=()), "`exposure_rates` is empty"),
    (lambda: table1.LinearBenchConfig(trials=2, recipe_l2s=(0.1, 0.1)), "`l2s` repeats 0.1"),
    (lambda: table2.NeuralBenchConfig(trials=2, ratios=()), "`ratios` is empty"),
    (lambda: table2.NeuralBenchConfig(trials=2, ratios=[0.5, 0.5]), "`ratios` repeats 0.5"),
])
def test_bench_configs_refuse_empty_or_repeated_settings(make, words):
    with pytest.raises(ValueError, match=re.escape(words)):
        make()


# -- a rerun never replaces finished results with fewer ---------------------------

def _fake_tables(monkeypatch, stop=False):
    """Stand-ins for the loader and both tables' settings; ``stop``: Ctrl-C in the first one."""
    rng = np.random.default_rng(0)
    fake = datasets.Dataset("australian", rng.uniform(-1, 1, size=(400, 14)).astype(np.float32),
                            (rng.uniform(size=400) < 0.4).astype(np.float32), "+1")
    monkeypatch.setattr(datasets, "load", lambda name, **kw: fake)

    def run_setting(x, y, prior_y, cfg, alpha, report=None, *, features=None, details=None):
        if stop:
            raise KeyboardInterrupt
        acc = np.full(cfg.trials, 0.7)
        return {m: (acc, acc) for m in table1.pue_methods(cfg) + table1.SSE_METHODS}

    def run_trial(x, y, features, prior, cfg, ratio, seed, report):
        if stop:
            raise KeyboardInterrupt
        curve = {"accuracy": [0.6], "precision": [0.5], "recall": [0.4]}
        return {m: {"inductive": 0.7, "transductive": 0.8, "curves": curve}
                for m in table2.PUE_METHODS + table2.SSE_METHODS}

    monkeypatch.setattr(table1, "run_setting", run_setting)
    monkeypatch.setattr(table2, "run_trial", run_trial)


@pytest.mark.parametrize("table, argv", [
    ("linear", ["--datasets", "australian", "--alphas", "0.3,0.5", "--no-recommended"]),
    ("neural", ["--datasets", "fashion_mnist", "--ratios", "0.3,0.5", "--epochs", "1"]),
])
def test_a_stopped_rerun_keeps_the_complete_results(tmp_path, monkeypatch, table, argv):
    out = tmp_path / "results"
    argv = ["bench", table, "--trials", "2", *argv, "--out", str(out), "--quiet"]
    _fake_tables(monkeypatch)
    assert cli.main(argv) == 0
    complete = {p.name: p.read_bytes() for p in out.iterdir()}
    assert "Partial" not in (out / f"{table}.md").read_text()

    _fake_tables(monkeypatch, stop=True)  # the same command again, stopped in its first setting
    with pytest.raises(KeyboardInterrupt):
        cli.main(argv)
    assert {name: (out / name).read_bytes() for name in complete} == complete
    partial = (out / f"{table}.partial.md").read_text()
    assert "**Partial: 0 of 2 settings finished**" in partial
    assert f"`{table}.md` holds the results of an earlier run" in partial
    assert json.loads((out / f"{table}.partial.json").read_text())["settings_done"] == 0

    _fake_tables(monkeypatch)  # a rerun that finishes replaces them, and the partial files go
    assert cli.main(argv[:-3] + ["--seed", "7"] + argv[-3:]) == 0
    assert "- Seeds: 7-8" in (out / f"{table}.md").read_text()
    assert not (out / f"{table}.partial.md").exists()
    assert not (out / f"{table}.partial.json").exists()
