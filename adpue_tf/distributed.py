"""``model.fit`` under ``tf.distribute.MultiWorkerMirroredStrategy``.

Keras 3 cannot run ``fit`` under ``MultiWorkerMirroredStrategy``
(keras-team/keras#20585). :class:`MultiWorkerModel` wraps any Keras model
(and :class:`~adpue_tf.DebiasedModel` includes the fix) so that it can; on one
worker both behave exactly as the wrapped model. Each step equals one
device's step on the same global batch.

The two places in Keras it mends, and how the data reach every worker:
``docs/api/distributed.md``.

Example:
    >>> import keras, adpue_tf as adp
    >>> net = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    >>> model = adp.MultiWorkerModel(net)   # build under strategy.scope() on each worker
    >>> model.compile("sgd", loss=adp.ADPUELoss(from_logits=True))
    >>> model(keras.ops.ones((2, 3))).shape
    TensorShape([2, 1])
"""

from __future__ import annotations

from typing import Any

import keras
import tensorflow as tf

__all__ = ["MultiWorkerFit", "MultiWorkerModel", "is_multi_worker"]


def is_multi_worker(strategy: tf.distribute.Strategy | None = None) -> bool:
    """Whether ``strategy`` (default: the current one) trains on several workers.

    Example:
        >>> is_multi_worker()
        False
    """
    strategy = strategy if strategy is not None else tf.distribute.get_strategy()
    extended = strategy.extended
    in_multi_worker = getattr(extended, "_in_multi_worker_mode", None)
    return bool(in_multi_worker()) if callable(in_multi_worker) else False


def _on_tensorflow() -> bool:
    """Whether Keras runs on TensorFlow (the only backend with ``tf.distribute`` strategies)."""
    return keras.backend.backend() == "tensorflow"


def _rank_one(logs: Any) -> Any:
    return {k: tf.reshape(v, (1,)) if tf.is_tensor(v) and v.shape.rank == 0 else v
            for k, v in logs.items()} if isinstance(logs, dict) else logs


class MultiWorkerFit:
    """Mixin for ``keras.Model`` subclasses: ``fit``/``evaluate`` across workers.

    Put it first among the bases (``class M(MultiWorkerFit, keras.Model)``).
    See the module docstring for what it changes, and why; on one worker it
    changes nothing.
    """

    def train_step(self, *args: Any) -> Any:
        """Keras's train step; scalar logs as shape ``(1,)`` across workers.

        On JAX (``train_step(state, data)``) and PyTorch, Keras's step unchanged.
        """
        logs = super().train_step(*args)  # type: ignore[misc]
        if not _on_tensorflow():
            return logs
        return _rank_one(logs) if is_multi_worker(self.distribute_strategy) else logs  # type: ignore[attr-defined]

    def test_step(self, *args: Any) -> Any:
        """Keras's test step; scalar logs as shape ``(1,)`` across workers."""
        logs = super().test_step(*args)  # type: ignore[misc]
        if not _on_tensorflow():
            return logs
        return _rank_one(logs) if is_multi_worker(self.distribute_strategy) else logs  # type: ignore[attr-defined]

    def _maybe_symbolic_build(self, iterator: Any = None, data_batch: Any = None) -> None:
        # Overrides Keras's TensorFlow trainer hook (keras-team/keras#20585):
        # build from this worker's own replica batch, not a cross-worker reduce.
        strategy = self.distribute_strategy  # type: ignore[attr-defined]
        if iterator is None or not is_multi_worker(strategy):
            super()._maybe_symbolic_build(iterator=iterator, data_batch=data_batch)  # type: ignore[misc]
            return
        for _, _, it in iterator:
            batch = next(it)
            data_batch = tf.nest.map_structure(
                lambda v: strategy.experimental_local_results(v)[0]
                if isinstance(v, tf.distribute.DistributedValues) else v, batch)
            break
        with strategy.scope():
            self._symbolic_build(data_batch=data_batch)  # type: ignore[attr-defined]


@keras.saving.register_keras_serializable(package="adpue_tf")
class MultiWorkerModel(MultiWorkerFit, keras.Model):
    """Any Keras model, trainable with ``fit`` under ``MultiWorkerMirroredStrategy``.

    A thin wrapper: ``call`` is ``net``'s, the weights are ``net``'s, and
    ``compile``, callbacks and saving are Keras's. Build it (and ``net``)
    under ``strategy.scope()`` on every worker; export ``model.net`` for serving.

    Args:
        net: the model to train.
        **kwargs: passed to ``keras.Model`` (e.g. ``name``).

    Example:
        >>> import keras, numpy as np, adpue_tf as adp
        >>> net = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
        >>> model = adp.MultiWorkerModel(net)
        >>> model.compile("sgd", loss=adp.ADPUELoss(from_logits=True))
        >>> ds = adp.data.pue_dataset(np.ones((8, 2)), [1, 0] * 4, np.ones((8, 2)),
        ...                           [0, 1] * 4, batch_size=8, seed=0)
        >>> sorted(model.fit(ds, epochs=1, verbose=0).history)
        ['loss']
    """

    def __init__(self, net: keras.Model, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if not isinstance(net, keras.Model):
            raise TypeError(f"`net` must be a keras.Model, got {type(net).__name__}.")
        self.net = net

    def call(self, inputs: Any, training: bool | None = None) -> Any:
        """``net(inputs)``."""
        return self.net(inputs, training=training)

    def get_config(self) -> dict[str, Any]:
        """The config, with ``net`` serialised."""
        config = super().get_config()
        config["net"] = keras.saving.serialize_keras_object(self.net)
        return config

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> MultiWorkerModel:
        """Rebuild from :meth:`get_config`."""
        config = dict(config)
        net = keras.saving.deserialize_keras_object(config.pop("net"))
        return cls(net, **config)
