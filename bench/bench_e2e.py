"""End to end, as a user's agent sees it: embed the cue + search, top 10, one cue at a time, hebbs beside
raw hnswlib and Chroma on the same 10,000 real passages, plus single remembers and the size on disk.

    .venv/bin/pip install chromadb hnswlib    # the bench's peers only, never hebbs dependencies
    .venv/bin/python -m bench e2e [--passages 10000] [--cues 400] [--block 10] [--remembers 200]
                                  [--workdir DIR]  # kept; a later run with it skips the ingest

Passages: every LoCoMo turn (../shared/data/locomo-dev, 2,760), then the sentences of the CISI abstracts
and, to reach the count, CISI titles (../shared/data/cisi). Cues: LoCoMo questions, spread over the five
conversations. Every system uses all-MiniLM-L6-v2 through hebbs' float32 ONNX graph for the passages;
what differs is the graph and the onnxruntime session that embed the cue (its default, which spins its
workers after each run; spinning off, hebbs' batch session; one thread; a 100 us spin; a 100 us spin
stopped when the run returns, hebbs' cue session) and the search behind it. hebbs embeds cues with
its cue graph, an int8 copy of the float32 one (docs/embedding.md): raw hnswlib runs with both graphs,
and the table has two floors, the fastest float32 row (the graph the peers use) and the fastest int8
row (the same embedding as hebbs'); hebbs' rows are repeated with the float32 graph. hebbs picks its
cue session by the machine's load: the printout says how many of its cues went through which session,
and hebbs' rows are repeated with each session pinned (the batch session only: the setting before
the cue session; the cue session always), so both settings are measured in the same run whatever the
load. raw hnswlib is the pip package (hnswlib 0.8.0, the same M, ef_construction and ef_search as the
vault); Chroma is a PersistentClient with the same HNSW parameters, given the same passage vectors
and the cue's vector embedded with onnxruntime's default on the float32 graph.

Long cues: paragraph cues (three consecutive LoCoMo turns, about 80 words) through raw hnswlib (both
graphs) and hebbs' default recall (both cue graphs), in the same blocks; a line after the table gives
the paragraph path over the short one at p50 for default recall. hebbs runs in process with numpy's BLAS capped at one thread,
as the daemon runs it (docs/embedding.md), and what is loaded before the blocks frozen out of the
garbage collector's sight, as the daemon freezes its model and modules (gc.freeze).

Each system runs in warmed blocks of --block cues (3 unmeasured cues first), the blocks interleaved
round after round, so that every system sees the same machine load and its ratio to the floor is a
same-run figure (on a loaded machine, short blocks: the load moves within seconds). The floor is the
fastest onnxruntime setting for one cue + raw hnswlib knn_query, with the float32 graph; the int8 floor
the same with hebbs' cue graph.

Printed: one table (e2e p50/p99, the ratio to the floor, the CPU this process spent per cue and its
ratio to the floor's: a figure the machine's load moves far less than wall time; disk MB), single-remember p50 beside
Chroma's add and SQLite in WAL mode with synchronous=FULL (each embedding its text), ingest time,
the CPU an idle process burns after a request with each embedding setting, and what the vault's
disk holds, part by part.
"""

from __future__ import annotations

import argparse
import gc
import shutil
import sqlite3
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

import hebbs.offline  # noqa: F401 - before onnxruntime: keeps its telemetry off
from bench import harness, report
from bench.datasets.passages import corpus, paragraphs
from bench.workloads.e2e import EF_CONSTRUCTION, EF_SEARCH, M, RELEVANCE_ONLY, TOP_K, session
from hebbs import Engine
from hebbs.embedding.embed import get_embedder, limit_blas_threads

