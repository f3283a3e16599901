"""The vault manifest: what phase 1 last saw in each note, and which memory holds each section.

Stored as JSON in `ROOT/.hebbs/vault-manifest.json`. It is a cache of the engine, never the other
way round: every section names its memory id and every vault memory carries its file, heading path
and content hash in its context, so a lost or stale manifest is rebuilt from the engine (see
`indexer.reconcile`). Saves are atomic (temp file, fsync, rename, fsync of the folder): after a
kill -9 the file on disk is either the old manifest or the new one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec

from ..fsutil import atomic_write
from .parse import PARSER_VERSION, Link

__all__ = ["Manifest", "FileEntry", "SectionEntry", "Orphan", "load_manifest", "save_manifest", "manifest_path",
           "SYNCED", "META", "STALE", "FORGOTTEN", "MANIFEST_NAME"]

MANIFEST_NAME = "vault-manifest.json"
FORMAT_VERSION = 1

# Section states. SYNCED: the engine holds this text and metadata. META: the text is in the engine
# but its context or source (byte range, heading path, file, tags...) must be rewritten, which costs
# no embedding. STALE: the text is new or changed and must be embedded (remembered when the section
# has no memory id yet, revised when it has one). FORGOTTEN: its memory was forgotten (`hebbs forget`,
# a decay sweep) after a complete run; it has no memory id and stays out of the vault until its text
# changes, so a forget means what it says and costs the next index nothing. Orphaned sections live in
# Manifest.orphans.
SYNCED = "synced"
META = "meta"
STALE = "stale"
FORGOTTEN = "forgotten"
_RANK = {SYNCED: 0, META: 1, STALE: 2, FORGOTTEN: 3}


def worst(a: str, b: str) -> str:
    return a if _RANK[a] >= _RANK[b] else b


class SectionEntry(msgspec.Struct, kw_only=True, omit_defaults=True):
    hash: str  # content hash of the memory text
    meta: str  # hash of everything else the memory records (context, source, entity, importance)
    heading_path: list[str] = []
    byte_start: int = 0
    byte_end: int = 0
    level: int = 0
    chunk: int = 0
    chunks: int = 1
    tags: list[str] = []
    links: list[Link] = []
    memory_id: str | None = None
    state: str = STALE
    # The text, kept only while the section is STALE so that phase 2 needs no file.
    content: str | None = None


class FileEntry(msgspec.Struct, kw_only=True, omit_defaults=True):
    sha256: str
    size: int
    # 0 when the file was hashed less than a couple of seconds after it was written: a second write
    # within the file system's timestamp granularity could keep size and mtime, so such a file is
    # hashed again next time instead of being trusted on its stat.
    mtime_ns: int = 0
    entity_id: str
    created_at: int  # microseconds; front matter `created`/`date`, else the file's mtime
    importance: float = 0.5
    front_matter: dict[str, Any] = {}
    tags: list[str] = []
    warnings: list[str] = []
    sections: list[SectionEntry] = []


class Orphan(msgspec.Struct, array_like=True):
    """A section that is gone from the vault; its memory is forgotten in phase 2 unless it reappears first."""

    memory_id: str
    hash: str
    file: str
    heading_path: list[str]
    chunk: int


class Manifest(msgspec.Struct, kw_only=True, omit_defaults=True):
    version: int = FORMAT_VERSION
    parser: int = PARSER_VERSION
    split_level: int = 2
    max_tokens: int = 256
    model: str = ""
    # Written into every memory's context["vault"]: tells this vault's memories from any other's.
    vault_id: str = ""
    files: dict[str, FileEntry] = {}
    orphans: list[Orphan] = []
    # RELATED_TO edges this indexer made from wiki-links, as [source id, target id].
    edges: list[tuple[str, str]] = []
    # Set (and saved) before phase 2 writes to the engine, cleared when it is done: a manifest
    # found dirty means a phase 2 was interrupted and the engine must be reconciled.
    dirty: bool = False
    # A vault shared by several checkouts of the tree: the notes another checkout brought (file:
    # sections), as the last reconcile found them. Listed, never orphaned by this checkout.
    elsewhere: dict[str, int] = {}
    # Not stored: True when no manifest file existed (or it was unreadable) and this one is new.
    fresh: bool = False

    def memory_ids(self) -> set[str]:
        ids = {s.memory_id for f in self.files.values() for s in f.sections if s.memory_id}
        return ids | {o.memory_id for o in self.orphans}


_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder(Manifest)


def manifest_path(root: Path) -> Path:
    return root / ".hebbs" / MANIFEST_NAME


def load_manifest(root: Path) -> tuple[Manifest, str | None]:
    """The saved manifest, or a fresh one (with a warning when the file was there but unreadable)."""
    path = manifest_path(root)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return Manifest(fresh=True), None
    try:
        manifest = _decoder.decode(raw)
    except (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError) as exc:
        return Manifest(fresh=True), f"{path} is unreadable ({exc}); rebuilding it from the notes and the engine"
    if manifest.version != FORMAT_VERSION:
        return Manifest(fresh=True), f"{path} has format {manifest.version}; rebuilding it"
    manifest.fresh = False
    return manifest, None


def save_manifest(root: Path, manifest: Manifest, *, durable: bool = True) -> None:
    """durable=False: not fsynced, for a save whose loss a power cut may cause safely (the manifest on
    disk before it still tells the truth, and the next run redoes what this one recorded)."""
    path = manifest_path(root)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    manifest.fresh = False
    atomic_write(path, _encoder.encode(manifest), durable=durable)
