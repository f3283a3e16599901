"""Bad input to the in-process Engine is a clear hebbs error (InvalidInput / NotFound), as it is through
a client, never a raw Python exception; the Engine applies the daemon's limits; a closed vault refuses
reads as it refuses writes; Engine.open resolves a notes folder as Client does."""

from __future__ import annotations

import datetime as dt
import typing
from pathlib import Path

import pytest

from hebbs import Engine, validate
from hebbs.errors import InvalidInput, NotFound
from hebbs.paths import init_vault
from hebbs.recall import pipeline
from hebbs.schema import ScoringWeights
from hebbs.workflows import revise as revising

pytest_plugins = ["daemon_fixtures"]

BAD_ULID = "ZZZZZZZZ"
LONE_SURROGATE = "bad \ud800 text"


def nested(depth: int) -> dict:
    """A context `depth` dicts deep, itself included."""
    inner: dict = {"leaf": 1}
    for _ in range(depth - 1):
        inner = {"a": inner}
    return inner


# 1-5: arguments that used to escape as ValueError, TypeError, AttributeError, OverflowError -------------

def test_history_of_a_malformed_id_is_invalid_input(engine):
    with pytest.raises(InvalidInput, match="not a valid memory id"):
        engine.history(BAD_ULID)
    m = engine.remember("the cat sat on the mat")
    assert engine.history(m.id) == []
    assert engine.history("01" + "0" * 24) == []  # well-formed, unknown: nothing earlier, as before


@pytest.mark.parametrize("now", ["x", 1.5, True, dt.datetime(2024, 1, 1)])
def test_forget_candidates_refuses_a_now_that_is_not_a_time(engine, now):
    with pytest.raises(InvalidInput, match="now"):
        engine.forget_candidates(now=now)


def test_forget_candidates_takes_microseconds_or_an_aware_datetime(engine):
    engine.remember("an unimportant aside", importance=0.01)
    far = dt.datetime(2200, 1, 1, tzinfo=dt.timezone.utc)
    assert [m.content for m in engine.forget_candidates(now=far)] == ["an unimportant aside"]
    assert engine.forget_candidates(now=int(far.timestamp() * 1_000_000)) == engine.forget_candidates(now=far)
    with pytest.raises(InvalidInput, match="negative"):  # as the daemon refuses it
        engine.forget_candidates(now=-1)


def test_recall_takes_weights_as_a_mapping_or_four_numbers(engine):
    now = engine.remember("the deploy key rotates every 90 days", importance=0.9).created_at + 1_000
    as_struct = engine.recall("deploy key", weights=ScoringWeights(relevance=1.0), reinforce=False, now=now)
    as_dict = engine.recall("deploy key", weights={"relevance": 1}, reinforce=False, now=now)
    as_tuple = engine.recall("deploy key", weights=(1.0, 0.2, 0.2, 0.1), reinforce=False, now=now)
    assert [r.score for r in as_dict.results] == [r.score for r in as_struct.results] == \
        [r.score for r in as_tuple.results]
    assert engine.queries(limit=1)[0].weights == ScoringWeights(relevance=1.0)


@pytest.mark.parametrize("weights, message", [
    ({"relevance": 1, "bogus": 2}, "unknown scoring weights"),
    ({"relevance": "high"}, "finite numbers"),
    ({"recency": -1}, "finite numbers"),
    ({"relevance": 0, "recency": 0, "importance": 0, "reinforcement": 0}, "above 0"),
    ((1, 2), "weights must be"),
    ("relevance", "weights must be"),
])
def test_bad_weights_are_invalid_input(engine, weights, message):
    with pytest.raises(InvalidInput, match=message):
        engine.recall("anything", weights=weights)


