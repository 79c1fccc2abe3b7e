"""Observable, proper validation scores: choose models without the hidden ``Y``.

A user of PUE data observes ``W = E·Y`` on PU rows and ``E`` on an exposure
log, never ``Y``. Two scores built from those alone are minimised by the
true ``p(y=1|x)`` (SPEC.md, "Observable validation scores"); lower is better:

* ``"exposure_likelihood"``: the mean negative log-likelihood of ``W`` on
  PU rows under ``P(W=1|x) = σ(z(x))·θ̂(x)``, ``θ̂`` a classifier of ``E``
  fitted on the exposure log. **Proper when** ``θ̂ = θ``: strong
  ignorability gives ``q(w=1|x) = p(y=1|x)·θ(e=1|x)``, the cross-entropy of
  ``W`` is minimised by ``σ(z)·θ = q``, i.e. ``σ(z) = p``. A misspecified
  ``θ̂`` shifts the minimiser to ``min(1, q/θ̂)``; where ``θ ≈ 0`` ``W`` is
  always 0 and the score cannot tell models apart.
* ``"reference_risk"``: the nnPUE risk (:func:`adpue_tf.risks.nnpue`, its
  default options) with ``f†`` **fixed** to one reference ``f_ref`` for every
  candidate. Its minimiser is ``q + f_ref·θ0`` (``θ0 = 1 - θ``): **proper
  when** ``f_ref = p``, and close to ``p`` where the reference is close or
  where exposure is high. The default reference is the Ratio estimate
  ``q̂/θ̂`` (:func:`adpue_tf.exposure.fit_ratio_model`).

Not proper, and not offered: the risk with ``f† = σ(z)`` of the scored model
itself (the old tuner objective ``val_risk``); over-confident models score
lower (see ``tests/test_validation.py`` for measured numbers).

The same scores as Keras metrics, for ``model.fit(validation_data=...)`` and
the KerasTuner objective: a Keras metric sees only ``(y_true, y_pred)``, so
the yardsticks are computed once, before training, and carried in column 3
of the packed labels by the *validation layout* that :func:`pue_validation_data`
(and :func:`pe_validation_data`, :func:`fpue_validation_data`) build:

* on the exposure-log rows (source ``E``) column 3 is ``f_ref(x)``: there it
  is the ``f†`` of the label layout, so every debiased risk computed on this
  data, including the ``val_risk`` a ``DebiasedModel`` logs, is the
  reference risk;
* on the PU rows (PUE) and the P and U rows (FPUE), where no risk of these
  settings reads ``f†``, column 3 is ``θ̂(x)``, which
  :class:`ExposureLikelihood` reads. PE data (P and E rows only; its loss
  refuses other rows) carries ``f_ref`` on every row and supports the
  reference risk only.

Example:
    >>> import keras, numpy as np, adpue_tf as adp
    >>> s = adp.synthetic.synthetic_pue(2000, 2000, seed=0)
    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> model.set_weights([s.y_weights.reshape(2, 1), np.zeros(1)])  # the truth
    >>> model.compile(loss=adp.ADPUELoss(from_logits=True))
    >>> score = adp.validation_score(model, s.x_pu, s.w_pu, s.x_e, s.e_e)
    >>> round(score, 2)
    0.37
"""

from __future__ import annotations

import numbers
from collections.abc import Callable
from typing import Any

import keras
import numpy as np
import tensorflow as tf
from keras import ops

from adpue_tf import data as data_lib
from adpue_tf import labels, risks
from adpue_tf._checks import check_int
from adpue_tf._guards import to_logits
from adpue_tf.exposure import RatioModel, _features, _labels, fit_exposure_model, fit_ratio_model
from adpue_tf.labels import Source
from adpue_tf.losses import DebiasedLoss

__all__ = [
    "CRITERIA",
    "ExposureLikelihood",
    "ReferenceRisk",
    "exposure_nll",
    "fpue_validation_data",
    "pe_validation_data",
    "pue_validation_data",
    "validation_score",
]

