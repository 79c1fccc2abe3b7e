"""Overlap: how much of the feature distribution the exposure log barely covers.

``p(y=1|x)`` is identified from ``W`` and ``E`` only where ``θ(e=1|x) > 0``
(SPEC: strong ignorability with positive exposure). Where ``θ`` is near zero,
few rows are ever exposed: every observable score weighs those rows by about
``θ`` (the exposure Brier score's expectation is ``E_x[θ·(f - p)²]``), so no
held-out score can tell whether a candidate's ``p`` there is right, and what
each candidate predicts there is its net's extrapolation from the exposed
rows. :func:`adpue_tf.fit_pue` reports the share of held-out rows with
``θ̂ <`` :data:`LOW_EXPOSURE` and warns when it reaches
:data:`WARN_SHARE` (measured in docs/guide/choosing-models.md, *Limits*).

Example:
    >>> low_exposure_share(np.array([0.01, 0.2, 0.5, 0.03]))
    0.5
    >>> overlap_warning(0.05) is None
    True
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from adpue_tf.recommend.candidates import THETA_FLOOR

__all__ = ["LOW_EXPOSURE", "WARN_SHARE", "WORSE_THAN_CONSTANT", "low_exposure_share",
           "overlap_warning", "unexposed_positives_warning", "warn_theta", "weak_theta_warning"]

#: ``θ̂`` below this counts as barely exposed (the floor on ``θ̂`` of Ratio and IPS).
LOW_EXPOSURE = THETA_FLOOR
#: fit_pue warns when at least this share of held-out rows is barely exposed. Lower than
#: the share that matters: a θ̂ of a net too simple for θ understates it (0.17 reported
#: against 0.44 true with a linear net, benchmarks/results/overlap.md); the default
#: synthetic set's ~10 % (θ̂ well specified, p extrapolated well) stays below it.
WARN_SHARE = 0.15


def low_exposure_share(theta: np.ndarray) -> float:
    """The share of rows whose exposure probability ``theta`` is below :data:`LOW_EXPOSURE`.

    Example:
        >>> low_exposure_share(np.array([0.04, 0.06]))
        0.5
    """
    theta = np.asarray(theta, np.float64)
    if theta.size == 0:
        raise ValueError("`theta` must hold at least one row.")
    return float(np.mean(theta < LOW_EXPOSURE))


def overlap_warning(share: float) -> str | None:
    """The warning :func:`adpue_tf.fit_pue` gives for ``share`` barely exposed rows, or None below :data:`WARN_SHARE`.

    Example:
        >>> overlap_warning(0.3).split(":")[0]
        'θ̂ < 0.05 on 30.0% of the held-out rows'
    """
    if not share >= WARN_SHARE:
        return None
    return (f"θ̂ < {LOW_EXPOSURE:g} on {100 * share:.1f}% of the held-out rows: few of such "
            "rows are ever exposed, so p(y=1|x) there is barely observed in W and E, every "
            "held-out score weighs them by about θ, and each candidate's estimate there is "
            "its net's extrapolation from the exposed rows (no score can check it). Read "
            "`.theta_calibration['low_exposure_share']`; collect exposures there (e.g. "
            "some random exposure) before trusting p(y=1|x) on those rows "
            "(docs/guide/choosing-models.md, Limits).")


def warn_theta(calibration: dict[str, float]) -> None:
    """Warn (``UserWarning``, at fit_pue's caller) for what ``calibration`` shows of ``θ̂``.

    Rows it barely exposes (:func:`overlap_warning`) and a ``θ̂`` clearly
    worse than the constant rate (:func:`weak_theta_warning`).
    ``calibration`` is :attr:`adpue_tf.recommend.PUEFit.theta_calibration`
    (empty when no ``θ̂`` was trained: nothing to say).

    Example:
        >>> warn_theta({"low_exposure_share": 0.01, "log_loss": 0.6,
        ...             "log_loss_constant": 0.69})  # nothing to warn about: silent
    """
    if not calibration:
        return
    for message in (overlap_warning(calibration["low_exposure_share"]),
                    weak_theta_warning(calibration)):
        if message is not None:
            warnings.warn(message, UserWarning, stacklevel=4)  # fit_pue, its decorator, the caller


#: ``θ̂``'s held-out log-loss above this multiple of the constant rate's: fit_pue warns
#: (:func:`weak_theta_warning`). Over-fitted ``θ̂`` seen so far were 3-6 times the constant's
#: (embedding nets on 3,000-20,000-row logs: 2.1-4.2 against 0.65); a linear ``θ̂`` on a
#: few hundred E rows is within 1.2 of it by chance (the breast-cancer demo: 0.81 against
#: 0.70, with fit_pue at 0.915 accuracy), which is no reason to warn.
WORSE_THAN_CONSTANT = 1.5


def weak_theta_warning(calibration: dict[str, float]) -> str | None:
    """A warning when ``θ̂`` predicts the held-out E rows clearly worse than a constant rate.

    ``θ̂`` keeps its best epoch, so this means it over-fitted the exposure log
    within its first epoch (a large net on few E rows, a long first epoch from
    ``min_steps``), and every candidate that reads ``θ̂`` inherits it.

    Args:
        calibration: :attr:`adpue_tf.recommend.PUEFit.theta_calibration`
            (empty: no ``θ̂``, nothing to say).

    Returns:
        The sentence to warn with, or None.

    Example:
        >>> weak_theta_warning({"log_loss": 0.81, "log_loss_constant": 0.70}) is None
        True
        >>> weak_theta_warning({"log_loss": 2.7, "log_loss_constant": 0.69})[:40]
        'θ̂ (build_net trained on E, the exposure'
    """
    if not calibration:
        return None
    loss, constant = calibration["log_loss"], calibration["log_loss_constant"]
    if not (math.isfinite(loss) and loss > WORSE_THAN_CONSTANT * constant):
        return None
    return (f"θ̂ (build_net trained on E, the exposure model) predicts the held-out E rows worse "
            f"than the constant exposure rate (log-loss {loss:.3f} against {constant:.3f}) even "
            "at its best epoch: it over-fits the exposure log, and every candidate that reads "
            "θ̂ (ratio, likelihood, ips, blend, ...) inherits that. Give more E rows, a smaller "
            "net, a lower `learning_rate` or fewer `min_steps` (docs/guide/choosing-models.md, "
            "Limits).")


def unexposed_positives_warning(w: np.ndarray, theta: np.ndarray) -> str | None:
    """A warning when ``W = 1`` is common where the exposure log (``θ̂``) almost never exposes.

    ``W = E·Y`` gives ``P(W=1|x) = θ(x)·p(x) <= θ(x)``: among rows with
    ``θ̂ <`` :data:`LOW_EXPOSURE`, the count of ``W = 1`` is at most about
    ``Σ θ̂`` over them. More than that plus four Poisson standard deviations
    (and 4 rows) means the PU log's positives sit where the exposure log
    shows nothing: logs of two populations or periods, or ``θ̂`` badly wrong.

    Args:
        w: ``W`` of the held-out PU rows.
        theta: ``θ̂`` of the same rows.

    Returns:
        The sentence to warn with, or None.

    Example:
        >>> unexposed_positives_warning(np.ones(50), np.full(50, 0.01)).split(";")[0]
        'W = 1 on 50 held-out PU rows where θ̂ < 0.05'
        >>> unexposed_positives_warning(np.zeros(50), np.full(50, 0.01)) is None
        True
    """
    low = np.asarray(theta, np.float64) < LOW_EXPOSURE
    count, bound = float(np.sum(np.asarray(w)[low])), float(np.sum(np.asarray(theta)[low]))
    if count <= bound + 4.0 * np.sqrt(bound) + 4.0:
        return None
    return (f"W = 1 on {count:.0f} held-out PU rows where θ̂ < {LOW_EXPOSURE:g}; W = E·Y allows "
            f"about {bound:.1f} there (W = 1 needs an exposure, which the exposure log almost "
            "never shows on such rows). The two logs look like different populations or "
            "periods, or θ̂ is badly wrong there: p(y=1|x) from them is not identified.")
