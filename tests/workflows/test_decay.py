"""Decay and reinforcement: the formula, half-lives by type, pinning, candidates, and a sweep that resumes."""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from hebbs import Engine
from hebbs.workflows import decay
from hebbs.config import DecayConfig

import processes

DAY_US = 86_400 * 1_000_000
LOG_CAP = math.log2(1 + 100)


def expected(importance: float, age_days: float, half_life: float, access_count: int = 0) -> float:
    """The formula, written out independently of the code under test."""
    return importance * 2 ** (-age_days / half_life) * (1 + math.log2(1 + access_count) / LOG_CAP)


TYPED = [  # (context type, half-life in days by default)
    ("rule", 730.0), ("decision", 730.0), ("architecture", 730.0), ("preference", 180.0), ("fact", 180.0),
    ("task", 7.0), ("status", 3.0), ("gossip", 30.0), (None, 30.0),
]


def test_sweep_writes_the_formula_for_every_type(engine: Engine):
    made = [engine.remember(f"memory of type {kind}", importance=0.8, context={} if kind is None else {"type": kind})
            for kind, _ in TYPED]
    for age in (0.5, 10.0, 400.0):
        now = max(m.last_accessed_at for m in made) + int(age * DAY_US)
        report = decay.sweep(engine, now=now)
        assert report.finished and report.processed == len(made)
        for m, (_, half_life) in zip(made, TYPED):
            age_days = (now - m.last_accessed_at) / DAY_US
            assert engine.get(m.id).decay_score == pytest.approx(expected(0.8, age_days, half_life), rel=1e-6)


def test_slow_types_outlive_fast_ones(engine: Engine):
    rule = engine.remember("Never deploy on Fridays", context={"type": "rule"})
    status = engine.remember("The build is green", context={"type": "status"})
    now = rule.last_accessed_at + 30 * DAY_US
    decay.sweep(engine, now=now)
    assert engine.get(rule.id).decay_score > 0.45 > 0.01 > engine.get(status.id).decay_score


def test_reinforcement_raises_decay_and_recall_refreshes_it(engine: Engine):
    m = engine.remember("The staging database password rotates monthly", importance=0.6)
    for n in range(1, 4):
        res = engine.recall("staging database password", strategies=["similarity"], top_k=1, reinforce=True)
        assert res[0].memory.id == m.id
        got = engine.get(m.id)
        assert got.access_count == n
        # Recall sets last_accessed_at to now, so the age term is 1 and only reinforcement counts.
        assert got.decay_score == pytest.approx(expected(0.6, 0.0, 30.0, n), rel=1e-6)
    later = got.last_accessed_at + 15 * DAY_US
    decay.sweep(engine, now=later)
    assert engine.get(m.id).decay_score == pytest.approx(expected(0.6, 15.0, 30.0, 3), rel=1e-6)


def test_reinforce_false_leaves_the_memory_alone(engine: Engine):
    m = engine.remember("The cafeteria closes at three")
    engine.recall("cafeteria", strategies=["similarity"], top_k=1, reinforce=False)
    got = engine.get(m.id)
    assert got.access_count == 0 and got.last_accessed_at == m.last_accessed_at and got.decay_score == m.decay_score


def test_pinned_memories_never_decay(engine: Engine):
    pinned = engine.remember("The on-call phone number", importance=0.3, context={"pinned": True, "type": "status"})
    plain = engine.remember("The on-call rota changed", importance=0.3, context={"type": "status"})
    ten_years = pinned.last_accessed_at + 3650 * DAY_US
    decay.sweep(engine, now=ten_years)
    assert engine.get(pinned.id).decay_score == pytest.approx(0.3)
    assert engine.get(plain.id).decay_score < 1e-100
    assert [c.id for c in engine.forget_candidates(now=ten_years)] == [plain.id]


