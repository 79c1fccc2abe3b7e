"""Export a trained model as a SavedModel for TensorFlow Serving.

For a dense model the exported ``serving_default`` signature takes one float32
input named ``features``; for a model whose input is a dict of named features
(int64/string ids, float vectors: what ads models take) it takes those
features, with the dtypes and shapes of their ``keras.Input``s, and a second
signature ``examples`` takes serialized ``tf.Example`` protos. Every signature
returns float32 ``probability`` (``p(y=1|x)``) and ``logit``, whatever the
training dtype policy. It is a plain TensorFlow graph: loading it
(``tf.saved_model.load``, TF Serving, ``saved_model_cli``) needs neither Keras
nor ``adpue_tf``.

Example:
    >>> import os, tempfile
    >>> from adpue_tf.serving import serving_path
    >>> serving_path("export", "ranker", 3) == os.path.join("export", "ranker", "3")
    True
"""

from __future__ import annotations

import numbers
import os
import re
import shutil
import tempfile
from typing import Any

import keras
import numpy as np
import tensorflow as tf

from adpue_tf._guards import probability_to_logit
from adpue_tf.model import DebiasedModel

__all__ = ["EXAMPLES_INPUT", "EXAMPLES_SIGNATURE", "INPUT_NAME", "SIGNATURE_NAME",
           "WARMUP_FILE", "export_for_serving", "example_spec", "serving_path"]

#: Name of the exported signature (the one TF Serving uses by default).
SIGNATURE_NAME = "serving_default"
#: Name of the signature's only input (dense models).
INPUT_NAME = "features"
#: Signature of a feature-dict model that takes serialized ``tf.Example`` protos...
EXAMPLES_SIGNATURE = "examples"
#: ... in its one input of this name (``tf.string``, shape ``[None]``).
EXAMPLES_INPUT = "examples"
#: Where TF Serving looks for warm-up requests inside a version directory.
WARMUP_FILE = "assets.extra/tf_serving_warmup_requests"
#: Signature keys TF accepts (they become op names).
_KEY = re.compile(r"[A-Za-z0-9.][A-Za-z0-9_.\-/]*")


def serving_path(base: str | os.PathLike, name: str, version: int) -> str:
    """The TF Serving layout ``<base>/<name>/<version>`` for one model version.

    TF Serving watches ``<base>/<name>`` (its ``--model_base_path``) and serves
    the highest numeric sub-directory; pass the result to
    :func:`export_for_serving`.

    Args:
        base: the export root, e.g. ``"export"``.
        name: the model name (TF Serving's ``--model_name``); one path component.
        version: the version number, an integer ``>= 0``.

    Returns:
        The version directory as a string.

    Raises:
        TypeError: if ``version`` is not an integer or ``name`` not a string.
        ValueError: if ``version`` is negative or ``name`` is empty, ``.``,
            ``..`` or holds a path separator.

    Example:
        >>> import os
        >>> serving_path("export", "ranker", 1) == os.path.join("export", "ranker", "1")
        True
    """
    if not isinstance(name, str):
        raise TypeError(f"`name` must be a string, got {type(name).__name__}.")
    seps = {os.sep, "/"} | ({os.altsep} if os.altsep else set())
    if name in ("", ".", "..") or any(sep in name for sep in seps):
        raise ValueError(f"`name` must be one non-empty path component, got {name!r}.")
    if isinstance(version, bool) or not isinstance(version, numbers.Integral):
        raise TypeError(f"`version` must be an int >= 0, got {version!r}.")
    if version < 0:
        raise ValueError(f"`version` must be an int >= 0, got {version}.")
    return os.path.join(os.fspath(base), name, str(int(version)))


_SAVED_MODEL_FILES = ("saved_model.pb", "saved_model.pbtxt")


