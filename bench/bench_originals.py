"""The original kept: what it costs in bytes and in indexing time.

A copy of a notes folder (this repository's docs/ by default) is indexed into two vaults, one keeping
originals (the default) and one with `[sources] keep = false`; then several rounds of edits (a tenth
of the notes, at least two, get a new paragraph, one note is added, every third round one is deleted) are re-indexed into both.
Printed: bytes kept in <vault>/sources per byte of file versions indexed, and per byte of the folder
as it is now; each run's indexing time with and without keeping originals, and their ratio (the two
vaults index in alternating order in the same run: the machine is shared and busy).

    .venv/bin/python -m bench.bench_originals [--corpus DIR] [--rounds 5]
"""

from __future__ import annotations

import argparse
import random
import shutil
import tempfile
import time
from pathlib import Path

from hebbs import Engine
from hebbs.embedding.embed import get_embedder
from hebbs.store.originals import Originals
from hebbs.notes import index_notes

ROOT = Path(__file__).resolve().parents[1]


def folder_bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*.md") if ".hebbs" not in p.parts)


def edit_round(root: Path, rng: random.Random, n: int) -> int:
    """Change a tenth of the notes (at least two), add one, and in every third round delete one;
    the bytes of the new file versions."""
    notes = sorted(p for p in root.rglob("*.md") if ".hebbs" not in p.parts)
    changed = rng.sample(notes, max(2, len(notes) // 10))
    written = 0
    for path in changed:
        text = path.read_text(encoding="utf-8", errors="replace")
        text += f"\n\n## Edit {n}\n\nRound {n} changed this note: the figure is now {rng.randint(1, 999)}.\n"
        path.write_text(text, encoding="utf-8")
        written += len(text.encode())
    if n % 3 == 0:
        rng.choice([p for p in notes if p not in changed]).unlink()
    added = root / f"added-{n}.md"
    added.write_text(f"# Added in round {n}\n\nA new note with {rng.randint(1, 999)} in it.\n", encoding="utf-8")
    return written + added.stat().st_size


def timed_index(vault: Path, root: Path, embedder) -> float:
    with Engine.open(vault, embedder=embedder) as engine:
        started = time.perf_counter()
        index_notes(engine, root, contradictions=False)
        return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--corpus", type=Path, default=ROOT / "docs")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-originals-"))
    try:
        embedder = get_embedder(None)
        roots = {}
        for mode in ("keep", "off"):
            roots[mode] = work / mode / "notes"
            shutil.copytree(args.corpus, roots[mode], ignore=shutil.ignore_patterns(".hebbs"))
            (work / mode / "vault").mkdir()
        (work / "off" / "vault" / "config.toml").write_text("[sources]\nkeep = false\n")
        indexed = folder_bytes(roots["keep"])
        print(f"corpus {args.corpus} ({indexed:,} bytes in {len(list(roots['keep'].rglob('*.md')))} notes); "
              f"{args.rounds} edit rounds; busy shared machine (load {open('/proc/loadavg').read().split()[0]})")
        times: dict[str, list[float]] = {"keep": [], "off": []}
        for n in range(args.rounds + 1):
            if n:
                rng_keep, rng_off = random.Random(n), random.Random(n)
                indexed += edit_round(roots["keep"], rng_keep, n)
                edit_round(roots["off"], rng_off, n)
            for mode in (("keep", "off") if n % 2 == 0 else ("off", "keep")):
                times[mode].append(timed_index(work / mode / "vault", roots[mode], embedder))
            kept = Originals(work / "keep" / "vault").bytes_kept()
            print(f"run {n}: index {times['keep'][-1]:7.2f} s keeping originals, {times['off'][-1]:7.2f} s without "
                  f"(ratio {times['keep'][-1] / times['off'][-1]:.3f}); kept {kept:,} bytes for {indexed:,} bytes "
                  f"indexed so far ({kept / indexed:.3f} per byte; {kept / folder_bytes(roots['keep']):.3f} of the "
                  f"folder now)")
        edits_keep, edits_off = sum(times["keep"][1:]), sum(times["off"][1:])
        print(f"first index: ratio {times['keep'][0] / times['off'][0]:.3f}; "
              f"edit rounds together: {edits_keep:.2f} s vs {edits_off:.2f} s, ratio {edits_keep / edits_off:.3f}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
