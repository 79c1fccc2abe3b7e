""":func:`export_for_serving`: a trained model as a SavedModel for TensorFlow Serving."""

from __future__ import annotations

import os
import tempfile
from typing import Any

import keras
import numpy as np
import tensorflow as tf

from adpue_tf._internal.backend import BACKEND, TENSORFLOW
from adpue_tf._internal.checks import resolve_from_logits
from adpue_tf._internal.convention import check_output_convention
from adpue_tf._internal.guards import probability_to_logit
from adpue_tf.model import DebiasedModel
from adpue_tf.serving.signatures import (
    EXAMPLES_INPUT,
    EXAMPLES_SIGNATURE,
    INPUT_NAME,
    SIGNATURE_NAME,
    _feature_shape,
    _feature_specs,
    _lookup_layers,
    example_spec,
)
from adpue_tf.serving.target import _check_target, _export_into
from adpue_tf.serving.warmup import WARMUP_FILE, _warmup_records

__all__ = ["export_for_serving"]


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


def _sample(specs: dict[str, tf.TensorSpec] | None, warmup_rows: Any) -> Any:
    """The warm-up rows as inputs to check the output convention on (None: made up)."""
    if warmup_rows is None:
        return None  # (masked rows were refused by _warmup_records, which runs first)
    if specs is None:
        return np.asarray(warmup_rows, dtype=np.float32)
    return {k: tf.constant(v, dtype=specs[k].dtype) for k, v in warmup_rows.items()}


def _tf_forward(net: keras.Model, signature: Any, scratch: str) -> Any:
    """JAX: the net's forward pass as a TensorFlow function (jax2tf), its weights as TF variables.

    Keras's export on JAX converts the net (``jax2tf``); written out and loaded
    back, the pass is a plain TensorFlow callable, so the serving functions
    around it are the TensorFlow backend's own.
    """
    inner = keras.export.ExportArchive()
    inner.track(net)
    inner.add_endpoint("forward", lambda features: net(features, training=False),
                       input_signature=[signature])
    inner.write_out(scratch, verbose=False)
    return tf.saved_model.load(scratch)


