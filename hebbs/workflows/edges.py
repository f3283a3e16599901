"""Edges between memories: add, remove, list. Each change refreshes the analogical structure in the
same batch (a memory's shape is its edges)."""

from __future__ import annotations

from .. import validate
from ..errors import InvalidInput, NotFound
from ..recall import analogical
from ..schema import Edge, EdgeType
from ..core.open_vault import OpenVault, now_us
from ..store.storage import WriteSet, edge_keys


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
        vault.apply(writes)
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
        vault.apply(writes)


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
