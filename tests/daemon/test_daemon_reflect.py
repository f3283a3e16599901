"""Reflection, contradiction review and decay candidates through the daemon: the SDK (sync and async)
and the `hebbs` command line, against the shared real daemon and a planted corpus."""

from __future__ import annotations

import asyncio
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from hebbs import AsyncClient, ContradictionVerdict, InsightInput, LLMError, LLMNotConfigured
from hebbs.errors import ERRORS_BY_CODE, HebbsError

if TYPE_CHECKING:
    from daemon_fixtures import DaemonHome

pytest_plugins = ["daemon_fixtures"]

# Three topics of five memories each: reflect_prepare must find them as clusters.
TOPICS = {
    "acme": ["Acme asked for weekly status reports by email, not Slack.",
             "Acme's CTO prefers short written summaries over meetings.",
             "Acme wants invoices in euros with their PO number on them.",
             "Acme's procurement team replies only on Mondays and Thursdays.",
             "Acme's legal team needs two weeks to review any contract change."],
    "deploy": ["The deploy failed because the container image build timed out.",
               "A canary release caught the broken migration before full rollout.",
               "Rollback of the payment service took four minutes last Friday.",
               "The deploy pipeline retries flaky integration tests twice.",
               "Deploys to production need approval from the on-call engineer."],
    "dana": ["Dana prefers green tea and drinks it without sugar.",
             "Dana bakes sourdough bread every Sunday morning.",
             "Dana's favourite restaurant serves Ethiopian food.",
             "Dana cooks a big pot of lentil soup every week.",
             "Dana grows basil and tomatoes on her balcony."],
}
# Planted contradiction candidates (hebbs/workflows/contradiction_check.py flags both; tests/workflows/test_contradiction_review.py).
PAIRS = [("The deploy pipeline is reliable.", "The deploy pipeline is unreliable."),
         ("The API timeout is 30 seconds.", "The API timeout is 60 seconds.")]
# Importance so low that it is below the default forget threshold (0.01) from the start.
FADED = "A stray note about the office plant that nobody will need again"


class Corpus:
    def __init__(self, daemon: "DaemonHome", root: Path) -> None:
        self.daemon = daemon
        self.root = root

    def client(self) -> Any:
        return self.daemon.client(self.root)

    def hebbs(self, *args: str, check: bool = True) -> Any:
        return self.daemon.hebbs(*args, cwd=self.root, check=check)

    def hebbs_json(self, *args: str) -> Any:
        return json.loads(self.hebbs(*args, "--format", "json").stdout)


@pytest.fixture(scope="module")
def corpus(shared_daemon: "DaemonHome") -> Iterator[Corpus]:
    root = shared_daemon.project()
    with shared_daemon.client(root) as client:
        client.remember_many([{"content": text, "entity_id": topic} for topic, texts in TOPICS.items()
                              for text in texts])
        # One remember per memory: each is checked against what is already stored.
        for pair in PAIRS:
            for text in pair:
                client.remember(text)
        client.remember(FADED, importance=0.005)
    yield Corpus(shared_daemon, root)
    shutil.rmtree(root, ignore_errors=True)


def _cluster_with(prepared: Any, word: str) -> Any:
    clusters = prepared["clusters"] if isinstance(prepared, dict) else prepared.clusters
    for cluster in clusters:
        members = cluster["memories"] if isinstance(cluster, dict) else cluster.memories
        contents = [m["content"] if isinstance(m, dict) else m.content for m in members]
        if sum(word in c for c in contents) >= 3:
            return cluster
    raise AssertionError(f"no cluster about {word!r} in {prepared}")


