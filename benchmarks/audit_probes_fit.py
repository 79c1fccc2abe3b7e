"""The audit's probes of the front door, ``adp.fit_pue``: its nets, features, labels and options.

Each bad call must be refused before any training, naming the argument; the
valid calls (features as lists, integers, a dict, a Dataset of rows) must
return a fit whose scores are finite. The data are tiny and the passes short.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from benchmarks.audit_runner import Probe
from benchmarks.audit_values import (
    SQUASHED_ALL,
    _adp,
    _data,
    _keras,
    bad_binary,
    bad_ints,
    squashed,
)

#: Short passes: every probe that trains finishes in seconds.
_FAST = dict(epochs=1, min_steps=2, batch_size=64, verbose=0, candidates=["bce_w", "ratio"])


def _net(dim: int = 2, activation: str | None = None, dtype: str = "float32") -> Any:
    k = _keras()
    return k.Sequential([k.Input((dim,), dtype=dtype), k.layers.Dense(1, activation)])


def _ratio_logit(**kwargs: Any) -> Any:
    """``RatioLogit(**kwargs)``, a layer of the composites, imported on first use."""
    from adpue_tf.recommend.compose import RatioLogit

    return RatioLogit(**kwargs)


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
    return _adp().fit_pue(_net if build is None else build, args["x_pu"], args["w"],
                          args["x_e"], args["e"], **{**_FAST, **change})


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
        Probe("fit_pue: folds 5 (retired)", lambda t: _fit(folds=5), "no longer takes `folds`"),
        Probe("fit_pue: final 'refit' (retired)", lambda t: _fit(final="refit"),
              "no longer takes `final`"),
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
        Probe("RatioLogit: floor 'a'", lambda t: _ratio_logit(floor="a"),
              "`floor` must be a number"),
        Probe("RatioLogit: floor 0", lambda t: _ratio_logit(floor=0.0),
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
    return probes + input_probes() + option_probes()


# ------------------------------------------------------------------ what users pass fit_pue
def _named(kind: str) -> Any:
    """A fresh net under fixed names, as users write them (the same names at every call)."""
    k = _keras()
    if kind == "Sequential":
        return k.Sequential([k.Input((2,)), k.layers.Dense(1)], name="net")
    if kind == "layers":
        return k.Sequential([k.Input((2,), name="x"), k.layers.Dense(4, "relu", name="hidden"),
                             k.layers.Dense(1, name="logit")], name="net")
    if kind == "functional":
        i = k.Input((2,), name="features")
        return k.Model(i, k.layers.Dense(1, name="logit")(i), name="net")
    ids, num = k.Input((), dtype="int64", name="id"), k.Input((1,), name="num")
    h = k.layers.Concatenate(name="join")([k.layers.Embedding(10, 2, name="emb")(ids), num])
    return k.Model({"id": ids, "num": num}, k.layers.Dense(1, name="logit")(h), name="net")


def _ids(n: int, floats: bool = False, odd: float | None = None, at: int = 3) -> dict:
    """Features for :func:`_id_net`: ids in [0, 10) (floats if asked, ``odd`` at row ``at``)."""
    s = _data()
    ids = np.arange(n) % 10
    ids = ids.astype(np.float64) if floats or odd is not None else ids
    if odd is not None:
        ids[at] = odd
    x = s.x_pu if n == len(s.x_pu) else s.x_e
    return {"id": ids, "num": x[:n, :1]}


def _masked(x: np.ndarray, entries: int = 1) -> np.ndarray:
    m = np.zeros(np.shape(x), bool)
    m.flat[:entries] = True if entries else False
    return np.ma.masked_array(np.array(x, copy=True), mask=m)


def _warned(call: Any) -> tuple:
    """``(result, [warning messages])`` of ``call()``, every UserWarning recorded."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = call()
    return result, [str(w.message) for w in caught if issubclass(w.category, UserWarning)]


def _warns(pattern: str, *, finite: bool = True) -> Any:
    """A check of :func:`_warned`'s pair: a finite fit that warned with ``pattern``."""
    import re

    return lambda r: (not finite or _finite(r[0])) and any(re.search(pattern, m, re.S)
                                                          for m in r[1])


def _unexposed(n: int = 600, seed: int = 0) -> dict:
    """Logs where W = 1 only on rows the exposure log never exposes (x0 > 0 is never shown)."""
    rng = np.random.default_rng(seed)
    x_pu, x_e = rng.uniform(-4, 4, size=(n, 2)), rng.uniform(-4, 4, size=(n, 2))
    e = ((x_e[:, 0] < -1) & (rng.random(n) < 0.6)).astype(float)
    w = ((x_pu[:, 0] > 1) & (rng.random(n) < 0.6)).astype(float)
    return dict(x_pu=x_pu, w=w, x_e=x_e, e=e)


def _labels_of(mean_w: float, mean_e: float, n: int = 120, seed: int = 1) -> dict:
    rng = np.random.default_rng(seed)
    w = (rng.random(n) < mean_w).astype(float)
    w[0] = 0.0
    return dict(w=w, e=(rng.random(n) < mean_e).astype(float))


