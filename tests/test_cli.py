"""The `adpue-tf` command: TensorFlow's start-up noise hidden, --verbose, a lazy package."""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import adpue_tf
from adpue_tf import cli

CONSOLE_SCRIPT = Path(sys.executable).with_name("adpue-tf")
PACKAGE = Path(adpue_tf.__file__).parent

# Lines TensorFlow 2.21 wrote to stderr at start-up on this project's machines.
NOISE = [
    "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR",
    "I0000 00:00:1795667092.221836   17676 port.cc:153] oneDNN custom operations are on. You "
    "may see slightly different numerical results due to floating-point round-off errors.",
    "I0000 00:00:1795667092.222159   17676 cudart_stub.cc:31] Could not find cuda drivers on "
    "your machine, GPU will not be used.",
    "I0000 00:00:1795667092.267132   17676 cpu_feature_guard.cc:227] This TensorFlow binary is "
    "optimized to use available CPU instructions in performance-critical operations.",
    "To enable the following instructions: AVX2 AVX512F AVX512_VNNI AVX512_BF16 FMA, in other "
    "operations, rebuild TensorFlow with the appropriate compiler flags.",
    "E0000 00:00:1795667095.265372   17676 cuda_platform.cc:52] failed call to cuInit: INTERNAL: "
    "CUDA error: Failed call to cuInit: UNKNOWN ERROR (303)",
]
KEPT = [
    "E0000 00:00:1795667095.265372   17676 bfc_allocator.cc:485] Allocator ran out of memory",
    "F0000 00:00:1795667095.265372   17676 some_kernel.cc:10] Check failed: x == y",
    "W0000 00:00:1795667095.265372   17676 cuda_test.py said nothing",  # not a C++ log line
    "Traceback (most recent call last):",
]


def test_startup_noise_pattern_matches_exactly_the_startup_lines():
    assert [bool(cli._STARTUP_NOISE.match(line)) for line in NOISE] == [True] * len(NOISE)
    assert [bool(cli._STARTUP_NOISE.match(line)) for line in KEPT] == [False] * len(KEPT)


def test_native_output_is_filtered_and_python_stderr_kept(capfd):
    with cli._native_logs_hidden():
        os.write(2, ("\n".join(NOISE + KEPT) + "\n").encode())
        print("progress 1/2", file=sys.stderr)
    out, err = capfd.readouterr()
    assert out == ""
    assert err.splitlines() == ["progress 1/2", *KEPT]


def test_native_stderr_is_restored_after_an_error(capfd):
    with pytest.raises(ValueError, match="boom"):
        with cli._native_logs_hidden():
            os.write(2, (NOISE[1] + "\n").encode())
            raise ValueError("boom")
    os.write(2, b"after\n")
    assert capfd.readouterr().err == "after\n"


@pytest.mark.parametrize("argv, verbose", [
    (["demo"], False),
    (["--verbose", "demo"], True),
    (["demo", "--verbose"], True),
    (["bench", "linear", "--verbose"], True),
    (["bench", "neural"], False),
    (["simulate-logs", "--rows", "10", "--out", "x", "--verbose"], True),
])
def test_verbose_before_or_after_the_command(argv, verbose):
    assert cli.build_parser().parse_args(argv).verbose is verbose


def test_keras_registering_modules_are_all_listed():
    """Every core module that registers Keras objects is imported by `_register()`."""
    # a module, or a sub-package one of whose modules registers (its __init__ imports them)
    registering = {p.relative_to(PACKAGE).parts[0].removesuffix(".py")
                   for p in PACKAGE.rglob("*.py")
                   if "register_keras_serializable" in p.read_text()}
    assert "metrics" in registering  # a sub-package is seen
    assert registering == set(adpue_tf._KERAS_OBJECTS)


def test_public_names_resolve_and_dir_lists_them():
    assert set(adpue_tf.__all__) <= set(dir(adpue_tf))
    for name in adpue_tf.__all__:
        assert getattr(adpue_tf, name) is not None, name
    with pytest.raises(AttributeError, match="has no attribute 'nope'"):
        adpue_tf.nope  # noqa: B018


def _python(code, **kwargs):
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=300, **kwargs)


@pytest.mark.slow
def test_import_and_parser_do_not_load_tensorflow():
    proc = _python("""
        import sys
        import adpue_tf, adpue_tf.cli
        adpue_tf.cli.build_parser().parse_args(["demo"])
        print(sorted(m for m in ("tensorflow", "keras") if m in sys.modules))
        adpue_tf.ADPUELoss
        print(sorted(m for m in ("tensorflow", "keras", "adpue_tf.model") if m in sys.modules))
    """)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["[]", "['adpue_tf.model', 'keras', 'tensorflow']"]


@pytest.mark.slow
def test_keras_file_loads_after_a_bare_import(tmp_path):
    """`import adpue_tf` then `import keras`: the package's objects are registered."""
    import keras

    import adpue_tf as adp

    net = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    model = adp.DebiasedModel(net)
    model.compile("sgd", loss=adp.ADPUELoss(from_logits=True))
    model.save(tmp_path / "m.keras")
    for order in ("import adpue_tf\nimport keras", "import keras\nimport adpue_tf"):
        proc = _python(order + f"""
m = keras.saving.load_model({str(tmp_path / "m.keras")!r})
print(type(m).__name__, type(m.loss).__name__)
""")
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert proc.stdout.splitlines()[-1] == "DebiasedModel ADPUELoss"


