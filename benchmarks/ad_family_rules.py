"""Study: Y-free rules for fit_pue's choice, measured offline on the ad-log family.

Not a change to the library: this script only calls the public ``adp.fit_pue``
and reads its held-out split back. Two stages.

``run``: for each log and seed, draw the rows (``benchmarks.ad_family.draw``),
call ``adp.fit_pue(..., candidates="all")`` once, rebuild its single held-out
split (``adpue_tf.recommend.fit.split_rows(n_pu, n_e, seed, 0.2)``: part
0 held out; ``fit.candidates[name]`` were trained on the other rows only) and
take fit_pue's own ``θ̂`` (the ``theta`` net inside the ``ratio`` composite,
trained on the training E rows). Save, per (log, seed), an ``.npz`` with the
held-out ``W``, ``E``, ``θ̂`` and every candidate's logits on the held-out PU
and E rows and on fresh test rows, the true ``p`` and ``θ`` of the test rows,
and the refitted model's test logits.

``analyse``: from the ``.npz`` files (no training), compute for every
candidate, for Y-free corrections of it, and for Y-free constants: Y-free
held-out scores and the test metrics against the true ``p`` (MAE, KL(p‖p̂),
mean p̂); evaluate selection rules; compare with the family's targets
(``ad_family.meets_target``) computed from a JSON run of ``benchmarks.ad_family``
(bce, ips, adpue and const_snips, same seeds and sizes); write every record to
a JSON.

``refit``: bce_w refitted on all rows (``fit_pue(candidates=["bce_w"])``), so
that a correction reading bce_w can also be measured on the model fit_pue
returns (its refitted choice). ``tabular``: the same records on
``synthetic_pue`` (known p) and semi-synthetic LIBSVM sets (truth: Y only).

Findings (14 logs x 3 seeds, 20k/20k rows, 10 epochs): see the
commit message; the proposed rule is ``today_mid_guard`` in :data:`RULES`.

Usage (each stage writes under --dir; nothing is committed)::

    python -m benchmarks.ad_family --json /tmp/adf/full.json       # the baselines (37 min)
    python -m benchmarks.ad_family_rules run --logs <14 logs> --seeds 3 --dir /tmp/adf_rules
    python -m benchmarks.ad_family_rules refit --dir /tmp/adf_rules
    python -m benchmarks.ad_family_rules tabular --seeds 3 --dir /tmp/adf_rules_tab
    python -m benchmarks.ad_family_rules tabular --settings german:0.5,w8a:0.3 --seeds 3 \
        --dir /tmp/adf_rules_tab
    python -m benchmarks.ad_family_rules analyse --dir /tmp/adf_rules --baseline /tmp/adf/full.json \
        --dev reference,users_15k,base_1pct,rare_40,link_negative,cloglog,linear_net
    python -m benchmarks.ad_family_rules analyse --dir /tmp/adf_rules_tab --baseline "" \
        --json /tmp/adf_rules/records_tab.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np

CLIP = 0.05  # the clip of θ̂ in every IPS weight (as IPSLoss and snips_mean)
EPS = 1e-7
DEV = ("reference", "users_15k", "base_1pct", "rare_40", "link_negative", "cloglog", "linear_net")
SLACK = 0.002


# -- run ------------------------------------------------------------------------------------
def _logits(model: Any, x: dict, batch_size: int = 8192) -> np.ndarray:
    import tensorflow as tf
    if isinstance(x, dict):
        x = tf.data.Dataset.from_tensor_slices(dict(x)).batch(batch_size)
        return np.asarray(model.predict(x, verbose=0), np.float64).ravel()
    return np.asarray(model.predict(x, batch_size=batch_size, verbose=0), np.float64).ravel()


def _theta_net(fit: Any, x: dict) -> Any:
    """fit_pue's own θ̂ (logits): the net of the ``ratio`` composite that is not ``bce_w``."""
    import keras
    ratio = fit.candidates["ratio"]
    subs = [layer for layer in ratio.layers if isinstance(layer, keras.Model)]
    ref = _logits(fit.candidates["bce_w"], x)
    dists = [np.abs(_logits(s, x) - ref).max() for s in subs]
    if len(subs) != 2 or min(dists) > 1e-4:
        raise RuntimeError(f"cannot find θ̂ in the ratio composite ({len(subs)} nets, {dists})")
    return subs[int(np.argmax(dists))]


