"""pgvector HNSW top-10 with the index larger than shared_buffers and fitting, cold and warm."""

from __future__ import annotations

import os
import statistics
import time
import uuid
from pathlib import Path

import numpy as np

from bench.harness import percentile
from scripts.postgres_local import Cluster

from bench.workloads.facts import sentences
from bench.workloads.team.common import timed


def _real_like_vectors(embedder, count: int, queries: int, seed: int = 7) -> tuple[np.ndarray, np.ndarray]:
    """count + queries unit vectors shaped like the model's: each a mix of two real embeddings (of the
    latency bench's sentences) plus a little noise, so they cluster as real vectors do without
    embedding `count` texts on two cores."""
    rng = np.random.default_rng(seed)
    base = embedder.embed(sentences(4000, seed=3)).astype(np.float32)
    total = count + queries
    i, j = rng.integers(0, len(base), total), rng.integers(0, len(base), total)
    mixed = base[i] + rng.uniform(0.2, 0.8, (total, 1)).astype(np.float32) * base[j]
    mixed += rng.normal(0, 0.02, mixed.shape).astype(np.float32)
    mixed /= np.linalg.norm(mixed, axis=1, keepdims=True)
    return mixed[:count], mixed[count:]


def _evict_from_os_cache(files: list[Path]) -> None:
    """Drop these relation files (and their further segments) from the OS page cache (posix_fadvise
    DONTNEED): a cold read without dropping every other process's cache on a shared machine."""
    for path in files:
        for segment in [path, *sorted(path.parent.glob(path.name + ".*"))]:
            if segment.exists():
                fd = os.open(segment, os.O_RDONLY)
                try:
                    os.fsync(fd)
                    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                finally:
                    os.close(fd)


def buffers(work: Path, embedder, count: int, queries: int) -> dict:
    """pgvector top-10 with its HNSW index larger than shared_buffers, and fitting, cold and warm."""
    from hebbs.store.postgres import PgStore
    from hebbs.store.storage import VECTOR_PREFIX, id_bytes

    vectors, cues = _real_like_vectors(embedder, count, queries)
    dim = vectors.shape[1]
    cluster = Cluster(work / "buffers-pg", fast=False)
    out: dict = {}
    try:
        server = cluster.start_primary()
        store = PgStore.open(server.url, "buffers", work / "buffers-vault")
        try:
            started = time.perf_counter()
            keys = [VECTOR_PREFIX + uuid.uuid4().bytes for _ in range(count)]
            with store.pool.connection() as conn, conn.cursor() as cur:
                with cur.copy("COPY hebbs.vectors (vault, key, embedding) FROM STDIN") as copy:
                    for key, row in zip(keys, vectors):
                        copy.write_row((store.vault_id, key, row))
            with store.pool.connection() as conn:
                conn.execute("SET maintenance_work_mem = '1GB'")
                conn.execute(f"CREATE INDEX vectors_hnsw_{store.vault_id}_vector ON hebbs.vectors USING hnsw "
                             f"((embedding::vector({dim})) vector_cosine_ops) WHERE vault = {store.vault_id}")
                conn.execute("VACUUM ANALYZE hebbs.vectors")
            index = f"hebbs.vectors_hnsw_{store.vault_id}_vector"
            out["index_mb"] = store._run(f"SELECT pg_relation_size('{index}')")[0][0] / 2**20
            out["table_mb"] = store._run("SELECT pg_total_relation_size('hebbs.vectors')")[0][0] / 2**20 - out["index_mb"]
            out["build_s"] = time.perf_counter() - started
            row_of = {key: n for n, key in enumerate(keys)}
            exact = [set(np.argsort(-(vectors @ q))[:10]) for q in cues]
        finally:
            store.close()
        files = [server.data / server.sql(f"SELECT pg_relation_filepath('{r}')") for r in (index, "hebbs.vectors")]
        for setting in ("16MB", "512MB"):
            server.sql(f"ALTER SYSTEM SET shared_buffers = '{setting}'")
            server.stop("fast")
            _evict_from_os_cache(files)
            server.start()
            store = PgStore.open(server.url, "buffers", work / "buffers-vault")
            try:
                def stat() -> tuple[int, int]:
                    return tuple(store._run("SELECT idx_blks_hit, idx_blks_read FROM pg_statio_user_indexes "
                                            f"WHERE indexrelname = '{index.split('.')[1]}'")[0])
                result = {}
                for phase in ("cold", "warm 1", "warm 2"):
                    hit0, read0 = stat()
                    times = [timed(lambda: store.nearest(q, 10, dim, ef=100)) for q in cues]
                    time.sleep(11)  # a backend flushes its statistics once idle, up to 10 s later
                    hit1, read1 = stat()
                    result[phase] = {"p50": percentile(times, 50), "p99": percentile(times, 99),
                                     "blocks_from_outside": (read1 - read0) / max(1, (hit1 - hit0) + (read1 - read0))}
                found = [store.nearest(q, 10, dim, ef=100) for q in cues]
                result["recall@10"] = statistics.fmean(
                    len({row_of[VECTOR_PREFIX + id_bytes(mid)] for mid, _ in f} & e) / 10 for f, e in zip(found, exact))
            finally:
                store.close()
            out[f"shared_buffers {setting}"] = result
        return out
    finally:
        cluster.remove()
