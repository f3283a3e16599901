"""The engine: the facade an agent or the daemon calls. One open vault (store/open_vault.py) plus the
memory operations composed from the layers below it: recall strategies (recall/), workflows
(workflows/). docs/architecture.md has the map.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
from ulid import ULID

from . import validate
from .config import load_config
from .errors import InvalidInput, NotFound
from .recall import analogical, confidence, scoring, timewords
from .recall import fusion as rc
from .recall.prime import prime
from .recall.query import Query
from .recall.registry import REGISTRY, STRATEGIES
from .store import idempotency
from .schema import (ContradictionAutoResult, ContradictionCommitted, ContradictionPrepared, Insight, ReflectAutoResult,
                     ReflectCommitted, ReflectPrepared)
from .schema import SourceSection
from .schema import (Edge, EdgeType, Memory, MemoryKind, PendingContradiction, QueryLogEntry, RecallResult,
                     RecallResults, ScoreComponents, ScoringWeights, Source, TimeUnderstood, VaultStats)
from .store.embed import Embedder, get_embedder
from .store.lexical_index import LexicalIndex
from .store.memory_text import embedding_text, lexical_text
from .store.open_vault import OpenVault, now_us
from .store.originals import Originals
from .store.storage import (Store, WriteSet, decode, edge_keys, encode, id_bytes, memory_key, temporal_key,
                            temporal_keys, vector_key)
from .store.vector_index import VectorIndex
from .workflows import associate
from .workflows import consolidate as consolidate_wf
from .workflows import contradiction_review, decay, reflect

DEFAULT_WEIGHTS = ScoringWeights()
EMBED_SPAN = 4096
MMR_POOL_EXTRA = 30
_FOLLOWED_BY_CONFIDENCE = 1.0
# What a client may write; REVISION records are made by revise only.
CLIENT_KINDS = (MemoryKind.EPISODE, MemoryKind.INSIGHT)


def _acknowledged_when_durable(method: Callable[..., Any]) -> Callable[..., Any]:
    """The call returns once its writes are durable (config storage.durability). The wait comes after
    the method has released the engine's lock, so concurrent writers share one WAL sync."""
    @functools.wraps(method)
    def wrapper(self: "Engine", *args: Any, **kwargs: Any) -> Any:
        with self._store.deferred_sync():
            return method(self, *args, **kwargs)
    return wrapper


