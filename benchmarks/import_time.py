"""How long `import adpue_tf` takes on top of `import tensorflow, keras`.

Each of ``--runs`` fresh interpreters imports TensorFlow and Keras, then
``adpue_tf`` and every name of its ``__all__`` (the package loads them on first
use), and times both steps with the wall clock and with the process's
CPU time (which other processes on a busy machine do not inflate). The report
gives the medians; the target is an overhead of at most 0.3 s.

Usage (from the repository root)::

    .venv/bin/python -m benchmarks.import_time                 # prints a Markdown table
    .venv/bin/python -m benchmarks.import_time --runs 9 --out benchmarks/results/import_time.md

It also lists the modules the import adds that are not ``adpue_tf``'s own, so an
optional dependency imported too early shows up at once.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

CHILD = r"""
import json, sys, time
w0, c0 = time.perf_counter(), time.process_time()
import tensorflow, keras
w1, c1 = time.perf_counter(), time.process_time()
before = set(sys.modules)
import adpue_tf
# The package loads its public names on first use (PEP 562): touch them all.
for name in adpue_tf.__all__:
    getattr(adpue_tf, name)
w2, c2 = time.perf_counter(), time.process_time()
added = sorted(m for m in set(sys.modules) - before if not m.startswith("adpue_tf"))
print(json.dumps({"tf_wall": w1 - w0, "tf_cpu": c1 - c0, "adp_wall": w2 - w1,
                  "adp_cpu": c2 - c1, "added": added, "tf": tensorflow.__version__,
                  "keras": keras.__version__, "version": adpue_tf.__version__}))
"""


def measure(runs: int, python: str = sys.executable) -> list[dict]:
    """``runs`` fresh interpreters, one measurement each (outside the source tree)."""
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    out = []
    for _ in range(runs):
        proc = subprocess.run([python, "-c", CHILD], capture_output=True, text=True, env=env,
                              check=True, cwd=os.path.dirname(os.path.abspath(__file__)) + "/..")
        out.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    return out


def report(results: list[dict], python: str, provenance: str = "") -> str:
    """The Markdown report: medians, the overhead's range, the modules the import adds."""
    med = {k: statistics.median(r[k] for r in results)
           for k in ("tf_wall", "tf_cpu", "adp_wall", "adp_cpu")}
    spread = (min(r["adp_wall"] for r in results), max(r["adp_wall"] for r in results))
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    first = results[0]
    added = first["added"]
    lines = [
        "# Import time: `import adpue_tf` on top of `import tensorflow, keras`",
        "",
        *([provenance] if provenance else []),
        f"Interpreter measured: `{Path(python).name}`; load average {load:.1f} at the end; "
        f"TensorFlow {first['tf']}, Keras {first['keras']}, adpue_tf {first['version']}.",
        "",
        "| step | median wall (s) | median CPU (s) |",
        "|---|---|---|",
        f"| `import tensorflow, keras` | {med['tf_wall']:.3f} | {med['tf_cpu']:.3f} |",
        f"| `import adpue_tf` + every public name, after it (the overhead) | {med['adp_wall']:.3f} | "
        f"{med['adp_cpu']:.3f} |",
        "",
        f"Overhead wall-clock range over the runs: {spread[0]:.3f}-{spread[1]:.3f} s. "
        "Target: overhead at most 0.3 s.",
        "",
        f"Modules the import adds besides `adpue_tf`'s own ({len(added)}): "
        + (", ".join(f"`{m}`" for m in added[:40]) or "none")
        + (" ..." if len(added) > 40 else "") + ".",
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.import_time",
                                     description=__doc__.split("\n")[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--runs", type=int, default=7, help="fresh interpreters")
    parser.add_argument("--python", default=sys.executable, help="interpreter to measure")
    parser.add_argument("--out", type=Path, default=None,
                        help="write the Markdown report here too")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be >= 1")
    from benchmarks.common import command_line, provenance_block  # after the measurement

    results = measure(args.runs, args.python)
    block, _ = provenance_block(command_line("benchmarks.import_time", argv),
                                seeds="none (nothing random)")
    text = report(results, args.python, block)
    print(text, end="")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
