"""Remember: new memories embedded, checked and written as one batch, all or none.

An item whose `key` is already stored returns that memory (idempotent imports and retries), and is
refused (KeyReused) when its text is not the one first stored under the key; a restatement of an
existing memory is folded into it (workflows/consolidate.py); new episodes join their entity's
FOLLOWED_BY chain; afterwards each stored memory is checked for contradictions with its neighbours
(workflows/contradiction_review.py).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import msgspec
import numpy as np
from ulid import ULID

from .. import validate
from ..errors import InvalidInput, KeyReused, NotFound
from ..recall import analogical
from ..schema import EdgeType, Memory, MemoryKind, Source
from ..store import idempotency
from ..core.memory_text import embedding_text
from ..core.open_vault import OpenVault, now_us
from ..paths import writer
from ..store.storage import WriteSet, encode_vector, id_bytes, temporal_keys, vector_key
from . import consolidate, contradiction_review, decay

EMBED_SPAN = 4096
FOLLOWED_BY_CONFIDENCE = 1.0
# A KeyReused error quotes this much of the text stored under the key.
REUSED_TEXT_CHARS = 300
# What a client may write; REVISION records are made by revise only.
CLIENT_KINDS = (MemoryKind.EPISODE, MemoryKind.INSIGHT)
ITEM_FIELDS = {"content", "importance", "context", "entity_id", "created_at", "kind", "source", "supersedes",
               "edges", "key", "agent", "session"}


def remember_many(vault: OpenVault, items: Iterable[dict[str, Any]], *, check_contradictions: bool | None = None,
                  consolidate_restatements: bool | None = None) -> list[Memory]:
    """Store many memories, all or none: embedded in spans, then written as one RocksDB batch, so a
    crash at any point leaves every item of the call stored or none of them. Returns, per item, the
    memory that holds it (new, the one its key named, or the one it was consolidated into)."""
    author, daemon = writer()
    everything = [_prepare(item, n, author, daemon) for n, item in enumerate(items)]
    if not everything:
        return []
    prepared = _unkeyed(vault, everything)
    out: list[Memory] = []
    if prepared:
        # One embed call per span: the embedder sorts the whole span by length, so padding stays small.
        vectors = np.vstack([vault.embedder.embed_documents(
            [embedding_text(p.memory) for p in prepared[start:start + EMBED_SPAN]])
                             for start in range(0, len(prepared), EMBED_SPAN)])
        with vault.writing():
            # Another writer may have stored one of these keys while we embedded.
            keep = [n for n, p in enumerate(prepared) if not _claimed_meanwhile(vault, p)]
            prepared, vectors = [prepared[n] for n in keep], vectors[keep]
            _check_refs(vault, prepared)
            if prepared:
                merged = _restated(vault, prepared, vectors, consolidate_restatements)
                _write_new(vault, prepared, vectors, merged)
                for n, survivor in merged.items():
                    prepared[n].stored = _Prepared(survivor, [], [])
        # A restatement re-asserts the memory it folded into: that memory is checked in its place.
        out = list({m.id: m for m in map(_result, prepared)}.values())
    if vault.config.contradictions.check_on_remember if check_contradictions is None else check_contradictions:
        contradiction_review.queue_for_new(vault, out)
    return [_result(p) for p in everything]


class _Prepared:
    __slots__ = ("memory", "supersedes", "edges", "key", "stored")

    def __init__(self, memory: Memory, supersedes: list[str], edges: list[tuple[str, EdgeType, float]],
                 key: str | None = None) -> None:
        self.memory = memory
        self.supersedes = supersedes
        self.edges = edges
        self.key = key
        # Set when the key names a memory stored before (or earlier in the batch): that one is returned.
        self.stored: _Prepared | None = None


def _result(p: _Prepared) -> Memory:
    while p.stored is not None:
        p = p.stored
    return p.memory


def _prepare(item: dict[str, Any], n: int, author: str, daemon: str) -> _Prepared:
    if not isinstance(item, dict):
        raise InvalidInput(f"item {n} must be a dict with at least 'content'")
    unknown = set(item) - ITEM_FIELDS
    if unknown:
        raise InvalidInput(f"item {n} has unknown fields: {sorted(unknown)}")
    stamp = now_us()
    created = validate.timestamp_us(item.get("created_at"), "created_at")
    kind = validate.memory_kind(item.get("kind", MemoryKind.EPISODE))
    if kind not in CLIENT_KINDS:
        raise InvalidInput(f"item {n}: kind {kind.value} is made by revise only; "
                           f"remember takes {' or '.join(k.value for k in CLIENT_KINDS)}")
    importance = validate.unit_float(item.get("importance", 0.5), "importance")
    source = item.get("source")
    if source is not None and not isinstance(source, Source):
        raise InvalidInput("source must be a hebbs.Source")
    memory = Memory(
        id=str(ULID()), content=validate.content(item.get("content")), importance=importance,
        context=validate.context(item.get("context")), entity_id=validate.entity(item.get("entity_id")),
        created_at=stamp if created is None else created, updated_at=stamp, last_accessed_at=stamp,
        kind=kind, source=source, decay_score=importance, author=author, daemon=daemon,
        agent=validate.scope_name(item.get("agent"), "agent"), session=validate.scope_name(item.get("session"), "session"),
    )
    supersedes = [validate.memory_id(s, "supersedes") for s in item.get("supersedes") or ()]
    edges = [validate.edge_spec(e) for e in item.get("edges") or ()]
    key = idempotency.check(item.get("key"))
    return _Prepared(memory, supersedes, edges, None if key is None else validate.unicode_text(key, "key"))


def _unkeyed(vault: OpenVault, prepared: list[_Prepared]) -> list[_Prepared]:
    """The items to store: a key already in the vault, or earlier in the batch, points its item at
    that memory instead (checked before embedding, so a re-run import embeds nothing)."""
    first: dict[str, _Prepared] = {}
    todo = []
    for p in prepared:
        if p.key is not None:
            if p.key in first:
                if first[p.key].memory.content != p.memory.content:
                    raise _reused(p.key, first[p.key].memory.content, "an earlier item of this batch")
                p.stored = first[p.key]
                continue
            if _claimed_meanwhile(vault, p):
                continue
            first[p.key] = p
        todo.append(p)
    return todo


def _claimed_meanwhile(vault: OpenVault, p: _Prepared) -> bool:
    """Whether p's key already names a stored memory (p then returns it); KeyReused when the text
    first stored under the key is not p's."""
    if p.key is None:
        return False
    existing, text_digest = idempotency.entry(vault.store, p.key)
    memory = None if existing is None else vault.memory(existing)
    if memory is None:
        return False
    # The text first stored under the key (a retry), or the memory's text now (after a revise).
    same = memory.content == p.memory.content or text_digest == idempotency.digest(p.memory.content)
    if not same:
        raise _reused(p.key, memory.content, f"memory {memory.id}", memory.id)
    p.stored = _Prepared(msgspec.structs.replace(memory, existing=True), [], [])
    return True


