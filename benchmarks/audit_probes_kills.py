"""The audit's probes of concurrency and kills: readers and writers racing, processes killed part-way."""

from __future__ import annotations

from benchmarks.audit_runner import Probe


def kill_probes() -> list[Probe]:
    """Every probe of concurrency and kills."""
    return []


__all__ = ["kill_probes"]
