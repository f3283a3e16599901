"""Phase 1 without an engine: the section split and every extracted field, ignore rules, the manifest file."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from hebbs.notes.manifest import FileEntry, Manifest, SectionEntry, load_manifest, manifest_path, save_manifest
from hebbs.notes.parse import Link, estimate_tokens, parse_note
from hebbs.notes.walk import VaultFilter, walk_notes

import processes


@pytest.fixture(scope="session")
def tokenizer(tmp_path_factory):
    """The real model's token counter (the tokenizer only; the ONNX graph is built once per session)."""
    os.environ.setdefault("HEBBS_MODEL_CACHE", str(tmp_path_factory.getbasetemp() / "model-cache"))
    from hebbs.embedding.embed import get_embedder

    return get_embedder()


NOTE = """\
---
title: Acme Corp
tags: [client, "#crm"]
entity: acme_corp
date: 2024-03-01
---
Loose intro with #intro-tag and a link to [[Bob Smith|Bob]].

# Acme

Acme is a client. `#not-a-tag` and [[People/Carol#Contact]] and [[#Decisions]] #acme/team

```
#nope [[not a link]]
```

    #indented-code [[no]]

## Decisions *2024*

We chose Salesforce. #decision ![[diagram.png]] see http://example.com/#frag issue#12 #123 #2024-plan
A second line. [[Bob Smith]]

### Detail

Detail text stays in Decisions. #deep

## Empty

Setext heading
--------------

Text under a setext heading.
"""


def sections_by_title(note):
    return {tuple(s.heading_path): s for s in note.sections}


def test_split_heading_paths_offsets_and_text():
    data = NOTE.encode()
    note = parse_note(data)
    assert [s.heading_path for s in note.sections] == [
        [], ["Acme"], ["Acme", "Decisions 2024"], ["Acme", "Setext heading"]]
    assert [s.level for s in note.sections] == [0, 1, 2, 2]
    for s in note.sections:
        assert data[s.byte_start:s.byte_end].decode() == s.content  # byte ranges point at the exact text
        assert s.chunk == 0 and s.chunks == 1
        assert len(s.hash) == 32
    intro, acme, decisions, setext = note.sections
    assert intro.content.startswith("Loose intro")  # the text before the first heading, without front matter
    assert acme.content.startswith("# Acme\n")
    assert "### Detail" in decisions.content and "Detail text" in decisions.content  # deeper headings stay inside
    assert "## Empty" not in "".join(s.content for s in note.sections)  # a heading with no body is no section
    assert setext.content.endswith("Text under a setext heading.")


def test_front_matter_tags_and_links():
    note = parse_note(NOTE.encode())
    assert note.front_matter == {"title": "Acme Corp", "tags": ["client", "#crm"], "entity": "acme_corp",
                                 "date": "2024-03-01"}
    assert note.tags == ["client", "crm"]
    assert note.warnings == []
    intro, acme, decisions, setext = note.sections
    assert intro.tags == ["intro-tag"]
    assert intro.links == [Link("Bob Smith", None, "Bob")]
    # Not tags: code spans, fenced and indented code, headings, URL fragments, words with '#', numbers.
    assert acme.tags == ["acme/team"]
    assert acme.links == [Link("People/Carol", "Contact", None), Link("", "Decisions", None)]
    assert decisions.tags == ["decision", "2024-plan", "deep"]
    assert decisions.links == [Link("Bob Smith", None, None)]  # the image embed is an attachment, not a note
    assert setext.tags == [] and setext.links == []


def test_split_level_is_configurable():
    note = parse_note(NOTE.encode(), split_level=3)
    assert ["Acme", "Decisions 2024", "Detail"] in [s.heading_path for s in note.sections]
    note = parse_note(NOTE.encode(), split_level=1)
    assert [s.heading_path for s in note.sections] == [[], ["Acme"]]


def test_heading_path_pops_to_the_right_level():
    src = "# A\n\na\n\n## B\n\nb\n\n# C\n\nc\n\n## D\n\nd\n"
    assert [s.heading_path for s in parse_note(src.encode()).sections] == [["A"], ["A", "B"], ["C"], ["C", "D"]]


def test_headings_inside_lists_and_quotes_do_not_split():
    src = "# Top\n\n> ## quoted heading\n> text\n\n- ## listed heading\n\nrest\n"
    note = parse_note(src.encode())
    assert [s.heading_path for s in note.sections] == [["Top"]]


