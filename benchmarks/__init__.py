"""The benchmarks: scripts run from the repository root as ``python -m benchmarks.<name>``.

They share :mod:`benchmarks.common` (machine description, Markdown tables,
the provenance block of every results file, the epoch clock) and use the
package's public names only. See ``benchmarks/README.md``.
"""
