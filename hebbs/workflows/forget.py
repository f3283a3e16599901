"""Forget: memories removed with every trace of them (vectors, temporal and graph entries, revision
records, idempotency keys, access logs, queued contradiction candidates), in one batch."""

from __future__ import annotations

from collections.abc import Sequence

from .. import validate
from ..errors import InvalidInput
from ..recall import analogical
from ..schema import EdgeType, Memory, MemoryKind, PendingContradiction
from ..store import access_log, idempotency
from ..core.open_vault import OpenVault, now_us
from ..store.storage import WriteSet, decode, edge_keys, memory_key, temporal_keys, vector_key
from . import reflect
from .revise import history


def forget(vault: OpenVault, ids: Sequence[str] | str | None = None, *, entity_id: str | None = None) -> int:
    """Remove the named memories, or all of an entity's; returns how many were forgotten."""
    if ids is None and entity_id is None:
        raise InvalidInput("forget needs ids or entity_id")
    if isinstance(ids, str):
        ids = [ids]
    wanted = [validate.memory_id(i) for i in ids or ()]
    store = vault.store
    with vault.writing():
        if entity_id is not None:
            entity_id = validate.entity(entity_id)
            # Revision records go with the memory they belong to (below), never on their own.
            wanted += [mid for mid, e in vault.entries() if e.entity_id == entity_id and e.kind != MemoryKind.REVISION]
        targets = [mid for mid in dict.fromkeys(wanted) if mid in vault]
        if not targets:
            return 0
        writes = WriteSet()
        doomed = set(targets)
        for mid in targets:
            doomed.update(r.id for r in history(vault, mid))
        stamp = now_us()
        restored: list[Memory] = []
        insights: list[str] = []
        for mid in doomed:
            memory = store.get_memory(mid)
            if memory is not None and memory.kind == MemoryKind.INSIGHT:
                insights.append(mid)
            writes.delete("default", memory_key(mid))
            writes.delete("vectors", vector_key(mid))
            writes.delete("vectors_associative", vector_key(mid))
            idempotency.drop(store, writes, mid)
            access_log.drop(writes, mid)
            if memory is not None and memory.kind != MemoryKind.REVISION:
                for key in temporal_keys(memory.entity_id, memory.created_at, mid):
                    writes.delete("temporal", key)
            for edge_type, other, _, _ in list(store.edges_from(mid)):
                forward, reverse = edge_keys(mid, edge_type, other)
                writes.delete("graph", forward)
                writes.delete("graph", reverse)
                if edge_type == EdgeType.REVISED_FROM and other not in doomed:
                    # What this memory superseded comes back once its successor is gone.
                    older = store.get_memory(other)
                    if older is not None and older.superseded_by == mid:
                        older.superseded_by = None
                        older.updated_at = stamp
                        writes.put_memory(older)
                        restored.append(older)
            for edge_type, other, _, _ in list(store.edges_to(mid)):
                forward, reverse = edge_keys(other, edge_type, mid)
                writes.delete("graph", forward)
                writes.delete("graph", reverse)
        # Contradiction candidates about a forgotten memory have nothing left to review.
        for key, raw in store.scan("pending"):
            candidate = decode(raw, PendingContradiction)
            if candidate.memory_a in doomed or candidate.memory_b in doomed:
                writes.delete("pending", key)
        # The forgotten memories' neighbours lose edges: their shapes change.
        analogical.refresh_structure(store, writes)
        vault.apply(writes, removed=list(doomed), saved=restored)
    if insights:
        reflect.remove_insight_notes(vault, insights)  # the note written at reflect-commit goes with it
    return len(targets)
