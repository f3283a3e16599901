"""Indexing a notes folder into its vault: phase 1 (scan: parse, checksum, diff) and phase 2 (apply: embed, write).

Phase 1 never embeds. It walks the vault, skips every file whose stat (or else checksum) matches the
manifest, parses the rest into sections and diffs them against the manifest: a section whose text
is unchanged keeps its memory id wherever it moved (matched by content hash); a changed section
keeps the id of the section at the same (file, heading path, chunk); anything else is new. The
result is saved in the manifest, with the text of each stale section, so phase 2 needs no file.

Phase 2 forgets orphaned sections, revises changed ones (history kept), remembers new ones (the
engine embeds them in batches), rewrites moved ones without embedding, turns wiki-links into
RELATED_TO edges and queues contradiction candidates.

Crash safety: the manifest is a cache of the engine. Before phase 2 writes anything the manifest is
saved `dirty`; it is saved clean only when phase 2 is done. A run that finds it dirty (or finds no
manifest) reconciles first: every vault memory records its file, heading path, chunk and content hash
in its context, so memories written by the interrupted run are adopted (no second embedding),
memories nobody names are forgotten, and ids the engine lost are written again.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import os
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import msgspec
from ulid import ULID

from ..store import idempotency
from ..workflows import contradiction_check
from ..errors import NotFound
from ..schema import Memory, MemoryKind, Source
from .gitdates import commit_times
from .links import link_text, remove_edges, resolve_links
from . import keep_originals as kept
from .manifest import (FORGOTTEN, META, STALE, SYNCED, FileEntry, Manifest, Orphan, SectionEntry, load_manifest,
                       save_manifest, worst)
from .parse import PARSER_VERSION, ParsedNote, Section, parse_note
from .walk import IGNORE_FILE, VaultFilter, walk_notes

__all__ = ["Progress", "Plan", "IndexSummary", "scan_notes", "apply_plan", "index_notes", "ORIGIN"]

ORIGIN = "vault"  # context["origin"] of every memory made from a note
# Sections per remember_many / revise_many call: one progress step each, which is also where a cancel
# (or the daemon stopping) takes effect, so a batch is kept to a few seconds of embedding.
BATCH = 32
# A vault shared by several indexers: about this many sections per claim (small, so that indexers
# finish together), and how often one with nothing left to claim looks whether the others are done.
CLAIM_SECTIONS = 32
CLAIM_POLL = 0.25
# A file written this recently is not trusted on its stat next time (see FileEntry.mtime_ns).
_RACY_NS = 2_000_000_000


class Progress(msgspec.Struct, kw_only=True):
    """One progress report. stage: "parse" (files), "embed" (sections), "check" (contradiction checks)."""

    stage: str
    done: int
    total: int


ProgressFn = Callable[[Progress], None]


class Plan(msgspec.Struct, kw_only=True):
    """What phase 1 found; phase 2 carries it out. The manifest in it is already saved."""

    root: str
    manifest: Manifest
    files_scanned: int = 0
    files_unchanged: int = 0
    files_changed: int = 0
    files_removed: int = 0
    # Notes left out (a name that is not UTF-8, over the size limit), by printable name; each has a warning.
    skipped: list[str] = []
    warnings: list[str] = []
    seconds: float = 0.0

    def pending(self) -> dict[str, int]:
        """Sections per kind of phase-2 work: add, revise, update (metadata only), forget."""
        counts = {"add": 0, "revise": 0, "update": 0, "forget": len(self.manifest.orphans)}
        for entry in self.manifest.files.values():
            for s in entry.sections:
                if s.state == STALE:
                    counts["revise" if s.memory_id else "add"] += 1
                elif s.state == META:
                    counts["update"] += 1
        return counts


class IndexSummary(msgspec.Struct, kw_only=True):
    files_scanned: int = 0
    files_unchanged: int = 0
    files_changed: int = 0  # new or modified
    files_removed: int = 0
    sections_added: int = 0
    sections_revised: int = 0  # text changed: re-embedded, the old text kept as a revision
    sections_updated: int = 0  # moved, renamed or re-tagged: metadata rewritten, nothing embedded
    sections_removed: int = 0
    sections_total: int = 0
    embedded: int = 0  # texts sent to the model
    edges_added: int = 0
    edges_removed: int = 0
    unresolved_links: int = 0
    contradiction_candidates: int = 0
    reconciled: int = 0  # memories adopted, re-added or forgotten to repair an interrupted run
    # Sections whose memory was forgotten (hebbs forget, a decay sweep) since the last complete run:
    # left out, though their note still holds them, until their text changes.
    forgotten_left_out: int = 0
    embedded_on_ray: int = 0  # of `embedded`, the texts a Ray cluster embedded (index --ray)
    seconds: float = 0.0
    # Notes left out (a name that is not UTF-8, over the size limit), by printable name; each has a warning.
    skipped: list[str] = []
    warnings: list[str] = []


# One lock per vault root: the daemon's watcher and an index request must not interleave phases.
_locks: dict[str, threading.RLock] = {}
_locks_guard = threading.Lock()


def vault_lock(root: Path) -> threading.RLock:
    with _locks_guard:
        return _locks.setdefault(str(root), threading.RLock())


def resolve_root(root: os.PathLike | str) -> Path:
    return Path(root).expanduser().resolve()


# Public entry points ----------------------------------------------------------------------------

def index_notes(engine: Any, root: os.PathLike | str, *, split_level: int | None = None,
                progress: ProgressFn | None = None, reconcile: bool = True,
                contradictions: bool = True, ray: str | None = None, full: bool = False) -> IndexSummary:
    """Phase 1 then phase 2 over the whole vault. With reconcile (the default) the engine is also
    checked against the manifest, which repairs anything an interrupted run or a manual edit left.
    `ray`: the address of a Ray cluster that embeds phase 2's sections (embedding/ray_embed.py).
    `full`: every section of the notes the vault does not hold is written again, even one whose
    memory was forgotten (which a plain run leaves out): rebuilds this checkout's share of a vault."""
    started = time.perf_counter()
    root = resolve_root(root)
    with vault_lock(root):
        plan = scan_notes(engine, root, split_level=split_level, progress=progress)
        if ray is None:
            summary = apply_plan(engine, root, plan, progress=progress, reconcile=reconcile or full,
                                 contradictions=contradictions, full=full)
        else:
            summary = _on_ray(engine, ray, lambda: apply_plan(engine, root, plan, progress=progress,
                                                              reconcile=reconcile or full,
                                                              contradictions=contradictions, full=full))
    summary.seconds = round(time.perf_counter() - started, 3)
    return summary


