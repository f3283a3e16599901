"""Export and import of everything a vault holds (docs/export.md).

An export is JSON lines: a header, then one record per line, each named by its "record" field:
every memory (earlier versions and restatement records too, with supersession and revision links),
every graph edge, each memory's access history and idempotency key, the queued contradiction
candidates, and the kept originals of indexed notes (the file versions and which section each
memory came from). Import gives every memory a new id and maps every link through the same table,
so export, import into an empty vault, export again gives the same content up to the ids.

Version 1 files (bare memories, one per line, no header) are still read: their memories are
imported, and there is nothing else in them.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterable, Iterator
from typing import Any

import msgspec
import numpy as np
from ulid import ULID

from ..errors import InvalidInput, NotFound
from ..recall import analogical
from ..schema import EdgeType, ImportSummary, Memory, MemoryKind, PendingContradiction
from ..store import access_log, idempotency
from ..core.memory_text import embedding_text
from ..core.open_vault import OpenVault
from ..store.originals import Originals, Ref
from ..store.storage import WriteSet, encode_vector, id_bytes, temporal_keys, vector_key

FORMAT = "hebbs-export"
VERSION = 2
IMPORT_KEY_PREFIX = "import:"
RECORDS = ("header", "memory", "link", "edge", "access", "pending", "file", "original")
EMBED_SPAN = 512
# Each memory's links to others: renamed through the import's id map.
LINKS = ("superseded_by", "revision_of", "restatement_of", "newer_value", "older_value")


def export_records(vault: OpenVault) -> Iterator[dict[str, Any]]:
    """Every record of the vault, header first; memories in id order, then what refers to them."""
    store = vault.store
    yield {"record": "header", "format": FORMAT, "version": VERSION}
    ids: list[str] = []
    for memory in store.memories():
        ids.append(memory.id)
        record = {"record": "memory", **msgspec.to_builtins(memory)}
        key = idempotency.key_of(store, memory.id)
        # A key an import gave is how a re-run finds what it stored: not part of what the vault holds.
        if key is not None and not key.startswith(IMPORT_KEY_PREFIX):
            record["key"] = key
        yield record
    for memory_id in ids:
        for edge_type, target, confidence, created_at in store.edges_from(memory_id):
            yield {"record": "edge", "source": memory_id, "target": target, "edge_type": edge_type.name,
                   "confidence": confidence, "created_at": created_at}
    for memory_id in ids:
        for access in reversed(access_log.read(store, memory_id)):
            yield {"record": "access", "memory": memory_id, "at": access.at, "via": access.via}
    for pending in vault.pending():
        yield {"record": "pending", **msgspec.to_builtins(pending)}
    originals = Originals(vault.path, vault.config.sources)
    files: set[str] = set()
    for memory_id in ids:
        for ref in originals.refs(memory_id):
            if ref.sha256 not in files:
                try:
                    data = originals.read(ref.sha256)
                except NotFound:
                    data = None  # pruned or damaged: the reference is still exported, the bytes cannot be
                if data is not None:
                    files.add(ref.sha256)
                    yield {"record": "file", "file": ref.file, "sha256": ref.sha256,
                           "data": base64.b64encode(data).decode()}
            yield {"record": "original", "memory": memory_id, **msgspec.to_builtins(ref)}


def import_records(vault: OpenVault, records: Iterable[dict[str, Any]]) -> ImportSummary:
    """Restore what export_records wrote (or a version 1 file's bare memories) into this vault.

    Records may come in several calls, memories first (as export writes them): a later call finds the
    memories of earlier ones by the keys the import gave them. A memory imported before is not stored
    again, and what refers to memories is written idempotently, so a re-run is harmless."""
    memories, keys, rest = _read(records)
    summary = ImportSummary()
    with vault.writing():
        fresh = _map_ids(vault, memories, keys, summary)
        for start in range(0, len(fresh), EMBED_SPAN):
            _write_memories(vault, fresh[start:start + EMBED_SPAN], keys, summary.ids)
        summary.imported = len(fresh)
        links = [{"memory": m.id, **{k: getattr(m, k) for k in LINKS if getattr(m, k) is not None}}
                 for m in fresh if any(getattr(m, k) is not None for k in LINKS)]
        _write_links(vault, links + rest["link"], summary)
        _write_refs(vault, rest, summary)
    return summary


def _read(records: Iterable[dict[str, Any]]) -> tuple[list[Memory], dict[str, str], dict[str, list[dict[str, Any]]]]:
    memories: list[Memory] = []
    keys: dict[str, str] = {}
    rest: dict[str, list[dict[str, Any]]] = {name: [] for name in RECORDS}
    for n, record in enumerate(records, 1):
        if not isinstance(record, dict):
            raise InvalidInput(f"record {n}: expected a JSON object")
        kind = record.get("record", "memory")  # version 1: bare memories
        if kind not in RECORDS:
            raise InvalidInput(f"record {n}: unknown record type {kind!r}")
        if kind == "header":
            if record.get("format") != FORMAT or not isinstance(record.get("version"), int):
                raise InvalidInput(f"record {n}: not a {FORMAT} header")
            if record["version"] > VERSION:
                raise InvalidInput(f"this file is {FORMAT} version {record['version']}; this hebbs reads up to "
                                   f"version {VERSION}: upgrade hebbs to import it")
            continue
        body = {k: v for k, v in record.items() if k not in ("record", "key")}
        if kind == "memory":
            try:
                memory = msgspec.convert(body, Memory)
            except msgspec.ValidationError as exc:
                raise InvalidInput(f"record {n}: {exc}") from None
            memories.append(memory)
            if isinstance(record.get("key"), str):
                keys[memory.id] = idempotency.check(record["key"])
        else:
            rest[kind].append(body)
    return memories, keys, rest


def _resolve(vault: OpenVault, summary: ImportSummary, old: Any) -> str | None:
    """The id in this vault of the file's memory `old` (imported by this call or an earlier one)."""
    if not isinstance(old, str):
        return None
    if old not in summary.ids:
        found = idempotency.lookup(vault.store, IMPORT_KEY_PREFIX + old)
        if found is None or found not in vault:
            return None
        summary.ids[old] = found
    return summary.ids[old]


def _map_ids(vault: OpenVault, memories: list[Memory], keys: dict[str, str], summary: ImportSummary) -> list[Memory]:
    """The memories not imported before, renamed with new ids in the old ids' order (ULIDs sort by
    time, so the vault's order is kept); those imported before map to the memory already stored."""
    seen: set[str] = set()
    base = int(ULID())
    fresh = []
    for memory in sorted(memories, key=lambda m: m.id):
        if memory.id in seen:
            raise InvalidInput(f"memory {memory.id} appears twice in the file")
        seen.add(memory.id)
        existing = _resolve(vault, summary, memory.id)
        if existing is None and memory.id in keys:
            existing = idempotency.lookup(vault.store, keys[memory.id])
            if existing is not None and existing in vault:
                summary.ids[memory.id] = existing
            else:
                existing = None
        if existing is not None:
            summary.already_there += 1
            continue
        base += 1
        summary.ids[memory.id] = str(ULID.from_int(base))
        fresh.append(memory)
    return fresh


def _write_memories(vault: OpenVault, chunk: list[Memory], keys: dict[str, str], ids: dict[str, str]) -> None:
    # Links to other memories are set afterwards (_write_links), once every memory has its new id.
    # conflicts_with comes back from the file's CONTRADICTS edges (_write_refs), whose ids are all mapped by then.
    renamed = [msgspec.structs.replace(old, id=ids[old.id], consolidated=False, **{k: None for k in LINKS},
                                       conflicts_with=[])
               for old in chunk]
    vectors = np.asarray(vault.embedder.embed_documents([embedding_text(m) for m in renamed]))
    writes = WriteSet()
    for old, memory, vector in zip(chunk, renamed, vectors):
        writes.put_memory(memory)
        for key in temporal_keys(memory.entity_id, memory.created_at, memory.id):
            writes.put("temporal", key, id_bytes(memory.id))
        writes.put("vectors", vector_key(memory.id), encode_vector(vector))
        idempotency.put(writes, IMPORT_KEY_PREFIX + old.id, memory.id)
        if old.id in keys:  # the owner of the memory's key is the key the user gave
            idempotency.put(writes, keys[old.id], memory.id)
    analogical.refresh_structure(vault.store, writes)
    vault.apply(writes, saved=renamed, vectors=([m.id for m in renamed], vectors),
                reindexed=[m for m in renamed if m.kind != MemoryKind.REVISION])


def _need(vault: OpenVault, summary: ImportSummary, old: Any, what: str) -> str:
    found = _resolve(vault, summary, old)
    if found is None:
        raise InvalidInput(f"{what} names memory {old}, which is not in the file (or not imported yet)")
    return found


def _write_links(vault: OpenVault, links: list[dict[str, Any]], summary: ImportSummary) -> None:
    """Supersession, revision and restatement links, through the id map."""
    if not links:
        return
    writes = WriteSet()
    saved = []
    for link in links:
        memory = vault.get(_need(vault, summary, link.get("memory"), "a link"))
        for field in LINKS:
            if link.get(field) is not None:
                setattr(memory, field, _need(vault, summary, link[field], f"the {field} of {link['memory']}"))
        writes.put_memory(memory)
        saved.append(memory)
    vault.apply(writes, saved=saved)


def _write_refs(vault: OpenVault, rest: dict[str, list[dict[str, Any]]], summary: ImportSummary) -> None:
    """Edges, accesses, contradiction candidates and kept originals, through the id map; each written
    so that a re-run changes nothing (a memory that has an access log keeps its own)."""
    writes = WriteSet()
    conflicts: dict[str, set[str]] = {}  # recall reads a conflict from each memory's conflicts_with
    for edge in rest["edge"]:
        source = _need(vault, summary, edge.get("source"), "an edge")
        target = _need(vault, summary, edge.get("target"), "an edge")
        try:
            edge_type = EdgeType[edge["edge_type"]]
        except KeyError:
            raise InvalidInput(f"unknown edge type {edge.get('edge_type')!r}") from None
        writes.put_edge(source, edge_type, target, float(edge.get("confidence", 1.0)), int(edge.get("created_at", 0)))
        summary.edges += 1
        if edge_type == EdgeType.CONTRADICTS:
            conflicts.setdefault(source, set()).add(target)
            conflicts.setdefault(target, set()).add(source)
    for memory_id, others in conflicts.items():
        memory = vault.memory(memory_id)
        if memory is not None and not others <= set(memory.conflicts_with):
            writes.put_memory(msgspec.structs.replace(memory, conflicts_with=sorted(others | set(memory.conflicts_with))))
    accesses: dict[str, list[tuple[int, str]]] = {}
    for access in rest["access"]:
        memory_id = _need(vault, summary, access.get("memory"), "an access")
        if access.get("via") not in access_log.VIA or not isinstance(access.get("at"), int):
            raise InvalidInput(f"access of {access.get('memory')}: expected an integer 'at' and a 'via' among "
                               f"{', '.join(access_log.VIA)}")
        accesses.setdefault(memory_id, []).append((access["at"], access["via"]))
    for memory_id, entries in accesses.items():
        if not access_log.read(vault.store, memory_id, 1):
            writes.put_meta(access_log.PREFIX + memory_id, sorted(entries)[-access_log.KEEP:])
            summary.accesses += len(entries)
    if len(writes):
        vault.store.commit(writes)
    queued = []
    for pending in rest["pending"]:
        try:
            item = msgspec.convert(pending, PendingContradiction)
        except msgspec.ValidationError as exc:
            raise InvalidInput(f"pending contradiction: {exc}") from None
        queued.append(msgspec.structs.replace(item, id=str(ULID()),
                                              memory_a=_need(vault, summary, item.memory_a, "a contradiction"),
                                              memory_b=_need(vault, summary, item.memory_b, "a contradiction")))
    summary.pending = vault.add_pending(queued) if queued else 0
    if rest["original"] or rest["file"]:
        _restore_originals(vault, rest, summary)


def _restore_originals(vault: OpenVault, rest: dict[str, list[dict[str, Any]]], summary: ImportSummary) -> None:
    originals = Originals(vault.path, vault.config.sources)
    for kept in rest["file"]:
        try:
            data = base64.b64decode(kept["data"], validate=True)
        except (KeyError, ValueError, TypeError):
            raise InvalidInput(f"kept file {kept.get('file')!r}: its data is not base64") from None
        if hashlib.sha256(data).hexdigest() != kept.get("sha256"):
            raise InvalidInput(f"kept file {kept.get('file')!r}: its data does not match its sha256")
        if not originals.has(kept["file"], kept["sha256"]):
            originals.keep(kept["file"], data, kept["sha256"])
    for record in rest["original"]:
        memory_id = _need(vault, summary, record.get("memory"), "an original")
        try:
            ref = msgspec.convert({k: v for k, v in record.items() if k != "memory"}, Ref)
        except msgspec.ValidationError as exc:
            raise InvalidInput(f"original of memory {record.get('memory')}: {exc}") from None
        if ref not in originals.refs(memory_id):
            summary.originals += originals.restore_ref(memory_id, ref)
    originals.save()
