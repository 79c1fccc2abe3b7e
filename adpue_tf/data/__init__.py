"""tf.data builders that zip the data sets of each setting into packed batches.

Every builder returns a ``tf.data.Dataset`` of ``(x, y)`` batches: ``x`` float32
``(batch_size, ...)`` (or a structure of features, below) and ``y`` float32
``(batch_size, 3)`` = ``(w, e, source)`` in the layout of :mod:`adpue_tf.labels`.

Inputs: array-likes (features ``(n, ...)``, labels ``(n,)`` or ``(n, 1)`` in
{0, 1}), validated eagerly; or a ``tf.data.Dataset`` of *unbatched* rows
yielding ``(x, w)`` (PU), ``(x, e)`` (E), ``(x, w, e)`` (SSE) or ``x`` (P, U),
whose label arguments are then ``None``. A Dataset's element spec is checked
eagerly and its values by ``tf.debugging`` assertions while it is iterated;
:func:`read_tfrecords` streams such rows from sharded ``tf.Example`` files.

Structured features: ``x`` may also be a dict (or a tuple, nested at will) of
per-row arrays, e.g. ``{"user_id": ids, "device": names, "context": floats}``,
or a Dataset whose rows' features are such a structure; ``x`` of every batch
then has the same structure. Each leaf keeps its kind: floats become float32
(checked finite), integers int64, bools stay bool and strings stay strings
(ids for a ``StringLookup``). A single array (or a list of lists) is one dense
feature tensor, cast to float32 as before. All data sets of a setting need the
same structure, dtypes and row shapes; errors name the argument and the key,
e.g. ```x_pu["user_id"]```.

Batches: each batch holds ``k_i`` rows of every stream ``i``, from ``shares``
(positive weights in argument order, or a mapping by source name such as
``{"pu": 3, "e": 1}``; default: the data set sizes) by the largest-remainder
method, every ``k_i >= 1``, ``sum(k_i) == batch_size`` (:func:`batch_counts`).
The rows are interleaved by one fixed permutation that spreads every stream
evenly over the batch, so when a distribution strategy splits a batch into
``R`` contiguous slices, one per replica, each slice holds every source with
``k_i >= 2R`` (``k_i >= R`` when there are two streams).

A ``batch_size`` larger than the data (default ``shares``) is capped at the
number of rows, with a warning: one batch per epoch holding every row once, as
Keras does with arrays. With explicit ``shares`` a small stream may need more
rows per batch than it has (oversampling); its rows then repeat within a
batch, and a warning says so and which ``batch_size`` avoids it.

Exposure: an exposure vector (``e``, ``e_sse``) given as an array that holds
no exposure at all (every value 0) is refused, because nothing then tells
unexposed negatives from unseen positives and the model learns
``p(y=1|x) ≈ 1``; one with no unexposed row (every value 1) warns, because
the debiasing terms vanish and the risk becomes BCE on ``W``: right only when
every candidate was shown. A ``tf.data.Dataset`` is streamed, so these two
checks apply to arrays only.

Several workers: build one dataset per input pipeline (e.g. inside
``strategy.distribute_datasets_from_function``) with that pipeline's share of
the global batch as ``batch_size`` and :func:`read_tfrecords`'s
``input_context`` so each reads its own files; every per-pipeline batch then
holds every source (``k_i >= 1``), and the shares hold globally as long as the
files split the rows evenly. With one pipeline and a strategy that splits each
global batch, the interleaving above already gives every replica every source.

Epoch: one epoch is ``max_i ceil(n_i / k_i)`` batches (:func:`epoch_length`),
enough that every row of the stream that takes longest is seen at least once;
the other streams repeat, reshuffled, as needed. The dataset has this finite
cardinality, so ``len(ds)`` works and Keras shows progress. A Dataset of
unknown or infinite cardinality needs explicit ``shares`` and
``steps_per_epoch``; ``steps_per_epoch`` also overrides the formula.

Shuffling: with ``shuffle=True`` each stream is reshuffled every time it is
iterated (each pass and each Keras epoch); a fixed ``seed`` makes two builds
yield identical batches. Arrays are shuffled fully (by index), a Dataset with
a buffer of ``min(n, 10_000)`` rows. ``shuffle=False`` gives a deterministic
order (for validation data).
"""

from adpue_tf.data.builders import (
    batch_counts,
    epoch_length,
    fpue_dataset,
    pe_dataset,
    pue_dataset,
    sse_dataset,
    sse_pu_dataset,
)
from adpue_tf.data.propensity import with_propensity
from adpue_tf.data.tfrecord import read_tfrecords

__all__ = ["pue_dataset", "pe_dataset", "fpue_dataset", "sse_dataset", "sse_pu_dataset",
           "batch_counts", "epoch_length", "read_tfrecords", "with_propensity"]
