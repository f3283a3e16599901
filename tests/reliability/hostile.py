"""Well-typed but hostile values for every field of every protocol command (issue 26, item 8).

For each command, each field in turn gets each hostile value of its kind while the others hold
plain values; the daemon must answer every request, and never INTERNAL. Shared by
tests/reliability/test_hostile_fields.py and bench/bench_reliability.py.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import msgspec
from daemon_harness import final_reply, frame, raw_connect

from hebbs.protocol import COMMAND_TYPES

# Commands that would end the run or reach outside the test: stopping the daemon, serving a port.
SPARED = {"shutdown"}
LONG_COMPONENT = "/tmp/" + "a" * 300
HOSTILE_TEXT = ["", " ", "\x00", "a\x00b", LONG_COMPONENT, LONG_COMPONENT + "/x", "/tmp/" + "é" * 200,
                "\ud800", "x" * 5000, "-1", "{}"]
HOSTILE_NUMBERS = [-1, 0, 65536, 2**31, 2**63 - 1, -(2**63), 2**64, 10**30, 1e308, -1e308, 0.5, math.inf]
HOSTILE_CONTAINERS = [[], {}, [LONG_COMPONENT], ["a\x00b"], [{"x": 1}], {"a": [[[[[]]]]]}]
# Names that are not UTF-8 (issue 39): written in a request as a lone surrogate escape ("\udce9", how
# Python's os.fsdecode spells the byte 0xE9), or as the raw byte inside the JSON string (RAW stands for it).
RAW = "\ufdd0raw:"
NON_UTF8_TEXT = ["caf\udce9.md", "/tmp/d\udce9/n", RAW + "caf\udce9.md", RAW + "/tmp/d\udce9/n"]


def odd_folder(root: Path) -> Path:
    """A notes folder that exists on disk under a Latin-1 name (d\xe9/), holding a UTF-8 note and a
    folder of its own: what a path field names when it names a real folder whose name is not UTF-8."""
    folder = Path(os.fsdecode(bytes(root) + b"/d\xe9"))
    (folder / "sub").mkdir(parents=True, exist_ok=True)
    (folder / "note.md").write_text("# Odd\n\nA note in a folder whose name is Latin-1.\n")
    (folder / "sub" / "more.md").write_text("# More\n\nAnother note.\n")
    return folder


def odd_paths(folder: Path) -> list[str]:
    """The folder's name (and a file's in it) as a surrogate-escaped text and as raw bytes."""
    name = str(folder)
    return [name, name + "/note.md", RAW + name, RAW + name + "/note.md"]


def requests(vault_path: str, paths: list[str] = ()) -> Iterator[tuple[str, bytes]]:
    """(label, JSON request body) for every command x field x hostile value; plus vault_path itself.
    `paths`: more values for every field (real paths whose names are not UTF-8, say: odd_paths)."""
    odd = [*NON_UTF8_TEXT, *paths]
    for tag in sorted(COMMAND_TYPES):
        if tag in SPARED:
            continue
        cls = COMMAND_TYPES[tag]
        fields = msgspec.structs.fields(cls)
        required = {f.name: _filler(f) for f in fields if f.required}
        for field in fields:
            values: list[Any] = [*HOSTILE_TEXT, *HOSTILE_NUMBERS, *HOSTILE_CONTAINERS, None, True, *odd, [*odd]]
            for value in values:
                command = {"type": tag, **required, field.name: value}
                yield f"{tag}.{field.name}={_show(value)}", _encode(command, vault_path)
        for value in [*HOSTILE_TEXT[:7], 1, None, *odd]:
            yield f"{tag}.vault_path={_show(value)}", _encode({"type": tag, **required}, value)


def _filler(field: Any) -> Any:
    text = str(field.type)
    if "list" in text:
        return []
    if "int" in text:
        return 1
    if "float" in text:
        return 0.5
    if "bool" in text:
        return False
    if "dict" in text:
        return {}
    return "x"


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _encode(command: dict[str, Any], vault_path: Any) -> bytes:
    body: dict[str, Any] = {"id": 1, "command": command}
    if vault_path is not None:
        body["vault_path"] = vault_path
    # Python's json writes a lone surrogate as \ud800 and infinity as Infinity (not JSON): as a client would.
    data = json.dumps(body).encode()
    # RAW + name: the name's bytes as they are (0xE9 alone: not UTF-8) inside the JSON string.
    return re.sub(rb'\\ufdd0raw:((?:[^"\\]|\\.)*)',
                  lambda m: json.loads(b'"' + m[1] + b'"').encode("utf-8", "surrogateescape"), data)


def send_each(socket: Path, bodies: Iterable[tuple[str, bytes]]) -> tuple[Counter, list[str]]:
    """Each body sent on one connection (a new one after a request went unanswered): the count of
    each answer's status, and `label: status error` for every INTERNAL or unanswered request."""
    codes: Counter = Counter()
    bad: list[str] = []
    sock = raw_connect(socket, timeout=120)
    try:
        for label, body in bodies:
            try:
                sock.sendall(frame(body))
                reply = final_reply(sock)
            except OSError:
                reply = None
            code = "UNANSWERED" if reply is None else (reply.get("status_code") or reply.get("status"))
            codes[code] += 1
            if code in ("INTERNAL", "UNANSWERED"):
                bad.append(f"{label}: {code} {None if reply is None else reply.get('error')}")
                if reply is None:
                    sock.close()
                    sock = raw_connect(socket, timeout=120)
    finally:
        sock.close()
    return codes, bad
