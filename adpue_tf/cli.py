"""The ``adpue-tf`` command.

What a user reads is ours: TensorFlow's C++ start-up logs (oneDNN, CUDA
probing, CPU features, absl's "All log messages before absl::InitializeLog()")
are hidden unless ``--verbose``. The package imports TensorFlow lazily, so the
command sends file descriptor 2 to a temporary file before TensorFlow loads,
keeps Python's own ``sys.stderr`` (progress, warnings, errors) on the terminal,
and afterwards shows whatever native output was not start-up noise.

Example:
    >>> from adpue_tf.cli import build_parser
    >>> build_parser().parse_args(["demo", "--seeds", "3"]).seeds
    3
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import re
import shlex
import sys
import tempfile
import time
from typing import Iterator, Sequence

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``adpue-tf``."""
    from adpue_tf import __version__

    parser = argparse.ArgumentParser(
        prog="adpue-tf", formatter_class=_HELP,
        description="Debiased learning from positive, unlabeled and exposure data.")
    parser.add_argument("--version", action="version", version=f"adpue-tf {__version__}")
    parser.add_argument("--verbose", action="store_true", help=_VERBOSE_HELP)
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", formatter_class=_HELP, help="fit_pue against BCE on W and direct ADPUE on "
                          "breast-cancer data")
    demo.add_argument("--seeds", type=int, default=3, help="number of trials (>= 2)")
    demo.add_argument("--epochs", type=int, default=40, help="epochs per model")
    demo.add_argument("--exposure-rate", type=float, default=0.5, help="target θ(e=1)")
    demo.add_argument("--split", type=float, default=0.5, help="PU share of training rows")
    demo.add_argument("--quiet", action="store_true", help="no progress display")

    logs = sub.add_parser("simulate-logs", formatter_class=_HELP,
                          help="write a simulated ad log with known truth as TFRecord shards")
    logs.add_argument("--rows", type=int, required=True, help="logged rows (PU + exposure)")
    logs.add_argument("--shards", type=int, default=4, help="files per log")
    logs.add_argument("--out", required=True, help="a new or empty directory")
    logs.add_argument("--seed", type=int, default=0, help="seed of the generator and rows")
    logs.add_argument("--eval-rows", type=int, default=20_000,
                      help="held-out rows with the true p(y=1|x)")
    logs.add_argument("--exposure-share", type=float, default=0.5,
                      help="share of the logged rows in the exposure log")

    bench = sub.add_parser("bench", formatter_class=_HELP, help="reproduce the paper's tables")
    kinds = bench.add_subparsers(dest="table", required=True)
    linear = kinds.add_parser("linear", formatter_class=_HELP, help="Table 1: linear models on LIBSVM data")
    neural = kinds.add_parser("neural", formatter_class=_HELP, help="Table 2 and Figures 3-4: neural networks")
    for p, n in ((linear, 100), (neural, 100)):
        p.add_argument("--trials", type=int, default=n, help="trials per setting (>= 2)")
        p.add_argument("--datasets", type=_names, default=None,
                       help="comma-separated data sets; None: the paper's")
        p.add_argument("--seed", type=int, default=0, help="first seed")
        p.add_argument("--out", default="benchmarks/results",
                       help="results directory; finished results there are replaced only by "
                            "a run that finishes every setting (until then it writes "
                            f"{'linear' if p is linear else 'neural'}.partial.md)")
        p.add_argument("--exposure-rate", type=_floats if p is linear else float,
                       default="0.5",
                       help="target θ(e=1)" + (" (comma-separated: several rates, one "
                                               "results file)" if p is linear else ""))
        p.add_argument("--quiet", action="store_true", help="no progress display")
    linear.add_argument("--alphas", type=_floats, default="0.3,0.5", help="split ratios")
    linear.add_argument("--file", action="append", default=[], metavar="PATH",
                        help="any LIBSVM file, keyed by its stem (repeatable; without "
                             "--datasets only the files run)")
    linear.add_argument("--positive", type=float, default=None, metavar="LABEL",
                        help="the label of --file that is positive, other labels "
                             "negative; None: +1 (or 1)")
    linear.add_argument("--n-test", type=int, default=300,
                        help="held-out test rows per trial (the paper's 300)")
    linear.add_argument("--l2s", type=_floats, default="0.01,0.03,0.1,0.3",
                        help="ADPUE's selection grid of L2 strengths")
    linear.add_argument("--rounds", type=int, default=5,
                        help="ADPUE's largest number of alternate-learning rounds T")
    linear.add_argument("--selection", default="exposure_likelihood",
                        choices=("exposure_likelihood", "reference_risk"),
                        help="ADPUE's selection score")
    linear.add_argument("--steps", type=int, default=200,
                        help="full-batch Adam steps per fit, at most (see --tol)")
    linear.add_argument("--tol", type=float, default=0.0,
                        help="each linear model stops once its objective changes by at most "
                             "tol x |objective| over 20 steps (e.g. 1e-5); 0 (default): every "
                             "fit takes --steps")
    linear.add_argument("--data-dir", default=None,
                        help="folder of the LIBSVM files; None: $ADPUE_DATA_DIR")
    linear.add_argument("--exposure-mechanism", default="paper",
                        choices=("paper", "logistic", "cloglog"),
                        help="θ(e=1|x): the paper's formula, or a logistic / complementary "
                             "log-log function of a fixed random projection, calibrated to "
                             "--exposure-rate")
    linear.add_argument("--jobs", type=int, default=1,
                        help="settings (data set, rate, α) run at once, each in its own "
                             "process: the same numbers, about N times faster on N cores")
    linear.add_argument("--no-recommended", action="store_true",
                        help="skip the Recommended column (adp.fit_pue per trial, ~1-3 s "
                             "a trial and setting on 2 cores)")
    linear.add_argument("--recommended-epochs", type=int, default=1,
                        help="Recommended: fit_pue's epochs (1: one epoch of "
                             "--recommended-min-steps steps, trained to convergence)")
    linear.add_argument("--recommended-lr", type=float, default=0.01,
                        help="Recommended: fit_pue's learning rate")
    linear.add_argument("--recommended-min-steps", type=int, default=500,
                        help="Recommended: fit_pue's min_steps")
    linear.add_argument("--recommended-batch-size", type=int, default=4096,
                        help="Recommended: fit_pue's batch_size (the default: every "
                             "paper set's rows in one batch, full-batch steps as the "
                             "other columns take)")
    linear.add_argument("--recommended-candidates", type=_names, default=None,
                        help="Recommended: comma-separated fit_pue candidates; None: "
                             "fit_pue's defaults")
    linear.add_argument("--recommended-l2", type=_floats, default=None,
                        help="Recommended: L2 penalties of the linear net, comma-separated, "
                             "one net each (fit_pue keeps the first unless another's choice "
                             "has a clearly lower held-out NLL); default: the one every "
                             "other column carries (--l2) and a tenth of it; 0: none")
    linear.add_argument("--recommended-jit", action=argparse.BooleanOptionalAction,
                        default=True,
                        help="Recommended: fit_pue's jit_compile (every net's step under XLA: "
                             "on 2 CPU cores 27-55 %% less time per trial, the same accuracies "
                             "in 1,200 of 1,200 trials checked; --no-recommended-jit: without)")
    neural.add_argument("--epochs", type=int, default=100, help="epochs per model")
    neural.add_argument("--ratios", type=_floats, default="0.1,0.3,0.5,0.7,0.9",
                        help="separate ratios")
    neural.add_argument("--rows", type=int, default=None,
                        help="use a seeded subsample of this many rows (CPU runs); None: "
                             "every row")
    neural.add_argument("--n-test", type=int, default=10_000, help="held-out test rows")
    neural.add_argument("--val-fraction", type=float, default=0.2,
                        help="share of PU and E rows held out to choose ADPUE's round")
    neural.add_argument("--refresh-every", type=int, default=1,
                        help="epochs per alternate-learning round of ADPUE")
    neural.add_argument("--theta-epochs", type=int, default=10,
                        help="epochs of the exposure network used by the selection score")
    for p in (*sub.choices.values(), *kinds.choices.values()):  # also after the command
        p.add_argument("--verbose", action="store_true", default=argparse.SUPPRESS,
                       help=_VERBOSE_HELP + " (default: False)")
    return parser


