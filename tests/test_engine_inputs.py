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

def test_history_of_a_malformed_id_is_invalid_input(vault):
    with pytest.raises(InvalidInput, match="not a valid memory id"):
        vault.history(BAD_ULID)
    m = vault.remember("the cat sat on the mat")
    assert vault.history(m.id) == []
    assert vault.history("01" + "0" * 24) == []  # well-formed, unknown: nothing earlier, as before


@pytest.mark.parametrize("now", ["x", 1.5, True, dt.datetime(2024, 1, 1)])
def test_forget_candidates_refuses_a_now_that_is_not_a_time(vault, now):
    with pytest.raises(InvalidInput, match="now"):
        vault.forget_candidates(now=now)


def test_forget_candidates_takes_microseconds_or_an_aware_datetime(vault):
    vault.remember("an unimportant aside", importance=0.01)
    far = dt.datetime(2200, 1, 1, tzinfo=dt.timezone.utc)
    assert [m.content for m in vault.forget_candidates(now=far)] == ["an unimportant aside"]
    assert vault.forget_candidates(now=int(far.timestamp() * 1_000_000)) == vault.forget_candidates(now=far)
    assert vault.forget_candidates(now=-1) == []  # any integer, as the daemon passes it on


def test_recall_takes_weights_as_a_mapping_or_four_numbers(vault):
    now = vault.remember("the deploy key rotates every 90 days", importance=0.9).created_at + 1_000
    as_struct = vault.recall("deploy key", weights=ScoringWeights(relevance=1.0), reinforce=False, now=now)
    as_dict = vault.recall("deploy key", weights={"relevance": 1}, reinforce=False, now=now)
    as_tuple = vault.recall("deploy key", weights=(1.0, 0.2, 0.2, 0.1), reinforce=False, now=now)
    assert [r.score for r in as_dict.results] == [r.score for r in as_struct.results] == \
        [r.score for r in as_tuple.results]
    assert vault.queries(limit=1)[0].weights == ScoringWeights(relevance=1.0)


@pytest.mark.parametrize("weights, message", [
    ({"relevance": 1, "bogus": 2}, "unknown scoring weights"),
    ({"relevance": "high"}, "finite numbers"),
    ({"recency": -1}, "finite numbers"),
    ({"relevance": 0, "recency": 0, "importance": 0, "reinforcement": 0}, "above 0"),
    ((1, 2), "weights must be"),
    ("relevance", "weights must be"),
])
def test_bad_weights_are_invalid_input(vault, weights, message):
    with pytest.raises(InvalidInput, match=message):
        vault.recall("anything", weights=weights)


@pytest.mark.parametrize("value", [2**70, 2**63, -(2**63) - 1, [1, {"n": 2**64}]])
def test_context_integers_beyond_64_bits_are_refused_before_storing(vault, value):
    with pytest.raises(InvalidInput, match="64 bits"):
        vault.remember("x", context={"n": value})
    assert vault.count() == 0
    assert vault.remember("y", context={"n": 2**63 - 1}).context == {"n": 2**63 - 1}


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
def test_lone_surrogates_are_invalid_input_and_store_nothing(vault, call, field):
    with pytest.raises(InvalidInput, match=f"{field} is not valid Unicode"):
        call(vault)
    assert vault.count() == 0


def test_revise_to_a_lone_surrogate_changes_nothing(vault):
    m = vault.remember("the original text")
    with pytest.raises(InvalidInput, match="not valid Unicode"):
        vault.revise(m.id, content=LONE_SURROGATE)
    assert vault.get(m.id).content == "the original text" and vault.history(m.id) == []


def test_non_ascii_text_is_still_fine(vault):
    m = vault.remember("café ☕ in Zürich 🙂", entity_id="ünïcode", context={"note": "naïve"})
    assert vault.recall("café Zürich", reinforce=False).ids()[0] == m.id


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

def test_edges_direction_must_be_one_the_daemon_knows(vault):
    m = vault.remember("a memory")
    for direction in validate.EDGE_DIRECTIONS:
        assert vault.edges(m.id, direction=direction) == []
    with pytest.raises(InvalidInput, match="direction must be one of"):
        vault.edges(m.id, direction="sideways")


@pytest.mark.parametrize("k", [0, -1, validate.MAX_TOP_K + 1, "3", True])
def test_neighbors_k_is_bounded_like_top_k(vault, k):
    m = vault.remember("a memory")
    with pytest.raises(InvalidInput, match="k must be"):
        vault.neighbors(m.id, k=k)


