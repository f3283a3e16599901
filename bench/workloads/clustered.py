"""Vectors and cues for vaults too large to embed (bench_scale, bench_open): random but clustered
(centres plus Gaussian noise, normalised), random-word texts; and the clean-open figures."""

from __future__ import annotations

import random
import string
import time
from pathlib import Path

import numpy as np

CENTRES = 2000
NOISE = 0.6  # per-dimension noise scale relative to a unit centre: clusters overlap like real topics do
SEED = 5


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def clustered(rng: np.random.Generator, centres: np.ndarray, n: int) -> np.ndarray:
    picks = rng.integers(0, len(centres), n)
    vectors = centres[picks] + rng.standard_normal((n, centres.shape[1])).astype(np.float32) * (NOISE / np.sqrt(centres.shape[1]))
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors.astype(np.float32)


def centres_for(dim: int) -> np.ndarray:
    centres = np.random.default_rng(SEED).standard_normal((CENTRES, dim)).astype(np.float32)
    return centres / np.linalg.norm(centres, axis=1, keepdims=True)


def vocabulary() -> list[str]:
    rng = random.Random(SEED)
    return ["".join(rng.choices(string.ascii_lowercase, k=rng.randint(3, 9))) for _ in range(3000)]


def cues(dim: int, count: int) -> tuple[list[str], np.ndarray]:
    rng = random.Random(SEED + 1)
    vocab = vocabulary()
    texts = [" ".join(rng.choices(vocab, k=rng.randint(3, 8))) for _ in range(count)]
    return texts, clustered(np.random.default_rng(SEED + 1), centres_for(dim), count)


def open_and_recall_once(path: Path, embedder, cue: str):
    """Engine.open, then one similarity-only recall with relevance-only weights: (engine, seconds to
    open, seconds to open and answer), the clean-open figures every bench here reports."""
    from hebbs import Engine
    from hebbs.schema import ScoringWeights

    began = time.perf_counter()
    engine = Engine.open(path, embedder=embedder)
    opened = time.perf_counter() - began
    engine.recall(cue, strategies=["similarity"], reinforce=False,
                  weights=ScoringWeights(relevance=1.0, recency=0.0, importance=0.0, reinforcement=0.0))
    return engine, opened, time.perf_counter() - began
