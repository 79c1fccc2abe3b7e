"""The reliability audit (benchmarks/audit.py): its probes, and its verdict on the library.

The full run takes minutes on two cores, so it is marked slow; the fast tests
check that the probe table is large, unique and covers every entry point the
audit claims, and that the committed report agrees with its own counts.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from benchmarks import audit
from benchmarks.audit_runner import Lost

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"


def test_the_audit_has_hundreds_of_unique_probes():
    probes = audit.all_probes()
    ids = [p.id for p in probes]
    assert len(ids) >= 300 and len(set(ids)) == len(ids)
    entries = {i.split(":")[0] for i in ids}
    for entry in ("export_for_serving", "read_tfrecords", "with_propensity", "pack_labels",
                  "epoch_length", "BestRound", "ExposureLikelihood", "ReferenceRisk",
                  "DebiasedHyperModel", "bench linear", "simulate-logs", "validation_score",
                  "fit_ratio_model", "fit_pue", "sse_pu_dataset", "write_ad_log",
                  "read_ad_log_meta", "pue_validation_data", "fit_exposure_model"):
        assert entry in entries, entry
    assert sum(p.protect is not None for p in probes) >= 40  # the data-loss probes
    assert sum("SIGKILL" in i for i in ids) >= 15  # processes killed part-way
    assert sum("at once" in i or "reader" in i for i in ids) >= 5  # concurrent calls


def test_the_probe_families_import_only_the_runner_and_the_values():
    """No import circle: a family never imports audit.py or another family."""
    import ast

    for path in sorted(BENCH.glob("audit_probes_*.py")):
        names = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module:
                names.add(node.module)
            elif isinstance(node, ast.Import):
                names.update(a.name for a in node.names)
        ours = {n for n in names if n.startswith("benchmarks")}
        assert ours <= {"benchmarks.audit_runner", "benchmarks.audit_values"}, (path.name, ours)


def test_the_committed_report_adds_up():
    text = (BENCH / "results" / "audit.md").read_text(encoding="utf-8")
    counts = {k: int(v) for k, v in re.findall(r"^\| ([a-z ]+) \| (\d+) \|$", text, re.M)
              if k in audit.CLASSES}
    total = int(re.search(r"\| \*\*total\*\* \| (\d+) \|", text).group(1))
    assert set(counts) == set(audit.CLASSES) and sum(counts.values()) == total >= 300


def test_classify_tells_the_classes_apart(tmp_path):
    P = audit.Probe
    cases = [
        (P("a: clear", lambda t: int("x"), "invalid literal"), "clear error"),
        (P("a: obscure", lambda t: int("x"), "`value`"), "obscure"),
        (P("a: silent", lambda t: 1, "`value`"), "silent"),
        (P("a: wrong", lambda t: 1, check=lambda r: r == 2), "silent"),
        (P("a: correct", lambda t: 2, check=lambda r: r == 2), "correct"),
        (P("a: crash", lambda t: {}["k"], "`k`"), "crash"),
        (P("a: lost", lambda t: (t / "f").unlink(), setup=lambda t: (t / "f").write_text("x"),
           protect=lambda t: [t / "f"]), "data loss"),
        (P("a: reader found it missing", lambda t: (_ for _ in ()).throw(Lost("missing"))),
         "data loss"),
        (P("a: either, refused", lambda t: int("x"), "invalid literal", check=bool),
         "clear error"),
        (P("a: either, done", lambda t: 2, "`value`", check=lambda r: r == 2), "correct"),
        (P("a: either, wrong", lambda t: 3, "`value`", check=lambda r: r == 2), "silent"),
    ]
    for probe, kind in cases:
        assert audit.classify(probe, tmp_path)[0] == kind, probe.id


@pytest.mark.slow
def test_the_audit_finds_no_silent_no_data_loss_no_crash(tmp_path):
    results = audit.run(audit.all_probes())
    kinds = [k for _, k, _, _ in results]
    bad = [(p.id, k, w) for p, k, w, _ in results if k in ("silent", "data loss", "crash")]
    assert not bad, bad
    assert kinds.count("obscure") <= 3
