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


def test_reinforce_links_exactly_the_memories_used_together(eng) -> None:
    a, b, c, d = (eng.remember(t).id for t in ("The deploy key lives in the ops vault.",
                                               "Rotate the deploy key every ninety days.",
                                               "Lunch on Fridays is pizza.", "The office plant needs water."))
    eng.reinforce([a, b, c])
    assert set(_co(eng, a)) == {b, c} and set(_co(eng, b)) == {a, c} and set(_co(eng, c)) == {a, b}
    assert _co(eng, d) == {}
    first = _co(eng, a)[b]
    eng.reinforce([a, b])
    assert first < _co(eng, a)[b] <= 1.0 and _co(eng, a)[c] == first
    eng.reinforce([d])
    assert _co(eng, d) == {}


def test_associative_recall_brings_a_co_used_memory_with_its_tag(eng) -> None:
    cue_match = eng.remember("The staging cluster runs in the Frankfurt region.").id
    partner = eng.remember("Ask Priya before touching anything on the weekend.").id
    for n in range(20):
        eng.remember(f"Staging cluster note {n}: its nodes are upgraded in batch {n}.")
    plain = eng.recall("Where does the staging cluster run?", top_k=5, strategies=["similarity"])
    assert partner not in plain.ids()
    for _ in range(3):  # a strong link: used together three times
        eng.reinforce([cue_match, partner])
    found = eng.recall("Where does the staging cluster run?", top_k=5, strategies=["similarity"], associate=True)
    brought = next(r for r in found if r.memory.id == partner)
    assert "associative" in brought.strategies and brought.details["associated_with"] == cue_match
    assert eng.recall("Where does the staging cluster run?", top_k=5, strategies=["similarity"]).ids() == plain.ids()


def test_spread_brings_at_most_two_and_lands_below_its_seed(eng) -> None:
    seed = eng.remember("The staging cluster runs in the Frankfurt region.").id
    partners = [eng.remember(text).id for text in (
        "Ask Priya before touching anything on the weekend.", "Lunch on Fridays is pizza.",
        "The office plant needs water.", "Invoices go out on the first of the month.")]
    for _ in range(3):  # each used with the seed alone: strong links (0.875 / sqrt(4 x 1))
        for partner in partners:
            eng.reinforce([seed, partner])
    found = eng.recall("Where does the staging cluster run?", top_k=10, associate=True)
    spread = [r for r in found if r.details.get("associated_with") == seed]
    assert len(spread) == 2  # four strong links, two brought
    top = next(r for r in found if r.memory.id == seed)
    assert all(r.components.relevance < top.components.relevance for r in spread)


def test_a_hub_does_not_come_back_for_every_cue(eng) -> None:
    topics = ["sourdough baking", "marathon training", "tax filing", "guitar chords", "garden compost",
              "train timetables", "python packaging", "wedding planning"]
    hub = eng.remember("Remember to drink water.").id
    pairs = []
    for topic in topics:
        seed = eng.remember(f"Notes on {topic}: the first step matters most.").id
        partner = eng.remember(f"A detail about {topic} worth keeping.").id
        pairs.append((topic, seed, partner))
        eng.reinforce([seed, partner])
        eng.reinforce([seed, hub])
    hub_hits = partner_hits = 0
    for topic, seed, partner in pairs:
        ids = eng.recall(f"Notes on {topic}", top_k=3, strategies=["similarity"], associate=True).ids()
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


def test_the_memories_one_insight_cites_are_linked(eng) -> None:
    texts = ["The deploy pipeline failed because the Docker image build timed out.",
             "A deploy to production needs two approvals in the pipeline.",
             "We roll back a failed production deploy with helm rollback.",
             "Carol feeds her sourdough starter with rye flour every morning.",
             "The sourdough loaf needs a long cold proof in the fridge overnight.",
             "Jupiter's four largest moons are visible with binoculars."]
    a, b, c, d, e, f = (eng.remember(t).id for t in texts)
    prepared = eng.reflect_prepare()
    before = {m: _co(eng, m) for m in (a, b, c, d, e, f)}
    bad = [{"content": "Deploys fail on builds.", "confidence": 0.8, "source_memory_ids": [a, b]},
           {"content": "Out of range.", "confidence": 1.5, "source_memory_ids": [d, e]}]
    with pytest.raises(InvalidInput):
        eng.reflect_commit(prepared.session_id, bad)
    assert {m: _co(eng, m) for m in (a, b, c, d, e, f)} == before == {m: {} for m in (a, b, c, d, e, f)}
    eng.reflect_commit(prepared.session_id, [
        {"content": "Deploys fail on builds and are rolled back.", "confidence": 0.8, "source_memory_ids": [a, b, c]},
        {"content": "A failed deploy is rolled back at once.", "confidence": 0.7, "source_memory_ids": [a, c]},
        {"content": "Carol's bread ferments slowly.", "confidence": 0.6, "source_memory_ids": [d, e]},
    ])
    # Cited together in one insight: linked; a pair cited by two insights of one commit counts as one use.
    assert set(_co(eng, a)) == {b, c} and set(_co(eng, c)) == {a, b} and set(_co(eng, d)) == {e}
    assert _co(eng, a)[c] == _co(eng, a)[b] == _co(eng, d)[e] == 0.5
    assert _co(eng, f) == {} and not set(_co(eng, a)) & {d, e}
    # Links are between memories, not insights: the insights themselves have none.
    for insight in eng.insights():
        assert _co(eng, insight.memory.id) == {}
    eng.reinforce([a, c])  # later use strengthens what reflection linked
    assert _co(eng, a)[c] > 0.5 and _co(eng, a)[b] == 0.5
