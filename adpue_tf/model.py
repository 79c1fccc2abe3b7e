"""DebiasedModel: any one-output Keras model trained with a frozen ``f†`` snapshot.

The paper's Algorithm 1 (alternate learning): ``f†`` is a frozen copy of the
model, refreshed by :class:`adpue_tf.callbacks.RefreshDagger`; before the first
refresh it is an initial guess (a constant in ``[0, 1]`` or a Keras model). The
model fills column 3 (``dagger``) of the packed labels, running the snapshot only
on the rows whose risk term reads ``f†`` (``adpue_tf/risks/_rows.py``), and the
compiled :class:`~adpue_tf.losses.DebiasedLoss` reads it. The source of ``f†``,
the checks of each step and what XLA keeps of them are described on
:class:`DebiasedModel`; the guide is ``docs/guide/alternate-learning.md``.

Example:
    >>> import keras, adpue_tf as adp
    >>> net = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    >>> model = adp.DebiasedModel(net)
    >>> model.compile(optimizer="adam", loss=adp.ADPUELoss(from_logits=True))
    >>> int(model.dagger_mode)
    0
"""

from __future__ import annotations

from typing import Any

import keras
import numpy as np
import tensorflow as tf
from keras import ops

from adpue_tf._internal.backend import BACKEND, TENSORFLOW, accelerated, jax_jit, recorded_error
from adpue_tf._internal.checks import check_initial_guess, check_int
from adpue_tf._internal.convention import check_output_convention
from adpue_tf._internal.guards import (
    error_of,
    finite_specs,
    fold_checks,
    guard_finite,
    recording_checks,
    to_logits,
    with_checks,
)
from adpue_tf._internal.net_checks import (
    check_from_logits,
    check_one_output,
    check_single_tensor,
    input_shapes,
)
from adpue_tf._internal.tracing import build_optimizer
from adpue_tf.data.builders import features_checked
from adpue_tf.distributed import MultiWorkerFit
from adpue_tf.losses import DebiasedLoss
from adpue_tf.metrics.risk import RiskTracker
from adpue_tf.risks import _rows
from adpue_tf.risks._batch import check_sources, num_replicas

__all__ = ["ACCELERATOR_STEPS", "DebiasedModel", "DIRECT", "INITIAL", "SNAPSHOT"]

DIRECT, INITIAL, SNAPSHOT = 0, 1, 2
#: Steps per call of the training function that ``compile(steps_per_execution="auto")``
#: gives on a GPU or TPU.
ACCELERATOR_STEPS = 32
#: The dtype of the state counters: int64 on TensorFlow (as Keras's step counter:
#: TensorFlow keeps int32 variables in host memory, which an XLA step on a GPU
#: cannot read), int32 elsewhere (JAX has no int64 unless x64 is enabled).
_COUNTER = "int64" if TENSORFLOW else "int32"


def _value(variable: Any) -> int:
    """The value of a scalar integer variable now, on any backend."""
    if TENSORFLOW:  # Keras's convert_to_numpy warns on a TensorFlow variable (NumPy 2)
        return int(variable.numpy())
    return int(np.asarray(ops.convert_to_numpy(variable)))


#: Added to a check that failed in an XLA step (:class:`_StepChecks`).
_AFTER_XLA = (" (Checked after the step: XLA (`jit_compile`) compiles the checks away, so "
              "the weights already hold that step's update; compile with "
              "`jit_compile=False` to stop before it.)")