def _reused(key: str, stored: str, holder: str, memory_id: str | None = None) -> KeyReused:
    """The refusal of a key given again with other text: every door (CLI, SDK, MCP, socket) gets it."""
    text = stored if len(stored) <= REUSED_TEXT_CHARS else stored[:REUSED_TEXT_CHARS] + "..."
    return KeyReused(f"key {key!r} was already used with another text, for {holder}: {text!r}; nothing was "
                     "stored. Use a new key for a new memory, or revise that memory to change its text", memory_id)


def _check_refs(vault: OpenVault, chunk: list[_Prepared]) -> None:
    in_chunk = {p.memory.id for p in chunk}
    for p in chunk:
        for ref in p.supersedes + [target for target, _, _ in p.edges]:
            if ref not in vault and ref not in in_chunk:
                raise NotFound(f"memory {ref} does not exist")


def _restated(vault: OpenVault, chunk: list[_Prepared], vectors: np.ndarray,
              consolidate_restatements: bool | None) -> dict[int, Memory]:
    """Which items restate an existing memory: {item index: that memory}."""
    on = vault.config.consolidation.on_remember if consolidate_restatements is None else consolidate_restatements
    if not on:
        return {}
    in_chunk = [p.memory.id for p in chunk]
    found: dict[int, Memory] = {}
    for n, (p, vector) in enumerate(zip(chunk, vectors)):
        if p.supersedes or p.edges:
            continue  # an explicit relation to other memories: the caller means a memory of its own
        old = consolidate.find_restated(vault, p.memory, vector, exclude=in_chunk)
        if old is not None:
            found[n] = vault.get(old)
    return found


