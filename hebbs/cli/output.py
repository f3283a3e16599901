"""How the CLI prints: short aligned text for people, one stable JSON document for agents.

JSON goes to stdout as a single compact document (one line per item only for streams: subscribe,
export); errors go to stderr, as JSON in json mode, and the exit code is non-zero.
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import sys
import textwrap
import unicodedata
from collections.abc import Sequence
from typing import Any, TextIO

import msgspec

from hebbs.schema import Memory, RecallResult
from hebbs.timefmt import local_text

SHORT_ID = 8
# Exit codes (docs/cli.md, skills/SKILL.md).
EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_NO_DAEMON, EXIT_INTERRUPTED = 0, 1, 2, 3, 130
# A wrapped cell shows at most this many lines: a long note section must not flood the terminal.
WRAP_LINES = 4
# A column before the content is never cut narrower than this (a short id is 8).
MIN_COLUMN = 8
# Narrower than this, recall's table leaves out which strategies found each result (JSON keeps it).
STRATEGIES_FROM = 100
_encoder = msgspec.json.Encoder()
# What text mode prints for a reply of each type (cli/declared.py, for a command without a `text=`
# template of its own): "module:function" in hebbs.cli, imported when used.
TEXT = {"Memory": "output:print_memory", "list[Memory]": "output:print_versions",
        "list[QueryLogEntry]": "output:print_query_log", "list[Insight]": "reflectcmds:print_insights",
        "ReflectAutoResult": "reflectcmds:print_reflected", "ReflectPrepared": "reflectcmds:print_prepared"}


# Control characters a terminal would act on (ESC starts colour, cursor and title sequences; CR
# overwrites a line), shown as escapes instead: a memory's text is anyone's text.
_CONTROLS = {c: f"\\x{c:02x}" for c in (*range(0x00, 0x09), *range(0x0B, 0x20), *range(0x7F, 0xA0))}


class Printable:
    """A text stream that shows control characters in what it is given as escapes (text mode's stdout)."""

    def __init__(self, inner: TextIO) -> None:
        self._inner = inner

    def write(self, text: str) -> int:
        self._inner.write(text.translate(_CONTROLS))
        return len(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def number(text: str) -> float:
    """A float option's value: NaN and infinity are refused here, because JSON carries them as null,
    which the daemon reads as "not given" (a revise with --importance nan changed nothing and said
    it had revised)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
    return value


def short_id(memory_id: str) -> str:
    """The random tail of a ULID: its first characters are a timestamp, shared by neighbours in time."""
    return memory_id[-SHORT_ID:]


def to_json(value: Any) -> str:
    return _encoder.encode(value).decode()


def emit_json(value: Any, out: TextIO | None = None) -> None:
    out = out or sys.stdout
    out.write(to_json(value) + "\n")
    out.flush()


def when(micros: int | None) -> str:
    if not micros:
        return "-"
    return local_text(micros)


def display_width(text: str) -> int:
    """Terminal columns the text takes: CJK and other wide characters take two, combining marks none."""
    if text.isascii():
        return len(text)
    return sum(_columns(c) for c in text)


def _columns(char: str) -> int:
    if unicodedata.combining(char):
        return 0
    return 2 if unicodedata.east_asian_width(char) in "WF" else 1


def _pad(text: str, columns: int, *, right: bool = False) -> str:
    fill = " " * max(0, columns - display_width(text))
    return fill + text if right else text + fill


def one_line(text: str, width: int) -> str:
    flat = " ".join(text.split())
    if display_width(flat) <= width:
        return flat
    room, used, kept = max(1, width - 1), 0, []
    for char in flat:
        used += _columns(char)
        if used > room:
            break
        kept.append(char)
    return "".join(kept) + "…"


def name_cut(text: str, width: int) -> str:
    """A name (a path, an entity, a list of strategies) cut to `width` columns in its middle: names
    that share a beginning ("Linking notes/...") differ at their end, which a cut from the right hid."""
    flat = " ".join(text.split())
    if display_width(flat) <= width:
        return flat
    head_room = max(1, (width - 1) // 3)
    head = one_line(flat, head_room + 1)[:-1]
    tail: list[str] = []
    used = display_width(head) + 1
    for char in reversed(flat):
        used += _columns(char)
        if used > width:
            break
        tail.append(char)
    return head + "…" + "".join(reversed(tail))


def width() -> int:
    return shutil.get_terminal_size((120, 24)).columns


def table(headers: Sequence[str], rows: Sequence[Sequence[str]], *, right: Sequence[int] = (),
          out: TextIO | None = None, wrap: bool = False, dim: Sequence[bool] = ()) -> None:
    """Columns padded to their widest cell; the last column takes what is left of the terminal, cut to
    one line, or with wrap, wrapped onto up to WRAP_LINES lines under itself. Rows flagged in `dim`
    are drawn faint on a terminal that takes colour."""
    out = out or sys.stdout
    faint = _takes_colour(out)
    if not rows:
        return
    widths = [max(display_width(h), *(display_width(r[i]) for r in rows)) for i, h in enumerate(headers)]
    # The columns before the last take at most half the line: a long entity or path is cut (widest
    # first, never below MIN_COLUMN) so that the content, the last column, keeps its room.
    while sum(widths[:-1]) + 2 * (len(headers) - 1) > width() // 2:
        widest = max(range(len(widths) - 1), key=lambda i: widths[i], default=None)
        if widest is None or widths[widest] <= MIN_COLUMN:
            break
        widths[widest] -= 1
    indent = sum(widths[:-1]) + 2 * (len(headers) - 1)
    room = max(20, width() - indent)

    def lines(cells: Sequence[str]) -> list[str]:
        parts = []
        for i, cell in enumerate(cells[:-1]):
            parts.append(_pad(name_cut(cell, widths[i]), widths[i], right=i in right))
        last = " ".join(cells[-1].split())
        if not wrap or display_width(last) <= room:
            return ["  ".join(parts + [one_line(last, room)]).rstrip()]
        wrapped = textwrap.wrap(last, room)
        if len(wrapped) > WRAP_LINES:
            wrapped = wrapped[:WRAP_LINES - 1] + [one_line(" ".join(wrapped[WRAP_LINES - 1:]), room)]
        return ["  ".join(parts + [wrapped[0]])] + [" " * indent + more for more in wrapped[1:]]

    out.write(lines(headers)[0] + "\n")
    for n, row in enumerate(rows):
        drawn = "\n".join(lines(row))
        out.write((f"\033[2m{drawn}\033[0m" if faint and n < len(dim) and dim[n] else drawn) + "\n")


def _takes_colour(out: TextIO) -> bool:
    # https://no-color.org: any non-empty NO_COLOR turns colour off.
    return out.isatty() and not os.environ.get("NO_COLOR") and os.environ.get("TERM") != "dumb"


def print_memory(memory: Memory, out: TextIO | None = None, *, last_restated_at: int | None = None) -> None:
    out = out or sys.stdout
    fields = [
        ("id", memory.id),
        ("kind", memory.kind.value),
        ("entity", memory.entity_id or "-"),
        ("importance", f"{memory.importance:.2f}"),
        ("created", when(memory.created_at)),
        ("updated", when(memory.updated_at)),
        ("accessed", f"{memory.access_count}x, last {when(memory.last_accessed_at)}"),
    ]
    if memory.restatements:
        last = "" if last_restated_at is None else f", last {when(last_restated_at)}"
        fields.append(("restated", f"{memory.restatements}x{last}"))
    if memory.context:
        fields.append(("context", to_json(memory.context)))
    if memory.source is not None:
        heading = " > ".join(memory.source.heading_path)
        diverged = (" - diverged: revised here, the file still holds the text it was indexed from"
                    if memory.context.get("diverged_from_source") else "")
        fields.append(("source", memory.source.file_path + (f" ({heading})" if heading else "") + diverged))
    if memory.superseded_by:
        fields.append(("superseded by", memory.superseded_by))
    if memory.newer_value:
        fields.append(("older value", f"{memory.value_change or 'changed'}, newer: {memory.newer_value}"))
    if memory.older_value:
        fields.append(("newer value of", memory.older_value))
    if memory.valid_until is not None:
        fields.append(("true until", when(memory.valid_until)))
    if memory.conflicts_with:
        fields.append(("conflicts with", ", ".join(memory.conflicts_with)))
    if memory.revision_of:
        fields.append(("revision of", memory.revision_of))
    if memory.author is not None:  # unset on memories stored before authors were recorded
        fields.append(("author", memory.author + (f" (via {memory.daemon})" if memory.daemon else "")))
    for name, value in (("agent", memory.agent), ("session", memory.session)):
        if value is not None:
            fields.append((name, value))
    pad = max(len(name) for name, _ in fields)
    for name, value in fields:
        out.write(f"{name.ljust(pad)}  {value}\n")
    out.write("\n" + memory.content.rstrip() + "\n")


def print_results(results: Sequence[RecallResult], notes: Sequence[str] = (), out: TextIO | None = None, *,
                  abstained: bool = False, threshold: float | None = None) -> None:
    """The ranked table; an abstaining answer says so first, in plain words, then lists the weak
    candidates. On a terminal, results whose confidence is below `threshold` are drawn faint."""
    out = out or sys.stdout
    if abstained:
        out.write("No good match: nothing relevant known for this cue. Weak candidates:\n")
    if not results:
        out.write("no memories found\n")
    # Confidence leads: it says whether a result answers the cue; the score is the order before MMR moved it.
    rows = [[str(n), "-" if r.confidence is None else f"{r.confidence:.2f}", f"{r.score:.3f}", short_id(r.memory.id),
             r.memory.entity_id or "-", ",".join(r.strategies), _marked(r)] for n, r in enumerate(results, 1)]
    headers = ["rank", "conf", "score", "id", "entity", "found by", "content"]
    if width() < STRATEGIES_FROM:  # at 80 columns the content needs that room more
        headers.remove("found by")
        for row in rows:
            del row[5]
    # Who stored them, when they were not all stored by one author, agent and session: a team vault's
    # recall says whose memory each result is.
    for name in ("session", "agent", "author"):
        if len({getattr(r.memory, name) for r in results}) > 1:
            at = headers.index("entity")
            headers.insert(at, name)
            for row, r in zip(rows, results):
                row.insert(at, getattr(r.memory, name) or "-")
    if any(isinstance(r.vault, str) for r in results):  # a merged recall over both brains
        headers.insert(3, "vault")
        for row, r in zip(rows, results):
            row.insert(3, r.vault if isinstance(r.vault, str) else "-")
    below = [threshold is not None and r.confidence is not None and r.confidence < threshold for r in results]
    table(headers, rows, right=(0, 2), out=out, wrap=True, dim=below)
    if any(a.score < b.score for a, b in zip(results, results[1:])):
        out.write("note: ranked by score, then diversified (MMR): a result much like one above it moves down, "
                  "so the rank, not the score, gives the order\n")
    if any(not r.current for r in results):
        out.write("note: an [older value] is no longer current: a newer memory (named) states another value, "
                  "and ranks above it\n")
    if any(r.conflicts_with for r in results):
        out.write("note: memories marked [conflicts with ...] were confirmed to contradict each other: "
                  "which one is true is not known\n")
    for note in notes:
        out.write(f"note: {note}\n")


def _marked(result: RecallResult) -> str:
    """The content, saying first when it is not the current value (a newer memory changed or replaced
    it) and which memories it was confirmed to contradict (docs/honesty.md "What is true now")."""
    memory, marks = result.memory, []
    if not result.current and result.newer is not None:
        if memory.newer_value == result.newer and memory.value_change:
            marks.append(f"older value {memory.value_change}, newer {short_id(result.newer)}")
        else:
            marks.append(f"superseded by {short_id(result.newer)}")
    marks += [f"conflicts with {short_id(other)}" for other in result.conflicts_with]
    return "".join(f"[{mark}] " for mark in marks) + memory.content


def print_error(message: str, status_code: str, json_mode: bool) -> None:
    if json_mode:
        emit_json({"error": message, "status_code": status_code}, sys.stderr)
    else:
        sys.stderr.write(f"hebbs: {message} [{status_code}]\n")


def print_versions(versions: Sequence[Memory]) -> None:
    """Memories as one line each, when each was last changed first (a memory's history)."""
    if not versions:
        print("none")
    table(["replaced", "id", "content"], [[when(v.updated_at), short_id(v.id), v.content] for v in versions])


def print_query_log(entries: Sequence[Any]) -> None:
    if not entries:
        print("no recalls logged yet")
    rows = [[when(e.at), f"{e.latency_ms:.1f}", str(e.result_count), ",".join(e.strategies),
             e.entity_id or "-", e.cue or "(no cue)"] for e in entries]
    table(["when", "ms", "results", "strategies", "entity", "cue"], rows, right=(1, 2))
