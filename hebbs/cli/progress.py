"""The index progress line: on a terminal, one line per stage redrawn in place; elsewhere nothing.

A rate is shown only once it was measured: after the stage's first report, at least one more batch
done and MEASURED_SECONDS elapsed. A stage that ends faster than that (parsing a few small files)
shows its count and how long it took, never a rate computed from a microsecond.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TextIO

STAGES = {"parse": ("parsing", "files"), "embed": ("embedding", "sections"), "check": ("checking", "pairs"),
          "reembed": ("embedding", "memories"), "switch": ("switching", "memories")}
BAR_WIDTH = 24
REDRAW_SECONDS = 0.1
MEASURED_SECONDS = 0.5


def duration(seconds: float) -> str:
    """42s, 3m05s, 1h02m: what a person reads at a glance."""
    whole = max(0, round(seconds))
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    return f"{whole // 3600}h{whole % 3600 // 60:02d}m"


class ProgressBar:
    """Draws index progress reports (hebbs.notes.indexer.Progress, or their dicts' attributes) on a
    terminal; `enabled` False (piped, --format json) draws nothing."""

    def __init__(self, stream: TextIO, enabled: bool, clock: Callable[[], float] = time.monotonic) -> None:
        self.stream = stream
        self.enabled = enabled
        self._clock = clock
        self._stage: str | None = None
        self._started = 0.0
        self._first_done = 0
        self._drawn = 0.0
        self._width = 0

    def __call__(self, report: Any) -> None:
        if not self.enabled:
            return
        now = self._clock()
        if report.stage != self._stage:
            self.close()
            # The first report of a stage may arrive late (the daemon sends the newest it has): the rate
            # counts from it, not from zero.
            self._stage, self._started, self._first_done = report.stage, now, report.done
        elif now - self._drawn < REDRAW_SECONDS and report.done < report.total:
            return
        self._drawn = now
        self._draw(self.line(report, now - self._started))

    def line(self, report: Any, elapsed: float) -> str:
        label, unit = STAGES.get(report.stage, (report.stage, "items"))
        total = max(report.total, 1)
        filled = int(BAR_WIDTH * min(report.done, total) / total)
        measured = report.done - self._first_done
        rate = measured / elapsed if measured > 0 and elapsed >= MEASURED_SECONDS else None
        pace = "" if rate is None else (f"  {rate:.1f}/s" if rate < 10 else f"  {rate:.0f}/s")
        if report.done >= report.total:
            tail = f"{pace}  in {duration(elapsed)}"
        elif rate is None:
            tail = "  ETA after the first batch"
        else:
            tail = f"{pace}  ETA {duration((report.total - report.done) / rate)}"
        return f"{label:<10}[{'#' * filled}{'.' * (BAR_WIDTH - filled)}] {report.done}/{report.total} {unit}{tail}"

    def _draw(self, text: str) -> None:
        # Padded to the longest line drawn in this stage so a shorter one leaves no stale characters.
        self._width = max(self._width, len(text))
        self.stream.write("\r" + text.ljust(self._width))
        self.stream.flush()

    def close(self) -> None:
        if self.enabled and self._stage is not None:
            self.stream.write("\n")
            self.stream.flush()
            self._stage = None
            self._width = 0
