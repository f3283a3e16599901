"""The daemon's log: size-capped and rotated, with repeated lines rate-limited and long ones cut.

A daemon in trouble tends to say the same thing over and over (a descriptor limit hit on every
accept, the same bad request from a looping client); unbounded, that filled 757 MB in five minutes.
Here a line repeated from the same place is written at most BURST times per WINDOW seconds, then
once more with the count of those left out; no record is longer than MAX_RECORD_CHARS (a client's
payload is never logged whole); and the file rotates at max_bytes, keeping BACKUPS old files.
"""

from __future__ import annotations

import logging
import logging.handlers
import os
import sys
import time
from pathlib import Path

DEFAULT_MAX_BYTES = 10 * 1024 * 1024
BACKUPS = 3
BURST = 10
WINDOW = 60.0
MAX_RECORD_CHARS = 8000
FORMAT = "%(asctime)s %(levelname)s [%(process)d] %(name)s: %(message)s"


class RateLimit(logging.Filter):
    """At most `burst` records per `window` seconds from one place (logger, level, call site, message
    template); the first record let through after a quiet spell says how many were left out."""

    def __init__(self, burst: int = BURST, window: float = WINDOW) -> None:
        super().__init__()
        self.burst = burst
        self.window = window
        # key -> [window start, records let through in it, records left out]
        self._seen: dict[tuple[object, ...], list[float]] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        key = (record.name, record.levelno, record.pathname, record.lineno, str(record.msg)[:200])
        now = time.monotonic()
        state = self._seen.get(key)
        if state is None or now - state[0] >= self.window:
            suppressed = int(state[2]) if state else 0
            if len(self._seen) > 10_000:  # call sites are few; this only guards against a leak
                self._seen.clear()
            self._seen[key] = [now, 1, 0]
            if suppressed:
                record.msg = f"{record.msg} [{suppressed} more like this in the last {self.window:.0f}s not logged]"
            return True
        if state[1] < self.burst:
            state[1] += 1
            return True
        state[2] += 1
        return False


class CappedFormatter(logging.Formatter):
    """Cuts a record (message and traceback together) to its first and last MAX_RECORD_CHARS / 2."""

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        if len(text) <= MAX_RECORD_CHARS:
            return text
        half = MAX_RECORD_CHARS // 2
        return f"{text[:half]} ... [{len(text) - 2 * half} characters cut] ... {text[-half:]}"


class StdioRotatingHandler(logging.handlers.RotatingFileHandler):
    """A RotatingFileHandler whose file is also the process's stdout and stderr, so whatever a native
    library prints lands in the current log (and not in a rotated-out file that nobody caps)."""

    def __init__(self, path: Path, max_bytes: int, backups: int = BACKUPS) -> None:
        super().__init__(path, maxBytes=max_bytes, backupCount=backups, encoding="utf-8")
        self._redirect_stdio()

    def doRollover(self) -> None:
        super().doRollover()
        self._redirect_stdio()

    def _redirect_stdio(self) -> None:
        if self.stream is None:
            return
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(self.stream.fileno(), 1)
        os.dup2(self.stream.fileno(), 2)


def setup_logging(path: Path, level: str, max_bytes: int = DEFAULT_MAX_BYTES) -> logging.Handler:
    handler = StdioRotatingHandler(path, max_bytes)
    handler.setFormatter(CappedFormatter(FORMAT))
    handler.addFilter(RateLimit())
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(level.upper())
    return handler
