"""Contradiction review: candidates come in (vault indexing, remember), verdicts go out as edges or supersession.

Candidates are found by the heuristic classifier of hebbs/workflows/contradiction_check.py and queued in the `pending`
family. `prepare` shows them with both memories in full; `commit` applies verdicts:

    contradiction  CONTRADICTS edges both ways (and, for a notes folder's vault, a report in ROOT/contradictions/)
    revision       the older memory is superseded by the newer one (superseded_by + REVISED_FROM edge,
                   as remember(supersedes=...) does)
    neutral        the candidate is dismissed

Every verdict of a commit, and the removal of its pending entries, is one RocksDB batch: a crash
leaves either all of it or none.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import msgspec

from ..recall import analogical
from . import contradiction_check
from ..errors import InvalidInput, NotFound
from .reflect import _iso, _now, notes_root, notes_subdir, slug, wiki_link, write_note
from ..schema import (ContradictionCandidate, ContradictionCommitted, ContradictionPrepared, ContradictionVerdict,
                     Edge, EdgeType, Memory, MemoryKind, PendingContradiction)
from ..core.open_vault import HasVault, OpenVault, vault_of
from ..store.storage import WriteSet, decode, id_bytes


VERDICTS = ("contradiction", "revision", "neutral")


# Finding candidates at remember time ---------------------------------------------------------

def queue_for_new(engine: OpenVault | HasVault, memories: Sequence[Memory]) -> int:
    """Queue contradiction candidates between new memories and their nearest neighbours; how many were queued.

    Sections of a notes folder (memories with a source) are left to the indexer, which checks them
    once the whole run is written and knows which chunks belong to one section. Insights restate
    their sources by design, so they are neither checked nor checked against.
    """
    vault = vault_of(engine)
    settings = vault.config.contradictions
    ids = [m.id for m in memories if m.source is None and m.kind == MemoryKind.EPISODE]
    if not ids:
        return 0
    found = contradiction_check.find_candidates(
        vault, ids, k=settings.neighbors, min_similarity=settings.min_similarity, threshold=settings.threshold,
        skip=lambda a, b: MemoryKind.INSIGHT in (a.kind, b.kind))
    if not found:
        return 0
    link_changes(vault, found)
    return vault.add_pending(found)


def link_changes(vault: OpenVault, found: Sequence[PendingContradiction]) -> list[Memory]:
    """Record each candidate that is a changed value (contradiction_check.value_change: "numbers
    differ: 3 vs 2" of one statement, about the same entity) on the older memory: newer_value, what
    changed and valid_until. Recall then ranks the newer first and keeps the older, marked, instead
    of dropping it as a restatement (docs/honesty.md "What is true now"). The candidate stays queued:
    a verdict can still make it a revision (hidden), a contradiction (both marked) or neutral (the link
    is undone). An older memory linked already keeps its first newer value (2 -> 3 -> 4 is a chain)."""
    changed: dict[str, Memory] = {}
    with vault.writing():
        changes = [(item, values) for item in found
                   if (values := contradiction_check.value_change(item.reasons)) is not None]
        # A memory that differs by one value from several current ones is an item of a series
        # ("note 7: ...", "note 14: ...", a numbered crane each), not a value that changed: no link.
        current_partners: Counter[str] = Counter()
        for item, _ in changes:
            for one, other in ((item.memory_a, item.memory_b), (item.memory_b, item.memory_a)):
                partner = vault.memory(other)
                if partner is not None and partner.newer_value is None:
                    current_partners[one] += 1
        for item, values in changes:
            if current_partners[item.memory_a] > 1 or current_partners[item.memory_b] > 1:
                continue
            a = changed.get(item.memory_a) or vault.memory(item.memory_a)
            b = changed.get(item.memory_b) or vault.memory(item.memory_b)
            if a is None or b is None or a.entity_id != b.entity_id:
                continue
            older, newer = sorted((a, b), key=lambda m: (m.created_at, m.id))
            if older.newer_value is not None or older.superseded_by is not None or older.created_at == newer.created_at:
                continue
            before, after = values if older.id == a.id else values[::-1]
            changed[older.id] = msgspec.structs.replace(older, newer_value=newer.id, valid_until=newer.created_at,
                                                        value_change=f"{before} -> {after}")
            if newer.older_value is None:
                changed[newer.id] = msgspec.structs.replace(newer, older_value=older.id)
        if changed:
            writes = WriteSet()
            for memory in changed.values():
                writes.put_memory(memory)
            vault.apply(writes, saved=list(changed.values()))
    return list(changed.values())


def unlinked(memory: Memory, other: Memory) -> Memory:
    """memory without its value link to other, either way: a verdict said they are not one value changed."""
    if memory.older_value == other.id:
        memory = msgspec.structs.replace(memory, older_value=None)
    if memory.newer_value != other.id:
        return memory
    return msgspec.structs.replace(memory, newer_value=None, value_change=None,
                                   valid_until=None if memory.superseded_by is None else memory.valid_until)


# Prepare -------------------------------------------------------------------------------------

def prepare(engine: OpenVault | HasVault, *, max_results: int = 100) -> ContradictionPrepared:
    if isinstance(max_results, bool) or not isinstance(max_results, int) or max_results < 1:
        raise InvalidInput(f"max_results must be a positive integer, got {max_results!r}")
    vault = vault_of(engine)
    candidates: list[ContradictionCandidate] = []
    stale: list[bytes] = []
    for key, raw in vault.store.scan("pending"):
        item = decode(raw, PendingContradiction)
        a, b = vault.store.get_memory(item.memory_a), vault.store.get_memory(item.memory_b)
        # A side that was forgotten or replaced since settles the question.
        if a is None or b is None or a.superseded_by is not None or b.superseded_by is not None:
            stale.append(key)
            continue
        candidates.append(ContradictionCandidate(
            pending_id=item.id, memory_a=a, memory_b=b, similarity=item.similarity, confidence=item.confidence,
            reasons=item.reasons, created_at=item.created_at))
    if stale:
        with vault.writing():
            writes = WriteSet()
            for key in stale:
                writes.delete("pending", key)
            vault.store.commit(writes)
    candidates.sort(key=lambda c: (-c.confidence, -c.similarity, c.pending_id))
    return ContradictionPrepared(candidates=candidates[:max_results], dropped=len(stale))


# Commit --------------------------------------------------------------------------------------

def parse_verdicts(verdicts: Any) -> list[ContradictionVerdict]:
    if isinstance(verdicts, (str, bytes, dict)) or not isinstance(verdicts, Sequence):
        raise InvalidInput("verdicts must be a list of {pending_id, verdict}")
    if not verdicts:
        raise InvalidInput("verdicts is empty: nothing to commit")
    out: list[ContradictionVerdict] = []
    seen: set[str] = set()
    for n, item in enumerate(verdicts):
        try:
            parsed = item if isinstance(item, ContradictionVerdict) else msgspec.convert(item, ContradictionVerdict)
        except msgspec.ValidationError as exc:
            raise InvalidInput(f"verdict {n}: {exc}") from None
        verdict = parsed.verdict.strip().lower()
        if verdict not in VERDICTS:
            raise InvalidInput(f"verdict {n} is {parsed.verdict!r}; it must be one of {', '.join(VERDICTS)}")
        if isinstance(parsed.confidence, bool) or not 0.0 <= parsed.confidence <= 1.0:
            raise InvalidInput(f"verdict {n} confidence must be from 0 to 1, got {parsed.confidence}")
        pending_id = parsed.pending_id.strip().upper()
        if pending_id in seen:
            raise InvalidInput(f"pending candidate {pending_id} has two verdicts")
        seen.add(pending_id)
        out.append(msgspec.structs.replace(parsed, pending_id=pending_id, verdict=verdict))
    return out


def load_verdicts_file(raw: bytes | str) -> list[ContradictionVerdict]:
    """The file `hebbs contradiction-commit --file` reads: {"verdicts": [...]} or the bare list."""
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise InvalidInput(f"the verdicts file is not valid JSON: {exc}") from None
    if isinstance(data, dict):
        if "verdicts" not in data:
            raise InvalidInput('the verdicts file must be {"verdicts": [{"pending_id": "...", "verdict": "..."}]}')
        data = data["verdicts"]
    return parse_verdicts(data)


def commit(engine: OpenVault | HasVault, verdicts: Any) -> ContradictionCommitted:
    parsed = parse_verdicts(verdicts)
    vault = vault_of(engine)

    result = ContradictionCommitted()
    reports: list[tuple[PendingContradiction, Memory, Memory, ContradictionVerdict]] = []
    root = notes_root(vault)
    if root is not None and vault.config.notes.write and any(v.verdict == "contradiction" for v in parsed):
        notes_subdir(root, vault.config.notes.contradictions_dir)  # refuse before recording anything
    with vault.writing():
        stamp = _now()
        writes = WriteSet()
        changed: dict[str, Memory] = {}  # memories this batch rewrites, so two verdicts see each other

        def memory(mid: str) -> Memory:
            found = changed.get(mid) or vault.store.get_memory(mid)
            if found is None:
                raise NotFound(f"memory {mid} of a pending candidate was forgotten; dismiss it as neutral")
            return found

        for v in parsed:
            raw = _pending_raw(engine, v.pending_id)
            item = decode(raw, PendingContradiction)
            writes.delete("pending", id_bytes(item.id))
            if v.verdict == "neutral":
                result.dismissed.append(item.id)
                a, b = changed.get(item.memory_a) or vault.store.get_memory(item.memory_a), \
                    changed.get(item.memory_b) or vault.store.get_memory(item.memory_b)
                if a is not None and b is not None:
                    for one, other in ((a, b), (b, a)):
                        if other.id in (one.newer_value, one.older_value):
                            changed[one.id] = unlinked(one, other)
                            writes.put_memory(changed[one.id])
                continue
            a, b = memory(item.memory_a), memory(item.memory_b)
            if v.verdict == "contradiction":
                # Which of the two is true is not known: neither is the other's older value.
                a = msgspec.structs.replace(unlinked(a, b), conflicts_with=sorted({*a.conflicts_with, b.id}))
                b = msgspec.structs.replace(unlinked(b, a), conflicts_with=sorted({*b.conflicts_with, a.id}))
                for one in (a, b):
                    changed[one.id] = one
                    writes.put_memory(one)
                for source, target in ((a.id, b.id), (b.id, a.id)):
                    writes.put_edge(source, EdgeType.CONTRADICTS, target, v.confidence, stamp)
                    result.edges.append(Edge(source=source, target=target, edge_type=EdgeType.CONTRADICTS.name,
                                             confidence=v.confidence, created_at=stamp))
                result.contradictions.append(item.id)
                reports.append((item, a, b, v))
                continue
            older, newer = sorted((a, b), key=lambda m: (m.created_at, m.id))
            if older.superseded_by is not None:
                raise InvalidInput(f"pending {item.id}: memory {older.id} is already superseded by "
                                   f"{older.superseded_by}")
            older = msgspec.structs.replace(older, superseded_by=newer.id, valid_until=newer.created_at, updated_at=stamp)
            changed[older.id] = older
            writes.put_memory(older)
            writes.put_edge(newer.id, EdgeType.REVISED_FROM, older.id, 1.0, stamp)
            result.edges.append(Edge(source=newer.id, target=older.id, edge_type=EdgeType.REVISED_FROM.name,
                                     confidence=1.0, created_at=stamp))
            result.revisions.append(item.id)
            result.superseded.append(older.id)
        analogical.refresh_structure(vault.store, writes)
        # The catalog must learn what was superseded.
        vault.apply(writes, saved=list(changed.values()))
    if root is not None and vault.config.notes.write:
        for item, a, b, v in reports:
            try:
                result.files.append(str(write_report(
                    notes_subdir(root, vault.config.notes.contradictions_dir, create=True), item, a, b, v, stamp)))
            except (OSError, InvalidInput) as exc:
                result.warnings.append(f"contradiction {item.id} is recorded, but its report could not be "
                                       f"written: {exc}")
    return result


def _pending_raw(engine: OpenVault | HasVault, pending_id: str) -> bytes:
    try:
        key = id_bytes(pending_id)
    except ValueError:
        raise InvalidInput(f"pending_id {pending_id!r} is not a valid id (a 26-character ULID)") from None
    raw = vault_of(engine).store.get("pending", key)
    if raw is None:
        raise NotFound(f"no pending contradiction candidate {pending_id} (`hebbs contradictions` lists the pending ones)")
    return raw


# The markdown report -------------------------------------------------------------------------

def write_report(folder: Path, item: PendingContradiction, a: Memory, b: Memory, verdict: ContradictionVerdict,
                 stamp: int) -> Path:
    lines = [
        "---",
        "kind: contradiction",
        f"pending_id: {item.id}",
        f"memory_a: {a.id}",
        f"memory_b: {b.id}",
        f"confidence: {verdict.confidence:g}",
        f"heuristic_confidence: {item.confidence:g}",
        f"similarity: {item.similarity:g}",
        f"confirmed: {_iso(stamp)}",
        "---",
        "",
        f"# Contradiction: {_short(a.content)} / {_short(b.content)}",
        "",
        f"Confirmed {_iso(stamp)[:10]} with confidence {verdict.confidence:g}. The heuristic flagged the pair "
        f"with confidence {item.confidence:g} at similarity {item.similarity:g}.",
        "",
    ]
    if verdict.note.strip():
        lines += [f"Note: {verdict.note.strip()}", ""]
    if item.reasons:
        lines += ["Why it was flagged:", ""] + [f"- {r}" for r in item.reasons] + [""]
    for label, m in (("A", a), ("B", b)):
        where = "remembered directly"
        if m.source is not None:
            where = " › ".join([f"`{m.source.file_path}`", *m.source.heading_path]) + f" ({wiki_link(m)})"
        lines += [f"## {label}", "", f"Source: {where}", f"Memory: `{m.id}`, recorded {_iso(m.created_at)}", "",
                  *[f"> {line}" for line in m.content.strip().splitlines()], ""]
    name = f"{_iso(stamp)[:10]}-{slug(a.content, 4)}-{item.id[-6:].lower()}.md"
    return write_note(folder / name, "\n".join(lines))


def _short(text: str, limit: int = 50) -> str:
    text = " ".join(text.split())
    return json.dumps(text if len(text) <= limit else text[:limit - 1] + "…", ensure_ascii=False)[1:-1]
