"""A vault shared by a team in PostgreSQL with pgvector, against the embedded RocksDB vault: one run.

    .venv/bin/python -m bench team [--memories 10000] [--calls 200] [--skip-quality]

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
- failover (`--parts failover`): a synchronous replica promoted by hand after kill -9 of the primary; from
  the kill to the first acknowledged write of a daemon that keeps writing.
- automatic failover (`--parts autofailover`): a three-node Patroni cluster with etcd (scripts.patroni_local,
  synchronous mode), a daemon writing through its multi-host URL, kill -9 of the leader's node (Patroni and
  its server): until Patroni names a new leader, until the first acknowledged write, the writer's errors
  (it retries STORE_UNAVAILABLE), and the acknowledged writes missing afterwards.
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
  until their error (and which: a typed STORE_UNAVAILABLE), against the same calls while it was up.
- ray (`--parts ray`): the notes corpus indexed into a PostgreSQL vault by one daemon on its own model,
  then with `--ray` on a local two-node Ray cluster (one CPU each): sections/s, and sections per
  CPU-second of every process involved (the daemon, its bridge, both Ray nodes and their actors).

The PostgreSQL servers are local (scripts.postgres_local, fsync on), on the same 2 cores as the
daemons and the model: a shared, loaded machine, so read the same-run ratios rather than absolute times.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path

from bench import report as out
from bench.harness import machine_note
from bench.workloads.team.autofailover import autofailover
from bench.workloads.team.buffers import buffers
from bench.workloads.team.common import cached_embedder
from bench.workloads.team.outage import outage
from bench.workloads.team.daemons import indexers, latency, many_daemons, similar_alone, visibility, visibility_split
from bench.workloads.team.quality import locomo_quality, notes_quality
from bench.workloads.team.ray import ray_throughput
from bench.workloads.team.replicas import failover, replica_read_cost, replica_reads
from scripts.postgres_local import Cluster

PARTS = ("replicas", "split", "buffers", "outage", "failover", "autofailover", "ray")


def print_indexers(report: dict, url: str, work: Path) -> None:
    report["indexers"] = indexers(url, work)
    print("\nindexing the notes corpus           sections  wall s  sections/s  daemon CPU s  sections/CPU-s  embedded by each")
    for label, t in report["indexers"].items():
        print(f"  {label:<33} {t['sections']:8d}  {t['wall_s']:6.1f}  {t['per_s']:10.1f}  {t['cpu_s']:12.1f}  "
              f"{t['per_cpu_s']:14.1f}  {t['embedded']}")


def print_replicas(report: dict, args: argparse.Namespace, work: Path) -> None:
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


def print_split(report: dict, args: argparse.Namespace, url: str, work: Path, embedder) -> None:
    report["split"] = v = visibility_split(url, work, embedder, args.visibility)
    print(f"\nanother engine's visibility, split (n={v['n']}): in its catalog p50 {v['catalog_p50_ms']:.0f} ms "
          f"(max {v['catalog_max_ms']:.0f}), then in its BM25 p50 {v['then_bm25_p50_ms']:.0f} ms "
          f"(max {v['then_bm25_max_ms']:.0f})")


def print_buffers(report: dict, args: argparse.Namespace, work: Path, embedder) -> None:
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


def print_ray(report: dict, args: argparse.Namespace, url: str, work: Path) -> None:
    report["ray"] = rr = ray_throughput(work, url, args.ray_notes)
    print("\nindexing the notes corpus into PostgreSQL   sections  wall s  sections/s  CPU s  sections/CPU-s  on Ray")
    for label, t in rr.items():
        print(f"  {label:<40} {t['sections']:8d}  {t['wall_s']:6.1f}  {t['per_s']:10.1f}  {t['cpu_s']:5.1f}  "
              f"{t['per_cpu_s']:14.1f}  {t['on_ray']}")


def run_parts(report: dict, args: argparse.Namespace, url: str, work: Path, embedder) -> None:
    parts = (args.parts or ",".join(PARTS)).split(",")
    unknown = set(parts) - set(PARTS)
    if unknown:
        raise SystemExit(f"unknown parts: {sorted(unknown)}")
    if "replicas" in parts:
        print_replicas(report, args, work)
    if "split" in parts:
        print_split(report, args, url, work, embedder)
    if "buffers" in parts:
        print_buffers(report, args, work, embedder)
    if "outage" in parts:
        print_outage(report, work)
    if "failover" in parts:
        print_failover(report, work)
    if "autofailover" in parts:
        print_autofailover(report, work)
    if "ray" in parts:
        print_ray(report, args, url, work)


def print_outage(report: dict, work: Path) -> None:
    report["outage"] = o = outage(work)
    print("\nthe vault's server stopped under a daemon   up p50 ms   down p50 ms   down max ms   answer")
    for op, t in o.items():
        print(f"  {op:<42} {t['up_p50_ms']:9.1f}   {t['down_p50_ms']:11.0f}   {t['down_max_ms']:11.0f}   "
              f"{', '.join(t['errors'])}")


def print_autofailover(report: dict, work: Path) -> None:
    report["autofailover"] = runs = {"5 (default)": autofailover(work), "30": autofailover(work, 30.0)}
    first = next(iter(runs.values()))
    print(f"\nautomatic failover (Patroni + etcd, ttl {first['ttl_s']} s, loop_wait {first['loop_wait_s']} s, "
          "synchronous mode): kill -9 of the leader's node under a writing daemon")
    print("  store.unreachable_after  new leader s  first acknowledged write s  acknowledged  lost  the writer's errors")
    for label, a in runs.items():
        errors = ", ".join(f"{n} {code}" for code, n in a["errors"].items()) or "none"
        print(f"  {label:<23}  {a['new_leader_s']:12.1f}  {a['first_write_after_kill_s']:26.1f}  {a['acknowledged']:12d}  "
              f"{a['lost']:4d}  {errors}")
    print(f"  (each on a fresh cluster, up in {first['bootstrap_s']:.0f} s)")


def print_latency_rows(lat: dict) -> None:
    for kind in ("rocksdb", "postgresql"):
        for op in ("recall", "remember"):
            print(f"  {op:<8} {kind:<26} {lat[kind][op]['p50']:8.2f}  {lat[kind][op]['p99']:8.2f}")


def print_quality(report: dict, embedder, stores: dict) -> None:
    report["notes"] = notes_quality(embedder, stores)
    print("\nnotes (hugoDocs, 50 questions)      hit@1   hit@5  MRR@10")
    for label, t in report["notes"].items():
        print(f"  {label:<33} {t['hit@1']:.3f}   {t['hit@5']:.3f}   {t['mrr@10']:.3f}")
    report["locomo"] = locomo_quality(embedder, stores)
    print("\nLoCoMo dev                          recall@10  hit@10  p50 ms")
    for label, t in report["locomo"].items():
        print(f"  {label:<33} {t['overall']['recall@10']:.3f}      {t['overall']['hit@10']:.3f}   "
              f"{t['latency_ms']['p50']:.1f}")


def print_daemons(report: dict, args: argparse.Namespace, url: str, work: Path, embedder) -> None:
    """Latency, similar() alone, several daemons on one vault and a write's visibility."""
    lat = latency(url, args.memories, args.calls, work)
    report["latency"] = lat
    print(f"\nthrough a daemon at {args.memories} memories      p50 ms    p99 ms")
    print_latency_rows(lat)
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


