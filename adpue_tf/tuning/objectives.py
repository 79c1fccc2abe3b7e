"""Observable tuning objectives: which held-out risk ranks the trials of a search.

Used by :class:`adpue_tf.tuning.DebiasedHyperModel`; see :func:`objective`
for the choice per loss. Needs keras-tuner (the ``tune`` extra).

Example:
    >>> objective("double_adss").name
    'val_l_risk'
"""

from __future__ import annotations

import keras_tuner

from adpue_tf import losses as losses_lib
from adpue_tf.losses import DebiasedLoss

__all__ = ["LOSSES", "L_RISK", "REF_RISK", "objective"]

#: The losses by key, for ``DebiasedHyperModel(loss=...)``: the package's
#: registry, :data:`adpue_tf.losses.LOSSES`.
LOSSES = losses_lib.LOSSES

#: Metric name of the L risk (ADS: cross-entropy with ``W`` on exposed SSE rows).
L_RISK = "l_risk"
#: Metric name of the risk at the reference options (used when ``β`` or ``π`` is tuned).
REF_RISK = "ref_risk"

#: Losses trained on SSE data, where the L risk is observable; the others
#: (PUE, PE, FPUE and the PU baselines) are scored by their own risk.
_SSE_LOSSES: tuple[type[DebiasedLoss], ...] = (
    losses_lib.ADSLoss,
    losses_lib.ADSSLoss,
    losses_lib.DoubleADSSLoss,
    losses_lib.AD3SELoss,
    losses_lib.PNULoss,
)

def loss_class(loss: str | type[DebiasedLoss]) -> type[DebiasedLoss]:
    """Resolve a loss key, class name or class (:func:`adpue_tf.losses.get_class`)."""
    if isinstance(loss, str) or (isinstance(loss, type) and issubclass(loss, DebiasedLoss)):
        return losses_lib.get_class(loss)
    if isinstance(loss, DebiasedLoss):
        raise TypeError(f"`loss` must be a name or a DebiasedLoss class, not an instance "
                        f"({loss!r}): the hyper-model builds a new loss for every trial; "
                        f"pass {type(loss).__name__} and fixed options in `loss_options`.")
    raise TypeError(f"`loss` must be one of {sorted(LOSSES)} or a DebiasedLoss subclass, "
                    f"got {loss!r}.")


def objective(loss: str | type[DebiasedLoss]) -> keras_tuner.Objective:
    """The observable tuning objective of a loss, to minimise.

    * PUE, PE, FPUE (``adpue``, ``adpe``, ``adfpu``) and the PU baselines:
      ``val_risk``, the loss's own debiased risk on held-out data of the same
      setting. There are no rows with ``W`` and ``E`` together, so no other
      observable estimate of the true risk exists; the risk is the one the
      model minimises, with the options fixed across trials (only the
      learning rate and the net vary). Caveat: with the default direct
      ``f† = σ(z)`` each trial's risk reads its own proxy, and ``R(f; f)`` is
      not a proper score: over-confident models can score lower (measured
      on 400k synthetic rows: the true logit 0.440, the same logit doubled
      and shifted by 0.5: 0.384). Prefer SSE-type held-out data and
      ``val_l_risk`` when you can collect it.
    * SSE losses (``ads``, ``adss``, ``double_adss``, ``ad3se``, PNU):
      ``val_l_risk``, the L risk (:class:`~adpue_tf.losses.ADSLoss`:
      cross-entropy with ``W`` on the exposed held-out SSE rows). Scoring by
      the trained risk would be circular for DoubleADSS and AD3SE: ``α`` sets
      the mixture ``α·SS + (1-α)·L`` (or ``α·R3 + (1-α)·L``) being measured,
      so each ``α`` would be judged by its own rule. On exposed rows
      ``W = Y``, and under strong ignorability (``Y ⫫ E | x``) they are a fair
      sample of ``Y`` given ``x``: the L risk is an unbiased estimate of the
      true cross-entropy on the exposed population, whatever the model or
      ``α``, and since cross-entropy is a proper scoring rule its minimiser
      is ``p(y=1|x)`` at every ``x``. It is the same for every trial, so it
      ranks ``α`` fairly (SS's risk also reads the model's own ``f†``,
      which is not a fixed yardstick either, hence ADSS uses it too; for
      ADS it equals ``val_risk``).

    Args:
        loss: a name of :data:`LOSSES` or a :class:`DebiasedLoss` subclass.

    Returns:
        ``keras_tuner.Objective("val_risk" | "val_l_risk", direction="min")``.

    Raises:
        ValueError: on an unknown loss name.
        TypeError: on anything but a name or a DebiasedLoss subclass.

    Example:
        >>> objective("adpue").name, objective("ad3se").name
        ('val_risk', 'val_l_risk')
    """
    cls = loss_class(loss)
    name = L_RISK if issubclass(cls, _SSE_LOSSES) else "risk"
    return keras_tuner.Objective(f"val_{name}", direction="min")
