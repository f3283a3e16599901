"""The default recall for a cue: the similarity and lexical channels fused into one relevance (fusion.fuse)."""

from __future__ import annotations

import functools

from ..config import FusionParams
from ..index.lexical import tokenize
from ..core.memory_text import lexical_text
from ..core.open_vault import Hits, OpenVault
from .fusion import Candidates, feedback_terms, fuse, in_play, neighbor_support, sibling_support
from .query import Found, Query, cached_memories


def recall(vault: OpenVault, query: Query) -> Found:
    lexical = functools.partial(vault.lexical_hits, query.cue, query.limit, query.allowed)
    # The lexical search reads only the cue's words, so it runs on the vault's helper thread while this
    # thread embeds the cue: onnxruntime releases the GIL and leaves part of two cores idle. A search
    # still waiting for the helper when the embedding is done (another recall holds it) is taken back
    # and run here, so no recall waits for another's.
    beside = vault.beside(lexical) if query.embedding_pending else None
    sim_hits = query.cue_hits(vault)
    lex_hits = lexical() if beside is None or beside.cancel() else beside.result()
    params = query.settings.fusion
    # Catalog fields read for all candidates in one step each, not one entry per candidate.
    words = _words(vault, sim_hits, lex_hits)
    cue_terms = feedback_cue_terms(query, params)
    # With feedback, this first fusion only picks the candidates whose terms expand the cue: its
    # relevances without the details the answer would carry.
    same = lexical_hits_hold_the_same(vault, query, lex_hits)
    fused = fuse(query.cue, sim_hits, lex_hits, params, words_of=words.__getitem__, details=cue_terms is None,
                 same_words=same)
    expanded = None if cue_terms is None else feedback_hits(vault, query, fused, params, cue_terms)
    if expanded is not None:
        words.update(_words(vault, [], expanded))
        fused = fuse(query.cue, sim_hits, expanded, params, words_of=words.__getitem__)
        for cand in fused.values():
            cand.details["lexical_feedback"] = True  # its bm25 score is the expanded cue's
    if params.sibling_weight > 0 and params.sibling_count > 0:
        files = dict(zip(fused, vault.files_of(list(fused))))
        sibling_support(fused, files.__getitem__, params.sibling_weight, params.sibling_count)
    neighbor_support(fused, lambda ids: query.stored_vectors(vault, ids), params.value("neighbor_weight"), params.neighbor_count, params.neighbor_pool)
    return fused, []


def lexical_hits_hold_the_same(vault: OpenVault, query: Query, lex_hits: Hits) -> bool:
    """Whether every lexical hit holds the same cue words (fusion.fuse's same_words): the cue has one
    word the vault holds, or each word it holds is in as many memories as there are hits (the search
    found them all, in scope: a word's memories are then exactly the hits)."""
    terms = list(dict.fromkeys(tokenize(query.cue or "")))
    if not lex_hits or not terms:
        return False
    held = [n for n in vault.lexical_index.doc_freqs(terms).values() if n > 0]
    return len(held) == 1 or (len(lex_hits) < query.limit and all(n == len(lex_hits) for n in held))


def _words(vault: OpenVault, sim_hits: Hits, lex_hits: Hits) -> dict[str, int]:
    """Word counts of the memories fusion's length rule looks at: each channel's top IN_PLAY."""
    ids = [mid for mid, _ in in_play(sim_hits, lex_hits)]
    return {mid: 1 if count is None else count for mid, count in zip(ids, vault.words_of(ids))}


def feedback_cue_terms(query: Query, params: FusionParams) -> list[str] | None:
    """The cue's index terms when lexical feedback applies to it (at least feedback_min_terms of
    them, and feedback on); None otherwise."""
    if params.feedback_weight <= 0 or params.feedback_terms <= 0:
        return None
    cue_terms = list(dict.fromkeys(tokenize(query.cue or "")))
    return cue_terms if len(cue_terms) >= params.feedback_min_terms else None


def feedback_hits(vault: OpenVault, query: Query, fused: Candidates, params: FusionParams,
                  cue_terms: list[str] | None = None) -> Hits | None:
    """A second lexical search with the cue expanded by its best candidates' terms (fusion.feedback_terms),
    for cues of at least feedback_min_terms index terms; None when the cue is too short or it is off."""
    if cue_terms is None:
        cue_terms = feedback_cue_terms(query, params)
        if cue_terms is None:
            return None
    best = sorted(fused, key=lambda mid: fused[mid].relevance, reverse=True)[:params.feedback_docs]
    top = [(fused[mid].relevance, tokenize(lexical_text(memory)))
           for mid, memory in zip(best, cached_memories(vault, query.memories, best)) if memory is not None]
    weights = feedback_terms(cue_terms, top, params.feedback_terms, params.feedback_weight)
    return vault.lexical_hits_weighted(weights, query.limit, query.allowed)
