"""The search space of :class:`~adpue_tf.tuning.DebiasedHyperModel`: names, values, defaults.

The hyper-model declares each entry with the values of :data:`VALUES` and the
default of :data:`DEFAULTS` (the losses' own defaults, Adam's usual learning
rate, no weight decay, a refresh every epoch). Narrow an entry the KerasTuner
way: declare the same name first in the ``keras_tuner.HyperParameters`` given
to the tuner (``hyperparameters=hp``); see the Tuning guide page.

Example:
    >>> import keras_tuner
    >>> hp = keras_tuner.HyperParameters()
    >>> declare(hp, "alpha"), hp.space[0].values
    (0.5, [0.0, 0.25, 0.5, 0.75, 1.0])
"""

from __future__ import annotations

import inspect
import math
import numbers
from collections.abc import Callable, Mapping
from typing import Any

import keras_tuner

from adpue_tf.losses import DebiasedLoss

__all__ = ["DEFAULTS", "VALUES", "check", "declare", "loss_entries", "make_loss"]

#: The values each entry is searched over unless narrowed.
VALUES: dict[str, tuple[float, ...]] = {
    "learning_rate": (1e-3, 3e-3, 1e-2, 3e-2),
    "weight_decay": (0.0, 1e-3, 1e-2, 1e-1),
    "alpha": (0.0, 0.25, 0.5, 0.75, 1.0),
    "beta": (0.0, 0.01, 0.1),
    "gamma": (0.0, 0.5, 1.0),
    "refresh_every": (1, 2, 4),
}

#: Each entry's default: ``gamma = 0.0`` stands for ``gamma=None``, the paper's
#: plain ``max(R-, 0)``; ``weight_decay = 0.0`` for none.
DEFAULTS: dict[str, float] = {
    "learning_rate": 1e-3, "weight_decay": 0.0, "alpha": 0.5, "beta": 0.0, "gamma": 0.0,
    "refresh_every": 1,
}

#: Where a trial's value must lie, whatever the user's narrowing.
_RULES: dict[str, tuple[Callable[[float], bool], str]] = {
    "learning_rate": (lambda v: v > 0.0, "> 0"),
    "weight_decay": (lambda v: v >= 0.0, ">= 0 (0 meaning none)"),
    "alpha": (lambda v: 0.0 <= v <= 1.0, "in [0, 1]"),
    "beta": (lambda v: v >= 0.0, ">= 0"),
    "gamma": (lambda v: 0.0 <= v <= 1.0, "in [0, 1] (0 meaning None)"),
    "prior": (lambda v: 0.0 < v < 1.0, "in (0, 1)"),
    "refresh_every": (lambda v: v >= 1 and v == int(v), "an int >= 1"),
}


def check(name: str, value: Any) -> Any:
    """``value`` of the entry ``name`` if it is allowed; else a ``FatalValueError``.

    The error is fatal to a search (a bad narrowing is not a trial to retry).

    Example:
        >>> check("alpha", 0.25)
        0.25
    """
    rule, allowed = _RULES[name]
    if isinstance(value, bool) or not isinstance(value, numbers.Real) \
            or not math.isfinite(value) or not rule(float(value)):
        raise keras_tuner.errors.FatalValueError(
            f"The hyper-parameter `{name}` must be {allowed}, got {value!r}; narrow it within "
            "these bounds in the HyperParameters given to the tuner.")
    return value


def declare(hp: keras_tuner.HyperParameters, name: str) -> Any:
    """Declare ``name`` in ``hp`` with its :data:`VALUES` and :data:`DEFAULTS`.

    Where ``hp`` already holds ``name`` (the user narrowed it), its value
    stands; either way the trial's value is checked (:func:`check`).

    Args:
        hp: the trial's hyper-parameters.
        name: a key of :data:`VALUES`.

    Returns:
        The trial's value of ``name``.

    Example:
        >>> import keras_tuner
        >>> hp = keras_tuner.HyperParameters()
        >>> hp.Fixed("learning_rate", 0.05)
        0.05
        >>> declare(hp, "learning_rate"), declare(hp, "beta")
        (0.05, 0.0)
    """
    return check(name, hp.Choice(name, list(VALUES[name]), default=DEFAULTS[name]))


def loss_entries(loss_class: type[DebiasedLoss],
                 options: Mapping[str, Any] | None = None) -> list[str]:
    """The entries a loss adds to the space: ``alpha``, ``beta``/``gamma``, ``prior``.

    ``alpha`` where the loss takes it (DoubleADSS, AD3SE); ``beta`` and
    ``gamma`` where it has the non-negative correction and ``options`` do not
    turn it off (``non_negative=False``); ``prior`` where it takes a class
    prior (declared ``Fixed`` at the given value unless narrowed to a range).

    Example:
        >>> import adpue_tf as adp
        >>> loss_entries(adp.AD3SELoss), loss_entries(adp.ADPELoss, {"non_negative": False})
        (['alpha', 'beta', 'gamma'], ['prior'])
    """
    params = inspect.signature(loss_class.__init__).parameters
    names = ["alpha"] if "alpha" in params else []
    if "beta" in params and "gamma" in params and (options or {}).get("non_negative", True):
        names += ["beta", "gamma"]
    return names + (["prior"] if "prior" in params else [])


def make_loss(hp: keras_tuner.HyperParameters, loss_class: type[DebiasedLoss],
              options: Mapping[str, Any], prior: float | None) -> DebiasedLoss:
    """The trial's loss (``from_logits=True``), declaring its entries in ``hp``.

    Args:
        hp: the trial's hyper-parameters.
        loss_class: the loss to build.
        options: its fixed options (none of the entries, nor ``from_logits``).
        prior: the class prior, the default of ``prior`` (losses that take one).

    Returns:
        A new ``loss_class`` at the trial's values.

    Example:
        >>> import keras_tuner, adpue_tf as adp
        >>> hp = keras_tuner.HyperParameters()
        >>> make_loss(hp, adp.ADPELoss, {}, prior=0.3).get_config()["prior"], hp.values
        (0.3, {'beta': 0.0, 'gamma': 0.0, 'prior': 0.3})
    """
    kwargs: dict[str, Any] = {"from_logits": True, **options}
    for name in loss_entries(loss_class, options):
        if name == "prior":
            kwargs["prior"] = check("prior", hp.Fixed("prior", prior))
        else:
            kwargs[name] = declare(hp, name)
    if "gamma" in kwargs and kwargs["gamma"] == 0.0:
        kwargs["gamma"] = None
    return loss_class(**kwargs)
