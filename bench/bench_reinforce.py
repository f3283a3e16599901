"""Does serving recalls make later recall worse? LoCoMo dev, every question asked in order.

Each conversation is its own vault (every turn a memory). Three copies of it answer every question
(categories 1-4) at top_k=10:
- served:    in order, the default recall (reinforce=False): question n sees a store that served 1..n-1;
- fresh:     in reverse order, so question n sees a store that served n+1..N and the first question
             asked of it (the last one) a store that served nothing: if recall changed any state that
             ranking reads, the two would differ;
- reinforced: in order with reinforce=True, the behaviour before issue 11.
Printed: evidence recall@10 of each, how many questions got the identical top 10 with identical
scores in served and fresh, and whether any memory record changed in the served store.

    .venv/bin/python -m bench.bench_reinforce [--workdir DIR]   # DIR: vaults of bench_abstention.py --workdir
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from bench.datasets.locomo import load
from bench.harness import shared
from bench.workloads.answer_vaults import build_vaults

from hebbs import Engine



def ask(vault: Path, questions: list[dict], reinforce: bool) -> list[tuple[list[str], list[float]]]:
    with Engine.open(vault) as engine:
        out = []
        for q in questions:
            found = engine.recall(q["question"], top_k=10, reinforce=reinforce)
            out.append((found.ids(), [r.score for r in found]))
        return out


def records(vault: Path) -> dict[str, tuple[int, int, float]]:
    with Engine.open(vault) as engine:
        return {m.id: (m.access_count, m.last_accessed_at, m.decay_score) for m in engine.memories()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=shared("data/locomo-dev"))
    parser.add_argument("--workdir", type=Path, help="vaults built by bench_abstention.py --workdir (else built here)")
    args = parser.parse_args()
    conversations = load(args.data)
    with tempfile.TemporaryDirectory(prefix="hebbs-reinforce-") as tmp:
        workdir = args.workdir
        if workdir is None:
            workdir = Path(tmp) / "vaults"
            raws = {p.stem: json.loads(p.read_text()) for p in sorted(args.data.glob("*.json"))}
            build_vaults(workdir, conversations, raws)
        recall_at = {"served": [], "fresh": [], "reinforced": []}
        identical = total = changed = 0
        started = time.perf_counter()
        for conv in conversations:
            source = workdir / f"locomo-{conv['name']}"
            copies = {name: Path(tmp) / f"{name}-{conv['name']}" for name in recall_at}
            for path in copies.values():
                shutil.copytree(source, path)
            before = records(copies["served"])
            questions = conv["questions"]
            served = ask(copies["served"], questions, reinforce=False)
            fresh = list(reversed(ask(copies["fresh"], list(reversed(questions)), reinforce=False)))
            reinforced = ask(copies["reinforced"], questions, reinforce=True)
            changed += sum(1 for mid, rec in records(copies["served"]).items() if before.get(mid) != rec)
            dia = {}
            with Engine.open(source) as engine:
                text_to_dia = {t["text"]: t["dia_id"] for t in conv["turns"]}
                dia = {m.id: text_to_dia[m.content] for m in engine.memories()}
            for q, s, f, r in zip(questions, served, fresh, reinforced):
                evidence = set(q["evidence"])
                for name, (ids, _) in (("served", s), ("fresh", f), ("reinforced", r)):
                    recall_at[name].append(len(evidence & {dia[i] for i in ids}) / len(evidence))
                identical += s == f
                total += 1
        print(f"{total} questions over {len(conversations)} conversations in {time.perf_counter() - started:.0f} s "
              f"(busy shared machine)")
        for name, values in recall_at.items():
            print(f"  recall@10 {name:<11} {statistics.fmean(values):.4f}")
        print(f"  served vs fresh: identical ids and scores for {identical}/{total} questions; "
              f"memory records changed by the default recall: {changed}")
        loss = statistics.fmean(recall_at["fresh"]) - statistics.fmean(recall_at["served"])
        old_loss = statistics.fmean(recall_at["fresh"]) - statistics.fmean(recall_at["reinforced"])
        print(f"  loss from serving: default {loss:+.4f}; with reinforce=True (the old default) {old_loss:+.4f}")


if __name__ == "__main__":
    main()
