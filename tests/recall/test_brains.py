"""Both brains at once: one recall or prime over the project vault and the global brain, merged by a
real daemon, through the SDK, the protocol and the CLI (two real vaults, the real model)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from hebbs.recall.brains import VaultRecall, merge_recall
from hebbs.errors import InvalidInput, VaultNotInitialized
from hebbs.protocol import Recall
from hebbs.schema import Memory, RecallResult, RecallResults, ScoreComponents, ScoringWeights

pytest_plugins = ["daemon_fixtures"]

USER = [
    "The user prefers pytest over unittest and wants tests to use real components, not mocks",
    "The user writes commit messages in the imperative mood",
    "The user drinks dark roast coffee every morning",
]
PROJECT = [
    "This project's tests run with pytest against a real daemon on a real socket",
    "The upload client retries three times with exponential backoff",
    "Memories are stored in RocksDB with eight column families",
]


@pytest.fixture(scope="module")
def brains() -> Iterator[tuple[object, Path]]:
    """A daemon of its own (its global brain holds only USER) and a project vault holding PROJECT."""
    from daemon_fixtures import DaemonHome  # type: ignore[import-not-found]

    daemon = DaemonHome(idle_timeout=0)
    daemon.start()
    root = daemon.project()
    with daemon.client(global_=True) as hb:
        hb.remember_many([{"content": c, "entity_id": "user", "importance": 0.7} for c in USER])
    with daemon.client(root) as hb:
        hb.remember_many([{"content": c, "importance": 0.5} for c in PROJECT])
    yield daemon, root
    daemon.cleanup()
    shutil.rmtree(root, ignore_errors=True)


def test_recall_over_both_brains_is_one_labelled_list(brains) -> None:
    """Tried: recall(brains=["project", "global"]) from a project client: results of both vaults in one
    list, ordered by score, each naming its brain and vault directory; the vault whose best match
    (confidence) is best keeps its own scores exactly, the other is scaled down by its weaker best match."""
    daemon, root = brains
    cue = "how should the tests be written"
    with daemon.client(root) as hb:
        merged = hb.recall(cue, brains=["project", "global"], reinforce=False)
        own_project = hb.recall(cue, reinforce=False)
    with daemon.client(global_=True) as hb:
        own_global = hb.recall(cue, reinforce=False)

    assert {r.vault for r in merged} == {"project", "global"}
    assert len(merged) == len(USER) + len(PROJECT)
    assert {r.vault_path for r in merged if r.vault == "global"} == {str(daemon.home.resolve())}
    assert {r.vault_path for r in merged if r.vault == "project"} == {str((root / ".hebbs").resolve())}
    scores = [r.score for r in merged]
    assert scores == sorted(scores, reverse=True)
    assert "recall over 2 vaults" in merged.notes[0]

    # The cross-vault key: each result's confidence (cosine similarity when recall gives none).
    best = {"project": max(r.confidence for r in own_project), "global": max(r.confidence for r in own_global)}
    winner = max(best, key=best.get)
    own = {r.memory.id: r for r in (own_project if winner == "project" else own_global)}
    for r in merged:
        if r.vault == winner:
            assert r.score == pytest.approx(own[r.memory.id].score, abs=1e-4) == r.details["vault_score"]
        else:
            factor = min(best.values()) / max(best.values())
            assert r.components.relevance == pytest.approx(r.details["vault_relevance"] * factor, abs=1e-4)


def test_the_brain_that_knows_wins(brains) -> None:
    """Tried: a cue only the project answers and one only the user brain answers: the knowing brain's
    memory comes first, and the other brain's relevances are scaled below what its own recall gave."""
    daemon, root = brains
    with daemon.client(root) as hb:
        storage = hb.recall("which database stores the memories", brains=["project", "global"], reinforce=False)
        coffee = hb.recall("what does the user drink in the morning", brains=["global", "project"], reinforce=False)
    assert storage[0].vault == "project" and "RocksDB" in storage[0].memory.content
    assert coffee[0].vault == "global" and "coffee" in coffee[0].memory.content
    for merged, loser in ((storage, "global"), (coffee, "project")):
        scaled = [(r.components.relevance, r.details["vault_relevance"]) for r in merged if r.vault == loser]
        assert all(mine <= own for mine, own in scaled) and any(mine < own for mine, own in scaled)


def test_async_client_and_a_global_client_asking_for_both(brains) -> None:
    """Tried: AsyncClient.recall with brains, and a global client (in the project folder) asking for
    both: the project brain is found from the working directory."""
    import asyncio

    from hebbs import AsyncClient

    daemon, root = brains

    async def run() -> RecallResults:
        async with AsyncClient(global_=True, home=daemon.home, cwd=root) as hb:
            return await hb.recall("retries", brains=("project", "global"), reinforce=False)

    merged = asyncio.run(run())
    assert {r.vault for r in merged} == {"project", "global"}
    assert "retries" in merged[0].memory.content


