"""Tests for adpue_tf.labels: the packed label layout, its packers and checks."""

from __future__ import annotations

import numpy as np
import pytest

from adpue_tf import labels as L
from adpue_tf.labels import Source


def test_layout_constants_and_source_codes():
    assert (L.W, L.E, L.SOURCE, L.DAGGER, L.NUM_COLUMNS) == (0, 1, 2, 3, (3, 4))
    assert {s.name: int(s) for s in Source} == {"PU": 0, "E": 1, "P": 2, "U": 3, "SSE": 4}


@pytest.mark.parametrize("source, kwargs, expected", [
    (Source.PU, {"w": [1, 0, 1]}, [[1, 0, 0], [0, 0, 0], [1, 0, 0]]),
    (Source.E, {"e": [[0], [1]]}, [[0, 0, 1], [0, 1, 1]]),
    (Source.P, {"n": 2}, [[0, 0, 2], [0, 0, 2]]),
    (Source.U, {"n": np.int64(1)}, [[0, 0, 3]]),
    (Source.SSE, {"w": [1, 0, 0], "e": [True, True, False]}, [[1, 1, 4], [0, 1, 4], [0, 0, 4]]),
    (4, {"w": [0], "e": [1], "n": 1}, [[0, 1, 4]]),
])
def test_pack_labels_every_source(source, kwargs, expected):
    out = L.pack_labels(source, **kwargs)
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, np.float32(expected))


def test_pack_labels_dagger_column():
    out = L.pack_labels(Source.PU, w=[1, 0], dagger=[0.25, 1.0])
    np.testing.assert_array_equal(out, np.float32([[1, 0, 0, 0.25], [0, 0, 0, 1.0]]))
    out = L.pack_labels(Source.P, n=1, dagger=np.array([[0.5]]))
    np.testing.assert_array_equal(out, np.float32([[0, 0, 2, 0.5]]))


def test_pack_helpers_match_pack_labels():
    np.testing.assert_array_equal(L.pack_pu([1, 0]), L.pack_labels(Source.PU, w=[1, 0]))
    np.testing.assert_array_equal(L.pack_e([0, 1]), L.pack_labels(Source.E, e=[0, 1]))
    np.testing.assert_array_equal(L.pack_p(3), np.float32([[0, 0, 2]] * 3))
    np.testing.assert_array_equal(L.pack_u(2), np.float32([[0, 0, 3]] * 2))
    np.testing.assert_array_equal(L.pack_sse([1, 0], [1, 0]), np.float32([[1, 1, 4], [0, 0, 4]]))


BAD_PACK = [  # kwargs, error, words
    ({"source": 7, "n": 1}, ValueError, r"`source` must be one of \['PU'"),
    ({"source": "PU", "w": [1]}, ValueError, "`source` must be one of"),
    ({"source": Source.PU}, ValueError, "Source PU needs `w`"),
    ({"source": Source.E}, ValueError, "Source E needs `e`"),
    ({"source": Source.SSE, "w": [1]}, ValueError, "Source SSE needs `e`"),
    ({"source": Source.P, "w": [1]}, ValueError, "Source P has no observed `w`"),
    ({"source": Source.PU, "w": [1], "e": [1]}, ValueError, "Source PU has no observed `e`"),
    ({"source": Source.P}, ValueError, "Source P needs `n`"),
    ({"source": Source.P, "n": 2.7}, TypeError, r"`n` must be an int, got 2\.7"),
    ({"source": Source.P, "n": 2.0}, TypeError, "`n` must be an int"),
    ({"source": Source.P, "n": True}, TypeError, "`n` must be an int"),
    ({"source": Source.P, "n": "3"}, TypeError, "`n` must be an int"),
    ({"source": Source.U, "n": 0}, ValueError, r"`n` must be at least 1 \(the number of rows\)"),
    ({"source": Source.U, "n": -2}, ValueError, "`n` must be at least 1"),
    ({"source": Source.PU, "w": []}, ValueError, "The PU data set is empty"),
    ({"source": Source.PU, "w": [1, 2]}, ValueError, r"`w` must hold only 0 and 1; found \[2\.0\]"),
    ({"source": Source.PU, "w": [1, np.nan]}, ValueError, "`w` contains 1 NaN or infinite"),
    ({"source": Source.PU, "w": [1, 0], "n": 3}, ValueError,
     r"disagree on the number of rows: \[2, 3\]"),
    ({"source": Source.SSE, "w": [1, 0], "e": [1]}, ValueError, "disagree"),
    ({"source": Source.SSE, "w": [1, 1], "e": [1, 0]}, ValueError, "`w` must be 0 where `e` is 0"),
    ({"source": Source.PU, "w": [[1, 0], [0, 1]]}, ValueError, r"`w` must be a vector .*\(2, 2\)"),
    ({"source": Source.PU, "w": [[1], [0, 1]]}, ValueError, "`w` is ragged"),
    ({"source": Source.PU, "w": [1 + 0j, 0]}, TypeError, "`w` must hold real numbers"),
    ({"source": Source.PU, "w": ["1", "0"]}, TypeError, "`w` must be numeric"),
    ({"source": Source.PU, "w": [1, 0], "dagger": [0.5]}, ValueError,
     "`dagger` has 1 rows, expected 2"),
    ({"source": Source.PU, "w": [1, 0], "dagger": [0.5, 1.5]}, ValueError,
     r"`dagger` must lie in \[0, 1\]"),
    ({"source": Source.PU, "w": [1, 0], "dagger": [0.5, np.inf]}, ValueError,
     "`dagger` contains 1 NaN"),
]


