"""The settings of ``adpue-tf bench linear`` (Table 1): :class:`LinearBenchConfig`.

:func:`recipe_config` turns them into the ``ADPUE`` column's recipe settings.
The benchmark itself: :mod:`adpue_tf.experiments.table1`.

Example:
    >>> LinearBenchConfig(trials=2).steps
    200
"""

from __future__ import annotations

import dataclasses
import math
import numbers

from adpue_tf.experiments import linear_recipe, simulate
from adpue_tf.experiments.helpers import check_settings

__all__ = ["LinearBenchConfig", "recipe_config"]


@dataclasses.dataclass(frozen=True)
class LinearBenchConfig:
    """Settings of the linear benchmark.

    Attributes:
        trials: trials per setting (seeds ``seed .. seed+trials-1``), >= 2.
        alphas: split ratios ``α`` (share of the PU part), each in (0, 1).
        datasets: LIBSVM data set names.
        exposure_rate: target ``θ(e=1)`` of the exposure mechanism.
        n_test: held-out rows per trial.
        steps: full-batch Adam steps per fit (at most: see ``tol``).
        learning_rate: Adam's learning rate.
        tol: each linear model stops once its objective has converged: no more
            than ``tol·max(|objective|, 1e-3)`` of change over 20 steps
            (:func:`~adpue_tf.experiments.linear_fit.fit_linear_models`; ``0``,
            the default and the committed table's protocol: all ``steps``).
        em_max_iter: SAR-EM's maximum rounds (its stopping rule usually ends it before).
        em_C: SAR-EM's inverse regularisation strength (scikit-learn's ``C``, the
            reference's default 1.0; SAR-EM does not use ``l2``).
        em_refit: SAR-EM's final propensity-weighted refit of the classifier
            (on in the reference).
        l2: L2 penalty on the weights of every linear model (regularised
            logistic regression; without it the PU-type risks run away on the
            small training sets: see the module docstring).
        gamma: step of the non-negative correction for nnPU, ADPUE and AD3SE
            (1.0: Kiryo et al.'s default; None: the paper's plain max).
        pnu_eta: PNU's ``η``.
        ad3se_alpha: AD3SE's ``α``.
        seed: first seed.
        data_dir: where the LIBSVM files are (default: see :mod:`adpue_tf.experiments.datasets`).
        exposure_rates: several ``θ(e=1)`` for one run (``adpue-tf bench linear``
            runs each); ``None``: ``(exposure_rate,)``. :func:`run_setting` reads
            ``exposure_rate`` only.
        files: extra LIBSVM files to run, keyed by their stem (``--file``).
        positive: the label of ``files`` that is ``y = 1`` (``None``: ``+1``/``1``).
        recipe_l2s, recipe_rounds, recipe_folds, recipe_criterion: the ``ADPUE``
            column's selection grid (L2 strengths, rounds ``T = 0..recipe_rounds``),
            cross-validation folds and score; see
            :mod:`adpue_tf.experiments.linear_recipe`.
        ips_clip: IPS's floor on ``θ̂`` in ``W/θ̂``.
        exposure_mechanism: ``"paper"`` (the paper's formula), ``"logistic"`` or
            ``"cloglog"`` (:data:`adpue_tf.experiments.simulate.MECHANISMS`).
        recommended: the ``Recommended`` column (:func:`adpue_tf.fit_pue`, ~1-3 s a
            trial and setting).
        recommended_epochs, recommended_learning_rate, recommended_min_steps:
            its settings (default: one epoch of 500 steps,
            every linear net trained to convergence as every other column's is;
            an epoch chosen on Table 1's ~40 held-out rows stopped at 25-75 steps)
            (``recommended.from_bench``); likewise ``recommended_candidates``;
            ``recommended_l2``: the net's L2 strengths, one net each, fit_pue's
            mapping choosing per trial (None: ``l2`` and ``l2/10``);
            ``recommended_jit``: fit_pue's ``jit_compile`` (XLA, on by default: the
            same choices and accuracies, 27-55 % less time on 2 CPU cores);
            ``recommended_batch_size``: fit_pue's ``batch_size`` (4096: every paper
            set's rows in one batch, so each net takes full-batch steps, as every
            other column's does, and fit_pue runs an epoch's steps in one compiled
            call: about 3x faster than batches of 512).
    """

    trials: int = 100
    alphas: tuple[float, ...] = (0.3, 0.5)
    datasets: tuple[str, ...] = ("australian", "w8a", "covtype", "mushrooms", "german")
    exposure_rate: float = 0.5
    n_test: int = 300
    steps: int = 200
    learning_rate: float = 0.05
    tol: float = 0.0
    em_max_iter: int = 500
    em_C: float = 1.0
    em_refit: bool = True
    l2: float = 1e-2
    gamma: float | None = 1.0
    pnu_eta: float = 0.5
    ad3se_alpha: float = 0.5
    seed: int = 0
    data_dir: str | None = None
    exposure_rates: tuple[float, ...] | None = None
    files: tuple[str, ...] = ()
    positive: float | None = None
    recipe_l2s: tuple[float, ...] = (0.01, 0.03, 0.1, 0.3)
    recipe_rounds: int = 5
    recipe_folds: int = 3
    recipe_criterion: str = "exposure_likelihood"
    ips_clip: float = 0.05
    exposure_mechanism: str = "paper"
    recommended: bool = True
    recommended_epochs: int = 1
    recommended_learning_rate: float = 0.01
    recommended_min_steps: int = 500
    recommended_batch_size: int = 4096
    recommended_candidates: tuple[str, ...] | None = None
    recommended_l2: float | tuple[float, ...] | None = None
    recommended_jit: bool = True

    def __post_init__(self) -> None:
        if not isinstance(self.trials, int) or self.trials < 2:
            raise ValueError(
                f"`trials` must be an int >= 2 to report a standard error, got {self.trials!r}.")
        for a in self.alphas:
            if not 0.0 < float(a) < 1.0:
                raise ValueError(f"`alphas` must lie in (0, 1), got {a!r}.")
        check_settings("alphas", self.alphas, "split ratio")
        if self.exposure_rates is not None:
            check_settings("exposure_rates", self.exposure_rates, "exposure rate")
        recipe_config(self)  # checks the ADPUE column's grid before any work
        if self.exposure_mechanism not in simulate.MECHANISMS:
            raise ValueError(f"`exposure_mechanism` must be one of {list(simulate.MECHANISMS)}, "
                             f"got {self.exposure_mechanism!r}.")
        self._check_recommended()

    def _check_recommended(self) -> None:
        """The test rows and the Recommended column's fit_pue settings, before any work."""
        for name in ("n_test", "recommended_epochs", "recommended_min_steps",
                     "recommended_batch_size"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"`{name}` must be an int >= 1, got {value!r}.")
        lr, l2 = self.recommended_learning_rate, self.recommended_l2
        if not _finite(lr) or lr <= 0:
            raise ValueError(f"`recommended_learning_rate` must be a finite number > 0, "
                             f"got {lr!r}.")
        if l2 is not None:
            values = (l2,) if isinstance(l2, (int, float)) and not isinstance(l2, bool) else l2
            if (isinstance(values, str) or not isinstance(values, (tuple, list)) or not values
                    or not all(_finite(v) and v >= 0 for v in values)
                    or len(set(values)) != len(values)):
                raise ValueError(f"`recommended_l2` must be a finite number >= 0 or a "
                                 f"non-empty tuple of distinct ones, got {l2!r}.")
        if not isinstance(self.recommended_jit, bool):
            raise TypeError(f"`recommended_jit` must be a bool, got {self.recommended_jit!r}.")
        names = self.recommended_candidates
        if names is not None:
            from adpue_tf.recommend import CANDIDATES

            unknown = [n for n in names if n not in CANDIDATES]
            if isinstance(names, str) or not names or unknown:
                raise ValueError(f"`recommended_candidates` must be a non-empty list of "
                                 f"fit_pue candidates {list(CANDIDATES)}; got {names!r}.")
            check_settings("recommended_candidates", names, "candidate")



def _finite(value: object) -> bool:
    """Whether ``value`` is a finite real number (not a bool)."""
    return (not isinstance(value, bool) and isinstance(value, numbers.Real)
            and math.isfinite(value))


def recipe_config(cfg: LinearBenchConfig) -> linear_recipe.RecipeConfig:
    """The ``ADPUE`` column's :class:`~adpue_tf.experiments.linear_recipe.RecipeConfig`.

    Example:
        >>> recipe_config(LinearBenchConfig()).l2s
        (0.01, 0.03, 0.1, 0.3)
    """
    return linear_recipe.RecipeConfig(
        l2s=tuple(cfg.recipe_l2s), max_rounds=cfg.recipe_rounds, folds=cfg.recipe_folds,
        criterion=cfg.recipe_criterion, steps=cfg.steps, learning_rate=cfg.learning_rate,
        tol=cfg.tol,
        gamma=cfg.gamma, theta_l2=cfg.l2)
