"""fit_pue's checks of its arguments: the net ``build_net`` returns, the features, the labels.

Each raises a ``TypeError``/``ValueError`` naming the argument and what was wrong:
a net that is not fresh at each call, inputs of another form or dtype than the
features, ids outside an ``Embedding``. Two hints are warnings, not errors:
features far from standardised for the net (:func:`scale_hint`) and two logs
that do not look like draws from one population (:func:`shift_hint`).

Example:
    >>> import keras
    >>> build = lambda: keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> net, again = check_net(build, seeds=(0, 1))
    >>> net.output_shape
    (None, 1)
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import keras
import numpy as np

from adpue_tf._internal.convention import final_activation, squashes
from adpue_tf._internal.seeding import seed_net
from adpue_tf.data.rows import Rows, layout
from adpue_tf.recommend.compose import input_structure

__all__ = ["check_builders", "check_fresh", "check_ids", "check_inputs", "check_labels",
           "check_logit", "check_net", "check_same_features", "check_whole", "scale_hint",
           "shift_hint"]


def check_net(build_net: Callable[[], keras.Model], seeds: tuple[int, int]
              ) -> tuple[keras.Model, keras.Model]:
    """Two calls of ``build_net``: a Keras model with defined inputs, one logit out, fresh each call.

    Args:
        build_net: the function checked.
        seeds: the seeds (:func:`adpue_tf._internal.seeding.seed_net`) each
            call builds under, so that the nets are those two of fit_pue's
            nets would be.

    Returns:
        The two nets (neither trained, nor called but on a few rows).
    """
    if not callable(build_net) or isinstance(build_net, keras.Model):
        raise TypeError("`build_net` must be a function that returns a fresh Keras model "
                        f"(features -> one logit), got {type(build_net).__name__}.")
    try:
        inspect.signature(build_net).bind()
    except TypeError as err:
        raise TypeError(f"`build_net` must take no arguments (fit_pue calls `build_net()` once "
                        f"per net; bind yours, e.g. `lambda: make_net(dim)`): {err}.") from None
    except ValueError:  # no signature to read (a builtin): its call says
        pass
    seed_net(seeds[0])
    net = build_net()
    if not isinstance(net, keras.Model):
        raise TypeError(f"`build_net()` must return a keras.Model, got {type(net).__name__}.")
    if not net.built or not getattr(net, "inputs", None):
        raise ValueError("`build_net()` must return a model with defined inputs (a "
                         "keras.Sequential starting with keras.Input, or a functional model).")
    outputs = net.outputs
    if len(outputs) != 1 or tuple(outputs[0].shape[1:]) != (1,):
        raise ValueError("`build_net()` must return a model with one output of shape "
                         f"(batch, 1), a logit; got {[tuple(o.shape) for o in outputs]}.")
    if not net.trainable_weights:
        raise ValueError("`build_net()` returned a model with no trainable weights (built "
                         "with `trainable=False`?): fit_pue trains every net it builds, and "
                         "a frozen one would stay as initialised. Leave the net trainable "
                         "(a frozen pretrained part inside it is fine).")
    seed_net(seeds[1])
    again = build_net()
    check_fresh(net, again)
    return net, again


#: Rows of ``x_pu`` :func:`check_logit` calls a net on.
LOGIT_ROWS = 64


#: Last activations whose outputs are bounded on one side or both (``relu``: ``z >= 0``,
#: ``tanh``: ``|z| < 1``, ...): as a logit, ``σ(z)`` could not reach 0 or 1 (a ReLU ending
#: gives ``p >= 0.5``). Refused by name.
BOUNDED = ("relu", "relu6", "softplus", "exponential", "tanh",
           "hard_tanh", "softsign", "elu", "selu", "celu", "gelu", "silu", "swish",
           "hard_silu", "hard_swish", "mish")


def check_logit(net: keras.Model, pu: Rows) -> None:
    """``net`` outputs a logit, not a probability: checked by what it computes.

    A last activation that squashes (sigmoid, softmax, ...) is refused by
    name; then the net is called on a few rows of ``x_pu`` with random
    weights (:func:`adpue_tf._internal.convention.squashes`, through Keras's
    ``stateless_call``: none of its variables is assigned): outputs that stay in ``[0, 1]`` whatever the weights
    (``keras.ops.sigmoid`` or a hard sigmoid on the output, a clip), or one
    value on every row (a softmax over one unit), are no logit. Trained as
    if they gave logits they would be stuck between 0.5 and 0.73.

    Raises:
        ValueError: naming what the net does and the way out.
    """
    found = final_activation(net)
    if found:
        raise ValueError(f"`build_net()` must output a logit, but its model ends with a "
                         f"{found} activation: drop it (fit_pue applies the sigmoid itself).")
    bounded = final_activation(net, BOUNDED)
    if bounded:
        raise ValueError(f"`build_net()` must output a logit, unbounded, but its model ends "
                         f"with a {bounded} activation, whose outputs are bounded (as a "
                         "logit, p could not reach 0 or 1): end it with a Dense(1) and no "
                         "activation.")
    take = np.linspace(0, len(pu) - 1, min(LOGIT_ROWS, len(pu))).astype(np.int64)
    rows = pu.take(take).x
    first = np.asarray(keras.ops.convert_to_numpy(net(rows, training=False)))
    if not np.all(np.isfinite(first)):
        raise ValueError(f"`build_net()`'s model outputs NaN or inf on "
                         f"{int(np.sum(~np.isfinite(first)))} of the first {len(take)} rows of "
                         "`x_pu` before any training, though the features are finite: look at "
                         "the net's layers (a log or a division of its inputs?).")
    kind = squashes(net, rows)
    if kind == "unit":
        raise ValueError(
            "`build_net()` must output a logit, but its model's outputs stay in [0, 1] "
            "whatever its weights (it ends in a sigmoid, a hard sigmoid or a clip): drop "
            "the final squashing, e.g. `keras.ops.sigmoid` (fit_pue applies the sigmoid "
            "itself).")
    if kind == "constant":
        raise ValueError("`build_net()` must output a logit, but its model gives one value on "
                         "every row whatever its weights (a softmax over one unit?): end it "
                         "with a Dense(1) and no activation.")


def check_fresh(net: keras.Model, again: object) -> None:
    """Two calls of ``build_net`` gave models that share no trainable weight.

    A ``build_net`` that returns one model it keeps, or builds a new model from
    layers made once outside it, would have every candidate train the same
    weights. A frozen part (``trainable=False``, say a pretrained encoder) may
    be shared: no candidate changes it.
    """
    if not isinstance(again, keras.Model):
        raise TypeError(f"`build_net()` must return a keras.Model, got {type(again).__name__} "
                        "at its second call.")
    mine = {id(v) for v in net.trainable_weights}
    shared = [v.path for v in again.trainable_weights if id(v) in mine]
    if again is net or shared:
        what = ("the same model" if again is net else
                f"models that share trainable weights ({', '.join(shared[:3])}"
                f"{', ...' if len(shared) > 3 else ''})")
        raise ValueError(f"`build_net()` returned {what} at two calls; it must build a fresh "
                         "model, with new layers, at each call (fit_pue trains one net per "
                         "candidate). Create the layers inside `build_net`.")


def _structure(net: keras.Model) -> Any:
    """``net``'s inputs as it takes them, a one-element list as its element (``Model([x], z)``)."""
    structure = input_structure(net)
    if isinstance(structure, (list, tuple)) and len(structure) == 1:
        return structure[0]
    return structure


