"""Deprecated alias of `hebbs.notes`, which indexes a notes folder (a notes folder is not a vault:
docs/architecture.md's glossary). The old names keep working and warn once; they go in a later wave."""

from __future__ import annotations

import warnings
from typing import Any

from .. import notes

_RENAMED = {"index_vault": "index_notes", "scan_vault": "scan_notes", "watch_vault": "watch_notes",
            "list_vault": "list_notes", "VaultWatcher": "NotesWatcher"}


def __getattr__(name: str) -> Any:
    new = _RENAMED.get(name, name)
    if not hasattr(notes, new):
        raise AttributeError(f"module 'hebbs.vault' has no attribute {name!r}")
    warnings.warn(f"hebbs.vault.{name} is now hebbs.notes.{new}", DeprecationWarning, stacklevel=2)
    return getattr(notes, new)
