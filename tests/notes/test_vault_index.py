"""Indexing real vault folders into real engines: phase 1 + phase 2, edits, moves, links, contradictions, crashes."""

from __future__ import annotations

import datetime as dt
import io
import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from hebbs import Engine, MemoryKind, NotFound
from hebbs.notes import apply_plan, index_notes, list_notes, scan_notes
from hebbs.cli.vaultcmds import print_summary
from hebbs.notes.manifest import FORGOTTEN, SYNCED, load_manifest, manifest_path

import processes


class CountingEmbedder:
    """Wraps the real embedder and counts the texts sent to the model."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.texts: list[str] = []

    def embed(self, texts):
        texts = list(texts)
        self.texts += texts
        return self.inner.embed(texts)

    def embed_documents(self, texts):
        texts = list(texts)
        self.texts += texts
        return self.inner.embed_documents(texts)

    def __getattr__(self, name):
        return getattr(self.inner, name)


@pytest.fixture
def root(tmp_path) -> Path:
    root = tmp_path / "notes"
    root.mkdir()
    return root


@pytest.fixture
def engine(root, embedder):
    eng = Engine.open(root / ".hebbs", embedder=embedder)
    eng.embedder = CountingEmbedder(embedder)
    yield eng
    eng.close()


def write(root: Path, rel: str, text: str) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


ACME = """\
---
tags: [client]
entity: acme_corp
created: 2023-05-08T13:56:00Z
importance: 0.8
---
# Acme

Acme is a logistics company in Rotterdam. #customer

## CRM

Acme uses Salesforce for their CRM and renews every March.

## Contacts

