"""The query log's cost to the recall that writes it: an append, the recall that trims the log, and the
first recall after the vault opens, on a real vault whose log is at its bound.

    .venv/bin/python -m bench.bench_query_log [--entries 10000] [--appends 5000] [--opens 12]

Every recall appends one entry to the query log (hebbs/workflows/reinforce.py); every
min(1,000, query_log_keep / 10) appends, and at the first append after an open, the log is trimmed
to its bound (the newest query_log_keep entries of the last query_log_days). The log is filled to
--entries (its default bound) through the same append a recall makes, then --appends more are timed
one by one, those that trimmed apart from the others (one in 1,000). Then the vault is
closed and opened --opens times, and the first and the second append after each open are timed.
What is timed is the append alone (`record_recall` with one recall's request and results), the cue's
embedding and the search left out: these figures are what the query log adds to a recall.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

from bench import harness, report
from hebbs import Engine, ScoringWeights
from hebbs.recall import pipeline
from hebbs.recall.options import RecallOptions
from hebbs.embedding.embed import get_embedder
from hebbs.workflows import reinforce

FACTS = ["The deploy pipeline runs on GitHub Actions", "Bob owns the billing service",
         "The staging database is Postgres 15", "Carol reviews every schema migration",
         "The on-call rotation changes every Monday", "Dana moved the design review to Thursdays"]
CUE = "who reviews the schema migrations before they are deployed to staging?"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=10_000, help="the log's bound (query_log_keep)")
    parser.add_argument("--appends", type=int, default=5_000, help="appends timed at the bound")
    parser.add_argument("--opens", type=int, default=12)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="hebbs-bench-qlog-"))
    try:
        run(work / "vault", args)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def run(path: Path, args: argparse.Namespace) -> None:
    print(f"query log at {args.entries:,} entries; {harness.machine_note()} (shared machine)")
    path.mkdir(parents=True)
    (path / "config.toml").write_text(f"[recall]\nquery_log_keep = {args.entries}\n")
    embedder = get_embedder()
    weights = ScoringWeights(relevance=1.0, recency=0.0, importance=0.0, reinforcement=0.0)
    engine = Engine.open(path, embedder=embedder)
    engine.remember_many([{"content": fact} for fact in FACTS])
    request = pipeline.plan(engine.vault, RecallOptions(cue=CUE, strategies=["similarity"], top_k=3, weights=weights))
    results = pipeline.run(engine.vault, request).results

    trimmed = [False]
    trim = reinforce.trim_query_log

    def flagged(*args, **kwargs):
        trimmed[0] = True
        return trim(*args, **kwargs)

    reinforce.trim_query_log = flagged  # which appends trimmed: read, not changed

    def append(vault) -> tuple[float, float, bool]:
        trimmed[0] = False
        wall, cpu = time.perf_counter(), time.thread_time()
        reinforce.record_recall(vault, request, results, reinforce=False, started=wall)
        return (time.perf_counter() - wall) * 1000, (time.thread_time() - cpu) * 1000, trimmed[0]

    with harness.stopwatch() as seconds:
        for _ in range(args.entries):
            append(engine.vault)
    print(f"filled the log with {args.entries:,} appends in {seconds():.1f} s")
    engine.vault.store.db.flush()  # what a long-running vault holds: most of its log in table files
    timed = [append(engine.vault) for _ in range(args.appends)]
    plain = [(w, c) for w, c, t in timed if not t]
    trims = [(w, c) for w, c, t in timed if t]
    print(f"\n{args.appends:,} appends at the bound, one by one: {len(trims)} of them trimmed the log")
    report.markdown_header("measure", "wall ms", "CPU ms")
    for label, q in (("p50", 50), ("p99", 99)):
        print(f"| an append that does not trim, {label} | {harness.percentile([w for w, _ in plain], q):.3f} | "
              f"{harness.percentile([c for _, c in plain], q):.3f} |")
    for label, pick in (("median", lambda v: harness.percentile(v, 50)), ("max", max)):
        print(f"| an append that trims, {label} | {pick([w for w, _ in trims]):.3f} | "
              f"{pick([c for _, c in trims]):.3f} |")
    entries = engine.vault.store.count("query_log")
    engine.close()

    firsts, seconds_ = [], []
    for _ in range(args.opens):
        engine = Engine.open(path, embedder=embedder)
        firsts.append(append(engine.vault)[:2])
        seconds_.append(append(engine.vault)[:2])
        engine.close()
    print(f"\nafter {args.opens} opens of the vault ({entries:,} entries in its log)")
    report.markdown_header("measure", "wall p50 ms", "wall max ms", "CPU p50 ms")
    for label, rows in (("the first append after an open", firsts), ("the second append", seconds_)):
        wall = [w for w, _ in rows]
        print(f"| {label} | {harness.percentile(wall, 50):.3f} | {max(wall):.3f} | "
              f"{harness.percentile([c for _, c in rows], 50):.3f} |")


if __name__ == "__main__":
    main()
