"""``adpue-tf bench linear``: the paper's Table 1 with linear models.

For each LIBSVM data set and split ratio ``α``, each trial draws exposure with
the paper's mechanism, holds out 300 test rows and splits the rest into PU and
E (PUE) or PU and SSE (3SE) parts; all trials of a setting are fitted at once
(:func:`adpue_tf.experiments.linear_fit.fit_linear`; SAR-EM by
:class:`~adpue_tf.experiments.baselines.BatchedSAREM`), and
the plain-risk methods of each stack (:data:`PUE_GROUP`, :data:`SSE_GROUP`) in
one :func:`~adpue_tf.experiments.linear_fit.fit_linear_models` call.
Accuracy is inductive (test rows) and transductive (hidden training labels),
mean ± standard error over the trials. The methods, the shared L2 penalty and
why it is needed: ``docs/api/experiments.md``.

Example:
    >>> from adpue_tf.experiments.table1 import LinearBenchConfig
    >>> LinearBenchConfig(trials=2).alphas
    (0.3, 0.5)
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import functools
import threading
from typing import Any, Callable

import numpy as np
import tensorflow as tf

from adpue_tf import losses
from adpue_tf.experiments import baselines, linear_fit, linear_recipe, recommended, simulate
from adpue_tf.experiments.helpers import sigmoid
from adpue_tf.experiments.peers import elkan_noto, external_methods
from adpue_tf.experiments.table1_config import LinearBenchConfig, recipe_config
from adpue_tf.labels import Source, pack_e, pack_pu, pack_sse

__all__ = ["LinearBenchConfig", "PUE_METHODS", "SSE_METHODS", "run_setting", "external_methods",
           "em_note", "pue_methods", "recipe_config"]

PUE_METHODS = ("Logit", "uPU", "nnPU", "uPU-sig", "nnPU-sig", "EM", "Ratio", "IPS",
               "ADPUE-direct", "ADPUE", "ADPUE-ref")
#: Columns the SAR-EM propensity sees: x2..x13, the inputs of the exposure formula.
PROPENSITY_FEATURES = list(range(1, 13))
SSE_METHODS = ("ADS", "PNU", "AD3SE")
#: The PUE methods that are one risk on the stack's packed labels, fitted as one group.
PUE_GROUP = ("Logit", "uPU", "nnPU", "uPU-sig", "nnPU-sig", "ADPUE-direct")
#: Likewise the 3SE methods.
SSE_GROUP = SSE_METHODS


@dataclasses.dataclass(frozen=True)
class _Stack:
    """One setting's trials, stacked: training rows, test rows, hidden truth."""

    x: np.ndarray          # (T, n, d) training features
    y: np.ndarray          # (T, n, 3) packed labels
    hidden: np.ndarray     # (T, n) true Y of the training rows
    unknown: np.ndarray    # (T, n) bool: label not observed
    x_test: np.ndarray     # (T, n_test, d)
    y_test: np.ndarray     # (T, n_test)


def _trial_rows(s: Any) -> tuple[np.ndarray, ...]:
    """One split's training rows (PU first), packed labels, hidden Y, unknown mask, test set.

    The second part is the E data of a :class:`~adpue_tf.experiments.simulate.PUESplit`
    (every label hidden) or the SSE data of a 3SE split (labels of unexposed rows hidden).
    """
    if isinstance(s, simulate.PUESplit):
        second = (s.x_e, pack_e(s.e_e), s.y_e, np.ones(len(s.e_e), bool))
    else:
        second = (s.x_sse, pack_sse(s.w_sse, s.e_sse), s.y_sse, s.e_sse == 0)
    first = (s.x_pu, pack_pu(s.w_pu), s.y_pu, s.w_pu == 0)
    return (*(np.concatenate(p) for p in zip(first, second)), s.x_test, s.y_test)


def _stack(simulate_fn: Callable[..., Any], x: np.ndarray, y: np.ndarray,
           cfg: LinearBenchConfig, alpha: float, features: np.ndarray | None = None) -> _Stack:
    """Every trial of one setting (``simulate_pue`` or ``simulate_3se``), stacked."""
    parts = [_trial_rows(simulate_fn(x, y, exposure_rate=cfg.exposure_rate, split=alpha,
                                     n_test=cfg.n_test, seed=cfg.seed + t, features=features,
                                     mechanism=cfg.exposure_mechanism))
             for t in range(cfg.trials)]
    return _Stack(*(np.stack(p) for p in zip(*parts)))


