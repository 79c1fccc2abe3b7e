"""A loop of fit_pue calls that traces each training step once: :func:`keep_compiled`.

Tracing a Keras training step costs about a second (with XLA, several), and
Table 1 makes 1,600 :func:`adpue_tf.fit_pue` calls of one ``build_net``.
Inside a :func:`keep_compiled` block (the benchmarks' loops open one; a plain
call keeps nothing) the compiled model of a pass is kept, per ``build_net``
code (:func:`owner`), for the next pass of the same nets, losses, optimizer
and steps (:func:`compiled`, fit_pue's pass hook while a block is open); the
outermost block drops them. A kept
model's own (*live*) nets take the fresh nets' initial state, its optimizer
and other variables theirs; after training the fresh nets take the live
nets' state: the result is a new model's, and the nets returned are never the
kept ones. A kept model is used only if its nets match the fresh ones
(:func:`signature`, and their outputs on a few rows); nets over
:data:`MAX_PARAMS` weights are never kept.

Example:
    >>> import keras
    >>> build = lambda: keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> signature(build()) == signature(build())
    True
    >>> with keep_compiled():
    ...     kept_for(build)
    {}
"""

from __future__ import annotations

import json
import threading
import types
import weakref
from collections.abc import Callable, Hashable, Sequence
from typing import Any

import keras
import numpy as np
import tensorflow as tf

from adpue_tf.recommend import stage

__all__ = ["MAX_PARAMS", "Compiled", "compiled", "described", "feature_layout", "fit",
           "keep_compiled", "kept_for", "owner", "probe_rows", "signature", "unnamed"]

#: Nets with more weights than this are trained in a new model every pass.
MAX_PARAMS = 1_000_000
#: Compiled models kept per ``build_net`` (the least recently used is dropped
#: beyond this). One call of fit_pue with every candidate and two nets of one
#: builder uses 24: four joint passes, five candidates trained alone per net and
#: the refit's; fewer than a call uses would drop each before its next use.
MAX_KEPT = 32

#: The kept models of the open :func:`keep_compiled` block, by owner; None outside one.
_KEPT: weakref.WeakKeyDictionary | None = None
_OPEN = 0  # nested keep_compiled blocks open (every thread's)
_LOCK = threading.Lock()


class keep_compiled:  # lower case: used as a function, `with keep_compiled():`
    """Keep fit_pue's compiled passes for every call inside the block; drop them at its end.

    A loop of :func:`adpue_tf.fit_pue` calls with the same ``build_net`` code
    (a sweep over seeds or data sets) traces each of its training steps once
    inside the block instead of once a call, and leaves about 2.0 MB a call in
    the process instead of about 12.7 MB (TensorFlow keeps part of every model
    it compiles: ``docs/guide/choosing-models.md``, *Limits, measured*).
    Outside a block every pass compiles a model of its own. Blocks nest
    (the outermost one owns what is kept), are shared by threads, and one
    object may be entered again.

    Example:
        >>> import keras, adpue_tf as adp
        >>> s = adp.synthetic.synthetic_pue(300, 300, seed=0)
        >>> build = lambda: keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
        >>> with adp.experiments.keep_compiled():
        ...     fits = [adp.fit_pue(build, s.x_pu, s.w_pu, s.x_e, s.e_e, epochs=1, seed=seed,
        ...                         min_steps=5, candidates=["bce_w"], verbose=0)
        ...             for seed in (0, 1)]
        >>> [fit.choice for fit in fits]
        ['bce_w', 'bce_w']
    """

    def __enter__(self) -> keep_compiled:
        global _KEPT, _OPEN
        with _LOCK:
            if _OPEN == 0:
                _KEPT = weakref.WeakKeyDictionary()
                stage.PASS_MODELS[:] = [_hook]
            _OPEN += 1
        return self

    def __exit__(self, *exc: object) -> None:
        global _KEPT, _OPEN
        with _LOCK:
            _OPEN -= 1
            if _OPEN == 0:
                _KEPT = None
                stage.PASS_MODELS.clear()


