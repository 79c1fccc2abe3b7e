"""Property-based tests (hypothesis) of the risks, against the NumPy reference.

For every loss, on batches of its own setting drawn at random:

* the value equals the independent reference of ``tests/reference.py``, and
  does not depend on the order of the rows;
* split across two replicas (each computing its share with global counts, as
  under a ``tf.distribute`` strategy), the shares add up to the one-device
  value and gradient, and each replica reports the global risk, even when one
  replica's slice holds no row of a source;
* ``R+ >= 0``;
* loss and gradient are finite for logits anywhere in ``[-1e4, 1e4]``.

The replicas are two threads whose ``replica_sum`` is an all-reduce through a
barrier (``_Replicas``), standing in for ``MirroredStrategy`` (whose logical
devices need a fresh process, see tests/test_distributed.py).
"""

from __future__ import annotations

import threading

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import adpue_tf as adp
from adpue_tf.labels import pack_e, pack_p, pack_pu, pack_sse, pack_u
from adpue_tf.risks import _batch, correction

import reference as ref

SETTINGS = settings(max_examples=15, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])

# (loss, reference name, reference options, the sources of its setting)
CASES = [
    (adp.ADPUELoss(from_logits=True), "nnpue", {}, ("PU", "E")),
    (adp.ADPUELoss(from_logits=True, non_negative=False), "nnpue", {"non_negative": False},
     ("PU", "E")),
    (adp.ADPELoss(prior=0.3, from_logits=True), "nnpe", {"prior": 0.3}, ("P", "E")),
    (adp.ADFPULoss(prior=0.3, from_logits=True), "fpue", {"prior": 0.3}, ("P", "U", "E")),
    (adp.ADSLoss(from_logits=True), "ads", {}, ("SSE",)),
    (adp.ADSSLoss(from_logits=True), "adss", {}, ("SSE",)),
    (adp.DoubleADSSLoss(alpha=0.3, from_logits=True), "double_adss", {"alpha": 0.3}, ("SSE",)),
    (adp.AD3SELoss(alpha=0.6, from_logits=True), "ad3se", {"alpha": 0.6}, ("SSE", "PU")),
    (adp.LogitLoss(from_logits=True), "logit", {}, ("PU",)),
    (adp.UPULoss(prior=0.4, from_logits=True), "upu", {"prior": 0.4}, ("PU", "P", "U")),
    (adp.NNPULoss(prior=0.4, from_logits=True), "nnpu", {"prior": 0.4}, ("PU", "P", "U")),
    (adp.PNULoss(prior=0.4, eta=0.3, from_logits=True), "pnu", {"prior": 0.4, "eta": 0.3},
     ("SSE",)),
]
IDS = [f"{name}{'-' + str(opts) if opts else ''}" for _, name, opts, _ in CASES]


@st.composite
def setting_batches(draw, sources, low=-8.0, high=8.0, min_rows=1):
    """Packed labels of ``sources`` (``min_rows``-5 rows each, shuffled), logits in [low, high]."""
    parts = []
    for source in sources:
        n = draw(st.integers(min_rows, 5))
        bits = lambda: np.array(draw(st.lists(st.integers(0, 1), min_size=n, max_size=n)))  # noqa: E731
        if source == "PU":
            parts.append(pack_pu(bits()))
        elif source == "E":
            parts.append(pack_e(bits()))
        elif source == "P":
            parts.append(pack_p(n))
        elif source == "U":
            parts.append(pack_u(n))
        else:
            e = bits()
            parts.append(pack_sse(e * bits(), e))
    y = np.concatenate(parts)
    y = y[np.array(draw(st.permutations(range(len(y)))))]
    z = draw(st.lists(st.floats(low, high, width=32), min_size=len(y), max_size=len(y)))
    return y, np.array(z, np.float32)[:, None]


def _terms_and_grad(loss, y, z):
    var = tf.Variable(z)
    with tf.GradientTape() as tape:
        terms = loss.terms(y, var)
    return terms, tape.gradient(terms.loss, var).numpy()


