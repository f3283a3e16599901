"""Engine core: recall and remember latency at 10k and 100k memories, beside raw hnswlib and the model.

    .venv/bin/python -m bench.bench_engine [--sizes 10000 100000] [--queries 200]

The vault is seeded with random unit vectors written straight into RocksDB (embedding 100k texts
would take ~20 minutes and measures the model, not the engine); cues are real sentences embedded
by the real model on every call. Printed, all measured in this run:
- recall p50/p99: default (similarity + lexical fused, MMR) and similarity alone, reinforce off;
- raw hnswlib knn_query on the same index and vectors (the floor the engine adds to);
- the query embedding alone;
- remember p50, one at a time and batched (per memory);
- the model's embedding throughput at 64 and 256 tokens.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from bench.harness import percentile
from bench.workloads.texts import embedding_throughput
from bench.workloads.graph_vault import build_vault

from hebbs import Engine
from hebbs.embedding.embed import get_embedder
from bench.workloads.graph_vault import CUES


def p50_p99(samples: list[float]) -> str:
    ms = np.asarray(samples) * 1000
    return f"p50 {percentile(ms, 50):7.2f} ms   p99 {percentile(ms, 99):7.2f} ms"


def timed(fn, n: int) -> list[float]:
    out = []
    for i in range(n):
        start = time.perf_counter()
        fn(i)
        out.append(time.perf_counter() - start)
    return out


def bench_size(n: int, queries: int) -> None:
    embedder = get_embedder()
    with tempfile.TemporaryDirectory(prefix="hebbs-bench-") as tmp:
        path = Path(tmp) / "vault"
        started = time.perf_counter()
        build_vault(path, n, embedder.dim)
        seeded = time.perf_counter() - started
        started = time.perf_counter()
        engine = Engine.open(path, embedder=embedder)
        opened = time.perf_counter() - started
        print(f"\n== {n:,} memories (seeded in {seeded:.1f} s; first open with index rebuild {opened:.1f} s)")
        try:
            vectors = [embedder.embed_one(c) for c in CUES]
            print(f"embed query          {p50_p99(timed(lambda i: embedder.embed_one(CUES[i % len(CUES)]), queries))}")
            raw = engine.vault.vector_index._index  # the raw hnswlib index: the floor
            print(f"raw hnswlib k=10     {p50_p99(timed(lambda i: raw.knn_query(vectors[i % len(CUES)], k=10), queries))}")
            print(f"raw hnswlib k=50     {p50_p99(timed(lambda i: raw.knn_query(vectors[i % len(CUES)], k=50), queries))}")
            for label, kwargs in (("similarity only", {"strategies": ["similarity"]}), ("default (fused)", {})):
                samples = timed(lambda i: engine.recall(CUES[i % len(CUES)], top_k=10, reinforce=False, **kwargs),
                                queries)
                print(f"recall {label:<15} {p50_p99(samples)}")
            samples = timed(lambda i: engine.remember(f"benchmark note {i}: {CUES[i % len(CUES)]}"), 100)
            print(f"remember single      {p50_p99(samples)}")
            batch = [{"content": f"batched note {i}: {CUES[i % len(CUES)]}"} for i in range(256)]
            started = time.perf_counter()
            engine.remember_many(batch)
            per = (time.perf_counter() - started) / len(batch)
            print(f"remember batched     {per * 1000:7.2f} ms per memory ({1 / per:.0f}/s, batches of 256)")
        finally:
            started = time.perf_counter()
            engine.close()
            closed = time.perf_counter() - started
        started = time.perf_counter()
        Engine.open(path, embedder=embedder).close()
        print(f"close (snapshot) {closed:.2f} s; reopen from snapshot {time.perf_counter() - started:.2f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--queries", type=int, default=200)
    args = parser.parse_args()
    embedder = get_embedder()
    for tokens in (64, 256):
        print(f"model throughput at {tokens} tokens: {embedding_throughput(embedder, tokens, 128):.1f} texts/s")
    for n in args.sizes:
        bench_size(n, args.queries)


if __name__ == "__main__":
    main()
