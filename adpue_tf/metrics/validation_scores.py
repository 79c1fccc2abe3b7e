"""The observable validation scores as Keras metrics, for ``fit(validation_data=...)``.

:class:`ExposureLikelihood` and :class:`ReferenceRisk` read the yardsticks
that the validation layout (:mod:`adpue_tf.validation.layout`) carries in
column 3 of the packed labels. Inside a training step (Keras updates compiled
metrics on the training batches too) plain 3-column labels add nothing;
anywhere else (``evaluate``, the validation pass of ``fit``, a direct call)
they raise, naming the fix: a score that cannot be computed is never logged
as ``0.0``.
"""
from __future__ import annotations

import sys
import types
from typing import Any

import keras
from keras import ops

from adpue_tf import labels
from adpue_tf._internal.backend import TENSORFLOW, concrete
from adpue_tf._internal.checks import check_bool, check_probability
from adpue_tf._internal.guards import fold_checks, to_logits, with_checks
from adpue_tf.labels import Source
from adpue_tf.losses import DebiasedLoss
from adpue_tf.risks._batch import UNKNOWN_COLUMNS, check_label_dtype
from adpue_tf.risks.exposure import log_probs as _log_probs

if TENSORFLOW:
    import tensorflow as tf

__all__ = ["ExposureLikelihood", "ReferenceRisk"]

_register = keras.saving.register_keras_serializable(package="adpue_tf")


def _in_train_step() -> bool:
    """Whether the caller runs inside a Keras ``train_step`` (eager, or being traced).

    Or inside Keras's shape inference (``_symbolic_build``), which a JAX or
    PyTorch ``fit`` runs on a training batch before its first step.
    """
    frame: types.FrameType | None = sys._getframe(2)
    while frame is not None:
        # Keras's shape inference before a JAX or PyTorch fit builds the metrics
        # on a training batch too (_symbolic_build).
        if frame.f_code.co_name in ("train_step", "_symbolic_build"):
            return True
        frame = frame.f_back
    return False


def _packed_4(y_true: Any, who: str) -> Any:
    """Labels in the validation layout as float32; None for 3-column training labels."""
    y = ops.convert_to_tensor(y_true)
    check_label_dtype(y)
    if len(y.shape) == 2 and y.shape[1] is None:
        raise ValueError(f"{who}: " + UNKNOWN_COLUMNS.format(shape=tuple(y.shape)))
    if len(y.shape) == 2 and y.shape[1] == 3:
        if _in_train_step():
            return None  # training batches: no yardsticks, nothing to measure
        raise ValueError(
            f"{who} got labels without yardsticks (shape {tuple(y.shape)}, the training "
            "layout), so it cannot score the model and would log 0.0. Pass held-out data "
            "in the validation layout, shape (batch, 4): build `validation_data` (or the "
            "data given to evaluate) with adp.validation.pue_validation_data (or "
            "pe_/fpue_validation_data).")
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
    3-column labels carry no ``θ̂``, so inside a training step the metric adds
    nothing for them and its training-time value stays 0: read
    ``val_exposure_nll``. Anywhere else 3-column labels raise (validation
    data built without the layout would otherwise log 0.0 every epoch).

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
            in the validation layout (3-column labels outside a training step), P rows without ``prior`` or without U
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
        self.from_logits = check_bool("from_logits", from_logits)
        if prior is not None:
            prior = check_probability("prior", prior, interval="(0, 1)")
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
            known = concrete(ok) if not TENSORFLOW else (
                ok.numpy() if tf.executing_eagerly() and hasattr(ok, "numpy") else None)
            if known is not None:
                if not bool(known):
                    raise ValueError(message)
            elif TENSORFLOW:
                checks.append(tf.debugging.assert_equal(ok, True, message=message))
            else:
                checks.extend(fold_checks([(ok, message, None)]))
        log_s, log_not_s = _log_probs(z, y[:, labels.DAGGER])
        nll = -(y[:, labels.W] * log_s + (1.0 - y[:, labels.W]) * log_not_s)
        update = ops.stack([ops.sum(pu * nll), n_pu, ops.sum(p * log_s),
                            ops.sum(p * log_not_s), n_p, ops.sum(u * log_not_s), n_u])
        update = with_checks(update, checks)
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
    labels add nothing inside a training step (the training-time value stays
    0: read ``val_ref_risk``) and raise anywhere else.

    Args:
        loss: a :class:`~adpue_tf.losses.DebiasedLoss` that uses ``f†``.
        name: metric name; logged as ``val_<name>``.

    Raises:
        TypeError: if ``loss`` is not a ``DebiasedLoss``.
        ValueError: if ``loss`` does not use ``f†``; at update, on labels not
            in the validation layout (3-column labels outside a training step).

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
