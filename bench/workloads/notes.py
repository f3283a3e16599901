"""Recall quality on the notes corpus (bench/datasets/notes.py): hebbs through the real indexer
(hebbs.notes.index_notes into a fresh Engine, as `hebbs index` does) and default recall, beside BM25,
dense similarity and their RRF over a plain split of every note at `##` headings; hit@1, hit@5 and
MRR@10 by file (a file's rank is the rank of its best section)."""

from __future__ import annotations

import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from bench import baselines as bl
from bench.datasets.notes import load_questions, plain_sections
from hebbs import Engine
from hebbs.notes import index_notes


SECTIONS_PER_RECALL = 30  # sections asked of hebbs: enough for ten distinct files


def scores(name: str, ranked_files: list[list[str]], questions: list[dict]) -> dict:
    rows = {"hit@1": [], "hit@5": [], "mrr@10": []}
    for files, q in zip(ranked_files, questions):
        relevant = set(q["answers"])
        rows["hit@1"].append(bl.hit_at(files, relevant, 1))
        rows["hit@5"].append(bl.hit_at(files, relevant, 5))
        rows["mrr@10"].append(bl.mrr_at(files, relevant, 10))
    return {"name": name, "n": len(questions)} | {m: statistics.fmean(v) for m, v in rows.items()}


def baseline_rankings(engine: Engine, root: Path, questions: list[dict]) -> dict[str, list[list[str]]]:
    sections = plain_sections(root)
    files = [f for f, _ in sections]
    texts = [t for _, t in sections]
    bm25 = bl.BM25(texts)
    vectors = bl.embed_cached(engine.embedder, texts)
    out: dict[str, list[list[str]]] = {"BM25 (## sections)": [], "dense (## sections)": [], "RRF(60) BM25+dense": []}
    for q in questions:
        lex = bl.ranking(bm25.scores(q["question"]), 100, positive=True)
        dense = bl.ranking(vectors @ engine.embedder.embed_one(q["question"]), 100)
        fused = bl.rrf([lex, dense])
        for name, ranked in zip(out, (lex, dense, fused)):
            out[name].append(bl.dedupe(files[i] for i in ranked))
    print(f"baselines: {len(sections)} plain ## sections", file=sys.stderr)
    return out


def hebbs_rankings(engine: Engine, questions: list[dict], **recall_kw) -> list[list[str]]:
    return [bl.dedupe(r.memory.context.get("file") for r in engine.recall(
        q["question"], top_k=SECTIONS_PER_RECALL, reinforce=False, **recall_kw).results) for q in questions]


def run(vault: Path, extra: dict[str, dict] | None = None,
        hook: Callable[[Engine], None] | None = None) -> list[dict]:
    """Every configuration on the notes vault; `extra` adds named recall keyword sets to try."""
    questions = load_questions()
    with tempfile.TemporaryDirectory(prefix="hebbs-notes-") as tmp:
        root = Path(tmp) / "notes"
        shutil.copytree(vault, root)
        now = time.time()
        for path in root.rglob("*.md"):
            os.utime(path, (now, now))  # as a fresh clone: every note equally new
        with Engine.open(root / ".hebbs") as engine:
            started = time.perf_counter()
            summary = index_notes(engine, root)
            print(f"notes: {summary.files_scanned} files, {summary.sections_total} hebbs sections, "
                  f"indexed in {time.perf_counter() - started:.1f} s (busy machine)", file=sys.stderr)
            if hook is not None:
                hook(engine)
            tables = [scores("hebbs default", hebbs_rankings(engine, questions), questions)]
            for name, kw in (extra or {}).items():
                tables.append(scores(name, hebbs_rankings(engine, questions, **kw), questions))
            for name, ranked in baseline_rankings(engine, root, questions).items():
                tables.append(scores(name, ranked, questions))
    return tables
