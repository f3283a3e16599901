"""Recall quality on an abstract collection (CISI, MEDLINE: bench/datasets/): hebbs' default and any
extra recall settings beside BM25, dense similarity (same model, exact search) and their RRF, scored by
nDCG@10 and recall@100 over the same texts in the same run; and default recall's latency there."""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench import baselines as bl
from bench.datasets.cisi import Queries, Texts
from bench.harness import percentile
from hebbs import Engine


def score(name: str, ranked: list[list[str]], queries: list[tuple[str, str, set[str]]]) -> dict:
    return {"name": name, "n": len(queries),
            "ndcg@10": statistics.fmean(bl.ndcg_at(r, q[2], 10) for r, q in zip(ranked, queries)),
            "recall@100": statistics.fmean(bl.recall_at(r, q[2], 100) for r, q in zip(ranked, queries))}


def build(engine: Engine, texts: list[tuple[str, str]]) -> dict[str, str]:
    memories = engine.remember_many([{"content": t} for _, t in texts], check_contradictions=False)
    return {m.id: doc for m, (doc, _) in zip(memories, texts)}


def hebbs_rankings(engine: Engine, doc_of: dict[str, str], queries, **kw) -> list[list[str]]:
    return [[doc_of[r.memory.id] for r in engine.recall(q, top_k=100, reinforce=False, **kw).results]
            for _, q, _ in queries]


def baseline_rankings(engine: Engine, texts, queries) -> dict[str, list[list[str]]]:
    ids = [i for i, _ in texts]
    bm25 = bl.BM25([t for _, t in texts])
    vectors = bl.embed_cached(engine.embedder, [t for _, t in texts])
    out: dict[str, list[list[str]]] = {"BM25": [], "dense": [], "RRF(60) BM25+dense": []}
    for _, q, _ in queries:
        lex = bl.ranking(bm25.scores(q), 100, positive=True)
        dense = bl.ranking(vectors @ engine.embedder.embed_one(q), 100)
        for name, ranked in zip(out, (lex, dense, bl.rrf([lex, dense]))):
            out[name].append([ids[i] for i in ranked[:100]])
    return out


def latency(engine: Engine, queries, top_ks=(10, 50, 100), rounds: int = 3) -> dict[int, dict[str, float]]:
    """Default-recall latency per top_k (query embedding included, reinforce off), interleaved so
    that a burst of load from other jobs hits every top_k alike."""
    wall: dict[int, list[float]] = {k: [] for k in top_ks}
    cpu: dict[int, list[float]] = {k: [] for k in top_ks}
    for _ in range(rounds):
        for _, q, _ in queries:
            for k in top_ks:
                started, started_cpu = time.perf_counter(), time.process_time()
                engine.recall(q, top_k=k, reinforce=False)
                wall[k].append((time.perf_counter() - started) * 1000)
                cpu[k].append((time.process_time() - started_cpu) * 1000)
    return {k: {"p50": statistics.median(wall[k]), "p95": percentile(wall[k], 95),
                "cpu_p50": statistics.median(cpu[k])} for k in top_ks}


LENGTHS = ((1, 8, "short (<= 8 words)"), (9, 25, "sentence (9-25 words)"), (26, 10_000, "paragraph (> 25 words)"))


