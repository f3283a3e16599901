"""`hebbs index` progress: per batch with a measured rate and a time left on a terminal (a real
pseudo-terminal here), nothing but the summary when piped."""

from __future__ import annotations

import io
import os
import pty
import re
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from hebbs.cli.progress import ProgressBar, duration
from hebbs.notes.indexer import Progress

import processes
from daemon_fixtures import WAIT, short_tmp

if TYPE_CHECKING:
    from daemon_fixtures import DaemonHome

pytest_plugins = ["daemon_fixtures"]

NOTES, PARTS = 30, 4  # 120 sections: four batches of the indexer's 32


def _notes(prefix: str) -> Path:
    root = short_tmp(prefix)
    for i in range(NOTES):
        (root / f"note{i}.md").write_text(f"# Note {i}\n\n" + "".join(
            f"## Part {j}\n\nSection {j} of note {i} is about topic {i * 7 + j}, with a few more words.\n\n"
            for j in range(PARTS)))
    return root


def _under_pty(daemon: "DaemonHome", *args: str) -> str:
    """What a person sees: the real `hebbs` with a pseudo-terminal for stdin, stdout and stderr."""
    master, slave = pty.openpty()
    hebbs = str(Path(sys.executable).with_name("hebbs"))
    with processes.started([hebbs, *args], stdin=slave, stdout=slave, stderr=slave, env=daemon.env()) as proc:
        os.close(slave)
        seen = bytearray()
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            seen += chunk
        assert proc.wait(timeout=WAIT) == 0, seen.decode(errors="replace")
    os.close(master)
    return seen.decode()


def _draws(text: str, label: str) -> list[str]:
    """Each state of the line that stage drew, in order."""
    return [part.strip() for part in re.split(r"[\r\n]+", text) if part.strip().startswith(label)]


def test_a_stage_faster_than_measurable_shows_no_rate_and_a_late_first_report_counts_from_itself() -> None:
    now = [100.0]
    out = io.StringIO()
    bar = ProgressBar(out, enabled=True, clock=lambda: now[0])
    bar(Progress(stage="parse", done=0, total=40))
    now[0] += 0.001
    bar(Progress(stage="parse", done=40, total=40))
    parse = _draws(out.getvalue(), "parsing")
    assert parse[-1].endswith("40/40 files  in 0s") and "/s" not in out.getvalue()
    # The first report the terminal gets of a stage may be late (32 done already): no rate from it.
    bar(Progress(stage="embed", done=32, total=160))
    assert _draws(out.getvalue(), "embedding")[-1].endswith("32/160 sections  ETA after the first batch")
    now[0] += 4.0
    bar(Progress(stage="embed", done=64, total=160))
    assert _draws(out.getvalue(), "embedding")[-1].endswith("64/160 sections  8.0/s  ETA 12s")
    now[0] += 80.0
    bar(Progress(stage="embed", done=160, total=160))
    bar.close()
    assert _draws(out.getvalue(), "embedding")[-1].endswith("160/160 sections  1.5/s  in 1m24s")
    assert duration(3725) == "1h02m"


def test_a_piped_progress_bar_writes_nothing() -> None:
    out = io.StringIO()
    bar = ProgressBar(out, enabled=False)
    bar(Progress(stage="embed", done=0, total=10))
    bar.close()
    assert out.getvalue() == ""


def test_the_daemon_sends_each_batch_however_busy_its_event_loop(shared_daemon: "DaemonHome") -> None:
    """A report per batch reaches the client: on a loaded machine the daemon's event loop woke once for
    several batches and sent only the newest, so a terminal drew 0/120 and then 120/120."""
    root = _notes("hbbatch")
    try:
        frames: list[tuple[str, int, int]] = []
        shared_daemon.hebbs("init", str(root))
        with shared_daemon.client(root) as client:
            client.index(root, progress=lambda p: frames.append((p.stage, p.done, p.total)))
        total = NOTES * PARTS
        embedded = [done for stage, done, _ in frames if stage == "embed"]
        assert embedded[-1] == total and sum(1 for done in embedded if 0 < done < total) >= 3, frames
        assert embedded == sorted(embedded), frames
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_index_on_a_terminal_ends_each_stage_at_its_total(shared_daemon: "DaemonHome") -> None:
    """What a person sees (each batch drawn at most every REDRAW_SECONDS: the fake clock above)."""
    root = _notes("hbprog")
    try:
        seen = _under_pty(shared_daemon, "index", str(root))
        total = NOTES * PARTS
        embedding = _draws(seen, "embedding")
        counts = [int(m.group(1)) for line in embedding for m in [re.search(r"(\d+)/%d sections" % total, line)] if m]
        assert counts == sorted(counts) and counts[-1] == total, embedding
        # Every stage's line ends where the stage did, with how long it took, before the next begins.
        assert embedding[-1].startswith("embedding [" + "#" * 24 + "]") and f"{total}/{total} sections" in embedding[-1]
        parsing = _draws(seen, "parsing")
        assert " in " in embedding[-1] and f"{NOTES}/{NOTES} files" in parsing[-1] and " in " in parsing[-1]
        for line in parsing + embedding + _draws(seen, "checking"):
            rate = re.search(r"  ([\d.]+)/s", line)
            assert rate is None or float(rate.group(1)) < 100_000, line  # never a rate from a microsecond
        assert f"indexed {root}" in seen
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_index_piped_prints_only_the_summary(shared_daemon: "DaemonHome") -> None:
    root = _notes("hbpipe")
    try:
        done = shared_daemon.hebbs("index", str(root))
        assert "\r" not in done.stdout + done.stderr and "embedding" not in done.stderr and "ETA" not in done.stderr
        assert done.stdout.startswith(f"indexed {root}") and f"{NOTES * PARTS} added" in done.stdout
    finally:
        shutil.rmtree(root, ignore_errors=True)
