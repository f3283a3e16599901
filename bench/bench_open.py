"""Where a clean open's time and memory go, step by step, beside hnswlib's own load of the same file.

    .venv/bin/python -m bench.bench_open [--workdir /tmp/hebbs-bench-scale] [--sizes 100000 1000000] [--rounds 3]

Uses the vaults bench_scale.py builds (vault-N in --workdir; build them with it first). Each round is
a fresh child process that opens the vault the way bench_scale's probe does, with each step of the
open timed and its RSS growth read (RocksDB, catalog, checkpoint metas, the whole vector index
load, the wait for the checkpoint's checksum once hnswlib's load is done, lexical index), then the
first recall (similarity only, relevance-only weights, the cue's vector precomputed) and the RSS
after 50 default recalls; then, in the same process and warm, hnswlib's own `load_index` of the same
checkpoint file: the floor of the vector index step. Medians over the rounds are printed.

Last, the GIL check: whether another Python thread runs while `load_index` loads that file (a thread
counting loop turns, during the load and during a sleep as long). It is why the index is not loaded
in the background: a load that holds the GIL stops every other thread of the process, recalls
included.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import threading
import time
from pathlib import Path

from bench import harness, report
from bench.workloads.clustered import cues, open_and_recall_once, rss_mb

STEPS = ("rocksdb open", "catalog load", "checkpoint metas", "vector index (all of it)",
         "waiting for the checksum after the load", "lexical index open")


def child_open(path: Path) -> dict:
    import hebbs_hnswlib as hnswlib

    from hebbs.index import catalog, lexical as lexical_index, vector as vector_index
    from hebbs.core import open_vault
    from hebbs.store import storage
    from hebbs.embedding.embed import get_embedder

    steps: dict[str, list[float]] = {}

    def timed(owner: object, name: str, label: str) -> None:
        original = getattr(owner, name)

        def wrapper(*args, **kwargs):
            rss, began = rss_mb(), time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                steps[label] = [time.perf_counter() - began, rss_mb() - rss]
        setattr(owner, name, wrapper)

    for owner, name, label in ((storage.Store, "open", STEPS[0]), (catalog.Catalog, "load", STEPS[1]),
                               (vector_index, "_metas", STEPS[2]),
                               (open_vault.OpenVault, "_open_vector_index", STEPS[3]),
                               (vector_index._Checksumming, "result", STEPS[4]),
                               (lexical_index.LexicalIndex, "open", STEPS[5])):
        timed(owner, name, label)
    embedder = get_embedder(None)
    texts, vectors = cues(embedder.dim, 51)
    precomputed = dict(zip(texts, vectors))
    embedder.embed_query = lambda text: precomputed[text]
    before = rss_mb()
    engine, opened, first = open_and_recall_once(path, embedder, texts[0])
    for text in texts[1:]:
        engine.recall(text, reinforce=False)
    out = {"steps": steps, "open_s": opened, "first_s": first, "rss_before_mb": before, "rss_mb": rss_mb()}
    engine.close()
    raw = hnswlib.Index(space="cosine", dim=embedder.dim)
    began = time.perf_counter()
    raw.load_index(str(path / "index" / "hnsw.bin"), allow_replace_deleted=True)
    out["hnswlib_load_s"] = time.perf_counter() - began
    return out


def child_gil(path: Path) -> dict:
    import hebbs_hnswlib as hnswlib

    turns = 0
    stop = False

    def spin() -> None:
        nonlocal turns
        while not stop:
            turns += 1

    index = hnswlib.Index(space="cosine", dim=384)
    spinner = threading.Thread(target=spin)
    spinner.start()
    time.sleep(0.2)
    start, began = turns, time.perf_counter()
    index.load_index(str(path / "index" / "hnsw.bin"), allow_replace_deleted=True)
    loaded = time.perf_counter() - began
    during = turns - start
    start = turns
    time.sleep(loaded)
    beside_sleep = turns - start
    stop = True
    spinner.join()
    return {"load_s": loaded, "turns_during_load": during, "turns_during_sleep": beside_sleep}


def run_child(kind: str, path: Path) -> dict:
    out = harness.run(harness.module_argv("bench.bench_open", "--child", kind, path), capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(f"child {kind} {path} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/hebbs-bench-scale"))
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--child", nargs=2)
    args = parser.parse_args()
    if args.child:
        kind, path = args.child[0], Path(args.child[1])
        print(json.dumps(child_open(path) if kind == "open" else child_gil(path)))
        return
    os.environ.setdefault("HEBBS_HOME", str(args.workdir / "home"))
    print(f"load average at start: {os.getloadavg()[0]:.2f}")
    for n in args.sizes:
        path = args.workdir / f"vault-{n}"
        if not (path / "built.json").exists():
            raise SystemExit(f"{path} is not built: run python -m bench.bench_scale --sizes {n} --workdir {args.workdir}")
        rounds = [run_child("open", path) for _ in range(args.rounds)]

        def median(get) -> float:
            return statistics.median(get(r) for r in rounds)

        print(f"\n{n:,} memories, median of {args.rounds} children")
        report.markdown_header("step", "s", "RSS growth, MB")
        for step in STEPS:
            print(f"| {step} | {median(lambda r: r['steps'][step][0]):.3f} | {median(lambda r: r['steps'][step][1]):.0f} |")
        print(f"| Engine.open, all of it | {median(lambda r: r['open_s']):.3f} | |")
        print(f"| open + first recall (similarity) | {median(lambda r: r['first_s']):.3f} | |")
        print(f"| floor: hnswlib load_index of the same file, warm | {median(lambda r: r['hnswlib_load_s']):.3f} | |")
        print(f"RSS after 50 recalls {median(lambda r: r['rss_mb']):.0f} MB "
              f"(growth from Engine.open {median(lambda r: r['rss_mb'] - r['rss_before_mb']):.0f} MB)")
        gil = run_child("gil", path)
        print(f"GIL check: load_index {gil['load_s']:.3f} s; another thread's loop turns during it "
              f"{gil['turns_during_load']:,}, during a sleep as long {gil['turns_during_sleep']:,} "
              f"({gil['turns_during_load'] / max(1, gil['turns_during_sleep']):.1%})")
    print(f"load average at end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