def owner(build_net: Callable[[], keras.Model]) -> Any:
    """What a ``build_net``'s kept models are filed under: its code, or the callable itself.

    A plain function or a bound method is filed under its code object, which
    compares by content: closures of one factory and lambdas made in a loop
    share it (kept models live as long as that code does). The nets must
    still match (:func:`signature` and the probe's outputs) before a kept
    model is used. Any other callable (a ``functools.partial``, an object
    with ``__call__``) is filed under itself.

    Example:
        >>> def factory(units):
        ...     return lambda: keras.Sequential([keras.Input((2,)), keras.layers.Dense(units)])
        >>> owner(factory(1)) == owner(factory(2))
        True
    """
    if isinstance(build_net, types.MethodType):
        build_net = build_net.__func__
    if isinstance(build_net, types.FunctionType):
        return build_net.__code__
    return build_net


def kept_for(build_net: Callable[[], keras.Model]) -> dict:
    """The kept models filed under ``build_net``'s :func:`owner` (empty if none), by pass.

    Outside a :func:`keep_compiled` block: always empty.
    """
    if _KEPT is None:
        return {}
    try:
        return dict(_KEPT.get(owner(build_net), {}))
    except TypeError:  # takes no weak reference
        return {}


def _copy(to: Sequence[keras.Model], src: Sequence[keras.Model]) -> None:
    """Every variable of each net of ``src`` into the same net of ``to`` (skipping a net itself)."""
    for a, b in zip(to, src):
        if a is not b:
            for x, y in zip(a.variables, b.variables):
                x.assign(y)


class Compiled:
    """A compiled model and its live nets (one per job); kept ones hold their initial state.

    A kept model's initial state: its optimizer's, and that of every variable
    of the model outside its nets (a layer of its own, such as the learned
    scale of ``likelihood_theta``, or a ``DebiasedModel``'s snapshot and
    ``f†`` mode), restored at each :meth:`load`.
    """

    def __init__(self, model: keras.Model, nets: Sequence[keras.Model],
                 home: tuple[dict, Hashable] | None = None) -> None:
        self.model, self.nets, self._home = model, list(nets), home
        self._forward: Callable[[Any], list[Any]] | None = None
        self._loads = 0  # from the second on: one traced call to copy, one to probe
        self._load: Callable[[list[Any]], None] | None = None
        self._give: Callable[[list[Any]], None] | None = None
        own = {id(v) for net in self.nets for v in net.variables}
        self._initial = ([(v, np.array(v.numpy())) for v in
                          [*model.optimizer.variables,
                           *(v for v in model.variables if id(v) not in own)]]
                         if home is not None else [])

    @property
    def kept(self) -> bool:
        """Whether the model is kept for a later pass (its nets are not the fresh ones)."""
        return self._home is not None

    def _live(self) -> list[Any]:
        return [x for net in self.nets for x in net.variables]

    def load(self, fresh: Sequence[keras.Model]) -> None:
        """Give the live nets ``fresh``'s state and the rest of the model its initial state.

        A kept model's second load on assigns every variable in one traced call
        (about 40 eager assignments a pass otherwise).
        """
        self._loads += 1
        if self._home is None or self._loads == 1:
            _copy(self.nets, fresh)
            for v, value in self._initial:
                v.assign(value)
            return
        if self._load is None:
            live = self._live()
            initial = [(v, tf.constant(value)) for v, value in self._initial]

            def load(values: list[Any]) -> None:
                for x, y in zip(live, values):
                    x.assign(y)
                for v, value in initial:
                    v.assign(value)

            self._load = tf.function(load)
        self._load([y.value for net in fresh for y in net.variables])

    def outputs(self, probe: Any) -> list[np.ndarray]:
        """The live nets' outputs on ``probe`` (from the second load on, one traced pass for all)."""
        if self._loads <= 1:
            return [np.asarray(keras.ops.convert_to_numpy(net(probe, training=False)))
                    for net in self.nets]
        if self._forward is None:
            nets = self.nets
            self._forward = tf.function(lambda x: [net(x, training=False) for net in nets],
                                        reduce_retracing=True)
        return [np.asarray(keras.ops.convert_to_numpy(z)) for z in self._forward(probe)]

    def fit(self, data: Any, *, epochs: int, steps: int,
            callbacks: list[keras.callbacks.Callback]) -> None:
        """Train the model: Keras's ``fit``, or :func:`fit`'s epochs for a kept model."""
        fit(self.model, data, epochs=epochs, steps=steps, callbacks=callbacks)

    def give(self, fresh: Sequence[keras.Model]) -> None:
        """Give ``fresh`` the live nets' (trained) state; the model is free for the next pass.

        Until then no other pass gets it (one that asks meanwhile, from another
        thread, gets a new model); a pass that raises never gives it back.
        """
        if self._home is None or self._loads == 1:
            _copy(fresh, self.nets)
        else:
            if self._give is None:
                live = self._live()

                def give(targets: list[Any]) -> None:
                    for x, y in zip(targets, live):
                        x.assign(y)

                self._give = tf.function(give)
            self._give([x.value for net in fresh for x in net.variables])
        if self._home is not None:
            kept, key = self._home
            kept[key] = self  # the most recent last
            while len(kept) > MAX_KEPT:
                kept.pop(next(iter(kept)))


