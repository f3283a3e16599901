"""Durability modes: remember latency and throughput when each write waits for its WAL sync ("sync",
the default, with group commit) and when it does not ("buffered"), with 1 and 8 concurrent writers.

    .venv/bin/python -m bench.bench_durability [--writes 200] [--dir /path/on/the/disk/to/measure]

Real remembers (the model embeds each text) into a vault on --dir (default: the system temp dir; a
tmpfs there makes fsync free, so measure on the disk your vaults live on). Printed per mode and
writer count: p50/p99 latency of one remember, writes per second, the WAL syncs that ran (group
commit shows as fewer syncs than writes), and each figure's ratio to the buffered mode, the floor.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
from pathlib import Path

from bench.harness import percentile
from hebbs import Engine
from hebbs.embedding.embed import get_embedder


def run(directory: Path, mode: str, writers: int, writes: int, embedder) -> dict[str, float]:
    path = Path(tempfile.mkdtemp(prefix=f"durability-{mode}-", dir=directory)) / "v"
    path.mkdir()
    (path / "config.toml").write_text(f'[store]\ndurability = "{mode}"\n[contradictions]\ncheck_on_remember = false\n')
    latencies: list[float] = []
    lock = threading.Lock()
    with Engine.open(path, embedder=embedder) as eng:
        eng.remember("warm up")
        before = eng.vault.store.group.syncs

        def writer(n: int) -> None:
            mine = []
            for i in range(writes // writers):
                started = time.perf_counter()
                eng.remember(f"writer {n} remembers fact number {i} about the harbour schedule")
                mine.append(time.perf_counter() - started)
            with lock:
                latencies.extend(mine)

        started = time.perf_counter()
        threads = [threading.Thread(target=writer, args=(n,)) for n in range(writers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.perf_counter() - started
        syncs = eng.vault.store.group.syncs - before
    latencies.sort()
    return {"p50": statistics.median(latencies) * 1000, "p99": percentile(latencies, 99) * 1000,
            "per_s": len(latencies) / elapsed, "syncs": syncs, "writes": len(latencies)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--writes", type=int, default=200)
    parser.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()))
    args = parser.parse_args()
    embedder = get_embedder()
    embedder.embed(["warm the model up"])
    print(f"vaults on {args.dir}; {args.writes} remembers per row")
    print(f"{'mode':<9} {'writers':>7} {'p50 ms':>8} {'p99 ms':>8} {'writes/s':>9} {'syncs':>6}   ratio to buffered")
    for writers in (1, 8):
        floor = run(args.dir, "buffered", writers, args.writes, embedder)
        for mode, row in (("buffered", floor), ("sync", run(args.dir, "sync", writers, args.writes, embedder))):
            print(f"{mode:<9} {writers:>7} {row['p50']:>8.2f} {row['p99']:>8.2f} {row['per_s']:>9.1f} {row['syncs']:>6}"
                  f"   p50 x{row['p50'] / floor['p50']:.2f}, p99 x{row['p99'] / floor['p99']:.2f}, "
                  f"throughput x{row['per_s'] / floor['per_s']:.2f}")


if __name__ == "__main__":
    main()
