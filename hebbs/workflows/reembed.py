"""`hebbs reembed`: move a vault to another embedding model, resumably, never searched with mixed vectors.

Two steps (docs/embedding.md, "Switching a vault's model"):

1. **Stage**, while the vault serves as before: every memory that has a vector is embedded with the new
   model, in batches; each batch is written to `<vault>/reembed/part-NNNNNN.npz` (ids, the sha256 of the
   text embedded, the vectors) by an atomic rename, so a run killed at any point keeps every batch it
   finished and the next run embeds the rest. Recall keeps using the old model and its vectors: the
   store is not touched.
2. **Switch**, on the closed vault (the daemon drains and closes it, then opens it again): memories
   written or revised while staging are embedded now (their text's hash differs from the staged one, or
   they are new), then every vector and the model the vault records (meta `model_id`, `model_dim`,
   `model_spec`, `model_files`) are written in one batch: a RocksDB write batch, a PostgreSQL
   transaction. A crash before it leaves the old model whole; after it, the new one. The HNSW checkpoint
   is dropped (the next open builds it from the new vectors) and so is pgvector's index of the old
   dimension (the next open builds one of the new).
"""

from __future__ import annotations

import hashlib
import io
import json
import re
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from ..config import CONFIG_FILE, load_config
from ..core.memory_text import embedding_text
from ..core.open_vault import OpenVault, open_store
from ..embedding.embed import Embedder
from ..errors import InvalidInput
from ..fsutil import atomic_write
from ..schema import Memory, ReembedProgress
from ..store import changelog
from ..store.contract import RecordStore
from ..store.storage import WriteSet, encode_vector, vector_key

STAGING = "reembed"
BATCH = 64
_TARGET = "target.json"

Progress = Callable[[ReembedProgress], None]


def text_digest(memory: Memory) -> str:
    """What a staged vector was embedded from: a memory revised since is embedded again at the switch."""
    return hashlib.sha256(embedding_text(memory).encode("utf-8", "surrogatepass")).hexdigest()[:32]


def staging_dir(path: Path) -> Path:
    return path / STAGING


def discard_staging(path: Path) -> None:
    """What a stopped run staged, once the vault is on the model it was for after all."""
    shutil.rmtree(staging_dir(path), ignore_errors=True)


def stage(vault: OpenVault, target: Embedder, progress: Progress | None = None) -> tuple[int, int, int]:
    """Embed every memory with a vector into the staging folder with `target`, resuming what a stopped run
    staged. Returns (memories, staged by an earlier run, embedded now). `progress` may raise Cancelled:
    what is staged stays."""
    folder = staging_dir(vault.path)
    wanted = {"model_id": target.model_id, "spec": target.spec, "dim": target.dim, "files": target.files}
    if _read_target(folder) != wanted:
        shutil.rmtree(folder, ignore_errors=True)  # staged for another model, or nothing yet: start afresh
        folder.mkdir(mode=0o700)
        atomic_write(folder / _TARGET, json.dumps(wanted, sort_keys=True).encode())
    staged = _staged_ids(folder)
    ids = [mid for mid, _ in vault.store.vectors()]
    todo = [mid for mid in ids if mid not in staged]
    resumed = len(ids) - len(todo)
    number = max((int(p.stem.split("-")[1]) for p in folder.glob("part-*.npz")), default=0)
    done = resumed
    say = progress or (lambda _: None)
    say(ReembedProgress(stage="reembed", done=done, total=len(ids), model=target.model_id))
    for start in range(0, len(todo), BATCH):
        chunk = [m for m in vault.memories_of(todo[start:start + BATCH]) if m is not None]
        if chunk:
            vectors = target.embed_documents([embedding_text(m) for m in chunk])
            number += 1
            _write_part(folder / f"part-{number:06d}.npz", [m.id for m in chunk], [text_digest(m) for m in chunk],
                        vectors)
        done += len(todo[start:start + BATCH])
        say(ReembedProgress(stage="reembed", done=done, total=len(ids), model=target.model_id))
    return len(ids), resumed, len(todo)


