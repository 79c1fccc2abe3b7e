"""The ads-scale benchmark's report: Markdown tables, the targets, the calibration plot.

Every table is written by :func:`benchmarks.common.table`; the provenance
block by :func:`benchmarks.common.provenance_block`.

Example:
    >>> ran({"k": {"methods": {"recommended": {}, "bce": {}}}})
    ['bce', 'recommended']
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmarks.ads_scale_methods import DESCRIPTIONS, IPS_CLIP, METHODS
from benchmarks.common import fmt, table

__all__ = ["plot", "ran", "report", "targets"]

#: The columns of the accuracy tables: (header, key of ``eval``, decimals).
ACCURACY = (("MAE to true p", "mae", 4), ("MAE, rarely shown (θ<0.05)", "mae_rarely_shown", 4),
            ("log-loss to true p", "log_loss_to_p", 4), ("KL(p ‖ p̂)", "kl_to_p", 4),
            ("log-loss on Y", "log_loss", 4), ("AUC on Y", "auc", 4), ("ECE on Y", "ece", 4),
            ("mean p̂", "mean_pred", 3))
#: What Recommended is compared with in the targets.
RIVALS = ("bce", "ips", "adpue")



#: fit_pue's wall time at ads scale against one streamed BCE fit: at most this many times.
COST_TARGET = 1.5

def ran(results: dict) -> list[str]:
    """The methods in the results, in the order of METHODS."""
    found = {m for r in results.values() for m in r["methods"]}
    return [m for m in METHODS if m in found]


def _logs(results: dict) -> list[str]:
    """Result keys, by policy then rows."""
    return sorted(results, key=lambda k: (results[k]["policy"] != "logistic",
                                          results[k]["policy"], results[k]["rows"]))


def _setup(args: Any, results: dict) -> list[str]:
    first = results[_logs(results)[0]]
    c, counts = first["config"], first["counts"]
    sizes = ", ".join(f"{r['rows']:,} ({r['policy']})" for r in map(results.get, _logs(results)))
    train = (f"the first {args.max_train_rows:,} rows of the shuffled stream (a cap, not a full "
             "pass)" if args.max_train_rows else f"{args.epochs} epoch(s) over the training shards")
    return [
        "## Set-up", "",
        f"- Logs: `adpue_tf.synthetic.AdLogSimulator` defaults ({c['n_users']} users, "
        f"{c['n_items']} items ({c['rare_item_share']:.0%} rarely shown), {c['n_campaigns']} "
        f"campaigns, 3 devices, {c['context_dim']}-dim context), seed {first.get('seed', 0)}, "
        "logging policy "
        "`logistic` (θ = σ(z_e)) or `cloglog` (θ = 1 − exp(−exp(z_e)), not logistic)"
        + ("" if c.get("base_rate") is None else
           f", conversion intercept set for a mean p(y=1|x) of {c['base_rate']:g} (`base_rate`)")
        + "; logged "
        f"rows {sizes}, half PU log, half exposure log, 16 shards each; evaluation set "
        f"{counts['eval']:,} rows with the true p(y=1|x), θ(e=1|x) and Y.",
        f"- Held out for the streamed methods' selection: the last shard of each log, first "
        f"{args.val_rows:,} rows of each; training reads the other 15 shards.",
        "- Model: user (8), item (8), campaign (4) embeddings, device StringLookup (one-hot), "
        "dense context -> Dense 32 relu -> Dense 16 relu -> Dense 1, plus the user·item dot "
        "product: one logit.",
        f"- Streamed methods: Adam, batch {args.batch_size}, {train}, cut into {args.chunks} "
        "chunks (Keras epochs); after each chunk `val_exposure_nll` (held-out W under σ(z)·θ̂) "
        "is measured and the best chunk's weights are kept; each runs at every learning rate of "
        + ", ".join(f"{lr:g}" for lr in args.lrs) + " and keeps the lowest score. θ̂: the same "
        f"architecture, BCE on E (used by IPS, clip {IPS_CLIP}, and by the score).",
        f"- Recommended: `adp.fit_pue(build_net, pu_rows, None, e_rows, None, epochs="
        f"{args.epochs}, batch_size={args.batch_size}, learning_rate={args.lr:g}, min_steps=1)` "
        "on the same training shards (read into memory), the same net builder; its choice is "
        "its own (held-out 20 %), so it runs once, at `--lr`. No method sees the evaluation "
        "set's Y or p.", "",
        table(["method", "what it trains"], [[f"`{m}`", DESCRIPTIONS[m]] for m in ran(results)])]


def _accuracy(key: str, r: dict, methods: list[str]) -> list[str]:
    rows = []
    for m in methods:
        if m not in r["methods"]:
            continue
        x = r["methods"][m]
        if "diverged" in x:
            rows.append([f"`{m}`", f"diverged {x['diverged']}: training stopped, outputs "
                         "beyond ±10⁴", *[""] * (len(ACCURACY) + 3)])
            continue
        rows.append([f"`{m}`", *(fmt(x["eval"][k], d) for _, k, d in ACCURACY),
                     f"{x['lr']:g}", f"{x['best_chunk']}/{x['chunks']}" if "chunks" in x
                     else f"chose `{x['choice']}`", fmt(x["fit_wall_s"], 0),
                     f"{x['peak_rss_mb']:.0f}"])
    t = r["truth"]
    rows.append(["truth p(y=1\\|x)", "0", "0", fmt(t["log_loss_to_p"]), "0",
                 fmt(t["log_loss"]), fmt(t["auc"]), fmt(t["ece"]), fmt(t["mean_pred"], 3),
                 "", "", "", ""])
    lines = ["", f"## Accuracy: {r['rows']:,} logged rows, `{r['policy']}` policy", "",
             f"θ̂ (the streamed methods'): MAE to the true θ(e=1|x) "
             f"{fmt(r.get('theta_mae'))}; trained in {r['theta']['theta_s']:.0f} s.", "",
             table(["method", *(h for h, _, _ in ACCURACY), "lr", "best chunk / choice",
                    "fit wall (s)", "peak RSS (MB)"], rows)]
    rec = r["methods"].get("recommended")
    if rec:
        lines += ["", "fit_pue's own report (its held-out scores, not the truth):", "",
                  rec["report"]]
    if rec and rec.get("candidates"):
        best = min(rec["candidates"], key=lambda n: rec["candidates"][n]["mae"])
        lines += ["", "fit_pue's candidates against the truth (each as trained for the choice, "
                  f"on 80 % of the rows; never seen by fit_pue): lowest MAE `{best}`", "",
                  table(["candidate", "MAE to p", "log-loss to p", "mean p̂"],
                        [[f"`{n}`" + (" ←" if n == rec["choice"] else ""), fmt(c["mae"]),
                          fmt(c["log_loss_to_p"]), fmt(c["mean_pred"], 3)]
                         for n, c in sorted(rec["candidates"].items(),
                                            key=lambda kv: kv[1]["mae"])])]
    cands = [[f"`{m}`", lr, "diverged" if "diverged" in c else f"{c['best_val']:.5f}",
              "" if "diverged" in c else str(c["best_chunk"]),
              "" if "diverged" in c else f"{c['mae']:.4f}",
              "yes" if float(lr) == r["methods"][m]["lr"] and "diverged" not in c else ""]
             for m in methods if m in r["methods"]
             for lr, c in r["methods"][m].get("lr_candidates", {}).items()]
    if len(cands) > len([m for m in methods if m in r["methods"] and m != "recommended"]):
        lines += ["", "Learning rates tried (lowest `val_exposure_nll` keeps; MAE shown only to "
                  "judge the choice):", "",
                  table(["method", "lr", "lowest val_exposure_nll", "best chunk", "MAE to p",
                         "kept"], cands)]
    return lines


def _usable(r: dict, methods: list[str]) -> list[str]:
    """The methods of a log that ran and did not diverge."""
    return [m for m in methods if m in r["methods"] and "diverged" not in r["methods"][m]]


def _calibration(r: dict, methods: list[str]) -> list[str]:
    present = _usable(r, methods)
    rows = []
    for b in range(10):
        cells = []
        for m in present:
            cb = r["methods"][m]["eval"]["calibration"][b]
            cells.append("—" if not cb["n"] else f"{cb['mean_pred']:.3f} / "
                         f"{cb['mean_true_p']:.3f} / {cb['mean_y']:.3f} ({cb['n']:,})")
        rows.append([r["methods"][present[0]]["eval"]["calibration"][b]["bin"], *cells])
    return ["", f"## Calibration: {r['rows']:,} rows, `{r['policy']}`", "",
            "Ten equal-width bins of the prediction: mean prediction / mean true p / mean Y "
            "(rows).", "", table(["bin", *(f"`{m}`" for m in present)], rows)]


def report(args: Any, results: dict, tp: dict | None, provenance: str) -> str:
    """The whole Markdown report."""
    methods = ran(results)
    lines = ["# Ads at scale: dict features from TFRecord shards of a simulated ad log", "",
             provenance, *(["", f"**Reduced size**: {args.note}"] if args.note else []), ""]
    lines += _setup(args, results)
    lines += ["", "## Targets", "", *targets(results, tp)]
    for key in _logs(results):
        lines += _accuracy(key, results[key], methods)
    lines += _calibration(results[_logs(results)[-1]], methods)
    lines += ["", "Plot: `ads_scale_calibration.png` (the last log above)."]
    if tp is not None:
        b = tp["bce"]
        rows = [[f"`{m}`", f"{tp[m]['rows_per_s']:,.0f}", fmt(tp[m]['rows_per_s']
                                                            / b['rows_per_s'], 3),
                 fmt(tp[m].get("paired_ratio", 1.0), 3), fmt(tp[m]["cpu_us_per_row"], 2),
                 fmt(b["cpu_us_per_row"] / tp[m]["cpu_us_per_row"], 3)]
                for m in methods if m in tp]
        lines += ["", f"## Training throughput from TFRecord ({tp['log']})", "",
                  f"One process, the streamed models round robin, {tp['repeats']} timed units of "
                  f"{tp['steps']} steps × {tp['batch_size']} rows (after one untimed unit), the "
                  "same `read_tfrecords` → `pue_dataset` pipeline. Medians; paired: median over "
                  "rounds of bce's unit time over the method's; CPU counts all threads.", "",
                  table(["method", "rows/s", "ratio to bce", "paired ratio", "CPU µs/row",
                         "CPU ratio (bce/method)"], rows)]
    mem = [[f"{r['rows']:,} ({r['policy']})", f"{r['memory']['peak_rss_mb']:.0f} "
            f"({r['memory']['rows']:,} rows, {r['memory']['rows_per_s']:,.0f} rows/s)",
            f"{r['theta']['peak_rss_mb']:.0f}",
            *(f"{r['methods'][m]['peak_rss_mb']:.0f}" if m in _usable(r, methods) else "—"
              for m in methods)] for r in map(results.get, _logs(results))]
    lines += ["", "## Peak resident memory (MB, `ru_maxrss` of each subprocess)", "",
              "The full pipeline pass streams every training row with no model; "
              "`recommended` reads its rows into memory (fit_pue's design).", "",
              table(["log", "full pipeline pass", "θ̂ fit", *(f"`{m}`" for m in methods)], mem)]
    return "\n".join(lines) + "\n"


def targets(results: dict, tp: dict | None) -> list[str]:
    """The targets, checked on the largest log of each policy."""
    rows: list[list[str]] = []

    def line(name: str, value: str, ok: bool) -> None:
        rows.append([name, value, "yes" if ok else "**no**"])

    biggest: dict[str, str] = {}
    for key in _logs(results):
        biggest[results[key]["policy"]] = key
    for policy, key in biggest.items():
        r = results[key]["methods"]
        if not {"recommended", "bce"} <= set(_usable(results[key], list(r))):
            continue
        e = {m: r[m]["eval"] for m in _usable(results[key], ["recommended", *RIVALS])}
        where = f"{results[key]['rows']:,} rows, `{policy}`"
        best = min((m for m in RIVALS if m in e), key=lambda m: e[m]["log_loss_to_p"])
        line(f"{where}: Recommended log-loss to p < BCE, IPS, direct ADPUE",
             f"{e['recommended']['log_loss_to_p']:.4f} vs " + ", ".join(
                 f"{m} {e[m]['log_loss_to_p']:.4f}" if m in e
                 else f"{m} {'diverged' if m in r else 'not run'}" for m in RIVALS),
             e["recommended"]["log_loss_to_p"] < e[best]["log_loss_to_p"])
        line(f"{where}: Recommended MAE to p ≤ BCE", f"{e['recommended']['mae']:.4f} vs "
             f"{e['bce']['mae']:.4f}", e["recommended"]["mae"] <= e["bce"]["mae"])
        wall = r["recommended"]["fit_wall_s"] / r["bce"]["fit_wall_s"]
        cpu = r["recommended"]["fit_cpu_s"] / r["bce"]["fit_cpu_s"]
        line(f"{where}: fit_pue ≤ {COST_TARGET} × one streamed BCE fit (wall; CPU beside)",
             f"{r['recommended']['fit_wall_s']:.0f} s / {r['bce']['fit_wall_s']:.0f} s = "
             f"{wall:.2f} (CPU {cpu:.2f})", wall <= COST_TARGET)
    if tp is not None:
        for m, goal in (("adpue", 0.95), ("debiased", 0.90)):
            if m in tp:
                wall = tp[m]["rows_per_s"] / tp["bce"]["rows_per_s"]
                cpu = tp["bce"]["cpu_us_per_row"] / tp[m]["cpu_us_per_row"]
                line(f"throughput `{m}` ≥ {goal} × bce", f"wall {wall:.3f}, paired "
                     f"{tp[m]['paired_ratio']:.3f}, CPU {cpu:.3f}", wall >= goal)
    return ["The wall times are one `model.fit` call of BCE (at its kept learning rate, "
            "validation included) against the whole `fit_pue` call (reading the rows into "
            "memory, every candidate, θ̂, the choice, the refit).", "",
            table(["target", "measured", "met"], rows)] if rows else ["No target applies."]


def plot(results: dict, path: Path) -> None:
    """Calibration on the evaluation set of the last log: against Y and against the true p."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    key = _logs(results)[-1]
    r = results[key]["methods"]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.5))
    for m in _usable(results[key], ran(results)):
        cal = [c for c in r[m]["eval"]["calibration"] if c["n"]]
        axes[0].plot([c["mean_pred"] for c in cal], [c["mean_y"] for c in cal], "o-",
                     label=f"{m} (MAE {r[m]['eval']['mae']:.3f})")
        axes[1].plot([c["mean_pred"] for c in cal], [c["mean_true_p"] for c in cal], "o-",
                     label=m)
    for ax, ylabel in zip(axes, ("mean of true Y", "mean of true p(y=1|x)")):
        ax.plot([0, 1], [0, 1], "k:", lw=1)
        ax.set(xlabel="mean prediction (bin)", ylabel=ylabel, xlim=(0, 1), ylim=(0, 1))
        ax.legend(fontsize=8)
    fig.suptitle(f"Calibration on the evaluation set, {results[key]['rows']:,} logged rows, "
                 f"{results[key]['policy']} policy")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
