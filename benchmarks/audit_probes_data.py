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
            r"`rows`=[57], but the files hold 6 record"))
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



# ------------------------------------------------------------------ the 3SE builder, and what users pass
def sse_pu_probes() -> list[Probe]:
    """``sse_pu_dataset`` (3SE: SSE rows and PU rows), every argument with every wrong value."""
    def call(**k: Any) -> Any:
        return _adp().data.sse_pu_dataset(
            k.get("x_sse", X), k.get("w_sse", W), k.get("e_sse", np.ones(12)),
            k.get("x_pu", X), k.get("w_pu", W), **k.get("kw", {}))

    name = "sse_pu_dataset"
    probes = []
    for arg in ("x_sse", "x_pu"):
        for what, value, _ in bad_arrays(12):
            probes.append(Probe(f"{name}: {arg} {what}", lambda t, a=arg, v=value: call(**{a: v}),
                                f"`{arg}`"))
    for arg in ("w_sse", "e_sse", "w_pu"):
        for what, value, _ in bad_binary(12):
            probes.append(Probe(f"{name}: {arg} {what}", lambda t, a=arg, v=value: call(**{a: v}),
                                f"`{arg}`"))
    for what, value, _ in bad_ints("batch_size", 2):
        probes.append(Probe(f"{name}: {what}", lambda t, v=value: call(kw={"batch_size": v}),
                            "`batch_size`"))
    probes += [
        Probe(f"{name}: w_sse 1 where e_sse is 0", lambda t: call(
            w_sse=np.ones(12), e_sse=np.r_[0.0, np.ones(11)]), "`w_sse`.*`e_sse`"),
        Probe(f"{name}: shares of the wrong count", lambda t: call(kw={"shares": [1, 1, 1]}),
              "`shares`"),
        Probe(f"{name}: seed 'x'", lambda t: call(kw={"seed": "x"}), "`seed`"),
        Probe(f"{name}: shuffle 'yes'", lambda t: call(kw={"shuffle": "yes"}), "`shuffle`"),
        Probe(f"{name}: steps_per_epoch 0", lambda t: call(kw={"steps_per_epoch": 0}),
              "`steps_per_epoch`"),
        Probe(f"{name}: correct", lambda t: next(iter(call(kw={"batch_size": 8, "seed": 0})))[1]
              .shape[-1], check=lambda k: k == 3),
        Probe("sse_dataset: w 1 where e is 0", lambda t: _adp().data.sse_dataset(
            X, np.ones(12), np.r_[0.0, np.ones(11)]), "`w`.*`e`"),
    ]
    return probes


def _masked(x: Any, entries: int = 1) -> Any:
    m = np.zeros(np.shape(x), bool)
    m.flat[:entries] = entries > 0
    return np.ma.masked_array(np.array(x, copy=True), mask=m)


def _first_batch(ds: Any) -> Any:
    x, y = next(iter(ds))
    return int(y.shape[0]), int(y.shape[-1])


