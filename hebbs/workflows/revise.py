"""Revise: change memories in place, keeping each earlier text as a REVISION record behind a
REVISED_FROM edge, so `history` can show what a memory said before."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import msgspec
import numpy as np
from ulid import ULID

from .. import validate
from ..errors import InvalidInput, NotFound
from ..recall import analogical
from ..schema import EdgeType, Memory, MemoryKind, Source
from ..core.memory_text import DIVERGED, diverged_from_source, embedding_text
from ..core.open_vault import OpenVault, now_us
from ..store.storage import WriteSet, encode_vector, id_bytes, temporal_key, vector_key
from . import decay

REVISION_FIELDS = {"id", "content", "importance", "context", "entity_id", "source"}


def get(vault: OpenVault, memory_id: str) -> Memory:
    memory = vault.memory(validate.memory_id(memory_id))
    if memory is None:
        raise NotFound(f"memory {memory_id} does not exist")
    return memory


def revise_many(vault: OpenVault, items: Iterable[dict[str, Any]]) -> list[Memory]:
    """Revise many memories, all or none: the changed texts embedded in one call, then one batch, so
    an error in any item (or a crash) leaves every memory as it was. Each item: id plus the fields to
    change; a memory named twice takes both changes in order."""
    changes = [_prepare(item, n) for n, item in enumerate(items)]
    for c in changes:
        current = vault.memory(c["memory_id"])
        if current is not None and current.content == c["content"]:
            c["content"] = None  # unchanged text: nothing to embed, no revision record
    texts = [embedding_text(_revised_view(vault, c)) for c in changes if c["content"] is not None]
    vectors = iter(vault.embedder.embed_documents(texts)) if texts else iter(())
    for c in changes:
        c["vector"] = next(vectors) if c["content"] is not None else None
    with vault.writing():
        batch = _Batch()
        revised = [_revise_into(vault, batch, **c) for c in changes]
        changed = list(batch.memories.values())
        vectors = ([mid for mid, _ in batch.vectors], np.vstack([v for _, v in batch.vectors])) if batch.vectors else None
        analogical.refresh_structure(vault.store, batch.writes)
        vault.apply(batch.writes, saved=changed + batch.revisions, vectors=vectors, reindexed=changed)
        return [batch.memories[m.id] for m in revised]


class _Batch:
    """One revise_many call's writes, and the memories as the earlier items of the call left them."""

    def __init__(self) -> None:
        self.writes = WriteSet()
        self.memories: dict[str, Memory] = {}
        self.revisions: list[Memory] = []
        self.vectors: list[tuple[str, np.ndarray]] = []


def history(vault: OpenVault, memory_id: str) -> list[Memory]:
    """Earlier versions of a memory, newest first."""
    memory_id = validate.memory_id(memory_id)
    store = vault.store
    revisions = [store.get_memory(target) for edge_type, target, _, _ in store.edges_from(memory_id)
                 if edge_type == EdgeType.REVISED_FROM]
    return sorted((r for r in revisions if r is not None and r.kind == MemoryKind.REVISION),
                  key=lambda r: r.updated_at, reverse=True)


def _revised_view(vault: OpenVault, change: dict[str, Any]) -> Memory:
    """The memory as a revision will leave it, for its embedding text (title and headings may change too)."""
    current = vault.memory(change["memory_id"])
    if current is None:
        return Memory(id=change["memory_id"], content=change["content"], context=change["context"] or {},
                      source=change["source"])
    return msgspec.structs.replace(current, content=change["content"],
                                   context=current.context if change["context"] is None else change["context"],
                                   source=current.source if change["source"] is None else change["source"])


def _prepare(item: dict[str, Any], n: int) -> dict[str, Any]:
    if not isinstance(item, dict) or "id" not in item:
        raise InvalidInput(f"revision {n} must be a dict with an 'id'")
    unknown = set(item) - REVISION_FIELDS
    if unknown:
        raise InvalidInput(f"revision {n} has unknown fields: {sorted(unknown)}")
    source = item.get("source")
    if source is not None and not isinstance(source, Source):
        raise InvalidInput("source must be a hebbs.Source")
    entity = item.get("entity_id", ...)
    return {
        "memory_id": validate.memory_id(item["id"]),
        "content": None if item.get("content") is None else validate.content(item["content"]),
        "importance": None if item.get("importance") is None else validate.unit_float(item["importance"], "importance"),
        "context": None if item.get("context") is None else validate.context(item["context"]),
        "entity_id": entity if entity is ... else validate.entity(entity),
        "source": source,
    }


def _revise_into(vault: OpenVault, batch: _Batch, memory_id: str, content: str | None, importance: float | None,
                 context: dict[str, Any] | None, entity_id: Any, source: Source | None,
                 vector: np.ndarray | None) -> Memory:
    memory = batch.memories.get(memory_id) or get(vault, memory_id)
    if memory.kind == MemoryKind.REVISION:
        raise InvalidInput(f"memory {memory_id} is a revision record; revise the memory it belongs to")
    stamp = now_us()
    writes = batch.writes
    text_changed = content is not None and content != memory.content
    if text_changed:
        revision = Memory(
            id=str(ULID()), content=memory.content, importance=memory.importance, context=memory.context,
            entity_id=memory.entity_id, created_at=memory.updated_at or memory.created_at,
            updated_at=stamp, last_accessed_at=stamp, kind=MemoryKind.REVISION, source=memory.source,
            superseded_by=memory.id, revision_of=memory.id,
            author=memory.author, daemon=memory.daemon, agent=memory.agent, session=memory.session,
        )
        writes.put_memory(revision)
        batch.revisions.append(revision)
        writes.put_edge(memory.id, EdgeType.REVISED_FROM, revision.id, 1.0, stamp)
        memory.content = content
        if memory.source is not None and memory.superseded_by is not None:
            # A note section edited after a verdict superseded it: the file says something new, which
            # the verdict never judged (the indexer checks it for contradictions again). Left
            # superseded, the note's current text was hidden from recall.
            memory.superseded_by = None
        writes.put("vectors", vector_key(memory.id), encode_vector(vector))
        batch.vectors = [(mid, v) for mid, v in batch.vectors if mid != memory.id] + [(memory.id, vector)]
    if importance is not None:
        memory.importance = importance
    if context is not None:
        memory.context = context
    if source is not None:
        memory.source = source
    if entity_id is not ... and entity_id != memory.entity_id:
        writes.delete("temporal", temporal_key(memory.entity_id, memory.created_at, memory.id))
        writes.put("temporal", temporal_key(entity_id, memory.created_at, memory.id), id_bytes(memory.id))
        memory.entity_id = entity_id
    if memory.source is not None and "section_hash" in memory.context:
        # A note section revised here no longer says what its file says: marked, so that list, get
        # and the panel show it (the file is not written; the next index of a changed file revises
        # the memory from it and clears the mark).
        marked = {k: v for k, v in memory.context.items() if k != DIVERGED}
        if diverged_from_source(memory):
            marked[DIVERGED] = True
        memory.context = marked
    memory.updated_at = stamp
    if importance is not None or context is not None:
        # Both feed the decay score (importance, and the half-life of the context's type): a stored
        # score from before would show the old importance until the next sweep.
        memory.decay_score = decay.decay_value(memory, stamp, vault.config.decay)
    writes.put_memory(memory)
    batch.memories[memory.id] = memory
    return memory