def _fits(row: tuple, ref: tuple) -> bool:
    """Whether rows of shape ``row`` fit an input of shape ``(batch, *ref)``.

    As Keras does, a missing or extra trailing axis of size 1 is allowed.
    """
    if len(row) == len(ref):
        return all(r is None or d is None or r == d for r, d in zip(row, ref))
    if len(row) + 1 == len(ref) and ref[-1] in (1, None):
        return _fits(row, ref[:-1])
    if len(row) == len(ref) + 1 and row[-1] == 1:
        return _fits(row[:-1], ref)
    return False


def unused_features(nets: Sequence[keras.Model], pu: Rows) -> list[str]:
    """The keys of a dict of features that none of ``nets`` takes (sorted; empty otherwise).

    Example:
        >>> import keras, numpy as np
        >>> a = keras.Input((1,), name="a")
        >>> net = keras.Model({"a": a}, keras.layers.Dense(1)(a))
        >>> unused_features([net], Rows({"a": np.zeros((2, 1)), "b": np.zeros(2)}, np.zeros(2)))
        ['b']
    """
    if not isinstance(pu.x, Mapping):
        return []
    taken: set[str] = set()
    for net in nets:
        structure = _structure(net)
        if not isinstance(structure, dict):
            return []
        taken |= set(structure)
    return sorted(set(pu.x) - taken)


