"""Table 1's ``Recommended`` column: :func:`adpue_tf.fit_pue` with a linear net, one trial at a time.

Each trial's training rows come packed as ``(W, E, source)`` (the layout of
:mod:`adpue_tf.labels`); the column gives :func:`adpue_tf.fit_pue` that
trial's PU rows with their ``W`` and its E rows with their ``E``, never a
hidden ``Y`` or a test label, with the linear net
``keras.Sequential([keras.Input((d,)), keras.layers.Dense(1)])`` with the L2
penalty ``l2·‖w‖²``: by default two such nets, the other columns' ``l2`` and
``l2/10``, as a mapping (fit_pue keeps the first unless the other's choice
has a clearly lower held-out NLL; no single strength served every data set,
docs/guide/choosing-models.md), unless ``recommended_l2`` says otherwise; seed ``seed + t``.
The column scores the final model's logit (``> 0`` predicts ``Y = 1``).

Cost (2 CPU cores, one TensorFlow thread, under XLA): the first trial of a
process 19-42 s (every pass compiled), then a median 0.3-1.05 s a trial on the
paper's data sets with one split (an Intel Xeon VM; ``benchmarks/results/``
``JOURNAL.md``, entry ``linear.recommended.100trials.static.md``);
``adpue-tf bench linear --no-recommended``
skips the column.

Example:
    >>> RecommendedConfig().learning_rate
    0.01
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any, Callable

import keras
import numpy as np

import adpue_tf as adp

__all__ = ["NO_ORACLE", "RecommendedConfig", "comparison_rows", "fit_trials", "from_bench", "nets"]

#: Table 1 columns that need no oracle input (uPU, nnPU and PNU are given π_y).
NO_ORACLE = ("Logit", "EM", "Ratio", "IPS", "ElkanNoto", "ADPUE-direct", "ADPUE", "ADPUE-ref")
#: Source codes of the packed labels' third column (``adp.labels.Source``).
_PU, _E = int(adp.labels.Source.PU), int(adp.labels.Source.E)


@dataclasses.dataclass(frozen=True)
class RecommendedConfig:
    """The settings :func:`adpue_tf.fit_pue` is called with.

    Attributes:
        epochs: at most this many epochs per net (each keeps its best); 1: one
            epoch of ``min_steps`` steps, no epoch chosen (the linear nets of
            Table 1 trained to convergence: an epoch chosen on its ~40 held-out
            rows stopped them early, by noise).
        learning_rate: Adam's learning rate (0.01 suits a linear net; fit_pue's
            default 1e-3 is for deeper nets).
        min_steps: at least this many optimizer steps per net.
        batch_size: rows per batch (4096: every paper set's rows in one batch,
            full-batch steps as the other columns take; fit_pue then runs each
            epoch in one call, adpue_tf.recommend.full_batch).
        rounds: alternate-learning rounds of the ADPUE candidates.
        validation_split: share of the PU and E rows held out to choose.
        candidates: names of ``adp.recommend.CANDIDATES`` (None: fit_pue's default).
        l2: L2 penalty ``l2·‖w‖²`` on the net's weights (0: none), or several:
            one net each, fit_pue's mapping chooses (:func:`nets`).
        jit_compile: fit_pue's ``jit_compile`` (every net's step under XLA).
    """

    epochs: int = 1
    learning_rate: float = 0.01
    min_steps: int = 500
    batch_size: int = 4096
    rounds: int = 10
    validation_split: float = 0.2
    candidates: tuple[str, ...] | None = None
    l2: float | tuple[float, ...] = 0.0
    jit_compile: bool = False


def from_bench(cfg: Any) -> RecommendedConfig:
    """The settings from a ``LinearBenchConfig``'s ``recommended_*`` fields.

    Example:
        >>> from adpue_tf.experiments.table1 import LinearBenchConfig
        >>> from_bench(LinearBenchConfig(recommended_epochs=5)).epochs
        5
    """
    cand, l2 = cfg.recommended_candidates, cfg.recommended_l2
    if l2 is None:  # the table's penalty and a tenth of it (none: one net)
        l2 = (float(cfg.l2), float(cfg.l2) / 10) if cfg.l2 > 0 else (0.0,)
    l2s = (float(l2),) if isinstance(l2, (int, float)) else tuple(float(v) for v in l2)
    return RecommendedConfig(
        epochs=cfg.recommended_epochs, learning_rate=cfg.recommended_learning_rate,
        min_steps=cfg.recommended_min_steps, batch_size=cfg.recommended_batch_size,
        candidates=None if cand is None else tuple(cand),
        l2=l2s[0] if len(l2s) == 1 else l2s, jit_compile=cfg.recommended_jit)


def _linear(d: int, l2: float) -> Callable[[], keras.Model]:
    def build() -> keras.Model:
        reg = keras.regularizers.L2(l2) if l2 > 0 else None
        return keras.Sequential([keras.Input((d,)), keras.layers.Dense(1, kernel_regularizer=reg)])
    return build


def nets(d: int, l2: float | tuple[float, ...]
         ) -> Callable[[], keras.Model] | dict[str, Callable[[], keras.Model]]:
    """fit_pue's ``build_net``: the linear net with penalty ``l2``, or ``{"l2=v": net}`` for several.

    Example:
        >>> sorted(nets(3, (0.01, 0.001)))
        ['l2=0.001', 'l2=0.01']
    """
    values = (l2,) if isinstance(l2, (int, float)) else tuple(l2)
    if len(values) == 1:
        return _linear(d, float(values[0]))
    return {f"l2={v:g}": _linear(d, float(v)) for v in values}


def fit_trials(x: np.ndarray, y: np.ndarray, cfg: RecommendedConfig, *, seed: int = 0,
               details: dict[str, Any] | None = None) -> Callable[[np.ndarray], np.ndarray]:
    """``fit_pue`` on every trial's PU and E rows; a function of the per-trial logits.

    Args:
        x: training features of every trial, ``(T, n, d)``.
        y: their packed labels ``(T, n, 3)``: ``W``, ``E`` and the source
            (only the PU rows' ``W`` and the E rows' ``E`` are read).
        cfg: fit_pue's settings.
        seed: trial ``t`` runs with seed ``seed + t``.
        details: if given, ``details["Recommended"]`` gets per trial the
            ``choice``, the held-out ``score`` of the choice, the ``seconds``
            and the ``net`` kept (None with one net).

    Returns:
        ``score(x)``: ``(T, m, d)`` features to the ``(T, m)`` logits of each
        trial's model; NaN for a trial whose rows fit_pue refused (its
        ``ValueError``, e.g. a single observed positive, is the trial's
        ``choice``: ``"failed: ..."``), as the other columns' failed trials.

    Example:
        >>> rng = np.random.default_rng(0)
        >>> x = rng.normal(size=(1, 80, 2)).astype("float32")
        >>> src = np.r_[np.full(40, _PU), np.full(40, _E)]
        >>> w = np.where(src == _PU, (x[0, :, 0] > 0) * (rng.random(80) < .6), 0)
        >>> e = np.where(src == _E, rng.random(80) < .6, 0)
        >>> y = np.stack([w, e, src], -1)[None].astype("float32")
        >>> det = {}
        >>> score = fit_trials(x, y, RecommendedConfig(epochs=1, min_steps=5,
        ...                    candidates=("bce_w", "brier")), details=det)
        >>> score(x).shape, det["Recommended"]["choice"][0] in ("bce_w", "brier")
        ((1, 80), True)
    """
    x, y = np.asarray(x, np.float32), np.asarray(y, np.float32)
    if x.ndim != 3 or y.shape != (*x.shape[:2], 3):
        raise ValueError(f"`x` must be (trials, rows, features) and `y` (trials, rows, 3); "
                         f"got {x.shape} and {y.shape}.")
    build = nets(x.shape[2], cfg.l2)
    models: list[keras.Model] = []
    chosen: dict[str, list[Any]] = {"choice": [], "score": [], "seconds": [], "net": []}
    for t in range(len(x)):
        pu, ex = y[t, :, 2] == _PU, y[t, :, 2] == _E
        start = time.perf_counter()
        try:
            fit = adp.fit_pue(build, x[t, pu], y[t, pu, 0], x[t, ex], y[t, ex, 1],
                              epochs=cfg.epochs, batch_size=cfg.batch_size,
                              validation_split=cfg.validation_split, seed=seed + t, verbose=0,
                              candidates=cfg.candidates, learning_rate=cfg.learning_rate,
                              min_steps=cfg.min_steps, rounds=cfg.rounds,
                              jit_compile=cfg.jit_compile)
        except ValueError as err:  # the trial's rows refused (e.g. one observed positive)
            models.append(None)
            chosen["choice"].append(f"failed: {err}")
            chosen["score"].append(float("nan"))
            chosen["seconds"].append(round(time.perf_counter() - start, 1))
            chosen["net"].append(None)
            continue
        models.append(fit.model)
        chosen["choice"].append(fit.choice)
        chosen["score"].append(float(fit.scores[fit.choice]))
        chosen["seconds"].append(round(sum(fit.seconds.values()), 1))
        chosen["net"].append(fit.net)
    if details is not None:
        details["Recommended"] = chosen

    def score(features: np.ndarray) -> np.ndarray:
        f = np.asarray(features, np.float32)
        return np.stack([np.asarray(m(f[t]))[:, 0] if m is not None
                         else np.full(f.shape[1], np.nan) for t, m in enumerate(models)])

    return score


def comparison_rows(results: dict[Any, dict[str, dict[str, Any]]], rate: float
                    ) -> list[list[str]]:
    """Recommended against the best column without oracle inputs (:data:`NO_ORACLE`).

    Args:
        results: ``{alpha: {dataset: {method: [inductive, transductive]}}}``,
            per-trial accuracies (``bench linear``'s ``results`` layout).
        rate: the exposure rate, for the first cell.

    Returns:
        One row per setting and accuracy: rate, α, data set, accuracy,
        Recommended's mean, the best other mean (its column), the difference
        and ``met`` (Recommended ≥ best − 0.01) or ``**missed**``.

    Example:
        >>> comparison_rows({0.3: {"toy": {"Logit": [[0.7, 0.8], [0.6, 0.6]],
        ...     "Recommended": [[0.8, 0.8], [0.55, 0.6]]}}}, 0.5)[0][-3:]
        ['0.750 (Logit)', '+0.050', 'met']
    """
    rows = []
    for alpha, by_name in results.items():
        for name, res in by_name.items():
            if "Recommended" not in res:
                continue
            for k, kind in enumerate(("inductive", "transductive")):
                means = {m: float(np.nanmean(res[m][k])) for m in NO_ORACLE
                         if m in res and np.isfinite(res[m][k]).any()}
                if not means:
                    continue
                best = max(means, key=means.__getitem__)
                rec = float(np.nanmean(res["Recommended"][k]))
                rows.append([str(rate), str(alpha), name, kind, f"{rec:.3f}",
                             f"{means[best]:.3f} ({best})", f"{rec - means[best]:+.3f}",
                             "met" if rec >= means[best] - 0.01 else "**missed**"])
    return rows
