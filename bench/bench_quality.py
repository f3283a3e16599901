"""Default recall against BM25, dense similarity and their RRF on notes, documents and conversations:
one table, every figure from this one run.

    .venv/bin/python -m bench.bench_quality [--json out.json]

- notes: bench/bench_notes.py (hugoDocs, 155 notes, 50 questions; hit@1, hit@5, MRR@10 by file).
  hebbs indexes the folder with its real indexer; the baselines work on a plain `##` split.
- CISI: bench/bench_cisi.py (1,460 abstracts, 76 judged queries; nDCG@10, recall@100), plus the
  latency of default recall at top_k 10, 50 and 100 on that vault.
- MEDLINE: bench/bench_medline.py (1,033 medical abstracts, 30 judged queries; nDCG@10, recall@100),
  a collection added for issue 27 that no default was tuned on before it (data not in the
  repository: its docstring says how to get it; without it the rows are left out).
- LoCoMo: bench/bench_locomo.py (5 conversations, 760 questions; evidence recall@10 per category).
  Its baselines are hebbs' own channels (tantivy BM25, HNSW similarity) and their plain RRF.
Quality figures are deterministic; latency figures come from a shared, busy machine.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from bench.harness import shared
from hebbs import Engine

from bench import bench_cisi
from bench import bench_locomo
from bench import bench_medline
from bench import bench_notes

COLUMNS = ("hebbs default", "BM25", "dense", "RRF(60)")
NOTES = {"hebbs default": "hebbs default", "BM25": "BM25 (## sections)", "dense": "dense (## sections)",
         "RRF(60)": "RRF(60) BM25+dense"}
CISI = {"hebbs default": "hebbs default", "BM25": "BM25", "dense": "dense", "RRF(60)": "RRF(60) BM25+dense"}
LOCOMO = {"hebbs default": "hebbs default", "BM25": "lexical only", "dense": "similarity only",
          "RRF(60)": "plain RRF k=60"}


def locomo_tables(data: Path) -> list[dict]:
    conversations = bench_locomo.load(data)
    with tempfile.TemporaryDirectory(prefix="hebbs-locomo-") as tmp, Engine.open(Path(tmp) / "vault") as engine:
        started = time.perf_counter()
        dia_of = bench_locomo.build(engine, conversations)
        print(f"locomo: {len(dia_of)} turns remembered in {time.perf_counter() - started:.1f} s (busy machine)",
              file=sys.stderr)
        configs = bench_locomo.configurations(engine, [])
        return [bench_locomo.evaluate(name, conversations, dia_of, configs[name]) for name in LOCOMO.values()]


def rows(notes: list[dict] | None, cisi: list[dict], locomo: list[dict], medline: list[dict] | None = None) -> list[tuple]:
    out = []

    def add(dataset: str, slice_: str, n: int, metric: str, values: dict[str, float]) -> None:
        best_other = max(values[c] for c in COLUMNS[1:])
        out.append((dataset, slice_, n, metric, *[values[c] for c in COLUMNS], values["hebbs default"] - best_other))

    if notes:
        by = {t["name"]: t for t in notes}
        for metric in ("hit@1", "hit@5", "mrr@10"):
            add("notes", "all", by["hebbs default"]["n"], metric, {c: by[NOTES[c]][metric] for c in COLUMNS})
    by = {t["name"]: t for t in cisi}
    for metric in ("ndcg@10", "recall@100"):
        add("CISI", "all", by["hebbs default"]["n"], metric, {c: by[CISI[c]][metric] for c in COLUMNS})
    if medline:
        by = {t["name"]: t for t in medline}
        for metric in ("ndcg@10", "recall@100"):
            add("MEDLINE", "all", by["hebbs default"]["n"], metric, {c: by[CISI[c]][metric] for c in COLUMNS})
    by = {t["name"]: t for t in locomo}
    for cat in ["overall", *bench_locomo.CATEGORIES.values()]:
        for metric in ("recall@10",):
            add("LoCoMo", cat, by["hebbs default"][cat]["n"], metric,
                {c: by[LOCOMO[c]][cat][metric] for c in COLUMNS})
    return out


def print_table(table: list[tuple]) -> None:
    print("| dataset | slice | n | metric | " + " | ".join(COLUMNS) + " | default - best other |")
    print("|---|---|---|---|" + "---|" * len(COLUMNS) + "---|")
    for dataset, slice_, n, metric, *values, margin in table:
        print(f"| {dataset} | {slice_} | {n} | {metric} | " + " | ".join(f"{v:.3f}" for v in values)
              + f" | {margin:+.3f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--notes", type=Path, default=bench_notes.DEFAULT_VAULT)
    parser.add_argument("--cisi", type=Path, default=bench_cisi.DEFAULT_DATA)
    parser.add_argument("--medline", type=Path, default=bench_medline.DEFAULT_DATA)
    parser.add_argument("--locomo", type=Path, default=shared("data/locomo-dev"))
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    started = time.perf_counter()
    notes = None
    if args.notes.is_dir():
        notes = bench_notes.run(args.notes)
    else:
        print(f"no notes corpus at {args.notes} (bench/notes_corpus.py rebuilds it): notes rows skipped",
              file=sys.stderr)
    timings: dict = {}
    cisi = bench_cisi.run(args.cisi, timings=timings)
    medline = None
    if bench_medline.available(args.medline):
        medline = bench_medline.run(args.medline)
    else:
        print(f"no MEDLINE collection at {args.medline} (bench/bench_medline.py --extract): its rows skipped",
              file=sys.stderr)
    locomo = locomo_tables(args.locomo)
    table = rows(notes, cisi, locomo, medline)
    print_table(table)
    print()
    bench_cisi.print_latency(timings)
    print()
    bench_cisi.print_lengths(timings["lengths"], "CISI vault")
    print(f"\n(whole run {time.perf_counter() - started:.0f} s on a shared 2-core machine)")
    if args.json:
        args.json.write_text(json.dumps({"notes": notes, "cisi": cisi, "medline": medline, "locomo": locomo,
                                         "latency": {str(k): v for k, v in timings.items()}}, indent=2))


if __name__ == "__main__":
    main()
