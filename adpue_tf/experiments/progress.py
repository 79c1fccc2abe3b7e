"""A one-line progress display for long runs (demo and benchmarks).

Example:
    >>> import io
    >>> out = io.StringIO()
    >>> p = Progress(2, stream=out)
    >>> p.step("first"); p.step("second"); p.close()
    >>> "2/2" in out.getvalue()
    True
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

__all__ = ["Progress"]


class Progress:
    """Redraws ``[#####     ] k/n label  elapsed  ETA`` on one line (a line per step off a terminal).

    Args:
        total: number of steps.
        stream: where to draw (default stderr); None for silence.
        width: bar width in characters.
    """

    def __init__(self, total: int, *, stream: TextIO | None = sys.stderr, width: int = 24) -> None:
        self.total, self.done, self.width = max(int(total), 1), 0, width
        self.stream, self.start = stream, time.monotonic()

    def step(self, label: str = "") -> None:
        """Mark one step done and redraw."""
        self.done += 1
        if self.stream is None:
            return
        elapsed = time.monotonic() - self.start
        eta = elapsed / self.done * (self.total - self.done)
        bar = "#" * (self.width * self.done // self.total)
        line = (f"[{bar:<{self.width}}] {self.done}/{self.total} {label:<40.40} "
                f"{elapsed:6.0f}s  ETA {eta:5.0f}s")
        tty = getattr(self.stream, "isatty", lambda: False)()
        self.stream.write(f"\r{line}" if tty else f"{line.rstrip()}\n")
        self.stream.flush()

    def close(self) -> None:
        """End the line (on a terminal)."""
        if self.stream is not None and getattr(self.stream, "isatty", lambda: False)():
            self.stream.write("\n")
            self.stream.flush()
