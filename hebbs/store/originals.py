"""The original kept: every indexed file version's bytes, content-addressed and compressed, in the vault.

Layout, in the vault directory (private: folders 0700, files 0600):
- `sources/blobs/<sha256[:2]>/<sha256>`: one file version, compressed. The first byte names the codec
  (`z` zstd, `d` zlib) so a vault written with zstd stays readable where only zlib is at hand.
  Blobs are written without fsync: they are content-addressed and checked against their sha256 when
  read, so a blob torn by a crash reads as missing, never as wrong text.
- `sources/index.msgpack.z` (msgpack, compressed like a blob; atomic, fsynced): the versions of each
  file, newest last (sha256, size, indexed_at), and for each memory the versions its text came from
  (file, section hash and byte range), newest last.

The markdown indexer keeps a version when it parses a changed file (`keep`) and records the version
each memory was written from (`record`); `Engine.source` reads a memory's section back (`section`).

Pruning (`prune`, after each index run): a version is kept while a live memory (or one of its
revisions) was written from it, or while it is among the last `keep_versions` versions of its file;
then, over `max_bytes`, versions go oldest first: first those kept only for revisions, then those kept
only as recent, then those of live memories. The newest version of a file still on disk always stays.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import tempfile
import threading
import time
import zlib
from collections.abc import Callable
from pathlib import Path

import msgspec

from ..config import SourcesConfig
from ..errors import InvalidInput, NotFound
from ..fsutil import atomic_write
from ..schema import SourceSection, decoder

try:  # zstd compresses markdown ~25% smaller than zlib at a fraction of the time; zlib is the fallback.
    import zstandard as _zstd
except ImportError:  # pragma: no cover - zstandard is a dependency; this keeps a broken install readable
    _zstd = None

SOURCES_DIR = "sources"
INDEX_FILE = "index.msgpack.z"
DAMAGED_INDEX_FILE = "index.msgpack.z.damaged"
_ZSTD, _ZLIB = b"z", b"d"
log = logging.getLogger("hebbs.store")


class Version(msgspec.Struct, kw_only=True):
    sha256: str
    size: int  # bytes of the file
    stored: int  # bytes of the blob
    indexed_at: int  # microseconds


class FileVersions(msgspec.Struct, kw_only=True):
    versions: list[Version] = []
    removed_at: int | None = None  # the file left the vault (its versions stay, under the policy)


class Ref(msgspec.Struct, kw_only=True):
    file: str  # the key of the file's versions: the note's absolute path when it was indexed
    rel: str  # the note's path inside its vault folder, as shown
    sha256: str
    section_hash: str
    byte_start: int
    byte_end: int
    heading_path: list[str] = []
    at: int = 0


class _Index(msgspec.Struct, kw_only=True):
    files: dict[str, FileVersions] = {}
    refs: dict[str, list[Ref]] = {}


class PruneSummary(msgspec.Struct, kw_only=True):
    versions_dropped: int = 0
    bytes_dropped: int = 0
    versions_kept: int = 0
    bytes_kept: int = 0


_locks: dict[str, threading.Lock] = {}
_locks_guard = threading.Lock()


def _lock(directory: Path) -> threading.Lock:
    with _locks_guard:
        return _locks.setdefault(str(directory), threading.Lock())


class Originals:
    """The kept originals of one vault. Changes stay in memory until `save()`."""

    def __init__(self, vault_dir: os.PathLike | str, config: SourcesConfig | None = None) -> None:
        self.dir = Path(vault_dir) / SOURCES_DIR
        self.config = config or SourcesConfig()
        self._index = self._load()
        self._dirty = False

    @staticmethod
    def readable_index(path: Path) -> bool:
        """Whether the index file at path decodes (hebbs doctor's check; reading it changes nothing)."""
        try:
            decoder("msgpack", _Index).decode(_decompress(path.read_bytes()) or b"")
        except (OSError, ValueError, msgspec.DecodeError, msgspec.ValidationError):
            return False
        return True

    @staticmethod
    def listed_versions(path: Path) -> set[str]:
        """The sha256 of every file version the index file at path lists (none when it does not decode)."""
        try:
            index = decoder("msgpack", _Index).decode(_decompress(path.read_bytes()) or b"")
        except (OSError, ValueError, msgspec.DecodeError, msgspec.ValidationError):
            return set()
        return {v.sha256 for fv in index.files.values() for v in fv.versions}

    @property
    def index_missing(self) -> bool:
        """Whether the index is gone while kept versions are there: it is only saved after them, so it was
        deleted, and which memory came from which version is no longer known."""
        blobs = self.dir / "blobs"
        return (not (self.dir / INDEX_FILE).exists() and blobs.is_dir()
                and any(p.is_file() for p in blobs.glob("*/*")))

    @staticmethod
    def intact_blob(path: Path) -> bool:
        """Whether the kept version at path decompresses to the bytes its name hashes (hebbs doctor)."""
        try:
            data = _decompress(path.read_bytes())
        except OSError:
            return False
        return data is not None and hashlib.sha256(data).hexdigest() == path.name

    @property
    def damaged_index(self) -> Path | None:
        """Where a damaged index was moved aside, while it is there (see _load)."""
        path = self.dir / DAMAGED_INDEX_FILE
        return path if path.exists() else None

    def _load(self) -> _Index:
        path = self.dir / INDEX_FILE
        try:
            raw = _decompress(path.read_bytes())
        except FileNotFoundError:
            return _Index()
        try:
            return decoder("msgpack", _Index).decode(raw or b"")
        except (ValueError, msgspec.DecodeError, msgspec.ValidationError):  # ValueError: a flipped UTF-8 byte
            # A damaged index loses the map, not the vault: the next index run keeps versions anew.
            # It is moved aside rather than overwritten, and while it is there no blob is swept: the
            # versions it listed stay on disk for whoever can repair it (hebbs doctor says so).
            log.warning("the kept originals' index %s is damaged: moved aside to %s; versions kept before "
                        "cannot be looked up", path, DAMAGED_INDEX_FILE)
            with contextlib.suppress(OSError):
                os.replace(path, self.dir / DAMAGED_INDEX_FILE)
            return _Index()

    # -- writing (the indexer) --

    def has(self, key: str, sha256: str) -> bool:
        fv = self._index.files.get(key)
        return fv is not None and any(v.sha256 == sha256 for v in fv.versions)

    def keep(self, key: str, data: bytes, sha256: str) -> None:
        """Keep this version of the file kept as `key` (idempotent) and mark it the file's newest."""
        if hashlib.sha256(data).hexdigest() != sha256:
            raise InvalidInput(f"{key}: the bytes do not match sha256 {sha256}")
        path = self._blob_path(sha256)
        stored = path.stat().st_size if path.exists() else self._write_blob(path, data)
        fv = self._index.files.setdefault(key, FileVersions())
        fv.versions = [v for v in fv.versions if v.sha256 != sha256]
        fv.versions.append(Version(sha256=sha256, size=len(data), stored=stored, indexed_at=_now_us()))
        fv.removed_at = None
        self._dirty = True

    def removed(self, key: str) -> None:
        fv = self._index.files.get(key)
        if fv is not None and fv.removed_at is None:
            fv.removed_at = _now_us()
            self._dirty = True

    def record(self, memory_id: str, key: str, rel: str, sha: str, section_hash: str, byte_start: int,
               byte_end: int, heading_path: list[str]) -> None:
        """Memory `memory_id` holds section `section_hash` of version `sha` of the file kept as `key`."""
        if not self.has(key, sha):
            return
        refs = self._index.refs.setdefault(memory_id, [])
        if refs and (refs[-1].sha256, refs[-1].section_hash, refs[-1].byte_start) == (sha, section_hash, byte_start):
            return
        ref = Ref(file=key, rel=rel, sha256=sha, section_hash=section_hash, byte_start=byte_start, byte_end=byte_end,
                  heading_path=list(heading_path), at=_now_us())
        refs.append(ref)
        self._dirty = True

    def restore_ref(self, memory_id: str, ref: Ref) -> bool:
        """An imported memory's reference, as it was (hebbs/workflows/transfer.py); False when the
        version it names is not kept here."""
        if not self.has(ref.file, ref.sha256):
            return False
        self._index.refs.setdefault(memory_id, []).append(ref)
        self._dirty = True
        return True

    def save(self) -> None:
        if not self._dirty:
            return
        self.dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        with _lock(self.dir):
            atomic_write(self.dir / INDEX_FILE, _compress(msgspec.msgpack.encode(self._index)))
        self._dirty = False

    def prune(self, is_live: Callable[[str], bool]) -> PruneSummary:
        """Apply the policy (module docstring); `is_live(id)` tells a memory still in the vault."""
        index, config = self._index, self.config
        newest: set[str] = set()
        recent: set[str] = set()
        for fv in index.files.values():
            if fv.versions and fv.removed_at is None:
                newest.add(fv.versions[-1].sha256)
            recent.update(v.sha256 for v in fv.versions[-config.keep_versions:])
        current_ref: set[str] = set()
        revision_ref: set[str] = set()
        for mid, refs in index.refs.items():
            if refs and is_live(mid):
                current_ref.add(refs[-1].sha256)
                revision_ref.update(r.sha256 for r in refs[:-1])
        # The lower the rank, the sooner a version goes when over max_bytes; rank 0 never stays.
        def rank(sha: str) -> int:
            if sha in newest:
                return 4
            if sha in current_ref:
                return 3
            if sha in recent:
                return 2
            return 1 if sha in revision_ref else 0
        versions: dict[str, tuple[int, int, int]] = {}  # sha -> (rank, indexed_at, stored)
        for fv in index.files.values():
            for v in fv.versions:
                r, at, _ = versions.get(v.sha256, (0, 0, 0))
                versions[v.sha256] = (max(r, rank(v.sha256)), max(at, v.indexed_at), v.stored)
        drop = {sha for sha, (r, _, _) in versions.items() if r == 0}
        total = sum(stored for sha, (_, _, stored) in versions.items() if sha not in drop)
        for sha, (r, _, stored) in sorted(versions.items(), key=lambda item: item[1][:2]):
            if total <= config.max_bytes:
                break
            if sha in drop or r == 4:
                continue
            drop.add(sha)
            total -= stored
        summary = PruneSummary(versions_dropped=len(drop),
                               bytes_dropped=sum(versions[sha][2] for sha in drop),
                               versions_kept=len(versions) - len(drop), bytes_kept=total)
        if drop:
            for rel in list(index.files):
                fv = index.files[rel]
                fv.versions = [v for v in fv.versions if v.sha256 not in drop]
                if not fv.versions:
                    del index.files[rel]
            for mid in list(index.refs):
                refs = [r for r in index.refs[mid] if r.sha256 not in drop]
                if refs:
                    index.refs[mid] = refs
                else:
                    del index.refs[mid]
            self._dirty = True
        self.save()
        self._sweep_blobs({sha for sha in versions if sha not in drop})
        return summary

    def _sweep_blobs(self, keep: set[str]) -> None:
        """Delete blobs nobody lists (pruned ones, and any a crash left before the index was saved)."""
        root = self.dir / "blobs"
        if not root.is_dir() or self.damaged_index is not None:
            return
        for sub in root.iterdir():
            for blob in sub.iterdir():
                if blob.name not in keep:
                    blob.unlink(missing_ok=True)

    # -- reading --

    def refs(self, memory_id: str) -> list[Ref]:
        return list(self._index.refs.get(memory_id, ()))

    def find_ref_id(self, given: str) -> str | None:
        """A memory id the kept sources know, from its full id or a unique suffix of 6+ characters."""
        given = given.strip().upper()
        if given in self._index.refs:
            return given
        if len(given) < 6:
            return None
        found = [mid for mid in self._index.refs if mid.endswith(given)]
        return found[0] if len(found) == 1 else None

    def section(self, memory_id: str, ref: Ref) -> SourceSection:
        fv = self._index.files.get(ref.file)
        version = next((v for v in fv.versions if v.sha256 == ref.sha256), None) if fv else None
        if version is None:
            raise NotFound(f"the original of memory {memory_id} ({ref.file} at {ref.sha256[:12]}) was pruned "
                           "(see [sources] in the vault's config.toml)")
        data = self.read(ref.sha256)
        start, end = ref.byte_start, ref.byte_end
        line_start = data.count(b"\n", 0, start) + 1
        line_end = line_start + data.count(b"\n", start, max(start, end - 1))
        return SourceSection(memory_id=memory_id, file=ref.rel, heading_path=list(ref.heading_path),
                             line_start=line_start, line_end=line_end, byte_start=start, byte_end=end,
                             sha256=ref.sha256, indexed_at=version.indexed_at,
                             text=data[start:end].decode("utf-8", "replace"),
                             latest=fv.versions[-1].sha256 == ref.sha256, file_removed_at=fv.removed_at)

    def read(self, sha256: str) -> bytes:
        """One kept file version's bytes, checked against their hash."""
        try:
            raw = self._blob_path(sha256).read_bytes()
        except FileNotFoundError:
            raise NotFound(f"the kept file version {sha256[:12]} is missing from {self.dir / 'blobs'}: run "
                           f"`hebbs doctor --vault {self.dir.parent}`") from None
        data = _decompress(raw)
        if data is None or hashlib.sha256(data).hexdigest() != sha256:
            raise NotFound(f"the kept file version {sha256[:12]} is damaged")
        return data

    def bytes_kept(self) -> int:
        root = self.dir
        return sum(p.stat().st_size for p in root.rglob("*") if p.is_file()) if root.is_dir() else 0

    # -- blobs --

    def _blob_path(self, sha256: str) -> Path:
        return self.dir / "blobs" / sha256[:2] / sha256

    def _write_blob(self, path: Path, data: bytes) -> int:
        blob = _compress(data)
        for folder in (self.dir, self.dir / "blobs", path.parent):
            folder.mkdir(mode=0o700, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".", suffix=".tmp")
        try:
            os.fchmod(fd, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(blob)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return len(blob)


def _compress(data: bytes) -> bytes:
    if _zstd is not None:
        return _ZSTD + _zstd.ZstdCompressor(level=9).compress(data)
    return _ZLIB + zlib.compress(data, 9)


def _decompress(raw: bytes) -> bytes | None:
    codec, body = raw[:1], raw[1:]
    try:
        if codec == _ZSTD and _zstd is not None:
            return _zstd.ZstdDecompressor().decompress(body)
        if codec == _ZLIB:
            return zlib.decompress(body)
    except (zlib.error, Exception):  # zstandard raises its own ZstdError
        return None
    return None


def _now_us() -> int:
    return time.time_ns() // 1000