def builder_input_probes() -> list[Probe]:
    """What users pass the builders: masked arrays, NumPy scalars, tensors, views, float16."""
    def pue(**k: Any) -> Any:
        return _adp().data.pue_dataset(k.get("x_pu", X), k.get("w", W), k.get("x_e", XE),
                                       k.get("e", E), batch_size=8, seed=0)

    read_only = np.array(X)
    read_only.flags.writeable = False
    probes = [
        Probe("pue_dataset: x_pu a masked array with a masked entry", lambda t: pue(
            x_pu=_masked(X)), r"`x_pu`.*mask"),
        Probe("pue_dataset: w a masked array with a masked entry", lambda t: pue(w=_masked(W)),
              r"`w`.*mask"),
        Probe("pe_dataset: x_p a masked array with a masked entry", lambda t: _adp().data
              .pe_dataset(_masked(X, 3), XE, E, batch_size=8), r"`x_p`.*mask"),
        Probe("sse_dataset: e a masked array with a masked entry", lambda t: _adp().data
              .sse_dataset(X, W, _masked(np.ones(12))), r"`e`.*mask"),
        Probe("pue_dataset: x_e 1e300 (finite float64)", lambda t: pue(x_e=np.full((10, 3),
                                                                             1e300)),
              r"`x_e`.*float32"),
        Probe("pue_dataset: masked arrays with nothing masked (correct)", lambda t: _first_batch(
            pue(x_pu=_masked(X, 0), w=_masked(W, 0))), check=lambda r: r == (8, 3)),
        Probe("pue_dataset: read-only arrays (correct)", lambda t: _first_batch(pue(
            x_pu=read_only)), check=lambda r: r == (8, 3)),
        Probe("pue_dataset: a reversed view x[:, ::-1] (correct)", lambda t: _first_batch(pue(
            x_pu=X[:, ::-1], x_e=XE[:, ::-1])), check=lambda r: r == (8, 3)),
        Probe("pue_dataset: float16 features (correct)", lambda t: _first_batch(pue(
            x_pu=X.astype(np.float16), x_e=XE.astype(np.float16))), check=lambda r: r == (8, 3)),
        Probe("pue_dataset: bool labels (correct)", lambda t: _first_batch(pue(
            w=W.astype(bool), e=E.astype(bool))), check=lambda r: r == (8, 3)),
        Probe("pue_dataset: tf.Tensor features (correct)", lambda t: _first_batch(pue(
            **_tensors(x_pu=X, x_e=XE))), check=lambda r: r == (8, 3)),
        Probe("pue_dataset: image-shaped features (correct)", lambda t: _first_batch(pue(
            x_pu=np.zeros((12, 4, 4, 1)), x_e=np.zeros((10, 4, 4, 1)))),
              check=lambda r: r == (8, 3)),
        Probe("pue_dataset: a dict of features (correct)", lambda t: _first_batch(pue(
            x_pu={"a": X[:, :1], "b": X[:, 1:]}, x_e={"a": XE[:, :1], "b": XE[:, 1:]})),
              check=lambda r: r == (8, 3)),
        Probe("pue_dataset: dicts of different keys", lambda t: pue(
            x_pu={"a": X[:, :1], "b": X[:, 1:]}, x_e={"a": XE[:, :1], "c": XE[:, 1:]}),
              r"`x_e`.*(keys|'b'|'c')|(keys|'b'|'c').*`x_e`"),
        Probe("pue_dataset: batch_size np.int64(8) (correct)", lambda t: _first_batch(
            _adp().data.pue_dataset(X, W, XE, E, batch_size=np.int64(8), seed=0)),
              check=lambda r: r == (8, 3)),
        Probe("pue_dataset: seed 2**40 (correct)", lambda t: _first_batch(
            _adp().data.pue_dataset(X, W, XE, E, batch_size=8, seed=2**40)),
              check=lambda r: r == (8, 3)),
    ]
    return probes


def _tensors(**arrays: Any) -> dict:
    import tensorflow as tf

    return {k: tf.constant(v) for k, v in arrays.items()}


def propensity_more_probes() -> list[Probe]:
    """with_propensity given models of another form than the features, and probabilities
    made other ways than a Dense sigmoid, read as logits."""
    from benchmarks.audit_values import SQUASHED, squashed

    def wp(ds: Any, model: Any, **k: Any) -> Any:
        return _adp().data.with_propensity(ds, model, **k)

    def dict_ds() -> Any:
        return _adp().data.pue_dataset({"a": X[:, :1], "b": X[:, 1:]}, W,
                                       {"a": XE[:, :1], "b": XE[:, 1:]}, E, batch_size=8, seed=0)

    probes = [
        Probe("with_propensity: an array-input model on a dict of features", lambda t: wp(
            dict_ds(), _dense("sigmoid")), r"`exposure_model`.*dict"),
        Probe("with_propensity: a dict-input model on an array of features", lambda t: wp(
            _ds(), _dict_model()), r"`exposure_model`.*(dict|array)"),
        Probe("with_propensity: a dict-input model on a dict of features (correct)", lambda t:
              next(iter(wp(dict_ds(), _dict_model())))[1].shape[-1], check=lambda k: k == 4),
    ]
    for how in SQUASHED:
        probes.append(Probe(f"with_propensity: a net ending in {how} as logits", lambda t, h=how:
                            wp(_ds(), squashed(h, dim=3), from_logits=True),
                            r"`exposure_model`.*(sigmoid|probabilit)|(sigmoid|probabilit).*logit"))
    return probes


def _dict_model() -> Any:
    import keras

    a, b = keras.Input((1,), name="a"), keras.Input((2,), name="b")
    out = keras.layers.Dense(1, "sigmoid")(keras.layers.Concatenate()([a, b]))
    return keras.Model({"a": a, "b": b}, out)


# ------------------------------------------------------------------ TFRecord names and logs
def _named_file(tmp: Path, name: str, rows: int = 6) -> str:
    (tmp / name).parent.mkdir(parents=True, exist_ok=True)
    return _write(tmp / name, rows)


