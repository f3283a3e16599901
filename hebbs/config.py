"""Vault configuration: `<vault>/config.toml`, every key optional, defaults below.

Read once when the vault opens. An unknown key or a wrong type is an error that names it, so a typo
in the config never silently falls back to a default.
"""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath
from collections.abc import Mapping
from typing import Any, ClassVar

import msgspec

from .errors import InvalidInput

CONFIG_FILE = "config.toml"
# Below this best confidence a recall abstains (hebbs/recall/confidence.py): chosen on data by
# bench/bench_abstention.py --fit, the highest threshold at which at most 3% of the fit part's
# answerable cues abstain: one standard error under the 4% goal (docs/honesty.md).
DEFAULT_ABSTAIN_THRESHOLD = 0.22
# The fusion weights chosen on MiniLM's cosines (FusionParams.MODEL_KEYS): on LoCoMo min-max normalized
# scores weighted 0.6 lexical / 0.4 dense beat either channel alone; identifiers 0.8; long memories 0.4;
# neighbour support 0.2 (docs/retrieval.md, bench/results/history.md). Another model's are its own.
MINILM_FUSION: dict[str, float] = {"lexical_weight": 0.6, "identifier_lexical_weight": 0.8,
                                   "long_lexical_weight": 0.4, "neighbor_weight": 0.2}


class IndexParams(msgspec.Struct, kw_only=True, frozen=True):
    """HNSW settings ([index] in config.toml)."""
    # Links per node in the graph: more is better recall and more memory.
    m: int = 16
    # Candidates weighed while inserting: more is a better graph and slower writes.
    ef_construction: int = 200
    # Candidates weighed per search (at least top_k is used): more is better recall and slower searches.
    ef_search: int = 50

    def __post_init__(self) -> None:
        # Checked here: hnswlib takes a negative M as a type error deep inside the first write.
        if not 2 <= self.m <= 128:
            raise ValueError(f"index.m must be from 2 to 128, got {self.m}")
        if self.ef_construction < 1 or self.ef_search < 1:
            raise ValueError(f"index.ef_construction and index.ef_search must be 1 or more, got "
                             f"{self.ef_construction} and {self.ef_search}")


