"""Table 1 (linear models on the LIBSVM data): ``run_linear`` writes ``linear.md`` and ``linear.json``."""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from adpue_tf.experiments import (
    datasets,
    mechanisms,
    published,
    recommended,
    simulate,
    table1,
)
from adpue_tf.experiments.bench.common import (
    LINEAR_DATASETS,
    Results,
    _check_names,
    _hidden,
    _load,
    prepare_out,
    run_provenance,
)
from adpue_tf.experiments.bench.files import load_file
from adpue_tf.experiments.bench.parallel import check_jobs, run_settings
from adpue_tf.experiments.progress import Progress
from adpue_tf.experiments.report import cell, local_paths_hidden, markdown_table
from adpue_tf.recommend.rule import MIN_POSITIVES

__all__ = ["load_file", "run_linear"]


def _exposure_features(x: np.ndarray, seed: int) -> tuple[np.ndarray | None, str]:
    """The features the exposure formula reads: ``x`` itself (None) or the documented stand-in.

    The paper's formula reads x1..x13 on the scale of LIBSVM's ``*_scale`` files
    (``[-1, 1]``); data with fewer than 13 columns or values outside
    ``[-1, 1]`` get :func:`~adpue_tf.experiments.simulate.project_features`.
    """
    if x.shape[1] >= simulate.EXPOSURE_FEATURES and float(np.abs(x).max()) <= 1.0:
        return None, "the paper's formula on x1..x13"
    why = (f"{x.shape[1]} features" if x.shape[1] < simulate.EXPOSURE_FEATURES
           else "features outside [-1, 1]")
    return (simulate.project_features(x, seed=seed),
            f"{why}: the formula on a fixed random projection to 13 features "
            "(`simulate.project_features`)")


