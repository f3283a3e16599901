"""Failover: a vault on a primary with a synchronous streaming replica, reached through a multi-host URL
with target_session_attrs=read-write. The primary is killed (SIGKILL, every server process) while a
daemon writes, the replica is promoted, and the same daemon carries on without a restart: every write
it acknowledged is on the new primary."""

from __future__ import annotations

import time

from bench.workloads.team.common import KeyedWriter
from pg_fixtures import running_cluster

pytest_plugins = ["daemon_fixtures"]


def test_primary_killed_and_replica_promoted_during_writes_loses_nothing():
    from daemon_fixtures import DaemonHome, short_tmp, wait_until

    with running_cluster(replicas=1, synchronous=True) as cluster:
        primary, replica = cluster.servers
        assert primary.sql("SELECT sync_state FROM pg_stat_replication") in ("sync", "quorum")
        home = DaemonHome()
        folder = short_tmp("hbn")
        try:
            home.hebbs("init", str(folder), "--store", cluster.multi_host_url(), "--name", "failover")
            pid = home.start()
            with KeyedWriter(lambda: home.client(folder, autostart=False), "write {key} on the cluster") as writer:
                acked, errors = writer.acked, writer.errors
                wait_until(lambda: len(acked) >= 20 or errors, what="writes before the kill")
                before = len(acked)
                killed_at = time.monotonic()
                primary.kill9()
                replica.promote()
                wait_until(lambda: len(acked) >= before + 20 or errors, what="writes after the failover")
            assert not errors, errors
            first_after = min(at for _, at in acked.values() if at > killed_at)
            print(f"first acknowledged write {first_after - killed_at:.2f} s after the kill")
            # The same daemon, never restarted, wrote through the failover.
            assert home.pid() == pid
            ids = set(replica.sql("SELECT encode(substr(key, 2), 'hex') FROM hebbs.memories").split())
            from hebbs.store.storage import id_bytes

            lost = [key for key, (mid, _) in acked.items() if id_bytes(mid).hex() not in ids]
            assert not lost, f"acknowledged writes lost in the failover: {lost}"
            assert len(ids) == len(acked)
        finally:
            home.cleanup()
