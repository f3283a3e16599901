"""Recall quality on LoCoMo (../shared/data/locomo-dev): evidence recall@5/@10/@20 and hit@10.

Every turn becomes a memory (entity = conversation, created_at = its session's date); every
non-adversarial question (category 5 left out) is a cue recalled within its conversation. Printed,
all measured in this run over the same vault: hebbs' default recall, similarity alone, lexical
alone, plain RRF (k=60) of the two, and fusion without MMR, overall and per category, plus query
latency p50/p95.

    .venv/bin/python -m bench.bench_locomo [--data ../shared/data/locomo-dev] [--json out.json]

The data is CC BY-NC and evaluation-only: it is read from shared/, never copied into the package.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Callable

from bench.baselines import rrf
from bench.harness import percentile, shared
from hebbs import Engine, ScoringWeights

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
KS = (5, 10, 20)
RELEVANCE_ONLY = ScoringWeights(relevance=1.0, recency=0.0, importance=0.0, reinforcement=0.0)


def session_time(text: str) -> dt.datetime:
    # e.g. "1:56 pm on 8 May, 2023"
    return dt.datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=dt.timezone.utc)


def turn_text(turn: dict) -> str:
    text = f"{turn['speaker']}: {turn['text']}"
    if turn.get("blip_caption"):
        text += f" [shared a photo: {turn['blip_caption']}]"
    return text


def load(data_dir: Path) -> list[dict]:
    conversations = []
    for path in sorted(data_dir.glob("*.json")):
        raw = json.loads(path.read_text())
        turns = []
        n = 1
        while f"session_{n}" in raw:
            when = session_time(raw[f"session_{n}_date_time"])
            for i, turn in enumerate(raw[f"session_{n}"]):
                # Turns of one session keep their order: a microsecond apart.
                turns.append({"dia_id": turn["dia_id"], "text": turn_text(turn),
                              "created_at": when + dt.timedelta(microseconds=i)})
            n += 1
        questions = [q for q in raw["qa"] if q.get("category") != 5 and q.get("evidence")]
        conversations.append({"name": path.stem, "turns": turns, "questions": questions})
    return conversations


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=shared("data/locomo-dev"))
    parser.add_argument("--json", type=Path, help="also write the tables here")
    parser.add_argument("--only", action="append", help="run only these configurations")
    parser.add_argument("--mmr", type=float, action="append", default=[],
                        help="also evaluate fusion with this MMR lambda (repeatable)")
    args = parser.parse_args()
    conversations = load(args.data)
    print(f"{sum(len(c['turns']) for c in conversations)} turns, "
          f"{sum(len(c['questions']) for c in conversations)} questions in {len(conversations)} conversations")
    with tempfile.TemporaryDirectory(prefix="hebbs-locomo-") as tmp, Engine.open(Path(tmp) / "vault") as engine:
        started = time.perf_counter()
        dia_of = build(engine, conversations)
        print(f"remembered in {time.perf_counter() - started:.1f} s")
        tables = [evaluate(name, conversations, dia_of, search)
                  for name, search in configurations(engine, args.mmr).items()
                  if not args.only or name in args.only or name.startswith("fusion, MMR")]
    print_table(tables)
    if args.json:
        args.json.write_text(json.dumps(tables, indent=2))


if __name__ == "__main__":
    main()
