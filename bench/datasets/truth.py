"""bench_truth's scripted fact timelines: bench/datasets/truth_*.jsonl (the format is in
bench/bench_truth.py's docstring). truth_abstain.jsonl holds the never-stored attributes and the
paraphrases; truth_changes.jsonl the changes, conflicts, point-in-time and not-a-change cases."""

from __future__ import annotations

from pathlib import Path

from bench.datasets import read_jsonl

FILES = sorted(Path(__file__).resolve().parent.glob("truth_*.jsonl"))


def load(files: list[Path]) -> list[dict]:
    """Every case of these files, each with `where` (file:line) for the misses a run prints."""
    rows = []
    for path in files:
        for n, row in enumerate(read_jsonl(path)):
            row["where"] = f"{path.name}:{n + 1}"
            rows.append(row)
    return rows
