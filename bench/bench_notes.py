"""Recall quality on a notes vault (bench/notes_corpus.md): hit@1, hit@5 and MRR@10 by file.

hebbs goes through the real indexer (hebbs.notes.index_notes into a fresh Engine, as `hebbs index`
does) and default recall. In the same run, over a plain split of every note at `##` headings:
BM25, dense similarity (same model, exact search) and their RRF (k = 60). A file's rank is the
rank of its best section. The questions (bench/notes_questions.jsonl) were written before any run.

    .venv/bin/python -m bench.bench_notes [--vault $HEBBS_BENCH_CACHE/notes-corpus/vault] [--json out.json]

Without the corpus (bench/notes_corpus.py rebuilds it) it says so and exits with status 2.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path


from hebbs import Engine
from hebbs.notes import index_notes

from bench import baselines as bl
from bench.harness import cache

HERE = Path(__file__).resolve().parent
QUESTIONS = HERE / "notes_questions.jsonl"
DEFAULT_VAULT = cache("notes-corpus") / "vault"
SECTIONS_PER_RECALL = 30  # sections asked of hebbs: enough for ten distinct files
_SPLIT = re.compile(r"(?m)^(?=## )")


def load_questions() -> list[dict]:
    return [json.loads(line) for line in QUESTIONS.read_text().splitlines() if line.strip()]


def plain_sections(root: Path) -> list[tuple[str, str]]:
    """(file, text) per section: each file cut before every line that starts with `## `."""
    out = []
    for path in sorted(root.rglob("*.md")):
        rel = path.relative_to(root).as_posix()
        out += [(rel, part.strip()) for part in _SPLIT.split(path.read_text(errors="replace")) if part.strip()]
    return out


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


def print_table(tables: list[dict]) -> None:
    print(f"{'notes: configuration':<28} {'n':>3} {'hit@1':>7} {'hit@5':>7} {'MRR@10':>7}")
    for t in tables:
        print(f"{t['name']:<28} {t['n']:>3} {t['hit@1']:>7.3f} {t['hit@5']:>7.3f} {t['mrr@10']:>7.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vault", type=Path, default=DEFAULT_VAULT)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    if not args.vault.is_dir():
        print(f"no notes corpus at {args.vault}: run `python -m bench.notes_corpus` first; skipped", file=sys.stderr)
        sys.exit(2)
    tables = run(args.vault)
    print_table(tables)
    if args.json:
        args.json.write_text(json.dumps(tables, indent=2))


if __name__ == "__main__":
    main()
