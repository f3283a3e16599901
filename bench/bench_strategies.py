"""Benchmark causal and analogical recall, and one decay sweep, on synthetic vaults.

    .venv/bin/python -m bench.bench_strategies [--sizes 10000 100000] [--queries 300] [--dir PATH]

How the vault is built: embedding 100k memories with the real model would take ~20 minutes and
measures the embedder, not recall. So the memories are written straight through the storage layer
(hebbs.store.storage.Store), one RocksDB batch per chunk of 10k: records, temporal keys, RANDOM unit
vectors (384-d), graph edges (CAUSED_BY / RELATED_TO to random earlier memories, FOLLOWED_BY chains
per entity, exactly as the engine lays them out) and the structural vectors the engine would have
stored. The write sequence is then bumped, so Engine.open rebuilds the HNSW and lexical indexes
from RocksDB - the same path as a crash recovery - and that open time is printed too.

Random vectors make similarity scores meaningless but cost the index the same work per query (they
are, if anything, harder for HNSW than real embeddings). Recalls run through the public
Engine.recall with default options (reinforce=True, so each call also writes its reinforcement
and query log), by seed id, so no embedding is timed unless the line says "cue".
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import string
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from ulid import ULID

from bench.harness import percentile
from hebbs import Engine
from hebbs.recall import analogical
from hebbs.workflows import decay
from hebbs.embedding.embed import get_embedder
from hebbs.schema import EdgeType, Memory, MemoryKind
from hebbs.store.storage import (Store, WriteSet, edge_keys, edge_value, id_bytes, temporal_keys, vector_key)

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


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f} ms"


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


def timed(fn: Callable[[], Any], runs: int) -> tuple[list[float], list[Any]]:
    times, outs = [], []
    for _ in range(runs):
        t0 = time.perf_counter()
        outs.append(fn())
        times.append(time.perf_counter() - t0)
    return times, outs


def report(label: str, times: list[float], results: list[Any] | None = None) -> None:
    line = f"  {label:<44} p50 {ms(percentile(times, 50)):>10}  p99 {ms(percentile(times, 99)):>10}"
    if results:
        line += f"  (mean {statistics.mean(len(r) for r in results):.1f} results)"
    print(line, flush=True)


def bench_size(root: Path, n: int, queries: int) -> None:
    print(f"\n== {n:,} memories ==", flush=True)
    embedder = get_embedder()
    path = root / f"vault-{n}"
    shutil.rmtree(path, ignore_errors=True)
    Engine.open(path, embedder=embedder).close()  # records the model in meta
    t0 = time.perf_counter()
    ids = build_vault(path, n, embedder.dim)
    print(f"  build (storage layer, random vectors): {time.perf_counter() - t0:.1f}s", flush=True)
    t0 = time.perf_counter()
    eng = Engine.open(path, embedder=embedder)
    print(f"  Engine.open with HNSW + lexical rebuild: {time.perf_counter() - t0:.1f}s", flush=True)
    rng = random.Random(5)
    try:
        for depth in (3, 5):
            for direction in ("forward", "both"):
                times, res = timed(lambda: eng.recall(strategies=["causal"], seed=rng.choice(ids), max_depth=depth,
                                                      direction=direction, top_k=10), queries)
                report(f"causal depth {depth} {direction}", times, res)
        times, res = timed(lambda: eng.recall(strategies=["causal"], seed=rng.choice(ids), max_depth=5,
                                              direction="both", top_k=10, edge_types=list(EdgeType.__members__)),
                           queries)
        report("causal depth 5 both, all edge types", times, res)
        times, res = timed(lambda: eng.recall(strategies=["analogical"], seed=rng.choice(ids), top_k=10), queries)
        report("analogical (seed)", times, res)
        times, res = timed(lambda: eng.recall(analogy=tuple(rng.sample(ids, 3)), top_k=10), queries)
        report("analogical A:B::C:? (ids)", times, res)
        cues = [" ".join(rng.choices(["deploy", "billing", "outage", "fees", "team", "postgres", "review"], k=4))
                for _ in range(queries)]
        it = iter(cues)
        times, res = timed(lambda: eng.recall(next(it), strategies=["analogical"], top_k=10), queries)
        report("analogical (cue, includes embedding)", times, res)
        it = iter(cues)
        times, res = timed(lambda: eng.recall(next(it), strategies=["similarity", "lexical", "temporal", "causal",
                                                                    "analogical"], top_k=10), queries)
        report("all five strategies (cue)", times, res)

        now = decay._now() + 7 * DAY_US
        t0 = time.perf_counter()
        swept = decay.sweep_all(eng, now=now)
        took = time.perf_counter() - t0
        print(f"  decay sweep, full pass: {took:.2f}s ({swept.processed:,} memories, {swept.updated:,} written, "
              f"{len(swept.candidates):,} below threshold; {swept.processed / took:,.0f}/s)", flush=True)
        t0 = time.perf_counter()
        again = decay.sweep_all(eng, now=now)
        print(f"  decay sweep, same `now` again (nothing to write): {time.perf_counter() - t0:.2f}s "
              f"({again.updated} written)", flush=True)
        t0 = time.perf_counter()
        candidates = eng.forget_candidates(now=now)
        print(f"  forget_candidates(): {time.perf_counter() - t0:.2f}s ({len(candidates):,} listed)", flush=True)
    finally:
        eng.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--dir", type=Path, default=None, help="where to build the vaults (default: a temp dir)")
    parser.add_argument("--keep", action="store_true", help="keep the vaults afterwards")
    args = parser.parse_args()
    root = args.dir or Path(tempfile.mkdtemp(prefix="hebbs-bench-strategies-"))
    root.mkdir(parents=True, exist_ok=True)
    print(f"vaults in {root}; {args.queries} queries per line; times per recall call")
    try:
        for n in args.sizes:
            bench_size(root, n, args.queries)
    finally:
        if not args.keep and args.dir is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
