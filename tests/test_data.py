"""Tests for adpue_tf.data: packing, shares, interleaving, epochs, validation."""

from __future__ import annotations

import glob
import math
import warnings

import keras
import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings
from hypothesis import strategies as st

from adpue_tf import data
from adpue_tf.labels import Source

RNG = np.random.default_rng(0)
D = 3


def _x(n: int, offset: int) -> np.ndarray:
    """Features whose column 0 is a unique row id (offset + row)."""
    x = RNG.normal(size=(n, D))
    x[:, 0] = offset + np.arange(n)
    return x


def _bits(n: int) -> np.ndarray:
    return RNG.integers(0, 2, size=n).astype(np.int64)


# Data for every setting; ids: PU 0.., E 1000.., P 2000.., U 3000.., SSE 4000..
N = {"pu": 23, "e": 9, "p": 7, "u": 12, "sse": 17}
X = {k: _x(n, 1000 * int(Source[k.upper()])) for k, n in N.items()}
W_PU, E_E = _bits(N["pu"]), _bits(N["e"])
E_SSE = _bits(N["sse"])
W_SSE = E_SSE * _bits(N["sse"])

BUILDERS = {
    "pue": (data.pue_dataset, (X["pu"], W_PU, X["e"], E_E), ("pu", "e")),
    "pe": (data.pe_dataset, (X["p"], X["e"], E_E), ("p", "e")),
    "fpue": (data.fpue_dataset, (X["p"], X["u"], X["e"], E_E), ("p", "u", "e")),
    "sse": (data.sse_dataset, (X["sse"], W_SSE, E_SSE), ("sse",)),
    "sse_pu": (data.sse_pu_dataset, (X["sse"], W_SSE, E_SSE, X["pu"], W_PU), ("sse", "pu")),
}


def _expected_labels(ids: np.ndarray) -> np.ndarray:
    """The packed y each row id must carry."""
    out = np.zeros((len(ids), 3), np.float32)
    for r, i in enumerate(ids.astype(int)):
        src, j = divmod(i, 1000)
        w = {Source.PU: W_PU, Source.SSE: W_SSE}.get(Source(src))
        e = {Source.E: E_E, Source.SSE: E_SSE}.get(Source(src))
        out[r] = (0 if w is None else w[j], 0 if e is None else e[j], src)
    return out


def _batches(ds: tf.data.Dataset) -> list[tuple[np.ndarray, np.ndarray]]:
    return [(x.numpy(), y.numpy()) for x, y in ds]


def _counts(y: np.ndarray, keys: tuple[str, ...]) -> list[int]:
    return [int(np.sum(y[:, 2] == int(Source[k.upper()]))) for k in keys]


@pytest.mark.parametrize("name", list(BUILDERS))
def test_shapes_dtypes_and_labels_per_source(name):
    build, args, _ = BUILDERS[name]
    ds = build(*args, batch_size=8, seed=0)
    assert ds.element_spec[0].shape == (8, D) and ds.element_spec[0].dtype == tf.float32
    assert ds.element_spec[1].shape == (8, 3) and ds.element_spec[1].dtype == tf.float32
    for x, y in _batches(ds):
        np.testing.assert_array_equal(y, _expected_labels(x[:, 0]))


def test_integer_and_image_features_are_cast_to_float32():
    x_pu = np.arange(10 * 4 * 4).reshape(10, 4, 4, 1).astype(np.int32)
    ds = data.pue_dataset(x_pu, np.zeros(10), x_pu[:5] * 2, np.c_[[1, 0, 1, 1, 0]], batch_size=6)
    x, y = next(iter(ds))
    assert x.dtype == tf.float32 and x.shape == (6, 4, 4, 1) and y.shape == (6, 3)


@pytest.mark.parametrize(
    "shares, expected",
    [(None, [6, 2]), ([1, 1], [4, 4]), ({"E": 3, Source.PU: 1}, [2, 6]), (np.array([7, 1]), [7, 1])],
)
def test_per_batch_counts_follow_shares(shares, expected):
    x_pu, x_e = _x(30, 0), _x(10, 1000)
    ds = data.pue_dataset(x_pu, np.zeros(30), x_e, np.arange(10) % 2, batch_size=8, shares=shares)
    for _, y in _batches(ds):
        assert _counts(y, ("pu", "e")) == expected


@pytest.mark.parametrize(
    "shares, batch_size, expected",
    [([3, 1], 10, [8, 2]), ([1, 1, 1], 10, [4, 3, 3]), ([1, 1000], 4, [1, 3]),
     ([1, 1, 1000], 5, [1, 1, 3]), ([2.5, 2.5, 5], 7, [2, 2, 3]), ([1], 3, [3])],
)
def test_batch_counts_largest_remainder(shares, batch_size, expected):
    assert data.batch_counts(shares, batch_size) == expected


def test_interleave_order_spreads_every_stream_over_replica_slices():
    # Exhaustive over small batches: each of R equal contiguous slices holds every
    # stream with k >= 2R (k >= R with two streams), as the module docstring says.
    from adpue_tf.data.builders import interleave_order

    for total in range(2, 25):
        for k0 in range(1, total):
            for k1 in range(1, total - k0 + 1):
                counts = [k0, k1] + ([total - k0 - k1] if total > k0 + k1 else [])
                order = interleave_order(counts)
                source = np.repeat(np.arange(len(counts)), counts)[order]
                assert sorted(order) == list(range(total))
                for i in range(len(counts)):  # rows keep their order within a stream
                    assert np.all(np.diff(order[source == i]) > 0)
                for r in (r for r in range(2, total + 1) if total % r == 0):
                    factor = 1 if len(counts) == 2 else 2
                    for part in np.split(source, r):
                        for i, k in enumerate(counts):
                            assert k < factor * r or i in part, (counts, r, source)


@pytest.mark.filterwarnings("ignore:.*repeats about")  # pe: 8 of the 7 P rows per batch
@pytest.mark.parametrize("name", list(BUILDERS))
def test_every_contiguous_slice_holds_every_source(name):
    build, args, keys = BUILDERS[name]
    for slices in (2, 4):
        ds = build(*args, batch_size=16, shares=[1] * len(keys), seed=1)
        for _, y in _batches(ds):
            for part in np.split(y, slices):
                assert all(c >= 1 for c in _counts(part, keys)), (slices, part[:, 2])


@pytest.mark.parametrize("name", list(BUILDERS))
@pytest.mark.parametrize("batch_size", [5, 8])
def test_epoch_length_and_full_coverage_of_slowest_stream(name, batch_size):
    build, args, keys = BUILDERS[name]
    ds = build(*args, batch_size=batch_size, seed=3)
    counts = data.batch_counts([N[k] for k in keys], batch_size)
    expected = max(math.ceil(N[k] / c) for k, c in zip(keys, counts))
    assert expected == data.epoch_length([N[k] for k in keys], counts)
    batches = _batches(ds)
    assert len(ds) == len(batches) == expected
    assert int(ds.cardinality()) == expected
    slowest = keys[int(np.argmax([N[k] / c for k, c in zip(keys, counts)]))]
    ids = np.concatenate([x[:, 0] for x, _ in batches])
    assert set(X[slowest][:, 0]) <= set(ids)