def _on_ray(engine: Any, address: str, work: Callable[[], IndexSummary]) -> IndexSummary:
    """work() with the vault's large embedding batches sent to the Ray cluster at address."""
    from ..embedding.ray_embed import RayEmbedder

    local = engine.embedder
    remote = RayEmbedder(local, address)
    engine.embedder = remote
    try:
        summary = work()
    finally:
        engine.embedder = local
        remote.close()
    summary.embedded_on_ray = remote.remote_texts
    return summary


def scan_notes(engine: Any, root: os.PathLike | str, *, paths: Iterable[os.PathLike | str] | None = None,
               split_level: int | None = None, progress: ProgressFn | None = None) -> Plan:
    """Phase 1: parse, checksum and diff (no embedding); the manifest is saved with the result.

    `paths` limits the scan to those files and folders (absolute, or relative to root), as the watcher
    does; a path that no longer exists marks its notes removed. `split_level` None keeps the vault's
    current level (2 for a new vault); another value re-parses every note once. The engine is used
    only for its tokenizer, so that sections are cut where the model's token limit requires.
    """
    started = time.perf_counter()
    root = resolve_root(root)
    with vault_lock(root):
        manifest, warning = load_manifest(root)
        plan = Plan(root=str(root), manifest=manifest, warnings=[warning] if warning else [])
        embedder = engine.embedder
        level = split_level or (manifest.split_level if not manifest.fresh else 2)
        if not 1 <= level <= 6:
            raise ValueError(f"split_level must be from 1 to 6, got {level}")
        settings = (PARSER_VERSION, level, embedder.max_tokens, embedder.model_id)
        reparse = not manifest.fresh and settings != (manifest.parser, manifest.split_level, manifest.max_tokens,
                                                       manifest.model)
        manifest.parser, manifest.split_level, manifest.max_tokens, manifest.model = settings
        if manifest.fresh:
            manifest.dirty = True  # unknown engine state: phase 2 reconciles (adopts what is there)
        vfilter = VaultFilter(root)
        originals = kept.open_originals(engine)
        present, candidates = _candidates(root, manifest, vfilter, None if reparse else paths)
        plan.warnings += vfilter.warnings  # after the walk, which adds the links it skipped
        plan.skipped = list(vfilter.skipped)
        changed: dict[str, FileEntry] = {}
        removed: list[str] = []
        to_parse: list[tuple[str, bytes, os.stat_result, str]] = []
        restamped = False
        for rel in sorted(candidates):
            path = present.get(rel)
            old = manifest.files.get(rel)
            if path is None:
                if old is not None:
                    removed.append(rel)
                continue
            plan.files_scanned += 1
            try:
                st = path.stat()
                if (old is not None and not reparse and old.mtime_ns and st.st_size == old.size
                        and st.st_mtime_ns == old.mtime_ns):
                    plan.files_unchanged += 1
                    if originals is not None and not originals.has(kept.file_key(root, rel), old.sha256):
                        _keep_unchanged(originals, root, rel, path, old)  # indexed before originals were kept
                    continue
                data = _read_note(path, vfilter.max_note_bytes)
            except FileNotFoundError:
                if old is not None:
                    removed.append(rel)
                continue
            except _TooLarge as exc:  # it grew past the limit since the walk
                plan.skipped.append(rel)
                plan.warnings.append(f"{rel}: {exc}")
                if old is not None:
                    removed.append(rel)
                continue
            except OSError as exc:
                plan.warnings.append(f"{rel}: cannot be read ({exc.strerror or exc}); left as it was")
                plan.files_unchanged += 1
                continue
            digest = hashlib.sha256(data).hexdigest()
            if old is not None and not reparse and digest == old.sha256:
                old.size, old.mtime_ns = len(data), _trusted_mtime(st)
                restamped = True
                if originals is not None and not originals.has(kept.file_key(root, rel), digest):
                    kept.keep_version(originals, root, rel, data, old)
                plan.files_unchanged += 1
                continue
            to_parse.append((rel, data, st, digest))
        committed = commit_times(root, {rel: data for rel, data, _, _ in to_parse})
        for n, (rel, data, st, digest) in enumerate(to_parse):
            if progress is not None:
                progress(Progress(stage="parse", done=n, total=len(to_parse)))
            note = parse_note(data, split_level=level, max_tokens=embedder.max_tokens,
                              count_tokens=embedder.count_tokens)
            changed[rel] = _file_entry(rel, note, data, st, digest, committed.get(rel))
            plan.warnings += [f"{rel}: {w}" for w in note.warnings]
            if originals is not None:
                kept.keep_version(originals, root, rel, data, changed[rel])
        if progress is not None and to_parse:
            progress(Progress(stage="parse", done=len(to_parse), total=len(to_parse)))
        _diff(manifest, changed, removed)
        plan.files_changed, plan.files_removed = len(changed), len(removed)
        if originals is not None:
            for rel in removed:
                originals.removed(kept.file_key(root, rel))
            originals.save()
        if changed or removed or restamped or manifest.fresh or reparse:
            save_manifest(root, manifest)
        plan.seconds = round(time.perf_counter() - started, 3)
        return plan


