"""A vault shared by a team in PostgreSQL with pgvector, against the embedded RocksDB vault: one run.

    .venv/bin/python -m bench.bench_team [--memories 10000] [--calls 200] [--skip-quality]

- quality: the notes bench (bench_notes: hit@1, hit@5, MRR@10) and LoCoMo dev (bench_locomo: evidence
  recall@10) on a RocksDB vault, a PostgreSQL vault (similar on the daemon's local HNSW cache) and a
  PostgreSQL vault with store.similar = "pgvector". Every vault gets the same vectors (one embedding
  per text, cached), so only the store differs.
- latency at N memories through a daemon: recall (default, fused) and remember p50/p99, RocksDB and
  PostgreSQL vaults served by two daemons, calls interleaved so both see the same load.
- similar alone at N: the local HNSW cache, pgvector `vector` and `halfvec` HNSW (m 16, ef_construction
  64 as pgvector's default), top-10 overlap with exact search, index sizes.
- 1, 2, 3 daemons on one PostgreSQL vault: remember and recall throughput, p50/p99.
- visibility: a write acknowledged by one daemon until another daemon's BM25 finds it, p50/p99.
- indexers: the notes corpus indexed by 1 RocksDB indexer, then by 1 and by 2 indexers (daemons of their
  own, checkouts of their own) into one PostgreSQL vault, splitting the files by claims: sections/s by
  wall time, and per CPU-second of the daemons. On this 2-core machine two indexers share the cores the
  model already fills, so they cannot double; the figure shows what the claims cost and that both work.
- failover: a synchronous replica promoted by hand after kill -9 of the primary; from the kill to the
  first acknowledged write of a daemon that keeps writing.
- replicas (`--parts replicas`): one vault of N memories on a primary with an asynchronous streaming
  replica, a daemon reading on the primary and one reading on the replica (`[store] read_url`): recall
  p50/p99 interleaved, the replica's index scans (proof the reads got there), the writer finding its own
  write at once, and the other daemon seeing it (p50/p99).
- split (`--parts split`): where another engine's visibility time goes, in process: until its catalog
  has the write (NOTIFY and catch-up), then until its BM25 returns it (the tantivy commit a search
  makes first).
- buffers (`--parts buffers`): pgvector HNSW top-10 with the index several times `shared_buffers` (16 MB)
  against one that fits (512 MB): p50/p99 cold (server restarted, the index's and table's files evicted
  from the OS page cache) and warm, with the share of index blocks read from outside shared_buffers.
- outage (`--parts outage`): the vault's server stopped under a running daemon: recall, remember and count
  until their error (and which), against the same calls while it was up.
- ray (`--parts ray`): the notes corpus indexed into a PostgreSQL vault by one daemon on its own model,
  then with `--ray` on a local two-node Ray cluster (one CPU each): sections/s, and sections per
  CPU-second of every process involved (the daemon, its bridge, both Ray nodes and their actors).

The PostgreSQL servers are local (hebbs.store.postgres_local, fsync on), on the same 2 cores as the
daemons and the model: a shared, loaded machine, so read the same-run ratios rather than absolute times.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from bench.harness import machine_note, percentile, shared
from hebbs import Engine
from hebbs.client import Client, start_daemon
from hebbs.paths import init_vault
from hebbs.store.embed import get_embedder
from hebbs.store.postgres_local import Cluster
from hebbs.store.storage import WriteSet

from bench import bench_daemon, bench_locomo, bench_notes


def attach(vault: Path, url: str, name: str, similar: str = "local") -> None:
    vault.mkdir(parents=True, exist_ok=True, mode=0o700)
    (vault / "config.toml").write_text(f'[store]\nurl = "{url}"\nname = "{name}"\nsimilar = "{similar}"\n')


def cached_embedder():
    """The real model, each text embedded once for the whole run: every store gets the same vectors."""
    embedder = get_embedder()
    real = embedder.embed
    memo: dict[str, np.ndarray] = {}

    def embed(texts):
        texts = list(texts)
        missing = [t for t in dict.fromkeys(texts) if t not in memo]
        if missing:
            for text, vector in zip(missing, real(missing)):
                memo[text] = vector
        return np.vstack([memo[t] for t in texts]) if texts else real(texts)

    embedder.embed = embed
    return embedder


# Quality ---------------------------------------------------------------------------------------

def notes_quality(embedder, stores: dict[str, tuple[str, str] | None]) -> dict[str, dict]:
    from hebbs.vault import index_vault

    questions = bench_notes.load_questions()
    out = {}
    for label, store in stores.items():
        with tempfile.TemporaryDirectory(prefix="hebbs-team-notes-") as tmp:
            root = Path(tmp) / "notes"
            shutil.copytree(bench_notes.DEFAULT_VAULT, root, ignore=shutil.ignore_patterns(".hebbs"))
            if store is not None:
                attach(root / ".hebbs", store[0], f"notes-{Path(tmp).name}", store[1])
            with Engine.open(root / ".hebbs", embedder=embedder) as engine:
                index_vault(engine, root)
                out[label] = t = bench_notes.scores(label, bench_notes.hebbs_rankings(engine, questions), questions)
                print(f"notes, {label}: hit@1 {t['hit@1']:.3f}, hit@5 {t['hit@5']:.3f}, MRR@10 {t['mrr@10']:.3f}",
                      flush=True)
    return out


def locomo_quality(embedder, stores: dict[str, tuple[str, str] | None]) -> dict[str, dict]:
    conversations = bench_locomo.load(shared("data/locomo-dev"))
    out = {}
    for label, store in stores.items():
        with tempfile.TemporaryDirectory(prefix="hebbs-team-locomo-") as tmp:
            vault = Path(tmp) / "vault"
            if store is not None:
                attach(vault, store[0], f"locomo-{Path(tmp).name}", store[1])
            with Engine.open(vault, embedder=embedder) as engine:
                dia_of = bench_locomo.build(engine, conversations)
                search = bench_locomo.configurations(engine, [])["hebbs default"]
                out[label] = t = bench_locomo.evaluate(label, conversations, dia_of, search)
                print(f"LoCoMo dev, {label}: recall@10 {t['overall']['recall@10']:.3f}, hit@10 "
                      f"{t['overall']['hit@10']:.3f}, p50 {t['latency_ms']['p50']:.1f} ms", flush=True)
    return out


# Daemons ---------------------------------------------------------------------------------------

class Daemon:
    def __init__(self, folder: Path) -> None:
        self.home = Path(tempfile.mkdtemp(prefix="hbt", dir="/tmp"))
        self.folder = folder
        start_daemon(self.home, idle_timeout=0)

    def client(self) -> Client:
        return Client(vault=self.folder, home=self.home)

    def cpu_seconds(self) -> float:
        """The daemon's CPU time so far (user + system, every thread)."""
        pid = Client(global_=True, home=self.home).ping().pid
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        try:
            Client(global_=True, home=self.home, autostart=False).shutdown()
        except Exception:  # noqa: BLE001 - already gone
            pass
        shutil.rmtree(self.home, ignore_errors=True)