@pytest.mark.parametrize("value", [2**70, 2**63, -(2**63) - 1, [1, {"n": 2**64}]])
def test_context_integers_beyond_64_bits_are_refused_before_storing(engine, value):
    with pytest.raises(InvalidInput, match="64 bits"):
        engine.remember("x", context={"n": value})
    assert engine.count() == 0
    assert engine.remember("y", context={"n": 2**63 - 1}).context == {"n": 2**63 - 1}


@pytest.mark.parametrize("call, field", [
    (lambda e: e.remember(LONE_SURROGATE), "content"),
    (lambda e: e.remember("fine", entity_id="e\ud800"), "entity_id"),
    (lambda e: e.remember("fine", context={"note": "\udfff"}), "context"),
    (lambda e: e.remember("fine", context={"\ud800": 1}), "context"),
    (lambda e: e.remember("fine", key="k\ud800"), "key"),
    (lambda e: e.remember_many([{"content": "ok"}, {"content": LONE_SURROGATE}]), "content"),
    (lambda e: e.recall(LONE_SURROGATE), "cue"),
    (lambda e: e.prime(similarity_cue=LONE_SURROGATE), "cue"),
    (lambda e: e.recall("fine", entity_id="\ud800"), "entity_id"),
])
def test_lone_surrogates_are_invalid_input_and_store_nothing(engine, call, field):
    with pytest.raises(InvalidInput, match=f"{field} is not valid Unicode"):
        call(engine)
    assert engine.count() == 0


def test_revise_to_a_lone_surrogate_changes_nothing(engine):
    m = engine.remember("the original text")
    with pytest.raises(InvalidInput, match="not valid Unicode"):
        engine.revise(m.id, content=LONE_SURROGATE)
    assert engine.get(m.id).content == "the original text" and engine.history(m.id) == []


def test_non_ascii_text_is_still_fine(engine):
    m = engine.remember("café ☕ in Zürich 🙂", entity_id="ünïcode", context={"note": "naïve"})
    assert engine.recall("café Zürich", reinforce=False).ids()[0] == m.id


# 6, 9: opening ---------------------------------------------------------------------------------------

def test_opening_a_regular_file_is_invalid_input(tmp_path, embedder):
    path = tmp_path / "notes.md"
    path.write_text("# not a vault\n")
    with pytest.raises(InvalidInput, match="is a file, not a vault directory"):
        Engine.open(path, embedder=embedder)
    with pytest.raises(InvalidInput, match="cannot open a vault"):
        Engine.open(path / "below", embedder=embedder)
    assert path.read_text() == "# not a vault\n"


def test_opening_a_notes_folder_opens_its_hebbs_vault(tmp_path, embedder):
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "a.md").write_text("# A\n")
    vault_dir, _ = init_vault(notes)
    with Engine.open(notes, embedder=embedder) as eng:
        assert eng.path == vault_dir.resolve()
        m = eng.remember("stored in the notes folder's vault")
    assert sorted(p.name for p in notes.iterdir()) == [".hebbs", "a.md"]  # no second vault among the notes
    assert (vault_dir / "db").is_dir()
    with Engine.open(vault_dir, embedder=embedder) as eng:  # the vault directory itself, as before
        assert eng.get(m.id).content == "stored in the notes folder's vault"


def test_a_folder_without_a_vault_becomes_one(tmp_path, embedder):
    with Engine.open(tmp_path / "fresh", embedder=embedder) as eng:
        assert eng.path == (tmp_path / "fresh").resolve()
    assert (tmp_path / "fresh" / "db").is_dir()


# 7: a closed vault -----------------------------------------------------------------------------------

