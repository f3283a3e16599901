"""The baselines hebbs' default recall is measured against, computed outside hebbs in the same run:
Okapi BM25 (k1 1.2, b 0.75, hebbs' tokenizer), dense similarity with the same model (exact search,
numpy) and their reciprocal rank fusion (k = 60). Plus the ranking metrics the quality benches share.

The corpus vectors are cached under harness.cache("emb") ($HEBBS_BENCH_CACHE/emb) keyed by the model and
a hash of the texts: only for the baselines; hebbs itself always embeds through its own indexer.
"""

from __future__ import annotations

import hashlib
import math
from collections import Counter
from collections.abc import Sequence

import numpy as np
from scipy import sparse

from bench.harness import cache
from hebbs.index.lexical import tokenize

CACHE = cache("emb")
RRF_K = 60


class BM25:
    def __init__(self, texts: Sequence[str], k1: float = 1.2, b: float = 0.75) -> None:
        self.vocab: dict[str, int] = {}
        rows, cols, vals = [], [], []
        lengths = np.zeros(len(texts))
        for i, text in enumerate(texts):
            counts = Counter(tokenize(text))
            lengths[i] = sum(counts.values())
            for term, tf in counts.items():
                rows.append(i)
                cols.append(self.vocab.setdefault(term, len(self.vocab)))
                vals.append(tf)
        tf = sparse.csr_matrix((vals, (rows, cols)), shape=(len(texts), len(self.vocab)), dtype=np.float64)
        df = np.bincount(cols, minlength=len(self.vocab))
        self.idf = np.log(1 + (len(texts) - df + 0.5) / (df + 0.5))
        norm = k1 * (1 - b + b * lengths / max(lengths.mean(), 1e-9))
        tf = tf.tocoo()
        weighted = tf.data * (k1 + 1) / (tf.data + norm[tf.row])
        self.matrix = sparse.csc_matrix((weighted, (tf.row, tf.col)), shape=tf.shape)

    def scores(self, query: str) -> np.ndarray:
        terms = [self.vocab[t] for t in dict.fromkeys(tokenize(query)) if t in self.vocab]
        if not terms:
            return np.zeros(self.matrix.shape[0])
        return np.asarray(self.matrix[:, terms] @ self.idf[terms]).ravel()


def embed_cached(embedder, texts: Sequence[str]) -> np.ndarray:
    digest = hashlib.sha256("\x00".join(texts).encode("utf-8", "surrogatepass")).hexdigest()[:24]
    path = CACHE / embedder.model_id.replace("/", "_") / f"{digest}.npy"
    if path.exists():
        return np.load(path)
    vectors = np.asarray(embedder.embed(list(texts)), dtype=np.float32)
    path.parent.mkdir(parents=True, exist_ok=True)
    np.save(path, vectors)
    return vectors


def ranking(scores: np.ndarray, depth: int, positive: bool = False) -> list[int]:
    depth = min(depth, len(scores))
    top = np.argpartition(-scores, depth - 1)[:depth]
    order = [int(i) for i in top[np.argsort(-scores[top], kind="stable")]]
    return [i for i in order if scores[i] > 0] if positive else order


def rrf(rankings: Sequence[Sequence[int]], k: int = RRF_K) -> list[int]:
    fused: dict[int, float] = {}
    for r in rankings:
        for rank, i in enumerate(r):
            fused[i] = fused.get(i, 0.0) + 1.0 / (k + rank + 1)
    return sorted(fused, key=lambda i: -fused[i])


def dedupe(items: Sequence) -> list:
    return list(dict.fromkeys(x for x in items if x is not None))


def hit_at(ranked: Sequence, relevant: set, k: int) -> float:
    return float(any(x in relevant for x in ranked[:k]))


def mrr_at(ranked: Sequence, relevant: set, k: int = 10) -> float:
    for n, x in enumerate(ranked[:k]):
        if x in relevant:
            return 1.0 / (n + 1)
    return 0.0


def ndcg_at(ranked: Sequence, relevant: set, k: int = 10) -> float:
    dcg = sum(1.0 / math.log2(n + 2) for n, x in enumerate(ranked[:k]) if x in relevant)
    ideal = sum(1.0 / math.log2(n + 2) for n in range(min(k, len(relevant))))
    return dcg / ideal if ideal else 0.0


def recall_at(ranked: Sequence, relevant: set, k: int) -> float:
    return len(relevant & set(ranked[:k])) / len(relevant) if relevant else 0.0
