"""Recall beside its floor: embedding + raw hnswlib knn, and where the time inside recall goes.

    .venv/bin/python -m bench.bench_floor [--size 10000] [--queries 300]

The vault is seeded by bench_strategies.build_vault: random unit vectors and random-word texts written
straight into RocksDB (a bench-only path: embedding 10k texts would measure the model, not recall).
Cues are real sentences embedded by the real model on every call. All figures come from this one run,
so the ratios to the floor stay fair on a busy machine even when the absolute times do not.

Printed: p50/p99 for the embedding alone, raw hnswlib knn_query (k=10, same ef), the floor
(embedding + knn), similarity-only relevance-only recall and default recall (each with its ratio to
the floor), default recall at top_k 10/50/100, and a table of where recall's time goes, measured by
wrapping the engine's parts with perf_counter timers in this bench only (exclusive time per part).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import numpy as np

from bench.harness import percentile
from bench.report import write_result
from bench.workloads.graph_vault import CUES
from bench.workloads.graph_vault import build_vault

from hebbs import Engine
from hebbs.recall import confidence, fused, fusion, scoring
from hebbs.workflows import reinforce
from hebbs.schema import ScoringWeights
from hebbs.embedding.embed import get_embedder, limit_blas_threads
from hebbs.core.open_vault import Scope

RELEVANCE_ONLY = ScoringWeights(relevance=1.0, recency=0.0, importance=0.0, reinforcement=0.0)


def stats(samples: list[float]) -> tuple[float, float]:
    ms = np.asarray(samples) * 1000
    return percentile(ms, 50), percentile(ms, 99)


class Profiler:
    """Exclusive wall time per named part: a part's time excludes the parts it calls."""

    def __init__(self) -> None:
        self.total: dict[str, float] = defaultdict(float)
        self._stack: list[float] = []  # child time accumulated per open frame

    def wrap(self, owner: object, attr: str, part: str) -> None:
        inner = getattr(owner, attr)

        def timed_call(*args, **kwargs):
            self._stack.append(0.0)
            start = time.perf_counter()
            try:
                return inner(*args, **kwargs)
            finally:
                spent = time.perf_counter() - start
                children = self._stack.pop()
                self.total[part] += spent - children
                if self._stack:
                    self._stack[-1] += spent

        setattr(owner, attr, timed_call)


