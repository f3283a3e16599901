"""The default recall for a cue: the similarity and lexical channels fused into one relevance (fusion.fuse)."""

from __future__ import annotations

from ..store.open_vault import OpenVault
from .fusion import fuse, neighbor_support, sibling_support
from .query import Found, Query


def recall(vault: OpenVault, query: Query) -> Found:
    sim_hits = query.cue_hits(vault)
    lex_hits = vault.lexical_hits(query.cue, query.limit, query.allowed)
    params = query.settings.fusion
    # Catalog fields read for all candidates in one step each, not one entry per candidate.
    in_play = [mid for mid, _ in sim_hits[:10] + lex_hits[:10]]
    words = {mid: 1 if count is None else count for mid, count in zip(in_play, vault.words_of(in_play))}
    fused = fuse(query.cue, sim_hits, lex_hits, params, words_of=words.__getitem__)
    if params.sibling_weight > 0 and params.sibling_count > 0:
        files = dict(zip(fused, vault.files_of(list(fused))))
        sibling_support(fused, files.__getitem__, params.sibling_weight, params.sibling_count)
    neighbor_support(fused, lambda ids: query.stored_vectors(vault, ids), params.neighbor_weight, params.neighbor_count, params.neighbor_pool)
    return fused, []