def _take(x: Any, idx: np.ndarray) -> Any:
    return {k: v[idx] for k, v in x.items()} if isinstance(x, dict) else x[idx]


def study_one(path: Path, build: Any, x_pu: Any, w: np.ndarray, x_e: Any, e: np.ndarray,
              x_test: Any, p_test: np.ndarray, theta_test: np.ndarray, p_pu_mean: float, *,
              seed: int, epochs: int, batch_size: int, meta: dict[str, Any]) -> dict[str, Any]:
    """One fit_pue(candidates="all") call; every candidate's logits where the rules need them."""
    import adpue_tf as adp
    from adpue_tf.recommend.fit import split_rows

    t0 = time.perf_counter()
    fit = adp.fit_pue(build, x_pu, w, x_e, e, candidates="all", epochs=epochs,
                      batch_size=batch_size, verbose=0, seed=seed)
    pu_fold, e_fold = split_rows(len(w), len(e), seed, 0.2)
    hp, he = np.flatnonzero(pu_fold == 0), np.flatnonzero(e_fold == 0)
    tp, te = np.flatnonzero(pu_fold != 0), np.flatnonzero(e_fold != 0)
    assert len(hp) == fit.rows["pu_held_out"] and len(he) == fit.rows["e_held_out"]
    xs = {"ho_pu": _take(x_pu, hp), "ho_e": _take(x_e, he), "tr_pu": _take(x_pu, tp),
          "tr_e": _take(x_e, te), "test": x_test}
    theta = _theta_net(fit, xs["ho_pu"])
    arr: dict[str, Any] = {
        "w_ho": w[hp], "e_ho": e[he], "w_tr": w[tp], "e_tr": e[te], "p_test": p_test,
        "theta_test": theta_test, "p_pu_mean": float(p_pu_mean),
        "refit_test": _logits(fit.model, x_test)}
    for part, x in xs.items():
        arr[f"theta__{part}"] = _logits(theta, x)
    names = sorted(fit.candidates)
    for c in names:
        for part in ("ho_pu", "ho_e", "test"):
            arr[f"z__{c}__{part}"] = _logits(fit.candidates[c], xs[part])
    meta = {**meta, "seed": seed, "choice": fit.choice, "candidates": names,
            "failed": {k: str(v) for k, v in fit.failed.items()},
            "scores": {k: float(v) for k, v in fit.scores.items()},
            "epochs": {k: int(v) for k, v in fit.epochs.items()},
            "seconds": time.perf_counter() - t0, "epochs_max": epochs}
    arr["meta"] = json.dumps(meta)
    np.savez_compressed(path, **arr)
    print(f"{meta['log']} seed {seed}: choice {fit.choice}, failed {sorted(fit.failed)}, "
          f"{meta['seconds']:.0f} s", flush=True)
    return meta


def run(args: argparse.Namespace) -> None:
    from adpue_tf.synthetic import ad_log_family
    from benchmarks.ad_family import build_net, draw

    family = ad_log_family()
    out = Path(args.dir)
    out.mkdir(parents=True, exist_ok=True)
    for name in args.logs.split(","):
        log = family[name]
        for seed in range(args.seed0, args.seed0 + args.seeds):
            path = out / f"{name}__{seed}.npz"
            if path.exists():
                continue
            d = draw(log, seed, args.rows, args.test_rows)
            study_one(path, lambda log=log: build_net(log.config, log.net), d.pu, d.w, d.ex, d.e,
                      d.test, d.truth["p_y"], d.truth["theta"], float(d.p_pu.mean()),
                      seed=seed, epochs=args.epochs, batch_size=args.batch_size,
                      meta={"log": name, "rows": args.rows, "test_rows": args.test_rows})


def refit_bce(args: argparse.Namespace) -> None:
    """bce_w refitted on all rows as fit_pue refits it (``candidates=["bce_w"]``), test logits.

    Lets the analysis apply a correction that reads bce_w to the refitted model
    (``fit.model``), as fit_pue would return it, not only to the training-part models.
    """
    import adpue_tf as adp
    from adpue_tf.synthetic import ad_log_family
    from benchmarks.ad_family import build_net, draw

    family = ad_log_family()
    for npz in sorted(Path(args.dir).glob("*__*.npz")):
        if npz.name.startswith("bce_refit__"):
            continue
        out = npz.with_name("bce_refit__" + npz.name)
        meta = json.loads(str(np.load(npz)["meta"]))
        if out.exists() or meta["log"] not in family:
            continue
        log, seed = family[meta["log"]], meta["seed"]
        d = draw(log, seed, meta["rows"], meta["test_rows"])
        t0 = time.perf_counter()
        fit = adp.fit_pue(lambda log=log: build_net(log.config, log.net), d.pu, d.w, d.ex, d.e,
                          candidates=["bce_w"], epochs=meta["epochs_max"],
                          batch_size=args.batch_size, verbose=0, seed=seed)
        np.savez_compressed(out, test=_logits(fit.model, d.test))
        print(f"{meta['log']} seed {seed}: bce_w refit, {time.perf_counter() - t0:.0f} s",
              flush=True)


