"""Internal: the checks of :class:`~adpue_tf.tuning.DebiasedHyperModel`'s arguments and data."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any

import keras
import keras_tuner
import numpy as np
import tensorflow as tf

from adpue_tf._internal.checks import check_bool, check_initial_guess, check_options
from adpue_tf.losses import DebiasedLoss


def loss_entries(loss_class: type[DebiasedLoss],
                 options: Mapping[str, Any] | None = None) -> list[str]:
    """The entries a loss adds to the search space: ``alpha``, ``beta``/``gamma``, ``prior``.

    ``alpha`` where the loss takes it; ``beta`` and ``gamma`` where it has the
    non-negative correction and ``options`` do not turn it off
    (``non_negative=False``); ``prior`` where it takes a class prior.
    """
    params = inspect.signature(loss_class.__init__).parameters
    names = ["alpha"] if "alpha" in params else []
    if "beta" in params and "gamma" in params and (options or {}).get("non_negative", True):
        names += ["beta", "gamma"]
    return names + (["prior"] if "prior" in params else [])


def check_net(build_net: Callable[..., Any] | None, input_shape: Any) -> None:
    """A callable ``build_net``, or an ``input_shape`` for the default linear model."""
    if build_net is None and input_shape is None:
        raise ValueError("Give `input_shape` (e.g. (n_features,)) for the default linear "
                         "model, or a `build_net`.")
    if build_net is not None and not callable(build_net):
        raise TypeError(f"`build_net` must be a callable hp -> keras.Model, got {build_net!r}.")


def check_alternate(loss_class: type[DebiasedLoss], alternate: Any) -> bool:
    """``alternate`` as a bool, refused for a loss that does not use ``f†``."""
    if check_bool("alternate", alternate) and not loss_class.uses_dagger:
        raise ValueError(f"`alternate=True` needs a loss that uses f†; "
                         f"{loss_class.__name__} does not.")
    return alternate


def check_initial_dagger(value: Any) -> float:
    """``f†`` before the first refresh: a number in ``[0, 1]``."""
    return check_initial_guess(value, models=False)


def check_loss_options(loss_class: type[DebiasedLoss],
                       options: Mapping[str, Any] | None) -> dict[str, Any]:
    """The loss's fixed options: known to it, and none of the search space's entries."""
    options = dict(options or {})
    if "from_logits" in options:
        raise ValueError("`loss_options` may not set 'from_logits': losses are built with "
                         "from_logits=True.")
    if "prior" in options:
        raise ValueError("`loss_options` may not set 'prior': use `prior=`.")
    tuned = sorted(set(options) & set(loss_entries(loss_class, options)))
    if tuned:
        key = tuned[0]
        raise ValueError(f"`loss_options` may not set {key!r}: it is a hyper-parameter; fix "
                         f"it with hp.Fixed({key!r}, {options[key]!r}) in the "
                         "HyperParameters given to the tuner.")
    params = inspect.signature(loss_class.__init__).parameters
    unknown = sorted(set(options) - set(params) - {"self"})
    if unknown:
        raise ValueError(f"`loss_options` {unknown} are not options of "
                         f"{loss_class.__name__}.")
    return options


def check_prior(loss_class: type[DebiasedLoss], prior: Any) -> float | None:
    """``prior``: required by a loss that takes one, refused by the others."""
    takes_prior = "prior" in inspect.signature(loss_class.__init__).parameters
    if takes_prior and prior is None:
        raise ValueError(f"{loss_class.__name__} needs the class prior: pass `prior=` (the "
                         "value of q(w=1), also the reference when `prior` is tuned).")
    if not takes_prior and prior is not None:
        raise ValueError(f"{loss_class.__name__} takes no class prior; drop `prior`.")
    return None if prior is None else check_options(prior=prior)["prior"]


def _label_columns(validation_data: Any) -> int | None:
    """Columns of the packed labels of ``validation_data`` (None when unknown)."""
    try:
        if isinstance(validation_data, tf.data.Dataset):
            spec = validation_data.element_spec
            y_spec = spec[1] if isinstance(spec, tuple) and len(spec) >= 2 else None
            shape = None if y_spec is None else y_spec.shape
        elif isinstance(validation_data, (tuple, list)) and len(validation_data) >= 2:
            shape = np.shape(validation_data[1])
        else:
            return None
        return None if shape is None or len(shape) != 2 else shape[-1]
    except (TypeError, ValueError, AttributeError):
        return None


def check_validation_data(objective_name: str, validation_data: Any, layout: bool) -> None:
    """Held-out data given, in the validation layout where ``layout``; else a fatal error."""
    if validation_data is None:
        raise keras_tuner.errors.FatalValueError(
            f"The tuner objective {objective_name!r} is a risk on held-out data, "
            "so it needs data that was not given: pass `validation_data=` to "
            "`tuner.search` (held-out rows of the same setting, e.g. "
            "adp.validation.pue_validation_data(...) for PUE, "
            "adp.data.sse_dataset(..., shuffle=False) for SSE). `validation_split` is no "
            "substitute: it would cut the packed rows without regard to their source.")
    columns = _label_columns(validation_data) if layout else None
    if columns is not None and columns != 4:
        raise keras_tuner.errors.FatalValueError(
            f"The tuner objective {objective_name!r} reads the fitted θ̂ and "
            "the reference f† from column 3 of the validation labels, but "
            f"`validation_data` has labels of {columns} columns. Build it with "
            "adp.validation.pue_validation_data(x_pu, w, x_e, e) (or "
            "pe_validation_data / fpue_validation_data) from held-out rows.")


def fit_arguments(model: keras.Model, args: tuple[Any, ...],
                  kwargs: dict[str, Any]) -> inspect.BoundArguments | None:
    """``model.fit``'s arguments bound to Keras's signature (None if they do not bind)."""
    try:  # Keras's own signature: a subclass's fit may take (*args, **kwargs)
        return inspect.signature(keras.Model.fit).bind_partial(model, *args, **kwargs)
    except TypeError:
        return None