def apply_plan(engine: Any, root: os.PathLike | str, plan: Plan | None = None, *,
               progress: ProgressFn | None = None, reconcile: bool | None = None,
               contradictions: bool = True, full: bool = False) -> IndexSummary:
    """Phase 2: make the engine hold what the manifest says (embed, remember, revise, forget, link).

    Without a plan, the saved manifest is applied (what the watcher does after its phase 1).
    `reconcile` None reconciles only after an interrupted run; True always checks the engine.
    """
    started = time.perf_counter()
    root = resolve_root(root)
    with vault_lock(root):
        if plan is None or plan.root != str(root):
            manifest, warning = load_manifest(root)
            plan = Plan(root=str(root), manifest=manifest, warnings=[warning] if warning else [])
        manifest = plan.manifest
        summary = IndexSummary(files_scanned=plan.files_scanned, files_unchanged=plan.files_unchanged,
                               files_changed=plan.files_changed, files_removed=plan.files_removed,
                               skipped=list(plan.skipped), warnings=list(plan.warnings))
        work = _Phase2(engine, root, manifest, summary, progress)
        if reconcile or (reconcile is None and (manifest.dirty or manifest.fresh)):
            work.reconcile(full)
        if work.has_work() or manifest.dirty:
            manifest.dirty = True
            save_manifest(root, manifest)
            work.run(contradictions)
            manifest.dirty = False
            save_manifest(root, manifest)
        elif work.save:
            # Only forgotten sections were recorded: the manifest before this save still names their
            # dead ids, so a lost save means the next run records them again. No fsync needed.
            save_manifest(root, manifest, durable=False)
        originals = kept.open_originals(engine)
        if originals is not None:
            kept.record_sections(originals, root, manifest)
            kept.finish(originals, engine)
        summary.sections_total = sum(1 for f in manifest.files.values() for s in f.sections if s.state != FORGOTTEN)
        summary.unresolved_links = len(resolve_links(manifest)[1])
        summary.seconds = round(plan.seconds + time.perf_counter() - started, 3)
        return summary


# Phase 1 helpers --------------------------------------------------------------------------------

def _candidates(root: Path, manifest: Manifest, vfilter: VaultFilter,
                paths: Iterable[os.PathLike | str] | None) -> tuple[dict[str, Path], set[str]]:
    """(notes present on disk among the candidates, every relative path to look at)."""
    rels: list[str] | None = None
    if paths is not None:
        rels = []
        for p in paths:
            rel = _relative(root, Path(p))
            if rel is None:
                continue
            if rel in ("", IGNORE_FILE):
                rels = None  # the vault itself, or its ignore rules, changed: look at everything
                break
            rels.append(rel)
    if rels is None:
        present = walk_notes(root, vfilter)
        return present, set(present) | set(manifest.files)
    present = walk_notes(root, vfilter, under=[r for r in rels if (root / r).is_dir()])
    real_root = os.path.realpath(root)
    for rel in rels:
        path = root / rel
        if vfilter.is_note(rel) and path.is_file() and vfilter.admit(rel, _size(path)):
            real = os.path.realpath(path)
            if real == real_root or real.startswith(real_root + os.sep):
                present[rel] = path
    known = {f for f in manifest.files for r in rels if f == r or f.startswith(r + "/")}
    if any(rel not in manifest.files for rel in present):
        # A new note may be a moved one whose old path was not reported yet (watchdog pairs move
        # events with a delay; a move into a new folder arrives as a create): look for notes that
        # vanished, so the new note's sections are matched to theirs in this same pass.
        known |= {f for f in manifest.files if not (root / f).is_file() or not vfilter.is_note(f)}
    return present, set(present) | known


def _relative(root: Path, path: Path) -> str | None:
    path = path if path.is_absolute() else root / path
    try:
        rel = Path(os.path.abspath(path)).relative_to(root)
    except ValueError:
        return None
    return rel.as_posix().strip("/") if str(rel) != "." else ""


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0  # gone since: the scan finds it removed


class _TooLarge(Exception):
    pass


def _read_note(path: Path, limit: int) -> bytes:
    """The file's bytes, never more than `limit` of them held (_TooLarge past it)."""
    with path.open("rb") as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise _TooLarge(f"over the {limit:,}-byte limit for a note ([notes] max_note_bytes in .hebbs/config.toml); "
                        f"not indexed")
    return data