def check_inputs(net: keras.Model, pu: Rows) -> None:
    """The features fit ``net``'s inputs: same keys (a dict), rows of a shape it takes."""
    structure = _structure(net)
    rows = layout(pu.x)
    if isinstance(structure, dict):
        if not isinstance(rows, dict):
            raise ValueError(f"`build_net()`'s model takes a dict of features "
                             f"{sorted(structure)}, but `x_pu` is one array of rows {rows}; "
                             "pass a dict of arrays with those keys (a pandas DataFrame's "
                             "columns: `dict(df)`).")
        missing = sorted(set(structure) - set(rows))
        if missing:
            raise ValueError(f"`x_pu` and `x_e` lack the feature(s) {missing} that "
                             f"`build_net()`'s model takes (they have {sorted(rows)}).")
        pairs = [(k, rows[k], tuple(structure[k].shape[1:])) for k in sorted(structure)]
    elif isinstance(structure, (list, tuple)):
        raise ValueError(f"`build_net()`'s model takes a list of {len(structure)} inputs; "
                         "fit_pue needs a model that takes one array of features or a dict "
                         "of named inputs (e.g. keras.Model({'a': a, 'b': b}, logit)), and "
                         "`x_pu`/`x_e` of the same form.")
    elif isinstance(rows, dict):
        raise ValueError(f"`build_net()`'s model takes one array of features (rows of shape "
                         f"{tuple(structure.shape[1:])}), but `x_pu` is a dict of features "
                         f"{sorted(rows)}; pass one array, or build a model whose inputs are "
                         "a dict with these keys (keras.Model({'a': a, ...}, logit)).")
    elif not hasattr(structure, "shape"):
        return  # Keras says what is wrong
    else:
        pairs = [("x_pu", rows, tuple(structure.shape[1:]))]
    inputs = structure if isinstance(structure, dict) else {"x_pu": structure}
    for key, row, ref in pairs:
        values = pu.x[key] if isinstance(pu.x, dict) else pu.x
        text = inputs[key].dtype == "string"
        if text != (np.asarray(values).dtype.kind in "SUO"):
            what = "`x_pu` and `x_e` hold" if key == "x_pu" else f"feature {key!r} holds"
            raise TypeError(f"{what} {np.asarray(values).dtype} values, but `build_net()`'s "
                            f"model takes {inputs[key].dtype} there.")
        if not _fits(row, ref):
            what = "`x_pu` and `x_e`" if key == "x_pu" else f"feature {key!r} of `x_pu`"
            raise ValueError(f"{what}: rows of shape {row} do not fit `build_net()`'s model, "
                             f"whose input takes rows of shape {ref}.")


