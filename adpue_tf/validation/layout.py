"""Held-out data in the validation layout: the yardsticks in column 3 of the labels.

:func:`pue_validation_data` (and :func:`pe_validation_data`,
:func:`fpue_validation_data`) compute ``θ̂(x)`` and ``f_ref(x)`` once, before
training, and pack them with the rows, so that the metrics of
:mod:`adpue_tf.metrics.validation_scores` can score a model inside ``fit``.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import tensorflow as tf

from adpue_tf._internal.checks import check_int
from adpue_tf.data._streams import stream_features
from adpue_tf.exposure import _features, _labels, fit_exposure_model, fit_ratio_model
from adpue_tf.labels import pack_e, pack_p, pack_pu, pack_u
from adpue_tf.validation.scores import (
    Yardstick,
    _check_rows,
    _check_yardstick,
    _probabilities,
    _ratio_exposure,
)

__all__ = ["fpue_validation_data", "pe_validation_data", "pue_validation_data"]


def _each_row_once(parts: list[tuple[str, Any, np.ndarray, np.ndarray]],
                   batch_size: int) -> tf.data.Dataset:
    """Batches in which every row of every part appears once, each batch holding every part.

    ``parts``: ``(name, features, packed labels, yardstick column)``. The
    parts are cut into the same number of contiguous chunks, as few as keep
    a batch within ``batch_size`` rows (more, larger batches, only where a
    part has fewer rows than that many chunks); batch ``i`` holds chunk ``i``
    of every part. Unlike a training stream, no row is repeated to fill a
    batch, so a metric's mean over the batches is its mean over the rows.
    """
    feats, labels_, sizes = [], [], []
    for name, x, y, column in parts:
        x, n = stream_features(name, x)
        feats.append(x)
        labels_.append(np.concatenate([y, np.reshape(column, (-1, 1))], axis=1)
                       .astype("float32"))
        sizes.append(n)
    steps = -(-sum(sizes) // batch_size)
    while steps < min(sizes) and sum(-(-n // steps) for n in sizes) > batch_size:
        steps += 1
    steps = max(1, min(steps, min(sizes)))
    starts = np.cumsum([0, *sizes[:-1]])
    chunks = [np.array_split(np.arange(n) + s0, steps) for n, s0 in zip(sizes, starts)]
    order = [np.concatenate([c[i] for c in chunks]) for i in range(steps)]
    x_all = tf.nest.map_structure(lambda *a: np.concatenate(a), *feats)
    y_all = np.concatenate(labels_)
    index = tf.RaggedTensor.from_row_lengths(np.concatenate(order).astype("int64"),
                                             [len(o) for o in order])
    # The rows as one dataset element (not constants captured by the map's graph, which
    # cannot exceed 2 GB), each batch gathered from it by its indices.
    data = tf.data.Dataset.from_tensors((x_all, y_all))
    rows = tf.data.Dataset.from_tensor_slices(index)
    return tf.data.Dataset.zip((rows, data.repeat())).map(
        lambda i, d: tf.nest.map_structure(lambda t: tf.gather(t, i), d))


def _fitted_theta(exposure_model: Any, x_e: np.ndarray, e: np.ndarray) -> Yardstick:
    _check_yardstick("exposure_model", exposure_model)
    return exposure_model if exposure_model is not None else fit_exposure_model(x_e, e)


def pue_validation_data(x_pu: Any, w: Any, x_e: Any, e: Any, *,
                        exposure_model: Yardstick | None = None,
                        reference: Yardstick | None = None,
                        batch_size: int = 1024) -> tf.data.Dataset:
    """Held-out PUE rows in the validation layout, for ``validation_data=``.

    The rows in order, each once (no row repeated to fill a batch, so a
    metric's mean is over the held-out rows), every batch holding both
    sources, plus column 3: ``θ̂(x)`` on the PU rows and ``f_ref(x)`` on the E rows. With
    these labels :class:`ExposureLikelihood` and :class:`ReferenceRisk` work
    in ``fit``/``evaluate``, and the ``val_risk`` of a ``DebiasedModel`` (or
    of ``adp.metrics.risk_metrics``) is the reference risk.

    Args:
        x_pu: held-out PU features: an array ``(n_pu, ...)``, a dict of arrays,
            or a Dataset of ``(features, w)`` rows (then ``w=None``).
        w: their ``W`` in {0, 1}.
        x_e: held-out exposure-log features, the same layout (or a Dataset of
            ``(features, e)`` rows, ``e=None``).
        e: their ``E`` in {0, 1}.
        exposure_model: ``θ̂`` (probabilities); None: fitted on ``(x_e, e)``.
        reference: ``f_ref`` (probabilities); None: the Ratio estimate fitted on
            these rows (:func:`adpue_tf.exposure.fit_ratio_model` with ``θ̂``).
        batch_size: rows per batch (every batch holds both sources).

    Returns:
        A finite ``tf.data.Dataset`` of ``(x, y)``, ``y`` of shape ``(batch, 4)``.

    Raises:
        TypeError, ValueError: on bad data or yardsticks, naming the argument.

    Example:
        >>> import adpue_tf as adp
        >>> s = adp.synthetic.synthetic_pue(300, 300, seed=0)
        >>> ds = pue_validation_data(s.x_pu, s.w_pu, s.x_e, s.e_e, batch_size=200)
        >>> [tuple(t.shape) for t in next(iter(ds))]
        [(200, 2), (200, 4)]
    """
    _check_yardstick("reference", reference)
    batch_size = check_int("batch_size", batch_size, 2)
    x_pu, w, x_e, e = _check_rows(x_pu, w, x_e, e, True)
    theta = _fitted_theta(exposure_model, x_e, e)
    if reference is None:
        reference = fit_ratio_model(x_pu, w, x_e, e, exposure_model=_ratio_exposure(theta))
    col_pu = _probabilities("exposure_model", theta, x_pu, batch_size)
    col_e = _probabilities("reference", reference, x_e, batch_size)
    return _each_row_once([("x_pu", x_pu, pack_pu(w), col_pu), ("x_e", x_e, pack_e(e), col_e)],
                          batch_size)


def _p_rows(x_p: Any, x_e: np.ndarray) -> np.ndarray:
    x = _features("x_p", x_p)
    if x.shape[1:] != x_e.shape[1:]:
        raise ValueError(f"`x_p` has feature shape {x.shape[1:]} but `x_e` has "
                         f"{x_e.shape[1:]}.")
    return x


def pe_validation_data(x_p: Any, x_e: Any, e: Any, *, reference: Yardstick,
                       batch_size: int = 1024) -> tf.data.Dataset:
    """Held-out PE rows (P and E) with ``f†`` fixed to a reference, for the reference risk.

    The rows of :func:`adpue_tf.data.pe_dataset` (``shuffle=False``) with
    column 3 = ``f_ref(x)`` on every row (the ``f†`` of the label layout), so
    :class:`ReferenceRisk` and the ``val_risk`` of a ``DebiasedModel`` are the
    reference risk. PE data has no rows whose ``W`` is observed on a sample
    of ``ζ`` and the PE loss refuses extra unlabeled rows, so the exposure
    likelihood is not offered here (use FPUE data for it). There are no PU
    rows to fit a Ratio estimate on, so ``reference`` is required (e.g. a
    Ratio model fitted on whatever PU data exists, or a frozen earlier model).

    Args:
        x_p: held-out positives ``(n_p, ...)``.
        x_e: held-out exposure-log features, same feature shape.
        e: their exposures ``E`` in {0, 1}.
        reference: ``f_ref`` giving probabilities in ``[0, 1]`` (required).
        batch_size: rows per batch.

    Returns:
        A finite ``tf.data.Dataset`` of ``(x, y)``, ``y`` of shape ``(batch, 4)``.

    Raises:
        TypeError, ValueError: on bad data or reference, naming the argument.

    Example:
        >>> import keras, adpue_tf as adp
        >>> s = adp.synthetic.synthetic_pue(300, 300, seed=0)
        >>> half = keras.Sequential([keras.Input((2,)), keras.layers.Dense(
        ...     1, activation="sigmoid", kernel_initializer="zeros")])
        >>> ds = pe_validation_data(s.x_pu[s.w_pu == 1], s.x_e, s.e_e, reference=half,
        ...                         batch_size=256)
        >>> y = next(iter(ds))[1]
        >>> tuple(y.shape), float(y[0, 3])  # two batches: 22 P + 150 E rows, then the rest
        ((172, 4), 0.5)
    """
    x_e_arr, e_arr, x_p_arr, batch_size = _p_e_rows(x_p, x_e, e, reference, batch_size, 2)
    col_p = _probabilities("reference", reference, x_p_arr, batch_size)
    col_e = _probabilities("reference", reference, x_e_arr, batch_size)
    return _each_row_once([("x_p", x_p_arr, pack_p(len(x_p_arr)), col_p),
                           ("x_e", x_e_arr, pack_e(e_arr), col_e)], batch_size)


def fpue_validation_data(x_p: Any, x_u: Any, x_e: Any, e: Any, *,
                         exposure_model: Yardstick | None = None, reference: Yardstick,
                         batch_size: int = 1024) -> tf.data.Dataset:
    """Held-out FPUE rows (P, U, E) in the validation layout.

    The rows of :func:`adpue_tf.data.fpue_dataset` (``shuffle=False``);
    column 3: ``θ̂(x)`` on the P and U rows (read by :class:`ExposureLikelihood`,
    in its case-control form with the prior), ``f_ref(x)`` on the E rows
    (the ``f†`` of :class:`ReferenceRisk` and of ``val_risk``). There are no
    PU rows to fit a Ratio estimate on, so ``reference`` is required.

    Args:
        x_p: held-out positives ``(n_p, ...)``.
        x_u: held-out unlabeled rows, same feature shape.
        x_e: held-out exposure-log features, same feature shape.
        e: their exposures ``E`` in {0, 1}.
        exposure_model: ``θ̂`` (probabilities); None: fitted on ``(x_e, e)``.
        reference: ``f_ref`` giving probabilities in ``[0, 1]`` (required).
        batch_size: rows per batch.

    Returns:
        A finite ``tf.data.Dataset`` of ``(x, y)``, ``y`` of shape ``(batch, 4)``.

    Raises:
        TypeError, ValueError: on bad data or yardsticks, naming the argument.

    Example:
        >>> import keras, adpue_tf as adp
        >>> s = adp.synthetic.synthetic_pue(300, 300, seed=0)
        >>> half = keras.Sequential([keras.Input((2,)), keras.layers.Dense(
        ...     1, activation="sigmoid", kernel_initializer="zeros")])
        >>> ds = fpue_validation_data(s.x_pu[s.w_pu == 1], s.x_pu, s.x_e, s.e_e,
        ...                           reference=half, batch_size=64)
        >>> tuple(next(iter(ds))[1].shape)  # every row once, in 11 batches of at most 64
        (60, 4)
    """
    x_e_arr, e_arr, x_p_arr, batch_size = _p_e_rows(x_p, x_e, e, reference, batch_size, 3)
    if x_u is None:
        raise TypeError("`x_u` must be an array of features (n_u, ...), got None.")
    x_u_arr = _features("x_u", x_u)
    if x_u_arr.shape[1:] != x_e_arr.shape[1:]:
        raise ValueError(f"`x_u` has feature shape {x_u_arr.shape[1:]} but `x_e` has "
                         f"{x_e_arr.shape[1:]}.")
    theta = _fitted_theta(exposure_model, x_e_arr, e_arr)
    col_p = _probabilities("exposure_model", theta, x_p_arr, batch_size)
    col_u = _probabilities("exposure_model", theta, x_u_arr, batch_size)
    col_e = _probabilities("reference", reference, x_e_arr, batch_size)
    return _each_row_once([("x_p", x_p_arr, pack_p(len(x_p_arr)), col_p),
                           ("x_u", x_u_arr, pack_u(len(x_u_arr)), col_u),
                           ("x_e", x_e_arr, pack_e(e_arr), col_e)], batch_size)


def _p_e_rows(x_p: Any, x_e: Any, e: Any, reference: Any, batch_size: Any,
              streams: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    if reference is None:
        raise ValueError("`reference` is required for PE/FPUE validation data (there are "
                         "no PU rows to fit a Ratio estimate on); pass a model giving "
                         "f† in [0, 1].")
    _check_yardstick("reference", reference)
    batch_size = check_int("batch_size", batch_size, streams)
    x_e_arr = _features("x_e", x_e)
    e_arr = _labels("e", e, len(x_e_arr), "x_e")
    return x_e_arr, e_arr, _p_rows(x_p, x_e_arr), batch_size
