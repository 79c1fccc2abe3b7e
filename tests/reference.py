"""Independent NumPy (float64) references for the risks of SPEC.md.

Written from SPEC.md, not from the package: plain boolean masks and
``np.mean`` over the rows of each data set, ``log(1 + exp(.))`` for the losses.
"""

from __future__ import annotations

import numpy as np

PU, E, P, U, SSE = 0, 1, 2, 3, 4


def sig(z):
    return 1.0 / (1.0 + np.exp(-z))


def l1(z):  # -log sigma(z)
    return np.logaddexp(0.0, -z)


def l0(z):  # -log(1 - sigma(z))
    return np.logaddexp(0.0, z)


def gmean(v, m):
    """Mean of v over rows where m; 0 when no row."""
    m = np.asarray(m, bool)
    return float(np.mean(v[m])) if m.any() else 0.0


def parts(name, y, z, dagger=None, **opt):
    """(R+, R-, C) of risk `name` for packed labels y, logits z, proxy dagger."""
    y = np.asarray(y, np.float64)
    z = np.asarray(z, np.float64).reshape(-1)
    w, e, s = y[:, 0], y[:, 1], y[:, 2]
    if dagger is None:
        dagger = y[:, 3] if y.shape[1] == 4 else sig(z)
    a = dagger * (1 - e)
    if name == "nnpue":
        pu, ee = s == PU, s == E
        pos = gmean(w * l1(z), pu) + gmean(a * l1(z), ee)
        neg = gmean((1 - w) * l0(z), pu) - gmean(a * l0(z), ee)
        return pos, neg, 0.0
    if name in ("nnpe", "fpue"):
        pi = opt["prior"]
        p, ee = s == P, s == E
        un = ee if name == "nnpe" else (ee | (s == U))
        pos = pi * gmean(l1(z), p)
        neg = gmean(l0(z), un) - pi * gmean(l0(z), p)
        c = gmean(a * l1(z), ee) - gmean(a * l0(z), ee)
        return pos, neg, c
    if name == "ads":
        m = (s == SSE) & (e == 1)
        return gmean(w * l1(z), m), gmean((1 - w) * l0(z), m), 0.0
    if name == "adss":
        m = s == SSE
        return (gmean(w * l1(z) + a * l1(z), m),
                gmean((1 - w) * l0(z) - a * l0(z), m), 0.0)
    if name == "double_adss":
        al = opt["alpha"]
        ss, ll = parts("adss", y, z, dagger), parts("ads", y, z, dagger)
        return al * ss[0] + (1 - al) * ll[0], al * ss[1] + (1 - al) * ll[1], 0.0
    if name == "ad3se":
        pooled, sse = (s == SSE) | (s == PU), s == SSE
        pos = gmean(w * l1(z), pooled) + gmean(a * l1(z), sse)
        neg = gmean((1 - w) * l0(z), pooled) - gmean(a * l0(z), sse)
        return pos, neg, 0.0
    if name == "logit":
        m = (s == PU) | (s == SSE)
        return gmean(w * l1(z), m), gmean((1 - w) * l0(z), m), 0.0
    if name in ("upu", "nnpu"):
        pi = opt["prior"]
        pm = (s == P) | ((s == PU) & (w == 1))
        um = (s == U) | (s == PU)
        if opt.get("surrogate", "logistic") == "sigmoid":  # Kiryo et al.: l(z, t) = sig(-t z)
            pos_l, neg_l = sig(-z), sig(z)
        else:
            pos_l, neg_l = l1(z), l0(z)
        return pi * gmean(pos_l, pm), gmean(neg_l, um) - pi * gmean(neg_l, pm), 0.0
    if name == "pnu":
        pi, eta = opt["prior"], opt["eta"]
        sse = s == SSE
        pm, nm = sse & (w == 1), sse & (e == 1) & (w == 0)
        r_pn = (pi * gmean(l1(z), pm), (1 - pi) * gmean(l0(z), nm))
        if eta >= 0:
            r_o = (pi * gmean(l1(z), pm), gmean(l0(z), sse) - pi * gmean(l0(z), pm))
            k = 1 - eta
        else:
            r_o = (gmean(l1(z), sse) - (1 - pi) * gmean(l1(z), nm),
                   (1 - pi) * gmean(l0(z), nm))
            k = 1 + eta
        return k * r_pn[0] + (1 - k) * r_o[0], k * r_pn[1] + (1 - k) * r_o[1], 0.0
    raise KeyError(name)


CORRECTED = {"nnpue", "nnpe", "fpue", "nnpu", "ad3se"}


def value(name, y, z, dagger=None, **opt):
    """(risk, R+, R-, fired) as the reported values."""
    beta = opt.get("beta", 0.0)
    nn = opt.get("non_negative", True) and name in CORRECTED
    if name == "ad3se":
        pos, neg, _ = parts("ad3se", y, z, dagger)
        fired = nn and neg < -beta
        r3 = pos - beta if fired else pos + neg
        lp, ln, _ = parts("ads", y, z, dagger)
        al = opt["alpha"]
        return al * r3 + (1 - al) * (lp + ln), pos, neg, float(fired)
    pos, neg, c = parts(name, y, z, dagger, **opt)
    fired = nn and neg < -beta
    risk = (pos - beta if fired else pos + neg) + c
    return risk, pos, neg, float(fired)


def objective(name, y, z, dagger, **opt):
    """The function whose gradient a step takes (dagger held fixed if given)."""
    beta, gamma = opt.get("beta", 0.0), opt.get("gamma")
    nn = opt.get("non_negative", True) and name in CORRECTED
    if name == "ad3se":
        pos, neg, _ = parts("ad3se", y, z, dagger)
        lp, ln, _ = parts("ads", y, z, dagger)
        al = opt["alpha"]
        if nn and neg < -beta:
            r3 = pos if gamma is None else -gamma * neg
        else:
            r3 = pos + neg
        return al * r3 + (1 - al) * (lp + ln)
    pos, neg, c = parts(name, y, z, dagger, **opt)
    if nn and neg < -beta:
        return pos + c if gamma is None else -gamma * neg
    return pos + neg + c


def num_grad(fn, z, h=1e-5):
    """Central finite differences of a scalar function of z (float64)."""
    z = np.asarray(z, np.float64).reshape(-1)
    g = np.zeros_like(z)
    for i in range(len(z)):
        zp, zm = z.copy(), z.copy()
        zp[i] += h
        zm[i] -= h
        g[i] = (fn(zp) - fn(zm)) / (2 * h)
    return g
