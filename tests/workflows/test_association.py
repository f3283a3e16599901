"""Association by use (hebbs/workflows/associate.py, hebbs/recall/associative.py): real model, real
RocksDB, and the real daemon and CLI for the interface parts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from hebbs import InvalidInput
from hebbs.schema import EdgeType

if TYPE_CHECKING:
    from daemon_fixtures import DaemonHome

pytest_plugins = ["daemon_fixtures"]


def _co(eng, memory_id: str) -> dict[str, float]:
    return {e.target: e.confidence for e in eng.edges(memory_id, "out") if e.edge_type == EdgeType.CO_ACTIVATED.name}


def test_reinforce_links_exactly_the_memories_used_together(engine) -> None:
    a, b, c, d = (engine.remember(t).id for t in ("The deploy key lives in the ops vault.",
                                               "Rotate the deploy key every ninety days.",
                                               "Lunch on Fridays is pizza.", "The office plant needs water."))
    engine.reinforce([a, b, c])
    assert set(_co(engine, a)) == {b, c} and set(_co(engine, b)) == {a, c} and set(_co(engine, c)) == {a, b}
    assert _co(engine, d) == {}
    first = _co(engine, a)[b]
    engine.reinforce([a, b])
    assert first < _co(engine, a)[b] <= 1.0 and _co(engine, a)[c] == first
    engine.reinforce([d])
    assert _co(engine, d) == {}


def test_associative_recall_brings_a_co_used_memory_with_its_tag(engine) -> None:
    cue_match = engine.remember("The staging cluster runs in the Frankfurt region.").id
    partner = engine.remember("Ask Priya before touching anything on the weekend.").id
    for n in range(20):
        engine.remember(f"Staging cluster note {n}: its nodes are upgraded in batch {n}.")
    plain = engine.recall("Where does the staging cluster run?", top_k=5, strategies=["similarity"])
    assert partner not in plain.ids()
    for _ in range(3):  # a strong link: used together three times
        engine.reinforce([cue_match, partner])
    found = engine.recall("Where does the staging cluster run?", top_k=5, strategies=["similarity"], associate=True)
    brought = next(r for r in found if r.memory.id == partner)
    assert "associative" in brought.strategies and brought.details["associated_with"] == cue_match
    assert engine.recall("Where does the staging cluster run?", top_k=5, strategies=["similarity"]).ids() == plain.ids()


def test_spread_brings_at_most_two_and_lands_below_its_seed(engine) -> None:
    seed = engine.remember("The staging cluster runs in the Frankfurt region.").id
    partners = [engine.remember(text).id for text in (
        "Ask Priya before touching anything on the weekend.", "Lunch on Fridays is pizza.",
        "The office plant needs water.", "Invoices go out on the first of the month.")]
    for _ in range(3):  # each used with the seed alone: strong links (0.875 / sqrt(4 x 1))
        for partner in partners:
            engine.reinforce([seed, partner])
    found = engine.recall("Where does the staging cluster run?", top_k=10, associate=True)
    spread = [r for r in found if r.details.get("associated_with") == seed]
    assert len(spread) == 2  # four strong links, two brought
    top = next(r for r in found if r.memory.id == seed)
    assert all(r.components.relevance < top.components.relevance for r in spread)


def test_a_hub_does_not_come_back_for_every_cue(engine) -> None:
    topics = ["sourdough baking", "marathon training", "tax filing", "guitar chords", "garden compost",
              "train timetables", "python packaging", "wedding planning"]
    hub = engine.remember("Remember to drink water.").id
    pairs = []
    for topic in topics:
        seed = engine.remember(f"Notes on {topic}: the first step matters most.").id
        partner = engine.remember(f"A detail about {topic} worth keeping.").id
        pairs.append((topic, seed, partner))
        engine.reinforce([seed, partner])
        engine.reinforce([seed, hub])
    hub_hits = partner_hits = 0
    for topic, _seed, partner in pairs:
        ids = engine.recall(f"Notes on {topic}", top_k=3, strategies=["similarity"], associate=True).ids()
        hub_hits += hub in ids
        partner_hits += partner in ids
    # The partner is linked to one seed; the hub to all of them: degree normalization ranks the partner higher.
    assert partner_hits == len(pairs) and hub_hits < len(pairs) // 2


def test_cli_used_links_and_recall_associate(shared_daemon: "DaemonHome", project: Path) -> None:
    run = shared_daemon.hebbs
    a = json.loads(run("remember", "The staging cluster runs in the Frankfurt region.", "--format", "json",
                       cwd=project).stdout)["id"]
    b = json.loads(run("remember", "Ask Priya before touching anything on the weekend.", "--format", "json",
                       cwd=project).stdout)["id"]
    run("used", a, b, cwd=project)
    found = json.loads(run("recall", "staging cluster region", "--associate", "--strategy", "similarity",
                           "--format", "json", cwd=project).stdout)
    tags = {r["memory"]["id"]: r["strategies"] for r in found["results"]}
    assert "associative" in tags[b]
    client = shared_daemon.client(project / ".hebbs")
    assert b in client.recall("staging cluster region", associate=True).ids()


def test_the_memories_one_insight_cites_are_linked(engine) -> None:
    texts = ["The deploy pipeline failed because the Docker image build timed out.",
             "A deploy to production needs two approvals in the pipeline.",
             "We roll back a failed production deploy with helm rollback.",
             "Carol feeds her sourdough starter with rye flour every morning.",
             "The sourdough loaf needs a long cold proof in the fridge overnight.",
             "Jupiter's four largest moons are visible with binoculars."]
    a, b, c, d, e, f = (engine.remember(t).id for t in texts)
    prepared = engine.reflect_prepare()
    before = {m: _co(engine, m) for m in (a, b, c, d, e, f)}
    bad = [{"content": "Deploys fail on builds.", "confidence": 0.8, "source_memory_ids": [a, b]},
           {"content": "Out of range.", "confidence": 1.5, "source_memory_ids": [d, e]}]
    with pytest.raises(InvalidInput):
        engine.reflect_commit(prepared.session_id, bad)
    assert {m: _co(engine, m) for m in (a, b, c, d, e, f)} == before == {m: {} for m in (a, b, c, d, e, f)}
    engine.reflect_commit(prepared.session_id, [
        {"content": "Deploys fail on builds and are rolled back.", "confidence": 0.8, "source_memory_ids": [a, b, c]},
        {"content": "A failed deploy is rolled back at once.", "confidence": 0.7, "source_memory_ids": [a, c]},
        {"content": "Carol's bread ferments slowly.", "confidence": 0.6, "source_memory_ids": [d, e]},
    ])
    # Cited together in one insight: linked; a pair cited by two insights of one commit counts as one use.
    assert set(_co(engine, a)) == {b, c} and set(_co(engine, c)) == {a, b} and set(_co(engine, d)) == {e}
    assert _co(engine, a)[c] == _co(engine, a)[b] == _co(engine, d)[e] == 0.5
    assert _co(engine, f) == {} and not set(_co(engine, a)) & {d, e}
    # Links are between memories, not insights: the insights themselves have none.
    for insight in engine.insights():
        assert _co(engine, insight.memory.id) == {}
    engine.reinforce([a, c])  # later use strengthens what reflection linked
    assert _co(engine, a)[c] > 0.5 and _co(engine, a)[b] == 0.5
