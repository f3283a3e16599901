"""`hebbs note read|write|append`: notes the agent writes into the notes folder (hebbs/notes/write.py,
docs/notes.md). Each action sends the command declared with its name (`note write`, cli/declared.run_named);
the parser's dests are those commands' fields."""

from __future__ import annotations

import argparse
from typing import Any

from hebbs.errors import InvalidInput

from .commands import _count, open_input


def cmd_note(args: argparse.Namespace) -> int:
    """`hebbs note ACTION PATH [TEXT...]`."""
    from .declared import run_named

    if args.action == "read" and (args.text or args.file is not None):
        raise InvalidInput("`hebbs note read PATH` takes no text (--file and TEXT go with write and append)")
    return run_named(args, f"note {args.action}")


class NoteReadShell:
    @staticmethod
    def show(args: argparse.Namespace, client: Any, fields: dict[str, Any], note: Any) -> int:
        if not note.exists:
            print(f"no note {note.path} yet: `hebbs note write {note.path} TEXT` creates it")
            return 0
        print(f"{note.path}  version {note.version}\n")
        print(note.text, end="" if note.text.endswith("\n") else "\n")
        return 0


class NoteWriteShell:
    """write and append: the text from the words, '-' (stdin) or --file; the repeatable options as lists."""

    @staticmethod
    def fields(args: argparse.Namespace, fields: dict[str, Any]) -> dict[str, Any]:
        text = fields.get("text") or ""
        if args.file is not None:
            if text:
                raise InvalidInput("give the text as words or --file, not both")
            text = _read_text(args.file)
        elif text == "-":
            text = _read_text("-")
        if not text.strip() and not (args.action == "append" and fields.get("links")):
            raise InvalidInput(f"`hebbs note {args.action}` needs the text: words, '-' for stdin, or --file FILE")
        return {**fields, "text": text, "tags": fields.get("tags") or [], "links": fields.get("links") or []}

    @staticmethod
    def show(args: argparse.Namespace, client: Any, fields: dict[str, Any], written: Any) -> int:
        did = "created" if written.created else "appended to" if args.action == "append" else "replaced"
        print(f"{did} {written.path}, version {written.version}: {_count(written.sections, 'section')} indexed")
        if written.retries:
            print(f"  (it changed on disk while hebbs wrote: read again {_count(written.retries, 'time')}, "
                  "nothing of it lost)")
        for warning in written.warnings:
            print(f"  warning: {warning}")
        return 0


def _read_text(path: str) -> str:
    with open_input(path, binary=True) as f:
        raw = f.read()
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"{'stdin' if path == '-' else path} is not UTF-8 text (byte {exc.start}); a note is "
                           "written as UTF-8") from None
