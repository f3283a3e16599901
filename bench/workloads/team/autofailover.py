"""Automatic failover: a daemon writing through the multi-host URL of a three-node Patroni cluster
(scripts.patroni_local, synchronous mode) while the leader's node is killed (kill -9 of its Patroni and its
server, as when its machine dies); Patroni promotes the synchronous standby once the leader lock lapses."""

from __future__ import annotations

import threading
import time
from collections import Counter
from pathlib import Path

from scripts.patroni_local import LOOP_WAIT, TTL, HaCluster

from bench.workloads.team.common import Daemon, attach


def autofailover(work: Path, unreachable_after: float | None = None) -> dict:
    """From the kill to the first acknowledged write, the errors the writer saw meanwhile (it retries only a
    retryable STORE_UNAVAILABLE, with the same key), and every acknowledged write looked up afterwards.
    `unreachable_after`: the vault's `[store] unreachable_after`, how long the daemon waits through the
    failover itself before it answers STORE_UNAVAILABLE (None: the default)."""
    import psycopg

    from hebbs.errors import HebbsError, StoreUnavailable
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
        acked: dict[str, tuple[str, float]] = {}
        errors: Counter[str] = Counter()
        failed: list[BaseException] = []
        stop = threading.Event()
        try:
            client = daemon.client()

            def write() -> None:
                n = 0
                while not stop.is_set():
                    key = f"a{n}"
                    try:
                        memory = client.remember(f"failover write {key}", key=key, consolidate=False)
                    except StoreUnavailable as exc:
                        errors[exc.status_code] += 1
                        continue  # the same key again: stored once if the cut-off write had committed
                    except HebbsError as exc:  # not retryable: the figure is void
                        failed.append(exc)
                        return
                    acked[key] = (memory.id, time.perf_counter())
                    n += 1

            thread = threading.Thread(target=write)
            thread.start()
            while len(acked) < 30 and not failed:
                time.sleep(0.05)
            old = cluster.leader()
            assert old is not None
            before = len(acked)
            killed = time.perf_counter()
            old.kill9()
            promoted = None
            while promoted is None and time.perf_counter() < killed + 120:
                new = cluster.leader()
                if new is not None and new.name != old.name:
                    promoted = time.perf_counter()
                time.sleep(0.1)
            while len(acked) < before + 30 and not failed and time.perf_counter() < killed + 180:
                time.sleep(0.05)
            stop.set()
            thread.join()
            client.close()
            if failed:
                raise failed[0]
            with psycopg.connect(cluster.url(), autocommit=True) as conn:
                stored = {bytes(row[0])[1:17] for row in conn.execute(
                    "SELECT key FROM hebbs.memories WHERE vault = (SELECT id FROM hebbs.vaults WHERE name = %s)",
                    ("autofailover",))}
            after = [at for _, at in acked.values() if at > killed]
            return {"bootstrap_s": bootstrap_s, "leader_killed": old.name,
                    "new_leader_s": (promoted - killed) if promoted else None,
                    "first_write_after_kill_s": (min(after) - killed) if after else None,
                    "acknowledged": len(acked), "lost": sum(1 for mid, _ in acked.values() if id_bytes(mid) not in stored),
                    "errors": dict(errors), "ttl_s": TTL, "loop_wait_s": LOOP_WAIT}
        finally:
            stop.set()
            daemon.stop()
    finally:
        cluster.remove()
