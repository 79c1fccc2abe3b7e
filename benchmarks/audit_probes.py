"""The audit's probes of the in-memory entry points: labels, builders, losses, risks, models.

Probes are generated from small tables (an entry point x the bad values each
argument can meet), so every argument of every entry point is tried with
every kind of wrong value; :func:`all_probes` adds the file-system, serving,
metric, callback, tuner and command-line probes of ``audit_probes_io``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from benchmarks.audit import Probe

R = np.random.default_rng(0)
X, XE = R.normal(size=(12, 3)), R.normal(size=(10, 3))
W, E = (np.arange(12) % 3 == 0).astype(float), (np.arange(10) % 2).astype(float)


def _adp() -> Any:
    import adpue_tf as adp

    return adp


# ------------------------------------------------------------------ values of every wrong kind
def bad_arrays(n: int, width: int = 3) -> list[tuple[str, Any, str]]:
    """``(what, value, words)`` for a feature matrix of ``n`` rows."""
    nan = R.normal(size=(n, width))
    nan[1, 0] = np.nan
    inf = R.normal(size=(n, width))
    inf[0, 2] = np.inf
    return [
        ("NaN", nan, "NaN"),
        ("inf", inf, "(NaN|inf)"),
        ("strings", np.full((n, width), "a"), "(numeric|numbers|real)"),
        ("complex", R.normal(size=(n, width)) * 1j, "real numbers"),
        ("ragged", [[1.0, 2.0], [3.0]] + [[0.0, 0.0]] * (n - 2), "ragged"),
        ("zero width", np.zeros((n, 0)), "zero-width"),
        ("no rows", np.zeros((0, width)), "(empty|no row|at least)"),
        ("1e39", np.full((n, width), 1e39), "float32"),
        ("None", None, "(must|None|got)"),
        ("object", np.array([object()] * n), "(numeric|numbers|real|dtype)"),
    ]


def bad_binary(n: int) -> list[tuple[str, Any, str]]:
    """``(what, value, words)`` for a 0/1 label vector of ``n`` rows."""
    return [
        ("value 2", np.r_[2.0, np.zeros(n - 1)], "0 and 1"),
        ("value -1", np.r_[-1.0, np.ones(n - 1)], "0 and 1"),
        ("value 0.5", np.full(n, 0.5), "0 and 1"),
        ("NaN", np.r_[np.nan, np.zeros(n - 1)], "NaN"),
        ("strings", np.array(["1", "0"] * (n // 2) + ["0"] * (n % 2)), "(numeric|numbers)"),
        ("wrong length", np.zeros(n + 3), r"(rows|length|\d+ .* \d+)"),
        ("2-D", np.zeros((n, 2)), "shape"),
        ("None", None, "(needs|must|None)"),
    ]


def bad_ints(name: str, minimum: int) -> list[tuple[str, Any, str]]:
    return [
        (f"{name}=True", True, f"`{name}`"),
        (f"{name}=2.5", 2.5, f"`{name}`"),
        (f"{name}='8'", "8", f"`{name}`"),
        (f"{name}={minimum - 1}", minimum - 1, f"`{name}`"),
        (f"{name}=-7", -7, f"`{name}`"),
    ]


# ------------------------------------------------------------------ pack_labels, batch counts
def labels_probes() -> list[Probe]:
    adp = _adp
    probes = []
    for what, source in (("2.5", 2.5), ("2.0", 2.0), ("True", True), ("'PU'", "PU"),
                         ("7", 7), ("-1", -1), ("None", None), ("np.float64(1)", np.float64(1))):
        probes.append(Probe(f"pack_labels: source {what}",
                            lambda t, s=source: adp().pack_labels(s, n=2), "`source`"))
    for src, kw in (("PU", "w"), ("E", "e")):
        for what, value, words in bad_binary(4):
            if value is not None and what != "wrong length":  # nothing to disagree with
                probes.append(Probe(f"pack_labels: {src} {kw} {what}", lambda t, s=src, k=kw, v=value:
                                    adp().pack_labels(getattr(adp().Source, s), **{k: v}),
                                    f"(`{kw}`|{words})"))
    probes += [
        Probe("pack_labels: P with w", lambda t: adp().pack_labels(adp().Source.P, w=[1, 0]),
              "has no observed `w`"),
        Probe("pack_labels: SSE without e", lambda t: adp().pack_labels(adp().Source.SSE,
                                                                        w=[1, 0]), "needs `e`"),
        Probe("pack_labels: SSE w where e is 0", lambda t: adp().pack_labels(
            adp().Source.SSE, w=[1, 0], e=[0, 1]), "`w` must be 0 where `e` is 0"),
        Probe("pack_labels: dagger 1.5", lambda t: adp().pack_labels(
            adp().Source.U, n=2, dagger=[0.2, 1.5]), r"`dagger` must lie in \[0, 1\]"),
        Probe("pack_labels: dagger wrong length", lambda t: adp().pack_labels(
            adp().Source.U, n=2, dagger=[0.2]), "`dagger` has 1 rows"),
        Probe("pack_labels: n=2.7", lambda t: adp().pack_labels(adp().Source.P, n=2.7), "`n`"),
        Probe("pack_labels: n and w disagree", lambda t: adp().pack_labels(
            adp().Source.PU, w=[1, 0], n=3), "disagree"),
        Probe("pack_labels: np.int64 source", lambda t: adp().pack_labels(np.int64(3), n=2),
              check=lambda y: y.shape == (2, 3) and float(y[0, 2]) == 3.0),
        Probe("pack_labels: Source.SSE", lambda t: adp().pack_labels(
            adp().Source.SSE, w=[1, 0], e=[1, 1], dagger=[0.1, 0.9]),
              check=lambda y: y.shape == (2, 4) and y[1, 3] == np.float32(0.9)),
    ]
    name = "epoch_length"

    def call(rows: Any, counts: Any) -> Any:
        return adp().data.epoch_length(rows, counts)

    probes += [
        Probe(f"{name}: lists of different lengths", lambda t: call([10, 20, 30], [2, 3]),
              "`rows` and `counts`"),
        Probe(f"{name}: count 0", lambda t: call([2, 3], [2, 0]), r"`counts\[1\]`"),
        Probe(f"{name}: count -1", lambda t: call([2], [-1]), r"`counts\[0\]`"),
        Probe(f"{name}: rows -1", lambda t: call([-1], [1]), r"`rows\[0\]`"),
        Probe(f"{name}: empty", lambda t: call([], []), "`rows` and `counts`"),
        Probe(f"{name}: count 1.5", lambda t: call([3], [1.5]), r"`counts\[0\]`"),
        Probe(f"{name}: rows a str", lambda t: call("12", [1]), "`rows`"),
        Probe(f"{name}: counts None", lambda t: call([3], None), "`counts`"),
        Probe(f"{name}: rows 'a'", lambda t: call(["a"], [1]), r"`rows\[0\]`"),
        Probe(f"{name}: correct", lambda t: call([100, 10], [8, 2]), check=lambda n: n == 13),
    ]
    for what, value, _words in bad_ints("batch_size", 1)[:4]:
        probes.append(Probe(f"batch_counts: {what}", lambda t, v=value:
                            adp().data.batch_counts([1, 1], v), "`batch_size`"))
    probes += [
        Probe("batch_counts: share 0", lambda t: adp().data.batch_counts([1, 0], 4), "`shares`"),
        Probe("batch_counts: share NaN", lambda t: adp().data.batch_counts([1, np.nan], 4),
              "`shares`"),
        Probe("batch_counts: share 'a'", lambda t: adp().data.batch_counts([1, "a"], 4),
              "`shares`"),
        Probe("batch_counts: correct", lambda t: adp().data.batch_counts([3, 1], 10),
              check=lambda c: c == [8, 2]),
    ]
    return probes


# ------------------------------------------------------------------ the five builders
def builder_probes() -> list[Probe]:
    adp = _adp
    calls = {
        "pue_dataset": (lambda **k: adp().data.pue_dataset(
            k.get("x_pu", X), k.get("w", W), k.get("x_e", XE), k.get("e", E), **k.get("kw", {})),
            ("x_pu", "x_e"), ("w", "e")),
        "pe_dataset": (lambda **k: adp().data.pe_dataset(
            k.get("x_p", X), k.get("x_e", XE), k.get("e", E), **k.get("kw", {})),
            ("x_p", "x_e"), ("e",)),
        "fpue_dataset": (lambda **k: adp().data.fpue_dataset(
            k.get("x_p", X), k.get("x_u", X), k.get("x_e", XE), k.get("e", E), **k.get("kw", {})),
            ("x_p", "x_u", "x_e"), ("e",)),
        "sse_dataset": (lambda **k: adp().data.sse_dataset(
            k.get("x_sse", X), k.get("w", W), k.get("e", np.ones(12)), **k.get("kw", {})),
            ("x_sse",), ("w", "e")),
    }
    probes = []
    for name, (call, arrays, binaries) in calls.items():
        for arg in arrays:
            n = 10 if arg == "x_e" else 12
            for what, value, _words in bad_arrays(n):
                probes.append(Probe(f"{name}: {arg} {what}", lambda t, c=call, a=arg, v=value:
                                    c(**{a: v}), f"`{arg}`"))
        for arg in binaries:
            n = 10 if (arg == "e" and name != "sse_dataset") else 12
            for what, value, _words in bad_binary(n):
                probes.append(Probe(f"{name}: {arg} {what}", lambda t, c=call, a=arg, v=value:
                                    c(**{a: v}), f"`{arg}`"))
        for what, value, _words in bad_ints("batch_size", len(arrays) if name != "pe_dataset"
                                           else 2):
            probes.append(Probe(f"{name}: {what}", lambda t, c=call, v=value:
                                c(kw={"batch_size": v}), "`batch_size`"))
        probes += [
            Probe(f"{name}: shares of the wrong count", lambda t, c=call: c(
                kw={"shares": [1] * 7}), "`shares`"),
            Probe(f"{name}: shares negative", lambda t, c=call, k=arrays: c(
                kw={"shares": [-1] + [1] * (len(k) - 1) if len(k) > 1 else [-1]}), "`shares`"),
            Probe(f"{name}: seed 'x'", lambda t, c=call: c(kw={"seed": "x"}), "`seed`"),
            Probe(f"{name}: shuffle 'yes'", lambda t, c=call: c(kw={"shuffle": "yes"}),
                  "`shuffle`"),
            Probe(f"{name}: steps_per_epoch 0", lambda t, c=call: c(
                kw={"steps_per_epoch": 0}), "`steps_per_epoch`"),
            Probe(f"{name}: correct", lambda t, c=call: next(iter(c(kw={
                "batch_size": 8, "seed": 0})))[1].shape[-1], check=lambda k: k == 3),
        ]
    return probes


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
            *common_loss_probes(name, make, _labels(name)),
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


def _labels(loss: str) -> np.ndarray:
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


def all_probes() -> list[Probe]:
    """Every probe of the audit, in a fixed order."""
    from benchmarks import audit_probes_fit, audit_probes_io, audit_probes_losses

    return (labels_probes() + builder_probes() + loss_probes()
            + audit_probes_losses.exposure_loss_probes()
            + audit_probes_io.io_probes() + audit_probes_io.model_probes()
            + audit_probes_fit.fit_pue_probes())


__all__ = ["all_probes", "bad_arrays", "bad_binary", "bad_ints", "common_loss_probes"]
