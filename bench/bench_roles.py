"""What per-vault roles cost (`hebbs team`, row-level security; docs/scale.md "Runbook", step 5).

    .venv/bin/python -m bench.bench_roles [--memories 2000] [--calls 200]

One vault of N memories in PostgreSQL (filled in RocksDB, migrated), served by two daemons at once: one
connecting as the tables' owner, to whom PostgreSQL applies no policy, and one as a role granted the
vault by `hebbs team grant`, whose every query is filtered by the vault's policy. Recall (default,
fused) and remember p50/p99 through each, calls interleaved so both see the same load. The server is
local (scripts.postgres_local, fsync on) on the same cores as the daemons and the model: read the
ratio, not the absolute times.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path

from bench.harness import machine_note, percentile
from bench.workloads.facts import CUES, fill
from bench.workloads.team.common import Daemon, attach, timed
from scripts.postgres_local import Cluster


def run(memories: int, calls: int) -> dict[str, dict[str, dict[str, float]]]:
    from hebbs.store import migrate, pgaccess

    work = Path(tempfile.mkdtemp(prefix="hbroles", dir="/tmp"))
    cluster = Cluster(work / "pg", fast=False)
    daemons: dict[str, Daemon] = {}
    try:
        server = cluster.start_primary()
        owner = work / "owner" / ".hebbs"
        fill(owner, memories)
        migrate.to_postgres(owner, server.url, "roles", say=lambda _: None)
        passfile = work / "reader.pgpass"
        role_url = pgaccess.add_role(server.url, "bench_reader", passfile)
        pgaccess.grant(server.url, "roles", "bench_reader")
        attach(work / "role" / ".hebbs", role_url, "roles")
        daemons = {"owner (no policy)": Daemon(owner.parent), "granted role (policy)": Daemon(work / "role")}
        clients = {kind: d.client() for kind, d in daemons.items()}
        for c in clients.values():  # open the vault, warm the model
            c.recall("warm up", top_k=10)
        ms: dict[str, dict[str, list[float]]] = {kind: {"recall": [], "remember": []} for kind in clients}
        for n in range(calls):
            for kind, c in clients.items():
                ms[kind]["recall"].append(timed(lambda: c.recall(CUES[n % len(CUES)], top_k=10)))
        for n in range(calls // 2):
            for kind, c in clients.items():
                ms[kind]["remember"].append(timed(lambda: c.remember(f"{kind} note {n} about the retry policy",
                                                                      consolidate=False)))
        for c in clients.values():
            c.close()
        # The first calls pay the vault's opening (the vector index rebuilt from the store): left out.
        return {kind: {op: {"p50": percentile(v[10:], 50), "p99": percentile(v[10:], 99)} for op, v in ops.items()}
                for kind, ops in ms.items()}
    finally:
        for d in daemons.values():
            d.stop()
        cluster.remove()
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.bench_roles", description=__doc__.split("\n\n")[0])
    parser.add_argument("--memories", type=int, default=2000)
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args()
    before = machine_note()
    figures = run(args.memories, args.calls)
    print(f"\n{args.memories} memories, {args.calls} recalls and {args.calls // 2} remembers through each daemon "
          f"(first 10 left out); {before} before, {machine_note()} after")
    print("| through a daemon | recall p50 | p99 | remember p50 | p99 |\n|---|---|---|---|---|")
    base = figures["owner (no policy)"]
    for kind, ops in figures.items():
        ratio = "" if ops is base else f" ({ops['recall']['p50'] / base['recall']['p50']:.2f}x)"
        ratio_w = "" if ops is base else f" ({ops['remember']['p50'] / base['remember']['p50']:.2f}x)"
        print(f"| {kind} | {ops['recall']['p50']:.1f} ms{ratio} | {ops['recall']['p99']:.0f} ms "
              f"| {ops['remember']['p50']:.1f} ms{ratio_w} | {ops['remember']['p99']:.0f} ms |")


if __name__ == "__main__":
    main()
