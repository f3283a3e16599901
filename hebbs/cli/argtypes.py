"""What building a declared subcommand's parser needs at start-up, and no more: the option value types
by the names cli/declared_options.py gives them, and `add`. Kept apart from cli/declared.py, which a
call only needs once its command runs (a `hebbs recall --help` loads this module, not that one)."""

from __future__ import annotations

import argparse
from typing import Any

from . import output


def time_value(text: str) -> int | None:
    """An option's time: ISO 8601 text or microseconds; argparse says what is wrong with it."""
    from hebbs.errors import InvalidInput

    from .commands import _time

    try:
        return _time(text, "time")
    except InvalidInput as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


TYPES = {"int": int, "number": output.number, "upper": str.upper, "time": time_value}

Entry = tuple[tuple[str, ...], dict[str, Any]]


def add(parser: argparse.ArgumentParser, entries: list[Entry]) -> None:
    for args, kwargs in entries:
        if "type" in kwargs:
            kwargs = {**kwargs, "type": TYPES[kwargs["type"]]}
        if kwargs.get("help") == argparse.SUPPRESS:
            # argparse hides an option whose help *is* its SUPPRESS object; the table holds an equal string.
            kwargs = {**kwargs, "help": argparse.SUPPRESS}
        parser.add_argument(*args, **kwargs)
