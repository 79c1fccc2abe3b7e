"""The table of :func:`adpue_tf.fit_pue`'s candidates: each declared once, by name.

An entry says how its candidate is made (a net trained with a risk, a model of
its own around a net, or a composite of other candidates' models), which rows
its risk reads, what it needs trained first and whether fit_pue tries it by
default; its seed comes from its name (:func:`net_seed`). Everything else
(:data:`CANDIDATES`, which read ``θ̂``, the trainer's passes, the joint
pass's row slices) is read from :data:`TABLE`. The candidates and their maths:
``docs/guide/choosing-models.md``, *The candidates*; adding one is one entry
and its risk (*Adding a candidate*).

Example:
    >>> TABLE["likelihood"].reads, TABLE["likelihood"].needs, "blend" in DEFAULT_CANDIDATES
    ('pu', ('theta',), True)
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import math
from collections.abc import Callable, Hashable
from typing import Any

import keras
import numpy as np
from keras import ops

from adpue_tf import losses, risks
from adpue_tf.callbacks import RefreshDagger
from adpue_tf.labels import Source
from adpue_tf.model import DebiasedModel
from adpue_tf.recommend.compose import ProbabilityMean, RatioLogit, ThetaFeature, compose

__all__ = ["BLEND_PARTS", "CANDIDATES", "DEFAULT_CANDIDATES", "DERIVED",
           "PREDICTS_WITH_THETA", "PREFERRED", "TABLE", "THETA", "THETA_FLOOR", "Candidate",
           "Own", "net_seed", "with_needs"]

#: The exposure model ``θ̂``'s net: trained first, read by many candidates (not one itself).
THETA = "theta"
#: Floor on θ̂ in the Ratio estimate, and IPS's clip.
THETA_FLOOR = 0.05
#: ``blend``'s four estimators fail in different ways (``likelihood`` when ``θ̂``
#: is a wrong model, ``ratio`` when ``θ̂`` is noisy, ``brier`` never uses ``θ̂``
#: but has the most variance, ``likelihood_theta`` extrapolates along ``θ̂``
#: where few rows are exposed); their mean is fixed before any row is seen
#: (docs/guide/choosing-models.md, *The blend's fourth part*).
BLEND_PARTS = ("likelihood", "brier", "ratio", "likelihood_theta")
#: The candidate fit_pue keeps unless the held-out rows show another one better
#: (:func:`adpue_tf.recommend.rule.choose`'s ``prefer``).
PREFERRED = "blend"


@dataclasses.dataclass(frozen=True)
class Own:
    """A candidate's model of its own around its net, as its entry builds it for a stage.

    Attributes:
        reads: trained nets the model reads besides its own (``θ̂``...), in ``make``'s order.
        make: ``make([net, *reads])``: the Keras model trained (its net ``nets[0]``).
        loss: the Keras loss it is compiled with.
        watched: the part of the model whose held-out score keeps the epoch.
        callbacks: more callbacks of its ``fit``.
        key: what else its traced step depends on (part of a kept model's key).
        keep: False: its step holds a constant of these rows (never kept for a later call).
        head: ``head(trained model)``: its logit from ``[z of its net, z of each read]``
            (None: its net's logit alone).
    """

    reads: tuple[str, ...]
    make: Callable[[list[keras.Model]], keras.Model]
    loss: Any
    watched: Callable[[keras.Model], keras.Model] = lambda model: model
    callbacks: tuple = ()
    key: Hashable = ()
    keep: bool = True
    head: Callable[[keras.Model], Callable[[list[Any]], Any]] | None = None


@dataclasses.dataclass(frozen=True)
class Candidate:
    """One entry of :data:`TABLE`: how one candidate (or ``θ̂``) is made.

    Exactly one of ``risk``, ``own`` and ``parts`` says how.

    Attributes:
        risk: a net trained with ``risk(y, z, keep)``: its training objective on
            packed labels ``y`` (``W, E, source``, then ``θ̂`` of the PU rows
            when ``theta_column``), logits ``z`` and row weights ``keep``
            (1 on the rows it trains on). Such nets train together in one pass.
        own: ``own(stage)``: a net in a model of its own (:class:`Own`), one pass each.
        parts: a composite: ``parts(stage)`` gives the candidates it is made
            of and a head that combines their logits (no net of its own).
        reads: the rows its risk reads: ``"pu"``, ``"e"`` or ``"pue"``.
        theta_column: its labels carry ``θ̂`` (trained first).
        needs: what must be trained before it (nets or candidates).
        default: fit_pue tries it unless ``candidates=`` names others.
        predicts_with_theta: its estimate reads fit_pue's shared ``θ̂`` (the
            likelihood under ``θ̂`` cannot see that ``θ̂``'s error;
            :func:`adpue_tf.recommend.rule.choose`).
        derived: built from the held-out scores (never the tolerance's reference).
        averaged: ``average`` may pair it.
        epochs_by: the held-out score its net keeps its best epoch by:
            ``"brier"`` or ``"log_loss"`` (of the labels its risk reads).
    """

    risk: Callable[[Any, Any, Any], Any] | None = None
    own: Callable[[Any], Own] | None = None
    parts: Callable[[Any], tuple[tuple[str, ...], Callable[[list[Any]], Any]]] | None = None
    reads: str = "pue"
    theta_column: bool = False
    needs: tuple[str, ...] = ()
    default: bool = False
    predicts_with_theta: bool = False
    derived: bool = False
    averaged: bool = True
    epochs_by: str = "brier"


# -- the risks of the nets trained together ------------------------------------------------
def _theta_risk(y: Any, z: Any, keep: Any) -> Any:
    """Cross-entropy of ``E`` on the exposure rows ``keep`` marks."""
    kept = ops.cast(ops.equal(y[:, 2], float(Source.E)), "float32") * keep
    per_row = ops.softplus(z[:, 0]) - y[:, 1] * z[:, 0]
    return ops.sum(per_row * kept) / ops.maximum(ops.sum(kept), 1.0)


def _library(fn: Callable[..., Any], **options: Any) -> Callable[[Any, Any, Any], Any]:
    """A risk of :mod:`adpue_tf.risks` as a table entry's ``risk(y, z, keep)``."""
    return lambda y, z, keep: fn(y, z, from_logits=True, sample_weight=keep,
                                 **options).loss


# -- the composites' heads ------------------------------------------------------------------
def _mean(parts: tuple[str, ...]) -> Callable[[Any], tuple[tuple[str, ...], Callable]]:
    return lambda stage: (parts, lambda z: ProbabilityMean()(z))


def _ratio(stage: Any) -> tuple[tuple[str, ...], Callable]:
    return ("bce_w", THETA), lambda z: RatioLogit(floor=THETA_FLOOR)(z)


def _elkan_noto(stage: Any) -> tuple[tuple[str, ...], Callable]:
    p = stage.probabilities("bce_w", stage.pu.x)
    c = float(np.clip(p[stage.pu.y == 1].mean(), THETA_FLOOR, 1.0))
    return ("bce_w",), lambda z: RatioLogit(constant=c)(z[0])


def _average(stage: Any) -> tuple[tuple[str, ...], Callable]:
    """The two best by the held-out scores (chosen before: :func:`adpue_tf.recommend.select.select`)."""
    pair = stage.parts.get("average")
    if pair is None:
        ranked = sorted((s, n) for n, s in stage.scores.items()
                        if TABLE[n].averaged and math.isfinite(s))
        if len(ranked) < 2:
            raise ValueError("The `average` candidate needs two other candidates.")
        pair = stage.parts["average"] = (ranked[0][1], ranked[1][1])
    return pair, lambda z: ProbabilityMean()(z)


# -- the nets in models of their own --------------------------------------------------------
def _rounds(initial: str) -> Callable[[Any], Own]:
    """Alternate learning from ``f†₀``: ``"mean_w"`` (a constant) or ``"ratio"`` (its model)."""
    def own(stage: Any) -> Own:
        every = max(1, stage.cfg.epochs // stage.cfg.rounds)
        mean_w = float(np.mean(stage.pu.y))

        def make(nets: list[keras.Model]) -> keras.Model:
            if initial == "mean_w":
                return DebiasedModel(nets[0], initial_dagger=mean_w)
            ratio = compose({"bce_w": nets[1], THETA: nets[2]}, lambda z: RatioLogit(
                floor=THETA_FLOOR)([z["bce_w"], z[THETA]]), "ratio")
            return DebiasedModel(nets[0], initial_dagger=ratio)

        return Own(reads=() if initial == "mean_w" else ("bce_w", THETA), make=make,
                   loss=losses.ADPUELoss(from_logits=True), watched=lambda model: model.net,
                   callbacks=(RefreshDagger(every_n_epochs=every),), key=every,
                   keep=initial != "mean_w")  # a constant f†₀ (mean W) is in the step
    return own


def _theta_feature(stage: Any) -> Own:
    """``likelihood`` of ``σ(z + a·logit θ̂)``; θ̂ frozen while the net and ``a`` learn."""
    def make(nets: list[keras.Model]) -> keras.Model:
        live = ThetaFeature()
        nets[1].trainable = False  # θ̂ is trained; only the net and ``a`` learn here
        return compose({"net": nets[0], THETA: nets[1]},
                       lambda z: live([z["net"], z[THETA]]), "likelihood_theta")

    def head(trained: keras.Model) -> Callable[[list[Any]], Any]:
        layer = ThetaFeature()
        layer.build([(None, 1), (None, 1)])  # two logits, as compose() calls it
        layer.scale.assign(next(x for x in trained.layers if isinstance(x, ThetaFeature)).scale)
        return lambda z: layer([z[0], z[1]])

    return Own(reads=(THETA,), make=make, loss=losses.ExposureLikelihoodLoss(from_logits=True),
               head=head)


#: Every net and candidate, in the order the report lists them.
TABLE: dict[str, Candidate] = {
    THETA: Candidate(risk=_theta_risk, reads="e", epochs_by="log_loss", averaged=False),
    "bce_w": Candidate(risk=_library(risks.logit), reads="pu", epochs_by="log_loss",
                       default=True),
    "ratio": Candidate(parts=_ratio, needs=("bce_w", THETA), default=True,
                       predicts_with_theta=True),
    "elkan_noto": Candidate(parts=_elkan_noto, needs=("bce_w",)),
    "ips": Candidate(risk=_library(risks.ips, clip=THETA_FLOOR), reads="pu", theta_column=True,
                     needs=(THETA,)),
    "likelihood": Candidate(risk=_library(risks.exposure_likelihood), reads="pu",
                            theta_column=True, needs=(THETA,), default=True),
    "brier": Candidate(risk=_library(risks.exposure_brier), default=True),
    "exposed_pu": Candidate(risk=_library(risks.exposed_pu, gamma=1.0), default=True),
    "adpue_direct": Candidate(risk=_library(risks.adpue)),
    "adpue_rounds": Candidate(own=_rounds("mean_w")),
    "adpue_ratio": Candidate(own=_rounds("ratio"), needs=("bce_w", THETA), default=True),
    "average": Candidate(parts=_average, default=True, derived=True, averaged=False),
    "blend": Candidate(parts=_mean(BLEND_PARTS), needs=BLEND_PARTS, default=True,
                       averaged=False),
    "likelihood_theta": Candidate(own=_theta_feature, reads="pu", theta_column=True,
                                  needs=(THETA,), default=True, predicts_with_theta=True),
}

#: Every candidate fit_pue can try (``candidates="all"``), in the table's order.
CANDIDATES = tuple(n for n in TABLE if n != THETA)
#: What fit_pue tries by default: the candidates that won on some data in
#: benchmarks/results/selection.md (the others never did; name them to try them).
DEFAULT_CANDIDATES = tuple(n for n in CANDIDATES if TABLE[n].default)
#: Candidates whose estimate reads fit_pue's shared ``θ̂`` (``Candidate.predicts_with_theta``).
PREDICTS_WITH_THETA = frozenset(n for n in CANDIDATES if TABLE[n].predicts_with_theta)
#: Candidates built from the held-out scores (``average``: the two best by them).
DERIVED = tuple(n for n in CANDIDATES if TABLE[n].derived)


def with_needs(name: str, chosen: dict[str, tuple[str, ...]] | None = None) -> tuple[str, ...]:
    """``name``, what it needs trained, what that needs, and so on.

    ``chosen``: parts chosen at run time (``average``'s pair).

    Example:
        >>> with_needs("ratio")
        ('ratio', 'bce_w', 'theta')
    """
    seen: dict[str, None] = {}
    todo = [name]
    while todo:
        n = todo.pop(0)
        if n not in seen:
            seen[n] = None
            todo += [*TABLE[n].needs, *(chosen or {}).get(n, ())]
    return tuple(seen)


@functools.cache
def _name_hash(name: str) -> int:
    return int.from_bytes(hashlib.blake2b(name.encode(), digest_size=4).digest(), "little")


def net_seed(seed: int, name: str) -> int:
    """The seed of net ``name`` (and of its shuffles) under fit_pue's ``seed``.

    From the name, never a position: a new entry changes no other net's seed.
    Any ``seed >= 0`` is taken; the result lies in ``[0, 2**32)``, the range
    Keras's seeds take: ``1009·seed + h(name)`` modulo ``2**32``
    (``h``: 32 bits of BLAKE2b of the name; ``1009`` is odd, so two seeds give
    two different seeds of each net); a seed of ``2**32`` or more is first
    hashed to 32 bits, so that ``s`` and ``s + 2**32`` differ too.

    Example:
        >>> net_seed(0, "theta") == net_seed(0, "theta") != net_seed(1, "theta")
        True
    """
    if seed >= 2**32:
        seed = int.from_bytes(hashlib.blake2b(str(seed).encode(), digest_size=4).digest(),
                              "little")
    return (seed * 1009 + _name_hash(name)) % 2**32
