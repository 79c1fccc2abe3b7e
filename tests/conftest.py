"""Shared fixtures: quiet TensorFlow, a seed per test, a fixed mixed batch, and the risk cases."""

from __future__ import annotations

import os
import sys
import zlib

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
# The shared helpers (reference, serialization, conftest) import by name from
# every test folder.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402
import pytest  # noqa: E402

#: The test files that take longest (about a minute of one core each, or a subprocess),
#: run first: `make test` hands whole files to two workers in this order
#: (`--no-loadscope-reorder`), so no long file is left for last, one worker busy with it
#: while the other waits.
HEAVY_FIRST = ("test_user_inputs.py", "test_fit_pue.py", "test_data.py", "test_losses.py",
               "test_model.py", "test_backends.py", "test_properties.py", "test_bad_input.py",
               "test_linear_fit.py", "test_packaging.py", "test_ad_family.py",
               "test_full_batch.py", "test_table1_grouped.py", "test_hypermodel.py")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Order the files :data:`HEAVY_FIRST` first (a stable sort: each file's tests stay in order)."""
    rank = {name: i for i, name in enumerate(HEAVY_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))


@pytest.fixture(autouse=True)
def _seed_per_test(request: pytest.FixtureRequest) -> None:
    """Seed Python, NumPy, TensorFlow and Keras from the test's id before it runs.

    A weight initialiser without a seed then draws the same numbers on every run,
    whichever xdist worker runs the test and whatever ran before it there, so a
    test cannot pass or fail by the luck of the draw.
    """
    import keras

    keras.utils.set_random_seed(zlib.crc32(request.node.nodeid.encode()) % 2**31)


def mixed_batch(seed: int = 0, n_per: int = 6) -> np.ndarray:
    """Packed labels with every source present, interleaved, shape (5*n_per, 3)."""
    rng = np.random.default_rng(seed)
    rows = []
    for src in range(5):
        w = np.zeros(n_per)
        e = np.zeros(n_per)
        if src == 0:  # PU: W observed
            w = rng.integers(0, 2, n_per).astype(float)
            w[:2] = [1, 0]
        elif src == 1:  # E: exposure observed
            e = rng.integers(0, 2, n_per).astype(float)
            e[:2] = [1, 0]
        elif src == 4:  # SSE: W <= E
            e = rng.integers(0, 2, n_per).astype(float)
            e[:3] = [1, 1, 0]
            w = e * rng.integers(0, 2, n_per)
            w[:2] = [1, 0]
        rows.append(np.stack([w, e, np.full(n_per, src)], axis=1))
    y = np.concatenate(rows).astype(np.float32)
    return y[rng.permutation(len(y))]


@pytest.fixture
def batch():
    y = mixed_batch(0)
    z = np.random.default_rng(1).normal(0.0, 1.5, size=(len(y), 1)).astype(np.float32)
    return y, z
