"""Helper for tests/test_distributed.py: training steps with and without a strategy.

Logical devices must be configured before TensorFlow initialises its runtime,
so this runs in a fresh subprocess (importing it has no side effects: pytest's
``--doctest-modules`` imports it). It splits the CPU into two logical devices,
then for every case builds the same tiny model (fixed initial weights) once
under ``MirroredStrategy(["/cpu:0", "/cpu:1"])`` and once without a strategy,
takes the same SGD(learning_rate=1.0) step(s) on the same global batch, and
writes a JSON report: the logged loss and risk metrics, the weight deltas
(``-gradient`` for one step), the DebiasedModel state, what each replica saw
(so the test can check that the two replicas got different rows), and NumPy
reference gradients for the batch where the non-negative correction fires.

With ``--worker I`` it is one of two ``MultiWorkerMirroredStrategy`` workers
(``TF_CONFIG`` set by the caller, one CPU replica per worker) and trains with
``model.fit`` too: plain models wrapped in :class:`adpue_tf.MultiWorkerModel`,
``DebiasedModel`` as it is (both carry the fix for keras-team/keras#20585, see
:mod:`adpue_tf.distributed`), with ``BackupAndRestore`` among the callbacks.

Usage::

    python tests/dist_step.py OUT.json [--cases a,b]              # MirroredStrategy
    TF_CONFIG=... python tests/dist_step.py OUT.json --worker I   # one MWMS worker
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys

import keras
import numpy as np
import tensorflow as tf

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import adpue_tf as adp
from adpue_tf import metrics

DIM = 3
BATCH = 32
# Deterministic batches: under a strategy Keras's fit first draws one batch for
# its symbolic build (TensorFlowTrainer._maybe_symbolic_build) and then trains
# on a new iterator, so a reshuffling stream would train on its *second*
# shuffle there and on its first without a strategy.
SHUFFLE = False


def _sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


def _softplus(z):
    return np.logaddexp(0.0, z)


# ------------------------------------------------------------------ data
def _random_pue(seed=0):
    rng = np.random.default_rng(seed)
    x_pu, x_e = rng.normal(size=(64, DIM)), rng.normal(size=(48, DIM))
    w = (rng.random(64) < 0.3).astype(float)
    e = (rng.random(48) < 0.5).astype(float)
    return lambda: adp.data.pue_dataset(x_pu, w, x_e, e, batch_size=BATCH, seed=seed,
                                       shuffle=SHUFFLE)


def _random_sse_pu(seed=1):
    rng = np.random.default_rng(seed)
    x_sse, x_pu = rng.normal(size=(40, DIM)), rng.normal(size=(40, DIM))
    e = (rng.random(40) < 0.6).astype(float)
    w_sse = e * (rng.random(40) < 0.5)
    w_pu = (rng.random(40) < 0.3).astype(float)
    return lambda: adp.data.sse_pu_dataset(x_sse, w_sse, e, x_pu, w_pu,
                                           batch_size=BATCH, seed=seed, shuffle=SHUFFLE)


def _fired_pue():
    """A batch whose global R- < 0 while the first replica's half has R- > 0.

    With the linear model z = x0 (see ``_linear``): PU rows 0-7 have W=0 and
    z≈0 (ℓ0 ≈ 0.69 > 0 in R-), PU rows 8-15 have W=1 (nothing in R-); E rows
    0-7 are exposed (a = 0), E rows 8-15 unexposed with z≈3 (a·ℓ0 ≈ 2.9
    subtracted from R-). The builder interleaves PU and E rows in order, so
    the first half of the batch holds PU and E rows 0-7 (local R- > 0) and
    the second half rows 8-15 (local R- < 0); globally R- ≈ -1.1.
    """
    rng = np.random.default_rng(7)
    n = BATCH // 2
    x_pu, x_e = rng.normal(0.0, 0.2, size=(n, DIM)), rng.normal(0.0, 0.2, size=(n, DIM))
    x_e[n // 2:, 0] += 3.0
    w = np.r_[np.zeros(n // 2), np.ones(n // 2)]
    e = np.r_[np.ones(n // 2), np.zeros(n // 2)]
    return lambda: adp.data.pue_dataset(x_pu, w, x_e, e, batch_size=BATCH, shuffle=False)


# ------------------------------------------------------------------ models
def _fixed(model, seed):
    rng = np.random.default_rng(seed)
    model.set_weights([rng.normal(0.0, 0.5, size=w.shape).astype("float32")
                       for w in model.get_weights()])
    return model


def _mlp(seed=0, regularized=False):
    reg = keras.regularizers.L2(0.05) if regularized else None
    net = keras.Sequential([keras.Input((DIM,)),
                            keras.layers.Dense(5, activation="tanh", kernel_regularizer=reg),
                            keras.layers.Dense(1)])
    return _fixed(net, seed)


def _linear():
    net = keras.Sequential([keras.Input((DIM,)), keras.layers.Dense(1)])
    k = np.zeros((DIM, 1), "float32")
    k[0, 0] = 1.0
    net.set_weights([k, np.zeros(1, "float32")])
    return net


def _plain(net, loss, log_risk=True):
    """The net compiled as it is; under several workers, in a MultiWorkerModel."""
    model = adp.MultiWorkerModel(net) if adp.distributed.is_multi_worker() else net
    model.compile(keras.optimizers.SGD(1.0), loss=loss,
                  metrics=metrics.risk_metrics(loss) if log_risk else None)
    return model, net


def _debiased(loss):
    """DebiasedModel whose snapshot (f†) already differs from the live net."""
    net = _mlp(3, regularized=True)
    model = adp.DebiasedModel(net)
    model.compile(keras.optimizers.SGD(1.0), loss=loss)
    _fixed(net, 4)
    model.refresh_dagger()  # snapshot <- seed-4 weights, mode SNAPSHOT
    _fixed(net, 3)
    return model, net


def _direct(loss):
    """DebiasedModel in direct mode (no RefreshDagger): f† = σ(z), risk trackers logged."""
    net = _linear()
    model = adp.DebiasedModel(net)
    model.compile(keras.optimizers.SGD(1.0), loss=loss)
    return model, net


CASES = {
    # name: (make (model, net), make dataset, make callbacks, steps per epoch[, epochs])
    "pue_plain": (lambda: _plain(_mlp(0, regularized=True), adp.ADPUELoss(from_logits=True)),
                  _random_pue(), list, 1),
    "pue_debiased": (lambda: _debiased(adp.ADPUELoss(from_logits=True)), _random_pue(),
                     lambda: [adp.RefreshDagger(every_n_steps=1)], 2),
    "ad3se": (lambda: _plain(_mlp(1), adp.AD3SELoss(alpha=0.6, from_logits=True),
                             log_risk=False),
              _random_sse_pu(), list, 1),
    # the paper's max(R-, 0): gradient of R+ only
    "fired": (lambda: _plain(_linear(), adp.ADPUELoss(from_logits=True)), _fired_pue(),
              list, 1),
    # nnPU's step: gradient of -gamma * R-
    "fired_gamma": (lambda: _direct(adp.ADPUELoss(from_logits=True, gamma=0.5)),
                    _fired_pue(), list, 1),
    # several epochs of alternate learning, a refresh per epoch, validation data
    "pue_rounds": (lambda: _debiased(adp.ADPUELoss(from_logits=True)), _random_pue(),
                   lambda: [adp.RefreshDagger(every_n_epochs=1)], 2, 3),
}
#: gamma of the fired cases, for the NumPy reference
FIRED_GAMMA = {"fired": None, "fired_gamma": 0.5}


# ------------------------------------------------------------------ running
def _state(model, net, before):
    out = {"deltas": [(np.array(a) - b).tolist() for a, b in zip(net.get_weights(), before)]}
    if isinstance(model, adp.DebiasedModel):
        out["snapshot"] = [np.array(w).tolist() for w in model.snapshot.get_weights()]
        out["refreshes"] = model.refreshes
        out["dagger_mode"] = model.dagger_mode
    return out


def _run(name, strategy, backup_dir=None):
    """``model.fit`` for ``steps`` steps, under ``strategy`` (None: no strategy).

    Cases with several epochs also validate on the training stream. With
    ``backup_dir``, ``BackupAndRestore`` joins the callbacks.
    """
    make_model, make_ds, make_callbacks, steps, *rest = CASES[name]
    epochs = rest[0] if rest else 1
    keras.utils.set_random_seed(0)
    scope = strategy.scope() if strategy is not None else contextlib.nullcontext()
    with scope:
        model, net = make_model()
    before = [np.array(w) for w in net.get_weights()]
    callbacks = make_callbacks()
    if backup_dir is not None:
        callbacks.append(keras.callbacks.BackupAndRestore(os.path.join(backup_dir, name)))
    extra = dict(validation_data=make_ds(), validation_steps=steps) if epochs > 1 else {}
    hist = model.fit(make_ds(), epochs=epochs, steps_per_epoch=steps, verbose=0,
                     callbacks=callbacks, **extra)
    return {"replicas": int(model.distribute_strategy.num_replicas_in_sync),
            "epochs": len(hist.history["loss"]),
            "logs": {k: float(v[-1]) for k, v in hist.history.items()},
            **_state(model, net, before)}


def write_tfrecords(root, files=4, rows_per_file=48, seed=7):
    """PU and E logs as ``files`` TFRecord shards each (for the file-sharded case)."""
    rng = np.random.default_rng(seed)
    for part, label in (("pu", "w"), ("exposure", "e")):
        for f in range(files):
            path = os.path.join(root, f"{part}-{f:02d}.tfrecord")
            with tf.io.TFRecordWriter(path) as writer:
                for _row in range(rows_per_file):
                    x = rng.normal(size=DIM).astype(np.float32)
                    ex = {"x": tf.train.Feature(float_list=tf.train.FloatList(value=x)),
                          "file": tf.train.Feature(int64_list=tf.train.Int64List(value=[f])),
                          label: tf.train.Feature(int64_list=tf.train.Int64List(
                              value=[int(rng.random() < (0.3 if label == "w" else 0.5))]))}
                    writer.write(tf.train.Example(
                        features=tf.train.Features(feature=ex)).SerializeToString())


def _run_tfrecords(strategy, root, files=4, rows_per_file=48, global_batch=32, steps=6):
    """``model.fit`` on file-sharded TFRecord logs: each input pipeline reads its own files.

    Returns the files each pipeline read (from the ``file`` feature of the rows it
    drew), the pipelines' ids, the final weights and the epochs run.
    """
    seen = {}

    def make(ctx):
        spec = {"x": tf.io.FixedLenFeature([DIM], tf.float32),
                "file": tf.io.FixedLenFeature([], tf.int64)}
        share = files // ctx.num_input_pipelines * rows_per_file
        pu = adp.data.read_tfrecords(os.path.join(root, "pu-*.tfrecord"),
                                     {**spec, "w": tf.io.FixedLenFeature([], tf.int64)},
                                     labels="w", rows=share, input_context=ctx)
        ex = adp.data.read_tfrecords(os.path.join(root, "exposure-*.tfrecord"),
                                     {**spec, "e": tf.io.FixedLenFeature([], tf.int64)},
                                     labels="e", rows=share, input_context=ctx)
        seen["pipeline"] = (ctx.input_pipeline_id, ctx.num_input_pipelines)
        seen["files"] = sorted({int(x["file"]) for x, _ in pu} | {int(x["file"]) for x, _ in ex})
        ds = adp.data.pue_dataset(pu, None, ex, None, seed=0,
                                  batch_size=ctx.get_per_replica_batch_size(global_batch))
        return ds.map(lambda x, y: ({"x": x["x"]}, y)).repeat()

    keras.utils.set_random_seed(0)
    with strategy.scope():
        inp = keras.Input((DIM,), name="x")
        net = keras.Model({"x": inp}, keras.layers.Dense(1)(inp))
        model = adp.DebiasedModel(net)
        model.compile(keras.optimizers.SGD(0.1), loss=adp.ADPUELoss(from_logits=True))
    data = strategy.distribute_datasets_from_function(make)
    hist = model.fit(data, epochs=2, steps_per_epoch=steps // 2, verbose=0,
                     callbacks=[adp.RefreshDagger(every_n_epochs=1)])
    return {"pipeline": list(seen["pipeline"]), "files": seen["files"],
            "weights": [np.array(w).tolist() for w in net.get_weights()],
            "epochs": len(hist.history["loss"]), "refreshes": model.refreshes,
            "loss": [float(v) for v in hist.history["loss"]]}


def _replica_view(name, strategy):
    """What each replica receives of the first global batch (for the non-vacuity check)."""
    make_ds = CASES[name][1]
    dist = strategy.experimental_distribute_dataset(make_ds())
    x, y = next(iter(dist))
    xs = [np.asarray(t) for t in strategy.experimental_local_results(x)]
    ys = [np.asarray(t) for t in strategy.experimental_local_results(y)]
    return [{"rows": len(yr), "sum_x": float(xr.sum()),
             "counts": {str(s): int((yr[:, 2] == s).sum()) for s in range(5)},
             "sum_w": float(yr[:, 0].sum()), "sum_e": float(yr[:, 1].sum()),
             "y": yr.tolist(), "x": xr.tolist()} for xr, yr in zip(xs, ys)]


def _nnpue_parts(x, y, counts):
    """R- and per-row d/dz of the R+ and R- shares of these rows (z = x0, direct f†).

    ``counts``: the PU and E row counts the group means divide by.
    """
    z = x[:, 0].astype(np.float64)
    w, e, src = y[:, 0], y[:, 1], y[:, 2]
    pu, em = (src == 0) / counts[0], (src == 1) / counts[1]
    s = _sigmoid(z)
    a = s * (1.0 - e)
    r_neg = float(np.sum(pu * (1 - w) * _softplus(z) - em * a * _softplus(z)))
    d_pos = pu * w * (s - 1.0) + em * a * (s - 1.0)  # dℓ1/dz = σ - 1
    d_neg = pu * (1 - w) * s - em * a * s            # dℓ0/dz = σ
    return r_neg, d_pos, d_neg


def _deltas(x, g):
    """Weight deltas of one SGD(1.0) step of the linear model for per-row d/dz ``g``."""
    return [(-(x.T @ g)).reshape(DIM, 1).tolist(), [-float(g.sum())]]


def _fired_reference(view, gamma):
    """NumPy reference deltas for the fired batch, given the replicas' halves.

    Returns ``local_r_neg`` (each half's own R-), and the deltas of: the
    correct step (decision on the global R-), the uncorrected step
    (``R+ + R-``), and a naive step where each replica decides on its own half
    (a per-replica Keras loss: the local risk with local counts, divided by
    the number of replicas; the gradients summed) — the bug to avoid.
    """
    x = np.concatenate([np.array(p["x"]) for p in view])
    y = np.concatenate([np.array(p["y"]) for p in view])
    counts = [int((y[:, 2] == s).sum()) for s in (0, 1)]
    r_neg, d_pos, d_neg = _nnpue_parts(x, y, counts)
    assert r_neg < 0
    step = d_pos if gamma is None else -gamma * d_neg
    naive, local = [], []
    for part in view:
        xr, yr = np.array(part["x"]), np.array(part["y"])
        r_loc, p_loc, n_loc = _nnpue_parts(
            xr, yr, [max(1, int((yr[:, 2] == s).sum())) for s in (0, 1)])
        local.append(r_loc)
        fired = r_loc < 0
        g = p_loc + n_loc if not fired else (p_loc if gamma is None else -gamma * n_loc)
        naive.append(g / len(view))
    return {
        "global_r_neg": r_neg,
        "local_r_neg": local,
        "correct": _deltas(x, step),
        "uncorrected": _deltas(x, d_pos + d_neg),
        "naive": _deltas(x, np.concatenate(naive)),
    }


def _split_cpu(n: int) -> None:
    cpus = tf.config.list_physical_devices("CPU")
    tf.config.set_logical_device_configuration(
        cpus[0], [tf.config.LogicalDeviceConfiguration() for _ in range(n)])


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", help="where to write the JSON report")
    parser.add_argument("--worker", type=int, default=None,
                        help="MultiWorkerMirroredStrategy worker index (TF_CONFIG set)")
    parser.add_argument("--cases", default=None, help="comma-separated subset of cases")
    parser.add_argument("--backup", default=None, help="BackupAndRestore directory (workers)")
    parser.add_argument("--tfrecords", default=None,
                        help="directory of TFRecord logs for the file-sharded case (workers)")
    opts = parser.parse_args(argv)
    names = opts.cases.split(",") if opts.cases else list(CASES)
    # Both must happen before any TensorFlow op runs.
    if opts.worker is None:
        _split_cpu(2)
        strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    else:
        strategy = tf.distribute.MultiWorkerMirroredStrategy()
    report = {"tf": tf.__version__, "keras": keras.__version__, "cases": {},
              "logical_cpus": len(tf.config.list_logical_devices("CPU"))}
    for name in names:
        if opts.worker is None:
            case = {"single": _run(name, None), "mirrored": _run(name, strategy),
                    "view": _replica_view(name, strategy)}
            if name in FIRED_GAMMA:
                case["reference"] = _fired_reference(case["view"], FIRED_GAMMA[name])
        else:
            # compared with the "single" runs of the MirroredStrategy report
            case = {"multiworker": _run(name, strategy, opts.backup)}
        report["cases"][name] = case
    if opts.worker is not None:
        report["worker"] = opts.worker
        if opts.tfrecords:
            report["tfrecords"] = _run_tfrecords(strategy, opts.tfrecords)
    with open(opts.out, "w") as f:
        json.dump(report, f)


if __name__ == "__main__":
    main()