def _is_saved_model(path: str) -> bool:
    """Whether ``path`` is a directory holding ``saved_model.pb`` or ``saved_model.pbtxt``."""
    return any(os.path.isfile(os.path.join(path, f)) for f in _SAVED_MODEL_FILES)


def _describe(path: str) -> str:
    """What is at ``path``, in words, for error messages."""
    if os.path.islink(path):
        return f"a symbolic link to {os.readlink(path)!r}"
    if not os.path.isdir(path):
        return "a file" if os.path.isfile(path) else "something that is not a directory"
    names = sorted(os.listdir(path))
    shown = ", ".join(names[:6]) + (f", ... ({len(names)} entries)" if len(names) > 6 else "")
    if names and all(n.isdigit() and os.path.isdir(os.path.join(path, n)) for n in names):
        return (f"a TF Serving base directory holding versions {shown}; export into a new "
                "version sub-directory, e.g. serving_path(base, name, version)")
    return f"a directory that is not a SavedModel (it holds {shown})"


def _check_target(raw: str | os.PathLike, overwrite: bool) -> str:
    """The normalised export path; raise unless writing there can lose nothing.

    Only an empty directory or, with ``overwrite``, an existing SavedModel
    directory may be replaced; never the working directory or one above it.
    """
    if not isinstance(raw, (str, os.PathLike)):
        raise TypeError(f"`path` must be a str or os.PathLike, got {type(raw).__name__}.")
    text = os.fspath(raw)
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"`path` must name a directory to create, got {text!r}.")
    path = os.path.normpath(text)
    real, cwd = os.path.realpath(path), os.path.realpath(os.getcwd())
    if real == cwd or cwd.startswith(real.rstrip(os.sep) + os.sep):
        where = "the current working directory" if real == cwd else (
            f"an ancestor of the current working directory {cwd!r}")
        raise ValueError(
            f"`path` {text!r} is {where}; export into a new directory, e.g. "
            "serving_path(base, name, version). Nothing was written or deleted.")
    if not os.path.lexists(path):
        return path
    if os.path.isdir(path) and not os.path.islink(path):
        if _is_saved_model(path):
            if not overwrite:
                raise FileExistsError(
                    f"`path` {path!r} already holds a SavedModel; pass overwrite=True to "
                    "replace it.")
            return path
        if not os.listdir(path):
            return path  # an empty directory: nothing to lose
    raise ValueError(
        f"`path` {path!r} exists and is {_describe(path)}. export_for_serving only "
        "replaces a SavedModel directory (with overwrite=True); it never deletes anything "
        "else. Nothing was written or deleted.")


def _swap_in(tmp: str, path: str) -> None:
    """Move the complete export ``tmp`` to ``path``, replacing a SavedModel there.

    Two renames on the same file system; if the second fails the old export is
    renamed back, so ``path`` always holds a whole SavedModel (or nothing when
    there was none before).
    """
    if not os.path.lexists(path):
        os.rename(tmp, path)
        return
    if not _is_saved_model(path):  # an empty directory (checked by _check_target)
        os.rmdir(path)
        os.rename(tmp, path)
        return
    parent = os.path.dirname(os.path.abspath(path))
    old = tempfile.mkdtemp(prefix=f".{os.path.basename(path)}.old-", dir=parent)
    os.rename(path, old)  # renaming a directory onto an empty one replaces it (POSIX)
    try:
        os.rename(tmp, path)
    except BaseException:
        os.rename(old, path)
        raise
    shutil.rmtree(old, ignore_errors=True)  # the replaced SavedModel, as asked


