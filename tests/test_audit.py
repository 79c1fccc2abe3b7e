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

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"


def test_the_audit_has_hundreds_of_unique_probes():
    probes = audit.all_probes()
    ids = [p.id for p in probes]
    assert len(ids) >= 300 and len(set(ids)) == len(ids)
    entries = {i.split(":")[0] for i in ids}
    for entry in ("export_for_serving", "read_tfrecords", "with_propensity", "pack_labels",
                  "epoch_length", "BestRound", "ExposureLikelihood", "ReferenceRisk",
                  "DebiasedHyperModel", "bench linear", "simulate-logs", "validation_score",
                  "fit_ratio_model", "fit_pue"):
        assert entry in entries, entry
    assert sum(p.protect is not None for p in probes) >= 10  # the data-loss probes


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