def unnamed(config: Any) -> Any:
    """``config`` (nested dicts and lists) without its ``"name"`` entries.

    Example:
        >>> unnamed({"name": "adam_3", "learning_rate": 0.01})
        {'learning_rate': 0.01}
    """
    if isinstance(config, dict):
        return {k: unnamed(v) for k, v in config.items() if k != "name"}
    if isinstance(config, (list, tuple)):
        return [unnamed(v) for v in config]
    return config


def described(obj: Any) -> str:
    """A Keras object's class and configuration (names aside): part of a kept model's key."""
    config = obj.get_config() if hasattr(obj, "get_config") else repr(obj)
    return json.dumps([type(obj).__qualname__, unnamed(config)], sort_keys=True, default=repr)


def feature_layout(x: Any) -> str:
    """The features' per-row shapes and dtypes: part of a kept model's key."""
    return repr(tf.nest.map_structure(lambda v: (np.shape(v)[1:], np.asarray(v).dtype.str), x))


def probe_rows(x: Any) -> Any:
    """The first eight rows of features ``x``: the probe of :func:`compiled`."""
    return tf.nest.map_structure(lambda v: v[:8], x)


def signature(net: keras.Model) -> str | None:
    """What two nets must share to be trained by one kept model; None: not comparable.

    Each layer's class and configuration (names aside) and every variable's
    shape and dtype.
    """
    try:
        layers = [(type(layer).__module__, type(layer).__qualname__,
                   unnamed(layer.get_config())) for layer in stage.all_layers(net)
                  if not isinstance(layer, keras.Model)]
        variables = [(tuple(v.shape), str(v.dtype)) for v in net.variables]
        return json.dumps([type(net).__qualname__, layers, variables], sort_keys=True,
                          default=repr)
    except Exception:  # a layer without get_config: never kept
        return None


def _same_outputs(entry: Compiled, fresh: Sequence[keras.Model], probe: Any) -> bool:
    """Whether each live net, loaded with its fresh net's state, computes what that net does."""
    for got, b in zip(entry.outputs(probe), fresh):
        want = np.asarray(keras.ops.convert_to_numpy(b(probe, training=False)))
        if got.shape != want.shape or not np.allclose(got, want, rtol=1e-5, atol=1e-6,
                                                      equal_nan=True):
            return False
    return True


def _hook(builders: Sequence[Callable[[], keras.Model]], key: tuple,
          fresh: Sequence[keras.Model], build: Callable[[Sequence[keras.Model]], keras.Model],
          features: Any, objects: Sequence[Any], keep: bool) -> Compiled:
    """fit_pue's pass hook inside a block: :func:`compiled`, keyed by all its step depends on.

    ``key``: the pass's own (its jobs first); ``features``: its rows (their layout and a probe);
    ``objects``: the optimizer and losses whose configuration the step reads.
    """
    full = (*key, *(described(o) for o in objects), feature_layout(features),
            id(tf.distribute.get_strategy()))
    return compiled(builders, full, fresh, build, probe_rows(features), keep=keep)


