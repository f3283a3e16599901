"""Default recall's own CPU past the cue's embedding, with and without what was added to cut it, in one run.

    .venv/bin/python -m bench.bench_e2e --workdir /tmp/hebbs-e2e --cues 20   # once: builds the vault
    .venv/bin/python -m bench.bench_recall_cpu --workdir /tmp/hebbs-e2e [--cues 400] [--rounds 3]

On bench_e2e's vault (its --workdir, reused), in process, BLAS at one thread. Every cue's vector (and its
rest's, for confidence) is embedded first and handed to recall, so what is measured is recall's own work: the calling thread's
CPU (`time.thread_time`) per default recall at top_k 10, and per similarity-only recall. Each row runs
the same cues in blocks of --block, the rows' blocks interleaved, after one unmeasured pass of every
cue (a long-running daemon's caches are warm). The rows: hebbs as it is, and hebbs with one of its
cost cuts undone (each cut leaves every answer as it was: checked on the 760 LoCoMo dev questions).
"""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Callable
from typing import Any

import hebbs.offline  # noqa: F401 - before onnxruntime: keeps its telemetry off
from bench import harness, report
from bench.workloads.e2e import RELEVANCE_ONLY, TOP_K, e2e_arguments, open_built
from hebbs.store import storage


def _vectors_uncached(store: storage.Store, ids: list[str]) -> list[bytes | None]:
    """Store.get_vectors before its cache: one RocksDB multi-get of them all, every time."""
    return store._views["vectors"].get([storage.vector_key(mid) for mid in ids])


# label -> (undo, redo): what each row changes for its blocks, and puts back after them.
CUTS: dict[str, tuple[Callable[[], None], Callable[[], None]]] = {}
_cached = storage.Store.get_vectors
CUTS["without the stored vectors' cache (Store.get_vectors)"] = (
    lambda: setattr(storage.Store, "get_vectors", _vectors_uncached),
    lambda: setattr(storage.Store, "get_vectors", _cached))


def main() -> None:
    args = e2e_arguments(__doc__.splitlines()[0], cues=400, block=20, rounds=3)
    engine, cues = open_built(args)
    embedder = engine.embedder
    print(f"{len(cues)} cues x {args.rounds} rounds on {args.workdir / 'vault'} ({engine.count():,} memories); "
          f"{harness.machine_note()}")
    given = {cue: embedder.embed_query(cue) for cue in cues}
    embed_query, at_once = embedder.embed_query, embedder.embed_queries_at_once
    pairs: dict[tuple[str, ...], Any] = {}  # a cue and its rest (confidence's), embedded in the first pass
    embedder.embed_query = lambda text: given[text] if text in given else embed_query(text)
    embedder.embed_queries_at_once = lambda texts: (pairs[tuple(texts)] if tuple(texts) in pairs
                                                    else pairs.setdefault(tuple(texts), at_once(texts)))

    kinds: dict[str, Callable[[str], Any]] = {
        "default recall": lambda cue: engine.recall(cue, top_k=TOP_K),
        "similarity-only recall": lambda cue: engine.recall(cue, strategies=["similarity"], weights=RELEVANCE_ONLY,
                                                            top_k=TOP_K)}
    rows = {"hebbs as it is": (lambda: None, lambda: None)} | CUTS
    for fn in kinds.values():
        for cue in cues:
            fn(cue)
    gc.freeze()
    cpu: dict[tuple[str, str], list[float]] = {(kind, row): [] for kind in kinds for row in rows}
    for _ in range(args.rounds):
        for block, start in enumerate(range(0, len(cues), args.block)):
            for kind, fn in kinds.items():
                # Rows in turn, the order reversed every other block: none always follows the same one.
                for row, (undo, redo) in list(rows.items())[::1 if block % 2 else -1]:
                    undo()
                    try:
                        for cue in cues[start:start + args.block]:
                            began = time.thread_time()
                            fn(cue)
                            cpu[(kind, row)].append((time.thread_time() - began) * 1000)
                    finally:
                        redo()
    print("\nCPU ms per recall, the cue's vector given (calling thread)")
    report.markdown_header("recall", "row", "p50", "mean", "p99", "against hebbs as it is (mean)")
    for kind in kinds:
        base = statistics.fmean(cpu[(kind, "hebbs as it is")])
        for row in rows:
            values = cpu[(kind, row)]
            print(f"| {kind} | {row} | {harness.percentile(values, 50):.3f} | {statistics.fmean(values):.3f} | "
                  f"{harness.percentile(values, 99):.3f} | {statistics.fmean(values) / base:.2f}x |")
    engine.close()
    print(f"\n{harness.machine_note()} at the end")


if __name__ == "__main__":
    main()