def test_seed_reproducible_and_reshuffled_each_iteration():
    build, args, _ = BUILDERS["fpue"]
    first = _batches(build(*args, batch_size=6, seed=7))
    again = _batches(build(*args, batch_size=6, seed=7))
    other = _batches(build(*args, batch_size=6, seed=8))
    for (xa, ya), (xb, yb) in zip(first, again):
        np.testing.assert_array_equal(xa, xb)
        np.testing.assert_array_equal(ya, yb)
    ids = lambda bs: np.concatenate([x[:, 0] for x, _ in bs])  # noqa: E731
    assert not np.array_equal(ids(first), ids(other))
    ds = build(*args, batch_size=6, seed=7)
    assert not np.array_equal(ids(_batches(ds)), ids(_batches(ds)))  # next epoch differs


@pytest.mark.parametrize("shuffle", [True, False])
def test_array_rows_come_once_per_pass_in_batches_across_passes(shuffle):
    """Arrays: each pass of a stream is one permutation of its rows (the identity
    unshuffled); batches run on across passes, and every pass is reshuffled."""
    x = np.arange(10, dtype="float32")[:, None]
    w = np.tile([1.0, 0.0], 5)
    # 10 PU rows against 30 E rows, 4 PU rows per batch: 7.5 passes of the PU stream
    ds = data.pue_dataset(x, w, np.full((30, 1), 99.0, "float32"), np.tile([1, 0], 15),
                          batch_size=16, seed=5, shuffle=shuffle, steps_per_epoch=15)
    ids = [int(v) for xb, _ in _batches(ds) for v in xb[:, 0] if v < 99]
    assert len(ids) == 60  # 15 batches of 4 PU rows, cut across passes
    passes = [ids[i:i + 10] for i in range(0, 60, 10)]
    for rows in passes:
        assert sorted(rows) == list(range(10))
    if shuffle:
        assert len({tuple(rows) for rows in passes}) == len(passes)
    else:
        assert all(rows == list(range(10)) for rows in passes)


def test_shuffle_false_is_deterministic_and_in_order():
    build, args, _ = BUILDERS["pue"]
    ds = build(*args, batch_size=8, shuffle=False)
    a, b = _batches(ds), _batches(ds)
    for (xa, ya), (xb, yb) in zip(a, b):
        np.testing.assert_array_equal(xa, xb)
        np.testing.assert_array_equal(ya, yb)
    ids = np.concatenate([x[:, 0] for x, _ in a])
    pu_ids = ids[ids < 1000]
    np.testing.assert_array_equal(pu_ids[: N["pu"]], np.arange(N["pu"]))


def _as_dataset(x, *labels):
    return tf.data.Dataset.from_tensor_slices((x, *labels) if labels else x)


@pytest.mark.parametrize("shuffle", [False, pytest.param(True, marks=pytest.mark.slow)])
def test_dataset_inputs_match_arrays(shuffle):
    cases = [
        (data.pue_dataset, (X["pu"], W_PU, X["e"], E_E),
         (_as_dataset(X["pu"], W_PU), None, _as_dataset(X["e"], E_E[:, None]), None)),
        (data.pe_dataset, (X["p"], X["e"], E_E), (_as_dataset(X["p"]), X["e"], E_E)),
        (data.fpue_dataset, (X["p"], X["u"], X["e"], E_E),
         (_as_dataset(X["p"]), _as_dataset(X["u"]), _as_dataset(X["e"], E_E), None)),
        (data.sse_dataset, (X["sse"], W_SSE, E_SSE), (_as_dataset(X["sse"], W_SSE, E_SSE), None, None)),
        (data.sse_pu_dataset, (X["sse"], W_SSE, E_SSE, X["pu"], W_PU),
         (_as_dataset(X["sse"], W_SSE, E_SSE), None, None, _as_dataset(X["pu"], W_PU), None)),
    ]
    for build, arrays, datasets in cases:
        a = _batches(build(*arrays, batch_size=6, shuffle=shuffle, seed=0))
        b = _batches(build(*datasets, batch_size=6, shuffle=shuffle, seed=0))
        assert len(a) == len(b)
        xa, ya = (np.concatenate(t) for t in zip(*a))
        xb, yb = (np.concatenate(t) for t in zip(*b))
        if not shuffle:  # same rows in the same order
            np.testing.assert_array_equal(xa, xb)
            np.testing.assert_array_equal(ya, yb)
        np.testing.assert_array_equal(yb, _expected_labels(xb[:, 0]))
        np.testing.assert_array_equal(np.sort(ya[:, 2]), np.sort(yb[:, 2]))


def test_dataset_of_unknown_cardinality_needs_shares_and_steps():
    unknown = _as_dataset(X["pu"], W_PU).filter(lambda x, w: tf.constant(True))
    with pytest.raises(ValueError, match="x_pu.*steps_per_epoch"):
        data.pue_dataset(unknown, None, X["e"], E_E, batch_size=4)
    with pytest.raises(ValueError, match="steps_per_epoch"):
        data.pue_dataset(unknown, None, X["e"], E_E, batch_size=4, shares=[1, 1])
    infinite = _as_dataset(X["p"]).repeat()
    with pytest.raises(ValueError, match="x_p"):
        data.pe_dataset(infinite, X["e"], E_E, batch_size=4, steps_per_epoch=3)
    ds = data.pue_dataset(unknown, None, X["e"], E_E, batch_size=4, shares=[3, 1],
                          steps_per_epoch=5)
    batches = _batches(ds)
    assert len(ds) == len(batches) == 5
    assert all(_counts(y, ("pu", "e")) == [3, 1] for _, y in batches)


def test_a_dataset_of_unknown_cardinality_that_yields_nothing_is_named():
    """A filter that keeps no row: named at the build, not a tf.data error at the first batch."""
    nothing = _as_dataset(X["pu"], W_PU).filter(lambda x, w: tf.constant(False))
    with pytest.raises(ValueError, match="`x_pu` is empty: the Dataset .*yields no rows"):
        data.pue_dataset(nothing, None, X["e"], E_E, batch_size=4, shares=[1, 1],
                         steps_per_epoch=3)
    some = _as_dataset(X["pu"], W_PU).filter(lambda x, w: w > 0)  # still builds and runs
    assert len(_batches(data.pue_dataset(some, None, X["e"], E_E, batch_size=4, shares=[1, 1],
                                         steps_per_epoch=3))) == 3


def test_steps_per_epoch_overrides_formula():
    build, args, _ = BUILDERS["pe"]
    assert len(_batches(build(*args, batch_size=4, steps_per_epoch=11))) == 11


