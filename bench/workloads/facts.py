"""Synthetic one-line facts about a team (who did what to which system, when), the cues asked of them,
and a vault filled with them: bench_daemon's and bench_team's workload."""

from __future__ import annotations

import random
import time
from pathlib import Path

NAMES = ["Alice", "Bob", "Carol", "Dana", "Erik", "Fatima", "Goro", "Hana", "Ivan", "Jun", "Kofi", "Lena"]
VERBS = ["prefers", "deployed", "reviewed", "rewrote", "documented", "benchmarked", "rejected", "approved",
         "migrated", "debugged", "planned", "archived"]
THINGS = ["the billing service", "the Postgres schema", "the CI pipeline", "the onboarding guide", "dark mode",
          "the search index", "the Kafka consumer", "the release notes", "the retry policy", "the login page",
          "the cost report", "the vector index", "the upload client", "the Terraform modules"]
WHEN = ["on Monday", "last sprint", "before the launch", "after the outage", "in March", "this morning",
        "during the offsite", "for the audit"]
CUES = ["who changed the retry policy", "what happened to the billing service", "dark mode preferences",
        "CI pipeline problems", "Postgres migrations", "what did Dana review", "release notes for the launch",
        "the outage and the search index", "who documented onboarding", "upload client bugs"]


def sentences(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [f"{rng.choice(NAMES)} {rng.choice(VERBS)} {rng.choice(THINGS)} {rng.choice(WHEN)} (note {i})"
            for i in range(n)]


def fill(vault: Path, memories: int) -> None:
    from hebbs import Engine

    started = time.perf_counter()
    with Engine.open(vault) as engine:
        texts = sentences(memories, seed=1)
        for at in range(0, len(texts), 2048):
            engine.remember_many([{"content": t, "entity_id": t.split()[0].lower()} for t in texts[at:at + 2048]])
        print(f"filled {engine.count()} memories in {time.perf_counter() - started:.1f}s", flush=True)
