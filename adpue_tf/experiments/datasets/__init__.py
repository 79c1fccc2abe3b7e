"""Loaders for the paper's benchmark data, binarised with the paper's label maps.

Every loader returns a :class:`Dataset`: float32 ``x`` (``(n, d)``, or images
``(n, h, w, c)`` scaled to ``[0, 1]``), float32 ``y`` in {0, 1} and a string
``positive`` saying which original labels became ``y = 1``. Sources: LIBSVM files
(``australian``, ``german``, ``mushrooms``, ``w8a``, ``covtype``) from a local
directory (``data_dir=``, ``--data-dir`` or ``ADPUE_DATA_DIR``) or the Keras cache
``~/.keras/datasets/adpue_tf/`` (downloaded once, sha256-checked; see
:func:`libsvm_path`); ``fashion_mnist`` from the IDX files of the
Debian package ``dataset-fashion-mnist``; ``mnist`` and ``cifar10`` through
``tensorflow-datasets`` (which downloads on first use).

Example:
    >>> binarize("mnist", [0, 1, 2, 3])
    array([1., 0., 1., 0.], dtype=float32)
    >>> load("mnist").y.mean()  # doctest: +SKIP
    0.49...
"""

from __future__ import annotations

from typing import Any

from adpue_tf.experiments.datasets.common import (
    _LIBSVM,
    LABEL_MAPS,
    NAMES,
    Dataset,
    LabelMap,
    _check_name,
    binarize,
    paper_rows,
)
from adpue_tf.experiments.datasets.images import (
    FASHION_MNIST_DIR,
    load_fashion_mnist,
    load_tfds,
    read_idx,
)
from adpue_tf.experiments.datasets.libsvm import (
    CACHE_SUBDIR,
    ENV_VAR,
    LIBSVM_FILES_URL,
    LIBSVM_URL,
    data_dir,
    libsvm_path,
    load_libsvm,
    read_libsvm,
)

__all__ = [
    "CACHE_SUBDIR", "ENV_VAR", "FASHION_MNIST_DIR", "LABEL_MAPS", "LIBSVM_FILES_URL",
    "LIBSVM_URL", "NAMES", "Dataset", "LabelMap", "binarize", "data_dir", "libsvm_path", "load",
    "load_fashion_mnist", "load_libsvm", "load_tfds", "paper_rows", "read_idx", "read_libsvm",
]


def load(name: str, **kwargs: Any) -> Dataset:
    """Load any data set of :data:`NAMES`; ``kwargs`` go to the matching loader.

    Example:
        >>> load("imagenet")
        Traceback (most recent call last):
        ...
        ValueError: Unknown data set 'imagenet'; known names: australian, ...
    """
    _check_name(name, NAMES)
    if name in _LIBSVM:
        return load_libsvm(name, **kwargs)
    if name == "fashion_mnist":
        return load_fashion_mnist(**kwargs)
    return load_tfds(name, **kwargs)
