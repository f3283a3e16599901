"""Replication: a synchronous replica promoted after kill -9 of the primary, and reads on an asynchronous
streaming replica."""

from __future__ import annotations

import os
import shutil
import time
import uuid
from pathlib import Path


from bench.harness import percentile
from scripts.postgres_local import Cluster
from hebbs.store.storage import WriteSet

from bench.workloads.facts import CUES, fill
from bench.workloads.team.common import Daemon, KeyedWriter, attach, found_after, timed


def failover(work: Path) -> dict:
    """kill -9 of the primary, pg_ctl promote of the synchronous replica, a daemon writing throughout."""
    cluster = Cluster(work / "failover-pg", fast=False)
    try:
        primary = cluster.start_primary()
        replica = cluster.add_replica(synchronous=True)
        folder = work / "failover"
        attach(folder / ".hebbs", cluster.multi_host_url(), "failover")
        daemon = Daemon(folder)
        try:
            with KeyedWriter(daemon.client, "failover write {key}") as writer:
                while len(writer.acked) < 20 and not writer.errors:
                    time.sleep(0.05)
                killed = time.monotonic()
                primary.kill9()
                promote_started = time.monotonic()
                replica.promote()
                promoted = time.monotonic()
                while not writer.errors and not any(at > promoted for _, at in list(writer.acked.values())):
                    time.sleep(0.01)
            if writer.errors:
                raise writer.errors[0]
            first = min(at for _, at in writer.acked.values() if at > killed)
            count = int(replica.sql("SELECT count(*) FROM hebbs.memories"))
            return {"promote_s": promoted - promote_started, "first_write_after_kill_s": first - killed,
                    "acknowledged": len(writer.acked), "on_new_primary": count}
        finally:
            daemon.stop()
    finally:
        cluster.remove()


def replica_reads(work: Path, memories: int, calls: int, samples: int) -> dict:
    """A daemon reading on the primary against one reading on an asynchronous streaming replica."""
    from hebbs.store import migrate

    cluster = Cluster(work / "replica-pg", fast=False)
    daemons: list[Daemon] = []
    try:
        primary = cluster.start_primary()
        replica = cluster.add_replica()
        rocks = work / "rocks" / ".hebbs"
        if not rocks.exists():  # the latency part's vault, when it ran first
            fill(rocks, memories)
        name = f"replica-{work.name}"
        on_primary, on_replica = work / "rp-primary" / ".hebbs", work / "rp-replica" / ".hebbs"
        shutil.copytree(rocks, on_primary)
        migrate.to_postgres(on_primary, primary.url, name, say=lambda _: None)
        shutil.copytree(on_primary, on_replica)  # its indexes too: no daemon rebuilds at open
        read_url = (f"postgresql://postgres@127.0.0.1:{replica.port},127.0.0.1:{primary.port}/postgres"
                    f"?target_session_attrs=prefer-standby&connect_timeout=2&passfile={primary.passfile}")
        config = on_replica / "config.toml"
        config.write_text(config.read_text().replace(f'name = "{name}"', f'name = "{name}"\nread_url = "{read_url}"'))
        daemons = [Daemon(on_primary.parent), Daemon(on_replica.parent)]
        clients = {"primary": daemons[0].client(), "replica": daemons[1].client()}
        for c in clients.values():
            for _ in range(12):  # open, warm the model, get past the first calls' costs (see latency)
                c.recall("warm up", top_k=10)

        def replica_scans() -> int:
            return int(replica.sql("SELECT coalesce(sum(idx_scan), 0) FROM pg_stat_user_tables WHERE schemaname = 'hebbs'"))
        scans_before = replica_scans()
        ms: dict[str, list[float]] = {k: [] for k in clients}
        for n in range(calls):
            cue = CUES[n % len(CUES)]
            for kind, c in (list(clients.items()) if n % 2 else list(clients.items())[::-1]):
                ms[kind].append(timed(lambda: c.recall(cue, top_k=10)))
        time.sleep(11)  # a backend flushes its statistics once idle, up to 10 s later
        scans = replica_scans() - scans_before
        # Read-your-writes through the replica-reading daemon, and the other daemon seeing the write.
        own_missed, seen_ms = 0, []
        writer, reader = clients["replica"], clients["primary"]
        for n in range(samples):
            token = f"ryw{n}x{uuid.uuid4().hex[:6]}"
            memory = writer.remember(f"the replica code word is {token}", consolidate=False)
            acked = time.perf_counter()
            own = writer.recall(token, strategies=["lexical"], top_k=1, reinforce=False).results
            if not own or own[0].memory.id != memory.id or writer.get(memory.id).content != memory.content:
                own_missed += 1
            seen_ms.append(found_after(reader, token, acked))
        # And the other way: the replica-reading daemon seeing the primary-reading daemon's writes.
        seen_on_replica_ms = []
        for n in range(samples):
            token = f"rev{n}x{uuid.uuid4().hex[:6]}"
            reader.remember(f"the primary code word is {token}", consolidate=False)
            seen_on_replica_ms.append(found_after(writer, token, time.perf_counter()))
        for c in clients.values():
            c.close()
        lag = primary.sql("SELECT coalesce(max(extract(epoch FROM replay_lag)) * 1000, 0) FROM pg_stat_replication")
        return {kind: {"p50": percentile(v, 50), "p99": percentile(v, 99)} for kind, v in ms.items()} | {
            "replica_index_scans": scans, "calls": calls, "own_write_missed": own_missed, "samples": samples,
            "seen_by_other_p50_ms": percentile(seen_ms, 50), "seen_by_other_p99_ms": percentile(seen_ms, 99),
            "seen_by_replica_reader_p50_ms": percentile(seen_on_replica_ms, 50),
            "seen_by_replica_reader_p99_ms": percentile(seen_on_replica_ms, 99), "replay_lag_ms_last": float(lag)}
    finally:
        for d in daemons:
            d.stop()
        cluster.remove()


def replica_read_cost(work: Path, reads: int = 600) -> dict:
    """One store read (10 records by key) on a streaming replica against the primary, in process,
    alternating: the replica's own cost per read, without daemons."""
    from hebbs.store.postgres import PgStore
    from hebbs.store.storage import MEMORY_PREFIX

    cluster = Cluster(work / "read-cost-pg", fast=False)
    try:
        primary = cluster.start_primary()
        replica = cluster.add_replica()
        stores = {"primary": PgStore.open(primary.url, "cost", work / "cost-a"),
                  "replica": PgStore.open(primary.url, "cost", work / "cost-b",
                                          read_url=f"postgresql://postgres@127.0.0.1:{replica.port}/postgres"
                                                   f"?passfile={replica.passfile}")}
        try:
            keys = [MEMORY_PREFIX + uuid.uuid4().bytes for _ in range(200)]
            writes = WriteSet()
            for key in keys:
                writes.put("default", key, os.urandom(300))
            stores["primary"].commit(writes)
            time.sleep(1)
            ms: dict[str, list[float]] = {k: [] for k in stores}
            for n in range(-10, reads):
                order = list(stores.items()) if n % 2 else list(stores.items())[::-1]
                for label, store in order:
                    took = timed(lambda: store._many("default", keys[n % 190:n % 190 + 10]))
                    if n >= 0:
                        ms[label].append(took)
            return {k: percentile(v, 50) for k, v in ms.items()} | {"on_replica": stores["replica"].reads["replica"]}
        finally:
            for store in stores.values():
                store.close()
    finally:
        cluster.remove()