@pytest.mark.parametrize("limit", [0, -1, validate.MAX_QUERIES + 1, 2.5])
def test_queries_limit_is_bounded_like_the_daemons(vault, limit):
    vault.recall("something", reinforce=False)
    with pytest.raises(InvalidInput, match="limit must be"):
        vault.queries(limit=limit)
    assert len(vault.queries(limit=1)) == 1


def test_context_nesting_is_bounded_like_the_daemons(vault):
    with pytest.raises(InvalidInput, match=f"deeper than {validate.MAX_NESTING} levels"):
        vault.remember("deep", context=nested(101))
    with pytest.raises(InvalidInput, match="deeper"):
        vault.remember("deep", context=nested(validate.MAX_NESTING + 1))
    with pytest.raises(InvalidInput, match="deeper"):
        vault.remember("deep", context=nested(10_000))  # no RecursionError on the way
    assert vault.count() == 0
    kept = vault.remember("deep enough", context=nested(validate.MAX_NESTING - 4))
    assert vault.get(kept.id).context == nested(validate.MAX_NESTING - 4)


def test_the_engine_directions_are_the_protocols():
    from hebbs import protocol

    direction = typing.get_type_hints(protocol.Edges)["direction"]
    assert set(typing.get_args(direction)) == set(validate.EDGE_DIRECTIONS)


# The client side keeps its behaviour, and both doors agree --------------------------------------------

def test_the_client_and_the_engine_refuse_the_same_input(vault, shared_daemon, project: Path):
    in_process = vault.remember("a memory in process")
    with shared_daemon.client(project) as hb:
        remote = hb.remember("a memory over the daemon")
        calls = [
            lambda door, mid: door.neighbors(mid, k=0),
            lambda door, mid: door.edges(mid, direction="sideways"),
            lambda door, mid: door.queries(limit=0),
            lambda door, mid: door.remember("deep", context=nested(101)),
            lambda door, mid: door.recall("x", weights={"relevance": -1}),
            lambda door, mid: door.forget_candidates(now="x"),
        ]
        for call in calls:
            with pytest.raises(InvalidInput):
                call(vault, in_process.id)
            with pytest.raises(InvalidInput):
                call(hb, remote.id)
        with pytest.raises(InvalidInput):
            vault.history(BAD_ULID)
        with pytest.raises(NotFound):  # the daemon reads a short id as a suffix
            hb.history(BAD_ULID)
        assert hb.forget_candidates(now=-1) == [] == vault.forget_candidates(now=-1)
        assert hb.recall("memory", weights={"relevance": 1}, reinforce=False).results
        assert vault.recall("memory", weights={"relevance": 1}, reinforce=False).results


def test_an_edge_from_a_memory_to_itself_is_refused(vault):
    memory = vault.remember("a memory that cannot cause itself")
    with pytest.raises(InvalidInput, match="itself"):
        vault.add_edge(memory.id, "CAUSED_BY", memory.id)
    assert vault.edges(memory.id) == []


def test_revising_importance_refreshes_the_decay_score(vault):
    """QA: `get` showed importance 0.95 beside the decay score of the old 0.5 until the next sweep."""
    memory = vault.remember("a fact that became important", importance=0.5)
    revised = vault.revise(memory.id, importance=0.95)
    assert revised.decay_score == pytest.approx(memory.decay_score * 0.95 / 0.5, rel=1e-3)
    assert vault.get(memory.id).decay_score == revised.decay_score


def test_times_may_be_iso_8601_text_as_through_a_client(vault):
    """QA: the Client took ISO 8601 text for created_at, since and now, and the engine refused it."""
    memory = vault.remember("a dated fact", created_at="2024-05-01T12:00:00Z")
    assert memory.created_at == 1714564800000000
    naive = vault.remember("a text with no offset is UTC", created_at="2024-05-01T12:00:00")
    assert naive.created_at == memory.created_at
    with pytest.raises(InvalidInput, match="not an ISO 8601 time"):
        vault.remember("x", created_at="next tuesday")
    vault.remember("a later fact", created_at="2024-06-01T00:00:00+02:00")
    found = vault.recall("fact", time_range=("2024-05-01", "2024-05-02"), strategies=["similarity"])
    assert {r.memory.id for r in found.results} == {memory.id, naive.id}  # not the later fact
