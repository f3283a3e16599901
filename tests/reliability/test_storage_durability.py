"""When a write is acknowledged (defect 9 of issue 12): after its WAL is synced, one sync shared by
the writers waiting at the time; or, configured `buffered`, without waiting for a sync."""

from __future__ import annotations

import threading
import time

import pytest

from hebbs import Engine, InvalidInput
from hebbs.store.durability import GroupCommit


def _slow_syncs(engine: Engine, delay: float) -> list[int]:
    """Make each WAL sync take `delay` (a slow disk), and count them."""
    group = engine.vault.store.group
    real = group._sync_wal
    done: list[int] = []

    def slow() -> None:
        time.sleep(delay)
        real()
        done.append(1)

    group._sync_wal = slow
    return done


def test_every_acknowledged_write_waited_for_a_sync(engine):
    syncs = _slow_syncs(engine, 0.0)
    for i in range(5):
        engine.remember(f"fact {i}")
    engine.forget([engine.remember("to forget").id])
    assert len(syncs) == 7
    engine.recall("fact", reinforce=True)  # the query log and access counts are not acknowledged writes
    assert len(syncs) == 7


def test_concurrent_writers_share_syncs(engine):
    syncs = _slow_syncs(engine, 0.05)
    errors: list[BaseException] = []

    def writer(n: int) -> None:
        try:
            for i in range(5):
                engine.remember(f"writer {n} fact {i}")
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert engine.count() == 40
    assert len(syncs) < 40 / 2, f"{len(syncs)} syncs for 40 writes: no group commit"


def test_buffered_mode_does_not_wait_for_syncs(tmp_path, embedder):
    path = tmp_path / "v"
    path.mkdir()
    (path / "config.toml").write_text('[store]\ndurability = "buffered"\n')
    with Engine.open(path, embedder=embedder) as eng:
        syncs = _slow_syncs(eng, 0.0)
        for i in range(5):
            eng.remember(f"fact {i}")
        assert syncs == []
    with Engine.open(path, embedder=embedder) as eng:
        assert eng.count() == 5


def test_an_unknown_durability_is_a_config_error(tmp_path, embedder):
    path = tmp_path / "v"
    path.mkdir()
    (path / "config.toml").write_text('[store]\ndurability = "eventually"\n')
    with pytest.raises(InvalidInput, match="store.durability"):
        Engine.open(path, embedder=embedder)


def test_a_config_that_says_storage_durability_still_reads(tmp_path, embedder):
    """Before wave 4 durability was [storage]'s; a config written then keeps its meaning, and one
    that gives it in both tables is refused rather than read one way."""
    from hebbs.config import load_config

    path = tmp_path / "v"
    path.mkdir()
    (path / "config.toml").write_text('[storage]\ndurability = "buffered"\n\n[recall]\nmmr_lambda = 0.8\n')
    config = load_config(path)
    assert config.store.durability == "buffered" and config.recall.mmr_lambda == 0.8
    (path / "config.toml").write_text('[storage]\ndurability = "buffered"\n\n[store]\ndurability = "sync"\n')
    with pytest.raises(InvalidInput, match="give it once"):
        load_config(path)
    (path / "config.toml").write_text('[storage]\ndurability = "x"\n')
    with pytest.raises(InvalidInput, match=r"storage\.durability must be one of") as refused:
        load_config(path)
    assert "store." not in str(refused.value)  # named where the user wrote it


def test_a_waiter_is_released_by_a_sync_that_started_after_its_write():
    seq = [0]
    synced: list[int] = []
    group = GroupCommit("sync", lambda: seq[0], lambda: synced.append(seq[0]))
    seq[0] = 3
    group.written(3)
    seq[0] = 5
    with group.deferred(wait=False) as deferral:
        group.written(4)
        group.written(5)
    assert synced == [3] and deferral.seq == 5
    group.wait(deferral.seq)
    assert synced == [3, 5]
    group.wait(4)  # already covered
    assert group.syncs == 2