def timed(call) -> float:
    started = time.perf_counter()
    call()
    return (time.perf_counter() - started) * 1000


def latency(url: str, memories: int, calls: int, work: Path) -> dict:
    """Recall and remember through a daemon, RocksDB against PostgreSQL at `memories` memories."""
    from hebbs.store import migrate

    rocks = work / "rocks" / ".hebbs"
    started = time.perf_counter()
    bench_daemon.fill(rocks, memories)
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
            cue = bench_daemon.CUES[n % len(bench_daemon.CUES)]
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
        cues = [embedder.embed_query(c) for c in bench_daemon.CUES] * 10
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


@contextmanager
def daemons_on(folders: list[Path]) -> Iterator[tuple[list[Daemon], list[Client]]]:
    """A daemon for each folder and a client of each; closed and stopped whatever happens."""
    daemons: list[Daemon] = []
    clients: list[Client] = []
    try:
        for folder in folders:
            daemons.append(Daemon(folder))
            clients.append(daemons[-1].client())
        yield daemons, clients
    finally:
        for c in clients:
            c.close()
        for d in daemons:
            d.stop()


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
                                f"daemon {i} note {k}: {bench_daemon.sentences(1, seed=k * 7 + i)[0]}",
                                consolidate=False)))
                        else:
                            cue = bench_daemon.CUES[k % len(bench_daemon.CUES)]
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


def found_after(client, token: str, acked: float) -> float:
    """Milliseconds from `acked` (a perf_counter reading) until `client`'s BM25 returns `token`."""
    while not client.recall(token, strategies=["lexical"], top_k=1, reinforce=False).results:
        time.sleep(0.002)
    return (time.perf_counter() - acked) * 1000


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
            shutil.copytree(bench_notes.DEFAULT_VAULT, root, ignore=shutil.ignore_patterns(".hebbs"))
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


