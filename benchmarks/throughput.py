"""Training throughput of the debiased losses against plain binary cross-entropy.

Trains the same MLP (``dim``-``width``-``width``-1, ReLU; ``--width`` 64) on
the same synthetic PUE batches (:func:`adpue_tf.synthetic.synthetic_pue`
packed by :func:`adpue_tf.data.pue_dataset`) in one process, with:

* ``bce``: ``keras.losses.BinaryCrossentropy`` on ``W`` (a plain model fed
  ``y[:, :1]`` through ``Dataset.map``): the reference;
* ``adpue``: ``adp.ADPUELoss`` (direct minimisation) on a plain model;
* ``debiased``: ``adp.DebiasedModel`` + ``adp.RefreshDagger(every_n_epochs=1)``
  (alternate learning: ``f†`` from the frozen snapshot, one refresh per epoch);
* ``debiased_direct``: ``adp.DebiasedModel`` without ``RefreshDagger`` (direct
  mode: ``f† = σ(z)``, no snapshot pass): the wrapper's own cost (finite
  checks, risk tracker, ``f†`` column), compared with ``adpue``; ``debiased``
  against it is the cost of the snapshot's pass;
* ``adpue_metrics``: ``adpue`` plus ``adp.metrics.risk_metrics`` (what a
  plain model needs to log R+/R-); its target is relative to ``adpue``;
* ``adpue_keras4``: ``adpue`` plus four of the cheapest Keras metrics (each the
  mean of the model output, ``keras.metrics.MeanMetricWrapper``): what logging
  any four values per step costs in Keras, the floor for ``adpue_metrics``.

``--model ads`` trains instead the ad-log feature-dict net of
:mod:`benchmarks.fit_pue_cost` (embeddings of user, item and campaign ids and a
context vector -> 64-64-32-1) on rows of
:class:`adpue_tf.synthetic.ad_log.AdLogSimulator`: the ads-scale model, as a
dict of features (``--dim`` and ``--width`` then unused).

Each timed unit is one epoch of ``--steps`` steps, measured from the epoch's
start to its end (after the epoch-end refresh), so ``fit``'s set-up is
excluded. The variants take turns (round robin) so that drifting machine load
affects them alike; the first ``--warmup`` epochs of each (tracing, tf.data
start-up) are not counted; the report gives the median of ``--repeats``
epochs in steps/s, the ratio to ``bce``, and the median over rounds of the
paired wall-time and CPU-time ratios to ``bce`` (epochs of one round ran back
to back). ``--threads 1`` runs TensorFlow on one thread (intra- and inter-op),
so that CPU time measures the compute of a step, not the threads' spinning.

Usage::

    python -m benchmarks.throughput                      # CPU, float32, graph mode
    python -m benchmarks.throughput --jit --steps 300 --repeats 7
    python -m benchmarks.throughput --mixed              # mixed_float16 (GPU)
    python -m benchmarks.throughput --threads 1 --variants bce,debiased --repeats 9
    python -m benchmarks.throughput --width 1024 --mixed mixed_bfloat16 --jit   # GPU
    python -m benchmarks.throughput --model ads --batch-size 4096 --jit        # feature dicts
    python -m benchmarks.throughput --backend jax --variants bce,debiased      # Keras on JAX

``--backend`` runs the benchmark under that Keras backend (a fresh process with
``KERAS_BACKEND`` set; the data stay ``tf.data``); JAX compiles every step with
XLA, as Keras does there by default, whatever ``--jit``.

Writes ``benchmarks/results/throughput.md`` (``--out``) and prints a summary.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras
import tensorflow as tf

import adpue_tf as adp
from adpue_tf import metrics, synthetic
from benchmarks.common import EpochTimer, cpu_model

#: Minimum throughput relative to a reference variant (the targets of
#: benchmarks/README.md): variant -> (reference, {measure: minimum}), where a
#: measure is "ratio" (median steps/s over the reference's), "paired" (median
#: over rounds of the wall-time ratio) or "paired_cpu" (the same in CPU time).
TARGETS = {"adpue": ("bce", {"ratio": 0.95}),
           "debiased": ("bce", {"paired_cpu": 0.90}),
           "adpue_metrics": ("adpue", {"ratio": 0.97})}
MEASURES = {"ratio": "ratio", "paired": "paired", "paired_cpu": "paired CPU"}
#: Variants compared with another than bce, without a target.
REFERENCES = {"adpue_keras4": "adpue", "debiased_direct": "adpue"}
VARIANTS = ("bce", "adpue", "debiased", "debiased_direct", "adpue_metrics", "adpue_keras4")
DESCRIPTIONS = {
    "bce": "plain model, keras BinaryCrossentropy on W (y[:, :1] via Dataset.map)",
    "adpue": "plain model, ADPUELoss (direct minimisation)",
    "debiased": "DebiasedModel + RefreshDagger(every_n_epochs=1)",
    "debiased_direct": "DebiasedModel in direct mode (no RefreshDagger, no snapshot pass)",
    "adpue_metrics": "plain model, ADPUELoss + adp.metrics.risk_metrics",
    "adpue_keras4": "plain model, ADPUELoss + four Keras MeanMetricWrapper (mean output)",
}


#: The model and data lines of the report, per ``--model``.
MODELS = {"mlp": "MLP {a.dim}-{a.width}-{a.width}-1 (ReLU)",
          "ads": ("ad-log net: Embedding(user 8, item 8, campaign 8) + context -> "
                  "64-64-32-1 (ReLU), a dict of features")}
DATA = {"mlp": ("synthetic_pue({a.rows}, {a.rows}, dim={a.dim}), "
                "pue_dataset(batch_size={a.batch_size}, seed=0)"),
        "ads": ("AdLogSimulator(seed=0).sample({a.rows}) for PU and for E, "
                "pue_dataset(batch_size={a.batch_size}, seed=0)")}


def _jit(args: argparse.Namespace) -> bool:
    """``--jit`` on TensorFlow (XLA or its graph); always on JAX, where a step without
    ``jax.jit`` runs op by op (20x slower: it is no backend's normal step)."""
    return True if keras.backend.backend() == "jax" else args.jit


def _mean_output(y_true, y_pred):
    return y_pred[:, 0]


def _mlp(dim: int, seed: int, width: int = 64) -> keras.Model:
    keras.utils.set_random_seed(seed)
    return keras.Sequential([keras.Input((dim,)),
                             keras.layers.Dense(width, activation="relu"),
                             keras.layers.Dense(width, activation="relu"),
                             keras.layers.Dense(1)])


def _data(args: argparse.Namespace) -> tuple[SimpleNamespace, Callable[[], keras.Model]]:
    """The PU and exposure rows of ``args.model`` and a builder of its (seeded) net."""
    if args.model == "mlp":
        data = synthetic.synthetic_pue(args.rows, args.rows, dim=args.dim, seed=0)
        return (SimpleNamespace(x_pu=data.x_pu, w_pu=data.w_pu, x_e=data.x_e, e_e=data.e_e),
                lambda: _mlp(args.dim, seed=0, width=args.width))
    from adpue_tf.synthetic.ad_log import AdLogSimulator
    from benchmarks.fit_pue_cost import KEYS, build_net

    sim = AdLogSimulator(seed=0)
    pu, ex = sim.sample(args.rows, seed=1), sim.sample(args.rows, seed=2)

    def net() -> keras.Model:
        keras.utils.set_random_seed(0)
        return build_net(sim)
    return (SimpleNamespace(x_pu={k: pu.features[k] for k in KEYS}, w_pu=pu.w,
                            x_e={k: ex.features[k] for k in KEYS}, e_e=ex.e), net)


class _Run:
    """One variant: its model, dataset and callbacks, fitted one epoch at a time."""

    def __init__(self, name: str, args: argparse.Namespace, data: SimpleNamespace,
                 make_net: Callable[[], keras.Model]) -> None:
        self.name = name
        ds = adp.data.pue_dataset(data.x_pu, data.w_pu, data.x_e, data.e_e,
                                  batch_size=args.batch_size, seed=0,
                                  steps_per_epoch=args.steps)
        net = make_net()
        optimizer = keras.optimizers.Adam(1e-3)
        self.callbacks: list[keras.callbacks.Callback] = []
        if name == "bce":
            self.ds = ds.map(lambda x, y: (x, y[:, :1]), num_parallel_calls=tf.data.AUTOTUNE)
            self.model = net
            net.compile(optimizer, loss=keras.losses.BinaryCrossentropy(from_logits=True),
                        jit_compile=_jit(args), steps_per_execution=args.steps_per_execution)
        elif name in ("adpue", "adpue_metrics", "adpue_keras4"):
            self.ds, self.model = ds, net
            loss = adp.ADPUELoss(from_logits=True)
            logged = {"adpue": None, "adpue_metrics": metrics.risk_metrics(loss),
                      "adpue_keras4": [keras.metrics.MeanMetricWrapper(_mean_output, name=f"m{i}")
                                       for i in range(4)]}[name]
            net.compile(optimizer, loss=loss, jit_compile=_jit(args), metrics=logged,
                        steps_per_execution=args.steps_per_execution)
        elif name in ("debiased", "debiased_direct"):
            self.ds = ds
            self.model = adp.DebiasedModel(net)
            self.model.compile(optimizer, loss=adp.ADPUELoss(from_logits=True),
                               jit_compile=_jit(args),
                               steps_per_execution=args.steps_per_execution)
            if name == "debiased":
                self.callbacks.append(adp.RefreshDagger(every_n_epochs=1))
        else:
            raise ValueError(f"unknown variant {name!r}; choose from {VARIANTS}")
        self.timer = EpochTimer()
        self.epoch = 0

    def epoch_once(self) -> tuple[float, float]:
        self.model.fit(self.ds, initial_epoch=self.epoch, epochs=self.epoch + 1, verbose=0,
                       callbacks=[*self.callbacks, self.timer])
        self.epoch += 1
        return self.timer.times[-1]


def _machine() -> dict[str, str]:
    gpus = tf.config.list_physical_devices("GPU")
    gpu_names = []
    for g in gpus:
        details = tf.config.experimental.get_device_details(g)
        gpu_names.append(details.get("device_name", g.name))
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count()
    return {
        "CPU": cpu_model(),
        "CPU cores (logical, usable)": f"{os.cpu_count()}, {usable}",
        "GPU": ", ".join(gpu_names) or "none",
        "TensorFlow threads (intra-op, inter-op)": (
            f"{tf.config.threading.get_intra_op_parallelism_threads() or 'default'}, "
            f"{tf.config.threading.get_inter_op_parallelism_threads() or 'default'}"),
        "Python": platform.python_version(),
        "Keras backend": keras.backend.backend(),
        "TensorFlow": tf.__version__,
        "Keras": keras.__version__,
        "adpue_tf": adp.__version__,
        "Date (UTC)": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M"),
    }


def measure(args: argparse.Namespace) -> dict[str, list[tuple[float, float]]]:
    """(wall, CPU) epoch times of each variant, round robin; warm-up epochs dropped."""
    if args.mixed:
        keras.mixed_precision.set_dtype_policy(args.mixed)
    try:
        data, make_net = _data(args)
        runs = [_Run(name, args, data, make_net) for name in args.variants]
        times: dict[str, list[tuple[float, float]]] = {r.name: [] for r in runs}
        for i in range(args.warmup + args.repeats):
            for run in runs:
                t = run.epoch_once()
                if i >= args.warmup:
                    times[run.name].append(t)
            if args.verbose:
                print(f"round {i + 1}: " + ", ".join(
                    f"{r.name} {args.steps / r.timer.times[-1][0]:.0f}/s" for r in runs),
                    flush=True)
        return times
    finally:
        keras.mixed_precision.set_dtype_policy("float32")


def summarise(args: argparse.Namespace, times) -> dict[str, dict[str, float]]:
    """Median steps/s and the ratios to ``bce`` of each variant."""
    med = statistics.median

    def ratios(pairs, ref):
        wall, ref_wall = [w for w, _ in pairs], [w for w, _ in ref]
        return {
            "ratio": med(ref_wall) / med(wall),  # = median steps/s over the reference's
            # epochs of the same round ran back to back under similar load
            "paired": med(b / w for b, w in zip(ref_wall, wall)),
            "paired_cpu": med(rc / c for (_, rc), (_, c) in zip(ref, pairs)),
            "cpu_ratio": med(c for _, c in ref) / med(c for _, c in pairs),
        }
    out = {}
    for name, pairs in times.items():
        rates = [args.steps / w for w, _ in pairs]
        out[name] = {"rate": med(rates), "min": min(rates), "max": max(rates),
                     "cpu_ms": 1000 * med(c for _, c in pairs) / args.steps,
                     **ratios(pairs, times["bce"])}
        ref = REFERENCES.get(name) or TARGETS.get(name, ("bce",))[0]
        if ref in times:
            out[name]["target_ratios"] = ratios(pairs, times[ref])
        if name == "debiased" and "debiased_direct" in times:  # the snapshot's pass
            out[name]["snapshot_ratios"] = ratios(pairs, times["debiased_direct"])
    return out


def report(args: argparse.Namespace, times) -> str:
    stats = summarise(args, times)
    lines = ["# Training throughput: debiased losses vs. binary cross-entropy", "",
             "Generated by `python -m benchmarks.throughput"
             + "".join(f" {a}" for a in sys.argv[1:]) + "`; see benchmarks/README.md.", "",
             "## Machine", "", "| | |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in _machine().items()]
    lines += ["", "## Settings", "", "| | |", "|---|---|",
              f"| model | {MODELS[args.model].format(a=args)}, Adam(1e-3) |",
              f"| data | {DATA[args.model].format(a=args)} |",
              f"| steps per timed epoch | {args.steps} |",
              (f"| warm-up epochs / timed epochs per variant | {args.warmup} / {args.repeats} "
              "(round robin) |"),
              f"| jit_compile | {_jit(args)} |",
              f"| steps_per_execution | {args.steps_per_execution} |",
              f"| dtype policy | {args.mixed or 'float32'} |", "",
              "## Results", "",
              ("Ratio to bce: median steps/s over median bce steps/s; paired: median "
              "over rounds of the bce/variant epoch-time ratio; CPU: process CPU time "
              "per step (all threads), robust to other load on the machine; CPU ratio: "
              "of the medians; paired CPU: median over rounds of the bce/variant "
              "CPU-time ratio."), "",
              ("| variant | median steps/s | min–max | ratio to bce | paired | CPU ms/step "
              "| CPU ratio | paired CPU | target | |"),
              "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    notes = []
    for name in args.variants:
        s = stats[name]
        ref, target = TARGETS.get(name, (None, None))
        verdict, goal = "", ""
        if name in REFERENCES and "target_ratios" in s:
            t, ref = s["target_ratios"], REFERENCES[name]
            notes.append(f"- `{name}` against `{ref}` (no target): ratio {t['ratio']:.3f}, "
                         f"paired {t['paired']:.3f}, CPU ratio {t['cpu_ratio']:.3f}, "
                         f"paired CPU {t['paired_cpu']:.3f}.")
        if target is not None and "target_ratios" in s:
            t = s["target_ratios"]
            met = all(t[m] >= v for m, v in target.items())
            verdict = "met" if met else "**missed**"
            goal = ", ".join(f"{MEASURES[m]} ≥ {v:.2f}" for m, v in target.items()) + (
                "" if ref == "bce" else f" × {ref}")
            if ref != "bce":
                verdict += f" ({t['ratio']:.3f})"
                notes.append(f"- `{name}` against `{ref}`: ratio {t['ratio']:.3f}, paired "
                             f"{t['paired']:.3f}, CPU ratio {t['cpu_ratio']:.3f}, "
                             f"paired CPU {t['paired_cpu']:.3f}.")
        lines.append(
            f"| `{name}`: {DESCRIPTIONS[name]} | {s['rate']:.1f} | "
            f"{s['min']:.0f}–{s['max']:.0f} | {s['ratio']:.3f} | {s['paired']:.3f} | "
            f"{s['cpu_ms']:.2f} | {s['cpu_ratio']:.3f} | {s['paired_cpu']:.3f} | {goal} | "
            f"{verdict} |")
    if "snapshot_ratios" in stats.get("debiased", {}):
        t = stats["debiased"]["snapshot_ratios"]
        notes.append(f"- `debiased` against `debiased_direct` (the snapshot's pass): ratio "
                     f"{t['ratio']:.3f}, paired {t['paired']:.3f}, CPU ratio "
                     f"{t['cpu_ratio']:.3f}, paired CPU {t['paired_cpu']:.3f}.")
    lines += ["", *notes, ""] if notes else [""]
    return "\n".join(lines)


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=200, help="steps per timed epoch (200)")
    p.add_argument("--repeats", type=int, default=7, help="timed epochs per variant (7, >= 5)")
    p.add_argument("--warmup", type=int, default=2, help="untimed epochs per variant (2)")
    p.add_argument("--batch-size", type=int, default=512)
    p.add_argument("--dim", type=int, default=32, help="number of features (32)")
    p.add_argument("--width", type=int, default=64, help="units of each hidden layer (64)")
    p.add_argument("--threads", type=int, default=0,
                   help="TensorFlow intra- and inter-op threads (0: TensorFlow's default)")
    p.add_argument("--model", choices=sorted(MODELS), default="mlp",
                   help="mlp (synthetic arrays) or ads (the ad-log feature-dict net)")
    p.add_argument("--rows", type=int, default=50_000, help="rows of each of PU and E")
    p.add_argument("--jit", action="store_true", help="compile with jit_compile=True (XLA)")
    p.add_argument("--steps-per-execution", type=int, default=1,
                   help="Keras steps_per_execution of every variant (1)")
    p.add_argument("--mixed", nargs="?", const="mixed_float16", default=None,
                   metavar="POLICY", help="mixed precision policy (default mixed_float16)")
    p.add_argument("--variants", default=",".join(VARIANTS),
                   help=f"comma-separated, from {','.join(VARIANTS)}; bce first")
    p.add_argument("--out", default=str(Path(__file__).parent / "results" / "throughput.md"))
    p.add_argument("--verbose", action="store_true", help="print each round")
    p.add_argument("--backend", choices=("tensorflow", "jax", "torch"), default=None,
                   help="Keras backend to run under (default: this process's)")
    args = p.parse_args(argv)
    args.variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    if args.repeats < 5:
        p.error("--repeats must be at least 5")
    if args.threads < 0 or args.width < 1:
        p.error("--threads must be >= 0 and --width >= 1")
    bad = [v for v in args.variants if v not in VARIANTS]
    if bad or "bce" not in args.variants:
        p.error(f"--variants must include bce and come from {VARIANTS}; got {args.variants}")
    return args


def set_threads(n: int) -> None:
    """Run TensorFlow's ops on ``n`` intra-op and ``n`` inter-op threads.

    Must run before TensorFlow starts its runtime (the first op); otherwise a
    RuntimeError says that the setting cannot change any more.
    """
    if (tf.config.threading.get_intra_op_parallelism_threads(),
            tf.config.threading.get_inter_op_parallelism_threads()) == (n, n):
        return
    tf.config.threading.set_intra_op_parallelism_threads(n)
    tf.config.threading.set_inter_op_parallelism_threads(n)


def main(argv=None) -> None:
    args = parse_args(argv)
    if args.backend and args.backend != keras.backend.backend():
        # Keras fixes its backend at import: run again in a process that has it.
        import subprocess

        env = {**os.environ, "KERAS_BACKEND": args.backend}
        argv = list(sys.argv[1:] if argv is None else argv)
        raise SystemExit(subprocess.run([sys.executable, "-m", "benchmarks.throughput", *argv],
                                        env=env).returncode)
    if args.threads:
        set_threads(args.threads)
    times = measure(args)
    text = report(args, times)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    print(text)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
