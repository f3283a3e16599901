"""`list_vault`: what the manifest knows about each note, compared with the files on disk (no engine needed)."""

from __future__ import annotations

import os
from typing import Any

import msgspec

from .indexer import resolve_root
from .links import link_text, resolve_links
from .manifest import SYNCED, load_manifest
from .walk import VaultFilter, walk_notes

__all__ = ["FileStatus", "SectionStatus", "list_vault"]


class SectionStatus(msgspec.Struct, kw_only=True, omit_defaults=True):
    heading_path: list[str]
    state: str  # synced | meta (metadata to rewrite) | stale (text to embed)
    memory_id: str | None = None
    byte_start: int = 0
    byte_end: int = 0
    chunk: int = 0
    chunks: int = 1
    tags: list[str] = []
    links: list[str] = []


class FileStatus(msgspec.Struct, kw_only=True, omit_defaults=True):
    path: str  # relative to the vault root, with forward slashes
    # synced: indexed and unchanged on disk; pending: parsed, waiting for phase 2 (embedding);
    # modified: changed on disk since it was indexed; new: not indexed yet; removed: gone from disk
    # (or now ignored) but its memories are still in the engine.
    state: str
    sections: int = 0
    pending: int = 0
    entity_id: str | None = None
    tags: list[str] = []
    warnings: list[str] = []
    unresolved_links: list[str] = []
    section_list: list[SectionStatus] | None = None


def list_vault(root: os.PathLike | str, sections: bool = False) -> list[FileStatus]:
    """Every note of the vault, indexed or not, with its state (sorted by path)."""
    root = resolve_root(root)
    manifest, _ = load_manifest(root)
    present = walk_notes(root, VaultFilter(root))
    _, unresolved = resolve_links(manifest)
    missing: dict[str, list[str]] = {}
    for rel, link in unresolved:
        missing.setdefault(rel, []).append(link)
    out: list[FileStatus] = []
    for rel in sorted(set(present) | set(manifest.files)):
        entry = manifest.files.get(rel)
        if entry is None:
            out.append(FileStatus(path=rel, state="new"))
            continue
        waiting = sum(1 for s in entry.sections if s.state != SYNCED)
        state = "pending" if waiting else "synced"
        path = present.get(rel)
        if path is None:
            state = "removed"
        else:
            try:
                st = path.stat()
                if st.st_size != entry.size or (entry.mtime_ns and st.st_mtime_ns != entry.mtime_ns):
                    state = "modified"
            except OSError:
                state = "removed"
        status = FileStatus(path=rel, state=state, sections=len(entry.sections), pending=waiting,
                            entity_id=entry.entity_id, tags=entry.tags, warnings=entry.warnings,
                            unresolved_links=list(dict.fromkeys(missing.get(rel, []))))
        if sections:
            status.section_list = [_section_status(s) for s in entry.sections]
        out.append(status)
    return out


def _section_status(s: Any) -> SectionStatus:
    return SectionStatus(heading_path=s.heading_path, state=s.state, memory_id=s.memory_id,
                         byte_start=s.byte_start, byte_end=s.byte_end, chunk=s.chunk, chunks=s.chunks,
                         tags=s.tags, links=[link_text(link) for link in s.links])


