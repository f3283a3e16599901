"""Notes the indexer cannot take must not break the folder, nor the daemon (issue 39, items 2 and 3).

A file or folder whose name is not UTF-8 is skipped and named (with \\xNN escapes) in the index's
result and in `hebbs list`, never INTERNAL, never a dropped reply, and `hebbs watch` carries on; a
note over [notes] max_note_bytes is skipped and named; a large note under the limit, or random bytes
named .md, is indexed with the daemon's memory bounded; SIGTERM during a long index stops the daemon
at its next batch, the run answered CANCELLED, and the vault reopens with every batch it committed.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec
import pytest

from hebbs import Engine
from hebbs.errors import Cancelled
from hebbs.protocol import ERROR, Response

import processes
from daemon_harness import ForegroundDaemon

if TYPE_CHECKING:
    from daemon_fixtures import DaemonHome

pytest_plugins = ["daemon_fixtures"]

# A guard against a hang, never a timing assertion.
GUARD = 300.0
WORDS = ("apple river stone quiet market lantern orbit garden signal copper thunder violet harbor ledger "
         "meadow cobalt falcon pepper saddle timber").split()


def _json(done: subprocess.CompletedProcess[str]) -> Any:
    return json.loads(done.stdout)


def _odd_names(root: Path) -> None:
    """good.md, a Latin-1 file name and a Latin-1 folder name with a note in it."""
    (root / "good.md").write_text("# Good\n\nThe orchard grows pears and quinces.\n")
    base = os.fsencode(root)
    (Path(os.fsdecode(base + b"/caf\xe9.md"))).write_bytes(b"# Cafe\n\nCoffee on the terrace.\n")
    folder = Path(os.fsdecode(base + b"/d\xe9"))
    folder.mkdir()
    (folder / "inner.md").write_text("# Inner\n\nA note in a Latin-1 folder.\n")


def test_names_that_are_not_utf8_are_skipped_and_named(shared_daemon: "DaemonHome", project: Path) -> None:
    """Tried: `hebbs index` and `hebbs list` on a folder holding caf\\xe9.md and d\\xe9/inner.md (Latin-1)
    beside good.md. Before: index failed with UnicodeEncodeError [INTERNAL] naming no file, and list got
    no reply. Now good.md is indexed, both odd names are in `skipped` and named in a warning, and
    list answers with them as "skipped"."""
    _odd_names(project)
    done = shared_daemon.hebbs("index", str(project), "--format", "json", check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "INTERNAL" not in done.stdout + done.stderr
    summary = _json(done)
    assert summary["sections_total"] == 1 and summary["files_changed"] == 1
    assert sorted(summary["skipped"]) == ["caf\\xe9.md", "d\\xe9/"]
    assert any(w.startswith("caf\\xe9.md: its name is not UTF-8") for w in summary["warnings"])
    assert any(w.startswith("d\\xe9/: its name is not UTF-8") for w in summary["warnings"])

    listed = shared_daemon.hebbs("list", str(project), "--format", "json", check=False)
    assert listed.returncode == 0, listed.stdout + listed.stderr
    states = {f["path"]: f["state"] for f in _json(listed)}
    assert states == {"caf\\xe9.md": "skipped", "d\\xe9/": "skipped", "good.md": "synced"}
    text = shared_daemon.hebbs("list", str(project))
    assert "skipped caf\\xe9.md: its name is not UTF-8" in text.stdout


@pytest.mark.timeout(240)  # the watcher is read line by line: a missed event must fail, not hang
def test_watch_carries_on_past_a_name_that_is_not_utf8(shared_daemon: "DaemonHome", project: Path) -> None:
    """Tried: `hebbs watch`, then caf\\xe9.md and carol.md created together. Before: the batch of changes
    failed in the client (the path could not be sent), carol.md was not indexed and the watcher said
    INTERNAL. Now carol.md is indexed, the odd name is skipped and named, and the watcher runs on."""
    (project / "good.md").write_text("# Good\n\nThe orchard grows pears.\n")
    hebbs = str(Path(sys.executable).with_name("hebbs"))
    with processes.started([hebbs, "watch", str(project), "--format", "json"], env=shared_daemon.env(),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as watcher:
        while json.loads(watcher.stdout.readline())["event"] != "watching":
            pass
        Path(os.fsdecode(os.fsencode(project) + b"/caf\xe9.md")).write_bytes(b"# Cafe\n\nCoffee.\n")
        (project / "carol.md").write_text("# Carol\n\nCarol runs the finance team.\n")
        skipped: list[str] = []
        while True:
            line = watcher.stdout.readline()
            assert line, f"the watcher stopped:\n{watcher.stderr.read()}"
            event = json.loads(line)
            assert event.get("status_code") != "INTERNAL", event
            skipped += event.get("skipped", [])
            if event["event"] == "indexed" and event["sections_added"]:
                break
        assert event["sections_total"] == 2 and "caf\\xe9.md" in skipped
        assert watcher.poll() is None
        watcher.send_signal(signal.SIGINT)
        assert watcher.wait(timeout=GUARD) == 0


def test_a_reply_holding_a_name_that_is_not_utf8_is_still_sent() -> None:
    """The root cause of list's dropped reply: a str holding surrogate-escaped bytes cannot be encoded
    as JSON, and the connection ended without a reply. Every reply now gets a frame, the bytes shown
    as \\xNN."""
    from hebbs.daemon.server import _frame

    frame = _frame(Response(id=7, status=ERROR, status_code="INVALID_REQUEST",
                            error=os.fsdecode(b"/notes/caf\xe9.md is not a directory"), data=[{"path": "d\udce9/"}]))
    reply = msgspec.json.decode(frame[4:])
    assert reply["error"] == "/notes/caf\\xe9.md is not a directory" and reply["data"] == [{"path": "d\\xe9/"}]


def test_a_note_over_the_limit_is_skipped_and_named(shared_daemon: "DaemonHome", project: Path) -> None:
    """Tried: a 6 MB note, over the default limit, and 3 MB of random bytes (with no NUL) named .md,
    beside two notes. Before: both were parsed, the random bytes into thousands of sections of U+FFFD.
    Now the big note is skipped (named, with its size and the setting) and the random bytes are not
    indexed (not text); the two notes are."""
    rng = random.Random(39)
    (project / "a.md").write_text("# A\n\nThe harbour opens at dawn.\n")
    (project / "b.md").write_text("# B\n\nThe ledger is kept in the office.\n")
    (project / "huge.md").write_text("# Huge\n\n" + " ".join(rng.choice(WORDS) for _ in range(1_000_000)))
    (project / "noise.md").write_bytes(bytes(rng.randrange(1, 256) for _ in range(3_000_000)))
    assert (project / "huge.md").stat().st_size > 5_000_000
    summary = _json(shared_daemon.hebbs("index", str(project), "--format", "json", timeout=GUARD))
    assert summary["skipped"] == ["huge.md"] and summary["sections_total"] == 2
    assert any(w.startswith("huge.md: ") and "max_note_bytes" in w for w in summary["warnings"])
    assert any(w.startswith("noise.md: does not look like text") for w in summary["warnings"])
    states = {f["path"]: f["state"] for f in _json(shared_daemon.hebbs("list", str(project), "--format", "json"))}
    assert states["huge.md"] == "skipped"

    # The limit is a setting ([notes] in the folder's .hebbs/config.toml): lowered under b.md, b.md is
    # skipped too, and its memory goes.
    config = project / ".hebbs" / "config.toml"
    config.write_text(re.sub(r"(?m)^max_note_bytes = .*$", "max_note_bytes = 35", config.read_text()))
    again = _json(shared_daemon.hebbs("index", str(project), "--format", "json"))
    assert again["skipped"] == ["b.md", "huge.md", "noise.md"] and again["sections_total"] == 1
    assert any(w.startswith("b.md: 39 bytes, over the 35-byte limit") for w in again["warnings"]), again["warnings"]


def _peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM")


def _reset_peak(pid: int) -> None:
    """Writing 5 to clear_refs resets VmHWM to the current RSS (Linux 4.0+)."""
    Path(f"/proc/{pid}/clear_refs").write_text("5")


def test_a_large_note_under_the_limit_takes_bounded_memory() -> None:
    """Tried: phase 1 of a 4 MB note with no headings (one section, cut into chunks), in a daemon whose
    peak RSS is read from /proc. Before: its tokens were counted in one call over the whole section, and
    the daemon's peak grew by over 500 MB; now by well under 200 MB."""
    rng = random.Random(3)
    daemon = ForegroundDaemon().start()
    try:
        root = daemon.project()
        client = daemon.client(root / ".hebbs", timeout=GUARD)
        (root / "small.md").write_text("# Small\n\nA short note opens the vault and loads the tokenizer.\n")
        client.index(str(root), phase=1)
        text, size = [], 0
        while size < 4_000_000:
            text.append(" ".join(rng.choice(WORDS) for _ in range(rng.randrange(8, 30))).capitalize() + ". ")
            size += len(text[-1])
        (root / "big.md").write_text("# Big\n\n" + "".join(text))
        del text
        _reset_peak(daemon.pid)
        before = daemon.rss_mb()
        plan = client.index(str(root), phase=1)
        grew = _peak_rss_mb(daemon.pid) - before
        assert plan.pending["add"] > 2000
        assert grew < 200, f"phase 1 of a 4 MB note grew the daemon's peak RSS by {grew:.0f} MB"
    finally:
        daemon.stop()


