"""Notes the agent writes (hebbs/notes/write.py): through a real daemon, into a real notes folder,
recalled at once, indexed again after a person's edit, and never losing that person's edit."""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path
from typing import Any

import pytest

from hebbs import Engine
from hebbs.errors import Conflict, InvalidInput
from hebbs.notes import write as notewrite
from scratch import short_tmp

pytest_plugins = ["daemon_fixtures"]

ROLLBACK = ("Rolling back the payment service: run the rollback job, then watch the error rate for ten "
            "minutes before telling the on-call engineer.")


def _found(client: Any, cue: str) -> list[Any]:
    return [r.memory for r in client.recall(cue, top_k=5).results]


def test_a_written_note_is_recalled_linked_kept_and_indexed_again_after_a_person_edits_it(
        shared_daemon: Any, project: Path) -> None:
    """Tried: a person's note, then the agent's note linking to it; recall finds the agent's note at once,
    its link is an edge, its version a kept original; the person rewrites it in their editor and an index
    run (what the watcher does) makes recall answer with the new text, the old one gone from recall."""
    (project / "deploy.md").write_text("# Deploy\n\nDeploys to production need approval from the on-call engineer.\n")
    client = shared_daemon.client(vault=project)
    client.index()

    written = client.note_write("agent/rollback.md", ROLLBACK, title="Payment rollback", tags=["ops"],
                                links=["deploy"], author="claude")
    assert written.created and written.path == "agent/rollback.md" and written.sections == 1
    note = (project / "agent" / "rollback.md").read_text()
    assert note.startswith('---\ntitle: "Payment rollback"\n') and 'author: "claude"' in note
    assert 'tags: ["ops"]' in note and "# Payment rollback\n" in note and "Related: [[deploy]]" in note
    assert (project / "agent" / "rollback.md").stat().st_mode & 0o777 == 0o600

    best = _found(client, "how do I roll back the payment service")[0]
    assert best.id == written.memory_ids[0] and best.source.file_path == "agent/rollback.md"
    assert best.context["tags"] == ["ops"] and best.context["front_matter"]["author"] == "claude"
    deploy = next(m for m in _found(client, "approval for production deploys") if m.source.file_path == "deploy.md")
    assert any(e.edge_type == "RELATED_TO" and e.target == deploy.id for e in client.inspect(best.id).edges)
    assert "watch the error rate" in client.source(best.id).text

    # The person rewrites the note in their editor.
    (project / "agent" / "rollback.md").write_text(
        note.replace(ROLLBACK, "Rolling back the payment service now takes the blue-green switch, one command."))
    client.index()
    after = _found(client, "how do I roll back the payment service")[0]
    assert "blue-green switch" in after.content and after.source.file_path == "agent/rollback.md"
    assert not any("watch the error rate" in m.content for m in _found(client, "watch the error rate ten minutes"))
    assert client.note_read("agent/rollback.md").version != written.version


def test_replacing_a_note_needs_the_version_read_and_keeps_what_the_person_added(
        shared_daemon: Any, project: Path) -> None:
    """Tried: write over a note without its version, and with the version from before a person's edit:
    both CONFLICT naming the current version, the person's text untouched; then with that version: the
    note is replaced, keeping its created time and the front matter key the person added."""
    client = shared_daemon.client(vault=project)
    first = client.note_write("decisions.md", "We keep PostgreSQL for the ledger.")
    path = project / "decisions.md"
    edited = path.read_text().replace("---\n\n", "type: decision\n---\n\n", 1) + "\nThe person added this line.\n"
    path.write_text(edited)

    with pytest.raises(Conflict) as unversioned:
        client.note_write("decisions.md", "The agent's rewrite.")
    with pytest.raises(Conflict) as stale:
        client.note_write("decisions.md", "The agent's rewrite.", expected_version=first.version)
    current = client.note_read("decisions.md")
    assert unversioned.value.version == stale.value.version == current.version != first.version
    assert path.read_text() == edited == current.text

    second = client.note_write("decisions.md", "We keep PostgreSQL for the ledger; the person's line is merged.",
                               expected_version=current.version)
    assert second.previous_version == current.version and not second.created
    text = path.read_text()
    assert 'type: "decision"' in text and "the person's line is merged" in text
    created = [line for line in edited.splitlines() if line.startswith("created:")]
    assert created and created[0] in text
    assert client.note_read("decisions.md").version == second.version


