"""Associative recall: one hop of spreading activation along CO_ACTIVATED edges (hebbs/workflows/associate.py).

What spreads, and how far, is held back on purpose: on a replay over LoCoMo (bench/bench_association.py)
under 1% of the memories one hop from a cue's results were answers, so an unrestrained spread mostly
displaces good direct hits. So:

- only confident seeds spread: the cue's few best matches, each standing out from the cue's
  background (its similarity min-max normalized over the cue's hits, as fusion does);
- only strong links spread: strength = w / sqrt(deg(seed) * deg(partner)), so a memory used with
  everything (a hub) has a large degree and each of its links counts little, and a link is strong
  only when it is much of both memories' use;
- a spread result lands below the seed that brought it (relevance = seed x strength x DAMPING);
- at most MAX_SPREAD memories are brought per recall, whatever the number of seeds.
"""

from __future__ import annotations

import math
import time

from ..schema import EdgeType
from ..core.open_vault import OpenVault
from .fusion import Candidate, Candidates
from .query import Found, Query

SEEDS = 5
# A seed spreads only when its normalized similarity (1 = the cue's best hit, 0 = the
# normalization_depth-th) reaches this: a weak match's partners are a guess about a guess.
SEED_MIN = 0.5
# Links weaker than this (after degree normalization) spread nothing.
MIN_STRENGTH = 0.3
# A partner lands below its seed: relevance = seed's normalized similarity x strength x DAMPING.
DAMPING = 0.8
# What spread can displace from a recall's list, at most.
MAX_SPREAD = 2
_US_PER_DAY = 86_400 * 1_000_000


def _links(vault: OpenVault, memory_id: str, now: int) -> dict[str, float]:
    half_life = vault.config.decay.default_half_life_days
    return {other: w * 0.5 ** (max(0, now - at) / _US_PER_DAY / half_life)
            for edge_type, other, w, at in vault.store.edges_from(memory_id) if edge_type == EdgeType.CO_ACTIVATED}


def _degree(vault: OpenVault, memory_id: str) -> int:
    return sum(1 for edge_type, *_ in vault.store.edges_from(memory_id) if edge_type == EdgeType.CO_ACTIVATED)


def recall(vault: OpenVault, query: Query) -> Found:
    if query.cue_vector is None:
        return {}, []
    now = time.time_ns() // 1000
    hits = query.cue_hits(vault)[:query.settings.fusion.normalization_depth]
    if not hits:
        return {}, []
    hi, lo = hits[0][1], hits[-1][1]
    out: Candidates = {}
    for seed, sim in hits[:SEEDS]:
        standing = 1.0 if hi <= lo else (sim - lo) / (hi - lo)
        if standing < SEED_MIN:
            break
        links = _links(vault, seed, now)
        for other, weight in links.items():
            if not query.allowed(other):
                continue
            strength = weight / math.sqrt(len(links) * max(1, _degree(vault, other)))
            if strength < MIN_STRENGTH:
                continue
            relevance = standing * strength * DAMPING
            have = out.get(other)
            if have is None or relevance > have.relevance:
                out[other] = Candidate(relevance, ["associative"],
                                       {"associated_with": seed, "association": round(strength, 6)})
    best = sorted(out.items(), key=lambda kv: kv[1].relevance, reverse=True)[:min(query.limit, MAX_SPREAD)]
    return dict(best), []