class FusionParams(msgspec.Struct, kw_only=True, frozen=True, forbid_unknown_fields=True):
    """How the lexical and similarity channels combine into one relevance (see recall.fuse).

    Defaults chosen on three benchmarks together (docs/retrieval.md has the tables): notes
    (bench_notes), documents (CISI) and conversations (LoCoMo). On LoCoMo min-max normalized scores
    weighted 0.6 lexical / 0.4 dense beat either channel alone in every question category, where
    plain reciprocal rank fusion fell between them; long memories (note sections, abstracts) lean
    on the dense channel instead.

    The four weights that trade one channel against the other (MODEL_KEYS) were chosen on MiniLM's
    cosines, so each model has its own (docs/embedding.md): unset, a vault uses its model's.
    """
    # Code reads MODEL_KEYS through value(): a FusionParams not resolved for a model (for_model) has MiniLM's.

    MODEL_KEYS: ClassVar[tuple[str, ...]] = ("lexical_weight", "identifier_lexical_weight",
                                             "long_lexical_weight", "neighbor_weight")

    # The lexical (BM25) channel's share of relevance; the similarity channel has the rest. Unset: the
    # model's own (0.6 under MiniLM).
    lexical_weight: float | None = None
    # Used instead of lexical_weight when the cue contains an identifier (ERR_CONN_RESET, v2.3.1,
    # --top-k, file.md, camelCase): an exact token match is then the strongest evidence there is. Unset:
    # the model's own (0.8 under MiniLM).
    identifier_lexical_weight: float | None = None
    # Each channel's scores are min-max normalized over its top `normalization_depth` hits, so the
    # weights compare like with like: a channel's best hit scores 1, its depth-th hit 0.
    normalization_depth: int = 50
    # Long memories lean on the dense channel (recall.fusion.lexical_weight_for): lexical_weight applies
    # while the median memory in play has at most short_words words, long_lexical_weight from
    # long_words on, log-linear in between. Unset: the model's own (0.4 under MiniLM).
    long_lexical_weight: float | None = None
    short_words: int = 30
    long_words: int = 100
    # Sections of one note support each other (recall.fusion.sibling_support): a section gains
    # sibling_weight times the fused relevance of its sibling_count best sibling sections.
    sibling_weight: float = 0.2
    sibling_count: int = 2
    # Memories alike in meaning support each other (recall.fusion.neighbor_support): each of the
    # neighbor_pool best candidates moves neighbor_weight of the way towards the cosine-weighted mean
    # relevance of its neighbor_count nearest candidates. 0 turns it off. Unset: the model's own (0.2 under MiniLM).
    # neighbor_pool 100 takes every candidate of a 50-deep search of both channels, and the tail of a
    # top_k 100 recall. Each value was chosen on every benchmark set at once (bench/results/history.md).
    neighbor_weight: float | None = None
    neighbor_count: int = 5
    neighbor_pool: int = 100
    # How many candidates each channel contributes: max(normalization_depth, top_k * candidate_factor).
    # 1 is enough: past normalization_depth a channel gives nothing to relevance, so deeper hits
    # only fill a long result list; 5 made a top_k=100 recall fetch and fuse 500 hits per channel.
    candidate_factor: int = 1
    # Pseudo-relevance feedback for long cues (recall.fused.feedback_hits, recall.fusion.feedback_terms):
    # a cue of at least feedback_min_terms index terms is searched again by BM25, its own terms
    # sharing 1 - feedback_weight and the feedback_terms heaviest terms of the feedback_docs best
    # fused candidates sharing feedback_weight; that search replaces the lexical channel.
    # feedback_weight 0 turns it off. Only long cues: a short cue drifts with feedback terms, and
    # conversations and notes lost answers when every cue had it. The values were chosen one at a time
    # on the benchmark sets (bench/results/history.md).
    feedback_weight: float = 0.5
    feedback_terms: int = 20
    feedback_docs: int = 10
    feedback_min_terms: int = 12
    # The tail past normalization_depth (recall.fusion.fuse): min-max gives every hit there 0 in its
    # channel, so a top_k of 100 ended in an order that MMR's diversity alone decided. A candidate's
    # relevance is at least rank_weight times its reciprocal-rank score over both channels (k =
    # rank_k). That is at most 2 / 61 x 0.25 = 0.008, below all but the last few head hits' fused
    # scores, so it orders the tail only: recall@100 gains and the head is unchanged. A floor, not added
    # to every candidate, which would move the head too. Chosen on every set at once
    # (bench/results/history.md). 0 turns it off.
    rank_weight: float = 0.25
    rank_k: int = 60

    def __post_init__(self) -> None:
        if not 0 <= self.feedback_weight <= 1:
            raise ValueError(f"recall.fusion.feedback_weight must be from 0 to 1, got {self.feedback_weight}")
        if self.feedback_terms < 0 or self.feedback_docs < 0 or self.feedback_min_terms < 0:
            raise ValueError("recall.fusion.feedback_terms, feedback_docs and feedback_min_terms must be >= 0")
        if not 0 <= self.rank_weight <= 1 or self.rank_k < 0:
            raise ValueError("recall.fusion.rank_weight must be from 0 to 1 and rank_k >= 0")
        for key in self.MODEL_KEYS:
            value = getattr(self, key)
            if value is not None and not 0 <= value <= 1:
                raise ValueError(f"recall.fusion.{key} must be from 0 to 1, got {value}")
        if self.neighbor_count < 0 or self.neighbor_pool < 0:
            raise ValueError("recall.fusion.neighbor_count and neighbor_pool must be >= 0")

    def value(self, key: str) -> float:
        """One of MODEL_KEYS: as set, else MiniLM's."""
        value = getattr(self, key)
        return MINILM_FUSION[key] if value is None else float(value)

    def for_model(self, fitted: Mapping[str, float]) -> FusionParams:
        """These settings with each unset MODEL_KEYS weight the model's `fitted` one (MiniLM's when it has none)."""
        unset = {key: float(fitted.get(key, MINILM_FUSION[key])) for key in self.MODEL_KEYS if getattr(self, key) is None}
        return msgspec.structs.replace(self, **unset) if unset else self


class TimeWordsParams(msgspec.Struct, kw_only=True, frozen=True, forbid_unknown_fields=True):
    """Time words in a cue ("last week", "in May 2023"; recall/timewords.py, docs/recall.md)."""

    # Read time words in cues at all.
    enabled: bool = True
    # No longer read: a memory from the understood range is preferred through the recency component
    # (recall/scoring.py time_match), so that a score stays the weights times the four components. Kept so
    # that a config.toml written before still loads.
    boost: float = 0.25

    def __post_init__(self) -> None:
        if not 0 <= self.boost <= 1:
            raise ValueError(f"recall.time_words.boost must be from 0 to 1, got {self.boost}")


