"""``fit_pue``: every estimator as a candidate, chosen on held-out rows, refitted on all rows.

The rule (``docs/guide/choosing-models.md``): hold out ``validation_split`` of
the PU rows and of the E rows; train every
candidate of :mod:`adpue_tf.recommend.candidates` on the rest; score each on
the held-out rows by the exposure Brier score ``mean_E[E·f²] - 2·mean_PU[W·f]``, whose
expectation is ``E_x[θ·(f - p)²]`` plus a constant — proper for ``p(y=1|x)``
and free of any exposure model ``θ̂``; among the candidates within
``tolerance`` standard errors of the best by it, the held-out likelihood of
``W`` under ``σ(z)·θ̂`` decides (sharper when ``θ̂`` is right, and a wrong
``θ̂`` can only choose among candidates the Brier score cannot separate;
Ratio and ``likelihood_theta``, whose estimates read that ``θ̂``, only as the best), but the
fixed ``blend`` stays unless one of the two scores shows another better
(the likelihood never those two), and always when fewer than
:data:`~adpue_tf.recommend.MIN_POSITIVES` observed positives are held out (:func:`choose`);
refit the nets the winner predicts with on every row for the epochs chosen;
the nets it only trains with (``θ̂``, say) are shared from the choice.
"""

from __future__ import annotations

import contextlib
import numbers
import sys
import time
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, TypedDict

if sys.version_info >= (3, 11):
    from typing import Unpack
else:  # Python 3.10: TensorFlow installs typing_extensions
    from typing_extensions import Unpack

import keras
import numpy as np

from adpue_tf._internal.checks import check_bool, check_int, check_same_columns, table_columns
from adpue_tf._internal.numeric import sigmoid
from adpue_tf._internal.seeding import kept_random_state
from adpue_tf._internal.tracing import quiet_retracing
from adpue_tf.data.rows import Rows, as_rows, split_indices
from adpue_tf.recommend.candidates import PREFERRED, TABLE, THETA, net_seed
from adpue_tf.recommend.compose import LogitMix
from adpue_tf.recommend.inputs import (
    check_builders,
    check_ids,
    check_inputs,
    check_labels,
    check_logit,
    check_net,
    check_same_features,
    check_whole,
    scale_hint,
    shift_hint,
    unused_features,
)
from adpue_tf.recommend.overlap import unexposed_positives_warning, warn_theta
from adpue_tf.recommend.result import PUEFit
from adpue_tf.recommend.rule import choose, hedge_share, overruled_anyway, skill
from adpue_tf.recommend.select import NET_TOLERANCE, Selection, pick_net, select
from adpue_tf.recommend.stage import Stage, train_all
from adpue_tf.recommend.train import Settings

__all__ = ["RETIRED", "FitOptions", "MIN_HELD_OUT", "NET_TOLERANCE", "PUEFit", "choose", "fit_pue",
           "split_rows"]

#: Held-out rows of each log fit_pue needs at least to score its candidates.
MIN_HELD_OUT = 5


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
    every = tuple(n for n in TABLE if n != THETA)  # the table as it is now (a user's entry too)
    if candidates is None:
        return tuple(n for n in every if TABLE[n].default)
    if candidates == "all":
        return every
    if isinstance(candidates, str) or not isinstance(candidates, Sequence):
        raise TypeError(f"`candidates` must be a sequence of names, \"all\" or None, got "
                        f"{candidates!r}.")
    if not candidates:
        raise ValueError(f"`candidates` is empty; give some of {list(every)}, \"all\" or "
                         "None (the defaults).")
    unknown = [c for c in candidates if c not in every]
    if unknown:
        raise ValueError(f"`candidates` must be a subset of {list(every)}; unknown: {unknown}.")
    chosen = tuple(c for c in every if c in candidates)  # each name once, in order
    if "average" in chosen and len(chosen) < 3:
        raise ValueError("`average` needs at least two other candidates.")
    return chosen