_register = keras.saving.register_keras_serializable(package="adpue_tf")

#: The observable criteria of :func:`validation_score`.
CRITERIA = ("exposure_likelihood", "reference_risk")
#: ``θ̂`` is clipped to ``[_EPS, 1 - _EPS]`` inside the likelihood.
_EPS = 1e-7
#: Slack on the ``[0, 1]`` range check of a yardstick's output.
_RANGE_SLACK = 1e-6

Yardstick = Any  # a keras.Model or a callable x -> values in [0, 1]


# -- the math (keras.ops, float32, from logits) ---------------------------------------
def _log_probs(z: Any, theta: Any) -> tuple[Any, Any]:
    """``log s`` and ``log(1 - s)`` for ``s = σ(z)·θ``, stable for any logit ``z``.

    ``log(1 - σ(z)θ) = softplus(z + log(1 - θ)) - softplus(z)``.
    """
    theta = ops.clip(ops.cast(theta, "float32"), _EPS, 1.0 - _EPS)
    log_s = -ops.softplus(-z) + ops.log(theta)
    log_not_s = ops.softplus(z + ops.log1p(-theta)) - ops.softplus(z)
    return log_s, log_not_s


def exposure_nll(w: Any, z: Any, theta: Any) -> Any:
    """Per-row negative log-likelihood of ``W`` under ``P(W=1|x) = σ(z)·θ``.

    Args:
        w: observed positives ``W`` in {0, 1}, shape ``(n,)``.
        z: the model's logits, shape ``(n,)``.
        theta: ``θ̂(e=1|x)`` in ``[0, 1]`` (clipped to ``[1e-7, 1 - 1e-7]``), ``(n,)``.

    Returns:
        float32 ``(n,)``: ``-(W·log(σ(z)θ) + (1-W)·log(1 - σ(z)θ))``.

    Example:
        >>> [round(float(v), 4) for v in exposure_nll([1.0, 0.0], [0.0, 0.0], [0.5, 0.5])]
        [1.3863, 0.2877]
    """
    w = ops.cast(ops.convert_to_tensor(w), "float32")
    z = ops.cast(ops.convert_to_tensor(z), "float32")
    log_s, log_not_s = _log_probs(z, theta)
    return -(w * log_s + (1.0 - w) * log_not_s)


# -- argument checks -------------------------------------------------------------------
def _check_bool(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"`{name}` must be a bool, got {value!r}.")
    return value


def _resolve_from_logits(model: Any, from_logits: bool | None) -> bool:
    if from_logits is not None:
        return _check_bool("from_logits", from_logits)
    loss = getattr(model, "loss", None)
    if isinstance(loss, DebiasedLoss):
        return loss.from_logits
    raise ValueError(
        "`from_logits=None` reads the compiled loss, but the model is not compiled with "
        f"an adpue_tf DebiasedLoss (its loss is {type(loss).__name__}); pass "
        "`from_logits=True` (logit output) or `from_logits=False` (probabilities).")


def _check_yardstick(name: str, value: Any) -> None:
    if value is not None and not (isinstance(value, keras.Model) or callable(value)):
        raise TypeError(f"`{name}` must be a keras.Model or a callable x -> values in "
                        f"[0, 1], got {type(value).__name__}.")