def check_whole(net: keras.Model, pu: Rows, e: Rows) -> None:
    """Float features given to an integer input of ``net`` hold whole numbers, in both logs.

    Ids as floats (``0.5``, ``1.5``) would be truncated by the cast to the
    input's dtype; refused by name, with a value.
    """
    structure = _structure(net)
    named = structure.items() if isinstance(structure, dict) else [(None, structure)]
    for key, t in named:
        if "int" not in str(getattr(t, "dtype", "")):
            continue
        for arg, rows in (("x_pu", pu), ("x_e", e)):
            flat = np.ravel(rows.x[key] if key is not None else rows.x)
            if flat.dtype.kind != "f":
                continue
            odd = flat[flat != np.round(flat)]
            if odd.size:
                what = f"`{arg}`" if key is None else f"feature {key!r} of `{arg}`"
                raise TypeError(f"{what} holds {odd.size} non-integer value(s) (e.g. "
                                f"{float(odd[0]):.10g}), but `build_net()`'s model takes "
                                f"{t.dtype} there: the cast would truncate them. Pass whole "
                                "numbers (ids as integers).")


def check_ids(net: keras.Model, pu: Rows, e: Rows) -> None:
    """Features that feed an ``Embedding`` directly hold ids in ``[0, input_dim)``, in both logs.

    An id out of range stops a CPU step deep inside TensorFlow, and on a GPU
    its lookup silently gives zeros; checked here, on every row, by name.
    """
    structure = _structure(net)
    named = structure.items() if isinstance(structure, dict) else [(None, structure)]
    keys = {id(t): key for key, t in named}
    for layer in net.layers:
        if not isinstance(layer, keras.layers.Embedding):
            continue
        fed = [keys[id(t)] for node in getattr(layer, "_inbound_nodes", ())
               for t in getattr(node, "input_tensors", ()) if id(t) in keys]
        for key in fed:
            for arg, rows in (("x_pu", pu), ("x_e", e)):
                values = np.asarray(rows.x[key] if key is not None else rows.x)
                if values.size == 0 or values.dtype.kind not in "iuf":
                    continue
                low, high = values.min(), values.max()
                if low < 0 or high >= layer.input_dim:
                    what = f"`{arg}`" if key is None else f"feature {key!r} of `{arg}`"
                    raise ValueError(
                        f"{what} holds ids in [{low:.10g}, {high:.10g}], but `build_net()`'s "
                        f"Embedding {layer.name!r} takes ids in [0, {layer.input_dim}): give it "
                        "a larger `input_dim` or map the ids first (a GPU would look them "
                        "up as zeros).")


#: Median |logit| of a fresh net on the PU rows above which the features look unscaled.
SATURATED = 10.0


def scale_hint(net: keras.Model, pu: Rows, rows: int = 1000,
               name: str = "x_pu") -> str | None:
    """What to do when a fresh net's logits on ``pu`` are saturated (features far from standardised).

    A freshly initialised net on standardised features gives logits of order
    1 (measured from the last layer's bias, which may be set to a rare
    event's logit); a median ``|z|`` over :data:`SATURATED` (``σ(z)`` within
    ``5e-5`` of 0 or 1) means that the features are large for the net, which
    then trains poorly or diverges. ``name``: the argument the rows came as
    (``"x_pu"``, ``"x_e"``). Returns the sentence to warn with, or None.
    """
    take = np.linspace(0, len(pu) - 1, min(rows, len(pu))).astype(np.int64)
    x = pu.take(take).x
    try:
        z = np.asarray(keras.ops.convert_to_numpy(net(x, training=False)), np.float64)
    except Exception:  # noqa: BLE001 - a net the checks let through but cannot call here
        return None  # its own error comes, clearer, from the first training step
    # A last layer's bias set to the logit of a rare event (say -11.5 for 1e-5) is a
    # choice, not unscaled features: the logits are measured from it.
    bias = getattr(net.layers[-1], "bias", None)
    if bias is not None and int(np.prod(bias.shape)) == 1:
        z = z - float(np.ravel(keras.ops.convert_to_numpy(keras.ops.add(bias, 0.0)))[0])
    median = float(np.median(np.abs(z))) if z.size else 0.0
    if not np.isfinite(median) or median > SATURATED:
        return (f"`build_net()`'s fresh model gives logits of median |z| = {median:.3g} on "
                f"`{name}` (sigmoid saturated): the features look far from standardised. "
                "Scale them, or start the model with a keras.layers.Normalization adapted "
                "on `x_pu`.")
    return None


