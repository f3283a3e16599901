"""`hebbs mcp` driven by the official MCP SDK's own client over stdio, against a real daemon.

Each test spawns the real `hebbs mcp` console script (mcp.client.stdio.stdio_client) and talks to it
with mcp.ClientSession: tools, their results as an agent reads them, resources, and errors.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

import processes

pytest_plugins = ["daemon_fixtures"]

TOOLS = {"remember", "recall", "prime", "revise", "forget", "used", "reflect_prepare", "reflect_commit",
         "contradictions", "contradictions_commit", "get", "source", "recent", "index", "status", "note_read",
         "note_write", "note_append"}
DEPLOYS = ["The deploy failed because the container image build timed out.",
           "A canary release caught the broken migration before full rollout.",
           "Rollback of the payment service took four minutes last Friday.",
           "The deploy pipeline retries flaky integration tests twice.",
           "Deploys to production need approval from the on-call engineer."]


@pytest.fixture(scope="module")
def daemon() -> Iterator[Any]:
    """A daemon of its own: its global brain holds only what these tests put there."""
    from daemon_fixtures import DaemonHome  # type: ignore[import-not-found]

    home = DaemonHome(idle_timeout=0)
    home.start()
    yield home
    home.cleanup()


@pytest.fixture
def project(daemon: Any) -> Iterator[Path]:
    root = daemon.project()
    yield root
    shutil.rmtree(root, ignore_errors=True)


@asynccontextmanager
async def mcp_session(home: Path, cwd: Path, *args: str, env: dict[str, str] | None = None
                      ) -> AsyncIterator[ClientSession]:
    import os

    params = StdioServerParameters(command=str(Path(sys.executable).with_name("hebbs")), args=["mcp", *args],
                                   env={"HEBBS_HOME": str(home), "HEBBS_MODEL_CACHE": os.environ["HEBBS_MODEL_CACHE"],
                                        **(env or {})},
                                   cwd=str(cwd))
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


def run(home: Path, cwd: Path, scenario: Callable[[ClientSession], Awaitable[Any]], *args: str,
        env: dict[str, str] | None = None) -> Any:
    async def go() -> Any:
        async with mcp_session(home, cwd, *args, env=env) as session:
            return await scenario(session)

    return asyncio.run(go())


async def call(session: ClientSession, tool: str, /, **arguments: Any) -> Any:
    """A tool's answer as the agent reads it (JSON text); a tool error fails the test with its message."""
    result = await session.call_tool(tool, arguments)
    text = result.content[0].text
    assert not result.is_error, f"{tool} failed: {text}"
    return json.loads(text)


def test_tools_and_instructions_teach_the_agent(daemon: Any, project: Path) -> None:
    """Tried: initialize and list_tools: every tool is there with a description that says when to call
    it, reads are marked read-only, forget destructive."""
    async def scenario(session: ClientSession) -> Any:
        return await session.list_tools(), session.initialize_result

    listed, init = run(daemon.home, project, scenario)
    tools = {t.name: t for t in listed.tools}
    assert set(tools) == TOOLS
    assert all(len(t.description) > 120 for t in tools.values())
    assert "Call it" in tools["recall"].description and "Never store secrets" in tools["remember"].description
    assert tools["recall"].annotations.read_only_hint and tools["forget"].annotations.destructive_hint
    assert tools["recall"].input_schema["properties"]["brain"]["enum"] == ["project", "global", "both"]
    assert "prime" in init.instructions and init.server_info.name == "hebbs"


