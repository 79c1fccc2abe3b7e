"""KerasTuner search spaces for the debiased losses: learning rate, ``α``, ``β``/``γ``, ``π``.

:class:`DebiasedHyperModel` builds and compiles one model per trial (Adam,
a loss of :mod:`adpue_tf.losses` with ``from_logits=True``) and trains it with
held-out validation data, so that the tuner ranks trials by an *observable*
objective: only ``W``/``E`` data a user has and the debiased risks, never the
hidden label ``Y`` (see :func:`objective` for which risk, and why).

Install the extra first: ``pip install "adpue_tf[tune]"`` (KerasTuner and
TensorBoard, which KerasTuner imports).

Example:
    >>> import keras_tuner
    >>> from adpue_tf.tuning import DebiasedHyperModel
    >>> hm = DebiasedHyperModel(loss="double_adss", input_shape=(2,))
    >>> hp = keras_tuner.HyperParameters()
    >>> model = hm.build(hp)
    >>> hp.values
    {'learning_rate': 0.001, 'alpha': 0.5}
    >>> hm.objective.name
    'val_l_risk'

A search: the README's "Tuning with KerasTuner" section (``validation_data`` is required, in
the validation layout of :mod:`adpue_tf.validation` for PUE/PE/FPUE); distributed
tuning (KerasTuner's chief and workers, unchanged): ``docs/distributed-tuning.md``.
Do not pass ``optimizer=``, ``loss=`` or ``metrics=`` to the tuner: they would
recompile the model and drop the risk metrics the objective reads.
"""

from __future__ import annotations

import inspect
import numbers
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import keras
import keras_tuner
import numpy as np
import tensorflow as tf

from adpue_tf import losses as losses_lib
from adpue_tf._checks import check_choices, check_shape
from adpue_tf._convention import check_output_convention
from adpue_tf.callbacks import RefreshDagger
from adpue_tf.losses import DebiasedLoss
from adpue_tf.model import DebiasedModel, _check_one_output
from adpue_tf.risk_tracking import RiskMetric, risk_metrics
from adpue_tf.tuning.objectives import (
    _SSE_LOSSES,
    EXPOSURE_NLL,
    L_RISK,
    LOSSES,
    REF_RISK,
    loss_class,
    objective,
)
from adpue_tf.validation import ExposureLikelihood, ReferenceRisk

__all__ = ["LOSSES", "L_RISK", "REF_RISK", "EXPOSURE_NLL", "DebiasedHyperModel", "objective"]

_DEFAULT_LEARNING_RATES = (1e-3, 3e-3, 1e-2, 3e-2)
_DEFAULT_ALPHAS = (0.0, 0.25, 0.5, 0.75, 1.0)
_DEFAULT_BETAS = (0.0, 0.01, 0.1)
_DEFAULT_GAMMAS = (0.0, 1.0, 0.5)


def _default(choices: list[float], preferred: float | None) -> float:
    """``preferred`` when it is one of ``choices``, else the first choice."""
    return preferred if preferred in choices else choices[0]


def _sequence(name: str, values: Any) -> Any:
    """A 1-D NumPy array of choices as a list (other values pass to ``check_choices``)."""
    if isinstance(values, np.ndarray):
        if values.ndim != 1:
            raise ValueError(f"`{name}` must be a 1-D sequence of numbers, got an array of "
                             f"shape {values.shape}.")
        return values.tolist()
    return values


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


