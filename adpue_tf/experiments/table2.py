"""``adpue-tf bench neural``: the paper's Table 2 and Figures 3-4 with neural networks.

Data: Fashion-MNIST (Debian's IDX files), MNIST and CIFAR-10 (tensorflow-datasets,
where they can be loaded); label maps of SPEC.md. Images are the network's
input; exposure is drawn from a fixed random projection of the image to 13
features (:func:`adpue_tf.experiments.simulate.project_features`, the documented stand-in),
with the paper's mechanism. 10,000 rows are held out for the test set; the rest
is split ``r : (1-r)`` into PU and E parts (PUE) or PU and SSE parts (3SE) for
each separate ratio ``r``.

Models: an MLP 784-100-1 (ReLU) for MNIST and Fashion-MNIST, LeNet
(``C(6,5)-pool-C(16,5)-pool-120-84-1``) for CIFAR-10; Adam, learning rate 1e-3.
Methods: PUE — Logit, nnPU (oracle ``π_y``), ADPUE; 3SE — ADS, PNU (oracle
``π_y``), AD3SE. After every epoch the test accuracy, precision and recall are
recorded for the curves of Figures 3-4.

Example:
    >>> from adpue_tf.experiments.table2 import NeuralBenchConfig
    >>> NeuralBenchConfig(trials=2, epochs=1).ratios
    (0.1, 0.3, 0.5, 0.7, 0.9)
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import keras
import numpy as np

from adpue_tf import data, losses
from adpue_tf.experiments import simulate

__all__ = ["NeuralBenchConfig", "PUE_METHODS", "SSE_METHODS", "build_network", "run_trial"]

PUE_METHODS = ("Logit", "nnPU", "ADPUE")
SSE_METHODS = ("ADS", "PNU", "AD3SE")


@dataclasses.dataclass(frozen=True)
class NeuralBenchConfig:
    """Settings of the neural benchmark.

    Attributes:
        trials: trials per setting (>= 2 for a standard error).
        epochs: training epochs (the paper: 100).
        ratios: separate ratios ``r`` (share of the PU part).
        datasets: data set names.
        exposure_rate: target ``θ(e=1)``.
        n_test: held-out rows (the paper: 10,000).
        rows: use only this many rows of the data set (None: all); for CPU runs.
        batch_size: rows per batch.
        learning_rate: Adam's learning rate (the paper: 1e-3).
        pnu_eta: PNU's ``η``.
        ad3se_alpha: AD3SE's ``α``.
        seed: first seed.
    """

    trials: int = 100
    epochs: int = 100
    ratios: tuple[float, ...] = (0.1, 0.3, 0.5, 0.7, 0.9)
    datasets: tuple[str, ...] = ("mnist", "fashion_mnist", "cifar10")
    exposure_rate: float = 0.5
    n_test: int = 10_000
    rows: int | None = None
    batch_size: int = 512
    learning_rate: float = 1e-3
    pnu_eta: float = 0.5
    ad3se_alpha: float = 0.5
    seed: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.trials, int) or self.trials < 2:
            raise ValueError(
                f"`trials` must be an int >= 2 to report a standard error, got {self.trials!r}.")
        if not isinstance(self.epochs, int) or self.epochs < 1:
            raise ValueError(f"`epochs` must be an int >= 1, got {self.epochs!r}.")
        for r in self.ratios:
            if not 0.0 < float(r) < 1.0:
                raise ValueError(f"`ratios` must lie in (0, 1), got {r!r}.")
        if self.rows is not None and self.rows <= self.n_test:
            raise ValueError(f"`rows` ({self.rows}) must exceed `n_test` ({self.n_test}).")


def build_network(input_shape: tuple[int, ...]) -> keras.Model:
    """The paper's networks: MLP 784-100-1 for flat inputs, LeNet for images.

    Example:
        >>> build_network((784,)).count_params()
        78601
    """
    if len(input_shape) == 1:
        return keras.Sequential([keras.Input(input_shape),
                                 keras.layers.Dense(100, activation="relu"),
                                 keras.layers.Dense(1)])
    return keras.Sequential([
        keras.Input(input_shape),
        keras.layers.Conv2D(6, 5, activation="relu"), keras.layers.MaxPooling2D(),
        keras.layers.Conv2D(16, 5, activation="relu"), keras.layers.MaxPooling2D(),
        keras.layers.Flatten(),
        keras.layers.Dense(120, activation="relu"), keras.layers.Dense(84, activation="relu"),
        keras.layers.Dense(1)])


class _Curves(keras.callbacks.Callback):
    """Test accuracy, precision and recall after every epoch."""

    def __init__(self, x: np.ndarray, y: np.ndarray) -> None:
        super().__init__()
        self.x, self.y = x, y == 1
        self.history: dict[str, list[float]] = {"accuracy": [], "precision": [], "recall": []}

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        pred = self.model.predict(self.x, batch_size=4096, verbose=0).reshape(-1) > 0
        tp = float(np.sum(pred & self.y))
        self.history["accuracy"].append(float(np.mean(pred == self.y)))
        self.history["precision"].append(tp / max(float(np.sum(pred)), 1.0))
        self.history["recall"].append(tp / max(float(np.sum(self.y)), 1.0))


def _train(ds: Any, loss: keras.losses.Loss, cfg: NeuralBenchConfig, input_shape: tuple[int, ...],
           curves: _Curves, seed: int) -> keras.Model:
    keras.utils.set_random_seed(seed)
    model = build_network(input_shape)
    model.compile(optimizer=keras.optimizers.Adam(cfg.learning_rate), loss=loss)
    model.fit(ds, epochs=cfg.epochs, verbose=0, shuffle=False, callbacks=[curves])
    return model


def _accuracy(model: keras.Model, x: np.ndarray, y: np.ndarray) -> float:
    pred = model.predict(x, batch_size=4096, verbose=0).reshape(-1) > 0
    return float(np.mean(pred == (y == 1)))


def run_trial(x: np.ndarray, y: np.ndarray, features: np.ndarray, prior_y: float,
              cfg: NeuralBenchConfig, ratio: float, seed: int,
              report: Callable[[str], None] = lambda m: None) -> dict[str, dict[str, Any]]:
    """Every method on one trial of one separate ratio.

    Args:
        x: inputs ``(n, ...)`` (flat vectors or images).
        y: true labels ``(n,)``.
        features: 13 exposure features per row (see ``project_features``).
        prior_y: the oracle class prior ``π_y`` for nnPU and PNU.
        cfg: the settings.
        ratio: the separate ratio.
        seed: the trial's seed.
        report: called with each method's name when it is done.

    Returns:
        ``{method: {"inductive": acc, "transductive": acc, "curves": {...}}}``.
    """
    kw: dict[str, Any] = dict(exposure_rate=cfg.exposure_rate, split=ratio, n_test=cfg.n_test,
                              seed=seed, features=features)
    pue, sse = simulate.simulate_pue(x, y, **kw), simulate.simulate_3se(x, y, **kw)
    build: dict[str, Any] = dict(batch_size=cfg.batch_size, seed=seed)
    ds_pue = data.pue_dataset(pue.x_pu, pue.w_pu, pue.x_e, pue.e_e, **build)
    ds_sse = data.sse_dataset(sse.x_sse, sse.w_sse, sse.e_sse, **build)
    ds_3se = data.sse_pu_dataset(sse.x_sse, sse.w_sse, sse.e_sse, sse.x_pu, sse.w_pu, **build)
    # method -> (split, data, loss options); the method names are loss registry keys
    plan: dict[str, tuple[Any, Any, dict[str, Any]]] = {
        "Logit": (pue, ds_pue, {}),
        "nnPU": (pue, ds_pue, {"prior": prior_y}),
        "ADPUE": (pue, ds_pue, {}),
        "ADS": (sse, ds_sse, {}),
        "PNU": (sse, ds_sse, {"prior": prior_y, "eta": cfg.pnu_eta}),
        "AD3SE": (sse, ds_3se, {"alpha": cfg.ad3se_alpha}),
    }
    out = {}
    for method, (split, ds, options) in plan.items():
        loss = losses.get(method, from_logits=True, **options)
        curves = _Curves(split.x_test, split.y_test)
        model = _train(ds, loss, cfg, x.shape[1:], curves, seed)
        x_unk, y_unk = split.unknown()
        out[method] = {"inductive": curves.history["accuracy"][-1],
                       "transductive": _accuracy(model, x_unk, y_unk),
                       "curves": curves.history}
        report(method)
    return out