def _call(name, **changes):
    """A thunk calling builder `name`; keys `a<i>` replace positional input i, others are kwargs."""
    build, args, _ = BUILDERS[name]
    args = list(args)
    kwargs = {"batch_size": 8}
    for key, value in changes.items():
        if isinstance(key, str) and key.startswith("a"):
            args[int(key[1:])] = value
        else:
            kwargs[key] = value
    return lambda: build(*args, **kwargs)


def _with(arr, index, value):
    out = np.array(arr, dtype=np.float64)
    out[index] = value
    return out


BAD = [
    ("pue", {"a1": _with(W_PU, 0, 2)}, ValueError, "`w`"),
    ("pue", {"a3": _with(E_E, 1, -1)}, ValueError, "`e`"),
    ("pue", {"a3": _with(E_E, 1, np.nan)}, ValueError, "`e`"),
    ("pue", {"a0": _with(X["pu"], (2, 1), np.nan)}, ValueError, "`x_pu`"),
    ("fpue", {"a1": _with(X["u"], (0, 2), np.inf)}, ValueError, "`x_u`"),
    ("pue", {"a0": np.array([["a"] * D] * N["pu"])}, TypeError, "`x_pu`"),
    ("pe", {"a1": _x(N["e"], 1000)[:, :2]}, ValueError, "`x_e`"),
    ("pe", {"a0": np.zeros((0, D))}, ValueError, "`x_p`"),
    ("pue", {"a1": W_PU[:-1]}, ValueError, "`w`.*`x_pu`"),
    ("sse_pu", {"a4": np.ones((N["pu"], 2))}, ValueError, "`w_pu`"),
    ("pue", {"a1": None}, ValueError, "`w`"),
    ("pue", {"batch_size": 0}, ValueError, "batch_size"),
    ("fpue", {"batch_size": 2}, ValueError, "batch_size"),
    ("pue", {"batch_size": 4.0}, TypeError, "batch_size"),
    ("pue", {"batch_size": True}, TypeError, "batch_size"),
    ("pue", {"shares": [1, 0]}, ValueError, "shares"),
    ("pue", {"shares": [1, -2]}, ValueError, "shares"),
    ("pue", {"shares": [1, math.nan]}, ValueError, "shares"),
    ("pue", {"shares": [1, 1, 1]}, ValueError, "shares"),
    ("pue", {"shares": {"pu": 1, "p": 1}}, ValueError, "shares"),
    ("pue", {"shares": [1, "a"]}, TypeError, "shares"),
    ("pue", {"shares": "ab"}, TypeError, "shares"),
    ("pue", {"steps_per_epoch": 0}, ValueError, "steps_per_epoch"),
    ("pue", {"steps_per_epoch": 2.0}, TypeError, "steps_per_epoch"),
    ("pue", {"seed": "0"}, TypeError, "seed"),
    ("sse", {"a1": _with(W_SSE * 0, int(np.argmin(E_SSE)), 1)}, ValueError, "`w`.*`e`"),
    ("sse_pu", {"a1": _with(W_SSE * 0, int(np.argmin(E_SSE)), 1)}, ValueError, "`w_sse`"),
    ("pue", {"a0": _as_dataset(X["pu"], W_PU)}, ValueError, "`w` must be None"),
    ("pue", {"a0": _as_dataset(X["pu"]), "a1": None}, ValueError, "`x_pu`"),
    ("pe", {"a0": _as_dataset(X["p"], X["p"][:, 0])}, ValueError, "`x_p`"),
    ("pue", {"a0": _as_dataset(X["pu"], np.ones((N["pu"], 2))), "a1": None}, ValueError, "`w`"),
    ("pe", {"a0": _as_dataset(X["p"].astype(str))}, TypeError, "`x_p`"),
    ("pe", {"a0": _as_dataset(np.zeros((0, D)))}, ValueError, "`x_p`"),
    ("sse", {"a0": _as_dataset(X["sse"], W_SSE), "a1": None, "a2": None}, ValueError, "x_sse"),
    # zero-width, complex, ragged, beyond float32
    ("pue", {"a0": np.zeros((N["pu"], 0))}, ValueError, "`x_pu` has zero-width features"),
    ("pe", {"a0": np.zeros((N["p"], 3, 0))}, ValueError, "`x_p` has zero-width features"),
    ("pe", {"a0": _as_dataset(np.zeros((N["p"], 0)))}, ValueError,
     "`x_p` has zero-width features"),
    ("pue", {"a0": X["pu"] + 1j}, TypeError, "`x_pu` must hold real numbers.*complex"),
    ("pue", {"a1": W_PU + 0j}, TypeError, "`w` must hold real numbers"),
    ("pe", {"a0": _as_dataset(X["p"].astype(np.complex64))}, TypeError, "`x_p` must be numeric"),
    ("pue", {"a0": [[1.0, 2.0, 3.0]] * (N["pu"] - 1) + [[1.0]]}, ValueError, "`x_pu` is ragged"),
    ("pue", {"a3": [[1], [0, 1]] + [[1]] * (N["e"] - 2)}, ValueError, "`e` is ragged"),
    ("fpue", {"a1": _with(X["u"], (3, 1), 1e39)}, ValueError, "`x_u` holds 1e\\+39, beyond the float32"),
    # an exposure log with no exposure
    ("pue", {"a3": np.zeros(N["e"])}, ValueError, "`e` holds no exposure \\(all 9 values are 0\\)"),
    ("pe", {"a2": np.zeros((N["e"], 1))}, ValueError, "`e` holds no exposure"),
    ("fpue", {"a3": np.zeros(N["e"])}, ValueError, "`e` holds no exposure"),
    ("sse", {"a1": np.zeros(N["sse"]), "a2": np.zeros(N["sse"])}, ValueError,
     "`e` holds no exposure"),
    ("sse_pu", {"a1": np.zeros(N["sse"]), "a2": np.zeros(N["sse"])}, ValueError,
     "`e_sse` holds no exposure"),
]


@pytest.mark.parametrize("name, changes, error, match", BAD)
def test_bad_inputs_raise_naming_the_argument(name, changes, error, match):
    with pytest.raises(error, match=match):
        _call(name, **changes)()


@pytest.mark.parametrize(
    "name, changes, match",
    [
        ("pue", {"a0": _as_dataset(X["pu"], _with(W_PU, 3, 2)), "a1": None}, "`w`"),
        ("pue", {"a0": _as_dataset(X["pu"], _with(W_PU, 3, np.nan)), "a1": None}, "`w`"),
        ("pe", {"a1": _as_dataset(X["e"], _with(E_E, 0, 5)), "a2": None}, "`e`"),
        ("pe", {"a0": _as_dataset(_with(X["p"], (1, 1), np.nan))}, "`x_p`"),
        ("sse", {"a0": _as_dataset(X["sse"], _with(W_SSE * 0, int(np.argmin(E_SSE)), 1), E_SSE),
                 "a1": None, "a2": None}, "`w` must be 0 where `e`"),
    ],
)
def test_bad_dataset_values_fail_while_iterating(name, changes, match):
    ds = _call(name, **changes)()
    with pytest.raises(tf.errors.InvalidArgumentError, match=match):
        _batches(ds)