def _tf_logit(p: Any) -> Any:
    """:func:`~adpue_tf._internal.guards.probability_to_logit` in TensorFlow ops (any backend)."""
    p = tf.clip_by_value(tf.cast(p, tf.float32), 1e-7, 1.0 - 1e-7)
    return tf.math.log(p) - tf.math.log1p(-p)


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
    ``overwrite=True``) a SavedModel directory that holds nothing but a
    SavedModel's own entries (``saved_model.pb`` or ``saved_model.pbtxt``,
    ``fingerprint.pb``, ``keras_metadata.pb``, ``variables/`` with TensorFlow's
    variable files, ``assets/`` with the files the SavedModel references, and
    ``assets.extra/``). The user's own files in ``assets.extra/`` (any depth)
    are copied into the new export; its ``tf_serving_warmup_requests`` is
    replaced by the new warm-up requests when ``warmup_rows`` is given, and
    refused by name otherwise (it may not fit the new model). Any other file
    or directory (a file a user put beside the model or inside ``variables/``
    or ``assets/``, a TF Serving base directory holding versions ``1/``,
    ``2/``, ..., a path under a file or inside another SavedModel, the
    working directory or one above it, ``""``) is refused before anything is
    written, naming what is there.

    The swap is atomic where the system has an atomic exchange (Linux 3.15+
    ``renameat2(RENAME_EXCHANGE)`` on ext4, XFS, Btrfs, tmpfs and most local
    file systems; macOS ``renamex_np(RENAME_SWAP)`` on APFS): a reader of
    ``path`` finds the old SavedModel or the new one, never none, and a killed
    export leaves one of them whole at ``path``. Elsewhere (Windows, NFS and
    other file systems that answer ``EINVAL``/``ENOSYS``/``ENOTSUP``) it falls
    back to two renames, between which ``path`` is briefly missing; a kill
    there leaves the old model in ``.<name>.old-<id>`` beside ``path``,
    and the next export to ``path`` moves it back first. If anything fails the
    old export stays. The temporary directories of killed exports
    (``.<name>.tmp-<id>``, ``.<name>.old-<id>`` beside ``path``) are
    removed by the next export to the same ``path`` (POSIX), never those of a
    running export or any other name. Exports to one path from several threads
    or processes take turns for the swap: each ends with one complete model
    (the last one) and no temporary directory, or with a clear error.

    The logits/probabilities convention is checked before anything is written:
    with ``from_logits=True`` a model ending in a sigmoid/softmax is refused;
    with ``from_logits=False`` a model whose outputs on a sample (the warm-up
    rows, else made-up rows) leave ``[0, 1]`` is refused.

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
        overwrite: replace ``path`` if it holds a SavedModel (keeping the
            user's files in its ``assets.extra/``).
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
            lies under a file, or holds anything but a SavedModel's own entries
            (the message says what is there); if ``overwrite`` would drop the
            old ``assets.extra/tf_serving_warmup_requests`` (no
            ``warmup_rows``); if the model breaks the
            logits/probabilities convention ``from_logits`` says;
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
    logits_out = resolve_from_logits(model, from_logits)
    if not isinstance(overwrite, bool):
        raise TypeError(f"`overwrite` must be True or False, got {overwrite!r}.")
    path = _check_target(path, overwrite, warmup=warmup_rows is not None)
    warmup = None if warmup_rows is None else _warmup_records(
        warmup_rows, specs if specs is not None else
        {INPUT_NAME: tf.TensorSpec((None, *feature_shape), tf.float32, name=INPUT_NAME)},
        model_name=os.path.basename(os.path.dirname(os.path.abspath(path))),
        examples=specs is not None)
    # Served as `probability` only if it is one: the convention checked on the model's
    # final activation and on a sample of outputs (the warm-up rows when given).
    check_output_convention("`model`", net, from_logits=logits_out,
                            sample=_sample(specs, warmup_rows))

    def outputs(out: Any) -> dict[str, tf.Tensor]:
        _check_output(out)
        out = tf.cast(out, tf.float32)  # no op when already float32
        if out.shape.rank != 2:  # (batch,) -> (batch, 1); no op for the usual (batch, 1)
            out = tf.reshape(out, (-1, 1))
        if logits_out:
            return {"probability": tf.sigmoid(out), "logit": out}
        return {"probability": out,
                "logit": probability_to_logit(out) if TENSORFLOW else _tf_logit(out)}

    if BACKEND == "torch":
        raise RuntimeError(
            "export_for_serving writes a SavedModel from Keras's TensorFlow or JAX backend; "
            "this process runs Keras on 'torch' (KERAS_BACKEND=torch). Save the trained "
            "weights (model.save_weights) and export them from a TensorFlow or JAX process. "
            "See docs/guide/backends.md.")
    if not TENSORFLOW:  # the net (jax2tf) inside TensorFlow serving functions
        return _export_converted(net, path, specs, feature_shape, parse_spec, outputs,
                                 warmup, overwrite)

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

    def write(directory: str) -> None:
        archive.write_out(directory, verbose=False)
        if warmup is not None:
            os.makedirs(os.path.join(directory, WARMUP_FILE.split("/")[0]))
            with tf.io.TFRecordWriter(os.path.join(directory, *WARMUP_FILE.split("/"))) as writer:
                for record in warmup:
                    writer.write(record)

    _export_into(path, write, overwrite=overwrite, warmup=warmup is not None)
    return path


def _export_converted(net: keras.Model, path: str, specs: Any, feature_shape: tuple,
                      parse_spec: Any, outputs: Any, warmup: Any, overwrite: bool) -> str:
    """JAX (or PyTorch where Keras exports it): the same signatures around the converted net.

    The net's pass becomes a TensorFlow function (:func:`_tf_forward`); the
    serving functions are those of the TensorFlow path, saved with
    ``tf.saved_model.save`` (Keras's archive on this backend converts every
    endpoint from JAX, which the parsing of ``tf.Example`` is not).
    """
    signature = (tf.TensorSpec((None, *feature_shape), tf.float32, name=INPUT_NAME)
                 if specs is None else specs)
    with tempfile.TemporaryDirectory() as scratch:
        forward = _tf_forward(net, signature, scratch)
        module = tf.Module()
        module.net = forward  # tracks the converted pass and its variables

        if specs is None:
            @tf.function(input_signature=[signature])
            def serve(features: tf.Tensor) -> dict[str, tf.Tensor]:
                features = tf.ensure_shape(features, (None, *feature_shape),
                                           name=f"{INPUT_NAME}_shape")
                return outputs(forward.forward(features))

            signatures = {SIGNATURE_NAME: serve.get_concrete_function()}
        else:
            @tf.function(input_signature=[specs])
            def serve_named(features: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
                features = {k: tf.ensure_shape(v, specs[k].shape, name=f"{k}_shape")
                            for k, v in features.items()}
                return outputs(forward.forward(features))

            @tf.function(input_signature=[tf.TensorSpec((None,), tf.string,
                                                        name=EXAMPLES_INPUT)])
            def serve_examples(examples: tf.Tensor) -> dict[str, tf.Tensor]:
                parsed = tf.io.parse_example(examples, parse_spec)
                return outputs(forward.forward(
                    {k: tf.cast(v, specs[k].dtype) for k, v in parsed.items()}))

            signatures = {SIGNATURE_NAME: serve_named.get_concrete_function(),
                          EXAMPLES_SIGNATURE: serve_examples.get_concrete_function()}
        module.serve = signatures[SIGNATURE_NAME]

        def write(directory: str) -> None:
            # Serving needs no gradient (jax2tf's custom gradients do not save).
            tf.saved_model.save(module, directory, signatures=signatures, options=tf.saved_model.SaveOptions(
                experimental_custom_gradients=False))
            if warmup is not None:
                os.makedirs(os.path.join(directory, WARMUP_FILE.split("/")[0]))
                with tf.io.TFRecordWriter(
                        os.path.join(directory, *WARMUP_FILE.split("/"))) as writer:
                    for record in warmup:
                        writer.write(record)

        _export_into(path, write, overwrite=overwrite, warmup=warmup is not None)
    return path
