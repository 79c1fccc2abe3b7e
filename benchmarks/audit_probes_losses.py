"""The audit's probes of the loss classes: the debiased losses (``adp.ADPUELoss`` ...
``adp.PNULoss``), the losses fit_pue trains with (``adp.LogitLoss`` ... ``adp.ExposedPULoss``)
and the registry.

Every packed-label loss must refuse the same things (:func:`common_loss_probes`):
its options, labels of the wrong layout, outputs of the wrong convention. IPS
and the likelihood read ``θ̂`` from a fourth label column, which must be there
and lie in ``[0, 1]``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from benchmarks.audit_runner import Probe
from benchmarks.audit_values import XE, E, W, X, _adp

# ------------------------------------------------------------------ losses and risks
LOSSES = {"ADPUELoss": {}, "ADPELoss": {"prior": 0.3}, "ADFPULoss": {"prior": 0.3},
          "ADSLoss": {}, "ADSSLoss": {}, "DoubleADSSLoss": {"alpha": 0.5},
          "AD3SELoss": {"alpha": 0.5}, "UPULoss": {"prior": 0.3}, "NNPULoss": {"prior": 0.3},
          "PNULoss": {"prior": 0.3, "eta": 0.2}}


def loss_probes() -> list[Probe]:
    adp = _adp
    probes = []
    for name, options in LOSSES.items():
        def make(name: str = name, options: dict = options, **kw: Any) -> Any:
            return getattr(adp(), name)(**{**options, **kw})

        probes += [
            Probe(f"{name}: non_negative 1", lambda t, m=make: m(non_negative=1), "non_negative"),
            Probe(f"{name}: beta -1", lambda t, m=make: m(beta=-1.0), "beta"),
            Probe(f"{name}: gamma 0", lambda t, m=make: m(gamma=0.0), "gamma"),
            *common_loss_probes(name, make, _loss_labels(name)),
        ]
        if "prior" in options:
            probes += [Probe(f"{name}: prior {p}", lambda t, m=make, p=p: m(prior=p), "`prior`")
                       for p in (0.0, 1.0, -0.2, float("nan"), "0.3")]
        if "alpha" in options:
            probes += [Probe(f"{name}: alpha {a}", lambda t, m=make, a=a: m(alpha=a), "`alpha`")
                       for a in (1.5, -0.1)]
    probes += [
        Probe("losses.get: unknown key", lambda t: adp().losses.get("nope"), "Unknown loss 'nope'"),
        Probe("losses.get: None", lambda t: adp().losses.get(None), "`identifier`"),
        Probe("risks.nnpue: string labels", lambda t: adp().risks.nnpue(
            np.array([["1", "0", "0"]]), np.zeros((1, 1))), "`y_true` must hold numbers"),
        Probe("ADPUELoss: sigmoid output as logits (graph)", lambda t: _fit_sigmoid_as_logits(),
              "sigmoid", error=("ValueError", "InvalidArgumentError")),
        Probe("ADPUELoss: correct value", lambda t: float(adp().ADPUELoss(from_logits=True)(
            np.concatenate([adp().pack_labels(adp().Source.PU, w=[1, 0]),
                            adp().pack_labels(adp().Source.E, e=[1, 0])]), np.zeros((4, 1)))),
              check=lambda v: abs(v - np.log(2)) < 1e-4),  # R+ = 0.75 log 2, R- = 0.25 log 2
    ]
    return probes


def common_loss_probes(name: str, make: Callable[..., Any], y: np.ndarray) -> list[Probe]:
    """What every packed-label loss must refuse: its options, labels and outputs.

    ``make(**options)`` builds the loss ``name``; ``y`` are valid labels for it.
    """
    n = len(y)
    return [
        Probe(f"{name}: from_logits 'yes'", lambda t: make(from_logits="yes"), "`from_logits`"),
        Probe(f"{name}: reduction sum", lambda t: make(reduction="sum"), "reduction"),
        Probe(f"{name}: unknown option", lambda t: make(bogus=1), "(bogus|option)"),
        Probe(f"{name}: string labels", lambda t: make(from_logits=True)(
            np.array([["1", "0", "0"]]), np.zeros((1, 1))), "`y_true` must hold numbers"),
        Probe(f"{name}: labels of 5 columns", lambda t: make(from_logits=True)(
            np.zeros((2, 5)), np.zeros((2, 1))), "`y_true` must have shape"),
        Probe(f"{name}: two output units", lambda t: make(from_logits=True)(
            y, np.zeros((n, 2))), "one output unit"),
        Probe(f"{name}: logits as probabilities", lambda t: make(from_logits=False)(
            y, np.full((n, 1), 3.0)), r"outside \[0, 1\]"),
        Probe(f"{name}: NaN output", lambda t: make(from_logits=True)(
            y, np.full((n, 1), np.nan)), "NaN"),
        Probe(f"{name}: source code 9", lambda t: make(from_logits=True)(
            np.array([[0.0, 0.0, 9.0]] * 2), np.zeros((2, 1))), "(source|Source)"),
    ]


def _loss_labels(loss: str) -> np.ndarray:
    """Valid packed labels for ``loss``: two rows of every source it needs."""
    adp, s = _adp(), _adp().Source
    parts = {"PU": adp.pack_labels(s.PU, w=[1, 0]), "E": adp.pack_labels(s.E, e=[1, 0]),
             "P": adp.pack_labels(s.P, n=2), "U": adp.pack_labels(s.U, n=2),
             "SSE": adp.pack_labels(s.SSE, w=[1, 0], e=[1, 1])}
    needs = {"ADPUELoss": "PU E", "ADPELoss": "P E", "ADFPULoss": "P U E", "ADSLoss": "SSE",
             "ADSSLoss": "SSE", "DoubleADSSLoss": "SSE", "AD3SELoss": "SSE PU",
             "UPULoss": "PU", "NNPULoss": "PU", "PNULoss": "SSE"}[loss]
    return np.concatenate([parts[k] for k in needs.split()])


def _fit_sigmoid_as_logits() -> Any:
    import keras

    adp = _adp()
    net = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1, "sigmoid")])
    net.compile("sgd", loss=adp.ADPUELoss(from_logits=True))
    return net.fit(adp.data.pue_dataset(X, W, XE, E, batch_size=8, seed=0), epochs=1, verbose=0)


# ------------------------------------------------------------------ the losses fit_pue trains with
#: Loss -> (the sources of its valid labels, whether it reads θ̂ from column 3).
EXPOSURE_LOSSES = {"LogitLoss": ("PU", False), "IPSLoss": ("PU", True),
                   "ExposureLikelihoodLoss": ("PU", True),
                   "ExposureBrierLoss": ("PU E", False), "ExposedPULoss": ("PU E", False)}


def _labels(sources: str, theta: bool, value: float = 0.5) -> np.ndarray:
    adp, s = _adp(), _adp().Source
    parts = {"PU": adp.pack_labels(s.PU, w=[1, 0]), "E": adp.pack_labels(s.E, e=[1, 0])}
    y = np.concatenate([parts[k] for k in sources.split()])
    return np.c_[y, np.full(len(y), value)] if theta else y


def exposure_loss_probes() -> list[Probe]:
    adp = _adp
    probes = []
    for name, (sources, theta) in EXPOSURE_LOSSES.items():
        def make(name: str = name, **kw: Any) -> Any:
            return getattr(adp(), name)(**kw)

        y = _labels(sources, theta)
        n = len(y)
        e_only = _labels("E", theta)
        probes += [
            *common_loss_probes(name, make, y),
            Probe(f"{name}: exposure rows only", lambda t, m=make, y=e_only: m(
                from_logits=True)(y, np.zeros((2, 1))), "needs rows of PU"),
            Probe(f"{name}: more outputs than labels", lambda t, m=make, y=y, n=n: m(
                from_logits=True)(y, np.zeros((n + 1, 1))), f"`y_true` has {n} rows"),
            Probe(f"{name}: correct value", lambda t, m=make, y=y, n=n: float(m(
                from_logits=True)(y, np.zeros((n, 1)))), check=np.isfinite),
        ]
        if theta:
            probes += [
                Probe(f"{name}: no θ̂ column", lambda t, m=make, s=sources: m(from_logits=True)(
                    _labels(s, False), np.zeros((2, 1))), "must have 4 columns"),
                Probe(f"{name}: θ̂ 1.5", lambda t, m=make, s=sources: m(from_logits=True)(
                    _labels(s, True, 1.5), np.zeros((2, 1))), r"\[0, 1\]"),
                Probe(f"{name}: θ̂ NaN", lambda t, m=make, s=sources: m(from_logits=True)(
                    _labels(s, True, np.nan), np.zeros((2, 1))), "NaN"),
            ]
    return probes


# ------------------------------------------------------------------ every loss: saving, dtypes, labels
def _every_loss() -> list[tuple[str, dict, np.ndarray]]:
    """``(class name, required options, valid labels)`` of all fifteen loss classes."""
    out = [(name, options, _loss_labels(name)) for name, options in LOSSES.items()]
    return out + [(name, {}, _labels(sources, theta))
                  for name, (sources, theta) in EXPOSURE_LOSSES.items()]


def _value(loss: Any, y: np.ndarray) -> float:
    return float(loss(y, np.linspace(-1.0, 1.0, len(y)).reshape(-1, 1)))


def _same(a: float, b: float) -> bool:
    return bool(np.isfinite(a) and abs(a - b) <= 1e-6 * max(1.0, abs(a)))


def _round_trip(loss: Any, y: np.ndarray, how: str, tmp: Any = None) -> tuple[float, float]:
    """The loss's value on ``y`` before and after a trip through ``how``."""
    import keras

    if how == "config":
        again = type(loss).from_config(loss.get_config())
    elif how == "serialize":
        again = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(loss))
    else:  # a model compiled with the loss, saved as .keras and loaded without custom_objects
        model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
        model.compile("sgd", loss=loss)
        model.save(tmp / "m.keras")
        again = keras.models.load_model(tmp / "m.keras").loss
    if type(again) is not type(loss):
        return _value(loss, y), float("nan")
    return _value(loss, y), _value(again, y)


