"""Recall: the strategies that find candidates, how their relevances fuse, and diversity.

Every strategy returns {memory_id: Candidate} with a relevance in 0..1. The engine merges them,
applies the composite score (scoring.py), and orders the result.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterable

import numpy as np

from .config import FusionParams

STRATEGIES = ("similarity", "temporal", "lexical", "causal", "analogical")


@dataclass
class Candidate:
    relevance: float
    strategies: list[str] = field(default_factory=list)
    details: dict = field(default_factory=dict)


Candidates = dict[str, Candidate]


def merge(into: Candidates, found: Candidates) -> None:
    """Best relevance per memory, and every strategy that found it."""
    for memory_id, cand in found.items():
        have = into.get(memory_id)
        if have is None:
            into[memory_id] = Candidate(cand.relevance, list(cand.strategies), dict(cand.details))
            continue
        have.relevance = max(have.relevance, cand.relevance)
        have.strategies.extend(s for s in cand.strategies if s not in have.strategies)
        have.details.update(cand.details)


def similarity_candidates(hits: list[tuple[str, float]]) -> Candidates:
    return {mid: Candidate(max(0.0, sim), ["similarity"], {"similarity": round(sim, 6), "similarity_rank": rank + 1})
            for rank, (mid, sim) in enumerate(hits)}


def lexical_candidates(hits: list[tuple[str, float]]) -> Candidates:
    """BM25 scores have no fixed scale: relevance is the score relative to this query's best hit."""
    if not hits:
        return {}
    best = hits[0][1] or 1.0
    return {mid: Candidate(score / best, ["lexical"], {"bm25": round(score, 4), "lexical_rank": rank + 1})
            for rank, (mid, score) in enumerate(hits)}


def fuse(sim_hits: list[tuple[str, float]], lex_hits: list[tuple[str, float]], params: FusionParams) -> Candidates:
    """Score fusion of the dense and lexical channels.

    Each channel is normalized against its own best hit in this query, so a channel is trusted
    for how strongly its hits stand out, not for its rank list alone (plain rank fusion treats a
    weak 10th-ranked lexical hit the same as a strong one). Memories both channels rank high
    get a bonus: agreement between two unlike signals is the best evidence there is.
    """
    sim = _normalized(sim_hits)
    lex = _normalized(lex_hits)
    sim_rank = {mid: r for r, (mid, _) in enumerate(sim_hits)}
    lex_rank = {mid: r for r, (mid, _) in enumerate(lex_hits)}
    total = params.similarity_weight + params.lexical_weight
    out: Candidates = {}
    for mid in sim.keys() | lex.keys():
        s, l = sim.get(mid, 0.0), lex.get(mid, 0.0)
        relevance = (params.similarity_weight * s + params.lexical_weight * l) / total
        if sim_rank.get(mid, 1 << 30) < params.agreement_depth and lex_rank.get(mid, 1 << 30) < params.agreement_depth:
            relevance += params.agreement_bonus
        found = [name for name, channel in (("similarity", sim), ("lexical", lex)) if mid in channel]
        out[mid] = Candidate(min(1.0, relevance), found, _fusion_details(mid, sim_hits, lex_hits, sim_rank, lex_rank))
    return out


def _fusion_details(mid: str, sim_hits, lex_hits, sim_rank: dict, lex_rank: dict) -> dict:
    details: dict = {}
    if mid in sim_rank:
        details["similarity"] = round(sim_hits[sim_rank[mid]][1], 6)
        details["similarity_rank"] = sim_rank[mid] + 1
    if mid in lex_rank:
        details["bm25"] = round(lex_hits[lex_rank[mid]][1], 4)
        details["lexical_rank"] = lex_rank[mid] + 1
    return details


def _normalized(hits: list[tuple[str, float]]) -> dict[str, float]:
    if not hits:
        return {}
    best = max(score for _, score in hits)
    if best <= 0:
        return {mid: 0.0 for mid, _ in hits}
    return {mid: max(0.0, score) / best for mid, score in hits}


def rrf(rankings: Iterable[list[str]], k: int = 60) -> dict[str, float]:
    """Plain reciprocal rank fusion: the baseline the fusion above is measured against."""
    scores: dict[str, float] = {}
    for ranking in rankings:
        for rank, mid in enumerate(ranking):
            scores[mid] = scores.get(mid, 0.0) + 1.0 / (k + rank + 1)
    return scores


def mmr_order(ids: list[str], scores: list[float], vectors: np.ndarray, lam: float, k: int) -> list[int]:
    """Maximal marginal relevance: pick, one at a time, the candidate best balancing its score
    against its similarity to what is already picked. Returns indexes into ids, at most k."""
    n = len(ids)
    if n == 0:
        return []
    rel = np.asarray(scores, dtype=np.float64)
    sims = vectors @ vectors.T
    picked: list[int] = []
    max_sim = np.full(n, -np.inf)
    available = np.ones(n, dtype=bool)
    for _ in range(min(k, n)):
        penalty = np.where(np.isfinite(max_sim), max_sim, 0.0)
        value = lam * rel - (1.0 - lam) * penalty
        value[~available] = -np.inf
        best = int(np.argmax(value))
        picked.append(best)
        available[best] = False
        max_sim = np.maximum(max_sim, sims[best])
    return picked


Filter = Callable[[str], bool]