def failover(work: Path) -> dict:
    """kill -9 of the primary, pg_ctl promote of the synchronous replica, a daemon writing throughout."""
    cluster = Cluster(work / "failover-pg", fast=False)
    try:
        primary = cluster.start_primary()
        replica = cluster.add_replica(synchronous=True)
        folder = work / "failover"
        attach(folder / ".hebbs", cluster.multi_host_url(), "failover")
        daemon = Daemon(folder)
        acked: list[float] = []
        stop = threading.Event()
        try:
            client = daemon.client()

            def write() -> None:
                n = 0
                while not stop.is_set():
                    client.remember(f"failover write {n}", key=f"f{n}", consolidate=False)
                    acked.append(time.perf_counter())
                    n += 1

            thread = threading.Thread(target=write)
            thread.start()
            while len(acked) < 20:
                time.sleep(0.05)
            killed = time.perf_counter()
            primary.kill9()
            promote_started = time.perf_counter()
            replica.promote()
            promoted = time.perf_counter()
            while not any(t > promoted for t in acked):
                time.sleep(0.01)
            stop.set()
            thread.join()
            client.close()
            first = min(t for t in acked if t > killed)
            count = int(replica.sql("SELECT count(*) FROM hebbs.memories"))
            return {"promote_s": promoted - promote_started, "first_write_after_kill_s": first - killed,
                    "acknowledged": len(acked), "on_new_primary": count}
        finally:
            stop.set()
            daemon.stop()
    finally:
        cluster.remove()


def outage(work: Path, samples: int = 5) -> dict:
    """The vault's server stopped under a running daemon: each call until its error, and which error, against
    the same calls answered while the server was up (same daemon, same run)."""
    from hebbs.errors import HebbsError

    cluster = Cluster(work / "outage-pg", fast=False)
    try:
        server = cluster.start_primary()
        folder = work / "outage"
        attach(folder / ".hebbs", server.url, "outage")
        daemon = Daemon(folder)
        try:
            client = daemon.client()
            client.remember("the office wifi password rotates every Monday")
            calls = {"recall": lambda: client.recall("wifi password", top_k=3),
                     "remember": lambda: client.remember("written during the outage", consolidate=False),
                     "count": client.count}
            up = {op: [timed(call) for _ in range(samples)] for op, call in calls.items()}
            server.stop("immediate")
            down: dict[str, list[float]] = {}
            said: dict[str, set[str]] = {}
            for op, call in calls.items():
                down[op], said[op] = [], set()
                for _ in range(samples):
                    started = time.perf_counter()
                    try:
                        call()
                        said[op].add("answered")
                    except HebbsError as exc:
                        said[op].add(exc.status_code)
                    down[op].append((time.perf_counter() - started) * 1000)
            client.close()
            return {op: {"up_p50_ms": statistics.median(up[op]), "down_p50_ms": statistics.median(down[op]),
                         "down_max_ms": max(down[op]), "errors": sorted(said[op]), "n": samples} for op in calls}
        finally:
            daemon.stop()
    finally:
        cluster.remove()


