"""The user docs say what the code does: figures and names they quote are read back from the code."""

from __future__ import annotations

from pathlib import Path

from hebbs.workflows import contradiction_check as cc

DOCS = Path(__file__).resolve().parents[1] / "docs"


def test_contradictions_page_quotes_the_classifiers_constants() -> None:
    page = " ".join((DOCS / "contradictions.md").read_text().split())
    for said in (f"min({cc.MAX_CONFIDENCE}, sum of cue weights", f"cosine >= {cc.MIN_SIMILARITY}",
                 f"Jaccard >= {cc.MIN_OVERLAP}", f"antonyms {cc.W_ANTONYM}, negation {cc.W_NEGATION}, "
                 f"numbers {cc.W_NUMBER}, values {cc.W_VALUE}, revision marker {cc.W_REVISION}",
                 f"a changed default scores {cc.W_DEFAULT}", f"pairs above {cc.THRESHOLD} are queued"):
        assert said in page, said
