"""The names of :func:`adpue_tf.fit_pue`'s candidates and how the composites are made of them.

The catalogue the stage trains (:mod:`adpue_tf.recommend.candidates`), the
rule chooses among (:mod:`adpue_tf.recommend.rule`) and the report lists:
which candidates exist and are tried by default, what each composite is the
mean of, which read ``θ̂``, and which are built from the held-out scores.

Example:
    >>> PREFERRED in CANDIDATES and set(BLEND_PARTS) < set(CANDIDATES)
    True
"""

from __future__ import annotations

__all__ = ["BLEND_PARTS", "CANDIDATES", "COMPOSITE_PARTS", "DEFAULT_CANDIDATES", "DERIVED",
           "NOT_AVERAGED", "PREDICTS_WITH_THETA", "PREFERRED", "THETA_FEATURE_NET",
           "THETA_FLOOR"]

#: Every candidate, in the order they are trained (the seed of each net is its index).
CANDIDATES = ("bce_w", "ratio", "elkan_noto", "ips", "likelihood", "brier", "exposed_pu",
              "adpue_direct", "adpue_rounds", "adpue_ratio", "average", "blend",
              "likelihood_theta")
#: What fit_pue tries by default: the candidates that won on some data in
#: benchmarks/results/selection.md (the others never did; name them to try them).
DEFAULT_CANDIDATES = ("bce_w", "ratio", "likelihood", "brier", "exposed_pu", "adpue_ratio",
                      "average", "blend", "likelihood_theta")
#: Candidates that are combinations of other trained models (no net of their own).
#: ``blend``'s four estimators fail in different ways (``likelihood`` when
#: ``θ̂`` is a wrong model, ``ratio`` when ``θ̂`` is noisy, ``brier`` never uses
#: ``θ̂`` but has the most variance, ``likelihood_theta`` extrapolates along
#: ``θ̂`` where few rows are exposed); their mean is fixed before any row is
#: seen. ``likelihood_theta`` joined the first three after it lowered the
#: blend's error on every setting of benchmarks/results/selection.md and
#: overlap.md and raised Table 1's accuracies on average
#: (docs/guide/choosing-models.md, *The blend's fourth part*).
BLEND_PARTS = ("likelihood", "brier", "ratio", "likelihood_theta")
#: The candidate fit_pue keeps unless the held-out rows show another one better
#: (:func:`adpue_tf.recommend.rule.choose`'s ``prefer``).
PREFERRED = "blend"
#: The nets each fixed composite candidate is made of (``average``'s pair is chosen later).
COMPOSITE_PARTS = {"ratio": ("bce_w", "theta"), "elkan_noto": ("bce_w",), "blend": BLEND_PARTS}
#: Candidates ``average`` never pairs (itself, and the fixed blend).
NOT_AVERAGED = ("average", "blend")
#: Candidates built from the held-out scores (``average``: the two best by them),
#: so their scores are biased low on those rows: never the reference of the
#: tolerance (:func:`adpue_tf.recommend.rule.choose`'s ``derived``).
DERIVED = ("average",)
#: Candidates whose estimate reads fit_pue's shared ``θ̂``: Ratio divides by it
#: (``q̂/θ̂``), ``likelihood_theta`` takes its logit as a feature. The likelihood
#: of ``W`` under ``σ(z)·θ̂`` cannot see the error a wrong ``θ̂`` puts in them
#: (and favoured ``likelihood_theta`` where a misspecified ``θ̂`` made it worse,
#: ``benchmarks/results/selection.md``), so it never prefers them to the best
#: by the Brier score (:func:`adpue_tf.recommend.rule.choose`).
PREDICTS_WITH_THETA = frozenset(
    [n for n, parts in COMPOSITE_PARTS.items() if "theta" in parts] + ["likelihood_theta"])
#: The key of ``likelihood_theta``'s own net (its model is that net and ``θ̂``).
THETA_FEATURE_NET = "likelihood_theta/net"
#: Floor on θ̂ in the Ratio estimate, and IPS's clip.
THETA_FLOOR = 0.05
