"""Recall quality on documents: CISI (../shared/data/cisi, read its NOTICE.md), nDCG@10 and recall@100.

1,460 abstracts become memories (title + abstract); the 76 judged queries are recalled with default
settings. In the same run, over the same texts: BM25, dense similarity (same model, exact search)
and their RRF (k = 60).

    .venv/bin/python -m bench cisi [--data ../shared/data/cisi] [--json out.json]

Evaluation data only: read from shared/, never copied into the package or the repository.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from bench import report
from bench.datasets import cisi
from bench.workloads import documents


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=cisi.DEFAULT_DATA)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    timings: dict = {}
    tables = documents.evaluate("cisi", *cisi.load(args.data), timings=timings)
    report.quality_table("CISI: configuration", tables, report.DOCUMENT_METRICS)
    documents.print_latency(timings)
    documents.print_lengths(timings["lengths"], "CISI vault")
    report.write_json(args.json, tables)


if __name__ == "__main__":
    main()
