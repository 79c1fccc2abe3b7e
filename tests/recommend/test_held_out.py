"""The held-out scores fit_pue chooses by, against NumPy written here."""

from __future__ import annotations

import types

import numpy as np
import pytest

from adpue_tf.recommend.select import HeldOut

RNG = np.random.default_rng(3)
W = (RNG.random(40) < 0.3).astype(np.float32)
E = (RNG.random(30) < 0.5).astype(np.float32)
Z = {n: (RNG.normal(size=40), RNG.normal(size=30)) for n in ("theta", "a", "b")}


def _stage():
    rows = lambda y: types.SimpleNamespace(y=y)  # noqa: E731
    return types.SimpleNamespace(held_out=(rows(W), rows(E)), held=lambda n: Z[n], e=rows(E))


def _sig(z):
    return 1.0 / (1.0 + np.exp(-np.asarray(z, np.float64)))


def test_brier_and_its_paired_standard_error():
    pooled = HeldOut(_stage())
    fa, fb = _sig(Z["a"][0]), _sig(Z["b"][0])
    ga, gb = _sig(Z["a"][1]), _sig(Z["b"][1])
    assert pooled.brier("a") == pytest.approx(np.mean(E * ga**2) - 2 * np.mean(W * fa), abs=1e-6)
    d_e, d_pu = E * (ga**2 - gb**2), 2 * W * (fa - fb)
    want = np.sqrt(d_e.var() / 30 + d_pu.var() / 40)
    assert pooled.paired_se("a", "b") == pytest.approx(want, rel=1e-5)


def test_the_likelihood_and_its_paired_standard_error():
    pooled = HeldOut(_stage())
    theta = _sig(Z["theta"][0])

    def nll(name):  # −log P(W | x) under σ(z)·θ̂, per row
        q = _sig(Z[name][0]) * theta
        return -(W * np.log(q) + (1 - W) * np.log(1 - q))

    assert pooled.exposure_nll("a") == pytest.approx(nll("a").mean(), rel=1e-5)
    d = nll("a") - nll("b")
    assert pooled.nll_paired_se("a", "b") == pytest.approx(np.sqrt(d.var() / 40), rel=1e-4)
    assert pooled.nll_paired_se("a", "a") == 0.0
