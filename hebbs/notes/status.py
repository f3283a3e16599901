"""`list_notes`: what the manifest knows about each note, compared with the files on disk (no engine needed)."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import msgspec

from ..core.memory_text import diverged_from_source
from .indexer import resolve_root
from .links import link_text, resolve_links
from .manifest import FORGOTTEN, SYNCED, load_manifest
from .walk import VaultFilter, walk_notes

__all__ = ["FileStatus", "SectionStatus", "list_notes"]


class SectionStatus(msgspec.Struct, kw_only=True, omit_defaults=True):
    heading_path: list[str]
    # synced | meta (metadata to rewrite) | stale (text to embed) | diverged (revised away from the file)
    # | forgotten (its memory was forgotten; back when its text changes)
    state: str
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
    # (or now ignored) but its memories are still in the engine; diverged: unchanged on disk, but
    # some section's memory was revised (in the Memory Palace, or through the API) away from the
    # file's text: the file does not say what recall returns until it is edited and indexed again;
    # skipped: left out of the index (a name that is not UTF-8, shown with \xNN escapes; over the size
    # limit), the reason in warnings.
    # elsewhere: not in this checkout, brought into the shared vault by another checkout of the tree
    # (docs/scale.md): this checkout leaves it as it is.
    state: str
    sections: int = 0
    pending: int = 0
    diverged: int = 0
    entity_id: str | None = None
    tags: list[str] = []
    warnings: list[str] = []
    unresolved_links: list[str] = []
    section_list: list[SectionStatus] | None = None


def list_notes(root: os.PathLike | str, sections: bool = False,
               memory: Callable[[str], Any] | None = None) -> list[FileStatus]:
    """Every note of the vault, indexed or not, with its state (sorted by path). With `memory` (a memory
    by id, None if gone), sections whose memory was revised away from the file are told apart."""
    root = resolve_root(root)
    manifest, _ = load_manifest(root)
    vfilter = VaultFilter(root)
    present = walk_notes(root, vfilter)
    _, unresolved = resolve_links(manifest)
    missing: dict[str, list[str]] = {}
    for rel, link in unresolved:
        missing.setdefault(rel, []).append(link)
    out: list[FileStatus] = [FileStatus(path=name, state="skipped", warnings=[reason])
                             for name, reason in vfilter.skipped.items() if name not in manifest.files]
    for rel in sorted(set(present) | set(manifest.files)):
        entry = manifest.files.get(rel)
        if entry is None:
            out.append(FileStatus(path=rel, state="new"))
            continue
        waiting = sum(1 for s in entry.sections if s.state not in (SYNCED, FORGOTTEN))
        state = "pending" if waiting else "synced"
        path = present.get(rel)
        if path is None:
            # Indexed before it went over the size limit: its memories go at the next index.
            state = "skipped" if rel in vfilter.skipped else "removed"
        else:
            try:
                st = path.stat()
                if st.st_size != entry.size or (entry.mtime_ns and st.st_mtime_ns != entry.mtime_ns):
                    state = "modified"
            except OSError:
                state = "removed"
        apart = set()
        if memory is not None:
            for s in entry.sections:
                held = memory(s.memory_id) if s.memory_id and s.state == SYNCED else None
                if held is not None and diverged_from_source(held):
                    apart.add(s.memory_id)
        if apart and state == "synced":
            state = "diverged"
        status = FileStatus(path=rel, state=state, sections=len(entry.sections), pending=waiting,
                            diverged=len(apart), entity_id=entry.entity_id, tags=entry.tags,
                            warnings=entry.warnings + ([vfilter.skipped[rel]] if rel in vfilter.skipped else []),
                            unresolved_links=list(dict.fromkeys(missing.get(rel, []))))
        if sections:
            status.section_list = [_section_status(s, s.memory_id in apart) for s in entry.sections]
        out.append(status)
    for rel, count in manifest.elsewhere.items():
        if rel not in present and rel not in manifest.files:
            out.append(FileStatus(path=rel, state="elsewhere", sections=count))
    out.sort(key=lambda status: status.path)
    return out


def _section_status(s: Any, diverged: bool = False) -> SectionStatus:
    return SectionStatus(heading_path=s.heading_path, state="diverged" if diverged else s.state, memory_id=s.memory_id,
                         byte_start=s.byte_start, byte_end=s.byte_end, chunk=s.chunk, chunks=s.chunks,
                         tags=s.tags, links=[link_text(link) for link in s.links])


