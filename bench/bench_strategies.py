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
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.harness import percentile
from bench.workloads.graph_vault import DAY_US, build_vault
from hebbs import Engine
from hebbs.workflows import decay
from hebbs.embedding.embed import get_embedder
from hebbs.schema import EdgeType


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f} ms"


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