def test_remember_recall_prime_revise_forget(daemon: Any, project: Path) -> None:
    """Tried: remember into each brain, recall over both (labelled, ordered by score, with confidence),
    recall one brain, a cue nothing answers (abstained), used, prime, revise by short id without
    naming the brain, forget, and recall again."""
    async def scenario(session: ClientSession) -> dict[str, Any]:
        out: dict[str, Any] = {}
        out["pref"] = await call(session, "remember", content="The user wants answers in British English",
                                 brain="global", entity_id="user", importance=0.8,
                                 context={"type": "preference"})
        out["fact"] = await call(session, "remember", content="The billing service is written in Go")
        out["both"] = await call(session, "recall", cue="does the user want answers in British English")
        out["project"] = await call(session, "recall", cue="billing service language", brain="project")
        out["unknown"] = await call(session, "recall", cue="quantum chromodynamics lattice gauge theory")
        out["used"] = await call(session, "used", ids=[out["pref"]["id"]])
        out["primed"] = await call(session, "prime", cue="billing")
        out["revised"] = await call(session, "revise", id=out["pref"]["id"][-8:],
                                    content="The user wants answers in American English")
        out["forgotten"] = await call(session, "forget", ids=[out["fact"]["id"]])
        extra = await call(session, "remember", content="The user owns a cat", brain="global")
        out["forgotten_global"] = await call(session, "forget", ids=[extra["id"]])
        out["after"] = await call(session, "recall", cue="billing service language", brain="project")
        return out

    out = run(daemon.home, project, scenario)
    assert out["pref"]["brain"] == "global" and out["pref"]["context"] == {"type": "preference"}
    assert out["fact"]["brain"] == "project" and "entity_id" not in out["fact"]
    both = out["both"]["results"]
    assert both[0]["id"] == out["pref"]["id"] and both[0]["brain"] == "global"
    assert {r["brain"] for r in both} == {"global", "project"}
    assert [r["score"] for r in both] == sorted((r["score"] for r in both), reverse=True)
    assert all(r["created_at"].endswith("+00:00") for r in both)
    assert [r["brain"] for r in out["project"]["results"]] == ["project"]
    assert out["both"]["abstained"] is False and 0 < both[0]["confidence"] <= 1
    assert out["unknown"]["abstained"] is True
    assert out["used"] == {"used": [{"id": out["pref"]["id"], "content": out["pref"]["content"], "used": 1,
                                     "brain": "global"}]}
    assert {r["id"] for r in out["primed"]["results"]} == {out["pref"]["id"], out["fact"]["id"]}
    assert out["revised"]["id"] == out["pref"]["id"] and out["revised"]["brain"] == "global"
    assert out["revised"]["content"] == "The user wants answers in American English"
    assert out["forgotten"] == out["forgotten_global"] == {"forgotten": 1}
    assert out["after"]["results"] == []


def test_reads_without_a_project_vault_label_the_global_brain(daemon: Any, project: Path) -> None:
    """Tried: recall and prime over both brains from a folder without a project vault: the project
    brain is skipped, every result is labelled global, and revise by that label finds the memory."""
    nowhere = Path(str(project) + "-novault")
    nowhere.mkdir()

    async def scenario(session: ClientSession) -> dict[str, Any]:
        made = await call(session, "remember", content="The sales team tracks its leads in Salesforce CRM",
                          brain="global")
        found = await call(session, "recall", cue="Salesforce CRM", top_k=1)
        primed = await call(session, "prime", cue="Salesforce CRM")
        label = found["results"][0]["brain"]
        revised = await call(session, "revise", id=made["id"], importance=0.6, brain=label)
        return {"made": made, "found": found, "primed": primed, "revised": revised}

    try:
        out = run(daemon.home, nowhere, scenario)
    finally:
        nowhere.rmdir()
    assert [(r["id"], r["brain"]) for r in out["found"]["results"]] == [(out["made"]["id"], "global")]
    assert any("project vault was skipped" in note for note in out["found"]["notes"])
    assert out["made"]["id"] in {r["id"] for r in out["primed"]["results"]}
    assert {r["brain"] for r in out["primed"]["results"]} == {"global"}
    assert out["revised"]["brain"] == "global" and out["revised"]["importance"] == 0.6


