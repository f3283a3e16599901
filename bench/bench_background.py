"""Before and after issue 28's two changes under recall, on the same vaults and cues in one process:
quality, confidence and abstention must hold.

- the stored copy of each vector is float16 (was float32); the HNSW index keeps float32;
- similarity-only recall takes its answers and its confidence background from one search at the
  index's ef (was a 70-deep search at ef 70: hebbs/recall/background.py).

Three readings of each vault: "before" (float32 copies, the 70-deep search), "float16 only" (float16
copies, the 70-deep search) and "now". The float32 copies are put back from the index's own vectors,
so the vault, its memories and its graph are the same in all three.

    .venv/bin/python -m bench.bench_background [--conversations 26 30] [--cisi-docs 1460]

Vaults: one per LoCoMo conversation (../shared/data/locomo-dev), no entity filter (the scope a
similarity-only recall searches unfiltered); answerable cues are the conversation's own questions
(categories 1-4), unanswerable ones the other conversation's. And CISI (../shared/data/cisi), its 76
judged queries. Printed per vault and reading: default and similarity-only recall's quality (LoCoMo
evidence hit@10, CISI nDCG@10), abstention on answerable and unanswerable cues, how many top-10 lists
are the same as before, and the largest change of a result's confidence.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench import baselines as bl
from bench import harness, report
from bench.datasets.cisi import load as load_cisi
from bench.datasets.locomo import load as load_locomo
from hebbs import Engine, ScoringWeights
from hebbs.recall import background
from hebbs.store.storage import WriteSet, encode_vector, vector_key

RELEVANCE_ONLY = ScoringWeights(relevance=1.0, recency=0.0, importance=0.0, reinforcement=0.0)
READINGS = ("before", "float16 only", "now")


def stored_as(engine: Engine, ids: list[str], form: str) -> None:
    """Every stored vector in one form ("<f4" as vaults wrote before, or float16), from the index."""
    vault = engine.vault
    vectors = vault.vector_index.vectors(ids)
    writes = WriteSet()
    for memory_id, vector in zip(ids, vectors):
        writes.put("vectors", vector_key(memory_id), vector.astype("<f4").tobytes() if form == "<f4"
                   else encode_vector(vector))
    with vault.write_lock:
        vault.apply(writes)


@contextlib.contextmanager
def old_search() -> Iterator[None]:
    """Similarity-only recall as before: the 70-deep search fusion makes (OpenVault.similar's margin)."""
    kept = background.nearest

    def seventy_deep(vault: Any, vector: Any, top_k: int, allowed: Any) -> Any:
        return vault.similar(vector, max(50, top_k), allowed, narrow=False)

    background.nearest = seventy_deep
    try:
        yield
    finally:
        background.nearest = kept


def answers(engine: Engine, cues: list[str], **kw: Any) -> list[Any]:
    return [engine.recall(cue, top_k=10, **kw) for cue in cues]


def read(engine: Engine, ids: list[str], reading: str, cues: list[str]) -> dict[str, list[Any]]:
    stored_as(engine, ids, "<f4" if reading == "before" else "f2")
    with old_search() if reading != "now" else contextlib.nullcontext():
        return {"default": answers(engine, cues), "similarity": answers(engine, cues, strategies=["similarity"],
                                                                        weights=RELEVANCE_ONLY)}


def compare(name: str, runs: dict[str, dict[str, list[Any]]], quality: Any, answerable: int) -> None:
    for kind in ("default", "similarity"):
        base = runs["before"][kind]
        for reading in READINGS:
            got = runs[reading][kind]
            same = sum(a.ids() == b.ids() for a, b in zip(base, got))
            delta = max((abs(x.confidence - y.confidence) for a, b in zip(base, got) if a.ids() == b.ids()
                         for x, y in zip(a.results, b.results)), default=0.0)
            flips = sum(a.abstained != b.abstained for a, b in zip(base, got))
            yes = [a.abstained for a in got[:answerable]]
            no = [a.abstained for a in got[answerable:]]
            print(f"| {name} | {kind} | {reading} | {quality(got[:answerable]):.3f} | "
                  f"{statistics.fmean(yes):.3f} | {statistics.fmean(no) if no else float('nan'):.3f} | "
                  f"{same}/{len(got)} | {flips} | {delta:.4f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", nargs="*", default=["26", "30"])
    parser.add_argument("--cisi-docs", type=int, default=1460)
    args = parser.parse_args()
    print(f"{harness.machine_note()} (shared machine)")
    report.markdown_header("vault", "recall", "reading", "quality", "abstains, answerable", "abstains, unanswerable",
                           "top 10 as before", "abstention flips", "largest confidence change")
    conversations = {c["name"]: c for c in load_locomo(harness.shared("data/locomo-dev"))}
    chosen = [conversations[name] for name in args.conversations]
    with tempfile.TemporaryDirectory(prefix="hebbs-background-") as tmp:
        for conv in chosen:
            others = [q["question"] for c in chosen if c is not conv for q in c["questions"]]
            with Engine.open(Path(tmp) / conv["name"]) as engine:
                memories = engine.remember_many([{"content": t["text"], "created_at": t["created_at"]}
                                                 for t in conv["turns"]], check_contradictions=False)
                ids = list(dict.fromkeys(m.id for m in memories))
                dia = {m.id: t["dia_id"] for m, t in zip(memories, conv["turns"])}
                own = conv["questions"]
                cues = [q["question"] for q in own] + others
                runs = {reading: read(engine, ids, reading, cues) for reading in READINGS}

                def hit10(got: list[Any]) -> float:
                    return statistics.fmean(float(bool(set(q["evidence"]) & {dia.get(i) for i in a.ids()}))
                                            for q, a in zip(own, got))
                compare(f"LoCoMo {conv['name']} (hit@10)", runs, hit10, len(own))
        texts, queries = load_cisi(harness.shared("data/cisi"))
        texts = texts[:args.cisi_docs]
        with Engine.open(Path(tmp) / "cisi") as engine:
            memories = engine.remember_many([{"content": t} for _, t in texts], check_contradictions=False)
            doc_of = {m.id: doc for m, (doc, _) in zip(memories, texts)}
            ids = list(doc_of)
            cues = [q for _, q, _ in queries]
            runs = {reading: read(engine, ids, reading, cues) for reading in READINGS}

            def ndcg10(got: list[Any]) -> float:
                return statistics.fmean(bl.ndcg_at([doc_of[i] for i in a.ids()], q[2], 10)
                                        for a, q in zip(got, queries))
            compare("CISI (nDCG@10)", runs, ndcg10, len(queries))
    print(f"{harness.machine_note()} at the end")


if __name__ == "__main__":
    main()