def test_reflect_two_steps_through_the_sdk(corpus: Corpus) -> None:
    """Tried: reflect_prepare over 3 planted topics x 5 memories gives >= 3 clusters, one of them
    mostly Dana's; reflect_commit of one insight citing two of its members stores it as an INSIGHT;
    insights() (sync, and async) lists it with its confidence, tags and sources."""
    with corpus.client() as client:
        prepared = client.reflect_prepare()
        assert prepared.memory_count >= 15 and len(prepared.clusters) >= 3
        assert all(c.prompt and c.prompt_tokens > 0 for c in prepared.clusters)
        sources = [m.id for m in _cluster_with(prepared, "Dana").memories if "Dana" in m.content][:2]
        insight = InsightInput(content="Dana's week revolves around cooking at home.", confidence=0.8,
                               source_memory_ids=sources, tags=["dana"])
        committed = client.reflect_commit(prepared.session_id, [insight])
        stored = committed.insights[0]
        assert stored.kind.value == "INSIGHT" and stored.content == insight.content
        found = {i.memory.id: i for i in client.insights(min_confidence=0.5)}
        assert found[stored.id].confidence == 0.8 and found[stored.id].tags == ["dana"]
        assert sorted(found[stored.id].source_ids) == sorted(sources)

    async def listed() -> list[str]:
        async with AsyncClient(corpus.root, home=corpus.daemon.home) as aclient:
            return [i.memory.id for i in await aclient.insights()]

    assert stored.id in asyncio.run(listed())


def test_reflect_two_steps_through_the_cli(corpus: Corpus) -> None:
    """Tried: `hebbs reflect-prepare --format json`, an insights file written from it,
    `hebbs reflect-commit --file`, then `hebbs insights` in json and text; a file citing a memory
    outside the session fails with INVALID_REQUEST on stderr and a non-zero exit."""
    prepared = corpus.hebbs_json("reflect-prepare", "--max-memories", "100")
    cluster = _cluster_with(prepared, "Acme")
    sources = [m["id"] for m in cluster["memories"] if "Acme" in m["content"]][:3]
    content = "Acme wants asynchronous, written communication."
    (corpus.root / "insights.json").write_text(json.dumps({"session_id": prepared["session_id"], "insights": [
        {"content": content, "confidence": 0.85, "source_memory_ids": sources, "tags": ["acme"]}]}))
    committed = corpus.hebbs_json("reflect-commit", "--file", "insights.json")
    assert [m["content"] for m in committed["insights"]] == [content]
    listed = corpus.hebbs_json("insights", "--entity", "acme")
    assert [i["memory"]["content"] for i in listed] == [content] and listed[0]["confidence"] == 0.85
    assert content in corpus.hebbs("insights").stdout

    (corpus.root / "bad.json").write_text(json.dumps({"session_id": prepared["session_id"], "insights": [
        {"content": "x", "confidence": 0.5, "source_memory_ids": ["01ARZ3NDEKTSV4RRFFQ69G5FAV"]}]}))
    done = corpus.hebbs("reflect-commit", "--file", "bad.json", "--format", "json", check=False)
    assert done.returncode == 1 and json.loads(done.stderr)["status_code"] == "INVALID_REQUEST"


def _candidate(candidates: list[Any], text: str) -> Any:
    for c in candidates:
        if text in (c.memory_a.content, c.memory_b.content):
            return c
    raise AssertionError(f"no candidate with {text!r}")


def test_contradictions_through_the_sdk_and_the_cli(corpus: Corpus) -> None:
    """Tried: both planted pairs are listed as candidates (both sides, similarity, reasons,
    confidence) by contradiction_prepare and by `hebbs contradictions`; a `contradiction` verdict
    through the SDK adds CONTRADICTS edges, a `neutral` one through `hebbs contradictions commit
    --file` dismisses the other; neither is listed afterwards."""
    with corpus.client() as client:
        candidates = client.contradiction_prepare().candidates
        reliable = _candidate(candidates, PAIRS[0][0])
        assert {reliable.memory_a.content, reliable.memory_b.content} == set(PAIRS[0])
        assert reliable.similarity > 0.5 and 0 < reliable.confidence <= 1 and reliable.reasons
        timeout = _candidate(candidates, PAIRS[1][0])

        listed = corpus.hebbs_json("contradictions")
        assert {reliable.pending_id, timeout.pending_id} <= {c["pending_id"] for c in listed["candidates"]}
        assert PAIRS[0][1] in corpus.hebbs("contradictions").stdout

        committed = client.contradiction_commit([ContradictionVerdict(pending_id=reliable.pending_id,
                                                                      verdict="contradiction", note="same week")])
        assert committed.contradictions == [reliable.pending_id]
        edges = client.inspect(reliable.memory_a.id).edges
        assert {"CONTRADICTS"} <= {e.edge_type for e in edges}

    (corpus.root / "verdicts.json").write_text(json.dumps(
        {"verdicts": [{"pending_id": timeout.pending_id, "verdict": "neutral"}]}))
    dismissed = corpus.hebbs_json("contradictions", "commit", "--file", "verdicts.json")
    assert dismissed["dismissed"] == [timeout.pending_id]
    left = {c["pending_id"] for c in corpus.hebbs_json("contradictions")["candidates"]}
    assert not left & {reliable.pending_id, timeout.pending_id}


