"""The candidate estimators of :func:`adpue_tf.fit_pue`, trained on one split of the rows.

A :class:`Stage` trains the asked-for candidates on its rows, each net fresh from
``build_net`` with its own seed, and keeps each net's best held-out epoch. ``θ̂``:
``build_net()`` trained with cross-entropy on ``E``, shared by every candidate.
The candidates (the maths: ``docs/guide/choosing-models.md``):

====================  ====================================================  ==============
name                  what it trains                                        epochs kept by
====================  ====================================================  ==============
``bce_w``             cross-entropy on ``W`` (the naive floor, ``q̂``)        W log-loss
``ratio``             ``clip(q̂/θ̂, 0, 1)`` from ``bce_w`` and ``θ̂``            (its parts)
``elkan_noto``        ``clip(q̂/c, 0, 1)``, ``c`` = mean ``q̂`` over ``W = 1``   (``bce_w``)
``ips``               cross-entropy on ``W`` weighted by ``1/θ̂``              Brier
``likelihood``        NLL of ``W`` under ``σ(z)·θ̂``                          Brier
``brier``             the exposure Brier risk (no ``θ̂``)                     Brier
``exposed_pu``        nnPU with P = ``W = 1``, U = exposed log rows          Brier
``adpue_direct``      nnPUE with ``f† = σ(z)`` (the paper's experiments)     Brier
``adpue_rounds``      alternate learning from ``f†₀ = mean(W)``              Brier
``adpue_ratio``       alternate learning from ``f†₀ =`` the Ratio estimate   Brier
``average``           the mean probability of the two best of the above     (its parts)
``blend``             mean of the four ``BLEND_PARTS`` (fixed)              (its parts)
``likelihood_theta``  ``likelihood`` of ``σ(z + a·logit θ̂)``: θ̂ a feature    Brier
====================  ====================================================  ==============
"""

from __future__ import annotations

import hashlib
import math
import operator
from collections.abc import Callable, Hashable
from typing import Any

import keras
import numpy as np

from adpue_tf import losses
from adpue_tf._internal.guards import DIVERGED
from adpue_tf._internal.numeric import sigmoid as _sigmoid
from adpue_tf._internal.seeding import seed_net
from adpue_tf.callbacks import RefreshDagger
from adpue_tf.data import pue_dataset
from adpue_tf.data.rows import Rows
from adpue_tf.labels import pack_pu
from adpue_tf.model import DebiasedModel
from adpue_tf.recommend.alone import Failed, train_alone
from adpue_tf.recommend.compose import ProbabilityMean, RatioLogit, ThetaFeature, compose
from adpue_tf.recommend.full_batch import fits, whole, whole_pue
from adpue_tf.recommend.held_out import PU, E, Heads, HeldOut, brier_scorer, log_loss_scorer
from adpue_tf.recommend.names import (
    BLEND_PARTS,
    CANDIDATES,
    COMPOSITE_PARTS,
    DEFAULT_CANDIDATES,
    DERIVED,
    NOT_AVERAGED,
    PREDICTS_WITH_THETA,
    PREFERRED,
    THETA_FEATURE_NET,
    THETA_FLOOR,
)
from adpue_tf.recommend.train import Settings, logits, pu_batches, steps_per_epoch
from adpue_tf.validation.scores import brier_unchecked

__all__ = ["BLEND_PARTS", "CANDIDATES", "COMPOSITE_PARTS", "DEFAULT_CANDIDATES", "DERIVED",
           "PREDICTS_WITH_THETA", "PREFERRED", "Failed", "Settings", "Stage", "net_seed"]


