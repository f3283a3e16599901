"""How the benchmarks report: printed tables (markdown, and the fixed-width quality tables) and
result files (bench/results/NAME.json with the commit, the time and the machine's load; `--json`
outputs). The figures themselves are computed by each bench; this module only lays them out."""

from __future__ import annotations

import datetime as dt
import json
import statistics
import subprocess
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from bench.harness import REPO, machine, percentile

RESULTS = REPO / "bench" / "results"


def markdown_header(*columns: str) -> None:
    """Print a markdown table's header line and its separator."""
    print("| " + " | ".join(columns) + " |")
    print("|" + "---|" * len(columns))


def markdown_row(*cells: object) -> None:
    """Print one markdown table row of cells already formatted."""
    print("| " + " | ".join(str(cell) for cell in cells) + " |")


def markdown_table(columns: Sequence[str], rows: Iterable[Sequence[object]]) -> None:
    markdown_header(*columns)
    for cells in rows:
        markdown_row(*cells)


def quality_table(title: str, tables: Sequence[dict], metrics: Sequence[tuple[str, str, int]]) -> None:
    """The fixed-width table of a quality bench: one line per configuration, its n and each metric
    (key in the table, printed label, width) to three decimals."""
    print(f"{title:<28} {'n':>3} " + " ".join(f"{label:>{width}}" for _, label, width in metrics))
    for t in tables:
        print(f"{t['name']:<28} {t['n']:>3} " + " ".join(f"{t[key]:>{width}.3f}" for key, _, width in metrics))


DOCUMENT_METRICS = (("ndcg@10", "nDCG@10", 8), ("recall@100", "R@100", 7))
NOTES_METRICS = (("hit@1", "hit@1", 7), ("hit@5", "hit@5", 7), ("mrr@10", "MRR@10", 7))


def row(label: str, ms: Sequence[float], width: int = 40) -> str:
    """One printed line of timings in milliseconds: p50, p99, mean."""
    return (f"{label:<{width}} p50 {percentile(ms, 50):8.2f} ms   p99 {percentile(ms, 99):8.2f} ms   "
            f"mean {statistics.fmean(ms):8.2f} ms")


def write_json(path: Path | None, data: Any, **dumps: Any) -> None:
    """A bench's `--json PATH` output: the tables as printed, when a path was given."""
    if path:
        path.write_text(json.dumps(data, indent=2, **dumps))


def _commit() -> str:
    try:
        out = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, timeout=10)
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def write_result(name: str, figures: Any, path: Path | None = None, **about: Any) -> Path:
    """Write one run's figures as JSON (bench/results/NAME.json unless a path is given), with the
    commit, the time and the machine beside them; returns the path written."""
    path = path or RESULTS / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    record = {"bench": name, "commit": _commit(), "at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
              "machine": machine(), **about, "figures": figures}
    path.write_text(json.dumps(record, indent=2, default=str) + "\n")
    return path
