"""Rebuild the notes benchmark's corpus (bench/notes_corpus.md says what it is and why) from a local
mirror of gohugoio/hugoDocs, at the pinned commit, into a cache directory outside the repository.

    .venv/bin/python -m bench notes_corpus --mirror PATH/TO/hugoDocs.git
                                         [--out $HEBBS_BENCH_CACHE/notes-corpus/vault]

Without the mirror it says so and exits with status 2 (the benchmark then skips the notes rows).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from bench.datasets.notes import COMMIT, DEFAULT_MIRROR, DEFAULT_VAULT, REPO, rebuild


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mirror", type=Path, default=DEFAULT_MIRROR)
    parser.add_argument("--out", type=Path, default=DEFAULT_VAULT)
    args = parser.parse_args()
    if not (args.mirror / "HEAD").exists():
        print(f"no mirror of {REPO} at {args.mirror}: clone it (git clone --mirror "
              f"https://github.com/{REPO}) and pass --mirror; notes benchmark skipped", file=sys.stderr)
        sys.exit(2)
    n = rebuild(args.mirror, args.out)
    print(f"{n} notes from {REPO}@{COMMIT[:12]} in {args.out}")


if __name__ == "__main__":
    main()
