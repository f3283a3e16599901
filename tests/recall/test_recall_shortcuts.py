"""The recall pipeline's shortcuts give the answers the long way gives.

rank() scores candidates in order of relevance and stops once no later one can make the list (a bound
on the composite score); the confidence step takes each result's index terms from a cache kept by the
lexical index; searches ask the recall scope about all their hits in one vectorized pass; MMR keeps
its penalties up to date pick by pick. Each is compared here with the plain computation it replaces.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

from hebbs.recall import fusion as rc
from hebbs.recall import pipeline, scoring
from hebbs.recall.fusion import Candidate
from hebbs.schema import ScoringWeights
from hebbs.index.lexical import tokenize
from hebbs.core.open_vault import now_us

WEIGHTS = [ScoringWeights(relevance=1.0, recency=0.0, importance=0.0, reinforcement=0.0), ScoringWeights(),
           ScoringWeights(relevance=0.2, recency=0.5, importance=0.3, reinforcement=0.0),
           ScoringWeights(relevance=0.0, recency=0.0, importance=1.0, reinforcement=0.0)]


def every_candidate_scored(vault, candidates, weights, stamp, preferred):
    """The long way: score all of them, then a stable sort by score (what rank() did before)."""
    config = vault.config
    ranked = []
    for mid, cand in candidates.items():
        entry = vault.entry(mid)
        window = scoring.recency_window_days(entry.context_type, config.recall.recency_window, config.decay,
                                             config.recall.untyped_recency_days)
        parts = scoring.components(entry, cand.relevance, stamp, window)
        if preferred is not None:
            parts.recency = scoring.time_match(entry.created_at, preferred)
        score = scoring.composite(parts, weights)
        ranked.append((score, mid))
    ranked.sort(key=lambda item: item[0], reverse=True)
    return ranked


@pytest.mark.parametrize("weights", WEIGHTS)
def test_rank_bound_keeps_the_answer(engine, weights):
    rng = random.Random(7)
    stamp = now_us()
    memories = engine.remember_many([
        {"content": f"memory number {i} about topic {i % 7}", "importance": rng.choice([0.1, 0.5, 0.9, 1.0]),
         "created_at": stamp - rng.randrange(0, 90) * 86_400_000_000,
         "context": {"type": rng.choice(["preference", "fact", "event"])}} for i in range(60)],
        consolidate=False)
    engine.reinforce([m.id for m in memories[::5]])
    # Ties on purpose: equal relevance and equal scores must keep the candidates' own order.
    relevances = [rng.choice([0.0, 0.25, 0.5, 0.5, 0.75, 1.0, rng.random()]) for _ in memories]
    for trial in range(6):
        candidates = {m.id: Candidate(rel, ["similarity"]) for m, rel in zip(memories, relevances)}
        preferred = None if trial % 2 else (stamp - 20 * 86_400_000_000, stamp)
        expected = every_candidate_scored(engine.vault, candidates, weights, stamp, preferred)
        for top_k in (1, 5, 10, 25):
            got = pipeline.rank(engine.vault, candidates, weights, top_k, 1.0, False, stamp, preferred)
            assert [(r.score, r.memory.id) for r in got] == expected[:top_k]
        rng.shuffle(relevances)


def test_terms_of_follows_the_text(engine):
    lexical = engine.vault.lexical_index
    text = "parseConfig reads --top-k from ~/.hebbs/config.toml"
    assert lexical.terms_of(text) == frozenset(tokenize(text))
    assert lexical.terms_of(text) is lexical.terms_of(text)  # cached
    revised = "the retry policy changed on Monday"
    assert lexical.terms_of(revised) == frozenset(tokenize(revised))


def test_scope_passing_is_the_per_memory_check(engine):
    """Scope.passing (one pass over the catalog's columns) says what calling the scope on each id says."""
    stamp = now_us()
    rng = random.Random(3)
    memories = engine.remember_many([
        {"content": f"note {i} on subject {i % 5}", "entity_id": rng.choice([None, "ann", "bo"]),
         "created_at": stamp - rng.randrange(0, 60) * 86_400_000_000} for i in range(40)], consolidate=False)
    engine.remember("note 0 on subject 0, corrected", supersedes=[memories[0].id, memories[1].id])
    engine.revise(memories[2].id, content="note 2, revised")
    ids = [m.id for m in memories] + [r.id for r in engine.history(memories[2].id)] + ["01ARZ3NDEKTSV4RRFFQ69G5FAV"]
    vault = engine.vault
    for entity in (None, "ann", "bo", "nobody"):
        for window in (None, (stamp - 30 * 86_400_000_000, stamp), (stamp + 1, stamp + 2), (0, 2**63 - 1)):
            for include_superseded in (False, True):
                scope = vault.scope(entity, window, include_superseded)
                assert scope.passing(ids) == [scope(mid) for mid in ids]
                inside = scope.within(stamp - 10 * 86_400_000_000, stamp)
                assert inside.passing(ids) == [inside(mid) for mid in ids]
    assert vault.scope().passing([]) == []


def reference_mmr(scores, vectors, lam, k, duplicate_similarity):
    """MMR as first written: every round masks the picked and the duplicates of a pick afresh."""
    rel = np.asarray(scores, dtype=np.float64)
    if rel.max() > 0:
        rel = rel / rel.max()
    sims = vectors @ vectors.T
    picked: list[int] = []
    max_sim = np.zeros(len(scores))
    duplicate = np.zeros(len(scores), dtype=bool)
    for _ in range(min(k, len(scores))):
        value = lam * rel - (1.0 - lam) * max_sim
        value = value + np.where(duplicate, -2.0, 0.0)
        value[picked] = -np.inf
        best = int(np.argmax(value))
        picked.append(best)
        max_sim = np.maximum(max_sim, sims[best])
        duplicate |= sims[best] >= duplicate_similarity
    return picked


def test_mmr_order_is_the_plain_computation():
    rng = np.random.default_rng(5)
    for _ in range(300):
        n = int(rng.integers(1, 60))
        centres = rng.standard_normal((max(2, n // 4), 16))
        vectors = centres[rng.integers(0, len(centres), n)] + rng.standard_normal((n, 16)) * rng.choice([0.0, 0.02, 0.5])
        vectors = (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)
        scores = list(np.round(rng.random(n), int(rng.choice([1, 3]))))
        lam, k, dup = float(rng.choice([0.0, 0.5, 0.7, 1.0])), int(rng.integers(1, 50)), float(rng.choice([0.9, 0.95, 1.0]))
        assert rc.mmr_order(scores, vectors, lam, k, dup) == reference_mmr(scores, vectors, lam, k, dup)