def replica_reads(work: Path, memories: int, calls: int, samples: int) -> dict:
    """A daemon reading on the primary against one reading on an asynchronous streaming replica."""
    from hebbs.store import migrate

    cluster = Cluster(work / "replica-pg", fast=False)
    daemons: list[Daemon] = []
    try:
        primary = cluster.start_primary()
        replica = cluster.add_replica()
        rocks = work / "rocks" / ".hebbs"
        if not rocks.exists():  # the latency part's vault, when it ran first
            bench_daemon.fill(rocks, memories)
        name = f"replica-{work.name}"
        on_primary, on_replica = work / "rp-primary" / ".hebbs", work / "rp-replica" / ".hebbs"
        shutil.copytree(rocks, on_primary)
        migrate.to_postgres(on_primary, primary.url, name, say=lambda _: None)
        shutil.copytree(on_primary, on_replica)  # its indexes too: no daemon rebuilds at open
        read_url = (f"postgresql://postgres@127.0.0.1:{replica.port},127.0.0.1:{primary.port}/postgres"
                    f"?target_session_attrs=prefer-standby&connect_timeout=2&passfile={primary.passfile}")
        config = on_replica / "config.toml"
        config.write_text(config.read_text().replace(f'name = "{name}"', f'name = "{name}"\nread_url = "{read_url}"'))
        daemons = [Daemon(on_primary.parent), Daemon(on_replica.parent)]
        clients = {"primary": daemons[0].client(), "replica": daemons[1].client()}
        for c in clients.values():
            for _ in range(12):  # open, warm the model, get past the first calls' costs (see latency)
                c.recall("warm up", top_k=10)

        def replica_scans() -> int:
            return int(replica.sql("SELECT coalesce(sum(idx_scan), 0) FROM pg_stat_user_tables WHERE schemaname = 'hebbs'"))
        scans_before = replica_scans()
        ms: dict[str, list[float]] = {k: [] for k in clients}
        for n in range(calls):
            cue = bench_daemon.CUES[n % len(bench_daemon.CUES)]
            for kind, c in (list(clients.items()) if n % 2 else list(clients.items())[::-1]):
                ms[kind].append(timed(lambda: c.recall(cue, top_k=10)))
        time.sleep(11)  # a backend flushes its statistics once idle, up to 10 s later
        scans = replica_scans() - scans_before
        # Read-your-writes through the replica-reading daemon, and the other daemon seeing the write.
        own_missed, seen_ms = 0, []
        writer, reader = clients["replica"], clients["primary"]
        for n in range(samples):
            token = f"ryw{n}x{uuid.uuid4().hex[:6]}"
            memory = writer.remember(f"the replica code word is {token}", consolidate=False)
            acked = time.perf_counter()
            own = writer.recall(token, strategies=["lexical"], top_k=1, reinforce=False).results
            if not own or own[0].memory.id != memory.id or writer.get(memory.id).content != memory.content:
                own_missed += 1
            seen_ms.append(found_after(reader, token, acked))
        # And the other way: the replica-reading daemon seeing the primary-reading daemon's writes.
        seen_on_replica_ms = []
        for n in range(samples):
            token = f"rev{n}x{uuid.uuid4().hex[:6]}"
            reader.remember(f"the primary code word is {token}", consolidate=False)
            seen_on_replica_ms.append(found_after(writer, token, time.perf_counter()))
        for c in clients.values():
            c.close()
        lag = primary.sql("SELECT coalesce(max(extract(epoch FROM replay_lag)) * 1000, 0) FROM pg_stat_replication")
        return {kind: {"p50": percentile(v, 50), "p99": percentile(v, 99)} for kind, v in ms.items()} | {
            "replica_index_scans": scans, "calls": calls, "own_write_missed": own_missed, "samples": samples,
            "seen_by_other_p50_ms": percentile(seen_ms, 50), "seen_by_other_p99_ms": percentile(seen_ms, 99),
            "seen_by_replica_reader_p50_ms": percentile(seen_on_replica_ms, 50),
            "seen_by_replica_reader_p99_ms": percentile(seen_on_replica_ms, 99), "replay_lag_ms_last": float(lag)}
    finally:
        for d in daemons:
            d.stop()
        cluster.remove()


def replica_read_cost(work: Path, reads: int = 600) -> dict:
    """One store read (10 records by key) on a streaming replica against the primary, in process,
    alternating: the replica's own cost per read, without daemons."""
    from hebbs.store.postgres import PgStore
    from hebbs.store.storage import MEMORY_PREFIX

    cluster = Cluster(work / "read-cost-pg", fast=False)
    try:
        primary = cluster.start_primary()
        replica = cluster.add_replica()
        stores = {"primary": PgStore.open(primary.url, "cost", work / "cost-a"),
                  "replica": PgStore.open(primary.url, "cost", work / "cost-b",
                                          read_url=f"postgresql://postgres@127.0.0.1:{replica.port}/postgres"
                                                   f"?passfile={replica.passfile}")}
        try:
            keys = [MEMORY_PREFIX + uuid.uuid4().bytes for _ in range(200)]
            writes = WriteSet()
            for key in keys:
                writes.put("default", key, os.urandom(300))
            stores["primary"].commit(writes)
            time.sleep(1)
            ms: dict[str, list[float]] = {k: [] for k in stores}
            for n in range(-10, reads):
                order = list(stores.items()) if n % 2 else list(stores.items())[::-1]
                for label, store in order:
                    took = timed(lambda: store._many("default", keys[n % 190:n % 190 + 10]))
                    if n >= 0:
                        ms[label].append(took)
            return {k: percentile(v, 50) for k, v in ms.items()} | {"on_replica": stores["replica"].reads["replica"]}
        finally:
            for store in stores.values():
                store.close()
    finally:
        cluster.remove()


def _real_like_vectors(embedder, count: int, queries: int, seed: int = 7) -> tuple[np.ndarray, np.ndarray]:
    """count + queries unit vectors shaped like the model's: each a mix of two real embeddings (of the
    latency bench's sentences) plus a little noise, so they cluster as real vectors do without
    embedding `count` texts on two cores."""
    rng = np.random.default_rng(seed)
    base = embedder.embed(bench_daemon.sentences(4000, seed=3)).astype(np.float32)
    total = count + queries
    i, j = rng.integers(0, len(base), total), rng.integers(0, len(base), total)
    mixed = base[i] + rng.uniform(0.2, 0.8, (total, 1)).astype(np.float32) * base[j]
    mixed += rng.normal(0, 0.02, mixed.shape).astype(np.float32)
    mixed /= np.linalg.norm(mixed, axis=1, keepdims=True)
    return mixed[:count], mixed[count:]


