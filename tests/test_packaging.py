"""The package as users get it: metadata, the wheel, the extras, and the tree's tooling.

The slow tests run the tools the way CI does: build the sdist and the wheel and
install the wheel into a fresh virtualenv, ruff, mypy and a strict MkDocs build.
Each tool comes with the ``test``/``docs`` extras (``make test`` installs both);
where one is missing the test is skipped, except under CI (``CI=true``), where
it fails.
"""

from __future__ import annotations

import configparser
import importlib
import importlib.metadata
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

import adpue_tf

ROOT = Path(__file__).resolve().parents[1]
SUPPORTED = ("3.10", "3.11", "3.12", "3.13")
# What a build needs from the tree (the sdist is built from these, the wheel from the sdist).
BUILD_INPUTS = ("adpue_tf", "setup.cfg", "setup.py", "pyproject.toml", "README.md")
# One debiased loss on a PU + E batch, run by the installed wheel and by the tree.
RISK_SNIPPET = (
    "import numpy as np, adpue_tf as adp\n"
    "y = np.concatenate([adp.pack_labels(adp.Source.PU, w=[1.0, 0.0, 1.0]),\n"
    "                    adp.pack_labels(adp.Source.E, e=[1.0, 0.0])])\n"
    "z = np.array([[0.5], [-1.0], [2.0], [0.3], [-0.7]], np.float32)\n"
    "risk = float(adp.ADPUELoss(from_logits=True)(y, z))"
)
QUIET_ENV = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
# Each guide page of the site (docs/guide/) with a heading of its own.
GUIDE_PAGES = {
    "data": "The label layout",
    "feature-dicts": "TFRecord logs",
    "alternate-learning": "How many rounds",
    "ads-at-scale": "IPS, the baseline with a propensity model",
    "several-workers": "Data on several workers",
    "tuning": "Tuning with KerasTuner",
    "serving": "Feature-dict models",
    "reproducing": "Tables 1 and 2",
    "development": "What TensorFlow prints",
}


def _setup_cfg() -> configparser.ConfigParser:
    cfg = configparser.ConfigParser(interpolation=None)
    cfg.read(ROOT / "setup.cfg")
    return cfg


def _require(module: str) -> None:
    """Skip when a tool of the extras is missing, but never under CI."""
    if importlib.util.find_spec(module) is None:
        if os.environ.get("CI"):
            pytest.fail(f"{module} is not installed; CI installs the test and docs extras")
        pytest.skip(f"{module} not installed (pip install -e '.[test,docs]')")


def _run(args: list[str], cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env=QUIET_ENV)


# -- metadata -----------------------------------------------------------------


def test_version_has_one_source():
    """``adpue_tf.__version__`` is the only place the version is written."""
    assert _setup_cfg()["metadata"]["version"] == "attr: adpue_tf.__version__"
    assert re.fullmatch(r"\d+\.\d+\.\d+(?:[a-z]+\d+)?", adpue_tf.__version__)
    written = [p for p in (ROOT / "adpue_tf").rglob("*.py")
               if re.search(r"^__version__\s*=", p.read_text(encoding="utf-8"), re.MULTILINE)]
    assert written == [ROOT / "adpue_tf" / "__init__.py"]
    assert importlib.metadata.version("adpue_tf") == adpue_tf.__version__


def test_python_versions_agree():
    """``python_requires``, the classifiers and this interpreter tell one story."""
    cfg = _setup_cfg()
    assert cfg["options"]["python_requires"] == ">=3.10,<3.14"
    classifiers = cfg["metadata"]["classifiers"].split()
    listed = tuple(c for c in SUPPORTED if c in classifiers)
    assert listed == SUPPORTED
    assert not [c for c in classifiers if re.fullmatch(r"3\.\d+", c) and c not in SUPPORTED]
    assert f"{sys.version_info.major}.{sys.version_info.minor}" in SUPPORTED


