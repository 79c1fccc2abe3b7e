"""``fit_pue``: every estimator as a candidate, chosen on held-out rows, refitted on all rows.

The rule (``docs/guide/choosing-models.md``): hold out ``validation_split`` of
the PU rows and of the E rows; train every candidate of
:mod:`adpue_tf.recommend.candidates` on the rest; score each on the held-out
rows by the exposure Brier score ``mean_E[E·f²] - 2·mean_PU[W·f]``, whose
expectation is ``E_x[θ·(f - p)²]`` plus a constant — proper for ``p(y=1|x)``
and free of any exposure model ``θ̂``; among the candidates within
``tolerance`` standard errors of the best by it, the held-out likelihood of
``W`` under ``σ(z)·θ̂`` decides (sharper when ``θ̂`` is right, and a wrong
``θ̂`` can only choose among candidates the Brier score cannot separate);
refit the winner on every row with the epochs chosen.
"""

from __future__ import annotations

import dataclasses
import numbers
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

import keras
import numpy as np

from adpue_tf.data.rows import Rows, as_rows, layout, split_indices
from adpue_tf.recommend.candidates import CANDIDATES, DEFAULT_CANDIDATES, Settings, Stage

__all__ = ["PUEFit", "fit_pue"]


@dataclasses.dataclass(frozen=True)
class PUEFit:
    """What :func:`fit_pue` returns.

    Attributes:
        model: the chosen estimator as a Keras model, features -> one logit
            (``σ(logit)`` estimates ``p(y=1|x)``), trained on all rows.
        choice: the chosen candidate's name.
        scores: ``{candidate: held-out exposure Brier score}``, lower is better.
        exposure_nll: ``{candidate: held-out NLL of W under σ(z)·θ̂}``, shown
            for comparison (it leans on ``θ̂``; not used to choose).
        epochs: ``{net: epochs kept}`` (``"theta"`` is ``θ̂``).
        theta_calibration: ``θ̂`` on held-out E rows: ``log_loss``,
            ``log_loss_constant`` (of the constant rate) and ``calibration_error``.
        parts: the candidates a composite is made of (``"ratio"``, ``"average"``, ...).
        rows: ``{"pu": n, "e": n, "pu_held_out": n, "e_held_out": n}``.
        seconds: ``{"select": s, "refit": s}`` of wall time.
        candidates: ``{candidate: model}``, each trained on the training part
            only (to compare or inspect; ``model`` is the refitted choice).
        brier_gap_se: ``{candidate: standard error}`` of its Brier score minus
            the best one (paired over the held-out rows).
        failed: ``{candidate: why}`` for candidates whose net diverged before
            any usable epoch (left out of the choice), and a refit that
            diverged (then ``model`` is the one trained on the training part).
    """

    model: keras.Model
    choice: str
    scores: dict[str, float]
    exposure_nll: dict[str, float]
    epochs: dict[str, int]
    theta_calibration: dict[str, float]
    parts: dict[str, tuple[str, ...]]
    rows: dict[str, int]
    seconds: dict[str, float]
    candidates: dict[str, keras.Model] = dataclasses.field(default_factory=dict, repr=False)
    failed: dict[str, str] = dataclasses.field(default_factory=dict)
    brier_gap_se: dict[str, float] = dataclasses.field(default_factory=dict)

    def report(self) -> str:
        """A table of the candidates, best first, and the choice.

        Example:
            >>> print(_example_fit().report().splitlines()[0])
            fit_pue: chose bce_w (held-out exposure Brier score -0.1000; lower is better)
        """
        best = min(self.scores.values())
        lines = [f"fit_pue: chose {self.choice} (held-out exposure Brier score "
                 f"{self.scores[self.choice]:.4f}; lower is better)", "",
                 "| candidate | Brier | vs best (SE) | W NLL under θ̂ | epochs |",
                 "|---|---:|---:|---:|---:|"]
        for name, score in sorted(self.scores.items(), key=lambda kv: kv[1]):
            made = self.parts.get(name)
            epochs = "+".join(self.parts[name]) if made else str(self.epochs.get(name, ""))
            se = self.brier_gap_se.get(name, float("nan"))
            lines.append(f"| {name}{' ←' if name == self.choice else ''} | {score:.4f} | "
                         f"{score - best:+.4f} ({se:.4f}) | "
                         f"{self.exposure_nll.get(name, float('nan')):.4f} | {epochs} |")
        for name, why in self.failed.items():
            lines.append(f"| {name} | failed: {why} | | | |")
        cal = self.theta_calibration or {"log_loss": float("nan"),
                                         "log_loss_constant": float("nan"),
                                         "calibration_error": float("nan")}
        lines += ["", f"θ̂ on held-out E rows: log-loss {cal['log_loss']:.4f} (constant rate "
                      f"{cal['log_loss_constant']:.4f}), calibration error "
                      f"{cal['calibration_error']:.4f}.",
                  f"Rows: {self.rows['pu']} PU + {self.rows['e']} E "
                  f"({self.rows['pu_held_out']} + {self.rows['e_held_out']} held out); "
                  f"{self.seconds['select']:.0f} s choosing, {self.seconds['refit']:.0f} s refitting."]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.report()


