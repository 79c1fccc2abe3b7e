"""Internal: the package's one NumPy sigmoid (for simulation and baselines, not losses).

Example:
    >>> from adpue_tf._internal.numeric import sigmoid
    >>> sigmoid([0.0, 1000.0, -1000.0]).tolist()
    [0.5, 1.0, 0.0]
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["sigmoid"]


def sigmoid(z: Any) -> np.ndarray:
    """``1 / (1 + exp(-z))`` in float64, without overflow for any finite ``z``."""
    return np.exp(-np.logaddexp(0.0, -np.asarray(z, np.float64)))
