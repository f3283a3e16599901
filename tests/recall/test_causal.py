"""Causal recall on small graphs of known shape, in a real vault with the real model."""

from __future__ import annotations

import pytest

from hebbs import Engine, InvalidInput, NotFound, ScoringWeights
from hebbs.recall.causal import relevance

# Relevance alone, so the order checked is the walk's order and not recency or importance.
BY_RELEVANCE = ScoringWeights(relevance=1.0, recency=0.0, importance=0.0, reinforcement=0.0)


@pytest.fixture
def outage(engine: Engine) -> dict[str, str]:
    """An incident chain, effect -> cause:

        outage -CAUSED_BY(0.9)-> bad_deploy -CAUSED_BY-> skipped_review -CAUSED_BY-> deadline
               -CAUSED_BY(0.3)-> solar_flare                              -CAUSED_BY-> understaffed
               -RELATED_TO-> postmortem
    plus `lonely`, which has no edges but the automatic FOLLOWED_BY.
    """
    m: dict[str, str] = {}
    m["understaffed"] = engine.remember("The platform team was down to two engineers that quarter").id
    m["deadline"] = engine.remember("Management set a hard launch deadline for Friday",
                                 edges=[(m["understaffed"], "CAUSED_BY", 0.8)]).id
    m["skipped_review"] = engine.remember("The database migration was merged without code review",
                                       edges=[(m["deadline"], "CAUSED_BY", 0.7)]).id
    m["bad_deploy"] = engine.remember("A deploy shipped a migration that locked the orders table",
                                   edges=[(m["skipped_review"], "CAUSED_BY", 0.9)]).id
    m["solar_flare"] = engine.remember("A solar flare was reported the same morning").id
    m["postmortem"] = engine.remember("The postmortem meeting is scheduled for Monday").id
    m["outage"] = engine.remember("Checkout was down for forty minutes on Thursday",
                               edges=[(m["bad_deploy"], "CAUSED_BY", 0.9), (m["solar_flare"], "CAUSED_BY", 0.3)]).id
    engine.add_edge(m["outage"], "RELATED_TO", m["postmortem"], 0.6)
    m["lonely"] = engine.remember("The office plants were watered").id
    return m


def names(results, m: dict[str, str]) -> list[str]:
    back = {v: k for k, v in m.items()}
    return [back[r.memory.id] for r in results]


def test_forward_walk_goes_from_effect_to_causes_in_depth_order(engine, outage):
    res = engine.recall(strategies=["causal"], seed=outage["outage"], edge_types=["CAUSED_BY"], weights=BY_RELEVANCE,
                     reinforce=False)
    got = names(res, outage)
    assert got == ["outage", "bad_deploy", "solar_flare", "skipped_review", "deadline", "understaffed"]
    depths = [r.details["causal_depth"] for r in res]
    assert depths == [0, 1, 1, 2, 3, 4]
    assert res.notes == []


def test_ties_at_one_depth_are_broken_by_edge_confidence(engine, outage):
    res = engine.recall(strategies=["causal"], seed=outage["outage"], max_depth=1, weights=BY_RELEVANCE,
                     edge_types=["CAUSED_BY"], reinforce=False)
    by_id = {r.memory.id: r for r in res}
    confident, doubtful = by_id[outage["bad_deploy"]], by_id[outage["solar_flare"]]
    assert confident.details["causal_depth"] == doubtful.details["causal_depth"] == 1
    assert confident.components.relevance > doubtful.components.relevance
    # A doubtful edge never costs a memory its place ahead of anything deeper.
    assert relevance(1, 0.0, 5) > relevance(2, 1.0, 5) > relevance(3, 1.0, 5)
    assert relevance(0, 1.0, 5) == 1.0


