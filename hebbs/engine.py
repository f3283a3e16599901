"""The engine: the facade an agent or the daemon calls. One open vault (core/open_vault.py) plus the
memory operations composed from the layers below it: recall strategies (recall/), workflows
(workflows/). docs/architecture.md has the map.
"""

from __future__ import annotations

import contextlib
import functools
import os
import time
import traceback
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from . import validate
from .config import VaultConfig, load_config
from .errors import InvalidInput, VaultNotInitialized
from .paths import hebbs_home, vault_for_path
from .recall import pipeline
from .recall.options import RecallOptions, takes_options
from .recall.prime import prime
from .schema import (Access, ContradictionAutoResult, ContradictionCommitted, ContradictionPrepared, Edge, EdgeType,
                     ImportSummary, Insight, Inspection, Memory, MemoryKind, PendingContradiction, QueryLogEntry, RecallResults, ReflectAutoResult,
                     ReflectCommitted, ReflectPrepared, Source, SourceSection, VaultStats)
from .embedding.embed import Embedder, get_embedder
from .core.open_vault import OpenVault, open_store, vault_model
from .workflows import consolidate as consolidation
from .workflows import contradiction_review, decay, reflect
from .workflows import edges as linking
from .workflows import forget as forgetting
from .workflows import reinforce as use
from .workflows import remember as remembering
from .workflows import revise as revising
from .workflows import source as sources
from .workflows import transfer


def _acknowledged_when_durable(method: Callable[..., Any]) -> Callable[..., Any]:
    """The call returns once its writes are durable (config store.durability). The wait comes after
    the method has released the engine's lock, so concurrent writers share one WAL sync. On a closed
    vault it raises InvalidInput, as a read does (_said_closed)."""
    @functools.wraps(method)
    def wrapper(self: "Engine", *args: Any, **kwargs: Any) -> Any:
        with _said_closed(self.vault), self.vault.store.deferred_sync():
            return method(self, *args, **kwargs)
    return wrapper


def _reading(method: Callable[..., Any]) -> Callable[..., Any]:
    """A read of the open vault: InvalidInput once it is closed (_said_closed)."""
    @functools.wraps(method)
    def wrapper(self: "Engine", *args: Any, **kwargs: Any) -> Any:
        with _said_closed(self.vault):
            return method(self, *args, **kwargs)
    return wrapper


@contextlib.contextmanager
def _said_closed(vault: OpenVault) -> Iterator[None]:
    """InvalidInput ("vault ... is closed") for a call on a closed vault, and for one that close()
    overtook halfway, which would otherwise fail inside the closed store or index with whatever error
    that part raises (for a write's reads: that the vault is damaged)."""
    if vault.closed:
        raise vault.closed_error()
    try:
        yield
    except Exception:
        if vault.closed:
            raise vault.closed_error() from None
        raise


