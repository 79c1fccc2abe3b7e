"""Smoke runs of `adpue-tf demo` and both `adpue-tf bench` commands, and their bad input."""

from __future__ import annotations

import os

import numpy as np
import pytest

from adpue_tf import cli
from adpue_tf.experiments import datasets
from adpue_tf.experiments.demo import DemoConfig, run_demo

pytestmark = pytest.mark.slow


@pytest.fixture
def libsvm_dir(tmp_path, monkeypatch):
    """A small stand-in `australian_scale` (14 features in [-1, 1]) in its own data dir."""
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, (500, 14))
    y = np.where(x[:, 0] + 0.5 * x[:, 3] + rng.normal(0, 0.3, 500) > 0, 1, -1)
    lines = [f"{'+1' if t > 0 else '-1'} " + " ".join(f"{j + 1}:{v:.4f}" for j, v in enumerate(r))
             for r, t in zip(x, y)]
    (tmp_path / "libsvm").mkdir()
    (tmp_path / "libsvm" / "australian_scale").write_text("\n".join(lines) + "\n")
    monkeypatch.setenv("ADPUE_DATA_DIR", str(tmp_path))
    return tmp_path


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
    for png in ("neural_fashion_mnist_accuracy.png", "neural_fashion_mnist_precision_recall.png"):
        assert (out / png).stat().st_size > 1000


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


def test_demo_runs_and_reports_mean_and_se():
    scores = run_demo(DemoConfig(seeds=2, epochs=2), progress=None)
    assert [s.method for s in scores] == ["Logit", "nnPU", "ADPUE"]
    for s in scores:
        (m, se), _ = s.summary()["inductive"], s.summary()["transductive"]
        assert 0.0 <= m <= 1.0 and se >= 0.0 and len(s.inductive) == 2


def test_demo_bad_input(capsys):
    assert cli.main(["demo", "--seeds", "1"]) == 2
    assert "seeds" in capsys.readouterr().err
