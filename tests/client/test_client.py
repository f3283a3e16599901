"""The Python SDK (hebbs.Client, hebbs.AsyncClient) against a real daemon on a real socket."""

from __future__ import annotations

import asyncio
import datetime as dt
from pathlib import Path

import pytest

import hebbs
from hebbs import AsyncClient, Client
from hebbs.errors import InvalidInput, NotFound, VaultNotInitialized
from hebbs.protocol import DaemonStatus, Inspection, MessageTooLarge
from hebbs.schema import Memory, MemoryKind, QueryLogEntry, RecallResults

pytest_plugins = ["daemon_fixtures"]


def test_memory_commands_round_trip(shared_daemon, project: Path) -> None:
    """Tried: remember (single and batch), get by full and short id, revise, inspect, recall, prime,
    queries, export and forget through one Client; every result is the engine's own Struct type."""
    with shared_daemon.client(project) as hb:
        first = hb.remember("Acme uses Salesforce as its CRM", importance=0.8, entity_id="acme",
                            context={"type": "fact"})
        assert isinstance(first, Memory) and first.entity_id == "acme" and first.context == {"type": "fact"}
        batch = hb.remember_many([
            {"content": "Acme's renewal is due in March", "entity_id": "acme"},
            {"content": "Bob prefers short meetings", "entity_id": "bob", "importance": 0.6,
             "created_at": dt.datetime(2024, 1, 2, tzinfo=dt.timezone.utc)},
        ])
        assert [m.content for m in batch] == ["Acme's renewal is due in March", "Bob prefers short meetings"]
        assert batch[1].created_at == 1704153600_000000

        assert hb.get(first.id) == hb.get(first.id[-8:])
        revised = hb.revise(first.id, content="Acme moved its CRM to HubSpot", importance=0.9)
        assert revised.content == "Acme moved its CRM to HubSpot" and revised.importance == 0.9
        detached = hb.revise(batch[1].id, entity_id=None)
        assert detached.entity_id is None

        inspection = hb.inspect(first.id)
        assert isinstance(inspection, Inspection)
        assert [old.content for old in inspection.history] == ["Acme uses Salesforce as its CRM"]
        assert inspection.history[0].kind == MemoryKind.REVISION
        assert any(e.edge_type == "REVISED_FROM" for e in inspection.edges)

        found = hb.recall("which CRM does Acme use", top_k=3)
        assert isinstance(found, RecallResults) and found.results[0].memory.id == first.id
        scoped = hb.recall("anything", strategies=["similarity"], entity_id="acme", weights=(1, 0, 0, 0),
                           time_range=(None, dt.datetime.now(dt.timezone.utc)), reinforce=False)
        assert {r.memory.entity_id for r in scoped} == {"acme"}

        primed = hb.prime("acme", similarity_cue="CRM", max_memories=5)
        assert {r.memory.id for r in primed} == {first.id, batch[0].id}

        log = hb.queries(limit=5)
        assert all(isinstance(e, QueryLogEntry) for e in log)
        assert any(e.cue == "which CRM does Acme use" for e in log)

        exported = list(hb.export())
        assert sorted(m.id for m in exported) == sorted([first.id, batch[0].id, batch[1].id])
        assert len(list(hb.export(include_revisions=True))) == 4

        assert hb.forget(entity_id="acme") == 2
        assert hb.forget([batch[1].id]) == 1
        with pytest.raises(NotFound):
            hb.get(first.id)
        assert hb.status().vault.memories == 0


