"""What confidence costs inside recall, and what it decides, on vaults built once and kept.

For each vault (LoCoMo conversations, one vault each; the CISI abstracts; the Hugo notes), every cue
recalled by default and by similarity alone (relevance-only weights), top_k 10, interleaved:

- quality: LoCoMo evidence hit@10 and recall@10, CISI nDCG@10, notes hit@1 and hit@5 by file;
- abstention: the share of answerable cues that abstain (every cue of CISI and the notes; a LoCoMo
  conversation's own questions) and of unanswerable ones (another conversation's questions);
- cost: p50 of each recall, the confidence step's p50 (pipeline.judge_confidence) and its share of
  default recall's time.

Run it with two checkouts on copies of the same vaults to compare (PYTHONPATH=OLD_TREE for the
older one): the vaults are read only (reinforce off; the query log is the only write).

    .venv/bin/python -m bench.bench_confidence_cost --locomo DIR/locomo-41 DIR/locomo-42 \\
        --cisi CISI_VAULT --notes NOTES_FOLDER [--json out.json]

A vault is built by bench_abstention.py (LoCoMo, notes: --workdir) or bench_cisi.py's build; this
bench builds none (building is what a loaded machine cannot afford twice).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

from bench import baselines as bl
from bench import report
from bench.datasets.cisi import DEFAULT_DATA as CISI_DATA
from bench.datasets.cisi import load as load_cisi
from bench.datasets.locomo import load as load_locomo
from bench.datasets.notes import load_questions
from bench.harness import shared
from hebbs import Engine, ScoringWeights
from hebbs.recall import pipeline

RELEVANCE_ONLY = ScoringWeights(relevance=1.0, recency=0.0, importance=0.0, reinforcement=0.0)
_spent: list[float] = []
_judge = pipeline.judge_confidence


def _timed_judge(*args: Any, **kw: Any) -> None:
    started = time.perf_counter()
    _judge(*args, **kw)
    _spent.append(time.perf_counter() - started)


def recall_all(engine: Engine, cues: list[str]) -> dict[str, Any]:
    """Each cue by default and by similarity alone, interleaved; the answers and the timings."""
    out: dict[str, Any] = {"default": [], "similarity": [], "t_default": [], "t_similarity": [], "t_judge": []}
    pipeline.judge_confidence = _timed_judge
    try:
        for cue in cues[:10]:  # warm: the model's first runs, the vault's caches
            engine.recall(cue, reinforce=False)
        for cue in cues:
            _spent.clear()
            started = time.perf_counter()
            out["default"].append(engine.recall(cue, top_k=10, reinforce=False))
            out["t_default"].append(time.perf_counter() - started)
            out["t_judge"].append(sum(_spent))
            started = time.perf_counter()
            out["similarity"].append(engine.recall(cue, top_k=10, reinforce=False, strategies=["similarity"],
                                                   weights=RELEVANCE_ONLY))
            out["t_similarity"].append(time.perf_counter() - started)
    finally:
        pipeline.judge_confidence = _judge
    return out


def summary(name: str, got: dict[str, Any], answerable: int, quality: dict[str, Any]) -> dict[str, Any]:
    row: dict[str, Any] = {"vault": name, "cues": len(got["default"]), "answerable": answerable}
    for kind in ("default", "similarity"):
        answers = got[kind]
        row[f"{kind}_abstained_answerable"] = statistics.fmean(a.abstained for a in answers[:answerable])
        if len(answers) > answerable:
            row[f"{kind}_abstained_unanswerable"] = statistics.fmean(a.abstained for a in answers[answerable:])
        for metric, fn in quality.items():
            row[f"{kind}_{metric}"] = fn(answers[:answerable])
        row[f"{kind}_p50_ms"] = statistics.median(got[f"t_{kind}"]) * 1000
    row["judge_p50_ms"] = statistics.median(got["t_judge"]) * 1000
    row["judge_share"] = sum(got["t_judge"]) / sum(got["t_default"])
    return row


def locomo_rows(paths: list[Path]) -> list[dict[str, Any]]:
    conversations = {c["name"]: c for c in load_locomo(shared("data/locomo-dev"))}
    rows = []
    for path in paths:
        conv = conversations[path.name.split("-")[-1]]
        others = [q["question"] for name, c in conversations.items() if c is not conv
                  and name in {p.name.split("-")[-1] for p in paths} for q in c["questions"]]
        own = conv["questions"]
        with Engine.open(path) as engine:
            by_text = {t["text"]: t["dia_id"] for t in conv["turns"]}
            got = recall_all(engine, [q["question"] for q in own] + others)

        def evidence(answers: list[Any], k: int = 10, all_of: bool = False) -> float:
            scores = []
            for answer, q in zip(answers, own):
                found = {by_text.get(r.memory.content) for r in answer.results[:k]}
                wanted = set(q["evidence"])
                scores.append(len(wanted & found) / len(wanted) if all_of else float(bool(wanted & found)))
            return statistics.fmean(scores)

        rows.append(summary(path.name, got, len(own), {"hit@10": evidence,
                                                      "recall@10": lambda a: evidence(a, all_of=True)}))
    return rows


def cisi_row(path: Path) -> dict[str, Any]:
    texts, queries = load_cisi(CISI_DATA)
    doc_of_text = {t: doc for doc, t in texts}
    with Engine.open(path) as engine:
        got = recall_all(engine, [q for _, q, _ in queries])

    def ndcg(answers: list[Any]) -> float:
        return statistics.fmean(bl.ndcg_at([doc_of_text.get(r.memory.content, "") for r in a.results], q[2], 10)
                                for a, q in zip(answers, queries))

    return summary("CISI", got, len(queries), {"ndcg@10": ndcg})


def notes_row(folder: Path) -> dict[str, Any]:
    questions = load_questions()
    with Engine.open(folder / ".hebbs") as engine:
        got = recall_all(engine, [q["question"] for q in questions])

    def hit(k: int):
        def at(answers: list[Any]) -> float:
            out = []
            for a, q in zip(answers, questions):
                files = [r.memory.source.file_path if r.memory.source else "" for r in a.results[:k]]
                out.append(float(any(f == w or f.endswith("/" + w) for f in files for w in q["answers"])))
            return statistics.fmean(out)
        return at

    return summary("notes", got, len(questions), {"hit@1": hit(1), "hit@5": hit(5)})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--locomo", type=Path, nargs="*", default=[])
    parser.add_argument("--cisi", type=Path)
    parser.add_argument("--notes", type=Path)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    rows = locomo_rows(args.locomo) if args.locomo else []
    if args.cisi:
        rows.append(cisi_row(args.cisi))
    if args.notes:
        rows.append(notes_row(args.notes))
    for row in rows:
        print(json.dumps({k: round(v, 4) if isinstance(v, float) else v for k, v in row.items()}))
    report.write_json(args.json, rows)


if __name__ == "__main__":
    main()