def test_used_counts_all_or_nothing_and_links_what_was_used_together(daemon: Any, project: Path) -> None:
    """Tried: used on two project memories (one by short id) and a global one in one call, then used
    with a known id and an unknown one: the first counts each once and links the project pair, the
    second fails and counts nothing."""
    async def scenario(session: ClientSession) -> dict[str, Any]:
        a = await call(session, "remember", content="The billing service retries failed charges hourly")
        b = await call(session, "remember", content="Invoices are emailed on the first day of the month")
        c = await call(session, "remember", content="The user reads invoices on a tablet", brain="global")
        used = await call(session, "used", ids=[a["id"], b["id"][-8:], c["id"]])
        bad = await session.call_tool("used", {"ids": [a["id"], "ZZZZZZZZ"]})
        return {"ids": [a["id"], b["id"], c["id"]], "used": used, "bad": bad}

    out = run(daemon.home, project, scenario)
    a, b, c = out["ids"]
    assert [(u["id"], u["used"], u["brain"]) for u in out["used"]["used"]] == [
        (a, 1, "project"), (b, 1, "project"), (c, 1, "global")]
    assert out["bad"].is_error and "NOT_FOUND" in out["bad"].content[0].text
    with daemon.client(project) as hb:
        assert hb.get(a).access_count == 1 and hb.get(b).access_count == 1
        assert [e.target for e in hb.edges(a, "out") if e.edge_type == "CO_ACTIVATED"] == [b]


def test_read_list_filter_index_and_status(daemon: Any, project: Path) -> None:
    """Tried: index the project's notes (no path) and refresh them after an edit; source of a note's
    memory by short id; get one memory in full (edges, uses); recent, newest first, for one entity and
    a time span; recall narrowed by time range, entity and strategy; status of the daemon and both brains."""
    (project / "deploys.md").write_text("# Deploys\n\n## Approval\n\nProduction deploys need the on-call "
                                        "engineer's approval.\n\n## Rollback\n\nRollbacks take four minutes.\n")
    with daemon.client(project) as hb:
        old = hb.remember("The billing service moved to Go", entity_id="billing", created_at="2025-01-10T00:00:00Z")
        new = hb.remember("The billing service retries charges hourly", entity_id="billing",
                          created_at="2025-06-10T00:00:00Z", edges=[(old.id, "RELATED_TO", 0.5)])
        hb.remember("The search service is written in Rust", entity_id="search", created_at="2025-07-01T00:00:00Z")
        hb.reinforce([new.id])

    async def scenario(session: ClientSession) -> dict[str, Any]:
        out: dict[str, Any] = {"indexed": await call(session, "index")}
        (project / "deploys.md").write_text((project / "deploys.md").read_text().replace("four", "six"))
        out["refreshed"] = await call(session, "index", path=".")
        found = await call(session, "recall", cue="how long does a rollback take", brain="project", top_k=1)
        out["found"] = found
        out["source"] = await call(session, "source", id=found["results"][0]["id"][-6:])
        out["get"] = await call(session, "get", id=new.id[-6:])
        out["recent"] = await call(session, "recent", entity_id="billing", brain="project")
        out["recent_span"] = await call(session, "recent", since="2025-06-01", until="2025-06-30", brain="project")
        out["recall_span"] = await call(session, "recall", cue="billing service", since="2025-05-01",
                                        entity_id="billing", strategies=["lexical"], brain="project")
        out["status"] = await call(session, "status")
        return out

    out = run(daemon.home, project, scenario)
    assert out["indexed"]["sections_added"] >= 2 and out["indexed"]["files_scanned"] == 1
    assert out["refreshed"]["sections_revised"] == 1 and out["refreshed"]["files_unchanged"] == 0
    assert "six minutes" in out["found"]["results"][0]["content"]
    assert out["source"]["file"] == "deploys.md" and "six minutes" in out["source"]["text"]
    assert out["source"]["heading_path"][-1] == "Rollback" and out["source"]["brain"] == "project"
    got = out["get"]
    assert got["id"] == new.id and got["used"] == 1 and got["brain"] == "project"
    assert {"type": "RELATED_TO", "to": old.id} in got["edges"]
    assert [r["id"] for r in out["recent"]["results"]] == [new.id, old.id]
    assert "score" not in out["recent"]["results"][0]
    assert [r["id"] for r in out["recent_span"]["results"]] == [new.id]
    assert [r["id"] for r in out["recall_span"]["results"]] == [new.id]
    assert out["recall_span"]["results"][0]["found_by"] == ["lexical"]
    status = out["status"]
    assert status["daemon"]["version"] and status["brains"]["project"]["memories"] >= 5
    assert "memories" in status["brains"]["global"]


