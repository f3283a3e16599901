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

The PostgreSQL servers are local (hebbs.store.postgres_local, fsync on), on the same 2 cores as the
daemons and the model: a shared, loaded machine, so read the same-run ratios rather than absolute times.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
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
            acked = time.perf_counter()
            while not reader.recall(token, strategies=["lexical"], top_k=1, reinforce=False).results:
                time.sleep(0.002)
            seen.append((time.perf_counter() - acked) * 1000)
        writer.close()
        reader.close()
        return {"p50_ms": percentile(seen, 50), "p99_ms": percentile(seen, 99), "max_ms": max(seen), "n": samples}
    finally:
        a.stop()
        b.stop()


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


def print_indexers(report: dict, url: str, work: Path) -> None:
    report["indexers"] = indexers(url, work)
    print("\nindexing the notes corpus           sections  wall s  sections/s  daemon CPU s  sections/CPU-s  embedded by each")
    for label, t in report["indexers"].items():
        print(f"  {label:<33} {t['sections']:8d}  {t['wall_s']:6.1f}  {t['per_s']:10.1f}  {t['cpu_s']:12.1f}  "
              f"{t['per_cpu_s']:14.1f}  {t['embedded']}")


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