class FitOptions(TypedDict, total=False):
    """:func:`fit_pue`'s keywords beyond the usual five, each with the default the evidence chose.

    Pass them as keywords, ``fit_pue(..., refit=False)``, or as a dict,
    ``fit_pue(..., **options)``. What each does, and the measurements behind
    its default: ``docs/guide/choosing-models.md``, *fit_pue's arguments*.

    Attributes:
        candidates: names of ``CANDIDATES`` to try, or ``"all"``; default
            ``None``: ``DEFAULT_CANDIDATES``.
        tolerance: standard errors within which the Brier score cannot separate
            two candidates (the likelihood of ``W`` decides); default 2.0.
        refit: False: ``.model`` is the choice as trained on the training part,
            not refitted on every row; default True.
        learning_rate: Adam's learning rate for every net; default 1e-2.
        min_steps: optimizer steps each net takes at least: on small data each
            epoch grows to reach them over ``epochs``; default 500.
        rounds: alternate-learning rounds of ``adpue_rounds`` and ``adpue_ratio``,
            at most one a epoch (``epochs`` rounds when it exceeds ``epochs``);
            default 10.
        patience: epochs without improvement that end a pass, None: all
            ``epochs``; default 2.
        jit_compile: compile every net's training step with XLA; default False.
        hedge: where the choice resolves little of ``p`` on the held-out rows,
            mix its logit with ``bce_w``'s (:func:`adpue_tf.recommend.rule.hedge_share`);
            False for a log whose exposure is known not to depend on conversion
            (a randomised policy); default True.

    Example:
        >>> options: FitOptions = {"tolerance": 1.0, "refit": False}
        >>> sorted(set(options) - set(FitOptions.__optional_keys__))
        []
    """

    candidates: Sequence[str] | str | None
    tolerance: float
    refit: bool
    learning_rate: float
    min_steps: int
    rounds: int
    patience: int | None
    jit_compile: bool
    hedge: bool


#: Options fit_pue no longer takes, and what to do instead.
RETIRED = {
    "folds": "K-fold cross-fitting chose no better than one split on small data at about 3x "
             "the cost and was retired; fit_pue holds out `validation_split` of each log "
             "(docs/guide/choosing-models.md, Small data)",
    "final": "it was retired with `folds`; pass refit=False for the choice as trained on "
             "the training part",
}


def _check_options(options: Mapping[str, Any]) -> None:
    """A ``TypeError`` naming an unknown keyword and the options there are."""
    unknown = sorted(set(options) - set(FitOptions.__optional_keys__))
    retired = [k for k in unknown if k in RETIRED]
    if retired:
        raise TypeError(f"fit_pue() no longer takes `{retired[0]}`: {RETIRED[retired[0]]}.")
    if unknown:
        raise TypeError(
            f"fit_pue() got an unexpected keyword argument {unknown[0]!r}; besides epochs, "
            "batch_size, validation_split, seed and verbose it takes the options "
            f"{sorted(FitOptions.__optional_keys__)} (adpue_tf.recommend.FitOptions).")


# -- the front door ---------------------------------------------------------------------
@contextlib.contextmanager
def _one_call() -> Iterator[None]:
    """A fit_pue call: TensorFlow's retracing warning dropped (its fresh nets' are not the
    user's), the caller's global random state as it was (its nets are seeded through it)."""
    with kept_random_state(), quiet_retracing():
        yield