def test_llm_commands_without_an_llm_say_how_to_do_it_in_two_steps(corpus: Corpus) -> None:
    """Tried, with no [llm] anywhere: reflect and contradiction_auto through the SDK raise
    LLMNotConfigured (status LLM_NOT_CONFIGURED) naming reflect-prepare; `hebbs reflect` and
    `hebbs contradictions auto` exit non-zero with that code as JSON on stderr (and the message in
    text mode)."""
    with corpus.client() as client:
        with pytest.raises(LLMNotConfigured, match="reflect-prepare") as raised:
            client.reflect()
        assert raised.value.status_code == "LLM_NOT_CONFIGURED"
        with pytest.raises(LLMNotConfigured):
            client.contradiction_auto()
    for argv in (["reflect"], ["contradictions", "auto"]):
        done = corpus.hebbs(*argv, "--format", "json", check=False)
        assert done.returncode == 1 and done.stdout == ""
        error = json.loads(done.stderr)
        assert error["status_code"] == "LLM_NOT_CONFIGURED" and "reflect-commit" in error["error"]
    done = corpus.hebbs("reflect", check=False)
    assert done.returncode == 1 and "[LLM_NOT_CONFIGURED]" in done.stderr and "reflect-prepare" in done.stderr


def test_forget_candidates_list_without_deleting(corpus: Corpus) -> None:
    """Tried: the planted memory of importance 0.005 is a forget candidate through the SDK and
    through `hebbs forget --candidates` (json and text); the vault's count is the same after, and
    --candidates with ids is refused."""
    with corpus.client() as client:
        before = client.status().vault.memories
        assert FADED in [m.content for m in client.forget_candidates()]
        assert FADED in [m["content"] for m in corpus.hebbs_json("forget", "--candidates")]
        assert "nothing was deleted" in corpus.hebbs("forget", "--candidates").stdout
        assert client.status().vault.memories == before
        assert FADED in [m.content for m in client.forget_candidates()]
    done = corpus.hebbs("forget", "01ARZ3NDEKTSV4RRFFQ69G5FAV", "--candidates", check=False)
    assert done.returncode == 1 and "INVALID_REQUEST" in done.stderr


def test_wire_errors_live_with_the_others() -> None:
    """Tried: the wire-only errors are hebbs.errors classes in ERRORS_BY_CODE, and hebbs.protocol
    still exports the very same classes; LLMError is there too."""
    from hebbs import errors, protocol

    for name in ("MessageTooLarge", "IndexingInProgress", "DaemonUnavailable", "ProtocolError"):
        cls = getattr(errors, name)
        assert getattr(protocol, name) is cls and issubclass(cls, HebbsError)
        assert ERRORS_BY_CODE[cls.status_code] is cls
    assert ERRORS_BY_CODE["LLM_ERROR"] is LLMError
    assert protocol.error_from_frame("LLM_NOT_CONFIGURED", "m").__class__ is LLMNotConfigured


def test_an_open_vault_is_swept_and_the_sweeper_stops_before_it_closes(make_daemon, embedder) -> None:
    """Tried: a daemon with a 3 s vault idle timeout opens a vault (one remember); once the vault
    idles out (3 s: time enough on a loaded machine for the sweeper thread's first pass to begin), the vault opens in this process (so the daemon released its lock, the sweeper
    thread included) and its meta records a finished decay pass, written by the daemon's sweeper."""
    from hebbs import Engine
    from hebbs.workflows.decay import LAST_SWEEP_META

    home = make_daemon(idle_timeout=0, vault_idle_timeout=3)
    home.start()
    root = home.project()
    with home.client(root) as client:
        client.remember("The sweeper runs as soon as the vault opens")
        home.wait_until(lambda: not client.status(vault=False).open_vaults, 30, "the vault to idle out")
    with Engine.open(root / ".hebbs", embedder=embedder) as engine:
        assert engine.vault.store.get_meta(LAST_SWEEP_META)
    shutil.rmtree(root, ignore_errors=True)
