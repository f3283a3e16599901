"""Notes hebbs writes (insights, contradiction reports) stay inside the notes folder: an insights/
or contradictions/ folder that is a symlink out of it is refused before anything is stored."""

from __future__ import annotations

from pathlib import Path

import pytest

from hebbs import Engine
from hebbs.errors import InvalidInput


@pytest.fixture
def linked_out(tmp_path: Path):
    root, outside = tmp_path / "notes", tmp_path / "elsewhere"
    root.mkdir()
    outside.mkdir()
    return root, outside


def _prepared_insight(eng: Engine) -> tuple[str, list[dict]]:
    for text in ("Deploys run from the main branch.", "Deploys need a green CI run.", "Deploys roll back on error.",
                 "Deploys are announced in the ops channel.", "Deploys freeze on Fridays.",
                 "Deploys to production need two approvals."):
        eng.remember(text, entity_id="ops")
    prepared = eng.reflect_prepare()
    members = [m.id for c in prepared.clusters for m in c.memories][:2]
    return prepared.session_id, [{"content": "Deploys are guarded by CI.", "confidence": 0.7,
                                  "source_memory_ids": members}]


def test_reflect_commit_refuses_an_insights_link_that_leads_out(linked_out, embedder):
    root, outside = linked_out
    (root / "insights").symlink_to(outside, target_is_directory=True)
    with Engine.open(root / ".hebbs", embedder=embedder) as eng:
        session, insights = _prepared_insight(eng)
        with pytest.raises(InvalidInput, match="outside the notes folder"):
            eng.reflect_commit(session, insights)
        assert not eng.insights()  # refused before anything was stored
        (root / "insights").unlink()
        done = eng.reflect_commit(session, insights)  # the same session still commits once fixed
    assert list(outside.iterdir()) == []
    assert [Path(f).parent for f in done.files] == [root / "insights"]


def test_a_link_that_stays_inside_the_notes_folder_is_fine(linked_out, embedder):
    root, _ = linked_out
    (root / "meta" / "insights").mkdir(parents=True)
    (root / "insights").symlink_to(root / "meta" / "insights", target_is_directory=True)
    with Engine.open(root / ".hebbs", embedder=embedder) as eng:
        done = eng.reflect_commit(*_prepared_insight(eng))
    assert len(list((root / "meta" / "insights").iterdir())) == 1 and done.warnings == []


def test_contradiction_commit_refuses_a_contradictions_link_that_leads_out(linked_out, embedder):
    root, outside = linked_out
    (root / "contradictions").symlink_to(outside, target_is_directory=True)
    with Engine.open(root / ".hebbs", embedder=embedder) as eng:
        eng.remember("The deploy pipeline is reliable.")
        eng.remember("The deploy pipeline is unreliable.")
        [candidate] = eng.contradiction_prepare().candidates
        verdict = [{"pending_id": candidate.pending_id, "verdict": "contradiction", "confidence": 0.9}]
        with pytest.raises(InvalidInput, match="outside the notes folder"):
            eng.contradiction_commit(verdict)
        assert [p.id for p in eng.pending()] == [candidate.pending_id]  # nothing recorded
    assert list(outside.iterdir()) == []
