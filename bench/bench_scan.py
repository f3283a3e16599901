"""What checking every read costs: a full scan of the `default` family, the way the engine reads it
at open, with and without the status check and block checksum verification.

    .venv/bin/python -m bench.bench_scan [--memories 100000]

Rows: the median CPU time (process time: the machine these run on is shared, and wall time there
measures the neighbours) of 15 scans of the same database, the rows interleaved round by round
(records of 600 bytes, flushed to table files, block cache warm except in the last row):
- scan before:      the engine's scan before issue 12 (item iterator, prefix check, no status check:
                    a damaged block ended it silently), the floor;
- Store.scan():     the engine's scan now (status checked where the scan runs off its end);
- explicit iter:    an iterator whose validity is tested at every step in Python (the other design);
- items(), checksums on / off: the raw iteration with RocksDB's block checksums verified (the
                    default, kept) and not: what turning verification off would save;
- doctor pass:      checksums verified, fill_cache off (every block read from the file again).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import rocksdict

from hebbs.store.storage import MEMORY_PREFIX, Store, WriteSet


def _loop(view: rocksdict.Rdict, read_opt: rocksdict.ReadOptions | None) -> int:
    it = view.iter(read_opt) if read_opt is not None else view.iter()
    it.seek(MEMORY_PREFIX)
    n = 0
    while it.valid():
        it.key(), it.value()
        n += 1
        it.next()
    it.status()
    del it
    return n


def medians(rows: list[tuple[str, Callable[[], int]]], rounds: int = 15) -> dict[str, float]:
    times: dict[str, list[float]] = {name: [] for name, _ in rows}
    for _ in range(rounds):
        for name, fn in rows:
            started = time.process_time()
            fn()
            times[name].append(time.process_time() - started)
    return {name: statistics.median(t) * 1000 for name, t in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=100_000)
    args = parser.parse_args()
    path = Path(tempfile.mkdtemp(prefix="bench-scan-")) / "db"
    store = Store.open(path)
    try:
        for start in range(0, args.memories, 10_000):
            writes = WriteSet()
            for i in range(start, min(args.memories, start + 10_000)):
                writes.put("default", MEMORY_PREFIX + i.to_bytes(16, "big"), os.urandom(600))
            store.commit(writes, durable=False)
        store.db.flush()
        view = store._views["default"]
        unchecked = rocksdict.ReadOptions()
        unchecked.set_verify_checksums(False)
        cold = rocksdict.ReadOptions()
        cold.set_verify_checksums(True)
        cold.fill_cache(False)
        checked = rocksdict.ReadOptions()
        checked.set_verify_checksums(True)

        def before() -> int:
            n = 0
            for key, _ in view.items(from_key=MEMORY_PREFIX):
                if not key.startswith(MEMORY_PREFIX):
                    break
                n += 1
            return n

        rows = [
            ("scan before", before),
            ("Store.scan()", lambda: sum(1 for _ in store.scan("default", MEMORY_PREFIX))),
            ("explicit iter", lambda: _loop(view, checked)),
            ("checksums on", lambda: sum(1 for _ in view.items(from_key=MEMORY_PREFIX, read_opt=checked))),
            ("checksums off", lambda: sum(1 for _ in view.items(from_key=MEMORY_PREFIX, read_opt=unchecked))),
            ("doctor pass", lambda: sum(1 for _ in view.items(from_key=MEMORY_PREFIX, read_opt=cold))),
        ]
        print(f"{args.memories} records of 600 bytes, median CPU time of 15 interleaved rounds (busy shared machine)")
        got = medians(rows)
        floor = got["scan before"]
        for name, ms in got.items():
            print(f"{name:<14} {ms:8.1f} ms   x{ms / floor:.2f} of the scan before")
    finally:
        store.close()
        shutil.rmtree(path.parent, ignore_errors=True)


if __name__ == "__main__":
    main()
