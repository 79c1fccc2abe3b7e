"""What the audit's probes are made of: small data, wrong values of every kind, tiny nets.

Shared by every probe family (``audit_probes_*``); it builds no probe and
imports none. TensorFlow, Keras and the library are imported on first use, so
collecting the probes is cheap.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

R = np.random.default_rng(0)
X, XE = R.normal(size=(12, 3)), R.normal(size=(10, 3))
W, E = (np.arange(12) % 3 == 0).astype(float), (np.arange(10) % 2).astype(float)


def _adp() -> Any:
    import adpue_tf as adp

    return adp


def _keras() -> Any:
    import keras

    return keras


def _dense(activation: str | None = None, units: int = 1, outputs: int = 1, dim: int = 3) -> Any:
    """A linear Keras model on ``dim`` features (seeded), ``outputs`` heads of ``units``."""
    k = _keras()
    k.utils.set_random_seed(0)
    a = k.Input((dim,))
    outs = [k.layers.Dense(units, activation)(a) for _ in range(outputs)]
    return k.Model(a, outs[0] if outputs == 1 else outs)


def _files(root: Path, *names: str) -> Path:
    """``root`` with the files (text ``mine``) and directories (ending in ``/``) named."""
    root.mkdir(parents=True, exist_ok=True)
    for name in names:
        if name.endswith("/"):
            (root / name).mkdir(parents=True, exist_ok=True)
        else:
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_text("mine")
    return root


_S: dict = {}


def _data() -> Any:
    """``synthetic_pue(120, 120, seed=0)``, made once: two features, 120 + 120 rows."""
    if "s" not in _S:
        _S["s"] = _adp().synthetic.synthetic_pue(120, 120, seed=0)
    return _S["s"]


# ------------------------------------------------------------------ values of every wrong kind
def bad_arrays(n: int, width: int = 3) -> list[tuple[str, Any, str]]:
    """``(what, value, words)`` for a feature matrix of ``n`` rows."""
    nan = R.normal(size=(n, width))
    nan[1, 0] = np.nan
    inf = R.normal(size=(n, width))
    inf[0, 2] = np.inf
    return [
        ("NaN", nan, "NaN"),
        ("inf", inf, "(NaN|inf)"),
        ("strings", np.full((n, width), "a"), "(numeric|numbers|real)"),
        ("complex", R.normal(size=(n, width)) * 1j, "real numbers"),
        ("ragged", [[1.0, 2.0], [3.0]] + [[0.0, 0.0]] * (n - 2), "ragged"),
        ("zero width", np.zeros((n, 0)), "zero-width"),
        ("no rows", np.zeros((0, width)), "(empty|no row|at least)"),
        ("1e39", np.full((n, width), 1e39), "float32"),
        ("None", None, "(must|None|got)"),
        ("object", np.array([object()] * n), "(numeric|numbers|real|dtype)"),
    ]


def bad_binary(n: int) -> list[tuple[str, Any, str]]:
    """``(what, value, words)`` for a 0/1 label vector of ``n`` rows."""
    return [
        ("value 2", np.r_[2.0, np.zeros(n - 1)], "0 and 1"),
        ("value -1", np.r_[-1.0, np.ones(n - 1)], "0 and 1"),
        ("value 0.5", np.full(n, 0.5), "0 and 1"),
        ("NaN", np.r_[np.nan, np.zeros(n - 1)], "NaN"),
        ("strings", np.array(["1", "0"] * (n // 2) + ["0"] * (n % 2)), "(numeric|numbers)"),
        ("wrong length", np.zeros(n + 3), r"(rows|length|\d+ .* \d+)"),
        ("2-D", np.zeros((n, 2)), "shape"),
        ("None", None, "(needs|must|None)"),
    ]


def bad_ints(name: str, minimum: int) -> list[tuple[str, Any, str]]:
    """``(what, value, words)`` for an integer option ``name`` of at least ``minimum``."""
    return [
        (f"{name}=True", True, f"`{name}`"),
        (f"{name}=2.5", 2.5, f"`{name}`"),
        (f"{name}='8'", "8", f"`{name}`"),
        (f"{name}={minimum - 1}", minimum - 1, f"`{name}`"),
        (f"{name}=-7", -7, f"`{name}`"),
    ]





# ------------------------------------------------------------------ nets that output probabilities
def _squashed(dim: int, how: str) -> Any:
    """A fresh net on ``dim`` features whose output is a probability, made the way ``how`` says."""
    k = _keras()
    ops, layers = k.ops, k.layers
    i = k.Input((dim,))
    z = layers.Dense(1)(i)
    if how == "ops.sigmoid":
        return k.Model(i, ops.sigmoid(z))
    if how == "ops.hard_sigmoid":
        return k.Model(i, ops.hard_sigmoid(z))
    if how == "clip":
        return k.Model(i, ops.clip(z, 0.0, 1.0))
    if how == "tanh":
        return k.Model(i, (ops.tanh(z) + 1.0) / 2.0)
    if how == "exp-softplus":
        return k.Model(i, ops.exp(-ops.softplus(-z)))
    seq = {
        "Activation('sigmoid')": [layers.Dense(1), layers.Activation("sigmoid")],
        "Activation('hard_sigmoid')": [layers.Dense(1), layers.Activation("hard_sigmoid")],
        "Activation(keras.activations.sigmoid)": [layers.Dense(1),
                                                  layers.Activation(k.activations.sigmoid)],
        "Dense(1, 'hard_sigmoid')": [layers.Dense(1, "hard_sigmoid")],
        "Dense(1, keras.activations.sigmoid)": [layers.Dense(1, k.activations.sigmoid)],
        "Lambda(keras.ops.sigmoid)": [layers.Dense(1), layers.Lambda(k.ops.sigmoid)],
        "a nested Sequential ending in sigmoid": [k.Sequential([layers.Dense(1, "sigmoid")])],
        "sigmoid then Reshape((1,))": [layers.Dense(1, "sigmoid"), layers.Reshape((1,))],
        "Dense(1, 'softmax')": [layers.Dense(1, "softmax")],
    }[how]
    return k.Sequential([k.Input((dim,)), *seq])


#: The ways a net can end in a probability that every entry point reading logits is asked
#: about (a sigmoid op, an Activation layer, a hard sigmoid, a nested model).
SQUASHED = ("ops.sigmoid", "ops.hard_sigmoid", "Activation('sigmoid')",
            "Activation('hard_sigmoid')", "a nested Sequential ending in sigmoid")
#: All the ways fit_pue is asked about (it checks what a net computes, whatever its layers).
SQUASHED_ALL = (*SQUASHED, "clip", "tanh", "exp-softplus", "Activation(keras.activations.sigmoid)",
                "Dense(1, 'hard_sigmoid')", "Dense(1, keras.activations.sigmoid)",
                "Lambda(keras.ops.sigmoid)", "sigmoid then Reshape((1,))", "Dense(1, 'softmax')")


def squashed(how: str, dim: int = 2) -> Any:
    """A fresh seeded net on ``dim`` features outputting a probability (see :data:`SQUASHED_ALL`)."""
    _keras().utils.set_random_seed(0)
    return _squashed(dim, how)


__all__ = ["E", "R", "SQUASHED", "SQUASHED_ALL", "W", "X", "XE", "bad_arrays", "bad_binary",
           "bad_ints", "squashed"]