def switch(path: Path, target: Embedder, progress: Progress | None = None) -> tuple[str, int, int]:
    """Write the staged vectors and the new model into the closed vault's store, in one batch, embedding
    first what changed since it was staged. Returns (the old model's id, memories, embedded now)."""
    folder = staging_dir(path)
    staged_for = _read_target(folder)
    if staged_for is None or staged_for.get("model_id") != target.model_id:
        raise InvalidInput(f"nothing is staged for {target.model_id} in {folder}: run `hebbs reembed` again")
    staged = dict(_parts(folder))
    say = progress or (lambda _: None)
    store = open_store(path, load_config(path))
    try:
        store.lock_writers()
        try:
            old = str(store.get_meta("model_id"))
            ids = [mid for mid, _ in store.vectors()]
            vectors: dict[str, np.ndarray] = {}
            redo: list[Memory] = []
            for start in range(0, len(ids), 1024):
                for mid, memory in zip(ids[start:start + 1024], store.get_memories(ids[start:start + 1024])):
                    if memory is None:
                        continue
                    row = staged.get(mid)
                    if row is not None and row[0] == text_digest(memory):
                        vectors[mid] = row[1]
                    else:
                        redo.append(memory)
            # Counted over every memory the switch writes: the staged ones are ready, the rest are embedded now.
            total = len(vectors) + len(redo)
            say(ReembedProgress(stage="switch", done=len(vectors), total=total, model=target.model_id))
            for start in range(0, len(redo), BATCH):
                chunk = redo[start:start + BATCH]
                for memory, vector in zip(chunk, target.embed_documents([embedding_text(m) for m in chunk])):
                    vectors[memory.id] = vector
                say(ReembedProgress(stage="switch", done=len(vectors), total=total, model=target.model_id))
            _commit_switch(store, target, vectors, [mid for mid in ids if mid not in vectors])
        finally:
            store.unlock_writers()
    finally:
        store.close()
    # Derived, and of the old model: the next open builds the HNSW index from the new vectors.
    for name in ("hnsw.bin", "hnsw.meta"):
        for stale in (path / "index").glob(f"{name}*"):
            stale.unlink(missing_ok=True)
    _name_model_in_config(path, target.spec)
    discard_staging(path)
    return old, len(vectors), len(redo)


def _commit_switch(store: RecordStore, target: Embedder, vectors: dict[str, np.ndarray], orphans: list[str]) -> None:
    writes = WriteSet()
    for mid, vector in vectors.items():
        writes.put("vectors", vector_key(mid), encode_vector(vector))
    for mid in orphans:  # a vector whose memory is gone: nothing to embed it from
        writes.delete("vectors", vector_key(mid))
    writes.put_meta("model_id", target.model_id)
    writes.put_meta("model_dim", target.dim)
    writes.put_meta("model_spec", target.spec)
    writes.put_meta("model_files", target.files)
    touched = [*vectors, *orphans]
    # pgvector's index casts every vector to the old dimension: gone before the first vector of the new one.
    store.drop_vector_index()
    if store.shared:
        store.commit(writes, touched=touched)  # the other daemons see the change and stop writing (catch_up)
        return
    seq = store.head_seq() + 1
    writes.put_meta("write_seq", seq)
    changelog.record(writes, seq, touched)  # a checkpoint that survives the unlink below catches up from it
    store.commit(writes)


def _name_model_in_config(path: Path, spec: str) -> None:
    """A `model = ...` line in the vault's config.toml now names the model the vault holds."""
    config = path / CONFIG_FILE
    try:
        text = config.read_text()
    except FileNotFoundError:
        return
    head, table, rest = text.partition("\n[")
    changed = re.sub(r'(?m)^model\s*=\s*"[^"\n]*"', lambda _: f"model = {json.dumps(spec)}", head, count=1)
    if changed != head:
        config.write_text(changed + table + rest)


def _write_part(path: Path, ids: list[str], digests: list[str], vectors: np.ndarray) -> None:
    buffer = io.BytesIO()
    np.savez(buffer, ids=np.asarray(ids), digests=np.asarray(digests), vectors=np.asarray(vectors, dtype=np.float32))
    atomic_write(path, buffer.getvalue())


def _staged_ids(folder: Path) -> set[str]:
    """The ids staged so far (their vectors are not read: a large vault's would fill the memory)."""
    ids: set[str] = set()
    for part in sorted(folder.glob("part-*.npz")):
        try:
            with np.load(part) as data:
                ids.update(str(mid) for mid in data["ids"].tolist())
        except (OSError, ValueError, KeyError):
            part.unlink(missing_ok=True)  # a part that cannot be read: its memories are embedded again
    return ids


def _parts(folder: Path) -> Iterator[tuple[str, tuple[str, np.ndarray]]]:
    """Every staged vector: (id, (text digest, vector)). A part that cannot be read (a disk that lied) is
    dropped, and its memories are embedded again."""
    for part in sorted(folder.glob("part-*.npz")):
        try:
            with np.load(part) as data:
                ids, digests, vectors = data["ids"], data["digests"], data["vectors"]
        except (OSError, ValueError, KeyError):
            part.unlink(missing_ok=True)
            continue
        for mid, digest, vector in zip(ids.tolist(), digests.tolist(), vectors):
            yield str(mid), (str(digest), vector)


def _read_target(folder: Path) -> dict[str, Any] | None:
    try:
        data = json.loads((folder / _TARGET).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None