SETTLE_S = 0.05  # pause between two systems' blocks
# The onnxruntime settings a cue is embedded with (None: its defaults), on the float32 graph; the
# int8 ones are repeated on hebbs' cue graph.
SETTINGS: dict[str, dict[str, Any] | None] = {
    "onnxruntime default (spinning)": None,
    "2 threads, spinning off": {"threads": 2, "spin": False},
    "1 thread": {"threads": 1, "spin": False},
    "2 threads, spinning 100 us": {"threads": 2, "spin": 100},
    "2 threads, spinning 100 us, stopped after the run (hebbs' cue session)": {"threads": 2, "spin": 100, "stop": True}}
INT8_SETTINGS = ("onnxruntime default (spinning)", "2 threads, spinning off",
                 "2 threads, spinning 100 us, stopped after the run (hebbs' cue session)")


def count_cue_sessions(embedder: Any) -> dict[str, int]:
    """Counts, as it goes, which session embedded each of `embedder`'s single cues under its own
    choice: hebbs picks its spinning cue session only while the machine has an idle core
    (docs/embedding.md)."""
    counts = {"cue session (spinning 100 us)": 0, "batch session (spinning off)": 0}
    cues = embedder._cues()
    pick = cues.single

    def counted(policy: str) -> Any:
        chosen = pick(policy)
        if policy != "auto" or embedder.cue_graph != "int8":
            return chosen  # a row that pins the session or the graph: not hebbs' own choice
        counts["batch session (spinning off)" if chosen is cues.batch() else "cue session (spinning 100 us)"] += 1
        return chosen

    cues.single = counted
    return counts


