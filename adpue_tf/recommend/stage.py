"""Training :func:`adpue_tf.fit_pue`'s candidates: a :class:`Stage` per net, one routine for every net.

A stage holds the training rows (and held-out rows, when choosing) and
what was trained on them: each net fresh from ``build_net`` under its own seed,
its best held-out epoch kept; each composite a head over its parts' logits.
:func:`train` is the one training routine for every net of the table: the nets
with a risk of every stage train together in one ``fit`` of one Keras model
(each net's risk reads only its stage's training rows, so each gets exactly
its own gradient; those that read ``θ̂`` as a label in a second pass), a net
in a model of its own in a pass of its own; a pass that diverges runs again
one net at a time. The design and its measurements:
``docs/guide/choosing-models.md``, *The rule* and *Cost*.

Example:
    >>> from adpue_tf.recommend.candidates import TABLE
    >>> [n for n in ("theta", "brier", "likelihood", "adpue_ratio") if TABLE[n].risk is not None]
    ['theta', 'brier', 'likelihood']
"""

from __future__ import annotations

import concurrent.futures
import math
import operator
import os
from collections.abc import Callable, Hashable, Sequence
from typing import Any, NamedTuple

import keras
import numpy as np
import tensorflow as tf

from adpue_tf._internal.backend import BACKEND
from adpue_tf._internal.guards import DIVERGED
from adpue_tf._internal.numeric import sigmoid
from adpue_tf._internal.seeding import BUILDING, seed_net
from adpue_tf.data import pue_dataset
from adpue_tf.data.rows import Rows
from adpue_tf.labels import pack_e, pack_pu
from adpue_tf.recommend.candidates import TABLE, THETA, Own, net_seed, with_needs
from adpue_tf.recommend.compose import compose, distinct_names, inputs_like
from adpue_tf.recommend.full_batch import fits, install_loop, uninstall_loop, whole, whole_pue
from adpue_tf.recommend.layout import Layout, batch_layout, call_on_rows, pu_first
from adpue_tf.recommend.train import (
    HeldOutScore,
    Settings,
    StopWhenStale,
    as_logits,
    compile_for_fit,
    finite_logits,
    log_loss,
    logits,
    outputs,
    pu_batches,
    steps_per_epoch,
    usable_score,
)
from adpue_tf.validation.scores import brier_unchecked

__all__ = ["PASS_MODELS", "Failed", "Heads", "NewModel", "Stage", "all_layers", "build_nets", "train",
           "train_all"]

#: A stage's heads: name -> (the nets it reads, head: their logits by name -> its logit).
Heads = dict[str, tuple[tuple[str, ...], Callable[[dict], Any]]]


#: The name a joint pass's shuffles are seeded by (not its first net's: a new entry of
#: the table changes no other net's batches).
JOINT = "joint pass"

#: Independent passes run at once on large data (a step of small nets leaves a core idle).
PARALLEL_PASSES = 2


#: Where a pass gets its compiled model: empty, a new model of its fresh nets
#: (:class:`NewModel`); a loop of calls that keeps them for the next call
#: (``adpue_tf.experiments.keep_compiled``) puts its hook here,
#: ``hook(builders, key, fresh, make, features, objects, keep)``.
PASS_MODELS: list[Callable[..., Any]] = []


class NewModel:
    """A pass's compiled model of its fresh nets, trained by Keras's ``fit``."""

    kept = False

    def __init__(self, model: keras.Model, nets: Sequence[keras.Model]) -> None:
        self.model, self.nets = model, list(nets)

    def fit(self, data: Any, *, epochs: int, steps: int,
            callbacks: list[keras.callbacks.Callback]) -> None:
        self.model.fit(data, epochs=epochs, steps_per_epoch=steps, verbose=0, shuffle=False,
                       callbacks=callbacks)

    def give(self, fresh: Sequence[keras.Model]) -> None:
        """Nothing to copy: the nets trained are ``fresh`` themselves."""


def all_layers(net: keras.Layer) -> list[keras.Layer]:
    """``net`` and every layer of it, parents before their layers (Keras's public ``layers``)."""
    return [net, *(x for layer in getattr(net, "layers", ()) for x in all_layers(layer))]


