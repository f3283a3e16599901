"""Recall quality on a second abstract collection, MEDLINE (the classic Glasgow/SMART test
collection: 1,033 medical abstracts, 30 queries, binary judgements), added for issue 27 as
development data that no default was tuned on before: nDCG@10 and recall@100 for hebbs' default
against BM25, dense similarity (same model, exact search) and their RRF (k = 60), as bench_cisi.py.

The collection is not in this repository. Get it once into a directory of your own:

    .venv/bin/python -m bench medline --extract MIRROR   # -> $HEBBS_BENCH_CACHE/medline (~/.cache/hebbs-bench)
    .venv/bin/python -m bench medline [--data DIR] [--json out.json]

where MIRROR is a git mirror of a public repository that carries the three files under `med/`
(lailaglez/belief-network-irs, MIT, at commit 9094e4c; only `med/` is read). Without the data the
benchmark says so and bench_quality.py leaves its rows out.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from bench import report
from bench.datasets import medline
from bench.workloads import documents


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=medline.DEFAULT_DATA)
    parser.add_argument("--extract", type=Path, metavar="MIRROR", help="copy med/MED.* out of this git mirror first")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    if args.extract:
        medline.extract(args.extract, args.data)
    if not medline.available(args.data):
        print(f"no MEDLINE collection at {args.data}: see --extract in this file's docstring", file=sys.stderr)
        sys.exit(2)
    tables = documents.evaluate("medline", *medline.load(args.data))
    report.quality_table("MEDLINE: configuration", tables, report.DOCUMENT_METRICS)
    report.write_json(args.json, tables)


if __name__ == "__main__":
    main()
