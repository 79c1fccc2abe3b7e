"""Internal: the one check of the logits/probabilities convention for a model or function.

Every entry point that reads a model or a function as a yardstick (``θ̂``, a
reference ``f_ref``), an initial guess, a propensity or an exported model
calls :func:`check_output_convention` (or its two spellings
:func:`check_logit_model` and :func:`check_probability_model`) with the
convention it was told. One rule, everywhere:

* where logits are expected, an output that comes from a sigmoid or softmax
  activation is refused (it holds probabilities), and so is a model whose
  outputs stay in ``[0, 1]`` whatever its weights (:func:`squashes`:
  ``keras.ops.sigmoid`` or a hard sigmoid on the output, a clip);
* where probabilities are expected, values outside ``[0, 1]`` on a sample of
  outputs are refused (they are logits, or something else).

The loss-side check of the same rule is :func:`adpue_tf._internal.guards.to_logits`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import keras
import numpy as np
import tensorflow as tf

from adpue_tf._internal.backend import concrete
from adpue_tf._internal.checks import check_bool

__all__ = ["check_logit_model", "check_output_convention", "check_output_values",
           "check_probability_model", "final_activation", "made_up_inputs", "squashes",
           "call_stateless"]

_SQUASHING = ("sigmoid", "softmax", "hard_sigmoid", "log_softmax")


def _activation_name(operation: Any, names: Sequence[str]) -> str | None:
    """The activation of ``names`` that ``operation`` ends with, if any."""
    act = getattr(operation, "activation", None)
    name = getattr(act, "__name__", None) or (act if isinstance(act, str) else None)
    if name in names:
        return name
    kind = type(operation).__name__.lower()
    if kind in names:
        return kind
    if isinstance(operation, keras.Model):
        return final_activation(operation, names)
    return None


def final_activation(model: Any, names: Sequence[str] = _SQUASHING) -> str | None:
    """The name of the activation of ``names`` (sigmoid/softmax) that produces ``model``'s output.

    Looks at the operation behind the output of a built functional or
    ``Sequential`` model (recursing into a nested model), and at the last layer
    of a ``Sequential``; a ``DebiasedModel`` is looked at through its ``net``.
    Subclassed models and plain functions give None (their outputs are
    checked by :func:`check_output_values` on a sample instead), as does a
    model whose output comes from none of ``names``.

    Example:
        >>> import keras
        >>> net = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1, "sigmoid")])
        >>> final_activation(net), final_activation(keras.layers.Dense(1))
        ('sigmoid', None)
        >>> final_activation(keras.Sequential([keras.Input((2,)), keras.layers.ReLU()]), ["relu"])
        'relu'
    """
    model = getattr(model, "net", model) if isinstance(model, keras.Model) else model
    if not isinstance(model, keras.Model):
        return None
    if isinstance(model, keras.Sequential) and model.layers:
        return _activation_name(model.layers[-1], names)
    try:
        outputs = tf.nest.flatten(model.outputs)
    except (AttributeError, ValueError):
        return None
    for out in outputs:
        history = getattr(out, "_keras_history", None)
        if history is not None:
            found = _activation_name(history[0], names)
            if found:
                return found
    return None


def check_output_values(name: str, values: Any, *, from_logits: bool,
                        fix: str | None = None) -> None:
    """Refuse a sample of outputs that breaks the convention ``from_logits`` (eager values).

    With ``from_logits=False`` every finite value must lie in ``[0, 1]``; with
    ``from_logits=True`` an output cached by a Keras sigmoid (``_keras_logits``)
    is refused. ``fix``: the advice for outputs outside ``[0, 1]`` (None: pass
    ``from_logits=True`` or end the model with a sigmoid).

    Raises:
        ValueError: naming ``name``, what was found and the fix.

    Example:
        >>> check_output_values("`reference`", [0.2, 0.9], from_logits=False)
        >>> check_output_values("`reference`", [-2.0, 3.0], from_logits=False)
        Traceback (most recent call last):
        ...
        ValueError: `reference` must output probabilities in [0, 1] ...
    """
    if from_logits:
        if hasattr(values, "_keras_logits"):
            raise ValueError(
                f"{name} outputs probabilities (its output comes from a sigmoid), but "
                "logits are expected (`from_logits=True`). Pass `from_logits=False`, or "
                "drop the final sigmoid.")
        return
    known = concrete(values)
    if known is None:  # traced: nothing to read now
        return
    arr = np.asarray(known, dtype=np.float64)
    finite = arr[np.isfinite(arr)]
    if finite.size and (finite.min() < 0.0 or finite.max() > 1.0):
        told = "" if fix else " (`from_logits=False`)"
        raise ValueError(
            f"{name} must output probabilities in [0, 1]{told}, but a sample "
            f"of its outputs spans [{finite.min():.4g}, {finite.max():.4g}]: it outputs "
            "logits. " + (fix or "Pass `from_logits=True`, or end the model with a sigmoid."))


def made_up_inputs(model: Any, rows: int = 16) -> Any:
    """Inputs for ``model`` built from its ``keras.Input`` specs, or None when unknown.

    Float features: half the rows uniform in ``[0, 1]``, half normal with
    scale 3 (a logit model then leaves ``[0, 1]`` on some row, whatever its
    weights); integer ids are 0 and strings empty; a dict of named inputs gets
    a dict. Fixed by a seed.

    Example:
        >>> import keras
        >>> net = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
        >>> made_up_inputs(net, rows=4).shape
        (4, 2)
    """
    model = getattr(model, "net", model) if isinstance(model, keras.Model) else model
    if not isinstance(model, keras.Model):
        return None
    try:
        inputs = model.inputs
    except (AttributeError, ValueError):
        return None
    if not inputs:
        return None
    rng = np.random.default_rng(0)

    def one(spec: Any) -> Any:
        dims = tuple(spec.shape[1:])
        if any(d is None for d in dims):
            raise ValueError("unknown shape")
        dtype = tf.as_dtype(spec.dtype)
        if dtype == tf.string:
            return tf.fill((rows, *dims), "")
        if dtype.is_floating:  # half scaled features in [0, 1], half spread wide
            half = rows // 2
            wide = rng.normal(scale=3.0, size=(rows - half, *dims))
            return tf.constant(np.concatenate([rng.uniform(size=(half, *dims)), wide]), dtype)
        return tf.zeros((rows, *dims), dtype)

    try:
        structure = model.input  # a dict for a model of named inputs
    except (AttributeError, ValueError):  # a Sequential never called: its one input
        structure = None
    try:
        if isinstance(structure, dict):
            return {key: one(spec) for key, spec in structure.items()}
        if len(inputs) == 1:
            return one(inputs[0]).numpy()
    except ValueError:
        pass
    return None


def call_stateless(model: keras.Model, x: Any, trainable: list[Any] | None = None) -> Any:
    """``model(x, training=False)`` that changes no variable: Keras's ``stateless_call``.

    A check that calls a user's model must leave no trace and must not race
    a thread that uses the model meanwhile: a layer may count or keep state
    even in inference mode, and weights are never assigned. ``trainable``:
    values to use instead of the trainable variables (None: their own).

    Example:
        >>> m = keras.Sequential([keras.Input((1,)), keras.layers.Dense(1)])
        >>> out = call_stateless(m, np.ones((2, 1), "float32"), [np.ones((1, 1)), np.zeros(1)])
        >>> np.asarray(out).ravel().tolist()
        [1.0, 1.0]
    """
    if trainable is None:
        trainable = [v.value for v in model.trainable_variables]
    out, _ = model.stateless_call(trainable, [v.value for v in model.non_trainable_variables],
                                  x, training=False)
    return out


#: Draws of random weights :func:`squashes` calls a model under.
_DRAWS = 2


def squashes(model: Any, sample: Any) -> str | None:
    """What ``model`` computes whatever its weights: ``"unit"``, ``"constant"`` or None.

    ``model`` is called on ``sample`` with every trainable float weight drawn
    from ``N(0, 1)`` (a private generator: no global seed is read or moved),
    twice, through :func:`call_stateless`: no variable of the model is
    assigned, so a thread using it meanwhile sees nothing. A logit then spreads
    over the real line. A model whose outputs stay in ``[0, 1]`` under both
    draws ends in a sigmoid, a hard sigmoid, a softmax or a clip, however it
    is written (an activation, ``keras.ops.sigmoid`` on the output):
    ``"unit"``. One value on every row under both draws, on rows that differ
    (a softmax over one unit): ``"constant"``. Otherwise (or rows all alike,
    or a model that cannot be called on ``sample``) None.

    Args:
        model: a built Keras model.
        sample: a few rows it takes.

    Example:
        >>> import keras, numpy as np
        >>> x = np.random.default_rng(0).normal(size=(8, 2))
        >>> squashes(keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)]), x)
        >>> x_ = keras.Input((2,))
        >>> squashes(keras.Model(x_, keras.ops.sigmoid(keras.layers.Dense(1)(x_))), x)
        'unit'
    """
    if not isinstance(model, keras.Model) or sample is None:
        return None
    rng = np.random.default_rng(0)
    outs = []
    try:
        for _ in range(_DRAWS):
            drawn = [rng.standard_normal(tuple(v.shape)).astype(str(v.dtype))
                     if "float" in str(v.dtype) else v.value for v in model.trainable_variables]
            out = tf.nest.flatten(call_stateless(model, sample, drawn))
            if len(out) != 1:
                return None
            outs.append(np.asarray(keras.ops.convert_to_numpy(out[0]), np.float64).ravel())
    except Exception:  # noqa: BLE001 - a sample it cannot take: not judged here
        return None
    z = np.stack(outs)
    if z.shape[1] < 2 or not np.isfinite(z).all():
        return None
    if all(np.ptp(row) == 0 for row in z):
        rows = np.concatenate([np.reshape(np.asarray(v), (len(np.asarray(v)), -1)).astype(str)
                               for v in tf.nest.flatten(sample)], axis=1)
        alike = all((r == rows[0]).all() for r in rows)
        return "constant" if not alike and np.ptp(z) == 0 else None
    return "unit" if z.min() >= 0.0 and z.max() <= 1.0 else None


def check_output_convention(name: str, model: Any, *, from_logits: bool,
                            sample: Any = None, fix: str | None = None) -> None:
    """Refuse ``model`` (a Keras model or a function ``x -> output``) if it breaks the convention.

    Args:
        name: how the error names the argument, e.g. ``"`exposure_model`"``.
        model: what is checked; a ``DebiasedModel`` is checked through its ``net``.
        from_logits: the convention the caller was told (True: logits expected).
        sample: inputs ``x`` to call ``model`` on (real rows are best); its
            outputs are then checked by :func:`check_output_values`. None: made
            up from the model's input specs (:func:`made_up_inputs`), or no
            value check for a function or a model of unknown inputs. A sample
            the model cannot take is skipped: only the convention is judged here.
        fix: what the error advises for outputs outside ``[0, 1]`` where
            probabilities are expected (None: pass ``from_logits=True`` or end
            the model with a sigmoid).

    Raises:
        ValueError: a sigmoid/softmax output where logits are expected, or a
            sample output outside ``[0, 1]`` where probabilities are expected.

    Example:
        >>> import keras, numpy as np
        >>> net = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1, "sigmoid")])
        >>> check_output_convention("`model`", net, from_logits=False, sample=np.ones((3, 2)))
        >>> check_output_convention("`model`", net, from_logits=True)
        Traceback (most recent call last):
        ...
        ValueError: `model` ends with a sigmoid activation, so it outputs probabilities, ...
    """
    check_bool("from_logits", from_logits)
    if from_logits:
        found = final_activation(model)
        if found:
            raise ValueError(
                f"{name} ends with a {found} activation, so it outputs probabilities, but "
                "logits are expected (`from_logits=True`). Pass `from_logits=False`, or drop "
                f"the final {found}.")
    if sample is None:
        sample = made_up_inputs(model)
    if sample is None:
        return
    target = getattr(model, "net", model) if isinstance(model, keras.Model) else model
    if from_logits and squashes(target, sample) == "unit":
        raise ValueError(
            f"{name} outputs probabilities: its outputs stay in [0, 1] whatever its weights "
            "(it ends in a sigmoid, a hard sigmoid or a clip), but logits are expected "
            "(`from_logits=True`). Pass `from_logits=False`, or drop the final squashing.")
    try:
        out = call_stateless(target, sample) if isinstance(target, keras.Model) \
            else target(sample)
        flat = tf.nest.flatten(out)
    except Exception:  # noqa: BLE001 - a sample the model cannot take: not judged here
        return
    if len(flat) == 1:
        check_output_values(name, flat[0], from_logits=from_logits, fix=fix)


def check_logit_model(name: str, model: Any, sample: Any = None) -> None:
    """:func:`check_output_convention` with logits expected (``from_logits=True``)."""
    check_output_convention(name, model, from_logits=True, sample=sample)


def check_probability_model(name: str, model: Any, sample: Any = None) -> None:
    """:func:`check_output_convention` with probabilities expected (``from_logits=False``).

    For an argument that takes probabilities only (no ``from_logits`` of its
    own, as an exposure model or a reference): the error says to end the model
    with a sigmoid.
    """
    check_output_convention(name, model, from_logits=False, sample=sample,
                            fix=f"End the model with a sigmoid: {name} takes probabilities.")