def build_nets(builders: Sequence[Callable[[], keras.Model]]) -> list[keras.Model]:
    """A new net of each builder, built while no pass side by side seeds one (a hook's nets)."""
    with BUILDING:
        return [b() for b in builders]


class Failed(Exception):
    """A candidate could not be trained (its net diverged before any usable epoch)."""


class Stage:
    """Candidates trained on ``pu``/``e`` rows; scored on ``held_out`` rows when given.

    Args:
        build_net: returns a fresh Keras model, features -> one logit.
        pu, e: the training rows.
        settings: the shared settings.
        held_out: ``(pu_rows, e_rows)`` to choose epochs and score, or None.
        epochs: per net, the epochs to train for (the refit), or None.
        parts: the parts of composites chosen before (``"average"``).
        progress: called with each net's name before it trains.
        built: nets built ahead from ``build_net`` under a seed, by seed: a net
            of that seed is taken from it (once) instead of built.
    """

    def __init__(self, build_net: Callable[[], keras.Model], pu: Rows, e: Rows,
                 settings: Settings, held_out: tuple[Rows, Rows] | None = None,
                 epochs: dict[str, int] | None = None,
                 parts: dict[str, tuple[str, ...]] | None = None,
                 progress: Callable[[str], None] = lambda name: None,
                 built: dict[int, keras.Model] | None = None) -> None:
        self._built = built if built is not None else {}
        self.build_net, self.pu, self.e, self.cfg = build_net, pu, e, settings
        self.held_out, self.fixed, self.progress = held_out, epochs, progress
        #: trained nets (and composites' models once built), by name
        self.models: dict[str, keras.Model] = {}
        #: composites whose Keras model is built when asked for (:meth:`get`); most never are
        self._unbuilt: dict[str, Callable[[], keras.Model]] = {}
        self.best_epoch: dict[str, int] = {}
        self.scores: dict[str, float] = {}
        #: name -> why it failed (a diverged net, or a part that did)
        self.failed: dict[str, str] = {}
        self.parts: dict[str, tuple[str, ...]] = dict(parts or {})
        #: name -> (the nets it reads, head: their logits -> its logit)
        self.heads: Heads = {}
        self._theta_pu: np.ndarray | None = None
        #: outputs ``(n, 1)`` of each model on the held-out PU and E rows (computed once)
        self._held: dict[str, tuple[np.ndarray, np.ndarray]] = {}

    def get(self, name: str) -> keras.Model:
        """The trained model of ``name`` (a candidate or ``"theta"``), training it if needed.

        Raises:
            Failed: if it (or a part it needs) diverged before any usable epoch.
        """
        self.train(name)
        if name in self._unbuilt:
            self.models[name] = self._unbuilt.pop(name)()
        return self.models[name]

    def try_get(self, name: str) -> keras.Model | None:
        """:meth:`get`, or None when the candidate failed (recorded in :attr:`failed`)."""
        return self.get(name) if self.trains(name) else None

    def trains(self, name: str) -> bool:
        """:meth:`train`; whether ``name`` trained (False: it failed, see :attr:`failed`)."""
        try:
            self.train(name)
        except Failed:
            return False
        return True

    def has(self, name: str) -> bool:
        """Whether ``name`` is trained (or failed): nothing left to do."""
        return name in self.heads or name in self.failed

    def train(self, name: str) -> None:
        """Train and score ``name`` (and what it needs) unless done, as :meth:`get` does.

        A composite's Keras model is not built here (its score reads its nets'
        outputs through its head); :meth:`get` builds it when asked.

        Raises:
            Failed: as :meth:`get`.
        """
        if name not in self.heads and name not in self.failed:
            entry = TABLE[name]
            if entry.parts is None:
                train([self], [name], self.pu, self.e, np.full(len(self.pu), -1),
                      np.full(len(self.e), -1))
            else:
                self.progress(name)
                try:
                    self.composite(name, *entry.parts(self))
                except Failed as err:
                    self.failed[name] = str(err)
        if name in self.failed:
            raise Failed(self.failed[name])

    def install(self, name: str, net: keras.Model, epochs: int,
                head: Callable[[list[Any]], Any] | None = None,
                reads: tuple[str, ...] = ()) -> None:
        """Take ``net``, trained, as ``name`` (with ``head``: its net, read with ``reads``)."""
        key = name if head is None else f"{name}/net"
        self.best_epoch[name] = epochs
        self.models[key] = net
        self.heads[key] = ((key,), operator.itemgetter(key))
        if head is not None:
            self.best_epoch[key] = epochs
            nets = {key: net, **{r: self.models[r] for r in reads}}
            self.heads[name] = ((key, *reads), lambda z: head([z[n] for n in (key, *reads)]))
            self._unbuilt[name] = lambda: compose(nets, self.heads[name][1], name)
        if self.held_out is not None and name != THETA:
            self.scores[name] = self._brier(name)

    def net(self, name: str) -> keras.Model:
        """A fresh ``build_net()`` seeded for ``name`` (or built so ahead)."""
        seed = self.seed_of(name)
        ahead = self._built.pop(seed, None)
        if ahead is not None:
            return ahead
        with BUILDING:
            seed_net(seed)  # the kernel cache kept (see seed_net)
            return self.build_net()

    def probabilities(self, name: str, x: Any) -> np.ndarray:
        """The trained ``name``'s probabilities on rows ``x``: a column another net trains on.

        Raises:
            Failed: if ``name`` failed, or gives NaN on some row (the features
                are too large for it: another net cannot train on that).
        """
        p = sigmoid(logits(self.get(name), x))
        if not np.all(np.isfinite(p)):
            raise Failed(f"{name}'s outputs on {int(np.sum(~np.isfinite(p)))} training row(s) "
                         f"{DIVERGED} (NaN): features too large for the net? Scale them.")
        return p

    def seed_of(self, name: str) -> int:
        """The seed of net ``name`` (and of its shuffles) in this stage."""
        return net_seed(self.cfg.seed, name)

    def monitor(self, name: str) -> Callable[[keras.Model], float]:
        """The held-out score ``name``'s net keeps its best epoch by (lower is better).

        ``Candidate.epochs_by``: the exposure Brier score, or the log-loss of
        the labels its risk reads (``θ̂``: ``E``; ``bce_w``: ``W``); inf when
        the logits blew up (``adpue_tf.recommend.train.finite_logits``).
        """
        pu, e = self._held_rows()
        if TABLE[name].epochs_by == "brier":
            def brier(model: keras.Model) -> float:
                z_pu, z_e = logits(model, pu.x), logits(model, e.x)
                if not finite_logits(z_pu, z_e):
                    return math.inf
                return brier_unchecked(pu.y, sigmoid(z_pu), e.y, sigmoid(z_e))
            return brier
        rows = e if TABLE[name].reads == "e" else pu
        return lambda model: usable_score(log_loss, rows.y, logits(model, rows.x))

    def held(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """Logits of ``name`` (trained if needed) on the held-out PU and E rows, float64.

        A net's are its model's; a composite's are its head on its nets'
        outputs, which is what its model computes, without building it.
        """
        pu_out, e_out = self._outputs(name)
        return as_logits(pu_out), as_logits(e_out)

    def _outputs(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        if name not in self._held:
            rows = self._held_rows()
            self.train(name)
            nets, head = self.heads[name]
            if nets == (name,):
                self._held[name] = (outputs(self.models[name], rows[0].x),
                                    outputs(self.models[name], rows[1].x))
            else:
                parts = {n: self._outputs(n) for n in nets}
                self._held[name] = tuple(  # type: ignore[assignment]
                    np.asarray(keras.ops.convert_to_numpy(head(
                        {n: keras.ops.convert_to_tensor(out[i]) for n, out in parts.items()})))
                    for i in (0, 1))
        return self._held[name]

    def _held_rows(self) -> tuple[Rows, Rows]:
        if self.held_out is None:
            raise RuntimeError("This stage has no held-out rows.")
        return self.held_out

    def theta_column(self) -> np.ndarray:
        """``θ̂`` on this stage's PU rows, float32 ``(n, 1)``: a label column (computed once)."""
        if self._theta_pu is None:
            self._theta_pu = self.probabilities(THETA, self.pu.x)[:, None].astype(np.float32)
        return self._theta_pu

    def _brier(self, name: str) -> float:
        (pu, e), (z_pu, z_e) = self._held_rows(), self.held(name)
        return brier_unchecked(pu.y, sigmoid(z_pu), e.y, sigmoid(z_e))

    def composite(self, name: str, parts: tuple[str, ...],
                   combine: Callable[[list[Any]], Any]) -> None:
        """Candidate ``name``: ``combine`` of the heads of ``parts``, as one model."""
        for part in parts:
            self.train(part)
        self.parts.setdefault(name, parts)
        nets = tuple(dict.fromkeys(n for p in parts for n in self.heads[p][0]))
        heads = [self.heads[p][1] for p in parts]
        head = lambda z: combine([h(z) for h in heads])  # noqa: E731
        self.heads[name] = (nets, head)
        members = {n: self.models[n] for n in nets}
        self._unbuilt[name] = lambda: compose(members, head, name)
        if self.held_out is not None:
            self.scores[name] = self._brier(name)


# -- the one training routine ----------------------------------------------------------------
def train_all(stages: Sequence[Stage], names: Sequence[str], pu: Rows, e: Rows,
              pu_fold: np.ndarray, e_fold: np.ndarray) -> None:
    """Train ``names`` (and what they need) in every stage, in rounds of independent passes.

    Each round trains every net whose needs are trained (:func:`train`: the
    nets with a risk together, those that read ``θ̂`` as a label in a pass of
    their own, each net in a model of its own alone; side by side on large
    data). ``θ̂`` is always trained when the stages have held-out rows (the
    tie-break reads it); a derived candidate (``average``) only once its parts
    are chosen. Failures are recorded in the stages.
    """
    wanted = {n for name in names for n in with_needs(name, stages[0].parts)}
    if stages[0].held_out is not None:
        wanted.add(THETA)
    nets = [n for n in TABLE if n in wanted and TABLE[n].parts is None]
    while nets:
        ready = [n for n in nets
                 if all(st.has(m) for st in stages for m in TABLE[n].needs)] or nets
        train(stages, ready, pu, e, pu_fold, e_fold)
        nets = [n for n in nets if n not in ready]
    for name in [n for n in TABLE if n in wanted]:
        for st in stages:
            if not TABLE[name].derived or name in st.parts:
                st.trains(name)


def train(stages: Sequence[Stage], names: Sequence[str], pu: Rows, e: Rows,
          pu_fold: np.ndarray, e_fold: np.ndarray) -> None:
    """Train the nets ``names`` of every stage; each is installed in its stage, or failed there.

    A stage trains on the rows whose part is not 0 (0: held out; ``-1``: training).
    The nets with a risk train in one pass (those that read ``θ̂`` as a label in a
    second), those in a model of their own one pass
    each (on their stage's rows); a stage's net whose needs failed fails with
    them, one that needs another of ``names`` trains after it. Nets a stage
    has already are skipped. The passes are independent: on large data they
    run :data:`PARALLEL_PASSES` at a time (:func:`_run`).

    Args:
        stages: one per net of a mapping (``held_out``: the rows of part 0).
        names: nets of the table (``Candidate.risk`` or ``Candidate.own``).
        pu, e: every PU and E row.
        pu_fold, e_fold: each row's part (0: held out; -1: no stage holds it out).
    """
    jobs, later, theta = [], [], {}
    for s, st in enumerate(stages):
        for name in names:
            entry = TABLE[name]
            if st.has(name):
                continue
            if any(n in names and not st.has(n) for n in entry.needs):
                later.append(name)  # needs a net of this call: after it, on its own
                continue
            missing = [n for n in entry.needs if not st.trains(n)]
            if not missing and entry.risk is not None and entry.theta_column and s not in theta:
                try:  # θ̂ of every PU row: a label column
                    theta[s] = st.probabilities(THETA, pu.x)
                except Failed as err:
                    st.failed[THETA] = st.failed.get(THETA, str(err))
                    missing = [THETA]
            if missing:
                st.failed[name] = f"{name} needs {missing[0]}: {st.failed[missing[0]]}"
            else:
                jobs.append((s, name))
    passes: list[tuple[Sequence[Stage], list[tuple[int, str]], _Spec]] = []
    for column in (False, True):
        together = [job for job in jobs if TABLE[job[1]].risk is not None
                    and TABLE[job[1]].theta_column == column]
        if together:
            passes.append((stages, together,
                           _together(stages, together, pu, e, pu_fold, e_fold, theta)))
    for s, name in jobs:
        own = TABLE[name].own
        if own is not None:
            try:
                spec = _own(stages[s], name, own(stages[s]))
            except Failed as err:
                stages[s].failed[name] = str(err)
                continue
            passes.append(([stages[s]], [(0, name)], spec))
    # The trained nets an own model reads are frozen there (θ̂ in likelihood_theta's, f†₀'s
    # nets in a DebiasedModel): frozen until every pass has ended, as passes share them.
    reads = {id(net): net for _, jobs, spec in passes for net in spec.fresh[len(jobs):]}
    states = [(layer, layer.trainable) for net in reads.values()
              for layer in all_layers(net)]
    for net in reads.values():
        net.trainable = False
    try:
        _run(passes)
    finally:  # each layer as it was (a part the user froze stays frozen)
        for layer, trainable in states:
            layer.trainable = trainable
    for name in dict.fromkeys(later):
        for st in stages:
            st.trains(name)


def _run(passes: list[tuple[Sequence[Stage], list[tuple[int, str]], _Spec]]) -> None:
    """Run the independent ``passes``: :data:`PARALLEL_PASSES` at a time where that pays.

    Side by side only on data larger than a batch (full-batch passes are quick),
    on TensorFlow, outside a distribution strategy and on a host without a GPU:
    a caller's strategy or ``tf.device`` scope holds in its own thread only, and
    on a CPU-only host a device scope can only name the CPU. Keras's dtype
    policy (also per thread) is the caller's in every pass. The first error
    raised in a pass is raised here, after the passes under way have ended.
    """
    large = not any(fits(spec.rows, stages[0].cfg.batch_size) for stages, _, spec in passes)
    if (PARALLEL_PASSES < 2 or len(passes) < 2 or not large or BACKEND != "tensorflow"
            or tf.distribute.has_strategy() or tf.config.list_logical_devices("GPU")
            or (os.cpu_count() or 1) < 2):
        for stages, jobs, spec in passes:
            _pass(stages, jobs, spec)
        return
    policy = keras.config.dtype_policy()

    def run(args: tuple[Sequence[Stage], list[tuple[int, str]], _Spec]) -> None:
        keras.config.set_dtype_policy(policy)
        _pass(*args)

    # longest first: the other worker takes the rest meanwhile
    order = sorted(passes, key=lambda p: -p[2].rows * len(p[2].fresh))
    pool = concurrent.futures.ThreadPoolExecutor(PARALLEL_PASSES,
                                                 thread_name_prefix="fit_pue pass")
    try:
        for future in [pool.submit(run, p) for p in order]:
            future.result()
    finally:  # an error (or an interrupt): no new pass starts; those under way end first
        pool.shutdown(wait=True, cancel_futures=True)


class _Spec(NamedTuple):
    """What a pass trains: its nets, model, data and how each net is watched and installed."""

    fresh: list[keras.Model]  # the new nets (then the trained ones they read)
    build: Callable[[list[keras.Model]], tuple[keras.Model, Any]]  # nets -> (model, loss)
    key: Hashable  # what else the traced step depends on (a kept model's key)
    data: Callable[[int, bool], Any]  # (steps, full) -> batches
    rows: int
    features: Any
    keep: bool  # False: never kept for a later pass (PASS_MODELS)
    watched: Callable[[keras.Model, list[keras.Model], int], keras.Model]
    into: Callable[[Stage, str, keras.Model, int, keras.Model], None]
    callbacks: tuple = ()
    losses: tuple = ()  # Keras losses whose configuration the step reads (a kept model's key)


def _pass(stages: Sequence[Stage], jobs: list[tuple[int, str]], spec: _Spec) -> None:
    """One ``fit`` of ``spec`` for ``jobs`` (``(stage, name)``); if it diverges, each net alone."""
    first, cfg = stages[0], stages[0].cfg
    steps = steps_per_epoch(spec.rows, cfg.batch_size, cfg.epochs, cfg.min_steps)
    full = fits(spec.rows, cfg.batch_size)  # one batch of every row (full_batch.py)

    def make(nets: Sequence[keras.Model]) -> keras.Model:
        model, loss = spec.build(list(nets))
        # One call of the training function per epoch (the small nets of tabular
        # data spend most of a step in Python dispatch otherwise).
        # JAX runs a step op by op unless it is jitted (its own default): always jitted
        # there; PyTorch runs one step a call (Keras refuses more)
        compile_for_fit(model, optimizer=cfg.optimizer(), loss=loss,
                        steps_per_execution=1 if BACKEND == "torch" else steps,
                        jit_compile=cfg.jit_compile or BACKEND == "jax")
        if full:
            install_loop(model)  # TensorFlow: an epoch's steps in one traced loop
        return model

    builders = [stages[s].build_net for s, _ in jobs]
    hook = PASS_MODELS[0] if PASS_MODELS else None
    entry = (hook(builders + [first.build_net] * (len(spec.fresh) - len(jobs)),
                  (spec.key, steps, full, cfg.jit_compile), spec.fresh, make, spec.features,
                  (cfg.optimizer(), *spec.losses), spec.keep)
             if hook is not None else NewModel(make(spec.fresh), spec.fresh))
    model = entry.model
    watches: list[Any] = []
    for j, (s, name) in enumerate(jobs):
        stage, watched = stages[s], spec.watched(model, entry.nets, j)
        if stage.held_out is None or stage.fixed is not None:
            watches.append(_KeepEpoch(watched, (stage.fixed or {}).get(name, cfg.epochs)))
        else:
            watches.append(HeldOutScore(watched, stage.monitor(name)))
    scored = [w for w in watches if isinstance(w, HeldOutScore)]
    epochs = max([w.epoch for w in watches if isinstance(w, _KeepEpoch)]
                 + [cfg.epochs if scored else 1])
    diverged = False
    try:
        entry.fit(spec.data(steps, full), epochs=epochs, steps=steps,
                  callbacks=[*spec.callbacks, *watches, StopWhenStale(scored, cfg.patience)])
    except Exception as err:  # the guard's error: TensorFlow's, or JAX's runtime error
        if DIVERGED not in str(err):
            raise
        diverged = True
    finally:
        if full and not entry.kept:
            uninstall_loop(model)  # the net a user gets keeps Keras's own fit
    if diverged and len(jobs) > 1:  # a net's outputs exploded: each net again, alone
        for s, name in jobs:
            st = stages[s]
            train([st], [name], st.pu, st.e, np.full(len(st.pu), -1), np.full(len(st.e), -1))
        return
    if diverged:  # the guard stopped the step before a bad update: the best epoch before it
        watch = watches[0]
        (s, name), done = jobs[0], len(getattr(watch, "history", ()))
        if not isinstance(watch, HeldOutScore) or watch.best_epoch == 0:
            stages[s].failed[name] = f"{name} diverged in epoch {done + 1} (outputs {DIVERGED})"
            return
        watch.on_train_end()
    entry.give(spec.fresh)
    for j, ((s, name), watch) in enumerate(zip(jobs, watches)):
        if isinstance(watch, HeldOutScore) and watch.best_epoch == 0:
            stages[s].failed[name] = f"{name} diverged in epoch 1 (no finite held-out score)"
            continue
        kept = watch.best_epoch if isinstance(watch, HeldOutScore) else watch.epoch
        spec.into(stages[s], name, spec.fresh[j], kept, model)


def _together(stages: Sequence[Stage], jobs: list[tuple[int, str]], pu: Rows, e: Rows,
              pu_fold: np.ndarray, e_fold: np.ndarray, theta: dict[int, np.ndarray]) -> _Spec:
    """The pass of nets trained with a risk: one model of their logits side by side."""
    cfg = stages[0].cfg
    theta_pu = np.full((len(pu), len(stages)), 0.5, np.float32)
    for s, column in theta.items():
        theta_pu[:, s] = column
    for s, name in jobs:
        stages[s].progress(name)
    fresh = [stages[s].net(name) for s, name in jobs]
    reads = {TABLE[n].reads for _, n in jobs}
    only = reads.pop() if len(reads) == 1 and "pue" not in reads else None  # one source's rows
    rows = {"pu": len(pu), "e": len(e), None: len(pu) + len(e)}[only]
    full = fits(rows, cfg.batch_size)
    # shuffled batches: the nets that read one source run on its rows (layout.py)
    layout = None if only or full else batch_layout(len(pu), len(e), cfg.batch_size)
    if full:  # the held-out rows, which no net of the pass reads: left out of the batch
        pu_in, e_in = np.flatnonzero(pu_fold != 0), np.flatnonzero(e_fold != 0)
        pu, pu_fold, theta_pu = pu.take(pu_in), pu_fold[pu_in], theta_pu[pu_in]
        e, e_fold = e.take(e_in), e_fold[e_in]

    def build(nets: list[keras.Model]) -> tuple[keras.Model, Any]:
        distinct_names(nets)
        inputs = inputs_like(nets[0])
        outs = [call_on_rows(net, inputs, TABLE[name].reads, layout)
                for net, (_, name) in zip(nets, jobs)]
        return keras.Model(inputs, outs[0] if len(outs) == 1 else
                           keras.layers.Concatenate()(outs)), _Joint(jobs)

    def data(steps: int, full: bool) -> tf.data.Dataset:
        return _batches(pu, e, pu_fold, e_fold, theta_pu, batch_size=cfg.batch_size,
                        seed=stages[0].seed_of(JOINT), steps=steps, only=only,
                        full=full, layout=layout)

    return _Spec(fresh, build, (tuple(jobs), only, layout), data, rows, pu.x,
                 True, lambda model, live, j: live[j],
                 lambda stage, name, net, kept, model: stage.install(name, net, kept))


def _own(stage: Stage, name: str, own: Own) -> _Spec:
    """The pass of a net in a model of its own (``Candidate.own``), on its stage's rows."""
    entry, cfg = TABLE[name], stage.cfg
    stage.progress(name)
    fresh = [stage.net(name), *(stage.get(r) for r in own.reads)]
    rows = len(stage.pu) + (0 if entry.reads == "pu" else len(stage.e))

    def data(steps: int, full: bool) -> Any:
        if entry.reads == "pu":
            y = pack_pu(stage.pu.y)
            if entry.theta_column:
                y = np.concatenate([y, stage.theta_column()], axis=1)
            return whole(stage.pu.x, y) if full else pu_batches(
                stage.pu.x, y, batch_size=cfg.batch_size, seed=stage.seed_of(name))
        if full:
            return whole_pue(stage.pu.x, stage.pu.y, stage.e.x, stage.e.y)
        # Repeated: the same batches as a new pass per epoch (test_train.py), but
        # Keras keeps one iterator instead of building one (~50 ms) per epoch.
        return pue_dataset(stage.pu.x, stage.pu.y, stage.e.x, stage.e.y,
                           batch_size=min(cfg.batch_size, rows), seed=stage.seed_of(name),
                           steps_per_epoch=steps).repeat()

    def into(stage: Stage, name: str, net: keras.Model, kept: int, model: keras.Model) -> None:
        head = None if own.head is None else own.head(model)
        stage.install(name, net, kept, head=head, reads=own.reads if head else ())

    return _Spec(fresh, lambda nets: (own.make(nets), own.loss), ("own", name, own.key), data,
                 rows, stage.pu.x, own.keep, lambda model, live, j: own.watched(model), into,
                 own.callbacks, (own.loss,))


class _Joint:
    """The summed objective of the nets ``jobs`` (``(stage, name)``), one logit column each.

    Labels: ``y = [W, E, source, θ̂ of each stage..., part]``; every net sees
    only the rows whose part is not 0 (held out).
    """

    def __init__(self, jobs: Sequence[tuple[int, str]]) -> None:
        self.jobs = list(jobs)

    def __call__(self, y_true: Any, y_pred: Any) -> Any:
        ops = keras.ops
        y_true = ops.cast(y_true, "float32")
        y_pred = ops.cast(y_pred, "float32")
        total = 0.0
        # The held-out rows are weighted 0 (not cut out: a mask of every row keeps the
        # batch's static shape, so XLA compiles no dynamic-size gather), once for all
        # the nets, so that they read the same label tensor (checked once:
        # risks._batch); a net that reads θ̂ gets its own stage's θ̂ column.
        keep = ops.cast(ops.not_equal(y_true[:, -1], 0.0), "float32")
        rows: dict[int | None, Any] = {}
        # One split (its gradient one concat), not a slice a net (each slice's gradient
        # a full-width pad, all summed).
        columns = ops.split(y_pred, len(self.jobs), axis=1)
        for j, (s, name) in enumerate(self.jobs):
            column = TABLE[name].theta_column
            key = s if column else None
            if key not in rows:
                y = y_true[:, :3]
                rows[key] = ops.concatenate([y, y_true[:, 3 + s:4 + s]], axis=1) if column else y
            y = rows[key]
            risk = TABLE[name].risk
            assert risk is not None  # only nets with a risk train together
            total += risk(y, columns[j], keep)
        return total


class _KeepEpoch(keras.callbacks.Callback):
    """Keeps a net's weights at a given epoch (the refit's epoch count)."""

    def __init__(self, net: keras.Model, epoch: int) -> None:
        super().__init__()
        self.net, self.epoch, self.weights = net, epoch, None

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        if epoch + 1 == self.epoch:
            self.weights = self.net.get_weights()

    def on_train_end(self, logs: dict | None = None) -> None:
        if self.weights is not None:
            self.net.set_weights(self.weights)


def _batches(pu: Rows, e: Rows, pu_fold: np.ndarray, e_fold: np.ndarray,
             theta_pu: np.ndarray, *, batch_size: int, seed: int, steps: int,
             only: str | None = None, full: bool = False,
             layout: Layout | None = None) -> tf.data.Dataset:
    """PUE batches whose labels carry each stage's ``θ̂`` and the row's part (0: held out).

    ``only``: ``"pu"`` or ``"e"``, that source's rows alone (the risks read no other).
    ``full``: every row in one batch, repeated (``adpue_tf.recommend.full_batch``).
    ``layout``: shuffled batches' rows PU first (:mod:`adpue_tf.recommend.layout`).
    """
    theta_e = np.full((len(e), theta_pu.shape[1]), 0.5, np.float32)
    if only is not None:
        rows, y = (pu, pack_pu(pu.y)) if only == "pu" else (e, pack_e(e.y))
        fold, theta = (pu_fold, theta_pu) if only == "pu" else (e_fold, theta_e)
        y = np.concatenate([y, theta, fold.astype(np.float32)[:, None]], axis=1)
        return whole(rows.x, y) if full else pu_batches(rows.x, y, batch_size=batch_size,
                                                        seed=seed)
    if full:
        return whole_pue(pu.x, pu.y, e.x, e.y,
                         np.concatenate([theta_pu, pu_fold.astype(np.float32)[:, None]], 1),
                         np.concatenate([theta_e, e_fold.astype(np.float32)[:, None]], 1))

    def feats(rows: Rows, fold: np.ndarray, theta: np.ndarray) -> dict:
        return {"x": rows.x, "fold": fold.astype(np.float32)[:, None], "theta": theta}

    ds = pue_dataset(feats(pu, pu_fold, theta_pu), pu.y, feats(e, e_fold, theta_e), e.y,
                     batch_size=min(batch_size, len(pu) + len(e)), seed=seed,
                     steps_per_epoch=steps)
    reorder = pu_first(layout) if layout is not None else None

    def split(x: dict, y: Any) -> tuple[Any, Any]:
        y = tf.concat([tf.cast(y, tf.float32), x["theta"], x["fold"]], axis=1)
        return (x["x"], y) if reorder is None else reorder(x["x"], y)

    # Repeated: one iterator for every epoch, the same batches (see _own's data).
    return ds.map(split, num_parallel_calls=tf.data.AUTOTUNE).repeat()
