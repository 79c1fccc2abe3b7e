"""Keras models built from trained nets: the Ratio and Elkan-Noto estimates, and averages.

Each composite is a functional ``keras.Model`` from the nets' features to
**one logit**, serialisable (the layers here are registered) and exportable with
:func:`adpue_tf.export_for_serving` like any net.

Example:
    >>> import keras, numpy as np
    >>> z = keras.ops.convert_to_tensor([[0.0]])
    >>> round(float(ProbabilityMean()([z, z + 100.0])[0, 0]), 4)  # logit(mean(0.5, 1.0))
    1.0986
"""

from __future__ import annotations

import numbers
from collections.abc import Callable
from typing import Any

import keras
from keras import ops

from adpue_tf._internal.guards import probability_to_logit

__all__ = ["LogitMix", "ProbabilityMean", "RatioLogit", "ThetaFeature", "compose",
           "distinct_names", "input_structure", "inputs_like"]

_register = keras.saving.register_keras_serializable(package="adpue_tf")


@_register
class RatioLogit(keras.layers.Layer):
    """The logit of ``clip(σ(z_q) / max(θ, floor), 0, 1)``, ``θ = σ(z_θ)`` or a constant.

    Called on ``[z_q, z_θ]`` (two logits, the Ratio estimate) or, with
    ``constant``, on ``z_q`` alone (Elkan and Noto's ``q̂/c``).

    Args:
        floor: lower bound on ``θ`` in the division, in ``(0, 1)``.
        constant: a fixed ``θ`` in ``(0, 1]`` (None: the second input).
        **kwargs: passed to ``keras.layers.Layer``.

    Example:
        >>> import keras
        >>> z = keras.ops.convert_to_tensor([[0.0]])
        >>> round(float(keras.ops.sigmoid(RatioLogit(constant=0.8)(z))[0, 0]), 4)
        0.625
    """

    def __init__(self, floor: float = 1e-3, constant: float | None = None,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        for arg, value in (("floor", floor), ("constant", constant)):
            if value is not None and (isinstance(value, bool)
                                      or not isinstance(value, numbers.Real)):
                raise TypeError(f"`{arg}` must be a number, got {value!r}.")
        if not 0.0 < float(floor) < 1.0:
            raise ValueError(f"`floor` must lie in (0, 1), got {floor!r}.")
        if constant is not None and not 0.0 < float(constant) <= 1.0:
            raise ValueError(f"`constant` must lie in (0, 1], got {constant!r}.")
        self.floor = float(floor)
        self.constant = None if constant is None else float(constant)

    def call(self, inputs: Any) -> Any:
        if self.constant is None:
            z_q, z_theta = inputs
            theta = ops.sigmoid(ops.cast(z_theta, "float32"))
        else:
            z_q, theta = inputs, self.constant
        q = ops.sigmoid(ops.cast(z_q, "float32"))
        return probability_to_logit(ops.clip(q / ops.maximum(theta, self.floor), 0.0, 1.0))

    def compute_output_shape(self, input_shape: Any) -> Any:
        return input_shape[0] if self.constant is None else input_shape

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "floor": self.floor, "constant": self.constant}


@_register
class ProbabilityMean(keras.layers.Layer):
    """The logit of the mean of the probabilities ``σ(z_i)`` of several logits.

    Example:
        >>> import keras
        >>> z = keras.ops.convert_to_tensor([[2.0]])
        >>> round(float(ProbabilityMean()([z, z])[0, 0]), 4)
        2.0
    """

    def call(self, inputs: Any) -> Any:
        probs = [ops.sigmoid(ops.cast(z, "float32")) for z in inputs]
        return probability_to_logit(ops.mean(ops.stack(probs), axis=0))

    def compute_output_shape(self, input_shape: Any) -> Any:
        return input_shape[0]


@_register
class LogitMix(keras.layers.Layer):
    """``Σ_i shares[i]·z_i`` on a list of logits: a weighted mean in logit space.

    fit_pue's hedge (:func:`adpue_tf.recommend.rule.hedge_share`): the chosen
    model's logit and ``bce_w``'s, mixed with fixed shares.

    Args:
        shares: one share per input logit, each ``>= 0``, summing to 1.
        **kwargs: passed to ``keras.layers.Layer``.

    Example:
        >>> import keras
        >>> z = keras.ops.convert_to_tensor([[3.0]])
        >>> float(LogitMix([2 / 3, 1 / 3])([z, z - 3.0])[0, 0])
        2.0
    """

    def __init__(self, shares: list[float] | tuple[float, ...], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if isinstance(shares, (str, bytes)) or not isinstance(shares, (list, tuple)) \
                or not shares or any(isinstance(v, bool) or not isinstance(v, numbers.Real)
                                      for v in shares):
            raise TypeError(f"`shares` must be a non-empty list of numbers, got {shares!r}.")
        if any(not 0.0 <= float(v) <= 1.0 for v in shares) \
                or abs(sum(float(v) for v in shares) - 1.0) > 1e-6:
            raise ValueError(f"`shares` must lie in [0, 1] and sum to 1, got {shares!r}.")
        self.mix = [float(v) for v in shares]

    def call(self, inputs: Any) -> Any:
        if len(inputs) != len(self.mix):
            raise ValueError(f"LogitMix has {len(self.mix)} shares but was called on "
                             f"{len(inputs)} logits.")
        return sum(v * ops.cast(z, "float32") for v, z in zip(self.mix, inputs))

    def compute_output_shape(self, input_shape: Any) -> Any:
        return input_shape[0]

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "shares": list(self.mix)}


