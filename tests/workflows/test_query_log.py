"""The query log stays bounded (config recall.query_log_keep / query_log_days) on a real vault, on both
stores, and what reads it (`queries`) and what recall writes beside it (reinforcement, the access log,
association by use) keep working while it is trimmed."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from hebbs import Engine, InvalidInput
from hebbs.schema import QueryLogEntry, ScoringWeights
from hebbs.store.storage import WriteSet, encode

FACTS = ["The deploy pipeline runs on GitHub Actions", "Bob owns the billing service",
         "The staging database is Postgres 15", "Carol reviews every schema migration"]
DAY_US = 86_400_000_000


def _configure(vault_dir: Path, text: str) -> None:
    """Add settings to the vault's config.toml (a PostgreSQL vault's already names its store)."""
    vault_dir.mkdir(parents=True, exist_ok=True)
    config = vault_dir / "config.toml"
    config.write_text((config.read_text() if config.exists() else "") + "\n" + text)


def test_the_query_log_keeps_the_newest_recalls_up_to_its_bound(vault_dir: Path, embedder) -> None:
    """Before, every recall added an entry and nothing ever removed one. With query_log_keep = 40 the
    log never holds more than 40 plus the tenth it may pass between trims, `queries` lists the newest
    recalls newest first, and a recall with reinforce counts its results as used meanwhile."""
    _configure(vault_dir, "[recall]\nquery_log_keep = 40\n")
    with Engine.open(vault_dir, embedder=embedder) as engine:
        ids = [m.id for m in engine.remember_many([{"content": t} for t in FACTS])]
        sizes = []
        for i in range(130):
            engine.recall(f"question {i} about the deploy pipeline", top_k=2,
                          weights=ScoringWeights(relevance=1.0, recency=0.0, importance=0.0, reinforcement=0.0))
            sizes.append(engine.vault.store.count("query_log"))
        assert max(sizes) <= 44 and sizes[-1] >= 40, sizes
        listed = engine.queries(limit=100)
        assert len(listed) == sizes[-1]
        assert [q.cue for q in listed] == [f"question {i} about the deploy pipeline"
                                           for i in range(129, 129 - len(listed), -1)]
        # Reinforcement through recall still writes beside the trimmed log, and is read back.
        found = engine.recall("who owns billing", top_k=2, reinforce=True)
        used = [r.memory.id for r in found.results]
        assert engine.get(used[0]).access_count == 1
        assert [a.via for a in engine.accesses(used[0])] == ["recall"]
        assert engine.queries(limit=1)[0].cue == "who owns billing"
        assert set(used) <= set(ids)


def test_entries_older_than_query_log_days_go_at_the_next_recall(vault_dir: Path, embedder) -> None:
    """Entries older than query_log_days (here written as if from 200 days ago, as a vault that served
    recalls since then holds them) are gone after the first recall of the next session; recent ones stay."""
    _configure(vault_dir, "[recall]\nquery_log_days = 30\n")
    with Engine.open(vault_dir, embedder=embedder) as engine:
        engine.remember_many([{"content": t} for t in FACTS])
        engine.recall("billing owner", top_k=1)
        now = engine.queries(limit=1)[0].at
        writes = WriteSet()
        for i in range(25):
            at = now - 200 * DAY_US + i
            writes.put("query_log", at.to_bytes(8, "big") + os.urandom(4),
                       encode(QueryLogEntry(at=at, cue=f"old {i}", strategies=["fused"], weights=ScoringWeights(),
                                            result_count=1, latency_ms=1.0)))
        with engine.vault.append_lock:
            engine.vault.apply(writes, durable=False)
        assert engine.vault.store.count("query_log") == 26
    with Engine.open(vault_dir, embedder=embedder) as engine:
        engine.recall("staging database version", top_k=1)
        assert [q.cue for q in engine.queries(limit=100)] == ["staging database version", "billing owner"]


@pytest.mark.parametrize("setting", ["query_log_keep = 0", "query_log_days = -1"])
def test_a_query_log_bound_that_keeps_nothing_is_refused(tmp_path: Path, embedder, setting: str) -> None:
    _configure(tmp_path / "vault", f"[recall]\n{setting}\n")
    with pytest.raises(InvalidInput, match=setting.split(" ")[0]):
        Engine.open(tmp_path / "vault", embedder=embedder)
