"""Every estimator on every log of a family of simulated ad logs, against the known truth.

The logs are :func:`adpue_tf.synthetic.ad_log_family`: feature dicts (user,
item and category ids, a device string, context floats) whose id cardinality,
base rate, share of rarely shown rows, exposure-conversion link, mechanisms
and net (an embedding net, or a linear one) differ. For each log and seed the
simulator's parameters and rows are drawn from the seed: ``--rows`` PU rows
(``W`` kept), half as many exposure-log rows (``E`` kept) and ``--test-rows``
fresh rows scored against their true ``p(y=1|x)``.

Methods (public API only; one net architecture per log for all of them):

* ``bce``: ``adp.LogitLoss`` (BCE on ``W``); ``ips``: ``adp.IPSLoss(clip=0.05)``
  with ``θ̂``; ``adpue``: ``adp.ADPUELoss``, direct minimisation; each keeps
  its best epoch by ``val_exposure_nll`` on held-out PU/E rows (20 %, no ``Y``).
* ``adpue_alt``: ``adp.DebiasedModel(initial_dagger=0.5)`` + ``adp.RefreshDagger``
  (a refresh per epoch) + ``adp.BestRound`` on the same held-out score.
* ``fit_pue``: ``adp.fit_pue`` on all PU and E rows, defaults but ``epochs`` and
  ``batch_size``.
* ``const_oracle``: the true mean ``p`` (needs ``Y``: a reference, not a method).
* ``const_snips``: :func:`snips_mean`, a constant that needs no ``Y``.

``θ̂`` (for ``ips``, the held-out score and ``const_snips``) is the log's net
trained with BCE on ``E`` of the training exposure rows, best epoch on the
held-out ones. Usage::

    python -m benchmarks.ad_family                          # the whole grid, 3 seeds
    python -m benchmarks.ad_family --logs reference,rare_0 --seeds 1 --rows 4000 --out /tmp/a.md
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras
import numpy as np
import tensorflow as tf

import adpue_tf as adp
from adpue_tf.synthetic import AdFamilyConfig, AdFamilyLog, AdFamilySimulator, ad_log_family
from adpue_tf.synthetic.ad_family import DEVICES
from benchmarks.ads_scale_methods import IPS_CLIP, scores
from benchmarks.common import RESULTS, command_line, fmt, provenance_block, table

__all__ = ["METHODS", "TARGET_SLACK", "build_net", "draw", "main", "meets_target", "report",
           "run_one", "snips_mean"]

METHODS = ("bce", "ips", "adpue", "adpue_alt", "fit_pue", "const_oracle", "const_snips")
DESCRIPTIONS = {
    "bce": "`adp.LogitLoss`: BCE on W",
    "ips": f"`adp.IPSLoss(clip={IPS_CLIP})`, θ̂ the log's net trained with BCE on E",
    "adpue": "`adp.ADPUELoss`, direct minimisation (f† = σ(z) of the same step)",
    "adpue_alt": "`adp.DebiasedModel(initial_dagger=0.5)` + `RefreshDagger` (one round per "
                 "epoch) + `BestRound` (rounds chosen by `val_exposure_nll`, no Y)",
    "fit_pue": "`adp.fit_pue`, defaults except epochs and batch size (its own held-out "
               "choice and refit on all rows)",
    "const_oracle": "a constant at the true mean p of the PU rows (oracle: reads the truth)",
    "const_snips": "a constant at the self-normalised IPS mean (no Y; `snips_mean`)",
}
#: fit_pue meets the target on a log when its seed-mean KL is within this of
#: min(bce, ips, adpue) and its MAE within this of min(bce, const_snips).
TARGET_SLACK = 0.002
#: Share of the PU and E rows held out to choose epochs and rounds (methods other than fit_pue).
HELD_OUT = 0.2


def snips_mean(w: np.ndarray, theta_pu: np.ndarray, e: np.ndarray, theta_e: np.ndarray,
               clip: float = IPS_CLIP) -> float:
    """Self-normalised IPS estimate of the mean ``p(y=1|x)``; reads no ``Y``.

    ``Σ_PU (W/θ̂) / n_PU`` divided by ``Σ_E (E/θ̂) / n_E``, with ``θ̂`` clipped
    to ``[clip, 1]``, both over rows ``θ̂`` was not trained on (on its own
    training rows ``θ̂`` is over-confident and the denominator falls below
    1). Both means estimate the same kind of quantity under the same
    clipping: the numerator ``E[p·θ/θ̂]``, the denominator ``E[θ/θ̂]``
    (1 when ``θ̂ = θ``); their ratio cancels much of the bias the clip causes
    where ``θ < clip``. (Dividing by the PU rows' mean of ``1/θ̂`` instead
    would estimate ``E[p]/E[1/θ]``, not ``E[p]``.)

    Args:
        w: ``W`` of the PU rows, ``(n_pu,)`` in {0, 1}.
        theta_pu: ``θ̂`` of the PU rows, ``(n_pu,)``.
        e: ``E`` of the exposure rows, ``(n_e,)`` in {0, 1}.
        theta_e: ``θ̂`` of the exposure rows, ``(n_e,)``.
        clip: the lower clip of ``θ̂``, in (0, 1].

    Returns:
        The estimate, a float >= 0.

    Raises:
        ValueError: on lengths that differ, an empty log, no exposed row, or
            a ``clip`` outside (0, 1]; each names the argument.

    Example:
        >>> snips_mean(np.array([1, 0, 0, 0]), np.full(4, 0.5), np.array([1, 0]), np.full(2, 0.5))
        0.5
    """
    w, theta_pu, e, theta_e = (np.asarray(a, np.float64).ravel()
                               for a in (w, theta_pu, e, theta_e))
    if not 0.0 < float(clip) <= 1.0:
        raise ValueError(f"`clip` must be in (0, 1], got {clip!r}.")
    for name, a, b in (("theta_pu", theta_pu, w), ("theta_e", theta_e, e)):
        if len(a) != len(b) or len(a) == 0:
            raise ValueError(f"`{name}` must have one value per row ({len(b)}), got {len(a)}.")
    if not e.any():
        raise ValueError("`e` holds no exposed row: the denominator would be 0.")
    num = np.mean(w / np.clip(theta_pu, clip, 1.0))
    den = np.mean(e / np.clip(theta_e, clip, 1.0))
    return float(num / den)


def build_net(config: AdFamilyConfig, kind: str) -> keras.Model:
    """The net of a log, features -> one logit (the caller seeds Keras).

    ``"embedding"``: embeddings of the user and item (8) and category (4),
    the device one-hot, the context, an MLP 32-16 plus the user·item dot
    product. ``"linear"``: a scalar per id (user, item, category), the device
    one-hot and the context into one ``Dense(1)``: additive in the ids,
    linear in the context, so it cannot fit interactions.

    Example:
        >>> build_net(AdFamilyConfig(n_users=5, n_items=4, n_categories=2), "linear").count_params()
        23
    """
    if kind not in ("embedding", "linear"):
        raise ValueError(f"`kind` must be 'embedding' or 'linear', got {kind!r}.")
    inputs = {"user_id": keras.Input((), dtype="int64", name="user_id"),
              "item_id": keras.Input((), dtype="int64", name="item_id"),
              "category_id": keras.Input((), dtype="int64", name="category_id"),
              "device": keras.Input((), dtype="string", name="device"),
              "context": keras.Input((config.context_dim,), dtype="float32", name="context")}
    dims = (1, 1, 1) if kind == "linear" else (8, 8, 4)
    user, item, category = (
        keras.layers.Embedding(n, d)(inputs[k]) for k, n, d in zip(
            ("user_id", "item_id", "category_id"),
            (config.n_users, config.n_items, config.n_categories), dims))
    device = keras.layers.StringLookup(vocabulary=list(DEVICES), output_mode="one_hot")(
        inputs["device"])
    h = keras.layers.Concatenate()([user, item, category, device, inputs["context"]])
    if kind == "linear":
        return keras.Model(inputs, keras.layers.Dense(1)(h))
    h = keras.layers.Dense(16, "relu")(keras.layers.Dense(32, "relu")(h))
    dot = keras.layers.Dot(axes=1)([user, item])
    return keras.Model(inputs, keras.layers.Add()([keras.layers.Dense(1)(h), dot]))


@dataclasses.dataclass
class Draw:
    """One log's rows for one seed: PU, exposure and test rows, the training/held-out split."""

    pu: dict[str, np.ndarray]
    w: np.ndarray
    p_pu: np.ndarray
    ex: dict[str, np.ndarray]
    e: np.ndarray
    test: dict[str, np.ndarray]
    truth: dict[str, np.ndarray]
    n_pu_train: int
    n_e_train: int