def test_candidates_are_listed_not_deleted(engine: Engine):
    fast = engine.remember("Build 1432 is running", importance=0.5, context={"type": "status"})
    faster = engine.remember("Build 1433 is queued", importance=0.2, context={"type": "status"})
    slow = engine.remember("All services log in UTC", importance=0.5, context={"type": "rule"})
    now = fast.last_accessed_at + 60 * DAY_US
    report = decay.sweep(engine, now=now)
    assert set(report.candidates) == {fast.id, faster.id} and report.forgotten == 0
    listed = engine.forget_candidates(now=now)
    assert [m.id for m in listed] == [faster.id, fast.id]  # least alive first
    assert listed[1].decay_score == pytest.approx(expected(0.5, (now - fast.last_accessed_at) / DAY_US, 3.0))
    assert engine.count() == 3 and engine.get(fast.id).content == fast.content
    # Not candidates yet at the time of writing: nothing has decayed.
    assert engine.forget_candidates(now=fast.last_accessed_at) == []
    assert slow.id not in {m.id for m in listed}


def test_auto_forget_removes_candidates_when_configured(tmp_path: Path, embedder):
    vault = tmp_path / "vault"
    vault.mkdir()
    (vault / "config.toml").write_text("[decay]\nauto_forget = true\n")
    with Engine.open(vault, embedder=embedder) as eng:
        stale = eng.remember("Deploy 88 is in progress", context={"type": "status"})
        keep = eng.remember("We use Postgres for billing", context={"type": "decision"})
        report = decay.sweep(eng, now=stale.last_accessed_at + 90 * DAY_US)
        assert report.forgotten == 1
        assert [m.id for m in eng.memories()] == [keep.id]


def test_half_life_table_is_configurable_and_merged_over_defaults(tmp_path: Path, embedder):
    vault = tmp_path / "vault"
    vault.mkdir()
    (vault / "config.toml").write_text(
        "[decay]\ndefault_half_life_days = 10.0\n[decay.half_life_days]\ntask = 14.0\nincident = 60.0\n")
    with Engine.open(vault, embedder=embedder) as eng:
        kinds = {"task": 14.0, "incident": 60.0, "rule": 730.0, "other": 10.0}
        made = {k: eng.remember(f"a {k}", context={"type": k}) for k in kinds}
        now = max(m.last_accessed_at for m in made.values()) + 20 * DAY_US
        decay.sweep(eng, now=now)
        for kind, half_life in kinds.items():
            age = (now - made[kind].last_accessed_at) / DAY_US
            assert eng.get(made[kind].id).decay_score == pytest.approx(expected(0.5, age, half_life), rel=1e-6)
    with pytest.raises(ValueError):
        DecayConfig(half_life_days={"task": 0.0})


def test_sweep_is_not_a_content_change(engine: Engine, store_kind: str):
    engine.remember_many([{"content": f"note {n}"} for n in range(5)])
    seq = engine.stats().write_seq
    applied = engine.vault.lexical_index.applied_seq
    decay.sweep(engine, now=decay._now() + 40 * DAY_US)
    if store_kind == "postgresql":
        # A shared vault numbers every record change, so other daemons' catalogs follow it; the
        # indexes of this one are left alone.
        assert engine.vault.lexical_index.applied_seq == applied and engine.stats().memories == 5
        return
    assert engine.stats().write_seq == seq
    assert engine.vault.store.get_meta("write_seq") == seq


def test_sweep_batches_resume_from_the_cursor(engine: Engine):
    made = engine.remember_many([{"content": f"note number {n}"} for n in range(25)])
    now = made[-1].last_accessed_at + 5 * DAY_US
    first = decay.sweep(engine, batch=10, now=now)
    assert first.processed == 10 and not first.finished and first.cursor is not None
    assert engine.vault.store.get_meta(decay.CURSOR_META) == first.cursor
    second = decay.sweep(engine, batch=10, now=now)
    third = decay.sweep(engine, batch=10, now=now)
    assert (second.processed, third.processed) == (10, 5) and third.finished
    assert engine.vault.store.get_meta(decay.CURSOR_META) is None
    assert all(engine.get(m.id).decay_score < 0.5 for m in made)