def _keep_unchanged(originals: Any, root: Path, rel: str, path: Path, entry: FileEntry) -> None:
    try:
        data = path.read_bytes()
    except OSError:
        return
    if hashlib.sha256(data).hexdigest() == entry.sha256:
        kept.keep_version(originals, root, rel, data, entry)


def _trusted_mtime(st: os.stat_result) -> int:
    return 0 if time.time_ns() - st.st_mtime_ns < _RACY_NS else st.st_mtime_ns


def _file_entry(rel: str, note: ParsedNote, data: bytes, st: os.stat_result, digest: str,
                committed_at: int | None = None) -> FileEntry:
    """`committed_at`: the time of the git commit that last changed the file, when the file is what
    that commit holds (gitdates.py): a clone's mtimes are the clone's time, not the notes'."""
    fm = note.front_matter
    entity = fm.get("entity")
    importance = fm.get("importance")
    entry = FileEntry(
        sha256=digest, size=len(data), mtime_ns=_trusted_mtime(st),
        entity_id=_entity(entity.strip() if isinstance(entity, str) and entity.strip() else rel[:-3]),
        created_at=_front_matter_time(fm) or committed_at or st.st_mtime_ns // 1000,
        importance=float(importance) if isinstance(importance, (int, float)) and not isinstance(importance, bool)
        and 0.0 <= importance <= 1.0 else 0.5,
        front_matter=fm, tags=note.tags, warnings=note.warnings,
    )
    entry.sections = [_section_entry(rel, entry, s) for s in note.sections]
    return entry


def _entity(name: str) -> str:
    """Entity ids are at most 512 bytes: a longer path keeps its start and gets a digest of the rest."""
    raw = name.encode()
    if len(raw) <= 512:
        return name
    return raw[:480].decode(errors="ignore") + "~" + hashlib.sha256(raw).hexdigest()[:16]


def _front_matter_time(fm: dict[str, Any]) -> int | None:
    for key in ("created", "date", "updated"):
        value = fm.get(key)
        if not isinstance(value, str):
            continue
        try:
            when = dt.datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        except ValueError:
            continue
        if when.tzinfo is None:
            when = when.replace(tzinfo=dt.timezone.utc)
        if when.year >= 1970:
            return int(when.timestamp() * 1_000_000)
    return None


def _section_entry(rel: str, entry: FileEntry, s: Section) -> SectionEntry:
    out = SectionEntry(hash=s.hash, meta="", heading_path=s.heading_path, byte_start=s.byte_start,
                       byte_end=s.byte_end, level=s.level, chunk=s.chunk, chunks=s.chunks, tags=s.tags,
                       links=s.links, content=s.content)
    out.meta = _meta_hash(rel, entry, out)
    return out


def section_context(rel: str, entry: FileEntry, s: SectionEntry, vault_id: str) -> dict[str, Any]:
    """The context of a section's memory (documented in docs/notes.md)."""
    ctx: dict[str, Any] = {
        "origin": ORIGIN, "vault": vault_id, "file": rel, "heading_path": list(s.heading_path),
        "byte_start": s.byte_start, "byte_end": s.byte_end, "chunk": s.chunk, "chunks": s.chunks,
        "section_hash": s.hash,
    }
    tags = list(dict.fromkeys(entry.tags + s.tags))
    if tags:
        ctx["tags"] = tags
    if s.links:
        ctx["links"] = list(dict.fromkeys(link_text(link) for link in s.links))
    if entry.front_matter:
        ctx["front_matter"] = entry.front_matter
        kind = entry.front_matter.get("type")
        if isinstance(kind, str) and kind.strip():
            # The note's kind is the memory's context type, as for a remembered memory: its decay
            # half-life is its recency window in recall and its pace of decay (docs/decay.md).
            ctx["type"] = kind.strip()
    return ctx


def _source(rel: str, s: SectionEntry) -> Source:
    return Source(file_path=rel, heading_path=list(s.heading_path), byte_start=s.byte_start, byte_end=s.byte_end)


def _meta_hash(rel: str, entry: FileEntry, s: SectionEntry) -> str:
    record = (section_context(rel, entry, s, ""), entry.entity_id, entry.importance)
    return hashlib.sha256(msgspec.json.encode(record)).hexdigest()[:24]


class _Old(msgspec.Struct, array_like=True):
    memory_id: str
    hash: str  # "" when the engine's text for this id is not known to match (it was awaiting a revise)
    meta: str
    file: str
    heading_path: tuple[str, ...]
    chunk: int
    state: str
    position: int  # index among its file's sections; -1 for an orphan