def test_an_agent_writes_a_note_a_person_edits_and_the_agent_merges(daemon: Any, project: Path) -> None:
    """Tried: note_write creates a note (recalled at once, from its file); the person edits it; note_write
    with the version it had is a CONFLICT tool error naming the new one, the person's edit kept; note_read
    then note_write with that version replaces it; note_append adds after it; note_write to the global
    brain, which has no notes folder, is a tool error."""
    async def scenario(session: ClientSession) -> dict[str, Any]:
        out: dict[str, Any] = {"written": await call(session, "note_write", path="agent/cache.md",
                                                     text="The cache is flushed nightly at 02:00 UTC.",
                                                     tags=["ops"], author="test-agent")}
        out["recalled"] = await call(session, "recall", cue="when is the cache flushed", brain="project", top_k=1)
        note = project / "agent" / "cache.md"
        note.write_text(note.read_text() + "\nAna: and after each deploy.\n")
        out["conflict"] = await session.call_tool("note_write", {"path": "agent/cache.md", "text": "Overwritten.",
                                                                 "expected_version": out["written"]["version"]})
        out["read"] = await call(session, "note_read", path="agent/cache.md")
        out["merged"] = await call(session, "note_write", path="agent/cache.md",
                                   text="The cache is flushed nightly at 02:00 UTC and after each deploy.",
                                   expected_version=out["read"]["version"])
        out["appended"] = await call(session, "note_append", path="agent/cache.md", text="Checked on Monday.")
        out["by_client"] = await call(session, "note_append", path="agent/log.md", text="Started the cache audit.")
        out["global"] = await session.call_tool("note_write", {"path": "x.md", "text": "x", "brain": "global"})
        return out

    out = run(daemon.home, project, scenario)
    assert out["written"]["created"] and out["written"]["path"] == "agent/cache.md"
    best = out["recalled"]["results"][0]
    assert best["id"] == out["written"]["memory_ids"][0] and best["source"] == "agent/cache.md"
    assert out["conflict"].is_error and out["conflict"].content[0].text.endswith("[CONFLICT]")
    assert out["read"]["version"] in out["conflict"].content[0].text and "Ana: and after each deploy." in out["read"]["text"]
    assert out["merged"]["previous_version"] == out["read"]["version"]
    text = (project / "agent" / "cache.md").read_text()
    assert "Overwritten." not in text and text.endswith("and after each deploy.\n\nChecked on Monday.\n")
    assert 'author: "test-agent"' in text
    # No author given: the note names the MCP client (the official client says "mcp" unless told otherwise).
    assert out["by_client"]["created"] and 'author: "mcp"' in (project / "agent" / "log.md").read_text()
    assert out["global"].is_error and "no notes folder" in out["global"].content[0].text


def test_new_tools_answer_every_mistake_with_a_tool_error(daemon: Any, project: Path) -> None:
    """Tried: get and source of an unknown id, source of a memory that came from no note, a time that is
    not one, an unknown strategy, index of a folder that does not exist, and index without a path where
    there is no project: each a one-line tool error with its code, and the server answers afterwards."""
    nowhere = Path(str(project) + "-novault")
    nowhere.mkdir()
    with daemon.client(project) as hb:
        plain = hb.remember("A memory stored by hand, from no note")

    async def mistakes(session: ClientSession) -> list[Any]:
        return [await session.call_tool("get", {"id": "ZZZZZZZZ"}),
                await session.call_tool("source", {"id": "01M8PMJ1WQSAJ6B1VCM2B00C4S"}),
                await session.call_tool("source", {"id": plain.id, "brain": "project"}),
                await session.call_tool("recall", {"cue": "x", "since": "yesterday-ish"}),
                await session.call_tool("recent", {"until": "not a time"}),
                await session.call_tool("recall", {"cue": "x", "strategies": ["telepathy"]}),
                await session.call_tool("index", {"path": str(nowhere / "missing")}),
                await session.call_tool("recent", {"limit": 0}),
                await call(session, "status")]

    async def no_project(session: ClientSession) -> list[Any]:
        return [await session.call_tool("index", {}), await call(session, "recent", brain="global")]

    try:
        *errors, status = run(daemon.home, project, mistakes)
        no_index, recent = run(daemon.home, nowhere, no_project)
    finally:
        nowhere.rmdir()
    errors.append(no_index)
    assert all(e.is_error for e in errors), [e.content[0].text for e in errors if not e.is_error]
    texts = [e.content[0].text for e in errors]
    assert not any("\n" in t or "Traceback" in t or "INTERNAL" in t for t in texts), texts
    assert "NOT_FOUND" in texts[0] and "NOT_FOUND" in texts[1] and "NOT_FOUND" in texts[2]
    assert all("INVALID_REQUEST" in t for t in texts[3:8]), texts[3:8]
    assert "telepathy" in texts[5] and "give path" in texts[8]
    assert "daemon" in status and "results" in recent


