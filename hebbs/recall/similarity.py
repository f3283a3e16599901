"""Similarity recall: the nearest memories to the cue's embedding (HNSW, cosine)."""

from __future__ import annotations

from ..core.open_vault import OpenVault
from .fusion import Candidate, Candidates
from .query import Found, Query


def recall(vault: OpenVault, query: Query) -> Found:
    return candidates(query.cue_hits(vault)), []


def candidates(hits: list[tuple[str, float]]) -> Candidates:
    return {mid: Candidate(max(0.0, sim), ["similarity"], {"similarity": round(sim, 6), "similarity_rank": rank + 1})
            for rank, (mid, sim) in enumerate(hits)}
