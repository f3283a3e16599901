"""A forgotten section, then `hebbs index` (issue 30 item 6): does the re-index cost what an unchanged
re-index costs, and does it say what happened?

    .venv/bin/python -m bench.bench_index_forget              # 200 notes, about 1,000 sections
    .venv/bin/python -m bench.bench_index_forget --notes 50   # quicker

One vault from bench_vault's generator, indexed once in process; then, in one run: an unchanged
re-index, a forget of one section's memory followed by a re-index, and another unchanged re-index.
Prints the seconds of each and what the forget's re-index reported. Goal: the forget's re-index
costs what an unchanged one costs (the forgotten section stays out while its note says the same:
nothing embedded, nothing written) and does not claim an interrupted run.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

from bench.workloads.notes_vault import make_vault


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--notes", type=int, default=200)
    args = ap.parse_args()

    from hebbs import Engine
    from hebbs.embedding.embed import get_embedder
    from hebbs.notes import index_notes

    work = Path(tempfile.mkdtemp(prefix="hebbs-bench-forget-"))
    root = work / "vault"
    root.mkdir()
    try:
        make_vault(root, args.notes)
        with Engine.open(root / ".hebbs", embedder=get_embedder()) as engine:
            first = index_notes(engine, root)
            print(f"vault: {args.notes} notes, {first.sections_total} sections, {first.edges_added} edges "
                  f"(first index {first.seconds:.1f} s)")

            def timed(what: str):
                t = time.perf_counter()
                summary = index_notes(engine, root)
                seconds = time.perf_counter() - t
                print(f"{what:<34} {seconds:6.2f} s  embedded {summary.embedded}, edges added "
                      f"{summary.edges_added}, reconciled {summary.reconciled}, "
                      f"forgotten sections left out {summary.forgotten_left_out}")
                return seconds

            unchanged = timed("re-index, nothing changed:")
            victim = next(m for m in engine.memories() if m.source is not None and m.entity_id)
            engine.forget([victim.id])
            after_forget = timed("re-index after forgetting 1 section:")
            timed("re-index, nothing changed again:")
            print(f"ratio forget / unchanged: {after_forget / unchanged:.1f}x (same run; machine may be loaded)")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