def test_remember_says_when_it_consolidated(daemon: Any, project: Path) -> None:
    """Tried: the same fact remembered twice: the second answer is the first memory, marked consolidated."""
    fact = "Caroline moved to Boston in 2021 for her new job."

    async def scenario(session: ClientSession) -> list[Any]:
        return [await call(session, "remember", content=text, entity_id="caroline") for text in (fact, fact[:-1])]

    first, again = run(daemon.home, project, scenario)
    assert "consolidated" not in first
    assert again["id"] == first["id"] and again["consolidated"] is True


def test_reflection_round_trip_and_insights_resource(daemon: Any, project: Path) -> None:
    """Tried: reflect_prepare on five related memories, reflect_commit of an insight citing them (the
    session's brain remembered by the server), then the insights and stats resources."""
    with daemon.client(project) as hb:
        stored = hb.remember_many([{"content": c, "entity_id": "deploy"} for c in DEPLOYS])

    async def scenario(session: ClientSession) -> dict[str, Any]:
        out: dict[str, Any] = {"prepared": await call(session, "reflect_prepare", max_memories=50)}
        cluster = out["prepared"]["clusters"][0]
        out["committed"] = await call(session, "reflect_commit", session_id=out["prepared"]["session_id"], insights=[
            {"content": "Deploys fail at build and migration steps; canaries and approvals catch them.",
             "confidence": 0.8, "source_memory_ids": [m["id"] for m in cluster["memories"][:3]],
             "tags": ["deploy"]}])
        listed = await session.list_resources()
        out["resources"] = sorted(str(r.uri) for r in listed.resources)
        insights = await session.read_resource("hebbs://project/insights")
        out["insights"] = json.loads(insights.contents[0].text)
        stats = await session.read_resource("hebbs://project/stats")
        out["stats"] = json.loads(stats.contents[0].text)
        return out

    out = run(daemon.home, project, scenario)
    assert out["prepared"]["brain"] == "project" and out["prepared"]["memory_count"] == len(stored)
    assert "prompt" in out["prepared"]["clusters"][0]
    [insight] = out["committed"]["insights"]
    assert insight["kind"] == "INSIGHT"
    assert out["resources"] == ["hebbs://global/insights", "hebbs://global/stats", "hebbs://project/insights",
                                "hebbs://project/stats"]
    assert [i["id"] for i in out["insights"]] == [insight["id"]] and out["insights"][0]["confidence"] == 0.8
    assert out["stats"]["memories"] == len(stored) + 1 and out["stats"]["by_kind"]["INSIGHT"] == 1


def test_contradictions_list_and_commit(daemon: Any, project: Path) -> None:
    """Tried: two contradicting memories are queued; the contradictions tool lists the pair in full and
    contradictions_commit dismisses it as neutral."""
    with daemon.client(project) as hb:
        for text in ("The API timeout is 30 seconds.", "The API timeout is 60 seconds."):
            hb.remember(text)

    async def scenario(session: ClientSession) -> dict[str, Any]:
        listed = await call(session, "contradictions")
        pending = listed["candidates"][0]["pending_id"]
        committed = await call(session, "contradictions_commit",
                               verdicts=[{"pending_id": pending, "verdict": "neutral", "note": "a test"}])
        return {"listed": listed, "committed": committed, "after": await call(session, "contradictions")}

    out = run(daemon.home, project, scenario)
    [candidate] = out["listed"]["candidates"]
    assert {candidate["memory_a"]["content"], candidate["memory_b"]["content"]} == {
        "The API timeout is 30 seconds.", "The API timeout is 60 seconds."}
    assert out["committed"]["dismissed"] == [candidate["pending_id"]]
    assert out["after"]["candidates"] == []