def _head(x: Mapping[str, np.ndarray], n: int, *, tail: bool = False) -> dict[str, np.ndarray]:
    return {k: (v[n:] if tail else v[:n]) for k, v in x.items()}


def draw(log: AdFamilyLog, seed: int, rows: int, test_rows: int) -> Draw:
    """The rows of ``log`` for ``seed``: parameters and rows drawn from it.

    Example:
        >>> d = draw(ad_log_family()["users_500"], 0, 100, 50)
        >>> len(d.w), len(d.e), len(d.truth["p_y"]), d.n_pu_train
        (100, 50, 50, 80)
    """
    sim = AdFamilySimulator(log.config, seed=seed)
    pu, ex, test = (sim.sample(n, seed=s) for n, s in ((rows, 1), (max(2, rows // 2), 2),
                                                       (test_rows, 3)))
    return Draw(pu.features, pu.w, pu.p_y, ex.features, ex.e, test.features,
                {"y": test.y, "p_y": test.p_y, "theta": test.theta},
                int(round(len(pu) * (1 - HELD_OUT))), int(round(len(ex) * (1 - HELD_OUT))))


def _batches(x: Mapping[str, np.ndarray], y: np.ndarray | None = None, *,
             batch_size: int, shuffle_seed: int | None = None) -> tf.data.Dataset:
    """Rows of a feature dict (and labels) as a batched Dataset (Keras cannot take bytes arrays)."""
    ds = tf.data.Dataset.from_tensor_slices(dict(x) if y is None else
                                            (dict(x), y.astype(np.float32)[:, None]))
    if shuffle_seed is not None:
        ds = ds.shuffle(len(next(iter(x.values()))), seed=shuffle_seed)
    return ds.batch(batch_size).prefetch(tf.data.AUTOTUNE)


def _probabilities(model: keras.Model, x: Mapping[str, np.ndarray],
                   batch_size: int = 8192) -> np.ndarray:
    logits = model.predict(_batches(x, batch_size=batch_size), verbose=0)
    return tf.sigmoid(logits).numpy().ravel()


def _fit_theta(d: Draw, make: Callable[[], keras.Model], epochs: int,
               batch_size: int, lr: float) -> keras.Model:
    """``θ̂`` (logits): the log's net, BCE on E of the training exposure rows, best epoch."""
    net = make()
    net.compile(optimizer=keras.optimizers.Adam(lr),
                loss=keras.losses.BinaryCrossentropy(from_logits=True))
    n = d.n_e_train
    net.fit(_batches(_head(d.ex, n), d.e[:n], batch_size=batch_size, shuffle_seed=0),
            validation_data=_batches(_head(d.ex, n, tail=True), d.e[n:], batch_size=8192),
            epochs=epochs, verbose=0, shuffle=False,
            callbacks=[keras.callbacks.EarlyStopping(patience=2, restore_best_weights=True)])
    return net


def _train(method: str, d: Draw, make: Callable[[], keras.Model], theta: keras.Model, *,
           epochs: int, batch_size: int, lr: float, seed: int) -> tuple[keras.Model, dict]:
    """A streamed method trained on the training part, its epoch or round kept by the held-out NLL."""
    np_, ne = d.n_pu_train, d.n_e_train
    train = adp.data.pue_dataset(_head(d.pu, np_), d.w[:np_], _head(d.ex, ne), d.e[:ne],
                                 batch_size=batch_size, seed=seed)
    val = adp.data.with_propensity(adp.data.pue_dataset(
        _head(d.pu, np_, tail=True), d.w[np_:], _head(d.ex, ne, tail=True), d.e[ne:],
        batch_size=min(4 * batch_size, len(d.w) - np_ + len(d.e) - ne), shuffle=False),
        theta, from_logits=True).cache()
    net = make()
    callbacks: list = []
    if method == "bce":
        model, loss = net, adp.LogitLoss(from_logits=True)
    elif method == "ips":
        model, loss = net, adp.IPSLoss(clip=IPS_CLIP, from_logits=True)
        train = adp.data.with_propensity(train, theta, from_logits=True)
    elif method == "adpue":
        model, loss = net, adp.ADPUELoss(from_logits=True)
    elif method == "adpue_alt":
        model, loss = adp.DebiasedModel(net, initial_dagger=0.5), adp.ADPUELoss(from_logits=True)
        best = adp.BestRound(monitor="val_exposure_nll")  # every round scored
        callbacks += [adp.RefreshDagger(every_n_epochs=1), best]
    else:
        raise ValueError(f"`method` must be one of {list(METHODS[:4])}, got {method!r}.")
    if method != "adpue_alt":
        callbacks.append(keras.callbacks.EarlyStopping(
            "val_exposure_nll", mode="min", patience=3, restore_best_weights=True))
    model.compile(optimizer=keras.optimizers.Adam(lr), loss=loss,
                  metrics=[adp.validation.ExposureLikelihood(from_logits=True)])
    history = model.fit(train, validation_data=val, epochs=epochs, callbacks=callbacks,
                        verbose=0, shuffle=False)
    val_nll = [float(v) for v in history.history["val_exposure_nll"]]
    info: dict[str, Any] = {"epochs_run": len(val_nll), "best_val_nll": min(val_nll)}
    if method == "adpue_alt":
        info["best_round"] = best.best_round
        return model.net, info
    info["best_epoch"] = int(np.argmin(val_nll)) + 1
    return model, info


def run_one(log: AdFamilyLog, seed: int, *, rows: int, test_rows: int, epochs: int,
            batch_size: int, lr: float = 0.01,
            methods: Sequence[str] = METHODS) -> dict[str, Any]:
    """Every method of ``methods`` on ``log`` with ``seed``: scores against the truth, seconds."""
    d = draw(log, seed, rows, test_rows)
    counter = iter(range(1000))

    def make() -> keras.Model:  # a fresh, seeded net per method (fit_pue seeds its own)
        keras.utils.set_random_seed(1000 * seed + next(counter))
        return build_net(log.config, log.net)

    out: dict[str, Any] = {"log": log.name, "seed": seed, "rows_pu": len(d.w),
                           "rows_e": len(d.e), "rows_test": len(d.truth["p_y"]),
                           "mean_p_test": float(d.truth["p_y"].mean()),
                           "auc_true_p": scores(d.truth["p_y"], d.truth)["auc"],
                           "share_low_theta_test": float(np.mean(d.truth["theta"] < 0.05)),
                           "w_rate": float(d.w.mean()), "methods": {}}
    start = time.perf_counter()
    theta = _fit_theta(d, make, epochs, batch_size, lr)
    out["theta_mae"] = float(np.abs(_probabilities(theta, d.test)
                                    - d.truth["theta"]).mean())
    out["theta_seconds"] = time.perf_counter() - start
    for method in methods:
        start = time.perf_counter()
        info: dict[str, Any] = {}
        if method in METHODS[:4]:
            model, info = _train(method, d, make, theta, epochs=epochs, batch_size=batch_size,
                                 lr=lr, seed=seed)
            p_hat = _probabilities(model, d.test)
        elif method == "fit_pue":
            fit = adp.fit_pue(lambda: build_net(log.config, log.net), d.pu, d.w, d.ex, d.e,
                              epochs=epochs, batch_size=batch_size, seed=seed, verbose=0)
            p_hat = _probabilities(fit.model, d.test)
            info = {"choice": fit.choice, "failed": sorted(fit.failed), "hedge": fit.hedge_share,
                    "skill": fit.skill}
        elif method == "const_oracle":
            p_hat = np.full(len(d.truth["p_y"]), float(d.p_pu.mean()))
        elif method == "const_snips":
            # θ̂ trained on the first n_e_train E rows, where it is over-confident (E/θ̂
            # averages 0.70-0.79 there, about 1 elsewhere): the denominator reads the others
            n = d.n_e_train
            const = snips_mean(d.w, _probabilities(theta, d.pu), d.e[n:],
                               _probabilities(theta, _head(d.ex, n, tail=True)))
            p_hat = np.full(len(d.truth["p_y"]), const)
        else:
            raise ValueError(f"`methods` must hold names of {list(METHODS)}, got {method!r}.")
        s = scores(p_hat, d.truth)
        out["methods"][method] = {"mae": s["mae"], "kl": s["kl_to_p"], "mean_pred": s["mean_pred"],
                                  "auc": s["auc"], "mae_low_theta": s["mae_rarely_shown"],
                                  "seconds": time.perf_counter() - start, **info}
    return out


def _stat(results: Sequence[dict], method: str, key: str) -> tuple[float, float]:
    """Mean and seed standard deviation (0 with one seed) of a method's ``key``."""
    vals = np.array([r["methods"][method][key] for r in results
                     if method in r["methods"]], np.float64)
    if vals.size == 0:
        return float("nan"), float("nan")
    return float(vals.mean()), float(vals.std(ddof=1)) if vals.size > 1 else 0.0


def _choice(info: dict) -> str:
    """fit_pue's choice as the summary shows it: ``blend`` or, hedged, ``blend+0.33·bce_w``."""
    hedge = info.get("hedge") or 0.0
    return info.get("choice", "?") + (f"+{hedge:.2f}·bce_w" if hedge else "")


def meets_target(results: Sequence[dict]) -> dict[str, Any]:
    """Whether fit_pue meets the target on one log's seeds (means over seeds).

    KL to ``p`` at most ``min(bce, ips, adpue) + TARGET_SLACK``, and MAE at most
    ``min(bce, const_snips) + TARGET_SLACK``.

    Example:
        >>> r = {"methods": {m: {"mae": 0.05, "kl": 0.02} for m in
        ...      ("bce", "ips", "adpue", "const_snips")}}
        >>> r["methods"]["fit_pue"] = {"mae": 0.051, "kl": 0.03}
        >>> t = meets_target([r]); t["mae_met"], t["kl_met"], t["met"]
        (True, False, False)
    """
    mean = {m: _stat(results, m, "mae")[0] for m in METHODS}
    kl = {m: _stat(results, m, "kl")[0] for m in METHODS}
    kl_alt = min(("bce", "ips", "adpue"), key=lambda m: kl[m])
    mae_alt = min(("bce", "const_snips"), key=lambda m: mean[m])
    out = {"fit_pue_mae": mean["fit_pue"], "fit_pue_kl": kl["fit_pue"],
           "mae_alt": mae_alt, "mae_alt_value": mean[mae_alt],
           "kl_alt": kl_alt, "kl_alt_value": kl[kl_alt],
           "mae_met": bool(mean["fit_pue"] <= mean[mae_alt] + TARGET_SLACK),
           "kl_met": bool(kl["fit_pue"] <= kl[kl_alt] + TARGET_SLACK)}
    out["met"] = out["mae_met"] and out["kl_met"]
    return out


def _pm(mean_sd: tuple[float, float], digits: int = 4) -> str:
    return f"{fmt(mean_sd[0], digits)} ± {fmt(mean_sd[1], digits)}"


def report(results: Sequence[dict], family: Mapping[str, AdFamilyLog], provenance: str,
           settings: str) -> str:
    """The Markdown results file: the summary, then a table per log."""
    names = [n for n in family if any(r["log"] == n for r in results)]
    by_log = {n: [r for r in results if r["log"] == n] for n in names}
    summary: list[list[str]] = []
    for n in names:
        rs = by_log[n]
        if not all("fit_pue" in r["methods"] for r in rs):
            continue
        t = meets_target(rs)
        others = [m for m in METHODS if m not in ("fit_pue", "const_oracle")]
        best_mae = min(others, key=lambda m: _stat(rs, m, "mae")[0])
        best_kl = min(others[:4], key=lambda m: _stat(rs, m, "kl")[0])
        summary.append([n, str(len(rs)), fmt(t["fit_pue_mae"]),
                        f"{fmt(t['mae_alt_value'])} ({t['mae_alt']})",
                        "yes" if t["mae_met"] else "no", fmt(t["fit_pue_kl"]),
                        f"{fmt(t['kl_alt_value'])} ({t['kl_alt']})",
                        "yes" if t["kl_met"] else "no", "**met**" if t["met"] else "not met",
                        f"{fmt(_stat(rs, best_mae, 'mae')[0])} ({best_mae})",
                        f"{fmt(_stat(rs, best_kl, 'kl')[0])} ({best_kl})",
                        ", ".join(_choice(r["methods"]["fit_pue"]) for r in rs)])
    met = sum(row[8] == "**met**" for row in summary)
    parts = ["# Every estimator on a family of ad logs", "", provenance,
             (__doc__ or "").split("Usage::")[0].strip(), "", settings, "",
             "## The logs", "",
             table(["log", "net", "what it varies"],
                   [[n, family[n].net, family[n].varies] for n in names]), "",
             "## Summary: does fit_pue meet the target?", "",
             f"Target per log (means over seeds): KL(p‖p̂) ≤ min(bce, ips, adpue) + "
             f"{TARGET_SLACK} and MAE ≤ min(bce, const_snips) + {TARGET_SLACK}. "
             f"Met on {met} of {len(summary)} logs. The last columns: the best method "
             "other than fit_pue and the oracle constant (MAE: any; KL: the trained nets).", "",
             table(["log", "seeds", "fit_pue MAE", "min(bce, const_snips) MAE", "MAE met",
                    "fit_pue KL", "min(bce, ips, adpue) KL", "KL met", "target",
                    "best MAE (other)", "best KL (net)", "fit_pue's choices"], summary), "",
             "## Per log", "",
             "Mean ± standard deviation over seeds (ddof 1) on the test rows: MAE and "
             "KL(p‖p̂) to the true p, mean p̂ (against the mean true p), AUC on Y, MAE on the "
             "rows with θ < 0.05, wall seconds.", ""]
    for n in names:
        rs = by_log[n]
        mean_p = np.mean([r["mean_p_test"] for r in rs])
        low = np.mean([r["share_low_theta_test"] for r in rs])
        theta_mae = np.mean([r["theta_mae"] for r in rs])
        auc_p = np.mean([r["auc_true_p"] for r in rs])
        rows = []
        for m in METHODS:
            if not any(m in r["methods"] for r in rs):
                continue
            rows.append([m, _pm(_stat(rs, m, "mae")), _pm(_stat(rs, m, "kl")),
                         _pm(_stat(rs, m, "mean_pred")), _pm(_stat(rs, m, "auc"), 3),
                         _pm(_stat(rs, m, "mae_low_theta")) if low > 0 else "—",
                         fmt(_stat(rs, m, "seconds")[0], 0)])
        parts += [f"### {n}", "", f"{family[n].varies}; net `{family[n].net}`; seeds "
                  f"{', '.join(str(r['seed']) for r in rs)}; mean true p {mean_p:.4f}; "
                  f"share θ < 0.05 {low:.3f}; θ̂'s MAE to θ {theta_mae:.4f}; AUC of the true p "
                  f"{auc_p:.3f}.", "",
                  table(["method", "MAE", "KL", "mean p̂", "AUC", "MAE, θ < 0.05", "s"], rows),
                  ""]
    parts += ["## Methods", "", table(["method", "what it is"],
                                      [[m, DESCRIPTIONS[m]] for m in METHODS]), ""]
    return "\n".join(parts)


def _family_sha(family: Mapping[str, AdFamilyLog]) -> str:
    text = json.dumps({n: dataclasses.asdict(v) for n, v in family.items()}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


def main(argv: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """Run the grid, write ``--out`` after every (log, seed); the records, as written."""
    argv = list(sys.argv[1:] if argv is None else argv)
    family = ad_log_family()
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--logs", default="all", help=f"comma-separated names of {list(family)}")
    ap.add_argument("--seeds", type=int, default=3, help="seeds per log (0, 1, ...)")
    ap.add_argument("--rows", type=int, default=20_000,
                    help="PU rows per log (the exposure log has half as many)")
    ap.add_argument("--test-rows", type=int, default=20_000, help="test rows with the truth")
    ap.add_argument("--epochs", type=int, default=10, help="most epochs per net")
    ap.add_argument("--batch-size", type=int, default=1024, help="rows per batch, every net")
    ap.add_argument("--out", default=str(RESULTS / "ad_family.md"), help="the Markdown report")
    ap.add_argument("--json", default=None, help="also write every record here (optional)")
    args = ap.parse_args(argv)
    names = list(family) if args.logs == "all" else args.logs.split(",")
    unknown = [n for n in names if n not in family]
    if unknown:
        ap.error(f"--logs: unknown {unknown}; choose from {list(family)}")
    for flag, value, low in (("--seeds", args.seeds, 1), ("--rows", args.rows, 50),
                             ("--test-rows", args.test_rows, 10), ("--epochs", args.epochs, 1),
                             ("--batch-size", args.batch_size, 8)):
        if value < low:
            ap.error(f"{flag} must be at least {low}, got {value}")
    command = command_line("benchmarks.ad_family", argv)
    prov_md, _ = provenance_block(command, seeds=f"0-{args.seeds - 1} (parameters and rows "
                                  "of each log drawn from the seed)",
                                  data={"ad_log_family() configs": _family_sha(family)})
    settings = (f"Settings: {args.rows:,} PU rows and {max(2, args.rows // 2):,} exposure rows "
                f"per log and seed ({int(HELD_OUT * 100)} % of each held out to choose epochs "
                f"and rounds, except for fit_pue, which splits and refits itself), "
                f"{args.test_rows:,} test rows, at most {args.epochs} epochs per net, batch "
                f"{args.batch_size}, Adam(0.01) for every net (fit_pue's default rate).")
    out, results = Path(args.out), []
    start = time.perf_counter()
    for name in names:
        for seed in range(args.seeds):
            r = run_one(family[name], seed, rows=args.rows, test_rows=args.test_rows,
                        epochs=args.epochs, batch_size=args.batch_size)
            results.append(r)
            m = r["methods"]
            print(f"{name} seed {seed}: fit_pue MAE {m['fit_pue']['mae']:.4f} "
                  f"({m['fit_pue']['choice']}), bce {m['bce']['mae']:.4f}, "
                  f"const_snips {m['const_snips']['mae']:.4f}, "
                  f"{time.perf_counter() - start:.0f} s so far", flush=True)
            out.parent.mkdir(parents=True, exist_ok=True)
            elapsed = f"Wall time so far: {time.perf_counter() - start:.0f} s."
            out.write_text(report(results, family, prov_md, settings + " " + elapsed))
            if args.json:
                Path(args.json).write_text(json.dumps(results, indent=1))
    return results


if __name__ == "__main__":
    with adp.experiments.keep_compiled():  # the loop of fit_pue calls: each step traced once
        main()
