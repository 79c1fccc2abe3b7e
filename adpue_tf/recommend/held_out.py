"""A stage's held-out rows and its models' outputs on them, each computed once: :class:`HeldOut`.

A net's training keeps its best epoch by a held-out score (:class:`Scorer`,
called once an epoch by ``adpue_tf.recommend.train.HeldOutScore``); the
outputs of that epoch are kept with it, so the trained net is not run on
those rows again. A composite's outputs (``ratio``, ``blend``, ...) are its
head on its nets' outputs: what its model computes, without its model's pass.

Example:
    >>> import numpy as np
    >>> from adpue_tf.data.rows import as_rows
    >>> rows = as_rows("x", np.zeros((4, 1), "float32"), "y", np.array([0, 1, 0, 1]))
    >>> held = HeldOut((rows, rows), model_of=lambda name: None, heads={})
    >>> score = held.watch("theta", log_loss_scorer(rows, E))
    >>> round(score(lambda x, training: np.zeros((4, 1), "float32")), 4)
    0.6931
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import keras
import numpy as np

from adpue_tf._internal.numeric import sigmoid
from adpue_tf.data.rows import Rows
from adpue_tf.recommend.train import as_logits, finite_logits, outputs, usable_score
from adpue_tf.validation.scores import brier_unchecked

__all__ = ["E", "PU", "HeldOut", "Scorer", "brier_scorer", "log_loss", "log_loss_scorer"]

#: Which held-out rows: the PU rows or the E rows.
PU, E = 0, 1


def log_loss(y: np.ndarray, z: np.ndarray) -> float:
    """Mean cross-entropy of 0/1 labels ``y`` under logits ``z``."""
    return float(np.mean(np.logaddexp(0.0, z) - y * z))


class Scorer:
    """A net's held-out score (lower is better) that keeps its outputs at the best call.

    ``HeldOutScore`` keeps the weights of the lowest finite score; the outputs
    kept here are that epoch's (the same comparison).
    """

    def __init__(self, fn: Callable[[Any], tuple[float, dict[int, np.ndarray]]]) -> None:
        self.fn, self.best = fn, math.inf
        self.kept: dict[int, np.ndarray] = {}

    def __call__(self, model: Any) -> float:
        value, out = self.fn(model)
        if math.isfinite(value) and value < self.best:
            self.best, self.kept = value, out
        return value


def log_loss_scorer(rows: Rows, source: int) -> Scorer:
    """The log-loss of the labels of ``rows`` (those of ``source``): ``θ̂``'s and ``bce_w``'s score."""
    def score(m: Any) -> tuple[float, dict[int, np.ndarray]]:
        out = outputs(m, rows.x)
        return usable_score(log_loss, rows.y, as_logits(out)), {source: out}

    return Scorer(score)


def brier_scorer(pu: Rows, e: Rows) -> Scorer:
    """The exposure Brier score on held-out PU and E rows (inf when the logits blew up)."""
    def score(m: Any) -> tuple[float, dict[int, np.ndarray]]:
        out = {PU: outputs(m, pu.x), E: outputs(m, e.x)}
        z_pu, z_e = as_logits(out[PU]), as_logits(out[E])
        if not finite_logits(z_pu, z_e):
            return math.inf, out
        return brier_unchecked(pu.y, sigmoid(z_pu), e.y, sigmoid(z_e)), out

    return Scorer(score)


#: A stage's composites: name -> (the nets it reads, head: their outputs -> its output).
Heads = dict[str, tuple[tuple[str, ...], Callable[[dict], Any]]]


class HeldOut:
    """Held-out ``(pu, e)`` rows and the outputs of a stage's models on them (cached).

    Args:
        rows: the held-out PU rows and E rows.
        model_of: the trained model of a name (training it if needed).
        heads: the stage's heads (read when asked, so later entries count).
    """

    def __init__(self, rows: tuple[Rows, Rows], model_of: Callable[[str], keras.Model],
                 heads: Heads) -> None:
        self.rows, self._model_of, self._heads = rows, model_of, heads
        self._raw: dict[str, dict[int, np.ndarray]] = {}
        self._scorers: dict[str, Scorer] = {}
        self._logits: dict[str, tuple[np.ndarray, np.ndarray]] = {}

    def watch(self, name: str, scorer: Scorer) -> Scorer:
        """``scorer``, whose kept outputs become ``name``'s once it is trained."""
        self._scorers[name] = scorer
        return scorer

    def logits(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """Logits of model ``name`` (trained) on the held-out PU and E rows."""
        if name not in self._logits:
            self._logits[name] = (as_logits(self._outputs(name, PU)),
                                  as_logits(self._outputs(name, E)))
        return self._logits[name]

    def _outputs(self, name: str, source: int) -> np.ndarray:
        """Those its training scored at its kept epoch, else a composite's head on its
        nets' outputs (what its model computes), else the model's."""
        if name not in self._heads:
            self._model_of(name)  # trains it (a composite's head then reads its nets)
        raw = self._raw.setdefault(name, {})
        scorer = self._scorers.pop(name, None)
        if scorer is not None:
            raw.update({k: v for k, v in scorer.kept.items() if k not in raw})
        if source not in raw:
            nets, head = self._heads.get(name, ((name,), None))
            if nets == (name,) or head is None:
                raw[source] = outputs(self._model_of(name), self.rows[source].x)
            else:
                parts = {n: keras.ops.convert_to_tensor(self._outputs(n, source)) for n in nets}
                raw[source] = np.asarray(keras.ops.convert_to_numpy(head(parts)))
        return raw[source]