def _outputs(name: str, fn: Callable[[Any], Any] | keras.Model, x: np.ndarray,
             batch_size: int) -> np.ndarray:
    """``fn`` on ``x`` in batches, as a float64 ``(n,)`` vector; checked for shape and NaN.

    A Keras model is called eagerly (``training=False``): no ``predict``
    function to trace per model, which dominates for the small models and
    held-out sets of a model search.
    """
    def call(rows: np.ndarray) -> Any:
        if isinstance(fn, keras.Model):
            return fn(rows, training=False)
        return fn(rows)

    parts = [np.asarray(ops.convert_to_numpy(call(x[i:i + batch_size].astype("float32"))))
             for i in range(0, len(x), batch_size)]
    out = np.concatenate([p.reshape(len(p), -1) if p.ndim else p.reshape(1, 1)
                          for p in parts])
    if out.ndim == 2 and out.shape[1] == 1:
        out = out[:, 0]
    if out.shape != (len(x),):
        raise ValueError(f"`{name}` must give one value per row (shape (n,) or (n, 1)); "
                         f"got shape {out.shape} for {len(x)} rows.")
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
    lo, hi = float(out.min()), float(out.max())
    if lo < -_RANGE_SLACK or hi > 1.0 + _RANGE_SLACK:
        raise ValueError(f"`{name}` must give probabilities in [0, 1], got values in "
                         f"[{lo:.4g}, {hi:.4g}]; does it output logits? Add a sigmoid.")
    return np.clip(out, 0.0, 1.0)


def _check_rows(x_pu: Any, w: Any, x_e: Any, e: Any,
                need_e: bool) -> tuple[np.ndarray, np.ndarray, Any, Any]:
    x_pu_arr = _features("x_pu", x_pu)
    w_arr = _labels("w", w, len(x_pu_arr), "x_pu")
    if not need_e and x_e is None and e is None:
        return x_pu_arr, w_arr, None, None
    x_e_arr = _features("x_e", x_e)
    e_arr = _labels("e", e, len(x_e_arr), "x_e")
    if x_e_arr.shape[1:] != x_pu_arr.shape[1:]:
        raise ValueError(f"`x_e` has feature shape {x_e_arr.shape[1:]} but `x_pu` has "
                         f"{x_pu_arr.shape[1:]}.")
    return x_pu_arr, w_arr, x_e_arr, e_arr


def _check_criterion(criterion: Any, exposure_model: Any, reference: Any) -> str:
    if criterion not in CRITERIA:
        raise ValueError(f"`criterion` must be one of {list(CRITERIA)}, got {criterion!r}.")
    _check_yardstick("exposure_model", exposure_model)
    _check_yardstick("reference", reference)
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
        x_pu: held-out PU features ``(n_pu, ...)``.
        w: their observed positives ``W`` in {0, 1}.
        x_e: held-out exposure-log features ``(n_e, ...)``; may be None (with
            ``e``) for the exposure likelihood with ``exposure_model`` given.
        e: their exposures ``E`` in {0, 1}.
        criterion: ``"exposure_likelihood"`` or ``"reference_risk"``.
        exposure_model: a fitted ``θ̂`` giving probabilities in ``[0, 1]``.
        reference: the fixed ``f†`` for ``"reference_risk"``, values in ``[0, 1]``.
        from_logits: whether ``model`` outputs logits; None reads the
            ``from_logits`` of its compiled :class:`~adpue_tf.losses.DebiasedLoss`.
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
    from_logits = _resolve_from_logits(model, from_logits)
    batch_size = check_int("batch_size", batch_size, 1)
    need_e = criterion == "reference_risk" or exposure_model is None
    if not need_e and (x_e is None) != (e is None):
        raise ValueError("Give both `x_e` and `e`, or neither (with `exposure_model`).")
    x_pu, w, x_e, e = _check_rows(x_pu, w, x_e, e, need_e)

    z_pu = to_logits(_outputs("model", model, x_pu, batch_size), from_logits)
    if criterion == "exposure_likelihood":
        theta_model = exposure_model if exposure_model is not None \
            else fit_exposure_model(x_e, e)
        theta = _probabilities("exposure_model", theta_model, x_pu, batch_size)
        nll = ops.convert_to_numpy(exposure_nll(w, z_pu, theta))
        return float(np.mean(nll.astype(np.float64)))

    if reference is None:
        reference = fit_ratio_model(x_pu, w, x_e, e,
                                    exposure_model=_ratio_exposure(exposure_model))
    f_ref = _probabilities("reference", reference, x_e, batch_size)
    z_e = to_logits(_outputs("model", model, x_e, batch_size), from_logits)
    y = np.concatenate([labels.pack_labels(Source.PU, w=w, dagger=np.zeros(len(w))),
                        labels.pack_labels(Source.E, e=e, dagger=f_ref)])
    z = ops.concatenate([z_pu, z_e])
    return float(risks.nnpue(y, z, from_logits=True).risk)