@_one_call()
def fit_pue(build_net: Callable[[], keras.Model] | Mapping[str, Callable[[], keras.Model]],
            x_pu: Any, w: Any, x_e: Any, e: Any, *,
            epochs: int = 20, batch_size: int = 512, validation_split: float = 0.2,
            seed: int = 0, verbose: int | str = "auto", **options: Unpack[FitOptions]) -> PUEFit:
    """Train every estimator of ``p(y=1|x)``, choose one on held-out rows, refit it on all rows.

    Reads the PU rows ``(x_pu, W)`` and the exposure log ``(x_e, E)`` of the same
    features, never a hidden ``Y``; the same ``seed`` gives the same choice and
    model; keeps nothing after it returns (loops: ``adp.experiments.keep_compiled()``).
    The rule, each argument's details, the evidence: ``docs/guide/choosing-models.md``.

    Args:
        build_net: returns a fresh Keras model, features -> one logit (no final
            sigmoid), once per net; or ``{name: build_net}`` to choose the net too.
        x_pu: PU features: an array, a dict of arrays, or a Dataset of
            unbatched ``(features, w)`` rows (then ``w=None``).
        w: observed positives ``W = E·Y`` in {0, 1}, ``(n_pu,)``.
        x_e: exposure-log features, as ``x_pu``.
        e: exposures ``E`` in {0, 1}, ``(n_e,)``.
        epochs: at most this many epochs per net; each keeps its best epoch.
        batch_size: rows per batch.
        validation_split: share of the PU rows and of the E rows held out, in ``(0, 0.5]``.
        seed: any int ``>= 0``: seeds the split, every net and the shuffles.
        verbose: ``"auto"``/1: a progress bar, 2: a line per net, 0: silent.
        **options: :class:`FitOptions`, each with a default: ``candidates``,
            ``tolerance``, ``refit`` (what is tried and kept),
            ``learning_rate``, ``min_steps``, ``rounds``, ``patience``, ``jit_compile``,
            ``hedge``.

    Returns:
        A :class:`PUEFit`: ``.model``, ``.choice``, ``.scores`` and ``.report()``.

    Raises:
        TypeError, ValueError: on bad input or an unknown option, naming it.

    Example:
        >>> import keras, adpue_tf as adp
        >>> s = adp.synthetic.synthetic_pue(600, 600, seed=0)
        >>> net = lambda: keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
        >>> fit = adp.fit_pue(net, s.x_pu, s.w_pu, s.x_e, s.e_e, epochs=2, min_steps=20,
        ...                   candidates=["bce_w", "brier"], verbose=0)
        >>> sorted(fit.scores), fit.model.output_shape
        (['bce_w', 'brier'], (None, 1))
    """
    _check_options(options)
    candidates = options.get("candidates")
    learning_rate, min_steps = options.get("learning_rate", 1e-2), options.get("min_steps", 500)
    rounds, refit = options.get("rounds", 10), options.get("refit", True)
    tolerance, patience = options.get("tolerance", 2.0), options.get("patience", 2)
    jit_compile, hedge = options.get("jit_compile", False), options.get("hedge", True)
    builders = check_builders(build_net)
    names = _candidates(candidates)
    cfg_epochs = check_int("epochs", epochs, 1)
    if isinstance(validation_split, bool) or not isinstance(validation_split, numbers.Real):
        raise TypeError(f"`validation_split` must be a number in (0, 0.5], got "
                        f"{validation_split!r}.")
    if not 0.0 < float(validation_split) <= 0.5:
        raise ValueError(f"`validation_split` must be a number in (0, 0.5], got "
                         f"{validation_split!r}.")
    if isinstance(tolerance, bool) or not isinstance(tolerance, numbers.Real):
        raise TypeError(f"`tolerance` must be a number >= 0, got {tolerance!r}.")
    if not 0.0 <= float(tolerance) < np.inf:
        raise ValueError(f"`tolerance` must be a number >= 0, got {tolerance!r}.")
    check_bool("refit", refit)
    check_bool("jit_compile", jit_compile)
    check_bool("hedge", hedge)
    if isinstance(learning_rate, bool) or not isinstance(learning_rate, numbers.Real) \
            or not 0.0 < float(learning_rate) < np.inf:
        raise ValueError(f"`learning_rate` must be a positive number, got {learning_rate!r}.")
    lr = float(learning_rate)
    stale = None if patience is None else check_int("patience", patience, 1)
    settings = Settings(epochs=cfg_epochs, batch_size=check_int("batch_size", batch_size, 2),
                        min_steps=check_int("min_steps", min_steps, 1),
                        rounds=check_int("rounds", rounds, 1), seed=check_int("seed", seed, 0),
                        optimizer=lambda: keras.optimizers.Adam(lr), patience=stale,
                        jit_compile=jit_compile)
    check_same_columns([("x_pu", table_columns(x_pu)), ("x_e", table_columns(x_e))])
    pu, ex = as_rows("x_pu", x_pu, "w", w), as_rows("x_e", x_e, "e", e)
    check_same_features(pu, ex)
    hints = {}
    # The checks' two nets are the first two that the choice stage builds (θ̂, bce_w),
    # built under their seeds: that stage takes them (Stage.net) instead of building them.
    ahead = (net_seed(settings.seed, "theta"), net_seed(settings.seed, "bce_w"))
    built: dict[str | None, dict[int, keras.Model]] = {}
    for key, builder in builders.items():
        with _naming(key):
            built[key] = dict(zip(ahead, check_net(builder, ahead)))
    unused = unused_features([nets[ahead[0]] for nets in built.values()], pu)
    if unused:
        warnings.warn(f"`x_pu` and `x_e` hold the feature(s) {unused}, which no net of "
                      "`build_net` takes: fit_pue leaves them out.", UserWarning, stacklevel=3)
        pu, ex = (Rows({k: v for k, v in r.x.items() if k not in unused}, r.y)
                  for r in (pu, ex))
    for key in builders:
        with _naming(key):
            net = built[key][ahead[0]]
            check_inputs(net, pu)
            check_whole(net, pu, ex)
            check_ids(net, pu, ex)
            check_logit(net, pu)
            hints[key] = scale_hint(net, pu) or scale_hint(net, ex, name="x_e")
    check_labels(pu, ex, 1)
    for warning in dict.fromkeys((*hints.values(), shift_hint(pu, ex))):
        if warning is not None:
            warnings.warn(warning, UserWarning, stacklevel=3)  # past _one_call: the caller
    split = float(validation_split)
    final = "refit" if refit else "average"
    start = time.perf_counter()
    pu_fold, e_fold = split_rows(len(pu), len(ex), settings.seed, split)
    for arg, fold in (("x_pu", pu_fold), ("x_e", e_fold)):
        if int(np.sum(fold >= 0)) < MIN_HELD_OUT:
            raise ValueError(
                f"fit_pue would score its candidates on {int(np.sum(fold >= 0))} held-out row(s) "
                f"of `{arg}` ({len(fold)} rows, `validation_split`={split:g}); it needs at least "
                f"{MIN_HELD_OUT}: give more rows or a larger `validation_split`.")
    positives = int(pu.y[pu_fold >= 0].sum())  # observed positives held out
    skipped = overruled_anyway(names, positives) if candidates is None else ()
    names, asked = tuple(n for n in names if n not in skipped), names
    show = _progress(verbose, len(builders) * (len(names) + 1)
                     + (len(names) if final == "refit" else 0))
    stages = {key: _stage(b, pu, ex, settings, pu_fold, e_fold, show, built[key])
              for key, b in builders.items()}
    # Every net's nets that train together do so in one pass (stage.train), then the rest.
    train_all(list(stages.values()), names, pu, ex, pu_fold, e_fold)
    picked: dict[str | None, Selection] = {}
    for key, st in stages.items():
        tried, passed = names, skipped
        if skipped and not st.trains(PREFERRED):
            tried, passed = asked, ()  # blend failed: the rule chooses among them all
            train_all([st], tried, pu, ex, pu_fold, e_fold)
        with _naming(key):
            picked[key] = select(st, tried, passed, positives, float(tolerance), hints[key])
    held, best = pick_net(picked, NET_TOLERANCE)
    sel, stage = picked[best], stages[best]
    choice, failed = sel.choice, sel.failed
    selected = time.perf_counter()
    choice_skill = skill(sel.scores[choice], float(np.mean(sel.held.w)),
                         float(np.mean(sel.held.e)), float(np.mean(pu.y) / np.mean(ex.y)))
    share = hedge_share(choice, choice_skill) if hedge else 0.0
    if share and "bce_w" not in stage.heads:
        share = 0.0  # bce_w not tried (or diverged): nothing to hedge with
    model = None
    if final == "refit":
        whole = Stage(builders[best], pu, ex, settings,
                      epochs={n: max(1, v) for n, v in sel.kept.items()},
                      parts=stage.parts, progress=show, built=built[best])
        _share_helpers(stage, whole, choice)
        train_all([whole], (choice, "bce_w") if share else (choice,), pu, ex,
                  np.full(len(pu), -1), np.full(len(ex), -1))
        if whole.try_get(choice) is None:  # diverged on all rows: keep the training part's
            failed[choice] = f"refit on all rows: {whole.failed[choice]}"
            final = "average"
        elif share and not whole.trains("bce_w"):
            failed["bce_w"] = f"refit on all rows: {whole.failed['bce_w']} (no hedge)"
            share, model = 0.0, whole.get(choice)
        else:
            model = _hedged(whole, choice, share) if share else whole.get(choice)
    if model is None:
        model = _hedged(stage, choice, share) if share else stage.get(choice)
    if verbose and sys.stderr.isatty():
        sys.stderr.write("\n")
    trained = sel.trained
    calibration = sel.held.theta_calibration() if sel.theta_ok else {}
    warn_theta(calibration)
    if sel.theta_ok:
        contradiction = unexposed_positives_warning(
            sel.held.w, sigmoid(sel.held.logits("theta")[0]))
        if contradiction is not None:
            warnings.warn(contradiction, UserWarning, stacklevel=3)
    candidates_models = {n: stage.get(n) for n in trained}
    for returned in (model, *candidates_models.values()):
        returned.adpue_from_logits = True  # export_for_serving and validation_score read it
    return PUEFit(
        model=model, choice=choice, scores=sel.scores, exposure_nll=sel.nll, epochs=sel.kept,
        brier_gap_se=sel.gap_se, nll_gap_se=sel.nll_se,
        theta_calibration=calibration,
        parts={n: stage.parts[n] for n in trained if n in stage.parts},
        rows={"pu": len(pu), "e": len(ex), "pu_held_out": len(sel.held.w),
              "e_held_out": len(sel.held.e), "w_held_out": positives},
        seconds={"select": selected - start, "refit": time.perf_counter() - selected},
        candidates=candidates_models,
        failed={n: v for n, v in failed.items() if n != "theta" or not trained},
        final=final, skipped=sel.skipped,
        net=best, net_scores=held if best is not None else {},
        skill=choice_skill, hedge_share=share)


