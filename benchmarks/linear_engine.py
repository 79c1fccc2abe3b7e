"""The linear engine's step: a risk from coefficients computed once against the risk under ``vectorized_map``.

Builds the largest fit of Table 1's ADPUE recipe (one chunk of trials on the
paper's 1,800-row w8a subsample, or synthetic features of the same shape and
density when the file is absent: 16 models per trial, ADPUE with ``f†`` in
column 3, row weights of a 3-fold split) and times
:func:`adpue_tf.experiments.linear_fit.fit_linear_models` on it twice per path:
``linear form`` (the engine: :func:`adpue_tf.risks.linear_form`, one XLA program
for the loss and its gradient) and ``risk per model`` (the same risk wrapped so
that it has no linear form: the risk function under ``tf.vectorized_map`` at
every step, the engine before). Reports CPU and wall seconds of the second
(traced) call of each and the largest weight difference between the paths.

Usage::

    ADPUE_DATA_DIR=<dir with w8a> python -m benchmarks.linear_engine --trials 50 --steps 200
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np

from adpue_tf import risks
from adpue_tf.experiments import datasets, linear_fit, simulate
from adpue_tf.labels import pack_e, pack_pu


def _risk_per_model(*args, **kwargs):  # no linear form: the engine's former path
    return risks.adpue(*args, **kwargs)


def _problem(trials: int, models: int, seed: int = 0) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    try:
        ds = datasets.load("w8a", n_rows=datasets.paper_rows("w8a"), seed=seed)
        splits = [simulate.simulate_pue(ds.x, ds.y, exposure_rate=0.5, split=0.3, n_test=300,
                                        seed=t) for t in range(trials)]
        x = np.stack([np.concatenate([s.x_pu, s.x_e]) for s in splits]).astype(np.float32)
        y = np.stack([np.concatenate([pack_pu(s.w_pu), pack_e(s.e_e)]) for s in splits])
        source = "w8a (paper's 1,800-row subsample)"
    except (OSError, ValueError):
        x = ((rng.random((trials, 1500, 300)) < 0.039) * 1.0).astype(np.float32)
        y = np.zeros((trials, 1500, 3), np.float32)
        y[:, :450, 0] = rng.random((trials, 450)) < 0.2
        y[:, 450:, 1] = rng.random((trials, 1050)) < 0.5
        y[:, 450:, 2] = 1.0
        source = "synthetic, w8a's shape and density"
    ys = np.repeat(y[:, None], models, axis=1)
    dagger = rng.random((*ys.shape[:3], 1)).astype(np.float32)
    sw = (rng.random(ys.shape[:3]) < 2 / 3).astype(np.float32)
    return x, np.concatenate([ys, dagger], axis=-1), sw, source


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=50)
    parser.add_argument("--models", type=int, default=16)
    parser.add_argument("--steps", type=int, default=200)
    args = parser.parse_args()
    x, y, sw, source = _problem(args.trials, args.models)
    l2 = np.repeat([0.01, 0.03, 0.1, 0.3], -(-args.models // 4))[:args.models]
    print(f"{source}: {args.trials} trials x {args.models} models x {x.shape[1]} rows, "
          f"{x.shape[2]} features ({np.mean(x != 0):.1%} non-zero), {args.steps} steps")
    fits = {}
    for name, risk in (("linear form", risks.adpue), ("risk per model", _risk_per_model)):
        for call in ("first (with trace)", "second"):
            cpu, wall = time.process_time(), time.monotonic()
            fits[name] = linear_fit.fit_linear_models(x, y, risk, sample_weight=sw,
                                                      steps=args.steps, l2=l2, gamma=1.0)
            print(f"{name:15s} {call:19s} CPU {time.process_time() - cpu:6.1f} s, "
                  f"wall {time.monotonic() - wall:6.1f} s", flush=True)
    diff = np.abs(fits["linear form"].weights - fits["risk per model"].weights).max()
    print(f"largest weight difference between the paths: {diff:.2e} "
          f"(largest weight {np.abs(fits['risk per model'].weights).max():.2f})")


if __name__ == "__main__":
    main()