def test_status_and_errors_are_typed(shared_daemon, project: Path) -> None:
    """Tried: status with and without a vault, then bad arguments the daemon must refuse (wrong
    importance, unknown strategy, ambiguous/short ids, a missing vault, a request over 16 MiB);
    each comes back as the hebbs.errors class its status code names."""
    with shared_daemon.client(project) as hb:
        status = hb.status()
        assert isinstance(status, DaemonStatus) and status.vault is not None
        assert Path(status.vault.path) == (project / ".hebbs").resolve()
        assert hb.status(vault=False).vault is None
        with pytest.raises(InvalidInput, match="importance"):
            hb.remember("x", importance=3)
        with pytest.raises(InvalidInput, match="strategy"):
            hb.recall("x", strategies=["telepathy"])
        with pytest.raises(InvalidInput, match="too short"):
            hb.get("ABC")
        with pytest.raises(NotFound):
            hb.get("01ARZ3NDEKTSV4RRFFQ69G5FAV")
        with pytest.raises(MessageTooLarge):
            hb.remember("x" * (17 * 1024 * 1024))
        assert hb.ping().pong  # the connection is still good after each error

    nowhere = Client(home=shared_daemon.home, cwd="/")
    assert nowhere.vault_path is None
    assert nowhere.ping().pong  # no vault needed to talk to the daemon
    with pytest.raises(VaultNotInitialized, match="hebbs init"):
        nowhere.recall("anything")
    with pytest.raises(VaultNotInitialized, match="hebbs init"):
        Client(vault="/tmp", home=shared_daemon.home)  # an explicit path with no vault is refused at once


def test_what_the_wire_cannot_carry_is_invalid_input(shared_daemon, project: Path) -> None:
    """Tried: a lone surrogate in a memory (no UTF-8 can carry it: a raw UnicodeEncodeError before),
    and weights naming an unknown factor (a raw TypeError before)."""
    with Client(project, home=shared_daemon.home) as client:
        with pytest.raises(InvalidInput, match="lone surrogate"):
            client.remember("bad \ud800 text")
        with pytest.raises(InvalidInput, match="unknown scoring weights"):
            client.recall("anything", weights={"bogus": 1})
        assert client.recall("anything", weights={"relevance": 1}).results == []


def test_call_sends_a_declared_command_and_refuses_what_it_does_not_declare(shared_daemon, project: Path) -> None:
    """Client.call, what every generated method sends through: a field or a further method the
    declaration does not have is InvalidInput naming what it has (a KeyError and a StopIteration before)."""
    from hebbs.protocol import Recall, Status

    with Client(project, home=shared_daemon.home) as client:
        assert client.call(Status, method="stats").path == str(project / ".hebbs")
        with pytest.raises(InvalidInput, match="recall has no field 'bogus'; its fields: cue,"):
            client.call(Recall, cue="anything", bogus=1)
        with pytest.raises(InvalidInput, match="status has no further method 'nope'; it has stats"):
            client.call(Status, method="nope")


def test_vault_discovery_walks_up(shared_daemon, project: Path) -> None:
    """Tried: a Client created in a subfolder of a project finds the project's .hebbs; one created with
    global_=True uses HEBBS_HOME; the two are different brains."""
    sub = project / "notes" / "deep"
    sub.mkdir(parents=True)
    local = Client(home=shared_daemon.home, cwd=sub)
    assert local.vault_path == project / ".hebbs"
    marker = local.remember("only in the project brain")
    with shared_daemon.client(global_=True) as brain:
        assert brain.vault_path == shared_daemon.home
        with pytest.raises(NotFound):
            brain.get(marker.id)
    local.close()


def test_threads_sharing_one_client_take_turns(shared_daemon, project: Path) -> None:
    """Tried: 4 threads x 15 remember + get through one Client. Before the client took turns, their
    frames interleaved on the one connection: 'frame of 2065852772 bytes refused' (a reply's JSON
    read as a length), bad file descriptors, and a thread waiting for a reply another had taken.
    A request from inside its own progress callback is refused rather than left to deadlock."""
    import threading

    failures: list[BaseException] = []
    with Client(project, home=shared_daemon.home, timeout=60) as client:
        def work(n: int) -> None:
            try:
                for i in range(15):
                    memory = client.remember(f"thread {n} noted fact {i}")
                    assert client.get(memory.id).content == f"thread {n} noted fact {i}"
            except BaseException as exc:  # noqa: BLE001 - reported below
                failures.append(exc)

        threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert failures == [] and client.count() == 60

        client._turn_owner = threading.get_ident()  # as inside one of its own requests
        try:
            with pytest.raises(InvalidInput, match="progress callback"):
                client.count()
        finally:
            client._turn_owner = None


