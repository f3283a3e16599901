"""Cost as a vault grows: open (clean and after kill -9), RSS, disk, recall, remember and forget at
10k, 100k and 1M memories, each beside raw hnswlib on the same vectors, measured in the same run.

    .venv/bin/python -m bench.bench_scale [--sizes 10000 100000 1000000] [--queries 200] [--workdir DIR]

Vectors are supplied precomputed through a bench-only path: random but clustered (2,000 random
centres, each memory a centre plus Gaussian noise, normalised; cues drawn the same way), written with
random-word texts straight into RocksDB, because embedding a million texts would measure the model.
The first Engine.open then builds the HNSW index the real way (a full rebuild, timed) and closes
cleanly. Everything after is the product's real path: storage, both indexes, the catalog and recall.
Recall is measured without the embedding: the embedder's `embed_query` is replaced, in this bench
only, by a lookup of the cue's precomputed vector; the model's own time per cue is printed apart.

Each measure runs in a fresh child process (so RSS and open time are one vault's, not the bench's):
- open, clean: `Engine.open` and its first recall after a clean close (median of 3 children);
- open, after kill -9: a child remembers through `remember_many` one memory short of a checkpoint
  (open_vault.checkpoint_interval: the most a crash can leave to replay), prints, and is SIGKILLed;
  then open + first recall;
- RSS (VmRSS) after opening and 50 recalls, also as growth over the process before Engine.open;
- recall p50/p99 (similarity only with relevance-only weights; default), raw hnswlib knn (k=10, the
  vault's ef) in the same process on the vault's own graph;
- remember p50 (one memory, real embedding), forget p50 (one memory);
- the floor: a child that loads the vault's HNSW checkpoint into plain hnswlib: load time, RSS
  (whole process, and growth over Python + numpy + hnswlib), knn p50/p99.
Vaults are kept in --workdir (reused when present: building 1M takes the longest). With
--ef-construction 1000000=40 the 1M vault's graph is built with that [index] setting (default 200).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import time
from pathlib import Path

import numpy as np

from bench import harness
from bench.harness import percentile
from bench.workloads.clustered import SEED, centres_for, clustered, cues, open_and_recall_once, rss_mb, vocabulary

DAY_US = 86_400_000_000
CHUNK = 20_000


def ms_percentile(samples: list[float], q: float) -> float:
    return percentile(samples, q) * 1000


# Building ------------------------------------------------------------------------------------

def build(path: Path, n: int, ef_construction: int | None) -> dict:
    from ulid import ULID

    from hebbs import Engine
    from hebbs.schema import Memory, MemoryKind
    from hebbs.embedding.embed import get_embedder
    from hebbs.store.storage import Store, WriteSet, id_bytes, temporal_keys, vector_key

    embedder = get_embedder(None)
    rng = random.Random(SEED)
    np_rng = np.random.default_rng(SEED)
    vocab = vocabulary()
    centres = centres_for(embedder.dim)
    start_us = time.time_ns() // 1000 - 365 * DAY_US
    step = 365 * DAY_US // n
    if ef_construction is not None:
        # A real setting of the product ([index] in config.toml), so the graph is built the real way,
        # only with a narrower search while building: it is what lets 1M fit in the time.
        path.mkdir(parents=True, exist_ok=True)
        (path / "config.toml").write_text(f"[index]\nef_construction = {ef_construction}\n")
    began = time.perf_counter()
    store = Store.open(path / "db")
    try:
        for lo in range(0, n, CHUNK):
            hi = min(n, lo + CHUNK)
            vectors = clustered(np_rng, centres, hi - lo)
            writes = WriteSet()
            for i in range(lo, hi):
                created = start_us + i * step
                memory = Memory(id=str(ULID.from_timestamp(created / 1_000_000)),
                                content=" ".join(rng.choices(vocab, k=rng.randint(6, 40))),
                                importance=round(rng.random(), 2), context={},
                                entity_id=None if rng.random() < 0.2 else f"entity{rng.randrange(200)}",
                                created_at=created, updated_at=created, last_accessed_at=created,
                                kind=MemoryKind.EPISODE)
                writes.put_memory(memory)
                for key in temporal_keys(memory.entity_id, memory.created_at, memory.id):
                    writes.put("temporal", key, id_bytes(memory.id))
                writes.put("vectors", vector_key(memory.id), vectors[i - lo].astype("<f4").tobytes())
            store.commit(writes, durable=False)
        # A bump the vault has no log or checkpoint for: the first open rebuilds both indexes.
        writes = WriteSet()
        writes.put_meta("write_seq", 1)
        store.commit(writes)
    finally:
        store.close()
    written = time.perf_counter() - began
    began = time.perf_counter()
    Engine.open(path, embedder=embedder).close()
    return {"write_s": written, "first_open_s": time.perf_counter() - began}


# Children ------------------------------------------------------------------------------------


def child_probe(path: Path, queries: int, write_ops: int) -> dict:
    from hebbs.schema import ScoringWeights
    from hebbs.embedding.embed import get_embedder

    relevance_only = ScoringWeights(relevance=1.0, recency=0.0, importance=0.0, reinforcement=0.0)
    embedder = get_embedder(None)
    texts, vectors = cues(embedder.dim, max(queries, 50))
    model_times = []
    for text in texts[:50]:
        t = time.perf_counter()
        embedder.embed_query(text)
        model_times.append(time.perf_counter() - t)
    precomputed = dict(zip(texts, vectors))
    real_embed_query = embedder.embed_query
    embedder.embed_query = lambda text: precomputed[text] if text in precomputed else real_embed_query(text)
    before = rss_mb()
    engine, opened, first = open_and_recall_once(path, embedder, texts[0])
    out: dict = {"open_s": opened, "open_first_recall_s": first, "memories": len(engine.vault.vector_index)}
    if queries:
        for text in texts[:50]:
            engine.recall(text, reinforce=False)
        out["rss_mb"] = rss_mb()
        out["rss_growth_mb"] = out["rss_mb"] - before
        raw = engine.vault.vector_index.raw
        ef = engine.vault.config.index.ef_search
        sim, dflt, knn = [], [], []
        for text, vector in zip(texts[:queries], vectors[:queries]):
            t = time.perf_counter()
            engine.recall(text, strategies=["similarity"], weights=relevance_only, reinforce=False)
            sim.append(time.perf_counter() - t)
            t = time.perf_counter()
            engine.recall(text, reinforce=False)
            dflt.append(time.perf_counter() - t)
            raw.set_ef(ef)
            t = time.perf_counter()
            raw.knn_query(vector.reshape(1, -1), k=10)
            knn.append(time.perf_counter() - t)
        out.update(sim_p50=ms_percentile(sim, 50), sim_p99=ms_percentile(sim, 99), default_p50=ms_percentile(dflt, 50), default_p99=ms_percentile(dflt, 99),
                   knn_p50=ms_percentile(knn, 50), knn_p99=ms_percentile(knn, 99), model_p50=ms_percentile(model_times, 50))
        rng = random.Random(SEED + 2)
        vocab = vocabulary()
        remembered, forgotten, ids = [], [], []
        for _ in range(write_ops):
            t = time.perf_counter()
            ids.append(engine.remember(" ".join(rng.choices(vocab, k=12))).id)
            remembered.append(time.perf_counter() - t)
        for memory_id in ids:
            t = time.perf_counter()
            engine.forget([memory_id])
            forgotten.append(time.perf_counter() - t)
        out.update(remember_p50=ms_percentile(remembered, 50), forget_p50=ms_percentile(forgotten, 50))
    engine.close()
    return out


def child_crash_writer(path: Path) -> None:
    from hebbs import Engine
    from hebbs.core.open_vault import checkpoint_interval

    rng = random.Random(SEED + 3)
    vocab = vocabulary()
    engine = Engine.open(path)
    # One short of a checkpoint: the most a crash can leave to replay.
    count = checkpoint_interval(len(engine.vault.vector_index)) - 1
    for lo in range(0, count, 100):
        engine.remember_many([{"content": " ".join(rng.choices(vocab, k=10))} for _ in range(min(100, count - lo))],
                             check_contradictions=False, consolidate=False)
    print("written", flush=True)
    time.sleep(3600)


def child_floor(path: Path, queries: int) -> dict:
    import hebbs_hnswlib as hnswlib

    from hebbs.embedding.embed import get_embedder
    dim = get_embedder(None).dim
    _, vectors = cues(dim, queries)
    before = rss_mb()
    raw = hnswlib.Index(space="cosine", dim=dim)
    t = time.perf_counter()
    raw.load_index(str(path / "index" / "hnsw.bin"))
    loaded = time.perf_counter() - t
    raw.set_ef(50)
    raw.set_num_threads(1)
    knn = []
    for vector in vectors:
        t = time.perf_counter()
        raw.knn_query(vector.reshape(1, -1), k=10)
        knn.append(time.perf_counter() - t)
    return {"load_s": loaded, "rss_mb": rss_mb(), "rss_growth_mb": rss_mb() - before,
            "knn_p50": ms_percentile(knn, 50), "knn_p99": ms_percentile(knn, 99)}


def run_child(*args: str) -> dict:
    out = harness.run(harness.module_argv("bench.bench_scale", *args), capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(f"child {args} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def crash(path: Path) -> None:
    with harness.child(harness.module_argv("bench.bench_scale", "--child", "crash", path), stdout=subprocess.PIPE,
                       text=True) as proc:
        line = proc.stdout.readline()
        assert line.strip() == "written", line
        proc.send_signal(signal.SIGKILL)
        proc.wait()


# Report --------------------------------------------------------------------------------------

def du_mb(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--write-ops", type=int, default=50)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/hebbs-bench-scale"))
    parser.add_argument("--ef-construction", nargs="+", default=[],
                        help="SIZE=EF: build the vault of that size with [index] ef_construction = EF")
    parser.add_argument("--child", nargs="+")
    args = parser.parse_args()
    if args.child:
        kind, path = args.child[0], Path(args.child[1])
        if kind == "probe":
            print(json.dumps(child_probe(path, int(args.child[2]), int(args.child[3]))))
        elif kind == "floor":
            print(json.dumps(child_floor(path, int(args.child[2]))))
        elif kind == "crash":
            child_crash_writer(path)
        return

    os.environ.setdefault("HEBBS_HOME", str(args.workdir / "home"))
    rows: dict[int, dict] = {}
    for n in args.sizes:
        path = args.workdir / f"vault-{n}"
        row: dict = {}
        if not (path / "built.json").exists():
            shutil.rmtree(path, ignore_errors=True)
            row["build"] = build(path, n, dict(map(int, item.split("=")) for item in args.ef_construction).get(n))
            (path / "built.json").write_text(json.dumps(row["build"]))
        else:
            row["build"] = json.loads((path / "built.json").read_text())
        print(f"[{n}] built: {row['build']}", flush=True)
        row["floor"] = run_child("--child", "floor", str(path), str(args.queries))
        opens = [run_child("--child", "probe", str(path), "0", "0") for _ in range(3)]
        row["open"] = sorted(opens, key=lambda o: o["open_first_recall_s"])[1]
        row["probe"] = run_child("--child", "probe", str(path), str(args.queries), str(args.write_ops))
        row["disk_mb"] = du_mb(path)
        crash(path)
        row["crash"] = run_child("--child", "probe", str(path), "0", "0")
        rows[n] = row
        print(f"[{n}] {json.dumps(row)}", flush=True)
    report(rows)


def report(rows: dict[int, dict]) -> None:
    sizes = sorted(rows)
    measures = [
        ("open after clean close, s", lambda r: r["open"]["open_s"]),
        ("open + first recall, clean, s", lambda r: r["open"]["open_first_recall_s"]),
        ("open + first recall after kill -9 (max replay), s", lambda r: r["crash"]["open_first_recall_s"]),
        ("floor: raw hnswlib load_index, s", lambda r: r["floor"]["load_s"]),
        ("full HNSW rebuild (first open), s", lambda r: r["build"]["first_open_s"]),
        ("RSS, MB (whole process, model included)", lambda r: r["probe"]["rss_mb"]),
        ("RSS growth from Engine.open, MB", lambda r: r["probe"]["rss_growth_mb"]),
        ("floor: RSS, raw hnswlib process, MB", lambda r: r["floor"]["rss_mb"]),
        ("floor: RSS growth from load_index, MB", lambda r: r["floor"]["rss_growth_mb"]),
        ("disk, MB", lambda r: r["disk_mb"]),
        ("similarity recall p50, ms (no embedding)", lambda r: r["probe"]["sim_p50"]),
        ("similarity recall p99, ms (no embedding)", lambda r: r["probe"]["sim_p99"]),
        ("default recall p50, ms (no embedding)", lambda r: r["probe"]["default_p50"]),
        ("default recall p99, ms (no embedding)", lambda r: r["probe"]["default_p99"]),
        ("floor: raw knn p50, ms (vault's graph)", lambda r: r["probe"]["knn_p50"]),
        ("floor: raw knn p99, ms (vault's graph)", lambda r: r["probe"]["knn_p99"]),
        ("floor: raw knn p50, ms (plain hnswlib)", lambda r: r["floor"]["knn_p50"]),
        ("floor: raw knn p99, ms (plain hnswlib)", lambda r: r["floor"]["knn_p99"]),
        ("embedding one cue p50, ms (the model)", lambda r: r["probe"]["model_p50"]),
        ("remember p50, ms (one memory, embedding included)", lambda r: r["probe"]["remember_p50"]),
        ("forget p50, ms", lambda r: r["probe"]["forget_p50"]),
    ]
    header = "| measure | " + " | ".join(f"{n:,}" for n in sizes) + " | " + \
        " | ".join(f"x per 10x ({a // 1000}k->{b // 1000}k)" for a, b in zip(sizes, sizes[1:])) + " |"
    print()
    print(header)
    print("|" + "---|" * (1 + 2 * len(sizes) - 1))
    for name, get in measures:
        values = [get(rows[n]) for n in sizes]
        growth = [f"{(b / a) ** (1 / np.log10(nb / na)):.2f}x" if a > 0 else "-"
                  for a, b, na, nb in zip(values, values[1:], sizes, sizes[1:])]
        print(f"| {name} | " + " | ".join(f"{v:.3g}" if v < 100 else f"{v:.0f}" for v in values) + " | "
              + " | ".join(growth) + " |")
    print()
    for n in sizes:
        r = rows[n]
        print(f"{n:,}: similarity p99 / raw knn p99 (same process) {r['probe']['sim_p99'] / r['probe']['knn_p99']:.2f}x; "
              f"RSS / raw hnswlib RSS {r['probe']['rss_mb'] / r['floor']['rss_mb']:.2f}x (whole processes), "
              f"growth {r['probe']['rss_growth_mb'] / r['floor']['rss_growth_mb']:.2f}x; "
              f"clean open / raw load_index {r['open']['open_s'] / r['floor']['load_s']:.2f}x")


if __name__ == "__main__":
    main()