# -- the scores as Keras metrics -------------------------------------------------------
def _packed_4(y_true: Any, who: str) -> Any:
    """Labels in the validation layout as float32; None for plain 3-column labels."""
    y = ops.convert_to_tensor(y_true)
    if len(y.shape) == 2 and y.shape[1] == 3:
        return None  # training batches: no yardsticks, nothing to measure
    if len(y.shape) != 2 or y.shape[1] != 4:
        raise ValueError(
            f"{who} needs labels in the validation layout, shape (batch, 4) with the "
            f"yardsticks in column 3; got shape {tuple(y.shape)}. Build the validation "
            "data with adp.validation.pue_validation_data (or pe_/fpue_validation_data).")
    return ops.cast(y, "float32")


@_register
class ExposureLikelihood(keras.metrics.Metric):
    """The exposure likelihood of :func:`validation_score` as a Keras metric.

    Reads labels in the validation layout (see the module docstring and
    :func:`pue_validation_data`): ``θ̂(x)`` in column 3 of the PU, P and U rows.
    Sums and counts are accumulated over batches, so the result is the mean
    over all rows seen (not a mean of batch means). Proper when ``θ̂ = θ``.

    Keras updates compiled metrics on the training batches too; their plain
    3-column labels carry no ``θ̂``, so the metric adds nothing for them and
    its training-time value stays 0: read ``val_exposure_nll``.

    * PU rows present (PUE): mean over PU rows of
      :func:`exposure_nll` ``(W, z, θ̂)``.
    * otherwise, P and U rows (FPUE), with ``π = q(w=1)``: the
      case-control form of the same expected log-loss,
      ``-π·Ê_P[log s] + π·Ê_P[log(1-s)] - Ê_U[log(1-s)]``, ``s = σ(z)·θ̂``
      (unbiased; it needs ``prior``, and U rows in every batch with P rows).
      E rows are ignored.

    Args:
        from_logits: whether the model outputs logits (else probabilities).
        prior: ``π = q(w=1)`` in ``(0, 1)``, needed for P rows.
        name: metric name; logged as ``val_<name>`` on validation data.

    Raises:
        TypeError: on a non-bool ``from_logits``.
        ValueError: on ``prior`` outside ``(0, 1)``; at update, on labels not
            in the validation layout, P rows without ``prior`` or without U
            rows, or a batch with neither PU nor P rows (an
            ``InvalidArgumentError`` in graph mode).

    Example:
        >>> import numpy as np
        >>> from adpue_tf.labels import pack_labels, Source
        >>> y = pack_labels(Source.PU, w=[1, 0], dagger=[0.5, 0.5])
        >>> m = ExposureLikelihood(from_logits=True)
        >>> m.update_state(y, np.zeros((2, 1)))
        >>> round(float(m.result()), 4)  # mean of 1.3863 and 0.2877
        0.837
    """

    def __init__(self, from_logits: bool = False, *, prior: float | None = None,
                 name: str = "exposure_nll", dtype: Any = None) -> None:
        super().__init__(name=name, dtype=dtype)
        self.from_logits = _check_bool("from_logits", from_logits)
        if prior is not None:
            if isinstance(prior, bool) or not isinstance(prior, numbers.Real) \
                    or not 0.0 < float(prior) < 1.0:
                raise ValueError(f"`prior` must be a number in (0, 1), got {prior!r}.")
            prior = float(prior)
        self.prior = prior
        # sum nll(PU), n(PU), sum log s (P), sum log(1-s) (P), n(P), sum log(1-s) (U), n(U)
        self.total = self.add_variable(shape=(7,), initializer="zeros", name="total")

    def update_state(self, y_true: Any, y_pred: Any, sample_weight: Any = None) -> None:
        """Add a batch of packed labels (validation layout) and model outputs."""
        y = _packed_4(y_true, "ExposureLikelihood")
        if y is None:
            return
        z = to_logits(y_pred, self.from_logits)
        src = y[:, labels.SOURCE]
        weight = 1.0 if sample_weight is None else \
            ops.reshape(ops.cast(sample_weight, "float32"), (-1,))

        def mask(s: Source) -> Any:
            return ops.cast(ops.equal(src, float(int(s))), "float32") * weight

        pu, p, u = mask(Source.PU), mask(Source.P), mask(Source.U)
        n_pu, n_p, n_u = ops.sum(pu), ops.sum(p), ops.sum(u)
        problems = [
            (n_pu + n_p > 0, "ExposureLikelihood needs PU rows (PUE data) or P and U rows "
                             "(FPUE data) in every batch; got neither."),
            (ops.logical_or(n_p == 0, n_u > 0),
             "ExposureLikelihood got P rows without U rows in the batch; the case-control "
             "form needs both (FPUE validation data)."),
        ]
        if self.prior is None:
            problems.append((n_p == 0, "ExposureLikelihood got P rows (FPUE data) but no "
                                       "`prior`; pass prior=q(w=1)."))
        checks = []
        for ok, message in problems:
            if tf.executing_eagerly():
                if not bool(ok):
                    raise ValueError(message)
            else:
                checks.append(tf.debugging.assert_equal(ok, True, message=message))
        log_s, log_not_s = _log_probs(z, y[:, labels.DAGGER])
        nll = -(y[:, labels.W] * log_s + (1.0 - y[:, labels.W]) * log_not_s)
        update = ops.stack([ops.sum(pu * nll), n_pu, ops.sum(p * log_s),
                            ops.sum(p * log_not_s), n_p, ops.sum(u * log_not_s), n_u])
        if checks:
            with tf.control_dependencies(checks):
                update = tf.identity(update)
        self.total.assign_add(update)

    def result(self) -> Any:
        t = self.total
        pu_form = ops.divide_no_nan(t[0], t[1])
        pi = 0.0 if self.prior is None else self.prior
        cc_form = (-pi * ops.divide_no_nan(t[2], t[4]) + pi * ops.divide_no_nan(t[3], t[4])
                   - ops.divide_no_nan(t[5], t[6]))
        return ops.where(t[1] > 0, pu_form, cc_form)

    def get_config(self) -> dict[str, Any]:
        return {"name": self.name, "from_logits": self.from_logits, "prior": self.prior}

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> "ExposureLikelihood":
        config = dict(config)
        config.pop("dtype", None)
        return cls(**config)


