"""Reflection benchmark: reflect_prepare over 500 memories, and what the remember-time contradiction check costs.

    .venv/bin/python -m bench.bench_reflect [--n 500] [--runs 3] [--seed 0]

The memories are generated from a dozen topics, each with its own subjects, events and details,
so the corpus has real cluster structure and real embeddings (the vault's ONNX model). Printed:
remember_many of the corpus, the remember-time contradiction check on it alone, then reflect_prepare (first
call separately: it imports scikit-learn), its clusters and silhouette, and per-stage timings.
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from pathlib import Path

TOPICS: dict[str, tuple[list[str], list[str], list[str]]] = {
    "deploys": (["the deploy pipeline", "the staging rollout", "the canary release", "the nightly build"],
                ["failed after", "was rolled back after", "passed after", "was delayed by"],
                ["a Docker image timeout", "a wrong Kubernetes tag", "a flaky integration test", "two approvals"]),
    "billing": (["the billing service", "the invoice run", "the Stripe webhook", "the refund job"],
                ["double-charged customers after", "was fixed after", "slowed down during", "was audited for"],
                ["a currency rounding bug", "the tax table update", "the month-end close", "a retry storm"]),
    "baking": (["Carol's sourdough", "the rye loaf", "the croissant dough", "the bakery's baguette"],
               ["came out dense after", "rose well after", "tasted sour after", "got a crisp crust after"],
               ["a cold overnight proof", "higher hydration", "three butter folds", "baking with steam"]),
    "astronomy": (["the club telescope", "Saturn's rings", "the Andromeda galaxy", "the Perseid shower"],
                  ["was clearly visible", "was hidden by clouds", "was photographed", "was easy to find"],
                  ["from the observatory", "during the new moon", "with binoculars", "after midnight"]),
    "hiring": (["the backend candidate", "the design interview", "the recruiter call", "the offer letter"],
               ["went well with", "was rescheduled with", "stalled with", "was approved by"],
               ["the hiring manager", "the panel", "the VP of engineering", "the candidate's references"]),
    "hiking": (["the ridge trail", "the alpine hut", "the river crossing", "the summit push"],
               ["was muddy after", "was closed because of", "took longer due to", "was stunning after"],
               ["three days of rain", "a rockslide", "fresh snow", "an early start"]),
    "support": (["the support queue", "the escalation from Acme", "the chat widget", "the SLA report"],
                ["grew after", "was cleared after", "angered customers after", "improved after"],
                ["the pricing change", "the outage", "new macros", "weekend staffing"]),
    "database": (["the Postgres primary", "the read replica", "the nightly vacuum", "the schema migration"],
                 ["ran out of disk after", "lagged behind after", "locked tables during", "sped up after"],
                 ["a bloated index", "the bulk import", "the upgrade to version 16", "a missing foreign key"]),
    "gardening": (["the tomato plants", "the herb bed", "the compost heap", "the apple tree"],
                  ["wilted after", "thrived after", "got aphids after", "fruited early after"],
                  ["the heatwave", "mulching", "a late frost", "daily watering"]),
    "travel": (["the flight to Tokyo", "the Berlin hotel", "the train to Amsterdam", "the Lisbon offsite"],
               ["was delayed by", "was booked through", "was cancelled because of", "was cheaper with"],
               ["a strike", "the travel agency", "a storm", "early booking"]),
    "music": (["the band rehearsal", "Bob's guitar solo", "the jazz gig", "the piano lesson"],
              ["sounded tight after", "fell apart during", "was recorded at", "improved with"],
              ["the new drummer", "the sound check", "the studio downtown", "daily scales"]),
    "security": (["the SSO rollout", "the pen test", "the leaked API token", "the firewall rule"],
                 ["found issues in", "was blocked by", "was rotated after", "was approved after"],
                 ["the admin panel", "a misconfigured bucket", "the audit", "the incident review"]),
}
WHEN = ["on Monday", "last week", "yesterday", "this morning", "in March", "before the release", "at the retro",
        "during on-call", "over the weekend", "in the planning meeting"]
NOTES = ["Nobody expected it.", "We should write this down.", "Same as last time.", "Alice raised it first.",
         "Bob disagreed.", "It cost us a day.", "The team was relieved.", "Follow up next sprint.", "", "", ""]


def corpus(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    names = sorted(TOPICS)
    out = []
    for i in range(n):
        subjects, events, details = TOPICS[names[i % len(names)]]
        text = f"{rng.choice(subjects).capitalize()} {rng.choice(events)} {rng.choice(details)} {rng.choice(WHEN)}."
        out.append(f"{text} {rng.choice(NOTES)}".strip())
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=500)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    from hebbs import Engine
    from hebbs.workflows import contradiction_review
    from hebbs.embedding.embed import get_embedder

    embedder = get_embedder()
    texts = corpus(args.n, args.seed)
    embedder.embed(texts[:8])  # warm the model outside every timing
    with tempfile.TemporaryDirectory() as tmp:
        with Engine.open(Path(tmp) / "v", embedder=embedder) as eng:
            started = time.perf_counter()
            memories = eng.remember_many([{"content": t} for t in texts], check_contradictions=False)
            plain = time.perf_counter() - started
            # What remember_many runs after its batches when the check is on, timed alone.
            started = time.perf_counter()
            queued = contradiction_review.queue_for_new(eng, memories)
            check = time.perf_counter() - started
            print(f"remember_many of {args.n} memories: {plain:.2f} s; the contradiction check on them: {check:.2f} s "
                  f"({check / args.n * 1000:.2f} ms per memory, {queued} candidates queued)")

            started = time.perf_counter()
            prepared = eng.reflect_prepare(max_memories=min(args.n, 500))
            first = time.perf_counter() - started
            times = []
            for _ in range(args.runs):
                started = time.perf_counter()
                again = eng.reflect_prepare(max_memories=min(args.n, 500))
                times.append(time.perf_counter() - started)
                assert [[m.id for m in c.memories] for c in again.clusters] == \
                    [[m.id for m in c.memories] for c in prepared.clusters], "clusters changed between calls"
            sizes = [len(c.memories) for c in prepared.clusters]
            print(f"reflect_prepare of {prepared.memory_count} memories: {statistics.median(times):.2f} s "
                  f"(median of {args.runs}; first call {first:.2f} s including the scikit-learn import)")
            print(f"  {len(prepared.clusters)} clusters (silhouette {prepared.silhouette}), sizes {sizes}, "
                  f"{len(prepared.unclustered)} unclustered, largest prompt "
                  f"{max(c.prompt_tokens for c in prepared.clusters)} tokens")
            for c in prepared.clusters[:12]:
                print(f"  cluster {c.index:2d} ({len(c.memories):3d}): {', '.join(c.terms[:6])}")
            _stages(eng)


def _stages(eng: object) -> None:
    """Where the time goes: reading, clustering, the rest (terms, prompts, the session write)."""
    from hebbs.workflows import reflect

    started = time.perf_counter()
    memories, vectors = reflect._collect(eng, None, None, reflect.MAX_MEMORIES)  # type: ignore[arg-type]
    read = time.perf_counter() - started
    started = time.perf_counter()
    reflect.cluster_vectors(vectors)
    clustering = time.perf_counter() - started
    print(f"  stages: read {read * 1000:.0f} ms, cluster (k search) {clustering * 1000:.0f} ms")


if __name__ == "__main__":
    main()
