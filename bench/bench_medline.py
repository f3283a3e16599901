"""Recall quality on a second abstract collection, MEDLINE (the classic Glasgow/SMART test
collection: 1,033 medical abstracts, 30 queries, binary judgements), added for issue 27 as
development data that no default was tuned on before: nDCG@10 and recall@100 for hebbs' default
against BM25, dense similarity (same model, exact search) and their RRF (k = 60), as bench_cisi.py.

The collection is not in this repository. Get it once into a directory of your own:

    .venv/bin/python -m bench.bench_medline --extract MIRROR   # -> $HEBBS_BENCH_CACHE/medline (~/.cache/hebbs-bench)
    .venv/bin/python -m bench.bench_medline [--data DIR] [--json out.json]

where MIRROR is a git mirror of a public repository that carries the three files under `med/`
(lailaglez/belief-network-irs, MIT, at commit 9094e4c; only `med/` is read). Without the data the
benchmark says so and bench_quality.py leaves its rows out.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench import bench_cisi
from bench.harness import cache
from hebbs import Engine

# Where --extract puts the collection; --data reads it from anywhere.
DEFAULT_DATA = cache("medline")
FILES = ("MED.ALL", "MED.QRY", "MED.REL")


def extract(mirror: Path, out: Path, commit: str = "HEAD") -> None:
    """Copy med/MED.{ALL,QRY,REL} out of a git mirror (nothing else of it is read)."""
    out.mkdir(parents=True, exist_ok=True)
    for name in FILES:
        blob = subprocess.run(["git", "--git-dir", str(mirror), "show", f"{commit}:med/{name}"], check=True,
                              capture_output=True).stdout
        (out / name).write_bytes(blob)


def load(data: Path) -> tuple[list[tuple[str, str]], list[tuple[str, str, set[str]]]]:
    docs = bench_cisi.parse(data / "MED.ALL")
    texts = [(i, d.get("W", "").strip()) for i, d in docs.items()]
    judged: dict[str, set[str]] = {}
    for line in (data / "MED.REL").read_text().splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[2] != "0":  # query, document, relevance
            judged.setdefault(parts[0], set()).add(parts[1])
        elif len(parts) == 4 and parts[3] != "0":  # query, 0, document, relevance (TREC)
            judged.setdefault(parts[0], set()).add(parts[2])
    queries = [(i, q["W"], judged[i]) for i, q in bench_cisi.parse(data / "MED.QRY").items() if i in judged]
    return texts, queries


def run(data: Path, extra: dict[str, dict] | None = None) -> list[dict]:
    texts, queries = load(data)
    with tempfile.TemporaryDirectory(prefix="hebbs-medline-") as tmp, Engine.open(Path(tmp) / "vault") as engine:
        started = time.perf_counter()
        doc_of = bench_cisi.build(engine, texts)
        print(f"medline: {len(texts)} documents remembered in {time.perf_counter() - started:.1f} s (busy machine), "
              f"{len(queries)} judged queries", file=sys.stderr)
        tables = [bench_cisi.score("hebbs default", bench_cisi.hebbs_rankings(engine, doc_of, queries), queries)]
        for name, kw in (extra or {}).items():
            tables.append(bench_cisi.score(name, bench_cisi.hebbs_rankings(engine, doc_of, queries, **kw), queries))
        for name, ranked in bench_cisi.baseline_rankings(engine, texts, queries).items():
            tables.append(bench_cisi.score(name, ranked, queries))
    return tables


def available(data: Path) -> bool:
    return all((data / name).is_file() for name in FILES)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--extract", type=Path, metavar="MIRROR", help="copy med/MED.* out of this git mirror first")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    if args.extract:
        extract(args.extract, args.data)
    if not available(args.data):
        print(f"no MEDLINE collection at {args.data}: see --extract in this file's docstring", file=sys.stderr)
        sys.exit(2)
    tables = run(args.data)
    print(f"{'MEDLINE: configuration':<28} {'n':>3} {'nDCG@10':>8} {'R@100':>7}")
    for t in tables:
        print(f"{t['name']:<28} {t['n']:>3} {t['ndcg@10']:>8.3f} {t['recall@100']:>7.3f}")
    if args.json:
        args.json.write_text(json.dumps(tables, indent=2))


if __name__ == "__main__":
    main()