def _example_fit() -> PUEFit:
    """A hand-made result for the doctests."""
    return PUEFit(keras.Sequential([keras.Input((1,)), keras.layers.Dense(1)]), "bce_w",
                  {"bce_w": -0.1, "ratio": -0.05}, {"bce_w": 0.3, "ratio": 0.31},
                  {"bce_w": 3, "theta": 2}, {"log_loss": 0.6, "log_loss_constant": 0.69,
                                              "calibration_error": 0.01},
                  {"ratio": ("bce_w", "theta")}, {"pu": 8, "e": 8, "pu_held_out": 2,
                                                  "e_held_out": 2},
                  {"select": 1.0, "refit": 0.5})


# -- argument checks --------------------------------------------------------------------
def _check_int(name: str, value: Any, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"`{name}` must be an int, got {value!r}.")
    if value < low:
        raise ValueError(f"`{name}` must be >= {low}, got {value}.")
    return int(value)


def _check_net(build_net: Callable[[], keras.Model]) -> None:
    """One call of ``build_net``: a Keras model with defined inputs, one logit out."""
    if not callable(build_net) or isinstance(build_net, keras.Model):
        raise TypeError("`build_net` must be a function that returns a fresh Keras model "
                        f"(features -> one logit), got {type(build_net).__name__}.")
    net = build_net()
    if not isinstance(net, keras.Model):
        raise TypeError(f"`build_net()` must return a keras.Model, got {type(net).__name__}.")
    if not net.built or not getattr(net, "inputs", None):
        raise ValueError("`build_net()` must return a model with defined inputs (a "
                         "keras.Sequential starting with keras.Input, or a functional model).")
    outputs = net.outputs
    if len(outputs) != 1 or tuple(outputs[0].shape[1:]) != (1,):
        raise ValueError("`build_net()` must return a model with one output of shape "
                         f"(batch, 1), a logit; got {[tuple(o.shape) for o in outputs]}.")
    activation = getattr(getattr(net.layers[-1], "activation", None), "__name__", None)
    if activation in ("sigmoid", "softmax"):
        raise ValueError(f"`build_net()` must output a logit, but its last layer applies "
                         f"{activation}; drop the activation (fit_pue applies the sigmoid).")


def _check_same_features(pu: Rows, e: Rows) -> None:
    if layout(pu.x) != layout(e.x):
        raise ValueError(f"`x_pu` and `x_e` must have the same features; got {layout(pu.x)} "
                         f"and {layout(e.x)}.")


def _check_labels(pu: Rows, e: Rows, held: int) -> None:
    if pu.y.sum() < 2:
        raise ValueError(f"`w` has {int(pu.y.sum())} observed positive(s); fit_pue needs at "
                         "least 2 (some for training, some held out).")
    if e.y.min() == e.y.max():
        raise ValueError(f"`e` holds only the value {int(e.y[0])}; the exposure log needs "
                         "exposed (1) and unexposed (0) rows.")
    if min(len(pu), len(e)) < 2 * held:
        raise ValueError(f"fit_pue needs at least {2 * held} PU rows and E rows, got "
                         f"{len(pu)} and {len(e)}.")