def _clear_frames(exc: BaseException | None) -> None:
    """Drop the local variables of every finished frame in exc's traceback and in the ones it chains."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        traceback.clear_frames(exc.__traceback__)
        exc = exc.__cause__ or exc.__context__


def _vault_directory(path: os.PathLike | str) -> Path:
    """The directory Engine.open(path) means, created if missing: a notes folder holding an initialized
    `.hebbs/` vault means that vault, as for Client(path) (paths.vault_for_path); any other path is
    the vault directory itself."""
    shown = str(path)
    try:
        path = Path(path).expanduser()
        try:
            path = vault_for_path(path, hebbs_home())
        except VaultNotInitialized:
            pass  # no vault there yet: the engine makes one at path itself
        path = path.resolve()
        if path.exists() and not path.is_dir():
            raise InvalidInput(f"{path} is a file, not a vault directory")
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
        return path
    except InvalidInput:
        raise
    except (OSError, ValueError, TypeError) as exc:
        raise InvalidInput(f"cannot open a vault at {shown!r}: {exc}") from None


class Engine:
    """An open vault. Thread-safe: writes are serialized, reads run concurrently."""

    def __init__(self, vault: OpenVault) -> None:
        self.vault = vault
        self.path = vault.path

    @property
    def config(self) -> VaultConfig:
        return self.vault.config

    @config.setter
    def config(self, config: VaultConfig) -> None:
        # A bench or test that tries other settings changes them for the whole vault, workflows included.
        self.vault.config = config

    @property
    def embedder(self) -> Embedder:
        return self.vault.embedder

    @embedder.setter
    def embedder(self, embedder: Embedder) -> None:
        # Swapped for the whole vault (a wrapper that counts or times the model): every workflow embeds through it.
        self.vault.embedder = embedder

    # Opening and closing ---------------------------------------------------------------------

    @classmethod
    def open(cls, path: os.PathLike | str, *, model: str | os.PathLike | None = None,
             embedder: Embedder | None = None,
             load_model: Callable[[str | None], Embedder] | None = None) -> "Engine":
        """Open the vault at path, creating it if missing. A notes folder holding a vault made by
        `hebbs init` opens that vault (path/.hebbs), as Client(path) does. Its model is the one the vault
        records, for a new vault the one its config names; `model` or `embedder` must be that model
        (MODEL_MISMATCH otherwise). `load_model` loads the model by name in place of the process-wide
        cache (the daemon's, which counts each warm model)."""
        path = _vault_directory(path)
        config = load_config(path)
        store = open_store(path, config)
        try:
            embedder = embedder or (load_model or get_embedder)(model or vault_model(config, store))
            return cls(OpenVault.open(path, store, embedder, config))
        except BaseException as exc:
            # The frames of the failure still hold what they were reading (a RocksDB iterator that
            # met a damaged block): while it lives the database keeps its lock, and every later open
            # in this process, the daemon's included, was refused as "in use by another process".
            _clear_frames(exc)
            store.close()
            raise

    def rebuild_lexical(self) -> None:
        """Re-tokenize every memory from the `default` family (after a crash, or if the index was deleted)."""
        self.vault.rebuild_lexical()

    def close(self) -> None:
        """Write the indexes' checkpoints and release the vault (its lock, so another process may open it)."""
        self.vault.close()

    def __enter__(self) -> "Engine":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def closed(self) -> bool:
        """True once close() ran: every call then raises InvalidInput."""
        return self.vault.closed

    def deferred_sync(self, *, wait: bool = True) -> Any:
        """Calls inside wait for durability once, at the end; wait=False leaves it to the caller:
        `engine.wait_durable(d.seq)` after releasing its own locks (the daemon's per-vault write slot)."""
        return self.vault.store.deferred_sync(wait=wait)

    def wait_durable(self, seq: int) -> None:
        """Return once the write numbered `seq` (from deferred_sync) is durable."""
        self.vault.store.group.wait(seq)

    # Remember, revise, forget: hebbs/workflows/remember.py, revise.py, forget.py, consolidate.py -----

    def remember(self, content: str, *, importance: float = 0.5, context: dict[str, Any] | None = None,
                 entity_id: str | None = None, created_at: Any = None, kind: MemoryKind | str = MemoryKind.EPISODE,
                 source: Source | None = None, supersedes: Sequence[str] = (),
                 edges: Sequence[tuple[str, str, float]] = (), key: str | None = None,
                 agent: str | None = None, session: str | None = None, consolidate: bool | None = None) -> Memory:
        """Store one memory. `edges` are (target_id, edge type name, confidence) from the new memory.
        With `key`, a memory already stored under that key in this vault is returned instead (idempotent);
        the key given again with another text is refused (KeyReused, naming the stored text). A restatement of an existing memory is consolidated into it (returned with consolidated=True)
        unless `consolidate` (default: config consolidation.on_remember) is off. `agent` and `session`: the
        agent that stores it and its session or conversation, which recall and prime can filter by; the
        author (hebbs.paths.writer) is stamped, not given."""
        return self.remember_many([{
            "content": content, "importance": importance, "context": context, "entity_id": entity_id,
            "created_at": created_at, "kind": kind, "source": source, "supersedes": supersedes, "edges": edges,
            "key": key, "agent": agent, "session": session,
        }], consolidate=consolidate)[0]

    @_acknowledged_when_durable
    def remember_many(self, items: Iterable[dict[str, Any]], *,
                      check_contradictions: bool | None = None, consolidate: bool | None = None) -> list[Memory]:
        """Store many memories, all or none: embedded in spans, then written as one RocksDB batch, so
        a crash at any point leaves every item of the call stored or none of them.

        Then, unless `check_contradictions` (default: config contradictions.check_on_remember) is off,
        each new memory is compared with its nearest neighbours and likely conflicts are queued in
        `pending`, in a batch of their own (hebbs/workflows/contradiction_review.py). An item whose `key`
        is already stored (or appears earlier in the batch) returns that memory and stores nothing."""
        return remembering.remember_many(self.vault, items, check_contradictions=check_contradictions,
                                      consolidate_restatements=consolidate)

    @_reading
    def get(self, memory_id: str) -> Memory:
        """One memory by its full id; NotFound if there is none."""
        return revising.get(self.vault, memory_id)

    def revise(self, memory_id: str, *, content: str | None = None, importance: float | None = None,
               context: dict[str, Any] | None = None, entity_id: Any = ..., source: Source | None = None) -> Memory:
        """Change a memory in place; its earlier text is kept as a REVISION record (REVISED_FROM edge)."""
        return self.revise_many([{"id": memory_id, "content": content, "importance": importance, "context": context,
                                  "entity_id": entity_id, "source": source}])[0]

    @_acknowledged_when_durable
    def revise_many(self, items: Iterable[dict[str, Any]]) -> list[Memory]:
        """Revise many memories, embedding the changed texts in batches. Each item: id plus the fields to change."""
        return revising.revise_many(self.vault, items)

    @_reading
    def history(self, memory_id: str) -> list[Memory]:
        """Earlier versions of a memory, newest first."""
        return revising.history(self.vault, memory_id)

    @_reading
    def inspect(self, memory_id: str) -> Inspection:
        """One memory with its edges, its earlier versions, its logged uses and how often it was restated."""
        memory = self.get(memory_id)
        history = self.history(memory.id)
        restated = [old.created_at for old in history if old.restatement_of == memory.id]
        return Inspection(memory=memory, edges=self.edges(memory.id), history=history,
                          accesses=self.accesses(memory.id), restatements=memory.restatements,
                          last_restated_at=max(restated, default=None))

    @_reading
    def source(self, memory_id: str) -> SourceSection:
        """The section a memory was indexed from, exactly as it was in that file version, even after the
        file changed or was deleted (hebbs/store/originals.py). A revision reads the version it held."""
        return sources.source(self.vault, memory_id)

    @_acknowledged_when_durable
    def unconsolidate(self, record_id: str) -> Memory:
        """Undo a consolidation: the restatement record `record_id` (see history) becomes a memory of its own."""
        return consolidation.unconsolidate(self.vault, record_id)

    @_acknowledged_when_durable
    def consolidate(self, *, dry_run: bool = False) -> list[tuple[str, str]]:
        """Merge every restatement already in the vault into the older memory it repeats, in one batch.
        Returns (restatement id, surviving id) pairs; dry_run lists them and changes nothing."""
        return consolidation.sweep(self.vault, dry_run=dry_run)

    @_acknowledged_when_durable
    def forget(self, ids: Sequence[str] | None = None, *, entity_id: str | None = None) -> int:
        """Remove memories and every trace of them (vectors, temporal and graph entries, revisions)."""
        return forgetting.forget(self.vault, ids, entity_id=entity_id)

    # Edges: hebbs/workflows/edges.py ---------------------------------------------------------

    @_acknowledged_when_durable
    def add_edge(self, source: str, edge_type: str | EdgeType, target: str, confidence: float = 1.0) -> Edge:
        """Add (or replace) the edge source -[edge_type]-> target between two memories."""
        return linking.add_edge(self.vault, source, edge_type, target, confidence)

    @_acknowledged_when_durable
    def remove_edge(self, source: str, edge_type: str | EdgeType, target: str) -> None:
        """Delete one edge (both its graph keys, in one batch); NotFound if there is no such edge."""
        linking.remove_edge(self.vault, source, edge_type, target)

    @_reading
    def edges(self, memory_id: str, direction: str = "both") -> list[Edge]:
        """A memory's edges: "out" (from it), "in" (to it) or "both"."""
        return linking.edges(self.vault, memory_id, direction)

    @_reading
    def neighbors(self, memory_id: str, k: int = 10) -> list[tuple[str, float]]:
        """Similar memories, by embedding alone: the k memories whose stored vectors are nearest to this
        memory's own, nearest first, as (id, cosine similarity). No cue is embedded and nothing is
        reinforced; the memory itself, revision records and superseded memories are left out."""
        return self.vault.neighbors(validate.memory_id(memory_id), validate.top_k(k, "k"))

    # Contradiction candidates (the `pending` family) -----------------------------------------

    @_acknowledged_when_durable
    def add_pending(self, items: Sequence[PendingContradiction]) -> int:
        """Queue contradiction candidates for review; a pair already queued (or already reviewed since
        the vault opened) is not queued twice. Returns how many were queued."""
        return self.vault.add_pending(items)

    @_reading
    def pending(self) -> list[PendingContradiction]:
        """The contradiction candidates queued for review (contradiction_prepare gives both sides in full)."""
        return self.vault.pending()

    # Reflection and contradiction review: hebbs/workflows/reflect.py, contradiction_review.py, hebbs/llm.py; docs/reflect.md

    @_reading
    def reflect_prepare(self, entity_id: str | None = None, since: Any = None,
                        max_memories: int = 500) -> ReflectPrepared:
        """Cluster the scope's memories; each cluster comes with a prompt. Answer it, then reflect_commit."""
        return reflect.prepare(self.vault, entity_id=entity_id, since=since, max_memories=max_memories)

    @_acknowledged_when_durable
    def reflect_commit(self, session_id: str, insights: Sequence[Any]) -> ReflectCommitted:
        """Store insights ({content, confidence, source_memory_ids, tags}) drawn from a prepared session."""
        return reflect.commit(self, session_id, insights)

    @_reading
    def insights(self, entity_id: str | None = None, min_confidence: float = 0.0,
                 max_results: int = 100) -> list[Insight]:
        """The insights reflection stored, newest first, optionally of one entity and above a confidence."""
        return reflect.list_insights(self.vault, entity_id=entity_id, min_confidence=min_confidence,
                                     max_results=max_results)

    @_reading
    def contradiction_prepare(self, max_results: int = 100) -> ContradictionPrepared:
        """The queued contradiction candidates, both sides in full, most likely first."""
        return contradiction_review.prepare(self.vault, max_results=max_results)

    @_acknowledged_when_durable
    def contradiction_commit(self, verdicts: Sequence[Any]) -> ContradictionCommitted:
        """Apply [{pending_id, verdict: contradiction | revision | neutral}] in one batch."""
        return contradiction_review.commit(self.vault, verdicts)

    def reflect(self, entity_id: str | None = None, since: Any = None,
                max_memories: int = 500) -> ReflectAutoResult:
        """reflect_prepare, then the configured LLM proposes and validates insights; raises LLMNotConfigured."""
        from . import llm  # the one upward call: the driver sits above this facade (docs/architecture.md)
        return llm.reflect_auto(self, entity_id=entity_id, since=since, max_memories=max_memories)

    def contradiction_auto(self, max_results: int = 100, min_confidence: float = 0.7) -> ContradictionAutoResult:
        """The configured LLM classifies the queued candidates; unsure ones stay queued."""
        from . import llm  # the one upward call, as above
        return llm.contradiction_auto(self, max_results=max_results, min_confidence=min_confidence)

    # Recall ----------------------------------------------------------------------------------

    @takes_options("RecallResults")  # the options are RecallOptions' fields (hebbs/recall/options.py)
    @_reading
    def recall(self, cue: str | None = None, **options: Any) -> RecallResults:
        """Causal recall walks the graph from `seed` (or the cue's best match) along `edge_types` in
        `direction` up to `max_depth`; analogical recall re-ranks by shape with weight 1 - `alpha`, and
        `analogy=(a, b, c)` asks a:b::c:? (docs/recall.md). `now` (default: the current time) is the
        clock: the reference for time words in the cue and for recency; it hides nothing. `as_of` is a
        point in time: what was true then (memories created later left out, a value changed later
        current; docs/honesty.md "What is true now"), and the clock unless `now` is given.

        Recall changes nothing that ranking reads: the same call twice gives the same answer. Call
        reinforce(ids) for the memories actually used, or pass reinforce=True to count every returned
        memory as an access (the old behaviour). With a cue, every result carries a confidence and
        the answer says whether it abstained (docs/honesty.md). `weights`: a ScoringWeights, or a mapping
        of some of its fields (the others keep their defaults)."""
        started = time.perf_counter()
        asked = RecallOptions(cue=cue, **options)  # an unknown option is a TypeError, as for any signature
        request = pipeline.plan(self.vault, asked)
        answer = pipeline.run(self.vault, request)
        use.record_recall(self.vault, request, answer.results, reinforce=asked.reinforce, started=started)
        return answer

    def prime(self, entity_id: str | None = None, similarity_cue: str | None = None,
              max_memories: int = 20, *, now: Any = None, author: str | None = None, agent: str | None = None,
              session: str | None = None) -> RecallResults:
        """An entity's most recent memories plus those most relevant to the cue, deduplicated, in one
        call (hebbs/recall/prime.py); it does not reinforce. `now`: the reference time for the cue's
        time words and for recency; `author`, `agent`, `session`: only memories stored by them."""
        return prime(self, entity_id, similarity_cue, max_memories, now,
                     origin={"author": author, "agent": agent, "session": session})

    def reinforce(self, ids: Sequence[str] | str, *, via: str = "used") -> list[Memory]:
        """Count these memories as used: access_count + 1 and last access now, which raises their
        reinforcement score and slows their decay. Call it for the memories an answer actually relied
        on; recall itself never does unless asked (docs/honesty.md). `via` names the use in their
        access log: "used", or "panel" for a memory a person opened. NotFound if an id does not exist;
        an id named twice counts once."""
        return use.reinforce(self.vault, ids, via)

    @_reading
    def accesses(self, memory_id: str) -> list[Access]:
        """When and how the memory was used (reinforced, recalled with reinforce=True, opened in the
        panel), newest first: its latest 50 accesses (hebbs/store/access_log.py)."""
        return use.accesses(self.vault, memory_id)

    @_reading
    def forget_candidates(self, now: Any = None) -> list[Memory]:
        """Memories decayed below config.decay.forget_threshold (pinned ones never), least alive first.
        Listing deletes nothing: pass their ids to forget(), or set decay.auto_forget. `now`: judge
        decay as of this time (microseconds since the epoch, or a timezone-aware datetime)."""
        return decay.forget_candidates(self.vault, now)

    @_reading
    def queries(self, limit: int = 50) -> list[QueryLogEntry]:
        """The most recent recalls, newest first."""
        return use.recent_queries(self.vault, limit)

    # Export and import of everything the vault holds: hebbs/workflows/transfer.py, docs/export.md ---

    def export_records(self) -> Iterator[dict[str, Any]]:
        """Every record of the vault (memories, links, edges, accesses, keys, contradiction candidates,
        kept originals) as JSON-ready dicts, a versioned header first."""
        self.vault.check_open()
        return transfer.export_records(self.vault)

    @_acknowledged_when_durable
    def import_records(self, records: Iterable[dict[str, Any]]) -> ImportSummary:
        """Restore what export_records gave (from this vault or another) with new ids; memories first,
        possibly over several calls. A memory imported before is not stored again."""
        return transfer.import_records(self.vault, records)

    # Whole-vault views -----------------------------------------------------------------------

    def memories(self, *, include_revisions: bool = False) -> Iterator[Memory]:
        """Every memory, in id order; InvalidInput on a closed vault (also for an iteration close() overtook)."""
        self.vault.check_open()
        return self._memories(include_revisions)

    def _memories(self, include_revisions: bool) -> Iterator[Memory]:
        with _said_closed(self.vault):
            for memory in self.vault.store.memories():
                if include_revisions or memory.kind != MemoryKind.REVISION:
                    yield memory

    @_reading
    def count(self) -> int:
        """How many memories the vault holds (earlier versions not counted)."""
        if self.vault.store.shared:
            self.vault.catch_up()  # other daemons' last writes; a store out of reach says so
        return sum(1 for _, e in self.vault.entries() if e.kind != MemoryKind.REVISION)

    @_reading
    def stats(self) -> VaultStats:
        """What the vault holds: memories (in all and by kind), superseded ones, the model, the last write."""
        memories = self.count()  # first: a shared vault catches up (or says its store is out of reach)
        kinds: dict[str, int] = {}
        entries = [e for _, e in self.vault.entries()]
        for entry in entries:
            kinds[entry.kind.value] = kinds.get(entry.kind.value, 0) + 1
        return VaultStats(path=str(self.path), memories=memories, by_kind=kinds, model=self.embedder.model_id,
                          dimension=self.embedder.dim, write_seq=self.vault.write_seq,
                          superseded=sum(1 for e in entries if e.superseded_by and e.kind != MemoryKind.REVISION),
                          store=self.vault.store.where)