def test_append_adds_after_the_person_s_text_and_creates_a_missing_note(shared_daemon: Any, project: Path) -> None:
    """Tried: append to a missing note (created with front matter), a person edits the top, append again
    without a version: both texts kept, only `updated` of the front matter changed; with a stale version:
    CONFLICT, nothing appended."""
    client = shared_daemon.client(vault=project)
    first = client.note_append("log/incidents.md", "- 09:00 the payment queue backed up.", author="claude")
    assert first.created
    path = project / "log" / "incidents.md"
    path.write_text(path.read_text().replace("# incidents", "# Incidents this week\n\nKept by Ana and the agent."))
    by_person = path.read_text()
    second = client.note_append("log/incidents.md", "- 09:40 drained by restarting the consumer.")
    text = path.read_text()
    assert "Kept by Ana and the agent." in text and text.index("09:00") < text.index("09:40")
    changed = [(a, b) for a, b in zip(by_person.splitlines(), text.splitlines()) if a != b]
    assert all(a.startswith("updated: ") and b.startswith('updated: "') for a, b in changed)  # same second: none
    assert second.version == client.note_read("log/incidents.md").version and not second.created

    with pytest.raises(Conflict):
        client.note_append("log/incidents.md", "- never written", expected_version=first.version)
    assert "never written" not in path.read_text()


def test_paths_outside_the_notes_folder_and_what_would_not_be_indexed_are_refused(
        shared_daemon: Any, project: Path) -> None:
    """Tried: '..', an absolute path, a link to elsewhere (folder and file), not markdown, a dot-folder,
    hebbs' insights folder, a .hebbsignore rule, a note over max_note_bytes, the global vault: each
    INVALID_REQUEST, and nothing written anywhere."""
    outside = short_tmp("hbo")
    (project / "linked").symlink_to(outside)
    (outside / "target.md").write_text("outside\n")
    (project / "file-link.md").symlink_to(outside / "target.md")
    (project / ".hebbsignore").write_text("private/\n")
    config = project / ".hebbs" / "config.toml"
    config.write_text(re.sub(r"(?m)^max_note_bytes = \d+", "max_note_bytes = 2000", config.read_text()))
    client = shared_daemon.client(vault=project)
    refused = {"../escape.md": "'..'", str(outside / "abs.md"): "absolute", "linked/x.md": "symbolic link",
               "file-link.md": "symbolic link", "notes.txt": "must end with .md", "a/.md": "must end with .md",
               ".obsidian/x.md": "not indexed", "insights/x.md": "not indexed", "private/x.md": "not indexed",
               "": "empty", "sub/../../x.md": "'..'", "two\nlines.md": "control character",
               "x" * 300 + ".md": "cannot be written"}
    for path, why in refused.items():
        with pytest.raises(InvalidInput, match=re.escape(why)):
            client.note_write(path, "text")
    with pytest.raises(InvalidInput, match="max_note_bytes"):
        client.note_write("big.md", "word " * 1000)
    with pytest.raises(InvalidInput, match="no notes folder"):
        shared_daemon.client(global_=True).note_write("x.md", "text")
    assert sorted(p.name for p in outside.iterdir()) == ["target.md"] and (outside / "target.md").read_text() == "outside\n"
    assert [p.name for p in project.rglob("*.md")] == ["file-link.md"]


