"""The ``adpue-tf`` command.

Example:
    >>> from adpue_tf.cli import build_parser
    >>> build_parser().parse_args(["demo", "--seeds", "3"]).seeds
    3
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Sequence

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``adpue-tf``."""
    from adpue_tf import __version__

    parser = argparse.ArgumentParser(
        prog="adpue-tf",
        description="Debiased learning from positive, unlabeled and exposure data.")
    parser.add_argument("--version", action="version", version=f"adpue-tf {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="semi-synthetic PUE demo on breast-cancer data")
    demo.add_argument("--seeds", type=int, default=5, help="number of trials (>= 2)")
    demo.add_argument("--epochs", type=int, default=60, help="epochs per model")
    demo.add_argument("--exposure-rate", type=float, default=0.5, help="target θ(e=1)")
    demo.add_argument("--split", type=float, default=0.5, help="PU share of training rows")
    demo.add_argument("--quiet", action="store_true", help="no progress display")
    return parser


def _demo(args: argparse.Namespace) -> int:
    from adpue_tf.demo import DemoConfig, format_table, run_demo

    cfg = DemoConfig(seeds=args.seeds, epochs=args.epochs,
                     exposure_rate=args.exposure_rate, split=args.split)
    start = time.monotonic()
    scores = run_demo(cfg, progress=None if args.quiet else sys.stderr)
    print(format_table(scores, cfg))
    print(f"\nwall time: {time.monotonic() - start:.1f} s")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``adpue-tf`` console script."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    args = build_parser().parse_args(argv)
    try:
        return {"demo": _demo}[args.command](args)
    except ValueError as err:
        print(f"adpue-tf: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
