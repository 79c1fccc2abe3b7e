"""Statistical ground truth: the debiased risks recover p(y=1|x) on synthetic data.

x ~ N(0, I_2), p(y=1|x) = σ(2x1 - x2), θ(e=1|x) = σ(-1.5x1 + 2x2): exposure
and label pull in opposite directions, so the selection bias is strong. A
correctly specified linear model trained with each debiased risk must land
close to p(y=1|x) (mean absolute error on fresh rows), while cross-entropy on
W lands close to q(w=1|x) = p(y=1|x)·θ(e=1|x). Fixed seeds throughout.
"""

from __future__ import annotations

import keras
import numpy as np
import pytest

import adpue_tf as adp
from adpue_tf import data, synthetic

pytestmark = pytest.mark.slow

EVAL = synthetic.make_synthetic(20_000, seed=123)


def _fit(ds, loss, *, epochs=30, lr=0.05, seed=0, hidden=0):
    keras.utils.set_random_seed(seed)
    layers = [keras.layers.Dense(hidden, activation="tanh")] if hidden else []
    model = keras.Sequential([keras.Input((2,)), *layers, keras.layers.Dense(1)])
    model.compile(optimizer=keras.optimizers.Adam(lr), loss=loss)
    model.fit(ds, epochs=epochs, verbose=0, shuffle=False)
    z = model.predict(EVAL.x.astype(np.float32), batch_size=8192, verbose=0).reshape(-1)
    return 1.0 / (1.0 + np.exp(-z))


def _mae(f, p):
    return float(np.mean(np.abs(f - p)))


def _report(name, f):
    maes = (_mae(f, EVAL.p_y), _mae(f, EVAL.p_w))
    print(f"\n{name}: MAE to p(y=1|x) {maes[0]:.4f}, to q(w=1|x) {maes[1]:.4f}")
    return maes


@pytest.fixture(scope="module")
def pue():
    keras.utils.set_random_seed(0)  # tf.data's op seeds combine with the global seed
    s = synthetic.synthetic_pue(20_000, 20_000, seed=1)
    return s, data.pue_dataset(s.x_pu, s.w_pu, s.x_e, s.e_e, batch_size=2000, seed=0)


def test_adpue_recovers_p_while_logit_learns_q(pue):
    _, ds = pue
    to_p, _ = _report("ADPUE", _fit(ds, adp.ADPUELoss(from_logits=True)))
    logit_p, logit_q = _report("Logit", _fit(ds, adp.LogitLoss(from_logits=True)))
    assert to_p < 0.03
    assert logit_p > 0.2  # naive training learns "shown and liked"
    assert logit_q < logit_p / 3
    assert to_p < logit_p / 10


def test_logit_with_a_flexible_model_converges_to_q(pue):
    """q(w=1|x) = σ(a·x)σ(c·x) is not logistic-linear: give Logit a small MLP."""
    _, ds = pue
    _, logit_q = _report("Logit MLP(16)", _fit(ds, adp.LogitLoss(from_logits=True),
                                               hidden=16, lr=0.02, epochs=40))
    assert logit_q < 0.04


def test_adpue_error_shrinks_with_data():
    keras.utils.set_random_seed(0)
    small = synthetic.synthetic_pue(500, 500, seed=2)
    ds = data.pue_dataset(small.x_pu, small.w_pu, small.x_e, small.e_e, batch_size=100, seed=0)
    err_small, _ = _report("ADPUE n=500+500", _fit(ds, adp.ADPUELoss(from_logits=True), epochs=60))
    big = synthetic.synthetic_pue(20_000, 20_000, seed=2)
    ds = data.pue_dataset(big.x_pu, big.w_pu, big.x_e, big.e_e, batch_size=2000, seed=0)
    err_big, _ = _report("ADPUE n=20000+20000", _fit(ds, adp.ADPUELoss(from_logits=True)))
    assert err_big < err_small


def test_adpe_with_true_prior_recovers_p():
    keras.utils.set_random_seed(0)
    s = synthetic.synthetic_pue(40_000, 20_000, seed=3)
    x_p = s.x_pu[s.w_pu == 1]  # x ~ ζ(x | w=1)
    ds = data.pe_dataset(x_p, s.x_e, s.e_e, batch_size=2000, seed=0)
    to_p, _ = _report("ADPE", _fit(ds, adp.ADPELoss(prior=s.prior_w, from_logits=True)))
    assert to_p < 0.03


def test_adss_on_sse_recovers_p():
    keras.utils.set_random_seed(0)
    s = synthetic.synthetic_sse(20_000, seed=4)
    ds = data.sse_dataset(s.x, s.w, s.e, batch_size=2000, seed=0)
    to_p, _ = _report("ADSS", _fit(ds, adp.ADSSLoss(from_logits=True)))
    assert to_p < 0.03
    to_p_l, _ = _report("ADS", _fit(ds, adp.ADSLoss(from_logits=True)))
    assert to_p_l < 0.03
    naive_p, _ = _report("Logit on SSE", _fit(ds, adp.LogitLoss(from_logits=True)))
    assert naive_p > 0.2
