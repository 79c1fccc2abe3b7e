"""The two wings: the library core never imports the experiments wing."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "adpue_tf"
CORE = sorted(p for p in PACKAGE.rglob("*.py")
              if "experiments" not in p.relative_to(PACKAGE).parts and p.name != "cli.py")


def _imported_modules(path: Path) -> set[str]:
    """Absolute module names a file of the package imports."""
    package = ".".join(("adpue_tf",) + path.relative_to(PACKAGE).parent.parts)
    return _imports(path.read_text(), package)


def _imports(source: str, package: str) -> set[str]:
    """Absolute module names ``source`` (a module of ``package``) imports."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            names.add(base)
            names.update(f"{base}.{a.name}" for a in node.names)
    return names


def test_core_files_found():
    names = {str(p.relative_to(PACKAGE)) for p in CORE}
    assert {"losses/base.py", "risks/debiasing.py", "data/builders.py", "data/tfrecord.py", "model.py",
            "serving/export.py", "validation/scores.py"} <= names
    assert not any("experiments" in p.parts for p in CORE)


@pytest.mark.parametrize("path", CORE, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_core_module_never_imports_experiments(path):
    bad = sorted(n for n in _imported_modules(path) if n.startswith("adpue_tf.experiments"))
    assert bad == [], f"{path.name} imports the experiments wing: {bad}"


def test_the_checker_sees_every_form_of_import():
    """The checker resolves relative imports, so the test above can fail."""
    src = ("from ..experiments import simulate\n"
           "from . import table1\n"
           "import adpue_tf.experiments.demo as d\n")
    found = _imports(src, "adpue_tf.tuning")
    assert {"adpue_tf.experiments.simulate", "adpue_tf.tuning.table1",
            "adpue_tf.experiments.demo"} <= found
    assert _imports("from adpue_tf import losses\n", "adpue_tf") == {
        "adpue_tf", "adpue_tf.losses"}


@pytest.mark.slow
def test_importing_the_core_loads_no_wing_and_no_extra():
    """``import adpue_tf`` and every core module pull in neither the wing nor the extras.

    TensorFlow itself imports scikit-learn and matplotlib when they are
    installed, so the check is on what the core adds to ``import tensorflow, keras``.
    """
    mods = ["adpue_tf"] + [
        "adpue_tf." + ".".join(p.relative_to(PACKAGE).with_suffix("").parts)
        for p in CORE if p.name != "__init__.py" and "tuning" not in p.parts]
    code = ("import importlib, json, sys\n"
            "import tensorflow, keras\n"
            "before = set(sys.modules)\n"
            f"for m in {mods!r}: importlib.import_module(m)\n"
            "print(json.dumps(sorted(set(sys.modules) - before)))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env={"TF_CPP_MIN_LOG_LEVEL": "3", "PATH": ""})
    loaded = json.loads(out.stdout.strip().splitlines()[-1])
    forbidden = ("adpue_tf.experiments", "adpue_tf.tuning", "sklearn", "matplotlib",
                 "keras_tuner", "tensorflow_datasets")
    bad = sorted(m for m in loaded if m.split(".")[0] in forbidden or m.startswith(forbidden))
    assert bad == []
