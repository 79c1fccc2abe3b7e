"""tf.data builders that zip the data sets of each setting into packed batches.

Every builder returns a ``tf.data.Dataset`` of ``(x, y)`` batches, ``y`` float32
``(batch_size, 3)`` = ``(w, e, source)`` in the layout of :mod:`adpue_tf.labels`,
from arrays, feature dicts or a ``tf.data.Dataset`` of unbatched rows
(:func:`read_tfrecords` streams them from ``tf.Example`` shards). Each batch
holds a fixed share of every data set, interleaved so that every replica's
slice holds every source; one epoch sees every row of the longest stream.

Inputs, feature dicts, shares, oversampling, the exposure checks, several
workers, epochs and shuffling: ``docs/api/data.md``.

Example:
    >>> import adpue_tf as adp
    >>> s = adp.synthetic.synthetic_pue(100, 50, seed=0)
    >>> ds = adp.data.pue_dataset(s.x_pu, s.w_pu, s.x_e, s.e_e, batch_size=30)
    >>> x, y = next(iter(ds))
    >>> tuple(y.shape)
    (30, 3)
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
