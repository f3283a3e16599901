"""Hostile values in every field of every command (issue 26, item 8): a real daemon answers each
request, and none with INTERNAL. Before the fix 53 of 2,160 got INTERNAL: a vault path component
over 255 bytes (OSError: File name too long), a NUL in recall's `vaults`, a panel port of 65536 or -1
(OverflowError)."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from daemon_harness import ForegroundDaemon  # noqa: E402
from hostile import LONG_COMPONENT, odd_folder, odd_paths, requests, send_each  # noqa: E402


@pytest.fixture(scope="module")
def daemon():
    d = ForegroundDaemon().start()
    yield d
    d.stop()


def test_the_reported_cases_are_invalid_input(daemon):
    project = str(daemon.project())
    cases = [
        *[{"id": 1, "command": {"type": t, **extra}, "vault_path": LONG_COMPONENT}
          for t, extra in (("status", {}), ("recall", {"cue": "x"}), ("list", {}), ("index", {}),
                           ("index_cancel", {}), ("index_follow", {}))],
        {"id": 1, "command": {"type": "recall", "cue": "x", "vaults": [LONG_COMPONENT]}, "vault_path": project},
        {"id": 1, "command": {"type": "recall", "cue": "x", "vaults": ["/tmp/a\x00b"]}, "vault_path": project},
        {"id": 1, "command": {"type": "prime", "vaults": [LONG_COMPONENT]}, "vault_path": project},
        {"id": 1, "command": {"type": "panel", "port": 65536}},
        {"id": 1, "command": {"type": "panel", "port": -1}},
        {"id": 1, "command": {"type": "panel", "port": 0}},
    ]
    import json
    codes, bad = send_each(daemon.socket, [(json.dumps(c)[:80], json.dumps(c).encode()) for c in cases])
    assert not bad, bad
    assert codes == Counter({"INVALID_REQUEST": len(cases)}), codes


def test_every_hostile_value_in_every_field_gets_no_internal(daemon):
    """About 4,000 requests (hostile.py), a few seconds: every command but shutdown, every field."""
    bodies = list(requests(str(daemon.project())))
    codes, bad = send_each(daemon.socket, bodies)
    assert not bad, f"{len(bad)} of {len(bodies)}: " + "\n".join(bad[:30])
    assert daemon.alive()


def test_every_field_against_a_vault_whose_notes_have_names_that_are_not_utf8(daemon):
    """Issue 39: every command x field, hostile values plus names that are not UTF-8 (surrogate escapes,
    raw bytes in the JSON string, real Latin-1 paths on disk), sent to the vault of a folder holding
    Latin-1 file and folder names: no INTERNAL, nothing unanswered. Before, a reply naming such a file
    (`list`) could not be encoded and the connection ended without one."""
    import os

    project = daemon.project()
    (project / "plain.md").write_text("# Plain\n\nA note named in UTF-8.\n")
    odd = odd_folder(project)
    Path(os.fsdecode(bytes(project) + b"/caf\xe9.md")).write_text("# Cafe\n\nA note whose name is Latin-1.\n")
    bodies = list(requests(str(project / ".hebbs"), odd_paths(odd)))
    codes, bad = send_each(daemon.socket, bodies)
    assert not [b for b in bad if "UNANSWERED" in b], bad
    # A full index run of this folder fails inside the notes indexer's walk (hebbs/vault), which the notes
    # helper of wave 4 fixes (issue 39, item 2): delete this exception once that fix is merged.
    open_in_the_notes_indexer = [b for b in bad if b.startswith("index.") and "UnicodeEncodeError" in b]
    rest = [b for b in bad if b not in open_in_the_notes_indexer]
    assert not rest, f"{len(rest)} of {len(bodies)}: " + "\n".join(rest[:30])
    assert daemon.alive()


def test_a_nul_in_index_ray_is_invalid_request(daemon):
    """Issue 39, item 8: on a folder with a note, `ray` with a NUL reached the Ray client's process
    arguments (ValueError: embedded null byte) and answered INTERNAL; every other field said INVALID_REQUEST."""
    import json

    project = daemon.project()
    (project / "note.md").write_text("# Deploys\n\nThe deploy moved to Friday.\n")
    body = {"id": 1, "command": {"type": "index", "path": str(project), "ray": "127.0.0.1:1\x00x"},
            "vault_path": str(project / ".hebbs")}
    codes, bad = send_each(daemon.socket, [("index.ray with a NUL", json.dumps(body).encode())])
    assert not bad, bad
    assert codes == Counter({"INVALID_REQUEST": 1}), codes
