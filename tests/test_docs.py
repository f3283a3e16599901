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


def test_generated_reference_matches_the_code() -> None:
    """Tried: every generated section (docs/protocol.md, cli.md, config.md, python-api.md) is what
    scripts/gen_reference.py writes from the code now."""
    from scripts.gen_reference import stale

    assert stale(write=False) == [], "run: python -m scripts.gen_reference"


def test_config_page_names_every_environment_variable() -> None:
    import re

    hebbs = Path(__file__).resolve().parents[1] / "hebbs"
    used = {m for path in hebbs.rglob("*.py") for m in re.findall(r"\"(HEBBS_[A-Z_]+)\"", path.read_text())}
    page = (DOCS / "config.md").read_text()
    assert used and not [name for name in sorted(used) if f"`{name}`" not in page]


def test_the_docs_index_links_only_to_pages_that_exist() -> None:
    import re

    index = re.sub(r"```.*?```", "", (DOCS / "index.md").read_text(), flags=re.S)
    targets = re.findall(r"\]\(([^)#]+)\)", index)
    assert targets and not [t for t in targets if not (DOCS / t).resolve().exists()]