def _feature_shape(net: keras.Model) -> tuple[int | None, ...]:
    """The shape of one example (without the batch axis) that ``net`` takes."""
    try:
        inputs = net.inputs  # Functional and Sequential models with an Input
    except (AttributeError, ValueError):
        inputs = None
    if inputs:
        if len(inputs) != 1:
            raise ValueError(
                f"`model` must take a single input tensor (served as `{INPUT_NAME}`), "
                f"got {len(inputs)} inputs.")
        dtype = keras.backend.standardize_dtype(inputs[0].dtype)
        if not dtype.startswith(("float", "bfloat")):
            raise ValueError(
                f"`model` input {inputs[0].name!r} has dtype {dtype}, but a single-input "
                f"model is served with a float32 input `{INPUT_NAME}`; take a dict of named "
                "keras.Input (served by name, ids included) or a float input.")
        return tuple(inputs[0].shape[1:])
    config = net.get_build_config() if net.built else None
    shape = (config or {}).get("input_shape")
    if (isinstance(shape, (tuple, list)) and len(shape) >= 1
            and all(d is None or isinstance(d, numbers.Integral) for d in shape)):
        return tuple(None if d is None else int(d) for d in shape[1:])
    if shape is not None:
        raise ValueError(
            f"`model` must take a single input tensor (served as `{INPUT_NAME}`), "
            f"got input shapes {shape}.")
    raise ValueError(
        "`model` has no known input shape: start it with `keras.Input(shape)`, or "
        "build it (`model.build((None, *feature_shape))`) or call it on data first.")


def _feature_specs(net: keras.Model) -> dict[str, tf.TensorSpec] | None:
    """The named inputs of a feature-dict model, or None when ``net`` takes one tensor."""
    try:
        structure = net.input
    except (AttributeError, ValueError):
        return None
    if not isinstance(structure, dict):
        return None
    specs = {}
    for key, tensor in structure.items():
        if not isinstance(key, str) or not _KEY.fullmatch(key):
            raise ValueError(
                f"`model` input key {key!r} cannot name a serving input: use letters, digits, "
                "'_', '.', '-' or '/', starting with a letter, digit or '.'.")
        dtype = tf.as_dtype(keras.backend.standardize_dtype(tensor.dtype))
        specs[key] = tf.TensorSpec((None, *tensor.shape[1:]), dtype, name=key)
    return specs


def example_spec(specs: dict[str, tf.TensorSpec]) -> dict[str, tf.io.FixedLenFeature]:
    """The ``tf.io.parse_example`` spec of the named features of a model.

    ``tf.Example`` stores int64, float32 and bytes lists, so integer and bool
    features are parsed as int64, float features as float32 (then cast to the
    input's dtype) and strings as bytes. Every feature is required and has the
    fixed shape of its ``keras.Input``.

    Args:
        specs: feature name -> ``tf.TensorSpec`` with the batch axis first.

    Returns:
        feature name -> ``tf.io.FixedLenFeature``.

    Raises:
        ValueError: a feature has an unknown dimension or a dtype ``tf.Example``
            cannot carry.

    Example:
        >>> import tensorflow as tf
        >>> spec = example_spec({"user": tf.TensorSpec((None, 1), tf.int32)})
        >>> spec["user"].shape, spec["user"].dtype.name
        ((1,), 'int64')
    """
    parsed = {}
    for key, spec in specs.items():
        dims = tuple(spec.shape[1:])
        if any(d is None for d in dims):
            raise ValueError(
                f"feature {key!r} has shape {tuple(spec.shape)}: the `{EXAMPLES_SIGNATURE}` "
                "signature needs a fixed shape per feature (keras.Input(shape=...) without None).")
        if spec.dtype == tf.string:
            kind = tf.string
        elif spec.dtype.is_floating:
            kind = tf.float32
        elif spec.dtype.is_integer or spec.dtype == tf.bool:
            kind = tf.int64
        else:
            raise ValueError(f"feature {key!r} has dtype {spec.dtype.name}, which tf.Example "
                             "cannot carry (int64, float32 and bytes lists only).")
        parsed[key] = tf.io.FixedLenFeature(dims, kind)
    return parsed