def run_linear(cfg: table1.LinearBenchConfig, out_dir: str | Path, *,
               strict: bool = False, progress: TextIO | None = sys.stderr,
               command: str | None = None, jobs: int = 1) -> Path:
    """Run Table 1 and write ``linear.md`` (and ``linear.json``) under ``out_dir``.

    Data sets: ``cfg.datasets`` (the paper's, by name) and ``cfg.files`` (any
    LIBSVM file, keyed by its stem, ``cfg.positive`` its positive label), run
    one data set at a time, each for every exposure rate
    (``cfg.exposure_rates``, default ``(cfg.exposure_rate,)``) and split ratio.

    JSON schema (backward compatible): ``results[alpha][dataset][method] =
    [inductive accuracies, transductive accuracies]``, one entry per trial,
    for the **first** exposure rate; ``by_exposure_rate[rate]`` holds the
    same layout for every rate (``results`` is ``by_exposure_rate[first]``);
    ``recipe_choices[rate][alpha][dataset][method]`` the ``ADPUE`` columns'
    chosen ``l2`` and rounds per trial, and the ``Recommended`` column's
    ``choice`` (the candidate ``fit_pue`` chose), held-out ``score`` and
    ``seconds`` per trial.

    Args:
        cfg: the settings.
        out_dir: results directory.
        strict: raise on a missing data file (else the row says "no data").
        progress: stream for the progress display.
        command: the command line, for the files' provenance block.
        jobs: settings run at once, each data set and split ratio (its
            exposure rates one after another) in its own process
            (:func:`~adpue_tf.experiments.bench.parallel.run_settings`: the same
            numbers, about ``jobs`` times faster on as many cores); 1: one
            after another in this process.

    Returns:
        The path of ``linear.md`` (``linear.partial.md`` when ``out_dir``
        held finished results and this run did not finish a setting).

    Results already in ``out_dir`` are never replaced with fewer: see
    :class:`~adpue_tf.experiments.bench.common.Results` (a run over them
    writes ``linear.partial.md``/``.json`` until it has finished every setting).
    """
    check_jobs(jobs)  # before anything is written
    if cfg.datasets or not cfg.files:
        _check_names(cfg.datasets, LINEAR_DATASETS)
    rates = tuple(cfg.exposure_rates or (cfg.exposure_rate,))
    for r in rates:
        if not isinstance(r, (int, float)) or not 0.0 < float(r) < 1.0:
            raise ValueError(f"`exposure_rate` must be a number in (0, 1), got {r!r}.")
    files = {}
    for f in cfg.files:
        stem = Path(f).stem
        if stem in cfg.datasets or stem in files:
            raise ValueError(f"`--file` {f!r}: a data set named {stem!r} is already in the "
                             "run; rename the file.")
        if not Path(f).is_file():
            raise FileNotFoundError(f"`--file` {str(f)!r}: no such file.")
        files[stem] = f
    start = time.monotonic()
    # The files are read (and refused: malformed, too large) before the output
    # directory is created, so a refused run writes nothing.
    from_files = {stem: (load_file(f, positive=cfg.positive), "") for stem, f in files.items()}
    for stem, (d, _) in from_files.items():
        _check_rows(f"`--file` {str(files[stem])!r}", len(d.y), cfg.n_test)
    out = prepare_out(out_dir)
    loaded: dict[str, tuple[datasets.Dataset | None, str]] = {}
    for name in cfg.datasets:
        loaded[name] = _load(name, strict=strict, data_dir=cfg.data_dir,
                             n_rows=datasets.paper_rows(name), seed=cfg.seed)
        found = loaded[name][0]
        if found is not None:
            _check_rows(f"data set {name!r}", len(found.y), cfg.n_test)
    loaded.update(from_files)
    features = {n: _exposure_features(d.x, cfg.seed) for n, (d, _) in loaded.items()
                if d is not None}
    methods = table1.pue_methods(cfg) + table1.SSE_METHODS
    prov_text, prov = run_provenance(command, "run_linear", seed=cfg.seed, trials=cfg.trials,
                                     loaded=loaded, files=files)
    present = [n for n, (d, _) in loaded.items() if d is not None]
    bar = Progress(len(present) * len(rates) * len(cfg.alphas) * len(methods), stream=progress)
    by_rate: dict[float, dict[float, dict[str, dict[str, Any]]]] = {
        r: {a: {} for a in cfg.alphas} for r in rates}
    choices: dict[float, dict[float, dict[str, Any]]] = {
        r: {a: {} for a in cfg.alphas} for r in rates}
    total, done = len(rates) * len(cfg.alphas) * len(present), 0
    written, path = Results(out, "linear"), out / "linear.md"

    def write() -> None:
        nonlocal path
        wall = time.monotonic() - start
        path = written.write(done, total, json.dumps(
            {"provenance": prov, "config": {k: _hidden(v) for k, v in vars(cfg).items()},
             "results": {str(a): r for a, r in by_rate[rates[0]].items()},
             "exposure_rates": list(rates),
             "by_exposure_rate": {str(rate): {str(a): r for a, r in res.items()}
                                  for rate, res in by_rate.items()},
             "recipe_choices": {str(rate): {str(a): r for a, r in res.items()}
                                for rate, res in choices.items()},
             "settings_done": done, "settings_total": total, "wall_seconds": wall}, indent=1),
            lambda status: _linear_markdown(cfg, loaded, by_rate, methods, wall, prov_text,
                                            status, features, choices,
                                            (out / "linear.notes.md").is_file()))

    write()  # the data sets found and the protocol, before the first setting
    # the cheapest data sets first (an interrupted run has the most settings); the
    # tables keep the order of the config
    tasks = []
    for name in sorted(present, key=lambda n: loaded[n][0].x.size):  # type: ignore[union-attr]
        ds = loaded[name][0]
        assert ds is not None  # `present` holds the loaded ones
        for rate in rates:
            for alpha in cfg.alphas:
                kwargs: dict[str, Any] = dict(
                    x=ds.x, y=ds.y, prior_y=float(np.mean(ds.y)),
                    cfg=dataclasses.replace(cfg, exposure_rate=float(rate)), alpha=alpha,
                    features=features[name][0])
                if jobs == 1:  # per-method progress (a function stays in this process)
                    kwargs["report"] = (lambda m, label=f"θ={rate} α={alpha} {name}":
                                        bar.step(f"{label} {m}"))
                tasks.append(((rate, alpha, name), kwargs))

    def finished(key: tuple[float, float, str], result: tuple[dict, dict]) -> None:
        nonlocal done
        rate, alpha, name = key
        by_rate[rate][alpha][name], choices[rate][alpha][name] = result
        for table in (by_rate[rate][alpha], choices[rate][alpha]):  # the config's order
            ordered = sorted(table.items(), key=lambda kv: list(loaded).index(kv[0]))
            table.clear()
            table.update(ordered)
        if jobs > 1:
            for _ in methods:
                bar.step(f"θ={rate} α={alpha} {name}")
        done += 1
        write()

    # The exposure rates of one data set and split ratio share their fit_pue nets'
    # shapes: one worker runs them in turn, the later ones in the compiled models
    # the first kept (the same numbers; benchmarks/results/linear.recommended.md).
    run_settings(tasks, jobs, finished, together=lambda key: key[1:])
    bar.close()
    return path