_VERBOSE_HELP = "show TensorFlow's own start-up and C++ logs"
#: Every ``--help`` shows each option's default.
_HELP = argparse.ArgumentDefaultsHelpFormatter

#: What TensorFlow's C++ side writes while it starts: absl's pre-init notice, every
#: INFO line, and the warnings/errors of its CPU-feature and CUDA probing.
_STARTUP_NOISE = re.compile(
    r"WARNING: All log messages before absl::InitializeLog\(\) is called"
    r"|I\d{4} [\d:.]+\s+\d+ \S+:\d+\] "
    r"|[WE]\d{4} [\d:.]+\s+\d+ (cuda\w*|cudart_stub|cpu_feature_guard|port)\.cc:\d+\] "
    r"|To enable the following instructions: ")


@contextlib.contextmanager
def _native_logs_hidden() -> Iterator[None]:
    """Hide TensorFlow's C++ start-up logs; show any other native output afterwards.

    File descriptor 2 (where C++ code writes) goes to a temporary file while
    the command runs; ``sys.stderr`` keeps writing to the terminal. On exit
    the file's lines, less :data:`_STARTUP_NOISE`, are written to stderr.
    """
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # C++ logs once absl is set up
    logging.getLogger("tensorflow").setLevel(logging.ERROR)  # retracing notices of the benches
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(2)
    log = tempfile.TemporaryFile()
    os.dup2(log.fileno(), 2)
    python_stderr = sys.stderr
    try:
        on_fd2 = python_stderr.fileno() == 2
    except (AttributeError, OSError, ValueError):  # e.g. a capture object in tests
        on_fd2 = False
    if on_fd2:  # Python's own messages stay on the terminal, line by line
        sys.stderr = open(os.dup(saved), "w", buffering=1, errors="backslashreplace",
                          encoding=getattr(python_stderr, "encoding", None) or "utf-8")
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
        sys.stderr = python_stderr
        log.seek(0)
        kept = [line for line in log.read().decode("utf-8", "replace").splitlines()
                if not _STARTUP_NOISE.match(line)]
        log.close()
        if kept:
            print("\n".join(kept), file=sys.stderr, flush=True)