def tfrecord_name_probes() -> list[Probe]:
    """Files and folders whose real names hold glob characters, and read_tfrecords' options."""
    import tensorflow as tf

    six, four = [0, 1, 0, 1, 0, 1], [0, 1, 0, 1]
    probes = [
        Probe("read_tfrecords: a file named day[1].tfrecord (correct)", lambda t: _rows(_read(
            _named_file(t, "day[1].tfrecord"))), check=lambda r: r == six),
        Probe("read_tfrecords: day[1].tfrecord beside day1.tfrecord reads itself (correct)",
              lambda t: (_named_file(t, "day1.tfrecord", 4), _rows(_read(_named_file(
                  t, "day[1].tfrecord"))))[1], check=lambda r: r == six),
        Probe("read_tfrecords: a file in a folder named log[v2]/ (correct)", lambda t: _rows(
            _read(_named_file(t, "log[v2]/a.tfrecord"))), check=lambda r: r == six),
        Probe("read_tfrecords: a glob inside a folder named log[v2]/ (correct)", lambda t: (
            _named_file(t, "log[v2]/a.tfrecord"), _named_file(t, "log[v2]/b.tfrecord", 4),
            _rows(_read(str(t / "log[v2]" / "*.tfrecord"))))[-1],
              check=lambda r: sorted(r) == sorted(six + four)),
        Probe("read_tfrecords: a real a*b.tfrecord beside axb.tfrecord reads itself (correct)",
              lambda t: (_named_file(t, "axb.tfrecord", 4), _rows(_read(_named_file(
                  t, "a*b.tfrecord"))))[1], check=lambda r: r == six),
        Probe("read_tfrecords: a real q?.tfrecord beside q1.tfrecord reads itself (correct)",
              lambda t: (_named_file(t, "q1.tfrecord", 4), _rows(_read(_named_file(
                  t, "q?.tfrecord"))))[1], check=lambda r: r == six),
        Probe("read_tfrecords: a list of names with brackets (correct)", lambda t: _rows(_read(
            [_named_file(t, "d[1].tfrecord"), _named_file(t, "d[2].tfrecord", 4)])),
              check=lambda r: sorted(r) == sorted(six + four)),
        Probe("read_tfrecords: a pathlib.Path (correct)", lambda t: _rows(_read(Path(
            _named_file(t, "p.tfrecord")))), check=lambda r: r == six),
        Probe("read_tfrecords: a folder with spaces and accents (correct)", lambda t: _rows(
            _read(_named_file(t, "données du jour/a b.tfrecord"))), check=lambda r: r == six),
        Probe("read_tfrecords: a symbolic link to a file (correct)", lambda t: (
            (t / "link.tfrecord").symlink_to(_named_file(t, "real.tfrecord")),
            _rows(_read(str(t / "link.tfrecord"))))[1], check=lambda r: r == six),
        Probe("read_tfrecords: a glob day[12].tfrecord over day1 and day2 (correct)", lambda t: (
            _named_file(t, "day1.tfrecord"), _named_file(t, "day2.tfrecord", 4),
            _rows(_read(str(t / "day[12].tfrecord"))))[-1],
              check=lambda r: sorted(r) == sorted(six + four)),
        Probe("read_tfrecords: day[2].tfrecord missing beside day[1].tfrecord", lambda t: (
            _named_file(t, "day[1].tfrecord"), _read(str(t / "day[2].tfrecord")))[1],
              r"`files`.*day\[2\]\.tfrecord"),
        Probe("read_tfrecords: a tuple of files (correct)", lambda t: _rows(_read(
            (_named_file(t, "a.tfrecord"),))), check=lambda r: r == six),
        Probe("read_tfrecords: rows np.int64(6) (correct)", lambda t: _rows(_read(
            _named_file(t, "a.tfrecord"), rows=np.int64(6))), check=lambda r: r == six),
        Probe("read_tfrecords: a VarLenFeature", lambda t: _adp().data.read_tfrecords(
            _named_file(t, "a.tfrecord"), {"x": tf.io.VarLenFeature(tf.float32)}),
              r"`features.*FixedLen"),
        Probe("read_tfrecords: labels 3", lambda t: _read(_named_file(t, "a.tfrecord"),
                                                          labels=3), "`labels`"),
        Probe("read_tfrecords: parse_batch 0", lambda t: _read(_named_file(t, "a.tfrecord"),
                                                               parse_batch=0), "`parse_batch`"),
        Probe("read_tfrecords: parse_batch True", lambda t: _read(_named_file(t, "a.tfrecord"),
                                                                  parse_batch=True),
              "`parse_batch`"),
        Probe("read_tfrecords: shuffle_files 'yes'", lambda t: _read(_named_file(
            t, "a.tfrecord"), shuffle_files="yes"), "`shuffle_files`"),
        Probe("read_tfrecords: seed 'x'", lambda t: _read(_named_file(t, "a.tfrecord"),
                                                          shuffle_files=True, seed="x"), "`seed`"),
        Probe("read_tfrecords: deterministic 'no'", lambda t: _read(_named_file(
            t, "a.tfrecord"), deterministic="no"), "`deterministic`"),
    ]
    return probes


