"""The watcher: the debounce machine on its own, then real file events on a real vault."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from hebbs import Engine
from hebbs.notes import NotesWatcher, index_notes, watch_notes
from hebbs.notes.manifest import SYNCED, load_manifest

DEADLINE = 60.0  # generous: the machine may be busy; polls return as soon as the condition holds


def wait_for(condition, what: str, deadline: float = DEADLINE):
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[str, object]] = []
        self.lock = threading.Lock()

    def phase1(self, paths):
        with self.lock:
            self.calls.append(("phase1", set(paths)))

    def phase2(self):
        with self.lock:
            self.calls.append(("phase2", None))

    def kinds(self) -> list[str]:
        with self.lock:
            return [k for k, _ in self.calls]


# The machine without watchdog ----------------------------------------------------------------------

def test_a_burst_of_events_makes_one_phase1_and_one_phase2(tmp_path):
    rec = Recorder()
    w = NotesWatcher(tmp_path, rec.phase1, rec.phase2, phase1_delay=0.2, phase2_delay=0.2, observe=False).start()
    try:
        with w._cond:  # the burst as one: a preempted loop would let phase 1 fire part-way (its lock is re-entrant)
            for i in range(5):
                w.notify(tmp_path / f"n{i}.md")
        wait_for(lambda: rec.kinds() == ["phase1", "phase2"], "both phases")
        assert rec.calls[0][1] == {tmp_path / f"n{i}.md" for i in range(5)}
        assert w.last_phase2_delay == 0.2
    finally:
        w.stop()
    assert rec.kinds() == ["phase1", "phase2"]


def test_bulk_changes_wait_longer_before_phase2(tmp_path):
    rec = Recorder()
    w = NotesWatcher(tmp_path, rec.phase1, rec.phase2, phase1_delay=0.05, phase2_delay=0.05, bulk_delay=30.0,
                     bulk_events=20, observe=False).start()
    try:
        with w._cond:  # the burst as one, as above
            for i in range(21):
                w.notify(tmp_path / f"n{i}.md")
        wait_for(lambda: rec.kinds() == ["phase1"], "phase 1")
        assert w.last_phase2_delay == 30.0  # more than 20 events: a checkout or a bulk copy
        assert not w.idle
    finally:
        w.stop()
    assert rec.kinds() == ["phase1"]  # stop without drain drops the pending phase 2


def test_events_during_the_wait_run_phase1_again_and_postpone_phase2(tmp_path):
    rec = Recorder()
    gate = threading.Event()

    def phase1(paths):
        rec.phase1(paths)
        if len(rec.kinds()) == 1:
            gate.set()

    w = NotesWatcher(tmp_path, phase1, rec.phase2, phase1_delay=0.05, phase2_delay=5.0, observe=False).start()
    try:
        w.notify(tmp_path / "a.md")
        gate.wait(DEADLINE)
        w.notify(tmp_path / "b.md")
        wait_for(lambda: rec.kinds() == ["phase1", "phase1"], "second phase 1")
    finally:
        w.stop(drain=True)  # drain: a last phase 1 over the whole vault, then the pending phase 2
    assert rec.kinds() == ["phase1", "phase1", "phase1", "phase2"]
    assert rec.calls[2][1] == {tmp_path.resolve()}


def test_a_failing_callback_does_not_kill_the_watcher(tmp_path):
    errors: list[BaseException] = []
    rec = Recorder()

    def phase1(paths):
        rec.phase1(paths)
        if len(rec.kinds()) == 1:
            raise RuntimeError("boom")

    w = NotesWatcher(tmp_path, phase1, rec.phase2, phase1_delay=0.05, phase2_delay=0.05, observe=False,
                     on_error=errors.append).start()
    try:
        w.notify(tmp_path / "a.md")
        wait_for(lambda: errors, "the error")
        w.notify(tmp_path / "b.md")
        wait_for(lambda: rec.kinds().count("phase1") == 2 and rec.kinds()[-1] == "phase2", "recovery")
    finally:
        w.stop()
    assert str(errors[0]) == "boom"


def test_only_notes_folders_and_the_ignore_file_are_relevant(tmp_path):
    (tmp_path / ".hebbsignore").write_text("drafts/\n")
    w = NotesWatcher(tmp_path, lambda p: None, lambda: None, observe=False)
    assert w.relevant(str(tmp_path / "a.md"), False)
    assert w.relevant(str(tmp_path / "sub"), True)
    assert w.relevant(str(tmp_path / ".hebbsignore"), False)
    for path, is_dir in [("a.txt", False), (".hebbs/db/000001.log", False), (".git/x.md", False),
                         ("drafts/x.md", False), (".a.md.swp", False), ("a.md~", False), ("drafts", True),
                         ("node_modules", True)]:
        assert not w.relevant(str(tmp_path / path), is_dir), path
    assert not w.relevant("/elsewhere/a.md", False)


# Real events on a real vault -------------------------------------------------------------------------

def write(root: Path, rel: str, text: str) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def section(engine, rel: str, heading: list[str]):
    for m in engine.memories():
        if m.source is not None and m.source.file_path == rel and m.source.heading_path == heading:
            return m
    return None


@pytest.fixture
def watched(tmp_path, embedder):
    root = tmp_path / "notes"
    write(root, "acme.md", "# Acme\n\nAcme uses Salesforce.\n\n## Team\n\nCarol leads procurement.\n")
    write(root, "bob.md", "# Bob\n\nBob is the CTO.\n")
    engine = Engine.open(root / ".hebbs", embedder=embedder)
    index_notes(engine, root)
    summaries = []
    errors = []
    watcher = watch_notes(engine, root, initial_scan=False, phase1_delay=0.1, phase2_delay=0.3, bulk_delay=0.6,
                          on_summary=summaries.append, on_error=errors.append)
    yield root, engine, watcher, summaries
    watcher.stop()
    engine.close()
    assert errors == []


def test_watcher_picks_up_an_edit(watched):
    root, engine, watcher, summaries = watched
    before = section(engine, "acme.md", ["Acme"])
    write(root, "acme.md", "# Acme\n\nAcme moved to HubSpot in 2024.\n\n## Team\n\nCarol leads procurement.\n")
    after = wait_for(lambda: (m := section(engine, "acme.md", ["Acme"])) and "HubSpot" in m.content and m,
                     "the edit to reach the engine")
    assert after.id == before.id and [h.content for h in engine.history(after.id)] == [before.content]


def test_editor_save_through_a_temp_file_and_rename(watched):
    root, engine, watcher, summaries = watched
    before = section(engine, "bob.md", ["Bob"])
    tmp = write(root, ".bob.md.tmp", "# Bob\n\nBob is the CTO and a keen sailor.\n")
    os.replace(tmp, root / "bob.md")
    after = wait_for(lambda: (m := section(engine, "bob.md", ["Bob"])) and "sailor" in m.content and m,
                     "the atomic save")
    assert after.id == before.id


def test_moves_and_renames_keep_memory_ids(watched):
    root, engine, watcher, summaries = watched
    ids = {m.source.heading_path[-1]: m.id for m in engine.memories() if m.source and m.source.file_path == "acme.md"}
    (root / "clients").mkdir()
    os.rename(root / "acme.md", root / "clients" / "acme-corp.md")
    moved = wait_for(lambda: (m := section(engine, "clients/acme-corp.md", ["Acme", "Team"])) and m, "the move")
    assert moved.id == ids["Team"] and section(engine, "clients/acme-corp.md", ["Acme"]).id == ids["Acme"]
    os.rename(root / "clients", root / "customers")  # a folder rename moves every note inside
    moved = wait_for(lambda: (m := section(engine, "customers/acme-corp.md", ["Acme", "Team"])) and m,
                     "the folder move")
    assert moved.id == ids["Team"]
    assert sum(1 for m in engine.memories() if m.source) == 3  # nothing duplicated, nothing lost


def test_delete_and_stop_leave_the_manifest_consistent(watched):
    root, engine, watcher, summaries = watched
    (root / "bob.md").unlink()
    wait_for(lambda: section(engine, "bob.md", ["Bob"]) is None, "the delete")
    write(root, "carol.md", "# Carol\n\nCarol prefers email.\n")
    watcher.stop(drain=True)
    manifest, _ = load_manifest(root)
    assert not manifest.dirty and set(manifest.files) == {"acme.md", "carol.md"}
    assert all(s.state == SYNCED for f in manifest.files.values() for s in f.sections)
    assert section(engine, "carol.md", ["Carol"]) is not None
