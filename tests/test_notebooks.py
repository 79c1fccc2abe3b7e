"""The example notebooks: stored without outputs, and run end to end (small settings).

Each notebook is executed by ``nbclient`` in a fresh kernel with
``ADPUE_NOTEBOOK_SMALL=1`` (tiny data, few epochs and trials). The kernel runs
*this* interpreter: the test writes its own ``python3`` kernelspec (argv =
``sys.executable -m ipykernel_launcher``) into a temporary directory and hands
``nbclient`` a ``KernelManager`` that looks only there, so neither a kernelspec
installed elsewhere on the machine nor ``PATH`` can pick another Python.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")
from jupyter_client.kernelspec import KernelSpecManager  # noqa: E402  (nbclient's dependency)
from jupyter_client.manager import KernelManager  # noqa: E402

pytestmark = pytest.mark.slow

NOTEBOOK_DIR = Path(__file__).resolve().parent.parent / "notebooks"
NOTEBOOKS = ["quickstart.ipynb", "alternate_learning.ipynb", "tuning_and_serving.ipynb"]
KERNEL_NAME = "python3"
# TensorFlow's C++ start-up lines (absl, CUDA driver, cuInit, CPU features, oneDNN):
# a machine's noise, never stored in a notebook.
STARTUP_LINES = re.compile(r"absl::InitializeLog|cudart_stub|cuda_platform|cuInit|"
                           r"cpu_feature_guard|oneDNN custom operations")


def _read(name: str):
    return nbformat.read(NOTEBOOK_DIR / name, as_version=4)


@pytest.fixture(scope="module")
def kernel_dir(tmp_path_factory) -> Path:
    """A directory holding a ``python3`` kernelspec that runs this interpreter."""
    root = tmp_path_factory.mktemp("kernels")
    spec = root / KERNEL_NAME
    spec.mkdir()
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Python 3 (adpue_tf tests)",
        "language": "python",
        "metadata": {"debugger": False},
    }))
    return root


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_is_stored_stripped(name):
    nb = _read(name)
    nbformat.validate(nb)
    assert "widgets" not in nb.metadata, f"{name}: widget state stored in metadata"
    for i, cell in enumerate(nb.cells):
        assert "widgets" not in cell.metadata, f"{name}, cell {i}: widget metadata"
        if cell.cell_type == "code":
            assert cell.outputs == [], f"{name}, cell {i}: has outputs"
            assert cell.execution_count is None, f"{name}, cell {i}: has an execution_count"
    assert not STARTUP_LINES.search(json.dumps(nb)), f"{name}: TensorFlow start-up lines stored"
    code = [c.source for c in nb.cells if c.cell_type == "code"]
    assert code and 'os.environ.get("ADPUE_NOTEBOOK_SMALL", "0") == "1"' in code[0], \
        f"{name}: the first code cell must read the small-settings switch"


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_runs(name, kernel_dir, tmp_path, monkeypatch):
    if name == "tuning_and_serving.ipynb":
        pytest.importorskip("keras_tuner")
    monkeypatch.setenv("ADPUE_NOTEBOOK_SMALL", "1")  # the kernel inherits os.environ
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "3")
    nb = _read(name)
    km = KernelManager(kernel_name=KERNEL_NAME,
                       kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(kernel_dir)]))
    assert km.kernel_spec.argv[0] == sys.executable
    client = nbclient.NotebookClient(nb, km=km, timeout=600, kernel_name=KERNEL_NAME,
                                     resources={"metadata": {"path": str(tmp_path)}})
    client.execute()  # raises CellExecutionError on the first failing cell
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs
              if o.output_type == "error"]
    assert not errors, f"{name}: {errors}"
    assert list(tmp_path.iterdir()) == [], f"{name} wrote into its working directory"