def _accuracies(st: _Stack, score: Callable[[np.ndarray], np.ndarray]
                ) -> tuple[np.ndarray, np.ndarray]:
    """Per-trial (inductive, transductive) accuracies; ``score > 0`` predicts Y = 1.

    A trial whose scores are NaN (the method failed on it) gets NaN accuracies.
    """
    s_test, s_train = score(st.x_test), score(st.x)
    ind = np.mean((s_test > 0) == (st.y_test == 1), axis=1)
    trans = np.array([np.mean((s_train[t] > 0)[st.unknown[t]] == (st.hidden[t][st.unknown[t]] == 1))
                      for t in range(len(st.x))])
    failed = np.isnan(s_test).any(axis=1)
    return np.where(failed, np.nan, ind), np.where(failed, np.nan, trans)


# -- the fits that share a stack's features ----------------------------------------
# :class:`_Group` fits the plain-risk methods of a stack (Logit, uPU, nnPU, ..., or the 3SE
# ones) and other methods' models on the same features (:class:`_Helpers`: Ratio's q̂/θ̂,
# the recipe's first fit) in one fit_linear_models call; :func:`_fit` fits one method alone.

def _risk(method: str) -> Callable[..., Any]:
    """The risk function of a method, from the loss registry (method names are its keys)."""
    return losses.get_class(method).risk_fn


def _fit(st: _Stack, risk: Callable[..., Any], cfg: LinearBenchConfig, *, x: Any = None,
         y: Any = None, steps: int | None = None, **kw: Any) -> linear_fit.LinearFit:
    """All trials' linear models for ``risk`` (``x``/``y`` default to the stack's)."""
    return linear_fit.fit_linear(st.x if x is None else x, st.y if y is None else y, risk,
                              steps=steps or cfg.steps, learning_rate=cfg.learning_rate,
                              l2=cfg.l2, tol=cfg.tol, **kw)


@dataclasses.dataclass(frozen=True)
class _Helpers:
    """Models another method needs, fitted with a group on its stack's features.

    ``labels`` ``(trials, models, rows, 3)``, ``weight`` the row weights
    ``(trials, models, rows)``, every model fitted with ``risk`` and L2 ``l2``.
    """

    risk: Callable[..., Any]
    labels: np.ndarray
    weight: np.ndarray
    l2: float


class _Group:
    """The plain-risk methods of one stack, fitted together on first use.

    One :func:`~adpue_tf.experiments.linear_fit.fit_linear_models` call: each
    model follows the full-batch Adam trajectory of its own :func:`_fit`, so
    the weights are the same up to float32 rounding. ``helpers`` are other
    methods' models on the same features (Ratio's ``q̂`` and ``θ̂``, the
    recipe's first fit), fitted in the same call: a step's cost is mostly the
    pass over the features, whatever the number of models (on the dense path),
    so they come almost free. If that fit stops on the divergence guard
    (:func:`adpue_tf.losses.is_divergence`), each method is fitted on its own
    when asked for, as :func:`_fit` alone would, and :meth:`helper` gives None
    (its method fits its models itself): one diverging model does not take
    the others down. Other errors are raised.
    """

    def __init__(self, st: _Stack, specs: dict[str, tuple[Callable[..., Any], dict[str, Any]]],
                 cfg: LinearBenchConfig, helpers: dict[str, _Helpers] | None = None) -> None:
        self.st, self.specs, self.cfg = st, specs, cfg
        self.helpers = helpers or {}
        self.fitted: linear_fit.LinearFit | None = None
        self.failed = False
        self._lock = threading.Lock()
        self._columns: dict[str, slice] = {}   # each helper's models in the fit
        start = len(specs)
        for key, h in self.helpers.items():
            self._columns[key] = slice(start, start + h.labels.shape[1])
            start = self._columns[key].stop

    def fit(self) -> None:
        """Fit the group (once; later calls, from any thread, wait for it and return)."""
        with self._lock:
            if self.fitted is not None or self.failed:
                return
            st, cfg, n = self.st, self.cfg, len(self.specs)
            specs = list(self.specs.values())
            labels = [np.repeat(st.y[:, None], n, axis=1)]
            weight = [np.ones((len(st.x), n, st.x.shape[1]), np.float32)]
            l2 = [cfg.l2] * n
            for h in self.helpers.values():
                k = h.labels.shape[1]
                specs += [(h.risk, {})] * k
                labels.append(h.labels)
                weight.append(h.weight)
                l2 += [h.l2] * k
            try:
                self.fitted = linear_fit.fit_linear_models(
                    st.x, np.concatenate(labels, axis=1), specs, steps=cfg.steps,
                    learning_rate=cfg.learning_rate, l2=l2, tol=cfg.tol,
                    sample_weight=np.concatenate(weight, axis=1))
            except (tf.errors.InvalidArgumentError, ValueError) as e:
                if not losses.is_divergence(e):  # only the guard's stop falls back
                    raise
                self.failed = True

    def logits(self, name: str) -> Callable[[np.ndarray], np.ndarray]:
        """The score function of method ``name``."""
        risk, options = self.specs[name]
        self.fit()
        if self.fitted is None:
            return _fit(self.st, risk, self.cfg, **options).logits
        k = list(self.specs).index(name)
        return linear_fit.LinearFit(self.fitted.weights[:, k], self.fitted.bias[:, k]).logits

    def helper(self, name: str) -> linear_fit.LinearFit | None:
        """The models of helper ``name`` (weights ``(trials, models, features)``), or None."""
        if name not in self.helpers:
            return None
        self.fit()
        if self.fitted is None:
            return None
        cols = self._columns[name]
        return linear_fit.LinearFit(self.fitted.weights[:, cols], self.fitted.bias[:, cols])