def test_broken_yaml_is_a_warning_and_the_note_still_parses():
    note = parse_note(b"---\ntitle: [unclosed\nother: x\n---\n# T\n\nbody text\n")
    assert note.front_matter == {}
    assert len(note.warnings) == 1 and "front matter is not valid YAML" in note.warnings[0]
    assert [s.content for s in note.sections] == ["# T\n\nbody text"]
    scalar = parse_note(b"---\njust a string\n---\nbody\n")
    assert scalar.front_matter == {} and "not a mapping" in scalar.warnings[0]


def test_invalid_utf8_is_a_warning_with_exact_offsets():
    data = b"# Caf\xe9\n\nna\xefve text \xff here\n\n## Next\n\nclean \xc3\xa9 text\n"
    note = parse_note(data)
    assert len(note.warnings) == 1
    assert "not valid UTF-8 (3 bad byte(s), first at byte 5)" in note.warnings[0]
    first, second = note.sections
    assert "\ufffd" in first.content
    assert data[second.byte_start:second.byte_end].decode() == second.content == "## Next\n\nclean é text"


def test_bom_and_crlf_keep_byte_offsets_exact():
    data = "\ufeff# Title\r\n\r\nline one\r\n\r\n## Two\r\n\r\nline two\r\n".encode()
    note = parse_note(data)
    assert [s.heading_path for s in note.sections] == [["Title"], ["Title", "Two"]]
    for s in note.sections:
        assert data[s.byte_start:s.byte_end].decode() == s.content


def test_binary_file_is_skipped_with_a_warning():
    note = parse_note(b"\x00\x01\x02binary")
    assert note.binary and note.sections == [] and "binary" in note.warnings[0]


def test_long_section_becomes_overlapping_chunks_under_the_limit(tokenizer):
    sentences = [f"Sentence number {i} talks about the deploy pipeline and the café budget." for i in range(200)]
    data = ("# Doc\n\n## Long part\n\n" + " ".join(sentences) + "\n\n## Short\n\nsmall\n").encode()
    note = parse_note(data, count_tokens=tokenizer.count_tokens, max_tokens=tokenizer.max_tokens)
    chunks = [s for s in note.sections if s.heading_path == ["Doc", "Long part"]]
    assert len(chunks) > 5
    assert [c.chunk for c in chunks] == list(range(len(chunks)))
    assert all(c.chunks == len(chunks) for c in chunks)
    assert max(tokenizer.count_tokens([c.content for c in chunks])) <= tokenizer.max_tokens
    for c in chunks:
        assert c.content.startswith("## Long part")  # every chunk keeps its heading
        body = data[c.byte_start:c.byte_end].decode()
        assert body and c.content.endswith(body) or c.content == body
    # Overlap: each chunk begins with text the previous one ended with.
    for prev, cur in zip(chunks, chunks[1:]):
        assert cur.byte_start < prev.byte_end
    # Together the chunks cover the whole section.
    assert chunks[0].byte_start == data.index(b"## Long part")
    assert chunks[-1].byte_end == data.index(b"\n\n## Short")
    assert note.sections[-1].heading_path == ["Doc", "Short"] and note.sections[-1].chunks == 1


