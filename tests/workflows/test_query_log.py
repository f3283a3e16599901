"""The query log stays bounded (config recall.query_log_keep / query_log_days) on a real vault, on both
stores, and what reads it (`queries`) and what recall writes beside it (reinforcement, the access log,
association by use) keep working while it is trimmed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import processes
from hebbs import Engine, InvalidInput
from hebbs.schema import QueryLogEntry, ScoringWeights
from hebbs.store.storage import Store, WriteSet, encode
from hebbs.workflows import reinforce

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


def _log_matches_its_count(path: Path) -> int:
    """The query log's count kept in the vault (reinforce.COUNT_META) is the log's own, and names its
    first and last keys; the number of entries."""
    store = Store.open(path / "db")
    try:
        entries = store.count("query_log")
        assert store.get_meta(reinforce.COUNT_META) == [entries, *store.ends("query_log")]
        return entries
    finally:
        store.close()


def _uncounted(monkeypatch) -> None:
    """From here on, counting the query log fails the test: a count kept across opens is read instead."""
    def refused(self, family, prefix=b""):
        raise AssertionError(f"the {family} family was counted")
    monkeypatch.setattr(Store, "count", refused)


def test_the_count_of_the_query_log_is_kept_across_opens(tmp_path: Path, embedder, monkeypatch) -> None:
    """The first recall after an open used to count the log (12-24 ms at its 10,000-entry bound). The
    count is kept beside the log: the recalls after a reopen read it and never count, and the log keeps
    its bound and its newest entries."""
    vault = tmp_path / "vault"
    _configure(vault, "[recall]\nquery_log_keep = 30\n")  # trimmed every 3 recalls
    cue = 0
    with Engine.open(vault, embedder=embedder) as engine:
        engine.remember_many([{"content": t} for t in FACTS])
        for cue in range(1, 47):
            engine.recall(f"question {cue} about billing", top_k=1)
    assert _log_matches_its_count(vault) == 30  # the first recall trimmed, then every third: the 46th
    _uncounted(monkeypatch)
    for _ in range(3):
        with Engine.open(vault, embedder=embedder) as engine:
            for _ in range(7):
                cue += 1
                engine.recall(f"question {cue} about billing", top_k=1)
            sizes = engine.vault.store.first_keys("query_log", 100)
            assert 30 <= len(sizes) <= 33
            assert [q.cue for q in engine.queries(limit=30)] == [f"question {i} about billing"
                                                                   for i in range(cue, cue - 30, -1)]
    monkeypatch.undo()
    _log_matches_its_count(vault)


def test_a_query_log_without_its_count_or_changed_beside_it_is_counted_again(tmp_path: Path, embedder) -> None:
    """A log written before its count was kept (no count), or changed by something that does not keep
    it (entries added here as an earlier version would), is counted once at the first recall after the
    open: the log is then trimmed to its bound, not left to grow nor trimmed of what it keeps."""
    vault = tmp_path / "vault"
    _configure(vault, "[recall]\nquery_log_keep = 20\n")
    with Engine.open(vault, embedder=embedder) as engine:
        engine.remember_many([{"content": t} for t in FACTS])
        engine.recall("billing owner", top_k=1)
    now = _entries(vault)[-1]

    def add_old(count: int, forget_count: bool) -> None:
        store = Store.open(vault / "db")
        writes = WriteSet()
        for i in range(count):
            at = now - 1000 - i
            writes.put("query_log", at.to_bytes(8, "big") + os.urandom(4),
                       encode(QueryLogEntry(at=at, cue=f"old {i}", strategies=["fused"], weights=ScoringWeights(),
                                            result_count=1, latency_ms=1.0)))
        if forget_count:
            writes.delete("meta", reinforce.COUNT_META.encode())
        store.commit(writes)
        store.close()

    for forget_count in (True, False):
        add_old(35, forget_count)
        with Engine.open(vault, embedder=embedder) as engine:
            engine.recall("staging database version", top_k=1)  # the first append after an open trims
            assert engine.vault.store.count("query_log") == 20
            assert engine.queries(limit=1)[0].cue == "staging database version"
        assert _log_matches_its_count(vault) == 20


def _entries(vault: Path) -> list[int]:
    store = Store.open(vault / "db")
    try:
        return [int.from_bytes(key[:8], "big") for key in store.first_keys("query_log", 10**6)]
    finally:
        store.close()


# A child that appends to the query log as recalls do, and kills itself with SIGKILL right after the
# commit named on its command line (the Nth append, or the Nth trim): a crash at a known point, between
# the batch reaching RocksDB and anything after it.
_CRASHING_APPENDS = textwrap.dedent("""
    import os, signal, sys, time
    from hebbs import Engine
    from hebbs.recall import pipeline
    from hebbs.recall.options import RecallOptions
    from hebbs.workflows import reinforce
    path, kind, nth = sys.argv[1], sys.argv[2], int(sys.argv[3])
    engine = Engine.open(path)
    request = pipeline.plan(engine.vault, RecallOptions(cue="who owns billing", top_k=1))
    results = pipeline.run(engine.vault, request).results
    apply = engine.vault.apply
    seen = {"append": 0, "trim": 0}

    def crashing(writes, **kwargs):
        apply(writes, **kwargs)
        kind_ = "trim" if writes.ranges else "append"
        seen[kind_] += 1
        if kind_ == kind and seen[kind_] == nth:
            os.kill(os.getpid(), signal.SIGKILL)

    engine.vault.apply = crashing
    while True:
        reinforce.record_recall(engine.vault, request, results, reinforce=False, started=time.perf_counter())
    """)


@pytest.mark.parametrize("kind,nth", [("append", 61), ("trim", 7), ("append", 1)])
def test_the_count_of_the_query_log_is_right_after_a_crash(tmp_path: Path, embedder, monkeypatch,
                                                          kind: str, nth: int) -> None:
    """The count is written in the batch of each append and each trim, so a process killed right after
    either (SIGKILL: nothing closed, nothing flushed) leaves a count that is the log's: the next open
    reads it without counting, and the log keeps its bound."""
    vault = tmp_path / "vault"
    _configure(vault, "[recall]\nquery_log_keep = 40\n")  # trimmed every 4 appends
    with Engine.open(vault, embedder=embedder) as engine:
        engine.remember_many([{"content": t} for t in FACTS])
        for i in range(50):
            engine.recall(f"question {i}", top_k=1)
    for _ in range(2):
        child = processes.run([sys.executable, "-c", _CRASHING_APPENDS, str(vault), kind, str(nth)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=300)
        assert child.returncode == -signal.SIGKILL, child.stderr
        # At most 4 past the bound: killed after the append that makes the trim due, before the trim.
        assert 40 <= _log_matches_its_count(vault) <= 44
    _uncounted(monkeypatch)
    with Engine.open(vault, embedder=embedder) as engine:
        for i in range(9):
            engine.recall(f"after the crash {i}", top_k=1)
        # Trimmed at the first recall after the open, then at every fourth: the 9th.
        assert len(engine.vault.store.first_keys("query_log", 100)) == 40
        assert [q.cue for q in engine.queries(limit=9)] == [f"after the crash {i}" for i in range(8, -1, -1)]
    monkeypatch.undo()
    _log_matches_its_count(vault)
