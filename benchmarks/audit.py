"""The reliability audit: hundreds of probes of the public API, each result classified.

Each probe calls one public entry point as a user would (a bad argument, a
wrong convention, a file in the way, a path to protect, a process killed
part-way, or a valid call) and says what it expects: an error naming the
argument, or a result a check accepts. The runner (``benchmarks.audit_runner``)
classifies what happened as clear error, correct, obscure, silent, data loss
or crash; its docstring defines the classes.

This module collects the probe families, which import the runner's types and
the shared values (``benchmarks.audit_values``) but never this module:

* ``audit_probes_data``: the label layout, batch counts, builders,
  with_propensity, TFRecord reading;
* ``audit_probes_losses``: the loss classes and the registry;
* ``audit_probes_models``: DebiasedModel, callbacks, metrics, scores, the
  exposure models, the tuner, the synthetic data;
* ``audit_probes_fit``: ``fit_pue`` and its inputs, ``choose``, ``RatioLogit``;
* ``audit_probes_io``: serving and the command line;
* ``audit_probes_kills``: concurrent readers and writers, and processes killed
  part-way (exports, benches, logs).

Run ``python -m benchmarks.audit`` from the repository root (a few minutes on
2 cores); it writes ``benchmarks/results/audit.md`` with the counts by class and
every probe that is not a clear error or correct. ``--only WORDS`` runs the
probes whose id holds ``WORDS``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from benchmarks.audit_probes_data import data_probes
from benchmarks.audit_probes_fit import fit_pue_probes
from benchmarks.audit_probes_io import io_probes
from benchmarks.audit_probes_kills import kill_probes
from benchmarks.audit_probes_losses import all_loss_probes
from benchmarks.audit_probes_models import model_probes
from benchmarks.audit_runner import CLASSES, Probe, classify, report, run

ROOT = Path(__file__).resolve().parents[1]


def all_probes() -> list[Probe]:
    """Every probe of the audit, in a fixed order."""
    return (data_probes() + all_loss_probes() + io_probes() + model_probes()
            + fit_pue_probes() + kill_probes())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="run only the probes whose id holds these words")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "audit.md"),
                        help="the markdown report (not written with --only)")
    args = parser.parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import warnings

    warnings.simplefilter("ignore")  # the probes provoke warnings on purpose; judged by class
    from benchmarks.common import command_line, provenance_block

    start = time.monotonic()
    results = run(all_probes(), args.only)
    block, _ = provenance_block(command_line("benchmarks.audit", argv),
                                seeds="0 (the probes' data and nets)")
    text = report(results, time.monotonic() - start, block)
    if args.only:
        print(text)
    else:
        Path(args.out).write_text(text, encoding="utf-8")
        print(text.split("## Probes by entry point")[0])
    bad = sum(k in ("silent", "data loss", "crash") for _, k, _, _ in results)
    return 1 if bad else 0


__all__ = ["CLASSES", "Probe", "all_probes", "classify", "main", "report", "run"]

if __name__ == "__main__":
    sys.exit(main())
