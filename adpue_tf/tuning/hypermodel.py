"""A KerasTuner hyper-model for the debiased losses, scored by an observable objective.

:class:`DebiasedHyperModel` declares its search space where it uses it, in
``build(hp)`` and ``fit(hp, ...)`` as KerasTuner's own hyper-models do, builds
and compiles one model per trial, and ranks trials by a held-out risk that
needs no hidden label ``Y`` (:func:`~adpue_tf.tuning.objectives.objective`).
A guide with a search: ``docs/guide/tuning.md``; several machines:
``docs/distributed-tuning.md``.

Example:
    >>> import keras_tuner
    >>> hm = DebiasedHyperModel(loss="double_adss", input_shape=(2,))
    >>> hp = keras_tuner.HyperParameters()
    >>> model = hm.build(hp)
    >>> hp.values
    {'learning_rate': 0.001, 'weight_decay': 0.0, 'alpha': 0.5}
    >>> hm.objective.name
    'val_l_risk'
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import keras
import keras_tuner

from adpue_tf._internal.checks import check_shape
from adpue_tf._internal.convention import check_output_convention
from adpue_tf._internal.net_checks import check_one_output
from adpue_tf.callbacks import RefreshDagger
from adpue_tf.losses import DebiasedLoss
from adpue_tf.metrics.risk import risk_metrics
from adpue_tf.model import DebiasedModel
from adpue_tf.tuning import _arguments as args_lib
from adpue_tf.tuning.objectives import (
    _SSE_LOSSES,
    EXPOSURE_NLL,
    L_RISK,
    LOSSES,
    REF_RISK,
    loss_class,
    objective,
    objective_metric,
)

__all__ = ["LOSSES", "L_RISK", "REF_RISK", "EXPOSURE_NLL", "DebiasedHyperModel", "objective"]


#: The bounds a trial's value must lie within, whatever the user's narrowing.
_BOUNDS: dict[str, Callable[[float], bool]] = {
    "> 0": lambda v: v > 0.0,
    ">= 0": lambda v: v >= 0.0,
    "in [0, 1]": lambda v: 0.0 <= v <= 1.0,
    "in (0, 1)": lambda v: 0.0 < v < 1.0,
    "an int >= 1": lambda v: v >= 1 and v == int(v),
}


def _within(bounds: str, **entries: Any) -> None:
    """Each entry's trial value within ``bounds`` (a key of ``_BOUNDS``); else a fatal error.

    The error is a ``FatalValueError``: a narrowing out of bounds is not a trial to retry.
    """
    for name, value in entries.items():
        if isinstance(value, bool) or not isinstance(value, numbers.Real) \
                or not math.isfinite(value) or not _BOUNDS[bounds](float(value)):
            raise keras_tuner.errors.FatalValueError(
                f"The hyper-parameter `{name}` must be {bounds}, got {value!r}; narrow it "
                "within these bounds in the HyperParameters given to the tuner.")


class DebiasedHyperModel(keras_tuner.HyperModel):
    """A KerasTuner hyper-model for one debiased loss.

    Each trial builds the net (``build_net(hp)``, default a linear model on
    ``input_shape``), wraps it in :class:`~adpue_tf.DebiasedModel` with
    ``alternate``, and compiles it with ``keras.optimizers.Adam`` and the loss
    (``from_logits=True``: the net outputs one logit). The search space is
    written in :meth:`build` (``learning_rate``, ``weight_decay``),
    :meth:`make_loss` (``alpha``, ``beta``, ``gamma``, ``prior``: those the
    loss takes) and :meth:`fit` (``refresh_every``, with ``alternate``), each
    entry with a default, plus whatever ``build_net`` declares; the Tuning
    guide tabulates it. Narrow it the KerasTuner way: declare an entry first
    in a ``keras_tuner.HyperParameters`` given to the tuner, e.g.
    ``hp.Choice("learning_rate", [1e-2, 3e-2])``, ``hp.Fixed("alpha", 1.0)``
    or ``hp.Float("prior", 0.2, 0.4)`` (the reference stays ``prior``); with
    ``tune_new_entries=False`` every entry not declared keeps its default.

    The objective, :attr:`objective`, is observable and proper (see
    :func:`~adpue_tf.tuning.objectives.objective`): ``val_exposure_nll`` or
    ``val_ref_risk`` (by ``criterion``) for PUE/PE/FPUE and the PU baselines,
    read from held-out data in the layout of :mod:`adpue_tf.validation`;
    ``val_l_risk`` for the SSE losses. It is the same yardstick for every
    trial, whatever its values. The compiled model also logs ``risk``,
    ``r_pos``, ``r_neg`` and ``nn_fired``. ``optimizer=``, ``loss=`` or
    ``metrics=`` given to the tuner (which would compile each trial again) are refused.

    Args:
        build_net: ``hp -> keras.Model`` with one logit output; may declare
            its own hyper-parameters. Default: ``Dense(1)`` on ``input_shape``.
        input_shape: feature shape (without the batch axis); needed when
            ``build_net`` is None.
        loss: a key of :data:`LOSSES` (``"adpue"``, ``"double_adss"``, ...)
            or a :class:`~adpue_tf.losses.DebiasedLoss` subclass.
        prior: the class prior ``π`` of losses that take one (required for
            them, refused for the others): the ``prior`` entry's default and
            the objective's reference.
        alternate: wrap the net in :class:`~adpue_tf.DebiasedModel` and add
            :class:`~adpue_tf.RefreshDagger` in :meth:`fit`.
        initial_dagger: ``f†`` before the first refresh (with ``alternate``).
        criterion: the score of PUE/PE/FPUE and the PU baselines,
            ``"exposure_likelihood"`` or ``"reference_risk"``, or None for the
            loss's default; unused for the SSE losses.
        loss_options: fixed options of the loss (e.g. ``{"non_negative":
            False}``); not ``from_logits``, ``prior`` nor an entry of the space.
        name: name of the hyper-model.
        tunable: KerasTuner's flag: whether new entries join the search space.

    Raises:
        ValueError: on an unknown loss or criterion, a missing or needless
            ``prior``, bad ``loss_options``, or ``alternate`` with a loss that
            does not use ``f†``.
        TypeError: on a loss instance, a non-callable ``build_net`` or a bad
            ``input_shape``.

    Example:
        >>> import tempfile, keras_tuner, adpue_tf as adp
        >>> hm = DebiasedHyperModel(loss="ad3se", input_shape=(2,), alternate=True)
        >>> hp = keras_tuner.HyperParameters()
        >>> _ = hp.Choice("learning_rate", [1e-2, 3e-2])  # narrowed
        >>> _ = hp.Fixed("beta", 0.0)  # not tuned
        >>> isinstance(hm.build(hp), adp.DebiasedModel), hm.objective.name
        (True, 'val_l_risk')
        >>> hp.values
        {'learning_rate': 0.01, 'beta': 0.0, 'weight_decay': 0.0, 'alpha': 0.5, 'gamma': 0.0}
        >>> tuner = keras_tuner.RandomSearch(  # searches these two learning rates only
        ...     hm, objective=hm.objective, hyperparameters=hp, tune_new_entries=False,
        ...     max_trials=2, directory=tempfile.mkdtemp())
    """

    def __init__(
        self,
        *,
        build_net: Callable[[keras_tuner.HyperParameters], keras.Model] | None = None,
        input_shape: int | Sequence[int] | None = None,
        loss: str | type[DebiasedLoss] = "adpue",
        prior: float | None = None,
        alternate: bool = False,
        initial_dagger: float = 0.5,
        criterion: str | None = None,
        loss_options: Mapping[str, Any] | None = None,
        name: str | None = None,
        tunable: bool = True,
    ) -> None:
        super().__init__(name=name, tunable=tunable)
        self.loss_class = loss_class(loss)
        objective(self.loss_class, criterion)  # refuses an unknown or unfit criterion
        self.criterion = criterion
        args_lib.check_net(build_net, input_shape)
        self.build_net = build_net
        self.input_shape = None if input_shape is None else check_shape("input_shape", input_shape)
        self.alternate = args_lib.check_alternate(self.loss_class, alternate)
        self.initial_dagger = args_lib.check_initial_dagger(initial_dagger)
        self.loss_options = args_lib.check_loss_options(self.loss_class, loss_options)
        self.prior = args_lib.check_prior(self.loss_class, prior)
        self.make_loss(keras_tuner.HyperParameters())  # fail now on options the loss refuses

    @property
    def objective(self) -> keras_tuner.Objective:
        """The tuner objective: :func:`objective` of the loss and ``criterion``."""
        return objective(self.loss_class, self.criterion)

    def make_loss(self, hp: keras_tuner.HyperParameters) -> DebiasedLoss:
        """The trial's loss, declaring its entries (``alpha``, ``beta``, ``gamma``, ``prior``).

        Those the loss takes: ``alpha`` (0, 0.25, ..., 1; default 0.5) where it
        weighs two risks (DoubleADSS, AD3SE); ``beta`` (0, 0.01, 0.1; default 0)
        and ``gamma`` (0, 0.5, 1; default 0, meaning ``None``) where it has the
        non-negative correction and ``loss_options`` leave it on; ``prior``,
        ``Fixed`` at ``prior=``, where it takes a class prior.

        Args:
            hp: the trial's hyper-parameters (new entries get their defaults).

        Returns:
            A :class:`DebiasedLoss` with ``from_logits=True``.

        Example:
            >>> import keras_tuner
            >>> hm = DebiasedHyperModel(loss="adpe", prior=0.3, input_shape=(2,))
            >>> hp = keras_tuner.HyperParameters()
            >>> hm.make_loss(hp).get_config()["gamma"] is None, hp.values
            (True, {'beta': 0.0, 'gamma': 0.0, 'prior': 0.3})
        """
        kwargs: dict[str, Any] = {"from_logits": True, **self.loss_options}
        entries = args_lib.loss_entries(self.loss_class, self.loss_options)
        if "alpha" in entries:  # DoubleADSS, AD3SE: the weight between their two risks
            kwargs["alpha"] = hp.Choice("alpha", [0.0, 0.25, 0.5, 0.75, 1.0], default=0.5)
            _within("in [0, 1]", alpha=kwargs["alpha"])
        if "beta" in entries:  # the non-negative correction's slack and step
            kwargs["beta"] = hp.Choice("beta", [0.0, 0.01, 0.1], default=0.0)
            gamma = hp.Choice("gamma", [0.0, 0.5, 1.0], default=0.0)
            _within(">= 0", beta=kwargs["beta"])
            _within("in [0, 1]", gamma=gamma)
            kwargs["gamma"] = gamma or None  # 0: the paper's plain max(R-, 0); > 0: nnPU's step
        if "prior" in entries:  # the reference prior: tuned only where the user narrows it
            kwargs["prior"] = hp.Fixed("prior", self.prior)
            _within("in (0, 1)", prior=kwargs["prior"])
        return self.loss_class(**kwargs)

    def build(self, hp: keras_tuner.HyperParameters) -> keras.Model:
        """Build and compile the trial's model.

        Declares ``learning_rate`` (1e-3, 3e-3, 1e-2, 3e-2; default 1e-3) and
        ``weight_decay`` (0, 1e-3, 1e-2, 1e-1; default 0: none), then the
        loss's entries (:meth:`make_loss`), then calls ``build_net(hp)``.

        Args:
            hp: the trial's hyper-parameters.

        Returns:
            A compiled ``keras.Model`` (a ``DebiasedModel`` with ``alternate``).

        Raises:
            TypeError: if ``build_net`` does not return a ``keras.Model``.
            ValueError: if its model has several outputs or output units, or
                ends in a sigmoid/softmax; a ``FatalValueError`` if a narrowed
                entry takes a value outside its bounds.
        """
        learning_rate = hp.Choice("learning_rate", [1e-3, 3e-3, 1e-2, 3e-2], default=1e-3)
        _within("> 0", learning_rate=learning_rate)
        weight_decay = hp.Choice("weight_decay", [0.0, 1e-3, 1e-2, 1e-1], default=0.0)
        _within(">= 0", weight_decay=weight_decay)  # Adam's decoupled decay; 0: none
        loss = self.make_loss(hp)
        if self.build_net is None:
            net = keras.Sequential([keras.Input(self.input_shape), keras.layers.Dense(1)])
        else:
            net = self.build_net(hp)
            if not isinstance(net, keras.Model):
                raise TypeError(f"`build_net` must return a keras.Model, got {net!r}.")
            check_one_output("build_net(hp)", net)  # before Keras meets a second output
            check_output_convention("`build_net(hp)`", net, from_logits=True)
        model = (DebiasedModel(net, initial_dagger=self.initial_dagger) if self.alternate
                 else net)
        metrics = [] if self.alternate else risk_metrics(loss)  # DebiasedModel logs its own
        metrics.append(objective_metric(self.loss_class, self.criterion, prior=self.prior,
                                        loss_options=self.loss_options))
        model.compile(optimizer=keras.optimizers.Adam(learning_rate=learning_rate,
                                                      weight_decay=weight_decay or None),
                      loss=loss, metrics=metrics)
        # fit() refuses a model the tuner compiles again (its loss=, metrics=, optimizer=)
        compile_once = model.compile

        def compile_again(*args: Any, **kwargs: Any) -> None:
            object.__setattr__(model, "_adpue_compiled_again", True)
            compile_once(*args, **kwargs)

        object.__setattr__(model, "compile", compile_again)
        return model

    def fit(self, hp: keras_tuner.HyperParameters, model: keras.Model, *args: Any,
            **kwargs: Any) -> Any:
        """Train one trial with ``model.fit``; with ``alternate``, adds ``RefreshDagger``.

        Declares ``refresh_every`` (1, 2, 4; default 1) with ``alternate``,
        unless ``callbacks`` already hold a ``RefreshDagger``.

        Args:
            hp: the trial's hyper-parameters.
            model: the model from :meth:`build`.
            *args: positional arguments of ``tuner.search`` (``x``, ...).
            **kwargs: keyword arguments of ``tuner.search``; must include
                ``validation_data``: held-out data of the loss's setting (from
                the same builder, ``shuffle=False``).

        Returns:
            The ``History`` of ``model.fit``.

        Raises:
            ValueError: (a ``keras_tuner.errors.FatalValueError``, so that the
                tuner stops instead of retrying) when ``validation_data`` is
                missing, or, for PUE/PE/FPUE, not in the validation layout
                (labels of 4 columns, from ``adp.validation.pue_validation_data``
                etc.), ``refresh_every`` is narrowed to a value below 1, or the
                tuner compiled the model again (``loss=``, ``metrics=`` or
                ``optimizer=`` given to the tuner).
        """
        if getattr(model, "_adpue_compiled_again", False):
            raise keras_tuner.errors.FatalValueError(
                "The tuner compiled the trial's model again, replacing the loss, metrics or "
                "optimizer that build() gave it (a `loss=`, `metrics=` or `optimizer=` "
                "passed to the tuner): the trial would train on another loss or lose the "
                f"metric its objective {self.objective.name!r} reads. Pass none of them to "
                "the tuner; narrow this hyper-model's entries instead.")
        bound = args_lib.fit_arguments(model, args, kwargs)
        if bound is None:
            return model.fit(*args, **kwargs)  # Keras reports the bad arguments
        arguments = bound.arguments
        args_lib.check_validation_data(self.objective.name, arguments.get("validation_data"),
                                       layout=not issubclass(self.loss_class, _SSE_LOSSES))
        callbacks = list(arguments.get("callbacks") or [])
        if self.alternate and not any(isinstance(c, RefreshDagger) for c in callbacks):
            # No entry for the rounds T: KerasTuner scores a trial by its best epoch.
            every = hp.Choice("refresh_every", [1, 2, 4], default=1)
            _within("an int >= 1", refresh_every=every)
            arguments["callbacks"] = [*callbacks, RefreshDagger(every_n_epochs=int(every))]
        return model.fit(*bound.args[1:], **bound.kwargs)