def _run(*argv):
    return subprocess.run([str(CONSOLE_SCRIPT), *argv], capture_output=True, text=True,
                          timeout=600, env={k: v for k, v in os.environ.items()
                                            if k != "TF_CPP_MIN_LOG_LEVEL"})


@pytest.mark.slow
def test_console_script_shows_only_our_output():
    assert CONSOLE_SCRIPT.exists(), f"no console script next to {sys.executable}"
    done = _run("demo", "--seeds", "2", "--epochs", "1", "--quiet")
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert "| fit_pue |" in done.stdout and "Verdict: " in done.stdout
    bad = _run("demo", "--seeds", "1")  # TensorFlow is loaded before the check fails
    assert bad.returncode == 2
    assert bad.stderr.splitlines() == [
        "adpue-tf: error: `seeds` must be an int >= 2 (a standard error needs 2), got 1."]
    loud = _run("--verbose", "demo", "--seeds", "1")
    assert loud.returncode == 2
    assert "absl::InitializeLog()" in loud.stderr
    assert loud.stderr.splitlines()[-1] == bad.stderr.splitlines()[-1]


def _parsers(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    """``(command words, parser)`` of the parser and of every sub-command, depth first."""
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _parsers(sub, (*path, name))


def _entries(help_text: str) -> dict[str, str]:
    """Each option's entry of a ``--help`` text, on one line, by its first flag."""
    entries: dict[str, str] = {}
    flag = None
    for line in help_text.splitlines():
        if re.match(r"^  -", line):
            flag = line.split()[0].rstrip(",")
            entries[flag] = line
        elif flag and line.startswith("    "):
            entries[flag] += " " + line.strip()
        else:
            flag = None
    return {k: " ".join(v.split()) for k, v in entries.items()}


def test_every_help_shows_every_default():
    """`adpue-tf --help` and each sub-command's: every option with a default says it."""
    checked = 0
    for path, parser in _parsers(cli.build_parser()):
        entries = _entries(parser.format_help())
        for action in parser._actions:
            if (not action.option_strings or action.required
                    or isinstance(action, (argparse._HelpAction, argparse._VersionAction))):
                continue
            default = action.default
            if default is argparse.SUPPRESS:
                default = False  # --verbose after the command: off unless given
            entry = entries[action.option_strings[0]]
            assert f"(default: {default})" in entry, (" ".join(path), entry)
            checked += 1
    assert checked >= 40


def test_bench_results_state_their_provenance_and_no_local_path(tmp_path, monkeypatch):
    """Stand-ins for the loader and the trials; what is checked is what `bench` writes."""
    import json

    import numpy as np

    from adpue_tf.experiments import datasets, table2

    rng = np.random.default_rng(0)
    fake = datasets.Dataset("fashion_mnist", rng.uniform(size=(300, 20)).astype(np.float32),
                            (rng.uniform(size=300) < 0.4).astype(np.float32), "items 0-3")
    monkeypatch.setattr(datasets, "load", lambda name, **kw: fake)
    curve = {"accuracy": [0.6], "precision": [0.5], "recall": [0.4]}
    monkeypatch.setattr(table2, "run_trial", lambda *a, **k: {
        m: {"inductive": 0.7, "transductive": 0.8, "curves": curve}
        for m in table2.PUE_METHODS + table2.SSE_METHODS})
    out = tmp_path / "results"
    argv = ["bench", "neural", "--trials", "2", "--epochs", "1", "--seed", "5", "--datasets",
            "fashion_mnist", "--ratios", "0.3", "--out", str(out), "--quiet"]
    assert cli.main(argv) == 0
    text = (out / "neural.md").read_text()
    saved = json.loads((out / "neural.json").read_text())
    assert "- Command: `adpue-tf bench neural --trials 2" in text
    assert "--out <local>/results" in text and str(tmp_path) not in text + json.dumps(saved)
    assert "- Seeds: 5-6 (trial t uses seed 5 + t)" in text and "- Commit: `" in text
    digest = saved["provenance"]["data_sha256"]["fashion_mnist: loaded x and y (float32 arrays)"]
    assert len(digest) == 64 and f"`{digest}`" in text and "- Machine: " in text


def test_a_method_skipped_by_design_says_why():
    import numpy as np

    from adpue_tf.experiments import datasets
    from adpue_tf.experiments.bench.linear import _skipped

    few = datasets.Dataset("toy", np.zeros((4, 6), np.float32), np.zeros(4, np.float32), "1")
    many = datasets.Dataset("toy", np.zeros((4, 14), np.float32), np.zeros(4, np.float32), "1")
    assert _skipped("EM", few) == ("SAR-EM's propensity reads x2..x13; this set has 6 "
                                   "features (< 13)")
    assert _skipped("EM", many) is None and _skipped("Logit", few) is None
