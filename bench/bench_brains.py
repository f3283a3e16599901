"""Both brains at once: does the merged recall keep the right brain's answers on top?

Each LoCoMo dev conversation (../shared/data/locomo-dev) becomes a vault of its own. Every
non-adversarial question of conversation i is asked over two brains: the vault of i (which holds the
evidence) and the vault of the next conversation (different people and events, so nothing there is
relevant). Both directions are run: the evidence in the brain asked first ("project") and in the
one asked second ("global"). Printed, all measured in this run on the same vaults:

- `one vault`: recall on the vault that holds the answer alone (the ceiling: the caller knew where to look);
- `hebbs merge`: hebbs/recall/brains.py, as the daemon runs it for `recall --both`;
- `raw scores`: the union ordered by each vault's own score (what merging without making scores comparable gives);
- `interleave`: one from each vault in turn (rank fusion across vaults);

with evidence recall@10, hit@10, and `intrusion`: the share of the top 10 taken by the brain that
knows nothing. Also the time of one merged recall (two recalls and the merge) against one
single-vault recall, in-process, p50.

    .venv/bin/python -m bench.bench_brains [--data ../shared/data/locomo-dev] [--limit N]

The data is CC BY-NC and evaluation-only: it is read from shared/, never copied into the package.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from bench.datasets.locomo import load
from bench.harness import shared

from hebbs import Engine, ScoringWeights
from hebbs.recall.brains import GLOBAL, PROJECT, VaultRecall, merge_recall
from hebbs.schema import RecallResult, RecallResults

K = 10
WEIGHTS = ScoringWeights()
Merge = Callable[[list[VaultRecall]], list[RecallResult]]


def raw_scores(answers: list[VaultRecall]) -> list[RecallResult]:
    return sorted((r for a in answers for r in a.found.results), key=lambda r: r.score, reverse=True)[:K]


def interleave(answers: list[VaultRecall]) -> list[RecallResult]:
    out: list[RecallResult] = []
    for rank in range(K):
        for a in answers:
            if rank < len(a.found.results):
                out.append(a.found.results[rank])
    return out[:K]


def hebbs_merge(answers: list[VaultRecall]) -> list[RecallResult]:
    return merge_recall(answers, WEIGHTS, K).results


MERGES: dict[str, Merge] = {"hebbs merge": hebbs_merge, "raw scores": raw_scores, "interleave": interleave}


def recall(engine: Engine, cue: str) -> RecallResults:
    return engine.recall(cue, top_k=K, reinforce=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=shared("data/locomo-dev"))
    parser.add_argument("--limit", type=int, help="at most this many questions per conversation")
    args = parser.parse_args()
    conversations = load(args.data)
    rows: dict[str, dict[str, list[float]]] = {}
    single_ms: list[float] = []
    merged_ms: list[float] = []
    with tempfile.TemporaryDirectory(prefix="hebbs-brains-") as tmp:
        engines: list[Engine] = []
        dia_of: dict[str, str] = {}
        started = time.perf_counter()
        for conv in conversations:
            engine = Engine.open(Path(tmp) / conv["name"])
            memories = engine.remember_many([{"content": t["text"], "created_at": t["created_at"]}
                                             for t in conv["turns"]])
            dia_of.update({m.id: t["dia_id"] for m, t in zip(memories, conv["turns"])})
            engines.append(engine)
        print(f"{len(conversations)} vaults, {sum(len(c['turns']) for c in conversations)} turns, "
              f"remembered in {time.perf_counter() - started:.1f} s")
        try:
            for i, conv in enumerate(conversations):
                knowing, other = engines[i], engines[(i + 1) % len(engines)]
                for q in conv["questions"][:args.limit]:
                    evidence = set(q["evidence"])
                    t0 = time.perf_counter()
                    own = recall(knowing, q["question"])
                    single_ms.append((time.perf_counter() - t0) * 1000)
                    t0 = time.perf_counter()
                    noise = recall(other, q["question"])
                    hebbs_merge([VaultRecall(PROJECT, "knowing", own), VaultRecall(GLOBAL, "other", noise)])
                    merged_ms.append((time.perf_counter() - t0) * 1000 + single_ms[-1])
                    noise_ids = {r.memory.id for r in noise.results}
                    for where in (PROJECT, GLOBAL):
                        elsewhere = GLOBAL if where == PROJECT else PROJECT
                        pair = [VaultRecall(where, "knowing", own), VaultRecall(elsewhere, "other", noise)]
                        if where == GLOBAL:
                            pair.reverse()  # the brain asked first is the one that knows nothing
                        runs = {"one vault": own.results[:K]} | {name: merge(pair) for name, merge in MERGES.items()}
                        for name, results in runs.items():
                            got = [dia_of.get(r.memory.id) for r in results]
                            row = rows.setdefault(f"{name:<14} answer in {where}", {})
                            row.setdefault("recall@10", []).append(len(evidence & set(got)) / len(evidence))
                            row.setdefault("hit@10", []).append(float(bool(evidence & set(got))))
                            intruders = sum(r.memory.id in noise_ids for r in results)
                            row.setdefault("intrusion", []).append(intruders / K)
        finally:
            for engine in engines:
                engine.close()
    n = len(next(iter(rows.values()))["hit@10"])
    print(f"{n} questions, each asked with the answer in either brain; top {K}\n")
    print(f"{'configuration':<36} {'recall@10':>9} {'hit@10':>7} {'intrusion':>9}")
    for name in sorted(rows, key=lambda r: (r.split(" answer in ")[1], r)):
        m = {k: statistics.fmean(v) for k, v in rows[name].items()}
        print(f"{name:<36} {m['recall@10']:>9.3f} {m['hit@10']:>7.3f} {m['intrusion']:>9.3f}")
    single_ms.sort()
    merged_ms.sort()
    print(f"\none-vault recall p50 {single_ms[len(single_ms) // 2]:.1f} ms; both brains (two recalls, "
          f"merge) p50 {merged_ms[len(merged_ms) // 2]:.1f} ms; in-process, sequential (the daemon runs "
          f"the two recalls concurrently)")


if __name__ == "__main__":
    main()
