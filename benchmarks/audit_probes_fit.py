"""The audit's probes of the front door, ``adp.fit_pue``: its nets, features, labels and options.

Each bad call must be refused before any training, naming the argument; the
valid calls (features as lists, integers, a dict, a Dataset of rows) must
return a fit whose scores are finite. The data are tiny and the passes short.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from benchmarks.audit_runner import Probe
from benchmarks.audit_values import _adp, _data, _keras, bad_binary, bad_ints

#: Short passes: every probe that trains finishes in seconds.
_FAST = dict(epochs=1, min_steps=2, batch_size=64, verbose=0, candidates=["bce_w", "ratio"])


def _net(dim: int = 2, activation: str | None = None, dtype: str = "float32") -> Any:
    k = _keras()
    return k.Sequential([k.Input((dim,), dtype=dtype), k.layers.Dense(1, activation)])


def _id_net() -> Any:
    k = _keras()
    ids, num = k.Input((), dtype="int64", name="id"), k.Input((1,), name="num")
    h = k.layers.Concatenate()([k.layers.Embedding(10, 2)(ids), num])
    return k.Model({"id": ids, "num": num}, k.layers.Dense(1)(h))


def _with_text(x: np.ndarray) -> np.ndarray:
    """``x`` with its last column text, as ``np.asarray`` makes a table of mixed columns."""
    out = x.astype(object)
    out[:, -1] = "Oslo"
    return out


def _fit(build: Any = None, **change: Any) -> Any:
    s = _data()
    args = dict(x_pu=s.x_pu, w=s.w_pu, x_e=s.x_e, e=s.e_e)
    args.update({k: change.pop(k) for k in list(change) if k in args})
    return _adp().fit_pue(build or _net, args["x_pu"], args["w"], args["x_e"], args["e"],
                          **{**_FAST, **change})


def _finite(fit: Any) -> bool:
    return bool(fit.scores) and all(np.isfinite(v) for v in fit.scores.values())


def _rows(x: Any, y: Any, batch: int | None = None) -> Any:
    import tensorflow as tf

    ds = tf.data.Dataset.from_tensor_slices((x, y))
    return ds.batch(batch) if batch else ds


def fit_pue_probes() -> list[Probe]:
    s = _data()
    k = _keras
    same = []  # the one model a bad build_net keeps returning
    layer = []  # a layer made once, outside build_net

    def kept() -> Any:
        if not same:
            same.append(_net())
        return same[0]

    def reused() -> Any:
        if not layer:
            layer.append(k().layers.Dense(1))
        return k().Sequential([k().Input((2,)), layer[0]])

    probes = [
        Probe("fit_pue: build_net a model", lambda t: _adp().fit_pue(
            _net(), s.x_pu, s.w_pu, s.x_e, s.e_e, **_FAST), "`build_net`"),
        Probe("fit_pue: build_net returns 3", lambda t: _fit(lambda: 3), r"`build_net\(\)`"),
        Probe("fit_pue: a sigmoid output", lambda t: _fit(lambda: _net(activation="sigmoid")),
              "logit.*sigmoid"),
        Probe("fit_pue: two output units", lambda t: _fit(lambda: k().Sequential(
            [k().Input((2,)), k().layers.Dense(2)])), "one output of shape"),
        Probe("fit_pue: the same model at each call", lambda t: _fit(kept),
              "same model at two calls"),
        Probe("fit_pue: a layer shared between calls", lambda t: _fit(reused),
              "share trainable weights"),
        Probe("fit_pue: a string input for numbers", lambda t: _fit(
            lambda: _net(dtype="string")), "`x_pu` and `x_e` hold float32"),
        Probe("fit_pue: a dict of features for a one-input net", lambda t: _fit(
            x_pu={"a": s.x_pu[:, :1], "b": s.x_pu[:, 1:]},
            x_e={"a": s.x_e[:, :1], "b": s.x_e[:, 1:]}), "`x_pu` is a dict of features"),
        Probe("fit_pue: a net of two listed inputs", lambda t: _fit(lambda: k().Model(
            [i := k().Input((1,)), j := k().Input((1,))],
            k().layers.Dense(1)(k().layers.Concatenate()([i, j])))), "a list of 2 inputs"),
        Probe("fit_pue: an id beyond its Embedding", lambda t: _fit(
            _id_net, x_pu={"id": np.r_[12, np.zeros(119, int)], "num": s.x_pu[:, :1]},
            x_e={"id": np.zeros(120, int), "num": s.x_e[:, :1]}),
              "feature 'id' of `x_pu` holds ids in \\[0, 12\\]"),
        Probe("fit_pue: features of another width", lambda t: _fit(
            x_pu=np.zeros((120, 3)), x_e=np.zeros((120, 3))), r"rows of shape \(3,\)"),
        Probe("fit_pue: x_e of another width", lambda t: _fit(x_e=np.zeros((120, 3))),
              "same features"),
        Probe("fit_pue: a text column among numbers", lambda t: _fit(x_pu=_with_text(s.x_pu)),
              r"`x_pu` mixes strings with float values.*a dict of features"),
        Probe("fit_pue: x_pu NaN", lambda t: _fit(x_pu=np.where(
            np.arange(240).reshape(120, 2) == 7, np.nan, s.x_pu)), "`x_pu`.*NaN"),
        Probe("fit_pue: x_e inf", lambda t: _fit(x_e=np.where(
            np.arange(240).reshape(120, 2) == 7, np.inf, s.x_e)), "`x_e`.*infinite"),
        Probe("fit_pue: x_pu complex", lambda t: _fit(x_pu=s.x_pu.astype(complex)), "`x_pu`"),
        Probe("fit_pue: x_pu None", lambda t: _fit(x_pu=None), "`x_pu`"),
        Probe("fit_pue: no observed positive", lambda t: _fit(w=np.zeros(120)),
              "`w` has 0 observed"),
        Probe("fit_pue: e all 1", lambda t: _fit(e=np.ones(120)), "`e` holds only"),
        Probe("fit_pue: a batched Dataset", lambda t: _fit(
            x_pu=_rows(s.x_pu, s.w_pu, 32), w=None), "`x_pu` must be a Dataset of unbatched"),
        Probe("fit_pue: an endless Dataset", lambda t: _fit(
            x_pu=_rows(s.x_pu, s.w_pu).repeat(), w=None), "`x_pu` is an infinite Dataset"),
        Probe("fit_pue: a Dataset and w", lambda t: _fit(x_pu=_rows(s.x_pu, s.w_pu)),
              "`w` must be None"),
        Probe("fit_pue: a Dataset of features only", lambda t: _fit(
            x_pu=_rows(s.x_pu, s.w_pu).map(lambda x, w: x), w=None), "`x_pu` must be"),
        Probe("fit_pue: unknown candidate", lambda t: _fit(candidates=["nope"]),
              "`candidates`"),
        Probe("fit_pue: no candidate", lambda t: _fit(candidates=[]), "`candidates`"),
        Probe("fit_pue: validation_split 0.7", lambda t: _fit(validation_split=0.7),
              "`validation_split`"),
        Probe("fit_pue: verbose True", lambda t: _fit(verbose=True), "`verbose`"),
        Probe("fit_pue: learning_rate NaN", lambda t: _fit(learning_rate=float("nan")),
              "`learning_rate`"),
        Probe("fit_pue: folds 100", lambda t: _fit(folds=100), "`folds`"),
        Probe("fit_pue: final 'best'", lambda t: _fit(final="best"), "`final`"),
        Probe("fit_pue: correct, arrays", lambda t: _fit(), check=_finite),
        Probe("fit_pue: correct, lists and integers", lambda t: _fit(
            x_pu=np.round(s.x_pu * 10).astype(int).tolist(),
            x_e=np.round(s.x_e * 10).astype(int)), check=_finite),
        Probe("fit_pue: correct, a Dataset of rows", lambda t: _fit(
            x_pu=_rows(s.x_pu, s.w_pu), w=None), check=_finite),
    ]
    choose = lambda **kw: _adp().recommend.choose(  # noqa: E731
        **{"scores": {"a": 0.1, "b": 0.2}, "gap_se": {"a": 0.0, "b": 0.01}, "nll": {},
           "tolerance": 2.0, **kw})
    probes += [
        Probe("choose: a NaN score", lambda t: choose(scores={"a": float("nan"), "b": 0.2}),
              "`scores` must be finite"),
        Probe("choose: tolerance -1", lambda t: choose(tolerance=-1.0), "`tolerance`"),
        Probe("choose: a missing standard error", lambda t: choose(gap_se={"a": 0.0}),
              "`gap_se` must have a value"),
        Probe("choose: correct", lambda t: choose(), check=lambda c: c == "a"),
        Probe("RatioLogit: floor 'a'", lambda t: _adp().recommend.RatioLogit(floor="a"),
              "`floor` must be a number"),
        Probe("RatioLogit: floor 0", lambda t: _adp().recommend.RatioLogit(floor=0.0),
              "`floor` must lie in"),
    ]
    for what, value, words in bad_binary(120):
        if value is not None:
            probes.append(Probe(f"fit_pue: w {what}", lambda t, v=value: _fit(w=v),
                                f"`w`.*{words}" if what != "wrong length" else "`w`"))
    for name, minimum in (("epochs", 1), ("batch_size", 2), ("seed", 0), ("patience", 1)):
        for what, value, words in bad_ints(name, minimum):
            probes.append(Probe(f"fit_pue: {what}", lambda t, n=name, v=value: _fit(**{n: v}),
                                words))
    return probes


__all__ = ["fit_pue_probes"]