def _diff(manifest: Manifest, changed: dict[str, FileEntry], removed: list[str]) -> None:
    """Give the sections of changed files their memory ids and states; collect orphans."""
    pool: list[_Old] = []
    forgotten: Counter[str] = Counter()  # hashes of forgotten sections in the files looked at
    for rel in list(changed) + removed:
        old = manifest.files.get(rel)
        for position, s in enumerate(old.sections if old else ()):
            if s.state == FORGOTTEN:
                forgotten[s.hash] += 1
            elif s.memory_id:
                pool.append(_Old(s.memory_id, s.hash if s.state != STALE else "", s.meta, rel,
                                 tuple(s.heading_path), s.chunk, s.state, position))
    for o in manifest.orphans:
        pool.append(_Old(o.memory_id, o.hash, "", o.file, tuple(o.heading_path), o.chunk, META, -1))
    claimed: set[int] = set()
    indexes: list[Callable[[str, Any], tuple]] = [
        lambda rel, h: (h.hash, rel, tuple(h.heading_path), h.chunk),
        lambda rel, h: (h.hash, rel),
        lambda rel, h: (h.hash,),
    ]
    by_key: list[dict[tuple, list[int]]] = [{}, {}, {}]
    for i, old in enumerate(pool):
        if old.hash:
            by_key[0].setdefault((old.hash, old.file, old.heading_path, old.chunk), []).append(i)
            by_key[1].setdefault((old.hash, old.file), []).append(i)
            by_key[2].setdefault((old.hash,), []).append(i)
    by_path: dict[tuple, list[int]] = {}
    by_position: dict[tuple, list[int]] = {}
    for i, old in enumerate(pool):
        by_path.setdefault((old.file, old.heading_path, old.chunk), []).append(i)
        by_position.setdefault((old.file, old.position), []).append(i)

    def claim(candidates: list[int] | None) -> int | None:
        for i in candidates or ():
            if i not in claimed:
                claimed.add(i)
                return i
        return None

    sections = [(rel, s) for rel, entry in changed.items() for s in entry.sections]
    positions = [n for entry in changed.values() for n in range(len(entry.sections))]
    matched: dict[int, int] = {}  # position in `sections` -> pool index
    for level, key in enumerate(indexes):
        for pos, (rel, s) in enumerate(sections):
            if pos not in matched and (i := claim(by_key[level].get(key(rel, s)))) is not None:
                matched[pos] = i
                old = pool[i]
                s.memory_id = old.memory_id
                s.state = worst(old.state, SYNCED if old.meta == s.meta else META)
    # Changed text: the same heading path in the same file is the same section (a revise); failing
    # that, a section left unmatched at the same place in the same file (its heading was renamed).
    for by, key in ((by_path, lambda pos, rel, s: (rel, tuple(s.heading_path), s.chunk)),
                    (by_position, lambda pos, rel, s: (rel, positions[pos]))):
        for pos, (rel, s) in enumerate(sections):
            if pos not in matched and (i := claim(by.get(key(pos, rel, s)))) is not None:
                matched[pos] = i
                s.memory_id, s.state = pool[i].memory_id, STALE
    for pos, (_rel, s) in enumerate(sections):
        if pos not in matched:
            s.memory_id, s.state = None, STALE
            if forgotten[s.hash] > 0:
                # A note edited elsewhere, or moved, keeps a forgotten section forgotten: only a change
                # of its own text brings it back.
                forgotten[s.hash] -= 1
                s.state = FORGOTTEN
    for _rel, s in sections:
        if s.state != STALE:
            s.content = None  # only stale sections carry their text to phase 2
    for rel in removed:
        manifest.files.pop(rel, None)
    manifest.files.update(changed)
    manifest.orphans = [Orphan(old.memory_id, old.hash, old.file, list(old.heading_path), old.chunk)
                        for i, old in enumerate(pool) if i not in claimed]


# Phase 2 ----------------------------------------------------------------------------------------

