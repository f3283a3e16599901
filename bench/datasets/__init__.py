"""The collections the benchmarks read, one module each: where it is and how it loads.

- locomo: LoCoMo conversations (shared, evaluation-only), turns and questions.
- cisi, medline: the classic abstract collections with judged queries (SMART `.I` format).
- notes: the Hugo documentation notes corpus (rebuilt from a pinned commit) and its questions.
- jekyll: the Jekyll documentation folder and its cues (abstention).
- pairs: the labelled pair sets committed under bench/data (contradictions, consolidation, paraphrases).
- passages: the end-to-end passages and cues, drawn from LoCoMo and CISI.
- truth: bench_truth's scripted fact timelines (truth_*.jsonl beside it).

A dataset module reads; it never builds a vault or measures anything (the benches do).
"""

from __future__ import annotations

import json
from pathlib import Path

DATA = Path(__file__).resolve().parents[1] / "data"


def read_jsonl(path: Path) -> list[dict]:
    """Every non-empty line of a JSON-lines file, parsed."""
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
