"""Table 1's fits that share a stack's features: the plain-risk group and the helpers it fits.

:class:`_Group` fits the plain-risk methods of a stack of trials (Logit, uPU,
nnPU, ..., or the 3SE ones) and other methods' models on the same features
(:class:`_Helpers`: Ratio's ``q̂``/``θ̂``, the recipe's first fit) in one
:func:`~adpue_tf.experiments.linear_fit.fit_linear_models` call; :func:`_fit`
fits one method on its own. Used by :mod:`adpue_tf.experiments.table1`.
"""

from __future__ import annotations

import dataclasses
import threading
from typing import TYPE_CHECKING, Any, Callable

import numpy as np
import tensorflow as tf

from adpue_tf import losses
from adpue_tf.experiments import linear_fit, linear_recipe
from adpue_tf.experiments.table1_config import LinearBenchConfig, recipe_config
from adpue_tf.labels import Source

if TYPE_CHECKING:
    from adpue_tf.experiments.table1 import _Stack

__all__: list[str] = []


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
