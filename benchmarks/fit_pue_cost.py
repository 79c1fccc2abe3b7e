"""What ``adp.fit_pue`` costs against one BCE fit of the same net on the same data (ad-log simulator).

Draws PU rows and exposure-log rows from :class:`adpue_tf.synthetic.ad_log.AdLogSimulator`
(feature dicts: user, item and campaign ids, a context vector), builds an
embedding MLP, and times, in one process: a BCE fit on ``W`` over the PU rows
(``epochs`` epochs, the batches and ``steps_per_execution`` fit_pue uses), then
``fit_pue`` with its defaults, then the BCE fit again. CPU time (all threads)
and wall time; the ratio is fit_pue over the mean of the two BCE fits.

Usage::

    python -m benchmarks.fit_pue_cost --pu 200000 --e 100000 --epochs 5
    python -m benchmarks.fit_pue_cost --pu 60000 --e 30000 --epochs 2 --net wide
    python -m benchmarks.fit_pue_cost --mixed mixed_bfloat16 --batch-size 4096   # a GPU
    python -m benchmarks.fit_pue_cost --candidates bce_w,ratio,likelihood --no-refit
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras
import numpy as np

import adpue_tf as adp
from adpue_tf.experiments.helpers import sigmoid
from adpue_tf.recommend.train import pu_batches, steps_per_epoch
from adpue_tf.synthetic.ad_log import AdLogConfig, AdLogSimulator
from benchmarks.ads_scale_methods import scores

KEYS = ("user_id", "item_id", "campaign_id", "context")


#: ``--net``: (embedding size, hidden widths) of :func:`build_net`.
NETS = {"small": (8, (64, 64, 32)), "wide": (32, (256, 256, 128))}


def build_net(sim: AdLogSimulator, net: str = "small") -> keras.Model:
    """Embeddings of the three ids and the context vector -> an MLP -> one logit.

    ``"small"``: embeddings of 8, hidden layers 64, 64, 32; ``"wide"``: 32 and
    256, 256, 128 (:data:`NETS`).
    """
    dim, widths = NETS[net]
    c = sim.config
    sizes = {"user_id": c.n_users, "item_id": c.n_items, "campaign_id": c.n_campaigns}
    inputs = {k: keras.Input((), dtype="int64", name=k) for k in sizes}
    inputs["context"] = keras.Input((c.context_dim,), name="context")
    parts = [keras.layers.Embedding(n, dim)(inputs[k]) for k, n in sizes.items()]
    h = keras.layers.Concatenate()([*parts, inputs["context"]])
    # Nested as when every recorded result was made: a layer's initial weights
    # follow the order the layers are constructed in.
    first, second, third = widths
    h = keras.layers.Dense(second, "relu")(keras.layers.Dense(first, "relu")(h))
    return keras.Model(inputs, keras.layers.Dense(1)(keras.layers.Dense(third, "relu")(h)))


def gpu_names() -> list[str]:
    """The names of the GPUs TensorFlow sees (empty on a CPU-only machine)."""
    import tensorflow as tf

    return [tf.config.experimental.get_device_details(g).get("device_name", g.name)
            for g in tf.config.list_physical_devices("GPU")]


def timed(fn):
    cpu, wall = time.process_time(), time.perf_counter()
    out = fn()
    return out, time.process_time() - cpu, time.perf_counter() - wall


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pu", type=int, default=200_000)
    ap.add_argument("--e", type=int, default=100_000)
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--batch-size", type=int, default=512)
    ap.add_argument("--mixed", default=None, metavar="POLICY",
                    help="a Keras dtype policy for every net (e.g. mixed_bfloat16 on a GPU)")
    ap.add_argument("--jit", action="store_true",
                    help="XLA for both: the BCE fit's jit_compile and fit_pue's")
    ap.add_argument("--net", choices=sorted(NETS), default="small",
                    help="the net of both fits: small (embeddings 8, MLP 64-64-32) or wide "
                         "(embeddings 32, MLP 256-256-128)")
    ap.add_argument("--policy", default="logistic", help="AdLogConfig.policy (logistic, cloglog)")
    ap.add_argument("--base-rate", type=float, default=None, help="AdLogConfig.base_rate")
    ap.add_argument("--seed", type=int, default=0,
                    help="s: PU, E and test rows drawn with seeds 10s+1, 10s+2, 10s+3; "
                         "the nets seeded with s")
    ap.add_argument("--candidates", default=None, metavar="NAMES",
                    help="comma-separated fit_pue candidates (default: fit_pue's own)")
    ap.add_argument("--no-refit", dest="refit", action="store_false",
                    help="fit_pue(refit=False): the choice's models of the training part")
    ap.add_argument("--out", default="")
    a = ap.parse_args(argv)
    candidates = None if a.candidates is None else tuple(a.candidates.split(","))
    if a.mixed:
        keras.mixed_precision.set_dtype_policy(a.mixed)
    sim = AdLogSimulator(AdLogConfig(policy=a.policy, base_rate=a.base_rate), seed=0)
    s = 10 * a.seed
    pu, ex = sim.sample(a.pu, seed=s + 1), sim.sample(a.e, seed=s + 2)
    test = sim.sample(50_000, seed=s + 3)
    x_pu = {k: pu.features[k] for k in KEYS}
    x_e = {k: ex.features[k] for k in KEYS}

    def bce() -> keras.Model:
        keras.utils.set_random_seed(a.seed)
        net = build_net(sim, a.net)
        steps = steps_per_epoch(a.pu, a.batch_size, a.epochs, 500)
        net.compile(optimizer=keras.optimizers.Adam(1e-2), steps_per_execution=steps,
                    loss=keras.losses.BinaryCrossentropy(from_logits=True),
                    jit_compile=a.jit)
        net.fit(pu_batches(x_pu, pu.w.astype(np.float32), batch_size=a.batch_size, seed=a.seed),
                epochs=a.epochs, steps_per_epoch=steps, verbose=0)
        return net

    def pue():
        return adp.fit_pue(lambda: build_net(sim, a.net), x_pu, pu.w, x_e, ex.e, epochs=a.epochs,
                           batch_size=a.batch_size, verbose=0, jit_compile=a.jit, seed=a.seed,
                           candidates=candidates, refit=a.refit)

    load = [os.getloadavg()[0]]
    net, cpu1, wall1 = timed(bce)
    load.append(os.getloadavg()[0])
    fit, cpu_f, wall_f = timed(pue)
    load.append(os.getloadavg()[0])
    _, cpu2, wall2 = timed(bce)
    load.append(os.getloadavg()[0])
    x_t = {k: test.features[k] for k in KEYS}

    truth = {"y": test.y, "p_y": test.p_y, "theta": test.theta}

    def errors(model: keras.Model) -> tuple[float, float]:
        """MAE and mean KL(p ‖ p̂) to the true p, from one pass over the test rows."""
        p = sigmoid(model.predict(x_t, batch_size=8192, verbose=0).ravel())
        return float(np.mean(np.abs(p - test.p_y))), scores(p, truth)["kl_to_p"]

    err = {"bce_w_fit": errors(net), "fit_pue": errors(fit.model)}

    res = {"pu": a.pu, "e": a.e, "policy": a.policy, "base_rate": a.base_rate, "seed": a.seed,
           "epochs": a.epochs, "batch_size": a.batch_size, "net": a.net,
           "dtype_policy": a.mixed or "float32", "jit_compile": a.jit, "gpu": gpu_names(),
           "bce_cpu_s": [cpu1, cpu2], "bce_wall_s": [wall1, wall2],
           "fit_pue_cpu_s": cpu_f, "fit_pue_wall_s": wall_f,
           "cpu_ratio": cpu_f / np.mean([cpu1, cpu2]),
           "wall_ratio": wall_f / np.mean([wall1, wall2]),
           "fit_pue_seconds": fit.seconds, "choice": fit.choice,
           "candidates": list(candidates or adp.recommend.DEFAULT_CANDIDATES), "refit": a.refit,
           "epochs_kept": fit.epochs, "mae_to_p": {k: e[0] for k, e in err.items()},
           "kl_to_p": {k: e[1] for k, e in err.items()},
           "load_1min": load, "cores": os.cpu_count(),
           "commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"],
                                    capture_output=True, text=True).stdout.strip()}
    text = json.dumps(res, indent=1)
    print(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text + "\n")
    return res


if __name__ == "__main__":
    main()
