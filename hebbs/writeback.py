"""Where hebbs writes notes into a markdown vault's notes folder, and how it takes them back.

`reflect-commit` writes each insight as a note in ROOT/insights/, a confirmed contradiction gets a
report in ROOT/contradictions/ (ROOT: the folder holding .hebbs/). Both folders are set in the
vault's config.toml, `[notes] insights_dir` and `contradictions_dir` (relative to ROOT), and the
indexer never indexes them. `write = false` writes no notes at all.

This module stays light (msgspec only): the file watcher reads these folders in the CLI process.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath

import msgspec

CONFIG_FILE = "config.toml"


class NotesConfig(msgspec.Struct, kw_only=True, frozen=True, forbid_unknown_fields=True):
    write: bool = True
    insights_dir: str = "insights"
    contradictions_dir: str = "contradictions"

    def __post_init__(self) -> None:
        for name, value in (("insights_dir", self.insights_dir), ("contradictions_dir", self.contradictions_dir)):
            parts = PurePosixPath(value).parts
            if not value.strip() or PurePosixPath(value).is_absolute() or ".." in parts or any(
                    p.startswith(".") for p in parts):
                raise ValueError(f"notes.{name} must be a folder inside the notes folder, like \"insights\" or "
                                 f"\"hebbs/insights\" (no .., no leading dot), got {value!r}")


class _Notes(msgspec.Struct, kw_only=True):
    notes: NotesConfig = NotesConfig()


def notes_config(vault_dir: Path) -> NotesConfig:
    """The [notes] section of vault_dir/config.toml alone (defaults when absent or unreadable: the full
    config is checked, with a clear error, when the vault opens)."""
    try:
        return msgspec.toml.decode((vault_dir / CONFIG_FILE).read_bytes(), type=_Notes).notes
    except (OSError, msgspec.DecodeError, msgspec.ValidationError):
        return NotesConfig()


def ignore_rules(vault_dir: Path) -> list[str]:
    """gitignore lines that keep the folders hebbs writes out of the index."""
    config = notes_config(vault_dir)
    return [f"/{config.insights_dir.strip('/')}/", f"/{config.contradictions_dir.strip('/')}/"]


def remove_note(folder: Path, memory_id: str) -> Path | None:
    """Delete the note written for memory_id in folder (named …-<last 6 of the id>.md, and naming the id in
    its front matter), if there is one. Returns its path."""
    try:
        candidates = list(folder.glob(f"*-{memory_id[-6:].lower()}.md"))
    except OSError:
        return None
    for path in candidates:
        try:
            head = path.read_text(encoding="utf-8", errors="replace")[:400]
        except OSError:
            continue
        if f"hebbs_id: {memory_id}" in head:
            path.unlink(missing_ok=True)
            return path
    return None
