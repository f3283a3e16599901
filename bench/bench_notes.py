"""Recall quality on a notes vault (bench/notes_corpus.md): hit@1, hit@5 and MRR@10 by file.

hebbs goes through the real indexer (hebbs.notes.index_notes into a fresh Engine, as `hebbs index`
does) and default recall. In the same run, over a plain split of every note at `##` headings:
BM25, dense similarity (same model, exact search) and their RRF (k = 60). A file's rank is the
rank of its best section. The questions (bench/notes_questions.jsonl) were written before any run.

    .venv/bin/python -m bench notes [--vault $HEBBS_BENCH_CACHE/notes-corpus/vault] [--json out.json]

Without the corpus (`python -m bench notes_corpus` rebuilds it) it says so and exits with status 2.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from bench import report
from bench.datasets.notes import DEFAULT_VAULT
from bench.workloads import notes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vault", type=Path, default=DEFAULT_VAULT)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    if not args.vault.is_dir():
        print(f"no notes corpus at {args.vault}: run `python -m bench.notes_corpus` first; skipped", file=sys.stderr)
        sys.exit(2)
    tables = notes.run(args.vault)
    report.quality_table("notes: configuration", tables, report.NOTES_METRICS)
    report.write_json(args.json, tables)


if __name__ == "__main__":
    main()
