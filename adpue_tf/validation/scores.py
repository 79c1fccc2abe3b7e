"""The observable, proper validation scores as a function: :func:`validation_score`.

The math (:func:`exposure_nll`), the checks of data and yardsticks shared by
the validation metrics and the validation layout, and the score itself. What
the two criteria are and when they are proper: :mod:`adpue_tf.validation`.

Example:
    >>> import numpy as np
    >>> nll = exposure_nll(np.array([1.0, 0.0]), np.array([0.0, 0.0]), np.array([1.0, 0.5]))
    >>> [round(float(v), 4) for v in nll]  # -log(0.5), -log(1 - 0.5 * 0.5)
    [0.6931, 0.2877]
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import keras
import numpy as np
import tensorflow as tf
from keras import ops

from adpue_tf import labels, risks
from adpue_tf._internal.checks import (
    check_int,
    check_same_columns,
    resolve_from_logits,
    table_columns,
)
from adpue_tf._internal.convention import check_output_convention
from adpue_tf._internal.guards import to_logits
from adpue_tf._internal.net_checks import check_takes
from adpue_tf.data.rows import layout
from adpue_tf.exposure import RatioModel, _rows, _take_rows, fit_exposure_model, fit_ratio_model
from adpue_tf.labels import Source
from adpue_tf.risks.exposure import log_probs

__all__ = ["CRITERIA", "exposure_brier_score", "exposure_nll", "validation_score"]

#: The observable criteria of :func:`validation_score`.
CRITERIA = ("exposure_likelihood", "reference_risk", "exposure_brier")
#: Slack on the ``[0, 1]`` range check of a yardstick's output.
_RANGE_SLACK = 1e-6

Yardstick = Any  # a keras.Model or a callable x -> values in [0, 1]


# -- the math (keras.ops, float32, from logits) ---------------------------------------
def exposure_nll(w: Any, z: Any, theta: Any) -> Any:
    """Per-row negative log-likelihood of ``W`` under ``P(W=1|x) = σ(z)·θ``.

    Args:
        w: observed positives ``W`` in {0, 1}, shape ``(n,)``.
        z: the model's logits, shape ``(n,)`` (NaN logits give NaN rows).
        theta: ``θ̂(e=1|x)`` in ``[0, 1]`` (clipped to ``[1e-7, 1 - 1e-7]``), ``(n,)``.

    Returns:
        float32 ``(n,)``: ``-(W·log(σ(z)θ) + (1-W)·log(1 - σ(z)θ))``.

    Raises:
        ValueError: ``w`` not 0/1, ``theta`` outside ``[0, 1]`` or not finite,
            or the three of different lengths (checked when the values are
            concrete; inside a traced function they are computed as given).

    Example:
        >>> [round(float(v), 4) for v in exposure_nll([1.0, 0.0], [0.0, 0.0], [0.5, 0.5])]
        [1.3863, 0.2877]
    """
    if any(tf.is_symbolic_tensor(v) for v in (w, z, theta)):
        return nll_unchecked(w, z, theta)  # traced: values unknown until it runs
    w = labels.check_binary("w", w)
    theta = _unit_interval("theta", theta, len(w))
    n = int(np.size(z))
    if n != len(w):
        raise ValueError(f"`z` has {n} values but `w` has {len(w)}.")
    return nll_unchecked(w, z, theta)


def nll_unchecked(w: Any, z: Any, theta: Any) -> Any:
    """:func:`exposure_nll` without the checks (fit_pue's scoring: its own rows, NaN kept)."""
    w = ops.cast(ops.convert_to_tensor(w), "float32")
    z = ops.cast(ops.convert_to_tensor(z), "float32")
    log_s, log_not_s = log_probs(z, theta)
    return -(w * log_s + (1.0 - w) * log_not_s)


def exposure_brier_score(w: Any, p_pu: Any, e: Any, p_e: Any) -> float:
    """The exposure Brier score ``mean(E·p_e²) - 2·mean(W·p_pu)``; lower is better.

    ``p_pu``, ``p_e``: a model's probabilities on PU rows (with ``W``) and on
    exposure-log rows (with ``E``) from the same feature distribution. Its
    expectation is ``E_x[θ·(f - p)²] - E_x[θ·p²]``: proper for ``p(y=1|x)``
    wherever ``θ > 0``, with no estimate of ``θ`` (see
    :func:`adpue_tf.risks.exposure_brier`).

    Raises:
        ValueError: ``w`` or ``e`` not 0/1 or empty; ``p_pu``/``p_e`` not finite,
            outside ``[0, 1]``, or not one value per row of ``w``/``e``.

    Example:
        >>> exposure_brier_score([1.0, 0.0], [0.5, 0.5], [1.0, 0.0], [0.5, 0.5])
        -0.375
    """
    w, e = labels.check_binary("w", w), labels.check_binary("e", e)
    if not len(w) or not len(e):
        raise ValueError(f"`w` and `e` need at least one row each, got {len(w)} and {len(e)}.")
    return brier_unchecked(w, _unit_interval("p_pu", p_pu, len(w)), e,
                           _unit_interval("p_e", p_e, len(e)))


def brier_unchecked(w: Any, p_pu: Any, e: Any, p_e: Any) -> float:
    """:func:`exposure_brier_score` without the checks (fit_pue's scoring: NaN kept)."""
    w, p_pu, e, p_e = (np.asarray(v, np.float64) for v in (w, p_pu, e, p_e))
    return float(np.mean(e * p_e ** 2) - 2.0 * np.mean(w * p_pu))


def _unit_interval(name: str, value: Any, n: int) -> np.ndarray:
    """``value`` as a float64 vector of ``n`` finite values in ``[0, 1]``, else a ValueError."""
    arr = labels._as_1d(name, labels.check_finite(name, value))  # as the labels are read
    if len(arr) != n:
        raise ValueError(f"`{name}` must be a vector of {n} values (one per row), got shape "
                         f"{arr.shape}.")
    _check_unit(name, arr, "hold")
    return arr


def _check_unit(name: str, values: np.ndarray, verb: str, hint: str = ".") -> None:
    """Refuse ``values`` beyond ``[0, 1]`` (up to :data:`_RANGE_SLACK`), naming ``name``."""
    if not values.size:
        return
    lo, hi = float(values.min()), float(values.max())
    if lo < -_RANGE_SLACK or hi > 1.0 + _RANGE_SLACK:
        raise ValueError(f"`{name}` must {verb} probabilities in [0, 1], got values in "
                         f"[{lo:.4g}, {hi:.4g}]{hint}")


# -- argument checks -------------------------------------------------------------------
def _check_yardstick(name: str, value: Any) -> None:
    if value is not None and not (isinstance(value, keras.Model) or callable(value)):
        raise TypeError(f"`{name}` must be a keras.Model or a callable x -> values in "
                        f"[0, 1], got {type(value).__name__}.")


def _n(x: Any) -> int:
    """The number of rows of features ``x`` (an array or a dict of arrays)."""
    return len(next(iter(x.values()))) if isinstance(x, dict) else len(x)


def _outputs(name: str, fn: Callable[[Any], Any] | keras.Model, x: Any,
             batch_size: int) -> np.ndarray:
    """``fn`` on ``x`` in batches, as a float64 ``(n,)`` vector; checked for shape and NaN.

    A Keras model is called eagerly (``training=False``): no ``predict``
    function to trace per model, which dominates for the small models and
    held-out sets of a model search.
    """
    def call(rows: Any) -> Any:
        if isinstance(fn, keras.Model):
            return fn(rows, training=False)
        return fn(rows)

    def rows(i: int) -> Any:
        if isinstance(x, dict):
            return {k: v[i:i + batch_size] for k, v in x.items()}
        return x[i:i + batch_size].astype("float32")

    check_takes(name, fn, x)
    n = _n(x)
    parts = [np.asarray(ops.convert_to_numpy(call(rows(i)))) for i in range(0, n, batch_size)]
    out = np.concatenate([p.reshape(len(p), -1) if p.ndim else p.reshape(1, 1)
                          for p in parts])
    if out.ndim == 2 and out.shape[1] == 1:
        out = out[:, 0]
    if out.shape != (n,):
        raise ValueError(f"`{name}` must give one value per row (shape (n,) or (n, 1)); "
                         f"got shape {out.shape} for {n} rows.")
    out = out.astype(np.float64)
    if not np.all(np.isfinite(out)):
        raise ValueError(f"`{name}` gave {int(np.sum(~np.isfinite(out)))} NaN or infinite "
                         "value(s).")
    return out


def _probabilities(name: str, fn: Yardstick, x: np.ndarray, batch_size: int) -> np.ndarray:
    """A yardstick's values in ``[0, 1]`` (a ``RatioModel(logits=True)`` is converted)."""
    out = _outputs(name, fn, x, batch_size)
    if isinstance(fn, RatioModel) and fn.logits:
        return np.exp(-np.logaddexp(0.0, -out))
    _check_unit(name, out, "give", "; does it output logits? Add a sigmoid.")
    return np.clip(out, 0.0, 1.0)


def _check_rows(x_pu: Any, w: Any, x_e: Any, e: Any,
                need_e: bool) -> tuple[Any, np.ndarray, Any, Any]:
    """Features (arrays or dicts; a Dataset of rows is read) and their labels, checked."""
    check_same_columns([("x_pu", table_columns(x_pu)), ("x_e", table_columns(x_e))])
    pu = _rows("x_pu", x_pu, "w", w)
    if not need_e and x_e is None and e is None:
        return pu.x, pu.y, None, None
    ex = _rows("x_e", x_e, "e", e)
    if layout(ex.x) != layout(pu.x):
        raise ValueError(f"`x_e` has feature shape {layout(ex.x)} but `x_pu` has "
                         f"{layout(pu.x)}.")
    return pu.x, pu.y, ex.x, ex.y


def _check_criterion(criterion: Any, exposure_model: Any, reference: Any) -> str:
    if criterion not in CRITERIA:
        raise ValueError(f"`criterion` must be one of {list(CRITERIA)}, got {criterion!r}.")
    _check_yardstick("exposure_model", exposure_model)
    _check_yardstick("reference", reference)
    if criterion == "exposure_brier" and (reference is not None or exposure_model is not None):
        raise ValueError("criterion='exposure_brier' needs no yardstick: drop `exposure_model` "
                         "and `reference`.")
    if criterion == "exposure_likelihood" and reference is not None:
        raise ValueError("`reference` is used by criterion='reference_risk' only; drop it "
                         "or set criterion='reference_risk'.")
    if criterion == "reference_risk" and reference is not None and exposure_model is not None:
        raise ValueError("With criterion='reference_risk', `exposure_model` only serves to "
                         "fit the default Ratio reference; drop one of `exposure_model` and "
                         "`reference`.")
    return criterion


def _ratio_exposure(exposure_model: Any) -> keras.Model | None:
    if exposure_model is not None and not isinstance(exposure_model, keras.Model):
        raise TypeError("To build the default Ratio reference, `exposure_model` must be a "
                        f"keras.Model, got {type(exposure_model).__name__}.")
    return exposure_model


# -- the score -------------------------------------------------------------------------
def validation_score(
    model: keras.Model | Callable[[Any], Any],
    x_pu: Any,
    w: Any,
    x_e: Any,
    e: Any,
    *,
    criterion: str = "exposure_likelihood",
    exposure_model: Yardstick | None = None,
    reference: Yardstick | None = None,
    from_logits: bool | None = None,
    batch_size: int = 1024,
) -> float:
    """An observable, proper score of ``model`` as an estimate of ``p(y=1|x)``; lower is better.

    Reads only held-out PU rows ``(x_pu, W)`` and exposure rows ``(x_e, E)``,
    never the hidden ``Y``. Every row counts once (exact means over all rows).

    * ``criterion="exposure_likelihood"`` (default): mean over the PU rows of
      ``-[W·log(σ(z)θ̂) + (1-W)·log(1 - σ(z)θ̂)]``. ``θ̂`` is
      ``exposure_model`` or, when None, a logistic regression of ``E`` on
      ``x_e`` (:func:`adpue_tf.exposure.fit_exposure_model`). **Proper when
      ``θ̂ = θ``** (the true exposure probability): then its minimiser is
      ``σ(z) = q/θ = p``. Rows with ``θ ≈ 0`` carry no information.
    * ``criterion="exposure_brier"``: ``mean_E[E·f²] - 2·mean_PU[W·f]``
      (:func:`exposure_brier_score`), whose expectation is ``E_x[θ·(f - p)²]``
      plus a constant: proper for ``p(y=1|x)`` **with no yardstick at all**,
      so a wrong ``θ̂`` cannot tilt it (what :func:`adpue_tf.fit_pue` chooses by).
    * ``criterion="reference_risk"``: the nnPUE risk
      (:func:`adpue_tf.risks.nnpue`, ``non_negative=True``, ``β = 0``, the
      paper's max) of ``model`` on the PU and E rows with ``f†`` fixed to
      ``reference(x)`` on the E rows. Its minimiser is ``q + f_ref·θ0``:
      **proper when ``f_ref = p``**, and never rewarding a model for its own
      over-confidence since the target is the same for every candidate.
      ``reference`` is a model or callable giving ``f†`` in ``[0, 1]``
      (a :class:`~adpue_tf.exposure.RatioModel` with ``logits=True`` is read as
      logits) or, when None, the Ratio estimate ``q̂/θ̂`` fitted on the given
      rows (:func:`adpue_tf.exposure.fit_ratio_model`; ``θ̂`` is then
      ``exposure_model`` when given).

    When scoring many candidates, fit the yardstick once
    (``fit_exposure_model``/``fit_ratio_model``) and pass it, so that every
    candidate is measured against the same one (and faster).

    Args:
        model: the candidate: a ``keras.Model`` (a ``DebiasedModel`` scores its
            net) or a callable ``x -> output``; one output per row.
        x_pu: held-out PU features: an array ``(n_pu, ...)``, a dict of arrays,
            or a Dataset of ``(features, w)`` rows (then ``w=None``).
        w: their observed positives ``W`` in {0, 1}.
        x_e: held-out exposure-log features ``(n_e, ...)``; may be None (with
            ``e``) for the exposure likelihood with ``exposure_model`` given.
        e: their exposures ``E`` in {0, 1}.
        criterion: ``"exposure_likelihood"``, ``"reference_risk"`` or ``"exposure_brier"``.
        exposure_model: a fitted ``θ̂`` giving probabilities in ``[0, 1]``.
        reference: the fixed ``f†`` for ``"reference_risk"``, values in ``[0, 1]``.
        from_logits: whether ``model`` outputs logits; None reads the
            ``from_logits`` of its compiled loss (a
            :class:`~adpue_tf.losses.DebiasedLoss` or a Keras loss that has one).
        batch_size: rows per prediction batch.

    Returns:
        The score, a Python float.

    Raises:
        ValueError: on an unknown criterion, a yardstick that does not fit the
            criterion, labels outside {0, 1}, NaN/inf, mismatched lengths or
            feature shapes, outputs of the wrong shape, NaN, or yardstick
            values outside ``[0, 1]``, ``from_logits=None`` on a model without
            a compiled ``DebiasedLoss``, or a yardstick that cannot be fitted
            (``e`` or ``w`` constant).
        TypeError: on non-numeric data, a model or yardstick that is not a
            Keras model or callable, a non-bool ``from_logits`` or a non-int
            ``batch_size``.

    Example:
        >>> import keras, numpy as np, adpue_tf as adp
        >>> s = adp.synthetic.synthetic_pue(2000, 2000, seed=0)
        >>> truth = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
        >>> truth.set_weights([s.y_weights.reshape(2, 1), np.zeros(1)])
        >>> theta = adp.exposure.fit_exposure_model(s.x_e, s.e_e)
        >>> scores = [adp.validation_score(truth, s.x_pu, s.w_pu, s.x_e, s.e_e,
        ...                                exposure_model=theta, from_logits=True),
        ...           adp.validation_score(lambda x: 2.0 * truth(x), s.x_pu, s.w_pu,
        ...                                s.x_e, s.e_e, exposure_model=theta,
        ...                                from_logits=True)]
        >>> scores[0] < scores[1]
        True
    """
    criterion = _check_criterion(criterion, exposure_model, reference)
    if not (isinstance(model, keras.Model) or callable(model)):
        raise TypeError(f"`model` must be a keras.Model or a callable, got "
                        f"{type(model).__name__}.")
    from_logits = resolve_from_logits(model, from_logits)
    batch_size = check_int("batch_size", batch_size, 1)
    need_e = criterion != "exposure_likelihood" or exposure_model is None
    if not need_e and (x_e is None) != (e is None):
        raise ValueError("Give both `x_e` and `e`, or neither (with `exposure_model`).")
    x_pu, w, x_e, e = _check_rows(x_pu, w, x_e, e, need_e)
    check_output_convention("`model`", model, from_logits=from_logits,
                            sample=_take_rows(x_pu, 256))

    z_pu = to_logits(_outputs("model", model, x_pu, batch_size), from_logits)
    if criterion == "exposure_likelihood":
        theta_model = exposure_model if exposure_model is not None \
            else fit_exposure_model(x_e, e)
        theta = _probabilities("exposure_model", theta_model, x_pu, batch_size)
        nll = ops.convert_to_numpy(nll_unchecked(w, z_pu, theta))
        return float(np.mean(nll.astype(np.float64)))

    if criterion == "exposure_brier":
        z_e = to_logits(_outputs("model", model, x_e, batch_size), from_logits)
        return brier_unchecked(w, ops.convert_to_numpy(ops.sigmoid(z_pu)), e,
                      ops.convert_to_numpy(ops.sigmoid(z_e)))
    if reference is None:
        reference = fit_ratio_model(x_pu, w, x_e, e,
                                    exposure_model=_ratio_exposure(exposure_model))
    f_ref = _probabilities("reference", reference, x_e, batch_size)
    z_e = to_logits(_outputs("model", model, x_e, batch_size), from_logits)
    y = np.concatenate([labels.pack_labels(Source.PU, w=w, dagger=np.zeros(len(w))),
                        labels.pack_labels(Source.E, e=e, dagger=f_ref)])
    z = ops.concatenate([z_pu, z_e])
    return float(risks.nnpue(y, z, from_logits=True).risk)
