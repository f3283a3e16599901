"""Analogical recall: memories that mean something close to the cue *and* have the same shape.

A memory's shape is a small structural vector (STRUCT_DIM floats) that ignores its words: its kind,
the names and value types of its context keys, whether it belongs to an entity, how many edges of
each type go in and out (all but the automatic FOLLOWED_BY), its importance band and its length
band. It is stored in the `vectors_associative` family (0x00 + id16 -> float32 LE, unit length) and rewritten in the same
RocksDB batch as every change that can alter it (see refresh_structure).

Structural similarity is the cosine of these vectors (each feature group weighs about the same, so
it is roughly the average agreement across groups), stretched over the candidate pool so that an identical shape
scores 1 and the pool's least alike scores 0. Without the stretch, ordinary memories (same kind, no
context, similar length) all score about the same raw cosine, and the structural term - the thing
that makes recall analogical - would barely move the ranking.

    relevance = alpha * embedding_similarity + (1 - alpha) * structural_similarity

A:B::C:? replaces the cue by normalize(B - A + C) in embedding space and takes B's shape as the
reference: the answer should stand to C as B stands to A, so it should look like B.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import validate
from ..errors import InvalidInput, NotFound
from ..schema import EdgeType, Memory, MemoryKind
from ..core.open_vault import Filter, OpenVault
from ..store.contract import RecordStore
from ..store.storage import GRAPH_FORWARD, GRAPH_REVERSE, MEMORY_PREFIX, WriteSet, decode_memory, id_bytes, id_str
from .fusion import Candidate, Candidates
from .query import Found, Query


FAMILY = "vectors_associative"
KEY_PREFIX = b"\x00"

# Feature layout. Each group is one block; one-hot groups have unit norm, so no group outweighs another.
_KINDS = (MemoryKind.EPISODE, MemoryKind.INSIGHT, MemoryKind.REVISION)
CONTEXT_BUCKETS = 32
# FOLLOWED_BY is bookkeeping the engine adds between consecutive memories, not shape: counting it would
# make the newest memory of every entity look unlike the rest, and change shape at every write.
_EDGE_TYPES = tuple(t for t in EdgeType if t != EdgeType.FOLLOWED_BY)
_SHAPE_EDGE_BYTES = frozenset(int(t) for t in _EDGE_TYPES)
IMPORTANCE_BANDS = (0.2, 0.4, 0.6, 0.8)  # upper bounds; the last band is 0.8..1
LENGTH_BANDS = (40, 100, 250, 600, 1500)  # characters; the last band is 1500 and up
# Edge counts are log-scaled and divided by this, so 1 edge and 30 edges differ but 30 do not swamp the rest.
_EDGE_SCALE = math.log2(1 + 32)
# The pool percentile that structural similarity 0 stands for (see structural_similarity).
LOW_PERCENTILE = 10.0

_KIND_AT = 0
_CONTEXT_AT = _KIND_AT + len(_KINDS)
_ENTITY_AT = _CONTEXT_AT + CONTEXT_BUCKETS
_EDGES_AT = _ENTITY_AT + 2
_IMPORTANCE_AT = _EDGES_AT + 2 * len(_EDGE_TYPES)
_LENGTH_AT = _IMPORTANCE_AT + len(IMPORTANCE_BANDS) + 1
STRUCT_DIM = _LENGTH_AT + len(LENGTH_BANDS) + 1


# Features --------------------------------------------------------------------------------------

def _bucket(token: str) -> int:
    # A stable hash: Python's hash() is salted per process, and these vectors live on disk.
    return int.from_bytes(hashlib.blake2b(token.encode(), digest_size=4).digest(), "little") % CONTEXT_BUCKETS


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "str"
    if isinstance(value, list):
        return "list"
    return "dict"


def _band(value: float, bounds: Sequence[float]) -> int:
    for n, bound in enumerate(bounds):
        if value < bound:
            return n
    return len(bounds)


def features(memory: Memory, out_counts: dict[EdgeType, int], in_counts: dict[EdgeType, int]) -> np.ndarray:
    """The structural vector of a memory with these edge counts, unit length, float32."""
    v = np.zeros(STRUCT_DIM, dtype=np.float64)
    v[_KIND_AT + _KINDS.index(memory.kind)] = 1.0
    context = np.zeros(CONTEXT_BUCKETS)
    for key, value in memory.context.items():
        context[_bucket(f"key:{key}:{_json_type(value)}")] += 1.0
        # The memory's declared role (decision, task, rule...) is shape, not wording.
        if key == "type" and isinstance(value, str):
            context[_bucket(f"type={value.strip().lower()}")] += 1.0
    norm = np.linalg.norm(context)
    if norm > 0:
        v[_CONTEXT_AT:_CONTEXT_AT + CONTEXT_BUCKETS] = context / norm
    v[_ENTITY_AT + (0 if memory.entity_id is not None else 1)] = 1.0
    for n, edge_type in enumerate(_EDGE_TYPES):
        v[_EDGES_AT + 2 * n] = math.log2(1 + out_counts.get(edge_type, 0)) / _EDGE_SCALE
        v[_EDGES_AT + 2 * n + 1] = math.log2(1 + in_counts.get(edge_type, 0)) / _EDGE_SCALE
    v[_IMPORTANCE_AT + _band(memory.importance, IMPORTANCE_BANDS)] = 1.0
    v[_LENGTH_AT + _band(len(memory.content), LENGTH_BANDS)] = 1.0
    return (v / np.linalg.norm(v)).astype(np.float32)


def _edge_counts(edges: set[bytes], memory: bytes) -> tuple[dict[EdgeType, int], dict[EdgeType, int]]:
    """Count the forward graph keys (0xF0 + source + type + target) touching `memory`, by type and side."""
    out_counts: dict[EdgeType, int] = {}
    in_counts: dict[EdgeType, int] = {}
    for key in edges:
        if key[17] not in _SHAPE_EDGE_BYTES:
            continue
        edge_type = EdgeType(key[17])
        if key[1:17] == memory:
            out_counts[edge_type] = out_counts.get(edge_type, 0) + 1
        if key[18:34] == memory:
            in_counts[edge_type] = in_counts.get(edge_type, 0) + 1
    return out_counts, in_counts


def _stored_edges(store: RecordStore, memory: bytes) -> set[bytes]:
    """The memory's edges as forward keys, whichever side it is on."""
    keys = {key for key, _ in store.scan("graph", GRAPH_FORWARD + memory)}
    for key, _ in store.scan("graph", GRAPH_REVERSE + memory):
        # Reverse key 0xF1 + target + type + source -> forward key 0xF0 + source + type + target.
        keys.add(GRAPH_FORWARD + key[18:34] + key[17:18] + key[1:17])
    return keys