def _items(text: str, what: str) -> list[str]:
    """The comma-separated items of ``text``; an empty item (``"0.3,"``, ``"a,,b"``) is refused."""
    items = [t.strip() for t in text.split(",")]
    if any(items) and not all(items):  # "0.3," or "a,,b" (nothing at all: empty, said later)
        raise argparse.ArgumentTypeError(
            f"expected comma-separated {what}, got {text!r}, which has an empty item")
    return [t for t in items if t]


def _names(text: str) -> tuple[str, ...]:
    names = tuple(_items(text, "data set names"))
    if not names:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated data set names, got {text!r} (leave --datasets out "
            "for the paper's data sets)")
    return names


def _floats(text: str) -> tuple[float, ...]:
    items = _items(text, "numbers")
    try:
        return tuple(float(t) for t in items)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated numbers, got {text!r}") from None


def _bench(args: argparse.Namespace) -> int:
    from adpue_tf.experiments import bench
    from adpue_tf.experiments.table1 import LinearBenchConfig
    from adpue_tf.experiments.table2 import NeuralBenchConfig

    strict = args.datasets is not None  # a data set asked for by name must load
    common = dict(trials=args.trials, seed=args.seed)
    stream = None if args.quiet else sys.stderr
    if args.table == "linear":
        if not args.exposure_rate:
            raise ValueError("`--exposure-rate` is empty; give one or more rates in (0, 1).")
        default = () if args.file else bench.LINEAR_DATASETS
        cfg = LinearBenchConfig(alphas=args.alphas, steps=args.steps, tol=args.tol,
                                data_dir=args.data_dir,
                                datasets=args.datasets or default,
                                exposure_rate=args.exposure_rate[0],
                                exposure_rates=args.exposure_rate, files=tuple(args.file),
                                positive=args.positive, recipe_l2s=args.l2s,
                                recipe_rounds=args.rounds, recipe_criterion=args.selection,
                                exposure_mechanism=args.exposure_mechanism,
                                recommended=not args.no_recommended,
                                recommended_epochs=args.recommended_epochs,
                                recommended_learning_rate=args.recommended_lr,
                                recommended_min_steps=args.recommended_min_steps,
                                recommended_batch_size=args.recommended_batch_size,
                                recommended_candidates=args.recommended_candidates,
                                recommended_l2=args.recommended_l2,
                                recommended_jit=args.recommended_jit,
                                n_test=args.n_test, **common)
        path = bench.run_linear(cfg, args.out, strict=strict, progress=stream,
                                command=args.command_line, jobs=args.jobs)
    else:
        neural = NeuralBenchConfig(epochs=args.epochs, ratios=args.ratios, rows=args.rows,
                                   n_test=args.n_test, exposure_rate=args.exposure_rate,
                                   val_fraction=args.val_fraction,
                                   refresh_every=args.refresh_every,
                                   theta_epochs=args.theta_epochs,
                                   datasets=args.datasets or bench.NEURAL_DATASETS, **common)
        path = bench.run_neural(neural, args.out, strict=strict, progress=stream,
                                command=args.command_line)
    print(path.read_text())
    print(f"written: {path}")
    return 0


def _simulate_logs(args: argparse.Namespace) -> int:
    from adpue_tf.synthetic import write_ad_log

    start = time.monotonic()
    meta = write_ad_log(args.out, rows=args.rows, shards=args.shards, seed=args.seed,
                        eval_rows=args.eval_rows, exposure_share=args.exposure_share)
    counts = ", ".join(f"{k}: {v:,} rows" for k, v in meta["counts"].items())
    print(f"wrote {args.out}: {counts}; {time.monotonic() - start:.1f} s")
    return 0


def _demo(args: argparse.Namespace) -> int:
    from adpue_tf.experiments.demo import DemoConfig, format_table, run_demo

    cfg = DemoConfig(seeds=args.seeds, epochs=args.epochs,
                     exposure_rate=args.exposure_rate, split=args.split)
    start = time.monotonic()
    scores = run_demo(cfg, progress=None if args.quiet else sys.stderr)
    print(format_table(scores, cfg))
    print(f"\nwall time: {time.monotonic() - start:.1f} s")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``adpue-tf`` console script."""
    args = build_parser().parse_args(argv)  # --help, --version and usage errors: no TensorFlow
    words = list(sys.argv[1:] if argv is None else argv)
    args.command_line = "adpue-tf " + " ".join(shlex.quote(w) for w in words)
    command = {"demo": _demo, "bench": _bench, "simulate-logs": _simulate_logs}[args.command]
    try:
        with contextlib.nullcontext() if args.verbose else _native_logs_hidden():
            return command(args)
    except (ValueError, FileNotFoundError, ImportError) as err:
        print(f"adpue-tf: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
