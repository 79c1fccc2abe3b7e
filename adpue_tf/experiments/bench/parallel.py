"""Table 1's settings in worker processes: :func:`run_settings` (``adpue-tf bench linear --jobs``).

A setting (data set, exposure rate, split ratio) depends only on its
arguments and seeds, so settings can run in separate processes and give the
same numbers as one after another. Most of a setting's time is Python
(tracing each ``fit_pue`` net), which one process runs on one core; ``jobs``
processes use ``jobs`` cores. Each worker gets ``cores // jobs`` TensorFlow
threads, and (Python >= 3.11) runs one group of settings only (``together``:
settings whose ``fit_pue`` nets have the same shapes, so the second trains in
the compiled models the first kept: one
:func:`adpue_tf.experiments.keep_compiled` block per process), so what a process
keeps (about 1.5 MB a ``fit_pue`` call, measured in
``benchmarks/results/linear.recommended.md``) goes with it.

Example:
    >>> done = []
    >>> run_settings([("a", {"value": 1})], 1, lambda key, out: done.append((key, out)),
    ...              work=lambda value: value + 1)
    >>> done
    [('a', 2)]
"""

from __future__ import annotations

import concurrent.futures
import multiprocessing
import os
import sys
from collections.abc import Callable, Hashable, Sequence
from typing import Any

__all__ = ["check_jobs", "run_settings", "run_table1_setting"]


def run_table1_setting(x: Any, y: Any, prior_y: float, cfg: Any, alpha: float,
                       **kwargs: Any) -> tuple[dict[str, tuple[list, list]], dict[str, Any]]:
    """``table1.run_setting(x, y, prior_y, cfg, alpha, **kwargs)``: accuracies as lists, details.

    Example:
        >>> callable(run_table1_setting)
        True
    """
    from adpue_tf.experiments import table1

    details: dict[str, Any] = {}
    res = table1.run_setting(x, y, prior_y, cfg, alpha, **kwargs, details=details)
    return {m: (i.tolist(), t.tolist()) for m, (i, t) in res.items()}, details


def check_jobs(jobs: Any) -> None:
    """Refuse a ``jobs`` that is not a positive int (``ValueError`` naming it).

    Example:
        >>> check_jobs(2)
    """
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise ValueError(f"`jobs` must be a positive int, got {jobs!r}.")


def _init_worker(threads: int) -> None:
    """Limit the worker's TensorFlow threads (before it runs any op)."""
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(threads)


def _run_group(work: Callable[..., Any], group: Sequence[dict[str, Any]]) -> list[Any]:
    """``work(**kwargs)`` for each ``kwargs`` of ``group``, in order, in one process.

    Inside one :func:`adpue_tf.experiments.keep_compiled` block: the ``fit_pue``
    calls of the group trace each training step once.
    """
    from adpue_tf.experiments import keep_compiled

    with keep_compiled():
        return [work(**kwargs) for kwargs in group]


def run_settings(tasks: Sequence[tuple[Any, dict[str, Any]]], jobs: int,
                 done: Callable[[Any, Any], None],
                 work: Callable[..., Any] = run_table1_setting,
                 together: Callable[[Any], Hashable] | None = None) -> None:
    """Run ``work(**kwargs)`` for every ``(key, kwargs)`` of ``tasks``; ``done(key, result)`` as each ends.

    Args:
        tasks: the settings, in the order to start them.
        jobs: processes at once; 1: in this process, in order.
        done: called in this process with each task's key and result, in
            the order they finish (with ``jobs=1``, the order of ``tasks``).
        work: a module-level function (it is sent to the workers by name).
        together: ``together(key)``: tasks with equal values run one after
            another in one worker process (in the order of ``tasks``; their
            ``done`` calls come when the last ends), a group started where
            its first task is; None: each task in its own process.

    Raises:
        ValueError: if ``jobs`` is not a positive int.

    An exception in a task (or Ctrl-C) cancels the tasks not started and is
    raised here; ``done`` has been called for every task that finished.
    """
    check_jobs(jobs)
    if jobs == 1 or len(tasks) <= 1:
        from adpue_tf.experiments import keep_compiled

        with keep_compiled():
            for key, kwargs in tasks:
                done(key, work(**kwargs))
        return
    jobs = min(jobs, len(tasks))
    threads = max(1, (os.cpu_count() or 1) // jobs)
    groups: dict[Hashable, list[tuple[Any, dict[str, Any]]]] = {}
    for i, (key, kwargs) in enumerate(tasks):
        groups.setdefault(i if together is None else together(key), []).append((key, kwargs))
    # A fresh process per group: what one keeps (see above) goes with it.
    fresh = {"max_tasks_per_child": 1} if sys.version_info >= (3, 11) else {}
    pool = concurrent.futures.ProcessPoolExecutor(
        max_workers=min(jobs, len(groups)), mp_context=multiprocessing.get_context("spawn"),
        initializer=_init_worker, initargs=(threads,), **fresh)
    try:
        futures = {pool.submit(_run_group, work, [kw for _, kw in group]):
                   [key for key, _ in group] for group in groups.values()}
        for future in concurrent.futures.as_completed(futures):
            for key, result in zip(futures[future], future.result()):
                done(key, result)
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown()
