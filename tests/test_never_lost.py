"""What is never lost: the tests behind docs/never-lost.md, one or more per sentence.

Every guarantee of the page names the tests that hold it;
:func:`test_every_guarantee_names_tests_that_exist` keeps the page and the
tests in step. The sentences about ``export_for_serving`` lean on
``tests/test_serving.py`` and ``tests/test_bad_input.py`` as well.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import keras
import numpy as np
import pytest

import adpue_tf as adp
from adpue_tf.experiments.bench import common as bench_common

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "never-lost.md"


def _tree(root: Path) -> dict[str, bytes | None]:
    return {str(p.relative_to(root)): (p.read_bytes() if p.is_file() else None)
            for p in sorted(root.rglob("*"))}


def test_every_guarantee_names_tests_that_exist():
    text = PAGE.read_text(encoding="utf-8")
    bullets = [b for b in re.findall(r"^- (.+?)(?=^- |^#|\Z)", text, re.S | re.M)]
    assert len(bullets) >= 12
    for bullet in bullets:
        refs = re.findall(r"`(tests/[\w/]+\.py)::(\w+)`", bullet)
        assert refs, f"this guarantee names no test: {bullet[:80]!r}"
        for path, name in refs:
            source = (ROOT / path).read_text(encoding="utf-8")
            assert re.search(rf"^def {name}\(", source, re.M), f"{path}::{name} does not exist"


def test_mkdocs_nav_links_the_page():
    assert "never-lost.md" in (ROOT / "mkdocs.yml").read_text(encoding="utf-8")


# ------------------------------------------------------------------ export_for_serving
def _net():
    keras.utils.set_random_seed(0)
    return keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])


def test_export_creates_only_its_directory(tmp_path):
    (tmp_path / "export" / "ranker").mkdir(parents=True)
    (tmp_path / "export" / "ranker" / "README").write_text("mine")
    before = _tree(tmp_path)
    path = adp.export_for_serving(_net(), adp.serving_path(tmp_path / "export", "ranker", 1),
                                  from_logits=True)
    after = _tree(tmp_path)
    assert {k: v for k, v in after.items() if k in before} == before  # nothing else changed
    new = sorted(set(after) - set(before))
    assert all(k.startswith(os.path.join("export", "ranker", "1")) for k in new)
    assert sorted(os.listdir(path)) == ["assets", "fingerprint.pb", "saved_model.pb",
                                        "variables"]


# ------------------------------------------------------------------ simulate-logs
def test_simulate_logs_writes_only_inside_a_new_or_empty_directory(tmp_path):
    (tmp_path / "empty").mkdir()
    (tmp_path / "other.txt").write_text("mine")
    for out in (tmp_path / "new" / "log", tmp_path / "empty"):
        adp.synthetic.write_ad_log(out, rows=20, shards=1, eval_rows=5)
        assert sorted(os.listdir(out)) == ["eval", "exposure", "meta.json", "pu"]
    assert sorted(os.listdir(tmp_path)) == ["empty", "new", "other.txt"]
    assert (tmp_path / "other.txt").read_text() == "mine"


@pytest.mark.parametrize("kind", ["a directory in use", "an earlier log", "a file"])
def test_simulate_logs_refuses_a_directory_in_use(tmp_path, kind):
    out = tmp_path / "log"
    if kind == "a file":
        out.write_text("mine")
    elif kind == "an earlier log":
        adp.synthetic.write_ad_log(out, rows=20, shards=1, eval_rows=5)
    else:
        out.mkdir()
        (out / "notes.txt").write_text("mine")
    before = _tree(tmp_path)
    with pytest.raises(ValueError, match="`out_dir` .* exists and is not an empty directory; "
                                         "choose a new one"):
        adp.synthetic.write_ad_log(out, rows=30, shards=2, eval_rows=5)
    assert _tree(tmp_path) == before


def test_an_interrupted_log_has_no_meta_and_is_refused_when_read(tmp_path, monkeypatch):
    from adpue_tf.synthetic import ad_log

    real, calls = ad_log._write_file, []

    def killed(*args, **kwargs):  # the run dies while writing its third file
        calls.append(args)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(ad_log, "_write_file", killed)
    with pytest.raises(KeyboardInterrupt):
        adp.synthetic.write_ad_log(tmp_path / "log", rows=20, shards=1, eval_rows=5)
    assert not (tmp_path / "log" / "meta.json").exists()
    with pytest.raises(FileNotFoundError, match="No ad log at .*meta.json does not exist"):
        adp.synthetic.read_ad_log_meta(tmp_path / "log")


# ------------------------------------------------------------------ the benches
def test_bench_out_directory_keeps_other_files(tmp_path):
    out = tmp_path / "results"
    out.mkdir()
    (out / "mine.txt").write_text("mine")
    (out / "linear.md").write_text("old table")
    before = _tree(tmp_path)
    assert bench_common.prepare_out(out) == out
    assert _tree(tmp_path) == before  # its write probe is removed, nothing else touched
    bench_common._write(out / "linear.md", "new table")
    assert (out / "linear.md").read_text() == "new table"
    assert sorted(os.listdir(out)) == ["linear.md", "mine.txt"]


def test_bench_result_files_are_replaced_whole_or_not_at_all(tmp_path):
    (tmp_path / "linear.md").write_text("old table")
    with pytest.raises(TypeError):
        bench_common._write(tmp_path / "linear.md", 123)  # the write fails half-way
    assert (tmp_path / "linear.md").read_text() == "old table"
    assert os.listdir(tmp_path) == ["linear.md"]  # no temporary file left


@pytest.mark.slow
def test_bench_linear_run_writes_only_its_result_files(tmp_path):
    from adpue_tf.cli import main

    rng = np.random.default_rng(0)
    lines = []
    for _ in range(360):
        x = rng.normal(size=14)
        lines.append(f"{1 if x[0] + rng.normal() > 0 else -1:+d} "
                     + " ".join(f"{j + 1}:{v:.3f}" for j, v in enumerate(x)))
    (tmp_path / "tiny.svm").write_text("\n".join(lines) + "\n")
    out = tmp_path / "out"
    out.mkdir()
    (out / "mine.txt").write_text("mine")
    code = main(["bench", "linear", "--file", str(tmp_path / "tiny.svm"), "--trials", "2",
                 "--steps", "5", "--l2s", "0.1", "--rounds", "1", "--alphas", "0.5",
                 "--out", str(out), "--quiet"])
    assert code == 0
    assert sorted(os.listdir(out)) == ["linear.json", "linear.md", "mine.txt"]
    assert (out / "mine.txt").read_text() == "mine"


# ------------------------------------------------------------------ the callbacks
def test_callbacks_touch_no_file_and_restore_weights_in_memory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    s = adp.synthetic.synthetic_pue(120, 120, seed=0)
    keras.utils.set_random_seed(0)
    net = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model = adp.DebiasedModel(net, initial_dagger=0.5)
    model.compile("sgd", loss=adp.ADPUELoss(from_logits=True),
                  metrics=[adp.validation.ExposureLikelihood(from_logits=True)])
    best = adp.BestRound()
    model.fit(adp.data.pue_dataset(s.x_pu, s.w_pu, s.x_e, s.e_e, batch_size=120, seed=0),
              validation_data=adp.validation.pue_validation_data(
                  s.x_pu, s.w_pu, s.x_e, s.e_e, batch_size=120),
              epochs=3, verbose=0, callbacks=[adp.RefreshDagger(), best])
    assert os.listdir(tmp_path) == []
    assert best.best_round == model.refreshes and len(best.rounds) == 3