#: The name of fit_pue's hedged model in a stage (:func:`_hedged`).
HEDGED = "hedged"


def _hedged(stage: Stage, choice: str, share: float) -> keras.Model:
    """``choice``'s logit mixed with ``bce_w``'s, ``bce_w`` taking ``share`` (:func:`hedge_share`)."""
    stage.composite(HEDGED, (choice, "bce_w"), LogitMix([1.0 - share, share]))
    return stage.get(HEDGED)


@contextlib.contextmanager
def _naming(key: str | None) -> Iterator[None]:
    """Errors inside name the net of a mapping (``build_net[key]``)."""
    if key is None:
        yield
        return
    try:
        yield
    except (TypeError, ValueError) as err:
        raise type(err)(f"`build_net[{key!r}]`: {err}") from err


def _share_helpers(chosen_from: Stage, whole: Stage, choice: str) -> None:
    """Give the refit the nets of the choice step that ``choice`` only trains with.

    The nets ``choice`` predicts with are retrained on every row. A net it
    only needs while training (``θ̂`` for the likelihood's column, ``bce_w``
    and ``θ̂`` for ``adpue_ratio``'s first ``f†``) is the one of the choice
    step, shared, as every candidate there shares one ``θ̂``.
    """
    predicts_with = set(chosen_from.heads[choice][0])
    for name, net in chosen_from.models.items():
        if chosen_from.heads[name][0] == (name,) and name not in predicts_with:
            whole.install(name, net, chosen_from.best_epoch[name])


