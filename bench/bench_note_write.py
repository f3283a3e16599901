"""What a note the agent writes costs: note_write and note_append (write, fsync, index) against remember of the same text.

A notes folder of --notes small notes is indexed first; then, alternating, so that the machine's load
falls on each alike: note_write of a new note (one section), note_append of one line to a running
note, and engine.remember of the same text (the peer: the memory without a note). Printed: the median
and p90 of each in milliseconds, and the ratio of each note call to remember.

    .venv/bin/python -m bench.bench_note_write [--notes 50] [--rounds 20]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

from bench.harness import interleaved, machine_note, percentile

from hebbs import Engine
from hebbs.notes import index_notes, note_append, note_write

TEXT = "Round {n}: the payment queue drained after the consumer restart, {n} minutes after the page."


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--notes", type=int, default=50, help="notes in the folder before the writes")
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="hebbs-notewrite-") as tmp:
        root = Path(tmp)
        for n in range(args.notes):
            (root / f"note-{n}.md").write_text(f"# Note {n}\n\nService {n} is owned by team {n % 7}.\n\n"
                                               f"## Runbook\n\nRestart service {n} with its deploy job.\n")
        with Engine.open(root / ".hebbs") as engine:
            index_notes(engine, root)
            engine.remember("warm-up")
            times = interleaved({
                "note_write": lambda n: note_write(engine, root, f"agent/r{n}.md", TEXT.format(n=n)),
                "note_append": lambda n: note_append(engine, root, "agent/log.md", TEXT.format(n=n)),
                "remember": lambda n: engine.remember(TEXT.format(n=n) + " (remembered)"),
            }, args.rounds)
    base = statistics.median(times["remember"])
    print(f"{args.notes} notes indexed, {args.rounds} rounds; {machine_note()}")
    print(f"{'call':<12} {'median ms':>10} {'p90 ms':>8} {'x remember':>11}")
    for name, values in times.items():
        print(f"{name:<12} {statistics.median(values):>10.1f} {percentile(values, 90):>8.1f} "
              f"{statistics.median(values) / base:>11.2f}")


if __name__ == "__main__":
    main()
