"""TF Serving warm-up requests: ``PredictionLog`` records written into the export."""

from __future__ import annotations

from typing import Any

import numpy as np
import tensorflow as tf

from adpue_tf._internal.checks import check_dense
from adpue_tf.serving.signatures import (
    EXAMPLES_INPUT,
    EXAMPLES_SIGNATURE,
    INPUT_NAME,
    SIGNATURE_NAME,
)

__all__ = ["WARMUP_FILE"]


#: Where TF Serving looks for warm-up requests inside a version directory.
WARMUP_FILE = "assets.extra/tf_serving_warmup_requests"


def _field(number: int, payload: bytes) -> bytes:
    """One length-delimited protobuf field (wire type 2)."""
    def varint(n: int) -> bytes:
        out = bytearray()
        while True:
            byte, n = n & 0x7F, n >> 7
            out.append(byte | (0x80 if n else 0))
            if not n:
                return bytes(out)
    return varint(number << 3 | 2) + varint(len(payload)) + payload


def _prediction_log(model_name: str, signature: str, tensors: dict[str, Any]) -> bytes:
    """A serialized ``tensorflow.serving.PredictionLog`` holding one ``PredictRequest``.

    Field numbers of tensorflow_serving/apis: PredictionLog.predict_log = 6,
    PredictLog.request = 1, PredictRequest.model_spec = 1 and inputs = 2 (a map:
    key = 1, value = 2), ModelSpec.name = 1 and signature_name = 3. Written by
    hand so that exporting needs no ``tensorflow-serving-api``.
    """
    spec = _field(1, model_name.encode()) + _field(3, signature.encode())
    inputs = b"".join(
        _field(2, _field(1, key.encode()) + _field(2, tf.make_tensor_proto(value)
                                                   .SerializeToString()))
        for key, value in tensors.items())
    return _field(6, _field(1, _field(1, spec) + inputs))


def _warmup_records(rows: Any, specs: dict[str, tf.TensorSpec], *, model_name: str,
                    examples: bool) -> list[bytes]:
    """The warm-up requests for ``rows``, checked against the serving inputs."""
    if len(specs) == 1 and INPUT_NAME in specs and not isinstance(rows, dict):
        rows = {INPUT_NAME: rows}
    if not isinstance(rows, dict) or set(rows) != set(specs):
        got = sorted(rows) if isinstance(rows, dict) else type(rows).__name__
        raise ValueError(f"`warmup_rows` must hold the serving inputs {sorted(specs)}, "
                         f"got {got}.")
    tensors, counts = {}, set()
    for key, spec in specs.items():
        check_dense("warmup_rows" if key == INPUT_NAME and len(specs) == 1
                    else f"warmup_rows[{key!r}]", rows[key])  # a masked entry: no data
        try:
            value = tf.constant(rows[key], dtype=spec.dtype)
        except (TypeError, ValueError) as err:
            raise ValueError(f"`warmup_rows[{key!r}]` cannot be {spec.dtype.name}: {err}") from None
        if not spec.shape.is_compatible_with(value.shape) or value.shape[0] == 0:
            raise ValueError(f"`warmup_rows[{key!r}]` has shape {tuple(value.shape)}; expected "
                             f"{tuple(spec.shape)} with at least one row.")
        if spec.dtype.is_floating and not bool(tf.reduce_all(tf.math.is_finite(value))):
            raise ValueError(f"`warmup_rows[{key!r}]` holds NaN or infinite values.")
        tensors[key] = value.numpy()
        counts.add(int(value.shape[0]))
    if len(counts) != 1:
        raise ValueError(f"`warmup_rows` features have different row counts {sorted(counts)}.")
    records = [_prediction_log(model_name, SIGNATURE_NAME, tensors)]
    if examples:
        serialized = []
        for i in range(counts.pop()):
            feature = {}
            for key, value in tensors.items():
                flat = np.asarray(value[i], dtype=value.dtype).reshape(-1).tolist()
                if specs[key].dtype == tf.string:
                    feature[key] = tf.train.Feature(bytes_list=tf.train.BytesList(value=flat))
                elif specs[key].dtype.is_floating:
                    feature[key] = tf.train.Feature(float_list=tf.train.FloatList(value=flat))
                else:
                    feature[key] = tf.train.Feature(
                        int64_list=tf.train.Int64List(value=[int(v) for v in flat]))
            serialized.append(tf.train.Example(
                features=tf.train.Features(feature=feature)).SerializeToString())
        records.append(_prediction_log(model_name, EXAMPLES_SIGNATURE,
                                       {EXAMPLES_INPUT: np.array(serialized, dtype=object)}))
    return records
