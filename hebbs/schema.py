"""The one schema: these msgspec Structs are what the vault stores, what the daemon speaks and what the SDK returns.

Times are integer microseconds since the epoch (UTC) everywhere, so a record round-trips exactly
through msgpack, JSON and RocksDB keys. Memory ids are ULIDs in their 26-character text form; the
storage layer turns them into the 16 raw bytes that its keys use.
"""

from __future__ import annotations

import enum
import threading
from typing import Any, Literal

import msgspec


# msgspec builds a Struct's type information on its first decode or conversion, and two threads
# doing that for one type at once crash the process: a new daemon died of SIGSEGV when two clients'
# first requests reached it together. So each type's decoder is built once, under a lock, and whoever
# decodes a Struct from threads (the protocol, the store) takes it from here.
_decoders: dict[tuple[str, Any], Any] = {}
_decoders_lock = threading.Lock()


def decoder(fmt: Literal["json", "msgpack"], type_: Any) -> Any:
    """The msgspec.json or msgspec.msgpack Decoder of type_, built once for the process."""
    found = _decoders.get((fmt, type_))
    if found is None:
        with _decoders_lock:
            found = _decoders.get((fmt, type_))
            if found is None:
                found = _decoders[(fmt, type_)] = getattr(msgspec, fmt).Decoder(type_)
    return found


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
    CO_ACTIVATED = 7


class Source(msgspec.Struct, kw_only=True, omit_defaults=True):
    """Where a memory indexed from a notes folder came from."""

    # The note, relative to the notes folder, and the headings above the section.
    file_path: str
    heading_path: list[str] = []
    # Where the section lies in that file version (hebbs source shows it).
    byte_start: int = 0
    byte_end: int = 0


class ConsolidationGain(msgspec.Struct, kw_only=True, omit_defaults=True):
    """What one consolidation added to the surviving memory, kept on the restatement record so that
    unconsolidate takes back exactly that (hebbs/workflows/consolidate.py)."""

    importance: float = 0.0
    # The survivor's last access before the merge counted as one.
    accessed_before: int = 0


class Memory(msgspec.Struct, kw_only=True, omit_defaults=True):
    """One thing remembered. Times are microseconds since the epoch, UTC."""

    # A ULID: ids sort by creation time.
    id: str
    content: str
    # 0..1: how much it matters; it weighs in the composite score and scales the decay score.
    importance: float = 0.5
    # Free-form JSON; its "type" (rule, decision, fact, task, ...) sets the memory's half-life.
    context: dict[str, Any] = {}
    # Whom or what the memory is about, for recall and prime by entity.
    entity_id: str | None = None
    created_at: int = 0
    updated_at: int = 0
    # Uses counted by reinforce ("used"), which raise the reinforcement component.
    last_accessed_at: int = 0
    access_count: int = 0
    # How alive the memory still is, recomputed by the decay sweep (docs/decay.md).
    decay_score: float = 0.0
    kind: MemoryKind = MemoryKind.EPISODE
    # The note section it was indexed from, for memories of a notes folder.
    source: Source | None = None
    # The id of the memory that replaced this one; superseded memories leave recall unless asked for.
    superseded_by: str | None = None
    # For REVISION records: the memory whose earlier text this is.
    revision_of: str | None = None
    # How many times this memory was said again and consolidated into it (hebbs/workflows/consolidate.py).
    restatements: int = 0
    # On a restatement record (kind REVISION): the memory it was consolidated into.
    restatement_of: str | None = None
    # On a restatement record: what its consolidation added to that memory.
    consolidation_gain: ConsolidationGain | None = None
    # Set only on what remember returns: True when the new text was consolidated into this existing memory.
    consolidated: bool = False
    # Only in remember's answer: the key given was already used, this is the memory it names; nothing was stored.
    existing: bool = False
    # A fact's time (docs/honesty.md "What is true now"): it holds from created_at until valid_until, when
    # a newer memory replaced it (superseded_by) or stated another value for it (newer_value); None: still holds.
    valid_until: int | None = None
    # The id of a newer memory about the same thing that states another value ("3 cats" after "2 cats"),
    # linked when the newer one is remembered (workflows/contradiction_review.py). Unlike superseded_by
    # it leaves this memory in recall, marked as the older value and ranked below the newer one.
    newer_value: str | None = None
    # What changed, in the checker's words: "2 -> 3".
    value_change: str | None = None
    # On the newer memory of such a pair: the older one whose value it changed (its history).
    older_value: str | None = None
    # Memories a `contradiction` verdict (or a CONTRADICTS edge added by hand) says this one disagrees with.
    conflicts_with: list[str] = []

    # Who stored it, and in what scope (docs/recall.md, "Authors, agents and sessions"). Records written
    # before these fields existed read them as None. author and daemon are stamped by the process that
    # stores the memory (hebbs.paths.writer), never given by a client; agent and session by the caller.
    # The name of the person whose daemon stored it: `author` in $HEBBS_HOME/config.toml, else user@host.
    author: str | None = None
    # The process it came through, host:pid (the daemon, for every door but an embedded Engine).
    daemon: str | None = None
    # The agent that stored it (mem0's agent_id), and the session or conversation (mem0's run_id, Zep's session).
    agent: str | None = None
    session: str | None = None