READS = {
    "recall": lambda e, mid: e.recall("x"),
    "recall temporal": lambda e, mid: e.recall(),
    "prime": lambda e, mid: e.prime(similarity_cue="x"),
    "get": lambda e, mid: e.get(mid),
    "history": lambda e, mid: e.history(mid),
    "source": lambda e, mid: e.source(mid),
    "edges": lambda e, mid: e.edges(mid),
    "neighbors": lambda e, mid: e.neighbors(mid),
    "accesses": lambda e, mid: e.accesses(mid),
    "pending": lambda e, mid: e.pending(),
    "insights": lambda e, mid: e.insights(),
    "contradiction_prepare": lambda e, mid: e.contradiction_prepare(),
    "reflect_prepare": lambda e, mid: e.reflect_prepare(),
    "forget_candidates": lambda e, mid: e.forget_candidates(),
    "queries": lambda e, mid: e.queries(),
    "memories": lambda e, mid: list(e.memories()),
    "count": lambda e, mid: e.count(),
    "stats": lambda e, mid: e.stats(),
    "rebuild_lexical": lambda e, mid: e.rebuild_lexical(),
    "remember": lambda e, mid: e.remember("y"),
    "revise": lambda e, mid: e.revise(mid, content="changed"),
    "unconsolidate": lambda e, mid: e.unconsolidate(mid),
    "reinforce": lambda e, mid: e.reinforce([mid]),
    "forget": lambda e, mid: e.forget([mid]),
}


@pytest.mark.parametrize("name", list(READS))
def test_every_call_on_a_closed_vault_says_it_is_closed(tmp_path, embedder, name):
    eng = Engine.open(tmp_path / "v", embedder=embedder)
    mid = eng.remember("a memory").id
    eng.close()
    with pytest.raises(InvalidInput, match=r"vault .* is closed"):
        READS[name](eng, mid)


def test_a_recall_that_close_overtakes_says_the_vault_is_closed(tmp_path, embedder, monkeypatch):
    eng = Engine.open(tmp_path / "v", embedder=embedder)
    eng.remember("a memory about tea")
    run = pipeline.run

    def closed_midway(vault, request):
        eng.close()  # close() runs between the recall's checks and its reads
        return run(vault, request)

    monkeypatch.setattr(pipeline, "run", closed_midway)
    with pytest.raises(InvalidInput, match="is closed") as caught:
        eng.recall("tea")
    assert caught.value.__suppress_context__  # the closed index's own error is not shown


def test_reads_that_close_overtakes_say_the_vault_is_closed(tmp_path, embedder, monkeypatch):
    eng = Engine.open(tmp_path / "v", embedder=embedder)
    m = eng.remember("a memory")
    history = revising.history

    def closed_midway(vault, memory_id):
        eng.close()
        return history(vault, memory_id)

    monkeypatch.setattr(revising, "history", closed_midway)
    with pytest.raises(InvalidInput, match="is closed"):
        eng.history(m.id)

    eng = Engine.open(tmp_path / "v", embedder=embedder)
    eng.remember("another memory")
    memories = eng.memories()
    next(memories)
    eng.close()
    with pytest.raises(InvalidInput, match="is closed"):
        list(memories)


# 8: the daemon's limits ------------------------------------------------------------------------------

def test_edges_direction_must_be_one_the_daemon_knows(engine):
    m = engine.remember("a memory")
    for direction in validate.EDGE_DIRECTIONS:
        assert engine.edges(m.id, direction=direction) == []
    with pytest.raises(InvalidInput, match="direction must be one of"):
        engine.edges(m.id, direction="sideways")


@pytest.mark.parametrize("k", [0, -1, validate.MAX_TOP_K + 1, "3", True])
def test_neighbors_k_is_bounded_like_top_k(engine, k):
    m = engine.remember("a memory")
    with pytest.raises(InvalidInput, match="k must be"):
        engine.neighbors(m.id, k=k)


@pytest.mark.parametrize("limit", [0, -1, validate.MAX_QUERIES + 1, 2.5])
def test_queries_limit_is_bounded_like_the_daemons(engine, limit):
    engine.recall("something", reinforce=False)
    with pytest.raises(InvalidInput, match="limit must be"):
        engine.queries(limit=limit)
    assert len(engine.queries(limit=1)) == 1