def _evict_from_os_cache(files: list[Path]) -> None:
    """Drop these relation files (and their further segments) from the OS page cache (posix_fadvise
    DONTNEED): a cold read without dropping every other process's cache on a shared machine."""
    for path in files:
        for segment in [path, *sorted(path.parent.glob(path.name + ".*"))]:
            if segment.exists():
                fd = os.open(segment, os.O_RDONLY)
                try:
                    os.fsync(fd)
                    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                finally:
                    os.close(fd)


def buffers(work: Path, embedder, count: int, queries: int) -> dict:
    """pgvector top-10 with its HNSW index larger than shared_buffers, and fitting, cold and warm."""
    from hebbs.store.postgres import PgStore
    from hebbs.store.storage import VECTOR_PREFIX, id_bytes

    vectors, cues = _real_like_vectors(embedder, count, queries)
    dim = vectors.shape[1]
    cluster = Cluster(work / "buffers-pg", fast=False)
    out: dict = {}
    try:
        server = cluster.start_primary()
        store = PgStore.open(server.url, "buffers", work / "buffers-vault")
        try:
            started = time.perf_counter()
            keys = [VECTOR_PREFIX + uuid.uuid4().bytes for _ in range(count)]
            with store.pool.connection() as conn, conn.cursor() as cur:
                with cur.copy("COPY hebbs.vectors (vault, key, embedding) FROM STDIN") as copy:
                    for key, row in zip(keys, vectors):
                        copy.write_row((store.vault_id, key, row))
            with store.pool.connection() as conn:
                conn.execute("SET maintenance_work_mem = '1GB'")
                conn.execute(f"CREATE INDEX vectors_hnsw_{store.vault_id}_vector ON hebbs.vectors USING hnsw "
                             f"((embedding::vector({dim})) vector_cosine_ops) WHERE vault = {store.vault_id}")
                conn.execute("VACUUM ANALYZE hebbs.vectors")
            index = f"hebbs.vectors_hnsw_{store.vault_id}_vector"
            out["index_mb"] = store._run(f"SELECT pg_relation_size('{index}')")[0][0] / 2**20
            out["table_mb"] = store._run("SELECT pg_total_relation_size('hebbs.vectors')")[0][0] / 2**20 - out["index_mb"]
            out["build_s"] = time.perf_counter() - started
            row_of = {key: n for n, key in enumerate(keys)}
            exact = [set(np.argsort(-(vectors @ q))[:10]) for q in cues]
        finally:
            store.close()
        files = [server.data / server.sql(f"SELECT pg_relation_filepath('{r}')") for r in (index, "hebbs.vectors")]
        for setting in ("16MB", "512MB"):
            server.sql(f"ALTER SYSTEM SET shared_buffers = '{setting}'")
            server.stop("fast")
            _evict_from_os_cache(files)
            server.start()
            store = PgStore.open(server.url, "buffers", work / "buffers-vault")
            try:
                def stat() -> tuple[int, int]:
                    return tuple(store._run("SELECT idx_blks_hit, idx_blks_read FROM pg_statio_user_indexes "
                                            f"WHERE indexrelname = '{index.split('.')[1]}'")[0])
                result = {}
                for phase in ("cold", "warm 1", "warm 2"):
                    hit0, read0 = stat()
                    times = [timed(lambda: store.nearest(q, 10, dim, ef=100)) for q in cues]
                    time.sleep(11)  # a backend flushes its statistics once idle, up to 10 s later
                    hit1, read1 = stat()
                    result[phase] = {"p50": percentile(times, 50), "p99": percentile(times, 99),
                                     "blocks_from_outside": (read1 - read0) / max(1, (hit1 - hit0) + (read1 - read0))}
                found = [store.nearest(q, 10, dim, ef=100) for q in cues]
                result["recall@10"] = statistics.fmean(
                    len({row_of[VECTOR_PREFIX + id_bytes(mid)] for mid, _ in f} & e) / 10 for f, e in zip(found, exact))
            finally:
                store.close()
            out[f"shared_buffers {setting}"] = result
        return out
    finally:
        cluster.remove()