def test_prime_uses_both_brains_by_default(brains) -> None:
    """Tried: prime from a project client (both brains, labelled, each with its share), prime with
    brains=["project"] (one brain, unlabelled), prime from a folder without a project vault (the
    global brain alone, with a note), and bad brain names (InvalidInput)."""
    daemon, root = brains
    with daemon.client(root) as hb:
        both = hb.prime(max_memories=4)
        alone = hb.prime(max_memories=4, brains=["project"])
        cued = hb.prime(similarity_cue="pytest", max_memories=6)
        with pytest.raises(InvalidInput):
            hb.prime(brains=["work"])
        with pytest.raises(InvalidInput):
            hb.recall("x", brains=[])
    assert [r.vault for r in both].count("project") == 2 and [r.vault for r in both].count("global") == 2
    assert all(r.vault is not None and isinstance(r.vault, str) for r in both)
    assert {r.memory.content for r in alone} <= set(PROJECT) and len(alone) == 3
    assert all(not isinstance(r.vault, str) for r in alone)
    assert {r.memory.content for r in cued} == set(USER + PROJECT)
    assert [r.score for r in cued] == sorted((r.score for r in cued), reverse=True)

    nowhere = Path(daemon.home).parent / (daemon.home.name + "-novault")
    nowhere.mkdir()
    try:
        with daemon.client(cwd=nowhere) as hb:
            primed = hb.prime()
            with pytest.raises(VaultNotInitialized):
                hb.prime(brains=["project"])
        assert {r.memory.content for r in primed} == set(USER)
        assert "project vault was skipped" in primed.notes[0]
    finally:
        nowhere.rmdir()


def test_protocol_recall_with_vaults(brains) -> None:
    """Tried: the raw protocol command with `vaults`, the same vault twice (searched once) and a
    vault that does not exist (VAULT_NOT_INITIALIZED, nothing merged)."""
    daemon, root = brains
    with daemon.client(root) as hb:
        merged = hb.request(Recall(cue="backoff", vaults=[str(daemon.home), str(daemon.home)], reinforce=False))
        assert len(merged) == 6 and {r.vault for r in merged} == {"project", "global"}
        with pytest.raises(VaultNotInitialized):
            hb.request(Recall(cue="backoff", vaults=[str(root / "nothing-here")]))


def test_cli_both_and_prime_flags(brains) -> None:
    """Tried: `hebbs recall --both` (json and text), `hebbs prime` (both by default) and `--no-global`."""
    daemon, root = brains
    out = json.loads(daemon.hebbs("recall", "--both", "exponential backoff", "--format", "json",
                                  cwd=root).stdout)
    assert out["results"][0]["vault"] == "project" and {r["vault"] for r in out["results"]} == {"project", "global"}
    text = daemon.hebbs("recall", "--both", "coffee", cwd=root).stdout
    assert text.splitlines()[0].split()[:4] == ["rank", "conf", "score", "vault"]
    assert text.splitlines()[1].split()[3] == "global"

    primed = json.loads(daemon.hebbs("prime", "--format", "json", cwd=root).stdout)
    assert {r["vault"] for r in primed["results"]} == {"project", "global"}
    single = json.loads(daemon.hebbs("prime", "--no-global", "--format", "json", cwd=root).stdout)
    assert {r["memory"]["content"] for r in single["results"]} == set(PROJECT)
    assert all("vault" not in r for r in single["results"])


def _result(content: str, created_at: int, relevance: float, rank: int) -> RecallResult:
    memory = Memory(id=f"01M8PMJ1WQSAJ6B1VCM2B0{created_at:04d}", content=content, created_at=created_at)
    parts = ScoreComponents(relevance=relevance, recency=0.0, importance=0.5, reinforcement=0.0)
    return RecallResult(memory=memory, score=0.5 * relevance + 0.1, components=parts, strategies=["temporal"],
                        details={"temporal_rank": rank})


def test_recent_memories_merge_on_one_timeline() -> None:
    """Tried (no daemon: the merge alone): two vaults' newest-first lists without a cue merge as one
    timeline, newest first, whichever vault they came from."""
    a = RecallResults(results=[_result("a3", 30, 1.0, 1), _result("a1", 10, 0.5, 2)])
    b = RecallResults(results=[_result("b2", 20, 1.0, 1), _result("b0", 5, 0.5, 2)])
    merged = merge_recall([VaultRecall("project", "/p", a), VaultRecall("global", "/g", b)],
                          ScoringWeights(relevance=1, recency=0, importance=0, reinforcement=0), top_k=10)
    assert [r.memory.content for r in merged] == ["a3", "b2", "a1", "b0"]
    assert [r.components.relevance for r in merged] == [1.0, 0.75, 0.5, 0.25]


def test_a_time_word_preference_survives_the_merge() -> None:
    """Tried: 'dinner with Sam in April 2023' over an empty global brain ranked the April dinner below
    the newest one, because the merged score was rebuilt from the components without the time boost.
    The time the cue names is now the recency component (1 for the April dinner), which the merge keeps."""
    april = _result("april dinner", 10, 0.8, 2)
    april.components.recency = 1.0
    newest = _result("newest dinner", 30, 1.0, 1)
    merged = merge_recall([VaultRecall("project", "/p", RecallResults(results=[newest, april]))],
                          ScoringWeights(), top_k=10)
    assert [r.memory.content for r in merged.results] == ["april dinner", "newest dinner"]