class DebiasedHyperModel(keras_tuner.HyperModel):
    """A KerasTuner search space for one debiased loss.

    Each trial builds the net (``build_net(hp)``, default a linear model),
    optionally wraps it in :class:`~adpue_tf.DebiasedModel` for alternate
    learning, and compiles it with ``keras.optimizers.Adam`` and the loss
    (``from_logits=True``: the net must output one logit). The search space,
    each entry with a default (the loss's own default where it is a choice):

    ========================  =====================================  ===========================
    name                      when                                   values (default)
    ========================  =====================================  ===========================
    ``learning_rate``         always                                 ``learning_rates`` (1e-3)
    ``alpha``                 the loss takes ``alpha``               ``alphas`` (0.5)
                              (DoubleADSS, AD3SE)
    ``beta``, ``gamma``       ``tune_beta_gamma`` and the loss has   ``betas`` (0.0), ``gammas``
                              the non-negative correction            (0.0, i.e. ``None``)
                              (ADPUE, ADPE, ADFPU, AD3SE, nnPU)
    ``prior``                 ``priors`` or ``prior_range`` given    Choice / Float (``prior``)
    ``weight_decay``          ``weight_decays`` given                ``weight_decays`` (0.0 if
                                                                     listed, else the first)
    ``refresh_every``         ``refresh_periods`` given (with        ``refresh_periods``
                              ``alternate``)                         (``refresh_every``)
    ========================  =====================================  ===========================

    plus whatever ``build_net`` declares. ``weight_decay`` is Adam's decoupled
    weight decay (``keras.optimizers.Adam(weight_decay=...)``), an L2-type
    regulariser for any net. The number of rounds ``T`` of alternate
    learning needs no hyper-parameter: with ``refresh_every = 1`` every epoch
    ends a round, and KerasTuner scores a trial by (and keeps the checkpoint
    of) its best epoch on the objective, i.e. its best ``T`` up to
    ``epochs``; with a longer period prefer :class:`~adpue_tf.BestRound` in
    your own training loop. ``gamma = 0.0`` stands for
    ``gamma=None``, the paper's plain ``max(R-, 0)`` (only ``R+`` gives
    gradient when the correction fires); ``γ ∈ (0, 1]`` is nnPU's step.
    ``tune_beta_gamma`` is ignored for a loss without the correction.

    The objective, :attr:`objective`, is observable and proper (see
    :func:`objective`): for PUE/PE/FPUE and the PU baselines,
    ``val_exposure_nll`` (``criterion="exposure_likelihood"``, the default)
    or ``val_ref_risk`` (``criterion="reference_risk"``), read from
    validation data in the validation layout of :mod:`adpue_tf.validation`
    (:meth:`fit` refuses plain 3-column validation data for them); for the
    SSE losses ``val_l_risk``. The compiled model logs ``risk``, ``r_pos``,
    ``r_neg``, ``nn_fired`` (a ``DebiasedModel`` on its own, a plain model
    through :func:`adpue_tf.risk_tracking.risk_metrics`), plus the objective's
    metric: ``exposure_nll``, ``ref_risk`` or ``l_risk``. Both PUE/PE/FPUE
    objectives are the same yardstick for every trial, whatever ``β``,
    ``γ``, ``π``, the learning rate or the net: ``ref_risk`` is the risk at
    the reference options (``prior``, ``β = 0``, the paper's max) with the
    data's fixed ``f†``; ``exposure_nll`` uses the data's ``θ̂`` (and, on PE/FPUE
    data, the reference ``prior`` as ``q(w=1)``). (Tuning ``π`` is still a
    heuristic: these yardsticks trust the reference ``prior``.)

    Args:
        build_net: ``hp -> keras.Model`` with one logit output; may declare
            its own hyper-parameters. Default: ``Dense(1)`` on ``input_shape``.
        input_shape: feature shape (without the batch axis); needed when
            ``build_net`` is None.
        loss: one of :data:`LOSSES` (``"adpue"``, ``"adpe"``, ``"adfpu"``,
            ``"ads"``, ``"adss"``, ``"double_adss"``, ``"ad3se"``) or a
            :class:`~adpue_tf.losses.DebiasedLoss` subclass.
        prior: the class prior ``π = q(w=1)`` of losses that take one (ADPE,
            ADFPU, baselines); required for them, refused for the others;
            the default (and reference) value when ``π`` is tuned.
        priors: tune ``π`` over these values (a ``Choice``).
        prior_range: tune ``π`` as a ``Float`` in ``(low, high)``, inside ``(0, 1)``.
        alternate: wrap the net in :class:`~adpue_tf.DebiasedModel` and add
            :class:`~adpue_tf.RefreshDagger` in :meth:`fit` (alternate learning).
        initial_dagger: ``f†`` before the first refresh (with ``alternate``).
        refresh_every: refresh the snapshot every this many epochs (with
            ``alternate``); the default of ``refresh_periods``.
        refresh_periods: tune the refresh period over these ints ``>= 1``
            (with ``alternate`` only).
        weight_decays: tune Adam's weight decay over these values ``>= 0``
            (``0.0`` meaning none).
        tune_beta_gamma: tune the non-negative correction's ``β`` and ``γ``.
        criterion: the observable score of PUE/PE/FPUE and the PU
            baselines, one of :data:`~adpue_tf.validation.CRITERIA`
            (``"exposure_likelihood"`` or ``"reference_risk"``), or None for
            the loss's default (the exposure likelihood; the reference risk
            for PE); unused for the SSE losses.
        learning_rates: Adam's learning rates to try (a sequence or a 1-D array).
        alphas: values of ``α ∈ [0, 1]`` to try (DoubleADSS, AD3SE).
        betas: values of ``β >= 0`` to try.
        gammas: values of ``γ`` in ``[0, 1]`` to try, ``0.0`` meaning ``None``.
        loss_options: further fixed options of the loss (e.g.
            ``{"non_negative": False}``); not ``from_logits`` nor a tuned one.
        name: name of the hyper-model.

    Raises:
        ValueError: on an unknown loss name or criterion, a missing or needless
            ``prior``, out-of-range or empty choices, conflicting options, or
            ``alternate`` with a loss that does not use ``f†``.
        TypeError: on a loss instance, a non-callable ``build_net`` or a bad
            ``input_shape``.

    Example:
        >>> import keras_tuner, adpue_tf as adp
        >>> hm = DebiasedHyperModel(loss="ad3se", input_shape=(2,), alternate=True,
        ...                         tune_beta_gamma=True, learning_rates=[1e-2, 1e-3])
        >>> hp = keras_tuner.HyperParameters()
        >>> isinstance(hm.build(hp), adp.DebiasedModel), hm.objective.name
        (True, 'val_l_risk')
        >>> hp.values
        {'learning_rate': 0.001, 'alpha': 0.5, 'beta': 0.0, 'gamma': 0.0}
    """

    # Set by __init__; declared for type checkers (the import cycle through the
    # package leaves mypy unable to infer them there).
    refresh_every: int
    initial_dagger: float
    loss_options: dict[str, Any]
    prior: float | None
    priors: list[float] | None
    prior_range: tuple[float, float] | None
    learning_rates: list[float]
    alphas: list[float]
    betas: list[float]
    gammas: list[float]
    tunes_alpha: bool
    tunes_beta_gamma: bool

    def __init__(
        self,
        *,
        build_net: Callable[[keras_tuner.HyperParameters], keras.Model] | None = None,
        input_shape: int | Sequence[int] | None = None,
        loss: str | type[DebiasedLoss] = "adpue",
        prior: float | None = None,
        priors: Sequence[float] | None = None,
        prior_range: tuple[float, float] | None = None,
        alternate: bool = False,
        initial_dagger: float = 0.5,
        refresh_every: int = 1,
        refresh_periods: Sequence[int] | None = None,
        weight_decays: Sequence[float] | None = None,
        tune_beta_gamma: bool = False,
        criterion: str | None = None,
        learning_rates: Sequence[float] = _DEFAULT_LEARNING_RATES,
        alphas: Sequence[float] = _DEFAULT_ALPHAS,
        betas: Sequence[float] = _DEFAULT_BETAS,
        gammas: Sequence[float] = _DEFAULT_GAMMAS,
        loss_options: Mapping[str, Any] | None = None,
        name: str | None = None,
    ) -> None:
        super().__init__(name=name)
        self.loss_class = loss_class(loss)
        objective(self.loss_class, criterion)  # refuses an unknown or unfit criterion
        self.criterion = criterion
        learning_rates, alphas, betas, gammas = (
            _sequence(n, v) for n, v in (("learning_rates", learning_rates), ("alphas", alphas),
                                         ("betas", betas), ("gammas", gammas)))
        priors = None if priors is None else _sequence("priors", priors)
        prior_range = None if prior_range is None else _sequence("prior_range", prior_range)
        params = inspect.signature(self.loss_class.__init__).parameters

        if build_net is None:
            if input_shape is None:
                raise ValueError("Give `input_shape` (e.g. (n_features,)) for the default "
                                 "linear model, or a `build_net`.")
        elif not callable(build_net):
            raise TypeError(f"`build_net` must be a callable hp -> keras.Model, got {build_net!r}.")
        self.build_net = build_net
        self.input_shape = None if input_shape is None else check_shape("input_shape", input_shape)

        for flag_name, flag in (("alternate", alternate), ("tune_beta_gamma", tune_beta_gamma)):
            if not isinstance(flag, bool):
                raise TypeError(f"`{flag_name}` must be a bool, got {flag!r}.")
        self.alternate = alternate
        if alternate and not self.loss_class.uses_dagger:
            raise ValueError(f"`alternate=True` needs a loss that uses f†; "
                             f"{self.loss_class.__name__} does not.")
        if isinstance(refresh_every, bool) or not isinstance(refresh_every, numbers.Integral) \
                or refresh_every < 1:
            raise ValueError(f"`refresh_every` must be an int >= 1, got {refresh_every!r}.")
        self.refresh_every = int(refresh_every)
        self.refresh_periods: list[int] | None = None
        if refresh_periods is not None:
            if not alternate:
                raise ValueError("`refresh_periods` tunes the refresh of alternate learning; "
                                 "set `alternate=True` or drop it.")
            periods = check_choices("refresh_periods", _sequence("refresh_periods",
                                                                 refresh_periods),
                                    lambda v: v >= 1 and v == int(v), "ints >= 1")
            self.refresh_periods = [int(v) for v in periods]
        self.weight_decays: list[float] | None = (
            None if weight_decays is None else
            check_choices("weight_decays", _sequence("weight_decays", weight_decays),
                          lambda v: v >= 0.0, ">= 0"))
        if isinstance(initial_dagger, bool) or not isinstance(initial_dagger, numbers.Real) \
                or not 0.0 <= initial_dagger <= 1.0:
            raise ValueError(f"`initial_dagger` must be a number in [0, 1], got {initial_dagger!r}.")
        self.initial_dagger = float(initial_dagger)

        options = dict(loss_options or {})
        instead = {"from_logits": "losses are built with from_logits=True",
                   "alpha": "use `alphas` (one value fixes it)",
                   "prior": "use `prior`, `priors` or `prior_range`"}
        for key, why in instead.items():
            if key in options:
                raise ValueError(f"`loss_options` may not set {key!r}: {why}.")
        unknown = sorted(set(options) - set(params) - {"self"})
        if unknown:
            raise ValueError(f"`loss_options` {unknown} are not options of "
                             f"{self.loss_class.__name__}.")
        self.loss_options = options

        # -- prior ------------------------------------------------------------
        takes_prior = "prior" in params
        if takes_prior and prior is None:
            raise ValueError(f"{self.loss_class.__name__} needs the class prior: pass `prior=` "
                             "(the value of q(w=1), also the default when `priors` is tuned).")
        if not takes_prior and (prior is not None or priors is not None
                                or prior_range is not None):
            raise ValueError(f"{self.loss_class.__name__} takes no class prior; drop `prior`, "
                             "`priors` and `prior_range`.")
        if priors is not None and prior_range is not None:
            raise ValueError("Give `priors` (a Choice) or `prior_range` (a Float), not both.")
        self.prior = None if prior is None else float(prior)
        self.priors = (None if priors is None else
                       check_choices("priors", priors, lambda v: 0.0 < v < 1.0, "in (0, 1)"))
        self.prior_range = None
        if prior_range is not None:
            bounds = check_choices("prior_range", prior_range, lambda v: 0.0 < v < 1.0, "in (0, 1)")
            if len(bounds) != 2 or not bounds[0] < bounds[1]:
                raise ValueError(f"`prior_range` must be (low, high) with 0 < low < high < 1, "
                                 f"got {prior_range!r}.")
            low, high = bounds
            if not low <= self.prior <= high:
                raise ValueError(f"`prior` {self.prior} must lie in `prior_range` {prior_range}.")
            self.prior_range = (low, high)

        # -- choices ----------------------------------------------------------
        self.learning_rates = check_choices("learning_rates", learning_rates, lambda v: v > 0,
                                       "positive")
        self.alphas = check_choices("alphas", alphas, lambda v: 0.0 <= v <= 1.0, "in [0, 1]")
        self.betas = check_choices("betas", betas, lambda v: v >= 0.0, ">= 0")
        self.gammas = check_choices("gammas", gammas, lambda v: 0.0 <= v <= 1.0,
                               "in [0, 1] (0.0 meaning None)")
        self.tunes_alpha = "alpha" in params
        has_correction = "beta" in params and "gamma" in params
        self.tunes_beta_gamma = tune_beta_gamma and has_correction
        if self.tunes_beta_gamma:
            clash = sorted({"beta", "gamma"} & set(options))
            if clash or options.get("non_negative", True) is False:
                raise ValueError("`tune_beta_gamma=True` conflicts with `loss_options` "
                                 f"{clash or ['non_negative=False']}.")
        self.tunes_prior = self.priors is not None or self.prior_range is not None

        # Fail now, not in the first trial, on options the loss refuses.
        self.make_loss(keras_tuner.HyperParameters())

    # -- the search space -----------------------------------------------------
    @property
    def objective(self) -> keras_tuner.Objective:
        """The tuner objective: :func:`objective` of the loss and ``criterion``."""
        return objective(self.loss_class, self.criterion)

    @property
    def _needs_validation_layout(self) -> bool:
        return not issubclass(self.loss_class, _SSE_LOSSES)

    def make_loss(self, hp: keras_tuner.HyperParameters) -> DebiasedLoss:
        """The trial's loss, declaring its hyper-parameters in ``hp``.

        Args:
            hp: the trial's hyper-parameters (new entries get their defaults).

        Returns:
            A :class:`DebiasedLoss` with ``from_logits=True``.

        Example:
            >>> import keras_tuner
            >>> hm = DebiasedHyperModel(loss="adpe", prior=0.3, input_shape=(2,),
            ...                         tune_beta_gamma=True)
            >>> hp = keras_tuner.HyperParameters()
            >>> hm.make_loss(hp).get_config()["gamma"] is None, hp.values
            (True, {'beta': 0.0, 'gamma': 0.0})
        """
        kwargs: dict[str, Any] = {"from_logits": True, **self.loss_options}
        if self.tunes_alpha:
            kwargs["alpha"] = hp.Choice("alpha", self.alphas, default=_default(self.alphas, 0.5))
        if self.tunes_beta_gamma:
            kwargs["beta"] = hp.Choice("beta", self.betas, default=_default(self.betas, 0.0))
            gamma = hp.Choice("gamma", self.gammas, default=_default(self.gammas, 0.0))
            kwargs["gamma"] = None if gamma == 0.0 else gamma
        if self.priors is not None:
            kwargs["prior"] = hp.Choice("prior", self.priors,
                                        default=_default(self.priors, self.prior))
        elif self.prior_range is not None:
            kwargs["prior"] = hp.Float("prior", *self.prior_range, default=self.prior)
        elif self.prior is not None:
            kwargs["prior"] = self.prior
        return self.loss_class(**kwargs)

    def _reference_loss(self) -> DebiasedLoss:
        """The loss at the reference options: the given ``prior``, untuned ``β``/``γ``.

        A loss without ``f†`` (the PU baselines, on PUE data) is measured by
        nnPUE at its defaults.
        """
        if not self.loss_class.uses_dagger:
            return losses_lib.ADPUELoss(from_logits=True)
        kwargs: dict[str, Any] = {"from_logits": True, **self.loss_options}
        if self.prior is not None:
            kwargs["prior"] = self.prior
        return self.loss_class(**kwargs)

    def _metrics(self, loss: DebiasedLoss, wrapped: bool) -> list[keras.metrics.Metric]:
        metrics: list[keras.metrics.Metric] = [] if wrapped else risk_metrics(loss)
        name = self.objective.name
        if name == f"val_{L_RISK}":
            metrics.append(RiskMetric(losses_lib.ADSLoss(from_logits=True), part="risk",
                                      name=L_RISK))
        elif name == f"val_{REF_RISK}":
            metrics.append(ReferenceRisk(self._reference_loss(), name=REF_RISK))
        else:
            # q(w=1) for the P rows of PE/FPUE data; a PU baseline's prior is p(y=1).
            p_data = issubclass(self.loss_class, (losses_lib.ADPELoss, losses_lib.ADFPULoss))
            metrics.append(ExposureLikelihood(from_logits=True,
                                              prior=self.prior if p_data else None,
                                              name=EXPOSURE_NLL))
        return metrics

    def build(self, hp: keras_tuner.HyperParameters) -> keras.Model:
        """Build and compile the trial's model.

        Declares ``learning_rate`` first (then ``weight_decay`` and
        ``refresh_every`` when tuned), then the loss's hyper-parameters
        (:meth:`make_loss`), then calls ``build_net(hp)``.

        Args:
            hp: the trial's hyper-parameters.

        Returns:
            A compiled ``keras.Model`` (a ``DebiasedModel`` with ``alternate``).

        Raises:
            TypeError: if ``build_net`` does not return a ``keras.Model``.
            ValueError: if its model has several outputs or output units, or
                ends in a sigmoid/softmax while the loss takes logits.
        """
        learning_rate = hp.Choice("learning_rate", self.learning_rates,
                                  default=_default(self.learning_rates, 1e-3))
        weight_decay = None
        if self.weight_decays is not None:
            weight_decay = hp.Choice("weight_decay", self.weight_decays,
                                     default=_default(self.weight_decays, 0.0)) or None
        if self.refresh_periods is not None:
            hp.Choice("refresh_every", self.refresh_periods,
                      default=self.refresh_every if self.refresh_every in self.refresh_periods
                      else self.refresh_periods[0])
        loss = self.make_loss(hp)
        if self.build_net is None:
            net = keras.Sequential([keras.Input(self.input_shape), keras.layers.Dense(1)])
        else:
            net = self.build_net(hp)
            if not isinstance(net, keras.Model):
                raise TypeError(f"`build_net` must return a keras.Model, got {net!r}.")
            _check_one_output("build_net(hp)", net)  # before Keras meets a second output
            check_output_convention("`build_net(hp)`", net,
                                    from_logits=bool(getattr(loss, "from_logits", False)))
        model = (DebiasedModel(net, initial_dagger=self.initial_dagger) if self.alternate
                 else net)
        optimizer = keras.optimizers.Adam(learning_rate=learning_rate, weight_decay=weight_decay)
        model.compile(optimizer=optimizer, loss=loss,
                      metrics=self._metrics(loss, wrapped=self.alternate))
        return model

    def fit(self, hp: keras_tuner.HyperParameters, model: keras.Model, *args: Any,
            **kwargs: Any) -> Any:
        """Train one trial with ``model.fit``; adds ``RefreshDagger`` with ``alternate``.

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
                missing (the objective is a score on held-out data), or, for
                PUE/PE/FPUE, not in the validation layout (labels of 4
                columns, from ``adp.validation.pue_validation_data`` etc.).
        """
        try:  # Keras's own signature: a subclass's fit may take (*args, **kwargs)
            bound = inspect.signature(keras.Model.fit).bind_partial(model, *args, **kwargs)
        except TypeError:
            return model.fit(*args, **kwargs)  # Keras reports the bad arguments
        arguments = bound.arguments
        if arguments.get("validation_data") is None:
            raise keras_tuner.errors.FatalValueError(
                f"The tuner objective {self.objective.name!r} is a risk on held-out data, "
                "so it needs data that was not given: pass `validation_data=` to "
                "`tuner.search` (held-out rows of the same setting, e.g. "
                "adp.validation.pue_validation_data(...) for PUE, "
                "adp.data.sse_dataset(..., shuffle=False) for SSE). `validation_split` is no "
                "substitute: it would cut the packed rows without regard to their source.")
        if self._needs_validation_layout:
            columns = _label_columns(arguments["validation_data"])
            if columns is not None and columns != 4:
                raise keras_tuner.errors.FatalValueError(
                    f"The tuner objective {self.objective.name!r} reads the fitted θ̂ and "
                    "the reference f† from column 3 of the validation labels, but "
                    f"`validation_data` has labels of {columns} columns. Build it with "
                    "adp.validation.pue_validation_data(x_pu, w, x_e, e) (or "
                    "pe_validation_data / fpue_validation_data) from held-out rows.")
        if self.alternate:
            callbacks = list(arguments.get("callbacks") or [])
            if not any(isinstance(c, RefreshDagger) for c in callbacks):
                every = (hp.get("refresh_every") if self.refresh_periods is not None
                         and "refresh_every" in hp.values else self.refresh_every)
                callbacks.append(RefreshDagger(every_n_epochs=int(every)))
            arguments["callbacks"] = callbacks
        return model.fit(*bound.args[1:], **bound.kwargs)