def fit(model: keras.Model, data: tf.data.Dataset, *, epochs: int, steps: int,
        callbacks: list[keras.callbacks.Callback]) -> None:
    """``model.fit(data, epochs=epochs, steps_per_epoch=steps, verbose=0, callbacks=callbacks)``.

    For a model that went through one ``fit`` with fit_pue's full-batch loop
    (``adpue_tf.recommend.full_batch.install_loop``: a kept model), the epochs
    run here: each epoch one call of that function, the callbacks' hooks
    called as ``fit`` calls them (train begin and end, epoch begin and end,
    one batch per epoch; the logs empty), stopping when
    ``model.stop_training`` is set. The same updates, without ``fit``'s
    set-up of each call (its data adapter, callback list, progress bar and
    history: measured 16 ms a call against 6 ms for the 500 steps
    themselves, a linear net of 24 features on 600 rows under XLA). The first
    ``fit`` of a model, and any other, is Keras's.
    """
    fast = getattr(model.train_function, "adpue_loop", False) and \
        getattr(model, "_adpue_fitted", False)
    if not fast:
        model.fit(data, epochs=epochs, steps_per_epoch=steps, verbose=0, shuffle=False,
                  callbacks=callbacks)
        model._adpue_fitted = True
        return
    hooks = keras.callbacks.CallbackList(callbacks, model=model, verbose=0, epochs=epochs,
                                         steps=steps)
    model.stop_training = False
    batch = getattr(data, "adpue_batch", None)  # full_batch.whole()'s: no iterator needed
    step = model.train_function
    if batch is not None:
        run = lambda: step.on_batch(batch)  # noqa: E731
    else:
        iterator = iter(data)
        run = lambda: step(iterator)  # noqa: E731
    hooks.on_train_begin()
    for epoch in range(epochs):
        model.reset_metrics()
        hooks.on_epoch_begin(epoch)
        hooks.on_train_batch_begin(0)
        run()
        hooks.on_train_batch_end(steps - 1, {})
        hooks.on_epoch_end(epoch, {})
        if model.stop_training:
            break
    hooks.on_train_end()


def compiled(build_net: Callable[[], keras.Model] | Sequence[Callable[[], keras.Model]],
             key: Hashable, fresh: Sequence[keras.Model],
             build: Callable[[Sequence[keras.Model]], keras.Model],
             probe: Any = None, keep: bool = True) -> Compiled:
    """The compiled joint model for ``fresh``'s nets, kept or new, loaded with their state.

    Args:
        build_net: the function the nets come from (the cache's owner), or one
            per net of ``fresh`` (a pass over several nets of a mapping; the
            first owns the cache).
        key: the pass's jobs, losses, optimizer and steps (what the traced
            step depends on besides the nets).
        fresh: the pass's new nets, in job order.
        build: ``build(nets)``: the compiled joint model of ``nets``.
        probe: a few rows of features: a kept model is used only if its nets,
            loaded, give the fresh nets' outputs on them (a layer whose
            configuration hides a change would otherwise go unseen).
        keep: False: a new model of ``fresh``, not kept (its step holds
            something of this pass alone, such as a constant of the data).

    Returns:
        A :class:`Compiled` whose live nets hold ``fresh``'s state (they are
        ``fresh`` themselves when nothing is kept); call its ``give`` after
        training.
    """
    builders = (list(build_net) if isinstance(build_net, Sequence)
                else [build_net] * len(fresh))
    if len(builders) != len(fresh):
        raise ValueError(f"`build_net` gives {len(builders)} functions for {len(fresh)} nets.")
    sigs = tuple(signature(net) for net in fresh)
    small = all(sum(int(np.prod(v.shape)) for v in net.variables) <= MAX_PARAMS
                for net in fresh)
    store = _KEPT
    try:
        kept = (store.setdefault(owner(builders[0]), {})
                if store is not None and None not in sigs and small and keep else None)
    except TypeError:  # build_net takes no weak reference
        kept = None
    if kept is None or keras.backend.backend() != "tensorflow":  # its traced copies are TF's
        return Compiled(build(fresh), fresh)
    full = (key, sigs)
    entry = kept.pop(full, None)  # checked out until give()
    if entry is None:
        live = stage.build_nets(builders)
        for a, b in zip(live, fresh):  # frozen where the pass's net is (a trained net it reads)
            for x, y in zip(stage.all_layers(a), stage.all_layers(b)):
                x.trainable = y.trainable
        if tuple(signature(net) for net in live) != sigs:  # build_net changed its nets
            return Compiled(build(fresh), fresh)
        entry = Compiled(build(live), live, home=(kept, full))
    entry.load(fresh)
    if probe is not None and not _same_outputs(entry, fresh, probe):
        return Compiled(build(fresh), fresh)  # the kept one is dropped
    return entry
