"""One streamed epoch of the builders against plain parsing of the same TFRecord shards.

An ad log written by :func:`adpue_tf.synthetic.write_ad_log` (``--rows`` logged
rows, half PU and half exposure, ``--shards`` files each). Each round times, in
one process and in turn:

- ``parse``: every PU and exposure record with plain ``tf.data``
  (``TFRecordDataset`` -> ``batch(1024)`` -> ``tf.io.parse_example``), the
  speed the builders are measured against;
- ``epoch``: one epoch of ``adp.data.pue_dataset(read_tfrecords(pu),
  None, read_tfrecords(exposure), None, batch_size=1024, seed=0)``, the
  batches a streamed ``fit`` trains on (shuffled, labels packed, interleaved;
  built once, as ``fit`` builds it once for all its epochs);
- ``epoch_noshuffle``: the same with ``shuffle=False`` (what a validation pass reads).

Every pass is drawn in the graph (``Dataset.reduce``), as Keras's ``fit``
draws its batches: no Python per batch. Rows per second are the rows a pass
yields over its wall time; the ratio is
the median over rounds of ``epoch / parse`` within a round (paired, so a
busy machine weighs on both). Peak RSS is read after each variant (flat in
the log's size: the shuffle holds about ``SHUFFLE_ROWS`` rows).

Example:
    python -m benchmarks.stream_epoch --rows 400000 --shards 4 --rounds 5
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import time
from pathlib import Path
from typing import Any

import tensorflow as tf

import adpue_tf as adp
from benchmarks.ads_scale_log import feature_spec
from benchmarks.common import RESULTS, command_line, provenance_block, table

__all__ = ["main", "measure"]

_LABELS = {"pu": "w", "exposure": "e"}


def _log(args: argparse.Namespace) -> dict[str, Any]:
    out = Path(args.log_dir)
    if not (out / "meta.json").exists():
        adp.synthetic.write_ad_log(out, rows=args.rows, shards=args.shards, seed=args.seed,
                                   eval_rows=1000)
    meta = adp.synthetic.read_ad_log_meta(out)
    if sum(meta["counts"][p] for p in _LABELS) != args.rows:
        raise SystemExit(f"--log-dir {args.log_dir} holds another log (counts "
                         f"{meta['counts']}); give a new directory.")
    return meta


def _parse(meta: dict[str, Any]) -> int:
    n = 0
    for part, label in _LABELS.items():
        spec = feature_spec(meta, (label,))
        n += _rows(tf.data.TFRecordDataset(meta["files"][part]).batch(1024).map(
            lambda s, spec=spec: tf.io.parse_example(s, spec)))
    return n


def _rows(ds: tf.data.Dataset) -> int:
    """Every element of ``ds`` drawn in the graph, as Keras's ``fit`` draws its batches
    (``Dataset.reduce``: no Python per batch); the rows drawn."""
    return int(ds.reduce(tf.constant(0, tf.int64), lambda n, *el: n + tf.shape(
        tf.nest.flatten(el)[-1], out_type=tf.int64)[0]))


def _epoch(meta: dict[str, Any], shuffle: bool) -> tf.data.Dataset:
    """The builders' Dataset over the log (built once: an epoch is one pass over it)."""
    logs = [adp.data.read_tfrecords(meta["files"][part], feature_spec(meta, (label,)),
                                    labels=label, rows=meta["counts"][part])
            for part, label in _LABELS.items()]
    return adp.data.pue_dataset(logs[0], None, logs[1], None, batch_size=1024, seed=0,
                                shuffle=shuffle)


def measure(meta: dict[str, Any], rounds: int) -> dict[str, list[dict[str, float]]]:
    """``rounds`` rounds of every variant in turn (after one untimed warm-up round)."""
    built = {"epoch": _epoch(meta, True), "epoch_noshuffle": _epoch(meta, False)}
    runs = {"parse": lambda: _parse(meta), **{k: (lambda d=d: _rows(d)) for k, d in built.items()}}
    times: dict[str, list[dict[str, float]]] = {v: [] for v in runs}
    for r in range(rounds + 1):
        for name, run in runs.items():
            wall, cpu = time.perf_counter(), time.process_time()
            rows = run()
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            if r:
                times[name].append({"rows": rows, "wall": wall, "cpu": cpu,
                                    "rss_mb": resource.getrusage(
                                        resource.RUSAGE_SELF).ru_maxrss / 1024})
    return times


def report(args: argparse.Namespace, meta: dict[str, Any], times: dict[str, Any],
           argv: list[str] | None) -> str:
    prov, _ = provenance_block(command_line("benchmarks.stream_epoch", argv),
                               seeds=f"{args.seed} (the log), 0 (the builders' shuffle)")
    rows = []
    for name, runs in times.items():
        rate = [t["rows"] / t["wall"] for t in runs]
        ratio = [t["rows"] / t["wall"] / (p["rows"] / p["wall"])
                 for t, p in zip(runs, times["parse"])]
        rows.append([f"`{name}`", f"{statistics.median(rate):,.0f}",
                     f"{min(rate):,.0f}–{max(rate):,.0f}",
                     f"{statistics.median(ratio):.3f}",
                     f"{statistics.median(t['cpu'] / t['rows'] * 1e6 for t in runs):.2f}",
                     f"{runs[-1]['rss_mb']:,.0f}"])
    return "\n".join([
        "# One streamed epoch against plain parsing", "",
        f"An ad log of {args.rows:,} logged rows ({meta['counts']['pu']:,} PU + "
        f"{meta['counts']['exposure']:,} exposure, {args.shards} shards each), "
        f"{args.rounds} rounds after a warm-up; the builders shuffle whole blocks and "
        "windows of about 16,384 rows (`docs/api/data.md`). See "
        "`benchmarks/stream_epoch.py`.", "",
        prov,
        table(["variant", "rows/s (median)", "min–max", "paired ratio to parse",
               "CPU µs/row", "peak RSS (MB)"], rows), ""])


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.stream_epoch",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=400_000, help="logged rows in all")
    parser.add_argument("--shards", type=int, default=4, help="files per log")
    parser.add_argument("--seed", type=int, default=0, help="the log's seed")
    parser.add_argument("--rounds", type=int, default=5, help="timed rounds")
    parser.add_argument("--log-dir", default="/tmp/adpue_stream_epoch_log",
                        help="where the log is written (kept for later runs)")
    parser.add_argument("--out", default=str(RESULTS / "stream_epoch.md"))
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    meta = _log(args)
    times = measure(meta, args.rounds)
    text = report(args, meta, times, argv)
    Path(args.out).write_text(text)
    Path(args.out).with_suffix(".json").write_text(json.dumps(times, indent=1))
    print(text)


if __name__ == "__main__":
    main()
