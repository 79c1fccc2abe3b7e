"""The audit's probes of the data layer: the label layout, batch counts, the five builders,
with_propensity and TFRecord reading (``adp.pack_labels``, ``adp.data.*``).

Probes are generated from small tables (an entry point x the bad values each
argument can meet), so every argument of every builder is tried with every
kind of wrong value.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.audit_runner import Probe
from benchmarks.audit_values import (
    XE,
    E,
    W,
    X,
    _adp,
    _dense,
    _files,
    bad_arrays,
    bad_binary,
    bad_ints,
)


# ------------------------------------------------------------------ pack_labels, batch counts
def labels_probes() -> list[Probe]:
    adp = _adp
    probes = []
    for what, source in (("2.5", 2.5), ("2.0", 2.0), ("True", True), ("'PU'", "PU"),
                         ("7", 7), ("-1", -1), ("None", None), ("np.float64(1)", np.float64(1))):
        probes.append(Probe(f"pack_labels: source {what}",
                            lambda t, s=source: adp().pack_labels(s, n=2), "`source`"))
    for src, kw in (("PU", "w"), ("E", "e")):
        for what, value, words in bad_binary(4):
            if value is not None and what != "wrong length":  # nothing to disagree with
                probes.append(Probe(f"pack_labels: {src} {kw} {what}", lambda t, s=src, k=kw, v=value:
                                    adp().pack_labels(getattr(adp().Source, s), **{k: v}),
                                    f"(`{kw}`|{words})"))
    probes += [
        Probe("pack_labels: P with w", lambda t: adp().pack_labels(adp().Source.P, w=[1, 0]),
              "has no observed `w`"),
        Probe("pack_labels: SSE without e", lambda t: adp().pack_labels(adp().Source.SSE,
                                                                        w=[1, 0]), "needs `e`"),
        Probe("pack_labels: SSE w where e is 0", lambda t: adp().pack_labels(
            adp().Source.SSE, w=[1, 0], e=[0, 1]), "`w` must be 0 where `e` is 0"),
        Probe("pack_labels: dagger 1.5", lambda t: adp().pack_labels(
            adp().Source.U, n=2, dagger=[0.2, 1.5]), r"`dagger` must lie in \[0, 1\]"),
        Probe("pack_labels: dagger wrong length", lambda t: adp().pack_labels(
            adp().Source.U, n=2, dagger=[0.2]), "`dagger` has 1 rows"),
        Probe("pack_labels: n=2.7", lambda t: adp().pack_labels(adp().Source.P, n=2.7), "`n`"),
        Probe("pack_labels: n and w disagree", lambda t: adp().pack_labels(
            adp().Source.PU, w=[1, 0], n=3), "disagree"),
        Probe("pack_labels: np.int64 source", lambda t: adp().pack_labels(np.int64(3), n=2),
              check=lambda y: y.shape == (2, 3) and float(y[0, 2]) == 3.0),
        Probe("pack_labels: Source.SSE", lambda t: adp().pack_labels(
            adp().Source.SSE, w=[1, 0], e=[1, 1], dagger=[0.1, 0.9]),
              check=lambda y: y.shape == (2, 4) and y[1, 3] == np.float32(0.9)),
    ]
    name = "epoch_length"

    def call(rows: Any, counts: Any) -> Any:
        return adp().data.epoch_length(rows, counts)

    probes += [
        Probe(f"{name}: lists of different lengths", lambda t: call([10, 20, 30], [2, 3]),
              "`rows` and `counts`"),
        Probe(f"{name}: count 0", lambda t: call([2, 3], [2, 0]), r"`counts\[1\]`"),
        Probe(f"{name}: count -1", lambda t: call([2], [-1]), r"`counts\[0\]`"),
        Probe(f"{name}: rows -1", lambda t: call([-1], [1]), r"`rows\[0\]`"),
        Probe(f"{name}: empty", lambda t: call([], []), "`rows` and `counts`"),
        Probe(f"{name}: count 1.5", lambda t: call([3], [1.5]), r"`counts\[0\]`"),
        Probe(f"{name}: rows a str", lambda t: call("12", [1]), "`rows`"),
        Probe(f"{name}: counts None", lambda t: call([3], None), "`counts`"),
        Probe(f"{name}: rows 'a'", lambda t: call(["a"], [1]), r"`rows\[0\]`"),
        Probe(f"{name}: correct", lambda t: call([100, 10], [8, 2]), check=lambda n: n == 13),
    ]
    for what, value, _words in bad_ints("batch_size", 1)[:4]:
        probes.append(Probe(f"batch_counts: {what}", lambda t, v=value:
                            adp().data.batch_counts([1, 1], v), "`batch_size`"))
    probes += [
        Probe("batch_counts: share 0", lambda t: adp().data.batch_counts([1, 0], 4), "`shares`"),
        Probe("batch_counts: share NaN", lambda t: adp().data.batch_counts([1, np.nan], 4),
              "`shares`"),
        Probe("batch_counts: share 'a'", lambda t: adp().data.batch_counts([1, "a"], 4),
              "`shares`"),
        Probe("batch_counts: correct", lambda t: adp().data.batch_counts([3, 1], 10),
              check=lambda c: c == [8, 2]),
    ]
    return probes


# ------------------------------------------------------------------ the five builders
def builder_probes() -> list[Probe]:
    adp = _adp
    calls = {
        "pue_dataset": (lambda **k: adp().data.pue_dataset(
            k.get("x_pu", X), k.get("w", W), k.get("x_e", XE), k.get("e", E), **k.get("kw", {})),
            ("x_pu", "x_e"), ("w", "e")),
        "pe_dataset": (lambda **k: adp().data.pe_dataset(
            k.get("x_p", X), k.get("x_e", XE), k.get("e", E), **k.get("kw", {})),
            ("x_p", "x_e"), ("e",)),
        "fpue_dataset": (lambda **k: adp().data.fpue_dataset(
            k.get("x_p", X), k.get("x_u", X), k.get("x_e", XE), k.get("e", E), **k.get("kw", {})),
            ("x_p", "x_u", "x_e"), ("e",)),
        "sse_dataset": (lambda **k: adp().data.sse_dataset(
            k.get("x_sse", X), k.get("w", W), k.get("e", np.ones(12)), **k.get("kw", {})),
            ("x_sse",), ("w", "e")),
    }
    probes = []
    for name, (call, arrays, binaries) in calls.items():
        for arg in arrays:
            n = 10 if arg == "x_e" else 12
            for what, value, _words in bad_arrays(n):
                probes.append(Probe(f"{name}: {arg} {what}", lambda t, c=call, a=arg, v=value:
                                    c(**{a: v}), f"`{arg}`"))
        for arg in binaries:
            n = 10 if (arg == "e" and name != "sse_dataset") else 12
            for what, value, _words in bad_binary(n):
                probes.append(Probe(f"{name}: {arg} {what}", lambda t, c=call, a=arg, v=value:
                                    c(**{a: v}), f"`{arg}`"))
        for what, value, _words in bad_ints("batch_size", len(arrays) if name != "pe_dataset"
                                           else 2):
            probes.append(Probe(f"{name}: {what}", lambda t, c=call, v=value:
                                c(kw={"batch_size": v}), "`batch_size`"))
        probes += [
            Probe(f"{name}: shares of the wrong count", lambda t, c=call: c(
                kw={"shares": [1] * 7}), "`shares`"),
            Probe(f"{name}: shares negative", lambda t, c=call, k=arrays: c(
                kw={"shares": [-1] + [1] * (len(k) - 1) if len(k) > 1 else [-1]}), "`shares`"),
            Probe(f"{name}: seed 'x'", lambda t, c=call: c(kw={"seed": "x"}), "`seed`"),
            Probe(f"{name}: shuffle 'yes'", lambda t, c=call: c(kw={"shuffle": "yes"}),
                  "`shuffle`"),
            Probe(f"{name}: steps_per_epoch 0", lambda t, c=call: c(
                kw={"steps_per_epoch": 0}), "`steps_per_epoch`"),
            Probe(f"{name}: correct", lambda t, c=call: next(iter(c(kw={
                "batch_size": 8, "seed": 0})))[1].shape[-1], check=lambda k: k == 3),
        ]
    return probes


# ------------------------------------------------------------------ TFRecord logs
def _write(path: Path, rows: int = 6, compression: str | None = None, cut: int = 0) -> str:
    import tensorflow as tf

    with tf.io.TFRecordWriter(str(path), compression) as writer:
        for i in range(rows):
            writer.write(tf.train.Example(features=tf.train.Features(feature={
                "x": tf.train.Feature(float_list=tf.train.FloatList(value=[i, 1.0])),
                "w": tf.train.Feature(int64_list=tf.train.Int64List(value=[i % 2]))}))
                .SerializeToString())
    if cut:
        path.write_bytes(path.read_bytes()[:-cut])
    return str(path)


def _corrupt(path: str) -> bytes:
    """The bytes of ``path`` with the length of its second record overwritten."""
    raw = bytearray(Path(path).read_bytes())
    second = 16 + int.from_bytes(raw[:8], "little")
    raw[second:second + 8] = (10**6).to_bytes(8, "little")
    return bytes(raw)


def _read(files: Any, **kw: Any) -> Any:
    import tensorflow as tf

    spec = {"x": tf.io.FixedLenFeature([2], tf.float32), "w": tf.io.FixedLenFeature([], tf.int64)}
    kw.setdefault("labels", "w")
    return _adp().data.read_tfrecords(files, spec, **kw)


def _rows(ds: Any) -> list[int]:
    return [int(w) for _, w in ds]


def tfrecord_probes() -> list[Probe]:
    probes = [
        Probe("read_tfrecords: no file matches", lambda t: _read(str(t / "*.tfrecord")),
              "`files`: no file matches"),
        Probe("read_tfrecords: an empty file", lambda t: _read(str(t / "e.tfrecord")),
              "every file is empty", setup=lambda t: (t / "e.tfrecord").write_bytes(b"")),
        Probe("read_tfrecords: an empty file, rows given", lambda t: (
            (t / "e.tfrecord").write_bytes(b""), _read(str(t / "e.tfrecord"), rows=5))[1],
              "every file is empty"),
        Probe("read_tfrecords: a text file", lambda t: _read(str(_files(t, "n.tfrecord")
                                                                  / "n.tfrecord")),
              "not a TFRecord file"),
        Probe("read_tfrecords: labels not in features", lambda t: _read(
            _write(t / "a.tfrecord"), labels="y"), "`labels`"),
        Probe("read_tfrecords: features not a dict", lambda t: _adp().data.read_tfrecords(
            _write(t / "a.tfrecord"), ["x"]), "`features`"),
        Probe("read_tfrecords: a directory", lambda t: _read(str(_files(t / "logs"))),
              "is a directory; give the files in it"),
        Probe("read_tfrecords: a corrupt length inside", lambda t: _read(str(t / "c.tfrecord")),
              "c.tfrecord' is truncated or corrupt", setup=lambda t: (t / "c.tfrecord")
              .write_bytes(_corrupt(_write(t / "ok.tfrecord")))),
        Probe("read_tfrecords: files 3", lambda t: _read(3), "`files`"),
        Probe("read_tfrecords: files []", lambda t: _read([]), "`files`"),
        Probe("read_tfrecords: compression 'snappy'", lambda t: _read(
            _write(t / "a.tfrecord"), compression_type="snappy"), "`compression_type`"),
        Probe("read_tfrecords: compression 3", lambda t: _read(
            _write(t / "a.tfrecord"), compression_type=3), "`compression_type`"),
        Probe("read_tfrecords: lower-case gzip (correct)", lambda t: _rows(_read(
            _write(t / "g.tfrecord", 6, "GZIP"), compression_type="gzip")),
              check=lambda r: r == [0, 1, 0, 1, 0, 1]),
        Probe("read_tfrecords: ZLIB (correct)", lambda t: _rows(_read(
            _write(t / "z.tfrecord", 4, "ZLIB"), compression_type="ZLIB")),
              check=lambda r: r == [0, 1, 0, 1]),
        Probe("read_tfrecords: an empty shard among others (correct)", lambda t: _rows(_read(
            [_write(t / "a.tfrecord", 4), (t / "b.tfrecord").write_bytes(b"") and None
             or str(t / "b.tfrecord")])), check=lambda r: r == [0, 1, 0, 1]),
    ]
    for what, cut in (("inside a record", 5), ("inside a header", 30), ("one byte", 1)):
        probes.append(Probe(f"read_tfrecords: truncated {what}", lambda t, c=cut: _read(
            _write(t / "cut.tfrecord", cut=c)), "cut.tfrecord' is truncated"))
    for written, said in (("GZIP", None), ("ZLIB", None), (None, "GZIP"), (None, "ZLIB"),
                          ("GZIP", "ZLIB"), ("ZLIB", "GZIP")):
        probes.append(Probe(f"read_tfrecords: a {written or 'plain'} file read as {said or 'plain'}",
                            lambda t, w=written, s=said: _read(_write(t / "f.tfrecord", 4, w),
                                                               compression_type=s),
                            r"f.tfrecord' is .*, but compression_type=.*; pass compression_type"))
    for what, value, _ in bad_ints("rows", 1):
        probes.append(Probe(f"read_tfrecords: {what}", lambda t, v=value: _read(
            _write(t / "a.tfrecord"), rows=v), "`rows`"))
    for part, rows in (("x_pu", (7, 6)), ("x_e", (6, 5))):  # the files hold 6 rows each
        probes.append(Probe(
            f"fit_pue: {part} read with a wrong rows=", lambda t, r=rows: _adp().fit_pue(
                lambda: _dense(dim=2), _read(_write(t / "pu.tfrecord"), rows=r[0]), None,
                _read(_write(t / "e.tfrecord"), rows=r[1]), None, verbose=0),
            f"`{part}`: read_tfrecords was given rows=[57], but its files hold 6 rows"))
    return probes


# ------------------------------------------------------------------ with_propensity
def _ds() -> Any:
    return _adp().data.pue_dataset(X, W, XE, E, batch_size=8, seed=0)


def propensity_probes() -> list[Probe]:
    import tensorflow as tf

    def wp(*a: Any, **k: Any) -> Any:
        return _adp().data.with_propensity(*a, **k)

    return [
        Probe("with_propensity: two output units", lambda t: wp(_ds(), _dense(units=2)),
              "one propensity per row"),
        Probe("with_propensity: two outputs", lambda t: wp(_ds(), _dense(outputs=2)),
              "one propensity per row"),
        Probe("with_propensity: a function of two columns", lambda t: wp(
            _ds(), lambda x: tf.ones((tf.shape(x)[0], 2))), "one propensity per row"),
        Probe("with_propensity: a sigmoid model as logits", lambda t: wp(
            _ds(), _dense("sigmoid"), from_logits=True), "sigmoid activation"),
        Probe("with_propensity: logits as probabilities", lambda t: list(wp(
            _ds(), _dense(), from_logits=False)), r"probabilities .*`from_logits=True`"),
        Probe("with_propensity: not a dataset", lambda t: wp(np.zeros(3), _dense()), "`dataset`"),
        Probe("with_propensity: 4-column labels", lambda t: wp(wp(_ds(), _dense("sigmoid")),
                                                              _dense("sigmoid")), "`dataset`"),
        Probe("with_propensity: not callable", lambda t: wp(_ds(), 3), "`exposure_model`"),
        Probe("with_propensity: from_logits 1", lambda t: wp(_ds(), _dense(), from_logits=1),
              "`from_logits`"),
        Probe("with_propensity: a sigmoid model (correct)", lambda t: next(iter(wp(
            _ds(), _dense("sigmoid"))))[1].shape[-1], check=lambda k: k == 4),
    ]




def data_probes() -> list[Probe]:
    """Every probe of the data layer."""
    return labels_probes() + builder_probes() + propensity_probes() + tfrecord_probes()


__all__ = ["data_probes"]
