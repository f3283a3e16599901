"""Rebuild the notes benchmark's corpus (bench/notes_corpus.md says what it is and why) from a local
mirror of gohugoio/hugoDocs, at the pinned commit, into a cache directory outside the repository.

    .venv/bin/python -m bench.notes_corpus --mirror PATH/TO/hugoDocs.git
                                           [--out $HEBBS_BENCH_CACHE/notes-corpus/vault]

Without the mirror it says so and exits with status 2 (the benchmark then skips the notes rows).
"""

from __future__ import annotations

import argparse
import io
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

from bench.harness import cache

REPO = "gohugoio/hugoDocs"
COMMIT = "1c613349f4220ae84070df25979d720c43e5cfa6"
ROOT = "content/en"
FOLDERS = ("about", "configuration", "content-management", "contribute", "getting-started", "host-and-deploy",
           "hugo-modules", "hugo-pipes", "installation", "render-hooks", "shortcodes", "templates", "tools",
           "troubleshooting")
DEFAULT_MIRROR = cache("gohugoio+hugoDocs.git")
DEFAULT_OUT = cache("notes-corpus") / "vault"


def rebuild(mirror: Path, out: Path) -> int:
    """Extract the pinned folders' markdown files into `out`; returns how many notes."""
    archive = subprocess.run(["git", "--git-dir", str(mirror), "archive", "--format=tar", COMMIT,
                              *[f"{ROOT}/{f}" for f in FOLDERS]], check=True, capture_output=True).stdout
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    notes = 0
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        for member in tar.getmembers():
            if not member.isfile() or not member.name.endswith(".md"):
                continue
            target = out / Path(member.name).relative_to(ROOT)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(tar.extractfile(member).read())
            notes += 1
    return notes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mirror", type=Path, default=DEFAULT_MIRROR)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()
    if not (args.mirror / "HEAD").exists():
        print(f"no mirror of {REPO} at {args.mirror}: clone it (git clone --mirror "
              f"https://github.com/{REPO}) and pass --mirror; notes benchmark skipped", file=sys.stderr)
        sys.exit(2)
    n = rebuild(args.mirror, args.out)
    print(f"{n} notes from {REPO}@{COMMIT[:12]} in {args.out}")


if __name__ == "__main__":
    main()