class Origin(msgspec.Struct, kw_only=True, frozen=True, omit_defaults=True):
    """A recall's filter by who stored a memory: only memories whose author, agent and session are the ones
    given (None: any). Applied where candidates are found (core.open_vault.Scope), so it never empties top_k."""

    author: str | None = None
    agent: str | None = None
    session: str | None = None

    @property
    def narrowed(self) -> bool:
        return self.author is not None or self.agent is not None or self.session is not None


class Edge(msgspec.Struct, kw_only=True):
    """A typed, directed relation source -[edge_type]-> target between two memories."""

    source: str
    target: str
    edge_type: str
    confidence: float = 1.0
    created_at: int = 0


class Access(msgspec.Struct, kw_only=True):
    """One logged use of a memory (hebbs/store/access_log.py)."""

    at: int
    # used: `hebbs used` / reinforce(); recall: returned by a recall with reinforce=True; panel: opened
    # in the Memory Palace.
    via: str


class Inspection(msgspec.Struct, kw_only=True):
    """A memory with its edges, earlier versions and logged uses (Engine.inspect)."""

    memory: Memory
    edges: list[Edge] = []
    history: list[Memory] = []
    # Its logged accesses, newest first (hebbs/store/access_log.py).
    accesses: list[Access] = []
    # How many times the memory was said again and consolidated into it, and when the latest of those
    # restatements was said (None when never): read from its restatement records in `history`.
    restatements: int = 0
    last_restated_at: int | None = None


class ImportSummary(msgspec.Struct, kw_only=True):
    """What an import stored (hebbs/workflows/transfer.py, docs/export.md)."""

    imported: int = 0
    already_there: int = 0
    edges: int = 0
    accesses: int = 0
    pending: int = 0
    originals: int = 0
    # The file's memory id -> its id in this vault, for every memory of the call (also those imported before).
    ids: dict[str, str] = {}


class ScoringWeights(msgspec.Struct, kw_only=True, frozen=True):
    """How much each factor counts in the composite score; set per recall call."""

    relevance: float = 0.5
    recency: float = 0.2
    importance: float = 0.2
    reinforcement: float = 0.1


class ScoreComponents(msgspec.Struct, kw_only=True):
    """The four factors of the composite score, each 0..1, before the caller's weights."""

    relevance: float
    recency: float
    importance: float
    reinforcement: float


class RecallResult(msgspec.Struct, kw_only=True):
    """One memory recalled, with its score taken apart."""

    memory: Memory
    # The composite score: the weighted sum of components (docs/recall.md).
    score: float
    components: ScoreComponents
    # The strategies (or fused channels) that found it.
    strategies: list[str] = []
    # Strategy-specific facts behind the relevance (rank in each channel, causal depth, ...).
    details: dict[str, Any] = {}
    # How likely this memory is relevant to the cue, 0..1, calibrated on data (hebbs/recall/confidence.py);
    # unlike score it ignores recency, importance and reinforcement. None when there was no cue.
    confidence: float | None = None
    # False when a newer memory, as of the recall's time, replaced this one or states another value for
    # it (newer names that memory); the result then ranks below it (docs/honesty.md "What is true now").
    current: bool = True
    newer: str | None = None
    # Memories this one was confirmed to contradict (a `contradiction` verdict): both are shown, and
    # `current` says nothing of which is true (that is not known).
    conflicts_with: list[str] = []
    # What every door shows beside the result: "older value: 2 -> 3 on 2026-12-04 (newer: 01J...)",
    # "conflicts with 01J... (confirmed contradiction)".
    marks: list[str] = []
    # Set only by a recall over several vaults (hebbs/recall/brains.py): "project" or "global", and the vault directory.
    vault: str | msgspec.UnsetType = msgspec.UNSET
    vault_path: str | msgspec.UnsetType = msgspec.UNSET


