"""Seeding a net's construction without clearing TensorFlow's kernel cache: :func:`seed_net`.

``keras.utils.set_random_seed`` also calls ``tf.random.set_seed``, which in
eager mode clears the kernel cache; every compiled step is then instantiated
again, and under XLA each instantiation keeps ~3 MB that TensorFlow does not
give back (``benchmarks/results/linear.recommended.md``). A Keras 3 net's
initial state reads Python's ``random`` and Keras's seed, not TensorFlow's;
TensorFlow's global seed, which the batches' seeded ``tf.data`` ops read, is
pinned to its default (:func:`pin_tf_seed`), so the caller's seed does not
change a result and is reset at most once.

Example:
    >>> import keras
    >>> build = lambda: keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    >>> seed_net(7); a = build().get_weights()[0]
    >>> seed_net(7); b = build().get_weights()[0]
    >>> bool((a == b).all())
    True
"""

from __future__ import annotations

import contextlib
import random
import sys
import threading
from collections.abc import Iterator

import keras
import numpy as np
import tensorflow as tf

__all__ = ["BUILDING", "TF_SEED", "kept_random_state", "pin_tf_seed", "seed_net"]

#: Held while a net is seeded and built, or built unseeded beside one: the seeds are
#: global, so passes trained side by side build one net at a time.
BUILDING = threading.Lock()

#: TensorFlow's default graph seed: what seeded ops combine with when no global seed is set.
TF_SEED = 87654321


def pin_tf_seed() -> None:
    """Make TensorFlow's global seed :data:`TF_SEED` (or leave it unset, the same to seeded ops).

    ``tf.random.set_seed`` clears the eager kernel cache, so it runs only when
    the caller set a different seed.
    """
    if tf.compat.v1.get_seed(1)[0] != TF_SEED:  # an op seed given: no counter drawn
        tf.random.set_seed(TF_SEED)


def seed_net(seed: int) -> None:
    """``keras.utils.set_random_seed(seed)`` for Python, NumPy and Keras; TensorFlow's seed pinned.

    Args:
        seed: the seed of the net built next.
    """
    with tf.Graph().as_default():  # tf.random.set_seed sets this graph's seed, not the context's
        keras.utils.set_random_seed(seed)
    pin_tf_seed()


@contextlib.contextmanager
def kept_random_state() -> Iterator[None]:
    """The caller's global random state back after the block, which seeds nets (:func:`seed_net`).

    Python's ``random`` and NumPy's global generator continue where they
    were (a bootstrap loop around fit_pue draws new rows each time); PyTorch's
    generator too, where it is loaded. TensorFlow's global seed stays pinned
    (:func:`pin_tf_seed`, once per process where the caller set another):
    setting it back would clear TensorFlow's kernel cache at every call. Keras's
    own generator of unseeded ``keras.random`` calls keeps the last net's seed
    (Keras has no public way to read it).

    Example:
        >>> import numpy as np
        >>> _ = np.random.seed(1)
        >>> with kept_random_state():
        ...     seed_net(7)
        >>> state = np.random.get_state()
        >>> _ = np.random.seed(1)
        >>> bool((np.random.get_state()[1] == state[1]).all())
        True
    """
    python, numpy = random.getstate(), np.random.get_state()
    torch = sys.modules.get("torch")
    torch_state = torch.get_rng_state() if torch is not None else None
    try:
        yield
    finally:
        random.setstate(python)
        np.random.set_state(numpy)
        if torch is not None:
            torch.set_rng_state(torch_state)
