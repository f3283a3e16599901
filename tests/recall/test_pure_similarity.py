"""Similarity recall with relevance-only weights is pure vector search: hnswlib's own top k, same order."""

from __future__ import annotations

import numpy as np
import pytest

from hebbs.schema import ScoringWeights

RELEVANCE_ONLY = ScoringWeights(relevance=1.0, recency=0.0, importance=0.0, reinforcement=0.0)
SUBJECTS = ["The database server", "Our build pipeline", "Caroline's hiking trip", "The espresso machine",
            "The nightly backup", "The release of version two", "The load balancer", "Melanie's painting class"]
EVENTS = ["failed after midnight", "was moved to Tuesday", "needed a new part", "went better than planned",
          "was discussed at the team meeting", "took twice as long as expected"]
CUES = ["what broke in production", "outdoor activities in the mountains", "coffee", "which meeting covered releases",
        "art lessons", "network trouble"]


@pytest.fixture
def corpus(engine):
    texts = [f"{s} {e}" for s in SUBJECTS for e in EVENTS]
    # Restatements: MMR's duplicate suppression would push these down; pure vector search must not.
    texts += [f"{s} {e}." for s in SUBJECTS[:3] for e in EVENTS[:3]]
    ids = [m.id for m in engine.remember_many([{"content": t} for t in texts])]
    return engine, ids


@pytest.mark.parametrize("top_k", [1, 5, 10, 25])
def test_similarity_recall_is_hnswlib_top_k(corpus, top_k):
    eng, ids = corpus
    raw = eng.vault.vector_index.raw
    ids_by_label = eng.vault.vector_index.ids_by_label()
    matrix = np.vstack([eng.vault.vector(mid) for mid in ids])
    for cue in CUES:
        answer = eng.recall(cue, strategies=["similarity"], weights=RELEVANCE_ONLY, top_k=top_k, reinforce=False)
        got = [r.memory.id for r in answer.results]
        vector = eng.embedder.embed_query(cue)
        raw.set_ef(max(eng.config.index.ef_search, top_k))
        labels, distances = raw.knn_query(vector.reshape(1, -1), k=top_k)
        assert got == [ids_by_label[label] for label in labels[0].tolist()]
        # Within float32's rounding: rounded to 4 places, 0.28225 fell either side of the line.
        assert [r.details["similarity"] for r in answer.results] == \
            pytest.approx([1.0 - d for d in distances[0].tolist()], abs=1e-6)
        # At this size hnswlib is exact: the same as brute-force cosine search.
        sims = matrix @ vector / (np.linalg.norm(matrix, axis=1) * np.linalg.norm(vector))
        exact = [ids[i] for i in np.argsort(-sims, kind="stable")[:top_k]]
        assert set(got) == set(exact)
        # The stored copy the matrix was read from is float16 (the index holds float32): ~1e-4 apart.
        assert np.allclose(sorted(sims, reverse=True)[:top_k],
                           [r.details["similarity"] for r in answer.results], atol=1e-3)


def test_similarity_recall_changes_nothing(corpus):
    eng, ids = corpus
    before = {mid: eng.get(mid).access_count for mid in ids}
    eng.recall("coffee", strategies=["similarity"], weights=RELEVANCE_ONLY, reinforce=False)
    assert {mid: eng.get(mid).access_count for mid in ids} == before


def test_diversity_still_on_request(corpus):
    eng, _ = corpus
    plain = eng.recall("the database server failed", strategies=["similarity"], weights=RELEVANCE_ONLY, top_k=5)
    diverse = eng.recall("the database server failed", strategies=["similarity"], weights=RELEVANCE_ONLY, top_k=5,
                         mmr_lambda=0.5)
    assert [r.memory.id for r in plain.results] != [r.memory.id for r in diverse.results]
