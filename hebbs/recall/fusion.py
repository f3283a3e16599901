"""Candidates, how the strategies' relevances fuse, and diversity (MMR).

Every strategy (registry.py) returns {memory_id: Candidate} with a relevance in 0..1. The engine
merges them, applies the composite score (scoring.py), and orders the result.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from collections.abc import Callable, Sequence

import functools
import heapq
import math
import re

import numpy as np

from ..config import FusionParams


@dataclass(slots=True)
class Candidate:
    relevance: float
    strategies: list[str] = field(default_factory=list)
    details: dict = field(default_factory=dict)


Candidates = dict[str, Candidate]

# How many of each channel's best hits are "in play" for the length rule (lexical_weight_for): the
# memories a top-10 answer is drawn from.
IN_PLAY = 10


def in_play(sim_hits: list[tuple[str, float]], lex_hits: list[tuple[str, float]]) -> list[tuple[str, float]]:
    """Each channel's IN_PLAY best hits, the dense channel's first."""
    return sim_hits[:IN_PLAY] + lex_hits[:IN_PLAY]


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


def fuse(cue: str, sim_hits: list[tuple[str, float]], lex_hits: list[tuple[str, float]],
         params: FusionParams, words_of: Callable[[str], int] | None = None, *,
         details: bool = True, same_words: bool = False) -> Candidates:
    """Score fusion of the dense and lexical channels into one relevance in 0..1.

    Each channel's scores are min-max normalized over its own top hits for this query: the best
    hit gets 1, the normalization_depth-th gets 0. So a channel counts for how far a memory stands
    out from that channel's background, not for its rank alone (plain RRF gives a weak second
    place the same credit as a strong one) nor for its raw scale (BM25 has none; cosines bunch up).
    The two are then weighted, lexical more when the cue contains an identifier, and less when the
    memories in play are long (see lexical_weight_for). Past the normalization depth, where both
    channels give 0, a small reciprocal-rank floor orders the tail (FusionParams.rank_weight).
    details=False: the same relevances without strategies or details (a first pass that only picks
    the best candidates).

    same_words: every lexical hit holds the same cue words (lexical_hits_hold_the_same). When the
    memories in play are short too (a word occurs once in each), BM25 then tells them apart by
    their length alone, and min-max stretched that to the channel's whole 0..1: among seven facts
    about Acme, "Acme is on the Enterprise plan" outranked "Acme's main contact is Dana Lee" for
    "who should I talk to at Acme" for being the shortest. There every hit gets the channel's 1:
    it holds the words, and the dense channel decides among them.
    """
    if has_identifier(cue):
        wl = params.value("identifier_lexical_weight")
    else:
        wl = lexical_weight_for(params, [words_of(mid) for mid, _ in in_play(sim_hits, lex_hits)]
                                if words_of is not None else [])
    sim = _min_max(sim_hits[:params.normalization_depth])
    if same_words and wl == params.value("lexical_weight"):
        lex = dict.fromkeys((mid for mid, _ in lex_hits[:params.normalization_depth]), 1.0)
    else:
        lex = _min_max(lex_hits[:params.normalization_depth])
    sim_rank = {mid: r for r, (mid, _) in enumerate(sim_hits)}
    lex_rank = {mid: r for r, (mid, _) in enumerate(lex_hits)}
    out: Candidates = {}
    sim_weight = 1.0 - wl
    rank_weight, rank_k = params.rank_weight, params.rank_k

    def relevance_of(mid: str) -> float:
        relevance = wl * lex.get(mid, 0.0) + sim_weight * sim.get(mid, 0.0)
        if rank_weight > 0:
            # A floor for the tail past the normalization depth, where both channels give 0: reciprocal
            # rank over both, scaled below any head hit's fused score (FusionParams.rank_weight).
            at_s, at_l = sim_rank.get(mid), lex_rank.get(mid)
            relevance = max(relevance, rank_weight * ((0.0 if at_s is None else 1.0 / (rank_k + at_s + 1))
                                                      + (0.0 if at_l is None else 1.0 / (rank_k + at_l + 1))))
        return relevance

    if not details:
        for mid in [*sim_rank, *(mid for mid in lex_rank if mid not in sim_rank)]:
            out[mid] = Candidate(min(1.0, max(0.0, relevance_of(mid))))
        return out
    # Similarity hits in their order, then lexical-only ones in theirs: a fixed order, because ties in
    # relevance keep it (neighbour support's pool, rank's ties). A set union's order followed the
    # process's string hashes, so the same recall could answer differently in another process.
    for mid in [*sim_rank, *(mid for mid in lex_rank if mid not in sim_rank)]:
        relevance = relevance_of(mid)
        details: dict = {"lexical_weight": wl}
        at_sim, at_lex = sim_rank.get(mid), lex_rank.get(mid)
        if at_sim is not None:
            found = ["similarity"] if at_lex is None else ["similarity", "lexical"]
            details["similarity"] = round(sim_hits[at_sim][1], 6)
            details["similarity_rank"] = at_sim + 1
        else:
            found = ["lexical"]
        if at_lex is not None:
            details["bm25"] = round(lex_hits[at_lex][1], 4)
            details["lexical_rank"] = at_lex + 1
        out[mid] = Candidate(min(1.0, max(0.0, relevance)), found, details)
    return out


def lexical_weight_for(params: FusionParams, lengths: list[int]) -> float:
    """The lexical channel's weight for this query, from the length (in words) of the memories in
    play: the median over both channels' top hits. A cue word found in a 20-word memory is sharp
    evidence; in a 200-word section it is weak, and there the model's reading of the whole text is
    the better judge. lexical_weight applies up to short_words, long_lexical_weight from long_words
    on, and in between it moves linearly in log(length)."""
    short = params.value("lexical_weight")
    if not lengths:
        return short
    median = max(1, sorted(lengths)[len(lengths) // 2])
    lo, hi = params.short_words, params.long_words
    if median <= lo or hi <= lo:
        return short
    t = min(1.0, (math.log(median) - math.log(lo)) / (math.log(hi) - math.log(lo)))
    return short + t * (params.value("long_lexical_weight") - short)


def sibling_support(candidates: Candidates, group_of: Callable[[str], str | None], weight: float,
                    count: int) -> None:
    """Sections of one note support each other: a section whose note also matches the cue elsewhere
    is likelier the answer than an equally good lone match in an unrelated note. Each candidate
    with a group (its source file) gains `weight` times the relevance of its `count` best sibling
    candidates; then every relevance is rescaled so the best is at most 1. Memories without a
    file are left as they are (before the rescale), so conversations and documents are unaffected."""
    if weight <= 0 or count <= 0:
        return
    groups: dict[str, list[tuple[float, str]]] = {}
    for mid, cand in candidates.items():
        group = group_of(mid)
        if group is not None:
            groups.setdefault(group, []).append((cand.relevance, mid))
    boosted = False
    for members in groups.values():
        if len(members) < 2:
            continue
        members.sort(reverse=True)
        for rank, (relevance, mid) in enumerate(members):
            others = [r for n, (r, _) in enumerate(members[:count + 1]) if n != rank][:count]
            gain = weight * sum(others)
            if gain > 0:
                candidates[mid].relevance = relevance + gain
                candidates[mid].details["sibling_support"] = round(gain, 6)
                boosted = True
    top = max((c.relevance for c in candidates.values()), default=0.0)
    if boosted and top > 1.0:
        for cand in candidates.values():
            cand.relevance /= top


def neighbor_support(candidates: Candidates, vectors_of: Callable[[list[str]], np.ndarray], weight: float,
                     count: int, pool: int) -> None:
    """Memories alike in meaning are relevant together (the cluster hypothesis): each of the `pool`
    best candidates moves `weight` of the way towards the mean relevance of its `count` nearest
    neighbours among them, weighted by their cosine. A good match that its closest neighbours also
    support rises; a lone match that only one channel found, among candidates about something else,
    sinks. Only the pool changes, each value a convex mix of relevances in 0..1, so it stays in 0..1."""
    if weight <= 0 or count <= 0 or pool < 2 or len(candidates) < 2:
        return
    ids = list(candidates)
    relevances = [cand.relevance for cand in candidates.values()]
    order = sorted(range(len(ids)), key=relevances.__getitem__, reverse=True)[:pool]
    top = [ids[i] for i in order]
    vectors = np.asarray(vectors_of(top), dtype=np.float32)
    relevance = np.array([relevances[i] for i in order])
    sims = np.maximum(vectors @ vectors.T, 0.0)
    np.fill_diagonal(sims, 0.0)
    k = min(count, len(top) - 1)
    kth = -np.partition(-sims, k - 1, axis=1)[:, k - 1:k]
    sims = np.where(sims >= kth, sims, 0.0)
    total = sims.sum(axis=1)
    support = np.divide(sims @ relevance, total, out=np.zeros_like(relevance), where=total > 0)
    mixed = np.where(total > 0, (1.0 - weight) * relevance + weight * support, relevance)
    for mid, value, near in zip(top, mixed.tolist(), support.tolist()):
        candidates[mid].relevance = value
        candidates[mid].details["neighbor_support"] = round(near, 6)


def feedback_terms(cue_terms: list[str], top: list[tuple[float, list[str]]], count: int,
                   weight: float) -> dict[str, float]:
    """Relevance-model expansion of a cue (RM3): the cue's own terms share 1 - weight equally; the
    `count` terms heaviest in the best candidates share `weight`, each term's mass being the sum over
    candidates of the candidate's relevance times the term's share of its text. A long cue states
    its topic in many words, of which BM25 weighs each alike; its best matches tell which of those
    words, and which words it did not use, the relevant memories actually share."""
    own = list(dict.fromkeys(cue_terms))
    if not own:
        return {}
    mass: dict[str, float] = {}
    for relevance, terms in top:
        if not terms or relevance <= 0:
            continue
        share = relevance / len(terms)
        for term in terms:
            mass[term] = mass.get(term, 0.0) + share
    heaviest = heapq.nlargest(count, mass.items(), key=lambda item: (item[1], item[0]))
    total = sum(m for _, m in heaviest)
    weights = {t: (1.0 - weight) / len(own) for t in own}
    if total > 0:
        for term, m in heaviest:
            weights[term] = weights.get(term, 0.0) + weight * m / total
    return weights


_IDENTIFIER = re.compile(
    r"""(?x)
    (?<=\w)[_.](?=\w)     # snake_case, file.md, v2.3.1, ERR_CONN_RESET (not \w+[_.]\w+: quadratic on a long word)
    | (?<![\w-])--?[a-z][\w-]*   # --top-k, -v
    | \b[a-z]+[A-Z]\w*   # camelCase
    | \b[A-Za-z]+\d\w*   # letters then digits: sha256, e2e, v2
    | \b[A-Za-z][A-Za-z0-9]*-\d   # ticket and key style: PROJ-4471, ZX-4092, RFC-7231
    | `[^`]+`            # anything quoted as code
    """)


@functools.lru_cache(maxsize=128)
def has_identifier(cue: str) -> bool:
    # Cached: one recall asks about its cue in every fusion (feedback's two, the time-word pass's),
    # and the search runs over the whole cue, a paragraph's too.
    return _IDENTIFIER.search(cue) is not None


def _min_max(hits: list[tuple[str, float]]) -> dict[str, float]:
    if not hits:
        return {}
    scores = [score for _, score in hits]
    hi, lo = max(scores), min(scores)
    if hi <= lo:
        return {mid: 1.0 for mid, _ in hits}
    return {mid: (score - lo) / (hi - lo) for mid, score in hits}


def mmr_order(scores: list[float], vectors: np.ndarray, lam: float, k: int,
              duplicate_similarity: float = 1.0, apart: Sequence[tuple[int, int]] = ()) -> list[int]:
    """Maximal marginal relevance: pick, one at a time, the candidate best balancing its score
    against its similarity to what is already picked: lam = 1 would be score order, lam = 0 diversity
    alone after the best (the caller does not call it at 1). A candidate at least duplicate_similarity
    to a picked one is a restatement: it comes only after every non-duplicate. The pairs `apart`
    (indexes) disagree, a value and its newer value: however alike their words, neither restates the
    other, so neither counts as similar to the other. Returns indexes, at most k."""
    n = len(scores)
    if n == 0:
        return []
    rel = np.asarray(scores, dtype=np.float64)
    # Scores are weighted sums whose scale depends on the caller's weights; on a 0..1 scale lambda
    # means the same trade-off whatever the weights are.
    top = rel.max()
    if top > 0:
        rel = rel / top
    sims = vectors @ vectors.T
    for i, j in apart:
        sims[i, j] = sims[j, i] = 0.0
    picked: list[int] = []
    max_sim = np.full(n, 0.0)
    base = lam * rel
    spread = 1.0 - lam
    # Added to each candidate's value: -inf once picked, -2.0 once a duplicate of a pick (below any
    # non-duplicate, order kept among duplicates), else 0. Kept up to date pick by pick: the same
    # values as masking every round; a pick's duplicates come from one row of a matrix built once,
    # and the loop writes into arrays it allocated once (at top_k 100 it ran 100 rounds).
    penalty = np.where(max_sim >= duplicate_similarity, -2.0, 0.0)
    duplicate_of = np.where(sims >= duplicate_similarity, -2.0, 0.0)
    value = np.empty(n)
    for _ in range(min(k, n)):
        np.multiply(spread, max_sim, out=value)
        np.subtract(base, value, out=value)
        value += penalty
        best = int(value.argmax())
        picked.append(best)
        np.maximum(max_sim, sims[best], out=max_sim)
        np.minimum(penalty, duplicate_of[best], out=penalty)  # 0 -> -2 for its duplicates; -2 and -inf stay
        penalty[best] = -np.inf
    return picked

