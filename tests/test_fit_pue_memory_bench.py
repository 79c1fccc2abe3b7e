"""benchmarks/fit_pue_memory.py: its argument check and one mode's child run."""

import pytest

from benchmarks import fit_pue_memory


def test_too_few_calls_are_refused():
    with pytest.raises(SystemExit):
        fit_pue_memory.main(["--calls", "3"])


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["block", "keras"])
def test_a_child_run_gives_the_memory_after_each_call(mode):
    from adpue_tf.experiments import reuse

    rss = fit_pue_memory._child(mode, 2, 1)
    assert len(rss) == 2 and all(v > 100 for v in rss)  # MB of a process holding TensorFlow
    assert reuse._KEPT is None  # the block ended with the calls
