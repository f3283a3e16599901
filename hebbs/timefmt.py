"""Stored times as text, for any value a vault may hold.

A record written before ranges were checked (or by another tool) can carry a time that Python's
datetime cannot represent (year 10000 and later); one such record must not break a command that
prints the whole vault, so it is shown as its raw microseconds instead.
"""

from __future__ import annotations

import datetime as dt


def utc_text(micros: int, fmt: str = "%Y-%m-%d %H:%M") -> str:
    try:
        return dt.datetime.fromtimestamp(micros / 1e6, dt.timezone.utc).strftime(fmt)
    except (OverflowError, OSError, ValueError):
        return f"{micros}us"


def local_text(micros: int, fmt: str = "%Y-%m-%d %H:%M") -> str:
    try:
        return dt.datetime.fromtimestamp(micros / 1_000_000).astimezone().strftime(fmt)
    except (OverflowError, OSError, ValueError):
        return f"{micros}us"
