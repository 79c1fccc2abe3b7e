"""How a stream of rows from a Dataset is shuffled, grouped and checked (batch-level work).

The builders never shuffle or batch single rows: a Dataset stream is read in
chunks (read_tfrecords' parsed blocks, or batches of any other Dataset of rows),
the chunks are shuffled in a buffer, and windows of rows are permuted whole.
These tests pin what that promises: every row once per pass, a bounded
displacement, seeded reproducibility, the files' order without shuffling, and a
wrong ``rows=`` still refused while streaming.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

import adpue_tf as adp
from adpue_tf.data import _streams
from adpue_tf.data.builders import interleave_order
from adpue_tf.labels import Source

N_ROWS, FILES = 3000, 4
SPEC = {"id": tf.io.FixedLenFeature([], tf.int64), "ctx": tf.io.FixedLenFeature([2], tf.float32),
        "w": tf.io.FixedLenFeature([], tf.int64), "e": tf.io.FixedLenFeature([], tf.int64)}


def _example(i: int) -> bytes:
    feats = {"id": tf.train.Feature(int64_list=tf.train.Int64List(value=[i])),
             "ctx": tf.train.Feature(float_list=tf.train.FloatList(value=[i / 7.0, -1.0])),
             "w": tf.train.Feature(int64_list=tf.train.Int64List(value=[int(i % 3 == 0)])),
             "e": tf.train.Feature(int64_list=tf.train.Int64List(value=[int(i % 2 == 0)]))}
    return tf.train.Example(features=tf.train.Features(feature=feats)).SerializeToString()


def _write(path, ids, compression=None):
    with tf.io.TFRecordWriter(str(path), options=compression) as writer:
        for i in ids:
            writer.write(_example(int(i)))
    return str(path)


@pytest.fixture(scope="module")
def log(tmp_path_factory):
    root = tmp_path_factory.mktemp("streams")
    per = N_ROWS // FILES
    return [_write(root / f"part-{f}.tfrecord", range(f * per, (f + 1) * per))
            for f in range(FILES)]


def _read(files, label="w", **kw):
    return adp.data.read_tfrecords(files, {k: v for k, v in SPEC.items() if k != {"w": "e", "e": "w"}[label]},
                                   labels=label, **kw)


def _stream_ids(rows_ds, k, m, shuffle, seed, groups):
    """The ids of the first ``groups`` groups of a stream, in order, and the groups' shapes."""
    stream = _streams.make_stream("x_pu", Source.PU, rows_ds, w=("w", None))
    out, shapes = [], set()
    for x, y in stream.batches(k, m, shuffle, seed).take(groups):
        shapes.add((tuple(x["id"].shape), tuple(y.shape)))
        out.append(x["id"].numpy().reshape(-1))
    return np.concatenate(out), shapes


def test_a_large_stream_gives_every_row_once_per_pass_and_moves_rows_a_bounded_distance(
        log, monkeypatch):
    monkeypatch.setattr(_streams, "SHUFFLE_ROWS", 256)  # 3000 rows: a "large" stream
    rows = _read(log, rows=N_ROWS, parse_batch=32)
    files_order = np.array([int(x["id"]) for x, _ in rows])  # blocks of 32, files in turn
    k, m = 50, 2  # groups of 100 rows; windows of 2 groups (200 rows)
    ids, shapes = _stream_ids(rows, k, m, True, seed=0, groups=60)  # 6000 rows, 30 windows
    assert shapes == {((m, k), (m, k, 3))}
    counts = np.bincount(ids, minlength=N_ROWS)
    assert counts.min() == counts.max() == 2  # whole windows of two passes: each row twice
    first = ids[:N_ROWS]
    assert np.mean(first != files_order) > 0.9  # shuffled
    position = {int(i): p for p, i in reversed(list(enumerate(ids)))}  # first appearance
    moved = np.array([position[int(i)] - p for p, i in enumerate(files_order)])
    assert moved.min() >= -2 * 256  # never more than about 2 * SHUFFLE_ROWS rows earlier
    assert moved.min() < -100 and moved.max() > 100  # but rows do travel both ways
    again, _ = _stream_ids(_read(log, rows=N_ROWS, parse_batch=32), k, m, True, 0, 60)
    other, _ = _stream_ids(_read(log, rows=N_ROWS, parse_batch=32), k, m, True, 1, 60)
    np.testing.assert_array_equal(ids, again)
    assert np.mean(ids != other) > 0.9


