"""Default recall against BM25, dense similarity and their RRF on notes, documents and conversations:
one table, every figure from this one run.

    .venv/bin/python -m bench.bench_quality [--json out.json] [--timeout SECONDS]

Each collection runs in a process of its own, the four at once (on a loaded machine one process
building the four vaults in turn did not finish); the table is put together from their results.

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
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench import report
from bench.datasets import cisi as cisi_data
from bench.datasets import locomo as locomo_data
from bench.datasets import medline as medline_data
from bench.datasets import notes as notes_data
from bench.workloads import conversations as conv_eval
from bench.workloads import documents
from bench.workloads import notes as notes_eval
from hebbs import Engine

COLUMNS = ("hebbs default", "BM25", "dense", "RRF(60)")
NOTES = {"hebbs default": "hebbs default", "BM25": "BM25 (## sections)", "dense": "dense (## sections)",
         "RRF(60)": "RRF(60) BM25+dense"}
CISI = {"hebbs default": "hebbs default", "BM25": "BM25", "dense": "dense", "RRF(60)": "RRF(60) BM25+dense"}
LOCOMO = {"hebbs default": "hebbs default", "BM25": "lexical only", "dense": "similarity only",
          "RRF(60)": "plain RRF k=60"}


def locomo_tables(data: Path) -> list[dict]:
    conversations = locomo_data.load(data)
    with tempfile.TemporaryDirectory(prefix="hebbs-locomo-") as tmp, Engine.open(Path(tmp) / "vault") as engine:
        started = time.perf_counter()
        dia_of = conv_eval.build(engine, conversations)
        print(f"locomo: {len(dia_of)} turns remembered in {time.perf_counter() - started:.1f} s (busy machine)",
              file=sys.stderr)
        configs = conv_eval.configurations(engine, [])
        return [conv_eval.evaluate(name, conversations, dia_of, configs[name]) for name in LOCOMO.values()]


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
    for cat in ["overall", *locomo_data.CATEGORIES.values()]:
        for metric in ("recall@10",):
            add("LoCoMo", cat, by["hebbs default"][cat]["n"], metric,
                {c: by[LOCOMO[c]][cat][metric] for c in COLUMNS})
    return out


def print_table(table: list[tuple]) -> None:
    report.markdown_table(("dataset", "slice", "n", "metric", *COLUMNS, "default - best other"),
                          ((dataset, slice_, n, metric, *(f"{v:.3f}" for v in values), f"{margin:+.3f}")
                           for dataset, slice_, n, metric, *values, margin in table))


PARTS = ("notes", "cisi", "medline", "locomo")


def part(name: str, args: argparse.Namespace) -> object:
    """One collection's tables (and, for CISI, the latency figures), or None when its data is missing."""
    if name == "notes":
        if not args.notes.is_dir():
            print(f"no notes corpus at {args.notes} (`python -m bench notes_corpus` rebuilds it): notes rows skipped",
                  file=sys.stderr)
            return None
        return notes_eval.run(args.notes)
    if name == "cisi":
        timings: dict = {}
        tables = documents.evaluate("cisi", *cisi_data.load(args.cisi), timings=timings)
        return {"tables": tables, "latency": {str(k): v for k, v in timings.items()}}
    if name == "medline":
        if not medline_data.available(args.medline):
            print(f"no MEDLINE collection at {args.medline} (`python -m bench medline --extract`): its rows skipped",
                  file=sys.stderr)
            return None
        return documents.evaluate("medline", *medline_data.load(args.medline))
    return locomo_tables(args.locomo)


def run_parts(args: argparse.Namespace) -> dict[str, object]:
    """Each collection in a process of its own, all at once: one process building four vaults in turn
    did not finish on a loaded machine, and a collection that fails or runs out of time leaves the
    others' rows (its own are reported missing)."""
    out: dict[str, object] = {}
    with tempfile.TemporaryDirectory(prefix="hebbs-quality-") as tmp:
        procs = {}
        for name in PARTS:
            command = [sys.executable, "-m", "bench.bench_quality", "--part", name, "--part-json",
                       str(Path(tmp) / f"{name}.json"), "--notes", str(args.notes), "--cisi", str(args.cisi),
                       "--medline", str(args.medline), "--locomo", str(args.locomo)]
            procs[name] = subprocess.Popen(command, cwd=Path(__file__).resolve().parent.parent)
        deadline = time.monotonic() + args.timeout
        for name, proc in procs.items():
            try:
                proc.wait(timeout=max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                print(f"{name}: no result within {args.timeout:.0f} s: its rows are missing", file=sys.stderr)
                continue
            path = Path(tmp) / f"{name}.json"
            if proc.returncode == 0 and path.exists():
                out[name] = json.loads(path.read_text())
            else:
                print(f"{name}: failed (exit {proc.returncode}): its rows are missing", file=sys.stderr)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--notes", type=Path, default=notes_data.DEFAULT_VAULT)
    parser.add_argument("--cisi", type=Path, default=cisi_data.DEFAULT_DATA)
    parser.add_argument("--medline", type=Path, default=medline_data.DEFAULT_DATA)
    parser.add_argument("--locomo", type=Path, default=locomo_data.DEFAULT_DATA)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--timeout", type=float, default=4 * 3600.0, help="seconds the collections get, all together")
    parser.add_argument("--part", choices=PARTS, help=argparse.SUPPRESS)
    parser.add_argument("--part-json", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.part:
        args.part_json.write_text(json.dumps(part(args.part, args)))
        return
    started = time.perf_counter()
    parts = run_parts(args)
    cisi = parts.get("cisi")
    if cisi is None or parts.get("locomo") is None:
        print("CISI and LoCoMo are needed for the table", file=sys.stderr)
        sys.exit(1)
    timings = {int(k) if k.isdigit() else k: v for k, v in cisi["latency"].items()}
    table = rows(parts.get("notes"), cisi["tables"], parts["locomo"], parts.get("medline"))
    print_table(table)
    print()
    documents.print_latency(timings)
    print()
    documents.print_lengths(timings["lengths"], "CISI vault")
    print(f"\n(whole run {time.perf_counter() - started:.0f} s on a shared 2-core machine, the four collections "
          "in parallel processes)")
    report.write_json(args.json, {**parts, "table": table})


if __name__ == "__main__":
    main()