def _pue_helpers(st: _Stack, cfg: LinearBenchConfig) -> dict[str, _Helpers]:
    """Ratio's ``q̂`` (of ``W``, PU rows) and ``θ̂`` (of ``E``, E rows; IPS's too), and the
    recipe's first fit (:func:`~adpue_tf.experiments.linear_recipe.helper_models`)."""
    pu = (st.y[..., 2] == int(Source.PU)).astype(np.float32)
    labels = np.zeros((*st.y.shape[:2], 2, 3), np.float32)
    labels[..., 0, 0], labels[..., 1, 0] = st.y[..., 0], st.y[..., 1]   # W; E
    labels[..., 2] = int(Source.PU)                 # a logistic regression of column 0
    weight = np.stack([pu, 1.0 - pu], axis=1)
    recipe = recipe_config(cfg)
    recipe_labels, recipe_weight = linear_recipe.helper_models(st.y, recipe)
    return {"ratio": _Helpers(_risk("Logit"), labels.swapaxes(1, 2), weight, cfg.l2),
            "recipe": _Helpers(_risk("Logit"), recipe_labels, recipe_weight, recipe.theta_l2)}


def _specs(names: tuple[str, ...], prior_y: float, cfg: LinearBenchConfig
           ) -> dict[str, tuple[Callable[..., Any], dict[str, Any]]]:
    """Each plain-risk method's risk function and options (``risk_options`` of :func:`_fit`)."""
    table: dict[str, tuple[str, dict[str, Any]]] = {
        "Logit": ("Logit", {}),
        "uPU": ("uPU", {"prior": prior_y}),
        "nnPU": ("nnPU", {"prior": prior_y, "gamma": cfg.gamma}),
        "uPU-sig": ("uPU", {"prior": prior_y, "surrogate": "sigmoid"}),
        "nnPU-sig": ("nnPU", {"prior": prior_y, "gamma": cfg.gamma, "surrogate": "sigmoid"}),
        "ADPUE-direct": ("ADPUE", {"gamma": cfg.gamma}),
        "ADS": ("ADS", {}),
        "PNU": ("PNU", {"prior": prior_y, "eta": cfg.pnu_eta}),
        "AD3SE": ("AD3SE", {"alpha": cfg.ad3se_alpha, "gamma": cfg.gamma}),
    }
    return {n: (_risk(table[n][0]), table[n][1]) for n in names}


def _parts(st: _Stack, t: int, source: Source) -> np.ndarray:
    """Row mask of one source in trial ``t``."""
    return st.y[t, :, 2] == int(source)


def _same_positions(st: _Stack, rows: np.ndarray, source: Source) -> None:
    """Every trial holds its rows of ``source`` where trial 0 does (so they slice as one)."""
    if not all((_parts(st, t, source) == rows).all() for t in range(len(st.x))):
        raise ValueError(f"every trial must hold its {source.name} rows at the same positions")


#: Floor on θ̂ in Ratio's ``q̂/θ̂``.
RATIO_THETA_FLOOR = 1e-6


def _ratio_fit(st: _Stack, cfg: LinearBenchConfig, group: _Group) -> baselines.RatioFit:
    """Ratio's ``q̂`` and ``θ̂``: the group's helpers, or (the group fell back) fitted here."""
    both = group.helper("ratio")
    if both is not None:
        q, theta = (linear_fit.LinearFit(both.weights[:, j], both.bias[:, j]) for j in (0, 1))
        return baselines.RatioFit(q, theta, RATIO_THETA_FLOOR)
    pu, e = _parts(st, 0, Source.PU), _parts(st, 0, Source.E)
    _same_positions(st, pu, Source.PU)
    _same_positions(st, e, Source.E)
    return baselines.fit_ratio(st.x[:, pu], st.y[:, pu, 0], st.x[:, e], st.y[:, e, 1],
                               l2=cfg.l2, steps=cfg.steps, learning_rate=cfg.learning_rate,
                               tol=cfg.tol, theta_floor=RATIO_THETA_FLOOR)


