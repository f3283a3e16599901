"""Association by use on LoCoMo dev (../shared/data/locomo-dev, read at run time, never copied).

Replay: every turn is remembered (entity = conversation); for the first half of each conversation's
questions, recall the question and then `reinforce` its evidence turns, as an agent calls `hebbs used`
for what its answer relied on. That links the turns used together (CO_ACTIVATED). Then, on the second
half of the questions: evidence recall@10 with associate off vs on, and the share of top-10 slots
taken by the ten most-connected memories of the vault (hub bias), off vs on.

    .venv/bin/python -m bench.bench_association [--data ../shared/data/locomo-dev]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

from bench.datasets.locomo import load
from bench.harness import shared

from hebbs import Engine
from hebbs.schema import EdgeType


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", type=Path, default=shared("data/locomo-dev"))
    # The first halves hold 378 questions: two passes make 756 recall-and-use steps (a memory used
    # again for the same question, as an agent asked twice would).
    parser.add_argument("--passes", type=int, default=2)
    args = parser.parse_args()
    convs = load(args.data)
    with tempfile.TemporaryDirectory() as tmp:
        engine = Engine.open(Path(tmp) / "v")
        id_of: dict[tuple[str, str], str] = {}
        dia_of: dict[str, str] = {}
        for conv in convs:
            memories = engine.remember_many([{"content": t["text"], "entity_id": conv["name"],
                                              "created_at": t["created_at"]} for t in conv["turns"]],
                                            consolidate=False, check_contradictions=False)
            for memory, turn in zip(memories, conv["turns"]):
                id_of[(conv["name"], turn["dia_id"])] = memory.id
                dia_of[memory.id] = turn["dia_id"]
        steps = 0
        held_out = []
        for conv, _ in ((c, p) for p in range(args.passes) for c in convs):
            half = len(conv["questions"]) // 2
            for q in conv["questions"][:half]:
                engine.recall(q["question"], entity_id=conv["name"], top_k=10)
                used = [id_of[(conv["name"], d)] for d in q["evidence"] if (conv["name"], d) in id_of]
                if used:
                    engine.reinforce(used)
                    steps += 1
            if _ == 0:
                held_out += [(conv["name"], q) for q in conv["questions"][half:]]
        degree = {mid: sum(1 for t, *_ in engine.vault.store.edges_from(mid) if t == EdgeType.CO_ACTIVATED)
                  for mid in dia_of}
        linked = sum(1 for d in degree.values() if d)
        hubs = set(sorted(degree, key=degree.get, reverse=True)[:10])
        print(f"replay: {steps} recall-and-use steps; {linked} memories linked; "
              f"top-10 degrees {sorted(degree.values(), reverse=True)[:10]}")
        per_question: dict[bool, list[float]] = {}
        partners_seen = partners_right = missed = reachable = 0
        for associate in (False, True):
            scores, hub_slots, slots, brought, brought_right = [], 0, 0, 0, 0
            for name, q in held_out:
                found = engine.recall(q["question"], entity_id=name, top_k=10, associate=associate)
                ids = found.ids()
                if not associate:
                    # What one hop could bring at best: the co-activation partners of the direct top 10.
                    evidence = {id_of[(name, d)] for d in q["evidence"] if (name, d) in id_of}
                    partners = {other for i in ids for t, other, *_ in engine.vault.store.edges_from(i)
                                if t == EdgeType.CO_ACTIVATED} - set(ids)
                    partners_seen += len(partners)
                    partners_right += len(partners & evidence)
                    missed += len(evidence - set(ids))
                    reachable += len((evidence - set(ids)) & partners)
                got = {dia_of[i] for i in ids if i in dia_of}
                scores.append(len(set(q["evidence"]) & got) / len(q["evidence"]))
                hub_slots += sum(1 for i in ids if i in hubs)
                slots += len(ids)
                alone = [r.memory.id for r in found if r.strategies == ["associative"]]
                brought += len(alone)
                brought_right += sum(1 for i in alone if dia_of.get(i) in q["evidence"])
            per_question[associate] = scores
            print(f"associate {'on ' if associate else 'off'}: held-out questions {len(scores)}, "
                  f"recall@10 {statistics.fmean(scores):.4f}, hub share of top-10 slots {hub_slots / slots:.4f}, "
                  f"results brought by association alone {brought} (evidence {brought_right})")
            if not associate:
                print(f"  one hop from the direct top 10: {partners_seen} partners, {partners_right} of them evidence; "
                      f"evidence missed {missed}, of it a partner {reachable}")
        gained = sum(on > off for off, on in zip(per_question[False], per_question[True]))
        lost = sum(on < off for off, on in zip(per_question[False], per_question[True]))
        print(f"association on vs off: {gained} held-out questions gained evidence in the top 10, {lost} lost some")
        engine.close()


if __name__ == "__main__":
    main()