class TimeUnderstood(msgspec.Struct, kw_only=True):
    """A time phrase read from the cue (docs/recall.md, "Time words"): memories created from start to
    end (microseconds since the epoch, UTC, both included) were preferred. Pass time_range to override."""

    phrase: str
    start: int
    end: int
    text: str  # "'last week' read as 2023-05-01..2023-05-07"


class RecallResults(msgspec.Struct, kw_only=True):
    """The ranked results of a recall, plus anything the caller should know about how they were found."""

    results: list[RecallResult] = []
    notes: list[str] = []
    time_understood: TimeUnderstood | None = None
    # True when even the best result is below the confidence threshold: nothing relevant is known
    # for this cue (the weak candidates are still listed). Never true without a cue.
    abstained: bool = False
    # The best result's confidence (None without a cue), and the threshold it was held against.
    confidence: float | None = None
    threshold: float | None = None

    def __len__(self) -> int:
        return len(self.results)

    def __getitem__(self, index: int) -> RecallResult:
        return self.results[index]

    def __iter__(self):
        return iter(self.results)

    def ids(self) -> list[str]:
        return [r.memory.id for r in self.results]


class VaultStats(msgspec.Struct, kw_only=True):
    """What a vault holds: Engine.stats(), and the vault part of the daemon's status."""

    path: str
    memories: int
    by_kind: dict[str, int] = {}
    model: str | None = None
    dimension: int | None = None
    write_seq: int = 0
    superseded: int = 0
    # Where the records live: "rocksdb" (the vault directory's own database) or a PostgreSQL server and
    # the vault's name there, never with credentials.
    store: str = "rocksdb"


class ReembedProgress(msgspec.Struct, kw_only=True):
    """One report of `hebbs reembed`. stage: "reembed" (memories staged with the new model, a stopped run's
    included), "switch" (memories written or revised meanwhile, embedded while the vault is closed)."""

    stage: str
    done: int
    total: int
    model: str


class ReembedSummary(msgspec.Struct, kw_only=True):
    """What `hebbs reembed` did: the vault now holds `model`'s vectors, of `dimension`."""

    model: str
    previous: str
    dimension: int
    memories: int
    # Staged by an earlier run that was stopped (killed, cancelled): not embedded again.
    resumed: int = 0
    # Memories sent to the model by this run, of which `caught_up` at the switch (written meanwhile).
    embedded: int = 0
    caught_up: int = 0
    seconds: float = 0.0


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


# Reflection (hebbs/workflows/reflect.py) and contradiction review (hebbs/workflows/contradiction_review.py); docs/reflect.md ------

class ClusterMember(msgspec.Struct, kw_only=True, omit_defaults=True):
    """A memory as reflection shows it: what an agent needs to reason about it, and its id to cite."""

    id: str
    content: str
    created_at: int
    importance: float
    entity_id: str | None = None
    # Cosine similarity to the cluster's centroid: the higher, the more typical of its cluster.
    centrality: float = 0.0


class ReflectCluster(msgspec.Struct, kw_only=True):
    index: int
    # Most recent first.
    memories: list[ClusterMember]
    # The member nearest the centroid.
    representative_id: str
    # Characteristic terms (c-TF-IDF against the other clusters), strongest first.
    terms: list[str]
    # Ready to hand to an agent or an LLM; its answer is the `insights` of reflect_commit.
    prompt: str
    prompt_tokens: int
    # Members left out of the prompt to keep it within its token budget (the least typical go first).
    omitted: int = 0