@pytest.mark.parametrize("name, changes, arg", [
    ("pue", {"a3": np.ones(N["e"])}, "e"),
    ("pe", {"a2": np.ones(N["e"])}, "e"),
    ("fpue", {"a3": np.ones((N["e"], 1))}, "e"),
    ("sse", {"a2": np.ones(N["sse"])}, "e"),
    ("sse_pu", {"a2": np.ones(N["sse"])}, "e_sse"),
])
def test_exposure_log_without_unexposed_rows_warns_and_builds(name, changes, arg):
    with pytest.warns(UserWarning, match=rf"`{arg}` has no unexposed rows .*BCE on W") as rec:
        ds = _call(name, **changes)()
    assert rec[0].filename == __file__  # points at the caller
    _, y = next(iter(ds))
    assert y.shape == (8, 3)


def test_exposure_checks_stay_quiet_on_mixed_exposure():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for name in BUILDERS:
            _call(name)()


def test_batch_size_larger_than_the_data_is_capped_with_a_warning():
    x_pu, x_e = _x(5, 0), _x(3, 1000)
    with pytest.warns(UserWarning, match=r"`batch_size`=264 is larger than the data \(8 rows "
                                         r"in all\); using batch_size=8") as rec:
        ds = data.pue_dataset(x_pu, [0, 1, 0, 1, 1], x_e, [1, 0, 1], batch_size=264, seed=0)
    assert rec[0].filename == __file__
    batches = _batches(ds)
    assert len(batches) == 1 and batches[0][0].shape == (8, D)
    np.testing.assert_array_equal(np.sort(batches[0][0][:, 0]), [0, 1, 2, 3, 4, 1000, 1001, 1002])
    with warnings.catch_warnings():  # exactly the data size: no warning
        warnings.simplefilter("error")
        data.pue_dataset(x_pu, [0, 1, 0, 1, 1], x_e, [1, 0, 1], batch_size=8)


def test_shares_that_repeat_rows_within_a_batch_warn_with_a_batch_size_that_fits():
    x_p, x_e = _x(3, 2000), _x(40, 1000)
    e = np.arange(40) % 2
    with pytest.warns(UserWarning, match=r"`batch_size`=32 with these `shares` puts 16 rows of "
                                         r"`x_p` in each batch but it has only 3, so each of its "
                                         r"rows repeats about 5\.3x within a batch\. "
                                         r"batch_size <= 6 avoids it\."):
        ds = data.pe_dataset(x_p, x_e, e, batch_size=32, shares=[1, 1], seed=0)
    assert _counts(next(iter(ds))[1].numpy(), ("p", "e")) == [16, 16]  # oversampling kept
    assert data.batch_counts([1, 1], 6) == [3, 3] and data.batch_counts([1, 1], 7)[0] == 4
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        data.pe_dataset(x_p, x_e, e, batch_size=6, shares=[1, 1])


_KEYS = {"pue": ("pu", "e"), "pe": ("p", "e"), "fpue": ("p", "u", "e"), "sse": ("sse",),
         "sse_pu": ("sse", "pu")}


@st.composite
def _settings(draw):
    name = draw(st.sampled_from(list(_KEYS)))
    keys = _KEYS[name]
    sizes = [draw(st.integers(1, 40)) for _ in keys]
    shares = draw(st.one_of(st.none(), st.lists(
        st.floats(0.01, 100.0), min_size=len(keys), max_size=len(keys))))
    batch_size = draw(st.integers(len(keys), 48))
    return name, sizes, shares, batch_size, draw(st.integers(0, 2**16)), draw(st.booleans())


def _random_args(name, sizes, seed):
    rng = np.random.default_rng(seed)
    arrays = {}
    for k, n in zip(_KEYS[name], sizes):
        x = rng.normal(size=(n, 2))
        x[:, 0] = 1000 * int(Source[k.upper()]) + np.arange(n)
        e = rng.integers(0, 2, n)
        e[0] = 1  # an exposure log needs an exposure
        arrays[k] = (x, rng.integers(0, 2, n) * e, e)
    pu, e, p, u, sse = (arrays.get(k) for k in ("pu", "e", "p", "u", "sse"))
    return {
        "pue": lambda: (pu[0], pu[1], e[0], e[2]),
        "pe": lambda: (p[0], e[0], e[2]),
        "fpue": lambda: (p[0], u[0], e[0], e[2]),
        "sse": lambda: (sse[0], sse[1], sse[2]),
        "sse_pu": lambda: (sse[0], sse[1], sse[2], pu[0], pu[1]),
    }[name]()


