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

from adpue_tf.serving.export import export_for_serving
from adpue_tf.serving.signatures import (
    EXAMPLES_INPUT,
    EXAMPLES_SIGNATURE,
    INPUT_NAME,
    SIGNATURE_NAME,
    example_spec,
)
from adpue_tf.serving.target import serving_path
from adpue_tf.serving.warmup import WARMUP_FILE

__all__ = ["EXAMPLES_INPUT", "EXAMPLES_SIGNATURE", "INPUT_NAME", "SIGNATURE_NAME",
           "WARMUP_FILE", "export_for_serving", "example_spec", "serving_path"]
