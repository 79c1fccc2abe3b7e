"""benchmarks.throughput on a few steps, so that its code path cannot rot."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def throughput():
    from benchmarks import throughput

    return throughput


@pytest.mark.slow
def test_every_variant_runs_and_is_reported(throughput, tmp_path):
    spe = 2
    out = tmp_path / "t.md"
    throughput.main(["--steps", "4", "--repeats", "5", "--warmup", "1", "--rows", "3000",
                     "--width", "8", "--dim", "4", "--batch-size", "64",
                     "--steps-per-execution", str(spe), "--out", str(out)])
    text = out.read_text()
    for name in throughput.VARIANTS:
        assert f"| `{name}`: {throughput.DESCRIPTIONS[name]} |" in text
    assert f"| steps_per_execution | {spe} |" in text
    assert "- `adpue_metrics` against `adpue`: ratio" in text
    assert "- `adpue_keras4` against `adpue` (no target): ratio" in text


def test_variants_must_be_known(throughput):
    with pytest.raises(SystemExit):
        throughput.parse_args(["--variants", "bce,nope"])


def test_threads_and_width_are_parsed(throughput):
    args = throughput.parse_args(["--threads", "1", "--width", "8"])
    assert (args.threads, args.width) == (1, 8)
    with pytest.raises(SystemExit):
        throughput.parse_args(["--threads", "-1"])


@pytest.mark.slow
def test_rows_benchmark_runs_and_is_reported(tmp_path):
    from benchmarks import throughput_rows as rows

    out = tmp_path / "r.md"
    rows.main(["--batch-sizes", "32", "--widths", "8", "--rows", "2000", "--dim", "4",
               "--rounds", "2", "--calls", "3", "--out", str(out)])
    text = out.read_text()
    assert "| width W | batch | selected share |" in text
    assert text.count("\n| 8 | 32 |") == 1


@pytest.mark.slow
def test_ads_model_runs_on_feature_dicts(throughput, tmp_path):
    out = tmp_path / "a.md"
    throughput.main(["--model", "ads", "--steps", "3", "--repeats", "5", "--warmup", "1",
                     "--rows", "2000", "--batch-size", "64", "--variants", "bce,debiased",
                     "--out", str(out)])
    text = out.read_text()
    assert "| model | ad-log net: Embedding(user 8, item 8, campaign 8)" in text
    assert "| `debiased`: DebiasedModel + RefreshDagger(every_n_epochs=1) |" in text


def test_model_must_be_known(throughput):
    assert throughput.parse_args(["--model", "ads"]).model == "ads"
    with pytest.raises(SystemExit):
        throughput.parse_args(["--model", "resnet"])
