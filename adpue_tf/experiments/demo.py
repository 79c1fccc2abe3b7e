"""The first demo: a semi-synthetic PUE experiment on breast-cancer data.

scikit-learn's ``load_breast_cancer`` (569 rows, 30 features; positive = the
"benign" class, 357 rows) is standardised, exposure is drawn with the paper's
mechanism (``θ(e=1|x) = min(1, C·σ(x13·g1 + (1-x13)·g2))``, ``C`` calibrated
to the exposure rate), and the training rows are split into PU and E parts.
Three linear models are fitted per seed on the same batches:

* Logit: cross-entropy with the observed ``W`` as label;
* nnPU: Kiryo et al.'s non-negative PU risk with the true class prior
  ``π_y`` (an oracle input);
* ADPUE: the nnPUE risk with the exposure log.

Accuracy is measured on the held-out test rows (inductive) and on the
training rows whose label is unknown (transductive).

Example:
    >>> from adpue_tf.experiments.demo import DemoConfig
    >>> DemoConfig(seeds=2).methods
    ('Logit', 'nnPU', 'ADPUE')
"""

from __future__ import annotations

import dataclasses
import sys
from typing import Callable, TextIO

import keras
import numpy as np

from adpue_tf import data, losses
from adpue_tf.experiments import simulate
from adpue_tf.experiments.progress import Progress
from adpue_tf.experiments.report import cell, markdown_table, mean_se

__all__ = ["DemoConfig", "MethodScore", "run_demo", "format_table"]


@dataclasses.dataclass(frozen=True)
class DemoConfig:
    """Settings of the demo.

    Attributes:
        seeds: number of trials (seeds ``0 .. seeds-1``), at least 2 for a SE.
        epochs: training epochs per model.
        exposure_rate: target ``θ(e=1)``.
        split: share of the training rows in the PU part (the rest is E).
        n_test: held-out test rows.
        batch_size: rows per batch.
        learning_rate: Adam's learning rate.
    """

    seeds: int = 5
    epochs: int = 60
    exposure_rate: float = 0.5
    split: float = 0.5
    n_test: int = 169
    batch_size: int = 64
    learning_rate: float = 0.02
    methods: tuple[str, ...] = ("Logit", "nnPU", "ADPUE")

    def __post_init__(self) -> None:
        if not isinstance(self.seeds, int) or self.seeds < 2:
            raise ValueError(f"`seeds` must be an int >= 2 (a standard error needs 2), got {self.seeds!r}.")
        if not isinstance(self.epochs, int) or self.epochs < 1:
            raise ValueError(f"`epochs` must be an int >= 1, got {self.epochs!r}.")
        if not 0.0 < self.split < 1.0:
            raise ValueError(f"`split` must be in (0, 1), got {self.split!r}.")


@dataclasses.dataclass(frozen=True)
class MethodScore:
    """Accuracies of one method over the trials."""

    method: str
    inductive: tuple[float, ...]
    transductive: tuple[float, ...]

    def summary(self) -> dict[str, tuple[float, float]]:
        """``{"inductive": (mean, se), "transductive": (mean, se)}``."""
        return {"inductive": mean_se(self.inductive), "transductive": mean_se(self.transductive)}


def _load() -> tuple[np.ndarray, np.ndarray]:
    try:
        from sklearn.datasets import load_breast_cancer
    except ImportError as err:  # pragma: no cover - depends on the install
        raise ImportError(
            "The demo needs scikit-learn: pip install 'adpue_tf[bench]'."
        ) from err
    bunch = load_breast_cancer()
    x = bunch.data.astype(np.float64)
    x = (x - x.mean(axis=0)) / x.std(axis=0)
    return x.astype(np.float32), bunch.target.astype(np.float32)


def _loss(method: str, prior_y: float) -> keras.losses.Loss:
    # The method names are registry keys (any case): "Logit", "nnPU", "ADPUE".
    prior = {"prior": prior_y} if "prior" in losses.get_class(method).option_names() else {}
    return losses.get(method, from_logits=True, **prior)


def _accuracy(model: keras.Model, x: np.ndarray, y: np.ndarray) -> float:
    z = keras.ops.convert_to_numpy(model(x, training=False)).reshape(-1)
    return float(np.mean((z > 0).astype(np.float32) == y))


def _trial(cfg: DemoConfig, x: np.ndarray, y: np.ndarray, seed: int,
           report: Callable[[str], None]) -> dict[str, tuple[float, float]]:
    split = simulate.simulate_pue(x, y, exposure_rate=cfg.exposure_rate, split=cfg.split,
                                  n_test=cfg.n_test, seed=seed)
    prior_y = float(np.mean(np.concatenate([split.y_pu, split.y_e])))
    ds = data.pue_dataset(split.x_pu, split.w_pu, split.x_e, split.e_e,
                          batch_size=cfg.batch_size, seed=seed)
    x_unk, y_unk = split.unknown()
    out = {}
    for method in cfg.methods:
        keras.utils.set_random_seed(seed)
        model = keras.Sequential([keras.Input((x.shape[1],)), keras.layers.Dense(1)])
        model.compile(optimizer=keras.optimizers.Adam(cfg.learning_rate),
                      loss=_loss(method, prior_y))
        model.fit(ds, epochs=cfg.epochs, verbose=0, shuffle=False)
        out[method] = (_accuracy(model, split.x_test, split.y_test),
                       _accuracy(model, x_unk, y_unk))
        report(f"seed {seed} {method}: accuracy {out[method][0]:.3f}")
    return out


def run_demo(cfg: DemoConfig = DemoConfig(), *, progress: TextIO | None = sys.stderr) -> list[MethodScore]:
    """Run the demo and return each method's accuracies over the seeds.

    Args:
        cfg: the settings.
        progress: stream for the progress display (None for silence).

    Returns:
        One :class:`MethodScore` per method, in ``cfg.methods`` order.
    """
    x, y = _load()
    bar = Progress(cfg.seeds * len(cfg.methods), stream=progress)
    results: dict[str, list[tuple[float, float]]] = {m: [] for m in cfg.methods}
    for seed in range(cfg.seeds):
        for method, accs in _trial(cfg, x, y, seed, bar.step).items():
            results[method].append(accs)
    bar.close()
    return [MethodScore(m, tuple(a for a, _ in r), tuple(t for _, t in r))
            for m, r in results.items()]


def format_table(scores: list[MethodScore], cfg: DemoConfig) -> str:
    """A Markdown table of mean ± standard error over the trials.

    Example:
        >>> s = [MethodScore("ADPUE", (0.9, 0.8), (0.7, 0.9))]
        >>> print(format_table(s, DemoConfig(seeds=2)).splitlines()[-1])
        | ADPUE | 0.850 ± 0.050 | 0.800 ± 0.100 |
    """
    head = (f"breast_cancer PUE demo: {cfg.seeds} trials, exposure rate "
            f"{cfg.exposure_rate}, split {cfg.split}, {cfg.epochs} epochs "
            "(nnPU gets the true class prior: an oracle input)\n\n")
    rows = [[s.method, cell(s.inductive), cell(s.transductive)] for s in scores]
    return head + markdown_table(["method", "inductive accuracy", "transductive accuracy"], rows)