#: :func:`shift_hint` also flags a feature whose standard deviation in one log is over
#: SPREAD times the other's, when both logs have SPREAD_ROWS rows or more and the
#: variances differ by more than six standard errors.
SPREAD, SPREAD_ROWS = 2.0, 200
#: Rows of each log compared by :func:`shift_hint` at most (a seeded sample beyond:
#: a standard error of about 0.014 SD, and bounded memory for wide features).
SHIFT_ROWS = 10_000


def shift_hint(pu: Rows, e: Rows) -> str | None:
    """A warning when a float feature's mean or spread differs between the PU and the E rows.

    Every estimator and the held-out score assume that both logs draw ``x``
    from one distribution (SPEC.md): an exposure log of another period or
    population breaks it. A feature is flagged when its means differ by more
    than half a pooled standard deviation and by more than six standard
    errors (so chance does not flag it on small logs), or when, with
    :data:`SPREAD_ROWS` rows in each log, its standard deviation in one log
    is over :data:`SPREAD` times the other's and its variances differ by more
    than six standard errors (a variance's is ``sqrt((m4 - var²) / n)``, each
    log's rows about its own mean: large for a column that is almost always
    one value, such as an image's corner pixel or a rare one-hot, whose
    spreads differ by chance).
    Returns the sentence, or None.
    """
    def floats(rows: Rows) -> dict[str, np.ndarray]:
        x = rows.x if isinstance(rows.x, dict) else {"": rows.x}
        out = {}
        for key, v in x.items():
            v = np.asarray(v)
            if v.dtype.kind == "f" and len(v):
                if len(v) > SHIFT_ROWS:
                    v = v[np.random.default_rng(0).choice(len(v), SHIFT_ROWS, replace=False)]
                out[key] = v.reshape(len(v), -1)
        return out

    a, b = floats(pu), floats(e)
    flagged = []
    for key in sorted(set(a) & set(b)):
        x, y = a[key], b[key]
        if len(x) < 2 or len(y) < 2:
            continue
        mx, my = x.mean(axis=0, dtype=np.float64), y.mean(axis=0, dtype=np.float64)
        vx, vy = x.var(axis=0, dtype=np.float64), y.var(axis=0, dtype=np.float64)
        pooled = (vx * len(x) + vy * len(y)) / (len(x) + len(y))
        sd, diff = np.sqrt(pooled), np.abs(mx - my)
        se = np.sqrt(vx / len(x) + vy / len(y))
        with np.errstate(divide="ignore", invalid="ignore"):
            d = np.where(sd > 0, diff / sd, 0.0)
        bad = np.flatnonzero((d > 0.5) & (diff > 6.0 * se))
        flagged += [(float(d[i]), f"{key}[{i}]" if key else f"column {i}",
                     f"means {d[i]:.2g} SD apart") for i in bad]
        # a spread SPREAD times the other's (a feature scaled in one log only)
        if min(len(x), len(y)) >= SPREAD_ROWS:
            with np.errstate(divide="ignore", invalid="ignore"):
                ratio = np.sqrt(np.maximum(vx, vy) / np.minimum(vx, vy))
            wide = np.flatnonzero((ratio > SPREAD) & ~np.isin(np.arange(len(ratio)), bad))
            # the variances' difference against its standard error (pooled 4th moment)
            m4 = (np.sum((x[:, wide] - mx[wide]) ** 4, axis=0, dtype=np.float64)
                  + np.sum((y[:, wide] - my[wide]) ** 4, axis=0, dtype=np.float64)
                  ) / (len(x) + len(y))
            se_var = np.sqrt(np.maximum(m4 - pooled[wide] ** 2, 0.0)
                             * (1.0 / len(x) + 1.0 / len(y)))
            wide = wide[np.abs(vx[wide] - vy[wide]) > 6.0 * se_var]
            flagged += [(float(ratio[i]), f"{key}[{i}]" if key else f"column {i}",
                         f"one log's SD {ratio[i]:.2g}x the other's") for i in wide]
    if not flagged:
        return None
    worst = ", ".join(f"{name} ({what})" for _, name, what in
                      sorted(flagged, key=lambda f: f[0], reverse=True)[:3])
    return (f"`x_pu` and `x_e` do not look like draws from one feature distribution: "
            f"{len(flagged)} feature(s) differ in mean or spread, most {worst}. fit_pue's "
            "estimators and its held-out score assume both logs cover the same population "
            "and period.")