def test_subscription_pushes_a_planted_match_once(shared_daemon, project: Path) -> None:
    """Tried: plant one memory among unrelated ones, subscribe, feed text about it twice and
    unrelated text once: the planted memory is pushed on the first feed only, nothing else is."""
    with shared_daemon.client(project) as hb:
        hb.remember_many([{"content": t} for t in (
            "The office coffee machine is broken", "Quarterly taxes are filed in April",
            "Our cat is called Miso")])
        planted = hb.remember("The production database password rotates every Friday at noon")
        with hb.subscribe(confidence_threshold=0.5) as sub:
            first = sub.feed("when does the production database password rotate?")
            assert [r.memory.id for r in first] == [planted.id]
            assert sub.feed("when does the production database password rotate?") == []
            assert sub.feed("football results from the weekend") == []
        with hb.subscribe(entity_id="nobody", confidence_threshold=0.0) as scoped:
            assert scoped.feed("production database password") == []


def test_subscription_pushes_a_memory_stored_later(shared_daemon, project: Path) -> None:
    """Issue 44 item 4: a memory another connection stores after the subscription was fed is pushed
    on the open stream (before, only a feed pushed: wait() did not exist and nothing came); one that
    matches no text fed is not, nor is one from before the subscription."""
    with shared_daemon.client(project) as hb, shared_daemon.client(project) as writer:
        old = hb.remember("The staging cluster certificates renew on the first Monday")
        with hb.subscribe(confidence_threshold=0.5) as sub:
            assert [r.memory.id for r in sub.feed("when do the staging cluster certificates renew?")] == [old.id]
            assert sub.wait(timeout=0) == []
            writer.remember("Our cat is called Miso and likes the garden")
            later = writer.remember("The staging cluster certificates now renew every second Monday")
            pushed = sub.wait(timeout=60)
            assert [r.memory.id for r in pushed] == [later.id] and old.id not in [r.memory.id for r in pushed]
            assert pushed[0].confidence is not None and pushed[0].confidence >= 0.5
            # Delivered once: a feed afterwards does not bring it again.
            assert later.id not in [r.memory.id for r in sub.feed("staging cluster certificates renew")]

        async def scenario() -> None:
            async with AsyncClient(vault=project, home=shared_daemon.home) as ahb:
                asub = await ahb.subscribe(confidence_threshold=0.5)
                await asub.feed("which port does the metrics exporter listen on?")
                stored = writer.remember("The metrics exporter listens on port 9464")
                assert [r.memory.id for r in await asub.wait(timeout=60)] == [stored.id]
                await asub.close()

        asyncio.run(scenario())


def test_a_subscription_holds_a_bounded_queue() -> None:
    """A client that does not read its pushes costs the daemon at most PUSH_QUEUE matches per
    subscription: the oldest are dropped, and the next push says how many."""
    from hebbs.daemon.subscriptions import PUSH_QUEUE, Subscription
    from hebbs.schema import Memory, RecallResult, ScoreComponents

    parts = ScoreComponents(relevance=0.5, recency=0.5, importance=0.5, reinforcement=0.0)
    sub = Subscription("s", 1, None, None, 0.5, {})  # type: ignore[arg-type]
    sub.hold(RecallResult(memory=Memory(id=f"m{i}", content="x"), score=0.5, components=parts)
             for i in range(PUSH_QUEUE + 3))
    push = sub.take()
    assert push is not None and push.dropped == 3 and len(push.matches) == PUSH_QUEUE
    assert push.matches[0].memory.id == "m3" and sub.take() is None