class Engine:
    """An open vault. Thread-safe: writes are serialized, reads run concurrently."""

    def __init__(self, vault: OpenVault) -> None:
        self.vault = vault
        self.path = vault.path
        self.config = vault.config
        self.embedder = vault.embedder

    # Opening and closing ---------------------------------------------------------------------

    @classmethod
    def open(cls, path: os.PathLike | str, *, model: str | os.PathLike | None = None,
             embedder: Embedder | None = None) -> "Engine":
        """Open the vault at path, creating it if missing."""
        path = Path(path).expanduser().resolve()
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
        config = load_config(path)
        store = Store.open(path / "db", durability=config.storage.durability)
        try:
            embedder = embedder or get_embedder(model or config.model or store.get_meta("model_spec"))
            return cls(OpenVault.open(path, store, embedder, config))
        except BaseException:
            store.close()
            raise

    def rebuild_lexical(self) -> None:
        """Re-tokenize every memory from the `default` family (after a crash, or if the index was deleted)."""
        self.vault.rebuild_lexical()

    def close(self) -> None:
        self.vault.close()

    def __enter__(self) -> "Engine":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def closed(self) -> bool:
        return self.vault.closed

    # The vault's parts under their old private names, for tests and benches that reach into them.
    @property
    def _store(self) -> Store:
        return self.vault.store

    @property
    def _index(self) -> VectorIndex:
        return self.vault.vector_index

    @property
    def _lexical(self) -> LexicalIndex:
        return self.vault.lexical_index

    @property
    def _closed(self) -> bool:
        return self.vault.closed

    @_closed.setter
    def _closed(self, value: bool) -> None:
        self.vault.closed = value

    def deferred_sync(self, *, wait: bool = True) -> Any:
        """Calls inside wait for durability once, at the end; wait=False leaves it to the caller:
        `engine.wait_durable(d.seq)` after releasing its own locks (the daemon's per-vault write slot)."""
        return self._store.deferred_sync(wait=wait)

    def wait_durable(self, seq: int) -> None:
        self._store.group.wait(seq)

    # Remember --------------------------------------------------------------------------------

    def remember(self, content: str, *, importance: float = 0.5, context: dict[str, Any] | None = None,
                 entity_id: str | None = None, created_at: Any = None, kind: MemoryKind | str = MemoryKind.EPISODE,
                 source: Source | None = None, supersedes: Sequence[str] = (),
                 edges: Sequence[tuple[str, str, float]] = (), key: str | None = None,
                 consolidate: bool | None = None) -> Memory:
        """Store one memory. `edges` are (target_id, edge type name, confidence) from the new memory.
        With `key`, a memory already stored under that key in this vault is returned instead (idempotent).
        A restatement of an existing memory is consolidated into it (returned with consolidated=True)
        unless `consolidate` (default: config consolidation.on_remember) is off."""
        return self.remember_many([{
            "content": content, "importance": importance, "context": context, "entity_id": entity_id,
            "created_at": created_at, "kind": kind, "source": source, "supersedes": supersedes, "edges": edges,
            "key": key,
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
        everything = [self._prepare(item, n) for n, item in enumerate(items)]
        if not everything:
            return []
        prepared = self._unkeyed(everything)
        out: list[Memory] = []
        if prepared:
            # One embed call per span: the embedder sorts the whole span by length, so padding stays small.
            vectors = np.vstack([self.embedder.embed_documents(
                [embedding_text(p.memory) for p in prepared[start:start + EMBED_SPAN]])
                                 for start in range(0, len(prepared), EMBED_SPAN)])
            with self.vault.writing():
                # Another writer may have stored one of these keys while we embedded.
                keep = [n for n, p in enumerate(prepared) if not self._claimed_meanwhile(p)]
                prepared, vectors = [prepared[n] for n in keep], vectors[keep]
                self._check_refs(prepared)
                if prepared:
                    merged = self._restated(prepared, vectors, consolidate)
                    self._write_new(prepared, vectors, merged)
                    for n, survivor in merged.items():
                        prepared[n].stored = _Prepared(survivor, [], [])
            # A restatement re-asserts the memory it folded into: that memory is checked in its place.
            out = list({m.id: m for m in map(_result, prepared)}.values())
        if self.config.contradictions.check_on_remember if check_contradictions is None else check_contradictions:
            contradiction_review.queue_for_new(self.vault, out)
        return [_result(p) for p in everything]

    def _unkeyed(self, prepared: list["_Prepared"]) -> list["_Prepared"]:
        """The items to store: a key already in the vault, or earlier in the batch, points its item at
        that memory instead (checked before embedding, so a re-run import embeds nothing)."""
        first: dict[str, _Prepared] = {}
        todo = []
        for p in prepared:
            if p.key is not None:
                if p.key in first:
                    p.stored = first[p.key]
                    continue
                existing = idempotency.lookup(self.vault.store, p.key)
                memory = None if existing is None else self.vault.memory(existing)
                if memory is not None:
                    p.stored = _Prepared(memory, [], [])
                    continue
                first[p.key] = p
            todo.append(p)
        return todo

    def _claimed_meanwhile(self, p: "_Prepared") -> bool:
        if p.key is None:
            return False
        existing = idempotency.lookup(self.vault.store, p.key)
        memory = None if existing is None else self.vault.memory(existing)
        if memory is not None:
            p.stored = _Prepared(memory, [], [])
        return memory is not None

    def _prepare(self, item: dict[str, Any], n: int) -> "_Prepared":
        if not isinstance(item, dict):
            raise InvalidInput(f"item {n} must be a dict with at least 'content'")
        unknown = set(item) - {"content", "importance", "context", "entity_id", "created_at", "kind", "source",
                               "supersedes", "edges", "key"}
        if unknown:
            raise InvalidInput(f"item {n} has unknown fields: {sorted(unknown)}")
        stamp = now_us()
        created = validate.timestamp_us(item.get("created_at"), "created_at")
        kind = _kind(item.get("kind", MemoryKind.EPISODE))
        if kind not in CLIENT_KINDS:
            raise InvalidInput(f"item {n}: kind {kind.value} is made by revise only; "
                               f"remember takes {' or '.join(k.value for k in CLIENT_KINDS)}")
        importance = validate.unit_float(item.get("importance", 0.5), "importance")
        source = item.get("source")
        if source is not None and not isinstance(source, Source):
            raise InvalidInput("source must be a hebbs.Source")
        memory = Memory(
            id=str(ULID()), content=validate.content(item.get("content")), importance=importance,
            context=validate.context(item.get("context")), entity_id=validate.entity(item.get("entity_id")),
            created_at=stamp if created is None else created, updated_at=stamp, last_accessed_at=stamp,
            kind=kind, source=source, decay_score=importance,
        )
        supersedes = [validate.memory_id(s, "supersedes") for s in item.get("supersedes") or ()]
        edges = [_edge_spec(e) for e in item.get("edges") or ()]
        return _Prepared(memory, supersedes, edges, idempotency.check(item.get("key")))

    def _check_refs(self, chunk: list["_Prepared"]) -> None:
        in_chunk = {p.memory.id for p in chunk}
        for p in chunk:
            for ref in p.supersedes + [target for target, _, _ in p.edges]:
                if ref not in self.vault and ref not in in_chunk:
                    raise NotFound(f"memory {ref} does not exist")

    def _restated(self, chunk: list["_Prepared"], vectors: np.ndarray, consolidate: bool | None) -> dict[int, Memory]:
        """Which items restate an existing memory: {item index: that memory}."""
        if not (self.config.consolidation.on_remember if consolidate is None else consolidate):
            return {}
        in_chunk = [p.memory.id for p in chunk]
        found: dict[int, Memory] = {}
        for n, (p, vector) in enumerate(zip(chunk, vectors)):
            if p.supersedes or p.edges:
                continue  # an explicit relation to other memories: the caller means a memory of its own
            old = consolidate_wf.find_restated(self.vault, p.memory, vector, exclude=in_chunk)
            if old is not None:
                found[n] = self.vault.get(old)
        return found

    def _write_new(self, chunk: list["_Prepared"], vectors: np.ndarray, merged: dict[int, Memory]) -> None:
        writes = WriteSet()
        stamp = now_us()
        latest_by_entity: dict[str | None, tuple[int, str]] = {}
        superseded: list[Memory] = []
        survivors: dict[str, Memory] = {}
        records: list[Memory] = []
        for n, target in merged.items():
            survivor = survivors.setdefault(target.id, target)
            survivor, record = consolidate_wf.merge(
                writes, survivor, chunk[n].memory, stamp, lambda m, t: decay.decay_value(m, t, self.config.decay))
            records.append(record)
            if chunk[n].key is not None:  # a retry under the same key finds the memory it folded into
                idempotency.put(writes, chunk[n].key, survivor.id)
            merged[n] = msgspec.structs.replace(survivor, consolidated=True)
        keep = [n for n in range(len(chunk)) if n not in merged]
        chunk, vectors = [chunk[n] for n in keep], vectors[keep]
        for p, vector in zip(chunk, vectors):
            m = p.memory
            writes.put_memory(m)
            if p.key is not None:
                idempotency.put(writes, p.key, m.id)
            for key in temporal_keys(m.entity_id, m.created_at, m.id):
                writes.put("temporal", key, id_bytes(m.id))
            writes.put("vectors", vector_key(m.id), vector.astype("<f4").tobytes())
            # The FOLLOWED_BY chain orders what happened: insights are conclusions, not events.
            previous = None if m.kind != MemoryKind.EPISODE else (
                latest_by_entity.get(m.entity_id) or self.vault.latest_episode_before(m.entity_id, m.created_at))
            if previous is not None and previous[0] <= m.created_at:
                writes.put_edge(previous[1], EdgeType.FOLLOWED_BY, m.id, _FOLLOWED_BY_CONFIDENCE, stamp)
            if m.kind == MemoryKind.EPISODE and (previous is None or previous[0] <= m.created_at):
                latest_by_entity[m.entity_id] = (m.created_at, m.id)
            for target, edge_type, confidence in p.edges:
                writes.put_edge(m.id, edge_type, target, confidence, stamp)
            superseded += [self._mark_superseded(writes, old_id, m.id, stamp) for old_id in p.supersedes]
        analogical.refresh_structure(self.vault.store, writes)
        new = [p.memory for p in chunk]
        self.vault.apply(writes, saved=new + superseded + list(survivors.values()) + records,
                         vectors=([m.id for m in new], vectors) if new else None, reindexed=new)

    def _mark_superseded(self, writes: WriteSet, old_id: str, new_id: str, stamp: int) -> Memory:
        old = self.vault.memory(old_id) if old_id in self.vault else None
        if old is None:
            raise NotFound(f"memory {old_id} does not exist")
        old.superseded_by = new_id
        old.updated_at = stamp
        writes.put_memory(old)
        writes.put_edge(new_id, EdgeType.REVISED_FROM, old_id, 1.0, stamp)
        return old

    # Get, revise, forget ---------------------------------------------------------------------

    def get(self, memory_id: str) -> Memory:
        memory = self.vault.memory(validate.memory_id(memory_id))
        if memory is None:
            raise NotFound(f"memory {memory_id} does not exist")
        return memory

    def revise(self, memory_id: str, *, content: str | None = None, importance: float | None = None,
               context: dict[str, Any] | None = None, entity_id: Any = ..., source: Source | None = None) -> Memory:
        """Change a memory in place; its earlier text is kept as a REVISION record (REVISED_FROM edge)."""
        return self.revise_many([{"id": memory_id, "content": content, "importance": importance, "context": context,
                                  "entity_id": entity_id, "source": source}])[0]

    @_acknowledged_when_durable
    def revise_many(self, items: Iterable[dict[str, Any]]) -> list[Memory]:
        """Revise many memories, embedding the changed texts in batches. Each item: id plus the fields to change."""
        changes = [self._prepare_revision(item, n) for n, item in enumerate(items)]
        for c in changes:
            current = self.vault.memory(c["memory_id"])
            if current is not None and current.content == c["content"]:
                c["content"] = None  # unchanged text: nothing to embed, no revision record
        texts = [embedding_text(self._revised_view(c)) for c in changes if c["content"] is not None]
        vectors = iter(self.embedder.embed_documents(texts)) if texts else iter(())
        for c in changes:
            c["vector"] = next(vectors) if c["content"] is not None else None
        with self.vault.writing():
            return [self._revise_locked(**c) for c in changes]

    def _revised_view(self, change: dict[str, Any]) -> Memory:
        """The memory as a revision will leave it, for its embedding text (title and headings may change too)."""
        current = self.vault.memory(change["memory_id"])
        if current is None:
            return Memory(id=change["memory_id"], content=change["content"], context=change["context"] or {},
                          source=change["source"])
        return msgspec.structs.replace(current, content=change["content"],
                                       context=current.context if change["context"] is None else change["context"],
                                       source=current.source if change["source"] is None else change["source"])

    def _prepare_revision(self, item: dict[str, Any], n: int) -> dict[str, Any]:
        if not isinstance(item, dict) or "id" not in item:
            raise InvalidInput(f"revision {n} must be a dict with an 'id'")
        unknown = set(item) - {"id", "content", "importance", "context", "entity_id", "source"}
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

    def _revise_locked(self, memory_id: str, content: str | None, importance: float | None,
                       context: dict[str, Any] | None, entity_id: Any, source: Source | None,
                       vector: np.ndarray | None) -> Memory:
        memory = self.get(memory_id)
        if memory.kind == MemoryKind.REVISION:
            raise InvalidInput(f"memory {memory_id} is a revision record; revise the memory it belongs to")
        stamp = now_us()
        writes = WriteSet()
        revisions: list[Memory] = []
        text_changed = content is not None and content != memory.content
        if text_changed:
            revision = Memory(
                id=str(ULID()), content=memory.content, importance=memory.importance, context=memory.context,
                entity_id=memory.entity_id, created_at=memory.updated_at or memory.created_at,
                updated_at=stamp, last_accessed_at=stamp, kind=MemoryKind.REVISION, source=memory.source,
                superseded_by=memory.id, revision_of=memory.id,
            )
            writes.put_memory(revision)
            revisions.append(revision)
            writes.put_edge(memory.id, EdgeType.REVISED_FROM, revision.id, 1.0, stamp)
            memory.content = content
            writes.put("vectors", vector_key(memory.id), vector.astype("<f4").tobytes())
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
        memory.updated_at = stamp
        writes.put_memory(memory)
        analogical.refresh_structure(self.vault.store, writes)
        self.vault.apply(writes, saved=[memory, *revisions],
                         vectors=([memory.id], vector.reshape(1, -1)) if text_changed else None,
                         reindexed=[memory])
        return memory

    def source(self, memory_id: str) -> SourceSection:
        """The section a memory was indexed from, exactly as it was in that file version, even after the
        file changed or was deleted (hebbs/store/originals.py). A revision reads the version it held."""
        originals = Originals(self.path, self.config.sources)
        try:
            memory = self.get(memory_id)
        except (NotFound, InvalidInput):
            # Forgotten with its file (by full id or a 6+ character suffix): the kept map still knows it.
            kept_id = originals.find_ref_id(memory_id)
            if kept_id is None and len(memory_id) < 26:
                raise NotFound(f"no memory id ends with {memory_id!r}") from None
            if kept_id is None:
                raise
            return originals.section(kept_id, originals.refs(kept_id)[-1])
        refs = originals.refs(memory.revision_of or memory.id)
        if not refs:
            raise NotFound(f"memory {memory.id} has no kept original: it was not indexed from a note "
                           "(or [sources] keep was false when it was)")
        section_hash = memory.context.get("section_hash")
        ref = next((r for r in reversed(refs) if r.section_hash == section_hash), None)
        if ref is None:
            raise NotFound(f"the original of memory {memory.id} was pruned (see [sources] in the vault's config.toml)")
        return originals.section(memory.id, ref)

    @_acknowledged_when_durable
    def unconsolidate(self, record_id: str) -> Memory:
        """Undo a consolidation: the restatement record `record_id` (see history) becomes a memory of its own."""
        record = self.get(record_id)
        if record.restatement_of is None:
            raise InvalidInput(f"memory {record_id} is not a restatement record (look for one in `history`)")
        vector = self.embedder.embed([record.content])[0]
        with self.vault.writing():
            writes = WriteSet()
            restored, survivor = consolidate_wf.restore(writes, self.vault, record, vector, now_us())
            self.vault.apply(writes, saved=[restored] + ([survivor] if survivor else []),
                             vectors=([restored.id], vector.reshape(1, -1)), reindexed=[restored])
            return restored

    @_acknowledged_when_durable
    def consolidate(self, *, dry_run: bool = False) -> list[tuple[str, str]]:
        """Merge every restatement already in the vault into the older memory it repeats, in one batch.
        Returns (restatement id, surviving id) pairs; dry_run lists them and changes nothing."""
        with self.vault.writing():
            pairs = consolidate_wf.sweep_pairs(self.vault)
            if dry_run or not pairs:
                return pairs
            writes = WriteSet()
            stamp = now_us()
            saved: list[Memory] = []
            for new_id, old_id in pairs:
                survivor, record = consolidate_wf.merge(
                    writes, self.vault.get(old_id), self.vault.get(new_id), stamp,
                    lambda m, t: decay.decay_value(m, t, self.config.decay))
                for key in temporal_keys(record.entity_id, record.created_at, record.id):
                    writes.delete("temporal", key)
                writes.delete("vectors", vector_key(record.id))
                saved += [survivor, record]
            # `removed` takes the restatements out of both indexes; `saved` then puts their records back in the catalog.
            self.vault.apply(writes, saved=saved, removed=[new_id for new_id, _ in pairs])
            return pairs

    def history(self, memory_id: str) -> list[Memory]:
        """Earlier versions of a memory, newest first."""
        store = self.vault.store
        revisions = [store.get_memory(target) for edge_type, target, _, _ in store.edges_from(memory_id)
                     if edge_type == EdgeType.REVISED_FROM]
        return sorted((r for r in revisions if r is not None and r.kind == MemoryKind.REVISION),
                      key=lambda r: r.updated_at, reverse=True)

    @_acknowledged_when_durable
    def forget(self, ids: Sequence[str] | None = None, *, entity_id: str | None = None) -> int:
        """Remove memories and every trace of them (vectors, temporal and graph entries, revisions)."""
        if ids is None and entity_id is None:
            raise InvalidInput("forget needs ids or entity_id")
        if isinstance(ids, str):
            ids = [ids]
        wanted = [validate.memory_id(i) for i in ids or ()]
        vault, store = self.vault, self.vault.store
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
            # Revision records go with the memory they belong to.
            for mid in targets:
                doomed.update(r.id for r in self.history(mid))
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
            reflect.remove_insight_notes(self.vault, insights)  # the note written at reflect-commit goes with it
        return len(targets)

    # Edges -----------------------------------------------------------------------------------

    @_acknowledged_when_durable
    def add_edge(self, source: str, edge_type: str | EdgeType, target: str, confidence: float = 1.0) -> Edge:
        source, target = validate.memory_id(source, "source"), validate.memory_id(target, "target")
        kind = _edge_type(edge_type)
        confidence = validate.unit_float(confidence, "confidence")
        with self.vault.writing():
            for mid in (source, target):
                if mid not in self.vault:
                    raise NotFound(f"memory {mid} does not exist")
            stamp = now_us()
            writes = WriteSet()
            writes.put_edge(source, kind, target, confidence, stamp)
            analogical.refresh_structure(self.vault.store, writes)
            self.vault.apply(writes)
            return Edge(source=source, target=target, edge_type=kind.name, confidence=confidence, created_at=stamp)

    @_acknowledged_when_durable
    def remove_edge(self, source: str, edge_type: str | EdgeType, target: str) -> None:
        """Delete one edge (both its graph keys, in one batch); NotFound if there is no such edge."""
        source, target = validate.memory_id(source, "source"), validate.memory_id(target, "target")
        kind = _edge_type(edge_type)
        with self.vault.writing():
            forward, reverse = edge_keys(source, kind, target)
            if self.vault.store.get("graph", forward) is None:
                raise NotFound(f"no {kind.name} edge from {source} to {target}")
            writes = WriteSet()
            writes.delete("graph", forward)
            writes.delete("graph", reverse)
            analogical.refresh_structure(self.vault.store, writes)
            self.vault.apply(writes)

    def edges(self, memory_id: str, direction: str = "both") -> list[Edge]:
        memory_id = validate.memory_id(memory_id)
        out: list[Edge] = []
        if direction in ("out", "both"):
            out += [Edge(source=memory_id, target=t, edge_type=k.name, confidence=c, created_at=ts)
                    for k, t, c, ts in self.vault.store.edges_from(memory_id)]
        if direction in ("in", "both"):
            out += [Edge(source=s, target=memory_id, edge_type=k.name, confidence=c, created_at=ts)
                    for k, s, c, ts in self.vault.store.edges_to(memory_id)]
        return out

    def neighbors(self, memory_id: str, k: int = 10) -> list[tuple[str, float]]:
        """Similar memories, by embedding alone: the k memories whose stored vectors are nearest to this
        memory's own, nearest first, as (id, cosine similarity). No cue is embedded and nothing is
        reinforced; the memory itself, revision records and superseded memories are left out."""
        return self.vault.neighbors(validate.memory_id(memory_id), k)

    # Contradiction candidates (the `pending` family) -----------------------------------------

    @_acknowledged_when_durable
    def add_pending(self, items: Sequence[PendingContradiction]) -> int:
        """Queue contradiction candidates for review; a pair already queued (or already reviewed since
        the vault opened) is not queued twice. Returns how many were queued."""
        return self.vault.add_pending(items)

    def pending(self) -> list[PendingContradiction]:
        return self.vault.pending()

    # Reflection and contradiction review: hebbs/workflows/reflect.py, contradictions.py, llm.py; docs/reflect.md

    def reflect_prepare(self, entity_id: str | None = None, since: Any = None,
                        max_memories: int = 500) -> ReflectPrepared:
        """Cluster the scope's memories; each cluster comes with a prompt. Answer it, then reflect_commit."""
        return reflect.prepare(self.vault, entity_id=entity_id, since=since, max_memories=max_memories)

    @_acknowledged_when_durable
    def reflect_commit(self, session_id: str, insights: Sequence[Any]) -> ReflectCommitted:
        """Store insights ({content, confidence, source_memory_ids, tags}) drawn from a prepared session."""
        return reflect.commit(self, session_id, insights)

    def insights(self, entity_id: str | None = None, min_confidence: float = 0.0,
                 max_results: int = 100) -> list[Insight]:
        return reflect.list_insights(self.vault, entity_id=entity_id, min_confidence=min_confidence,
                                     max_results=max_results)

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

    def recall(self, cue: str | None = None, *, strategies: Sequence[str] | None = None, top_k: int = 10,
               entity_id: str | None = None, time_range: Any = None, weights: ScoringWeights | None = None,
               include_superseded: bool = False, reinforce: bool = False, mmr_lambda: float | None = None,
               seed: str | None = None, direction: str = "forward", max_depth: int = 5,
               edge_types: Sequence[str] | None = None, alpha: float | None = None,
               analogy: Sequence[str] | None = None, now: Any = None, associate: bool = False,
               ) -> RecallResults:
        """Causal recall walks the graph from `seed` (or the cue's best match) along `edge_types` in
        `direction` up to `max_depth`; analogical recall re-ranks by shape with weight 1 - `alpha`, and
        `analogy=(a, b, c)` asks a:b::c:? (docs/recall.md). `now` (default: the current time) is the
        reference for time words in the cue and for recency: recall "as of" that time.

        Recall changes nothing that ranking reads: the same call twice gives the same answer. Call
        reinforce(ids) for the memories actually used, or pass reinforce=True to count every returned
        memory as an access (the old behaviour). With a cue, every result carries a confidence and
        the answer says whether it abstained (docs/honesty.md)."""
        started = time.perf_counter()
        top_k = validate.top_k(top_k)
        weights = scoring.check_weights(weights or DEFAULT_WEIGHTS)
        entity_id = validate.entity(entity_id)
        window = validate.time_range(time_range)
        reference = validate.timestamp_us(now, "now") if now is not None else now_us()
        if cue is not None:
            cue = validate.content(cue, "cue")
        understood = (timewords.understand(cue, reference)
                      if cue is not None and window is None and self.config.recall.time_words.enabled else None)
        if seed is not None:
            seed = validate.memory_id(seed, "seed")
            if seed not in self.vault:
                raise NotFound(f"memory {seed} does not exist")
        names = self._strategy_names(cue, strategies, seed=seed, analogy=analogy)
        if associate and cue is not None:
            names.add("associative")  # one hop along co-activation links (hebbs/recall/associative.py)
        if mmr_lambda is not None:
            lam = validate.unit_float(mmr_lambda, "mmr_lambda")
        else:
            # Similarity alone is pure vector search: no diversification or deduplication unless asked.
            lam = 0.0 if names == {"similarity"} else self.config.recall.mmr_lambda

        def allowed(mid: str) -> bool:
            entry = self.vault.entry(mid)
            if entry is None or entry.kind == MemoryKind.REVISION:
                return False
            if entry.superseded_by is not None and not include_superseded:
                return False
            if entity_id is not None and entry.entity_id != entity_id:
                return False
            return window is None or window[0] <= entry.created_at <= window[1]

        fusion = self.config.recall.fusion
        query = Query(
            cue=cue, embed=self.embedder.embed_query, allowed=allowed, settings=self.config.recall,
            limit=max(fusion.normalization_depth, top_k * fusion.candidate_factor),
            entity_id=entity_id, window=window, seed=seed, direction=direction, max_depth=max_depth,
            edge_types=edge_types, analogy=analogy,
            alpha=validate.unit_float(alpha, "alpha") if alpha is not None and "analogical" in names else None)
        candidates, notes = self._run_strategies(names, query)
        if understood is not None:
            # A second pass of the same strategies inside the understood range: memories from then that
            # the whole-vault pass ranked too low to return still become candidates (docs/recall.md).
            start, end = understood.start, understood.end
            inside = dataclasses.replace(
                query, embed=lambda _cue: query.cue_vector,  # embedded once, and only if a strategy asks
                allowed=lambda mid: allowed(mid) and start <= self.vault.entry(mid).created_at <= end)
            rc.merge(candidates, self._run_strategies(names, inside)[0])
            notes.append(f"{understood.text()} (UTC): memories from then are preferred; "
                         f"pass time_range to choose the range yourself")

        preferred = None if understood is None else (understood.start, understood.end)
        results = self._score(candidates, weights, top_k, lam, include_superseded, reference, preferred)
        answer = RecallResults(results=results, notes=notes, time_understood=None if understood is None else TimeUnderstood(
            phrase=understood.phrase, start=understood.start, end=understood.end, text=understood.text()))
        if cue is not None:
            # The cue's similarity over the whole scope is the background its results stand out from.
            background = query.cue_hits(self.vault)
            self._judge_confidence(answer, cue, query.cue_vector, [sim for _, sim in background])
        self._after_recall(results, cue, sorted(names), weights, entity_id, reinforce, started)
        return answer

    def _run_strategies(self, names: set[str], query: Query) -> tuple[rc.Candidates, list[str]]:
        candidates: rc.Candidates = {}
        notes: list[str] = []
        for name, strategy in REGISTRY.items():
            if name in names:
                found, said = strategy(self.vault, query)
                rc.merge(candidates, found)
                notes += said
        return candidates, notes

    def _judge_confidence(self, answer: RecallResults, cue: str, cue_vector: np.ndarray,
                          similarities: list[float]) -> None:
        """Each result's confidence, and whether the answer abstains (hebbs/recall/confidence.py)."""
        lexical = self.vault.lexical_index
        judged = confidence.assess(cue, cue_vector, self.vault.vectors_or_zeros([r.memory.id for r in answer.results]),
                                   [lexical_text(r.memory) for r in answer.results], similarities,
                                   lexical.doc_freqs, max(1, lexical.count()))
        for result, (value, values) in zip(answer.results, judged):
            result.confidence = value
            result.details["confidence_features"] = values
        answer.threshold = self.config.recall.abstain_threshold
        answer.confidence = max((value for value, _ in judged), default=0.0)
        answer.abstained = confidence.abstains([value for value, _ in judged], answer.threshold)
        if answer.abstained and not answer.results:
            answer.notes.append(f"{confidence.NOTE} (no memory in this scope)")
        elif answer.abstained:
            answer.notes.append(f"{confidence.NOTE} (best confidence {answer.confidence:.2f} "
                                f"< {answer.threshold:.2f}); the weak candidates follow")

    def _strategy_names(self, cue: str | None, strategies: Sequence[str] | None, *, seed: str | None = None,
                        analogy: Sequence[str] | None = None) -> set[str]:
        if strategies is None or len(strategies) == 0:
            if analogy is not None:
                return {"analogical"}
            if seed is not None:
                return {"causal"} if cue is None else {"fused", "causal"}
            return {"fused"} if cue is not None else {"temporal"}
        if isinstance(strategies, str):
            strategies = [strategies]
        names = set()
        for name in strategies:
            if name not in STRATEGIES:
                raise InvalidInput(f"unknown strategy {name!r}; known: {', '.join(STRATEGIES)}")
            names.add(name)
        if names & {"similarity", "lexical"} and cue is None:
            raise InvalidInput("similarity and lexical recall need a cue")
        if "causal" in names and cue is None and seed is None:
            raise InvalidInput("causal recall needs a seed memory id, or a cue to find one")
        if "analogical" in names and cue is None and seed is None and analogy is None:
            raise InvalidInput("analogical recall needs a cue, a seed memory or an analogy (a, b, c)")
        if analogy is not None and "analogical" not in names:
            raise InvalidInput("analogy is used by the analogical strategy only; add it to strategies")
        if seed is not None and not names & {"causal", "analogical"}:
            raise InvalidInput("seed is used by the causal and analogical strategies only; add one to strategies")
        return names

    def _score(self, candidates: rc.Candidates, weights: ScoringWeights, top_k: int, lam: float,
               include_superseded: bool, stamp: int, preferred: tuple[int, int] | None) -> list[RecallResult]:
        recall_cfg = self.config.recall
        ranked: list[tuple[float, str, ScoreComponents]] = []
        for mid, cand in candidates.items():
            entry = self.vault.entry(mid)
            if entry is None:
                continue
            window = scoring.recency_window_days(entry.context_type, recall_cfg.recency_window, self.config.decay)
            parts = scoring.components(entry, cand.relevance, stamp, window)
            score = scoring.composite(parts, weights)
            if preferred is not None and preferred[0] <= entry.created_at <= preferred[1]:
                # Added on top of the weighted factors (so a score can pass 1), and said in details.
                score += recall_cfg.time_words.boost
                cand.details["time_boost"] = recall_cfg.time_words.boost
            ranked.append((score, mid, parts))
        ranked.sort(key=lambda item: item[0], reverse=True)
        if lam > 0 and len(ranked) > 1:
            # The pool MMR picks from: with lambda near 1 a candidate far below the top_k never gets
            # picked, and a pool of 3 * top_k made every recall's cost grow with top_k.
            pool = ranked[:min(top_k * 3, top_k + MMR_POOL_EXTRA)]
            vectors = self.vault.vectors([mid for _, mid, _ in pool])
            order = rc.mmr_order([score for score, _, _ in pool], vectors, lam, top_k,
                                 self.config.recall.duplicate_similarity)
            ranked = [pool[i] for i in order]
        else:
            # Room for superseded memories that will be moved below their successors.
            ranked = ranked[:top_k * 3 if include_superseded else top_k]
        results = []
        for score, mid, parts in ranked:
            memory = self.vault.memory(mid)
            if memory is not None:
                cand = candidates[mid]
                results.append(RecallResult(memory=memory, score=score, components=parts,
                                            strategies=cand.strategies, details=cand.details))
        if include_superseded:
            results = _below_successors(results)
        return results[:top_k]

    def _after_recall(self, results: list[RecallResult], cue: str | None, names: list[str],
                      weights: ScoringWeights, entity_id: str | None, reinforce: bool, started: float) -> None:
        """Log the query and, only when asked (reinforce=True), count what was returned as used: one batch."""
        with self.vault.write_lock:
            if self.vault.closed:
                return
            stamp = now_us()
            writes = WriteSet()
            reinforced: list[Memory] = []
            if reinforce:
                reinforced = self._reinforce_locked(writes, [r.memory.id for r in results], stamp)
            entry = QueryLogEntry(at=stamp, cue=cue, strategies=names, weights=weights, result_count=len(results),
                                  latency_ms=round((time.perf_counter() - started) * 1000, 3), entity_id=entity_id)
            writes.put("query_log", stamp.to_bytes(8, "big") + os.urandom(4), encode(entry))
            # Nobody is told these were kept: no reason to make a recall wait for a disk sync.
            self.vault.apply(writes, saved=reinforced, durable=False)

    def prime(self, entity_id: str | None = None, similarity_cue: str | None = None,
              max_memories: int = 20, *, now: Any = None) -> RecallResults:
        """An entity's most recent memories plus those most relevant to the cue, deduplicated, in one
        call (hebbs/recall/prime.py); it does not reinforce. `now`: the reference time for the cue's
        time words and for recency."""
        return prime(self, entity_id, similarity_cue, max_memories, now)

    def reinforce(self, ids: Sequence[str] | str) -> list[Memory]:
        """Count these memories as used: access_count + 1 and last access now, which raises their
        reinforcement score and slows their decay. Call it for the memories an answer actually relied
        on; recall itself never does unless asked (docs/honesty.md). NotFound if an id does not exist;
        an id named twice counts once."""
        if isinstance(ids, str):
            ids = [ids]
        wanted = list(dict.fromkeys(validate.memory_id(i) for i in ids))
        if not wanted:
            raise InvalidInput("reinforce needs at least one memory id")
        with self.vault.writing():
            for mid in wanted:
                entry = self.vault.entry(mid)
                if entry is None or entry.kind == MemoryKind.REVISION:
                    raise NotFound(f"memory {mid} does not exist" if entry is None
                                   else f"memory {mid} is a revision record; reinforce the memory it belongs to")
            writes = WriteSet()
            stamp = now_us()
            used = self._reinforce_locked(writes, wanted, stamp)
            # Used together: linked (docs/consolidation.md, "Association by use").
            associate.strengthen(writes, self.vault.store, wanted, stamp, self.config.decay)
            self.vault.apply(writes, saved=used)
            return used

    def _reinforce_locked(self, writes: WriteSet, ids: Sequence[str], stamp: int) -> list[Memory]:
        used = []
        for mid in ids:
            current = self.vault.memory(mid)
            if current is None:
                continue
            current.access_count += 1
            current.last_accessed_at = stamp
            current.decay_score = decay.decay_value(current, stamp, self.config.decay)
            writes.put_memory(current)
            used.append(current)
        return used

    def forget_candidates(self, now: int | None = None) -> list[Memory]:
        """Memories decayed below config.decay.forget_threshold (pinned ones never), least alive first.
        Listing deletes nothing: pass their ids to forget(), or set decay.auto_forget."""
        return decay.forget_candidates(self.vault, now)

    def queries(self, limit: int = 50) -> list[QueryLogEntry]:
        """The most recent recalls, newest first."""
        out = []
        for _, raw in self.vault.store.scan("query_log", b"", reverse=True):
            out.append(decode(raw, QueryLogEntry))
            if len(out) >= limit:
                break
        return out

    # Whole-vault views -----------------------------------------------------------------------

    def memories(self, *, include_revisions: bool = False) -> Iterator[Memory]:
        for memory in self.vault.store.memories():
            if include_revisions or memory.kind != MemoryKind.REVISION:
                yield memory

    def count(self) -> int:
        return sum(1 for _, e in self.vault.entries() if e.kind != MemoryKind.REVISION)

    def stats(self) -> VaultStats:
        kinds: dict[str, int] = {}
        entries = [e for _, e in self.vault.entries()]
        for entry in entries:
            kinds[entry.kind.value] = kinds.get(entry.kind.value, 0) + 1
        return VaultStats(path=str(self.path), memories=self.count(), by_kind=kinds, model=self.embedder.model_id,
                          dimension=self.embedder.dim, write_seq=self.vault.write_seq,
                          superseded=sum(1 for e in entries if e.superseded_by and e.kind != MemoryKind.REVISION))


class _Prepared:
    __slots__ = ("memory", "supersedes", "edges", "key", "stored")

    def __init__(self, memory: Memory, supersedes: list[str], edges: list[tuple[str, EdgeType, float]],
                 key: str | None = None) -> None:
        self.memory = memory
        self.supersedes = supersedes
        self.edges = edges
        self.key = key
        # Set when the key names a memory stored before (or earlier in the batch): that one is returned.
        self.stored: _Prepared | None = None


def _result(p: _Prepared) -> Memory:
    while p.stored is not None:
        p = p.stored
    return p.memory


def _below_successors(results: list[RecallResult]) -> list[RecallResult]:
    """A superseded memory never ranks above the memory that replaced it."""
    position = {r.memory.id: i for i, r in enumerate(results)}
    ordered = [r for r in results if r.memory.superseded_by is None or r.memory.superseded_by not in position]
    for r in results:
        if r.memory.superseded_by is not None and r.memory.superseded_by in position:
            successor = next(i for i, o in enumerate(ordered) if o.memory.id == r.memory.superseded_by)
            ordered.insert(successor + 1, r)
    return ordered


def _kind(value: Any) -> MemoryKind:
    try:
        return MemoryKind(value.value if isinstance(value, MemoryKind) else value)
    except ValueError:
        raise InvalidInput(f"kind must be one of {[k.value for k in MemoryKind]}, got {value!r}") from None


def _edge_type(value: Any) -> EdgeType:
    if isinstance(value, EdgeType):
        return value
    if isinstance(value, str) and value.upper() in EdgeType.__members__:
        return EdgeType[value.upper()]
    raise InvalidInput(f"edge type must be one of {list(EdgeType.__members__)}, got {value!r}")


def _edge_spec(value: Any) -> tuple[str, EdgeType, float]:
    if not isinstance(value, (tuple, list)) or len(value) not in (2, 3):
        raise InvalidInput(f"an edge is (target_id, edge_type[, confidence]), got {value!r}")
    target = validate.memory_id(value[0], "edge target")
    confidence = validate.unit_float(value[2], "edge confidence") if len(value) == 3 else 1.0
    return target, _edge_type(value[1]), confidence