def _ratio(st: _Stack, cfg: LinearBenchConfig, group: _Group) -> Callable[[np.ndarray], np.ndarray]:
    """q̂(w=1|x) from the PU rows, θ̂(e=1|x) from the E rows; score = q̂/θ̂ - 1/2.

    Both logistic regressions (L2 ``l2``, ``steps``) are fitted with the PUE
    group, as models that weigh only their rows (:func:`_pue_helpers`).
    """
    fit = _ratio_fit(st, cfg, group)
    return lambda x: fit.predict_proba(x) - 0.5


def _sar_em(st: _Stack, cfg: LinearBenchConfig) -> Callable[[np.ndarray], np.ndarray]:
    """SAR-EM on each trial's PU rows, every trial at once (:class:`~adpue_tf.experiments.baselines.BatchedSAREM`).

    :class:`~adpue_tf.experiments.baselines.SAREM`'s algorithm and stopping
    rule, each trial stopping on its own, with its M-step fits solved exactly
    (liblinear's objective) instead of by liblinear at ``tol=1e-4``.
    The propensity reads the 12 features the exposure formula reads
    (x2..x13): SAR-EM needs the propensity's attributes restricted, or the
    likelihood, which depends on ``f·e`` only, cannot tell the classifier from
    the propensity.
    """
    pu = _parts(st, 0, Source.PU)
    _same_positions(st, pu, Source.PU)
    model = baselines.BatchedSAREM(
        propensity_features=PROPENSITY_FEATURES, C=cfg.em_C, max_iter=cfg.em_max_iter,
        refit_classifier=cfg.em_refit).fit(st.x[:, pu], st.y[:, pu, 0])
    return lambda x: model.predict_proba(x) - 0.5


def em_note(cfg: LinearBenchConfig) -> str:
    """One sentence on how EM ran, for the results page.

    Example:
        >>> "at most 500 rounds, with the final" in em_note(LinearBenchConfig())
        True
    """
    refit = "with" if cfg.em_refit else "without"
    return (f"EM: SAR-EM as its reference implementation (Bekker & Davis, sarpu): "
            f"logistic regressions with liblinear's objective and C = {cfg.em_C} (its own L2 "
            f"penalty, intercept included, not the one above), each M-step solved exactly "
            f"(batched Newton, all trials at once) where the reference runs liblinear to "
            f"tol 1e-4, their stopping rule per trial, at most "
            f"{cfg.em_max_iter} rounds, {refit} the final propensity-weighted refit.")


def _ips(st: _Stack, cfg: LinearBenchConfig, group: _Group) -> Callable[[np.ndarray], np.ndarray]:
    """IPS (Saito et al. 2020): BCE on ``W`` weighted by ``1/max(θ̂, ips_clip)`` (``risks.ips``).

    ``θ̂(e=1|x)``: Ratio's, a logistic regression of ``E`` on the trial's E rows
    (:func:`_ratio_fit`: ``l2``, ``steps``), passed in label column 3.
    """
    theta = _ratio_fit(st, cfg, group).theta
    dagger = sigmoid(theta.logits(st.x))
    y4 = np.concatenate([st.y, dagger[..., None]], axis=-1).astype(np.float32)
    return _fit(st, _risk("IPS"), cfg, y=y4, clip=cfg.ips_clip).logits


def _not_applicable(x: np.ndarray) -> np.ndarray:
    """NaN scores: the method cannot run on this data (e.g. SAR-EM's propensity
    reads x2..x13, which data with fewer than 13 features lack); its cells say n/a."""
    return np.full(x.shape[:2], np.nan)


def _adpue_recipe(st: _Stack, cfg: LinearBenchConfig, details: dict[str, Any],
                  group: _Group | None = None) -> Callable[[np.ndarray], np.ndarray]:
    """The recommended recipe (:func:`~adpue_tf.experiments.linear_recipe.fit_recipe`).

    It is given the training rows and their packed ``(W, E, source)`` only:
    never ``st.hidden`` or the test labels. Its choices go to ``details``.
    Its first fit (``θ̂`` and ``q̂`` of every fold) is the group's helper
    ``"recipe"`` when ``group`` has it.
    """
    helpers = None if group is None else group.helper("recipe")
    res = linear_recipe.fit_recipe(st.x, st.y, recipe_config(cfg), helpers=helpers)
    other = "reference_risk"  # the ADPUE-ref column: the same candidates, the other score
    details["ADPUE"] = {"l2": res.l2.tolist(), "rounds": res.rounds.tolist(),
                        "criterion": cfg.recipe_criterion}
    i, r = res.choice(other)
    details["ADPUE-ref"] = {"l2": np.asarray(cfg.recipe_l2s)[i].tolist(),
                            "rounds": np.asarray(r).tolist(), "criterion": other}
    details["_recipe"] = res
    return res.logits


