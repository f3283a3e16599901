"""Contradiction review on a real vault: candidates from remember, prepare, and verdicts applied in one batch."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hebbs import Engine, InvalidInput, NotFound, Source
from hebbs.schema import ContradictionVerdict
from hebbs.store.storage import Store

CONTRADICTING = [
    ("The deploy pipeline is reliable.", "The deploy pipeline is unreliable."),
    ("The API timeout is 30 seconds.", "The API timeout is 60 seconds."),
    ("Feature flags are enabled in production.", "Feature flags are disabled in production."),
]
BACKGROUND = ["Acme uses Salesforce for their CRM.", "Bob likes green tea in the morning.",
              "Carol bakes sourdough every weekend."]


@pytest.fixture(autouse=True)
def home(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("HEBBS_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def plant(engine: Engine, **fields) -> dict[frozenset[str], str]:
    """Background memories and three contradicting pairs, remembered one by one (as an agent would)."""
    engine.remember_many([{"content": t} for t in BACKGROUND])
    pairs: dict[frozenset[str], str] = {}
    for older, newer in CONTRADICTING:
        a = engine.remember(older, **fields)
        b = engine.remember(newer, **fields)
        pairs[frozenset((a.id, b.id))] = older
    return pairs


def pending_for(engine: Engine, text: str) -> str:
    for c in engine.contradiction_prepare().candidates:
        if text in (c.memory_a.content, c.memory_b.content):
            return c.pending_id
    raise AssertionError(f"no candidate for {text!r}")


class BatchSpy:
    """Records every batch the store commits (the batches still go to the real RocksDB)."""

    def __init__(self, store: Store, monkeypatch) -> None:
        self.batches: list[list[tuple[str, bytes, bytes | None]]] = []
        real = store.commit

        def commit(writes, **kwargs) -> None:
            self.batches.append(list(writes.ops))
            real(writes, **kwargs)

        monkeypatch.setattr(store, "commit", commit)

    def families(self, n: int = 0) -> dict[str, int]:
        out: dict[str, int] = {}
        for family, _, value in self.batches[n]:
            name = f"{family}-" if value is None else family
            out[name] = out.get(name, 0) + 1
        return out


# Candidates from remember ----------------------------------------------------------------------

def test_remember_queues_planted_contradictions_and_nothing_for_consistent_memories(engine, monkeypatch):
    spy = BatchSpy(engine.vault.store, monkeypatch)
    engine.remember_many([{"content": t} for t in BACKGROUND])
    assert engine.pending() == [] and len(spy.batches) == 1
    consistent = engine.remember("Acme's CRM is Salesforce, used by their sales team.")
    assert engine.pending() == []
    reliable = engine.remember("The deploy pipeline is reliable.")
    spy.batches.clear()
    unreliable = engine.remember("The deploy pipeline is unreliable.")
    # The memory's own batch, then the candidate in a batch of its own.
    assert [("pending" in {f for f, _, _ in b}) for b in spy.batches] == [False, True]
    assert spy.families(1) == {"pending": 1}
    [candidate] = engine.pending()
    assert (candidate.memory_a, candidate.memory_b) == (unreliable.id, reliable.id)
    assert 0.35 < candidate.confidence <= 0.75 and candidate.similarity >= 0.5
    assert candidate.reasons[0] == "antonyms: reliable / unreliable"
    assert consistent.id not in (candidate.memory_a, candidate.memory_b)
    # A memory that explicitly replaces the other is a revision already, not a candidate.
    engine.remember("The API timeout is 30 seconds.")
    old = engine.remember("The cache TTL is 5 minutes.")
    engine.remember("The cache TTL is 10 minutes.", supersedes=[old.id])
    assert len(engine.pending()) == 1


def test_the_check_can_be_turned_off_per_call_or_per_vault(tmp_path, embedder):
    with Engine.open(tmp_path / "a", embedder=embedder) as eng:
        eng.remember_many([{"content": a} for a, _ in CONTRADICTING])
        eng.remember_many([{"content": b} for _, b in CONTRADICTING], check_contradictions=False)
        assert eng.pending() == []
    vault = tmp_path / "b"
    vault.mkdir()
    (vault / "config.toml").write_text("[contradictions]\ncheck_on_remember = false\n")
    with Engine.open(vault, embedder=embedder) as eng:
        plant(eng)
        assert eng.pending() == []
        eng.remember_many([{"content": "The deploy pipeline is reliable again."}], check_contradictions=True)
        assert len(eng.pending()) == 1


def test_vault_sections_and_insights_are_left_out_of_the_remember_check(engine):
    source = Source(file_path="ops.md", heading_path=["Pipeline"])
    engine.remember("The deploy pipeline is reliable.", source=source)
    engine.remember("The deploy pipeline is unreliable.", source=source)
    engine.remember("The deploy pipeline is reliable.", kind="INSIGHT")
    engine.remember("The deploy pipeline is not reliable.", kind="INSIGHT")
    assert engine.pending() == []


# Prepare ---------------------------------------------------------------------------------------

def test_prepare_shows_both_sides_in_full_most_likely_first(engine):
    pairs = plant(engine, entity_id="ops", importance=0.7)
    prepared = engine.contradiction_prepare()
    assert len(prepared.candidates) == 3 and prepared.dropped == 0
    for c in prepared.candidates:
        assert frozenset((c.memory_a.id, c.memory_b.id)) in pairs
        assert c.memory_a.entity_id == "ops" and c.memory_b.importance == 0.7
        assert c.memory_a.content and c.memory_b.content and c.reasons and c.similarity >= 0.5
    confidences = [c.confidence for c in prepared.candidates]
    assert confidences == sorted(confidences, reverse=True)
    assert len(engine.contradiction_prepare(max_results=1).candidates) == 1
    with pytest.raises(InvalidInput, match="max_results"):
        engine.contradiction_prepare(max_results=0)


def test_prepare_drops_candidates_whose_side_is_gone_or_replaced(engine):
    plant(engine)
    first, second, third = engine.contradiction_prepare().candidates
    engine.forget([first.memory_a.id])
    engine.remember("Something else entirely about llamas.", supersedes=[second.memory_b.id])
    prepared = engine.contradiction_prepare()
    # forget removes its own candidates; prepare drops the one whose side was superseded.
    assert [c.pending_id for c in prepared.candidates] == [third.pending_id] and prepared.dropped == 1
    assert [p.id for p in engine.pending()] == [third.pending_id]


# Commit ----------------------------------------------------------------------------------------

def test_a_contradiction_adds_edges_both_ways_and_drops_the_candidate_in_one_batch(engine, monkeypatch):
    plant(engine)
    pid = pending_for(engine, "The deploy pipeline is reliable.")
    candidate = next(c for c in engine.contradiction_prepare().candidates if c.pending_id == pid)
    spy = BatchSpy(engine.vault.store, monkeypatch)
    done = engine.contradiction_commit([{"pending_id": pid, "verdict": "contradiction"}])
    assert len(spy.batches) == 1
    families = spy.families()
    assert families["pending-"] == 1 and families["graph"] == 4  # two edges, each with its reverse key
    assert done.contradictions == [pid] and done.revisions == done.dismissed == [] and done.files == []
    a, b = candidate.memory_a.id, candidate.memory_b.id
    assert {(e.source, e.target) for e in done.edges} == {(a, b), (b, a)}
    assert {(e.source, e.target) for e in engine.edges(a) if e.edge_type == "CONTRADICTS"} == {(a, b), (b, a)}
    assert pid not in {p.id for p in engine.pending()} and len(engine.pending()) == 2
    assert engine.get(a).superseded_by is None and engine.get(b).superseded_by is None


def test_a_revision_supersedes_the_older_memory_in_one_batch(engine, monkeypatch):
    plant(engine)
    pid = pending_for(engine, "The API timeout is 30 seconds.")
    spy = BatchSpy(engine.vault.store, monkeypatch)
    done = engine.contradiction_commit([ContradictionVerdict(pending_id=pid, verdict="Revision")])
    assert len(spy.batches) == 1 and spy.families()["pending-"] == 1 and spy.families()["default"] == 1
    older = next(m for m in engine.memories() if m.content == "The API timeout is 30 seconds.")
    newer = next(m for m in engine.memories() if m.content == "The API timeout is 60 seconds.")
    assert done.revisions == [pid] and done.superseded == [older.id]
    assert older.superseded_by == newer.id
    assert [(e.source, e.edge_type, e.target) for e in engine.edges(newer.id, "out") if e.edge_type == "REVISED_FROM"] \
        == [(newer.id, "REVISED_FROM", older.id)]
    ids = engine.recall("what is the API timeout", top_k=10, reinforce=False).ids()
    assert newer.id in ids and older.id not in ids  # the engine's catalog knows at once
    assert older.id in engine.recall("what is the API timeout", top_k=10, reinforce=False, include_superseded=True).ids()


def test_neutral_dismisses_and_one_commit_can_mix_verdicts(engine, monkeypatch):
    plant(engine)
    ids = [pending_for(engine, a) for a, _ in CONTRADICTING]
    edges_before = {e.source + e.target + e.edge_type for m in engine.memories() for e in engine.edges(m.id)}
    spy = BatchSpy(engine.vault.store, monkeypatch)
    done = engine.contradiction_commit([{"pending_id": ids[0], "verdict": "neutral"},
                                     {"pending_id": ids[1], "verdict": "revision"},
                                     {"pending_id": ids[2], "verdict": "contradiction", "confidence": 0.6}])
    assert len(spy.batches) == 1 and spy.families()["pending-"] == 3
    assert done.dismissed == [ids[0]] and done.revisions == [ids[1]] and done.contradictions == [ids[2]]
    assert engine.pending() == []
    reliable = [m for m in engine.memories() if "reliable" in m.content]
    assert all(m.superseded_by is None for m in reliable)
    assert not any(e.edge_type == "CONTRADICTS" for m in reliable for e in engine.edges(m.id))
    contradicts = [e for e in done.edges if e.edge_type == "CONTRADICTS"]
    assert len(contradicts) == 2 and all(e.confidence == 0.6 for e in contradicts)
    edges_after = {e.source + e.target + e.edge_type for m in engine.memories() for e in engine.edges(m.id)}
    assert len(edges_after - edges_before) == 3  # two CONTRADICTS and one REVISED_FROM


@pytest.mark.parametrize("verdicts, error, message", [
    (lambda ids: [{"pending_id": "01J00000000000000000000000", "verdict": "neutral"}], NotFound,
     "no pending contradiction candidate"),
    (lambda ids: [{"pending_id": ids[0], "verdict": "maybe"}], InvalidInput,
     "must be one of contradiction, revision, neutral"),
    (lambda ids: [{"pending_id": ids[0], "verdict": "revision"},
                  {"pending_id": "01J00000000000000000000000", "verdict": "contradiction"}], NotFound, "no pending"),
    (lambda ids: [{"pending_id": ids[0], "verdict": "contradiction"},
                  {"pending_id": ids[0].lower(), "verdict": "neutral"}], InvalidInput, "has two verdicts"),
    (lambda ids: [{"pending_id": "nope", "verdict": "neutral"}], InvalidInput, "not a valid id"),
    (lambda ids: [{"pending_id": ids[0], "verdict": "contradiction", "confidence": 2}], InvalidInput, "from 0 to 1"),
    (lambda ids: [{"pending_id": ids[0]}], InvalidInput, "missing required field `verdict`"),
    (lambda ids: [{"pending_id": ids[0], "verdict": "neutral", "why": "x"}], InvalidInput, "unknown field"),
    (lambda ids: [], InvalidInput, "nothing to commit"),
    (lambda ids: {"pending_id": ids[0], "verdict": "neutral"}, InvalidInput, "must be a list"),
])
def test_bad_verdicts_change_nothing(engine, verdicts, error, message):
    plant(engine)
    ids = [p.id for p in engine.pending()]

    def state() -> tuple:
        return (sorted(p.id for p in engine.pending()), sorted((m.id, m.superseded_by) for m in engine.memories()),
                sorted((e.source, e.edge_type, e.target) for m in engine.memories() for e in engine.edges(m.id, "out")))

    before = state()
    with pytest.raises(error, match=message):
        engine.contradiction_commit(verdicts(ids))
    assert state() == before


def test_forgetting_a_side_takes_its_candidate_with_it(engine):
    plant(engine)
    candidate = engine.contradiction_prepare().candidates[0]
    engine.forget([candidate.memory_b.id])
    assert candidate.pending_id not in [p.id for p in engine.pending()]
    with pytest.raises(NotFound):
        engine.contradiction_commit([{"pending_id": candidate.pending_id, "verdict": "contradiction"}])


def test_a_markdown_vault_gets_a_report_for_each_confirmed_contradiction(tmp_path, embedder):
    root = tmp_path / "notes"
    root.mkdir()
    with Engine.open(root / ".hebbs", embedder=embedder) as eng:
        a = eng.remember("The deploy pipeline is reliable.",
                         source=Source(file_path="ops/ci.md", heading_path=["CI", "Status"]))
        b = eng.remember("The deploy pipeline is unreliable.")
        # b is checked against its neighbours when remembered, notes' sections among them.
        [candidate] = eng.contradiction_prepare().candidates
        done = eng.contradiction_commit([{"pending_id": candidate.pending_id, "verdict": "contradiction",
                                          "confidence": 0.9, "note": "Both were said in the same week."}])
    [report] = [Path(f) for f in done.files]
    assert report.parent == root / "contradictions"
    text = report.read_text()
    assert text.startswith("---\nkind: contradiction\n") and f"memory_a: {candidate.memory_a.id}" in text
    assert "confidence: 0.9" in text and f"heuristic_confidence: {candidate.confidence:g}" in text
    assert "> The deploy pipeline is reliable." in text and "> The deploy pipeline is unreliable." in text
    assert "Source: `ops/ci.md` › CI › Status" in text and "Source: remembered directly" in text
    assert "[[ops/ci#Status]]" in text and "Note: Both were said in the same week." in text
    assert "antonyms: reliable / unreliable" in text
    assert {a.id, b.id} == {candidate.memory_a.id, candidate.memory_b.id}


def test_the_verdicts_file_format():
    from hebbs.workflows.contradiction_review import load_verdicts_file

    item = {"pending_id": "01J00000000000000000000000", "verdict": "Neutral"}
    assert load_verdicts_file(json.dumps({"verdicts": [item]}))[0].verdict == "neutral"
    assert load_verdicts_file(json.dumps([item]))[0].pending_id == item["pending_id"]
    unknown = json.dumps([{**item, "verdict": "?"}])
    for raw, message in (("[", "not valid JSON"), ("{}", "must be"), (unknown, "one of")):
        with pytest.raises(InvalidInput, match=message):
            load_verdicts_file(raw)


def test_a_note_section_edited_after_a_revision_verdict_is_recalled_again(tmp_path, embedder):
    """QA: a note superseded by a 'revision' verdict and then edited stayed superseded, so recall never
    showed what the file says now."""
    with Engine.open(tmp_path / "vault", embedder=embedder) as eng:
        older = eng.remember("The API gateway timeout is 30 seconds.",
                             source=Source(file_path="gateway.md", heading_path=["Gateway"]))
        eng.remember("The API gateway timeout is 60 seconds.")
        [candidate] = eng.contradiction_prepare().candidates
        eng.contradiction_commit([{"pending_id": candidate.pending_id, "verdict": "revision", "confidence": 0.9}])
        assert eng.get(older.id).superseded_by is not None
        eng.revise(older.id, content="The API gateway timeout is 45 seconds.")
        assert eng.get(older.id).superseded_by is None
        found = eng.recall("API gateway timeout", strategies=["lexical"])
        assert older.id in [r.memory.id for r in found.results]