class RecallConfig(msgspec.Struct, kw_only=True, frozen=True, forbid_unknown_fields=True):
    fusion: FusionParams = FusionParams()
    time_words: TimeWordsParams = TimeWordsParams()
    # Recency in the composite score falls linearly to 0 over a window of days: "half_life" makes the
    # window each memory's half-life from [decay] by its context type (a task 7 days, a rule 730; a
    # fact's 180 raised to untyped_recency_days, recall/scoring.py recency_window_days), so a rule does
    # not go stale in a month; a number is one flat window for every memory (30 was the only behaviour before).
    recency_window: float | str = "half_life"
    # With "half_life", the window of a memory whose type has no half-life of its own (no type, or
    # one no table names). Not decay.default_half_life_days: that is when a plain episode becomes a
    # forget candidate, while recall cannot tell an untyped memory is an episode. Conversations are
    # untyped, and recalled as of their last session their older turns still answer: a short window
    # ranks them out (docs/retrieval.md, "Time words and freshness", has the figures by window).
    untyped_recency_days: float = 730.0
    # The weight of relevance against diversity: 1 = score order (no MMR), lower = more diverse, 0 =
    # diversity alone after the best. 0.9 was the best setting on LoCoMo (docs/retrieval.md): a little
    # diversity surfaces the other evidence turns a question needs; 0.7 and below pushed relevant turns out.
    mmr_lambda: float = 0.9
    # With MMR on (lambda below 1), a candidate this similar (cosine) to one already picked is a restatement of it,
    # and comes after every result that is not. Unset: the model's own (hebbs.models.calibration; 0.95 under MiniLM).
    duplicate_similarity: float | None = None
    # Analogical recall: weight of embedding similarity against structural similarity.
    analogical_alpha: float = 0.5
    # On: a cue of several sentences is embedded as the mean of its sentences' embeddings (recall.query.
    # cue_embedding), each thing a paragraph asks searched for. Off by default: on CISI (52 of 76
    # queries have several sentences) it helped a little, elsewhere nothing (no such cue), and it
    # embeds each sentence on its own, a paragraph's recall costing several embeddings
    # (docs/retrieval.md, "Long cues"). Fused recall only: similarity alone
    # searches the cue's own embedding, the plain vector search a caller compares with hnswlib.
    cue_by_sentence: bool = False
    # A recall whose best result's confidence is below this abstains: "nothing relevant known"
    # (hebbs/recall/confidence.py; the default was chosen on data, docs/honesty.md). Unset: the one fitted
    # with the vault's model's calibration (hebbs.models.calibration; DEFAULT_ABSTAIN_THRESHOLD under MiniLM).
    abstain_threshold: float | None = None
    # The query log (`hebbs queries`, the panel's Queries page) keeps at most this many recalls, the
    # newest, and none older than query_log_days: every recall adds one entry (a few hundred bytes), so
    # a daemon serving an agent for months would otherwise grow it without end. Nothing else reads it:
    # reinforcement and association learn from the access log (workflows/reinforce.py).
    query_log_keep: int = 10_000
    # Query log entries older than this many days are deleted (with those past query_log_keep), at
    # the recall that trims the log: every tenth of query_log_keep recalls, at most every 100.
    query_log_days: float = 90.0

    def __post_init__(self) -> None:
        if not self.query_log_keep >= 1:
            raise ValueError(f"recall.query_log_keep must be at least 1, got {self.query_log_keep}")
        if not self.query_log_days > 0:
            raise ValueError(f"recall.query_log_days must be above 0, got {self.query_log_days}")
        if isinstance(self.recency_window, str) and self.recency_window != "half_life":
            raise ValueError(f"recall.recency_window must be \"half_life\" or a number of days, "
                             f"got {self.recency_window!r}")
        if not isinstance(self.recency_window, str) and not self.recency_window > 0:
            raise ValueError(f"recall.recency_window must be above 0 days, got {self.recency_window}")
        if not self.untyped_recency_days > 0:
            raise ValueError(f"recall.untyped_recency_days must be above 0, got {self.untyped_recency_days}")


DEFAULT_HALF_LIVES = {
    "rule": 730.0, "decision": 730.0, "architecture": 730.0,
    "preference": 180.0, "fact": 180.0,
    "task": 7.0, "status": 3.0,
}


