"""The fact timelines of bench/datasets/truth_changes.jsonl, written for hebbs (issue 41): facts over
time about people, projects, settings, places, numbers and preferences, each case a vault of its own.

One case per line: `id`, `category`, `entity_kind`, `value_kind` (number, negation, name), `memories`
(each `content` and `at`, ISO 8601 UTC, stored in that order with that time), `cue`, and by category:

    change         `current` (the newer value, the answer) and `older` (the values it changed)
    point_in_time  `as_of`, `current` (the value true then), `older`, and `absent` (created later)
    conflict       `conflicting` (two memories) and `verdict` ("contradiction"), committed before the cue
    not_a_change   `current` and `also_current`: the same sentence about another subject or object,
                   which is no change of it (what an automatic link must leave alone)
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
PATH = HERE / "truth_changes.jsonl"


def load(path: Path = PATH) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
