"""Associative recall: one hop of spreading activation along CO_ACTIVATED edges (hebbs/workflows/associate.py).

Seeds are the cue's nearest memories. A partner of a seed is activated by seed similarity x
sqrt(link strength) (a link used three times carries the partner close to its seed), where the
strength is normalized by degree, w / sqrt(deg(seed) * deg(partner)): a memory
used with everything has a large degree, so each of its links counts little and it cannot come back
for every cue (the hub bias measured in bench/bench_association.py).
"""

from __future__ import annotations

import math
import time

from ..schema import EdgeType
from ..store.open_vault import OpenVault
from .fusion import Candidate, Candidates
from .query import Found, Query

SEEDS = 10
# Links weaker than this (after normalization) spread nothing.
MIN_STRENGTH = 0.15
_US_PER_DAY = 86_400 * 1_000_000


def _links(vault: OpenVault, memory_id: str, now: int) -> dict[str, float]:
    half_life = vault.config.decay.default_half_life_days
    return {other: w * 0.5 ** (max(0, now - at) / _US_PER_DAY / half_life)
            for edge_type, other, w, at in vault.store.edges_from(memory_id) if edge_type == EdgeType.CO_ACTIVATED}


def recall(vault: OpenVault, query: Query) -> Found:
    if query.cue_vector is None:
        return {}, []
    now = time.time_ns() // 1000
    seeds = vault.similar(query.cue_vector, SEEDS, query.allowed)
    out: Candidates = {}
    for seed, sim in seeds:
        links = _links(vault, seed, now)
        for other, weight in links.items():
            if not query.allowed(other):
                continue
            strength = weight / math.sqrt(len(links) * max(1, sum(1 for _ in _co_edges(vault, other))))
            if strength < MIN_STRENGTH:
                continue
            relevance = max(0.0, sim) * math.sqrt(strength)
            have = out.get(other)
            if have is None or relevance > have.relevance:
                out[other] = Candidate(relevance, ["associative"],
                                       {"associated_with": seed, "association": round(strength, 6)})
    best = sorted(out.items(), key=lambda kv: kv[1].relevance, reverse=True)[:query.limit]
    return dict(best), []


def _co_edges(vault: OpenVault, memory_id: str):
    return (1 for edge_type, *_ in vault.store.edges_from(memory_id) if edge_type == EdgeType.CO_ACTIVATED)