Carol runs procurement. See [[Carol]].
"""
CAROL = "# Carol\n\nCarol Jansen is head of procurement at Acme.\n\n## Preferences\n\nCarol prefers email over calls.\n"


def vault_memories(engine) -> list:
    return [m for m in engine.memories() if m.context.get("origin") == "vault"]


def by_heading(engine) -> dict[tuple, object]:
    return {(m.source.file_path, tuple(m.source.heading_path), m.context["chunk"]): m for m in vault_memories(engine)}


def assert_consistent(engine, root: Path) -> None:
    """Manifest and engine agree: every section has one live memory, and every vault memory is named."""
    manifest, warning = load_manifest(root)
    assert warning is None and not manifest.dirty and manifest.orphans == []
    named = [s.memory_id for f in manifest.files.values() for s in f.sections if s.state != FORGOTTEN]
    assert all(s.state == SYNCED or s.state == FORGOTTEN and s.memory_id is None
               for f in manifest.files.values() for s in f.sections)
    assert len(named) == len(set(named)) and None not in named
    live = {m.id: m for m in vault_memories(engine)}
    assert set(named) == set(live)
    for rel, entry in manifest.files.items():
        for s in entry.sections:
            if s.state == FORGOTTEN:
                continue
            m = live[s.memory_id]
            assert m.source.file_path == rel and m.source.heading_path == s.heading_path
            assert m.context["section_hash"] == s.hash


def test_first_index_records_every_field(engine, root):
    write(root, "clients/acme.md", ACME)
    write(root, "people/Carol.md", CAROL)
    summary = index_notes(engine, root)
    assert (summary.files_scanned, summary.files_changed, summary.sections_added) == (2, 2, 5)
    assert summary.embedded == 5 and summary.warnings == [] and summary.sections_total == 5
    mems = by_heading(engine)
    crm = mems[("clients/acme.md", ("Acme", "CRM"), 0)]
    data = (root / "clients/acme.md").read_bytes()
    assert crm.content == "## CRM\n\nAcme uses Salesforce for their CRM and renews every March."
    assert crm.kind == MemoryKind.EPISODE
    assert crm.entity_id == "acme_corp"  # front matter `entity` wins over the path
    assert crm.importance == 0.8
    # The note's time plus the section's place in the note (microseconds): document order.
    assert crm.created_at == int(dt.datetime(2023, 5, 8, 13, 56, tzinfo=dt.timezone.utc).timestamp() * 1e6) + 1
    assert data[crm.source.byte_start:crm.source.byte_end].decode() == crm.content
    ctx = crm.context
    assert ctx["file"] == "clients/acme.md" and ctx["heading_path"] == ["Acme", "CRM"]
    assert (ctx["byte_start"], ctx["byte_end"]) == (crm.source.byte_start, crm.source.byte_end)
    assert ctx["tags"] == ["client"] and ctx["front_matter"]["entity"] == "acme_corp"
    assert ctx["chunk"] == 0 and ctx["chunks"] == 1 and ctx["origin"] == "vault"
    intro = mems[("clients/acme.md", ("Acme",), 0)]
    assert intro.context["tags"] == ["client", "customer"]
    carol = mems[("people/Carol.md", ("Carol",), 0)]
    assert carol.entity_id == "people/Carol"  # no front matter: the path without .md
    assert engine.recall("who handles purchasing at Acme").results[0].memory.source is not None
    assert_consistent(engine, root)


def test_unchanged_reindex_embeds_nothing(engine, root):
    write(root, "a.md", ACME)
    write(root, "b.md", CAROL)
    index_notes(engine, root)
    before = {m.id: m.content for m in vault_memories(engine)}
    engine.embedder.texts.clear()
    summary = index_notes(engine, root)
    assert engine.embedder.texts == []
    assert (summary.files_unchanged, summary.files_changed, summary.embedded) == (2, 0, 0)
    assert summary.sections_added == summary.sections_revised == summary.sections_removed == 0
    assert {m.id: m.content for m in vault_memories(engine)} == before
    # A touch without a change is re-hashed, not re-parsed or re-embedded.
    os.utime(root / "a.md", ns=(1, 1))
    summary = index_notes(engine, root)
    assert summary.files_unchanged == 2 and engine.embedder.texts == []


def test_edit_revises_in_place_and_keeps_history(engine, root):
    write(root, "acme.md", ACME)
    index_notes(engine, root)
    before = by_heading(engine)
    engine.embedder.texts.clear()
    write(root, "acme.md", ACME.replace("Acme is a logistics company in Rotterdam.",
                                        "Acme is a logistics company in Rotterdam and Antwerp, with 400 trucks."))
    summary = index_notes(engine, root)
    assert summary.sections_revised == 1 and summary.sections_added == 0 and summary.sections_removed == 0
    assert summary.sections_updated == 2  # later sections moved by some bytes: metadata only
    assert len(engine.embedder.texts) == 1 and "400 trucks" in engine.embedder.texts[0]
    after = by_heading(engine)
    assert {k: m.id for k, m in after.items()} == {k: m.id for k, m in before.items()}
    intro = after[("acme.md", ("Acme",), 0)]
    assert "400 trucks" in intro.content
    assert [h.content for h in engine.history(intro.id)] == [before[("acme.md", ("Acme",), 0)].content]
    crm = after[("acme.md", ("Acme", "CRM"), 0)]
    data = (root / "acme.md").read_bytes()
    assert data[crm.source.byte_start:crm.source.byte_end].decode() == crm.content
    assert_consistent(engine, root)


def test_add_and_delete_notes_and_sections(engine, root):
    write(root, "acme.md", ACME)
    index_notes(engine, root)
    write(root, "carol.md", CAROL)
    write(root, "acme.md", ACME.replace("## Contacts\n\nCarol runs procurement. See [[Carol]].\n", ""))
    summary = index_notes(engine, root)
    assert (summary.files_changed, summary.sections_added, summary.sections_removed) == (2, 2, 1)
    assert ("acme.md", ("Acme", "Contacts"), 0) not in by_heading(engine)
    (root / "carol.md").unlink()
    summary = index_notes(engine, root)
    assert summary.files_removed == 1 and summary.sections_removed == 2
    assert {k[0] for k in by_heading(engine)} == {"acme.md"}
    assert_consistent(engine, root)


def test_rename_move_and_reorder_keep_memory_ids(engine, root):
    write(root, "acme.md", ACME)
    write(root, "carol.md", CAROL)
    index_notes(engine, root)
    ids = {(k[1], k[2]): m.id for k, m in by_heading(engine).items()}
    engine.embedder.texts.clear()
    (root / "archive/2023").mkdir(parents=True)
    os.rename(root / "acme.md", root / "archive/2023/acme-corp.md")  # move and rename at once
    crm_block = "## CRM\n\nAcme uses Salesforce for their CRM and renews every March.\n\n"
    write(root, "carol.md", CAROL.replace("## Preferences", "## Likes"))  # a renamed heading
    summary = index_notes(engine, root)
    assert summary.files_removed == 1 and summary.sections_added == 0 and summary.sections_removed == 0
    assert summary.sections_revised == 1 and engine.embedder.texts == [
        "carol > Likes\n\n## Likes\n\nCarol prefers email over calls."]  # embedded under its note and heading
    after = by_heading(engine)
    assert after[("archive/2023/acme-corp.md", ("Acme", "CRM"), 0)].id == ids[(("Acme", "CRM"), 0)]
    assert after[("archive/2023/acme-corp.md", ("Acme", "CRM"), 0)].entity_id == "acme_corp"
    # The renamed heading is the same section, revised in place (its old heading stays in its history).
    assert after[("carol.md", ("Carol", "Likes"), 0)].id == ids[(("Carol", "Preferences"), 0)]
    # Reorder sections inside the file: no embedding, same ids.
    moved = (root / "archive/2023/acme-corp.md").read_text()
    reordered = moved.replace(crm_block, "") + "\n" + crm_block
    write(root, "archive/2023/acme-corp.md", reordered)
    engine.embedder.texts.clear()
    summary = index_notes(engine, root)
    assert engine.embedder.texts == [] and summary.sections_updated >= 1
    crm = by_heading(engine)[("archive/2023/acme-corp.md", ("Acme", "CRM"), 0)]
    assert crm.id == ids[(("Acme", "CRM"), 0)]
    assert reordered.encode()[crm.source.byte_start:crm.source.byte_end].decode() == crm.content
    assert_consistent(engine, root)


def test_hebbsignore_and_default_ignores(engine, root):
    write(root, "keep.md", "# Keep\n\nkept text\n")
    write(root, "drafts/wip.md", "# WIP\n\ndraft text\n")
    write(root, ".obsidian/workspace.md", "# x\n\nnot a note\n")
    write(root, "node_modules/pkg/README.md", "# pkg\n\nnot a note\n")
    write(root, "insights/i.md", "# insight\n\nwritten by hebbs\n")
    write(root, "contradictions/c.md", "# c\n\nwritten by hebbs\n")
    index_notes(engine, root)
    assert {k[0] for k in by_heading(engine)} == {"keep.md", "drafts/wip.md"}
    (root / ".hebbsignore").write_text("drafts/\n")
    summary = index_notes(engine, root)
    assert summary.files_removed == 1 and summary.sections_removed == 1
    assert {k[0] for k in by_heading(engine)} == {"keep.md"}
    assert_consistent(engine, root)


def test_broken_yaml_and_bad_bytes_warn_per_file(engine, root):
    write(root, "good.md", "# Good\n\nall fine here\n")
    write(root, "bad-yaml.md", "---\ntitle: [oops\n---\n# Bad YAML\n\nthe body still counts\n")
    (root / "latin1.md").write_bytes("# Café\n\nré­sumé in Latin-1\n".encode("latin-1", "replace"))
    summary = index_notes(engine, root)
    assert len(summary.warnings) == 2
    assert any(w.startswith("bad-yaml.md: front matter is not valid YAML") for w in summary.warnings)
    assert any(w.startswith("latin1.md: not valid UTF-8") for w in summary.warnings)
    mems = by_heading(engine)
    assert mems[("bad-yaml.md", ("Bad YAML",), 0)].content.endswith("the body still counts")
    assert "\ufffd" in mems[("latin1.md", ("Caf\ufffd",), 0)].content
    assert ("good.md", ("Good",), 0) in mems
    listed = {f.path: f for f in list_notes(root)}
    assert listed["bad-yaml.md"].warnings and listed["good.md"].warnings == []
    assert_consistent(engine, root)


# Long (it embeds a 1 MB note, about 100 s on a loaded machine): `-m slow`. The default run parses a
# 1 MB note (test_vault_parse.py) and indexes many sections elsewhere.
@pytest.mark.slow
def test_one_megabyte_note(engine, root):
    """A 1 MB note: a little prose and a pasted dump of digests (the prose-only megabyte is split in
    test_vault_parse with the real tokenizer; embedding ~1,000 prose chunks here would only cost minutes)."""
    digests = "\n".join(format(i * 0x9E3779B97F4A7C15 % (1 << 256), "064x") * 2 for i in range(7800))
    text = ("# Release 4.2\n\nThe release went out on Tuesday; checksums below. #release\n\n"
            "## Checksums\n\n" + digests + "\n\n## Notes\n\nNo incident during the rollout. [[Ops]]\n")
    write(root, "big.md", text)
    write(root, "small.md", "# Small\n\nsmall note\n")
    assert (root / "big.md").stat().st_size >= 1_000_000
    summary = index_notes(engine, root)
    assert summary.warnings == []
    chunks = [m for m in vault_memories(engine) if m.source.file_path == "big.md"]
    dump = sorted((m for m in chunks if m.source.heading_path == ["Release 4.2", "Checksums"]),
                  key=lambda m: m.context["chunk"])
    assert len(chunks) == summary.sections_added - 1 and len(dump) > 50
    assert [m.context["chunk"] for m in dump] == list(range(len(dump)))
    assert max(engine.embedder.count_tokens([m.content for m in chunks])) <= engine.embedder.max_tokens
    assert all(m.content.startswith("## Checksums") for m in dump)
    data = (root / "big.md").read_bytes()
    for m in dump:
        assert m.content.endswith(data[m.source.byte_start:m.source.byte_end].decode())
    assert {m.source.heading_path[-1] for m in chunks} == {"Release 4.2", "Checksums", "Notes"}
    engine.embedder.texts.clear()
    assert index_notes(engine, root).embedded == 0
    assert_consistent(engine, root)


def test_wiki_links_become_edges_and_resolve_later(engine, root):
    write(root, "a.md", "# A\n\nSee [[B]] and [[C#Second]] and [[Later note]].\n")
    write(root, "b.md", "# B\n\nbee text\n\n## More\n\nmore bee\n")
    write(root, "sub/C.md", "# C\n\nfirst\n\n## Second\n\nsecond part\n")
    summary = index_notes(engine, root)
    mems = by_heading(engine)
    a = mems[("a.md", ("A",), 0)]
    related = {e.target for e in engine.edges(a.id, "out") if e.edge_type == "RELATED_TO"}
    assert related == {mems[("b.md", ("B",), 0)].id, mems[("b.md", ("B", "More"), 0)].id,
                       mems[("sub/C.md", ("C", "Second"), 0)].id}
    assert summary.unresolved_links == 1
    assert [f.unresolved_links for f in list_notes(root) if f.path == "a.md"] == [["Later note"]]
    write(root, "Later note.md", "# Later\n\nnow it exists\n")
    summary = index_notes(engine, root)
    later = by_heading(engine)[("Later note.md", ("Later",), 0)]
    assert later.id in {e.target for e in engine.edges(a.id, "out") if e.edge_type == "RELATED_TO"}
    assert summary.unresolved_links == 0 and summary.edges_added == 1
    write(root, "a.md", "# A\n\nSee [[B]] only.\n")
    summary = index_notes(engine, root)
    related = {e.target for e in engine.edges(a.id, "out") if e.edge_type == "RELATED_TO"}
    assert related == {mems[("b.md", ("B",), 0)].id, mems[("b.md", ("B", "More"), 0)].id}
    assert summary.edges_removed == 2


def test_contradiction_candidates(engine, root):
    write(root, "ops.md", "# Ops\n\n## Pipeline\n\nThe deploy pipeline is reliable since the March upgrade.\n")
    write(root, "retro.md", "# Retro\n\n## Pipeline\n\nThe deploy pipeline is unreliable since the March upgrade.\n")
    write(root, "team.md", "# Team\n\n## Pipeline\n\nThe deploy pipeline is reliable and the team likes it.\n")
    index_notes(engine, root)
    pending = engine.pending()
    mems = by_heading(engine)
    ops, retro = mems[("ops.md", ("Ops", "Pipeline"), 0)].id, mems[("retro.md", ("Retro", "Pipeline"), 0)].id
    team = mems[("team.md", ("Team", "Pipeline"), 0)].id
    pairs = {frozenset((p.memory_a, p.memory_b)): p for p in pending}
    planted = pairs[frozenset((ops, retro))]
    assert 0.35 < planted.confidence <= 0.75 and planted.similarity >= 0.5
    assert any("reliable / unreliable" in r for r in planted.reasons)
    assert frozenset((ops, team)) not in pairs  # consistent statements are not candidates
    assert all(engine.get(mid) for mid in (ops, retro))  # nothing deleted or superseded
    assert engine.get(ops).superseded_by is None and engine.get(retro).superseded_by is None


def test_lost_manifest_is_rebuilt_without_embedding(engine, root):
    write(root, "acme.md", ACME)
    write(root, "carol.md", CAROL)
    index_notes(engine, root)
    ids = {k: m.id for k, m in by_heading(engine).items()}
    manifest_path(root).unlink()
    engine.embedder.texts.clear()
    summary = index_notes(engine, root)
    assert engine.embedder.texts == [] and summary.sections_added == 0
    assert {k: m.id for k, m in by_heading(engine).items()} == ids
    assert_consistent(engine, root)


def test_reindex_removes_strays_and_keeps_a_forgotten_section_out(engine, root):
    write(root, "acme.md", ACME)
    index_notes(engine, root)
    victim = by_heading(engine)[("acme.md", ("Acme", "CRM"), 0)]
    engine.forget(ids=[victim.id])
    stray = engine.remember("stray", context={"origin": "vault", "vault": load_manifest(root)[0].vault_id,
                                             "file": "acme.md", "heading_path": ["Acme"], "section_hash": "x"})
    agent = engine.remember("an agent's own memory, not from the vault")
    summary = index_notes(engine, root)
    assert summary.sections_added == 0 and summary.forgotten_left_out == 1 and summary.reconciled == 1
    assert ("acme.md", ("Acme", "CRM"), 0) not in by_heading(engine)
    with pytest.raises(NotFound):
        engine.get(stray.id)
    assert engine.get(agent.id).content.startswith("an agent")  # other memories are never touched
    assert_consistent(engine, root)


def test_a_forgotten_section_stays_out_for_free_until_its_text_changes(engine, root, monkeypatch):
    """Issue 30: after `hebbs forget` of one section, the next index rewrote every edge of the vault
    (52.9 s on 1,212 sections, against 0.2 s unchanged) and said "1 memories repaired after an
    interrupted run". A forget is the user's wish: the section stays out while its note says the
    same, so the next index embeds and writes nothing (an unchanged re-index's cost), says so once,
    and never calls it a repair; an edit of another section keeps it out, an edit of its own text
    brings it back with its links."""
    write(root, "acme.md", ACME)
    write(root, "carol.md", CAROL)
    write(root, "bob.md", "# Bob\n\nBob works with [[Carol]] and [[Acme]].\n")
    index_notes(engine, root)
    victim = by_heading(engine)[("carol.md", ("Carol",), 0)]
    before = engine.count()
    engine.forget(ids=[victim.id])
    writes: list[str] = []
    for name in ("add_edge", "remove_edge", "remember_many", "revise_many", "forget"):
        call = getattr(engine, name)
        monkeypatch.setattr(engine, name, lambda *a, _call=call, _name=name, **k: (writes.append(_name), _call(*a, **k))[1])
    engine.embedder.texts.clear()
    summary = index_notes(engine, root)
    assert summary.forgotten_left_out == 1 and summary.reconciled == 0 and summary.embedded == 0
    assert engine.embedder.texts == [] and writes == [], "the vault was written for a forget"
    assert summary.sections_total == before - 1 == engine.count()
    said = io.StringIO()
    print_summary(root, summary, said)
    assert "1 section left out: its memory was forgotten" in said.getvalue()
    assert "repaired" not in said.getvalue() and "interrupted" not in said.getvalue()
    again = index_notes(engine, root)
    assert again.forgotten_left_out == 0 and again.reconciled == 0 and writes == []
    assert ("carol.md", ("Carol",), 0) not in by_heading(engine)
    assert_consistent(engine, root)
    # Another section of the note changes: the forgotten one stays out.
    carol = (root / "carol.md").read_text()
    write(root, "carol.md", carol + "\n## Hobbies\n\nCarol sails on weekends.\n")
    index_notes(engine, root)
    assert ("carol.md", ("Carol",), 0) not in by_heading(engine) and ("carol.md", ("Carol", "Hobbies"), 0) in by_heading(engine)
    assert_consistent(engine, root)
    # Its own text changes: it is a new section, indexed with its links.
    write(root, "carol.md", carol.replace("# Carol\n", "# Carol\n\nCarol moved to Lisbon.\n", 1)
          + "\n## Hobbies\n\nCarol sails on weekends.\n")
    engine.embedder.texts.clear()
    summary = index_notes(engine, root)
    back = by_heading(engine)[("carol.md", ("Carol",), 0)]
    assert summary.sections_added == 1 and len(engine.embedder.texts) == 1 and "Lisbon" in back.content
    linking = {e.source for e in engine.edges(back.id, "in") if e.edge_type == "RELATED_TO"}
    assert by_heading(engine)[("bob.md", ("Bob",), 0)].id in linking
    assert_consistent(engine, root)


def test_scan_then_apply_and_paths(engine, root):
    write(root, "a.md", "# A\n\nalpha\n")
    write(root, "b.md", "# B\n\nbeta\n")
    index_notes(engine, root)
    write(root, "a.md", "# A\n\nalpha two\n")
    write(root, "b.md", "# B\n\nbeta two\n")
    plan = scan_notes(engine, root, paths=[root / "a.md"])  # only a.md is looked at
    assert plan.files_changed == 1 and plan.pending() == {"add": 0, "revise": 1, "update": 0, "forget": 0}
    assert engine.embedder.texts[-1] != "# A\n\nalpha two"  # phase 1 embeds nothing
    summary = apply_plan(engine, root)  # phase 2 from the saved manifest
    assert summary.sections_revised == 1
    assert by_heading(engine)[("b.md", ("B",), 0)].content == "# B\n\nbeta"
    assert [f.state for f in list_notes(root)] == ["synced", "modified"]
    index_notes(engine, root)
    assert [f.state for f in list_notes(root)] == ["synced", "synced"]


# Crash safety: kill -9 of an indexing process -----------------------------------------------------

WORDS = ("pipeline budget review customer latency report roadmap hiring vendor contract outage migration "
         "database cache invoice shipment warehouse forecast audit security release planning").split()


def make_vault(root: Path, notes: int) -> None:
    import random

    rng = random.Random(7)
    for n in range(notes):
        parts = [f"# Note {n}\n\nIntro of note {n} about {rng.choice(WORDS)}. Links to [[note-{(n + 1) % notes}]].\n"]
        for s in range(3):
            sentence = " ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 40)))
            parts.append(f"## Part {s}\n\n{sentence.capitalize()}. #{rng.choice(WORDS)}\n")
        write(root, f"dir{n % 4}/note-{n}.md", "\n".join(parts))


CHILD = textwrap.dedent("""
    import os, sys
    from hebbs import Engine
    import hebbs.notes.indexer as indexer
    from hebbs.notes import index_notes
    indexer.BATCH = 16  # many small engine writes, so a kill lands between and inside them
    root = sys.argv[1]
    def progress(p):
        print(p.stage, p.done, p.total, flush=True)
    with Engine.open(os.path.join(root, ".hebbs")) as engine:
        index_notes(engine, root, progress=progress)
    print("finished", flush=True)
""")


def run_and_kill(root: Path, stage: str, fraction: float) -> bool:
    """Index in a child process and SIGKILL it once `stage` reaches `fraction`; True if it was killed."""
    proc = processes.popen([sys.executable, "-c", CHILD, str(root)], stdout=subprocess.PIPE, text=True,
                            env=os.environ.copy())
    killed = False
    for line in proc.stdout:
        parts = line.split()
        if parts and parts[0] == stage and int(parts[1]) >= fraction * int(parts[2]):
            os.kill(proc.pid, signal.SIGKILL)
            killed = True
            break
    proc.wait()
    return killed


def memory_set(engine) -> list[tuple]:
    return sorted((m.source.file_path, tuple(m.source.heading_path), m.context["chunk"], m.content)
                  for m in vault_memories(engine))


# Long (kill -9 at three stages, each a re-index; 144 s on a loaded machine): `-m slow`. The default run
# kills an index run and checks it converges in tests/reliability/test_storage_crash.py.
@pytest.mark.slow
@pytest.mark.timeout(900)
def test_kill_9_while_indexing_then_reindex_converges(tmp_path, embedder):
    clean = tmp_path / "clean"
    make_vault(clean, 48)
    with Engine.open(clean / ".hebbs", embedder=embedder) as eng:
        index_notes(eng, clean)
        expected = memory_set(eng)
        expected_edges = sum(1 for m in vault_memories(eng) for e in eng.edges(m.id, "out")
                             if e.edge_type == "RELATED_TO")
    assert len(expected) == 48 * 4
    for name, stage, fraction in [("early", "parse", 0.3), ("mid", "embed", 0.5), ("late", "check", 0.0)]:
        root = tmp_path / name
        shutil.copytree(clean, root, ignore=shutil.ignore_patterns(".hebbs"))
        assert run_and_kill(root, stage, fraction), f"{name}: the child finished before the kill point"
        if name == "mid":
            # A second crash on top of the first: kill the next run early in its embedding too.
            run_and_kill(root, "embed", 0.2)
        with Engine.open(root / ".hebbs", embedder=embedder) as eng:
            index_notes(eng, root)
            got = memory_set(eng)
            assert got == expected, name  # same memories, no duplicates, no orphans
            assert_consistent(eng, root)
            edges = sum(1 for m in vault_memories(eng) for e in eng.edges(m.id, "out") if e.edge_type == "RELATED_TO")
            assert edges == expected_edges
            # And a further run has nothing left to do.
            summary = index_notes(eng, root)
            assert summary.embedded == 0 and summary.reconciled == 0


def test_a_move_reported_only_by_its_new_path_keeps_ids(engine, root):
    """The watcher may learn of a move's new path before (or without) its old one."""
    write(root, "acme.md", ACME)
    index_notes(engine, root)
    ids = {(k[1], k[2]): m.id for k, m in by_heading(engine).items()}
    (root / "clients").mkdir()
    os.rename(root / "acme.md", root / "clients/acme.md")
    summary = apply_plan(engine, root, scan_notes(engine, root, paths=[root / "clients"]))
    assert summary.embedded == 0 and summary.files_removed == 1
    assert {(k[1], k[2]): m.id for k, m in by_heading(engine).items()} == ids
    assert_consistent(engine, root)


def test_list_vault_states(engine, root):
    write(root, "a.md", "# A\n\nalpha\n")
    write(root, "gone.md", "# Gone\n\nsoon deleted\n")
    index_notes(engine, root)
    write(root, "new.md", "# New\n\nnot indexed yet\n")
    (root / "gone.md").unlink()
    assert {f.path: f.state for f in list_notes(root)} == {"a.md": "synced", "gone.md": "removed", "new.md": "new"}
    scan_notes(engine, root)  # phase 1 only
    listed = {f.path: f for f in list_notes(root, sections=True)}
    assert set(listed) == {"a.md", "new.md"}
    assert listed["new.md"].state == "pending" and listed["new.md"].pending == 1
    assert listed["new.md"].section_list[0].state == "stale" and listed["new.md"].section_list[0].memory_id is None
    assert listed["a.md"].section_list[0].memory_id is not None
    apply_plan(engine, root)
    assert {f.state for f in list_notes(root)} == {"synced"}


def test_changing_the_split_level_reparses_and_keeps_unchanged_sections(engine, root):
    write(root, "doc.md", "# Doc\n\nintro\n\n## Part\n\npart text\n\n### Detail\n\ndetail text\n")
    index_notes(engine, root)
    part = by_heading(engine)[("doc.md", ("Doc", "Part"), 0)]
    summary = index_notes(engine, root, split_level=3)
    mems = by_heading(engine)
    assert ("doc.md", ("Doc", "Part", "Detail"), 0) in mems
    assert mems[("doc.md", ("Doc", "Part"), 0)].id == part.id  # same place, shorter text: revised
    assert summary.sections_added == 1 and summary.sections_revised == 1
    assert load_manifest(root)[0].split_level == 3
    assert index_notes(engine, root).embedded == 0  # the level sticks
    assert_consistent(engine, root)
