"""Who wrote what, through real daemons: two daemons (two homes, two authors: two teammates' machines)
writing one vault in PostgreSQL, each memory stamped with its author and the daemon it came through, and
recall filtering by author from either; the agent and session set at the CLI (flags and $HEBBS_SESSION),
the SDK (per client and per call) and kept by export and import (issues 42 and 44 item 3)."""

from __future__ import annotations

import json
import socket
import sys
from pathlib import Path

import processes

pytest_plugins = ["daemon_fixtures"]


def _hebbs(home, *args: str, **env: str) -> str:
    done = processes.run([str(Path(sys.executable).with_name("hebbs")), *args], env=home.env(**env),
                         capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_two_daemons_one_postgres_vault_record_and_filter_their_authors(pg_server):
    from daemon_fixtures import DaemonHome, short_tmp

    homes = [DaemonHome(), DaemonHome()]
    folders = [short_tmp("hba") for _ in homes]
    name = f"authors-{folders[0].name}"
    try:
        for home, folder, author in zip(homes, folders, ("alice", "bob")):
            home.hebbs("init", str(folder), "--store", pg_server.url, "--name", name)
            # The person's own config, not the shared vault's: docs/scale.md "Who wrote what".
            (Path(home.home) / "config.toml").write_text(f'author = "{author}"\n')
            home.start()
        pids = [home.pid() for home in homes]
        alice, bob = (home.client(folder) for home, folder in zip(homes, folders))
        with alice, bob:
            mine = alice.remember("The release train leaves every Tuesday at noon.", agent="planner")
            theirs = bob.remember_many([{"content": "The release train skips the Tuesday after a holiday."},
                                        {"content": "Release notes for the train are written by the on-call."}])
            assert (mine.author, mine.daemon) == ("alice", f"{socket.gethostname()}:{pids[0]}")
            assert {(m.author, m.daemon) for m in theirs} == {("bob", f"{socket.gethostname()}:{pids[1]}")}
            # Each daemon sees the other's writes, and filters by author before top_k is cut.
            for client in (alice, bob):
                homes[0].wait_until(lambda c=client: len(c.recall("release train", top_k=5)) == 3,
                                    what="both daemons' writes seen")
                assert client.recall("release train", top_k=1, author="alice").ids() == [mine.id]
                assert sorted(client.recall("release train", top_k=2, author="bob").ids()) == sorted(
                    m.id for m in theirs)
                assert client.prime(similarity_cue="release train", max_memories=5, author="bob", brains="project"
                                    ).ids() != []
        # The CLI's JSON shows them; its text names the author beside each result of a mixed list.
        shown = json.loads(homes[1].hebbs("recall", "release train", "--author", "alice", "--format", "json",
                                          cwd=folders[1]).stdout)
        [only] = shown["results"]
        assert (only["memory"]["author"], only["memory"]["agent"]) == ("alice", "planner")
        table = homes[1].hebbs("recall", "release train", cwd=folders[1]).stdout
        assert "author" in table.splitlines()[0] and "alice" in table and "bob" in table
        # Export keeps them.
        exported = [json.loads(line) for line in homes[0].hebbs("export", cwd=folders[0]).stdout.splitlines()]
        authors = sorted(r.get("author") for r in exported if r.get("record", "memory") == "memory")
        assert authors == ["alice", "bob", "bob"]
    finally:
        for home in homes:
            home.cleanup()


def test_cli_and_sdk_set_agent_and_session(shared_daemon, project):
    home = shared_daemon
    said = _hebbs(home, "remember", "The feature flag service caches flags for 30 seconds.", "--agent", "cli-bot",
                  "--session", "s-cli", "--vault", str(project))
    assert "agent cli-bot, session s-cli" in said
    # Without flags: $HEBBS_AGENT and $HEBBS_SESSION of the caller, not of the daemon.
    _hebbs(home, "remember", "The feature flag service reads its config from etcd.", "--vault", str(project),
           HEBBS_AGENT="env-bot", HEBBS_SESSION="s-env")
    with home.client(project, agent="sdk-bot", session="s-sdk") as sdk:
        by_client = sdk.remember("The feature flag service exposes a gRPC API.")
        by_call = sdk.remember("The feature flag service has an admin UI.", session="s-call")
        batch = sdk.remember_many([{"content": "The feature flag service is owned by the platform team."},
                                   {"content": "The feature flag service logs to Loki.", "agent": "item-bot"}])
    assert (by_client.agent, by_client.session) == ("sdk-bot", "s-sdk")
    assert (by_call.agent, by_call.session) == ("sdk-bot", "s-call")
    assert [(m.agent, m.session) for m in batch] == [("sdk-bot", "s-sdk"), ("item-bot", "s-sdk")]
    found = json.loads(_hebbs(home, "recall", "feature flag service", "--session", "s-env", "--format", "json",
                              "--vault", str(project)))
    assert [(r["memory"]["agent"], r["memory"]["session"]) for r in found["results"]] == [("env-bot", "s-env")]
    primed = json.loads(_hebbs(home, "prime", "--cue", "feature flag service", "--agent", "cli-bot", "--format",
                               "json", "--vault", str(project)))
    assert {r["memory"]["agent"] for r in primed["results"]} == {"cli-bot"}
    shown = _hebbs(home, "get", found["results"][0]["memory"]["id"], "--vault", str(project))
    assert "agent" in shown and "env-bot" in shown and "session" in shown and "author" in shown
    # Export, then import into another vault: the same authors, agents and sessions.
    exported = _hebbs(home, "export", "--vault", str(project))
    other = home.project()
    dump = other / "dump.jsonl"
    dump.write_text(exported)
    _hebbs(home, "import", str(dump), "--vault", str(other))
    with home.client(other) as copy:
        moved = sorted((m.agent, m.session, m.author) for m in copy.export())
    with home.client(project) as original:
        assert moved == sorted((m.agent, m.session, m.author) for m in original.export())
    assert ("item-bot", "s-sdk", by_client.author) in moved


def test_a_subscription_narrows_to_an_agent_or_a_session(shared_daemon, project):
    """A feed pushed every agent's memories: a planner subscribing to what it sees got the scribe's
    notes too. `subscribe` now takes recall's author / agent / session filters, at every door; pushes
    for memories stored later are narrowed alike."""
    import asyncio

    home = shared_daemon
    with home.client(project) as hb:
        hb.remember("The billing migration moves invoices to the new ledger in May.", agent="planner",
                    session="s-1")
        hb.remember("The billing migration needs a rollback plan for the ledger.", agent="scribe", session="s-2")
        with hb.subscribe(confidence_threshold=0.0, agent="planner") as mine:
            got = mine.feed("the billing migration to the new ledger")
            assert got and {r.memory.agent for r in got} == {"planner"}, [(r.memory.agent, r.memory.content) for r in got]
            hb.remember("The billing migration is paused until the ledger audit ends.", agent="scribe")
            hb.remember("The billing migration restarts once the ledger audit is signed off.", agent="planner")
            later = mine.wait(30)
            assert later and {r.memory.agent for r in later} == {"planner"}, [r.memory.content for r in later]
        with hb.subscribe(confidence_threshold=0.0, session="s-2") as theirs:
            assert {r.memory.session for r in theirs.feed("the billing migration to the new ledger")} == {"s-2"}

    async def in_async() -> set[str | None]:
        from hebbs import AsyncClient

        async with AsyncClient(vault=project, home=home.home) as ahb:
            sub = await ahb.subscribe(confidence_threshold=0.0, agent="scribe")
            try:
                return {r.memory.agent for r in await sub.feed("the billing migration and the ledger")}
            finally:
                await sub.close()

    assert asyncio.run(in_async()) == {"scribe"}
    done = processes.run([str(Path(sys.executable).with_name("hebbs")), "subscribe", "--threshold", "0", "--agent",
                          "planner", "--format", "json", "--vault", str(project)],
                         env=home.env(), input="the billing migration to the new ledger\n", capture_output=True,
                         text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert lines and {m["memory"]["agent"] for line in lines for m in line["matches"]} == {"planner"}