def test_every_result_carries_its_depth_path_and_edge_types(engine, outage):
    res = engine.recall(strategies=["causal"], seed=outage["outage"], reinforce=False)
    deadline = next(r for r in res if r.memory.id == outage["deadline"])
    assert deadline.strategies == ["causal"]
    assert deadline.details["causal_depth"] == 3
    assert deadline.details["causal_path"] == [outage["outage"], outage["bad_deploy"], outage["skipped_review"],
                                               outage["deadline"]]
    assert deadline.details["causal_edge_types"] == ["CAUSED_BY"] * 3
    assert deadline.details["causal_directions"] == ["forward"] * 3
    assert deadline.details["causal_edge"] == "CAUSED_BY"
    assert deadline.details["causal_confidence"] == pytest.approx(0.9 * 0.9 * 0.7, abs=1e-5)
    seed = res[0] if res[0].memory.id == outage["outage"] else next(r for r in res if r.memory.id == outage["outage"])
    assert seed.details["causal_depth"] == 0 and seed.details["causal_path"] == [outage["outage"]]


def test_depth_limit(engine, outage):
    res = engine.recall(strategies=["causal"], seed=outage["outage"], max_depth=2, edge_types=["CAUSED_BY"],
                     reinforce=False)
    assert set(names(res, outage)) == {"outage", "bad_deploy", "solar_flare", "skipped_review"}
    assert max(r.details["causal_depth"] for r in res) == 2


def test_backward_walk_goes_from_cause_to_effects(engine, outage):
    res = engine.recall(strategies=["causal"], seed=outage["deadline"], direction="backward", weights=BY_RELEVANCE,
                     reinforce=False)
    assert names(res, outage) == ["deadline", "skipped_review", "bad_deploy", "outage"]
    assert all(d == "backward" for r in res for d in r.details["causal_directions"])
    # Forward from the same seed reaches only its own cause.
    fwd = engine.recall(strategies=["causal"], seed=outage["deadline"], direction="forward", reinforce=False)
    assert set(names(fwd, outage)) == {"deadline", "understaffed"}


def test_both_directions(engine, outage):
    res = engine.recall(strategies=["causal"], seed=outage["skipped_review"], direction="both", max_depth=2,
                     edge_types=["CAUSED_BY"], weights=BY_RELEVANCE, reinforce=False)
    by_depth: dict[int, set[str]] = {}
    for r, name in zip(res, names(res, outage)):
        by_depth.setdefault(r.details["causal_depth"], set()).add(name)
    assert by_depth == {0: {"skipped_review"}, 1: {"bad_deploy", "deadline"}, 2: {"outage", "understaffed"}}


def test_edge_type_filter(engine, outage):
    default = engine.recall(strategies=["causal"], seed=outage["outage"], max_depth=1, reinforce=False)
    assert "postmortem" in names(default, outage)  # every explicit edge type by default
    related = engine.recall(strategies=["causal"], seed=outage["outage"], edge_types=["RELATED_TO"], reinforce=False)
    assert set(names(related, outage)) == {"outage", "postmortem"}
    assert next(r for r in related if r.memory.id == outage["postmortem"]).details["causal_edge"] == "RELATED_TO"
    caused = engine.recall(strategies=["causal"], seed=outage["outage"], edge_types=["caused_by"], reinforce=False)
    assert "postmortem" not in names(caused, outage)


def test_followed_by_is_sequence_and_walked_only_when_asked(engine, outage):
    # The automatic FOLLOWED_BY edges link each memory to the next one written; default walks skip them.
    lonely = engine.recall(strategies=["causal"], seed=outage["lonely"], reinforce=False)
    assert lonely.ids() == [outage["lonely"]]
    seq = engine.recall(strategies=["causal"], seed=outage["lonely"], edge_types=["FOLLOWED_BY"], direction="backward",
                     max_depth=2, weights=BY_RELEVANCE, reinforce=False)
    assert names(seq, outage) == ["lonely", "outage", "postmortem"]


def test_no_edges_returns_the_seed_alone_and_says_so(engine, outage):
    res = engine.recall(strategies=["causal"], seed=outage["lonely"], reinforce=False)
    assert res.ids() == [outage["lonely"]]
    assert len(res.notes) == 1 and "no " in res.notes[0] and "returning the seed alone" in res.notes[0]
    # A direction with no edges is the same case, and says so too.
    res = engine.recall(strategies=["causal"], seed=outage["understaffed"], direction="forward", reinforce=False)
    assert res.ids() == [outage["understaffed"]] and "returning the seed alone" in res.notes[0]