def _many_notes(root: Path, notes: int, sections: int) -> None:
    rng = random.Random(11)
    for n in range(notes):
        parts = [f"# Note {n}\n"]
        for s in range(sections):
            sentences = " ".join(" ".join(rng.choice(WORDS) for _ in range(14)).capitalize() + "." for _ in range(9))
            parts.append(f"## Part {s}\n\n{sentences}\n")
        (root / f"note{n:04d}.md").write_text("\n".join(parts))


@pytest.mark.timeout(900)
def test_sigterm_during_a_long_index_stops_at_the_next_batch() -> None:
    """Tried: SIGTERM to a daemon embedding a folder of 8,000 sections. Before: the daemon waited for the
    run (up to its 30 s drain), then dropped the connection without a reply and closed the vault under
    the running index. Now the run stops at its next batch and is answered CANCELLED ("the daemon is
    stopping"), the daemon exits, and the vault reopens holding at least every section the run reported
    embedded."""
    daemon = ForegroundDaemon().start()
    root = daemon.project()
    try:
        _many_notes(root, notes=400, sections=20)
        client = daemon.client(root / ".hebbs", timeout=GUARD)
        embedding = threading.Event()
        reports: list[Any] = []

        def progress(report: Any) -> None:
            reports.append(report)
            if report.stage == "embed" and report.done > 0:
                embedding.set()

        outcome: list[BaseException | Any] = []

        def run() -> None:
            try:
                outcome.append(client.index(str(root), progress=progress))
            except BaseException as exc:  # noqa: BLE001 - the outcome is what the test reads
                outcome.append(exc)

        worker = threading.Thread(target=run)
        worker.start()
        assert embedding.wait(GUARD), f"no embedding progress: {reports[-3:]}"
        daemon.proc.send_signal(signal.SIGTERM)
        worker.join(GUARD)
        (answer,) = outcome
        assert isinstance(answer, Cancelled), f"the run was answered {answer!r}"
        assert "the daemon is stopping" in str(answer)
        assert daemon.proc.wait(GUARD) == 0
        embedded = max(r.done for r in reports if r.stage == "embed")
        with Engine.open(root / ".hebbs") as engine:
            assert engine.count() >= embedded > 0
    finally:
        daemon.stop()
        shutil.rmtree(root, ignore_errors=True)
