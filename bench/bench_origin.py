"""Recall filtered by agent or author beside recall filtered by entity (the filter it copies) and unfiltered, in one run.

    .venv/bin/python -m bench.bench_origin [--memories 2000] [--groups 20] [--cues 40] [--rounds 3]

An embedded vault in a temporary folder, `--memories` short memories spread over `--groups` entities,
agents and authors alike (group g holds one in `--groups`), so each filter passes the same share. Each
cue is recalled at top_k 10 unfiltered, by entity, by agent and by author, the four calls interleaved
round after round; it prints each one's wall time (p50, p95) and how many results it returned.
"""

from __future__ import annotations

import argparse
import os
import random
import tempfile
from pathlib import Path

import hebbs.offline  # noqa: F401 - before onnxruntime: keeps its telemetry off
from bench import harness
from hebbs import Engine

TOPICS = ["deploy", "billing", "search", "auth", "cache", "queue", "metrics", "backup", "release", "schema"]
VERBS = ["fails when", "slows down after", "is owned by the team that runs", "was rewritten to avoid",
         "needs a restart after", "logs a warning about"]


def main() -> None:
    parser = argparse.ArgumentParser(prog="bench_origin.py", description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=2000)
    parser.add_argument("--groups", type=int, default=20)
    parser.add_argument("--cues", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    rng = random.Random(7)
    with tempfile.TemporaryDirectory() as folder:
        os.environ["HEBBS_HOME"] = str(Path(folder) / "home")
        with Engine.open(Path(folder) / "vault") as engine:
            for g in range(args.groups):
                os.environ["HEBBS_AUTHOR"] = f"author-{g}"
                engine.remember_many([{"content": f"The {rng.choice(TOPICS)} service {rng.choice(VERBS)} the "
                                                  f"{rng.choice(TOPICS)} job number {n}.",
                                       "entity_id": f"entity-{g}", "agent": f"agent-{g}"}
                                      for n in range(g, args.memories, args.groups)],
                                     consolidate=False, check_contradictions=False)
            cues = [f"why does the {rng.choice(TOPICS)} service {rng.choice(VERBS)} {rng.choice(TOPICS)}"
                    for _ in range(args.cues)]
            for cue in cues:  # embedded once, unmeasured: the rows compare recall's own work
                engine.recall(cue)
            found: dict[str, list[int]] = {}

            def call(label: str, **filters: str):
                def run(i: int) -> None:
                    n = i % len(cues)
                    found.setdefault(label, []).append(len(engine.recall(cues[n], top_k=10, **filters)))
                return run

            group = f"{args.groups // 2}"
            times = harness.interleaved({
                "unfiltered": call("unfiltered"),
                "entity_id (the existing filter)": call("entity_id (the existing filter)", entity_id=f"entity-{group}"),
                "agent": call("agent", agent=f"agent-{group}"),
                "author": call("author", author=f"author-{group}"),
            }, args.cues * args.rounds)
            print(f"{engine.count():,} memories, filters passing 1 in {args.groups}; {args.cues} cues x {args.rounds} "
                  f"rounds; {harness.machine_note()}")
            print(f"{'recall, top_k 10':34} {'p50 ms':>8} {'p95 ms':>8} {'results (min)':>14}")
            for label, ms in times.items():
                s = harness.summary(ms)
                print(f"{label:34} {s['p50']:8.2f} {s['p95']:8.2f} {min(found[label]):14d}")


if __name__ == "__main__":
    main()
