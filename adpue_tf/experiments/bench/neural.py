"""Table 2 (neural networks on image data): ``run_neural`` writes ``neural.md``, ``neural.json`` and the plots."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import TextIO

import numpy as np

from adpue_tf.experiments import keep_compiled, published, simulate, table2
from adpue_tf.experiments.bench.common import (
    NEURAL_DATASETS,
    Results,
    _check_names,
    _hidden,
    _load,
    prepare_out,
    run_provenance,
)
from adpue_tf.experiments.progress import Progress
from adpue_tf.experiments.report import cell, local_paths_hidden, markdown_table

__all__ = ["run_neural"]


def run_neural(cfg: table2.NeuralBenchConfig, out_dir: str | Path, *,
               strict: bool = False, progress: TextIO | None = sys.stderr,
               command: str | None = None) -> Path:
    """Run Table 2 and write ``neural.md``, ``neural.json`` and PNG plots under ``out_dir``.

    The JSON and Markdown files are rewritten after each (data set, ratio)
    setting; the plots when the run ends. ``command``: the command line, for
    the files' provenance block. Results already in ``out_dir`` are never
    replaced with fewer: a run over them writes ``neural.partial.md``/``.json``
    until it has finished every setting (see
    :class:`~adpue_tf.experiments.bench.common.Results`). Returns the path of
    the Markdown file written last.
    """
    _check_names(cfg.datasets, NEURAL_DATASETS)
    out = prepare_out(out_dir)
    start = time.monotonic()
    loaded = {name: _load(name, strict=strict) for name in cfg.datasets}
    present = [n for n, (d, _) in loaded.items() if d is not None]
    methods = table2.PUE_METHODS + table2.SSE_METHODS
    prov_text, prov = run_provenance(command, "run_neural", seed=cfg.seed, trials=cfg.trials,
                                     loaded=loaded)
    bar = Progress(len(present) * len(cfg.ratios) * cfg.trials * len(methods), stream=progress)
    results: dict[str, dict[float, list[dict]]] = {}
    total, done = len(present) * len(cfg.ratios), 0
    written, path = Results(out, "neural"), out / "neural.md"

    def write(plots: list[str]) -> None:
        nonlocal path
        wall = time.monotonic() - start
        path = written.write(done, total, json.dumps(
            {"provenance": prov, "config": {k: _hidden(v) for k, v in vars(cfg).items()},
             "wall_seconds": wall, "settings_done": done,
             "settings_total": total,
             "results": {n: {str(r): v for r, v in rs.items()} for n, rs in results.items()}}),
            lambda status: _neural_markdown(cfg, loaded, results, methods, wall, plots,
                                            prov_text, status))

    write([])
    for name in present:
        ds = loaded[name][0]
        assert ds is not None  # `present` holds the loaded ones
        x, y = ds.x, ds.y
        if cfg.rows is not None and cfg.rows < len(y):
            keep = np.sort(np.random.default_rng(cfg.seed).choice(len(y), cfg.rows, replace=False))
            x, y = x[keep], y[keep]
        features = simulate.project_features(x, seed=cfg.seed)
        prior = float(np.mean(y))
        results[name] = {}
        for ratio in cfg.ratios:
            with keep_compiled():  # the trials' fit_pue calls: each step traced once
                results[name][ratio] = [
                    table2.run_trial(x, y, features, prior, cfg, ratio, cfg.seed + t,
                                     report=lambda m: bar.step(f"{name} r={ratio} {m}"))
                    for t in range(cfg.trials)]
            done += 1
            write([])
    bar.close()
    write(_neural_plots(results, methods, out))
    return path


def _neural_markdown(cfg: table2.NeuralBenchConfig, loaded: dict, results: dict,
                     methods: tuple[str, ...], wall: float, plots: list[str],
                     prov_text: str, status: str = "") -> str:
    rows_note = "all rows" if cfg.rows is None else f"a seeded subsample of {cfg.rows} rows"
    lines = [
        "# Table 2: neural networks (regenerate with `adpue-tf bench neural`)", "",
        prov_text, "", *([status] if status else []),
        f"Wall time: {wall:.0f} s.", "",
        f"**What ran:** {cfg.trials} trials per setting, {cfg.epochs} epochs (the paper: 100 "
        f"trials, 100 epochs), {rows_note} of each data set, {cfg.n_test} test rows, batch "
        f"size {cfg.batch_size}, Adam learning rate {cfg.learning_rate}, exposure rate "
        f"{cfg.exposure_rate} on a fixed random projection of the inputs to 13 features. "
        f"PNU η = {cfg.pnu_eta}; AD3SE α = {cfg.ad3se_alpha}. **nnPU and PNU are given the "
        "true class prior π_y (oracle input).**", "",
        f"**ADPUE** is the recommended recipe (as in Table 1): `DebiasedModel` from "
        f"f†₀ = mean(W), a refresh every {cfg.refresh_every} epoch(s), the round kept by "
        f"`BestRound` on the exposure likelihood of {cfg.val_fraction:.0%} of the PU and of the E "
        f"rows held out from training (θ̂: the same network, BCE on the other E rows, "
        f"{cfg.theta_epochs} epochs); no label Y is read. It trains on "
        f"{1 - cfg.val_fraction:.0%} of the rows the other methods train on. "
        "Its accuracy is that of the round kept; the curves show every epoch. "
        "**Recommended** is `adp.fit_pue` with the same network (every estimator trained, "
        "kept by fit_pue's rule on held-out PU/E rows (the fixed blend of `likelihood`, "
        "`brier`, `ratio` and `likelihood_theta` unless the held-out scores show another "
        "better), "
        "refitted on all rows; "
        "its curve is its final accuracy). "
        "**ADPUE-direct** is the paper's formulation (nnPUE with f† = σ(z) of the model itself, "
        "every row, the last epoch); the paper's ADPUE number is shown beside both.", "",
        "Cells: mean ± standard error of the accuracy; the paper's number in parentheses.", ""]
    for name, (ds, why) in loaded.items():
        if ds is None:
            lines += [f"- {name}: no data ({local_paths_hidden(why)})"]
        else:
            lines += [f"- {name}: positive = {ds.positive}"]
    for name, by_ratio in results.items():
        for kind in ("inductive", "transductive"):
            rows = []
            for ratio, trials in by_ratio.items():
                ref = published.TABLE2.get(name, {}).get(ratio, {}).get(kind, {})
                rows.append([str(ratio)] + [cell([t[m][kind] for t in trials],
                                                 ref.get(m.removesuffix("-direct")))
                                            for m in methods])
            lines += ["", f"## {name}, {kind}", "",
                      markdown_table(["separate ratio", *methods], rows)]
    for name, by_ratio in results.items():
        stopped = []
        for ratio, trials in by_ratio.items():
            for m in methods:
                at = [str(t[m]["diverged_epoch"]) for t in trials if "diverged_epoch" in t.get(m, {})]
                if at:
                    stopped.append(f"{m} at r={ratio}: epoch(s) {', '.join(at)} of {len(trials)} trials")
        if stopped:
            lines += ["", f"**{name}: runs stopped because the model's outputs blew up** (logits "
                      "beyond ±10⁴: a risk unbounded below, such as PNU's uPU part with the "
                      "logistic loss); each keeps its last weights, and its accuracy is theirs. "
                      + "; ".join(stopped) + "."]
        rows = [[str(ratio), ", ".join(str(t["ADPUE"]["recipe"]["round"]) for t in trials
                                       if "recipe" in t.get("ADPUE", {}))]
                for ratio, trials in by_ratio.items()]
        if any(r[1] for r in rows):
            lines += ["", f"## {name}: ADPUE's rounds kept, per trial", "",
                      markdown_table(["separate ratio", "rounds kept"], rows)]
    if plots:
        lines += ["", "## Curves (Figures 3-4)", ""] + [f"![{p}]({p})" for p in plots]
    return "\n".join(lines) + "\n"


def _neural_plots(results: dict, methods: tuple[str, ...], out: Path) -> list[str]:
    """Accuracy and precision/recall vs epoch, mean over trials, one panel per ratio."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    files = []
    for name, by_ratio in results.items():
        for kind, keys in (("accuracy", ("accuracy",)), ("precision_recall", ("precision", "recall"))):
            fig, axes = plt.subplots(1, len(by_ratio), figsize=(4 * len(by_ratio), 3.2),
                                     squeeze=False)
            for ax, (ratio, trials) in zip(axes[0], by_ratio.items()):
                for i, m in enumerate(methods):
                    for key, style in zip(keys, ("-", "--")):
                        curve = np.mean([t[m]["curves"][key] for t in trials], axis=0)
                        ax.plot(np.arange(1, len(curve) + 1), curve, style, color=f"C{i}",
                                label=f"{m} {key}" if len(keys) > 1 else m)
                ax.set_title(f"{name}, separate ratio {ratio}")
                ax.set_xlabel("epoch")
                ax.set_ylabel(" / ".join(keys))
            axes[0][0].legend(fontsize=7)
            fig.tight_layout()
            fname = f"neural_{name}_{kind}.png"
            fig.savefig(out / fname, dpi=80)
            plt.close(fig)
            files.append(fname)
    return files