#: Rows a trial needs besides its test rows: its PU and exposure (or SSE) parts.
MIN_TRAIN_ROWS = 20


def _check_rows(source: str, n: int, n_test: int) -> None:
    """Refuse a data set too small for ``n_test`` test rows plus :data:`MIN_TRAIN_ROWS`."""
    if n - n_test < MIN_TRAIN_ROWS:
        fix = (f"give `--n-test` at most {n - MIN_TRAIN_ROWS} or a larger file"
               if n > MIN_TRAIN_ROWS else f"give a file of more than {MIN_TRAIN_ROWS} rows")
        raise ValueError(f"{source} has {n} rows; each trial holds out `n_test`={n_test} test "
                         f"rows (`--n-test`) and needs at least {MIN_TRAIN_ROWS} more for its "
                         f"PU and exposure rows: {fix}.")


def _skipped(method: str, ds: datasets.Dataset) -> str | None:
    """Why ``method`` does not run on ``ds`` by design, else None."""
    need = max(table1.PROPENSITY_FEATURES) + 1
    if method == "EM" and ds.x.shape[1] < need:
        return (f"SAR-EM's propensity reads x2..x13; this set has {ds.x.shape[1]} features "
                f"(< {need})")
    return None


def _paired(a: list[float], b: list[float]) -> tuple[float, float]:
    """Mean and standard error of the paired differences ``a - b`` (NaN trials dropped)."""
    d = np.asarray(a, float) - np.asarray(b, float)
    d = d[np.isfinite(d)]
    if len(d) < 2:
        return float("nan"), float("nan")
    return float(d.mean()), float(d.std(ddof=1) / np.sqrt(len(d)))


def _targets(results: dict, rate: float) -> list[list[str]]:
    """The targets for ADPUE (inductive) on australian and german, where present."""
    rows = []
    for alpha, by_name in results.items():
        for name in ("australian", "german"):
            res = by_name.get(name)
            if not res or "ADPUE" not in res:
                continue
            ad, lo, ra = (res[m][0] for m in ("ADPUE", "Logit", "Ratio"))
            m_ad = float(np.nanmean(ad))
            d, se = _paired(ad, lo)
            ref = published.TABLE1.get(alpha, {}).get(name, {}).get("inductive", {})
            p_ad, p_lo = ref.get("ADPUE"), ref.get("Logit")
            paper = ("n/a (the paper's ADPUE " f"{p_ad:.3f} < its Logit {p_lo:.3f})"
                     if p_ad is None or p_lo is None or p_ad <= p_lo else
                     f"{m_ad:.3f} vs {p_ad:.3f}: " + ("met" if m_ad >= p_ad else "**missed**"))
            m_ra = float(np.nanmean(ra))
            rows.append([
                str(rate), str(alpha), name, f"{m_ad:.3f}",
                f"{d:+.3f} (paired SE {se:.3f}): " + ("met" if d >= 2 * se else "**missed**"),
                paper,
                f"{m_ra:.3f}; ADPUE − Ratio {m_ad - m_ra:+.3f}: "
                + ("met" if m_ad >= m_ra - 0.02 else "**missed**")])
    return rows


def _penalty(l2: float | tuple[float, ...]) -> str:
    """The Recommended net's L2 penalty, or the penalties fit_pue chose among."""
    if isinstance(l2, (int, float)):
        return f"L2 penalty {l2:g}·‖w‖²"
    return (f"two or more nets, L2 penalty λ·‖w‖² with λ ∈ {{{', '.join(f'{v:g}' for v in l2)}}}, "
            "the first kept per trial unless another's choice has a held-out NLL of W lower "
            "by `adp.recommend.NET_TOLERANCE` standard errors")


