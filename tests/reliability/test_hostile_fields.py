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
from hostile import LONG_COMPONENT, requests, send_each  # noqa: E402


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
    """About 3,500 requests (hostile.py), a few seconds: every command but shutdown, every field."""
    bodies = list(requests(str(daemon.project())))
    codes, bad = send_each(daemon.socket, bodies)
    assert not bad, f"{len(bad)} of {len(bodies)}: " + "\n".join(bad[:30])
    assert daemon.alive()