@contextmanager
def ray_cluster() -> Iterator[tuple[str, list[int]]]:
    """A head node and a worker node on localhost, one CPU each (as tests/store/test_ray_index.py), each in a
    session of its own that every process of the node stays in; yields the address and those process
    groups, and stops exactly them."""
    temp = Path(f"/tmp/hbray{os.getpid()}")
    temp.mkdir(exist_ok=True)
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    common = ["--num-cpus", "1", "--object-store-memory", str(100 * 1024 * 1024), "--disable-usage-stats",
              "--dashboard-agent-listen-port", "0"]
    groups: list[int] = []
    ray = str(Path(sys.executable).with_name("ray"))
    try:
        for args in (["--head", "--port", str(port), "--include-dashboard=false", "--temp-dir", str(temp)],
                     ["--address", f"127.0.0.1:{port}"]):
            proc = subprocess.Popen([ray, "start", *args, *common], env=env, start_new_session=True,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                    preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
            groups.append(proc.pid)
            if proc.wait(timeout=300) != 0:
                raise RuntimeError("ray start failed")
        yield f"127.0.0.1:{port}", groups
    finally:
        for pgid in reversed(groups):
            for sig in (signal.SIGTERM, signal.SIGKILL):
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(pgid, sig)
                time.sleep(1)
        shutil.rmtree(temp, ignore_errors=True)


class CpuOfTree:
    """CPU seconds used by a set of processes (the descendants of some pids, and every process in some
    process groups), sampled twice a second so processes that end during the run are counted too."""

    def __init__(self, roots: list[int], groups: list[int]) -> None:
        self.roots, self.groups = set(roots), set(groups)
        self.used: dict[int, float] = {}
        self.start: dict[int, float] = {}
        self._stop = threading.Event()
        self._sample()
        self.start = dict(self.used)
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        tick = os.sysconf("SC_CLK_TCK")
        stats = {}
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                with contextlib.suppress(OSError):
                    fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
                    stats[int(entry)] = (int(fields[1]), int(fields[2]), (int(fields[11]) + int(fields[12])) / tick)
        members = {pid for pid, (_, pgrp, _) in stats.items() if pgrp in self.groups} | (self.roots & set(stats))
        grew = True
        while grew:
            more = {pid for pid, (ppid, _, _) in stats.items() if ppid in members} - members
            members |= more
            grew = bool(more)
        for pid in members:
            self.used[pid] = stats[pid][2]  # its own threads only: children are members of their own

    def _loop(self) -> None:
        while not self._stop.wait(0.5):
            self._sample()

    def stop(self) -> float:
        self._stop.set()
        self._thread.join()
        self._sample()
        return sum(v - self.start.get(pid, 0.0) for pid, v in self.used.items())


def ray_throughput(work: Path, url: str, notes: int | None = None) -> dict:
    """The notes corpus into a PostgreSQL vault: one daemon on its own model (no cluster running), then
    a daemon sending its embedding batches to the two-node cluster."""
    out = {}
    for label in ("1 indexer, local model", "1 indexer, --ray (2 nodes, 1 CPU each)"):
        with contextlib.ExitStack() as stack:
            address, groups = stack.enter_context(ray_cluster()) if "ray" in label else (None, [])
            root = work / f"ray-{len(out)}"
            shutil.copytree(bench_notes.DEFAULT_VAULT, root, ignore=shutil.ignore_patterns(".hebbs"))
            for extra in sorted(root.rglob("*.md"))[notes:] if notes else []:
                extra.unlink()
            init_vault(root, work, store=url, name=f"ray{len(out)}-{work.name}")
            daemons, clients = stack.enter_context(daemons_on([root]))
            pid = Client(global_=True, home=daemons[0].home).ping().pid
            cpu = CpuOfTree([pid], groups)
            started = time.perf_counter()
            summary = clients[0].index(root, ray=address)
            wall = time.perf_counter() - started
            used = cpu.stop()
        out[label] = {"sections": summary.sections_total, "wall_s": wall, "per_s": summary.sections_total / wall,
                      "cpu_s": used, "per_cpu_s": summary.sections_total / used,
                      "on_ray": getattr(summary, "embedded_on_ray", 0)}
    return out


def print_indexers(report: dict, url: str, work: Path) -> None:
    report["indexers"] = indexers(url, work)
    print("\nindexing the notes corpus           sections  wall s  sections/s  daemon CPU s  sections/CPU-s  embedded by each")
    for label, t in report["indexers"].items():
        print(f"  {label:<33} {t['sections']:8d}  {t['wall_s']:6.1f}  {t['per_s']:10.1f}  {t['cpu_s']:12.1f}  "
              f"{t['per_cpu_s']:14.1f}  {t['embedded']}")


def run_parts(report: dict, args: argparse.Namespace, url: str, work: Path, embedder) -> None:
    parts = (args.parts or "replicas,split,buffers,ray,outage").split(",")
    unknown = set(parts) - {"replicas", "buffers", "ray", "split", "outage"}
    if unknown:
        raise SystemExit(f"unknown parts: {sorted(unknown)}")
    if "replicas" in parts:
        report["replicas"] = r = replica_reads(work, args.memories, args.calls, args.visibility)
        print(f"\nreads on a streaming replica, {args.memories} memories   recall p50 ms   p99 ms")
        for kind in ("primary", "replica"):
            print(f"  daemon reading on the {kind:<8}                {r[kind]['p50']:8.1f}  {r[kind]['p99']:8.1f}")
        print(f"  replica/primary p50: {r['replica']['p50'] / r['primary']['p50']:.2f}; index scans on the replica "
              f"during {r['calls']} recalls: {r['replica_index_scans']}")
        report["replica_read_cost"] = c = replica_read_cost(work)
        print(f"  one read of 10 records, in process: replica {c['replica']:.3f} ms, primary {c['primary']:.3f} ms "
              f"({c['on_replica']} reads on the replica)")
        print(f"  writer reading on the replica missed its own write: {r['own_write_missed']} of {r['samples']}; "
              f"the other daemon saw it p50 {r['seen_by_other_p50_ms']:.0f} ms, p99 {r['seen_by_other_p99_ms']:.0f} ms; "
              f"the replica-reading daemon saw the other's p50 {r['seen_by_replica_reader_p50_ms']:.0f} ms, "
              f"p99 {r['seen_by_replica_reader_p99_ms']:.0f} ms")
    if "split" in parts:
        report["split"] = v = visibility_split(url, work, embedder, args.visibility)
        print(f"\nanother engine's visibility, split (n={v['n']}): in its catalog p50 {v['catalog_p50_ms']:.0f} ms "
              f"(max {v['catalog_max_ms']:.0f}), then in its BM25 p50 {v['then_bm25_p50_ms']:.0f} ms "
              f"(max {v['then_bm25_max_ms']:.0f})")
    if "buffers" in parts:
        report["buffers"] = b = buffers(work, embedder, args.buffer_vectors, 200)
        print(f"\npgvector top-10 (ef 100), {args.buffer_vectors} vectors: index {b['index_mb']:.0f} MB, table "
              f"{b['table_mb']:.0f} MB, built in {b['build_s']:.0f} s")
        print("  shared_buffers   phase     p50 ms   p99 ms   index blocks from outside shared_buffers")
        for setting in ("16MB", "512MB"):
            t = b[f"shared_buffers {setting}"]
            for phase in ("cold", "warm 1", "warm 2"):
                print(f"  {setting:<16} {phase:<8} {t[phase]['p50']:7.2f}  {t[phase]['p99']:7.2f}   "
                      f"{t[phase]['blocks_from_outside']:.1%}")
            print(f"  {setting:<16} recall@10 against exact: {t['recall@10']:.3f}")
    if "outage" in parts:
        report["outage"] = o = outage(work)
        print("\nthe vault's server stopped under a daemon   up p50 ms   down p50 ms   down max ms   answer")
        for op, t in o.items():
            print(f"  {op:<42} {t['up_p50_ms']:9.1f}   {t['down_p50_ms']:11.0f}   {t['down_max_ms']:11.0f}   "
                  f"{', '.join(t['errors'])}")
    if "ray" in parts:
        report["ray"] = rr = ray_throughput(work, url, args.ray_notes)
        print("\nindexing the notes corpus into PostgreSQL   sections  wall s  sections/s  CPU s  sections/CPU-s  on Ray")
        for label, t in rr.items():
            print(f"  {label:<40} {t['sections']:8d}  {t['wall_s']:6.1f}  {t['per_s']:10.1f}  {t['cpu_s']:5.1f}  "
                  f"{t['per_cpu_s']:14.1f}  {t['on_ray']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=10_000)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=15.0, help="per daemon count and operation")
    parser.add_argument("--visibility", type=int, default=100, help="samples")
    parser.add_argument("--skip-quality", action="store_true")
    parser.add_argument("--quality-only", choices=["notes", "locomo"], help="one quality table and nothing else")
    parser.add_argument("--latency-only", action="store_true", help="the latency table and nothing else")
    parser.add_argument("--indexers-only", action="store_true", help="the indexers table and nothing else")
    parser.add_argument("--parts", help="only these of replicas,split,buffers,outage,ray (comma-separated), in that "
                        "order")
    parser.add_argument("--buffer-vectors", type=int, default=50_000, help="vectors in the shared_buffers part")
    parser.add_argument("--ray-notes", type=int, help="index only this many of the corpus' notes in the ray part")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    print(f"machine: {machine_note()} (shared with other work: read ratios, not absolute times)")
    work = Path(tempfile.mkdtemp(prefix="hbteam", dir="/tmp"))
    cluster = Cluster(work / "pg", fast=False)
    report: dict = {"machine": machine_note()}
    try:
        url = cluster.start_primary().url
        embedder = cached_embedder()
        stores = {"rocksdb": None, "postgresql": (url, "local"), "postgresql, pgvector": (url, "pgvector")}
        if args.parts:
            run_parts(report, args, url, work, embedder)
            return
        if args.quality_only == "locomo":
            report["locomo"] = locomo_quality(embedder, stores)
            return
        if args.quality_only == "notes":
            report["notes"] = notes_quality(embedder, stores)
            return
        if args.indexers_only:
            print_indexers(report, url, work)
            return
        if args.latency_only:
            report["latency"] = lat = latency(url, args.memories, args.calls, work)
            for kind in ("rocksdb", "postgresql"):
                for op in ("recall", "remember"):
                    print(f"  {op:<8} {kind:<26} {lat[kind][op]['p50']:8.2f}  {lat[kind][op]['p99']:8.2f}")
            return
        if not args.skip_quality:
            report["notes"] = notes_quality(embedder, stores)
            print("\nnotes (hugoDocs, 50 questions)      hit@1   hit@5  MRR@10")
            for label, t in report["notes"].items():
                print(f"  {label:<33} {t['hit@1']:.3f}   {t['hit@5']:.3f}   {t['mrr@10']:.3f}")
            report["locomo"] = locomo_quality(embedder, stores)
            print("\nLoCoMo dev                          recall@10  hit@10  p50 ms")
            for label, t in report["locomo"].items():
                print(f"  {label:<33} {t['overall']['recall@10']:.3f}      {t['overall']['hit@10']:.3f}   "
                      f"{t['latency_ms']['p50']:.1f}")
        lat = latency(url, args.memories, args.calls, work)
        report["latency"] = lat
        print(f"\nthrough a daemon at {args.memories} memories      p50 ms    p99 ms")
        for kind in ("rocksdb", "postgresql"):
            for op in ("recall", "remember"):
                print(f"  {op:<8} {kind:<26} {lat[kind][op]['p50']:8.2f}  {lat[kind][op]['p99']:8.2f}")
        print(f"  recall p50 ratio postgresql/rocksdb: {lat['postgresql']['recall']['p50'] / lat['rocksdb']['recall']['p50']:.2f}")
        report["similar"] = similar_alone(url, Path(lat["pg_vault"]), embedder, args.memories)
        print(f"\nsimilar() alone at {args.memories}: p50 ms, top-10 overlap with exact search")
        for label, t in report["similar"].items():
            extra = f", index {t['index_mb']:.1f} MB built in {t['build_s']:.1f} s" if "index_mb" in t else ""
            print(f"  {label:<18} {t['p50_ms']:7.2f} ms  recall@10 {t['recall@10']:.3f}{extra}")
        report["daemons"] = many_daemons(url, work, args.seconds)
        print("\ndaemons on one vault   op        calls/s   p50 ms   p99 ms")
        for n, ops in report["daemons"].items():
            for op, t in ops.items():
                print(f"  {n}                    {op:<9} {t['per_s']:7.1f}  {t['p50']:7.1f}  {t['p99']:7.1f}")
        report["visibility"] = visibility(url, work, args.visibility)
        v = report["visibility"]
        print(f"\nanother daemon's write visible (BM25): p50 {v['p50_ms']:.0f} ms, p99 {v['p99_ms']:.0f} ms, "
              f"max {v['max_ms']:.0f} ms (n={v['n']})")
        print_indexers(report, url, work)
        run_parts(report, args, url, work, embedder)
        report["failover"] = failover(work)
        f = report["failover"]
        print(f"\nfailover (sync replica, manual promote): promote {f['promote_s']:.2f} s, first acknowledged write "
              f"{f['first_write_after_kill_s']:.2f} s after the kill; {f['acknowledged']} acknowledged, "
              f"{f['on_new_primary']} on the new primary")
    finally:
        cluster.remove()
        shutil.rmtree(work, ignore_errors=True)
        if args.json:  # also after a part of the run (the early returns above)
            args.json.write_text(json.dumps(report, indent=2, default=str))


if __name__ == "__main__":
    main()
