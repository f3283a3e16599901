"""Similarity recall: the nearest memories to the cue's embedding (HNSW, cosine)."""

from __future__ import annotations

from ..store.open_vault import OpenVault
from .fusion import Candidate, Candidates
from .query import Found, Query


def recall(vault: OpenVault, query: Query) -> Found:
    return candidates(query.cue_hits(vault)), []


def candidates(hits: list[tuple[str, float]]) -> Candidates:
    # Built for every hit of a 50-deep search on each recall: the plainest loop is the cheapest.
    out: Candidates = {}
    for rank, (mid, sim) in enumerate(hits, 1):
        out[mid] = Candidate(sim if sim > 0.0 else 0.0, ["similarity"], {"similarity": round(sim, 6), "similarity_rank": rank})
    return out