class DecayConfig(msgspec.Struct, kw_only=True, frozen=True, forbid_unknown_fields=True):
    """How memories fade when unused (hebbs/workflows/decay.py, docs/decay.md)."""

    # The half-life of a memory whose context type has none of its own.
    default_half_life_days: float = 30.0
    # By the memory's context "type". Why these values: docs/decay.md.
    half_life_days: dict[str, float] = msgspec.field(default_factory=lambda: dict(DEFAULT_HALF_LIVES))
    # How often the daemon recomputes every memory's decay score, and how many memories per batch.
    sweep_interval_seconds: float = 3600.0
    sweep_batch: int = 10_000
    # Below this decay score a memory is a forget candidate (pinned memories never are).
    forget_threshold: float = 0.01
    # Let the sweep forget the candidates; off, they are only listed (Engine.forget_candidates).
    auto_forget: bool = False

    def __post_init__(self) -> None:
        # A zero or negative half-life would divide by zero (or make memories grow) in every sweep.
        lives = {"default_half_life_days": self.default_half_life_days,
                 **{f"half_life_days.{k}": v for k, v in self.half_life_days.items()}}
        for name, value in lives.items():
            if not value > 0:
                raise ValueError(f"decay.{name} must be above 0, got {value}")
        if not self.sweep_interval_seconds > 0 or self.sweep_batch < 1 or self.forget_threshold < 0:
            raise ValueError("decay.sweep_interval_seconds and decay.sweep_batch must be above 0, "
                             "decay.forget_threshold at least 0")

    def half_life_for(self, kind: str | None) -> float:
        """By context type: this table first, then the built-in one, then the default.

        The vault's table is laid over the built-in one, so a config.toml that changes `task` alone
        keeps the defaults for every other type.
        """
        typed = self.typed_half_life(kind)
        return float(self.default_half_life_days) if typed is None else typed

    def typed_half_life(self, kind: str | None) -> float | None:
        """The half-life this context type has in the vault's or the built-in table; None for no type
        or a type neither table names."""
        if kind is None:
            return None
        name = kind.strip().lower()
        value = self.half_life_days.get(name, DEFAULT_HALF_LIVES.get(name))
        return None if value is None else float(value)


class ContradictionsConfig(msgspec.Struct, kw_only=True, frozen=True, forbid_unknown_fields=True):
    """Contradiction candidates found at remember time (hebbs/workflows/contradiction_review.py, docs/reflect.md)."""

    # Compare each remembered memory with its nearest neighbours and queue likely conflicts for review.
    check_on_remember: bool = True
    # Few neighbours keep the check cheap: a conflicting claim is nearly always among the closest.
    neighbors: int = 5
    # Only neighbours at least this similar (cosine) are compared. Unset: the model's own
    # (hebbs.models.calibration; 0.5 under MiniLM).
    min_similarity: float | None = None
    # Pairs whose confidence is above this are queued for review (docs/contradictions.md).
    threshold: float = 0.35


class ConsolidationConfig(msgspec.Struct, kw_only=True, frozen=True, forbid_unknown_fields=True):
    """Restatements merged into the memory they repeat (hebbs/workflows/consolidate.py, docs/consolidation.md)."""

    # Fold a remembered restatement into the memory it repeats, at once.
    on_remember: bool = True
    # Run the whole-vault sweep on the decay sweep's schedule.
    on_sweep: bool = False


class LLMConfig(msgspec.Struct, kw_only=True, frozen=True, forbid_unknown_fields=True):
    """An optional OpenAI-compatible chat-completions server (hebbs/llm.py, docs/reflect.md).

    Read from $HEBBS_HOME/config.toml, then <vault>/config.toml, whose keys win.
    """

    # The server's base URL, like "http://localhost:11434/v1", and the model to ask for.
    base_url: str | None = None
    model: str | None = None
    # The NAME of the environment variable that holds the API key: a key never goes in a file.
    api_key_env: str | None = None
    # Requests in flight at once, and how long one may take.
    concurrency: int = 4
    timeout_seconds: float = 60.0
    # Tries per request on rate limits and server errors, waiting backoff_seconds, then twice that, and so on.
    max_attempts: int = 4
    backoff_seconds: float = 1.0
    # The max_tokens asked for each answer.
    max_answer_tokens: int = 1024
    # Ask for response_format {"type": "json_object"}; turn off for servers that reject it.
    json_mode: bool = True
    # Sent only when set; unset leaves the server's default.
    temperature: float | None = None

    def __post_init__(self) -> None:
        if self.api_key_env is not None and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", self.api_key_env):
            raise ValueError("llm.api_key_env is the name of an environment variable (like OPENAI_API_KEY), "
                             "not the key itself")
        if self.concurrency < 1 or self.max_attempts < 1 or self.max_answer_tokens < 1:
            raise ValueError("llm.concurrency, llm.max_attempts and llm.max_answer_tokens must be at least 1")
        if not self.timeout_seconds > 0 or self.backoff_seconds < 0:
            raise ValueError("llm.timeout_seconds must be above 0, llm.backoff_seconds at least 0")


