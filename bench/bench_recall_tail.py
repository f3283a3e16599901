"""What the slowest similarity-only recalls pay for: each cue's recall taken apart stage by stage, beside
the same cue embedded alone, over several rounds of the same cues.

    .venv/bin/python -m bench.bench_e2e --workdir /tmp/hebbs-e2e --cues 20   # once: builds the vault
    .venv/bin/python -m bench.bench_recall_tail --workdir /tmp/hebbs-e2e [--cues 400] [--rounds 3]

On bench_e2e's vault (its --workdir, reused), in process, BLAS at one thread and what is loaded frozen
out of the collector's sight as in bench_e2e, the cue session pinned. Each cue is embedded alone (the
floor's embedding, back to back) and recalled with `strategies=["similarity"]` and relevance-only
weights, in blocks of --block cues alternating between the two; every round runs all the cues again.
For each recall the wall time of each stage is kept, and what else the cue carries (its tokens,
whether its rest is embedded in the same run, a collector pass). The same recalls with the cue's texts
tokenized through the tokenizer's batch call, as before embedding/embed.py's ONE_BY_ONE, run in blocks
of their own between them. Printed: the percentiles of both, the
mean stage breakdown of the median recalls against the slowest 1% and 2%, and whether the slow ones
are the same cues round after round (a cost the cue brings) or not (the machine's).
"""

from __future__ import annotations

import gc
import statistics
import time
from typing import Any

import hebbs.offline  # noqa: F401 - before onnxruntime: keeps its telemetry off
from bench import harness
from bench.workloads.e2e import RELEVANCE_ONLY, TOP_K, e2e_arguments, open_built
from hebbs.recall import background, confidence, pipeline
from hebbs.embedding import embed as embed_module
from hebbs.workflows import reinforce

# (owner, attribute, label): the stages of a similarity-only recall, each called through its module or class.
STAGES = [
    (pipeline, "plan", "plan"),
    (confidence, "read_cue", "read the cue's words"),
    (embed_module, "_encode", "tokenize"),
    (embed_module.Embedder, "_run", "onnxruntime run + pooling"),
    (background, "nearest", "HNSW search"),
    (pipeline, "rank", "ranking + records"),
    (pipeline, "judge_confidence", "confidence"),
    (reinforce, "record_recall", "query log"),
]
OTHER = "the rest"


