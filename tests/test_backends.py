"""The core on Keras's other backends: tests/backend_suite.py in a fresh pytest with KERAS_BACKEND set.

Keras fixes its backend at import, so each backend runs in its own process.
This process (TensorFlow) computes the reference training run of
tests/backend_scenario.py, which the other backend must reproduce weight for
weight. ``make test`` runs a small subset on JAX (ADPUE's values and gradients
eager and under ``jax.jit``, the never-silent checks under ``jax.jit``, the
training run); the whole file on JAX and on PyTorch is marked slow
(``make test-all``).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import backend_scenario

SUITE = Path(__file__).with_name("backend_suite.py")
ROOT = Path(__file__).resolve().parents[1]
#: The subset `make test` runs on JAX (pytest -k).
QUICK = ("backend_is_not or (values_and_gradients and adpue- and not beta) or (never_silent and True) "
         "or training_gives or fit_pue_recovers or with_propensity")


@pytest.fixture(scope="module")
def tf_reference(tmp_path_factory) -> str:
    """The reference run's weights, trained here on TensorFlow."""
    import keras

    assert keras.backend.backend() == "tensorflow"
    path = tmp_path_factory.mktemp("backends") / "tensorflow.npz"
    np.savez(path, **backend_scenario.run())
    return str(path)


def _suite(backend: str, reference: str, selection: str | None = None) -> str:
    pytest.importorskip(backend)
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x", str(SUITE)]
    if selection:
        cmd += ["-k", selection]
    env = {**os.environ, "KERAS_BACKEND": backend, "ADPUE_TF_REFERENCE": reference,
           "TF_CPP_MIN_LOG_LEVEL": "3"}
    out = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stdout[-6000:] + out.stderr[-3000:]
    assert " passed" in out.stdout and " failed" not in out.stdout
    return out.stdout


def test_the_core_on_jax(tf_reference):
    out = _suite("jax", tf_reference, QUICK)
    assert "skipped" not in out.splitlines()[-1]


@pytest.mark.slow
def test_the_whole_suite_on_jax(tf_reference):
    _suite("jax", tf_reference)


@pytest.mark.slow
def test_the_whole_suite_on_pytorch(tf_reference):
    _suite("torch", tf_reference)


@pytest.mark.slow
def test_the_suite_fails_on_a_wrong_reference(tmp_path):
    """A reference that TensorFlow did not give fails the training check (the test can fail)."""
    wrong = dict(np.load(_reference_or_skip(tmp_path)))
    wrong["first_0"] = wrong["first_0"] + 1e-3
    path = tmp_path / "wrong.npz"
    np.savez(path, **wrong)
    pytest.importorskip("jax")
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(SUITE),
           "-k", "training_gives"]
    env = {**os.environ, "KERAS_BACKEND": "jax", "ADPUE_TF_REFERENCE": str(path),
           "TF_CPP_MIN_LOG_LEVEL": "3"}
    out = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 1 and "first_0" in out.stdout


def _reference_or_skip(tmp_path) -> Path:
    path = tmp_path / "tensorflow.npz"
    np.savez(path, **backend_scenario.run())
    return path