def test_a_save_while_hebbs_writes_is_never_lost(root_engine: tuple[Path, Engine],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Tried: the person saves the note in the instant between hebbs reading it and putting its new text
    in place (the save is made just before hebbs' last comparison). An append reads the note again and
    appends to the person's text; a write refuses with CONFLICT; a create that finds the person created
    the note first appends to theirs (append) or refuses (write)."""
    root, engine = root_engine
    saves: list[tuple[Path, str]] = []
    real_commit = notewrite._commit

    def person_saves_first(path: Path, *args: Any) -> bool:
        if saves:
            target, text = saves.pop(0)
            target.write_text(text)
        return real_commit(path, *args)

    monkeypatch.setattr(notewrite, "_commit", person_saves_first)
    note = root / "plan.md"
    note.write_text("# Plan\n\nFirst step.\n")
    saves.append((note, "# Plan\n\nFirst step.\nSecond step, saved by the person.\n"))
    done = notewrite.note_append(engine, root, "plan.md", "Agent: the third step is the rollout.")
    assert done.retries == 1
    assert note.read_text() == ("# Plan\n\nFirst step.\nSecond step, saved by the person.\n\n"
                                "Agent: the third step is the rollout.\n")

    version = notewrite.version_of(note.read_bytes())
    saves.append((note, "# Plan\n\nThe person's third version.\n"))
    with pytest.raises(Conflict) as refused:
        notewrite.note_write(engine, root, "plan.md", "The agent's whole new plan.", expected_version=version)
    assert note.read_text() == "# Plan\n\nThe person's third version.\n"
    assert refused.value.version == notewrite.version_of(note.read_bytes())

    fresh = root / "fresh.md"
    saves.append((fresh, "# Fresh\n\nThe person made it first.\n"))
    with pytest.raises(Conflict):
        notewrite.note_write(engine, root, "fresh.md", "The agent's note.")
    assert fresh.read_text() == "# Fresh\n\nThe person made it first.\n"
    fresh.unlink()
    saves.append((fresh, "# Fresh\n\nThe person made it first.\n"))
    notewrite.note_append(engine, root, "fresh.md", "And the agent's line.")
    assert fresh.read_text() == "# Fresh\n\nThe person made it first.\n\nAnd the agent's line.\n"
    assert not [p for p in root.iterdir() if p.name.endswith(".tmp")]


def test_the_command_line_reads_writes_and_says_conflict(shared_daemon: Any, project: Path) -> None:
    """Tried: `hebbs note write`, `note read` (the version), a second write without --expect (exit 1,
    CONFLICT in JSON), with --expect, and `note append` from stdin."""
    made = shared_daemon.hebbs("note", "write", "agent/cli.md", "The CLI writes notes too.", "--tag", "cli",
                               cwd=project)
    assert made.stdout.startswith("created agent/cli.md, version ") and "1 section indexed" in made.stdout
    read = shared_daemon.hebbs("--format", "json", "note", "read", "agent/cli.md", cwd=project)
    version = json.loads(read.stdout)["version"]
    refused = shared_daemon.hebbs("--format", "json", "note", "write", "agent/cli.md", "again", cwd=project,
                                  check=False)
    assert refused.returncode == 1 and json.loads(refused.stderr)["status_code"] == "CONFLICT"
    shared_daemon.hebbs("note", "write", "agent/cli.md", "Replaced.", "--expect", version, cwd=project)
    appended = shared_daemon.hebbs("note", "append", "agent/cli.md", "-", stdin="From stdin.\n", cwd=project)
    assert appended.stdout.startswith("appended to agent/cli.md")
    text = (project / "agent" / "cli.md").read_text()
    assert "Replaced." in text and text.endswith("Replaced.\n\nFrom stdin.\n")
    shown = shared_daemon.hebbs("note", "read", "agent/cli.md", cwd=project)
    assert shown.stdout.splitlines()[0].startswith("agent/cli.md  version ") and "From stdin." in shown.stdout


@pytest.fixture
def root_engine(tmp_path: Path, embedder: Any) -> Any:
    root = tmp_path / "notes"
    root.mkdir()
    engine = Engine.open(root / ".hebbs", embedder=embedder)
    yield root, engine
    engine.close()


def test_nothing_of_a_refused_write_is_left_behind(root_engine: tuple[Path, Engine]) -> None:
    """A refused write leaves no temporary file and creates no folder's note."""
    root, engine = root_engine
    with pytest.raises(InvalidInput):
        notewrite.note_write(engine, root, "deep/er/x.md", "word " * 2_000_000)
    assert not [p for p in root.rglob("*") if p.is_file() and ".hebbs" not in p.parts]
    assert os.listdir(root) == [".hebbs"]


def test_the_watcher_indexes_a_person_s_edit_of_an_agent_s_note(root_engine: tuple[Path, Engine]) -> None:
    """Tried: a watcher on the folder; the agent writes a note (indexed by the write itself: the watcher
    then finds it unchanged), the person saves an edit, and the watcher alone makes recall answer with
    the person's text, the agent's text kept as the memory's earlier version."""
    from hebbs.notes import watch_notes

    root, engine = root_engine
    summaries: list[Any] = []
    written = notewrite.note_write(engine, root, "agent/cache.md", "The cache is flushed nightly at 02:00 UTC.")
    memory_id = written.memory_ids[0]
    watcher = watch_notes(engine, root, on_summary=summaries.append, phase1_delay=0.1, phase2_delay=0.2)
    try:
        _wait(lambda: summaries, "the watcher's first scan")
        assert summaries[0].sections_revised == summaries[0].sections_added == 0
        note = root / "agent" / "cache.md"
        note.write_text(note.read_text().replace("nightly at 02:00 UTC", "every hour since the incident"))
        _wait(lambda: "every hour" in engine.get(memory_id).content, "the watcher to index the person's edit")
    finally:
        watcher.stop()
    best = engine.recall("how often is the cache flushed", top_k=1).results[0].memory
    assert best.id == memory_id and "every hour since the incident" in best.content
    assert "nightly at 02:00 UTC" in engine.history(memory_id)[0].content


def _wait(condition: Any, what: str) -> None:
    """Polls until condition() holds: a guard against a hang (60 s), not a timing assertion."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")
