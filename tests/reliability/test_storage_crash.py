"""kill -9 during writes: a remember_many is all or nothing, an acknowledged write is never lost, and
a killed `hebbs index` converges on the next run (defects 8 and 9 of issue 12).

The heavy variants (more rounds) are marked slow; bench/reliability_long.py runs them.
"""

from __future__ import annotations

import collections
import random
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from hebbs import Engine
from hebbs.notes import indexer
from hebbs.notes.manifest import load_manifest

import processes

BATCH = 1000


def _kill_during_batches(path: Path, rounds: int, seed: int) -> set[int]:
    """A child remembers batches of 1,000 (more than any internal chunk) and prints each one it was
    told is stored; it is killed at a random moment. Returns the batch numbers acknowledged."""
    writer = textwrap.dedent(f"""
        import itertools, sys
        from hebbs import Engine
        eng = Engine.open({str(path)!r})
        print("open", flush=True)
        for n in itertools.count(int(sys.argv[1])):
            eng.remember_many([{{"content": f"batch {{n}} item {{i}}", "entity_id": f"e{{i % 4}}"}}
                               for i in range({BATCH})], check_contradictions=False)
            print(f"ack {{n}}", flush=True)
        """)
    rng = random.Random(seed)
    acked: set[int] = set()
    next_batch = 0
    for round_ in range(rounds):
        proc = processes.popen([sys.executable, "-c", writer, str(next_batch)], stdout=subprocess.PIPE, text=True)
        assert proc.stdout.readline().strip() == "open"
        lines: list[str] = []
        first_ack = threading.Event()

        def read() -> None:
            for line in proc.stdout:
                lines.append(line)
                first_ack.set()

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        started = time.monotonic()
        if round_ % 2:
            # Odd rounds kill after a batch was acknowledged, somewhere inside the next one (however
            # slow the machine embeds), so acknowledged writes are at stake.
            first_ack.wait(300)
            time.sleep(rng.uniform(0, time.monotonic() - started))
        else:
            time.sleep(rng.uniform(0.5, 4.0))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        reader.join(5)
        acked |= {int(line.split()[1]) for line in lines if line.startswith("ack ")}
        next_batch += 1000  # a fresh range per round: a half-written batch could not hide behind a later one
    return acked


def _check_batches(path: Path, embedder, acked: set[int]) -> None:
    with Engine.open(path, embedder=embedder) as eng:
        per_batch = collections.Counter(int(m.content.split()[1]) for m in eng.memories())
        contents = [m.content for m in eng.memories()]
    assert len(contents) == len(set(contents)), "a memory was stored twice"
    torn = {n: c for n, c in per_batch.items() if c != BATCH}
    assert not torn, f"batches stored in part (batch: items): {torn}"
    assert acked <= set(per_batch), f"acknowledged batches lost: {sorted(acked - set(per_batch))}"


def test_a_killed_remember_many_leaves_all_or_none(tmp_path, embedder):
    path = tmp_path / "v"
    Engine.open(path, embedder=embedder).close()
    acked = _kill_during_batches(path, rounds=3, seed=12)
    _check_batches(path, embedder, acked)


@pytest.mark.slow
def test_twenty_kills_during_remember_batches(tmp_path, embedder):
    path = tmp_path / "v"
    Engine.open(path, embedder=embedder).close()
    acked = _kill_during_batches(path, rounds=20, seed=20)
    assert acked, "the writer never finished a batch: the kills came too early to test anything"
    _check_batches(path, embedder, acked)


def _notes(root: Path, files: int) -> None:
    rng = random.Random(files)
    for i in range(files):
        body = "\n\n".join(f"## Part {j}\n\n" + " ".join(rng.choice(["tide", "crane", "ledger", "orchard", "signal",
                                                                     "harbour", "copper"]) for _ in range(60))
                           for j in range(4))
        (root / f"note{i:03}.md").write_text(f"# Note {i}\n\n{body}\n")


def _kill_during_index(root: Path, rounds: int, seed: int) -> None:
    runner = textwrap.dedent(f"""
        from pathlib import Path
        from hebbs import Engine
        from hebbs.notes import indexer
        root = Path({str(root)!r})
        with Engine.open(root / ".hebbs") as eng:
            print("open", flush=True)
            indexer.index_notes(eng, root)
        """)
    rng = random.Random(seed)
    for round_ in range(rounds):
        proc = processes.popen([sys.executable, "-c", runner], stdout=subprocess.PIPE, text=True)
        assert proc.stdout.readline().strip() == "open"
        time.sleep(rng.uniform(0.2, 2.5))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        # Between kills the notes change, so a rerun has real work left to do and orphans to drop.
        (root / f"note{round_:03}.md").write_text(f"# Rewritten {round_}\n\nThe tide table for round {round_}.\n")
        (root / f"note{(round_ + 7) % 40:03}.md").unlink(missing_ok=True)


def _check_index_converged(root: Path, embedder) -> None:
    with Engine.open(root / ".hebbs", embedder=embedder) as eng:
        indexer.index_notes(eng, root)
        manifest, warning = load_manifest(root)
        assert warning is None and not manifest.dirty
        ids = [s.memory_id for f in manifest.files.values() for s in f.sections]
        assert None not in ids and len(ids) == len(set(ids))
        stored = {m.id: m for m in eng.memories()}
        assert set(ids) == set(stored), "memories and manifest sections differ"
        keys = [(m.source.file_path, tuple(m.source.heading_path), m.content) for m in stored.values()]
        assert len(keys) == len(set(keys)), "a section is stored twice"
        on_disk = {p.name for p in root.glob("*.md")}
        assert {Path(m.source.file_path).name for m in stored.values()} == on_disk
        again = indexer.index_notes(eng, root)
        assert again.sections_added == again.sections_revised == again.sections_removed == 0


def test_a_killed_index_run_converges(tmp_path, embedder):
    root = tmp_path / "notes"
    root.mkdir()
    _notes(root, 40)
    _kill_during_index(root, rounds=2, seed=3)
    _check_index_converged(root, embedder)


@pytest.mark.slow
def test_twelve_kills_during_indexing(tmp_path, embedder):
    root = tmp_path / "notes"
    root.mkdir()
    _notes(root, 120)
    _kill_during_index(root, rounds=12, seed=12)
    _check_index_converged(root, embedder)