def test_errors_come_back_as_tool_errors(daemon: Any, project: Path) -> None:
    """Tried: a bad id, an out-of-range importance, an unknown brain, a reflect_commit on a session that
    does not exist, and the project brain where there is none: each is a tool error the agent can
    read, and the server keeps answering afterwards."""
    nowhere = Path(str(project) + "-novault")
    nowhere.mkdir()

    async def scenario(session: ClientSession) -> list[Any]:
        results = [
            await session.call_tool("revise", {"id": "01M8PMJ1WQSAJ6B1VCM2B00C4S", "content": "x"}),
            await session.call_tool("forget", {"ids": ["ZZZZZZZZ"]}),
            await session.call_tool("remember", {"content": "x", "importance": 2}),
            await session.call_tool("recall", {"cue": "x", "brain": "work"}),
            await session.call_tool("reflect_commit", {"session_id": "nope", "insights": []}),
            await session.call_tool("remember", {"content": "a project fact"}),
        ]
        return results + [await call(session, "recall", cue="anything", brain="global")]

    try:
        *errors, last = run(daemon.home, nowhere, scenario)
    finally:
        nowhere.rmdir()
    assert all(e.is_error for e in errors)
    texts = [e.content[0].text for e in errors]
    assert "NOT_FOUND" in texts[0] and "NOT_FOUND" in texts[1]
    assert texts[2].endswith("importance: input should be less than or equal to 1 [INVALID_REQUEST]")
    assert "brain: input should be" in texts[3] and texts[3].endswith("[INVALID_REQUEST]")
    assert not any("pydantic" in t or "\n" in t for t in texts)
    assert "VAULT_NOT_INITIALIZED" in texts[5] and "brain='global'" in texts[5]
    assert "global_=True" not in texts[5] and "vault=PATH" not in texts[5]
    assert "results" in last


def test_vault_flag_and_global_default(daemon: Any, project: Path) -> None:
    """Tried: `hebbs mcp --vault PATH` from another folder writes to that project; `--global` makes
    the global brain the default for writes."""
    elsewhere = Path(str(project) + "-elsewhere")
    elsewhere.mkdir()

    async def to_project(session: ClientSession) -> Any:
        return await call(session, "remember", content="The staging cluster runs in Frankfurt")

    async def to_global(session: ClientSession) -> Any:
        return await call(session, "remember", content="The user is based in Lisbon", entity_id="user")

    try:
        made = run(daemon.home, elsewhere, to_project, "--vault", str(project))
        made_global = run(daemon.home, elsewhere, to_global, "--global")
    finally:
        elsewhere.rmdir()
    assert made["brain"] == "project" and made_global["brain"] == "global"
    with daemon.client(project) as hb:
        assert hb.get(made["id"]).content == "The staging cluster runs in Frankfurt"
    with daemon.client(global_=True) as hb:
        assert hb.get(made_global["id"]).entity_id == "user"


def test_server_starts_the_daemon_and_leaves_it_running(own_home: Any) -> None:
    """Tried: a home with no daemon: the first tool call starts one; closing the MCP session (which
    ends the server process tree) leaves the daemon serving."""
    assert not own_home.socket.exists()

    async def scenario(session: ClientSession) -> Any:
        return await call(session, "remember", content="The user likes tea", brain="global")

    made = run(own_home.home, own_home.home, scenario)
    pid = own_home.pid()
    assert own_home.alive(pid)
    with own_home.client(global_=True) as hb:
        assert hb.get(made["id"]).content == "The user likes tea"


