"""A family of simulated ad logs that differ where real logs differ, each with known truth.

:class:`AdFamilyConfig` sets one log: id cardinality (rows per id), base rate,
the share of rows the logging policy almost never shows (``θ < 0.05``), the
sign and strength of the link between exposure and conversion, the mechanisms
of ``p(y=1|x)`` and ``θ(e=1|x)`` (logistic, complementary log-log, thresholds;
a policy on a feature ``p`` does not read) and how much of ``p`` is
interactions. :func:`ad_log_family` names a grid of them, each with the net a
benchmark should train on it. The formulas: ``docs/api/synthetic.md``.

Example:
    >>> sim = AdFamilySimulator(ad_log_family()["reference"].config, seed=0)
    >>> rows = sim.sample(2000, seed=1)
    >>> sorted(rows.features)
    ['category_id', 'context', 'device', 'item_id', 'user_id']
    >>> bool((rows.w == rows.e * rows.y).all()), rows.features["context"].shape
    (True, (2000, 4))
"""

from __future__ import annotations

import dataclasses
import numbers
from typing import Any

import numpy as np

from adpue_tf._internal.checks import check_int, check_probability
from adpue_tf._internal.numeric import sigmoid
from adpue_tf.synthetic.ad_log import AdLogRows

__all__ = ["AdFamilyConfig", "AdFamilyLog", "AdFamilySimulator", "ad_log_family",
           "LOW_THETA"]

#: Devices of the requests and their effect on the conversion logit.
DEVICES = ("android", "ios", "web")
_DEVICE_BIAS = np.array([0.0, 0.3, -0.3])
#: ``θ`` below this marks a row the policy almost never shows.
LOW_THETA = 0.05
#: Mechanisms of ``p(y=1|x)`` and of ``θ(e=1|x)`` on the shown rows.
CONVERSIONS = ("logistic", "cloglog", "threshold")
POLICIES = ("logistic", "cloglog", "threshold")
#: What the policy's own score reads: ``"ids"`` (item, device and the last
#: context feature), ``"other"`` (only the last context feature, which ``p`` never reads).
POLICY_READS = ("ids", "other")
#: The nets a benchmark trains on a log (:attr:`AdFamilyLog.net`).
NETS = ("embedding", "linear")
#: Reference rows (drawn from their own seed) that set the intercepts, the
#: standardisation of the scores and the cut of the rarely shown rows.
REFERENCE_ROWS = 100_000
_FACTORS = 4
_LINK = {"logistic": sigmoid,
         "cloglog": lambda z: -np.expm1(-np.exp(np.minimum(z, 50.0))),
         "threshold": lambda z: 0.05 + 0.9 * (np.asarray(z) > 0.0)}


def _number(name: str, value: Any, low: float, high: float, interval: str) -> float:
    """``value`` as a float inside ``interval`` (``low``/``high`` with its brackets)."""
    message = f"`{name}` must be a number in {interval}, got {value!r}."
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(message)
    v = float(value)
    inside = ((low <= v) if interval[0] == "[" else (low < v)) and \
        ((v <= high) if interval[-1] == "]" else (v < high))
    if not inside:  # NaN is inside no interval
        raise ValueError(message)
    return v


def _choice(name: str, value: Any, options: tuple[str, ...]) -> str:
    if not isinstance(value, str):
        raise TypeError(f"`{name}` must be a str, one of {list(options)}, got {value!r}.")
    if value not in options:
        raise ValueError(f"`{name}` must be one of {list(options)}, got {value!r}.")
    return value


