"""The notes corpus (bench/notes_corpus.md says what it is and why): the Hugo documentation's
markdown at a pinned commit of gohugoio/hugoDocs, rebuilt from a local mirror into a cache directory
outside the repository, and the questions written for it before any run (bench/notes_questions.jsonl)."""

from __future__ import annotations

import io
import re
import shutil
import subprocess
import tarfile
from pathlib import Path

from bench.datasets import read_jsonl
from bench.harness import cache

REPO = "gohugoio/hugoDocs"
COMMIT = "1c613349f4220ae84070df25979d720c43e5cfa6"
ROOT = "content/en"
FOLDERS = ("about", "configuration", "content-management", "contribute", "getting-started", "host-and-deploy",
           "hugo-modules", "hugo-pipes", "installation", "render-hooks", "shortcodes", "templates", "tools",
           "troubleshooting")
DEFAULT_MIRROR = cache("gohugoio+hugoDocs.git")
DEFAULT_VAULT = cache("notes-corpus") / "vault"
QUESTIONS = Path(__file__).resolve().parents[1] / "notes_questions.jsonl"
_SPLIT = re.compile(r"(?m)^(?=## )")


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


def load_questions() -> list[dict]:
    return read_jsonl(QUESTIONS)


def plain_sections(root: Path) -> list[tuple[str, str]]:
    """(file, text) per section: each file cut before every line that starts with `## `."""
    out = []
    for path in sorted(root.rglob("*.md")):
        rel = path.relative_to(root).as_posix()
        out += [(rel, part.strip()) for part in _SPLIT.split(path.read_text(errors="replace")) if part.strip()]
    return out