def _lookup_layers(layer: keras.layers.Layer) -> list[keras.layers.Layer]:
    """The layers under ``layer`` that hold lookup tables (not variables) to export."""
    kinds = (keras.layers.StringLookup, keras.layers.IntegerLookup,
             keras.layers.TextVectorization)
    found = [layer] if isinstance(layer, kinds) else []
    for sub in getattr(layer, "layers", []):
        found += _lookup_layers(sub)
    return found


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
                flat = value[i].reshape(-1).tolist()
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


def _check_output(out: Any) -> None:
    """Raise ValueError unless ``out`` is one tensor of shape ``(batch,)`` or ``(batch, 1)``."""
    if isinstance(out, (list, tuple, dict)) or len(tf.nest.flatten(out)) != 1:
        raise ValueError(
            "`model` must have a single output (one logit or probability), got "
            f"{len(tf.nest.flatten(out))} outputs.")
    shape = tuple(out.shape)
    if len(shape) not in (1, 2) or (len(shape) == 2 and shape[1] != 1):
        raise ValueError(
            "`model` must have one output unit (shape (batch,) or (batch, 1)), got "
            f"output shape {shape}.")


def _resolve_from_logits(model: keras.Model, from_logits: bool | None) -> bool:
    if from_logits is not None:
        if not isinstance(from_logits, bool):
            raise TypeError(f"`from_logits` must be True, False or None, got {from_logits!r}.")
        return from_logits
    value = getattr(getattr(model, "loss", None), "from_logits", None)
    if isinstance(value, bool):
        return value
    raise ValueError(
        "Cannot tell whether `model` outputs logits or probabilities: its compiled "
        "loss has no `from_logits` attribute. Pass `from_logits=True` or "
        "`from_logits=False` explicitly.")