class _StepChecks:
    """The checks of a :class:`DebiasedModel`'s traced TensorFlow steps, raised as ``ValueError``.

    ``traced`` runs a step recording the checks it makes
    (:func:`~adpue_tf._internal.guards.recording_checks`); ``wrap`` makes the
    step function raise a failed one as its ``ValueError``: an assertion's
    ``InvalidArgumentError`` caught, or under XLA the first failed check the
    step wrote to a variable, read after each call.
    """

    def __init__(self) -> None:
        #: kind -> the (condition or None, message) of each check its traced step made
        self.found: dict[str, list[tuple[Any, str]]] = {"train": [], "test": []}
        self.late: dict[str, Any] = {}  # kind -> float32 variable: 1 + the failed check's index
        #: Train functions made since the last compile, by (refresh period, data checked,
        #: direct f†): RefreshDagger sets the period at each fit's start, clears it at its end.
        self.built: dict[tuple, Any] = {}

    def traced(self, kind: str, step: Any, *args: Any, **kwargs: Any) -> Any:
        if not TENSORFLOW or tf.executing_eagerly():
            return step(*args, **kwargs)
        with recording_checks() as found:
            logs = step(*args, **kwargs)
        self.found[kind] = found
        late = self.late.get(kind)
        here = self._here(kind)
        if late is not None and here:
            bad = tf.logical_not(tf.stack([tf.reshape(tf.cast(ok, tf.bool), ()) for ok, _ in here]))
            code = tf.where(tf.reduce_any(bad),
                            tf.cast(tf.argmax(tf.cast(bad, tf.int32)), tf.float32) + 1.0, 0.0)
            late.assign(tf.where(late > 0.0, late, code))  # the first failure of a call
        return logs

    def wrap(self, model: "DebiasedModel", kind: str) -> None:
        function = getattr(model, f"{kind}_function", None)
        if not TENSORFLOW or function is None or getattr(function, "adpue_checked", False) \
                or getattr(function, "adpue_loop", False) or model.run_eagerly:
            return
        late = None
        if model.jit_compile and not tf.distribute.has_strategy() \
                and model.distribute_strategy is tf.distribute.get_strategy():
            late = self.late.get(kind)
            if late is None:
                with tf.init_scope():
                    late = self.late[kind] = tf.Variable(0.0, trainable=False,
                                                         name=f"adpue_{kind}_check")
        else:
            self.late.pop(kind, None)

        def checked(iterator: Any) -> Any:
            try:
                logs = function(iterator)
            except tf.errors.InvalidArgumentError as err:
                own = self._own(kind, err.message)
                if own is None:
                    raise
                raise own from err
            if late is not None:
                code = int(late.numpy())
                if code:
                    late.assign(0.0)
                    words = _ending(self._here(kind)[code - 1][1])
                    raise error_of(words.replace(" before the weights are updated", "")
                                   + _AFTER_XLA)
            return logs

        checked.adpue_checked = True  # type: ignore[attr-defined]
        setattr(model, f"{kind}_function", checked)

    def _here(self, kind: str) -> list[tuple[Any, str]]:
        """The checks of ``kind``'s step made in the step's own graph (whose conditions it reads)."""
        return [(ok, m) for ok, m in self.found[kind] if ok is not None]

    def _own(self, kind: str, text: str) -> Exception | None:
        """The check of ``kind``'s step that failed with ``text``, as its error (None: not one).

        TensorFlow writes a quote of an assertion's message escaped (``loss\\'s``).
        """
        text = text.replace("\\'", "'").replace('\\"', '"')
        for _, message in self.found[kind]:
            at = text.find(message)
            if at >= 0:
                line = text[at:].split("\n", 1)[0]
                return error_of(line.replace("] [", " ").rstrip("]").strip())
        return None


def _ending(message: str) -> str:
    """A check's message without the words that announce its data (not read under XLA)."""
    for tail in (" min and max:", " Got", ":"):
        if message.endswith(tail):
            return message[: -len(tail)] + "."
    return message


