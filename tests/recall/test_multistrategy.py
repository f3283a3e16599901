"""Multi-strategy recall: every combination of the five strategies runs, merges by memory id, and explains itself."""

from __future__ import annotations

import datetime as dt
import itertools
from collections.abc import Iterator

import pytest

from hebbs import Engine, InvalidInput, ScoringWeights
from hebbs.recall import fusion as rc
from hebbs.recall import scoring

UTC = dt.timezone.utc
STRATEGIES = ("similarity", "temporal", "lexical", "causal", "analogical")
COMBINATIONS = [list(c) for n in range(1, 6) for c in itertools.combinations(STRATEGIES, n)]
BY_RELEVANCE = ScoringWeights(relevance=1.0, recency=0.0, importance=0.0, reinforcement=0.0)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory, embedder) -> Iterator[tuple[Engine, dict[str, str]]]:
    """One vault shared by the module (every recall here runs with reinforce=False, so none changes it)."""
    eng = Engine.open(tmp_path_factory.mktemp("multi") / "vault", embedder=embedder)
    day = dt.datetime(2024, 3, 1, tzinfo=UTC)
    m: dict[str, str] = {}

    def add(name: str, text: str, days: int, **kw) -> None:
        m[name] = eng.remember(text, created_at=day + dt.timedelta(days=days), **kw).id

    add("vendor", "The payment vendor raised its fees by twenty percent", 0, entity_id="billing")
    add("budget", "The billing budget for Q2 was cut", 1, entity_id="billing",
        edges=[(m["vendor"], "CAUSED_BY", 0.8)])
    add("switch", "We decided to switch payment vendors to save on fees", 2, entity_id="billing",
        context={"type": "decision", "owner": "dana"}, importance=0.8, edges=[(m["budget"], "CAUSED_BY", 0.9)])
    add("migration", "The payment vendor migration starts next sprint", 3, entity_id="billing",
        context={"type": "task"}, edges=[(m["switch"], "CAUSED_BY", 1.0)])
    add("hiring", "We decided to hire a second on-call engineer", 4, entity_id="ops",
        context={"type": "decision", "owner": "lee"}, importance=0.8)
    add("lunch", "Team lunch is on Thursday at noon", 5)
    add("fees", "Card processing fees appear on the monthly invoice", 6, entity_id="billing")
    add("weather", "It rained all week in the city", 7)
    yield eng, m
    eng.close()


def recall(eng: Engine, strategies: list[str], **kw):
    return eng.recall("payment vendor fees", strategies=strategies, top_k=50, weights=BY_RELEVANCE,
                      reinforce=False, **kw)


@pytest.mark.parametrize("strategies", COMBINATIONS, ids=lambda c: "+".join(c))
def test_every_combination_merges_best_relevance_and_names_its_strategies(world, strategies):
    eng, m = world
    seed = m["switch"]
    alone: dict[str, dict] = {}
    for name in strategies:
        kw = {"seed": seed} if name in ("causal", "analogical") else {}
        alone[name] = {r.memory.id: r for r in recall(eng, [name], **kw)}
    kw = {"seed": seed} if set(strategies) & {"causal", "analogical"} else {}
    merged = recall(eng, strategies, **kw)

    assert len(merged) > 0
    assert len(set(merged.ids())) == len(merged)  # one result per memory
    found_by_any = set().union(*(set(found) for found in alone.values()))
    assert set(merged.ids()) == found_by_any
    for r in merged:
        finders = sorted(name for name in strategies if r.memory.id in alone[name])
        assert sorted(r.strategies) == finders
        best = max(alone[name][r.memory.id].components.relevance for name in finders)
        assert r.components.relevance == pytest.approx(best, abs=1e-9)
        # The four components are all there, each in 0..1, and the score is their weighted sum.
        parts = r.components
        for value in (parts.relevance, parts.recency, parts.importance, parts.reinforcement):
            assert 0.0 <= value <= 1.0
        assert r.score == pytest.approx(scoring.composite(parts, BY_RELEVANCE))
        # Each finder left its own facts in details.
        for name in finders:
            key = {"similarity": "similarity", "temporal": "temporal_rank", "lexical": "bm25",
                   "causal": "causal_depth", "analogical": "structural_similarity"}[name]
            assert key in r.details


def test_combinations_work_with_filters(world):
    eng, m = world
    window = (dt.datetime(2024, 3, 1, tzinfo=UTC), dt.datetime(2024, 3, 4, 12, tzinfo=UTC))
    for strategies in COMBINATIONS:
        kw = {"seed": m["switch"]} if set(strategies) & {"causal", "analogical"} else {}
        res = recall(eng, strategies, entity_id="billing", time_range=window, **kw)
        allowed = {m["vendor"], m["budget"], m["switch"], m["migration"]}
        assert set(res.ids()) <= allowed, strategies


def test_causal_seeded_by_the_cue_inside_a_combination(world):
    eng, m = world
    res = eng.recall("switch payment vendors decision", strategies=["similarity", "causal"], direction="both",
                     top_k=50, weights=BY_RELEVANCE, reinforce=False)
    by_id = {r.memory.id: r for r in res}
    assert by_id[m["switch"]].details["causal_depth"] == 0
    assert by_id[m["migration"]].details["causal_depth"] == 1
    assert set(by_id[m["switch"]].strategies) == {"similarity", "causal"}
    assert by_id[m["lunch"]].strategies == ["similarity"]


def test_temporal_and_causal_without_a_cue(world):
    eng, m = world
    res = eng.recall(strategies=["temporal", "causal"], seed=m["migration"], top_k=50, reinforce=False)
    by_id = {r.memory.id: r for r in res}
    assert set(by_id[m["migration"]].strategies) == {"temporal", "causal"}
    assert by_id[m["vendor"]].details["causal_depth"] == 3
    assert by_id[m["weather"]].strategies == ["temporal"]


def test_default_strategies(world):
    eng, m = world
    fused = eng.recall("payment vendor fees", reinforce=False)
    assert all(set(r.strategies) <= {"similarity", "lexical"} for r in fused)
    with_seed = eng.recall("payment vendor fees", seed=m["switch"], top_k=50, reinforce=False)
    assert any("causal" in r.strategies for r in with_seed)
    assert any(set(r.strategies) & {"similarity", "lexical"} for r in with_seed)


def test_unknown_strategy_and_missing_inputs(world):
    eng, _ = world
    with pytest.raises(InvalidInput, match="unknown strategy"):
        eng.recall("x", strategies=["psychic"])
    with pytest.raises(InvalidInput, match="need a cue"):
        eng.recall(strategies=["lexical", "causal"], seed=None)


def test_merge_keeps_the_best_relevance_and_every_finder():
    into: rc.Candidates = {"a": rc.Candidate(0.4, ["similarity"], {"similarity": 0.4})}
    rc.merge(into, {"a": rc.Candidate(0.9, ["causal"], {"causal_depth": 1}),
                    "b": rc.Candidate(0.2, ["causal"], {"causal_depth": 2})})
    rc.merge(into, {"a": rc.Candidate(0.1, ["temporal"], {"temporal_rank": 7})})
    assert into["a"].relevance == 0.9
    assert into["a"].strategies == ["similarity", "causal", "temporal"]
    assert into["a"].details == {"similarity": 0.4, "causal_depth": 1, "temporal_rank": 7}
    assert into["b"].relevance == 0.2 and into["b"].strategies == ["causal"]
