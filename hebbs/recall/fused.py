"""The default recall for a cue: the similarity and lexical channels fused into one relevance (fusion.fuse)."""

from __future__ import annotations

from ..store.open_vault import OpenVault
from .fusion import fuse, neighbor_support, sibling_support
from .query import Found, Query


def recall(vault: OpenVault, query: Query) -> Found:
    sim_hits = query.cue_hits(vault)
    lex_hits = vault.lexical_hits(query.cue, query.limit, query.allowed)
    params = query.settings.fusion
    fused = fuse(query.cue, sim_hits, lex_hits, params,
                 words_of=lambda mid: getattr(vault.entry(mid), "words", 1))
    sibling_support(fused, lambda mid: getattr(vault.entry(mid), "file", None),
                    params.sibling_weight, params.sibling_count)
    neighbor_support(fused, lambda ids: query.stored_vectors(vault, ids), params.neighbor_weight, params.neighbor_count, params.neighbor_pool)
    return fused, []