@keras.saving.register_keras_serializable(package="adpue_tf")
class DebiasedModel(MultiWorkerFit, keras.Model):
    """Wrap a one-output Keras model for alternate learning of ``p(y=1|x)``.

    ``f†`` fills column 3 of the labels without gradient. The snapshot (or initial
    model) runs only on the rows whose risk term reads it (for ADPUE the exposure
    rows with ``E = 0``), gathered and scattered back when that pays (not under XLA,
    nor on a small batch of a small model); the other rows hold 0, which the risk
    multiplies by 0: the loss and gradients are those of the full batch.

    The source of ``f†`` is a non-trainable variable (``dagger_mode``), saved with
    the weights (``.keras`` files and ``BackupAndRestore``). Leaving direct mode
    retraces the step once (direct steps skip the snapshot's forward pass);
    switching from the initial guess to the snapshot at a refresh neither retraces
    nor recompiles:

    * ``DIRECT`` (0): ``f† = σ(z)`` of the same forward pass, gradient stopped —
      direct minimisation, as with a plain model. The start when the initial
      guess is a constant.
    * ``INITIAL`` (1): the initial guess. The start when it is a model;
      ``RefreshDagger`` switches ``DIRECT`` to ``INITIAL`` when training begins.
    * ``SNAPSHOT`` (2): the frozen snapshot, after the first refresh.

    Only :meth:`compute_loss` is overridden: Keras's own ``train_step`` and
    ``test_step`` (``unpack_x_y_sample_weight``, ``optimizer.scale_loss``,
    ``apply_gradients``, metrics) run unchanged, so loss scaling under mixed
    precision and distribution strategies behave as for any Keras model, and
    validation computes the same debiased risk on held-out PU/E data.

    Nothing silent: ``compile`` refuses a net or ``initial_dagger``
    that ends in a sigmoid when the loss has ``from_logits=True``; the loss
    refuses outputs outside ``[0, 1]`` when ``from_logits=False``, and batches of
    sources it does not read. Each step checks that the features (every floating
    input; in training, only where the batches do not come from a data builder,
    which checked them where it made them), the net's output and the loss are finite, and the gradient of the
    loss waits for these checks (``tf.custom_gradient``), so a NaN feature, a
    huge one (``3e38``: outputs beyond ``±1e4``) or an overflowing loss stops
    ``fit`` with an error that says which, before the optimizer updates any
    weight (only its ``iterations`` counter may have advanced), unlike Keras's
    ``TerminateOnNaN``, which reads the logged loss after the update (a plain model
    with one of our losses gets the loss and output checks, not the feature check).
    Inside ``fit`` the checks are graph assertions; ``fit`` raises a failed
    one as the same ``ValueError``. XLA compiles assertions away, so under
    ``jit_compile=True`` (Keras's default ``"auto"`` turns XLA on for a model
    on a GPU) the step records its first failed check instead and ``fit``
    raises it after that call of the training function, **with the weights
    already updated by the failing step** (NaN, say): compile with
    ``jit_compile=False`` to stop before it. Under a distribution strategy an
    XLA step's checks are not recorded.

    On JAX the same step runs in Keras's stateless form under ``jax.jit`` (XLA,
    JAX's default), with the checks kept as runtime callbacks: a failing check
    raises its ``ValueError`` (or ``DivergedError``) from ``fit``, and the
    weights are those before the failing step (the step's inputs are not
    donated to XLA, so they survive it). On PyTorch the step runs eagerly and
    every check raises at once. The snapshot runs on the full batch on both
    (the rows are not gathered). See ``docs/guide/backends.md``.

    Args:
        net: the model to train; one output unit, a logit or a probability
            (match the loss's ``from_logits``).
        initial_dagger: ``f†`` before the first refresh: a constant in
            ``[0, 1]`` or a Keras model with the same output convention as
            ``net`` (frozen; its weights are saved with this model).
        **kwargs: passed to ``keras.Model`` (e.g. ``name``).

    Attributes:
        net: the trained model; ``predict`` and ``__call__`` return its output.
        snapshot: the frozen copy of ``net`` that serves as ``f†`` after a refresh.

    Example:
        >>> import keras, numpy as np, adpue_tf as adp
        >>> net = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
        >>> model = adp.DebiasedModel(net, initial_dagger=0.3)
        >>> model.compile("sgd", loss=adp.ADPUELoss(from_logits=True))
        >>> ds = adp.data.pue_dataset(np.ones((8, 2)), [1, 0] * 4, np.ones((8, 2)),
        ...                           [0, 1] * 4, batch_size=8, seed=0)
        >>> _ = model.fit(ds, epochs=2, verbose=0, callbacks=[adp.RefreshDagger()])
        >>> int(model.refreshes), int(model.dagger_mode)
        (2, 2)
    """

    def __init__(self, net: keras.Model, *, initial_dagger: float | keras.Model = 0.5,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        check_one_output("net", net)
        self.net = net
        try:
            self.snapshot = keras.models.clone_model(net)
        except TypeError as err:
            raise TypeError(
                "DebiasedModel copies `net` for the f† snapshot with "
                "keras.models.clone_model, which rebuilds a subclassed model from its "
                f"get_config(); that failed for {type(net).__name__}: {err} Give its "
                "__init__ `**kwargs` (passed to keras.Model) and a get_config() that "
                "returns its arguments.") from err
        self.snapshot.trainable = False
        if isinstance(initial_dagger, keras.Model):
            check_one_output("initial_dagger", initial_dagger)
            net_in, guess_in = input_shapes(net), input_shapes(initial_dagger)
            if net_in is not None and guess_in is not None and net_in != guess_in:
                raise ValueError(
                    f"`initial_dagger` takes inputs of shape {guess_in} but `net` takes "
                    f"{net_in}; f† is computed on the same features as the net.")
            # a frozen part the two share (a pretrained encoder) stays frozen: allowed
            mine = {id(v) for v in net.trainable_weights}
            shared = [v.path for v in initial_dagger.weights if id(v) in mine]
            if initial_dagger is net or shared:
                raise ValueError(
                    "`initial_dagger` must be a model of its own (a trained yardstick, frozen "
                    "here), but it " + ("is `net` itself" if initial_dagger is net else
                                        f"shares weights with `net` ({', '.join(shared[:3])})")
                    + ": freezing it would freeze the net. Pass a separate model, a "
                    "`keras.models.clone_model` of it with its weights, or a constant.")
            initial_dagger.trainable = False
            self.initial_model = initial_dagger
            self._initial_constant = None
            start = INITIAL
        else:
            self.initial_model = None
            self._initial_constant = check_initial_guess(initial_dagger)
            start = DIRECT
        # The step reads the mode (see _COUNTER for the dtype).
        self._mode = self.add_weight(shape=(), dtype=_COUNTER, trainable=False,
                                     initializer=keras.initializers.Constant(start),
                                     name="dagger_mode")
        self._refreshes = self.add_weight(shape=(), dtype=_COUNTER, trainable=False,
                                          initializer="zeros", name="refreshes")
        # Last epoch count at which RefreshDagger refreshed: lets a resumed run
        # catch up a refresh whose epoch was backed up before it happened.
        self._refresh_epoch = self.add_weight(shape=(), dtype=_COUNTER, trainable=False,
                                              initializer="zeros", name="refresh_epoch")
        self.risk_tracker = RiskTracker(name="risk_parts")
        # JAX and PyTorch: the mode when the step is traced (TensorFlow reads the
        # variable then); set where Keras makes the step, the variables attached.
        self._traced_mode: int | None = None
        # RefreshDagger(every_n_steps=n) on TensorFlow and PyTorch: the step refreshes
        # after every n-th optimizer step itself (schedule_refresh), exact for any
        # steps_per_execution.
        self._refresh_every_steps: int | None = None
        # Whether fit's data came from a builder, which checked its features finite
        # (then the training step checks the net's output and the loss, not them).
        self._data_checked = False
        self._tracing_train_step = False
        # TensorFlow: the checks each traced step made (not tracked by Keras: no weights).
        object.__setattr__(self, "_step_checks", _StepChecks())
        if net.built and getattr(net, "inputs", None):
            self.build(tuple(net.inputs[0].shape))

    # -- the f† state --------------------------------------------------------
    @property
    def dagger_mode(self) -> int:
        """Source of ``f†`` now: ``DIRECT`` (0), ``INITIAL`` (1) or ``SNAPSHOT`` (2)."""
        return _value(self._mode)

    @property
    def refreshes(self) -> int:
        """How many times the snapshot was refreshed (the paper's rounds ``T``)."""
        return _value(self._refreshes)

    @property
    def refresh_epoch(self) -> int:
        """The epoch count at which :class:`~adpue_tf.RefreshDagger` last refreshed.

        Counted in the epoch numbering of the current ``fit`` (Keras's absolute
        index, which ``initial_epoch`` and ``BackupAndRestore`` continue), saved
        with the weights so that a resumed run catches up a refresh whose epoch
        was backed up before it happened. Set it with :meth:`set_refresh_epoch`.
        """
        return _value(self._refresh_epoch)

    def set_refresh_epoch(self, epoch: int) -> None:
        """Record ``epoch`` as the epoch count of the last refresh (see :attr:`refresh_epoch`).

        Raises:
            TypeError, ValueError: if ``epoch`` is not an int ``>= 0``.
        """
        self._refresh_epoch.assign(check_int("epoch", epoch, 0))

    def start_alternate_learning(self) -> None:
        """Use the initial guess as ``f†`` until the first refresh (if not yet refreshed)."""
        if self.dagger_mode == DIRECT:
            self._mode.assign(INITIAL)
            self._traced_mode = INITIAL
            # The traced steps read f† from the forward pass (direct mode, no
            # snapshot pass); trace them once more, now with the snapshot.
            self._step_checks.built.clear()  # steps traced while direct
            if getattr(self, "train_function", None) is not None:
                self.make_train_function(force=True)
            self.test_function = None

    def refresh_dagger(self) -> None:
        """Copy the live weights of ``net`` into the snapshot: one round of Algorithm 1."""
        self._build_snapshot()
        for frozen, live in zip(self.snapshot.weights, self.net.weights):
            # JAX: a copy, not the live array itself: a step that donates its state
            # (Keras's predict) refuses one buffer given twice.
            frozen.assign(live if TENSORFLOW else ops.copy(live.value))
        self._mode.assign(SNAPSHOT)
        self._refreshes.assign_add(1)

    @property
    def refresh_every_steps(self) -> int | None:
        """The step period of the refresh the training step does itself (None: none)."""
        return self._refresh_every_steps

    def schedule_refresh(self, every_n_steps: int | None) -> None:
        """Refresh the snapshot inside the training step, after every ``n``-th optimizer step.

        The step copies the weights of ``net`` into the snapshot right after the
        update whose ``optimizer.iterations`` is a multiple of ``every_n_steps``,
        so the period is exact whatever ``steps_per_execution`` runs in one call
        (a callback sees only every ``steps_per_execution``-th step).
        :class:`~adpue_tf.RefreshDagger` schedules it; None turns it off.
        TensorFlow and PyTorch, without a distribution strategy.

        Raises:
            TypeError, ValueError: if ``every_n_steps`` is not None or an int ``>= 1``.
            ValueError: on JAX, or under a distribution strategy.
        """
        n = None if every_n_steps is None else check_int("every_n_steps", every_n_steps, 1)
        if n is not None and (BACKEND == "jax" or (TENSORFLOW and tf.distribute.has_strategy())):
            raise ValueError(
                "DebiasedModel refreshes inside its training step on TensorFlow and PyTorch "
                f"without a distribution strategy; here (backend {BACKEND!r}"
                f"{', a distribution strategy' if TENSORFLOW else ''}) the refresh runs "
                "between calls of the step.")
        if n != self._refresh_every_steps:
            self._refresh_every_steps = n
            if getattr(self, "train_function", None) is not None:
                self.make_train_function(force=True)

    def train_step(self, *args: Any, **kwargs: Any) -> Any:
        """Keras's step; then the refresh :meth:`schedule_refresh` asked for, when it is due."""
        self._tracing_train_step = True
        try:
            logs = self._step_checks.traced("train", super().train_step, *args, **kwargs)
        finally:
            self._tracing_train_step = False
        n = self._refresh_every_steps
        if n is not None and BACKEND != "jax":
            due = ops.equal(ops.mod(self.optimizer.iterations, n), 0)
            if TENSORFLOW:
                tf.cond(due, self._refresh_in_graph, tf.no_op)
            elif bool(ops.convert_to_numpy(due)):
                self.refresh_dagger()
        return logs

    def _refresh_in_graph(self) -> Any:
        """:meth:`refresh_dagger` as graph ops (a branch of the training step)."""
        for frozen, live in zip(self.snapshot.weights, self.net.weights):
            frozen.assign(live)
        self._mode.assign(SNAPSHOT)
        self._refreshes.assign_add(1)
        return tf.no_op()

    def _build_snapshot(self) -> None:
        if not self.snapshot.built and self.net.built:
            self.snapshot.build(self.net.inputs[0].shape if self.net.inputs else None)

    # -- keras.Model ---------------------------------------------------------
    def call(self, inputs: Any, training: bool | None = None) -> Any:
        """Return what ``net`` returns (the snapshot is used only for ``f†``)."""
        return self.net(inputs, training=training)

    def build(self, input_shape: Any) -> None:
        for model in (self.net, self.snapshot, self.initial_model):
            if model is not None and not model.built:
                model.build(input_shape)
        super().build(input_shape)

    def compile(self, optimizer: Any = "rmsprop", loss: Any = None, *,
                steps_per_execution: int | str = "auto", **kwargs: Any) -> None:
        """As ``keras.Model.compile``; ``loss`` must be a :class:`DebiasedLoss`.

        ``steps_per_execution="auto"`` (the default) runs
        :data:`ACCELERATOR_STEPS` steps per call of the training function on a
        GPU or TPU, where a step that waits for Python between calls leaves
        the device idle, and 1 on a CPU (Keras's default) or on PyTorch (which
        Keras runs one step a call); an int is passed on.
        Callbacks see every ``steps_per_execution``-th batch; the
        :class:`~adpue_tf.RefreshDagger` period stays exact.

        Raises:
            TypeError: if ``loss`` is not a ``DebiasedLoss`` instance, or
                ``steps_per_execution`` is neither ``"auto"`` nor an int.
            ValueError: if ``initial_dagger`` is a model and the loss cannot use
                ``f†``, or ``steps_per_execution`` is below 1.
        """
        if isinstance(steps_per_execution, str):
            if steps_per_execution != "auto":
                raise TypeError("`steps_per_execution` must be 'auto' or an int, got "
                                f"{steps_per_execution!r}.")
            # Keras on PyTorch runs one step a call
            steps_per_execution = ACCELERATOR_STEPS if accelerated() and BACKEND != "torch" else 1
        steps_per_execution = check_int("steps_per_execution", steps_per_execution, 1)
        if not isinstance(loss, DebiasedLoss):
            raise TypeError(
                "`loss` must be an adpue_tf DebiasedLoss instance (e.g. "
                f"adp.ADPUELoss()), got {type(loss).__name__}.")
        check_from_logits("net", self.net, loss.from_logits)
        if loss.from_logits:  # a squashing written another way (ops.hard_sigmoid, a clip)
            check_output_convention("`net`", self.net, from_logits=True)
        if self.initial_model is not None:
            check_output_convention("`initial_dagger`", self.initial_model, from_logits=loss.from_logits)
        if self.initial_model is not None and not loss.uses_dagger:
            raise ValueError(
                f"`loss` {type(loss).__name__} does not use f†, so an `initial_dagger` "
                "model or a snapshot has no effect; use a loss such as ADPUELoss.")
        super().compile(optimizer=optimizer, loss=loss, steps_per_execution=steps_per_execution,
                        **kwargs)
        self._step_checks.built.clear()

    def fit(self, x: Any = None, y: Any = None, *args: Any, **kwargs: Any) -> Any:
        """As ``keras.Model.fit``; over a ``tf.data.Dataset`` ``shuffle`` defaults to False.

        The data builders shuffle (with their ``seed``), and Keras ignores
        ``shuffle`` for a Dataset, warning on its default ``True``; an explicit
        ``shuffle=`` is passed on unchanged. ``class_weight`` is refused: Keras
        takes a row's class as the argmax of its labels, which for packed
        ``(w, e, source)`` labels is not ``W`` (weigh rows with ``sample_weight``).
        """
        class_weight = args[7] if len(args) > 7 else kwargs.get("class_weight")
        if class_weight is not None:
            raise ValueError(
                "`class_weight` cannot weigh packed labels: Keras takes a row's class as the "
                "argmax of its label columns (w, e, source), so it would weigh E rows with "
                "e = 1, not the positives W = 1. Pass `sample_weight` (one weight a row) "
                "instead.")
        if isinstance(x, tf.data.Dataset) and len(args) < 7:  # shuffle not given by position
            kwargs.setdefault("shuffle", False)
        checked = features_checked(x)
        if checked != self._data_checked:
            self._data_checked = checked
            if getattr(self, "train_function", None) is not None:
                self.make_train_function(force=True)
        build_optimizer(self)  # the step is traced once, not twice
        return super().fit(x, y, *args, **kwargs)

    # -- JAX and PyTorch: the mode at tracing; JAX: a failed step keeps the weights --
    def test_step(self, *args: Any, **kwargs: Any) -> Any:
        """Keras's step (its checks recorded on TensorFlow: :meth:`make_train_function`)."""
        return self._step_checks.traced("test", super().test_step, *args, **kwargs)

    def make_train_function(self, force: bool = False) -> Any:
        """Keras's; a failed check of a step raised as a ``ValueError``.

        On TensorFlow a compiled step's checks are graph assertions: their
        ``InvalidArgumentError`` is raised again as the check's ``ValueError``
        (a :class:`~adpue_tf.losses.DivergedError` for a blown-up output);
        under XLA, which compiles the assertions away, the step also records
        its first failed check and ``fit`` raises it after that call (see the
        class's docstring). On JAX without donating the state, so a failing
        step leaves the weights.
        """
        # what a traced step holds fixed: the refresh period, the feature check, direct f†
        key = (self._refresh_every_steps, self._data_checked, self.dagger_mode == DIRECT)
        kept = self._step_checks.built.get(key) if force and TENSORFLOW else None
        if kept is not None:  # a step traced before for this refresh period and data
            self.train_function = kept
            return kept
        made = self._step_function("train", force, super().make_train_function)
        self._step_checks.wrap(self, "train")
        if TENSORFLOW and self.train_function is not None:
            self._step_checks.built[key] = self.train_function
        return made

    def make_test_function(self, force: bool = False) -> Any:
        """Keras's, its failed checks raised as for :meth:`make_train_function`."""
        made = self._step_function("test", force, super().make_test_function)
        self._step_checks.wrap(self, "test")
        return made

    def _step_function(self, kind: str, force: bool, keras_own: Any) -> Any:
        """``keras_own(force)``, or on JAX (outside a distribution) a step function of
        :meth:`_kept_state` set as ``{kind}_function``; JAX and PyTorch note the f† mode."""
        if TENSORFLOW:
            return keras_own(force)
        self._traced_mode = self.dagger_mode
        if BACKEND != "jax" or not self._jax_undonated():
            return keras_own(force)
        if getattr(self, f"{kind}_function", None) is not None and not force:
            return None
        step = self.train_step if kind == "train" else self.test_step
        setattr(self, f"{kind}_function", self._kept_state(step, optimizer=kind == "train"))
        return None

    def _jax_undonated(self) -> bool:
        """Whether this model makes its own JAX step functions (not under a distribution)."""
        return keras.distribution.distribution() is None

    def _kept_state(self, step: Any, *, optimizer: bool) -> Any:
        """A JAX step function ``(state, iterator) -> (logs, state)`` that keeps its input state.

        As Keras's (``jax.jit`` unless ``run_eagerly`` or ``jit_compile=False``),
        but the state is not donated: when a check fails inside the step, the
        variables are set back to the state the step was given (Keras detaches
        them during an epoch) and the check's own error is raised.
        """
        if not self.run_eagerly and self.jit_compile:
            step = jax_jit(step)
        run = self._make_function(step)  # Keras's loop over steps_per_execution

        def function(state: Any, iterator: Any) -> Any:
            try:
                return run(state, iterator)
            except Exception as err:
                groups = [self.trainable_variables, self.non_trainable_variables]
                if optimizer:
                    groups.append(self.optimizer.variables)
                groups.append(self.metrics_variables)
                for variables, values in zip(groups, state):
                    for variable, value in zip(variables, values):
                        variable.assign(value)
                self._jax_state_synced = True
                own = recorded_error()
                if own is not None:
                    raise own from err
                raise

        return function

    def compile_from_config(self, config: dict[str, Any]) -> None:
        """Re-compile from a saved compile config (used when loading ``.keras`` files)."""
        self.compile(**keras.saving.deserialize_keras_object(config))
        if self.built:
            self.optimizer.build(self.trainable_variables)

    def _dagger(self, x: Any, y: Any, y_pred: Any) -> Any:
        """``f†`` for the batch, float32 ``(batch, 1)``, without gradient; 0 on unread rows."""
        from_logits = self.loss.from_logits

        def prob(out: Any, name: str = "the output of the snapshot") -> Any:
            return ops.reshape(ops.sigmoid(to_logits(out, from_logits, name)), (-1,))

        if TENSORFLOW:
            with tf.init_scope():  # the mode when tracing: direct or not is static
                mode = int(self._mode.numpy())
        else:
            mode = self._traced_mode if self._traced_mode is not None else self.dagger_mode
        if mode == DIRECT:
            return ops.stop_gradient(ops.reshape(prob(y_pred, "`y_pred`"), (-1, 1)))
        x, rows = _rows.select(self.loss.dagger_sources(), x, y, self.snapshot,
                               jit=bool(self.jit_compile))

        def initial() -> Any:
            guess = self.initial_model(x, training=False)
            check_single_tensor("initial_dagger", guess)
            return prob(guess, "the output of `initial_dagger`")

        def snapshot() -> Any:
            return prob(self.snapshot(x, training=False))

        if self.initial_model is None:  # a constant before the first refresh: no branch
            snap = snapshot()  # (rows,): the constant takes its shape
            dagger = ops.where(ops.equal(self._mode, SNAPSHOT), snap, self._initial_constant)
        else:
            dagger = ops.switch(ops.cast(self._mode - INITIAL, "int32"), [initial, snapshot])
        dagger = _rows.scatter_rows(dagger, rows, y)
        return ops.stop_gradient(ops.reshape(dagger, (-1, 1)))

    def compute_loss(self, x: Any = None, y: Any = None, y_pred: Any = None,
                     sample_weight: Any = None, training: bool = True) -> Any:
        """The debiased risk with ``f†`` filled in, plus any regularisation losses.

        Also updates the risk metrics (``risk``, ``r_pos``, ``r_neg``, ``nn_fired``).
        """
        loss: DebiasedLoss = self.loss
        check_single_tensor("net", y_pred)
        # Features and output must be finite; the loss (hence every weight
        # gradient) waits for these checks, so no step applies a NaN update.
        stop = ("DebiasedModel: training stops before the weights are updated, as the "
                "batch cannot give a finite step:")
        if self._tracing_train_step and self._data_checked:
            features = {}  # a builder's batches: checked finite where they were made
        elif isinstance(x, dict):
            features = {f"x[{k!r}]": t for k, t in x.items() if not isinstance(t, (dict, list))}
        else:
            features = {f"x[{i}]": t for i, t in enumerate(keras.tree.flatten(x))}
        finite = finite_specs({**features, "the output of `net`": y_pred}, stop)
        # A loss whose terms check the labels (check_sources) takes these checks
        # into the same graph assertion, before the label checks: every output
        # of the loss waits for it through the checked labels.
        fused = (TENSORFLOW and bool(finite) and type(loss).terms is DebiasedLoss.terms
                 and bool(loss.reads) and not tf.executing_eagerly())
        checks = [] if fused else fold_checks(finite)
        y_pred = with_checks(y_pred, checks)
        y = ops.cast(ops.convert_to_tensor(y), "float32")
        if loss.uses_dagger and y.shape[-1] == 3:
            y = ops.concatenate([y, self._dagger(x, y, y_pred)], axis=1)
        if fused:
            y = check_sources(y, loss=type(loss).__name__, reads=loss.reads, needs=loss.needs,
                              ignores=loss.ignores, first=finite)
        terms = loss.terms(y, y_pred, sample_weight)
        self.risk_tracker.update_state(terms)
        total = terms.loss
        if not self.losses and type(loss).terms is DebiasedLoss.terms:
            # DebiasedLoss.terms guards its loss already, and the loss reads the
            # checked y_pred (or, fused, the labels checked with the features and
            # output): every gradient waits for these checks through it.
            return total
        if self.losses:
            extra = ops.sum([ops.cast(v, "float32") for v in self.losses])
            total = total + extra / num_replicas()  # each replica adds them once
        return guard_finite(total, f"{stop} the loss is NaN or infinite.", checks)

    # -- serialisation -------------------------------------------------------
    def get_config(self) -> dict[str, Any]:
        config = {"name": self.name, "trainable": self.trainable,
                  "net": keras.saving.serialize_keras_object(self.net)}
        if self.initial_model is not None:
            config["initial_dagger"] = keras.saving.serialize_keras_object(self.initial_model)
        else:
            config["initial_dagger"] = self._initial_constant
        return config

    @classmethod
    def from_config(cls, config: dict[str, Any], custom_objects: Any = None) -> "DebiasedModel":
        config = dict(config)
        net_config = config.pop("net")
        try:
            net = keras.saving.deserialize_keras_object(net_config,
                                                        custom_objects=custom_objects)
        except TypeError as err:
            # Keras would hide this cause behind a generic message about from_config.
            name = net_config.get("class_name") if isinstance(net_config, dict) else None
            raise ValueError(
                f"DebiasedModel could not rebuild its `net` ({name!r}): {err} A subclassed "
                "net must be registered with @keras.saving.register_keras_serializable() "
                "(and imported) or passed in `custom_objects` when loading.") from err
        initial = config.pop("initial_dagger")
        if isinstance(initial, dict):
            initial = keras.saving.deserialize_keras_object(initial,
                                                            custom_objects=custom_objects)
        return cls(net, initial_dagger=initial, **config)