class ReflectPrepared(msgspec.Struct, kw_only=True):
    session_id: str
    expires_at: int
    clusters: list[ReflectCluster]
    # Memories in clusters too small to say anything about (fewer than 3 members).
    unclustered: list[ClusterMember] = []
    memory_count: int = 0
    silhouette: float | None = None


class InsightInput(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """One insight for reflect_commit, as an agent or an LLM writes it."""

    content: str
    confidence: float
    source_memory_ids: list[str]
    tags: list[str] = []


class ReflectCommitted(msgspec.Struct, kw_only=True):
    session_id: str
    insights: list[Memory]
    # Markdown written back to ROOT/insights/ (vaults of a notes folder only).
    files: list[str] = []
    warnings: list[str] = []


class Insight(msgspec.Struct, kw_only=True):
    memory: Memory
    # None for an INSIGHT remembered by hand, without a stated confidence.
    confidence: float | None = None
    tags: list[str] = []
    source_ids: list[str] = []


class ReflectSession(msgspec.Struct, kw_only=True):
    """A reflect_prepare awaiting its commit; stored in the `meta` family under reflect_session:<id>."""

    id: str
    created_at: int
    expires_at: int
    memory_ids: list[str]
    entity_id: str | None = None
    committed_at: int | None = None


class ContradictionCandidate(msgspec.Struct, kw_only=True):
    pending_id: str
    memory_a: Memory
    memory_b: Memory
    similarity: float
    confidence: float
    reasons: list[str]
    created_at: int


class ContradictionPrepared(msgspec.Struct, kw_only=True):
    candidates: list[ContradictionCandidate]
    # Queued candidates dropped because a side was forgotten or superseded since.
    dropped: int = 0


class ContradictionVerdict(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """One decision for contradiction_commit."""

    pending_id: str
    # "contradiction" | "revision" | "neutral"
    verdict: str
    # Of the CONTRADICTS edges a contradiction creates.
    confidence: float = 1.0
    # Why; written into the contradiction report.
    note: str = ""


class ContradictionCommitted(msgspec.Struct, kw_only=True):
    contradictions: list[str] = []
    revisions: list[str] = []
    dismissed: list[str] = []
    edges: list[Edge] = []
    # Memories a revision verdict marked superseded.
    superseded: list[str] = []
    # Reports written to ROOT/contradictions/ (vaults of a notes folder only).
    files: list[str] = []
    warnings: list[str] = []


class ReflectAutoResult(msgspec.Struct, kw_only=True):
    """What `reflect` through the configured LLM did."""

    session_id: str
    clusters: int
    proposed: int
    accepted: int
    committed: ReflectCommitted | None = None
    # Proposals the validating call turned down, with its reason.
    rejected: list[str] = []
    # Answers that could not be used (not JSON, unknown memory ids, ...): reported, never fatal.
    problems: list[str] = []


class ContradictionAutoResult(msgspec.Struct, kw_only=True):
    reviewed: int
    committed: ContradictionCommitted | None = None
    # Candidates left for a person or an agent: the LLM was unsure, or its answer was unusable.
    left_pending: list[str] = []
    problems: list[str] = []


class SourceSection(msgspec.Struct, kw_only=True):
    """A memory's section exactly as it was in the file version it was written from (`hebbs source`)."""

    memory_id: str
    file: str
    heading_path: list[str]
    line_start: int
    line_end: int
    byte_start: int
    byte_end: int
    sha256: str  # the file version
    indexed_at: int
    text: str
    latest: bool  # this version is the file's newest kept one
    file_removed_at: int | None = None


class NoteText(msgspec.Struct, kw_only=True):
    """A note of the notes folder as it is now (`hebbs note read`): its text and its version, the
    version `note write` must be given to replace it."""

    path: str  # inside the notes folder, e.g. agent/deploy.md
    file: str  # absolute
    exists: bool
    version: str | None = None  # None: no such note yet
    text: str = ""


class NoteWritten(msgspec.Struct, kw_only=True):
    """What `note write` or `note append` did: the note's new version, and the memories its sections are now."""

    path: str
    file: str
    version: str
    previous_version: str | None = None  # None: the note was created
    created: bool = False
    # How often the note changed on disk while hebbs wrote it (an append re-read and applied again).
    retries: int = 0
    sections: int = 0
    memory_ids: list[str] = []
    warnings: list[str] = []
