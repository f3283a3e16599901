"""Who stored each memory (author, daemon) and in what scope (agent, session), on both stores: stamped at
remember, filtered where recall finds its candidates (a narrow filter still fills top_k), kept by revise,
export and import and a reopen, and unset on records written before the fields existed."""

from __future__ import annotations

import os
import socket

import pytest

from hebbs import Engine


def _fill(engine: Engine, monkeypatch: pytest.MonkeyPatch) -> tuple[list[str], list[str]]:
    """Thirty memories of agent "crowd" by alice, then three of agent "few" in session s2 by bob, all about
    one subject: the crowd outranks the few for any cue about it."""
    monkeypatch.setenv("HEBBS_AUTHOR", "alice")
    crowd = [m.id for m in engine.remember_many(
        [{"content": f"The deploy pipeline runs the database migration step {n} before the release.",
          "agent": "crowd", "session": "s1"} for n in range(30)], consolidate=False, check_contradictions=False)]
    monkeypatch.setenv("HEBBS_AUTHOR", "bob")
    few = [m.id for m in engine.remember_many(
        [{"content": f"Pipeline note {n}: the deploy waits for the migration.", "agent": "few", "session": "s2"}
         for n in range(3)], consolidate=False, check_contradictions=False)]
    return crowd, few


def test_remember_stamps_author_and_daemon_and_keeps_agent_and_session(engine, monkeypatch):
    monkeypatch.setenv("HEBBS_AUTHOR", "dana@laptop")
    memory = engine.remember("The staging database is called stg-main.", agent="claude", session="run-7")
    stored = engine.get(memory.id)
    assert (stored.author, stored.agent, stored.session) == ("dana@laptop", "claude", "run-7")
    assert stored.daemon == f"{socket.gethostname()}:{os.getpid()}"
    # A revision keeps who stored the memory, on the memory and on its earlier version.
    engine.revise(memory.id, content="The staging database is called stg-primary.")
    assert engine.get(memory.id).author == "dana@laptop"
    [earlier] = engine.history(memory.id)
    assert (earlier.author, earlier.agent, earlier.session) == ("dana@laptop", "claude", "run-7")


def test_author_defaults_to_user_at_host_and_reads_home_config(engine, monkeypatch, tmp_path):
    monkeypatch.delenv("HEBBS_AUTHOR", raising=False)
    monkeypatch.setenv("HEBBS_HOME", str(tmp_path / "home"))
    first = engine.remember("An unconfigured author is user@host.")
    assert first.author is not None and first.author.endswith("@" + socket.gethostname())
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "config.toml").write_text('author = "Dana Lee"\n')
    assert engine.remember("A configured author is that name.").author == "Dana Lee"


@pytest.mark.parametrize("strategies", [None, ["similarity"], ["lexical"], ["temporal"]])
def test_filter_applies_before_truncation(engine, monkeypatch, strategies):
    crowd, few = _fill(engine, monkeypatch)
    cue = None if strategies == ["temporal"] else "deploy pipeline database migration step before the release"
    for filters in ({"agent": "few"}, {"session": "s2"}, {"author": "bob"}, {"author": "bob", "agent": "few"}):
        found = engine.recall(cue, strategies=strategies, top_k=3, **filters)
        assert sorted(found.ids()) == sorted(few), filters
    # The unfiltered recall of the same cue is all crowd: a filter applied after truncation would be empty.
    if cue is not None:
        assert not set(engine.recall(cue, strategies=strategies, top_k=3).ids()) & set(few)
    assert engine.recall(cue, strategies=strategies, top_k=3, agent="few", author="alice").ids() == []
    assert len(engine.recall(cue, strategies=strategies, top_k=5, agent="crowd").ids()) == 5


def test_prime_filters_both_halves(engine, monkeypatch):
    crowd, few = _fill(engine, monkeypatch)
    primed = engine.prime(similarity_cue="deploy pipeline migration", max_memories=10, session="s2")
    assert sorted(r.memory.id for r in primed) == sorted(few)
    assert {r.memory.agent for r in engine.prime(max_memories=10, author="alice")} == {"crowd"}