class _Phase2:
    def __init__(self, engine: Any, root: Path, manifest: Manifest, summary: IndexSummary,
                 progress: ProgressFn | None) -> None:
        self.engine = engine
        self.root = root
        self.manifest = manifest
        self.summary = summary
        self.progress = progress
        self.force_edges = False
        self.save = False  # the manifest changed without phase-2 work (a forgotten section left out)
        self.adopted: list[str] = []
        self._texts: dict[str, dict[str, str]] = {}
        self._unkeyed: set[int] = set()
        self._done = self._total = 0

    def has_work(self) -> bool:
        return bool(self.manifest.orphans) or any(
            s.state not in (SYNCED, FORGOTTEN) for f in self.manifest.files.values() for s in f.sections)

    def _report(self, stage: str, done: int, total: int) -> None:
        if self.progress is not None:
            self.progress(Progress(stage=stage, done=done, total=total))

    # -- reconcile --

    def reconcile(self, full: bool = False) -> None:
        """Make the manifest agree with the engine (see the module docstring). `full`: every section of
        this checkout the vault does not hold is written again, even one forgotten after a complete run."""
        manifest = self.manifest
        dedicated = Path(self.engine.path) == self.root / ".hebbs"
        # A vault shared by several checkouts of the tree: a note this checkout neither holds nor ever
        # indexed was brought by another checkout (another branch, a teammate behind or ahead). Its
        # memories are that checkout's to remove: they are listed here as `elsewhere`, never orphaned.
        shared = self.engine.vault.store.shared
        named_before = manifest.memory_ids()
        elsewhere: dict[str, int] = {}
        mine: dict[str, Memory] = {}
        for memory in self.engine.memories():
            ctx = memory.context
            if ctx.get("origin") != ORIGIN or memory.kind == MemoryKind.REVISION:
                continue
            if shared and ctx.get("file") not in manifest.files and memory.id not in named_before:
                if not manifest.vault_id or ctx.get("vault") == manifest.vault_id:
                    elsewhere[str(ctx.get("file", ""))] = elsewhere.get(str(ctx.get("file", "")), 0) + 1
                continue
            # A manifest rebuilt from scratch adopts the vault memories of an engine kept in this vault.
            if ctx.get("vault") == manifest.vault_id or (manifest.fresh or not manifest.vault_id) and dedicated:
                mine[memory.id] = memory
        if not manifest.vault_id and mine:
            ids = Counter(m.context.get("vault") for m in mine.values())
            manifest.vault_id = str(ids.most_common(1)[0][0] or ULID())
        manifest.vault_id = manifest.vault_id or _new_vault_id(self.engine)
        fixed = 0
        # After a complete run (the manifest is clean) a memory can only be missing because it was
        # forgotten (hebbs forget, a decay sweep): that is not a repair but a wish, kept until the
        # section's text changes. Its edges went with it, so nothing else is rewritten and nothing is
        # embedded: the next index costs what an unchanged one costs.
        complete = not manifest.dirty and not manifest.fresh and not full
        # Sections whose memory the engine lost are written again; texts the engine holds are trusted
        # only when its recorded hash matches.
        waiting: dict[tuple, list[SectionEntry]] = {}
        by_hash: dict[str, list[SectionEntry]] = {}
        left_out: set[str] = set()
        for rel, entry in manifest.files.items():
            for s in entry.sections:
                memory = mine.get(s.memory_id) if s.memory_id else None
                if s.memory_id and memory is None and complete and s.state != STALE:
                    left_out.add(s.memory_id)
                    s.memory_id, s.state, s.content = None, FORGOTTEN, None
                    continue
                if s.state == FORGOTTEN:
                    if not full:
                        continue
                    s.state, s.content = STALE, self._read_content(rel, s)
                    fixed += 1
                if s.memory_id and memory is None:
                    s.memory_id, s.state = None, STALE
                    s.content = s.content or self._read_content(rel, s)
                    fixed += 1
                if s.memory_id is None:
                    waiting.setdefault((rel, tuple(s.heading_path), s.chunk, s.hash), []).append(s)
                    by_hash.setdefault(s.hash, []).append(s)
                elif memory is not None and memory.context.get("section_hash") != s.hash and s.state != STALE:
                    s.state = STALE
                    s.content = s.content or self._read_content(rel, s)
                    fixed += 1
        if left_out:
            # Their edges went with the forget: the manifest stops recording them, and is saved even
            # when nothing else is to be done, so the forget is reported once.
            manifest.edges = [e for e in manifest.edges if e[0] not in left_out and e[1] not in left_out]
            self.summary.forgotten_left_out = len(left_out)
            self.save = True
        manifest.orphans = [o for o in manifest.orphans if o.memory_id in mine]
        named = manifest.memory_ids()
        for mid, memory in mine.items():
            if mid in named:
                continue
            ctx = memory.context
            key = (ctx.get("file"), tuple(ctx.get("heading_path") or ()), ctx.get("chunk", 0), ctx.get("section_hash"))
            s = _pop_free(waiting.get(key)) or _pop_free(by_hash.get(ctx.get("section_hash") or ""))
            fixed += 1
            if s is not None and memory.content == s.content:
                s.memory_id, s.state, s.content = mid, META, None  # written by the interrupted run: keep it
                self.adopted.append(mid)  # its contradiction check may not have happened
            else:
                manifest.orphans.append(Orphan(mid, "", str(ctx.get("file", "")), list(ctx.get("heading_path") or []),
                                               int(ctx.get("chunk", 0) or 0)))
        # Metadata of adopted memories: rewrite only what differs from the engine.
        for rel, entry in manifest.files.items():
            for s in entry.sections:
                if s.state == META and s.memory_id in mine and self._record_matches(rel, entry, s, mine[s.memory_id]):
                    s.state = SYNCED
        if shared and elsewhere != manifest.elsewhere:
            manifest.elsewhere = elsewhere
            self.save = True
        self.summary.reconciled += fixed
        # Edges are re-put (idempotent) when the engine and the manifest disagreed about anything.
        self.force_edges = fixed > 0 or manifest.dirty

    def _record_matches(self, rel: str, entry: FileEntry, s: SectionEntry, memory: Memory) -> bool:
        return (memory.context == section_context(rel, entry, s, self.manifest.vault_id)
                and memory.entity_id == entry.entity_id and memory.importance == entry.importance
                and memory.source == _source(rel, s))

    def _read_content(self, rel: str, s: SectionEntry) -> str | None:
        """The text of a synced section (the manifest keeps no text once synced): parse its file again.
        None when the file no longer holds that text; the next scan will see the change."""
        if rel not in self._texts:
            try:
                data = (self.root / rel).read_bytes()
            except OSError:
                data = b""
            note = parse_note(data, split_level=self.manifest.split_level, max_tokens=self.manifest.max_tokens,
                              count_tokens=self.engine.embedder.count_tokens)
            self._texts[rel] = {section.hash: section.content for section in note.sections}
        return self._texts[rel].get(s.hash)

    # -- run --

    def run(self, contradictions: bool) -> None:
        engine, manifest, summary = self.engine, self.manifest, self.summary
        manifest.vault_id = manifest.vault_id or _new_vault_id(engine)
        vault_id = manifest.vault_id
        if manifest.orphans:
            gone = [o.memory_id for o in manifest.orphans]
            summary.sections_removed += engine.forget(ids=gone)
            manifest.orphans = []
        adds: list[tuple[str, FileEntry, SectionEntry]] = []
        revises: list[tuple[str, FileEntry, SectionEntry]] = []
        updates: list[tuple[str, FileEntry, SectionEntry]] = []
        for rel, entry in manifest.files.items():
            for s in entry.sections:
                if s.state == STALE and s.content is None:
                    s.content = self._read_content(rel, s)
                    if s.content is None:
                        continue  # the file changed again since phase 1: the next scan takes it
                if s.state == STALE and s.memory_id is None:
                    adds.append((rel, entry, s))
                elif s.state == STALE:
                    revises.append((rel, entry, s))
                elif s.state == META:
                    updates.append((rel, entry, s))
        claims = _claims(engine)
        if claims is None:
            revises = self._needing_embedding(revises, adds, updates)
        self._done, self._total = 0, len(adds) + len(revises)
        if self._total:
            self._report("embed", 0, self._total)
        if claims is None:
            touched = self._embed(adds, revises, vault_id)
        else:
            touched = self._embed_shared(claims, adds, revises, updates, vault_id)
        for start in range(0, len(updates), BATCH):
            batch = updates[start:start + BATCH]
            engine.revise_many([self._revision(rel, entry, s, vault_id, content=False) for rel, entry, s in batch])
            for _, _, s in batch:
                s.state, s.content = SYNCED, None
            summary.sections_updated += len(batch)
        self._link()
        touched += self.adopted
        if contradictions and touched:
            self._contradictions(touched)

    def _needing_embedding(self, revises: list[tuple[str, FileEntry, SectionEntry]],
                           adds: list[tuple[str, FileEntry, SectionEntry]],
                           updates: list[tuple[str, FileEntry, SectionEntry]]) -> list[tuple[str, FileEntry, SectionEntry]]:
        """The revises whose text must be embedded. One whose text the engine already has (an
        interrupted run, or another indexer, wrote it) joins updates; one whose memory is gone, adds."""
        embed_revises: list[tuple[str, FileEntry, SectionEntry]] = []
        for item in revises:
            rel, entry, s = item
            try:
                memory = self.engine.get(s.memory_id)
            except NotFound:
                s.memory_id = None
                adds.append(item)
                continue
            if memory.content == s.content:
                updates.append(item)
            else:
                embed_revises.append(item)
        return embed_revises

    def _embed(self, adds: list[tuple[str, FileEntry, SectionEntry]],
               embed_revises: list[tuple[str, FileEntry, SectionEntry]], vault_id: str, *,
               keyed: bool = False) -> list[str]:
        """Revise and remember what needs the model; returns the ids written. `keyed`: each section is
        remembered under a key naming it (a shared vault: another indexer may have stored it already,
        and it is then adopted, not embedded)."""
        engine, summary = self.engine, self.summary
        if keyed:
            adds = self._adopt(adds, vault_id)
        # Longest-first order across the whole run: every batch the engine hands the model then
        # holds texts of nearly one length, so almost no padding is computed (document order pads
        # short texts to long ones in every batch). Document order survives in created_at (see _created_at).
        adds.sort(key=lambda item: len(item[2].content or ""), reverse=True)
        embed_revises.sort(key=lambda item: len(item[2].content or ""), reverse=True)
        touched: list[str] = []
        for start in range(0, len(embed_revises), BATCH):
            batch = embed_revises[start:start + BATCH]
            engine.revise_many([self._revision(rel, entry, s, vault_id, content=True) for rel, entry, s in batch])
            for _, _, s in batch:
                s.state, s.content = SYNCED, None
                touched.append(s.memory_id)
            self._done += len(batch)
            summary.sections_revised += len(batch)
            summary.embedded += len(batch)
            self._report("embed", self._done, self._total)
        for start in range(0, len(adds), BATCH):
            batch = adds[start:start + BATCH]
            memories = engine.remember_many([{
                "content": s.content, "importance": entry.importance, "entity_id": entry.entity_id,
                "context": section_context(rel, entry, s, vault_id), "created_at": _created_at(entry, s),
                "kind": MemoryKind.EPISODE, "source": _source(rel, s),
                **({"key": _section_key(vault_id, rel, entry, s)} if keyed and id(s) not in self._unkeyed else {}),
            } for rel, entry, s in batch], consolidate=False)  # one memory per section, even a repeated one
            for (_, _, s), memory in zip(batch, memories):
                s.memory_id, s.state, s.content = memory.id, SYNCED, None
                touched.append(memory.id)
            self._done += len(batch)
            summary.sections_added += len(batch)
            summary.embedded += len(batch)
            self._report("embed", self._done, self._total)
        return touched

    def _adopt(self, adds: list[tuple[str, FileEntry, SectionEntry]],
               vault_id: str) -> list[tuple[str, FileEntry, SectionEntry]]:
        """Sections another indexer of this shared vault stored already (found by their key, with the same
        text) take its memory; returns the rest."""
        if not adds:
            return adds
        keys = [_section_key(vault_id, rel, entry, s) for rel, entry, s in adds]
        store = self.engine.vault.store
        ids = idempotency.lookup_many(store, keys)
        named = [mid for mid in ids if mid]
        found = {mid: m for mid, m in zip(named, store.get_memories(named)) if m is not None}
        rest = []
        for item, mid in zip(adds, ids):
            memory = found.get(mid) if mid else None
            if memory is not None and memory.content == item[2].content:
                item[2].memory_id, item[2].state, item[2].content = mid, SYNCED, None
                self._done += 1
                continue
            if mid:
                # The key names a memory whose text changed since (revised): this section gets its own.
                self._unkeyed.add(id(item[2]))
            rest.append(item)
        return rest

    def _embed_shared(self, claims: Any, adds: list[tuple[str, FileEntry, SectionEntry]],
                      revises: list[tuple[str, FileEntry, SectionEntry]],
                      updates: list[tuple[str, FileEntry, SectionEntry]], vault_id: str) -> list[str]:
        """_embed for a vault several indexers share (docs/scale.md): each note file at its version is a
        unit claimed in the store, so every file is embedded by one of them; what the others did is
        adopted at the end, and a killed indexer's units are taken over once its lease lapses."""
        work: dict[tuple[str, str], list[tuple[str, tuple[str, FileEntry, SectionEntry]]]] = {}
        for kind, items in (("add", adds), ("revise", revises)):
            for item in items:
                work.setdefault((item[0], item[1].sha256), []).append((kind, item))
        if not work:
            return []
        units = list(work)
        per_claim = max(1, round(CLAIM_SECTIONS * len(units) / sum(map(len, work.values()))))
        touched: list[str] = []
        mine: set[tuple[str, str]] = set()
        claims.register(units)
        try:
            while True:
                taken = [(unit, version) for unit, version, _ in claims.take(units, per_claim)]
                if not taken:
                    if not claims.unfinished(units):
                        break
                    self._report("embed", self._done, self._total)  # a cancel lands here too
                    time.sleep(CLAIM_POLL)
                    continue
                touched += self._embed_units([work[unit] for unit in taken], updates, vault_id)
                claims.finish(taken)
                mine.update(taken)
        finally:
            claims.close()
        self._embed_units([work[unit] for unit in units if unit not in mine], updates, vault_id)
        return touched

    def _embed_units(self, units: list[list[tuple[str, tuple[str, FileEntry, SectionEntry]]]],
                     updates: list[tuple[str, FileEntry, SectionEntry]], vault_id: str) -> list[str]:
        adds = [item for unit in units for kind, item in unit if kind == "add"]
        before = len(updates)
        revises = self._needing_embedding([item for unit in units for kind, item in unit if kind == "revise"],
                                          adds, updates)
        self._done += len(updates) - before
        return self._embed(adds, revises, vault_id, keyed=True)

    def _revision(self, rel: str, entry: FileEntry, s: SectionEntry, vault_id: str, *, content: bool) -> dict[str, Any]:
        return {"id": s.memory_id, "content": s.content if content else None, "importance": entry.importance,
                "context": section_context(rel, entry, s, vault_id), "entity_id": entry.entity_id,
                "source": _source(rel, s)}

    # -- links --

    def _link(self) -> None:
        manifest, summary = self.manifest, self.summary
        desired, _ = resolve_links(manifest)
        recorded = {tuple(e) for e in manifest.edges}
        add = desired if self.force_edges else desired - recorded
        remove = recorded - desired
        for source, target in sorted(add):
            try:
                self.engine.add_edge(source, "RELATED_TO", target, 1.0)
            except NotFound:
                continue
            if (source, target) not in recorded:
                summary.edges_added += 1
        if remove:
            summary.edges_removed += remove_edges(self.engine, sorted(remove))
        manifest.edges = sorted(desired)

    # -- contradictions --

    def _contradictions(self, ids: list[str]) -> None:
        def same_section(a: Memory, b: Memory) -> bool:
            # Chunks of one section overlap on purpose; they are not two claims.
            return (a.source is not None and b.source is not None and a.source.file_path == b.source.file_path
                    and a.source.heading_path == b.source.heading_path)

        found = contradiction_check.find_candidates(
            self.engine, ids, skip=same_section,
            progress=lambda done, total: self._report("check", done, total))
        if found:
            before = len(self.engine.pending())
            self.engine.add_pending(found)
            self.summary.contradiction_candidates += len(self.engine.pending()) - before


