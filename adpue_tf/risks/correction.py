"""The non-negative correction and :class:`RiskTerms`, the parts of a risk.

The non-negative correction, with threshold ``beta`` and step ``gamma``:

* ``gamma=None`` (the paper): when ``R- < -beta`` the risk is ``R+ - beta``
  and only ``R+`` gives gradient; with ``beta=0`` this is ``R+ + max(R-, 0)``.
* ``gamma`` a float (nnPU, Kiryo et al. 2017): when ``R- < -beta`` the value
  is ``R+ - beta`` but the gradient is that of ``-gamma·R-``: the step climbs
  ``R-`` back.

Under a ``tf.distribute`` strategy the inputs are a replica's shares of
``R+`` and ``R-`` (group sums over its rows divided by global counts); the
decision uses the global ``R-``, and the returned ``loss`` shares add up to
the objective of the global batch.

Example:
    >>> from adpue_tf.risks.correction import corrected
    >>> t = corrected(1.0, -0.5, non_negative=True, beta=0.0, gamma=None)
    >>> float(t.risk), float(t.fired)
    (1.0, 1.0)
"""

from __future__ import annotations

from typing import Any, NamedTuple

from keras import ops

from adpue_tf.risks._batch import num_replicas, replica_sum

__all__ = ["RiskTerms", "corrected", "no_correction", "global_value"]


class RiskTerms(NamedTuple):
    """A risk and its parts.

    Attributes:
        loss: the objective to differentiate: equals ``risk`` in value, with
            the gradient of the chosen correction step. Under a distribution
            strategy this is the replica's share.
        risk: the risk's value (global batch).
        positive: ``R+`` (global batch).
        negative: ``R-`` (global batch).
        fired: 1.0 if the non-negative correction fired, else 0.0.
    """

    loss: Any
    risk: Any
    positive: Any
    negative: Any
    fired: Any


def global_value(x: Any) -> Any:
    """The value of ``x`` summed over the replicas in sync, without gradient."""
    return replica_sum(ops.stop_gradient(x))


def no_correction(pos: Any, neg: Any, extra: Any = 0.0) -> RiskTerms:
    """Terms of the plain risk ``R+ + R- + extra`` (no correction)."""
    loss = pos + neg + extra
    return RiskTerms(
        loss=loss,
        risk=global_value(loss),
        positive=global_value(pos),
        negative=global_value(neg),
        fired=ops.zeros((), "float32"),
    )


def corrected(
    pos: Any,
    neg: Any,
    *,
    non_negative: bool,
    beta: float,
    gamma: float | None,
    extra: Any = 0.0,
) -> RiskTerms:
    """Apply the non-negative correction to ``R-``.

    Args:
        pos: this replica's share of ``R+``.
        neg: this replica's share of ``R-``.
        non_negative: apply the correction (else the plain ``R+ + R- + extra``).
        beta: threshold, ``>= 0``: the correction fires when ``R- < -beta``.
        gamma: ``None`` (gradient of ``R+ + extra`` when fired) or nnPU's step
            (gradient of ``-gamma·R-`` when fired).
        extra: a term kept outside the correction (nnPE's ``C``).

    Returns:
        :class:`RiskTerms`; ``loss`` has the value ``R+ - beta + extra`` when
        fired (``R+ + R- + extra`` otherwise) and the step's gradient.
    """
    if not non_negative:
        return no_correction(pos, neg, extra)
    g_pos, g_neg = global_value(pos), global_value(neg)
    fired = ops.less(g_neg, -beta)
    step = pos + extra if gamma is None else -gamma * neg
    # Value R+ - beta (+ C), gradient of `step`; shares sum over replicas.
    clipped = (
        step
        - ops.stop_gradient(step)
        + ops.stop_gradient(pos + extra)
        - beta / num_replicas()
    )
    loss = ops.where(fired, clipped, pos + neg + extra)
    g_extra = global_value(extra) if not isinstance(extra, float) else extra
    return RiskTerms(
        loss=loss,
        risk=ops.where(fired, g_pos - beta, g_pos + g_neg) + g_extra,
        positive=g_pos,
        negative=g_neg,
        fired=ops.cast(fired, "float32"),
    )
