"""Edges between memories: add, remove, list. Each change refreshes the analogical structure in the
same batch (a memory's shape is its edges)."""

from __future__ import annotations

import msgspec

from .. import validate
from ..errors import InvalidInput, NotFound
from ..recall import analogical
from ..schema import Edge, EdgeType, Memory
from ..core.open_vault import OpenVault, now_us
from ..store.storage import WriteSet, edge_keys
from .contradiction_review import unlinked


def add_edge(vault: OpenVault, source: str, edge_type: str | EdgeType, target: str, confidence: float = 1.0) -> Edge:
    source, target = validate.memory_id(source, "source"), validate.memory_id(target, "target")
    kind = validate.edge_type(edge_type)
    confidence = validate.unit_float(confidence, "confidence")
    if source == target:
        raise InvalidInput(f"an edge joins two memories; {source} -[{kind.name}]-> itself says nothing")
    with vault.writing():
        for mid in (source, target):
            if mid not in vault:
                raise NotFound(f"memory {mid} does not exist")
        stamp = now_us()
        writes = WriteSet()
        writes.put_edge(source, kind, target, confidence, stamp)
        analogical.refresh_structure(vault.store, writes)
        vault.apply(writes, saved=_conflicts(vault, writes, kind, source, target, True))
        return Edge(source=source, target=target, edge_type=kind.name, confidence=confidence, created_at=stamp)


def remove_edge(vault: OpenVault, source: str, edge_type: str | EdgeType, target: str) -> None:
    """Delete one edge (both its graph keys, in one batch); NotFound if there is no such edge."""
    source, target = validate.memory_id(source, "source"), validate.memory_id(target, "target")
    kind = validate.edge_type(edge_type)
    with vault.writing():
        forward, reverse = edge_keys(source, kind, target)
        if vault.store.get("graph", forward) is None:
            raise NotFound(f"no {kind.name} edge from {source} to {target}")
        writes = WriteSet()
        writes.delete("graph", forward)
        writes.delete("graph", reverse)
        analogical.refresh_structure(vault.store, writes)
        both_ways = vault.store.get("graph", edge_keys(target, kind, source)[0]) is not None
        vault.apply(writes, saved=[] if both_ways else _conflicts(vault, writes, kind, source, target, False))


def _conflicts(vault: OpenVault, writes: WriteSet, kind: EdgeType, source: str, target: str,
               joined: bool) -> list[Memory]:
    """A CONTRADICTS edge is what recall marks as a conflict, read from each memory's conflicts_with
    (no edge scan per recall): both memories learn of the edge added or removed, in its batch. Added,
    it is a `contradiction` verdict given by hand: neither memory is then the other's older value."""
    if kind != EdgeType.CONTRADICTS:
        return []
    pair = {mid: vault.memory(mid) for mid in (source, target)}
    changed = []
    for one, other in ((source, target), (target, source)):
        memory, partner = pair[one], pair[other]
        if memory is None:
            continue
        others = set(memory.conflicts_with)
        others = others | {other} if joined else others - {other}
        settled = unlinked(memory, partner) if joined and partner is not None else memory
        if others != set(memory.conflicts_with) or settled is not memory:
            changed.append(msgspec.structs.replace(settled, conflicts_with=sorted(others)))
            writes.put_memory(changed[-1])
    return changed


def edges(vault: OpenVault, memory_id: str, direction: str = "both") -> list[Edge]:
    memory_id = validate.memory_id(memory_id)
    direction = validate.edge_direction(direction)
    out: list[Edge] = []
    if direction in ("out", "both"):
        out += [Edge(source=memory_id, target=t, edge_type=k.name, confidence=c, created_at=ts)
                for k, t, c, ts in vault.store.edges_from(memory_id)]
    if direction in ("in", "both"):
        out += [Edge(source=s, target=memory_id, edge_type=k.name, confidence=c, created_at=ts)
                for k, s, c, ts in vault.store.edges_to(memory_id)]
    return out
