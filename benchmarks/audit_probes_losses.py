"""The audit's probes of the losses fit_pue trains with: Logit, IPS, the exposure likelihood,
the exposure Brier risk and exposed PU (``adp.LogitLoss`` ... ``adp.ExposedPULoss``).

Each takes labels, outputs and options as the debiased losses do (the probes of
:mod:`benchmarks.audit_probes`), and IPS and the likelihood read ``θ̂`` from a
fourth label column, which must be there and lie in ``[0, 1]``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from benchmarks.audit import Probe
from benchmarks.audit_probes import common_loss_probes
from benchmarks.audit_probes_io import _adp

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
