"""Lexical recall: BM25 over the memories' words (tantivy)."""

from __future__ import annotations

from ..core.open_vault import OpenVault
from .fusion import Candidate, Candidates
from .query import Found, Query


def recall(vault: OpenVault, query: Query) -> Found:
    return candidates(vault.lexical_hits(query.cue, query.limit, query.allowed)), []


def candidates(hits: list[tuple[str, float]]) -> Candidates:
    """BM25 scores have no fixed scale: relevance is the score relative to this query's best hit."""
    if not hits:
        return {}
    best = hits[0][1] or 1.0
    return {mid: Candidate(score / best, ["lexical"], {"bm25": round(score, 4), "lexical_rank": rank + 1})
            for rank, (mid, score) in enumerate(hits)}