def input_probes() -> list[Probe]:
    """Nets under fixed names, seeds of any size, nets ending in a probability, labels
    W = E·Y cannot give, ids as floats, masked arrays, huge features, unusual arrays."""
    s = _data()
    probes = [Probe(f"fit_pue: a net under fixed names ({kind}, correct)",
                    lambda t, kd=kind: _fit(lambda: _named(kd)), check=_finite)
              for kind in ("Sequential", "layers", "functional")]
    probes += [
        Probe("fit_pue: a dict-input net under fixed names (correct)", lambda t: _fit(
            lambda: _named("dict"), x_pu=_ids(120), x_e=_ids(120)), check=_finite),
        Probe("fit_pue: a net under fixed names, refit=False (correct)", lambda t: _fit(
            lambda: _named("Sequential"), refit=False), check=_finite),
    ]
    for seed in (20240601, 2**31 - 1, 2**31, 2**32, 2**40, 2**53 + 1, 2**63 - 1, 2**64, 10**30,
                 np.int64(2**40), np.uint64(2**63), np.int32(7)):
        what = f"{type(seed).__name__}({seed})" if isinstance(seed, np.generic) else str(seed)
        probes.append(Probe(f"fit_pue: seed {what} (correct)", lambda t, v=seed: _fit(seed=v),
                            check=_finite))
    probes += [
        Probe("fit_pue: seed np.float64(3.0)", lambda t: _fit(seed=np.float64(3.0)), "`seed`"),
        Probe("fit_pue: seed -2**40", lambda t: _fit(seed=-2**40), "`seed`"),
        Probe("fit_pue: seed None", lambda t: _fit(seed=None), "`seed`"),
    ]
    for how in SQUASHED_ALL:
        probes.append(Probe(f"fit_pue: a net ending in {how}", lambda t, h=how: _fit(
            lambda: squashed(h)), r"`build_net\(\)`.*logit"))
    unexposed = _unexposed()
    probes += [
        Probe("fit_pue: mean(w) far above mean(e)", lambda t: _fit(**_labels_of(0.8, 0.1)),
              r"`w`.*`e`"),
        Probe("fit_pue: w and e swapped", lambda t: _fit(w=s.e_e, e=s.w_pu), r"`w`.*`e`"),
        Probe("fit_pue: a PU log whose negatives were down-sampled", lambda t: _fit(
            **_labels_of(0.6, 0.3)), r"`w`.*`e`"),
        Probe("fit_pue: w all ones", lambda t: _fit(w=np.ones(120)), r"`w`.*\b(all|every)\b"),
        Probe("fit_pue: w all True", lambda t: _fit(w=np.ones(120, bool)),
              r"`w`.*\b(all|every)\b"),
        Probe("fit_pue: W = 1 only where the exposure log never exposes (warns)",
              lambda t: _warned(lambda: _fit(**unexposed, min_steps=400, learning_rate=0.1)),
              check=_warns(r"W = 1.*(θ̂|expos)")),
    ]
    probes += [
        Probe("fit_pue: float ids with a fraction in x_pu", lambda t: _fit(
            _id_net, x_pu=_ids(120, odd=2.5), x_e=_ids(120)),
              r"feature 'id' of `x_pu`.*(non-integer|whole|integer)"),
        Probe("fit_pue: float ids with a fraction in x_e", lambda t: _fit(
            _id_net, x_pu=_ids(120), x_e=_ids(120, odd=0.5, at=7)),
              r"feature 'id' of `x_e`.*(non-integer|whole|integer)"),
        Probe("fit_pue: float ids in both logs, a fraction in x_pu", lambda t: _fit(
            _id_net, x_pu=_ids(120, odd=2.5), x_e=_ids(120, floats=True)),
              r"feature 'id' of `x_pu`.*(non-integer|whole|integer)"),
        Probe("fit_pue: float32 ids with a fraction", lambda t: _fit(
            _id_net, x_pu={**_ids(120), "id": (np.arange(120) % 10 + 0.25).astype(np.float32)},
            x_e=_ids(120)), r"feature 'id' of `x_pu`.*(non-integer|whole|integer)"),
        Probe("fit_pue: float ids NaN", lambda t: _fit(
            _id_net, x_pu=_ids(120, odd=np.nan), x_e=_ids(120)), r"x_pu.*id.*NaN"),
        Probe("fit_pue: whole float ids (correct)", lambda t: _fit(
            _id_net, x_pu=_ids(120, floats=True), x_e=_ids(120, floats=True)), check=_finite),
    ]
    probes += [
        Probe("fit_pue: x_pu a masked array with a masked entry", lambda t: _fit(
            x_pu=_masked(s.x_pu)), r"`x_pu`.*mask"),
        Probe("fit_pue: x_e a masked array with masked entries", lambda t: _fit(
            x_e=_masked(s.x_e, 5)), r"`x_e`.*mask"),
        Probe("fit_pue: w a masked array with a masked entry", lambda t: _fit(
            w=_masked(s.w_pu)), r"`w`.*mask"),
        Probe("fit_pue: e a masked array with a masked entry", lambda t: _fit(
            e=_masked(s.e_e)), r"`e`.*mask"),
        Probe("fit_pue: a masked feature in a dict", lambda t: _fit(
            _id_net, x_pu={**_ids(120), "num": _masked(s.x_pu[:, :1])}, x_e=_ids(120)),
              r"x_pu.*num.*mask"),
        Probe("fit_pue: masked arrays with nothing masked (correct)", lambda t: _fit(
            x_pu=_masked(s.x_pu, 0), w=_masked(s.w_pu, 0)), check=_finite),
    ]
    huge = r"`x_pu`.*(scale|large|float32|standardi|saturat)"
    probes += [
        Probe("fit_pue: features around 1e30", lambda t: _warned(lambda: _fit(
            x_pu=s.x_pu * 1e30, x_e=s.x_e * 1e30)), huge, check=_warns(huge)),
        Probe("fit_pue: one feature around 1e30", lambda t: _warned(lambda: _fit(
            x_pu=s.x_pu * [1e30, 1], x_e=s.x_e * [1e30, 1])), huge, check=_warns(huge)),
        Probe("fit_pue: features around -1e30", lambda t: _warned(lambda: _fit(
            x_pu=-np.abs(s.x_pu) * 1e30, x_e=-np.abs(s.x_e) * 1e30)), huge, check=_warns(huge)),
        Probe("fit_pue: float32 features around 1e30", lambda t: _warned(lambda: _fit(
            x_pu=(s.x_pu * 1e30).astype(np.float32), x_e=(s.x_e * 1e30).astype(np.float32))),
              huge, check=_warns(huge)),
        Probe("fit_pue: x_e alone around 1e30", lambda t: _warned(lambda: _fit(
            x_e=s.x_e * 1e30)), r"`x_e`.*(scale|large|float32|differ|shift|mean)",
              check=_warns(r"`x_e`")),
    ]
    read_only = np.array(s.x_pu)
    read_only.flags.writeable = False
    probes += [
        Probe("fit_pue: read-only x_pu (correct)", lambda t: _fit(x_pu=read_only), check=_finite),
        Probe("fit_pue: a non-contiguous view x_pu[:, ::-1] (correct)", lambda t: _fit(
            x_pu=s.x_pu[:, ::-1], x_e=s.x_e[:, ::-1]), check=_finite),
        Probe("fit_pue: float16 features (correct)", lambda t: _fit(
            x_pu=s.x_pu.astype(np.float16), x_e=s.x_e.astype(np.float16)), check=_finite),
        Probe("fit_pue: w and e as bool arrays (correct)", lambda t: _fit(
            w=s.w_pu.astype(bool), e=s.e_e.astype(bool)), check=_finite),
        Probe("fit_pue: tf.Tensor features and labels (correct)", lambda t: _fit(
            **_tensors(x_pu=s.x_pu, w=s.w_pu, x_e=s.x_e, e=s.e_e)), check=_finite),
        Probe("fit_pue: the same array as x_pu and x_e (correct)", lambda t: _fit(
            x_e=s.x_pu, e=s.e_e), check=_finite),
        Probe("fit_pue: x_e of 3 rows", lambda t: _fit(x_e=s.x_e[:3], e=np.array([1., 0, 1])),
              "`(x_e|e)`.*rows"),
        Probe("fit_pue: build_net an empty dict", lambda t: _fit({}), "`build_net`"),
        Probe("fit_pue: build_net a dict of models", lambda t: _fit(
            {"a": _net(), "b": _net()}), r"`build_net\['a'\]`"),
    ]
    return probes


def _tensors(**arrays: Any) -> dict:
    import tensorflow as tf

    return {k: tf.constant(v) for k, v in arrays.items()}


def option_probes() -> list[Probe]:
    """fit_pue's options not probed above: each refused by name before any training."""
    probes = []
    for name in ("rounds", "min_steps"):
        for what, value, words in bad_ints(name, 1):
            probes.append(Probe(f"fit_pue: {what}", lambda t, n=name, v=value: _fit(
                **{n: v}), words))
    bad = {
        "tolerance": (float("nan"), -1.0, "2", float("inf")),
        "learning_rate": (0.0, -0.01, "0.01", float("inf"), True),
        "validation_split": (0.0, 1.0, -0.1, float("nan"), "0.2"),
        "refit": ("yes", 1, None),
        "jit_compile": ("no", 1),
        "final": (3, ""),
        "candidates": (3, [None], {"bce_w": 1}),
    }
    for name, values in bad.items():
        for value in values:
            probes.append(Probe(f"fit_pue: {name}={value!r}", lambda t, n=name, v=value: _fit(
                **{n: v}), f"`{name}`"))
    return probes


__all__ = ["fit_pue_probes"]
