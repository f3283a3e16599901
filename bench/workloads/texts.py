"""Synthetic texts of an exact token length, and the model's raw embedding throughput on them."""

from __future__ import annotations

import time

import numpy as np

from hebbs.embedding.embed import Embedder


# Single-wordpiece words, so a text of k words is exactly k + 2 tokens with [CLS] and [SEP].
WORDS = (
    "memory agent note recall meeting project plan user team data time work idea code test "
    "review design system model file query result change issue answer reason event place city"
).split()
BATCH = 64


def synthetic_texts(n: int, tokens: int, seed: int = 0) -> list[str]:
    """n distinct texts of ``tokens`` tokens each (special tokens included) for the MiniLM vocabulary."""
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(WORDS, size=max(tokens - 2, 1))) for _ in range(n)]


def embedding_throughput(embedder: Embedder, tokens: int, n: int) -> float:
    """Texts per second embedding ``n`` texts of ``tokens`` tokens, in calls of 64 texts."""
    texts = synthetic_texts(n, tokens)
    embedder.embed(texts[:BATCH])  # warm-up: first run allocates onnxruntime's buffers
    start = time.perf_counter()
    for i in range(0, n, BATCH):
        embedder.embed(texts[i : i + BATCH])
    return n / (time.perf_counter() - start)
