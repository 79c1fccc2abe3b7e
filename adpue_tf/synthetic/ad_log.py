"""A simulated ad impression log with known truth, written as TFRecord shards.

Each row is an ad request (user, item, campaign, context, device) with its
true ``p(y=1|x)`` and ``θ(e=1|x)``: a logging policy shows what it expects
users to like, so exposure is strongly biased yet ignorable. The PU log keeps
``W``, the exposure log ``E``, the evaluation set ``Y``. The model, the
policies and the files: ``docs/api/synthetic.md``.

Example:
    >>> sim = AdLogSimulator(AdLogConfig(n_users=50, n_items=20), seed=0)
    >>> rows = sim.sample(1000, seed=1)
    >>> sorted(rows.features), rows.features["context"].shape
    (['campaign_id', 'context', 'device', 'item_id', 'user_id'], (1000, 4))
    >>> bool(((rows.e == 0) | (rows.e == 1)).all()), bool((rows.w <= rows.e).all())
    (True, True)
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import tensorflow as tf

from adpue_tf._internal.checks import check_int, check_probability
from adpue_tf._internal.numeric import sigmoid

__all__ = ["AdLogConfig", "AdLogRows", "AdLogSimulator", "read_ad_log_meta", "write_ad_log"]

#: Devices of the simulated requests, with their effect on the conversion logit.
DEVICES = ("android", "ios", "web")
_DEVICE_BIAS = np.array([0.0, 0.3, -0.3])
#: Version of the file layout written by :func:`write_ad_log`.
FORMAT = "adpue_tf.ad_log/1"
#: Logging policies: ``θ`` as a function of the policy score ``z_e``.
POLICIES = {"logistic": sigmoid,
            "cloglog": lambda z: -np.expm1(-np.exp(np.minimum(z, 50.0)))}
#: Requests drawn (from their own seed) to set the intercept of ``base_rate``.
BASE_RATE_ROWS = 200_000


@dataclasses.dataclass(frozen=True)
class AdLogConfig:
    """Sizes and strengths of the simulated log.

    Attributes:
        n_users, n_items, n_campaigns: id vocabularies (items belong to campaigns).
        factors: dimension of the user and item latent factors.
        context_dim: length of the ``context`` vector.
        conversion_intercept: ``y0``, the intercept of the conversion logit.
        exposure_intercept: ``e0``, the intercept of the logging policy.
        targeting: ``λ``, how much the policy follows the users' taste ``u·v``.
        rare_item_share: share of items the policy almost never shows.
        rare_item_score: ``s_item`` of those items (very negative).
        policy: ``"logistic"`` (``θ = σ(z_e)``) or ``"cloglog"`` (``θ = 1 - exp(-exp(z_e))``).
        base_rate: target mean ``p(y=1|x)`` in (0, 1), setting the conversion
            intercept (``conversion_intercept`` is then ignored); None: keep ``y0``.

    Example:
        >>> AdLogConfig(policy="cloglog", base_rate=0.1).n_items
        200
    """

    n_users: int = 1000
    n_items: int = 200
    n_campaigns: int = 20
    factors: int = 4
    context_dim: int = 4
    conversion_intercept: float = -1.0
    exposure_intercept: float = -0.5
    targeting: float = 1.0
    rare_item_share: float = 0.2
    rare_item_score: float = -4.0
    policy: str = "logistic"
    base_rate: float | None = None

    def __post_init__(self) -> None:
        for name in ("n_users", "n_items", "n_campaigns", "factors", "context_dim"):
            check_int(name, getattr(self, name), 1)
        if self.n_campaigns > self.n_items:
            raise ValueError(f"`n_campaigns` ({self.n_campaigns}) must not exceed "
                             f"`n_items` ({self.n_items}): every campaign has an item.")
        for name in ("conversion_intercept", "exposure_intercept", "targeting",
                     "rare_item_score"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or \
                    not np.isfinite(value):
                raise ValueError(f"`{name}` must be a finite number, got {value!r}.")
        check_probability("rare_item_share", self.rare_item_share, interval="[0, 1)")
        if self.policy not in POLICIES:
            raise ValueError(f"`policy` must be one of {list(POLICIES)}, got {self.policy!r}.")
        if self.base_rate is not None:
            check_probability("base_rate", self.base_rate, interval="(0, 1)")


@dataclasses.dataclass(frozen=True)
class AdLogRows:
    """Sampled requests: features and every label with its true probability.

    Attributes:
        features: ``user_id``, ``item_id``, ``campaign_id`` (int64 ``(n,)``),
            ``device`` (bytes ``(n,)``), ``context`` (float32 ``(n, context_dim)``).
        p_y: true ``p(y=1|x)``. theta: true ``θ(e=1|x)``.
        y, e, w: draws of ``Y``, ``E`` (independent given ``x``) and ``W = E·Y``.
    """

    features: dict[str, np.ndarray]
    p_y: np.ndarray
    theta: np.ndarray
    y: np.ndarray
    e: np.ndarray
    w: np.ndarray

    def __len__(self) -> int:
        return len(self.p_y)


class AdLogSimulator:
    """The generator: fixed parameters drawn from ``seed``, rows drawn on demand.

    Args:
        config: sizes and strengths (default :class:`AdLogConfig`).
        seed: seed of the parameters (factors, biases, policy scores).

    Attributes:
        user_factors: ``(n_users, factors)``.
        item_factors: ``(n_items, factors)``.
        item_bias, item_campaign, campaign_bias, context_weights: the item,
            campaign and context parameters.
        item_score: the policy's ``s_item``.
        context_policy: the policy's ``h``.
        conversion_intercept: the ``y0`` used (set by ``base_rate`` when given).

    Example:
        >>> sim = AdLogSimulator(seed=0)
        >>> rows = sim.sample(20_000, seed=0)
        >>> bool(np.allclose(sim.p_y(rows.features), rows.p_y))
        True
    """

    def __init__(self, config: AdLogConfig | None = None, *, seed: int = 0) -> None:
        self.config = config if config is not None else AdLogConfig()
        if not isinstance(self.config, AdLogConfig):
            raise TypeError(f"`config` must be an AdLogConfig, got {type(config).__name__}.")
        self.seed = check_int("seed", seed, 0)
        c, rng = self.config, np.random.default_rng(self.seed)
        scale = 1.6 / np.sqrt(c.factors)  # u·v has standard deviation about 1.3
        self.user_factors = rng.normal(0.0, np.sqrt(scale), (c.n_users, c.factors))
        self.item_factors = rng.normal(0.0, np.sqrt(scale), (c.n_items, c.factors))
        self.item_bias = rng.normal(0.0, 0.5, c.n_items)
        # every campaign gets at least one item
        self.item_campaign = np.concatenate([np.arange(c.n_campaigns), rng.integers(
            0, c.n_campaigns, c.n_items - c.n_campaigns)])[rng.permutation(c.n_items)]
        self.campaign_bias = rng.normal(0.0, 0.3, c.n_campaigns)
        self.context_weights = rng.normal(0.0, 0.5, c.context_dim)
        self.context_policy = rng.normal(0.0, 0.3, c.context_dim)
        rare = rng.random(c.n_items) < c.rare_item_share
        self.item_score = np.where(rare, c.rare_item_score, rng.normal(1.0, 0.5, c.n_items))
        self.conversion_intercept = self._intercept()

    def _parts(self, features: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """(conversion logit, policy logit) of each row."""
        u = np.asarray(features["user_id"], np.int64)
        i = np.asarray(features["item_id"], np.int64)
        ctx = np.asarray(features["context"], np.float64)
        device = np.asarray(features["device"])
        dev = np.array([DEVICES.index(d.decode() if isinstance(d, bytes) else str(d))
                        for d in device.ravel()], np.int64)
        taste = np.einsum("nk,nk->n", self.user_factors[u], self.item_factors[i])
        z_y = (self.conversion_intercept + taste + self.item_bias[i]
               + self.campaign_bias[self.item_campaign[i]] + ctx @ self.context_weights
               + _DEVICE_BIAS[dev])
        z_e = (self.config.exposure_intercept + self.item_score[i]
               + self.config.targeting * taste + ctx @ self.context_policy)
        return z_y, z_e

    def p_y(self, features: dict[str, np.ndarray]) -> np.ndarray:
        """True ``p(y=1|x)`` of rows given by their features."""
        return sigmoid(self._parts(features)[0])

    def theta(self, features: dict[str, np.ndarray]) -> np.ndarray:
        """True ``θ(e=1|x)`` (the logging policy) of rows given by their features."""
        return POLICIES[self.config.policy](self._parts(features)[1])

    def sample(self, n: int, *, seed: int) -> AdLogRows:
        """Draw ``n`` requests and their labels (reproducible from ``seed``).

        Args:
            n: rows, >= 1.
            seed: seed of the rows (independent of the parameters' seed).

        Returns:
            The rows, with every label and true probability.
        """
        n = check_int("n", n, 1)
        rng = np.random.default_rng([self.seed, check_int("seed", seed, 0)])
        features = self._features(rng, n)
        z_y, z_e = self._parts(features)
        p_y, theta = sigmoid(z_y), POLICIES[self.config.policy](z_e)
        y = (rng.random(n) < p_y).astype(np.int64)
        e = (rng.random(n) < theta).astype(np.int64)
        return AdLogRows(features, p_y, theta, y, e, y * e)

    def _features(self, rng: np.random.Generator, n: int) -> dict[str, np.ndarray]:
        """``n`` requests' features drawn from ``rng``."""
        c = self.config
        item = rng.integers(0, c.n_items, n)
        return {
            "user_id": rng.integers(0, c.n_users, n).astype(np.int64),
            "item_id": item.astype(np.int64),
            "campaign_id": self.item_campaign[item].astype(np.int64),
            "device": np.array(DEVICES, dtype=object)[rng.integers(0, len(DEVICES), n)]
            .astype(bytes),
            "context": rng.normal(0.0, 1.0, (n, c.context_dim)).astype(np.float32),
        }

    def _intercept(self) -> float:
        """``y0``, or by bisection the one whose mean ``p(y=1|x)`` is ``base_rate``."""
        c = self.config
        if c.base_rate is None:
            return float(c.conversion_intercept)
        self.conversion_intercept = 0.0  # _parts' z_y without an intercept
        z = self._parts(self._features(np.random.default_rng([self.seed, 2**31 - 1]),
                                       BASE_RATE_ROWS))[0]
        lo, hi = -30.0 - float(z.max()), 30.0 - float(z.min())
        for _ in range(100):  # the mean rises with the intercept
            mid = 0.5 * (lo + hi)
            lo, hi = (mid, hi) if sigmoid(z + mid).mean() < c.base_rate else (lo, mid)
        return 0.5 * (lo + hi)


def _feature(values: Any) -> tf.train.Feature:
    arr = np.atleast_1d(values)
    if arr.dtype.kind in "iub":
        return tf.train.Feature(int64_list=tf.train.Int64List(value=arr.astype(np.int64)))
    if arr.dtype.kind == "f":
        return tf.train.Feature(float_list=tf.train.FloatList(value=arr.astype(np.float32)))
    return tf.train.Feature(bytes_list=tf.train.BytesList(value=[bytes(v) for v in arr]))


def _write_file(sim: AdLogSimulator, seed: int, chunk: int, path: str, label: str | None,
                size: int, stream: int) -> None:
    """Write one file of ``size`` rows, chunk ``j`` drawn with row seed ``stream + j + 1``."""
    with tf.io.TFRecordWriter(path) as writer:
        for start in range(0, size, chunk):
            stream += 1
            batch = sim.sample(min(chunk, size - start), seed=seed * 1_000_003 + stream)
            labels = ({label: getattr(batch, label)} if label else
                      {"y": batch.y, "p_y": batch.p_y, "theta": batch.theta})
            names = sorted(batch.features)
            for r in range(len(batch)):
                feats = {n: _feature(batch.features[n][r]) for n in names}
                feats.update({n: _feature(v[r]) for n, v in labels.items()})
                writer.write(tf.train.Example(
                    features=tf.train.Features(feature=feats)).SerializeToString())


def write_ad_log(out_dir: str | os.PathLike, *, rows: int, shards: int = 4, seed: int = 0,
                 eval_rows: int = 20_000, exposure_share: float = 0.5,
                 config: AdLogConfig | None = None, chunk: int = 100_000,
                 workers: int = 1) -> dict[str, Any]:
    """Simulate an ad log and write it as TFRecord shards of ``tf.Example``.

    ``rows`` logged requests are split between the PU log (``W`` kept, share
    ``1 - exposure_share``) and the exposure log (``E`` kept); each log has
    ``shards`` files ``part-SSSSS-of-KKKKK.tfrecord``. The evaluation set keeps
    ``y``, ``p_y`` and ``theta``. ``meta.json`` records the generator, the seed,
    the counts and the files. Rows are generated ``chunk`` at a time.

    Args:
        out_dir: a new or empty directory (created); nothing is overwritten.
        rows: logged rows in all (PU + exposure), >= 2.
        shards: files per log, >= 1.
        seed: seed of the generator's parameters and of every row.
        eval_rows: rows of the evaluation set, >= 1.
        exposure_share: share of the logged rows in the exposure log, in (0, 1).
        config: the generator's sizes and strengths.
        chunk: rows generated at a time (memory stays flat in ``rows``).
        workers: processes writing files in parallel (each file's rows have
            their own seeds, so the files hold the same rows for any ``workers``).

    Returns:
        The contents of ``meta.json``.

    Raises:
        ValueError: on bad sizes, or if ``out_dir`` exists and is not empty.

    Example:
        >>> import tempfile
        >>> meta = write_ad_log(tempfile.mkdtemp() + "/log", rows=200, shards=2, eval_rows=50)
        >>> meta["counts"], len(meta["files"]["pu"])
        ({'pu': 100, 'exposure': 100, 'eval': 50}, 2)
    """
    rows = check_int("rows", rows, 2)
    shards = check_int("shards", shards, 1)
    eval_rows = check_int("eval_rows", eval_rows, 1)
    chunk = check_int("chunk", chunk, 1)
    workers = check_int("workers", workers, 1)
    check_probability("exposure_share", exposure_share, interval="(0, 1)")
    out = Path(out_dir)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ValueError(f"`out_dir` {str(out)!r} exists and is not an empty directory; "
                         "choose a new one (nothing is overwritten).")
    sim = AdLogSimulator(config, seed=seed)
    n_e = max(1, min(rows - 1, int(round(rows * float(exposure_share)))))
    counts = {"pu": rows - n_e, "exposure": n_e, "eval": eval_rows}
    parts = {"pu": ("w", shards), "exposure": ("e", shards), "eval": (None, 1)}
    files: dict[str, list[str]] = {}
    jobs = []
    stream = 0  # every chunk of every file gets its own row seed
    for part, (label, k) in parts.items():
        (out / part).mkdir(parents=True, exist_ok=True)
        files[part] = []
        sizes = np.diff(np.linspace(0, counts[part], k + 1).round().astype(int))
        for s, size in enumerate(sizes):
            path = out / part / f"part-{s:05d}-of-{k:05d}.tfrecord"
            jobs.append((str(path), label, int(size), stream))
            stream += -(-int(size) // chunk)
            files[part].append(str(path.relative_to(out)))
    if workers == 1:
        for job in jobs:
            _write_file(sim, seed, chunk, *job)
    else:
        import concurrent.futures
        import multiprocessing

        # spawn: a forked TensorFlow runtime is not safe in the children
        with concurrent.futures.ProcessPoolExecutor(
                min(workers, len(jobs)), mp_context=multiprocessing.get_context("spawn")) as pool:
            for done in [pool.submit(_write_file, sim, seed, chunk, *job) for job in jobs]:
                done.result()
    c = sim.config
    meta = {
        "format": FORMAT,
        "generator": "adpue_tf.synthetic.ad_log.AdLogSimulator",
        "seed": sim.seed,
        "config": dataclasses.asdict(c),
        "policy": c.policy,
        "conversion_intercept": sim.conversion_intercept,
        "counts": counts,
        "files": files,
        "features": {
            "user_id": {"dtype": "int64", "shape": [], "vocabulary": c.n_users},
            "item_id": {"dtype": "int64", "shape": [], "vocabulary": c.n_items},
            "campaign_id": {"dtype": "int64", "shape": [], "vocabulary": c.n_campaigns},
            "device": {"dtype": "string", "shape": [], "vocabulary": list(DEVICES)},
            "context": {"dtype": "float32", "shape": [c.context_dim]},
        },
        "labels": {"pu": {"w": "int64"}, "exposure": {"e": "int64"},
                   "eval": {"y": "int64", "p_y": "float32", "theta": "float32"}},
    }
    (out / "meta.json").write_text(json.dumps(meta, indent=2))
    return meta


def read_ad_log_meta(log_dir: str | os.PathLike) -> dict[str, Any]:
    """The ``meta.json`` of a log written by :func:`write_ad_log`, with absolute file paths.

    Raises:
        FileNotFoundError: naming the directory when it holds no ``meta.json``.
        ValueError: when the file is not valid JSON, not an ad log of this
            format, or lists no files.
    """
    path = Path(log_dir) / "meta.json"
    if not path.is_file():
        raise FileNotFoundError(f"No ad log at {str(log_dir)!r}: {path} does not exist "
                                "(write one with `adpue-tf simulate-logs`).")
    try:
        meta = json.loads(path.read_text(encoding="utf-8-sig"))  # a mark from an editor: dropped
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ValueError(f"{path} is not valid JSON ({err}); write the log again with "
                         "`adpue-tf simulate-logs`.") from None
    found = meta.get("format") if isinstance(meta, dict) else type(meta).__name__
    if found != FORMAT:
        raise ValueError(f"{path} is not an ad log of format {FORMAT!r} (format: {found!r}).")
    files = meta.get("files")
    if not isinstance(files, dict) or not all(
            isinstance(v, list) and all(isinstance(f, str) for f in v) for v in files.values()):
        raise ValueError(f"{path} lists no files (its `files` must map each part to a list of "
                         "file names); write the log again with `adpue-tf simulate-logs`.")
    meta["files"] = {k: [str(Path(log_dir) / f) for f in v] for k, v in files.items()}
    return meta