@pytest.mark.parametrize("kwargs, error, words", BAD_PACK)
def test_pack_labels_bad_input_names_the_argument(kwargs, error, words):
    with pytest.raises(error, match=words):
        L.pack_labels(**kwargs)


def test_as_real_array():
    arr = np.array([[1, 2]], np.int16)
    assert L.as_real_array("x", arr) is arr
    assert L.as_real_array("x", [True, False]).dtype == bool
    for value, error, words in [
        ([[1, 2], [3]], ValueError, "`x` is ragged: its rows have different lengths"),
        (np.ones(2, np.complex64), TypeError, "`x` must hold real numbers, got complex"),
        ([object()], TypeError, "`x` must be numeric, got dtype object"),
        (["a"], TypeError, "`x` must be numeric, got dtype <U1"),
    ]:
        with pytest.raises(error, match=words):
            L.as_real_array("x", value)


def test_check_finite_and_check_binary():
    np.testing.assert_array_equal(L.check_finite("x", [[1.5, -2.0]]), [[1.5, -2.0]])
    with pytest.raises(ValueError, match="`x` contains 2 NaN or infinite value"):
        L.check_finite("x", [np.nan, 1.0, -np.inf])
    out = L.check_binary("e", np.array([[1], [0]], np.int8))
    assert out.dtype == np.float64
    np.testing.assert_array_equal(out, [1.0, 0.0])
    with pytest.raises(ValueError, match=r"`e` must hold only 0 and 1; found \[-1\.0, 0\.5\]"):
        L.check_binary("e", [0.5, 1, -1, 0.5])


def test_check_packed():
    y = np.concatenate([L.pack_pu([1, 0]), L.pack_sse([1], [1])]).astype(np.float64)
    out = L.check_packed("y", y)
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, np.float32([[1, 0, 0], [0, 0, 0], [1, 1, 4]]))
    four = np.c_[y, [0.0, 1.0, 0.5]]
    np.testing.assert_array_equal(L.check_packed("y", four)[:, 3], [0.0, 1.0, 0.5])
    for bad, words in [
        (y[:, :2], r"`y` must have shape \(batch, 3\) or \(batch, 4\)"),
        (y[0], r"got shape \(3,\)"),
        (np.c_[y, y[:, :2]], r"got shape \(3, 5\)"),
        (np.where(np.arange(9).reshape(3, 3) == 0, 2.0, y), r"`y\[:, 0\] \(w\)` must hold only 0"),
        (np.where(np.arange(9).reshape(3, 3) == 4, np.nan, y), "`y` contains 1 NaN"),
        (np.c_[y[:, :2], [0, 5, 1]], r"unknown source code\(s\) \[5\.0\]"),
        (np.c_[y, [0.0, -0.1, 0.5]], r"`y\[:, 3\]` \(dagger\) must lie in \[0, 1\]"),
    ]:
        with pytest.raises(ValueError, match=words):
            L.check_packed("y", bad)
