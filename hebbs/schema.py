"""The one schema: these msgspec Structs are what the vault stores, what the daemon speaks and what the SDK returns.

Times are integer microseconds since the epoch (UTC) everywhere, so a record round-trips exactly
through msgpack, JSON and RocksDB keys. Memory ids are ULIDs in their 26-character text form; the
storage layer turns them into the 16 raw bytes that its keys use.
"""

from __future__ import annotations

import enum
from typing import Any

import msgspec


class MemoryKind(str, enum.Enum):
    EPISODE = "EPISODE"
    INSIGHT = "INSIGHT"
    REVISION = "REVISION"


class EdgeType(enum.IntEnum):
    """The byte stored in graph keys. Values are part of the on-disk format: never renumber."""

    CAUSED_BY = 1
    RELATED_TO = 2
    FOLLOWED_BY = 3
    REVISED_FROM = 4
    INSIGHT_FROM = 5
    CONTRADICTS = 6


class Source(msgspec.Struct, kw_only=True, omit_defaults=True):
    """Where a memory indexed from a markdown vault came from."""

    file_path: str
    heading_path: list[str] = []
    byte_start: int = 0
    byte_end: int = 0


class Memory(msgspec.Struct, kw_only=True, omit_defaults=True):
    id: str
    content: str
    importance: float = 0.5
    context: dict[str, Any] = {}
    entity_id: str | None = None
    created_at: int = 0
    updated_at: int = 0
    last_accessed_at: int = 0
    access_count: int = 0
    decay_score: float = 0.0
    kind: MemoryKind = MemoryKind.EPISODE
    source: Source | None = None
    # The id of the memory that replaced this one; superseded memories leave recall unless asked for.
    superseded_by: str | None = None
    # For REVISION records: the memory whose earlier text this is.
    revision_of: str | None = None


class Edge(msgspec.Struct, kw_only=True):
    source: str
    target: str
    edge_type: str
    confidence: float = 1.0
    created_at: int = 0


class ScoringWeights(msgspec.Struct, kw_only=True, frozen=True):
    """How much each factor counts in the composite score; set per recall call."""

    relevance: float = 0.5
    recency: float = 0.2
    importance: float = 0.2
    reinforcement: float = 0.1


class ScoreComponents(msgspec.Struct, kw_only=True):
    relevance: float
    recency: float
    importance: float
    reinforcement: float


class RecallResult(msgspec.Struct, kw_only=True):
    memory: Memory
    score: float
    components: ScoreComponents
    strategies: list[str] = []
    # Strategy-specific facts behind the relevance (rank in each channel, causal depth, ...).
    details: dict[str, Any] = {}


class RecallResults(msgspec.Struct, kw_only=True):
    """The ranked results of a recall, plus anything the caller should know about how they were found."""

    results: list[RecallResult] = []
    notes: list[str] = []

    def __len__(self) -> int:
        return len(self.results)

    def __getitem__(self, index: int) -> RecallResult:
        return self.results[index]

    def __iter__(self):
        return iter(self.results)

    def ids(self) -> list[str]:
        return [r.memory.id for r in self.results]


class QueryLogEntry(msgspec.Struct, kw_only=True):
    at: int
    cue: str | None
    strategies: list[str]
    weights: ScoringWeights
    result_count: int
    latency_ms: float
    entity_id: str | None = None


class PendingContradiction(msgspec.Struct, kw_only=True):
    id: str
    memory_a: str
    memory_b: str
    similarity: float
    confidence: float
    reasons: list[str]
    created_at: int