def test_context_nesting_is_bounded_like_the_daemons(engine):
    with pytest.raises(InvalidInput, match=f"deeper than {validate.MAX_NESTING} levels"):
        engine.remember("deep", context=nested(101))
    with pytest.raises(InvalidInput, match="deeper"):
        engine.remember("deep", context=nested(validate.MAX_NESTING + 1))
    with pytest.raises(InvalidInput, match="deeper"):
        engine.remember("deep", context=nested(10_000))  # no RecursionError on the way
    assert engine.count() == 0
    kept = engine.remember("deep enough", context=nested(validate.MAX_NESTING - 4))
    assert engine.get(kept.id).context == nested(validate.MAX_NESTING - 4)


def test_the_engine_directions_are_the_protocols():
    from hebbs import protocol

    direction = typing.get_type_hints(protocol.Edges)["direction"]
    assert set(typing.get_args(direction)) == set(validate.EDGE_DIRECTIONS)


# The client side keeps its behaviour, and both doors agree --------------------------------------------

def test_the_client_and_the_engine_refuse_the_same_input(engine, shared_daemon, project: Path):
    in_process = engine.remember("a memory in process")
    with shared_daemon.client(project) as hb:
        remote = hb.remember("a memory over the daemon")
        calls = [
            lambda door, mid: door.neighbors(mid, k=0),
            lambda door, mid: door.edges(mid, direction="sideways"),
            lambda door, mid: door.queries(limit=0),
            lambda door, mid: door.remember("deep", context=nested(101)),
            lambda door, mid: door.recall("x", weights={"relevance": -1}),
            lambda door, mid: door.forget_candidates(now="x"),
            lambda door, mid: door.forget_candidates(now=-1),  # a time is microseconds since the epoch
        ]
        for call in calls:
            with pytest.raises(InvalidInput):
                call(engine, in_process.id)
            with pytest.raises(InvalidInput):
                call(hb, remote.id)
        with pytest.raises(InvalidInput):
            engine.history(BAD_ULID)
        with pytest.raises(NotFound):  # the daemon reads a short id as a suffix
            hb.history(BAD_ULID)
        assert hb.recall("memory", weights={"relevance": 1}, reinforce=False).results
        assert engine.recall("memory", weights={"relevance": 1}, reinforce=False).results


def test_an_edge_from_a_memory_to_itself_is_refused(engine):
    memory = engine.remember("a memory that cannot cause itself")
    with pytest.raises(InvalidInput, match="itself"):
        engine.add_edge(memory.id, "CAUSED_BY", memory.id)
    assert engine.edges(memory.id) == []


def test_revising_importance_refreshes_the_decay_score(engine):
    """QA: `get` showed importance 0.95 beside the decay score of the old 0.5 until the next sweep."""
    memory = engine.remember("a fact that became important", importance=0.5)
    revised = engine.revise(memory.id, importance=0.95)
    assert revised.decay_score == pytest.approx(memory.decay_score * 0.95 / 0.5, rel=1e-3)
    assert engine.get(memory.id).decay_score == revised.decay_score


def test_times_may_be_iso_8601_text_as_through_a_client(engine):
    """QA: the Client took ISO 8601 text for created_at, since and now, and the engine refused it."""
    memory = engine.remember("a dated fact", created_at="2024-05-01T12:00:00Z")
    assert memory.created_at == 1714564800000000
    naive = engine.remember("a text with no offset is UTC", created_at="2024-05-01T12:00:00")
    assert naive.created_at == memory.created_at
    with pytest.raises(InvalidInput, match="not an ISO 8601 time"):
        engine.remember("x", created_at="next tuesday")
    engine.remember("a later fact", created_at="2024-06-01T00:00:00+02:00")
    found = engine.recall("fact", time_range=("2024-05-01", "2024-05-02"), strategies=["similarity"])
    assert {r.memory.id for r in found.results} == {memory.id, naive.id}  # not the later fact