def test_nothing_else_imports_mcp() -> None:
    """Tried: import hebbs, its SDK and the CLI (all it loads for a recall) in a fresh interpreter:
    neither the MCP SDK nor pydantic is loaded; only `hebbs mcp` pays for them."""

    code = ("import sys, hebbs, hebbs.client, hebbs.recall.brains, hebbs.cli.main, hebbs.cli.commands; "
            "hebbs.Client; print([m for m in ('mcp', 'pydantic', 'hebbs.mcp_server') if m in sys.modules])")
    done = processes.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_a_wrong_vault_fails_at_start(daemon: Any, tmp_path: Path) -> None:
    """Tried: `hebbs mcp --vault` on a folder without a vault: a one-line error and exit 1 before
    serving (an agent's config mistake shows in its log), no traceback."""
    done = daemon.hebbs("mcp", "--vault", str(tmp_path), cwd=tmp_path, stdin="", check=False)
    assert done.returncode == 1
    assert "VAULT_NOT_INITIALIZED" in done.stderr and "Traceback" not in done.stderr


def test_agent_and_session_come_from_the_environment_and_filter_reads(daemon: Any, project: Path) -> None:
    """Issue 44 item 3: an MCP server configured with HEBBS_AGENT and HEBBS_SESSION (its `env` in the agent's
    MCP config) stores every memory under them; recall, recent and prime take agent, session and author."""
    fact = "The nightly backup of the orders database runs at 02:00 UTC."

    async def store(session: ClientSession) -> Any:
        return await call(session, "remember", content=fact, brain="project")

    stored = run(daemon.home, project, store, env={"HEBBS_AGENT": "claude-code", "HEBBS_SESSION": "conv-9"})
    assert (stored["agent"], stored["session"]) == ("claude-code", "conv-9") and stored["author"]
    run(daemon.home, project, lambda s: call(s, "remember", content="The orders database backup is kept 30 days.",
                                              brain="project"), env={"HEBBS_AGENT": "other"})

    async def read(session: ClientSession) -> Any:
        found = await call(session, "recall", cue="orders database backup", agent="claude-code", brain="project")
        recent = await call(session, "recent", session="conv-9", brain="project")
        primed = await call(session, "prime", cue="orders database backup", agent="other", brain="project")
        mine = await call(session, "recall", cue="orders database backup", author=stored["author"], brain="project")
        return found, recent, primed, mine

    found, recent, primed, mine = run(daemon.home, project, read)
    assert [r["content"] for r in found["results"]] == [fact]
    assert [r["content"] for r in recent["results"]] == [fact]
    assert [r["agent"] for r in primed["results"]] == ["other"]
    assert len(mine["results"]) == 2


def test_recall_marks_an_older_value_a_conflict_and_answers_as_of_a_time(daemon: Any, project: Path) -> None:
    """Issue 41, findings 1-4 through MCP: the older of two values comes back with current false and
    the newer's id, a confirmed conflict names the other memory, and as_of returns what was true then."""
    day = 86_400 * 1_000_000
    june = 1_780_272_000_000_000  # 2026-06-01
    with daemon.client(project) as hb:
        old = hb.remember("The on-call phone extension is 4411", created_at=june - 30 * day)
        new = hb.remember("The on-call phone extension is 4412", created_at=june + 30 * day)
        a = hb.remember("The team's standup is at 9:30 every morning")
        b = hb.remember("The team has no standup meeting at all")
        hb.add_edge(a.id, "CONTRADICTS", b.id)

    async def scenario(session: ClientSession) -> dict[str, Any]:
        return {"now": await call(session, "recall", cue="what is the on-call extension", top_k=3, brain="project"),
                "june": await call(session, "recall", cue="what is the on-call extension", top_k=3,
                                   brain="project", as_of="2026-06-01"),
                "standup": await call(session, "recall", cue="when is the standup", top_k=3, brain="project")}

    out = run(daemon.home, project, scenario)
    now = out["now"]["results"]
    assert [r["id"] for r in now[:2]] == [new.id, old.id]
    assert "current" not in now[0] and now[1]["current"] is False and now[1]["newer"] == new.id
    assert any("older value: 4411 -> 4412" in m for m in now[1]["marks"])
    assert [r["id"] for r in out["june"]["results"]][:1] == [old.id]
    assert new.id not in [r["id"] for r in out["june"]["results"]]
    standup = {r["id"]: r for r in out["standup"]["results"]}
    assert standup[a.id]["conflicts_with"] == [b.id] and standup[b.id]["conflicts_with"] == [a.id]