def _log(tmp: Path, name: str = "log[v2]", **kw: Any) -> dict:
    kw = {"rows": 40, "shards": 1, "eval_rows": 10, **kw}
    return _adp().synthetic.write_ad_log(tmp / name, **kw)


def _log_rows(tmp: Path, name: str = "log[v2]") -> int:
    """Every PU row of the log in ``tmp/name``, read back by the files its meta names."""
    import tensorflow as tf

    meta = _adp().synthetic.read_ad_log_meta(tmp / name)
    spec = {"w": tf.io.FixedLenFeature([], tf.int64)}
    files = [str(tmp / name / f) for f in meta["files"]["pu"]]
    return sum(1 for _ in _adp().data.read_tfrecords(files, spec))


def _meta(tmp: Path, raw: bytes) -> dict:
    _log(tmp)
    (tmp / "log[v2]" / "meta.json").write_bytes(raw)
    return _adp().synthetic.read_ad_log_meta(tmp / "log[v2]")


def ad_log_probes() -> list[Probe]:
    """write_ad_log's options and folders, read_ad_log_meta on what editors and kills leave."""
    import json

    def meta_text(t: Path) -> str:
        _log(t, "plain")
        return (t / "plain" / "meta.json").read_text(encoding="utf-8")

    probes = [
        Probe("write_ad_log: into a folder named log[v2] and read back (correct)", lambda t: (
            _log(t), _log_rows(t))[1], check=lambda n: n == 20),
        Probe("write_ad_log: seed 2**40 (correct)", lambda t: _log(t, seed=2**40)["counts"],
              check=lambda c: c == {"pu": 20, "exposure": 20, "eval": 10}),
        Probe("write_ad_log: exposure_share 0", lambda t: _log(t, exposure_share=0.0),
              "`exposure_share`"),
        Probe("write_ad_log: config 3", lambda t: _log(t, config=3), "`config`"),
        Probe("read_ad_log_meta: meta.json with a UTF-8 byte-order mark (correct)", lambda t:
              _meta(t, b"\xef\xbb\xbf" + meta_text(t).encode())["counts"],
              check=lambda c: c["pu"] == 20),
        Probe("read_ad_log_meta: meta.json with CRLF lines (correct)", lambda t: _meta(
            t, meta_text(t).replace("\n", "\r\n").encode())["counts"],
              check=lambda c: c["pu"] == 20),
        Probe("read_ad_log_meta: meta.json saved as UTF-16 with its mark", lambda t: _meta(
            t, meta_text(t).encode("utf-16")), "meta.json.*(UTF|utf|encod|JSON)",
              check=lambda m: m["counts"]["pu"] == 20),
        Probe("read_ad_log_meta: meta.json cut short", lambda t: _meta(
            t, meta_text(t).encode()[:50]), "meta.json"),
        Probe("read_ad_log_meta: meta.json of another format", lambda t: _meta(
            t, json.dumps({"format": "other/9"}).encode()), "meta.json.*(format|adpue_tf)"),
        Probe("read_ad_log_meta: a folder that does not exist", lambda t: _adp().synthetic
              .read_ad_log_meta(t / "nope"), "nope"),
        Probe("read_ad_log_meta: a file", lambda t: _adp().synthetic.read_ad_log_meta(_files(
            t, "f.txt") / "f.txt"), "f.txt"),
    ]
    for what, value, _ in bad_ints("rows", 2):
        probes.append(Probe(f"write_ad_log: {what}", lambda t, v=value: _log(t, rows=v),
                            "`rows`"))
    for name, bad in (("shards", 0), ("chunk", 0), ("workers", 0), ("eval_rows", -1),
                      ("seed", -1)):
        probes.append(Probe(f"write_ad_log: {name}={bad}", lambda t, n=name, b=bad: _log(
            t, **{n: b}), f"`{name}`"))
    return probes


def data_probes() -> list[Probe]:
    """Every probe of the data layer."""
    return (labels_probes() + builder_probes() + propensity_probes() + tfrecord_probes()
            + sse_pu_probes() + builder_input_probes() + propensity_more_probes()
            + tfrecord_name_probes() + ad_log_probes())


__all__ = ["data_probes"]