def _created_at(entry: FileEntry, s: SectionEntry) -> int:
    """The note's time plus the section's place in it (in microseconds), so that an entity's memories
    sort, and chain with FOLLOWED_BY edges, in document order whatever order they are written in."""
    for n, other in enumerate(entry.sections):
        if other is s:
            return entry.created_at + n
    return entry.created_at


def _claims(engine: Any) -> Any:
    """The store's work claims when several indexers may share this vault (one kept in PostgreSQL), else None."""
    return engine.vault.store.work_claims(engine.config.store.claim_lease)


def _new_vault_id(engine: Any) -> str:
    """A new id for this notes tree's memories (context "vault"); in a shared vault, the one every
    indexer of the tree uses, whichever of them asked first."""
    proposed, store = str(ULID()), engine.vault.store
    return store.agreed_meta("notes/vault_id", proposed) if store.shared else proposed


def _section_key(vault_id: str, rel: str, entry: FileEntry, s: SectionEntry) -> str:
    """The idempotency key of a section in one version of its file: the same in every indexer of the tree."""
    name = msgspec.json.encode([vault_id, rel, entry.sha256, s.heading_path, s.chunk, s.hash])
    return "notes/" + hashlib.sha256(name).hexdigest()[:40]


def _pop_free(items: list[SectionEntry] | None) -> SectionEntry | None:
    while items:
        s = items.pop(0)
        if s.memory_id is None:
            return s
    return None