@dataclasses.dataclass(frozen=True)
class AdFamilyConfig:
    """One log of the family: sizes, base rate, exposure skew, link and mechanisms.

    Attributes:
        n_users, n_items, n_categories: id vocabularies (every category has an item).
        context_dim: float context features, >= 3; ``p`` reads all but the last.
        base_rate: mean ``p(y=1|x)``, in (0, 1) (sets the conversion intercept).
        rare_share: share of rows the policy almost never shows, ``θ < 0.05``
            (those whose policy score is below its ``rare_share`` quantile), in [0, 0.9].
        link: correlation of the policy score with the standardised conversion
            score, in [-1, 1]: > 0 shows likely converters, < 0 unlikely ones, 0 neither.
        shown_rate: mean ``θ`` over the rows not rarely shown, in [0.1, 0.9].
        sharpness: slope of ``θ`` in the policy score, > 0.
        conversion: mechanism of ``p``: ``"logistic"``, ``"cloglog"`` (its
            upper tail rounds to ``p = 1`` on a few rows in 10,000) or
            ``"threshold"`` (three levels of the conversion score).
        policy: mechanism of ``θ`` on the shown rows, as ``conversion``
            (``"threshold"``: two levels, 0.095 and 0.905).
        policy_reads: the policy's own score: ``"ids"`` (item, device, last
            context feature) or ``"other"`` (only the last context feature).
        interactions: weight, >= 0, of the user·item taste and of the product
            of the first two context features in ``p``'s logit (0: ``p`` additive).

    Raises:
        TypeError, ValueError: on a bad attribute, naming it.

    Example:
        >>> AdFamilyConfig(base_rate=0.02, rare_share=0.4).link
        0.6
    """

    n_users: int = 2000
    n_items: int = 300
    n_categories: int = 12
    context_dim: int = 4
    base_rate: float = 0.1
    rare_share: float = 0.25
    link: float = 0.6
    shown_rate: float = 0.5
    sharpness: float = 1.5
    conversion: str = "logistic"
    policy: str = "logistic"
    policy_reads: str = "ids"
    interactions: float = 1.0

    def __post_init__(self) -> None:
        for name in ("n_users", "n_items", "n_categories"):
            check_int(name, getattr(self, name), 1)
        check_int("context_dim", self.context_dim, 3)
        if self.n_categories > self.n_items:
            raise ValueError(f"`n_categories` ({self.n_categories}) must not exceed "
                             f"`n_items` ({self.n_items}): every category has an item.")
        check_probability("base_rate", self.base_rate, interval="(0, 1)")
        _number("rare_share", self.rare_share, 0.0, 0.9, "[0, 0.9]")
        _number("link", self.link, -1.0, 1.0, "[-1, 1]")
        _number("shown_rate", self.shown_rate, 0.1, 0.9, "[0.1, 0.9]")
        _number("sharpness", self.sharpness, 0.0, np.inf, "(0, inf)")
        _number("interactions", self.interactions, 0.0, np.inf, "[0, inf)")
        _choice("conversion", self.conversion, CONVERSIONS)
        _choice("policy", self.policy, POLICIES)
        _choice("policy_reads", self.policy_reads, POLICY_READS)


@dataclasses.dataclass(frozen=True)
class AdFamilyLog:
    """A named log of the family: its config, the net to train on it, what it varies.

    Attributes:
        name: the log's name in :func:`ad_log_family`.
        config: the simulator's settings.
        net: ``"embedding"`` (embeddings + MLP, able to fit ``p``) or
            ``"linear"`` (a logit additive in the ids and linear in the context).
        varies: one line: the axis and the value this log sets.

    Example:
        >>> AdFamilyLog("x", AdFamilyConfig(), "linear", "a linear net").net
        'linear'
    """

    name: str
    config: AdFamilyConfig
    net: str = "embedding"
    varies: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise TypeError(f"`name` must be a non-empty str, got {self.name!r}.")
        if not isinstance(self.config, AdFamilyConfig):
            raise TypeError(f"`config` must be an AdFamilyConfig, got "
                            f"{type(self.config).__name__}.")
        _choice("net", self.net, NETS)
        if not isinstance(self.varies, str):
            raise TypeError(f"`varies` must be a str, got {self.varies!r}.")


def ad_log_family() -> dict[str, AdFamilyLog]:
    """The named logs: ``reference`` and, per axis, its extremes (one axis changed each).

    ``reference``: 2,000 users and 300 items, a 10 % base rate, 25 % of rows
    almost never shown, a policy that shows likely converters (link 0.6),
    logistic ``p`` and ``θ``, an embedding net: the setting where ``fit_pue``
    was seen to lose to a constant.

    Returns:
        ``{name: AdFamilyLog}`` in a fixed order.

    Example:
        >>> family = ad_log_family()
        >>> len(family) >= 12, family["rare_0"].config.rare_share
        (True, 0.0)
    """
    ref = AdFamilyConfig()
    rows: list[tuple[str, dict[str, Any], str, str]] = [
        ("reference", {}, "embedding", "the reference: 2k users, 10 % base, 25 % rarely shown, "
         "link +0.6, logistic"),
        ("users_15k", {"n_users": 15_000, "n_items": 1500},
         "embedding", "ids: 15k users, 1.5k items (about 2 rows per user in 30k rows)"),
        ("users_500", {"n_users": 500, "n_items": 60, "n_categories": 6},
         "embedding", "ids: 500 users, 60 items (about 60 rows per user in 30k rows)"),
        ("base_1pct", {"base_rate": 0.01}, "embedding", "base rate 1 %"),
        ("base_20pct", {"base_rate": 0.2}, "embedding", "base rate 20 %"),
        ("rare_0", {"rare_share": 0.0}, "embedding", "no row almost never shown"),
        ("rare_40", {"rare_share": 0.4}, "embedding", "40 % of rows almost never shown"),
        ("link_0", {"link": 0.0}, "embedding", "link 0: exposure independent of p"),
        ("link_negative", {"link": -0.6}, "embedding",
         "link -0.6: the policy shows unlikely converters"),
        ("cloglog", {"conversion": "cloglog", "policy": "cloglog"}, "embedding",
         "mechanism: complementary log-log p and θ"),
        ("threshold", {"conversion": "threshold", "policy": "threshold"}, "embedding",
         "mechanism: thresholds (p three levels, θ two)"),
        ("policy_other", {"link": 0.0, "policy_reads": "other"}, "embedding",
         "mechanism: policy on a context feature p does not read"),
        ("linear_net", {"interactions": 2.0}, "linear",
         "net too weak: linear net, p mostly user·item and context interactions"),
        ("linear_additive", {"interactions": 0.0}, "linear",
         "net right: linear net, p additive (no interactions)"),
    ]
    return {name: AdFamilyLog(name, dataclasses.replace(ref, **changes), net, varies)
            for name, changes, net, varies in rows}


