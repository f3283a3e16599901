"""Automatic failover: a daemon writing through the multi-host URL of a three-node Patroni cluster
(scripts.patroni_local, synchronous mode) while the leader's node is killed (kill -9 of its Patroni and its
server, as when its machine dies); Patroni promotes the synchronous standby once the leader lock lapses."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

from scripts.patroni_local import LOOP_WAIT, TTL, HaCluster

from bench.workloads.team.common import Daemon, KeyedWriter, attach


def autofailover(work: Path, unreachable_after: float | None = None) -> dict:
    """From the kill to the first acknowledged write, the errors the writer saw meanwhile (it retries only a
    retryable STORE_UNAVAILABLE, with the same key), and every acknowledged write looked up afterwards.
    `unreachable_after`: the vault's `[store] unreachable_after`, how long the daemon waits through the
    failover itself before it answers STORE_UNAVAILABLE (None: the default)."""
    import psycopg

    from hebbs.errors import StoreUnavailable
    from hebbs.store.storage import id_bytes

    label = f"ha-{unreachable_after or 'default'}"
    cluster = HaCluster(work / label, fast=False)
    try:
        started = time.perf_counter()
        cluster.start()
        bootstrap_s = time.perf_counter() - started
        folder = work / label
        attach(folder / ".hebbs", cluster.url(), "autofailover")
        if unreachable_after is not None:
            with open(folder / ".hebbs" / "config.toml", "a") as config:
                config.write(f"unreachable_after = {unreachable_after}\n")  # still the [store] table
        daemon = Daemon(folder)
        try:
            with KeyedWriter(daemon.client, "failover write {key}", retry=(StoreUnavailable,)) as writer:
                acked = writer.acked
                while len(acked) < 30 and not writer.errors:
                    time.sleep(0.05)
                old = cluster.leader()
                assert old is not None
                before = len(acked)
                killed = time.monotonic()
                old.kill9()
                promoted = None
                while promoted is None and time.monotonic() < killed + 120:
                    new = cluster.leader()
                    if new is not None and new.name != old.name:
                        promoted = time.monotonic()
                    time.sleep(0.1)
                while len(acked) < before + 30 and not writer.errors and time.monotonic() < killed + 180:
                    time.sleep(0.05)
            if writer.errors:  # not retryable: the figure is void
                raise writer.errors[0]
            with psycopg.connect(cluster.url(), autocommit=True) as conn:
                stored = {bytes(row[0])[1:17] for row in conn.execute(
                    "SELECT key FROM hebbs.memories WHERE vault = (SELECT id FROM hebbs.vaults WHERE name = %s)",
                    ("autofailover",))}
            after = [at for _, at in acked.values() if at > killed]
            return {"bootstrap_s": bootstrap_s, "leader_killed": old.name,
                    "new_leader_s": (promoted - killed) if promoted else None,
                    "first_write_after_kill_s": (min(after) - killed) if after else None,
                    "acknowledged": len(acked), "lost": sum(1 for mid, _ in acked.values() if id_bytes(mid) not in stored),
                    "errors": dict(Counter(writer.retried)), "ttl_s": TTL, "loop_wait_s": LOOP_WAIT}
        finally:
            daemon.stop()
    finally:
        cluster.remove()