def test_export_import_and_reopen_keep_them(engine, monkeypatch, tmp_path, embedder):
    crowd, few = _fill(engine, monkeypatch)
    records = list(engine.export_records())
    by_id = {r["id"]: r for r in records if r.get("record") == "memory"}
    assert (by_id[few[0]]["author"], by_id[few[0]]["agent"], by_id[few[0]]["session"]) == ("bob", "few", "s2")
    with Engine.open(tmp_path / "copy", embedder=embedder) as copy:
        summary = copy.import_records(records)
        assert summary.imported == 33
        moved = copy.get(summary.ids[few[0]])
        assert (moved.author, moved.daemon, moved.agent, moved.session) == (
            "bob", engine.get(few[0]).daemon, "few", "s2")
        assert sorted(copy.recall("deploy pipeline", top_k=3, agent="few").ids()) == sorted(
            summary.ids[i] for i in few)
    # Closed and opened again (the catalog from its saved file): the filter still holds.
    path = engine.path
    engine.close()
    with Engine.open(path, embedder=embedder) as again:
        assert sorted(again.recall("deploy pipeline", top_k=3, session="s2").ids()) == sorted(few)


def test_records_written_before_read_as_unset(engine, monkeypatch):
    # A record as hebbs wrote it before these fields: no author, daemon, agent or session key at all.
    old = {"record": "memory", "id": "01HZZZZZZZZZZZZZZZZZZZZZZZ", "content": "An old note about the deploy pipeline.",
           "created_at": 1_700_000_000_000_000, "updated_at": 1_700_000_000_000_000}
    summary = engine.import_records([old])
    memory = engine.get(summary.ids[old["id"]])
    assert (memory.author, memory.daemon, memory.agent, memory.session) == (None, None, None, None)
    monkeypatch.setenv("HEBBS_AUTHOR", "carol")
    engine.remember("A new note about the deploy pipeline.", agent="a1")
    assert memory.id in engine.recall("deploy pipeline", top_k=5).ids()
    assert memory.id not in engine.recall("deploy pipeline", top_k=5, author="carol").ids()
    assert engine.recall("deploy pipeline", top_k=5, agent="nobody").ids() == []


def test_bad_filter_values_are_refused(engine):
    from hebbs import InvalidInput

    for bad in ("", "   ", "x" * 600):
        with pytest.raises(InvalidInput):
            engine.recall("anything", agent=bad)
        with pytest.raises(InvalidInput):
            engine.remember("anything", session=bad)


def test_a_catalog_saved_before_the_fields_is_rebuilt(engine, monkeypatch, embedder):
    """A catalog file written by an earlier hebbs has no author, agent or session columns: the open reads
    it as stale and rebuilds the catalog from the records, whose fields then filter as before."""
    import msgspec
    import xxhash

    crowd, few = _fill(engine, monkeypatch)
    path = engine.path
    engine.close()
    saved = path / "index" / "catalog.bin"
    fields = msgspec.msgpack.decode(saved.read_bytes()[16:])
    old = msgspec.msgpack.encode(fields[:10])  # the snapshot as hebbs saved it before the three columns
    saved.write_bytes(xxhash.xxh3_128_digest(old) + old)
    with Engine.open(path, embedder=embedder) as again:
        assert sorted(again.recall("deploy pipeline", top_k=3, agent="few").ids()) == sorted(few)
        assert len(again.recall("deploy pipeline", top_k=40, author="alice").ids()) == 30


def test_a_bad_author_name_is_said_where_it_was_set(engine, monkeypatch, tmp_path):
    from hebbs import InvalidInput
    from hebbs.config import load_config

    monkeypatch.setenv("HEBBS_AUTHOR", "two\nlines")
    with pytest.raises(InvalidInput, match=r"\$HEBBS_AUTHOR must be one line"):
        engine.remember("Nothing is stored under a broken name.")
    (tmp_path / "config.toml").write_text('author = "   "\n')
    with pytest.raises(InvalidInput, match="author must be one line"):
        load_config(tmp_path)
