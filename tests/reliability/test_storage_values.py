"""Values that would break later commands are refused at the door; one already stored never takes down
a vault-wide command. Stale or wrong answers about the vault's own state (issue 12, defects 5 and 10)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import msgspec
import pytest

from hebbs import CorruptVault, Engine, InvalidInput
from hebbs import doctor
from hebbs.schema import Memory, MemoryKind
from hebbs.store.storage import WriteSet, temporal_keys, id_bytes
from hebbs.validate import MAX_TIMESTAMP_US

sys.path[:0] = [str(Path(__file__).parent), str(Path(__file__).parent.parent)]
from storage_faults import damage, find_file  # noqa: E402

pytest_plugins = ["daemon_fixtures"]

YEAR_10000_US = 253_402_300_800_000_000


@pytest.mark.parametrize("created_at", [YEAR_10000_US, 2**63, 2**64 - 1])
def test_a_time_at_or_past_year_10000_is_refused(engine, created_at):
    with pytest.raises(InvalidInput, match="year 10000"):
        engine.remember("from the far future", created_at=created_at)
    assert engine.count() == 0
    assert engine.remember("the last possible moment", created_at=MAX_TIMESTAMP_US).created_at == MAX_TIMESTAMP_US


def test_a_client_cannot_write_a_revision_record(engine):
    with pytest.raises(InvalidInput, match="REVISION"):
        engine.remember("a record nothing could find", kind="REVISION")
    with pytest.raises(InvalidInput, match="REVISION"):
        engine.remember_many([{"content": "fine"}, {"content": "not fine", "kind": MemoryKind.REVISION}])
    assert engine.count() == 0 and engine.stats().by_kind == {}
    assert engine.remember("an insight by hand", kind="INSIGHT").kind == MemoryKind.INSIGHT


def _store_raw(engine: Engine, memory: Memory) -> None:
    """What a vault written before the range checks (or by another tool) may hold."""
    writes = WriteSet()
    writes.put_memory(memory)
    for key in temporal_keys(memory.entity_id, memory.created_at % 2**64, memory.id):
        writes.put("temporal", key, id_bytes(memory.id))
    engine.vault.store.commit(writes)


def test_a_stored_out_of_range_time_breaks_no_command(tmp_path, embedder, shared_daemon):
    notes = tmp_path / "notes"
    notes.mkdir()
    path = notes / ".hebbs"
    with Engine.open(path, embedder=embedder) as eng:
        for i in range(6):
            eng.remember(f"ordinary memory {i} about the garden", entity_id="garden")
        far = Memory(id="01JAAAAAAAAAAAAAAAAAAAAAAA", content="stored from the far future about the garden",
                     entity_id="garden", created_at=2**63 + 5, updated_at=2**63 + 5)
        _store_raw(eng, far)
    with Engine.open(path, embedder=embedder) as eng:
        assert eng.get(far.id).created_at == far.created_at
        assert len(list(eng.memories())) == 7
        assert eng.stats().memories == 7
        assert eng.reflect_prepare(entity_id="garden").clusters
        assert eng.recall("garden", top_k=10, reinforce=False).results
        assert eng.recall(strategies=["temporal"], top_k=10, reinforce=False).results
    # The CLI prints times for people: its text output must not fail either.
    for args in (["get", far.id], ["get", far.id, "--format", "json"], ["export"], ["recall", "garden"],
                 ["reflect-prepare", "--entity", "garden"]):
        done = shared_daemon.hebbs(*args, "--vault", str(tmp_path / "notes"), check=False)
        assert done.returncode == 0, (args, done.stderr)
        assert "Traceback" not in done.stderr
    exported = [msgspec.json.decode(line) for line in
                shared_daemon.hebbs("export", "--vault", str(tmp_path / "notes")).stdout.splitlines()]
    assert sum(1 for record in exported if record["record"] == "memory") == 7


def test_stats_count_revisions_while_the_vault_is_open(engine):
    m = engine.remember("The deploy runs at noon")
    engine.revise(m.id, content="The deploy runs at one")
    m2 = engine.remember("The office opens at nine", entity_id="office")
    engine.revise(m2.id, content="The office opens at ten")
    assert engine.stats().by_kind == {"EPISODE": 2, "REVISION": 2}
    assert engine.count() == 2 and engine.stats().superseded == 0
    # The revision record goes with its memory, and is not counted as a memory forgotten.
    assert engine.forget(entity_id="office") == 1
    assert engine.stats().by_kind == {"EPISODE": 1, "REVISION": 1}


def test_a_lost_database_is_not_a_new_empty_vault(tmp_path, embedder):
    path = tmp_path / "v"
    with Engine.open(path, embedder=embedder) as eng:
        eng.remember("something worth keeping")
    shutil.rmtree(path / "db")
    with pytest.raises(CorruptVault, match="database of vault .* is missing") as caught:
        Engine.open(path, embedder=embedder)
    assert "vault.json" in str(caught.value)
    assert not (path / "db").exists(), "nothing was created in its place"
    # Asked for explicitly (the marker removed): the vault starts over, empty.
    (path / "vault.json").unlink()
    with Engine.open(path, embedder=embedder) as eng:
        assert eng.count() == 0


def test_a_vault_from_before_the_marker_gets_one_and_opens(tmp_path, embedder):
    path = tmp_path / "v"
    with Engine.open(path, embedder=embedder) as eng:
        eng.remember("older vault")
    (path / "vault.json").unlink()
    with Engine.open(path, embedder=embedder) as eng:
        assert eng.count() == 1
    assert (path / "vault.json").is_file()


def test_a_deleted_manifest_is_corrupt_vault_and_the_doctor_recovers_everything(tmp_path, embedder):
    path = tmp_path / "v"
    with Engine.open(path, embedder=embedder) as eng:
        eng.remember_many([{"content": f"memory {i}"} for i in range(30)])
    manifest = path / "db" / (path / "db" / "CURRENT").read_text().strip()
    manifest.unlink()
    with pytest.raises(CorruptVault, match="hebbs doctor"):
        Engine.open(path, embedder=embedder)
    report = doctor(path, export=tmp_path / "saved.jsonl")
    assert not report.healthy and report.opened == "repaired copy"
    assert report.memories_readable == report.exported == 30
    assert not manifest.exists(), "the doctor repairs a copy, never the vault itself"


def test_an_index_directory_replaced_by_a_file_does_not_break_close(tmp_path, embedder):
    path = tmp_path / "v"
    with Engine.open(path, embedder=embedder) as eng:
        m = eng.remember("the snapshot cannot be written")
    shutil.rmtree(path / "index")
    (path / "index").write_text("not a directory")
    eng = Engine.open(path, embedder=embedder)
    assert eng.recall("snapshot written", strategies=["similarity"], top_k=1).ids() == [m.id]
    eng.close()  # logs a warning; the snapshot is derived and rebuilt at the next open
    with Engine.open(path, embedder=embedder) as eng:
        assert eng.get(m.id).content == "the snapshot cannot be written"


def test_reindexing_over_a_corrupt_vault_fails_classified_and_leaves_the_manifest(own_home):
    """Defect 1's second half: `hebbs index` over a damaged vault died with an unclassified
    `Exception: Corruption` and left the manifest dirty."""
    root = own_home.home / "notes"
    root.mkdir()
    for i in range(40):
        (root / f"n{i}.md").write_text(f"# Note {i}\n\n" + f"Paragraph about the lighthouse number {i}. " * 20 + "\n")
    own_home.hebbs("index", str(root), "--format", "json")
    own_home.stop()  # the daemon closes the vault: its files are all on disk now
    damage(find_file(root / ".hebbs", "sst"), "bitflip")
    manifest = root / ".hebbs" / "vault-manifest.json"
    before = manifest.read_bytes()
    (root / "extra.md").write_text("# Extra\n\nA new note that must not be half-indexed.\n")
    done = own_home.hebbs("index", str(root), "--format", "json", check=False)
    assert done.returncode == 1
    error = msgspec.json.decode(done.stderr.strip().splitlines()[-1])
    assert error["status_code"] == "CORRUPT_VAULT"
    assert "'default'" in error["error"] and "hebbs doctor" in error["error"]
    assert manifest.read_bytes() == before
    assert b'"dirty":true' not in before
    # Isolation: the same daemon still serves its other vaults.
    own_home.hebbs("remember", "another vault is unaffected", "--global")
    assert "another vault is unaffected" in own_home.hebbs("recall", "unaffected", "--global").stdout
