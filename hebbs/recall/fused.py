"""The default recall for a cue: the similarity and lexical channels fused into one relevance (fusion.fuse)."""

from __future__ import annotations

from ..config import FusionParams
from ..store.lexical_index import tokenize
from ..store.memory_text import lexical_text
from ..store.open_vault import Hits, OpenVault
from .fusion import Candidates, feedback_terms, fuse, neighbor_support, sibling_support
from .query import Found, Query


def recall(vault: OpenVault, query: Query) -> Found:
    sim_hits = query.cue_hits(vault)
    lex_hits = vault.lexical_hits(query.cue, query.limit, query.allowed)
    params = query.settings.fusion

    def words_of(mid: str) -> int:
        return getattr(vault.entry(mid), "words", 1)

    fused = fuse(query.cue, sim_hits, lex_hits, params, words_of=words_of)
    expanded = feedback_hits(vault, query, fused, params)
    if expanded is not None:
        fused = fuse(query.cue, sim_hits, expanded, params, words_of=words_of)
        for cand in fused.values():
            cand.details["lexical_feedback"] = True  # its bm25 score is the expanded cue's
    sibling_support(fused, lambda mid: getattr(vault.entry(mid), "file", None),
                    params.sibling_weight, params.sibling_count)
    neighbor_support(fused, lambda ids: query.stored_vectors(vault, ids), params.neighbor_weight, params.neighbor_count, params.neighbor_pool)
    return fused, []


def feedback_hits(vault: OpenVault, query: Query, fused: Candidates, params: FusionParams) -> Hits | None:
    """A second lexical search with the cue expanded by its best candidates' terms (fusion.feedback_terms),
    for cues of at least feedback_min_terms index terms; None when the cue is too short or it is off."""
    cue_terms = list(dict.fromkeys(tokenize(query.cue or "")))
    if params.feedback_weight <= 0 or params.feedback_terms <= 0 or len(cue_terms) < params.feedback_min_terms:
        return None
    best = sorted(fused, key=lambda mid: fused[mid].relevance, reverse=True)[:params.feedback_docs]
    top = [(fused[mid].relevance, tokenize(lexical_text(memory)))
           for mid, memory in zip(best, vault.memories_of(best)) if memory is not None]
    weights = feedback_terms(cue_terms, top, params.feedback_terms, params.feedback_weight)
    return vault.lexical_hits_weighted(weights, query.limit, query.allowed)
