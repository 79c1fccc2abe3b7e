"""Keras ``Loss`` classes: thin wrappers over :mod:`adpue_tf.risks`.

Every class takes a packed ``y_true`` (see :mod:`adpue_tf.labels`) and returns
the batch's scalar risk, computed in float32 from logits whatever the model's
dtype policy. ``sample_weight`` weighs rows inside each group mean.

One vocabulary, as Keras's ``huber`` / ``Huber`` / ``"huber"``: the risk
function :func:`adpue_tf.risks.adpue`, the class :class:`ADPUELoss` and the
key ``"adpue"`` name the same thing, with the same options and defaults; the
same holds for every loss here (:data:`LOSSES`). :func:`get` resolves a key, a
class name, a serialized config or an instance to a loss; :func:`get_class`
gives the class (Keras's ``compile(loss="adpue")`` reads only its own keys:
pass ``get("adpue")``). A fit whose output blows up stops with
:class:`DivergedError` (a plain model's compiled ``fit``: an
``InvalidArgumentError``); :func:`is_divergence` tells both from other errors.

Example:
    >>> import keras, adpue_tf as adp
    >>> model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    >>> model.compile(optimizer="adam", loss=adp.ADPUELoss(from_logits=True))
    >>> adp.losses.get("adpe", prior=0.3, from_logits=True).name
    'adpe_loss'
"""

from adpue_tf._internal.guards import DivergedError, is_divergence
from adpue_tf.losses import baselines, debiasing, exposure
from adpue_tf.losses.base import REDUCTION, DebiasedLoss
from adpue_tf.losses.baselines import *  # noqa: F403  (each module's __all__: its classes)
from adpue_tf.losses.debiasing import *  # noqa: F403
from adpue_tf.losses.exposure import *  # noqa: F403
from adpue_tf.losses.registry import LOSSES, get, get_class

__all__ = ["LOSSES", "REDUCTION", "get", "get_class", "DebiasedLoss", "DivergedError",
           "is_divergence"]
__all__ += debiasing.__all__ + baselines.__all__ + exposure.__all__