@_register
class ReferenceRisk(keras.metrics.Mean):
    """The reference risk as a Keras metric: a debiased risk with ``f†`` fixed by the data.

    Reads labels in the validation layout, where column 3 of the E rows is
    the reference ``f_ref(x)``; ``loss``'s risk then uses it as ``f†`` for
    every candidate (its minimiser is ``q + f_ref·θ0``, proper when
    ``f_ref = p``). Give the loss at fixed reference options (e.g.
    ``ADPUELoss(from_logits=True)``, or ``ADPELoss(prior=π, ...)`` on PE data)
    so that it is the same yardstick for every candidate. The result is the
    mean over batches of the batch risks (as ``val_risk``). Plain 3-column
    labels (the training batches) add nothing (the training-time value stays
    0: read ``val_ref_risk``).

    Args:
        loss: a :class:`~adpue_tf.losses.DebiasedLoss` that uses ``f†``.
        name: metric name; logged as ``val_<name>``.

    Raises:
        TypeError: if ``loss`` is not a ``DebiasedLoss``.
        ValueError: if ``loss`` does not use ``f†``; at update, on labels not
            in the validation layout.

    Example:
        >>> import numpy as np, adpue_tf as adp
        >>> from adpue_tf.labels import pack_labels, Source
        >>> y = np.concatenate([pack_labels(Source.PU, w=[1, 0], dagger=[0, 0]),
        ...                     pack_labels(Source.E, e=[0, 1], dagger=[0.5, 0.5])])
        >>> m = ReferenceRisk(adp.ADPUELoss(from_logits=True))
        >>> m.update_state(y, np.zeros((4, 1)))
        >>> round(float(m.result()), 4)  # R+ = 0.5199, R- = 0.1733
        0.6931
    """

    def __init__(self, loss: DebiasedLoss, *, name: str = "ref_risk", dtype: Any = None) -> None:
        if not isinstance(loss, DebiasedLoss):
            raise TypeError(f"`loss` must be an adpue_tf DebiasedLoss, got {loss!r}.")
        if not loss.uses_dagger:
            raise ValueError(f"`loss` {type(loss).__name__} does not use f†, so it has no "
                             "reference risk; use e.g. ADPUELoss.")
        super().__init__(name=name, dtype="float32")
        self.loss = loss

    def update_state(self, y_true: Any, y_pred: Any, sample_weight: Any = None) -> None:
        """Add the batch's risk (``sample_weight`` weighs rows inside the risk)."""
        y = _packed_4(y_true, "ReferenceRisk")
        if y is None:
            return
        terms = self.loss.terms(y, y_pred, sample_weight)
        super().update_state(ops.cast(terms.risk, "float32"))

    def get_config(self) -> dict[str, Any]:
        return {"name": self.name, "loss": keras.saving.serialize_keras_object(self.loss)}

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> "ReferenceRisk":
        config = dict(config)
        config.pop("dtype", None)
        return cls(keras.saving.deserialize_keras_object(config.pop("loss")), **config)