def du(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def mb(n: int) -> float:
    return n / 1e6


def blocks(systems: dict[str, Callable[[int], Any]], cues: int, block: int, warm: int = 3,
           cpu: dict[str, list[float]] | None = None) -> dict[str, list[float]]:
    """Each system in warmed blocks of `block` cues, blocks interleaved: ms per cue. `cpu`, when given,
    receives the CPU ms of this process per cue (all its threads: the embedding's workers included),
    which the machine's load moves far less than the wall time."""
    out: dict[str, list[float]] = {label: [] for label in systems}
    for label in systems:
        if cpu is not None:
            cpu[label] = []
    for start in range(0, cues, block):
        for label, fn in systems.items():
            # onnxruntime's default session keeps its workers spinning for tens of ms after a run (the
            # idle CPU figures): without a pause they took a core from the block after it.
            time.sleep(SETTLE_S)
            for i in range(warm):
                fn(start + i)
            for i in range(start, min(start + block, cues)):
                began, spent = time.perf_counter(), time.process_time()
                fn(i)
                out[label].append((time.perf_counter() - began) * 1000)
                if cpu is not None:
                    cpu[label].append((time.process_time() - spent) * 1000)
    return out


def idle_cpu(embed: Callable[[str], Any], cue: str, idle: float = 0.5, rounds: int = 6) -> float:
    """CPU ms this process burns per request followed by `idle` seconds of waiting (spinning workers
    keep burning after the run returns)."""
    embed(cue)
    time.sleep(idle)
    began = time.process_time()
    for _ in range(rounds):
        embed(cue)
        time.sleep(idle)
    return (time.process_time() - began) / rounds * 1000


def vault_parts(path: Path) -> list[tuple[str, int]]:
    """The vault's bytes on disk by part."""
    db = path / "db"
    parts = [
        ("RocksDB tables (.sst)", sum(p.stat().st_size for p in db.glob("*.sst"))),
        ("RocksDB WAL (.log)", sum(p.stat().st_size for p in db.glob("*.log"))),
        ("RocksDB LOG, MANIFEST, OPTIONS", sum(p.stat().st_size for p in db.iterdir()
                                              if p.is_file() and p.suffix not in (".sst", ".log"))),
    ]
    index = path / "index"
    parts.append(("HNSW checkpoint (hnsw.bin)", du(index / "hnsw.bin") if (index / "hnsw.bin").exists() else 0))
    parts.append(("index/ other (meta, catalog)", du(index) - parts[-1][1] if index.exists() else 0))
    parts.append(("lexical index (tantivy)", du(path / "lexical") if (path / "lexical").exists() else 0))
    counted = sum(size for _, size in parts)
    parts.append(("everything else", du(path) - counted))
    return parts


def rocksdb_families(engine: Engine) -> list[tuple[str, int]]:
    """Logical bytes (keys + values) per column family: what the SST files hold before compression."""
    from hebbs.store.storage import COLUMN_FAMILIES
    store = engine.vault.store
    out = []
    for family in COLUMN_FAMILIES:
        total = sum(len(k) + len(v) for k, v in store.scan(family, b""))
        out.append((family, total))
    return out


def ingest(work: Path, engine: Engine, batch: Any, passages: list[str]) -> tuple[Any, Any, str]:
    """hebbs first: it embeds the passages itself, as a user's remember_many does; the peers are then
    given the very vectors it stored (same model, same graph), so the passages are embedded once."""
    import chromadb
    import hnswlib
    with harness.stopwatch() as seconds:
        memories = []
        for lo in range(0, len(passages), 1000):
            memories += engine.remember_many([{"content": text} for text in passages[lo:lo + 1000]])
    hebbs_s = seconds()
    vectors = engine.vault.vectors_or_zeros([m.id for m in memories])
    with harness.stopwatch() as seconds:
        raw = hnswlib.Index(space="cosine", dim=batch.dim)
        raw.init_index(max_elements=len(passages), ef_construction=EF_CONSTRUCTION, M=M)
        raw.add_items(vectors, np.arange(len(passages)))
        raw.save_index(str(work / "hnswlib.bin"))
    raw_s = seconds()

    # Chroma
    client = chromadb.PersistentClient(path=str(work / "chroma"),
                                       settings=chromadb.config.Settings(anonymized_telemetry=False))
    collection = client.create_collection("bench", embedding_function=None, configuration={"hnsw": {
        "space": "cosine", "ef_construction": EF_CONSTRUCTION, "ef_search": EF_SEARCH, "max_neighbors": M}})
    ids = [f"p{i}" for i in range(len(passages))]
    with harness.stopwatch() as seconds:
        for lo in range(0, len(passages), 1000):
            collection.add(ids=ids[lo:lo + 1000], embeddings=vectors[lo:lo + 1000], documents=passages[lo:lo + 1000])
    chroma_s = seconds()

    built = (f"ingest of {len(passages):,} passages: hebbs remember_many {hebbs_s:.1f} s (embedding included; "
             f"{len({m.id for m in memories}):,} memories); given its vectors, raw hnswlib build {raw_s:.1f} s, "
             f"Chroma add {chroma_s:.1f} s")
    return raw, collection, built


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--passages", type=int, default=10_000)
    parser.add_argument("--cues", type=int, default=400)
    parser.add_argument("--block", type=int, default=10)
    parser.add_argument("--remembers", type=int, default=200)
    parser.add_argument("--workdir", type=Path, default=None, help="kept after the run when given")
    return parser.parse_args()


def peers(work: Path, engine: Engine, batch: Any, passages: list[str]) -> tuple[Any, Any]:
    """raw hnswlib and Chroma beside the vault: built now, or reused from an earlier run's workdir."""
    import chromadb
    import hnswlib

    if (work / "built").is_file():
        print(f"reusing the vault and indexes built by an earlier run in {work}: {(work / 'built').read_text()}")
        raw = hnswlib.Index(space="cosine", dim=batch.dim)
        raw.load_index(str(work / "hnswlib.bin"))
        client = chromadb.PersistentClient(path=str(work / "chroma"),
                                           settings=chromadb.config.Settings(anonymized_telemetry=False))
        collection = client.get_collection("bench")
    else:
        raw, collection, built = ingest(work, engine, batch, passages)
        (work / "built").write_text(built)
        print(built)
    raw.set_ef(EF_SEARCH)
    raw.set_num_threads(1)
    return raw, collection


def cue_embedders(batch: Any) -> dict[str, Any]:
    embedders = {label: session(batch, options) for label, options in SETTINGS.items()}
    embedders |= {f"int8 copy, {label}": session(batch, SETTINGS[label], "int8") for label in INT8_SETTINGS}
    return embedders


def searches(engine: Engine, raw: Any, collection: Any, embedders: dict[str, Any], cues: list[str],
             long_cues: list[str]) -> dict[str, Callable[[int], Any]]:
    """Every system's search of cue i, by its row's label."""
    default_cue = embedders["onnxruntime default (spinning)"]

    def pinned(call: Callable[[], Any], policy: str = "auto", graph: str = "int8") -> Any:
        """`call` with hebbs' cues pinned to one session ("never": the batch session, "always": the cue
        session) instead of its choice by load, or to the model's float32 graph instead of its int8 copy."""
        engine.embedder.cue_session_policy, engine.embedder.cue_graph = policy, graph
        try:
            return call()
        finally:
            engine.embedder.cue_session_policy, engine.embedder.cue_graph = "auto", "int8"

    def similarity(i: int) -> Any:
        return engine.recall(cues[i % len(cues)], strategies=["similarity"], weights=RELEVANCE_ONLY, top_k=TOP_K)

    def default(i: int) -> Any:
        return engine.recall(cues[i % len(cues)], top_k=TOP_K)

    def paragraph(i: int) -> Any:
        return engine.recall(long_cues[i % len(long_cues)], top_k=TOP_K)

    systems: dict[str, Callable[[int], Any]] = {}
    for label, emb in embedders.items():
        systems[f"raw hnswlib ef={EF_SEARCH}, cue: {label}"] = (
            lambda i, emb=emb: raw.knn_query(emb.embed_query(cues[i % len(cues)]), k=TOP_K))
    systems["Chroma PersistentClient, cue: onnxruntime default"] = lambda i: collection.query(
        query_embeddings=[default_cue.embed_query(cues[i % len(cues)])], n_results=TOP_K)
    systems["hebbs similarity-only, relevance-only"] = similarity
    systems["hebbs default recall"] = default
    for label, policy in (("batch session only", "never"), ("cue session always", "always")):
        systems[f"hebbs similarity-only, {label}"] = lambda i, policy=policy: pinned(lambda: similarity(i), policy)
        systems[f"hebbs default recall, {label}"] = lambda i, policy=policy: pinned(lambda: default(i), policy)
    systems["hebbs similarity-only, float32 cue graph"] = lambda i: pinned(lambda: similarity(i), graph="float32")
    systems["hebbs default recall, float32 cue graph"] = lambda i: pinned(lambda: default(i), graph="float32")
    for graph in ("", "int8 copy, "):
        off = embedders[f"{graph}2 threads, spinning off"]
        systems[f"raw hnswlib ef=50, paragraph cue: {graph}2 threads, spinning off"] = (
            lambda i, off=off: raw.knn_query(off.embed_query(long_cues[i % len(long_cues)]), k=TOP_K))
    systems["hebbs default recall, paragraph cue"] = paragraph
    systems["hebbs default recall, paragraph cue, float32 cue graph"] = lambda i: pinned(lambda: paragraph(i),
                                                                                          graph="float32")
    return systems


def floors(stats: dict[str, tuple[float, float]]) -> tuple[str, str]:
    """The floor: the fastest onnxruntime setting of the graph every peer uses; the int8 floor: of hebbs' cue graph."""
    short_raw = [label for label in stats if label.startswith("raw hnswlib") and "paragraph" not in label]
    floor_label = min((label for label in short_raw if "int8" not in label), key=lambda label: stats[label][0])
    int8_floor_label = min((label for label in short_raw if "int8" in label), key=lambda label: stats[label][0])
    return floor_label, int8_floor_label


def single_writes(work: Path, engine: Engine, collection: Any, batch: Any, cues: list[str],
                  remembers: int) -> dict[str, list[float]]:
    """Single remembers, interleaved one by one; each system embeds its own text."""
    sql = sqlite3.connect(work / "sqlite.db", isolation_level=None)
    sql.execute("PRAGMA journal_mode=WAL")
    sql.execute("PRAGMA synchronous=FULL")
    sql.execute("CREATE TABLE IF NOT EXISTS memories (id INTEGER PRIMARY KEY, content TEXT, vector BLOB)")
    run = time.strftime("%H%M%S")  # a run reusing the stores adds memories of its own
    fresh = [f"{q} (noted {i} at {run})" for i, q in enumerate(cues)]
    writes: dict[str, Callable[[int], Any]] = {
        "hebbs remember (default durability)": lambda i: engine.remember(fresh[i % len(fresh)]),
        "Chroma add (one passage)": lambda i: collection.add(
            ids=[f"r{run}-{i}"], embeddings=[batch.embed_documents([fresh[i % len(fresh)]])[0]],
            documents=[fresh[i % len(fresh)]]),
        "SQLite WAL, synchronous=FULL": lambda i: sql.execute(
            "INSERT INTO memories (content, vector) VALUES (?, ?)",
            (fresh[i % len(fresh)], batch.embed_documents([fresh[i % len(fresh)]])[0].tobytes())),
    }
    return harness.interleaved(writes, remembers)


def print_e2e(stats: dict[str, tuple[float, float]], cpu_ms: dict[str, list[float]], floor_label: str,
              int8_floor_label: str, sizes: dict[str, int]) -> dict[str, float]:
    """The end-to-end table; returns the CPU p50 of each row."""
    floor, int8_floor = stats[floor_label], stats[int8_floor_label]
    cpu_p50 = {label: harness.percentile(ms, 50) for label, ms in cpu_ms.items()}
    report.markdown_header("system", "e2e p50 ms", "p99 ms", "p50 / floor", "p99 / floor", "p50 / int8 floor",
                           "p99 / int8 floor", "CPU p50 ms", "CPU / floor's", "disk MB")
    for label, (p50, p99) in stats.items():
        disk = sizes["raw hnswlib"] if label.startswith("raw") else sizes["Chroma"] if label.startswith("Chroma") \
            else sizes["hebbs"]
        report.markdown_row(label, f"{p50:.2f}", f"{p99:.2f}", f"{p50 / floor[0]:.2f}x", f"{p99 / floor[1]:.2f}x",
                            f"{p50 / int8_floor[0]:.2f}x", f"{p99 / int8_floor[1]:.2f}x", f"{cpu_p50[label]:.2f}",
                            f"{cpu_p50[label] / cpu_p50[floor_label]:.2f}x", f"{mb(disk):.1f}")
    return cpu_p50


def print_paragraphs(stats: dict[str, tuple[float, float]], cues: list[str], long_cues: list[str]) -> None:
    short, long = stats["hebbs default recall"][0], stats["hebbs default recall, paragraph cue"][0]
    raw_long = stats["raw hnswlib ef=50, paragraph cue: int8 copy, 2 threads, spinning off"][0]
    raw_short = stats["raw hnswlib ef=50, cue: int8 copy, 2 threads, spinning off"][0]
    short32 = stats["hebbs default recall, float32 cue graph"][0]
    long32 = stats["hebbs default recall, paragraph cue, float32 cue graph"][0]
    print(f"\nparagraph cues (median {sorted(len(c.split()) for c in long_cues)[len(long_cues) // 2]} words) over "
          f"short ones (median {sorted(len(c.split()) for c in cues)[len(cues) // 2]}) at p50: hebbs default recall "
          f"{long / short:.2f}x ({long32 / short32:.2f}x with the float32 cue graph); raw hnswlib with the same "
          f"(int8) embedding {raw_long / raw_short:.2f}x; the paragraph path's own work past its embedding and "
          f"search {long - raw_long:.2f} ms against {short - raw_short:.2f} ms")


def print_disk(open_size: int, sizes: dict[str, int], parts: list[tuple[str, int]],
               families: list[tuple[str, int]]) -> None:
    print(f"\nthe vault on disk: {mb(open_size):.1f} MB open, {mb(sizes['hebbs']):.1f} MB after close")
    for label, size in parts:
        print(f"  {label:<34} {mb(size):7.2f} MB")
    print("  RocksDB logical bytes by family (keys + values, before compression):")
    for family, size in families:
        if size:
            print(f"    {family:<22} {mb(size):7.2f} MB")


def main() -> None:
    args = arguments()
    passages, cues = corpus(args.passages, args.cues)
    long_cues = paragraphs(args.cues)
    limit_blas_threads(1)
    work = args.workdir or Path(tempfile.mkdtemp(prefix="hebbs-e2e-"))
    if not (work / "built").is_file() and args.workdir and work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True, exist_ok=True)
    batch = get_embedder()
    print(f"{len(passages):,} passages, {len(cues)} cues; {harness.machine_note()} (shared machine)")

    engine = Engine.open(work / "vault")
    raw, collection = peers(work, engine, batch, passages)
    embedders = cue_embedders(batch)
    systems = searches(engine, raw, collection, embedders, cues, long_cues)
    cpu_ms: dict[str, list[float]] = {}
    chosen = count_cue_sessions(engine.embedder)
    # What is loaded so far lives to the end, as the daemon's model and modules do: frozen as the
    # daemon freezes them once its model is loaded (daemon/server.py), for every system alike.
    gc.freeze()
    timings = blocks(systems, len(cues), args.block, cpu=cpu_ms)
    single_texts = dict(chosen)

    stats = {label: (harness.percentile(ms, 50), harness.percentile(ms, 99)) for label, ms in timings.items()}
    floor_label, int8_floor_label = floors(stats)
    write_ms = single_writes(work, engine, collection, batch, cues, args.remembers)

    cpu = {label: idle_cpu(emb.embed_query, cues[0]) for label, emb in embedders.items()}
    cpu["hebbs' cue embedder"] = idle_cpu(engine.embedder.embed_query, cues[0])

    families = rocksdb_families(engine)
    open_size = du(work / "vault")
    engine.close()
    parts = vault_parts(work / "vault")
    sizes = {"raw hnswlib": du(work / "hnswlib.bin"), "Chroma": du(work / "chroma"), "hebbs": du(work / "vault")}

    print(f"\nend to end (embed the cue + search, top {TOP_K}), {len(cues)} cues per system in blocks of "
          f"{args.block}; floor: {floor_label}; int8 floor: {int8_floor_label}")
    cpu_p50 = print_e2e(stats, cpu_ms, floor_label, int8_floor_label, sizes)
    print(f"\nhebbs' single texts in these blocks went through its {', '.join(f'{label}: {n}' for label, n in single_texts.items())}")
    print_paragraphs(stats, cues, long_cues)
    print(f"\nsingle write p50 / p99 ms ({args.remembers} each, interleaved; the text embedded in each):")
    for label, ms in write_ms.items():
        print(f"  {label:<40} {harness.percentile(ms, 50):7.2f} / {harness.percentile(ms, 99):7.2f}")
    print("\nCPU per request + 0.5 s idle (ms of CPU; the request itself costs a few):")
    for label, ms in cpu.items():
        print(f"  {label:<40} {ms:6.1f}")
    print_disk(open_size, sizes, parts, families)
    report.write_result("bench_e2e", {"e2e": {k: {"p50": v[0], "p99": v[1], "cpu_p50": cpu_p50[k]} for k, v in stats.items()},
                                      "floor": floor_label, "int8_floor": int8_floor_label, "disk_bytes": sizes,
                                      "writes_p50": {k: harness.percentile(v, 50) for k, v in write_ms.items()},
                                      "idle_cpu_ms": cpu, "vault_parts": dict(parts),
                                      "hebbs_single_texts": single_texts})
    if not args.workdir:
        shutil.rmtree(work, ignore_errors=True)
    print(f"\n{harness.machine_note()} at the end")


if __name__ == "__main__":
    main()
