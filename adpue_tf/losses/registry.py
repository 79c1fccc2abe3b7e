"""The registry: every loss by its key (:data:`LOSSES`), :func:`get_class` and :func:`get`."""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, cast

import keras

from adpue_tf.losses import baselines, debiasing, exposure
from adpue_tf.losses.base import DebiasedLoss

__all__ = ["LOSSES", "get", "get_class"]


#: Every loss by its key, the name of its risk function in :mod:`adpue_tf.risks`
#: (``"adpue"`` -> :class:`ADPUELoss`, whose ``risk_fn`` is ``risks.adpue``): the
#: classes each module of :mod:`adpue_tf.losses` declares in its ``__all__``.
LOSSES: Mapping[str, type[DebiasedLoss]] = MappingProxyType({
    cls.risk_fn.__name__: cls
    for cls in (getattr(module, name) for module in (debiasing, baselines, exposure)
                for name in module.__all__)
})


def _known() -> str:
    return (f"known keys: {list(LOSSES)} (case-insensitive), or their class names "
            f"({', '.join(c.__name__ for c in LOSSES.values())})")


def get_class(identifier: str | type[DebiasedLoss]) -> type[DebiasedLoss]:
    """The loss class of a key, a class name or a class.

    Args:
        identifier: a key of :data:`LOSSES` (``"adpue"``, any case, e.g. the
            method name ``"nnPU"``), a class name (``"ADPUELoss"`` or the
            registered ``"adpue_tf>ADPUELoss"``), or a :class:`DebiasedLoss`
            subclass (returned as is).

    Returns:
        The :class:`DebiasedLoss` subclass; its ``risk_fn`` is the function of
        :mod:`adpue_tf.risks` it wraps.

    Raises:
        ValueError: on an unknown name (the message lists the known ones).
        TypeError: on anything but a str or a DebiasedLoss subclass.

    Example:
        >>> get_class("nnPU").__name__, get_class("ADPUELoss").risk_fn.__name__
        ('NNPULoss', 'adpue')
    """
    if isinstance(identifier, type) and issubclass(identifier, DebiasedLoss):
        return identifier
    if not isinstance(identifier, str):
        raise TypeError(f"`identifier` must be a loss key or class name (str) or a "
                        f"DebiasedLoss subclass, got {identifier!r}; {_known()}.")
    text = identifier.strip()
    if text.startswith("adpue_tf>"):
        text = text[len("adpue_tf>"):]
    key = text.lower()
    if key in LOSSES:
        return LOSSES[key]
    for cls in LOSSES.values():
        if cls.__name__.lower() == key:
            return cls
    raise ValueError(f"Unknown loss {identifier!r}; {_known()}.")


def _check_option_names(cls: type[DebiasedLoss], options: Mapping[str, Any]) -> None:
    params = inspect.signature(cls.__init__).parameters
    takes = [n for n, p in params.items() if p.kind is p.KEYWORD_ONLY]
    unknown = sorted(set(options) - set(takes))
    if unknown:
        raise TypeError(f"{cls.__name__} takes no option {unknown}; it takes {takes}.")
    missing = [n for n in takes
               if params[n].default is inspect.Parameter.empty and n not in options]
    if missing:
        raise TypeError(f"{cls.__name__} needs {missing} (e.g. "
                        f"get({cls.risk_fn.__name__!r}, {missing[0]}=...)).")


def get(identifier: str | type[DebiasedLoss] | DebiasedLoss | Mapping[str, Any],
        **options: Any) -> DebiasedLoss:
    """A debiased loss from a key, a class name, a serialized config or an instance.

    The registry of the package, as ``keras.losses.get`` is Keras's: the tuner,
    the demo and the benchmarks resolve their losses here.

    Args:
        identifier: a key of :data:`LOSSES` (``"adpue"``, case-insensitive), a
            class name (``"ADPUELoss"``), a :class:`DebiasedLoss` subclass, a
            config dict as produced by ``keras.saving.serialize_keras_object``
            (``{"class_name": "ADPUELoss", "config": {...}, ...}``), or a
            :class:`DebiasedLoss` instance (returned as is).
        **options: the loss's options (``prior=``, ``from_logits=``, ...);
            only with a key, a class name or a class.

    Returns:
        A :class:`DebiasedLoss`.

    Raises:
        ValueError: on an unknown key or class name (the message lists the
            known ones), a config dict without ``class_name``, or bad option
            values.
        TypeError: on options the loss does not take, a missing required
            option (``prior``), options given with a config or an instance, or
            an identifier of another type.

    Example:
        >>> import keras
        >>> loss = get("nnpu", prior=0.4, surrogate="sigmoid")
        >>> type(loss).__name__
        'NNPULoss'
        >>> get(keras.saving.serialize_keras_object(loss)).get_config() == loss.get_config()
        True
    """
    if isinstance(identifier, DebiasedLoss) or isinstance(identifier, Mapping):
        if options:
            raise TypeError(f"Options {sorted(options)} apply to a loss key or class, not "
                            f"to a {type(identifier).__name__}; set them in the loss.")
    if isinstance(identifier, DebiasedLoss):
        # cast: Keras's Loss is untyped, so mypy cannot rule out type[DebiasedLoss] here
        return cast(DebiasedLoss, identifier)
    if isinstance(identifier, Mapping):
        if not isinstance(identifier.get("class_name"), str):
            raise ValueError("A loss config dict needs a 'class_name' (as produced by "
                             "keras.saving.serialize_keras_object), got keys "
                             f"{sorted(identifier)}.")
        cls = get_class(identifier["class_name"])
        config = identifier.get("config") or {}
        if not isinstance(config, Mapping):
            raise ValueError(f"The 'config' of a loss config dict must be a dict, got {config!r}.")
        _check_option_names(cls, config)
        return cls.from_config(dict(config))
    if isinstance(identifier, keras.losses.Loss):
        raise TypeError(f"{type(identifier).__name__} is a Keras loss, not an adpue_tf "
                        f"DebiasedLoss; {_known()}.")
    cls = get_class(identifier)
    _check_option_names(cls, options)
    return cls(**options)