def test_py_typed_is_shipped():
    assert (ROOT / "adpue_tf" / "py.typed").is_file()
    assert "py.typed" in _setup_cfg()["options.package_data"]["adpue_tf"]


def test_extras_hold_the_tools_the_suite_runs():
    extras = _setup_cfg()["options.extras_require"]
    names = {e: {re.split(r"[<>=\[; ]", line.strip())[0] for line in extras[e].splitlines()
                 if line.strip()} for e in extras}
    assert {"mypy", "ruff", "build", "pytest"} <= names["test"]
    assert {"mkdocs", "mkdocstrings"} <= names["docs"]
    assert {"keras-tuner"} <= names["tune"]


def test_tuning_without_keras_tuner_names_the_extra(monkeypatch):
    """A missing optional dependency says which extra brings it."""
    for name in [m for m in sys.modules if m == "adpue_tf.tuning" or
                 m.startswith("adpue_tf.tuning.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "keras_tuner", None)  # import keras_tuner -> ImportError
    with pytest.raises(ImportError, match=re.escape('pip install "adpue_tf[tune]"')):
        importlib.import_module("adpue_tf.tuning")


# -- the wheel ----------------------------------------------------------------


@pytest.mark.slow
def test_wheel_and_sdist_build_and_the_wheel_installs_clean(tmp_path):
    """``python -m build`` gives an sdist and a wheel; the wheel works in a fresh venv.

    Offline and quick: the build uses this environment's setuptools
    (``--no-isolation``), and the fresh venv reuses this environment's
    TensorFlow/Keras/NumPy through a ``.pth`` line instead of downloading them.
    """
    _require("build")
    src = tmp_path / "src"
    src.mkdir()
    for name in BUILD_INPUTS:
        path = ROOT / name
        if path.is_dir():
            shutil.copytree(path, src / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(path, src / name)
    dist = tmp_path / "dist"
    out = _run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(dist), "."],
               cwd=src)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    version = adpue_tf.__version__
    wheel = dist / f"adpue_tf-{version}-py3-none-any.whl"
    assert wheel.is_file() and (dist / f"adpue_tf-{version}.tar.gz").is_file(), \
        sorted(p.name for p in dist.iterdir())

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    py = venv / "bin" / "python"
    site = _run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                cwd=tmp_path).stdout.strip()
    # This environment's packages, after the venv's own (so the wheel wins over any
    # editable install of the source tree, whose finder a plain path line does not load).
    (Path(site) / "reuse_test_env.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    out = _run([sys.executable, "-m", "pip", "--python", str(py), "install", "--no-deps",
                "--no-index", "--quiet", str(wheel)], cwd=tmp_path)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]

    code = ("import os, adpue_tf, numpy as np\n"
            "print(adpue_tf.__file__)\n"
            "print(adpue_tf.__version__)\n"
            "print(os.path.isfile(os.path.join(os.path.dirname(adpue_tf.__file__), 'py.typed')))\n"
            f"{RISK_SNIPPET}\n"
            "print(risk)\n")
    out = _run([str(py), "-c", code], cwd=tmp_path)  # outside the source tree
    assert out.returncode == 0, out.stderr[-3000:]
    file, got_version, typed, risk = out.stdout.strip().splitlines()[-4:]
    assert Path(file).is_relative_to(Path(site)), file
    assert (got_version, typed) == (version, "True")
    here: dict = {}
    exec(RISK_SNIPPET, here)  # the same loss from the source tree
    assert float(risk) == pytest.approx(here["risk"], abs=1e-6)
    cli = _run([str(venv / "bin" / "adpue-tf"), "--version"], cwd=tmp_path)
    assert cli.stdout.strip() == f"adpue-tf {version}", cli.stderr[-2000:]


# -- the tree's tooling -------------------------------------------------------


