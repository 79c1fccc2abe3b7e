"""What a loop of ``fit_pue`` calls leaves in the process: plain calls, and inside ``keep_compiled``.

Each mode runs in a fresh process: ``--calls`` calls of ``adp.fit_pue`` with one
``build_net`` (a linear net, ``synthetic_pue(1000, 1000)``, ``epochs=2``, seeds
0, 1, ...), ``gc.collect()`` after each, and the resident memory after each
call; the growth per call is measured from the end of the third call to the
end of the last (the first calls load TensorFlow's kernels and, in a block,
trace the passes that later calls reuse). ``keras`` does the same for a reference: each
"call" compiles and fits ``--models`` new plain Keras models (BCE on ``W``),
which is what TensorFlow keeps of any compiled model::

    python -m benchmarks.fit_pue_memory --calls 10
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import subprocess
import sys

MODES = ("plain", "block", "keras")


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _child(mode: str, calls: int, models: int) -> list[float]:
    import keras

    import adpue_tf as adp

    s = adp.synthetic.synthetic_pue(1000, 1000, seed=0)

    def build() -> keras.Model:
        return keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])

    def one(seed: int) -> None:
        if mode == "keras":
            for _ in range(models):
                m = build()
                m.compile("adam", keras.losses.BinaryCrossentropy(from_logits=True))
                m.fit(s.x_pu, s.w_pu, epochs=2, batch_size=256, verbose=0)
        else:
            adp.fit_pue(build, s.x_pu, s.w_pu, s.x_e, s.e_e, epochs=2, seed=seed, verbose=0)

    rss = []
    with adp.experiments.keep_compiled() if mode == "block" else contextlib.nullcontext():
        for seed in range(calls):
            one(seed)
            gc.collect()
            rss.append(_rss_mb())
    return rss


def main(argv: list[str] | None = None) -> dict:
    """Run each mode in a fresh process; print and return the growth per call (MB)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--calls", type=int, default=10, help="calls per mode (at least 4)")
    ap.add_argument("--models", type=int, default=8, help="Keras models per 'keras' call")
    ap.add_argument("--child", choices=MODES, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.calls < 4:
        ap.error(f"--calls must be at least 4, got {args.calls}")
    if args.child:
        print(json.dumps(_child(args.child, args.calls, args.models)))
        return {}
    out = {}
    for mode in MODES:
        run = subprocess.run([sys.executable, "-m", "benchmarks.fit_pue_memory", "--child", mode,
                              "--calls", str(args.calls), "--models", str(args.models)],
                             capture_output=True, text=True, check=True)
        rss = json.loads(run.stdout.strip().splitlines()[-1])
        out[mode] = {"rss_mb": [round(v, 1) for v in rss],
                     "mb_per_call": round((rss[-1] - rss[2]) / (len(rss) - 3), 2)}
        print(mode, json.dumps(out[mode]), flush=True)
    return out


if __name__ == "__main__":
    main()