# -- validation data in the validation layout ------------------------------------------
def _augmented(x: np.ndarray, column: np.ndarray) -> np.ndarray:
    return np.concatenate([x.reshape(len(x), -1), column.reshape(-1, 1)],
                          axis=1).astype("float32")


def _split(shape: tuple[int, ...]) -> Callable[[Any, Any], tuple[Any, Any]]:
    def split(xa: Any, y: Any) -> tuple[Any, Any]:
        x = tf.reshape(xa[:, :-1], (-1, *shape))
        return x, tf.concat([y, xa[:, -1:]], axis=1)
    return split


def _fitted_theta(exposure_model: Any, x_e: np.ndarray, e: np.ndarray) -> Yardstick:
    _check_yardstick("exposure_model", exposure_model)
    return exposure_model if exposure_model is not None else fit_exposure_model(x_e, e)


def pue_validation_data(x_pu: Any, w: Any, x_e: Any, e: Any, *,
                        exposure_model: Yardstick | None = None,
                        reference: Yardstick | None = None,
                        batch_size: int = 1024) -> tf.data.Dataset:
    """Held-out PUE rows in the validation layout, for ``validation_data=``.

    Like :func:`adpue_tf.data.pue_dataset` with ``shuffle=False``, plus
    column 3: ``θ̂(x)`` on the PU rows and ``f_ref(x)`` on the E rows. With
    these labels :class:`ExposureLikelihood` and :class:`ReferenceRisk` work
    in ``fit``/``evaluate``, and the ``val_risk`` of a ``DebiasedModel`` (or
    of ``adp.metrics.risk_metrics``) is the reference risk.

    Args:
        x_pu: held-out PU features ``(n_pu, ...)`` (arrays; no feature dicts).
        w: their ``W`` in {0, 1}.
        x_e: held-out exposure-log features, same feature shape.
        e: their ``E`` in {0, 1}.
        exposure_model: ``θ̂`` (probabilities); None: fitted on ``(x_e, e)``.
        reference: ``f_ref`` (probabilities); None: the Ratio estimate fitted on
            these rows (:func:`adpue_tf.exposure.fit_ratio_model` with ``θ̂``).
        batch_size: rows per batch (every batch holds both sources).

    Returns:
        A finite ``tf.data.Dataset`` of ``(x, y)``, ``y`` of shape ``(batch, 4)``.

    Raises:
        TypeError, ValueError: on bad data or yardsticks, naming the argument.

    Example:
        >>> import adpue_tf as adp
        >>> s = adp.synthetic.synthetic_pue(300, 300, seed=0)
        >>> ds = pue_validation_data(s.x_pu, s.w_pu, s.x_e, s.e_e, batch_size=200)
        >>> [tuple(t.shape) for t in next(iter(ds))]
        [(200, 2), (200, 4)]
    """
    _check_yardstick("reference", reference)
    batch_size = check_int("batch_size", batch_size, 2)
    x_pu, w, x_e, e = _check_rows(x_pu, w, x_e, e, True)
    theta = _fitted_theta(exposure_model, x_e, e)
    if reference is None:
        reference = fit_ratio_model(x_pu, w, x_e, e, exposure_model=_ratio_exposure(theta))
    col_pu = _probabilities("exposure_model", theta, x_pu, batch_size)
    col_e = _probabilities("reference", reference, x_e, batch_size)
    ds = data_lib.pue_dataset(_augmented(x_pu, col_pu), w, _augmented(x_e, col_e), e,
                              batch_size=batch_size, shuffle=False)
    return ds.map(_split(x_pu.shape[1:]))