def _progress(verbose: Any, total: int) -> Callable[[str], None]:
    if verbose == "auto":
        verbose = 1
    if verbose not in (0, 1, 2) or isinstance(verbose, bool):
        raise ValueError(f"`verbose` must be 'auto', 0, 1 or 2, got {verbose!r}.")
    if verbose == 0:
        return lambda name: None
    tty = verbose == 1 and sys.stderr.isatty()
    count = [0]

    def show(name: str) -> None:
        count[0] += 1
        done = min(count[0], total)
        if tty:
            bar = "=" * (20 * done // total)
            sys.stderr.write(f"\rfit_pue [{bar:<20}] {done}/{total} {name:<14}")
            if done == total:
                sys.stderr.write("\n")
        else:
            sys.stderr.write(f"fit_pue: {done}/{total} training {name}\n")
        sys.stderr.flush()

    return show


def _candidates(candidates: Sequence[str] | str | None) -> tuple[str, ...]:
    if candidates is None:
        return DEFAULT_CANDIDATES
    if candidates == "all":
        return CANDIDATES
    if isinstance(candidates, str) or not isinstance(candidates, Sequence):
        raise TypeError(f"`candidates` must be a sequence of names, got {candidates!r}.")
    unknown = [c for c in candidates if c not in CANDIDATES]
    if unknown or not candidates:
        raise ValueError(f"`candidates` must be a non-empty subset of {list(CANDIDATES)}; "
                         f"unknown: {unknown}.")
    if "average" in candidates and len(candidates) < 3:
        raise ValueError("`average` needs at least two other candidates.")
    return tuple(c for c in CANDIDATES if c in candidates)


# -- the front door ---------------------------------------------------------------------
def fit_pue(build_net: Callable[[], keras.Model], x_pu: Any, w: Any, x_e: Any, e: Any, *,
            epochs: int = 20, batch_size: int = 512, validation_split: float = 0.2,
            seed: int = 0, verbose: int | str = "auto",
            candidates: Sequence[str] | str | None = None, learning_rate: float = 1e-2,
            min_steps: int = 500, rounds: int = 10, refit: bool = True,
            tolerance: float = 2.0) -> PUEFit:
    """Train every estimator of ``p(y=1|x)``, choose on held-out rows, refit the choice on all rows.

    Never reads a hidden ``Y``: only the PU rows ``(x_pu, W)`` and the exposure
    log ``(x_e, E)``, assumed drawn from the same feature distribution. The
    same ``seed`` gives the same choice and model.

    Args:
        build_net: returns a fresh Keras model (features -> one logit, no final
            sigmoid), e.g. ``lambda: keras.Sequential([keras.Input((d,)),
            keras.layers.Dense(1)])``. Called once per trained net.
        x_pu: PU features: an array ``(n_pu, ...)``, a dict of arrays, or a
            Dataset of unbatched ``(features, w)`` rows (then ``w=None``), e.g.
            :func:`adpue_tf.data.read_tfrecords` output.
        w: observed positives ``W = E·Y`` in {0, 1}, ``(n_pu,)``.
        x_e: exposure-log features, as ``x_pu``.
        e: exposures ``E`` in {0, 1}, ``(n_e,)``.
        epochs: at most this many epochs per net; each keeps its best epoch.
        batch_size: rows per batch.
        validation_split: share of the PU rows and of the E rows held out to
            choose, in ``(0, 0.5]``.
        seed: seeds the split, every net's initialisation and the shuffles.
        verbose: ``"auto"``/1: a progress bar on a terminal (a line per net
            otherwise), 2: a line per net, 0: silent.
        candidates: names of :data:`adpue_tf.recommend.CANDIDATES` to try, or
            ``"all"``; default :data:`adpue_tf.recommend.DEFAULT_CANDIDATES`.
        learning_rate: Adam's learning rate for every net (each net keeps its
            best epoch, so a rate on the high side costs little; image
            networks may prefer 1e-3).
        min_steps: each net takes at least this many optimizer steps over its
            ``epochs`` (small data sets get longer epochs).
        rounds: alternate-learning rounds over ``epochs`` (a refresh every
            ``epochs // rounds`` epochs) for ``adpue_rounds`` and ``adpue_ratio``.
        refit: refit the choice on all rows (False: keep the model trained on
            the training part).
        tolerance: candidates whose held-out Brier score is within this many
            standard errors (of the paired difference) of the best are
            indistinguishable by it; among them the held-out likelihood of
            ``W`` under ``σ(z)·θ̂`` chooses. 0: the Brier score alone.

    Returns:
        A :class:`PUEFit`: ``.model``, ``.choice``, ``.scores`` and ``.report()``.

    Raises:
        TypeError, ValueError: on bad input, naming the argument.

    Example:
        >>> import keras, adpue_tf as adp
        >>> s = adp.synthetic.synthetic_pue(600, 600, seed=0)
        >>> net = lambda: keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
        >>> fit = adp.fit_pue(net, s.x_pu, s.w_pu, s.x_e, s.e_e, epochs=2, min_steps=20,
        ...                   candidates=["bce_w", "brier"], verbose=0)
        >>> sorted(fit.scores), fit.model.output_shape
        (['bce_w', 'brier'], (None, 1))
    """
    _check_net(build_net)
    names = _candidates(candidates)
    cfg_epochs = _check_int("epochs", epochs, 1)
    if isinstance(validation_split, bool) or not isinstance(validation_split, numbers.Real) \
            or not 0.0 < float(validation_split) <= 0.5:
        raise ValueError(f"`validation_split` must be a number in (0, 0.5], got "
                         f"{validation_split!r}.")
    if isinstance(tolerance, bool) or not isinstance(tolerance, numbers.Real) \
            or not 0.0 <= float(tolerance) < np.inf:
        raise ValueError(f"`tolerance` must be a number >= 0, got {tolerance!r}.")
    if not isinstance(refit, bool):
        raise TypeError(f"`refit` must be a bool, got {refit!r}.")
    if isinstance(learning_rate, bool) or not isinstance(learning_rate, numbers.Real) \
            or not 0.0 < float(learning_rate) < np.inf:
        raise ValueError(f"`learning_rate` must be a positive number, got {learning_rate!r}.")
    lr = float(learning_rate)
    settings = Settings(epochs=cfg_epochs, batch_size=_check_int("batch_size", batch_size, 2),
                        min_steps=_check_int("min_steps", min_steps, 1),
                        rounds=_check_int("rounds", rounds, 1), seed=_check_int("seed", seed, 0),
                        optimizer=lambda: keras.optimizers.Adam(lr))
    show = _progress(verbose, len(names) + 1 + (len(names) if refit else 0))
    pu, ex = as_rows("x_pu", x_pu, "w", w), as_rows("x_e", x_e, "e", e)
    _check_same_features(pu, ex)
    _check_labels(pu, ex, 1)
    rng = np.random.default_rng(settings.seed)
    pu_tr, pu_ho = split_indices(len(pu), float(validation_split), rng)
    e_tr, e_ho = split_indices(len(ex), float(validation_split), rng)
    if pu.y[pu_tr].sum() == 0 or ex.y[e_tr].min() == ex.y[e_tr].max():
        raise ValueError("The training part lacks observed positives or one exposure value; "
                         "give more rows or a smaller `validation_split`.")

    start = time.perf_counter()
    select = Stage(build_net, pu.take(pu_tr), ex.take(e_tr), settings,
                   held_out=(pu.take(pu_ho), ex.take(e_ho)), progress=show)
    for name in names:
        select.try_get(name)
    trained = [n for n in names if n not in select.failed]
    if not trained:
        raise ValueError("Every candidate diverged: " + "; ".join(select.failed.values())
                         + ". Lower `learning_rate`.")
    best = min(trained, key=lambda n: (select.scores[n], names.index(n)))
    theta_ok = select.try_get("theta") is not None
    nll = {n: select.exposure_nll(n) for n in trained} if theta_ok else {}
    gap_se = {n: select.paired_se(n, best) for n in trained}
    # The Brier score (no θ̂) bounds the choice to the candidates it cannot tell from
    # the best (within `tolerance` standard errors); among them the likelihood
    # under θ̂, sharper when θ̂ is right, decides (benchmarks/results/selection.md).
    close = [n for n in trained
             if select.scores[n] - select.scores[best] <= tolerance * gap_se[n]]
    choice = min(close, key=lambda n: (nll[n], names.index(n))) if nll else best
    selected = time.perf_counter()
    model = select.get(choice)
    if refit:
        final = Stage(build_net, pu, ex, settings, epochs=select.best_epoch,
                      parts=select.parts, progress=show)
        refitted = final.try_get(choice)
        if refitted is None:  # diverged on all rows: keep the model of the training part
            failed = {**select.failed, choice: f"refit on all rows: {final.failed[choice]}"}
        else:
            model, failed = refitted, dict(select.failed)
    else:
        failed = dict(select.failed)
    if verbose and sys.stderr.isatty():
        sys.stderr.write("\n")
    return PUEFit(
        model=model, choice=choice, scores={n: select.scores[n] for n in trained},
        exposure_nll=nll, epochs=dict(select.best_epoch), brier_gap_se=gap_se,
        theta_calibration=select.theta_calibration() if theta_ok else {},
        parts={n: select.parts[n] for n in trained if n in select.parts},
        rows={"pu": len(pu), "e": len(ex), "pu_held_out": len(pu_ho), "e_held_out": len(e_ho)},
        seconds={"select": selected - start, "refit": time.perf_counter() - selected},
        candidates={n: select.models[n] for n in trained}, failed=failed)