def test_a_small_stream_is_a_fresh_permutation_every_pass():
    ids = np.arange(100, dtype=np.int64)
    rows = tf.data.Dataset.from_tensor_slices(({"id": ids}, ids % 2))  # any Dataset of rows
    got, _ = _stream_ids(rows, 10, 3, True, seed=5, groups=10)  # 300 rows: 3 passes
    passes = got.reshape(3, 100)
    for p in passes:
        assert sorted(p.tolist()) == list(range(100))
    assert not np.array_equal(passes[0], passes[1]) and not np.array_equal(passes[0], ids)


def test_without_shuffle_a_stream_keeps_the_files_order_across_passes(log):
    rows = _read(log, rows=N_ROWS, parse_batch=64)
    files_order = np.array([int(x["id"]) for x, _ in rows])
    got, _ = _stream_ids(rows, 70, 4, False, None, groups=12)  # 3360 rows: into pass two
    np.testing.assert_array_equal(got, np.concatenate([files_order, files_order])[:len(got)])


def test_pue_dataset_over_logs_interleaves_each_batch_and_packs_the_labels(log):
    pu, ex = _read(log, rows=N_ROWS), _read(log[:2], "e", rows=N_ROWS // 2)
    ds = adp.data.pue_dataset(pu, None, ex, None, batch_size=30, seed=0)
    order = interleave_order([20, 10])
    source = np.array([float(Source.PU)] * 20 + [float(Source.E)] * 10)[order]
    seen = []
    for x, y in ds.take(40):
        np.testing.assert_array_equal(y[:, 2].numpy(), source)
        ids = x["id"].numpy()
        pu_rows, e_rows = y[:, 2].numpy() == Source.PU, y[:, 2].numpy() == Source.E
        np.testing.assert_array_equal(y.numpy()[pu_rows, 0], ids[pu_rows] % 3 == 0)  # w
        np.testing.assert_array_equal(y.numpy()[e_rows, 1], ids[e_rows] % 2 == 0)  # e
        seen.extend(ids[pu_rows].tolist())
    assert len(set(seen)) == len(seen) == 800  # no PU row twice within a pass


@pytest.mark.parametrize("rows", [N_ROWS // FILES + 1, N_ROWS // FILES - 1])
def test_a_wrong_row_count_fails_while_streaming_naming_the_argument(log, tmp_path, rows):
    gz = _write(tmp_path / "pu.tfrecord.gz", range(N_ROWS // FILES), "GZIP")  # not counted at call
    pu = _read(gz, rows=rows, compression_type="GZIP", parse_batch=100)
    ex = _read(log[0], "e", rows=N_ROWS // FILES)
    ds = adp.data.pue_dataset(pu, None, ex, None, batch_size=64, seed=0)
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match=f"`x_pu`: read_tfrecords was given rows={rows}, but its files"):
        for _ in ds:
            pass


def test_a_builders_batches_are_marked_checked_and_a_nan_row_stops_fit_before_any_update():
    """DebiasedModel leaves the feature check of its training step to the builders, which
    check every row where they make the batches: a NaN row of a Dataset stops fit there,
    naming the feature, and no weight moves. A transformed Dataset is checked in the step."""
    import keras

    from adpue_tf.data.builders import features_checked

    rng = np.random.default_rng(0)
    x = rng.normal(size=(64, 2)).astype("float32")
    x[40, 1] = np.nan
    rows = tf.data.Dataset.from_tensor_slices((x, (np.arange(64) % 2).astype("int64")))
    ex = tf.data.Dataset.from_tensor_slices((np.ones((32, 2), "float32"),
                                             (np.arange(32) % 2).astype("int64")))
    ds = adp.data.pue_dataset(rows, None, ex, None, batch_size=96, shuffle=False)
    assert features_checked(ds) and not features_checked(ds.map(lambda a, b: (a, b)))
    keras.utils.set_random_seed(0)
    net = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model = adp.DebiasedModel(net)
    model.compile("sgd", loss=adp.ADPUELoss(from_logits=True))
    before = [w.numpy().copy() for w in net.weights]
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"`x_pu` contains NaN"):
        model.fit(ds, epochs=1, verbose=0)
    for a, b in zip(before, net.weights):
        np.testing.assert_array_equal(a, b.numpy())
    y = np.concatenate([adp.pack_labels(Source.PU, w=np.arange(64) % 2),
                        adp.pack_labels(Source.E, e=np.arange(32) % 2)])
    own = tf.data.Dataset.from_tensor_slices((np.concatenate([x, np.ones((32, 2), "float32")]),
                                              y)).batch(96)  # no builder: the step checks
    with pytest.raises(Exception, match="NaN or inf found in `x\\[0\\]`"):
        model.fit(own, epochs=1, verbose=0)
    for a, b in zip(before, net.weights):
        np.testing.assert_array_equal(a, b.numpy())