def tabular(args: argparse.Namespace) -> None:
    """The tabular check: synthetic_pue (known p, linear net) and LIBSVM sets (semi-synthetic).

    On the LIBSVM sets the truth is only ``Y``: ``p_test`` holds the test labels, so
    the analysis' "MAE" is the mean |p̂ - Y|, its "KL" the log-loss on Y, and ``acc``
    the accuracy at 0.5 (Table 1's measure).
    """
    import keras

    import adpue_tf as adp
    from adpue_tf.experiments.datasets import load
    from adpue_tf.experiments.simulate import simulate_pue

    out = Path(args.dir)
    out.mkdir(parents=True, exist_ok=True)
    for setting in args.settings.split(","):
        for seed in range(args.seeds):
            path = out / f"{setting}__{seed}.npz"
            if path.exists():
                continue
            if setting.startswith("synthetic"):
                mech = "cloglog" if setting.endswith("cloglog") else "logistic"
                s = adp.synthetic.synthetic_pue(args.n, args.n, dim=2, seed=seed, exposure=mech)
                t = adp.synthetic.synthetic_pue(args.test_rows, 2, dim=2, seed=seed + 1000,
                                                exposure=mech)
                xp, w, xe, e = s.x_pu, s.w_pu, s.x_e, s.e_e
                xt, pt, tt, pm = t.x_pu, t.p_y_pu, t.p_w_pu / np.maximum(t.p_y_pu, 1e-12), s.p_y_pu.mean()
            else:  # name[:rate], e.g. australian:0.5
                name, _, rate = setting.partition(":")
                ds = load(name, data_dir=os.environ.get("ADPUE_DATA_DIR", "../shared/data/libsvm"))
                sp = simulate_pue(ds.x, ds.y, exposure_rate=float(rate or 0.5), split=0.5,
                                  n_test=min(len(ds.y) // 3, 2000), seed=seed)
                xp, w, xe, e = sp.x_pu, sp.w_pu, sp.x_e, sp.e_e
                xt, pt, tt, pm = sp.x_test, sp.y_test, np.full(len(sp.y_test), np.nan), \
                    float(sp.y_pu.mean())
            dim = xp.shape[1]

            def build(dim: int = dim) -> keras.Model:
                return keras.Sequential([keras.Input((dim,)), keras.layers.Dense(1)])
            study_one(path, build, xp.astype(np.float32), w.astype(np.float32),
                      xe.astype(np.float32), e.astype(np.float32), xt.astype(np.float32),
                      np.asarray(pt, np.float64), np.asarray(tt, np.float64), pm, seed=seed,
                      epochs=args.epochs, batch_size=args.batch_size,
                      meta={"log": setting, "rows": int(len(w)), "test_rows": int(len(pt))})


# -- analyse ----------------------------------------------------------------------------------
def sig(z: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-z))


def logit(p: np.ndarray | float) -> np.ndarray:
    p = np.clip(p, EPS, 1 - EPS)
    return np.log(p) - np.log1p(-p)


def metrics(p_hat: np.ndarray, p: np.ndarray) -> dict[str, float]:
    """MAE, KL(p‖p̂) and mean p̂ against the true p (clipping as ads_scale_methods.scores)."""
    q = np.clip(p_hat, EPS, 1 - EPS)
    pc = np.clip(p, EPS, 1 - EPS)
    kl = pc * np.log(pc / q) + (1 - pc) * np.log((1 - pc) / (1 - q))
    return {"mae": float(np.mean(np.abs(q - p))), "kl": float(np.mean(kl)),
            "mean_pred": float(np.mean(q)),
            # accuracy on Y where p holds labels; agreement with the Bayes classifier otherwise
            "acc": float(np.mean((q > 0.5) == (p > 0.5)))}


def shift_to(z: np.ndarray, target: float) -> float:
    """The logit offset b with mean σ(z + b) = target (bisection)."""
    lo, hi = -20.0, 20.0
    for _ in range(60):
        mid = (lo + hi) / 2
        if np.mean(sig(z + mid)) < target:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def y_free_scores(f_pu: np.ndarray, f_e: np.ndarray, w: np.ndarray, e: np.ndarray,
                  th_pu: np.ndarray, th_e: np.ndarray, snips: float) -> dict[str, float]:
    """Held-out scores that read no Y (lower is better, except none)."""
    f_pu = np.clip(f_pu, EPS, 1 - EPS)
    f_e = np.clip(f_e, EPS, 1 - EPS)
    thc = np.clip(th_pu, CLIP, 1.0)
    thc_e = np.clip(th_e, CLIP, 1.0)
    r = w / thc  # IPS label, E[r|x] = p·θ/θ̂c
    norm = float(np.mean(e / thc_e))  # E[θ/θ̂c]: 1 when θ̂ is right and nothing is clipped
    rn = r / norm
    q = np.clip(f_pu * th_pu, EPS, 1 - EPS)
    return {
        "brier": float(np.mean(e * f_e ** 2) - 2 * np.mean(w * f_pu)),
        "nll": float(-np.mean(w * np.log(q) + (1 - w) * np.log1p(-q))),
        "ips_ll": float(np.mean(-r * np.log(f_pu) - (1 - r) * np.log1p(-f_pu))),
        "snips_ll": float(np.mean(-rn * np.log(f_pu) - (1 - rn) * np.log1p(-f_pu))),
        "ips_sq": float(np.mean(f_pu ** 2 - 2 * r * f_pu)),
        "snips_sq": float(np.mean(f_pu ** 2 - 2 * rn * f_pu)),
        "cal_gap": float(abs(np.mean(f_pu) - snips)),
        "mean_f_ho": float(np.mean(f_pu)),
        # the sign of the exposure-conversion link the model resolves (not a loss)
        "corr_theta": float(np.corrcoef(logit(th_pu), logit(f_pu))[0, 1])
        if np.std(f_pu) > 0 and np.std(th_pu) > 0 else 0.0,
    }


def records_for(npz: Path) -> dict[str, Any]:
    """Every variant of every candidate of one (log, seed): Y-free scores and test metrics."""
    a = np.load(npz)
    meta = json.loads(str(a["meta"]))
    w, e = a["w_ho"].astype(np.float64), a["e_ho"].astype(np.float64)
    th_pu, th_e = sig(a["theta__ho_pu"]), sig(a["theta__ho_e"])
    p = a["p_test"]
    # Y-free constants, from the training rows (θ̂ was trained there) and the held-out rows
    w_all = np.concatenate([a["w_tr"], a["w_ho"]]).astype(np.float64)
    e_all = np.concatenate([a["e_tr"], a["e_ho"]]).astype(np.float64)
    th_pu_all = sig(np.concatenate([a["theta__tr_pu"], a["theta__ho_pu"]]))
    th_e_all = sig(np.concatenate([a["theta__tr_e"], a["theta__ho_e"]]))
    snips = float(np.mean(w_all / np.clip(th_pu_all, CLIP, 1)) /
                  np.mean(e_all / np.clip(th_e_all, CLIP, 1)))
    naive = float(w_all.mean() / e_all.mean())
    # the same with the denominator on the held-out E rows only: θ̂ was fitted on the
    # training E rows, where it is over-confident (E/θ̂ too small there: the mean of
    # E/θ̂ is about 0.7 in-sample against about 1.0 held out), which biases snips up
    snips_ho = float(np.mean(w_all / np.clip(th_pu_all, CLIP, 1)) /
                     np.mean(e / np.clip(th_e, CLIP, 1)))
    variants: dict[str, dict[str, Any]] = {}

    def add(name: str, z_pu: np.ndarray, z_e: np.ndarray, z_test: np.ndarray, **info: Any) -> None:
        f_pu, f_e = sig(z_pu), sig(z_e)
        variants[name] = {"scores": y_free_scores(f_pu, f_e, w, e, th_pu, th_e, snips),
                          "test": metrics(sig(z_test), p), **info}

    n_test = len(p)
    for c in meta["candidates"]:
        z = {part: a[f"z__{c}__{part}"] for part in ("ho_pu", "ho_e", "test")}
        if not all(np.isfinite(v).all() for v in z.values()):
            continue
        add(c, z["ho_pu"], z["ho_e"], z["test"], base=c, kind="candidate")
        # mean shift: a logit offset so that the mean over the held-out PU rows is the SNIPS mean
        b = shift_to(z["ho_pu"], snips)
        add(c + "@shift", z["ho_pu"] + b, z["ho_e"] + b, z["test"] + b, base=c, kind="shift",
            offset=b)
        # half-way shift (towards the SNIPS mean in logit space)
        b_ho = shift_to(z["ho_pu"], snips_ho)
        add(c + "@shift_ho", z["ho_pu"] + b_ho, z["ho_e"] + b_ho, z["test"] + b_ho, base=c,
            kind="shift_ho", offset=b_ho)
        # one-sided: shift down to snips_ho only when the mean is above it
        b_cap = min(b_ho, 0.0)
        add(c + "@cap_ho", z["ho_pu"] + b_cap, z["ho_e"] + b_cap, z["test"] + b_cap, base=c,
            kind="cap_ho", offset=b_cap)
        if "bce_w" in meta["candidates"] and c != "bce_w":
            zq = {part: a[f"z__bce_w__{part}"] for part in ("ho_pu", "ho_e", "test")}
            add(c + "@mid_bce", *((z[k] + zq[k]) / 2 for k in ("ho_pu", "ho_e", "test")),
                base=c, kind="mid_bce")
        add(c + "@shift_half", z["ho_pu"] + b / 2, z["ho_e"] + b / 2, z["test"] + b / 2,
            base=c, kind="shift_half", offset=b / 2)
    bce_refit = npz.with_name("bce_refit__" + npz.name)
    if bce_refit.exists() and meta["choice"] in meta["candidates"]:
        # fit_pue's returned model (its choice refitted on all rows) and the same
        # averaged with bce_w refitted on all rows; held-out scores are the choice's
        zr, zb = a["refit_test"], np.load(bce_refit)["test"]
        c = meta["choice"]
        mixes = [("refit", zr), ("refit@mid_bce", (zr + zb) / 2)]
        mixes += [(f"refit@share{share:.2f}", (1 - share) * zr + share * zb)
                  for share in SHARES]
        for name, zt in mixes:
            variants[name] = {"scores": dict(variants[c]["scores"]), "test": metrics(sig(zt), p),
                              "base": c, "kind": "refit"}
    for cname, v in (("const_snips", snips), ("const_naive", naive), ("const_snips_ho", snips_ho)):
        zc = float(logit(v))
        add(cname, np.full(len(w), zc), np.full(len(e), zc), np.full(n_test, zc), base=cname,
            kind="constant")
    # Y-free resolution: fit_pue's own skill (the share of the constant mean(W)/mean(E)'s
    # exposure-weighted Brier score against Y that a model removes)
    from adpue_tf.recommend.rule import skill
    for v in variants.values():
        v["scores"]["skill"] = skill(v["scores"]["brier"], float(np.mean(w)), float(np.mean(e)),
                                     naive)
    if "refit" in variants:  # bce_w's share falling with the choice's skill: 1/3 at 0, 0 at the guard
        share = max(0.0, 1.0 - variants["refit"]["scores"]["skill"] / SKILL_GUARD) / 3
        zt = (1 - share) * zr + share * zb
        variants["refit@share_linear"] = {**variants["refit"], "test": metrics(sig(zt), p)}
    rec = {"log": meta["log"], "seed": meta["seed"], "choice": meta["choice"],
           "failed": meta["failed"], "fit_scores": meta["scores"], "fit_epochs": meta["epochs"],
           "seconds": meta["seconds"], "snips": snips, "naive": naive, "snips_ho": snips_ho,
           "mean_p_test": float(p.mean()), "p_pu_mean": float(a["p_pu_mean"]),
           "theta_mae_test": float(np.mean(np.abs(sig(a["theta__test"]) - a["theta_test"])))
           if np.isfinite(a["theta_test"]).all() else None,
           "low_theta_hat_share_ho": float(np.mean(th_pu < CLIP)),
           "refit": metrics(sig(a["refit_test"]), p), "variants": variants}
    return rec


# rules: (name, description, function(rec) -> variant name)
def _argmin(rec: dict, score: str, kinds: Sequence[str], exclude: Sequence[str] = ()) -> str:
    vs = {n: v for n, v in rec["variants"].items() if v["kind"] in kinds and n not in exclude}
    return min(vs, key=lambda n: vs[n]["scores"][score])


def _today(rec: dict) -> str:
    return rec["choice"] if rec["choice"] in rec["variants"] else "blend"


#: Below this Y-free skill (see records_for) a model is taken as one that cannot resolve p.
SKILL_GUARD = 0.15
#: bce_w's shares of the logit tried for fit_pue's hedge (refit variants ``refit@share0.33``, ...).
SHARES = (0.25, 1 / 3, 0.5)


def _hedged(rec: dict, variant: str) -> str:
    """The refitted choice, or ``variant`` of it where the choice's skill is below the guard."""
    if "refit" not in rec["variants"]:
        return "?"
    low = rec["variants"][_today(rec)]["scores"]["skill"] < SKILL_GUARD and _today(rec) != "bce_w"
    return variant if low else "refit"


def _mid_guard(rec: dict, choice: str, guard: float = SKILL_GUARD) -> str:
    """``choice``, or its logits averaged with bce_w's where its Y-free skill is below ``guard``."""
    if choice == "bce_w" or choice + "@mid_bce" not in rec["variants"]:
        return choice
    low = rec["variants"][choice]["scores"]["skill"] < guard
    return choice + "@mid_bce" if low else choice


RULES: dict[str, tuple[str, Any]] = {
    "mid_guard": ("argmin exposure Brier over every candidate; where its skill < SKILL_GUARD, "
                  "its logits averaged with bce_w's",
                  lambda r: _mid_guard(r, _argmin(r, "brier", ("candidate",)))),
    "today_mid_guard": ("fit_pue's choice; where its skill < SKILL_GUARD, logits averaged with "
                        "bce_w's", lambda r: _mid_guard(r, _today(r))),
    "today_all": ("fit_pue's own choice with candidates='all' (model of the training part)",
                  _today),
    "today_shift": ("fit_pue's choice, its logits shifted so the held-out PU mean is the SNIPS mean",
                    lambda r: _today(r) + "@shift"),
    "blend": ("always blend (training part)", lambda r: "blend"),
    "blend_shift": ("blend shifted to the SNIPS mean", lambda r: "blend@shift"),
    "bce_w": ("always bce_w (training part)", lambda r: "bce_w"),
    "ips_ll": ("argmin held-out IPS log-loss over the candidates and const_snips",
               lambda r: _argmin(r, "ips_ll", ("candidate", "constant"))),
    "snips_ll": ("argmin held-out SNIPS-normalised log-loss over candidates and const_snips",
                 lambda r: _argmin(r, "snips_ll", ("candidate", "constant"))),
    "ips_sq": ("argmin held-out IPS squared error over candidates and constants",
               lambda r: _argmin(r, "ips_sq", ("candidate", "constant"))),
    "ips_ll+shift": ("argmin IPS log-loss over candidates, their shifts and constants",
                     lambda r: _argmin(r, "ips_ll", ("candidate", "shift", "constant"))),
    "snips_ll+shift": ("argmin SNIPS log-loss over candidates, their shifts and constants",
                       lambda r: _argmin(r, "snips_ll", ("candidate", "shift", "constant"))),
    "snips_ll+shifts": ("argmin SNIPS log-loss over candidates, shifts, half shifts, constants",
                        lambda r: _argmin(r, "snips_ll", ("candidate", "shift", "shift_half",
                                                          "constant"))),
    "shift_only_ll": ("argmin SNIPS log-loss over the shifted candidates and const_snips",
                      lambda r: _argmin(r, "snips_ll", ("shift", "constant"))),
    "shift_only_sq": ("argmin SNIPS squared error over the shifted candidates and const_snips",
                      lambda r: _argmin(r, "snips_sq", ("shift", "constant"))),
    "brier_all": ("argmin exposure Brier over every candidate (no preference for blend)",
                  lambda r: _argmin(r, "brier", ("candidate",))),
    "brier_all+cap": ("argmin exposure Brier over every candidate, then capped at snips_ho",
                      lambda r: _argmin(r, "brier", ("candidate",)) + "@cap_ho"),
    "today_cap": ("fit_pue's choice capped at snips_ho (shifted down only)",
                  lambda r: _today(r) + "@cap_ho"),
    "today_shift_ho": ("fit_pue's choice shifted to snips_ho", lambda r: _today(r) + "@shift_ho"),
    "today_mid_bce": ("fit_pue's choice, logits averaged with bce_w's",
                      lambda r: _today(r) + ("@mid_bce" if _today(r) != "bce_w" else "")),
    "brier_all_mid": ("Brier argmin, logits averaged with bce_w's",
                      lambda r: (lambda c: c + ("@mid_bce" if c != "bce_w" else ""))(
                          _argmin(r, "brier", ("candidate",)))),
    "snips_ll_ho": ("argmin SNIPS log-loss over candidates, shifts to snips_ho, const_snips_ho",
                    lambda r: _argmin(r, "snips_ll", ("candidate", "shift_ho", "constant"),
                                      exclude=("const_snips", "const_naive"))),
    "adpue_rounds": ("always adpue_rounds", lambda r: "adpue_rounds"),
    "refit_mid_guard": ("as today_mid_guard on the models fit_pue returns: its refitted "
                        "choice, averaged with bce_w refitted where the choice's skill < "
                        "SKILL_GUARD", lambda r: ("refit@mid_bce" if r["variants"][_today(r)][
                            "scores"]["skill"] < SKILL_GUARD and _today(r) != "bce_w"
                            else "refit") if "refit" in r["variants"] else "?"),
    **{f"refit_hedge{share:.2f}": (f"the refitted choice; where its skill < SKILL_GUARD, "
                                   f"bce_w (refitted) takes {share:.2f} of the logit",
                                   lambda r, v=f"refit@share{share:.2f}": _hedged(r, v))
       for share in SHARES},
    "refit_hedge_linear": ("the refitted choice, bce_w taking (1/3)·max(0, 1 − skill/SKILL_GUARD) "
                           "of the logit", lambda r: _hedged(r, "refit@share_linear")),
    "refit_all": ("fit_pue(candidates='all')'s returned model (refitted choice)",
                  lambda r: "refit" if "refit" in r["variants"] else "?"),
    "brier+shift": ("argmin exposure Brier over the shifted candidates",
                    lambda r: _argmin(r, "brier", ("shift",))),
    "nll+shift": ("argmin exposure NLL over the shifted candidates",
                  lambda r: _argmin(r, "nll", ("shift",))),
}


def analyse(args: argparse.Namespace) -> None:
    recs = [records_for(p) for p in sorted(Path(args.dir).glob("*.npz"))
            if not p.name.startswith("bce_refit__")]
    if args.only:
        recs = [r for r in recs if r["log"] in args.only.split(",")]
    base = json.loads(Path(args.baseline).read_text()) if args.baseline else []
    bl = {(r["log"], r["seed"]): r["methods"] for r in base}
    dev = set(args.dev.split(","))
    for r in recs:
        r["rules"] = {k: {"pick": f(r), **r["variants"][f(r)]["test"]}
                      for k, (_, f) in RULES.items() if f(r) in r["variants"]}
        b = bl.get((r["log"], r["seed"]))
        if b:
            r["baseline"] = {m: {k: b[m][k] for k in ("mae", "kl", "mean_pred")} | (
                {"choice": b[m]["choice"]} if m == "fit_pue" else {}) for m in b}
    Path(args.json).write_text(json.dumps(recs, indent=1))
    logs = list(dict.fromkeys(r["log"] for r in recs))
    rules = args.rules.split(",") if args.rules else list(RULES)
    lines = []
    met_count = {k: [0, 0] for k in ["fit_pue(json)", *rules]}
    for log in logs:
        rs = [r for r in recs if r["log"] == log and "baseline" in r]
        if not rs:
            continue
        mean = lambda xs: float(np.mean(xs))  # noqa: E731
        bm = {m: {k: mean([r["baseline"][m][k] for r in rs]) for k in ("mae", "kl", "mean_pred")}
              for m in ("bce", "ips", "adpue", "const_snips", "fit_pue")}
        kl_t = min(bm[m]["kl"] for m in ("bce", "ips", "adpue")) + SLACK
        mae_t = min(bm[m]["mae"] for m in ("bce", "const_snips")) + SLACK
        tag = "dev" if log in dev else "held-out"
        mp = mean([r["mean_p_test"] for r in rs])
        lines.append(f"\n### {log} ({tag}; seeds {[r['seed'] for r in rs]}; mean p {mp:.4f}; "
                     f"targets MAE ≤ {mae_t:.4f}, KL ≤ {kl_t:.4f})")
        lines.append(f"{'rule':16s} {'MAE':>7s} {'KL':>7s} {'mean p̂':>7s}  met  picks")
        rows = [("fit_pue(json)", bm["fit_pue"], [r["baseline"]["fit_pue"]["choice"] for r in rs])]
        for k in [k for k in rules if all(k in r["rules"] for r in rs)]:
            rows.append((k, {m: mean([r["rules"][k][m] for r in rs]) for m in
                             ("mae", "kl", "mean_pred")}, [r["rules"][k]["pick"] for r in rs]))
        for k, v, picks in rows:
            ok_m, ok_k = v["mae"] <= mae_t, v["kl"] <= kl_t
            met_count[k][0 if tag == "dev" else 1] += ok_m and ok_k
            lines.append(f"{k:16s} {v['mae']:7.4f} {v['kl']:7.4f} {v['mean_pred']:7.4f}  "
                         f"{'M' if ok_m else '-'}{'K' if ok_k else '-'}   {', '.join(picks)}")
    # settings without a baseline (the tabular check): the rules against today's refit
    for log in logs:
        rs = [r for r in recs if r["log"] == log and "baseline" not in r]
        if not rs:
            continue
        lines.append(f"\n### {log} (no baseline; seeds {[r['seed'] for r in rs]}; mean p or Y "
                     f"{np.mean([r['mean_p_test'] for r in rs]):.4f})")
        lines.append(f"{'rule':16s} {'MAE':>7s} {'KL':>7s} {'mean p̂':>7s} {'acc':>6s}  picks")
        rows = [("fit_pue refit", {m: float(np.mean([r["refit"][m] for r in rs]))
                                   for m in ("mae", "kl", "mean_pred", "acc")},
                 [r["choice"] for r in rs])]
        for k in rules:
            rows.append((k, {m: float(np.mean([r["rules"][k][m] for r in rs]))
                             for m in ("mae", "kl", "mean_pred", "acc")},
                         [r["rules"][k]["pick"] for r in rs]))
        for k, v, picks in rows:
            lines.append(f"{k:16s} {v['mae']:7.4f} {v['kl']:7.4f} {v['mean_pred']:7.4f} "
                         f"{v['acc']:6.3f}  {', '.join(picks)}")
    lines.append("\n### logs met (dev, held-out)")
    for k, (nd, nh) in met_count.items():
        lines.append(f"{k:16s} {nd} dev, {nh} held-out")
    text = "\n".join(lines)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--logs", default=",".join(DEV))
    r.add_argument("--seeds", type=int, default=2)
    r.add_argument("--seed0", type=int, default=0)
    r.add_argument("--rows", type=int, default=20_000)
    r.add_argument("--test-rows", type=int, default=20_000)
    r.add_argument("--epochs", type=int, default=10)
    r.add_argument("--batch-size", type=int, default=1024)
    r.add_argument("--dir", default="/tmp/adf_rules")
    b = sub.add_parser("refit")
    b.add_argument("--dir", default="/tmp/adf_rules")
    b.add_argument("--batch-size", type=int, default=1024)
    t = sub.add_parser("tabular")
    t.add_argument("--settings", default="synthetic,synthetic_cloglog,australian:0.5,mushrooms:0.3")
    t.add_argument("--seeds", type=int, default=3)
    t.add_argument("--n", type=int, default=2000, help="PU rows and E rows of synthetic_pue")
    t.add_argument("--test-rows", type=int, default=20_000)
    t.add_argument("--epochs", type=int, default=20)
    t.add_argument("--batch-size", type=int, default=256)
    t.add_argument("--dir", default="/tmp/adf_rules_tab")
    s = sub.add_parser("analyse")
    s.add_argument("--dir", default="/tmp/adf_rules")
    s.add_argument("--baseline", default="/tmp/adf/full.json",
                   help="a --json of benchmarks.ad_family at the same sizes and seeds")
    s.add_argument("--dev", default=",".join(DEV))
    s.add_argument("--rules", default="")
    s.add_argument("--only", default="", help="analyse only these logs (e.g. the dev half)")
    s.add_argument("--json", default="/tmp/adf_rules/records.json")
    s.add_argument("--out", default="")
    args = ap.parse_args(sys.argv[1:] if argv is None else argv)
    {"run": run, "refit": refit_bce, "tabular": tabular, "analyse": analyse}[args.cmd](args)


if __name__ == "__main__":
    from adpue_tf.experiments import keep_compiled

    with keep_compiled():  # the loop of fit_pue calls: each step traced once
        main()
