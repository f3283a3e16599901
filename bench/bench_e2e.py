"""End to end, as a user's agent sees it: embed the cue + search, top 10, one cue at a time, hebbs beside
raw hnswlib and Chroma on the same 10,000 real passages, plus single remembers and the size on disk.

    .venv/bin/pip install chromadb hnswlib    # the bench's peers only, never hebbs dependencies
    .venv/bin/python -m bench.bench_e2e [--passages 10000] [--cues 400] [--block 10] [--remembers 200]
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
import copy
import gc
import re
import shutil
import sqlite3
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

import hebbs.offline  # noqa: F401 - before onnxruntime: keeps its telemetry off
from bench import harness
from bench.bench_cisi import parse as parse_cisi
from bench.bench_locomo import load as load_locomo
from hebbs import Engine, ScoringWeights
from hebbs.embedding.embed import _Sessions, get_embedder, limit_blas_threads

RELEVANCE_ONLY = ScoringWeights(relevance=1.0, recency=0.0, importance=0.0, reinforcement=0.0)
M, EF_CONSTRUCTION, EF_SEARCH, TOP_K = 16, 200, 50, 10
SETTLE_S = 0.05  # pause between two systems' blocks
_SENTENCE_END = re.compile(r"(?<=[.?!])\s+(?=[A-Z])")


def corpus(n: int, cues: int) -> tuple[list[str], list[str]]:
    """n real passages and `cues` real questions (LoCoMo questions taken evenly across the data)."""
    conversations = load_locomo(harness.shared("data/locomo-dev"))
    passages = [turn["text"] for conv in conversations for turn in conv["turns"]]
    docs = parse_cisi(harness.shared("data/cisi") / "CISI.ALL")
    for doc in docs.values():
        passages += [s.strip() for s in _SENTENCE_END.split(" ".join(doc.get("W", "").split())) if len(s.strip()) > 20]
    passages += [" ".join(doc.get("T", "").split()) for doc in docs.values() if doc.get("T")]
    passages = list(dict.fromkeys(passages))
    if len(passages) < n:
        raise SystemExit(f"only {len(passages)} passages in the shared data; ask for at most that many")
    questions = [q["question"] for conv in conversations for q in conv["questions"]]
    step = max(1, len(questions) // cues)
    return passages[:n], questions[::step][:cues]


def e2e_arguments(description: str, cues: int, block: int, rounds: int | None = None) -> argparse.Namespace:
    """The command line of a bench that reads the vault an earlier run of this one built."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--workdir", type=Path, required=True, help="bench_e2e's, with its vault built")
    parser.add_argument("--cues", type=int, default=cues)
    if rounds is not None:
        parser.add_argument("--rounds", type=int, default=rounds)
    parser.add_argument("--block", type=int, default=block)
    args = parser.parse_args()
    if not (args.workdir / "built").is_file():
        raise SystemExit(f"no vault built in {args.workdir}: run bench.bench_e2e --workdir {args.workdir} first")
    return args


def open_built(args: argparse.Namespace) -> tuple[Engine, list[str]]:
    """That vault, opened in process with numpy's BLAS at one thread as in the daemon, and its cues."""
    _, cues = corpus(10_000, args.cues)
    limit_blas_threads(1)
    return Engine.open(args.workdir / "vault"), cues