def _p_rows(x_p: Any, x_e: np.ndarray) -> np.ndarray:
    x = _features("x_p", x_p)
    if x.shape[1:] != x_e.shape[1:]:
        raise ValueError(f"`x_p` has feature shape {x.shape[1:]} but `x_e` has "
                         f"{x_e.shape[1:]}.")
    return x


def pe_validation_data(x_p: Any, x_e: Any, e: Any, *, reference: Yardstick,
                       batch_size: int = 1024) -> tf.data.Dataset:
    """Held-out PE rows (P and E) with ``f†`` fixed to a reference, for the reference risk.

    The rows of :func:`adpue_tf.data.pe_dataset` (``shuffle=False``) with
    column 3 = ``f_ref(x)`` on every row (the ``f†`` of the label layout), so
    :class:`ReferenceRisk` and the ``val_risk`` of a ``DebiasedModel`` are the
    reference risk. PE data has no rows whose ``W`` is observed on a sample
    of ``ζ`` and the PE loss refuses extra unlabeled rows, so the exposure
    likelihood is not offered here (use FPUE data for it). There are no PU
    rows to fit a Ratio estimate on, so ``reference`` is required (e.g. a
    Ratio model fitted on whatever PU data exists, or a frozen earlier model).

    Args:
        x_p: held-out positives ``(n_p, ...)``.
        x_e: held-out exposure-log features, same feature shape.
        e: their exposures ``E`` in {0, 1}.
        reference: ``f_ref`` giving probabilities in ``[0, 1]`` (required).
        batch_size: rows per batch.

    Returns:
        A finite ``tf.data.Dataset`` of ``(x, y)``, ``y`` of shape ``(batch, 4)``.

    Raises:
        TypeError, ValueError: on bad data or reference, naming the argument.

    Example:
        >>> import keras, adpue_tf as adp
        >>> s = adp.synthetic.synthetic_pue(300, 300, seed=0)
        >>> half = keras.Sequential([keras.Input((2,)), keras.layers.Dense(
        ...     1, activation="sigmoid", kernel_initializer="zeros")])
        >>> ds = pe_validation_data(s.x_pu[s.w_pu == 1], s.x_e, s.e_e, reference=half,
        ...                         batch_size=256)
        >>> y = next(iter(ds))[1]
        >>> tuple(y.shape), float(y[0, 3])
        ((256, 4), 0.5)
    """
    x_e_arr, e_arr, x_p_arr, batch_size = _p_e_rows(x_p, x_e, e, reference, batch_size, 2)
    col_p = _probabilities("reference", reference, x_p_arr, batch_size)
    col_e = _probabilities("reference", reference, x_e_arr, batch_size)
    ds = data_lib.pe_dataset(_augmented(x_p_arr, col_p), _augmented(x_e_arr, col_e), e_arr,
                             batch_size=batch_size, shuffle=False)
    return ds.map(_split(x_e_arr.shape[1:]))