def export_for_serving(model: keras.Model, path: str | os.PathLike, *,
                       from_logits: bool | None = None, overwrite: bool = False,
                       warmup_rows: Any = None) -> str:
    """Write ``model`` as a SavedModel whose ``serving_default`` returns probabilities.

    The signature ``serving_default`` (method ``tensorflow/serving/predict``)
    takes one float32 input ``features`` of shape ``(None, *feature_shape)``,
    or, for a model whose input is a dict of named ``keras.Input``s (ids as
    int64 or strings, float vectors), those named inputs with their own dtypes
    and shapes. A feature-dict model gets a second signature ``examples``
    taking ``examples``: a ``tf.string`` vector of serialized ``tf.Example``
    protos, parsed with :func:`example_spec` of its inputs. Both return a dict
    of float32 tensors of shape ``(None, 1)``:

    * ``probability``: ``p(y=1|x)``, the sigmoid of the logit, or the model's
      output as is when it outputs probabilities;
    * ``logit``: the model's output as is, or the clipped log-odds
      ``log(p) - log(1 - p)`` of ``p`` clipped to ``[1e-7, 1 - 1e-7]``.

    The outputs are cast to float32 whatever the model's dtype policy
    (``mixed_float16``, ``mixed_bfloat16``). For a :class:`DebiasedModel` only
    the trained ``net`` is exported: neither the ``f†`` snapshot, the initial
    guess nor the optimizer. The SavedModel holds exactly the variables the
    forward pass reads, and runs without Keras or ``adpue_tf`` (TF Serving,
    ``tf.saved_model.load``).

    TF Serving layout: it watches ``--model_base_path=<export>/<model_name>``
    and serves the highest numeric version directory, so pass ``path`` as
    ``export/<model_name>/<version>`` (see :func:`serving_path`); it then holds
    ``saved_model.pb`` and ``variables/``. The directory is written under a
    temporary non-numeric name next to ``path`` and renamed when complete, so
    TF Serving never loads a half-written version.

    Nothing is lost: ``path`` must be new, an empty directory, or (with
    ``overwrite=True``) a SavedModel directory (one holding ``saved_model.pb``
    or ``saved_model.pbtxt``). A SavedModel is replaced by two renames after
    the new export is complete; if anything fails the old export stays. Any
    other file or directory (a TF Serving base directory holding versions
    ``1/``, ``2/``, ..., the working directory or one above it, ``""``) is
    refused before anything is written.

    A REST request (``POST /v1/models/<model_name>:predict``) in row format::

        {"signature_name": "serving_default", "instances": [[0.1, -1.2, 3.0], [0.0, 0.5, 1.0]]}

    returns one object per row::

        {"predictions": [{"probability": [0.71], "logit": [0.9]}, ...]}

    and in columnar format ``{"inputs": {"features": [[0.1, -1.2, 3.0]]}}``
    returns ``{"outputs": {"probability": [[0.71]], "logit": [[0.9]]}}``.

    A request of the wrong width or rank fails with ``InvalidArgumentError:
    Shape of tensor features [2,4] is not compatible with expected shape
    [?,3]`` (checked by the signature itself); a direct call with float64
    features gets TensorFlow's own ``input #0 was expected to be a float tensor
    but is a double tensor`` (TF Serving converts JSON numbers to float32).

    Args:
        model: a built Keras model with one input tensor or a dict of named
            inputs, and one output unit; or a :class:`DebiasedModel` (its
            ``net`` is exported). Lookup layers (``StringLookup``,
            ``IntegerLookup``, ``TextVectorization``) are exported with their tables.
        path: the SavedModel directory to create, e.g.
            ``serving_path("export", "ranker", 1)``.
        from_logits: whether the model outputs logits. Default: the
            ``from_logits`` attribute of the compiled loss.
        overwrite: replace ``path`` if it holds a SavedModel.
        warmup_rows: a few example rows (an array ``(n, *feature_shape)``, or
            for a feature-dict model a dict of arrays with ``n`` rows each) to
            write as TF Serving warm-up requests in
            ``assets.extra/tf_serving_warmup_requests``: one ``PredictRequest``
            per signature (for ``examples``, the rows as serialized
            ``tf.Example``), which TF Serving replays when it loads the version,
            so the first real request is not slow. Default: none.

    Returns:
        ``path`` as a normalised string (no trailing separator).

    Raises:
        TypeError: if ``model`` is not a ``keras.Model``, ``path`` not a path,
            or ``from_logits`` or ``overwrite`` not a bool.
        ValueError: if the input shape of ``model`` is unknown (not built), it
            has several inputs, several outputs or several output units, or
            ``from_logits`` is None and the compiled loss does not tell; if
            ``path`` is empty, the working directory or one of its ancestors,
            or holds anything but a SavedModel (the message says what is there);
            a single input that is not float; a named feature whose key cannot
            name a serving input, or whose shape is not fixed.
        FileExistsError: if ``path`` holds a SavedModel and ``overwrite`` is False.

    Example:
        >>> import os, shutil, tempfile, keras, tensorflow as tf, adpue_tf as adp
        >>> from adpue_tf.serving import export_for_serving, serving_path
        >>> net = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
        >>> net.compile("adam", loss=adp.ADPUELoss(from_logits=True))
        >>> base = tempfile.mkdtemp()
        >>> path = export_for_serving(net, serving_path(base, "ranker", 1))
        >>> sorted(os.listdir(path))
        ['assets', 'fingerprint.pb', 'saved_model.pb', 'variables']
        >>> serve = tf.saved_model.load(path).signatures["serving_default"]
        >>> out = serve(features=tf.zeros((2, 3)))
        >>> sorted(out), out["probability"].dtype.name, tuple(out["probability"].shape)
        (['logit', 'probability'], 'float32', (2, 1))
        >>> float(out["probability"][0, 0]), float(out["logit"][0, 0])
        (0.5, 0.0)
        >>> shutil.rmtree(base)
    """
    if not isinstance(model, keras.Model):
        raise TypeError(f"`model` must be a keras.Model, got {type(model).__name__}.")
    net = model.net if isinstance(model, DebiasedModel) else model
    specs = _feature_specs(net)
    feature_shape: tuple[int | None, ...] = _feature_shape(net) if specs is None else ()
    parse_spec = example_spec(specs) if specs is not None else None
    logits_out = _resolve_from_logits(model, from_logits)
    if not isinstance(overwrite, bool):
        raise TypeError(f"`overwrite` must be True or False, got {overwrite!r}.")
    path = _check_target(path, overwrite)

    def outputs(out: Any) -> dict[str, tf.Tensor]:
        _check_output(out)
        out = tf.cast(out, tf.float32)  # no op when already float32
        if out.shape.rank != 2:  # (batch,) -> (batch, 1); no op for the usual (batch, 1)
            out = tf.reshape(out, (-1, 1))
        if logits_out:
            return {"probability": tf.sigmoid(out), "logit": out}
        return {"probability": out, "logit": probability_to_logit(out)}

    def serve(features: tf.Tensor) -> dict[str, tf.Tensor]:
        # Checked when served: a wrong width or rank fails here, naming the input
        # ("Shape of tensor features [2,4] is not compatible with expected shape
        # [?,3]"), not inside the first layer.
        features = tf.ensure_shape(features, (None, *feature_shape), name=f"{INPUT_NAME}_shape")
        return outputs(net(features, training=False))

    def serve_named(features: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        assert specs is not None  # the feature-dict endpoints exist only with specs
        features = {k: tf.ensure_shape(v, specs[k].shape, name=f"{k}_shape")
                    for k, v in features.items()}
        return outputs(net(features, training=False))

    def serve_examples(examples: tf.Tensor) -> dict[str, tf.Tensor]:
        assert specs is not None and parse_spec is not None
        parsed = tf.io.parse_example(examples, parse_spec)
        return outputs(net({k: tf.cast(v, specs[k].dtype) for k, v in parsed.items()},
                           training=False))

    archive = keras.export.ExportArchive()
    # No archive.track(net): the archive saves the variables the endpoints read,
    # once each (tracking would store every value twice, plus unused RNG state);
    # only lookup tables, which are not variables, are tracked by their layers.
    for layer in _lookup_layers(net):
        archive.track(layer)
    if specs is None:
        endpoints = [archive.add_endpoint(
            SIGNATURE_NAME, serve,
            input_signature=[tf.TensorSpec((None, *feature_shape), tf.float32, name=INPUT_NAME)])]
    else:
        endpoints = [
            archive.add_endpoint(SIGNATURE_NAME, serve_named, input_signature=[specs]),
            archive.add_endpoint(
                EXAMPLES_SIGNATURE, serve_examples,
                input_signature=[tf.TensorSpec((None,), tf.string, name=EXAMPLES_INPUT)])]
    for endpoint in endpoints:
        endpoint.get_concrete_function()  # trace now: output checks before touching the disk
    warmup = None if warmup_rows is None else _warmup_records(
        warmup_rows, specs if specs is not None else
        {INPUT_NAME: tf.TensorSpec((None, *feature_shape), tf.float32, name=INPUT_NAME)},
        model_name=os.path.basename(os.path.dirname(os.path.abspath(path))),
        examples=specs is not None)

    parent = os.path.dirname(os.path.abspath(path))
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=f".{os.path.basename(path)}.tmp-", dir=parent)
    try:
        archive.write_out(tmp, verbose=False)
        if warmup is not None:
            os.makedirs(os.path.join(tmp, WARMUP_FILE.split("/")[0]))
            with tf.io.TFRecordWriter(os.path.join(tmp, *WARMUP_FILE.split("/"))) as writer:
                for record in warmup:
                    writer.write(record)
        _check_target(path, overwrite)  # again: something may have appeared meanwhile
        _swap_in(tmp, path)
    finally:
        if os.path.exists(tmp):
            shutil.rmtree(tmp, ignore_errors=True)
    return path
