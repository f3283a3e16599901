"""Two checkouts of a notes tree that differ (a teammate a commit behind, another branch) attached to one
vault in PostgreSQL: each one's index keeps what the other brought, a file leaves the vault only when
the checkout that had it sees it go, and `index --full` rebuilds a checkout's share (docs/scale.md)."""

from __future__ import annotations

from pathlib import Path

from pg_fixtures import attach

from hebbs import Engine
from hebbs.notes.indexer import index_notes
from hebbs.notes.status import list_notes

ACME = """# Acme

## Contract
Acme's contract renews every March with a twelve percent uplift.

## Contacts
Acme's buyer is Priya, who prefers calls on Tuesdays.

## Risks
Acme is evaluating a competitor's warehouse robots.
"""

DANA = """# Dana

## Role
Dana leads the platform team and owns the billing migration.
"""


def _files(engine: Engine) -> dict[str, int]:
    """The vault's note sections per file, as stored (every daemon's view)."""
    out: dict[str, int] = {}
    for memory in engine.vault.store.memories():
        ctx = memory.context
        if ctx.get("origin") == "vault" and memory.kind.name != "REVISION":
            out[ctx["file"]] = out.get(ctx["file"], 0) + 1
    return out


def test_checkouts_that_differ_keep_each_others_notes(pg_server, embedder, tmp_path: Path):
    a, b = tmp_path / "a", tmp_path / "b"
    (a).mkdir()
    (b / "people").mkdir(parents=True)
    (a / "acme.md").write_text(ACME)
    (b / "people" / "dana.md").write_text(DANA)
    name = attach(a / ".hebbs", pg_server.url)
    attach(b / ".hebbs", pg_server.url, name)
    engine_a = Engine.open(a / ".hebbs", embedder=embedder)
    engine_b = Engine.open(b / ".hebbs", embedder=embedder)
    try:
        first = index_notes(engine_a, a)
        assert first.sections_total == 3
        second = index_notes(engine_b, b)
        assert (second.sections_removed, second.sections_total) == (0, 1)
        assert _files(engine_b) == {"acme.md": 3, "people/dana.md": 1}
        third = index_notes(engine_a, a)
        assert (third.sections_removed, third.sections_total, third.embedded) == (0, 3, 0)
        assert _files(engine_a) == {"acme.md": 3, "people/dana.md": 1}
        hits = engine_a.recall("when does the Acme contract renew", top_k=3)
        assert any("twelve percent" in hit.memory.content for hit in hits.results)

        # Each checkout lists what the other brought, as brought by another checkout.
        listed = {f.path: (f.state, f.sections) for f in list_notes(a)}
        assert listed == {"acme.md": ("synced", 3), "people/dana.md": ("elsewhere", 1)}
        from hebbs.daemon.panel.pages import _notes_state  # the panel's overview card of the notes folder

        card = _notes_state({"notes": {"synced": 1, "elsewhere": 1}, "root": str(a), "vault": str(a / ".hebbs")}, "t")
        assert "from another checkout 1" in card

        # A file leaves the vault when the checkout that had it sees it go, and stays gone.
        (b / "people" / "dana.md").unlink()
        gone = index_notes(engine_b, b)
        assert (gone.files_removed, gone.sections_removed) == (1, 1)
        assert index_notes(engine_a, a).sections_removed == 0
        assert _files(engine_a) == {"acme.md": 3}
        assert {f.path for f in list_notes(a)} == {"acme.md"}

        # A share lost anyway (forgotten through the API, as another checkout's old index did) stays out
        # of a plain index, a wish kept; --full writes the checkout's share again.
        acme_ids = [m.id for m in engine_a.vault.store.memories() if m.context.get("file") == "acme.md"]
        engine_b.forget(ids=acme_ids)
        assert index_notes(engine_a, a).sections_total == 0
        rebuilt = index_notes(engine_a, a, full=True)
        assert (rebuilt.sections_total, rebuilt.embedded) == (3, 3)
        assert _files(engine_b) == {"acme.md": 3}
    finally:
        engine_a.close()
        engine_b.close()