def where_time_goes(engine: Engine, queries: int, **kwargs) -> list[tuple[str, float]]:
    prof = Profiler()
    scope_passing = Scope.passing
    vault = engine.vault
    prof.wrap(engine.embedder, "embed_query", "embedding")
    prof.wrap(vault.vector_index, "search", "ANN (hnswlib)")
    prof.wrap(vault, "lexical_hits", "lexical (BM25)")
    prof.wrap(vault, "entry", "catalog filters/lookups")
    prof.wrap(Scope, "passing", "catalog filters/lookups")  # the scope check of a search's hits, in one pass
    for batch in ("ranking_fields", "files_of", "words_of"):
        prof.wrap(vault, batch, "catalog filters/lookups")
    prof.wrap(scoring, "components", "scoring")
    prof.wrap(scoring, "composite", "scoring")
    prof.wrap(scoring, "composite_many", "scoring")
    prof.wrap(fused, "fuse", "fusion")
    prof.wrap(confidence, "assess", "confidence")
    prof.wrap(vault, "memory", "record reads")
    prof.wrap(vault, "memories_of", "record reads")
    prof.wrap(vault, "vectors_or_zeros", "vector reads")
    prof.wrap(vault.lexical_index, "terms_of", "confidence")
    prof.wrap(fusion, "mmr_order", "MMR")
    prof.wrap(reinforce, "record_recall", "query log write")
    prof.wrap(engine, "recall", "recall (rest)")
    try:
        for i in range(queries):
            engine.recall(CUES[i % len(CUES)], reinforce=False, **kwargs)
    finally:
        for owner in (engine.embedder, vault.vector_index, vault.lexical_index, vault, engine):
            for attr in ("embed_query", "search", "lexical_hits", "entry", "memory", "memories_of",
                         "vectors_or_zeros", "vectors", "terms_of", "recall", "ranking_fields", "files_of", "words_of"):
                owner.__dict__.pop(attr, None)
        Scope.passing = scope_passing
        import importlib
        for module in (scoring, fused, fusion, confidence, reinforce):
            importlib.reload(module)
    return sorted(((part, t / queries * 1000) for part, t in prof.total.items()), key=lambda item: -item[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=300)
    args = parser.parse_args()
    # As the daemon does (hebbs.daemon.main): on two cores, OpenBLAS threads for MMR's small products
    # fight the model's threads, and a recall at top_k 100 took several times longer for it.
    limit_blas_threads(1)
    embedder = get_embedder()
    n, q = args.size, args.queries
    with tempfile.TemporaryDirectory(prefix="hebbs-bench-") as tmp:
        path = Path(tmp) / "vault"
        build_vault(path, n, embedder.dim)
        engine = Engine.open(path, embedder=embedder)
        try:
            ef = engine.config.index.ef_search
            raw = engine.vault.vector_index.raw
            raw.set_ef(ef)
            vectors = [embedder.embed_query(c) for c in CUES]
            cue = lambda i: CUES[i % len(CUES)]  # noqa: E731
            measures: dict[str, Callable[[int], object]] = {
                "embedding alone": lambda i: embedder.embed_query(cue(i)),
                f"raw hnswlib knn k=10 ef={ef}": lambda i: raw.knn_query(vectors[i % len(CUES)], k=10),
                "floor: embedding + knn": lambda i: raw.knn_query(embedder.embed_query(cue(i)), k=10),
                "similarity-only recall (relevance-only)": lambda i: engine.recall(
                    cue(i), strategies=["similarity"], weights=RELEVANCE_ONLY, top_k=10, reinforce=False),
                "default recall top_k=10": lambda i: engine.recall(cue(i), reinforce=False),
                "default recall top_k=50": lambda i: engine.recall(cue(i), top_k=50, reinforce=False),
                "default recall top_k=100": lambda i: engine.recall(cue(i), top_k=100, reinforce=False),
            }
            # Interleaved, one query of each measure in turn: on a shared machine whose load swings,
            # every measure sees the same load, so the ratios to the floor stay fair.
            samples: dict[str, list[float]] = {label: [] for label in measures}
            for i in range(q + 10):
                for label, fn in measures.items():
                    start = time.perf_counter()
                    fn(i)
                    if i >= 10:  # the first rounds warm caches
                        samples[label].append(time.perf_counter() - start)
            rows = [(label, stats(values)) for label, values in samples.items()]
            floor = dict(rows)["floor: embedding + knn"]
            print(f"\n== {n:,} memories, {q} queries each; load average {os.getloadavg()[0]:.2f} "
                  f"on {os.cpu_count()} cores (shared machine)")
            print(f"| {'measure':<42} | p50 ms | p99 ms | p50 / floor | p99 / floor |")
            print(f"|{'-' * 44}|-------:|-------:|------------:|------------:|")
            for label, (p50, p99) in rows:
                print(f"| {label:<42} | {p50:6.2f} | {p99:6.2f} | {p50 / floor[0]:10.2f}x | {p99 / floor[1]:10.2f}x |")
            top10 = dict(rows)["default recall top_k=10"]
            top100 = dict(rows)["default recall top_k=100"]
            print(f"top_k 100 / top_k 10 (default recall): p50 {top100[0] / top10[0]:.2f}x, "
                  f"p99 {top100[1] / top10[1]:.2f}x")
            saved = write_result("bench_floor", {
                label: {"p50_ms": p50, "p99_ms": p99, "p50_vs_floor": p50 / floor[0], "p99_vs_floor": p99 / floor[1]}
                for label, (p50, p99) in rows}, size=n, queries=q)
            print(f"figures written to {saved}")
            for label, kwargs in (("similarity-only, relevance-only", {"strategies": ["similarity"],
                                                                       "weights": RELEVANCE_ONLY}),
                                  ("default, top_k 10", {}), ("default, top_k 100", {"top_k": 100})):
                parts = where_time_goes(engine, q, **kwargs)
                total = sum(t for _, t in parts)
                print(f"\nwhere the time goes: {label} (mean ms per recall, exclusive; total {total:.2f} ms)")
                for part, t in parts:
                    print(f"  {part:<26} {t:7.3f} ms  {t / total * 100:5.1f}%")
        finally:
            engine.close()


if __name__ == "__main__":
    main()
