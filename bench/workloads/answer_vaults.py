"""The vaults bench_abstention measures confidence on (and bench_reinforce reuses): one per LoCoMo
conversation, the Jekyll docs when present, and the notes folder (this repository's docs/ and the
notes corpus when present), built once into a workdir and reused from there."""

from __future__ import annotations

import shutil
from pathlib import Path

from bench.datasets import jekyll
from bench.harness import REPO, cache
from hebbs import Engine
from hebbs.notes import index_notes


def build_vaults(workdir: Path, conversations: list[dict], raws: dict[str, dict]) -> None:
    for conv in conversations:
        path = workdir / f"locomo-{conv['name']}"
        if path.exists():
            continue
        with Engine.open(path) as engine:
            engine.remember_many([{"content": t["text"], "created_at": t["created_at"]} for t in conv["turns"]],
                                 check_contradictions=False)
    folder = workdir / "jekyll"
    if jekyll.available() and not folder.exists():
        shutil.copytree(jekyll.DOCS, folder, ignore=shutil.ignore_patterns(".*"))
        with Engine.open(folder / ".hebbs") as engine:
            index_notes(engine, folder, contradictions=False)
    notes = workdir / "notes"
    if not notes.exists():
        shutil.copytree(REPO / "docs", notes / "docs")
        extra = cache("notes-corpus")
        if extra.is_dir():
            shutil.copytree(extra, notes / "corpus", ignore=shutil.ignore_patterns(".*"))
        with Engine.open(notes / ".hebbs") as engine:
            index_notes(engine, notes, contradictions=False)