def main() -> None:
    args = e2e_arguments(__doc__.splitlines()[0], cues=400, block=10, rounds=3)
    engine, cues = open_built(args)
    embedder = engine.embedder
    embedder.cue_session_policy = "always"
    embedder.embed_query("warm up")
    print(f"{len(cues)} cues x {args.rounds} rounds on {args.workdir / 'vault'} ({engine.count():,} memories); "
          f"{harness.machine_note()}")

    def recall(cue: str) -> Any:
        return engine.recall(cue, strategies=["similarity"], weights=RELEVANCE_ONLY, top_k=TOP_K)

    for cue in cues[:3]:
        embedder.embed_query(cue)
        recall(cue)
    tokens = dict(zip(cues, embedder.count_tokens([embedder.query_prompt + c for c in cues])))
    doc_freqs = engine.vault.lexical_index.doc_freqs
    paired = {cue for cue in cues if confidence.read_cue(cue, embedder.word_ranks(), doc_freqs).rest_to_embed}
    stages = harness.Stages()
    for owner, name, label in STAGES:
        stages.wrap(owner, name, label)
    gc.freeze()
    collected = [0]
    gc.callbacks.append(lambda phase, info: collected.__setitem__(0, collected[0] + (phase == "start")))

    alone: list[float] = []
    batched: list[float] = []  # the same recall with every text tokenized through the batch call (before)
    rows: list[dict[str, Any]] = []  # one per recall: cue, round, wall, stages, collector passes
    one_by_one = embed_module.ONE_BY_ONE
    for round_ in range(args.rounds):
        for start in range(0, len(cues), args.block):
            block = cues[start:start + args.block]
            time.sleep(0.02)
            for cue in block:
                began = time.perf_counter()
                embedder.embed_query(cue)
                alone.append((time.perf_counter() - began) * 1000)
            time.sleep(0.02)
            embed_module.ONE_BY_ONE = 0
            for cue in block:
                began = time.perf_counter()
                recall(cue)
                batched.append((time.perf_counter() - began) * 1000)
            embed_module.ONE_BY_ONE = one_by_one
            time.sleep(0.02)
            for cue in block:
                stages.spent, stages.on, passes = {}, True, collected[0]
                began = time.perf_counter()
                recall(cue)
                wall = (time.perf_counter() - began) * 1000
                stages.on = False
                spent_ms = {label: w * 1000 for label, (w, _, _) in stages.spent.items()}
                rows.append({"cue": cue, "round": round_, "wall": wall, "stages": spent_ms,
                             "gc": collected[0] - passes})

    walls = [r["wall"] for r in rows]
    print("\n| | p50 ms | p90 | p98 | p99 | max |")
    print("|---|---|---|---|---|---|")
    for label, values in (("the cue embedded alone", alone), ("similarity-only recall", walls),
                          ("the same, its texts tokenized through the batch call (before)", batched)):
        print(f"| {label} | " + " | ".join(f"{harness.percentile(values, q):.2f}" for q in (50, 90, 98, 99))
              + f" | {max(values):.2f} |")

    ordered = sorted(rows, key=lambda r: r["wall"])
    n = len(ordered)
    groups = {"the middle 20% (p40-p60)": ordered[int(n * 0.4):int(n * 0.6)],
              "the slowest 2%": ordered[n - max(1, n // 50):], "the slowest 1%": ordered[n - max(1, n // 100):]}
    labels = [label for _, _, label in STAGES] + [OTHER]

    def stage(row: dict[str, Any], label: str) -> float:
        if label == OTHER:
            # None of the stages runs inside another (the cue is embedded before the search is called).
            return row["wall"] - sum(row["stages"].values())
        return row["stages"].get(label, 0.0)

    print("\nmean wall ms per recall, by stage")
    print("| stage | " + " | ".join(groups) + " |")
    print("|---|" + "---|" * len(groups))
    for label in labels:
        print(f"| {label} | " + " | ".join(f"{statistics.fmean(stage(r, label) for r in g):.3f}"
                                           for g in groups.values()) + " |")
    print("| whole recall | " + " | ".join(f"{statistics.fmean(r['wall'] for r in g):.3f}" for g in groups.values())
          + " |")
    print("| tokens in the cue | " + " | ".join(f"{statistics.fmean(tokens[r['cue']] for r in g):.1f}"
                                                for g in groups.values()) + " |")
    print("| share whose rest is embedded too | " + " | ".join(
        f"{sum(r['cue'] in paired for r in g) / len(g):.0%}" for g in groups.values()) + " |")
    print("| share with a collector pass | " + " | ".join(
        f"{sum(r['gc'] > 0 for r in g) / len(g):.0%}" for g in groups.values()) + " |")

    slow = groups["the slowest 2%"]
    by_cue: dict[str, list[float]] = {}
    for r in rows:
        by_cue.setdefault(r["cue"], []).append(r["wall"])
    p50 = harness.percentile(walls, 50)
    again = [r for r in slow if min(by_cue[r["cue"]]) > 1.5 * p50]
    print(f"\nthe slowest 2% ({len(slow)} recalls of {len({r['cue'] for r in slow})} cues): {len(again)} of them "
          f"are cues above 1.5x the p50 in every one of the {args.rounds} rounds (a cost the cue brings); the "
          f"others were slow once (the machine's)")
    for r in sorted(slow, key=lambda r: -r["wall"])[:12]:
        top = max(labels[:-1], key=lambda lab: stage(r, lab))
        print(f"  {r['wall']:6.2f} ms, round {r['round']}, {tokens[r['cue']]} tokens"
              f"{', rest paired' if r['cue'] in paired else ''}{', collector' if r['gc'] else ''}; "
              f"its rounds {', '.join(f'{w:.2f}' for w in by_cue[r['cue']])}; most in {top} "
              f"({stage(r, top):.2f}), the rest {stage(r, OTHER):.2f}: {r['cue'][:60]!r}")
    engine.close()
    print(f"\n{harness.machine_note()} at the end")


if __name__ == "__main__":
    main()
