"""A synthetic vault written straight through the storage layer (hebbs.store.storage.Store): records,
temporal keys, random unit vectors, a random causal graph and the structural vectors the engine would
have stored (bench_strategies' docstring says why), and the cues timed against it."""

from __future__ import annotations

import random
import string
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from ulid import ULID

from hebbs.recall import analogical
from hebbs.schema import EdgeType, Memory, MemoryKind
from hebbs.store.storage import Store, WriteSet, edge_keys, edge_value, id_bytes, temporal_keys, vector_key

CHUNK = 10_000
N_ENTITIES = 200
DAY_US = 86_400 * 1_000_000
CONTEXT_SHAPES: list[Callable[[random.Random], dict[str, Any]]] = [
    lambda r: {},
    lambda r: {},
    lambda r: {"type": "decision", "owner": r.choice("abcdef")},
    lambda r: {"type": "task", "due": r.randint(1, 28), "done": r.random() < 0.5},
    lambda r: {"type": "status"},
    lambda r: {"type": "fact", "tags": ["x", "y"][: r.randint(1, 2)]},
    lambda r: {"type": "preference", "strength": round(r.random(), 2)},
    lambda r: {"source": "chat", "thread": r.randint(1, 999)},
]


def build_vault(path: Path, n: int, dim: int, seed: int = 11) -> list[str]:
    """Write n memories with random vectors and a random causal graph straight into RocksDB."""
    rng = random.Random(seed)
    np_rng = np.random.default_rng(seed)
    vocab = ["".join(rng.choices(string.ascii_lowercase, k=rng.randint(3, 9))) for _ in range(3000)]
    start_us = (time.time_ns() // 1000) - 365 * DAY_US
    step_us = (365 * DAY_US) // n
    ids: list[str] = []
    memories: list[Memory] = []
    out_edges: list[list[tuple[EdgeType, int, float]]] = []
    latest: dict[str | None, int] = {}
    for i in range(n):
        created = start_us + i * step_us
        memory_id = str(ULID.from_timestamp(created / 1_000_000))
        entity = None if rng.random() < 0.2 else f"entity{rng.randrange(N_ENTITIES)}"
        memory = Memory(id=memory_id, content=" ".join(rng.choices(vocab, k=rng.randint(6, 40))),
                        importance=round(rng.random(), 2), context=rng.choice(CONTEXT_SHAPES)(rng),
                        entity_id=entity, created_at=created, updated_at=created,
                        last_accessed_at=created + rng.randrange(0, 30 * DAY_US), kind=MemoryKind.EPISODE)
        memory.decay_score = memory.importance
        edges: list[tuple[EdgeType, int, float]] = []
        if i > 0:
            for _ in range(rng.choice((0, 1, 1, 1, 2))):
                edges.append((EdgeType.CAUSED_BY, rng.randrange(i), round(rng.uniform(0.3, 1.0), 2)))
            if rng.random() < 0.2:
                edges.append((EdgeType.RELATED_TO, rng.randrange(i), 0.5))
        if entity in latest:
            out_edges[latest[entity]].append((EdgeType.FOLLOWED_BY, i, 1.0))
        latest[entity] = i
        ids.append(memory_id)
        memories.append(memory)
        out_edges.append(edges)

    out_counts: list[dict[EdgeType, int]] = [{} for _ in range(n)]
    in_counts: list[dict[EdgeType, int]] = [{} for _ in range(n)]
    for i, edges in enumerate(out_edges):
        for edge_type, j, _ in edges:
            out_counts[i][edge_type] = out_counts[i].get(edge_type, 0) + 1
            in_counts[j][edge_type] = in_counts[j].get(edge_type, 0) + 1

    store = Store.open(path / "db")
    try:
        for lo in range(0, n, CHUNK):
            hi = min(n, lo + CHUNK)
            vectors = np_rng.standard_normal((hi - lo, dim)).astype(np.float32)
            vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
            writes = WriteSet()
            for i in range(lo, hi):
                m = memories[i]
                writes.put_memory(m)
                for key in temporal_keys(m.entity_id, m.created_at, m.id):
                    writes.put("temporal", key, id_bytes(m.id))
                writes.put("vectors", vector_key(m.id), vectors[i - lo].astype("<f4").tobytes())
                shape = analogical.features(m, out_counts[i], in_counts[i])
                writes.put(analogical.FAMILY, vector_key(m.id), shape.astype("<f4").tobytes())
                for edge_type, j, confidence in out_edges[i]:
                    forward, reverse = edge_keys(m.id, edge_type, ids[j])
                    value = edge_value(confidence, m.created_at)
                    writes.put("graph", forward, value)
                    writes.put("graph", reverse, value)
            store.commit(writes)
        # A new write sequence: Engine.open sees the index snapshots are stale and rebuilds both.
        writes = WriteSet()
        writes.put_meta("write_seq", int(store.get_meta("write_seq", 0)) + 1)
        store.commit(writes)
    finally:
        store.close()
    return ids


# Cues in a user's words, timed with their embedding against the vault (bench_engine, bench_floor).
CUES = [
    "what did we decide about the database migration", "who owns the deploy pipeline",
    "when is the next release", "which customer asked for the export feature",
    "why did the nightly job fail", "what CRM does Acme use", "how do we rotate credentials",
    "where are the meeting notes kept", "what is the retry policy for webhooks",
    "which flag limits the number of results",
]