def paragraphs(cues: int) -> list[str]:
    """`cues` paragraph cues: three consecutive turns of a LoCoMo conversation each, spread over the data."""
    conversations = load_locomo(harness.shared("data/locomo-dev"))
    turns = [[turn["text"] for turn in conv["turns"]] for conv in conversations]
    joined = [" ".join(conv[i:i + 3]) for conv in turns for i in range(0, len(conv) - 2, 3)]
    step = max(1, len(joined) // cues)
    return joined[::step][:cues]


def ort_session(graph: Path, options: dict[str, Any] | None) -> Any:
    """An onnxruntime session of `graph` with these settings (None: onnxruntime's defaults)."""
    ort = hebbs.offline.import_onnxruntime()
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.log_severity_level = 3
    if options is not None:
        so.intra_op_num_threads = options["threads"]
        so.inter_op_num_threads = 1
        so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        so.add_session_config_entry("session.intra_op.allow_spinning", "1" if options["spin"] else "0")
        if options["spin"] is not True and options["spin"]:  # a number: how long idle workers spin, in us
            so.add_session_config_entry("session.intra_op.spin_duration_us", str(options["spin"]))
        if options.get("stop"):  # workers stop spinning when the run returns
            so.add_session_config_entry("session.force_spinning_stop", "1")
    return ort.InferenceSession(str(graph), so, providers=["CPUExecutionProvider"])


def session(embedder: Any, options: dict[str, Any] | None, graph: str = "float32") -> Any:
    """A copy of `embedder` that embeds every cue with one session of these settings, on the model's
    float32 graph (the peers') or on hebbs' int8 copy of it (its cue graph, docs/embedding.md)."""
    path = embedder.onnx_path if graph == "float32" else embedder._cues().path
    other = copy.copy(embedder)
    other._memories = _Sessions(path, embedder._threads, ort_session(path, options), one_by_one=graph == "int8")
    other.cue_session_policy, other.cue_graph = "never", "float32"  # every text through the session above
    return other


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--passages", type=int, default=10_000)
    parser.add_argument("--cues", type=int, default=400)
    parser.add_argument("--block", type=int, default=10)
    parser.add_argument("--remembers", type=int, default=200)
    parser.add_argument("--workdir", type=Path, default=None, help="kept after the run when given")
    args = parser.parse_args()
    import chromadb
    import hnswlib

    passages, cues = corpus(args.passages, args.cues)
    long_cues = paragraphs(args.cues)
    limit_blas_threads(1)
    work = args.workdir or Path(tempfile.mkdtemp(prefix="hebbs-e2e-"))
    reuse = (work / "built").is_file()
    if not reuse and args.workdir and work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True, exist_ok=True)
    batch = get_embedder()
    print(f"{len(passages):,} passages, {len(cues)} cues; {harness.machine_note()} (shared machine)")

    engine = Engine.open(work / "vault")
    if reuse:
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

    settings = {"onnxruntime default (spinning)": None,
                "2 threads, spinning off": {"threads": 2, "spin": False},
                "1 thread": {"threads": 1, "spin": False},
                "2 threads, spinning 100 us": {"threads": 2, "spin": 100},
                "2 threads, spinning 100 us, stopped after the run (hebbs' cue session)":
                    {"threads": 2, "spin": 100, "stop": True}}
    embedders = {label: session(batch, options) for label, options in settings.items()}
    int8_settings = ("onnxruntime default (spinning)", "2 threads, spinning off",
                     "2 threads, spinning 100 us, stopped after the run (hebbs' cue session)")
    embedders |= {f"int8 copy, {label}": session(batch, settings[label], "int8") for label in int8_settings}
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
    cpu_ms: dict[str, list[float]] = {}
    chosen = count_cue_sessions(engine.embedder)
    # What is loaded so far lives to the end, as the daemon's model and modules do: frozen as the
    # daemon freezes them once its model is loaded (daemon/server.py), for every system alike.
    gc.freeze()
    timings = blocks(systems, len(cues), args.block, cpu=cpu_ms)
    single_texts = dict(chosen)

    stats = {label: (harness.percentile(ms, 50), harness.percentile(ms, 99)) for label, ms in timings.items()}
    short_raw = [label for label in stats if label.startswith("raw hnswlib") and "paragraph" not in label]
    # The floor: the fastest onnxruntime setting of the graph every peer uses; the int8 floor: of hebbs' cue graph.
    floor_label = min((label for label in short_raw if "int8" not in label), key=lambda label: stats[label][0])
    int8_floor_label = min((label for label in short_raw if "int8" in label), key=lambda label: stats[label][0])
    floor, int8_floor = stats[floor_label], stats[int8_floor_label]

    # Single remembers, interleaved one by one; each system embeds its own text.
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
    write_ms = harness.interleaved(writes, args.remembers)

    cpu = {label: idle_cpu(emb.embed_query, cues[0]) for label, emb in embedders.items()}
    cpu["hebbs' cue embedder"] = idle_cpu(engine.embedder.embed_query, cues[0])

    families = rocksdb_families(engine)
    open_size = du(work / "vault")
    engine.close()
    parts = vault_parts(work / "vault")
    sizes = {"raw hnswlib": du(work / "hnswlib.bin"), "Chroma": du(work / "chroma"), "hebbs": du(work / "vault")}

    print(f"\nend to end (embed the cue + search, top {TOP_K}), {len(cues)} cues per system in blocks of "
          f"{args.block}; floor: {floor_label}; int8 floor: {int8_floor_label}")
    cpu_p50 = {label: harness.percentile(ms, 50) for label, ms in cpu_ms.items()}
    print("| system | e2e p50 ms | p99 ms | p50 / floor | p99 / floor | p50 / int8 floor | p99 / int8 floor "
          "| CPU p50 ms | CPU / floor's | disk MB |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for label, (p50, p99) in stats.items():
        disk = sizes["raw hnswlib"] if label.startswith("raw") else sizes["Chroma"] if label.startswith("Chroma") \
            else sizes["hebbs"]
        print(f"| {label} | {p50:.2f} | {p99:.2f} | {p50 / floor[0]:.2f}x | {p99 / floor[1]:.2f}x | "
              f"{p50 / int8_floor[0]:.2f}x | {p99 / int8_floor[1]:.2f}x | "
              f"{cpu_p50[label]:.2f} | {cpu_p50[label] / cpu_p50[floor_label]:.2f}x | {mb(disk):.1f} |")
    short, long = stats["hebbs default recall"][0], stats["hebbs default recall, paragraph cue"][0]
    raw_long = stats["raw hnswlib ef=50, paragraph cue: int8 copy, 2 threads, spinning off"][0]
    raw_short = stats["raw hnswlib ef=50, cue: int8 copy, 2 threads, spinning off"][0]
    short32 = stats["hebbs default recall, float32 cue graph"][0]
    long32 = stats["hebbs default recall, paragraph cue, float32 cue graph"][0]
    print(f"\nhebbs' single texts in these blocks went through its {', '.join(f'{label}: {n}' for label, n in single_texts.items())}")
    print(f"\nparagraph cues (median {sorted(len(c.split()) for c in long_cues)[len(long_cues) // 2]} words) over "
          f"short ones (median {sorted(len(c.split()) for c in cues)[len(cues) // 2]}) at p50: hebbs default recall "
          f"{long / short:.2f}x ({long32 / short32:.2f}x with the float32 cue graph); raw hnswlib with the same "
          f"(int8) embedding {raw_long / raw_short:.2f}x; the paragraph path's own work past its embedding and "
          f"search {long - raw_long:.2f} ms against {short - raw_short:.2f} ms")
    print(f"\nsingle write p50 / p99 ms ({args.remembers} each, interleaved; the text embedded in each):")
    for label, ms in write_ms.items():
        print(f"  {label:<40} {harness.percentile(ms, 50):7.2f} / {harness.percentile(ms, 99):7.2f}")
    print("\nCPU per request + 0.5 s idle (ms of CPU; the request itself costs a few):")
    for label, ms in cpu.items():
        print(f"  {label:<40} {ms:6.1f}")
    print(f"\nthe vault on disk: {mb(open_size):.1f} MB open, {mb(sizes['hebbs']):.1f} MB after close")
    for label, size in parts:
        print(f"  {label:<34} {mb(size):7.2f} MB")
    print("  RocksDB logical bytes by family (keys + values, before compression):")
    for family, size in families:
        if size:
            print(f"    {family:<22} {mb(size):7.2f} MB")
    harness.write_result("bench_e2e", {"e2e": {k: {"p50": v[0], "p99": v[1], "cpu_p50": cpu_p50[k]} for k, v in stats.items()},
                                       "floor": floor_label, "int8_floor": int8_floor_label, "disk_bytes": sizes,
                                       "writes_p50": {k: harness.percentile(v, 50) for k, v in write_ms.items()},
                                       "idle_cpu_ms": cpu, "vault_parts": dict(parts),
                                       "hebbs_single_texts": single_texts})
    if not args.workdir:
        shutil.rmtree(work, ignore_errors=True)
    print(f"\n{harness.machine_note()} at the end")


if __name__ == "__main__":
    main()