def _write_new(vault: OpenVault, chunk: list[_Prepared], vectors: np.ndarray, merged: dict[int, Memory]) -> None:
    writes = WriteSet()
    stamp = now_us()
    latest_by_entity: dict[str | None, tuple[int, str]] = {}
    superseded: list[Memory] = []
    survivors: dict[str, Memory] = {}
    records: list[Memory] = []
    for n, target in merged.items():
        survivor = survivors.setdefault(target.id, target)
        survivor, record = consolidate.merge(
            writes, survivor, chunk[n].memory, stamp, lambda m, t: decay.decay_value(m, t, vault.config.decay))
        records.append(record)
        if chunk[n].key is not None:  # a retry under the same key finds the memory it folded into
            idempotency.put(writes, chunk[n].key, survivor.id, chunk[n].memory.content)
        merged[n] = msgspec.structs.replace(survivor, consolidated=True)
    keep = [n for n in range(len(chunk)) if n not in merged]
    chunk, vectors = [chunk[n] for n in keep], vectors[keep]
    for p, vector in zip(chunk, vectors):
        m = p.memory
        writes.put_memory(m)
        if p.key is not None:
            idempotency.put(writes, p.key, m.id, m.content)
        for key in temporal_keys(m.entity_id, m.created_at, m.id):
            writes.put("temporal", key, id_bytes(m.id))
        writes.put("vectors", vector_key(m.id), encode_vector(vector))
        # The FOLLOWED_BY chain orders what happened: insights are conclusions, not events.
        previous = None if m.kind != MemoryKind.EPISODE else (
            latest_by_entity.get(m.entity_id) or vault.latest_episode_before(m.entity_id, m.created_at))
        if previous is not None and previous[0] <= m.created_at:
            writes.put_edge(previous[1], EdgeType.FOLLOWED_BY, m.id, FOLLOWED_BY_CONFIDENCE, stamp)
        if m.kind == MemoryKind.EPISODE and (previous is None or previous[0] <= m.created_at):
            latest_by_entity[m.entity_id] = (m.created_at, m.id)
        for target, edge_type, confidence in p.edges:
            writes.put_edge(m.id, edge_type, target, confidence, stamp)
        superseded += [_mark_superseded(vault, writes, old_id, m, stamp) for old_id in p.supersedes]
    analogical.refresh_structure(vault.store, writes)
    new = [p.memory for p in chunk]
    vault.apply(writes, saved=new + superseded + list(survivors.values()) + records,
                vectors=([m.id for m in new], vectors) if new else None, reindexed=new)


def _mark_superseded(vault: OpenVault, writes: WriteSet, old_id: str, new: Memory, stamp: int) -> Memory:
    old = vault.memory(old_id) if old_id in vault else None
    if old is None:
        raise NotFound(f"memory {old_id} does not exist")
    old.superseded_by = new.id
    old.valid_until = new.created_at  # what held until the new memory's time (recall --as-of before it shows it)
    old.updated_at = stamp
    writes.put_memory(old)
    writes.put_edge(new.id, EdgeType.REVISED_FROM, old_id, 1.0, stamp)
    return old