def pue_methods(cfg: LinearBenchConfig) -> tuple[str, ...]:
    """The PUE columns of a run: :data:`PUE_METHODS`, the external peers, ``Recommended``.

    Example:
        >>> pue_methods(LinearBenchConfig(recommended=False)) == PUE_METHODS + external_methods()
        True
    """
    return PUE_METHODS + external_methods() + (("Recommended",) if cfg.recommended else ())


def run_setting(x: np.ndarray, y: np.ndarray, prior_y: float, cfg: LinearBenchConfig,
                alpha: float, report: Callable[[str], None] = lambda m: None, *,
                features: np.ndarray | None = None, details: dict[str, Any] | None = None,
                ) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Every method on one data set and split ratio.

    Args:
        x: features ``(n, d)`` with ``d >= 13``.
        y: true labels ``(n,)``.
        prior_y: the oracle class prior ``π_y`` for uPU, nnPU and PNU.
        cfg: the settings.
        alpha: the split ratio.
        report: called with each method's name when it is done (progress; the
            recipe's columns ``ADPUE`` and ``ADPUE-ref`` last: the recipe runs in
            a thread beside the other methods).
        features: the ``>= 13`` columns the exposure formula reads (default
            ``x``; see :func:`adpue_tf.experiments.simulate.simulate_pue`).
        details: if given, filled with the ``ADPUE`` recipe's choices per trial
            (``{"ADPUE": {"l2": [...], "rounds": [...], "criterion": ...}}``) and
            the ``Recommended`` column's (``{"choice": [...], ...}``).

    Returns:
        ``{method: (inductive accuracies, transductive accuracies)}``, one
        entry per trial in each array.
    """
    out: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    details = {} if details is None else details
    pue = _stack(simulate.simulate_pue, x, y, cfg, alpha, features)
    group = _Group(pue, _specs(PUE_GROUP, prior_y, cfg), cfg, _pue_helpers(pue, cfg))
    fits: dict[str, Callable[[], Callable[[np.ndarray], np.ndarray]]] = {
        **{n: functools.partial(group.logits, n) for n in PUE_GROUP},
        "IPS": lambda: _ips(pue, cfg, group),
        "EM": lambda: (_sar_em(pue, cfg) if x.shape[1] > max(PROPENSITY_FEATURES)
                       else _not_applicable),
        "Ratio": lambda: _ratio(pue, cfg, group),
        "ADPUE": lambda: _adpue_recipe(pue, cfg, details, group),
        "ADPUE-ref": lambda: functools.partial(details.pop("_recipe").logits,
                                               criterion=details["ADPUE-ref"]["criterion"]),
        "ElkanNoto": lambda: elkan_noto(pue.x, pue.y, cfg.seed),
        "Recommended": lambda: recommended.fit_trials(pue.x, pue.y, recommended.from_bench(cfg),
                                                      seed=cfg.seed, details=details),
    }
    methods = pue_methods(cfg)
    last = [n for n in ("ADPUE", "ADPUE-ref") if n in methods]
    # The recipe (most of a setting's time, TensorFlow on ~1.5 cores) runs in a thread
    # beside the other methods (SAR-EM and ElkanNoto: NumPy and scikit-learn on one core);
    # its columns are collected last. It reads the group's helpers: the group first.
    group.fit()
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        if "ADPUE" in methods:
            fits["ADPUE"] = pool.submit(_adpue_recipe, pue, cfg, details, group).result
        for name in [n for n in methods if n not in last]:
            out[name] = _accuracies(pue, fits[name]())
            report(name)
        sse = _stack(simulate.simulate_3se, x, y, cfg, alpha, features)
        group3 = _Group(sse, _specs(SSE_GROUP, prior_y, cfg), cfg)
        for name in SSE_METHODS:
            out[name] = _accuracies(sse, group3.logits(name))
            report(name)
        for name in last:
            out[name] = _accuracies(pue, fits[name]())
            report(name)
    return {name: out[name] for name in (*methods, *SSE_METHODS)}
