"""The labelled pair sets committed under bench/data. Which set was written when, and what it was
used for, is in the docstring of the bench that reads it (bench_contradictions, bench_consolidation,
collect_contradiction_pairs)."""

from __future__ import annotations

from pathlib import Path

from bench.datasets import DATA, read_jsonl

# Contradictions: the tuned set, then held-out sets labelled from vaults the rules were never tuned on.
CONTRADICTIONS = DATA / "contradiction_pairs.jsonl"
CONTRADICTIONS_HELD_OUT = tuple(DATA / f"contradiction_pairs_heldout{n}.jsonl" for n in ("", 2, 3, 4, 5))

# Consolidation: the tuned set and two held-out sets (LoCoMo turns named by reference, and edits).
CONSOLIDATION = DATA / "consolidation_pairs.jsonl"
CONSOLIDATION_HELD_OUT = (DATA / "consolidation_heldout.jsonl", DATA / "consolidation_heldout2.jsonl")

# Paraphrases (bench_consolidation): the dev sets of the merge rules, and the one held-out set measured once.
# Each held-out set was written and committed before the rule it measures, and measured once; it is a
# dev set from then on. paraphrase_dev was the first rule's dev set and paraphrase_heldout its held-out
# set. The second rule (the masked-words test) was set on those and the dev half of
# paraphrase_pairs_split, and measured once on its held-out half: precision 0.500 (a reversed role, a
# changed unit). The third (units and the order of names held, relation words) was measured once on
# paraphrase_heldout3: precision 0.889 (automatically / manually). The fourth (the third and the first
# rule's change test, both) was set on all of those and measured once on paraphrase_heldout4. The fifth
# (the fourth, and replaced words that a lexicon of senses calls synonyms, workflows/synonyms.py) is
# set on all of those and measured once on paraphrase_heldout5.
PARAPHRASE_DEV = ("paraphrase_dev.jsonl", "paraphrase_heldout.jsonl", "paraphrase_pairs_split.jsonl",
                  "paraphrase_heldout3.jsonl", "paraphrase_heldout4.jsonl")
PARAPHRASE_HELD_OUT = "paraphrase_heldout5.jsonl"

DOCS_CUES = DATA / "docs_cues.jsonl"


def paraphrase_rows(which: str) -> list[dict]:
    names = (PARAPHRASE_HELD_OUT,) if which == "heldout" else PARAPHRASE_DEV
    return [row for name in names for row in read_jsonl(DATA / name)]


def rows(path: Path) -> list[dict]:
    """One labelled set, a row per pair."""
    return read_jsonl(path)