def _stage(build_net: Callable[[], keras.Model], pu: Rows, ex: Rows, settings: Settings,
           pu_fold: np.ndarray, e_fold: np.ndarray, show: Callable[[str], None],
           built: dict[int, keras.Model]) -> Stage:
    """The stage that trains on the rows of part -1 and holds out those of part 0.

    ``built``: nets built ahead, by seed (the stage takes its own).
    """
    pu_in, e_in = pu_fold != 0, e_fold != 0
    if pu.y[pu_in].sum() == 0 or ex.y[e_in].min() == ex.y[e_in].max():
        raise ValueError("The training part lacks observed positives or one exposure "
                         "value; give more rows or a smaller `validation_split`.")
    return Stage(build_net, pu.take(np.flatnonzero(pu_in)), ex.take(np.flatnonzero(e_in)),
                 settings, held_out=(pu.take(np.flatnonzero(~pu_in)),
                                     ex.take(np.flatnonzero(~e_in))),
                 progress=show, built=built)


def split_rows(n_pu: int, n_e: int, seed: int, split: float) -> tuple[np.ndarray, np.ndarray]:
    """Each PU and E row's part: 0 held out (``split`` of each log), -1 for training.

    Example:
        >>> pu, e = split_rows(5, 4, seed=0, split=0.4)
        >>> int((pu == 0).sum()), int((e == 0).sum())
        (2, 2)
    """
    rng = np.random.default_rng(seed)
    pu_fold, e_fold = np.full(n_pu, -1), np.full(n_e, -1)
    pu_fold[split_indices(n_pu, split, rng)[1]] = 0
    e_fold[split_indices(n_e, split, rng)[1]] = 0
    return pu_fold, e_fold
