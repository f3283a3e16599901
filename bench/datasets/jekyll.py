"""The Jekyll documentation (jekyll/jekyll, MIT; docs/_docs of a checkout placed under
$HEBBS_BENCH_CACHE/jekyll-docs) and the cues written for it (bench/data/jekyll_cues.jsonl); optional:
benches skip its rows when the folder is absent."""

from __future__ import annotations

from bench.datasets import DATA, read_jsonl
from bench.harness import cache

DOCS = cache("jekyll-docs") / "docs" / "_docs"
CUES = DATA / "jekyll_cues.jsonl"


def available() -> bool:
    return DOCS.is_dir()


def load_cues() -> list[dict]:
    return read_jsonl(CUES)