@_register
class ThetaFeature(keras.layers.Layer):
    """``z + a·z_θ`` on ``[z, z_θ]``: a net's logit plus a learned multiple of ``θ̂``'s logit.

    The ``likelihood_theta`` candidate of :func:`adpue_tf.fit_pue`: the
    exposure model's logit as one more feature of ``p(y=1|x)``, so what
    ``θ̂`` learned from the dense ``E`` labels (a logging policy that targets
    likely converters, say) need not be learned again from the few ``W = 1``
    rows. No gradient reaches ``z_θ`` through this layer (``θ̂`` stays the
    exposure model); ``a`` starts at 0 (the net alone).

    Args:
        **kwargs: passed to ``keras.layers.Layer``.

    Example:
        >>> import keras
        >>> layer = ThetaFeature()
        >>> z = keras.ops.convert_to_tensor([[1.0]])
        >>> float(layer([z, z + 2.0])[0, 0])  # a = 0 at first
        1.0
    """

    def build(self, input_shape: Any) -> None:
        self.scale = self.add_weight(shape=(), initializer="zeros", name="scale")

    def call(self, inputs: Any) -> Any:
        z, z_theta = inputs
        return (ops.cast(z, "float32")
                + self.scale * ops.stop_gradient(ops.cast(z_theta, "float32")))

    def compute_output_shape(self, input_shape: Any) -> Any:
        return input_shape[0]


def input_structure(net: keras.Model) -> Any:
    """``net``'s symbolic inputs as it takes them: one tensor, a list, or a dict by key."""
    if isinstance(net, keras.Sequential):
        return net.inputs[0] if len(net.inputs) == 1 else net.inputs
    return net.input


def inputs_like(net: keras.Model) -> Any:
    """Fresh ``keras.Input``s with the structure, shapes and dtypes of ``net``'s inputs.

    The inputs of a feature dict keep their keys as names (serving signatures
    use them); a single input is named by Keras.
    """
    structure = input_structure(net)
    if isinstance(structure, dict):
        return {k: keras.Input(shape=tuple(t.shape[1:]), dtype=t.dtype, name=k)
                for k, t in structure.items()}
    return keras.tree.map_structure(
        lambda t: keras.Input(shape=tuple(t.shape[1:]), dtype=t.dtype), structure)


def compose(nets: dict[str, keras.Model], head: Callable[[dict[str, Any]], Any],
            name: str) -> keras.Model:
    """``head({name: net(x)})`` as one functional model; each net is called once.

    A composite of composites (an average of two Ratio estimates) is built by
    nesting heads, never models: every trained net then appears once in the
    graph, which Keras can save and load.

    Args:
        nets: built functional or sequential models with the same inputs, one logit each.
        head: combines the nets' logits (a dict by name) into one logit tensor.
        name: the model's name.

    Returns:
        A functional ``keras.Model`` taking the nets' inputs.
    """
    distinct_names(list(nets.values()))
    inputs = inputs_like(next(iter(nets.values())))
    return keras.Model(inputs, head({n: net(inputs) for n, net in nets.items()}), name=name)


def distinct_names(nets: list[keras.Model]) -> None:
    """Rename the nets whose name another of ``nets`` has, so they can meet in one model.

    A functional model refuses two operations of one name, and every net of
    one ``build_net`` has the name it fixes (``keras.Sequential(...,
    name="net")``). A repeated name gets a suffix from Keras's own counter
    (as Keras names layers), so it is new in the process too; a net whose
    name is already unique keeps it.

    Example:
        >>> import keras
        >>> build = lambda: keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)], name="n")
        >>> nets = [build(), build()]
        >>> distinct_names(nets)
        >>> nets[0].name == "n", nets[1].name != "n"
        (True, True)
    """
    seen: set[str] = set()
    for net in nets:
        while net.name in seen:
            net.name = f"{net.name}_{keras.backend.get_uid(net.name)}"
        seen.add(net.name)