class PanelConfig(msgspec.Struct, kw_only=True, frozen=True, forbid_unknown_fields=True):
    """The Memory Palace web panel (docs/palace.md). Read from $HEBBS_HOME/config.toml only: it belongs
    to the daemon, not to a vault. $HEBBS_PANEL=off and $HEBBS_PANEL_PORT override it."""

    # Serve the panel from the daemon, on 127.0.0.1 at this port.
    enabled: bool = True
    port: int = 6381
    # A browser session (the panel's cookie) ends after this many seconds without a request (2 hours).
    session_idle_seconds: int = 7200
    # A browser session ends this many seconds after it was opened, used or not (a day); `hebbs palace` opens another.
    session_max_seconds: int = 86400

    def __post_init__(self) -> None:
        if not 1 <= self.port <= 65535:
            raise ValueError(f"panel.port must be from 1 to 65535, got {self.port}")
        if self.session_idle_seconds < 1 or self.session_max_seconds < 1:
            raise ValueError("panel.session_idle_seconds and panel.session_max_seconds must be at least 1")


class DaemonConfig(msgspec.Struct, kw_only=True, frozen=True, forbid_unknown_fields=True):
    """The daemon's timeouts and limits (docs/reliability.md). Read from $HEBBS_HOME/config.toml only: they
    belong to the daemon, not to a vault. A flag of `python -m hebbs.daemon`, then $HEBBS_*, overrides
    each; unset means the built-in default."""

    # Seconds without a connection before the daemon exits, 0 = never (300; $HEBBS_IDLE_TIMEOUT).
    idle_timeout: float | None = None
    # Seconds unused before the daemon closes a vault, 0 = never (300; $HEBBS_VAULT_IDLE_TIMEOUT).
    vault_idle_timeout: float | None = None
    # Connections served at once (256; $HEBBS_MAX_CONNECTIONS).
    max_connections: int | None = None
    # Seconds a silent connection is kept (600; $HEBBS_CONNECTION_IDLE_TIMEOUT).
    connection_idle_timeout: float | None = None
    # Seconds a request may take to arrive once it has started (30; $HEBBS_FRAME_TIMEOUT).
    frame_timeout: float | None = None
    # Size at which daemon.log is rotated (10 MiB; $HEBBS_LOG_MAX_BYTES).
    log_max_bytes: int | None = None
    # MiB the warm embedding models of the open vaults may take together (3072; $HEBBS_MODEL_MEMORY_MB):
    # opening a vault whose model would pass it is refused (MODEL_BUDGET; docs/embedding.md).
    model_memory_mb: int | None = None


class NotesConfig(msgspec.Struct, kw_only=True, frozen=True, forbid_unknown_fields=True):
    """Where reflect-commit and contradiction reviews write notes into the notes folder a vault was indexed from
    ([notes]; hebbs/workflows/reflect.py): folders relative to the notes folder, kept out of the index; and the
    largest note the indexer takes (hebbs/notes/walk.py)."""

    # Write insights and settled contradictions as notes; off, they are kept in the vault only.
    write: bool = True
    insights_dir: str = "insights"
    contradictions_dir: str = "contradictions"
    # A note larger than this (bytes) is skipped, and named in the index's warnings and in `hebbs list`:
    # one huge file must not take the daemon's memory. 5 MB is about 2,500 pages of prose.
    max_note_bytes: int = 5_000_000

    def __post_init__(self) -> None:
        if self.max_note_bytes < 1:
            raise ValueError(f"notes.max_note_bytes must be at least 1, got {self.max_note_bytes}")
        for name, value in (("insights_dir", self.insights_dir), ("contradictions_dir", self.contradictions_dir)):
            parts = PurePosixPath(value).parts
            if not value.strip() or PurePosixPath(value).is_absolute() or ".." in parts or any(
                    p.startswith(".") for p in parts):
                raise ValueError(f"notes.{name} must be a folder inside the notes folder, like \"insights\" or "
                                 f"\"hebbs/insights\" (no .., no leading dot), got {value!r}")


