"""External peers of Table 1: pulearn's Elkan–Noto classifier, where pulearn is installed.

Example:
    >>> external_methods() in ((), ("ElkanNoto",))
    True
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from adpue_tf.labels import Source

__all__ = ["external_methods", "elkan_noto"]


def external_methods() -> tuple[str, ...]:
    """External peers that are installed: ``("ElkanNoto",)`` with pulearn, else ``()``."""
    try:
        import pulearn  # noqa: F401
    except ImportError:
        return ()
    return ("ElkanNoto",)


def elkan_noto(x: np.ndarray, y: np.ndarray, seed: int) -> Callable[[np.ndarray], np.ndarray]:
    """pulearn's Elkan–Noto classifier on each trial's PU rows (packed labels ``(T, n, 3)``).

    Args:
        x: training features ``(T, n, d)``.
        y: packed labels ``(T, n, 3)``; the PU rows' ``W`` is read.
        seed: trial ``t``'s hold-out split uses ``seed + t``.

    Returns:
        ``score(x)``: ``(T, m, d)`` features to ``p̂ - 1/2``, ``(T, m)``; NaN for
        a trial whose fit failed (e.g. no labelled positive in its hold-out set).
    """
    from pulearn import ElkanotoPuClassifier
    from sklearn.linear_model import LogisticRegression

    models: list[Any] = []
    for t in range(len(x)):
        pu = y[t, :, 2] == int(Source.PU)
        clf = ElkanotoPuClassifier(LogisticRegression(max_iter=1000), hold_out_ratio=0.1,
                                   random_state=seed + t)
        try:
            clf.fit(x[t][pu], y[t, pu, 0].astype(int))
        except ValueError:  # e.g. no labelled positive in its hold-out set: trial fails
            clf = None
        models.append(clf)

    def score(z: np.ndarray) -> np.ndarray:
        return np.stack([m.predict_proba(z[t])[:, 1] - 0.5 if m is not None
                         else np.full(z.shape[1], np.nan) for t, m in enumerate(models)])
    return score
