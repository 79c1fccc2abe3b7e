"""``adpue-tf bench neural``: the paper's Table 2 and Figures 3-4 with neural networks.

Fashion-MNIST, MNIST and CIFAR-10 with the paper's label maps and exposure
mechanism (on a fixed 13-feature projection of each image); an MLP or LeNet
trained with Adam; after every epoch the test accuracy, precision and recall
for the curves. ``ADPUE`` is the recommended recipe (alternate learning, the
round chosen on held-out training rows by the exposure likelihood). Data,
models and methods: ``docs/api/experiments.md``.

Example:
    >>> from adpue_tf.experiments.table2 import NeuralBenchConfig
    >>> NeuralBenchConfig(trials=2, epochs=1).ratios
    (0.1, 0.3, 0.5, 0.7, 0.9)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, Callable

import keras
import numpy as np
import tensorflow as tf

import adpue_tf as adp
from adpue_tf import data, losses, validation
from adpue_tf.callbacks import BestRound, RefreshDagger
from adpue_tf.experiments import simulate
from adpue_tf.experiments.helpers import check_settings
from adpue_tf.losses import is_divergence
from adpue_tf.model import DebiasedModel

__all__ = ["NeuralBenchConfig", "PUE_METHODS", "SSE_METHODS", "build_network",
           "fit_exposure_network", "run_trial", "train_recipe", "train_recommended"]

PUE_METHODS = ("Logit", "nnPU", "ADPUE-direct", "ADPUE", "Recommended")
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
        val_fraction: share of the PU rows and of the E rows held out to
            choose ADPUE's round (in ``(0, 0.5]``).
        refresh_every: epochs per alternate-learning round of ADPUE.
        theta_epochs: epochs of the exposure network ``θ̂`` (BCE on ``E``).
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
    val_fraction: float = 0.2
    refresh_every: int = 1
    theta_epochs: int = 10

    def __post_init__(self) -> None:
        if not isinstance(self.trials, int) or self.trials < 2:
            raise ValueError(
                f"`trials` must be an int >= 2 to report a standard error, got {self.trials!r}.")
        if not isinstance(self.epochs, int) or self.epochs < 1:
            raise ValueError(f"`epochs` must be an int >= 1, got {self.epochs!r}.")
        for r in self.ratios:
            if not 0.0 < float(r) < 1.0:
                raise ValueError(f"`ratios` must lie in (0, 1), got {r!r}.")
        check_settings("ratios", self.ratios, "separate ratio")
        if not 0.0 < float(self.val_fraction) <= 0.5:
            raise ValueError(f"`val_fraction` must lie in (0, 0.5], got {self.val_fraction!r}.")
        for name in ("refresh_every", "theta_epochs", "n_test"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"`{name}` must be an int >= 1, got {value!r}.")
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
           curves: _Curves, seed: int) -> tuple[keras.Model, int | None]:
    """Fit one baseline; ``(model, None)``, or ``(model, epoch)`` if it diverged in that epoch.

    A risk unbounded below (PNU's uPU part with the logistic loss) can drive the
    logits past ±10⁴, where the library stops training before the step. The
    model then keeps its last weights; its curves stay flat for the epochs not run.
    """
    keras.utils.set_random_seed(seed)
    model = build_network(input_shape)
    model.compile(optimizer=keras.optimizers.Adam(cfg.learning_rate), loss=loss)
    try:
        model.fit(ds, epochs=cfg.epochs, verbose=0, shuffle=False, callbacks=[curves])
    except tf.errors.InvalidArgumentError as err:
        if not is_divergence(err):
            raise
        done = len(curves.history["accuracy"])
        curves.on_epoch_end(done)  # the state it stopped in
        for values in curves.history.values():
            values.extend(values[-1:] * (cfg.epochs - len(values)))
        return model, done + 1
    return model, None


def _accuracy(model: keras.Model, x: np.ndarray, y: np.ndarray) -> float:
    pred = model.predict(x, batch_size=4096, verbose=0).reshape(-1) > 0
    return float(np.mean(pred == (y == 1)))


def _holdout(n: int, fraction: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Sorted (kept, held-out) row indices; at least one row on each side."""
    k = min(max(int(round(n * fraction)), 1), n - 1)
    order = rng.permutation(n)
    return np.sort(order[k:]), np.sort(order[:k])


def fit_exposure_network(x_e: np.ndarray, e: np.ndarray, cfg: NeuralBenchConfig,
                         seed: int) -> keras.Model:
    """``θ̂(e=1|x)``: the benchmark's network trained with BCE on the exposure log.

    Args:
        x_e: exposure-log inputs ``(n, ...)``.
        e: their ``E`` in {0, 1}.
        cfg: the settings (``batch_size``, ``learning_rate``, ``theta_epochs``).
        seed: seeds the initial weights and the shuffling.

    Returns:
        A model mapping inputs to probabilities ``(n, 1)``.

    Example:
        >>> import numpy as np
        >>> x = np.random.default_rng(0).normal(size=(40, 4)).astype("float32")
        >>> cfg = NeuralBenchConfig(trials=2, epochs=1, theta_epochs=1)
        >>> fit_exposure_network(x, x[:, 0] > 0, cfg, seed=0).predict(x, verbose=0).shape
        (40, 1)
    """
    keras.utils.set_random_seed(seed)
    net = build_network(x_e.shape[1:])
    net.compile(optimizer=keras.optimizers.Adam(cfg.learning_rate),
                loss=keras.losses.BinaryCrossentropy(from_logits=True))
    net.fit(x_e, np.asarray(e, "float32").reshape(-1, 1), batch_size=cfg.batch_size,
            epochs=cfg.theta_epochs, verbose=0)
    return keras.Sequential([net, keras.layers.Activation("sigmoid")])


def _half(x: np.ndarray) -> np.ndarray:
    return np.full((len(x), 1), 0.5, "float32")


def train_recipe(pue: simulate.PUESplit, cfg: NeuralBenchConfig, seed: int,
                 callbacks: Sequence[keras.callbacks.Callback] = ()) -> tuple[keras.Model, dict]:
    """ADPUE's recipe on one PUE split: rounds from ``mean(W)``, chosen on held-out rows.

    ``cfg.val_fraction`` of the PU rows and of the E rows are held out (seeded);
    ``θ̂`` is :func:`fit_exposure_network` on the other E rows; a
    :class:`~adpue_tf.DebiasedModel` starts from ``f†₀ = mean(W)`` of the kept
    PU rows and is refreshed every ``cfg.refresh_every`` epochs for
    ``cfg.epochs`` epochs; :class:`~adpue_tf.callbacks.BestRound` keeps the
    round with the lowest ``val_exposure_nll`` on the held-out rows. No label
    ``Y`` is read.

    Args:
        pue: the trial's split (only ``x_pu, w_pu, x_e, e_e`` are read).
        cfg: the settings.
        seed: the trial's seed.
        callbacks: more callbacks for ``fit`` (run before the refresh).

    Returns:
        ``(model, info)``: the model restored to the chosen round, and
        ``{"round", "epoch", "score", "f0"}`` of that choice.

    Example:
        >>> import numpy as np
        >>> from adpue_tf.experiments import simulate
        >>> rng = np.random.default_rng(0)
        >>> x = rng.normal(size=(400, 13)).astype("float32")
        >>> pue = simulate.simulate_pue(x, (x[:, 0] > 0).astype(int), exposure_rate=0.5,
        ...                             split=0.5, n_test=100, seed=0)
        >>> cfg = NeuralBenchConfig(trials=2, epochs=2, theta_epochs=1, batch_size=64)
        >>> model, info = train_recipe(pue, cfg, seed=0)
        >>> info["round"] in (1, 2)
        True
    """
    rng = np.random.default_rng([seed, 7])
    pu_fit, pu_val = _holdout(len(pue.w_pu), cfg.val_fraction, rng)
    e_fit, e_val = _holdout(len(pue.e_e), cfg.val_fraction, rng)
    theta = fit_exposure_network(pue.x_e[e_fit], pue.e_e[e_fit], cfg, seed)
    val = validation.pue_validation_data(
        pue.x_pu[pu_val], pue.w_pu[pu_val], pue.x_e[e_val], pue.e_e[e_val],
        exposure_model=theta, reference=_half, batch_size=min(4096, len(pu_val) + len(e_val)))
    train = data.pue_dataset(pue.x_pu[pu_fit], pue.w_pu[pu_fit], pue.x_e[e_fit],
                             pue.e_e[e_fit], batch_size=cfg.batch_size, seed=seed)
    f0 = float(np.mean(pue.w_pu[pu_fit]))
    keras.utils.set_random_seed(seed)
    model = DebiasedModel(build_network(pue.x_pu.shape[1:]), initial_dagger=f0)
    model.compile(optimizer=keras.optimizers.Adam(cfg.learning_rate),
                  loss=losses.ADPUELoss(from_logits=True),
                  metrics=[validation.ExposureLikelihood(from_logits=True)])
    best = BestRound(monitor="val_exposure_nll", mode="min")
    model.fit(train, validation_data=val, epochs=cfg.epochs, verbose=0, shuffle=False,
              callbacks=[*callbacks, RefreshDagger(every_n_epochs=cfg.refresh_every), best])
    return model, {"round": best.best_round, "epoch": best.best_epoch,
                   "score": best.best_score, "f0": f0}


def train_recommended(pue: simulate.PUESplit, cfg: NeuralBenchConfig, seed: int,
                      curves: _Curves) -> tuple[keras.Model, dict]:
    """The library's recommended pipeline, :func:`adpue_tf.fit_pue`, with the benchmark's network.

    Reads only ``x_pu, w_pu, x_e, e_e``. Its curves have one point per epoch
    of nothing (fit_pue trains several nets): the accuracy of the model kept,
    repeated, so that plots stay aligned.

    Returns:
        ``(model, {"choice", "scores", "brier_gap_se", "exposure_nll", "nll_gap_se"})``:
        the choice and what the rule chose it by (``adp.recommend.choose``).
    """
    fit = adp.fit_pue(lambda: build_network(pue.x_pu.shape[1:]), pue.x_pu, pue.w_pu,
                      pue.x_e, pue.e_e, epochs=cfg.epochs, batch_size=cfg.batch_size,
                      validation_split=cfg.val_fraction, seed=seed,
                      learning_rate=cfg.learning_rate, verbose=0)
    curves.set_model(fit.model)
    curves.on_epoch_end(0)
    for values in curves.history.values():
        values.extend(values[-1:] * (cfg.epochs - len(values)))
    return fit.model, {"choice": fit.choice, "scores": fit.scores,
                       "brier_gap_se": fit.brier_gap_se, "exposure_nll": fit.exposure_nll,
                       "nll_gap_se": fit.nll_gap_se}


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
        ``{method: {"inductive": acc, "transductive": acc, "curves": {...}}}``;
        ADPUE's entry adds ``"recipe"``: the round chosen (see :func:`train_recipe`);
        Recommended's adds ``"recommended"``: fit_pue's choice and scores;
        a baseline whose outputs blew up adds ``"diverged_epoch"`` (1-based).
        The accuracies are those of the model kept (ADPUE: the chosen round's;
        the curves show every epoch).
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
        "ADPUE-direct": (pue, ds_pue, {}),
        "ADPUE": (pue, ds_pue, {}),
        "Recommended": (pue, ds_pue, {}),
        "ADS": (sse, ds_sse, {}),
        "PNU": (sse, ds_sse, {"prior": prior_y, "eta": cfg.pnu_eta}),
        "AD3SE": (sse, ds_3se, {"alpha": cfg.ad3se_alpha}),
    }
    out = {}
    for method, (split, ds, options) in plan.items():
        curves = _Curves(split.x_test, split.y_test)
        extra: dict[str, Any] = {}
        if method == "ADPUE":
            model, extra["recipe"] = train_recipe(pue, cfg, seed, callbacks=[curves])
        elif method == "Recommended":
            model, extra["recommended"] = train_recommended(pue, cfg, seed, curves)
        else:
            loss = losses.get(method.removesuffix("-direct"), from_logits=True, **options)
            model, diverged = _train(ds, loss, cfg, x.shape[1:], curves, seed)
            if diverged is not None:
                extra["diverged_epoch"] = diverged
        x_unk, y_unk = split.unknown()
        out[method] = {"inductive": _accuracy(model, split.x_test, split.y_test),
                       "transductive": _accuracy(model, x_unk, y_unk),
                       "curves": curves.history, **extra}
        report(method)
    return out
