"""benchmarks/throughput.py on a few steps, so that its code path cannot rot."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def throughput(load_benchmark):
    return load_benchmark("throughput")


@pytest.mark.slow
def test_every_variant_runs_and_is_reported(throughput, tmp_path):
    spe = 2
    out = tmp_path / "t.md"
    throughput.main(["--steps", "4", "--repeats", "5", "--warmup", "1", "--rows", "3000",
                     "--dim", "4", "--batch-size", "64", "--steps-per-execution", str(spe),
                     "--out", str(out)])
    text = out.read_text()
    for name in throughput.VARIANTS:
        assert f"| `{name}`: {throughput.DESCRIPTIONS[name]} |" in text
    assert f"| steps_per_execution | {spe} |" in text
    assert "- `adpue_metrics` against `adpue`: ratio" in text
    assert "- `adpue_keras4` against `adpue` (no target): ratio" in text


def test_variants_must_be_known(throughput):
    with pytest.raises(SystemExit):
        throughput.parse_args(["--variants", "bce,nope"])