def _choice_summary(details: dict) -> str:
    """``l2/T: count`` of the recipe's choices (``fit_pue``'s: ``[net/]candidate``), most frequent first."""
    if "choice" in details:
        nets = details.get("net") or [None] * len(details["choice"])
        pairs = [c if n is None else f"{n}/{c}" for n, c in zip(nets, details["choice"])]
    else:
        pairs = [f"{l2:g}/T{t}" for l2, t in zip(details["l2"], details["rounds"])]
    keys, counts = np.unique(pairs, return_counts=True)
    order = np.argsort(-counts, kind="stable")
    return ", ".join(f"{keys[i]}: {counts[i]}" for i in order)


def _linear_markdown(cfg: table1.LinearBenchConfig, loaded: dict, by_rate: dict,
                     methods: tuple[str, ...], wall: float, prov_text: str, status: str = "",
                     features: dict | None = None, choices: dict | None = None,
                     notes: bool = False) -> str:
    rates = list(by_rate)
    rc = table1.recipe_config(cfg)
    lines = [
        "# Table 1: linear models (regenerate with `adpue-tf bench linear`)", "",
        prov_text, "", *([status] if status else []),
        f"Wall time: {wall:.0f} s for {cfg.trials} trials per setting.", "",
        "Protocol: exposure rate θ(e=1) = "
        f"{', '.join(str(r) for r in rates)} (the paper does not state its "
        f"rate), {cfg.n_test} test rows, the paper's 1,800-row subsample for w8a/covtype/"
        "mushrooms, split α into PU and E (PUE) or PU and SSE (3SE) parts. Linear models "
        f"fitted with full-batch Adam ({cfg.steps} steps"
        + (f" at most, each model stopping once its objective changes by at most {cfg.tol:g}·"
           "|objective| over 20 steps" if cfg.tol else "")
        + f", learning rate {cfg.learning_rate}, "
        f"L2 penalty {cfg.l2} on the weights of every method but ADPUE's selected one, "
        f"non-negative correction step γ = {cfg.gamma} for nnPU/ADPUE/AD3SE), "
        "all trials at once (`adpue_tf.experiments.linear_fit`: each trial follows its own "
        f"trajectory). {table1.em_note(cfg)} PNU η = {cfg.pnu_eta}; AD3SE α = "
        f"{cfg.ad3se_alpha}. **uPU, nnPU and PNU are given the true class prior π_y (oracle "
        "input).** uPU/nnPU use the logistic loss (the library's default surrogate); "
        "uPU-sig/nnPU-sig the sigmoid loss (Kiryo et al.'s code and pulearn's default). "
        f"IPS: cross-entropy on W weighted by 1/max(θ̂, {cfg.ips_clip}) (Saito et al. 2020), "
        "θ̂ a logistic regression of E on the E rows. ElkanNoto: pulearn's Elkan–Noto "
        "classifier with scikit-learn's logistic regression (external peer).", "",
        "**ADPUE** is the recommended recipe (`adpue_tf.experiments.linear_recipe`): inside "
        f"each trial, {rc.folds}-fold cross-validation on the *training* PU and E rows (never "
        "a hidden Y or a test label) over L2 ∈ "
        f"{{{', '.join(f'{v:g}' for v in rc.l2s)}}} and the number of alternate-learning "
        f"rounds T ∈ 0..{rc.max_rounds} (f†₀ = the PU positive rate mean(W); round t fits "
        "nnPUE with f† = σ(z) of round t−1, warm-started; T = 0 is the constant f†₀), scored "
        f"by the **{rc.criterion.replace('_', ' ')}**, then refitted on all training rows. "
        "**ADPUE-ref**: the same candidates chosen by the reference risk (nnPUE risk with f† "
        "fixed to the Ratio estimate of the training folds). **ADPUE-direct**: the paper's "
        "formulation, f† = stop_gradient(σ(z)) with the settings above.", ""]
    if "Recommended" in methods:
        r = recommended.from_bench(cfg)
        lines += [
            "**Recommended**: `adp.fit_pue` with a linear net (`keras.Sequential([keras.Input"
            "((d,)), keras.layers.Dense(1)])`), one trial at a time, on the trial's PU rows (W) "
            "and E rows (E) only: every candidate trained on 80 % of them; kept by fit_pue's rule "
            "(the fixed blend of `likelihood`, `brier`, `ratio` and `likelihood_theta` unless the "
            f"held-out Brier score or likelihood shows another better; always with < {MIN_POSITIVES} positives held "
            f"out) and refitted on all (epochs ≤ {r.epochs}, Adam learning rate "
            f"{r.learning_rate}, ≥ {r.min_steps} steps per net, batches of ≤ {r.batch_size} "
            f"rows, {_penalty(r.l2)}"
            f"{', every step under XLA' if r.jit_compile else ''}; "
            f"candidates {', '.join(r.candidates or ()) or 'fit_pue default'}).", ""]
    if cfg.exposure_mechanism != "paper":
        lines += [f"**Exposure mechanism: {cfg.exposure_mechanism}** (not the paper's formula): "
                  + mechanisms.DESCRIPTIONS[cfg.exposure_mechanism], ""]
    if notes:
        lines += ["What the numbers say, and why a target is missed where it is: "
                  "[linear.notes.md](linear.notes.md).", ""]
    lines += [
        "Cells: mean ± standard error of the accuracy over the trials; the paper's number in "
        "parentheses where the paper has the method (nnPU, Ratio, IPS and ElkanNoto are not in "
        "its Table 1).", "", "Data sets (positive class; exposure features):", ""]
    for name, (ds, why) in loaded.items():
        feat = (features or {}).get(name, (None, ""))[1]
        lines.append(f"- {name}: " + (f"{ds.positive} ({len(ds.y)} rows, positive fraction "
                                      f"{float(np.mean(ds.y)):.3f}); {feat}" if ds is not None
                                      else f"no data ({local_paths_hidden(why)})"))
    for rate in rates:
        results = by_rate[rate]
        where = f"θ(e=1) = {rate}, " if len(rates) > 1 else ""
        for alpha in cfg.alphas:
            for kind in ("inductive", "transductive"):
                rows = []
                for name, (ds, _why) in loaded.items():
                    if ds is None:
                        rows.append([name] + ["no data"] * len(methods))
                        continue
                    if name not in results[alpha]:
                        rows.append([name] + ["not run"] * len(methods))
                        continue
                    ref = published.TABLE1.get(alpha, {}).get(name, {}).get(kind, {})
                    k = 0 if kind == "inductive" else 1
                    rows.append([name] + [cell(results[alpha][name][m][k], ref.get(m),
                                               skipped=_skipped(m, ds)) for m in methods])
                lines += ["", f"## {where}α = {alpha}, {kind}", "",
                          markdown_table(["data set", *methods], rows)]
    rec_rows = [r for rate in rates for r in recommended.comparison_rows(by_rate[rate], rate)]
    if rec_rows:
        lines += ["", "## Recommended against the best column without oracle inputs", "",
                  "Columns without oracle inputs: " + ", ".join(recommended.NO_ORACLE) + ". Met: "
                  "Recommended ≥ that best − 0.01.", "",
                  markdown_table(["θ(e=1)", "α", "data set", "accuracy", "Recommended",
                                  "best other (column)", "difference", "≥ best − 0.01"],
                                 rec_rows)]
    target_rows = [r for rate in rates for r in _targets(by_rate[rate], rate)]
    if target_rows:
        lines += ["", "## Targets (ADPUE, inductive)", "",
                  "ADPUE ≥ Logit + 2 paired SE; ≥ the paper's ADPUE where the paper's ADPUE "
                  "beats its own Logit; ≥ Ratio − 0.02.", "",
                  markdown_table(["θ(e=1)", "α", "data set", "ADPUE", "vs Logit",
                                  "vs the paper's ADPUE", "vs Ratio"], target_rows)]
    picks = [[str(rate), str(alpha), name, m, _choice_summary(d)]
             for rate in rates for alpha, by_name in (choices or {}).get(rate, {}).items()
             for name, det in by_name.items() for m, d in det.items() if not m.startswith("_")]
    if picks:
        lines += ["", "## The recipe's choices (L2/T: trials)", "",
                  markdown_table(["θ(e=1)", "α", "data set", "column", "chosen"], picks)]
    return "\n".join(lines) + "\n"
