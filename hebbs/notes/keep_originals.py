"""The indexer's side of the original kept (hebbs/store/originals.py): which file versions to keep and
which version each section's memory was written from."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..store.originals import Originals, PruneSummary
from .manifest import SYNCED, FileEntry, Manifest


def open_originals(engine: Any) -> Originals | None:
    """The engine's kept originals, or None when `[sources] keep = false` (or the engine has no folder)."""
    config = getattr(getattr(engine, "config", None), "sources", None)
    path = getattr(engine, "path", None)
    if config is None or path is None or not config.keep:
        return None
    return Originals(path, config)


def file_key(root: Path, rel: str) -> str:
    return str(root / rel)


def keep_version(originals: Originals, root: Path, rel: str, data: bytes, entry: FileEntry) -> None:
    originals.keep(file_key(root, rel), data, entry.sha256)


def record_sections(originals: Originals, root: Path, manifest: Manifest) -> None:
    """Point every section's memory at the file version it now stands for (a no-op when unchanged)."""
    for rel, entry in manifest.files.items():
        key = file_key(root, rel)
        for s in entry.sections:
            if s.memory_id and s.state == SYNCED:
                originals.record(s.memory_id, key, rel, entry.sha256, s.hash, s.byte_start, s.byte_end,
                                 list(s.heading_path))


def finish(originals: Originals, engine: Any) -> PruneSummary:
    vault = getattr(engine, "vault", None)
    return originals.prune(lambda mid: mid in vault if vault is not None else True)