def latency_by_length(engine: Engine, queries, rounds: int = 3) -> dict[str, dict[str, float]]:
    """Default recall (top_k 10, reinforce off) per cue length, on one vault: each judged query as
    it is (most are sentences or paragraphs) and its first five words (a short cue), interleaved
    so that a burst of load from other jobs hits every length alike; wall and CPU time. Also
    similarity alone on the short cues, the floor of any recall that embeds its cue, and the
    model's own embedding of each cue (Embedder.embed_query), whose paragraph / short ratio is what
    the model alone costs on a long cue."""
    cues = [q for _, q, _ in queries] + [" ".join(q.split()[:5]) for _, q, _ in queries]
    embedder = engine.vault.embedder
    wall: dict[str, list[float]] = {label: [] for *_, label in LENGTHS}
    cpu: dict[str, list[float]] = {label: [] for *_, label in LENGTHS}
    for key in ("similarity alone, short", *(f"model alone, {label.split()[0]}" for *_, label in LENGTHS)):
        wall[key], cpu[key] = [], []

    def timed(key: str, call) -> None:
        started, started_cpu = time.perf_counter(), time.process_time()
        call()
        wall[key].append((time.perf_counter() - started) * 1000)
        cpu[key].append((time.process_time() - started_cpu) * 1000)

    for _ in range(rounds):
        for cue in cues:
            words = len(cue.split())
            label = next(label for lo, hi, label in LENGTHS if lo <= words <= hi)
            timed(label, lambda: engine.recall(cue, top_k=10, reinforce=False))
            timed(f"model alone, {label.split()[0]}", lambda: embedder.embed_query(cue))
            if words <= 8:
                timed("similarity alone, short",
                      lambda: engine.recall(cue, top_k=10, reinforce=False, strategies=["similarity"]))
    return {label: {"n": len(v) // rounds, "p50": percentile(v, 50), "p95": percentile(v, 95),
                    "cpu_p50": percentile(cpu[label], 50)} for label, v in wall.items() if v}


def print_lengths(lengths: dict[str, dict[str, float]], vault: str) -> None:
    print(f"default recall latency by cue length ({vault}; top_k 10, query embedding included, reinforce off; "
          "busy shared machine, noisy):")
    for label, row in lengths.items():
        cpu = f"  CPU p50 {row['cpu_p50']:6.1f} ms" if "cpu_p50" in row else ""
        print(f"  {label:<26} n={row['n']:>3}  p50 {row['p50']:6.1f} ms  p95 {row['p95']:6.1f} ms{cpu}")
    short, long_ = lengths.get(LENGTHS[0][2]), lengths.get(LENGTHS[-1][2])
    if short and long_:
        cpu = f", CPU {long_['cpu_p50'] / short['cpu_p50']:.2f}x" if "cpu_p50" in short else ""
        print(f"  paragraph / short at p50: wall {long_['p50'] / short['p50']:.2f}x{cpu} (goal: at most 2x)")
    model_short, model_long = lengths.get("model alone, short"), lengths.get("model alone, paragraph")
    if model_short and model_long:
        print(f"  the model alone, paragraph / short at p50: wall {model_long['p50'] / model_short['p50']:.2f}x, "
              f"CPU {model_long['cpu_p50'] / model_short['cpu_p50']:.2f}x")


def print_latency(timings: dict) -> None:
    print(f"default recall latency on {timings['memories']} memories (CISI vault; query embedding included, "
          "reinforce off; busy shared machine, noisy):")
    for k in (10, 50, 100):
        print(f"  top_k {k:>3}: p50 {timings[k]['p50']:6.1f} ms  p95 {timings[k]['p95']:6.1f} ms  "
              f"CPU p50 {timings[k]['cpu_p50']:6.1f} ms")
    print(f"  ratio top_k 100 / top_k 10: wall p50 {timings[100]['p50'] / timings[10]['p50']:.2f}x, "
          f"CPU p50 {timings[100]['cpu_p50'] / timings[10]['cpu_p50']:.2f}x")


def evaluate(collection: str, texts: Texts, queries: Queries, extra: dict[str, dict] | None = None,
             timings: dict | None = None) -> list[dict]:
    """Every configuration on a fresh vault of `texts`; `extra` adds named recall keyword sets to try,
    `timings` (when given) receives the latency figures."""
    with tempfile.TemporaryDirectory(prefix=f"hebbs-{collection}-") as tmp, Engine.open(Path(tmp) / "vault") as engine:
        started = time.perf_counter()
        doc_of = build(engine, texts)
        print(f"{collection}: {len(texts)} documents remembered in {time.perf_counter() - started:.1f} s (busy machine), "
              f"{len(queries)} judged queries", file=sys.stderr)
        tables = [score("hebbs default", hebbs_rankings(engine, doc_of, queries), queries)]
        for name, kw in (extra or {}).items():
            tables.append(score(name, hebbs_rankings(engine, doc_of, queries, **kw), queries))
        for name, ranked in baseline_rankings(engine, texts, queries).items():
            tables.append(score(name, ranked, queries))
        if timings is not None:
            timings.update(latency(engine, queries))
            timings["memories"] = engine.count()
            timings["lengths"] = latency_by_length(engine, queries)
    return tables
