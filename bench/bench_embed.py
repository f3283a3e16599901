"""Embedding benchmark: throughput at 64/256 tokens, short-query latency, and the thread-settings effect.

    .venv/bin/python -m bench.bench_embed [--n 128] [--queries 200] [--vectors 100000]

Prints each figure twice: with hebbs' onnxruntime settings (no spin-waiting, one inter-op thread)
and with onnxruntime's defaults, then a "query + dense search" loop (embed a query, score it
against a matrix of stored vectors with numpy) for each combination of those settings and of
BLAS threads, which is where the settings matter. Other benchmarks import
:func:`embedding_throughput`.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext

import numpy as np

from bench.harness import percentile
from hebbs.embedding.embed import Embedder, limit_blas_threads
from bench.workloads.texts import BATCH, WORDS, embedding_throughput


def _percentiles(samples: list[float]) -> tuple[float, float]:
    ms = np.asarray(samples) * 1e3
    return percentile(ms, 50), percentile(ms, 99)


def query_latency(embedder: Embedder, n: int, after: Callable[[np.ndarray], object] | None = None) -> tuple[float, float]:
    """p50/p99 ms of embed_one on short queries (plus ``after(vector)``, e.g. a dense search)."""
    queries = [f"what did we decide about the {w} last week" for w in WORDS]
    samples = []
    for i in range(n + 10):
        t0 = time.perf_counter()
        v = embedder.embed_one(queries[i % len(queries)])
        if after is not None:
            after(v)
        if i >= 10:  # skip warm-up
            samples.append(time.perf_counter() - t0)
    return _percentiles(samples)


def ort_defaults_embedder(reference: Embedder) -> Embedder:
    """The same model in a session with onnxruntime's default options (spinning workers etc.)."""
    import onnxruntime as ort

    from hebbs.embedding.embed import _registry, _wheel_model_dir

    entry = _registry()["models"][reference.model_id]
    session = ort.InferenceSession(str(reference.onnx_path), providers=["CPUExecutionProvider"])
    return Embedder(
        session=session,
        tokenizer_path=_wheel_model_dir(entry) / "tokenizer.json",
        model_id=reference.model_id,
        max_tokens=reference.max_tokens,
        pooling="none",
        prenormalized=True,
        dim=reference.dim,
        onnx_path=reference.onnx_path,
    )


@contextmanager
def _blas(n: int | None) -> Iterator[None]:
    with limit_blas_threads(n) if n else nullcontext():
        yield


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=128, help="texts per throughput run")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--vectors", type=int, default=100_000, help="stored vectors for the dense-search loop")
    args = ap.parse_args()

    t0 = time.perf_counter()
    hebbs_e = Embedder.load()
    print(f"model {hebbs_e.model_id} dim={hebbs_e.dim} loaded in {time.perf_counter() - t0:.2f}s; cpus={os.cpu_count()}")
    default_e = ort_defaults_embedder(hebbs_e)
    variants = {"hebbs settings": hebbs_e, "onnxruntime defaults": default_e}

    for label, e in variants.items():
        tp64 = embedding_throughput(e, 64, args.n)
        tp256 = embedding_throughput(e, 256, max(args.n // 2, BATCH))
        p50, p99 = query_latency(e, args.queries)
        print(f"{label:22s} 64 tok: {tp64:6.1f} texts/s   256 tok: {tp256:5.1f} texts/s   query p50 {p50:5.2f} ms  p99 {p99:5.2f} ms")

    matrix = np.random.default_rng(1).standard_normal((args.vectors, hebbs_e.dim)).astype(np.float32)

    def dense_search(v: np.ndarray) -> np.ndarray:
        scores = matrix @ v
        return np.argpartition(-scores, 10)[:10]

    print(f"query + dense search over {args.vectors} vectors:")
    for label, e in variants.items():
        for blas in (None, 1):
            with _blas(blas):
                p50, p99 = query_latency(e, args.queries, dense_search)
            print(f"  {label:22s} BLAS threads={blas or 'default':7}  p50 {p50:6.2f} ms  p99 {p99:6.2f} ms")


if __name__ == "__main__":
    main()