class _NotesOnly(msgspec.Struct, kw_only=True):
    notes: NotesConfig = NotesConfig()


def notes_config(vault_dir: Path) -> NotesConfig:
    """The [notes] section alone, for the file walker (defaults when the file is absent or unreadable: the
    whole config is checked, with a clear error, when the vault opens)."""
    try:
        return msgspec.toml.decode((vault_dir / CONFIG_FILE).read_bytes(), type=_NotesOnly).notes
    except (OSError, msgspec.DecodeError, msgspec.ValidationError):
        return NotesConfig()


class SourcesConfig(msgspec.Struct, kw_only=True, frozen=True, forbid_unknown_fields=True):
    """The original kept: file versions the markdown indexer keeps (hebbs/store/originals.py, docs/notes.md)."""

    # Keep the original of every indexed file version, compressed, for `hebbs source`.
    keep: bool = True
    # Five versions cover the edits of a working session and what `hebbs history` usually shows;
    # older ones stay only while a memory still points at them.
    keep_versions: int = 5
    # A hard cap for everything but each file's current version: 256 MiB holds about 1 GiB of markdown.
    max_bytes: int = 256 * 1024 * 1024

    def __post_init__(self) -> None:
        if self.keep_versions < 1 or self.max_bytes < 0:
            raise ValueError("sources.keep_versions must be at least 1 and sources.max_bytes at least 0")


# When a write is acknowledged: hebbs/store/durability.py, docs/reliability.md.
DURABILITY_MODES = ("sync", "buffered")


class StoreConfig(msgspec.Struct, kw_only=True, frozen=True, forbid_unknown_fields=True):
    """Where the vault's records live and when a write to them is acknowledged: nothing set, the embedded
    RocksDB in the vault directory; a PostgreSQL URL (or libpq connection string), a vault shared by a
    team (docs/scale.md), named `name` in that database. Credentials never go here: libpq reads
    PGPASSWORD, ~/.pgpass or a service file."""

    # When a RocksDB store acknowledges a write (hebbs/store/durability.py, docs/reliability.md): "sync",
    # after its write-ahead log is fsynced (survives a power cut; concurrent writers share one fsync);
    # "buffered", after the OS has the log (survives a crash of hebbs, not of the machine). PostgreSQL
    # acknowledges by its own synchronous_commit. Older configs say it as [storage] durability.
    durability: str = "sync"

    url: str | None = None
    name: str | None = None
    # Servers reads may use (streaming replicas), as a URL or libpq string, e.g. one with several hosts
    # and target_session_attrs=prefer-standby: a daemon reads there only from a server that has replayed
    # past its own last commit and what it has caught up with (read-your-writes), else from `url`;
    # reads under the writer lock and the catch-up's log always go to `url` (docs/scale.md).
    read_url: str | None = None
    # Where `similar` searches: "local", this daemon's HNSW cache of the vectors (fastest; it holds
    # every vector in RAM), or "pgvector", the HNSW index in PostgreSQL (for a vault larger than a
    # daemon's RAM: nothing of the vectors is held locally). docs/scale.md has both measured.
    similar: str = "local"
    # Several `hebbs index` runs of one notes tree split its files by claims in the store; a claim
    # not renewed for this many seconds (its indexer was killed) is taken over by another.
    claim_lease: float = 30.0
    # Connections each daemon opens to `url` for this vault, at most (opened as needed), and as many
    # again to `read_url`; besides them, one for the wake-ups and one for the writer lock. A pooler or a
    # server that gives fewer makes a busy daemon's calls wait, then fail (docs/scale.md has the sum).
    pool_size: int = 16
    # Seconds a call retries a server it cannot reach (a restart, a failover) before it fails with
    # STORE_UNAVAILABLE, which names the vault and the server; the caller may retry it.
    unreachable_after: float = 5.0

    def __post_init__(self) -> None:
        if self.durability not in DURABILITY_MODES:
            raise ValueError(f"store.durability must be one of {list(DURABILITY_MODES)}, got {self.durability!r}")
        if self.claim_lease <= 0:
            raise ValueError(f"store.claim_lease must be positive, got {self.claim_lease!r}")
        if self.pool_size < 1:
            raise ValueError(f"store.pool_size must be at least 1, got {self.pool_size!r}")
        if self.unreachable_after <= 0:
            raise ValueError(f"store.unreachable_after must be positive, got {self.unreachable_after!r}")
        if self.similar not in ("local", "pgvector"):
            raise ValueError(f"store.similar must be local or pgvector, got {self.similar!r}")
        if self.url is None:
            if self.read_url is not None:
                raise ValueError("store.read_url needs store.url: replicas of the server the vault lives on")
            return
        for url in (self.url, self.read_url):
            problem = store_url_problem(url) if url is not None else None
            if problem:
                raise ValueError(problem)
        if not self.name:
            raise ValueError("store.name is required with store.url: the vault's name in that database")


