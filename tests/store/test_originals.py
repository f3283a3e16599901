"""The original kept: file versions in the vault, `source` after edits and deletes, and the pruning bound."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from hebbs import Engine, MemoryKind, NotFound
from hebbs.store.originals import Originals
from hebbs.notes import index_notes

pytest_plugins = ["daemon_fixtures"]

DEPLOY_V1 = "# Deploys\n\nIntro line.\n\n## Keys\n\nThe deploy key rotates every 90 days.\nAsk Dana first.\n"
DEPLOY_V2 = "# Deploys\n\nIntro line.\n\n## Keys\n\nThe deploy key rotates every 30 days now.\nAsk Dana first.\n"
BILLING = "# Billing\n\nBob is on call for billing in odd weeks.\n"


def write(root: Path, rel: str, text: str) -> None:
    (root / rel).write_text(text, encoding="utf-8")


def memory_with(engine: Engine, words: str):
    return next(m for m in engine.memories() if words in m.content)


@pytest.fixture
def notes(tmp_path) -> Path:
    root = tmp_path / "notes"
    root.mkdir()
    return root


def test_source_survives_an_edit_and_a_delete(notes, embedder):
    write(notes, "deploy.md", DEPLOY_V1)
    write(notes, "billing.md", BILLING)
    with Engine.open(notes / ".hebbs", embedder=embedder) as engine:
        index_notes(engine, notes)
        keys = memory_with(engine, "90 days")
        first = engine.source(keys.id)
        assert first.file == "deploy.md" and first.heading_path == ["Deploys", "Keys"]
        assert first.text == "## Keys\n\nThe deploy key rotates every 90 days.\nAsk Dana first."
        assert (first.line_start, first.line_end) == (5, 8)
        assert first.latest and first.file_removed_at is None
        billing = memory_with(engine, "odd weeks")

        write(notes, "deploy.md", DEPLOY_V2)
        (notes / "billing.md").unlink()
        index_notes(engine, notes)

        now = engine.source(keys.id)
        assert "30 days now" in now.text and now.sha256 != first.sha256
        revision = engine.history(keys.id)[0]
        assert revision.kind == MemoryKind.REVISION
        old = engine.source(revision.id)
        assert old.text == first.text and old.sha256 == first.sha256 and not old.latest
        assert old.indexed_at == first.indexed_at

        # billing.md is gone, and so is its memory; its kept original still answers for the id.
        with pytest.raises(NotFound):
            engine.get(billing.id)
        gone = engine.source(billing.id)
        assert gone.text == "# Billing\n\nBob is on call for billing in odd weeks."
        assert gone.file == "billing.md" and gone.file_removed_at is not None
        assert engine.source(billing.id[-8:]).text == gone.text

        sources = notes / ".hebbs" / "sources"
        assert stat.S_IMODE(sources.stat().st_mode) == 0o700
        blobs = [p for p in sources.rglob("*") if p.is_file()]
        assert blobs and all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in blobs)


def test_a_memory_not_from_a_note_has_no_source(notes, embedder):
    with Engine.open(notes / ".hebbs", embedder=embedder) as engine:
        memory = engine.remember("said in a chat, not written in a note")
        with pytest.raises(NotFound, match="no kept original"):
            engine.source(memory.id)


def test_a_damaged_index_of_the_originals_is_said_and_loses_no_blob(notes, embedder):
    """QA: garbage in sources/index.msgpack.z made `source` blame the user ("not indexed from a note"),
    the doctor report no damage, and the next index run overwrite it and sweep every old version."""
    from hebbs import doctor

    write(notes, "deploy.md", DEPLOY_V1)
    with Engine.open(notes / ".hebbs", embedder=embedder) as engine:
        index_notes(engine, notes)
        memory = memory_with(engine, "90 days")
    sources = notes / ".hebbs" / "sources"
    old_blobs = {blob.name for blob in (sources / "blobs").rglob("*") if blob.is_file()}
    (sources / "index.msgpack.z").write_bytes(os.urandom(500))
    report = doctor(notes / ".hebbs")
    assert any(f.kind == "kept originals index" and not f.ok for f in report.files)
    assert any("hebbs source" in line for line in report.advice)
    with Engine.open(notes / ".hebbs", embedder=embedder) as engine:
        with pytest.raises(NotFound, match="index was damaged"):
            engine.source(memory.id)
        write(notes, "deploy.md", DEPLOY_V2)
        index_notes(engine, notes)
        assert "30 days" in engine.source(memory_with(engine, "30 days").id).text
    assert (sources / "index.msgpack.z.damaged").exists()
    assert old_blobs <= {blob.name for blob in (sources / "blobs").rglob("*") if blob.is_file()}


def test_vault_indexed_before_originals_were_kept_is_backfilled(notes, embedder):
    write(notes, "deploy.md", DEPLOY_V1)
    vault = notes / ".hebbs"
    vault.mkdir()
    (vault / "config.toml").write_text("[sources]\nkeep = false\n")
    with Engine.open(vault, embedder=embedder) as engine:
        index_notes(engine, notes)
        assert not (vault / "sources").exists()
        keys_id = memory_with(engine, "90 days").id
    (vault / "config.toml").write_text("")
    with Engine.open(vault, embedder=embedder) as engine:
        summary = index_notes(engine, notes)
        assert summary.embedded == 0
        assert "90 days" in engine.source(keys_id).text


def test_pruning_keeps_the_bound(notes, embedder):
    vault = notes / ".hebbs"
    vault.mkdir()
    # Incompressible filler makes each version weigh what the cap counts.
    (vault / "config.toml").write_text("[sources]\nkeep_versions = 2\nmax_bytes = 20000\n")
    with Engine.open(vault, embedder=embedder) as engine:
        ids = []
        for n in range(8):
            filler = os.urandom(6000).hex()
            write(notes, "log.md", f"# Log\n\nEntry {n} of the log.\n\n## Data\n\n{filler}\n")
            write(notes, f"other{n}.md", f"# Other {n}\n\n{os.urandom(3000).hex()}\n")
            if n:
                (notes / f"other{n - 1}.md").unlink()
            index_notes(engine, notes)
            ids.append(memory_with(engine, f"Entry {n} ").id)
            kept = Originals(vault, engine.config.sources)
            assert _blob_bytes(vault) <= 20000 + _current_bytes(kept)
        # The current versions always stay, and `source` still reads the live memories.
        assert "Entry 7" in engine.source(ids[-1]).text
        index = Originals(vault, engine.config.sources)
        versions = {key: [v.sha256 for v in fv.versions] for key, fv in index._index.files.items()}
        assert len(versions[str(notes / "log.md")]) <= 3
        # Over the cap, the oldest versions nobody reads any more went first.
        assert str(notes / "other0.md") not in versions
        with pytest.raises(NotFound, match="pruned|no kept"):
            engine.source(engine.history(ids[-1])[-1].id)


def _blob_bytes(vault: Path) -> int:
    return sum(p.stat().st_size for p in (vault / "sources" / "blobs").rglob("*") if p.is_file())


def _current_bytes(kept: Originals) -> int:
    return sum(fv.versions[-1].stored for fv in kept._index.files.values() if fv.removed_at is None)


def test_hebbs_source_through_the_cli(shared_daemon, project):
    write(project, "deploy.md", DEPLOY_V1)
    shared_daemon.hebbs("index", str(project), "--format", "json")
    client = shared_daemon.client(vault=project)
    keys = next(r.memory for r in client.recall("deploy key rotates", top_k=3).results if "90 days" in r.memory.content)
    write(project, "deploy.md", DEPLOY_V2)
    shared_daemon.hebbs("index", str(project), "--format", "json")
    revision = client.inspect(keys.id).history[0]

    done = shared_daemon.hebbs("source", revision.id[-8:], "--vault", str(project))
    assert "deploy.md:5-8  Deploys > Keys" in done.stdout
    assert "(an earlier version)" in done.stdout
    assert "The deploy key rotates every 90 days.\nAsk Dana first." in done.stdout

    data = json.loads(shared_daemon.hebbs("source", keys.id, "--vault", str(project), "--format", "json").stdout)
    assert data["file"] == "deploy.md" and "30 days now" in data["text"] and data["latest"] is True
    assert client.source(revision.id).text == "## Keys\n\nThe deploy key rotates every 90 days.\nAsk Dana first."

    missing = shared_daemon.hebbs("source", "ZZZZZZZZ", "--vault", str(project), "--format", "json", check=False)
    assert missing.returncode == 1 and "Traceback" not in missing.stderr
    assert json.loads(missing.stderr)["status_code"] == "NOT_FOUND"