class AdFamilySimulator:
    """The generator of one log: parameters drawn from ``seed``, rows drawn on demand.

    Args:
        config: the log's settings (default :class:`AdFamilyConfig`).
        seed: seed of the parameters (biases, factors, policy scores), >= 0.

    Attributes:
        conversion_intercept: ``y0``, set so that the mean ``p`` is ``base_rate``.
        exposure_intercept: ``e0``, set so that the shown rows' mean ``θ`` is ``shown_rate``.
        rare_cut: rows whose policy score is below it are almost never shown.

    Raises:
        TypeError: on a ``config`` that is not an :class:`AdFamilyConfig`.

    Example:
        >>> sim = AdFamilySimulator(AdFamilyConfig(n_users=50, n_items=20, n_categories=4))
        >>> rows = sim.sample(5000, seed=0)
        >>> bool(np.allclose(sim.p_y(rows.features), rows.p_y)), bool(rows.theta.max() < 1)
        (True, True)
    """

    def __init__(self, config: AdFamilyConfig | None = None, *, seed: int = 0) -> None:
        self.config = AdFamilyConfig() if config is None else config
        if not isinstance(self.config, AdFamilyConfig):
            raise TypeError(f"`config` must be an AdFamilyConfig, got {type(config).__name__}.")
        self.seed = check_int("seed", seed, 0)
        c, rng = self.config, np.random.default_rng([self.seed, 7])
        sd = np.sqrt(0.8 / np.sqrt(_FACTORS))  # u·v has standard deviation 0.8
        self.user_bias = rng.normal(0.0, 0.5, c.n_users)
        self.user_factors = rng.normal(0.0, sd, (c.n_users, _FACTORS))
        self.item_bias = rng.normal(0.0, 0.4, c.n_items)
        self.item_factors = rng.normal(0.0, sd, (c.n_items, _FACTORS))
        self.item_category = np.concatenate([np.arange(c.n_categories), rng.integers(
            0, c.n_categories, c.n_items - c.n_categories)])[rng.permutation(c.n_items)]
        self.category_bias = rng.normal(0.0, 0.3, c.n_categories)
        self.context_weights = rng.normal(0.0, 0.35, c.context_dim - 1)
        self.item_policy = rng.normal(0.0, 1.0, c.n_items)
        self.device_policy = rng.normal(0.0, 0.3, len(DEVICES))
        ref = self._features(np.random.default_rng([self.seed, 2**31 - 1]), REFERENCE_ROWS)
        s_y, s_o = self._raw(ref)
        self._scale = (float(s_y.mean()), float(s_y.std()), float(s_o.mean()), float(s_o.std()))
        s_e = self._policy_score(s_y, s_o)
        self.rare_cut = float(np.quantile(s_e, c.rare_share)) if c.rare_share > 0 else -np.inf
        self.conversion_intercept = _bisect(
            lambda y0: self._p(s_y, y0).mean(), c.base_rate)
        shown = s_e >= self.rare_cut
        self.exposure_intercept = _bisect(
            lambda e0: self._theta(s_e[shown], e0).mean(), c.shown_rate)

    def _raw(self, features: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """(conversion score without intercept, the policy's own score) of each row."""
        c = self.config
        u = np.asarray(features["user_id"], np.int64)
        i = np.asarray(features["item_id"], np.int64)
        ctx = np.asarray(features["context"], np.float64)
        dev = _device_index(features["device"])
        taste = np.einsum("nk,nk->n", self.user_factors[u], self.item_factors[i])
        s_y = (self.user_bias[u] + self.item_bias[i]
               + self.category_bias[self.item_category[i]] + ctx[:, :-1] @ self.context_weights
               + _DEVICE_BIAS[dev] + c.interactions * (taste + 0.5 * ctx[:, 0] * ctx[:, 1]))
        s_o = ctx[:, -1] if c.policy_reads == "other" else (
            self.item_policy[i] + self.device_policy[dev] + ctx[:, -1])
        return s_y, s_o

    def _policy_score(self, s_y: np.ndarray, s_o: np.ndarray) -> np.ndarray:
        """``link·ŝ_y + sqrt(1 - link²)·ŝ_o`` on the standardised scores."""
        my, sy, mo, so = self._scale
        link = self.config.link
        return (link * (s_y - my) / max(sy, 1e-12)
                + np.sqrt(1.0 - link**2) * (s_o - mo) / max(so, 1e-12))

    def _p(self, s_y: np.ndarray, y0: float) -> np.ndarray:
        c = self.config
        if c.conversion == "threshold":
            my, sy = self._scale[:2]
            z = (s_y - my) / max(sy, 1e-12)
            return sigmoid(y0 + 1.5 * ((z > -0.5).astype(float) + (z > 0.5)))
        return _LINK[c.conversion](y0 + s_y - self._scale[0])

    def _theta(self, s_e: np.ndarray, e0: float) -> np.ndarray:
        """``θ``: in [0.05, 0.95] above the cut, in [0.001, 0.03) below it."""
        c = self.config
        shown = LOW_THETA + 0.9 * _LINK[c.policy](e0 + c.sharpness * s_e)
        rare = np.maximum(0.001, 0.03 * np.exp(2.0 * np.minimum(s_e - self.rare_cut, 0.0)))
        return np.where(s_e >= self.rare_cut, shown, np.minimum(rare, 0.0299))

    def _truth(self, features: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        s_y, s_o = self._raw(features)
        return (self._p(s_y, self.conversion_intercept),
                self._theta(self._policy_score(s_y, s_o), self.exposure_intercept))

    def p_y(self, features: dict[str, np.ndarray]) -> np.ndarray:
        """True ``p(y=1|x)`` of rows given by their features (a dict as :meth:`sample` gives)."""
        return self._truth(features)[0]

    def theta(self, features: dict[str, np.ndarray]) -> np.ndarray:
        """True ``θ(e=1|x)`` (the logging policy) of rows given by their features."""
        return self._truth(features)[1]

    def sample(self, n: int, *, seed: int) -> AdLogRows:
        """Draw ``n`` requests and their labels, reproducible from ``seed``.

        Args:
            n: rows, >= 1.
            seed: seed of the rows, >= 0 (independent of the parameters' seed).

        Returns:
            :class:`AdLogRows` with features ``user_id``, ``item_id``,
            ``category_id`` (int64), ``device`` (bytes), ``context`` (float32
            ``(n, context_dim)``), the truth ``p_y``, ``theta`` and draws
            ``y``, ``e`` (independent given ``x``), ``w = e·y``.

        Raises:
            TypeError, ValueError: on a bad ``n`` or ``seed``, naming it.
        """
        n = check_int("n", n, 1)
        rng = np.random.default_rng([self.seed, check_int("seed", seed, 0)])
        features = self._features(rng, n)
        p_y, theta = self._truth(features)
        y = (rng.random(n) < p_y).astype(np.int64)
        e = (rng.random(n) < theta).astype(np.int64)
        return AdLogRows(features, p_y, theta, y, e, y * e)

    def _features(self, rng: np.random.Generator, n: int) -> dict[str, np.ndarray]:
        c = self.config
        item = rng.integers(0, c.n_items, n).astype(np.int64)
        return {
            "user_id": rng.integers(0, c.n_users, n).astype(np.int64),
            "item_id": item,
            "category_id": self.item_category[item].astype(np.int64),
            "device": np.array([d.encode() for d in DEVICES])[rng.integers(0, len(DEVICES), n)],
            "context": rng.normal(0.0, 1.0, (n, c.context_dim)).astype(np.float32),
        }


def _device_index(device: Any) -> np.ndarray:
    """The index in :data:`DEVICES` of each row's device (bytes or str)."""
    names = np.asarray(device).ravel()
    lookup = {d: k for k, d in enumerate(DEVICES)} | {d.encode(): k for k, d in enumerate(DEVICES)}
    try:
        return np.array([lookup[d] for d in names.tolist()], np.int64)
    except KeyError as err:
        raise ValueError(f"`device` must hold only {list(DEVICES)}, got {err.args[0]!r}.") \
            from None


def _bisect(mean: Any, target: float) -> float:
    """The intercept whose ``mean(intercept)`` (rising in it) is ``target``."""
    lo, hi = -40.0, 40.0
    for _ in range(80):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if mean(mid) < target else (lo, mid)
    return 0.5 * (lo + hi)