def loss_extra_probes() -> list[Probe]:
    """What users do with any loss: save it, load it, pass NumPy scalars and integer labels."""
    adp = _adp
    probes = []
    for name, options, y in _every_loss():
        def make(name: str = name, options: dict = options, **kw: Any) -> Any:
            return getattr(adp(), name)(**{**options, **kw})

        n = len(y)
        nan = np.array(y, np.float64)
        nan[0, 0] = np.nan
        probes += [Probe(f"{name}: {what} round trip (correct)", lambda t, m=make, y=y, h=how:
                         _round_trip(m(from_logits=True), y, h, t), check=lambda r: _same(*r))
                   for what, how in (("get_config/from_config", "config"),
                                     ("serialize_keras_object", "serialize"),
                                     ("model.save/load_model (.keras)", "save"))]
        probes += [
            # A NumPy bool may be taken, or refused by name: either is clear.
            Probe(f"{name}: from_logits np.bool_(True)", lambda t, m=make, y=y: _value(
                m(from_logits=np.bool_(True)), y), "`from_logits`", check=np.isfinite),
            Probe(f"{name}: integer labels (correct)", lambda t, m=make, y=y: _value(
                m(from_logits=True), y.astype(np.int64)), check=np.isfinite),
            Probe(f"{name}: float16 outputs (correct)", lambda t, m=make, y=y, n=n: float(m(
                from_logits=True)(y, np.zeros((n, 1), np.float16))), check=np.isfinite),
            Probe(f"{name}: NaN in y_true", lambda t, m=make, y=nan, n=n: m(from_logits=True)(
                y, np.zeros((n, 1))), r"`y_true`.*NaN"),
            Probe(f"{name}: a 1-D y_true", lambda t, m=make, n=n: m(from_logits=True)(
                np.zeros(n), np.zeros((n, 1))), r"`y_true`.*shape"),
        ]
        if name in LOSSES:  # the exposure losses have this probe already
            probes.append(Probe(f"{name}: more outputs than labels", lambda t, m=make, y=y, n=n:
                                m(from_logits=True)(y, np.zeros((n + 1, 1))),
                                f"`y_true` has {n} rows"))
    options = {**LOSSES, **{name: {} for name in EXPOSURE_LOSSES}}
    for key in sorted(_adp().losses.registry.LOSSES):
        probes.append(Probe(f"losses.get: {key!r} (correct)", lambda t, k=key: _adp().losses.get(
            k, **options[_adp().losses.registry.get_class(k).__name__]),
                            check=lambda loss: isinstance(loss, _adp().DebiasedLoss)))
    probes.append(Probe("losses.get: 'adpe' without its prior", lambda t: _adp().losses.get(
        "adpe"), "prior"))
    return probes


def all_loss_probes() -> list[Probe]:
    """Every probe of the loss classes."""
    return loss_probes() + exposure_loss_probes() + loss_extra_probes()


__all__ = ["all_loss_probes", "common_loss_probes"]
