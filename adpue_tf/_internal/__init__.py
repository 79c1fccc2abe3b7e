"""Internal helpers of the core; not part of the public API, free to change.

* :mod:`~adpue_tf._internal.checks`: one checker per argument rule (bool,
  int, probability, initial guess, ``from_logits`` resolution, risk options).
* :mod:`~adpue_tf._internal.convention`: the one logits/probabilities check of
  a model or a function.
* :mod:`~adpue_tf._internal.guards`: the checks on model outputs and loss
  values, eager and in a graph (:func:`~adpue_tf._internal.guards.to_logits`).
* :mod:`~adpue_tf._internal.numeric`: the package's one NumPy sigmoid.

The experiments wing and the benchmarks never import from here; what they
share with users is public (see ``docs/architecture.md``).
"""
