"""Correctness on a GPU before timing it.

A matrix product against float64 NumPy (float32, then TensorFlow's default tf32), and a
short DebiasedModel fit (alternate learning, two refreshes) on the GPU against the same
fit on the CPU, without and with XLA. Run where TensorFlow sees a GPU::

    python3 -m benchmarks.gpu_check

(see benchmarks/gpu_run.sh and benchmarks/results/throughput_gpu.md). Prints one line
per check and exits 1 when one is off by more than its rounding (float32 1e-5, tf32
1e-3, the fitted weights 1e-5) or when no GPU is seen.
"""

from __future__ import annotations

import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras
import numpy as np
import tensorflow as tf

import adpue_tf as adp
from adpue_tf import synthetic


def _fit(data, device: str, jit: bool) -> tuple[np.ndarray, list[float], float]:
    keras.utils.set_random_seed(0)
    with tf.device(device):
        net = keras.Sequential([keras.Input((16,)), keras.layers.Dense(64, activation="relu"),
                                keras.layers.Dense(1)])
        model = adp.DebiasedModel(net)
        model.compile(keras.optimizers.Adam(1e-3), loss=adp.ADPUELoss(from_logits=True),
                      jit_compile=jit)
        ds = adp.data.pue_dataset(data.x_pu, data.w_pu, data.x_e, data.e_e, batch_size=256,
                                  seed=0, steps_per_epoch=20)
        start = time.perf_counter()
        hist = model.fit(ds, epochs=2, verbose=0, callbacks=[adp.RefreshDagger(every_n_epochs=1)])
        weights = np.concatenate([w.ravel() for w in net.get_weights()])
        return weights, hist.history["loss"], time.perf_counter() - start


def main() -> int:
    gpus = tf.config.list_physical_devices("GPU")
    print(f"tensorflow {tf.__version__}, keras {keras.__version__}, GPUs {gpus}", flush=True)
    if not gpus:
        return 1
    ok = True
    rng = np.random.default_rng(1)
    a = rng.standard_normal((512, 256)).astype("float32")
    b = rng.standard_normal((256, 384)).astype("float32")
    ref = a.astype("float64") @ b.astype("float64")
    for name, tf32, tol in (("float32 (tf32 off)", False, 1e-5), ("tf32 (TF's default)", True, 1e-3)):
        tf.config.experimental.enable_tensor_float_32_execution(tf32)
        with tf.device("/GPU:0"):
            out = tf.matmul(a, b).numpy()
        err = np.linalg.norm(out - ref) / np.linalg.norm(ref)
        ok &= bool(err < tol)
        print(f"matmul {name}: relative error {err:.2e} (< {tol:g})", flush=True)
    tf.config.experimental.enable_tensor_float_32_execution(False)
    data = synthetic.synthetic_pue(4000, 4000, dim=16, seed=0)
    cpu = _fit(data, "/CPU:0", jit=False)
    for jit in (False, True):
        gpu = _fit(data, "/GPU:0", jit)
        diff = float(np.abs(gpu[0] - cpu[0]).max())
        ok &= diff < 1e-5
        print(f"DebiasedModel, 2 epochs, GPU jit_compile={jit} vs CPU: max |dw| {diff:.2e}, "
              f"loss {gpu[1]} vs {cpu[1]} ({gpu[2]:.1f} s)", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