def fpue_validation_data(x_p: Any, x_u: Any, x_e: Any, e: Any, *,
                         exposure_model: Yardstick | None = None, reference: Yardstick,
                         batch_size: int = 1024) -> tf.data.Dataset:
    """Held-out FPUE rows (P, U, E) in the validation layout.

    The rows of :func:`adpue_tf.data.fpue_dataset` (``shuffle=False``);
    column 3: ``θ̂(x)`` on the P and U rows (read by :class:`ExposureLikelihood`,
    in its case-control form with the prior), ``f_ref(x)`` on the E rows
    (the ``f†`` of :class:`ReferenceRisk` and of ``val_risk``). There are no
    PU rows to fit a Ratio estimate on, so ``reference`` is required.

    Args:
        x_p: held-out positives ``(n_p, ...)``.
        x_u: held-out unlabeled rows, same feature shape.
        x_e: held-out exposure-log features, same feature shape.
        e: their exposures ``E`` in {0, 1}.
        exposure_model: ``θ̂`` (probabilities); None: fitted on ``(x_e, e)``.
        reference: ``f_ref`` giving probabilities in ``[0, 1]`` (required).
        batch_size: rows per batch.

    Returns:
        A finite ``tf.data.Dataset`` of ``(x, y)``, ``y`` of shape ``(batch, 4)``.

    Raises:
        TypeError, ValueError: on bad data or yardsticks, naming the argument.

    Example:
        >>> import keras, adpue_tf as adp
        >>> s = adp.synthetic.synthetic_pue(300, 300, seed=0)
        >>> half = keras.Sequential([keras.Input((2,)), keras.layers.Dense(
        ...     1, activation="sigmoid", kernel_initializer="zeros")])
        >>> ds = fpue_validation_data(s.x_pu[s.w_pu == 1], s.x_pu, s.x_e, s.e_e,
        ...                           reference=half, batch_size=64)
        >>> tuple(next(iter(ds))[1].shape)
        (64, 4)
    """
    x_e_arr, e_arr, x_p_arr, batch_size = _p_e_rows(x_p, x_e, e, reference, batch_size, 3)
    if x_u is None:
        raise TypeError("`x_u` must be an array of features (n_u, ...), got None.")
    x_u_arr = _features("x_u", x_u)
    if x_u_arr.shape[1:] != x_e_arr.shape[1:]:
        raise ValueError(f"`x_u` has feature shape {x_u_arr.shape[1:]} but `x_e` has "
                         f"{x_e_arr.shape[1:]}.")
    theta = _fitted_theta(exposure_model, x_e_arr, e_arr)
    col_p = _probabilities("exposure_model", theta, x_p_arr, batch_size)
    col_u = _probabilities("exposure_model", theta, x_u_arr, batch_size)
    col_e = _probabilities("reference", reference, x_e_arr, batch_size)
    ds = data_lib.fpue_dataset(_augmented(x_p_arr, col_p), _augmented(x_u_arr, col_u),
                               _augmented(x_e_arr, col_e), e_arr, batch_size=batch_size,
                               shuffle=False)
    return ds.map(_split(x_e_arr.shape[1:]))


def _p_e_rows(x_p: Any, x_e: Any, e: Any, reference: Any, batch_size: Any,
              streams: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    if reference is None:
        raise ValueError("`reference` is required for PE/FPUE validation data (there are "
                         "no PU rows to fit a Ratio estimate on); pass a model giving "
                         "f† in [0, 1].")
    _check_yardstick("reference", reference)
    batch_size = check_int("batch_size", batch_size, streams)
    x_e_arr = _features("x_e", x_e)
    e_arr = _labels("e", e, len(x_e_arr), "x_e")
    return x_e_arr, e_arr, _p_rows(x_p, x_e_arr), batch_size