def store_url_problem(url: str) -> str | None:
    """Why a store URL cannot be used, or None."""
    text = url.strip()
    if not (text.startswith(("postgresql://", "postgres://")) or "=" in text):
        return f"store must be a PostgreSQL URL (postgresql://HOST[:PORT]/DATABASE) or connection string, got {url!r}"
    lowered = text.lower()
    userinfo = text.split("://", 1)[1].split("@", 1)[0] if "://" in text and "@" in text.split("/", 3)[2] else ""
    if "password=" in lowered or ":" in userinfo:
        return ("a store URL must not hold a password: it would be written into the vault's config. Give it to "
                "libpq instead (PGPASSWORD, ~/.pgpass, or a service file with service=NAME)")
    return None


def with_store_location(text: str, url: str, name: str) -> str:
    """config.toml's text with its [store] table naming where the records live (hebbs init --store,
    hebbs migrate), checked: the lines go under the table's header, or into a new table at the end."""
    problem = store_url_problem(url)
    if problem:
        raise InvalidInput(problem)
    if not name.strip() or any(c in name for c in "\"\n\\"):
        raise InvalidInput(f"a vault name is a line of text without quotes or backslashes, got {name!r}")
    lines = (f"# Where this vault's records live: a PostgreSQL shared by a team (docs/scale.md). Credentials come\n"
             f"# from libpq (PGPASSWORD, ~/.pgpass, a service file), never from this file.\n"
             f'url = "{url.strip()}"\nname = "{name.strip()}"\n')
    header = re.search(r"^\[store\][ \t]*(#.*)?\n", text, re.M)
    if header is None:
        return text.rstrip("\n") + "\n\n[store]\n" + lines
    return text[:header.end()] + lines + text[header.end():]


# The longest author name: a name with a host, not a text.
MAX_AUTHOR_CHARS = 200


class VaultConfig(msgspec.Struct, kw_only=True, frozen=True, forbid_unknown_fields=True):
    # The embedding model: a name from hebbs/models/registry.toml, or a folder with an .onnx file and
    # its tokenizer.json. Unset: all-MiniLM-L6-v2. A vault keeps the model it was made with.
    model: str | None = None
    # Who you are, stamped as the author of every memory your daemon stores (docs/scale.md, "Who wrote
    # what"). Read from $HEBBS_HOME/config.toml only: it belongs to a person, not to a vault a team shares.
    # $HEBBS_AUTHOR overrides it; unset: user@host.
    author: str | None = None
    store: StoreConfig = StoreConfig()
    index: IndexParams = IndexParams()
    recall: RecallConfig = RecallConfig()
    decay: DecayConfig = DecayConfig()
    contradictions: ContradictionsConfig = ContradictionsConfig()
    consolidation: ConsolidationConfig = ConsolidationConfig()
    llm: LLMConfig = LLMConfig()
    panel: PanelConfig = PanelConfig()
    daemon: DaemonConfig = DaemonConfig()
    notes: NotesConfig = NotesConfig()
    sources: SourcesConfig = SourcesConfig()

    def __post_init__(self) -> None:
        if self.author is not None:
            check_author(self.author, "author")


def check_author(name: str, where: str) -> str:
    """An author name as it is stored: one line of text, not empty, at most MAX_AUTHOR_CHARS."""
    name = name.strip()
    if not name or len(name) > MAX_AUTHOR_CHARS or any(ord(c) < 32 or ord(c) == 127 for c in name):
        raise ValueError(f"{where} must be one line of 1 to {MAX_AUTHOR_CHARS} characters, like \"dana@laptop\", "
                         f"got {name!r}")
    return name