def compute(store: RecordStore, memory_id: str) -> np.ndarray | None:
    """The structural vector from what is stored now (for memories written before this existed)."""
    memory = store.get_memory(memory_id)
    if memory is None:
        return None
    raw = id_bytes(memory_id)
    return features(memory, *_edge_counts(_stored_edges(store, raw), raw))


def refresh_structure(store: RecordStore, writes: WriteSet) -> None:
    """Add to `writes` the structural vector of every memory the batch touches, computed as of after it.

    Touched: every memory record put, and both endpoints of every graph key put or deleted. The
    vectors go into the same RocksDB batch, so they are never out of step with the edges.
    """
    memories: dict[bytes, Memory | None] = {}
    graph_ops: dict[bytes, list[tuple[bytes, bool]]] = {}
    for family, key, value in writes.ops:
        if family == "default" and key[:1] == MEMORY_PREFIX:
            memories[key[1:17]] = None if value is None else decode_memory(value)
        elif family == "graph" and key[:1] == GRAPH_FORWARD and key[17] in _SHAPE_EDGE_BYTES:
            for end in (key[1:17], key[18:34]):
                graph_ops.setdefault(end, []).append((key, value is not None))
    touched = dict.fromkeys(list(memories) + list(graph_ops))
    for raw in touched:
        if raw in memories:
            memory = memories[raw]
            if memory is None:
                continue  # deleted in this batch; its vector is deleted with it
        else:
            memory = store.get_memory(id_str(raw))
            if memory is None:
                continue
        if memory.kind == MemoryKind.REVISION:
            continue  # old text, never an analogical result
        edges = _stored_edges(store, raw)
        for key, is_put in graph_ops.get(raw, ()):
            if is_put:
                edges.add(key)
            else:
                edges.discard(key)
        vector = features(memory, *_edge_counts(edges, raw))
        writes.put(FAMILY, KEY_PREFIX + raw, vector.astype("<f4").tobytes())


def structure_of(store: RecordStore, memory_id: str) -> np.ndarray:
    """The stored structural vector, computed on the spot when missing or from an older layout."""
    raw = store.get(FAMILY, KEY_PREFIX + id_bytes(memory_id))
    if raw is not None and len(raw) == 4 * STRUCT_DIM:
        return np.frombuffer(raw, dtype="<f4")
    vector = compute(store, memory_id)
    return np.zeros(STRUCT_DIM, dtype=np.float32) if vector is None else vector


# Similarity ------------------------------------------------------------------------------------

def structural_similarity(reference: np.ndarray, others: np.ndarray) -> np.ndarray:
    """Similarity of each row of `others` to `reference`, in 0..1: 1 is the same shape, 0 the pool's least alike.

    The raw measure is the cosine of the block-normalized vectors - the average agreement over the
    feature groups, so a memory that differs in one group stays closer than one that differs in
    four. Raw cosines of ordinary memories crowd into a narrow band (most share kind, bands and an
    empty context), which would leave the structural term nearly constant in the blend; so the
    band is stretched over the pool: (raw - low) / (1 - low), with `low` the pool's 10th
    percentile. The order is the raw order; only the spread changes.
    """
    if len(others) == 0:
        return np.zeros(0)
    raw = np.clip(others.astype(np.float64) @ reference.astype(np.float64), 0.0, 1.0)
    low = float(np.percentile(raw, LOW_PERCENTILE))
    if 1.0 - low < 1e-6:
        return np.ones(len(raw))  # every candidate has the reference's shape
    return np.clip((raw - low) / (1.0 - low), 0.0, 1.0)


