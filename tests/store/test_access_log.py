"""Each memory's access log (hebbs/store/access_log.py): written where reinforcement is, bounded, newest
first, gone with the memory; and the panel's once-per-window rule for opened memories."""

from __future__ import annotations

from pathlib import Path

import pytest

from hebbs import Engine
from hebbs.errors import InvalidInput
from hebbs.store import access_log


def test_reinforce_and_a_counted_recall_log_how_the_memory_was_used_newest_first(tmp_path: Path) -> None:
    with Engine.open(tmp_path / "v") as eng:
        kept = eng.remember("The release train leaves every second Tuesday.", entity_id="releases")
        other = eng.remember("Carol bakes sourdough on Sundays.", entity_id="carol")
        assert eng.accesses(kept.id) == []
        eng.reinforce(kept.id)
        eng.reinforce([kept.id], via="panel")
        eng.recall("when does the release train leave", top_k=1, reinforce=True)
        assert [a.via for a in eng.accesses(kept.id)] == ["recall", "panel", "used"]
        stamps = [a.at for a in eng.accesses(kept.id)]
        assert stamps == sorted(stamps, reverse=True)
        assert eng.get(kept.id).access_count == 3 and eng.accesses(other.id) == []
        eng.recall("when does the release train leave", top_k=1)  # not counted: not logged either
        assert len(eng.accesses(kept.id)) == 3
    with Engine.open(tmp_path / "v") as eng:  # kept on disk, in the meta family
        assert [a.via for a in eng.accesses(kept.id)] == ["recall", "panel", "used"]


def test_the_log_keeps_the_newest_accesses_and_the_count_keeps_them_all(tmp_path: Path) -> None:
    with Engine.open(tmp_path / "v") as eng:
        memory = eng.remember("The VPN certificate expires in March.")
        for n in range(access_log.KEEP + 7):
            eng.reinforce(memory.id, via="panel" if n == access_log.KEEP + 6 else "used")
        log = eng.accesses(memory.id)
        assert len(log) == access_log.KEEP and log[0].via == "panel"
        assert eng.get(memory.id).access_count == access_log.KEEP + 7


def test_forgetting_a_memory_forgets_its_log(tmp_path: Path) -> None:
    with Engine.open(tmp_path / "v") as eng:
        memory = eng.remember("The old build server is called hopper.")
        eng.reinforce(memory.id)
        key = (access_log.PREFIX + memory.id).encode()
        assert eng.vault.store.get("meta", key) is not None
        eng.forget([memory.id])
        assert eng.vault.store.get("meta", key) is None


def test_an_unknown_way_of_using_a_memory_is_refused_and_nothing_is_counted(tmp_path: Path) -> None:
    with Engine.open(tmp_path / "v") as eng:
        memory = eng.remember("Standup is at 9:30.")
        with pytest.raises(InvalidInput, match="via must be one of used, panel"):
            eng.reinforce(memory.id, via="recall")
        assert eng.get(memory.id).access_count == 0 and eng.accesses(memory.id) == []