def print_failover(report: dict, work: Path) -> None:
    report["failover"] = f = failover(work)
    print(f"\nfailover (sync replica, manual promote): promote {f['promote_s']:.2f} s, first acknowledged write "
          f"{f['first_write_after_kill_s']:.2f} s after the kill; {f['acknowledged']} acknowledged, "
          f"{f['on_new_primary']} on the new primary")


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=10_000)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=15.0, help="per daemon count and operation")
    parser.add_argument("--visibility", type=int, default=100, help="samples")
    parser.add_argument("--skip-quality", action="store_true")
    parser.add_argument("--quality-only", choices=["notes", "locomo"], help="one quality table and nothing else")
    parser.add_argument("--latency-only", action="store_true", help="the latency table and nothing else")
    parser.add_argument("--indexers-only", action="store_true", help="the indexers table and nothing else")
    parser.add_argument("--parts", help="only these of replicas,split,buffers,outage,failover,autofailover,ray "
                        "(comma-separated), in that order")
    parser.add_argument("--buffer-vectors", type=int, default=50_000, help="vectors in the shared_buffers part")
    parser.add_argument("--ray-notes", type=int, help="index only this many of the corpus' notes in the ray part")
    parser.add_argument("--json", type=Path)
    return parser.parse_args()


def run(report: dict, args: argparse.Namespace, url: str, work: Path) -> None:
    """What the arguments ask for: one part alone, or the whole run."""
    embedder = cached_embedder()
    stores = {"rocksdb": None, "postgresql": (url, "local"), "postgresql, pgvector": (url, "pgvector")}
    if args.parts:
        run_parts(report, args, url, work, embedder)
    elif args.quality_only == "locomo":
        report["locomo"] = locomo_quality(embedder, stores)
    elif args.quality_only == "notes":
        report["notes"] = notes_quality(embedder, stores)
    elif args.indexers_only:
        print_indexers(report, url, work)
    elif args.latency_only:
        report["latency"] = lat = latency(url, args.memories, args.calls, work)
        print_latency_rows(lat)
    else:
        if not args.skip_quality:
            print_quality(report, embedder, stores)
        print_daemons(report, args, url, work, embedder)
        print_indexers(report, url, work)
        run_parts(report, args, url, work, embedder)


def main() -> None:
    args = arguments()
    print(f"machine: {machine_note()} (shared with other work: read ratios, not absolute times)")
    work = Path(tempfile.mkdtemp(prefix="hbteam", dir="/tmp"))
    cluster = Cluster(work / "pg", fast=False)
    report: dict = {"machine": machine_note()}
    try:
        run(report, args, cluster.start_primary().url, work)
    finally:
        cluster.remove()
        shutil.rmtree(work, ignore_errors=True)
        out.write_json(args.json, report, default=str)  # also after a part of the run


if __name__ == "__main__":
    main()
