"""An outage: the vault's server stopped under a running daemon, each call until its error."""

from __future__ import annotations

import statistics
import time
from pathlib import Path

from scripts.postgres_local import Cluster

from bench.workloads.team.common import Daemon, attach, timed


def outage(work: Path, samples: int = 5) -> dict:
    """The vault's server stopped under a running daemon: each call until its error, and which error, against
    the same calls answered while the server was up (same daemon, same run)."""
    from hebbs.errors import HebbsError

    cluster = Cluster(work / "outage-pg", fast=False)
    try:
        server = cluster.start_primary()
        folder = work / "outage"
        attach(folder / ".hebbs", server.url, "outage")
        daemon = Daemon(folder)
        try:
            client = daemon.client()
            client.remember("the office wifi password rotates every Monday")
            calls = {"recall": lambda: client.recall("wifi password", top_k=3),
                     "remember": lambda: client.remember("written during the outage", consolidate=False),
                     "count": client.count}
            up = {op: [timed(call) for _ in range(samples)] for op, call in calls.items()}
            server.stop("immediate")
            down: dict[str, list[float]] = {}
            said: dict[str, set[str]] = {}
            for op, call in calls.items():
                down[op], said[op] = [], set()
                for _ in range(samples):
                    started = time.perf_counter()
                    try:
                        call()
                        said[op].add("answered")
                    except HebbsError as exc:
                        said[op].add(exc.status_code)
                    down[op].append((time.perf_counter() - started) * 1000)
            client.close()
            return {op: {"up_p50_ms": statistics.median(up[op]), "down_p50_ms": statistics.median(down[op]),
                         "down_max_ms": max(down[op]), "errors": sorted(said[op]), "n": samples} for op in calls}
        finally:
            daemon.stop()
    finally:
        cluster.remove()
