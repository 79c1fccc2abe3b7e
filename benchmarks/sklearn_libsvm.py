"""scikit-learn's bundled data sets as LIBSVM files, for ``adpue-tf bench linear --file``.

Data no issue and no paper table uses, reproducible without a download:
``digits_lt5`` (1,797 rows, 64 pixels / 16 in [0, 1]; positive: digits 0–4),
``breast_cancer_scale`` (569 rows, 30 features scaled to [-1, 1]; positive:
malignant) and ``diabetes_hi`` (442 rows, 10 features scaled to [-1, 1];
positive: disease progression above the median).

Usage:
    python -m benchmarks.sklearn_libsvm --out DIR [--sets digits_lt5,diabetes_hi]
    adpue-tf bench linear --trials 10 --exposure-rate 0.5,0.7 --file DIR/digits_lt5
    adpue-tf bench linear --trials 10 --exposure-rate 0.5,0.7 --n-test 100 --file DIR/diabetes_hi

Results: ``benchmarks/results/linear.file.digits_lt5.md`` and
``linear.file.diabetes_hi.md`` (``linear.file.breast_cancer.md``).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

import numpy as np


def _scaled(x: np.ndarray) -> np.ndarray:
    """Each column to [-1, 1] (a constant column to 0), as LIBSVM's ``*_scale`` files."""
    lo, hi = x.min(0), x.max(0)
    span = np.where(hi > lo, hi - lo, 1.0)
    return np.where(hi > lo, (x - lo) / span * 2 - 1, 0.0)


def digits_lt5() -> tuple[np.ndarray, np.ndarray]:
    """Digits 0–4 against 5–9; pixels / 16."""
    from sklearn.datasets import load_digits
    d = load_digits()
    return d.data / 16.0, np.where(d.target < 5, 1, -1)


def breast_cancer_scale() -> tuple[np.ndarray, np.ndarray]:
    """Malignant (1) against benign (-1)."""
    from sklearn.datasets import load_breast_cancer
    d = load_breast_cancer()
    return _scaled(d.data), np.where(d.target == 0, 1, -1)


def diabetes_hi() -> tuple[np.ndarray, np.ndarray]:
    """Progression above the median (1) against the rest (-1)."""
    from sklearn.datasets import load_diabetes
    d = load_diabetes()
    return _scaled(d.data), np.where(d.target > np.median(d.target), 1, -1)


SETS: dict[str, Callable[[], tuple[np.ndarray, np.ndarray]]] = {
    "digits_lt5": digits_lt5, "breast_cancer_scale": breast_cancer_scale,
    "diabetes_hi": diabetes_hi}


def write_libsvm(path: Path, x: np.ndarray, y: np.ndarray) -> None:
    """One line per row: ``+1``/``-1``, then the non-zero ``index:value`` pairs (1-based)."""
    with open(path, "w") as f:
        for row, label in zip(x, y):
            pairs = " ".join(f"{j + 1}:{v:.6g}" for j, v in enumerate(row) if v != 0)
            f.write(f"{'+1' if label > 0 else '-1'} {pairs}".rstrip() + "\n")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="folder for the files (created)")
    parser.add_argument("--sets", default=",".join(SETS),
                        help=f"comma-separated, of {', '.join(SETS)}")
    args = parser.parse_args(argv)
    names = [s for s in args.sets.split(",") if s]
    unknown = [s for s in names if s not in SETS]
    if unknown:
        parser.error(f"unknown --sets {unknown}; known: {list(SETS)}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for name in names:
        x, y = SETS[name]()
        write_libsvm(out / name, x, y)
        print(f"{out / name}: {len(y)} rows, {x.shape[1]} features, "
              f"positive fraction {np.mean(y > 0):.3f}")


if __name__ == "__main__":
    main()