# The strategy ----------------------------------------------------------------------------------

@dataclass
class _Term:
    memory_id: str | None  # None for a cue string
    vector: np.ndarray


def resolve_terms(vault: OpenVault, terms: Sequence[str]) -> list[_Term]:
    """Each term is a memory id (its stored vector) or a cue (embedded). A string that is a valid id must exist."""
    if isinstance(terms, str) or not isinstance(terms, (tuple, list)) or len(terms) != 3:
        raise InvalidInput("analogy must be three memory ids or cues (a, b, c), read as a:b::c:?")
    out: list[_Term | None] = []
    cues: list[tuple[int, str]] = []
    for n, term in enumerate(terms):
        term = validate.content(term, f"analogy[{n}]")
        memory_id = _as_memory_id(term)
        if memory_id is None:
            out.append(None)
            cues.append((n, term))
            continue
        vector = vault.vector(memory_id)
        if vector is None:
            raise NotFound(f"memory {memory_id} does not exist")
        out.append(_Term(memory_id, vector))
    if cues:
        vectors = vault.embedder.embed_queries([text for _, text in cues])
        for (n, _), vector in zip(cues, vectors):
            out[n] = _Term(None, np.asarray(vector, dtype=np.float32))
    return [t for t in out if t is not None]


def _as_memory_id(term: str) -> str | None:
    stripped = term.strip()
    if len(stripped) != 26:
        return None
    try:
        return validate.memory_id(stripped)
    except InvalidInput:
        return None


def _normalized(vector: np.ndarray) -> np.ndarray:
    norm = float(np.linalg.norm(vector))
    if norm < 1e-9:
        raise InvalidInput("the analogy's terms cancel out (B - A + C is zero): nothing to search for")
    return (vector / norm).astype(np.float32)


def _wide_hits(vault: OpenVault, vector: np.ndarray, allowed: Filter, excluded: set[str],
               want: int) -> list[tuple[str, float]]:
    """Nearest memories with twice the usual HNSW search breadth, filtered; widened if the filter eats them."""
    ef = 2 * vault.config.index.ef_search
    k = max(ef, want)
    hits = vault.similar_wide(vector, k, ef=max(ef, k))
    kept = [(mid, sim) for mid, sim in hits if mid not in excluded and allowed(mid)]
    if len(kept) < want and len(hits) < vault.indexed_count():
        kept = [(mid, sim) for mid, sim in vault.similar(vector, want + len(excluded), allowed)
                if mid not in excluded]
    return kept


def recall(vault: OpenVault, query: Query) -> Found:
    """The analogical strategy: (candidates, notes)."""
    seed, analogy, allowed, limit = query.seed, query.analogy, query.allowed, query.limit
    alpha = vault.config.recall.analogical_alpha if query.alpha is None else query.alpha
    notes: list[str] = []
    excluded: set[str] = set()
    reference_id: str | None = None
    if analogy is not None:
        a, b, c = resolve_terms(vault, analogy)
        target = _normalized(b.vector.astype(np.float64) - a.vector + c.vector)
        excluded = {t.memory_id for t in (a, b, c) if t.memory_id is not None}
        reference_id = b.memory_id
    elif seed is not None:
        stored = vault.vector(seed)
        if stored is None:
            raise NotFound(f"memory {seed} does not exist")
        cue_vector = query.cue_vector
        target = cue_vector if cue_vector is not None else stored
        excluded = {seed}
        reference_id = seed
    elif query.cue_vector is not None:
        target = query.cue_vector
    else:
        raise InvalidInput("analogical recall needs a cue, a seed memory or an analogy")

    hits = _wide_hits(vault, target, allowed, excluded, limit)
    if not hits:
        return {}, notes
    if reference_id is None:
        # A cue has no shape of its own: take the shape of what it matches best.
        reference_id = hits[0][0]
        notes.append(f"analogical: no reference memory given; using the shape of the best match {reference_id}")
    store = vault.store
    reference = structure_of(store, reference_id)
    shapes = np.vstack([structure_of(store, mid) for mid, _ in hits])
    structural = structural_similarity(reference, shapes)
    raw = shapes.astype(np.float64) @ reference.astype(np.float64)
    scored: list[tuple[float, str, float, float, float]] = []
    for (mid, embedding), struct, cosine in zip(hits, structural.tolist(), raw.tolist()):
        relevance = min(1.0, max(0.0, alpha * max(0.0, embedding) + (1.0 - alpha) * struct))
        scored.append((relevance, mid, embedding, struct, cosine))
    scored.sort(reverse=True)
    out: Candidates = {}
    for rank, (relevance, mid, embedding, struct, cosine) in enumerate(scored[:limit]):
        out[mid] = Candidate(relevance, ["analogical"], {
            "embedding_similarity": round(embedding, 6), "structural_similarity": round(struct, 6),
            "structural_cosine": round(cosine, 6),
            "analogical_alpha": alpha, "analogical_reference": reference_id, "analogical_rank": rank + 1,
        })
    return out, notes