def test_ruff_is_clean():
    """A second: runs in `make test`, so CI lints every change."""
    _require("ruff")
    out = _run([sys.executable, "-m", "ruff", "check", "--no-cache", "."], cwd=ROOT)
    assert out.returncode == 0, out.stdout[-6000:] + out.stderr[-2000:]


@pytest.mark.slow
def test_mypy_is_clean():
    """40 s of one core: in `make test-all`; CI (`.ci/run`) runs mypy itself after `make test`."""
    _require("mypy")
    out = _run([sys.executable, "-m", "mypy", "--no-incremental", "--cache-dir", os.devnull],
               cwd=ROOT)
    assert out.returncode == 0, out.stdout[-6000:] + out.stderr[-2000:]


def _mkdocs(project: Path, site: Path) -> subprocess.CompletedProcess:
    return _run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
                cwd=project)


def test_every_public_module_has_an_api_page():
    """A new public module of the core gets its page (the experiments page renders the wing)."""
    rendered = set(re.findall(r"^::: ([\w.]+)", "\n".join(
        p.read_text(encoding="utf-8") for p in (ROOT / "docs" / "api").glob("*.md")),
        re.MULTILINE))
    package = ROOT / "adpue_tf"
    public = {f"adpue_tf.{p.stem}" for p in package.glob("*.py")
              if not p.name.startswith("_") and p.name != "cli.py"}
    public |= {f"adpue_tf.{p.parent.name}" for p in package.glob("*/__init__.py")
               if not p.parent.name.startswith("_")}
    missing = {m for m in public if not any(r == m or r.startswith(m + ".") for r in rendered)}
    assert missing == set(), f"add a page under docs/api/ and to mkdocs.yml's nav: {missing}"
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    pages = {p.name for p in (ROOT / "docs" / "api").glob("*.md")}
    assert {p for p in pages if f"api/{p}" not in nav} == set()


def test_docs_build_strict(tmp_path):
    """The API reference renders from the docstrings with no warning at all."""
    _require("mkdocs")
    _require("mkdocstrings_handlers.python")
    out = _mkdocs(ROOT, tmp_path / "site")
    assert out.returncode == 0, out.stderr[-6000:]
    page = (tmp_path / "site" / "api" / "losses" / "index.html").read_text(encoding="utf-8")
    assert 'id="adpue_tf.losses.ADPUELoss"' in page
    home = (tmp_path / "site" / "index.html").read_text(encoding="utf-8")
    assert "Which loss for which data" in home  # the README is the home page
    assert 'src="figures/problem.png"' in home
    assert (tmp_path / "site" / "figures" / "problem.png").is_file()
    for page, text in GUIDE_PAGES.items():  # the guide pages, reached from the README's links
        assert f'href="guide/{page}/"' in home, page
        html = (tmp_path / "site" / "guide" / page / "index.html").read_text(encoding="utf-8")
        assert text in html, (page, text)


@pytest.mark.slow
def test_docs_build_fails_on_a_broken_reference(tmp_path):
    """The strict build above can fail: a docstring reference to a missing name breaks it."""
    _require("mkdocs")
    _require("mkdocstrings_handlers.python")
    project = tmp_path / "project"
    project.mkdir()
    for name in ("mkdocs.yml", "README.md", "CHANGELOG.md"):
        shutil.copy2(ROOT / name, project / name)
    shutil.copytree(ROOT / "docs", project / "docs")
    pkg = project / "adpue_tf"
    shutil.copytree(ROOT / "adpue_tf", pkg, ignore=shutil.ignore_patterns("__pycache__"))
    init = pkg / "callbacks.py"
    init.write_text(init.read_text(encoding="utf-8").replace(
        '"""', '"""See :func:`adpue_tf.data.no_such_builder`.\n\n', 1), encoding="utf-8")
    out = _mkdocs(project, tmp_path / "site")
    assert out.returncode != 0
    assert "adpue_tf.data.no_such_builder" in out.stderr