def load_config(vault_dir: Path) -> VaultConfig:
    path = vault_dir / CONFIG_FILE
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return VaultConfig()
    try:
        if b"storage" in raw:
            table = msgspec.toml.decode(raw)
            if isinstance(table, dict) and "storage" in table:
                folded = sorted(table["storage"]) if isinstance(table["storage"], dict) else []
                try:
                    return msgspec.convert(_fold_storage(table, path), type=VaultConfig)
                except msgspec.ValidationError as exc:
                    # Name the key where the user wrote it, not where it was folded to.
                    message = str(exc)
                    for key in folded:
                        message = message.replace(f"store.{key}", f"storage.{key}")
                    if any(f"storage.{key}" in message for key in folded):
                        message = message.replace("`$.store`", "`$.storage`")
                    raise InvalidInput(f"{path}: {message}") from None
        return msgspec.toml.decode(raw, type=VaultConfig)
    except (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError) as exc:
        raise InvalidInput(f"{path}: {exc}") from None


def _fold_storage(table: dict[str, Any], path: Path) -> dict[str, Any]:
    """A config written before [storage] durability became [store] durability, read as now."""
    old, store = table.pop("storage"), table.setdefault("store", {})
    if not isinstance(old, dict) or not isinstance(store, dict):
        raise InvalidInput(f"{path}: [storage] and [store] must be tables")
    for key, value in old.items():
        if key in store:
            raise InvalidInput(f"{path}: [storage] {key} is [store] {key} now: give it once, in [store]")
        store[key] = value
    return table


DEFAULT_CONFIG_TEXT = """\
# hebbs vault configuration. Every key is optional; these are the defaults.
# model = "all-MiniLM-L6-v2"      # or a directory with an ONNX model and tokenizer.json

[store]
durability = "sync"              # or "buffered": faster writes that survive a crash of hebbs, not a power cut

[index]
m = 16
ef_construction = 200
ef_search = 50

[recall]
recency_window = "half_life"     # or a number of days, the same for every memory
untyped_recency_days = 730.0     # the window of a memory without a type of its own
mmr_lambda = 0.9                # 1 = score order, lower = more diverse, 0 = diversity alone after the best
# duplicate_similarity = 0.95    # MiniLM's; unset, each model's own (docs/embedding.md)
analogical_alpha = 0.5
cue_by_sentence = false         # true: a paragraph cue is the mean of its sentences (a pass of the model each)
# abstain_threshold = %ABSTAIN%  # MiniLM's; unset, the one fitted with the model's calibration: set it only to override
query_log_keep = 10000          # the query log keeps the newest recalls, at most this many
query_log_days = 90.0           # and none older than this

[recall.time_words]
enabled = true

[recall.fusion]
# lexical_weight = 0.6               # MiniLM's; unset, each model's own (docs/embedding.md)
# identifier_lexical_weight = 0.8    # MiniLM's; unset, each model's own (docs/embedding.md)
normalization_depth = 50
candidate_factor = 1
# long_lexical_weight = 0.4          # MiniLM's; unset, each model's own (docs/embedding.md)
short_words = 30
long_words = 100
sibling_weight = 0.2
sibling_count = 2
# neighbor_weight = 0.2              # MiniLM's; unset, each model's own (docs/embedding.md)
neighbor_count = 5
neighbor_pool = 100
feedback_weight = 0.5
feedback_terms = 20
feedback_docs = 10
feedback_min_terms = 12
rank_weight = 0.25
rank_k = 60

[decay]
default_half_life_days = 30.0
sweep_interval_seconds = 3600.0
auto_forget = false

[decay.half_life_days]
rule = 730.0
decision = 730.0
architecture = 730.0
preference = 180.0
fact = 180.0
task = 7.0
status = 3.0

[contradictions]
check_on_remember = true
neighbors = 5
# min_similarity = 0.5            # MiniLM's; unset, each model's own (docs/embedding.md)

# Where reflect-commit and contradiction reviews write notes, inside the notes folder (a vault indexed from one).
[notes]
write = true
insights_dir = "insights"
contradictions_dir = "contradictions"
max_note_bytes = 5000000         # a larger note is skipped (named in the index's warnings and in `hebbs list`)

# The original of every indexed file version, compressed, for `hebbs source ID` (docs/notes.md).
[sources]
keep = true
keep_versions = 5
max_bytes = 268435456

# An OpenAI-compatible server for `hebbs reflect` (optional; keys here override $HEBBS_HOME/config.toml).
# [llm]
# base_url = "http://localhost:11434/v1"
# model = "llama3.1"
# api_key_env = "OPENAI_API_KEY"   # the variable's name; never the key itself
""".replace("%ABSTAIN%", str(DEFAULT_ABSTAIN_THRESHOLD))
