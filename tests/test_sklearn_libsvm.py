"""benchmarks/sklearn_libsvm.py: scikit-learn's bundled sets written as LIBSVM files that bench linear reads back."""

import numpy as np
import pytest

from adpue_tf.experiments.bench.files import load_file
from benchmarks import sklearn_libsvm


@pytest.mark.parametrize("name,rows,cols,positive", [
    ("digits_lt5", 1797, 64, 0.501), ("breast_cancer_scale", 569, 30, 0.373),
    ("diabetes_hi", 442, 10, 0.5)])
def test_written_file_reads_back(tmp_path, name, rows, cols, positive):
    sklearn_libsvm.main(["--out", str(tmp_path), "--sets", name])
    x, y = sklearn_libsvm.SETS[name]()
    data = load_file(tmp_path / name)
    assert data.x.shape == (rows, cols)
    assert round(float(data.y.mean()), 3) == positive
    np.testing.assert_allclose(data.x, x, atol=5e-6)  # 6 significant digits
    np.testing.assert_array_equal(data.y, (y > 0).astype(np.float32))
    assert float(np.abs(data.x).max()) <= 1.0


def test_unknown_set_refused(tmp_path, capsys):
    with pytest.raises(SystemExit):
        sklearn_libsvm.main(["--out", str(tmp_path), "--sets", "iris"])
    assert "unknown --sets ['iris']" in capsys.readouterr().err
