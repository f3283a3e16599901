"""The CLI's tables (issue 44, the first hour): a name too wide for its column keeps its distinguishing
end, and recall's table leads with confidence, drawing what falls below the threshold faint on a
terminal (never in a pipe or with NO_COLOR)."""

from __future__ import annotations

import io

import pytest

from hebbs.cli import output
from hebbs.schema import Memory, RecallResult, ScoreComponents


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_cut_name_keeps_its_end() -> None:
    """Tried: two notes under one folder in a 14-column cell: cut from the right, both read
    "Linking notes…"; cut in the middle, each keeps its file name."""
    a = output.name_cut("Linking notes/Internal links.md", 14)
    b = output.name_cut("Linking notes/Embed files.md", 14)
    assert a != b and a.endswith("links.md") and b.endswith("files.md")
    assert output.display_width(a) <= 14 and "…" in a
    assert output.name_cut("short", 14) == "short"
    assert output.display_width(output.name_cut("会議メモ/第一四半期の予定.md", 12)) <= 12  # wide characters count twice


def _results() -> list[RecallResult]:
    parts = ScoreComponents(relevance=0.6, recency=1.0, importance=0.5, reinforcement=0.0)
    return [RecallResult(memory=Memory(id="01J0000000000000000000000A", content="The answer."), score=0.61, components=parts,
                         confidence=0.58),
            RecallResult(memory=Memory(id="01J0000000000000000000000B", content="A weak candidate."), score=0.64, components=parts,
                         confidence=0.12)]


def test_recall_leads_with_confidence_and_draws_results_below_the_threshold_faint(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    terminal = _Terminal()
    output.print_results(_results(), out=terminal, threshold=0.22)
    lines = terminal.getvalue().splitlines()
    assert lines[0].split()[:3] == ["rank", "conf", "score"]
    assert "\033[2m" not in lines[1] and lines[2].startswith("\033[2m") and lines[2].endswith("\033[0m")
    monkeypatch.setenv("NO_COLOR", "1")
    quiet = _Terminal()
    output.print_results(_results(), out=quiet, threshold=0.22)
    assert "\033" not in quiet.getvalue()
    piped = io.StringIO()
    output.print_results(_results(), out=piped, threshold=0.22)
    assert "\033" not in piped.getvalue()