def test_exception_between_batches_then_resume(engine: Engine, monkeypatch: pytest.MonkeyPatch):
    made = engine.remember_many([{"content": f"item {n}"} for n in range(30)])
    now = made[-1].last_accessed_at + 20 * DAY_US
    monkeypatch.setattr(decay, "COMMIT_EVERY", 7)
    store = engine.vault.store
    real_commit = store.commit
    commits = {"n": 0}

    def failing_commit(writes):
        if any(family == "meta" for family, _, _ in writes.ops):
            commits["n"] += 1
            if commits["n"] == 3:
                raise RuntimeError("injected crash between sweep batches")
        return real_commit(writes)

    monkeypatch.setattr(store, "commit", failing_commit)
    with pytest.raises(RuntimeError, match="injected"):
        decay.sweep_all(engine, batch=1000, now=now)
    monkeypatch.setattr(store, "commit", real_commit)

    done = [m for m in made if engine.get(m.id).decay_score != m.decay_score]
    assert len(done) == 14  # two committed chunks of 7
    resumed = decay.sweep_all(engine, batch=1000, now=now)
    assert resumed.finished and resumed.processed == 30 - 14
    for m in made:
        assert engine.get(m.id).decay_score == pytest.approx(expected(0.5, (now - m.last_accessed_at) / DAY_US, 30.0))


CHILD = textwrap.dedent("""
    import sys, time
    from hebbs import Engine
    from hebbs.workflows import decay
    from hebbs.embedding.embed import get_embedder
    vault, now = sys.argv[1], int(sys.argv[2])
    decay.COMMIT_EVERY = 10
    eng = Engine.open(vault, embedder=get_embedder())
    store = eng.vault.store
    real_commit = store.commit
    done = []
    def commit_then_stall(writes):
        real_commit(writes)
        done.append(1)
        print("committed", flush=True)
        if len(done) == 2:
            time.sleep(3600)  # stall between two batches until the parent kills us
    store.commit = commit_then_stall
    decay.sweep_all(eng, batch=1000, now=now)
    print("finished", flush=True)
""")


def test_killed_child_sweep_resumes_where_it_stopped(tmp_path: Path, embedder):
    vault = tmp_path / "vault"
    with Engine.open(vault, embedder=embedder) as eng:
        made = eng.remember_many([{"content": f"fact {n} about the system"} for n in range(60)])
    now = made[-1].last_accessed_at + 45 * DAY_US
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    child = processes.popen([sys.executable, str(script), str(vault), str(now)], stdout=subprocess.PIPE, text=True,
                             env=dict(os.environ))
    lines: list[str] = []
    timer = threading.Timer(300, child.kill)  # a guard against a hung child, not a timing assertion
    timer.start()
    try:
        for line in child.stdout:
            lines.append(line.strip())
            if lines.count("committed") == 2:
                child.send_signal(signal.SIGKILL)
                break
        child.wait()
    finally:
        timer.cancel()
    assert "finished" not in lines and child.returncode == -signal.SIGKILL

    with Engine.open(vault, embedder=embedder) as eng:
        cursor = eng.vault.store.get_meta(decay.CURSOR_META)
        assert isinstance(cursor, bytes)
        swept = [m for m in made if eng.get(m.id).decay_score != m.decay_score]
        assert len(swept) == 20  # exactly the two committed chunks
        resumed = decay.sweep_all(eng, batch=1000, now=now)
        assert resumed.finished and resumed.processed == 40
        for m in made:
            age = (now - m.last_accessed_at) / DAY_US
            assert eng.get(m.id).decay_score == pytest.approx(expected(0.5, age, 30.0), rel=1e-6)


def test_background_sweeper_runs_and_stops(engine: Engine):
    made = engine.remember_many([{"content": f"log line {n}"} for n in range(12)])
    now = made[-1].last_accessed_at + 30 * DAY_US
    sweeper = decay.DecaySweeper(engine, interval_seconds=3600, batch=5, clock=lambda: now)
    with sweeper:
        assert sweeper.wait_for_pass(timeout=120)
    assert not sweeper.running
    report = sweeper.last_report
    assert report is not None and report.finished and report.processed == 12
    for m in made:
        assert engine.get(m.id).decay_score == pytest.approx(expected(0.5, (now - m.last_accessed_at) / DAY_US, 30.0))
