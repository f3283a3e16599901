"""Daemons on a PostgreSQL vault against a RocksDB one: latency, similar() alone, throughput of several
daemons on one vault, a write's visibility to another daemon, and indexers splitting a corpus by claims."""

from __future__ import annotations

import shutil
import statistics
import sys
import threading
import time
import uuid
from pathlib import Path

import numpy as np

from bench.harness import percentile
from hebbs import Engine
from hebbs.paths import init_vault

from bench.datasets import notes as notes_data
from bench.workloads.facts import CUES, fill, sentences
from bench.workloads.team.common import Daemon, attach, daemons_on, found_after, timed


def latency(url: str, memories: int, calls: int, work: Path) -> dict:
    """Recall and remember through a daemon, RocksDB against PostgreSQL at `memories` memories."""
    from hebbs.store import migrate

    rocks = work / "rocks" / ".hebbs"
    started = time.perf_counter()
    fill(rocks, memories)
    pg = work / "pg" / ".hebbs"
    shutil.copytree(rocks, pg)
    migrate.to_postgres(pg, url, f"latency-{work.name}", say=lambda _: None)
    print(f"latency: {memories} memories filled and copied to PostgreSQL in {time.perf_counter() - started:.0f} s",
          file=sys.stderr)
    daemons = {"rocksdb": Daemon(rocks.parent), "postgresql": Daemon(pg.parent)}
    try:
        clients = {k: d.client() for k, d in daemons.items()}
        for c in clients.values():  # open the vaults, warm the model
            c.recall("warm up", top_k=10)
        ms: dict[str, dict[str, list[float]]] = {k: {"recall": [], "remember": []} for k in clients}
        for n in range(calls):
            cue = CUES[n % len(CUES)]
            for kind, c in clients.items():
                ms[kind]["recall"].append(timed(lambda: c.recall(cue, top_k=10)))
        for n in range(calls // 2):
            for kind, c in clients.items():
                ms[kind]["remember"].append(timed(lambda: c.remember(f"latency note {n} about the retry policy",
                                                                      consolidate=False)))
        for c in clients.values():
            c.close()
        for kind, ops in ms.items():
            # Where a tail comes from: the slowest calls and their place in the run (warm-up effects
            # cluster at the start, a periodic cost spreads out).
            slow = sorted(range(len(ops["recall"])), key=lambda i: -ops["recall"][i])[:5]
            print(f"latency: slowest recalls, {kind}: " + ", ".join(f"#{i} {ops['recall'][i]:.0f} ms" for i in slow),
                  file=sys.stderr)
            steady = ops["recall"][10:]
            print(f"latency: recall p99 after the first 10 calls, {kind}: {percentile(steady, 99):.0f} ms",
                  file=sys.stderr)
        return {kind: {op: {"p50": percentile(v, 50), "p99": percentile(v, 99)} for op, v in ops.items()}
                for kind, ops in ms.items()} | {"pg_vault": str(pg)}
    finally:
        for d in daemons.values():
            d.stop()


def similar_alone(url: str, pg_vault: Path, embedder, memories: int) -> dict:
    """similar(): local HNSW cache against pgvector vector / halfvec, on the latency bench's vault."""
    out: dict = {}
    with Engine.open(pg_vault, embedder=embedder) as engine:
        store = engine.vault.store
        dim = embedder.dim
        cues = [embedder.embed_query(c) for c in CUES] * 10
        allowed = engine.vault.scope()
        ids_all = [mid for mid, _ in engine.vault.entries()]
        matrix = engine.vault.vectors_or_zeros(ids_all)
        exact = [set(np.array(ids_all)[np.argsort(-(matrix @ q))[:10]]) for q in cues]
        local = [timed(lambda: engine.vault.similar(q, 10, allowed, narrow=False)) for q in cues]
        local_hits = [set(m for m, _ in engine.vault.similar(q, 10, allowed, narrow=False)) for q in cues]
        out["local HNSW"] = {"p50_ms": percentile(local, 50), "recall@10": statistics.fmean(
            len(a & b) / 10 for a, b in zip(local_hits, exact))}
        for half in (False, True):
            kind = "halfvec" if half else "vector"
            started = time.perf_counter()
            store.ensure_vector_index(dim, halfvec=half)
            build = time.perf_counter() - started
            size = store._run(f"SELECT pg_relation_size('hebbs.vectors_hnsw_{store.vault_id}_{kind}')")[0][0]
            ms = [timed(lambda: store.nearest(q, 10, dim, ef=max(engine.config.index.ef_search, 40), halfvec=half))
                  for q in cues]
            hits = [set(m for m, _ in store.nearest(q, 10, dim, ef=max(engine.config.index.ef_search, 40),
                                                     halfvec=half)) for q in cues]
            out[f"pgvector {kind}"] = {"p50_ms": percentile(ms, 50), "build_s": build, "index_mb": size / 2**20,
                                       "recall@10": statistics.fmean(len(a & b) / 10 for a, b in zip(hits, exact))}
    return out


def many_daemons(url: str, work: Path, seconds: float) -> dict:
    """1, 2, 3 daemons on one vault, one client each, remembering then recalling for `seconds` each."""
    out = {}
    for n in (1, 2, 3):
        name = f"many-{n}-{work.name}"
        folders = [work / f"many{n}-{i}" for i in range(n)]
        for f in folders:
            attach(f / ".hebbs", url, name)
        with daemons_on(folders) as (_, clients):
            for c in clients:
                c.recall("warm up")
            result = {}
            for op in ("remember", "recall"):
                times: list[list[float]] = [[] for _ in clients]
                stop = time.monotonic() + seconds

                def work_loop(i: int) -> None:
                    k = 0
                    while time.monotonic() < stop:
                        if op == "remember":
                            times[i].append(timed(lambda: clients[i].remember(
                                f"daemon {i} note {k}: {sentences(1, seed=k * 7 + i)[0]}",
                                consolidate=False)))
                        else:
                            cue = CUES[k % len(CUES)]
                            times[i].append(timed(lambda: clients[i].recall(cue, top_k=10)))
                        k += 1

                threads = [threading.Thread(target=work_loop, args=(i,)) for i in range(n)]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join()
                every = [x for t in times for x in t]
                result[op] = {"per_s": len(every) / seconds, "p50": percentile(every, 50), "p99": percentile(every, 99)}
            out[n] = result
    return out


def visibility(url: str, work: Path, samples: int) -> dict:
    """From one daemon's acknowledgement until another daemon's BM25 index returns the memory."""
    name = f"vis-{work.name}"
    folders = [work / "vis-a", work / "vis-b"]
    for f in folders:
        attach(f / ".hebbs", url, name)
    a, b = Daemon(folders[0]), Daemon(folders[1])
    try:
        writer, reader = a.client(), b.client()
        writer.recall("warm up")
        reader.recall("warm up")
        seen: list[float] = []
        for n in range(samples):
            token = f"vistoken{n}x{work.name[-4:]}"
            writer.remember(f"the code word is {token}", consolidate=False)
            seen.append(found_after(reader, token, time.perf_counter()))
        writer.close()
        reader.close()
        return {"p50_ms": percentile(seen, 50), "p99_ms": percentile(seen, 99), "max_ms": max(seen), "n": samples}
    finally:
        a.stop()
        b.stop()


def visibility_split(url: str, work: Path, embedder, samples: int) -> dict:
    """Where another engine's visibility time goes, in process (no daemon, no socket): from one engine's
    acknowledgement until the other's catalog has the memory (the NOTIFY and the catch-up), then until
    its BM25 returns it (the tantivy commit a search makes first)."""
    for side in ("a", "b"):
        attach(work / f"split-{side}", url, f"split-{work.name}")
    with Engine.open(work / "split-a", embedder=embedder) as a, Engine.open(work / "split-b", embedder=embedder) as b:
        caught, searchable = [], []
        for n in range(samples):
            token = f"split{n}x{uuid.uuid4().hex[:6]}"
            memory = a.remember(f"the code word is {token}")
            acked = time.perf_counter()
            while memory.id not in b.vault:
                time.sleep(0.001)
            in_catalog = time.perf_counter()
            while not b.recall(token, strategies=["lexical"], top_k=1):
                time.sleep(0.001)
            caught.append((in_catalog - acked) * 1000)
            searchable.append((time.perf_counter() - in_catalog) * 1000)
    return {"catalog_p50_ms": percentile(caught, 50), "catalog_max_ms": max(caught),
            "then_bm25_p50_ms": percentile(searchable, 50), "then_bm25_max_ms": max(searchable), "n": samples}


def indexers(url: str, work: Path) -> dict:
    """The notes corpus indexed by one RocksDB indexer, then by 1 and 2 indexers into one PostgreSQL vault."""
    out = {}
    for label, count in (("rocksdb", 1), ("postgresql", 1), ("postgresql", 2)):
        name = f"idx{count}-{work.name}"
        folders = []
        for i in range(count):
            root = work / f"index-{label}-{count}-{i}"
            shutil.copytree(notes_data.DEFAULT_VAULT, root, ignore=shutil.ignore_patterns(".hebbs"))
            init_vault(root, work, **({"store": url, "name": name} if label == "postgresql" else {}))
            folders.append(root)
        with daemons_on(folders) as (daemons, clients):
            for c in clients:
                c.ping()
            cpu = [d.cpu_seconds() for d in daemons]
            results: list = [None] * count

            def run(i: int) -> None:
                results[i] = clients[i].index(folders[i])

            started = time.perf_counter()
            threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            wall = time.perf_counter() - started
            used = sum(d.cpu_seconds() - c0 for d, c0 in zip(daemons, cpu))
            sections = results[0].sections_total
            out[f"{label}, {count} indexer{'s' if count > 1 else ''}"] = {
                "sections": sections, "wall_s": wall, "per_s": sections / wall, "cpu_s": used,
                "per_cpu_s": sections / used, "embedded": [r.embedded for r in results]}
    return out