def check_same_features(pu: Rows, e: Rows) -> None:
    if layout(pu.x) != layout(e.x):
        raise ValueError(f"`x_pu` and `x_e` must have the same features; got {layout(pu.x)} "
                         f"and {layout(e.x)}.")


#: Standard errors by which ``mean(w)`` may exceed ``mean(e)`` before :func:`check_labels` refuses.
LABEL_SE = 4.0


def check_labels(pu: Rows, e: Rows, held: int) -> None:
    """The labels could come from ``W = E·Y`` on two draws of one population, and are enough.

    ``W = 1`` needs ``E = 1``, so the share of observed positives cannot
    exceed the exposure log's share of exposed rows: ``mean(w) > mean(e)`` by
    more than :data:`LABEL_SE` standard errors (or ``w`` equal to 1 on every
    row) is refused with both numbers. Such labels are a swapped argument, a
    PU log whose negatives were down-sampled, or logs of two populations; no
    estimate of ``p(y=1|x)`` from them means anything.
    """
    n_w, n_e = len(pu), len(e)  # both >= 1 (as_rows refuses empty logs)
    if pu.y.min() == 1:
        raise ValueError(f"`w` is 1 on all {n_w} rows; W = E·Y needs rows that were not "
                         "exposed or not positive (W = 0). Is `w` the right column?")
    mean_w, mean_e = float(pu.y.mean()), float(e.y.mean())
    se = np.sqrt(mean_w * (1 - mean_w) / n_w + mean_e * (1 - mean_e) / n_e)
    if mean_w - mean_e > LABEL_SE * se:
        raise ValueError(
            f"`w` has more observed positives (mean {mean_w:.4g} over {n_w} rows) than the "
            f"exposure log has exposed rows (`e`: mean {mean_e:.4g} over {n_e} rows). W = E·Y "
            "is 1 only on exposed rows, so mean(w) <= mean(e) when both logs draw from one "
            "population. Check that `w` and `e` are not swapped, that the PU log keeps every "
            "W = 0 row (no down-sampled negatives) and that both logs cover the same "
            "population and period.")
    if pu.y.sum() < 2:
        raise ValueError(f"`w` has {int(pu.y.sum())} observed positive(s); fit_pue needs at "
                         "least 2 (some for training, some held out).")
    if e.y.min() == e.y.max():
        raise ValueError(f"`e` holds only the value {int(e.y[0])}; the exposure log needs "
                         "exposed (1) and unexposed (0) rows.")
    if min(len(pu), len(e)) < 2 * held:
        raise ValueError(f"fit_pue needs at least {2 * held} PU rows and E rows, got "
                         f"{len(pu)} and {len(e)}.")


def check_builders(build_net: Any) -> dict[str | None, Callable[[], keras.Model]]:
    """``{name: build_net}`` of a mapping (checked), or ``{None: build_net}``.

    Example:
        >>> list(check_builders(lambda: None))
        [None]
    """
    if not isinstance(build_net, Mapping):
        return {None: build_net}
    if not build_net:
        raise ValueError("`build_net` as a mapping needs at least one net; got an empty one.")
    for name, builder in build_net.items():
        if not isinstance(name, str) or not name:
            raise TypeError(f"`build_net`'s keys must be non-empty names (str), got {name!r}.")
        if isinstance(builder, (Mapping, keras.Model)) or not callable(builder):
            raise TypeError(f"`build_net[{name!r}]` must be a function that returns a fresh "
                            f"Keras model, got {type(builder).__name__}.")
    return dict(build_net)
