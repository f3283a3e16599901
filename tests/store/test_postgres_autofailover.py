"""Automatic failover: a vault on a three-node Patroni cluster (real etcd, real Patroni, the tests' PostgreSQL
with pgvector; scripts.patroni_local, synchronous mode), reached through its multi-host URL. The leader's node
is killed (kill -9 of its Patroni and of its server, as when its machine dies) while a daemon writes; Patroni
promotes the synchronous standby once the leader lock lapses, and the same daemon carries on: every write it
acknowledged is there, the only errors the writer saw were the retryable STORE_UNAVAILABLE, and the vault
serves recall and remember again."""

from __future__ import annotations

import time

from bench.workloads.team.common import KeyedWriter
from pg_fixtures import running_ha_cluster

pytest_plugins = ["daemon_fixtures"]


def test_leader_killed_during_writes_patroni_promotes_and_nothing_acknowledged_is_lost():
    import psycopg
    from daemon_fixtures import DaemonHome, short_tmp, wait_until

    from hebbs.errors import StoreUnavailable
    from hebbs.store.storage import id_bytes

    with running_ha_cluster() as cluster:
        old = cluster.leader()
        assert old is not None
        standby = next(m["name"] for m in cluster.members() if m["role"] == "sync_standby")
        home = DaemonHome()
        folder = short_tmp("hbn")
        try:
            home.hebbs("init", str(folder), "--store", cluster.url(), "--name", "autofailover")
            pid = home.start()
            with KeyedWriter(lambda: home.client(folder, autostart=False), "write {key} through the failover",
                             retry=(StoreUnavailable,)) as writer:
                acked, errors = writer.acked, writer.errors
                wait_until(lambda: len(acked) >= 10 or errors, what="writes before the kill")
                before = len(acked)
                killed_at = time.monotonic()
                old.kill9()
                wait_until(lambda: len(acked) >= before + 10 or errors, timeout=180, what="writes after the failover")
            assert not errors, errors
            retried = writer.retried
            assert set(retried) <= {"STORE_UNAVAILABLE"}
            new = cluster.leader()
            assert new is not None and new.name == standby  # only the synchronous standby may be promoted
            assert any(at > killed_at for _, at in acked.values())
            assert home.pid() == pid  # the same daemon, never restarted
            with psycopg.connect(cluster.url(), autocommit=True) as conn:
                stored = {bytes(row[0])[1:17] for row in conn.execute("SELECT key FROM hebbs.memories")}
            lost = [key for key, (mid, _) in acked.items() if id_bytes(mid) not in stored]
            assert not lost, f"acknowledged writes lost in the failover: {lost}"
            client = home.client(folder, autostart=False)
            try:
                client.remember("the release train leaves on Thursdays", consolidate=False)
                hits = client.recall("when does the release train leave", top_k=3).results
                assert any("Thursdays" in hit.memory.content for hit in hits)
                assert client.count() == len(stored) + 1
            finally:
                client.close()
        finally:
            home.cleanup()


def test_a_lost_connection_is_tried_again_at_least_every_half_second_whatever_unreachable_after():
    """psycopg_pool's own schedule doubles from 1 s (1, 3, 7, 15, 31 s after the loss): a daemon waiting
    through a 20 s failover with unreachable_after 30 wrote again only at 31 s (bench team, autofailover).
    The store's pools (hebbs.store.postgres.ConnectionPool) schedule their attempts so, capped, and still
    give up after their reconnect_timeout (unreachable_after)."""
    from hebbs.store.postgres import RECONNECT_EVERY, _Reconnecting

    attempt = _Reconnecting(timeout=30.0)
    delays = []
    now = 0.0
    while not attempt.time_to_give_up(now):
        attempt.update_delay(now)
        delays.append(attempt.delay)
        now += attempt.delay
    assert max(delays) <= RECONNECT_EVERY
    assert 29.9 <= now <= 30.0 + RECONNECT_EVERY  # still given up after unreachable_after
