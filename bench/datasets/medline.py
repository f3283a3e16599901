"""MEDLINE (the classic Glasgow/SMART collection: 1,033 medical abstracts, 30 queries, binary
judgements), not in this repository: `extract` copies med/MED.{ALL,QRY,REL} out of a git mirror of
lailaglez/belief-network-irs (MIT, at commit 9094e4c) into $HEBBS_BENCH_CACHE/medline."""

from __future__ import annotations

import subprocess
from pathlib import Path

from bench.datasets.cisi import Queries, Texts, parse
from bench.harness import cache

# Where `extract` puts the collection; a bench's --data reads it from anywhere.
DEFAULT_DATA = cache("medline")
FILES = ("MED.ALL", "MED.QRY", "MED.REL")


def extract(mirror: Path, out: Path, commit: str = "HEAD") -> None:
    """Copy med/MED.{ALL,QRY,REL} out of a git mirror (nothing else of it is read)."""
    out.mkdir(parents=True, exist_ok=True)
    for name in FILES:
        blob = subprocess.run(["git", "--git-dir", str(mirror), "show", f"{commit}:med/{name}"], check=True,
                              capture_output=True).stdout
        (out / name).write_bytes(blob)


def available(data: Path) -> bool:
    return all((data / name).is_file() for name in FILES)


def load(data: Path) -> tuple[Texts, Queries]:
    docs = parse(data / "MED.ALL")
    texts = [(i, d.get("W", "").strip()) for i, d in docs.items()]
    judged: dict[str, set[str]] = {}
    for line in (data / "MED.REL").read_text().splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[2] != "0":  # query, document, relevance
            judged.setdefault(parts[0], set()).add(parts[1])
        elif len(parts) == 4 and parts[3] != "0":  # query, 0, document, relevance (TREC)
            judged.setdefault(parts[0], set()).add(parts[2])
    queries = [(i, q["W"], judged[i]) for i, q in parse(data / "MED.QRY").items() if i in judged]
    return texts, queries
