"""CISI (../shared/data/cisi, read its NOTICE.md): 1,460 abstracts and 76 judged queries, in the
SMART `.I` record format that MEDLINE shares. Evaluation data only: read in place."""

from __future__ import annotations

import re
from pathlib import Path

from bench.harness import shared

DEFAULT_DATA = shared("data/cisi")
_FIELD = re.compile(r"^\.([A-Z])\s*(.*)$")

Texts = list[tuple[str, str]]
Queries = list[tuple[str, str, set[str]]]


def parse(path: Path) -> dict[str, dict[str, str]]:
    """`.I n` records -> {n: {field letter: text}}; a field runs until the next `.X` line."""
    records: dict[str, dict[str, str]] = {}
    current: dict[str, list[str]] | None = None
    field = None
    for line in path.read_text(errors="replace").splitlines():
        m = _FIELD.match(line)
        if m:
            if m.group(1) == "I":
                current = {}
                records[m.group(2).strip()] = current  # type: ignore[assignment]
                field = None
                continue
            field = m.group(1)
            current.setdefault(field, [])  # type: ignore[union-attr]
            if m.group(2).strip():
                current[field].append(m.group(2))  # type: ignore[index]
            continue
        if current is not None and field is not None:
            current[field].append(line)
    return {i: {f: " ".join(" ".join(v).split()) for f, v in rec.items()} for i, rec in records.items()}


def load(data: Path) -> tuple[Texts, Queries]:
    """(document id, title + abstract) and (query id, query, relevant document ids) of judged queries."""
    docs = parse(data / "CISI.ALL")
    texts = [(i, f"{d.get('T', '')}\n{d.get('W', '')}".strip()) for i, d in docs.items()]
    judged: dict[str, set[str]] = {}
    for line in (data / "CISI.REL").read_text().splitlines():
        parts = line.split()
        if len(parts) >= 2:
            judged.setdefault(parts[0], set()).add(parts[1])
    queries = [(i, q["W"], judged[i]) for i, q in parse(data / "CISI.QRY").items() if i in judged]
    return texts, queries