def test_seed_found_from_the_cue(engine, outage):
    res = engine.recall("checkout outage on Thursday", strategies=["causal"], edge_types=["CAUSED_BY"], max_depth=1,
                     weights=BY_RELEVANCE, reinforce=False)
    assert res[0].memory.id == outage["outage"]
    assert set(names(res, outage)) == {"outage", "bad_deploy", "solar_flare"}
    assert any("best similarity match" in n for n in res.notes)


def test_filters_apply_to_results_but_the_walk_goes_through(engine: Engine):
    cause = engine.remember("Supplier raised prices", entity_id="acme")
    middle = engine.remember("Our margins shrank", entity_id="us", edges=[(cause.id, "CAUSED_BY", 1.0)])
    effect = engine.remember("Acme renegotiated the contract", entity_id="acme", edges=[(middle.id, "CAUSED_BY", 1.0)])
    res = engine.recall(strategies=["causal"], seed=effect.id, entity_id="acme", reinforce=False)
    assert set(res.ids()) == {effect.id, cause.id}  # `middle` belongs to another entity
    assert next(r for r in res if r.memory.id == cause.id).details["causal_depth"] == 2


def test_superseded_and_forgotten_memories_leave_the_walk_results(engine: Engine):
    a = engine.remember("Cache misses spiked")
    b = engine.remember("Latency doubled", edges=[(a.id, "CAUSED_BY", 1.0)])
    a2 = engine.remember("Cache misses spiked after the eviction policy change", supersedes=[a.id])
    res = engine.recall(strategies=["causal"], seed=b.id, edge_types=["CAUSED_BY"], reinforce=False)
    assert res.ids() == [b.id] and res.notes  # the cause is superseded: found, filtered, and said so
    with_old = engine.recall(strategies=["causal"], seed=b.id, edge_types=["CAUSED_BY"], include_superseded=True,
                          reinforce=False)
    assert set(with_old.ids()) == {a.id, b.id}
    engine.forget([a.id])
    gone = engine.recall(strategies=["causal"], seed=b.id, edge_types=["CAUSED_BY"], reinforce=False)
    assert gone.ids() == [b.id] and "returning the seed alone" in gone.notes[0]
    assert a2.id not in gone.ids()


def test_bad_arguments(engine, outage):
    with pytest.raises(InvalidInput, match="direction"):
        engine.recall(strategies=["causal"], seed=outage["outage"], direction="sideways")
    with pytest.raises(InvalidInput, match="max_depth"):
        engine.recall(strategies=["causal"], seed=outage["outage"], max_depth=0)
    with pytest.raises(InvalidInput, match="edge type"):
        engine.recall(strategies=["causal"], seed=outage["outage"], edge_types=["BLAMED_ON"])
    with pytest.raises(InvalidInput, match="seed"):
        engine.recall(strategies=["causal"])
    with pytest.raises(NotFound):
        engine.recall(strategies=["causal"], seed="01ARZ3NDEKTSV4RRFFQ69G5FAV")
    with pytest.raises(InvalidInput, match="seed"):
        engine.recall("checkout", strategies=["similarity"], seed=outage["outage"])


def test_a_seed_alone_means_a_causal_walk(engine, outage):
    res = engine.recall(seed=outage["bad_deploy"], edge_types=["CAUSED_BY"], max_depth=1, reinforce=False)
    assert set(names(res, outage)) == {"bad_deploy", "skipped_review"}
    assert all(r.strategies == ["causal"] for r in res)


def test_revision_records_are_never_entered(engine: Engine):
    m = engine.remember("The API rate limit is 100 requests per minute")
    engine.revise(m.id, content="The API rate limit is 500 requests per minute")
    res = engine.recall(strategies=["causal"], seed=m.id, edge_types=["REVISED_FROM"], reinforce=False)
    assert res.ids() == [m.id]
    assert "reach no other memory" in res.notes[0] and "returning the seed alone" in res.notes[0]