@pytest.mark.slow  # 25 builds: about 8 s on 2 busy cores
@settings(max_examples=25, deadline=None)
@given(_settings())
def test_property_every_batch_holds_every_source(setting):
    name, sizes, shares, batch_size, seed, shuffle = setting
    build = BUILDERS[name][0]
    keys = _KEYS[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # capped batch, repeated rows, all-1 e
        ds = build(*_random_args(name, sizes, seed), batch_size=batch_size, shares=shares,
                   seed=seed, shuffle=shuffle)
    size = min(batch_size, sum(sizes)) if shares is None else batch_size
    counts = data.batch_counts(sizes if shares is None else shares, size)
    batches = _batches(ds)
    assert len(batches) == data.epoch_length(sizes, counts) == len(ds)
    for x, y in batches:
        assert x.shape == (size, 2) and y.shape == (size, 3)
        assert _counts(y, keys) == counts and all(c >= 1 for c in counts)
        ids = x[:, 0].astype(int)
        np.testing.assert_array_equal(y[:, 2], ids // 1000)  # each row keeps its source


def test_keras_fit_consumes_the_dataset():
    build, args, _ = BUILDERS["pue"]
    ds = build(*args, batch_size=8, seed=0)
    model = keras.Sequential([keras.Input((D,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss=lambda y, z: keras.ops.mean(
        keras.ops.binary_crossentropy(y[:, :1], z, from_logits=True)))
    history = model.fit(ds, epochs=2, verbose=0, shuffle=False)
    assert len(history.history["loss"]) == 2
    assert np.all(np.isfinite(history.history["loss"]))


# ------------------------------------------------------------------ structured features

_DEVICES = np.array(["android", "ios", "web"])


def _feats(n: int, offset: int) -> dict:
    """Feature dict whose int64 `id` is offset + row; every other leaf derives from it."""
    ids = offset + np.arange(n)
    return {"id": ids, "device": _DEVICES[ids % 3],
            "ctx": np.c_[ids / 7.0, -ids / 3.0], "pair": (ids % 5 == 0, (ids * 2).astype(np.int32))}


FEATS = {k: _feats(n, 1000 * int(Source[k.upper()])) for k, n in N.items()}
SBUILDERS = {
    "pue": (FEATS["pu"], W_PU, FEATS["e"], E_E),
    "pe": (FEATS["p"], FEATS["e"], E_E),
    "fpue": (FEATS["p"], FEATS["u"], FEATS["e"], E_E),
    "sse": (FEATS["sse"], W_SSE, E_SSE),
    "sse_pu": (FEATS["sse"], W_SSE, E_SSE, FEATS["pu"], W_PU),
}


def _check_structured_batch(x, y, size):
    ids = x["id"].numpy()
    assert x["id"].dtype == tf.int64 and x["device"].dtype == tf.string
    assert x["ctx"].dtype == tf.float32 and x["ctx"].shape == (size, 2)
    assert x["pair"][0].dtype == tf.bool and x["pair"][1].dtype == tf.int64
    np.testing.assert_array_equal(x["device"].numpy().astype(str), _DEVICES[ids % 3])
    np.testing.assert_allclose(x["ctx"].numpy(), np.c_[ids / 7.0, -ids / 3.0].astype(np.float32))
    np.testing.assert_array_equal(x["pair"][0].numpy(), ids % 5 == 0)
    np.testing.assert_array_equal(x["pair"][1].numpy(), ids * 2)
    np.testing.assert_array_equal(y.numpy(), _expected_labels(ids))


def _struct_dataset(x, *labels):
    return tf.data.Dataset.from_tensor_slices((x, *labels) if labels else x)


def _as_struct_datasets(name):
    """The same data as Datasets of rows `(features, labels...)`."""
    f, d = FEATS, _struct_dataset
    return {
        "pue": (d(f["pu"], W_PU), None, d(f["e"], E_E), None),
        "pe": (d(f["p"]), d(f["e"], E_E), None),
        "fpue": (d(f["p"]), d(f["u"]), d(f["e"], E_E), None),
        "sse": (d(f["sse"], W_SSE, E_SSE), None, None),
        "sse_pu": (d(f["sse"], W_SSE, E_SSE), None, None, d(f["pu"], W_PU), None),
    }[name]


@pytest.mark.parametrize("name", list(BUILDERS))
def test_structured_features_keep_shares_interleaving_epochs_and_labels(name):
    build, _, keys = BUILDERS[name]
    ds = build(*SBUILDERS[name], batch_size=8, seed=0)
    dense = build(*BUILDERS[name][1], batch_size=8, seed=0)
    assert len(ds) == len(dense)
    spec = ds.element_spec[0]
    assert sorted(spec) == ["ctx", "device", "id", "pair"] and spec["id"].shape == (8,)
    seen = []
    for (x, y), (xd, yd) in zip(ds, dense):
        _check_structured_batch(x, y, 8)
        np.testing.assert_array_equal(x["id"].numpy(), xd[:, 0].numpy())  # same rows, same order
        np.testing.assert_array_equal(y.numpy(), yd.numpy())
        for part in np.split(y.numpy(), 2):
            assert all(c >= 1 for c in _counts(part, keys))
        seen.append(x["id"].numpy())
    counts = data.batch_counts([N[k] for k in keys], 8)
    slowest = keys[int(np.argmax([N[k] / c for k, c in zip(keys, counts)]))]
    assert set(FEATS[slowest]["id"]) <= set(np.concatenate(seen))


@pytest.mark.parametrize("shuffle", [False, True])
@pytest.mark.parametrize("name", list(BUILDERS))
def test_structured_datasets_match_structured_arrays(name, shuffle):
    build = BUILDERS[name][0]
    a = build(*SBUILDERS[name], batch_size=6, shuffle=shuffle, seed=4)
    b = build(*_as_struct_datasets(name), batch_size=6, shuffle=shuffle, seed=4)
    assert len(a) == len(b) and a.element_spec == b.element_spec
    ids_a, ids_b = [], []
    for (xa, _), (xb, yb) in zip(a, b):
        _check_structured_batch(xb, yb, 6)
        ids_a.append(xa["id"].numpy())
        ids_b.append(xb["id"].numpy())
    if not shuffle:
        np.testing.assert_array_equal(np.concatenate(ids_a), np.concatenate(ids_b))


def test_structured_features_are_seeded_and_reshuffled():
    first = [x["id"].numpy() for x, _ in data.fpue_dataset(*SBUILDERS["fpue"], batch_size=6,
                                                            seed=7)]
    again = [x["id"].numpy() for x, _ in data.fpue_dataset(*SBUILDERS["fpue"], batch_size=6,
                                                            seed=7)]
    np.testing.assert_array_equal(np.concatenate(first), np.concatenate(again))
    ds = data.fpue_dataset(*SBUILDERS["fpue"], batch_size=6, seed=7)
    one, two = ([x["id"].numpy() for x, _ in ds] for _ in range(2))
    assert not np.array_equal(np.concatenate(one), np.concatenate(two))


def test_a_list_of_lists_stays_one_dense_tensor_and_tuples_are_structures():
    ds = data.pe_dataset([[1, 2], [3, 4]], [[5, 6], [7, 8]], [1, 0], batch_size=4)
    assert ds.element_spec[0] == tf.TensorSpec((4, 2), tf.float32)
    ds = data.pe_dataset((np.ones((2, 2)), np.arange(2)), (np.ones((3, 2)), np.arange(3)),
                         [1, 0, 1], batch_size=4)
    assert ds.element_spec[0] == (tf.TensorSpec((4, 2), tf.float32),
                                  tf.TensorSpec((4,), tf.int64))
    rows = tf.data.Dataset.from_tensor_slices((np.ones((2, 2)), np.arange(2)))  # tuple P rows
    ds = data.pe_dataset(rows, (np.ones((3, 2)), np.arange(3)), [1, 0, 1], batch_size=4)
    x, y = next(iter(ds))
    assert isinstance(x, tuple) and x[1].dtype == tf.int64
    assert sorted(y.numpy()[:, 2].tolist()) == [1.0, 1.0, 2.0, 2.0]


def _sbad(arg_index, value, name="pue"):
    args = list(SBUILDERS[name])
    args[arg_index] = value
    if isinstance(value, tf.data.Dataset):  # its labels come with the rows
        args[arg_index + 1] = None
    return lambda: BUILDERS[name][0](*args, batch_size=8)


def _edit(feats, key, value):
    out = dict(feats)
    if value is None:
        del out[key]
    else:
        out[key] = value
    return out


STRUCT_BAD = [
    (_sbad(2, _edit(FEATS["e"], "id", None)), ValueError,
     r"Feature structures differ: `x_pu` rows are .*'id'.* but `x_e` rows are"),
    (_sbad(2, _edit(FEATS["e"], "id", FEATS["e"]["id"].astype(float))), ValueError,
     r'Feature dtypes differ: `x_pu\["id"\]` is int64 but `x_e\["id"\]` is float32'),
    (_sbad(2, _edit(FEATS["e"], "ctx", np.ones((N["e"], 3)))), ValueError,
     r'`x_pu\["ctx"\]` rows have shape \(2,\) but `x_e\["ctx"\]` rows have shape \(3,\)'),
    (_sbad(0, _edit(FEATS["pu"], "id", np.arange(5))), ValueError,
     r'The features of `x_pu` disagree on the number of rows: .*`x_pu\["id"\]` has 5'),
    (_sbad(0, _edit(FEATS["pu"], "ctx", _with(FEATS["pu"]["ctx"], (1, 1), np.nan))), ValueError,
     r'`x_pu\["ctx"\]` contains 1 NaN'),
    (_sbad(0, _edit(FEATS["pu"], "ctx", _with(FEATS["pu"]["ctx"], (1, 1), 1e39))), ValueError,
     r'`x_pu\["ctx"\]` holds 1e\+39, beyond the float32 range'),
    (_sbad(0, _edit(FEATS["pu"], "ctx", FEATS["pu"]["ctx"] * 1j)), TypeError,
     r'`x_pu\["ctx"\]` must hold real numbers'),
    (_sbad(0, _edit(FEATS["pu"], "ctx", np.ones((N["pu"], 0)))), ValueError,
     r'`x_pu\["ctx"\]` has zero-width features'),
    (_sbad(0, _edit(FEATS["pu"], "ctx", [[1.0]] * (N["pu"] - 1) + [[1.0, 2.0]])), ValueError,
     r'`x_pu\["ctx"\]` is ragged'),
    (_sbad(0, _edit(FEATS["pu"], "device", np.array([None] * N["pu"]))), TypeError,
     r'`x_pu\["device"\]` must hold numbers or strings, got dtype object with NoneType'),
    (_sbad(0, _edit(FEATS["pu"], "pair", (np.ones(N["pu"]), 3.0))), ValueError,
     r'`x_pu\["pair"\]\[1\]` must have one entry per row'),
    (_sbad(0, {}), ValueError, "`x_pu` is an empty dict"),
    (_sbad(0, {1: np.ones(N["pu"])}), TypeError, "`x_pu` must have string keys, got 1"),
    (_sbad(0, _struct_dataset({"id": np.ones(3), "ctx": tf.ragged.constant([[1.0], [1, 2], [3]])},
                              np.ones(3))), ValueError,
     r"`x_pu\[\"ctx\"\]` must be one dense tensor per row, got RaggedTensorSpec"),
    (_sbad(0, _struct_dataset({"id": np.array([1j, 2j])}, np.ones(2))), TypeError,
     r"`x_pu\[\"id\"\]` must be numeric or a string, got dtype complex128"),
    (_sbad(0, _struct_dataset(FEATS["pu"])), ValueError,
     r"`x_pu` must yield unbatched rows `\(x, w\)`"),
]


@pytest.mark.parametrize("call, error, words", STRUCT_BAD)
def test_structured_bad_input_names_the_argument_and_key(call, error, words):
    with pytest.raises(error, match=words):
        call()


def test_structured_dataset_values_fail_while_iterating_naming_the_key():
    bad = _edit(FEATS["pu"], "ctx", _with(FEATS["pu"]["ctx"], (2, 0), np.inf))
    ds = data.pue_dataset(_struct_dataset(bad, W_PU), None, FEATS["e"], E_E, batch_size=8,
                          shuffle=False)
    with pytest.raises(tf.errors.InvalidArgumentError, match=r'`x_pu\["ctx"\]` contains NaN'):
        _batches_struct(ds)


def _batches_struct(ds):
    return [(tf.nest.map_structure(lambda t: t.numpy(), x), y.numpy()) for x, y in ds]


def test_keras_functional_model_fits_structured_batches():
    ds = data.pue_dataset(*SBUILDERS["pue"], batch_size=8, seed=0)
    ids = keras.Input((), dtype="int64", name="id")
    device = keras.Input((), dtype="string", name="device")
    ctx = keras.Input((2,), name="ctx")
    lookup = keras.layers.StringLookup(vocabulary=list(_DEVICES))(device)
    emb = keras.layers.Flatten()(keras.layers.Embedding(4, 2)(lookup))
    id_emb = keras.layers.Flatten()(keras.layers.Embedding(4000, 2)(ids))
    out = keras.layers.Dense(1)(keras.layers.Concatenate()([emb, id_emb, ctx]))
    model = keras.Model({"id": ids, "device": device, "ctx": ctx}, out)
    model.compile(optimizer="sgd", loss=lambda y, z: keras.ops.mean(
        keras.ops.binary_crossentropy(y[:, :1], z, from_logits=True)))
    drop_pair = ds.map(lambda x, y: ({k: x[k] for k in ("id", "device", "ctx")}, y))
    history = model.fit(drop_pair, epochs=2, verbose=0, shuffle=False)
    assert len(history.history["loss"]) == 2 and np.all(np.isfinite(history.history["loss"]))


# ------------------------------------------------------------------ TFRecord logs

SPEC = {"id": tf.io.FixedLenFeature([], tf.int64), "device": tf.io.FixedLenFeature([], tf.string),
        "ctx": tf.io.FixedLenFeature([2], tf.float32), "w": tf.io.FixedLenFeature([], tf.int64),
        "e": tf.io.FixedLenFeature([], tf.int64)}


def _write_log(folder, offset, n, shards, label_of):
    """`shards` TFRecord files of n rows in all; row i has id offset+i and label label_of(i)."""
    folder.mkdir(parents=True, exist_ok=True)
    parts = np.array_split(np.arange(n), shards)
    for s, part in enumerate(parts):
        with tf.io.TFRecordWriter(str(folder / f"part-{s:05d}-of-{shards:05d}.tfrecord")) as f:
            for i in part:
                ident = offset + int(i)
                feats = {
                    "id": tf.train.Feature(int64_list=tf.train.Int64List(value=[ident])),
                    "device": tf.train.Feature(bytes_list=tf.train.BytesList(
                        value=[_DEVICES[ident % 3].encode()])),
                    "ctx": tf.train.Feature(float_list=tf.train.FloatList(
                        value=[ident / 7.0, -ident / 3.0])),
                }
                for key, value in label_of(int(i)).items():
                    feats[key] = tf.train.Feature(int64_list=tf.train.Int64List(value=[value]))
                f.write(tf.train.Example(features=tf.train.Features(feature=feats))
                        .SerializeToString())
    return str(folder / "part-*.tfrecord")


@pytest.fixture(scope="module")
def ad_log(tmp_path_factory):
    root = tmp_path_factory.mktemp("log")
    n_pu, n_e, n_sse = 3000, 1500, 900
    w = (np.arange(n_pu) * 7919 % 10 < 3).astype(int)
    e = (np.arange(n_e) * 104729 % 10 < 5).astype(int)
    e_sse = (np.arange(n_sse) % 3 != 0).astype(int)
    w_sse = e_sse * (np.arange(n_sse) % 2)
    return {
        "pu": (_write_log(root / "pu", 0, n_pu, 4, lambda i: {"w": w[i]}), n_pu, w),
        "e": (_write_log(root / "e", 100_000, n_e, 3, lambda i: {"e": e[i]}), n_e, e),
        "sse": (_write_log(root / "sse", 400_000, n_sse, 2,
                           lambda i: {"w": w_sse[i], "e": e_sse[i]}), n_sse, (w_sse, e_sse)),
    }


def _spec_without(*keys):
    return {k: v for k, v in SPEC.items() if k not in keys}


def test_read_tfrecords_rows_and_labels(ad_log):
    pattern, n, w = ad_log["pu"]
    rows = data.read_tfrecords(pattern, _spec_without("e"), labels="w", rows=n)
    assert int(rows.cardinality()) == n
    x_spec, w_spec = rows.element_spec
    assert sorted(x_spec) == ["ctx", "device", "id"] and w_spec == tf.TensorSpec((), tf.int64)
    got = {int(x["id"]): (int(lab), x["device"].numpy().decode(), x["ctx"].numpy())
           for x, lab in rows}
    assert sorted(got) == list(range(n))
    for i in (0, 1, 1234, n - 1):
        assert got[i][0] == w[i] and got[i][1] == _DEVICES[i % 3]
        np.testing.assert_allclose(got[i][2], np.float32([i / 7.0, -i / 3.0]))
    feats_only = data.read_tfrecords([pattern], _spec_without("e", "w"))
    assert isinstance(feats_only.element_spec, dict) and int(feats_only.cardinality()) < 0


@pytest.mark.parametrize("change, err, words", [
    (dict(labels=3), TypeError, "`labels` must be a key of `features` \\(str\\), a sequence "
                                "of them or None, got int 3"),
    (dict(labels=b"w"), TypeError, "`labels` must be a key"),
    (dict(shuffle_files="yes"), TypeError, "`shuffle_files` must be a bool, got 'yes'"),
    (dict(deterministic="no"), TypeError, "`deterministic` must be a bool, got 'no'"),
])
def test_read_tfrecords_refuses_options_of_another_type(ad_log, change, err, words):
    pattern, _, _ = ad_log["pu"]
    with pytest.raises(err, match=words):
        data.read_tfrecords(pattern, _spec_without("e"), **change)


def test_read_tfrecords_feeds_every_builder(ad_log):
    (pu, n_pu, w), (ex, n_e, e), (sse, n_sse, (w_sse, e_sse)) = (ad_log[k] for k in
                                                                 ("pu", "e", "sse"))
    pu_rows = data.read_tfrecords(pu, _spec_without("e"), labels="w", rows=n_pu)
    e_rows = data.read_tfrecords(ex, _spec_without("w"), labels="e", rows=n_e)
    sse_rows = data.read_tfrecords(sse, SPEC, labels=("w", "e"), rows=n_sse)
    ds = data.pue_dataset(pu_rows, None, e_rows, None, batch_size=300, seed=0)
    assert len(ds) == max(math.ceil(n_pu / 200), math.ceil(n_e / 100))  # default shares 2:1
    seen = []
    for x, y in ds:
        ids, yy = x["id"].numpy(), y.numpy()
        from_pu = ids < 100_000
        assert from_pu.sum() == 200 and np.all(yy[from_pu, 2] == 0) and np.all(yy[~from_pu, 2] == 1)
        np.testing.assert_array_equal(yy[from_pu, 0], w[ids[from_pu]])
        np.testing.assert_array_equal(yy[~from_pu, 1], e[ids[~from_pu] - 100_000])
        for part in np.split(yy[:, 2], 4):  # every replica slice holds both sources
            assert set(part) == {0.0, 1.0}
        seen.append(ids[from_pu])
    assert set(np.concatenate(seen)) == set(range(n_pu))  # every PU row once per epoch
    ds = data.sse_pu_dataset(sse_rows, None, None, pu_rows, None, batch_size=64, seed=1,
                             shares=[1, 3], steps_per_epoch=5)
    for x, y in ds:
        ids, yy = x["id"].numpy(), y.numpy()
        sse_ = ids >= 400_000
        assert sse_.sum() == 16
        np.testing.assert_array_equal(yy[sse_, 0], w_sse[ids[sse_] - 400_000])
        np.testing.assert_array_equal(yy[sse_, 1], e_sse[ids[sse_] - 400_000])
    unknown = data.read_tfrecords(ex, _spec_without("w"), labels="e")
    with pytest.raises(ValueError, match="`x_e` has unknown or infinite cardinality"):
        data.pue_dataset(pu_rows, None, unknown, None, batch_size=30)


def test_read_tfrecords_shards_files_per_input_pipeline(ad_log):
    pattern, n, _ = ad_log["pu"]
    ids = []
    for i in range(2):
        ctx = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=i)
        rows = data.read_tfrecords(pattern, _spec_without("e"), labels="w", input_context=ctx)
        ids.append({int(x["id"]) for x, _ in rows})
    assert not ids[0] & ids[1] and ids[0] | ids[1] == set(range(n))
    assert ids[0] == set(range(750)) | set(range(1500, 2250))  # files 0 and 2 of 4
    with pytest.raises(ValueError, match="4 file\\(s\\) for 5 input pipelines"):
        data.read_tfrecords(pattern, SPEC, input_context=tf.distribute.InputContext(5, 0))


def test_read_tfrecords_shuffles_files_by_seed_and_checks_rows(ad_log, tmp_path_factory):
    pattern, n, _ = ad_log["pu"]
    spec = _spec_without("e")
    order = lambda **kw: np.concatenate([x["id"].numpy() for x, _ in data.read_tfrecords(  # noqa: E731
        pattern, spec, labels="w", shuffle_files=True, **kw).batch(1000)]).tolist()
    first = order(seed=0)
    assert first == order(seed=0) and sorted(first) == list(range(n))
    assert first[::750] != [0, 750, 1500, 2250]  # the files' order is shuffled (one block each)
    # local uncompressed files are counted when read_tfrecords is called (one pass over
    # their record headers); a count the files cannot be walked for fails while iterating
    with pytest.raises(ValueError, match=f"`rows`={n + 1}, but the files hold {n} record"):
        data.read_tfrecords(pattern, spec, labels="w", rows=n + 1)
    gz = _gzip_copy(pattern, str(tmp_path_factory.mktemp("gz") / "pu.tfrecord.gz"), 5)
    wrong = data.read_tfrecords(gz, spec, labels="w", rows=6, compression_type="GZIP")
    with pytest.raises(tf.errors.FailedPreconditionError, match="expected to contain 6"):
        for _ in wrong.batch(1000):
            pass


@pytest.mark.parametrize("shuffle", [False, True])
def test_reading_every_row_of_read_tfrecords_takes_its_parsed_batches(ad_log, shuffle):
    """fit_pue's reader (``as_rows``) reads read_tfrecords' own batches: the same rows in
    the same order as rebatching the rows, which any other Dataset still gets."""
    from adpue_tf.data.rows import as_rows
    from adpue_tf.data.tfrecord import parsed_batches

    pattern, n, w = ad_log["pu"]
    kw = dict(labels="w", rows=n, shuffle_files=shuffle, seed=3, parse_batch=64)
    rows = data.read_tfrecords(pattern, _spec_without("e"), **kw)
    assert parsed_batches(rows) is not None and parsed_batches(rows.take(5)) is None
    assert parsed_batches(tf.data.Dataset.range(3)) is None and parsed_batches([1]) is None
    fast = as_rows("x_pu", rows, "w", None)
    again = data.read_tfrecords(pattern, _spec_without("e"), **kw)
    slow = as_rows("x_pu", again.map(lambda x, y: (x, y)), "w", None)  # a new Dataset: rebatched
    assert len(fast) == len(slow) == n
    for key in ("id", "ctx", "device"):
        np.testing.assert_array_equal(fast.x[key], slow.x[key])
    np.testing.assert_array_equal(fast.y, slow.y)
    ids = fast.x["id"].astype(int)
    np.testing.assert_array_equal(fast.y, w[ids])
    # blocks of parse_batch records of each file in turn, in the files' order or shuffled
    assert ids[:64].tolist() == list(range(ids[0], ids[0] + 64))
    assert (ids[[0, 64, 128, 192]].tolist() != [0, 750, 1500, 2250]) == shuffle


def _gzip_copy(pattern: str, out: str, rows: int) -> str:
    """The first ``rows`` records of the log as one GZIP file (records read_tfrecords cannot
    count up front)."""
    with tf.io.TFRecordWriter(out, options="GZIP") as writer:
        for record in tf.data.TFRecordDataset(sorted(glob.glob(pattern))).take(rows):
            writer.write(record.numpy())
    return out


def test_reading_read_tfrecords_with_a_wrong_row_count_is_refused_by_name(ad_log, tmp_path):
    from adpue_tf.data.rows import as_rows

    pattern, _, _ = ad_log["pu"]
    gz = _gzip_copy(pattern, str(tmp_path / "pu.tfrecord.gz"), 50)
    wrong = data.read_tfrecords(gz, _spec_without("e"), labels="w", rows=51,
                                compression_type="GZIP")
    with pytest.raises(ValueError, match="`x_pu`: read_tfrecords was given rows=51, "
                                         "but its files hold 50 rows"):
        as_rows("x_pu", wrong, "w", None)


@pytest.mark.parametrize("kwargs, error, words", [
    ({"files": "/nonexistent/part-*.tfrecord"}, FileNotFoundError,
     r"`files`: no file matches '/nonexistent/part-\*.tfrecord'"),
    ({"files": []}, TypeError, "`files` must be a path or glob pattern"),
    ({"files": [3]}, TypeError, "`files` must hold paths"),
    ({"features": {}}, TypeError, "`features` must be a non-empty dict"),
    ({"features": {"id": tf.io.VarLenFeature(tf.int64)}}, TypeError,
     r'`features\["id"\]` must be a tf.io.FixedLenFeature'),
    ({"labels": "y"}, ValueError, r"`labels`: 'y' is not a key of `features`"),
    ({"labels": ("w", "w")}, ValueError, "`labels` repeats a key"),
    ({"features": {"w": SPEC["w"]}, "labels": "w"}, ValueError, "no feature besides the labels"),
    ({"rows": 0}, ValueError, "`rows` must be at least 1"),
    ({"rows": 2.5}, TypeError, "`rows` must be an int"),
    ({"parse_batch": 0}, ValueError, "`parse_batch` must be at least 1"),
])
def test_read_tfrecords_bad_input(ad_log, kwargs, error, words):
    args = {"files": ad_log["pu"][0], "features": _spec_without("e"), "labels": "w", **kwargs}
    with pytest.raises(error, match=words):
        data.read_tfrecords(args.pop("files"), args.pop("features"), **args)


# --- read_tfrecords: a path that exists is read as named, glob characters and all ---------

def _ids_file(path, ids):
    with tf.io.TFRecordWriter(str(path)) as writer:
        for i in ids:
            writer.write(tf.train.Example(features=tf.train.Features(feature={
                "id": tf.train.Feature(int64_list=tf.train.Int64List(value=[i]))})
            ).SerializeToString())
    return str(path)


def _ids_read(files):
    spec = {"id": tf.io.FixedLenFeature([], tf.int64)}
    return [int(x["id"]) for x in data.read_tfrecords(files, spec)]


def test_read_tfrecords_reads_an_existing_path_literally_and_globs_otherwise(tmp_path):
    _ids_file(tmp_path / "day1.tfrecord", [1])
    named = _ids_file(tmp_path / "day[1].tfrecord", [2])
    assert _ids_read(named) == [2]  # the file named, not day1.tfrecord
    assert _ids_read(str(tmp_path / "day?.tfrecord")) == [1]  # no such file: a glob
    folder = tmp_path / "log[v2]" / "pu*"  # glob characters in the folders
    folder.mkdir(parents=True)
    _ids_file(folder / "part-0.tfrecord", [3])
    _ids_file(folder / "part-1.tfrecord", [4])
    assert _ids_read(str(folder / "part-0.tfrecord")) == [3]
    assert _ids_read(str(folder / "part-*.tfrecord")) == [3, 4]  # the folders read as named
    with pytest.raises(FileNotFoundError, match=r"no file matches .*part-9\*"):
        _ids_read(str(folder / "part-9*.tfrecord"))


def test_a_log_written_in_a_folder_with_glob_characters_reads_back(tmp_path):
    from adpue_tf.synthetic import AdLogConfig, read_ad_log_meta, write_ad_log

    out = tmp_path / "log[v2]"
    write_ad_log(out, rows=20, shards=2, eval_rows=4,
                 config=AdLogConfig(n_users=5, n_items=3, n_campaigns=2))
    meta = read_ad_log_meta(out)
    spec = {"user_id": tf.io.FixedLenFeature([], tf.int64),
            "w": tf.io.FixedLenFeature([], tf.int64)}
    for files in (meta["files"]["pu"], str(out / "pu" / "part-*.tfrecord")):
        rows = data.read_tfrecords(files, spec, labels="w", rows=meta["counts"]["pu"])
        assert sum(1 for _ in rows) == meta["counts"]["pu"]
