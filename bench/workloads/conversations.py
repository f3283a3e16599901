"""Recall quality on LoCoMo conversations (bench/datasets/locomo.py): every turn a memory (entity =
conversation, created_at = its session's date), every question a cue recalled within its
conversation; evidence recall@5/@10/@20 and hit@10 per category, for hebbs' default and the
configurations it is compared with in the same run."""

from __future__ import annotations

import statistics
import time
from typing import Callable

from bench.baselines import rrf
from bench.datasets.locomo import CATEGORIES
from bench.harness import percentile
from hebbs import Engine, ScoringWeights


KS = (5, 10, 20)
RELEVANCE_ONLY = ScoringWeights(relevance=1.0, recency=0.0, importance=0.0, reinforcement=0.0)


def build(engine: Engine, conversations: list[dict]) -> dict[str, str]:
    """Remember every turn; returns memory id -> dia_id per conversation-qualified key."""
    dia_of: dict[str, str] = {}
    for conv in conversations:
        memories = engine.remember_many([{"content": t["text"], "entity_id": conv["name"],
                                          "created_at": t["created_at"]} for t in conv["turns"]])
        for memory, turn in zip(memories, conv["turns"]):
            dia_of[memory.id] = turn["dia_id"]
    return dia_of


def evaluate(name: str, conversations: list[dict], dia_of: dict[str, str],
             search: Callable[[str, str, int], list[str]]) -> dict:
    per_cat: dict[str, dict[str, list[float]]] = {}
    latencies: list[float] = []
    for conv in conversations:
        for q in conv["questions"]:
            started = time.perf_counter()
            ids = search(q["question"], conv["name"], max(KS))
            latencies.append((time.perf_counter() - started) * 1000)
            got = [dia_of.get(i) for i in ids]
            evidence = set(q["evidence"])
            row = {f"recall@{k}": len(evidence & set(got[:k])) / len(evidence) for k in KS}
            row["hit@10"] = float(bool(evidence & set(got[:10])))
            for cat in ("overall", CATEGORIES.get(q["category"], str(q["category"]))):
                bucket = per_cat.setdefault(cat, {})
                for metric, value in row.items():
                    bucket.setdefault(metric, []).append(value)
    table = {cat: {m: statistics.fmean(v) for m, v in metrics.items()} | {"n": len(metrics["hit@10"])}
             for cat, metrics in per_cat.items()}
    latencies.sort()
    table["latency_ms"] = {"p50": percentile(latencies, 50), "p95": percentile(latencies, 95)}
    table["name"] = name
    return table


def configurations(engine: Engine, mmr_lambdas: list[float]) -> dict[str, Callable[[str, str, int], list[str]]]:
    def recall_with(**kw) -> Callable[[str, str, int], list[str]]:
        def run(cue: str, entity: str, k: int) -> list[str]:
            return engine.recall(cue, entity_id=entity, top_k=k, reinforce=False, **kw).ids()
        return run

    def plain_rrf(cue: str, entity: str, k: int) -> list[str]:
        depth = 100  # fixed, so the baseline does not move with hebbs' own candidate settings
        sim = engine.recall(cue, entity_id=entity, top_k=depth, strategies=["similarity"], reinforce=False,
                            weights=RELEVANCE_ONLY, mmr_lambda=1.0).ids()
        lex = engine.recall(cue, entity_id=entity, top_k=depth, strategies=["lexical"], reinforce=False,
                            weights=RELEVANCE_ONLY, mmr_lambda=1.0).ids()
        return rrf([sim, lex])[:k]

    return {
        "hebbs default": recall_with(),
        "similarity only": recall_with(strategies=["similarity"]),
        "lexical only": recall_with(strategies=["lexical"]),
        "plain RRF k=60": plain_rrf,
        "fusion, no MMR": recall_with(mmr_lambda=1.0),
    } | {f"fusion, MMR {lam}": recall_with(mmr_lambda=lam) for lam in mmr_lambdas}


def print_table(tables: list[dict]) -> None:
    cats = ["overall"] + list(CATEGORIES.values())
    print(f"\n{'configuration':<18} {'category':<12} {'n':>4} " + " ".join(f"{m:>9}" for m in
          [f"recall@{k}" for k in KS] + ["hit@10"]))
    for table in tables:
        for cat in cats:
            row = table[cat]
            print(f"{table['name']:<18} {cat:<12} {row['n']:>4} " + " ".join(
                f"{row[m]:>9.3f}" for m in [f"recall@{k}" for k in KS] + ["hit@10"]))
        print(f"{table['name']:<18} latency p50 {table['latency_ms']['p50']:.1f} ms, "
              f"p95 {table['latency_ms']['p95']:.1f} ms")