def test_reconnects_after_daemon_restart(own_home) -> None:
    """Tried: a Client talks to a daemon, the daemon is stopped, the same Client calls again: it starts
    a new daemon and reconnects by itself, and the memory written before is still there."""
    hb = own_home.client(global_=True)
    memory = hb.remember("survives a restart")
    first_pid = hb.ping().pid
    own_home.pids.add(first_pid)
    hb_stopper = own_home.client(global_=True)
    hb_stopper.shutdown()
    hb_stopper.close()
    own_home.wait_until(lambda: not own_home.alive(first_pid), what="the first daemon to exit")
    assert hb.get(memory.id).content == "survives a restart"
    second_pid = hb.ping().pid
    own_home.pids.add(second_pid)
    assert second_pid != first_pid
    hb.close()


def test_async_client(shared_daemon, project: Path) -> None:
    """Tried: AsyncClient with concurrent remembers and recalls from one event loop, an async export,
    an async subscription, and a typed error."""

    async def scenario() -> None:
        async with AsyncClient(vault=project, home=shared_daemon.home) as hb:
            made = await asyncio.gather(*(hb.remember(f"async memory number {n}", entity_id="async")
                                          for n in range(10)))
            assert len({m.id for m in made}) == 10
            found = await asyncio.gather(*(hb.recall("async memory", entity_id="async", top_k=20)
                                           for _ in range(4)))
            assert all(len(r) == 10 for r in found)
            assert (await hb.get(made[0].id)).content == made[0].content
            exported = [m async for m in hb.export()]
            assert len(exported) == 10
            assert (await hb.prime("async", max_memories=3)).results
            sub = await hb.subscribe(entity_id="async", confidence_threshold=0.6)
            pushed = await sub.feed("async memory number 3")
            assert made[3].id in [r.memory.id for r in pushed]
            await sub.close()
            with pytest.raises(NotFound):
                await hb.get("01ARZ3NDEKTSV4RRFFQ69G5FAV")
            assert await hb.forget(entity_id="async") == 10

    asyncio.run(scenario())


def test_package_exports_the_clients() -> None:
    """Tried: `hebbs.Client` and `hebbs.AsyncClient` resolve through the package's lazy names."""
    assert hebbs.Client is Client and hebbs.AsyncClient is AsyncClient


def test_index_and_list_through_the_sdk(shared_daemon, project: Path) -> None:
    """Tried: Client.index on a notes folder with a progress callback (typed Progress reports, then an
    IndexSummary), the two watcher phases apart (phase 1 after an edit reports pending work, phase 2
    does it), and Client.list with sections."""
    from hebbs.protocol import ScanSummary
    from hebbs.notes import FileStatus, IndexSummary, Progress

    (project / "a.md").write_text("# A\n\n## One\nThe first section of a.\n\n## Two\nThe second section.\n")
    reports: list[Progress] = []
    with shared_daemon.client(project) as hb:
        summary = hb.index(progress=reports.append)
        assert isinstance(summary, IndexSummary) and summary.sections_added == 2
        assert reports and all(isinstance(r, Progress) for r in reports)
        (project / "b.md").write_text("# B\n\n## Only\nA note that arrives later.\n")
        scan = hb.index(project, phase=1, paths=[project / "b.md"])
        assert isinstance(scan, ScanSummary) and scan.pending["add"] == 1
        assert hb.list()[1].state == "pending"
        applied = hb.index(project, phase=2)
        assert applied.sections_added == 1 and applied.sections_total == 3
        files = hb.list(project, sections=True)
        assert all(isinstance(f, FileStatus) for f in files) and [f.path for f in files] == ["a.md", "b.md"]
        assert [s.heading_path for s in files[0].section_list] == [["A", "One"], ["A", "Two"]]