@pytest.mark.parametrize("loss,name,opts,sources", CASES, ids=IDS)
@SETTINGS
@given(data=st.data())
def test_value_matches_the_reference_and_ignores_row_order(loss, name, opts, sources, data):
    y, z = data.draw(setting_batches(sources))
    risk, pos, neg, fired = ref.value(name, y, z, **opts)
    terms = loss.terms(y, z)
    np.testing.assert_allclose([float(terms.risk), float(terms.positive), float(terms.negative)],
                               [risk, pos, neg], rtol=1e-5, atol=1e-5)
    assert float(terms.fired) == fired
    order = np.array(data.draw(st.permutations(range(len(y)))))
    np.testing.assert_allclose(float(loss(y[order], z[order])), float(terms.loss),
                               rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("loss,name,opts,sources", CASES, ids=IDS)
@SETTINGS
@given(data=st.data())
def test_positive_part_is_never_negative(loss, name, opts, sources, data):
    y, z = data.draw(setting_batches(sources, -50.0, 50.0))
    assert float(loss.terms(y, z).positive) >= 0.0


@pytest.mark.parametrize("loss,name,opts,sources", CASES, ids=IDS)
@SETTINGS
@given(data=st.data())
def test_loss_and_gradient_finite_for_logits_up_to_1e4(loss, name, opts, sources, data):
    y, z = data.draw(setting_batches(sources, -1e4, 1e4))
    terms, grad = _terms_and_grad(loss, y, z)
    assert np.isfinite(float(terms.loss)) and np.isfinite(float(terms.risk))
    assert np.all(np.isfinite(grad))


class _Replicas:
    """``n`` replicas as threads; ``replica_sum`` is an all-reduce through a barrier."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.barrier = threading.Barrier(n, timeout=60)
        self.slots: list = [None] * n
        self.local = threading.local()

    def replica_sum(self, value):
        i = self.local.index
        self.slots[i] = tf.convert_to_tensor(value)
        self.barrier.wait()
        total = tf.add_n(self.slots)
        self.barrier.wait()
        return total

    def num_replicas(self) -> int:
        return self.n

    def run(self, fn, shards):
        out, errors = [None] * self.n, []

        def work(i):
            self.local.index = i
            try:
                out[i] = fn(*shards[i])
            except BaseException as err:  # noqa: BLE001 - re-raised below
                errors.append(err)
                self.barrier.abort()

        threads = [threading.Thread(target=work, args=(i,)) for i in range(self.n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise errors[0]
        return out


def on_replicas(fn, shards):
    """``fn(*shard)`` on one replica per shard, the risks' all-reduce patched in."""
    replicas = _Replicas(len(shards))
    with pytest.MonkeyPatch.context() as mp:
        for module in (_batch, correction):
            mp.setattr(module, "replica_sum", replicas.replica_sum)
            mp.setattr(module, "num_replicas", replicas.num_replicas)
        return replicas.run(fn, shards)


@pytest.mark.parametrize("loss,name,opts,sources", CASES, ids=IDS)
@settings(max_examples=10, deadline=None)
@given(data=st.data())
def test_two_replicas_add_up_to_one_device(loss, name, opts, sources, data):
    y, z = data.draw(setting_batches(sources, min_rows=2))
    single_terms, single_grad = _terms_and_grad(loss, y, z)
    # sort by source so that a cut can leave one replica without a source's rows
    order = np.argsort(y[:, 2], kind="stable")
    y, z, single_grad = y[order], z[order], single_grad[order]
    cut = data.draw(st.integers(1, len(y) - 1))
    shares = on_replicas(lambda a, b: _terms_and_grad(loss, a, b),
                         [(y[:cut], z[:cut]), (y[cut:], z[cut:])])
    total = sum(float(t.loss) for t, _ in shares)
    np.testing.assert_allclose(total, float(single_terms.loss), rtol=1e-5, atol=1e-6)
    for terms, _ in shares:  # every replica reports the global risk and parts
        np.testing.assert_allclose(
            [float(terms.risk), float(terms.positive), float(terms.negative), float(terms.fired)],
            [float(single_terms.risk), float(single_terms.positive),
             float(single_terms.negative), float(single_terms.fired)], rtol=1e-5, atol=1e-6)
    grad = np.concatenate([g for _, g in shares])
    np.testing.assert_allclose(grad, single_grad, rtol=1e-5, atol=1e-6)


def test_a_replica_without_a_needed_source_is_fine_but_the_global_batch_is_not():
    loss = adp.ADPUELoss(from_logits=True)
    y = np.concatenate([pack_pu([1, 0]), pack_e([1, 0])])
    z = np.array([[0.5], [-1.0], [2.0], [0.3]], np.float32)
    # replica 0 holds only PU rows, replica 1 only E rows: accepted (global counts)
    shares = on_replicas(lambda a, b: float(loss(a, b)), [(y[:2], z[:2]), (y[2:], z[2:])])
    np.testing.assert_allclose(sum(shares), ref.value("nnpue", y, z)[0], rtol=1e-6)
    # no E row on any replica: refused, counting both replicas' rows
    with pytest.raises(ValueError, match=r"needs rows of PU and E.*holds rows of PU: 2\."):
        on_replicas(lambda a, b: loss(a, b), [(y[:1], z[:1]), (y[1:2], z[1:2])])