def test_one_megabyte_note(tokenizer):
    para = ("The quarterly review covered hiring, the deploy pipeline, latency budgets and customer reports. "
            "Nobody disagreed with the plan, but the budget stays tight.\n\n")
    body = para * (1_000_000 // len(para))
    data = ("# Big\n\n" + body + "#tail-tag [[Other]]\n").encode()
    assert len(data) >= 990_000
    note = parse_note(data, count_tokens=tokenizer.count_tokens, max_tokens=tokenizer.max_tokens)
    assert len(note.sections) > 500
    assert max(tokenizer.count_tokens([s.content for s in note.sections])) <= tokenizer.max_tokens
    assert all(s.heading_path == ["Big"] for s in note.sections)
    assert note.sections[-1].tags == ["tail-tag"] and note.sections[-1].links == [Link("Other")]
    assert note.sections[0].tags == []
    assert note.sections[-1].byte_end == len(data.rstrip())


def test_a_giant_word_is_cut_by_characters(tokenizer):
    data = b"## Blob\n\n" + b"x" * 200_000
    note = parse_note(data, count_tokens=tokenizer.count_tokens, max_tokens=tokenizer.max_tokens)
    assert len(note.sections) > 1
    assert max(len(s.content) for s in note.sections) < 10_000


def test_estimate_counts_more_than_the_tokenizer(tokenizer):
    texts = ["The deploy pipeline is reliable.", "naïve café déjà vu " * 20, "x = f(a, b) # comment"]
    assert all(e >= t for e, t in zip(estimate_tokens(texts), tokenizer.count_tokens(texts)))


# Walking and ignore rules ------------------------------------------------------------------------

def write(root: Path, rel: str, text: str = "# Note\n\nbody\n") -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_walk_skips_tool_folders_hidden_files_and_hebbsignore(tmp_path):
    root = tmp_path / "notes"
    for rel in ["a.md", "sub/b.md", "sub/deep/c.MD", "readme.txt", ".hidden.md", ".trash/x.md", ".git/y.md",
                ".obsidian/z.md", "node_modules/pkg/readme.md", "contradictions/c1.md", "insights/i1.md",
                "projects/insights/kept.md", ".hebbs/m.md", "drafts/d.md", "drafts/keep.md", "tmp.scratch.md"]:
        write(root, rel)
    (root / ".hebbsignore").write_text("# comment\ndrafts/\n!drafts/keep.md\n*.scratch.md\n")
    found = walk_notes(root, VaultFilter(root))
    assert sorted(found) == ["a.md", "projects/insights/kept.md", "sub/b.md", "sub/deep/c.MD"]
    vfilter = VaultFilter(root)
    assert vfilter.is_note("sub/new.md") and not vfilter.is_note("drafts/keep.md")
    assert not vfilter.is_note("node_modules/a/b.md") and not vfilter.is_note("x.txt")


def test_symlinks_outside_the_vault_are_not_followed(tmp_path):
    root = tmp_path / "notes"
    outside = tmp_path / "outside"
    write(outside, "secret.md")
    write(root, "real/n.md")
    (root / "out-dir").symlink_to(outside, target_is_directory=True)
    (root / "out-file.md").symlink_to(outside / "secret.md")
    (root / "alias").symlink_to(root / "real", target_is_directory=True)  # inside: followed, but not twice
    (root / "loop").symlink_to(root, target_is_directory=True)
    (root / "gone.md").symlink_to(root / "nowhere.md")
    vault_filter = VaultFilter(root)
    found = walk_notes(root, vault_filter)
    assert sorted(found) == ["real/n.md"]
    # Skipped, and said: a user wondering why a note is missing from recall finds out at the index.
    assert sorted(w.split(":")[0] for w in vault_filter.warnings) == ["gone.md", "out-dir", "out-file.md"]


# The manifest file -------------------------------------------------------------------------------

def test_manifest_round_trip_and_unreadable_file(tmp_path):
    m = Manifest(files={"a.md": FileEntry(sha256="x", size=1, entity_id="a", created_at=5, sections=[
        SectionEntry(hash="h", meta="m", heading_path=["A"], links=[Link("B", "S", None)], memory_id="01")])})
    save_manifest(tmp_path, m)
    loaded, warning = load_manifest(tmp_path)
    assert warning is None and loaded.files == m.files and not loaded.fresh
    manifest_path(tmp_path).write_bytes(b"{not json")
    fresh, warning = load_manifest(tmp_path)
    assert fresh.fresh and fresh.files == {} and "unreadable" in warning
    assert not [p for p in manifest_path(tmp_path).parent.iterdir() if p.name.endswith(".tmp")]


def test_manifest_save_survives_kill_9(tmp_path):
    """A child saves ever-growing manifests in a loop; killed at any moment, the file still loads."""
    script = textwrap.dedent(f"""
        import sys
        from pathlib import Path
        from hebbs.notes.manifest import FileEntry, Manifest, SectionEntry, save_manifest
        root = Path({str(tmp_path)!r})
        n = 0
        while True:
            n += 1
            files = {{f"n{{i}}.md": FileEntry(sha256=str(n), size=n, entity_id="e", created_at=n,
                      sections=[SectionEntry(hash="h" * 32, meta=str(n), content="text " * 50)] * 20)
                      for i in range(50 + n % 50)}}
            save_manifest(root, Manifest(files=files))
            if n == 3:
                print("ready", flush=True)
    """)
    for delay in (0.05, 0.2, 0.5):
        proc = processes.popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(delay)  # only to spread the kill points, nothing is asserted about time
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        manifest, warning = load_manifest(tmp_path)
        assert warning is None and not manifest.fresh
        sizes = {f.size for f in manifest.files.values()}
        assert len(sizes) == 1 and len(manifest.files) == 50 + sizes.pop() % 50  # one whole save, never a mix