def net_seed(seed: int, name: str, fold: int) -> int:
    """The seed of net ``name`` (and of its shuffles) in the stage of ``fold``, fit_pue's ``seed``.

    Any ``seed >= 0`` is taken (a date such as ``20240601``, ``2**63``); the
    result lies in ``[0, 2**32)``, the range Keras's seeds take. Below
    ``2**32`` it is ``1009·seed + index + 7919·fold`` modulo ``2**32``
    (``1009`` is odd, so two seeds give two different seeds of each net); a
    larger seed is first hashed to 32 bits (BLAKE2b), so that ``s`` and
    ``s + 2**32`` differ too (two seeds of 32 bits can still meet, as any
    map into ``2**32`` values must allow).

    Example:
        >>> net_seed(0, "theta", 0), net_seed(0, "bce_w", 1), net_seed(2**32, "theta", 0) > 0
        (0, 7920, True)
    """
    index = CANDIDATES.index(name) + 1 if name in CANDIDATES else 0
    if seed >= 2**32:
        seed = int.from_bytes(hashlib.blake2b(str(seed).encode(), digest_size=4).digest(),
                              "little")
    return (seed * 1009 + index + 7919 * fold) % 2**32


class Stage:
    """Train candidates on ``pu``/``e`` rows; score them on ``held_out`` rows when given.

    Args:
        build_net: returns a fresh Keras model, features -> one logit.
        pu, e: the training rows.
        settings: the shared settings.
        held_out: ``(pu_rows, e_rows)`` to choose epochs and score, or None.
        epochs: per net, the epochs to train for (the refit), or None.
        parts: the parts of composite candidates chosen before (``"average"``).
        progress: called with each net's name before it trains.
        fold: which fold this stage holds out (seeds its nets).
        built: nets built ahead from ``build_net`` under a seed
            (:func:`net_seed`), by seed: a net of that seed is taken from it
            (once) instead of built.
    """

    def __init__(self, build_net: Callable[[], keras.Model], pu: Rows, e: Rows,
                 settings: Settings, held_out: tuple[Rows, Rows] | None = None,
                 epochs: dict[str, int] | None = None,
                 parts: dict[str, tuple[str, ...]] | None = None,
                 progress: Callable[[str], None] = lambda name: None, fold: int = 0,
                 built: dict[int, keras.Model] | None = None) -> None:
        self.fold, self._built = fold, built if built is not None else {}
        self.build_net, self.pu, self.e, self.cfg = build_net, pu, e, settings
        self.held_out, self.fixed, self.progress = held_out, epochs, progress
        self.models: dict[str, keras.Model] = {}
        #: composites trained (scored by their heads) whose Keras model is not built
        #: yet: built when asked for (:meth:`get`), most never are
        self._unbuilt: dict[str, Callable[[], keras.Model]] = {}
        self.best_epoch: dict[str, int] = {}
        self.scores: dict[str, float] = {}
        #: name -> why it failed (a diverged net, or a part that did)
        self.failed: dict[str, str] = {}
        self.parts: dict[str, tuple[str, ...]] = {**COMPOSITE_PARTS, **(parts or {})}
        #: name -> (the nets it reads, head: their logits -> its logit)
        self.heads: Heads = {}
        self._theta_pu: np.ndarray | None = None
        self._held = None if held_out is None else HeldOut(held_out, self.get, self.heads)

    # -- the public side ------------------------------------------------------------
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

    def train(self, name: str) -> None:
        """Train and score ``name`` (and what it needs) unless done, as :meth:`get` does.

        A composite's Keras model is not built here (its score reads its nets'
        outputs through its head); :meth:`get` builds it when asked.

        Raises:
            Failed: as :meth:`get`.
        """
        if name in self.failed:
            raise Failed(self.failed[name])
        if name not in self.models and name not in self._unbuilt:
            self.progress(name)
            try:
                getattr(self, f"_train_{name}")()
            except Failed as err:
                self.failed[name] = str(err)
                raise
            if self.held_out is not None and name != "theta":
                self.scores[name] = self._brier(name)

    def install(self, name: str, net: keras.Model, epochs: int) -> None:
        """Take ``net``, trained elsewhere (:mod:`adpue_tf.recommend.joint`), as ``name``."""
        self.best_epoch[name] = epochs
        self.models[name] = net
        self.heads[name] = ((name,), operator.itemgetter(name))
        if self.held_out is not None and name != "theta":
            self.scores[name] = self._brier(name)

    def net(self, name: str) -> keras.Model:
        """A fresh ``build_net()`` seeded for ``name`` and this stage's fold (or built so ahead)."""
        seed = self.seed_of(name)
        ahead = self._built.pop(seed, None)
        if ahead is not None:
            return ahead
        seed_net(seed)  # the kernel cache kept (see seed_net)
        return self.build_net()

    def probabilities(self, name: str, x: Any) -> np.ndarray:
        """The trained ``name``'s probabilities on rows ``x``: a column another net trains on.

        Raises:
            Failed: if ``name`` failed, or gives NaN on some row (the features
                are too large for it: another net cannot train on that).
        """
        p = _sigmoid(logits(self.get(name), x))
        if not np.all(np.isfinite(p)):
            raise Failed(f"{name}'s outputs on {int(np.sum(~np.isfinite(p)))} training row(s) "
                         f"{DIVERGED} (NaN): features too large for the net? Scale them.")
        return p

    def seed_of(self, name: str) -> int:
        """The seed of net ``name`` (and of its shuffles) in this stage."""
        return net_seed(self.cfg.seed, name, self.fold)

    def monitor(self, name: str, net: keras.Model | None) -> Callable[[keras.Model], float]:
        """The held-out score ``name``'s net keeps its best epoch by (lower is better)."""
        pu, e = self._require_held_out()
        if name not in ("theta", "bce_w"):
            return self._brier_of(name)
        held = self._held_out()
        return held.watch(name, log_loss_scorer(e, E) if name == "theta" else
                          log_loss_scorer(pu, PU))

    # -- helpers --------------------------------------------------------------------
    def _require_held_out(self) -> tuple[Rows, Rows]:
        return self._held_out().rows

    def _held_out(self) -> HeldOut:
        if self._held is None:
            raise RuntimeError("This stage has no held-out rows.")
        return self._held

    def held(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """Logits of model ``name`` on the held-out PU and E rows (cached; ``held_out.py``)."""
        return self._held_out().logits(name)

    def _brier(self, name: str) -> float:
        pu, e = self._require_held_out()
        z_pu, z_e = self.held(name)
        return brier_unchecked(pu.y, _sigmoid(z_pu), e.y, _sigmoid(z_e))

    def _fit(self, name: str, fresh: list[keras.Model],
             make: Callable[[list[keras.Model]], keras.Model], loss: Any, data: Any, rows: int,
             monitor: Callable[[keras.Model], float] | None = None, callbacks: tuple = (),
             watched: Callable[[keras.Model], keras.Model] = lambda model: model,
             key: Hashable = (), keep: bool = True) -> keras.Model:
        """Train ``name`` alone (``alone.train_alone``: ``fresh[0]`` ends trained); the model."""
        model, best = train_alone(
            name, fresh, make, loss, data, rows, self.cfg, self.build_net, self.pu.x,
            epochs=self.cfg.epochs if self.fixed is None else self.fixed[name],
            monitor=(None if self.held_out is None else monitor or self._brier_of(name)),
            callbacks=callbacks, watched=watched, key=key, keep=keep)
        self.best_epoch[name] = best
        self.models[name] = fresh[0]
        self.heads[name] = ((name,), lambda z: z[name])
        return model

    def _composite(self, name: str, parts: tuple[str, ...],
                   combine: Callable[[list[Any]], Any]) -> None:
        """Candidate ``name``: ``combine`` of the heads of ``parts``, as one model."""
        for part in parts:
            self.train(part)
        nets = tuple(dict.fromkeys(n for p in parts for n in self.heads[p][0]))
        heads = [self.heads[p][1] for p in parts]
        head = lambda z: combine([h(z) for h in heads])  # noqa: E731
        self.heads[name] = (nets, head)
        members = {n: self.models[n] for n in nets}
        self._unbuilt[name] = lambda: compose(members, head, name)

    def _brier_of(self, name: str) -> Callable[[keras.Model], float]:
        """The held-out Brier score ``name``'s net keeps its best epoch by."""
        pu, e = self._require_held_out()
        return self._held_out().watch(name, brier_scorer(pu, e))

    def _pue_data(self, name: str, rows: int) -> Any:
        if fits(rows, self.cfg.batch_size):
            return whole_pue(self.pu.x, self.pu.y, self.e.x, self.e.y)
        steps = steps_per_epoch(rows, self.cfg.batch_size, self.cfg.epochs, self.cfg.min_steps)
        # Repeated: the same batches as a new pass per epoch (test_train.py), but
        # Keras keeps one iterator instead of building one (~50 ms) per epoch.
        return pue_dataset(self.pu.x, self.pu.y, self.e.x, self.e.y,
                           batch_size=min(self.cfg.batch_size, len(self.pu) + len(self.e)),
                           seed=self.seed_of(name), steps_per_epoch=steps).repeat()

    def _rows(self, x: Any, y: np.ndarray, name: str) -> Any:
        """Batches of one source's rows ``(x, y)`` for net ``name``."""
        if fits(len(y), self.cfg.batch_size):
            return whole(x, y)
        return pu_batches(x, y, batch_size=self.cfg.batch_size, seed=self.seed_of(name))

    def _pu_labels(self, with_theta: bool) -> np.ndarray:
        y = pack_pu(self.pu.y)
        if with_theta:
            if self._theta_pu is None:
                self._theta_pu = self.probabilities("theta", self.pu.x)
            y = np.concatenate([y, self._theta_pu[:, None].astype(np.float32)], axis=1)
        return y

    def _train_pu_loss(self, name: str, loss: Any, with_theta: bool,
                       monitor: Callable[[keras.Model], float] | None = None) -> None:
        """Fit a fresh net for ``name`` with ``loss`` over the PU rows."""
        data = self._rows(self.pu.x, self._pu_labels(with_theta), name)
        self._fit(name, [self.net(name)], operator.itemgetter(0), loss, data, len(self.pu),
                  monitor)

    def _train_pue_loss(self, name: str, loss: Any) -> None:
        rows = len(self.pu) + len(self.e)
        self._fit(name, [self.net(name)], operator.itemgetter(0), loss,
                  self._pue_data(name, rows), rows)

    def _train_rounds(self, name: str, initial: float | None) -> None:
        """Alternate learning from ``f†₀ = initial`` (None: the Ratio estimate)."""
        rows = len(self.pu) + len(self.e)
        every = max(1, self.cfg.epochs // self.cfg.rounds)
        fresh = [self.net(name)]
        if initial is None:  # f†₀ = ratio: its nets, trained, read by the model
            fresh += [self.get("bce_w"), self.get("theta")]

        def make(nets: list[keras.Model]) -> keras.Model:
            if initial is not None:
                return DebiasedModel(nets[0], initial_dagger=initial)
            ratio = compose({"bce_w": nets[1], "theta": nets[2]}, lambda z: RatioLogit(
                floor=THETA_FLOOR)([z["bce_w"], z["theta"]]), "ratio")
            return DebiasedModel(nets[0], initial_dagger=ratio)

        self._fit(name, fresh, make, losses.ADPUELoss(from_logits=True),
                  self._pue_data(name, rows), rows,
                  callbacks=(RefreshDagger(every_n_epochs=every),),
                  watched=lambda model: model.net, key=every,
                  keep=initial is None)  # a constant f†₀ (mean W) is in the step

    # -- the nets ---------------------------------------------------------------------
    def _train_theta(self) -> None:
        monitor = None if self.held_out is None else self.monitor("theta", None)
        data = self._rows(self.e.x, self.e.y, "theta")
        self._fit("theta", [self.net("theta")], operator.itemgetter(0),
                  keras.losses.BinaryCrossentropy(from_logits=True), data, len(self.e), monitor)

    def _train_bce_w(self) -> None:
        monitor = None if self.held_out is None else self.monitor("bce_w", None)
        self._train_pu_loss("bce_w", losses.LogitLoss(from_logits=True), False, monitor)

    def _train_ratio(self) -> None:
        self._composite("ratio", ("bce_w", "theta"),
                        lambda z: RatioLogit(floor=THETA_FLOOR)(z))

    def _train_elkan_noto(self) -> None:
        p = self.probabilities("bce_w", self.pu.x)
        c = float(np.clip(p[self.pu.y == 1].mean(), THETA_FLOOR, 1.0))
        self._composite("elkan_noto", ("bce_w",), lambda z: RatioLogit(constant=c)(z[0]))

    def _train_ips(self) -> None:
        self._train_pu_loss("ips", losses.IPSLoss(clip=THETA_FLOOR, from_logits=True), True)

    def _train_likelihood(self) -> None:
        self._train_pu_loss("likelihood", losses.ExposureLikelihoodLoss(from_logits=True), True)

    def _train_likelihood_theta(self) -> None:
        name, key = "likelihood_theta", THETA_FEATURE_NET
        theta, net = self.get("theta"), self.net(name)

        def make(nets: list[keras.Model]) -> keras.Model:
            live = ThetaFeature()
            nets[1].trainable = False  # θ̂ is trained; only the net and ``a`` learn here
            return compose({key: nets[0], "theta": nets[1]},
                           lambda z: live([z[key], z["theta"]]), name)

        try:
            trained = self._fit(name, [net, theta], make,
                                losses.ExposureLikelihoodLoss(from_logits=True),
                                self._rows(self.pu.x, self._pu_labels(True), name),
                                len(self.pu))
        finally:
            theta.trainable = True
        # ``a`` of the trained model, in a layer of the fresh nets' model
        layer = ThetaFeature()
        head = lambda z: layer([z[key], z["theta"]])  # noqa: E731
        nets = {key: net, "theta": theta}
        layer.build([(None, 1), (None, 1)])  # two logits, as compose() calls it
        layer.scale.assign(next(x for x in trained.layers if isinstance(x, ThetaFeature)).scale)
        # _fit filed the net under `name`: it is the composite's part `key`
        self.models[key], self.best_epoch[key] = self.models.pop(name), self.best_epoch[name]
        self.heads[key] = ((key,), operator.itemgetter(key))
        self.heads[name] = ((key, "theta"), head)
        # uncompiled, as every composite (a saved copy then holds no optimizer state)
        self._unbuilt[name] = lambda: compose(nets, head, name)

    def _train_brier(self) -> None:
        self._train_pue_loss("brier", losses.ExposureBrierLoss(from_logits=True))

    def _train_exposed_pu(self) -> None:
        self._train_pue_loss("exposed_pu", losses.ExposedPULoss(from_logits=True, gamma=1.0))

    def _train_adpue_direct(self) -> None:
        self._train_pue_loss("adpue_direct", losses.ADPUELoss(from_logits=True))

    def _train_adpue_rounds(self) -> None:
        self._train_rounds("adpue_rounds", float(np.mean(self.pu.y)))

    def _train_adpue_ratio(self) -> None:
        self._train_rounds("adpue_ratio", None)

    def _train_average(self) -> None:
        pair = self.parts.get("average")
        if pair is None:
            ranked = sorted((s, n) for n, s in self.scores.items()
                            if n not in NOT_AVERAGED and math.isfinite(s))
            if len(ranked) < 2:
                raise ValueError("The `average` candidate needs two other candidates.")
            pair = (ranked[0][1], ranked[1][1])
            self.parts["average"] = pair
        self._composite("average", pair, lambda z: ProbabilityMean()(z))

    def _train_blend(self) -> None:
        self._composite("blend", BLEND_PARTS, lambda z: ProbabilityMean()(z))
