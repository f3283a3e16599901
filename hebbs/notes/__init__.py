"""Markdown vaults: index a notes folder into its engine (`ROOT/.hebbs/`) and keep it in step.

    from hebbs import Engine
    from hebbs.notes import index_notes, note_write, watch_notes

    with Engine.open(root / ".hebbs") as engine:
        summary = index_notes(engine, root)            # phase 1 + phase 2
        watcher = watch_notes(engine, root)            # then follow edits
        note_write(engine, root, "agent/plan.md", "...")   # a note the agent writes, indexed at once
        ...
        watcher.stop()

How it works, the manifest, the section split, the watcher timings and notes the agent writes: docs/notes.md.
"""

from __future__ import annotations

from .indexer import IndexSummary, Plan, Progress, apply_plan, index_notes, scan_notes
from .parse import Link, ParsedNote, Section, parse_note
from .status import FileStatus, SectionStatus, list_notes
from .watch import NotesWatcher, watch_notes
from .write import note_append, note_read, note_write

__all__ = ["index_notes", "scan_notes", "apply_plan", "NotesWatcher", "watch_notes", "list_notes", "IndexSummary",
           "Plan", "Progress", "FileStatus", "SectionStatus", "parse_note", "ParsedNote", "Section", "Link",
           "note_read", "note_write", "note_append"]
