"""Each connection has a thread of its own, which runs recall, prime, get and remember itself when the
vault is open (hebbs/daemon/server.py). These tests race those calls against what the event loop does
to the same vault: closing it when idle and opening it again, and writes that go through the loop."""

from __future__ import annotations

import threading
import time

import pytest

from hebbs.daemon.vaults import VaultPool, VaultSlot
from hebbs.errors import HebbsError
from hebbs.paths import init_vault, log_path

pytest_plugins = ["daemon_fixtures"]

ROUNDS = 4
WRITERS = 3


def test_direct_calls_race_idle_closes_and_loop_writes(make_daemon):
    # The vault closes after 50 ms without a request, so it closes and reopens all through the run.
    daemon = make_daemon(vault_idle_timeout=0.05)
    daemon.start()
    root = daemon.project()
    remembered: list[list[str]] = [[] for _ in range(WRITERS)]
    forgotten: list[str] = []
    failures: list[BaseException] = []
    stop = threading.Event()
    # Set until every client has paused and the vault has closed; when it clears, every client comes
    # back at once, to a vault the loop is opening again. Each round waits for what it needs instead of
    # hoping a sleep is long enough: on a loaded machine the clients may never leave 50 ms of silence.
    quiet = threading.Event()
    paused: set[int] = set()
    lock = threading.Lock()

    def pause() -> None:
        me = threading.get_ident()
        while quiet.is_set():
            with lock:
                paused.add(me)
            time.sleep(0.01)
        with lock:
            paused.discard(me)

    def writer(n: int) -> None:
        try:
            with daemon.client(root) as client:
                k = 0
                while not stop.is_set():
                    pause()
                    memory = client.remember(f"writer {n} noted fact {k} about the billing service", entity_id="race")
                    remembered[n].append(memory.id)
                    assert client.get(memory.id).content.endswith(f"fact {k} about the billing service")
                    client.recall("billing service facts", top_k=5)
                    k += 1
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            failures.append(exc)

    def loop_writer() -> None:
        # forget and revise are not direct calls: they go through the loop and a worker, and share the
        # vault's write slot with the remembers above.
        try:
            with daemon.client(root) as client:
                while not stop.is_set():
                    pause()
                    memory = client.remember("a short-lived note to forget", entity_id="race")
                    client.revise(memory.id, content="a short-lived note, revised, to forget")
                    assert client.forget([memory.id]) == 1
                    forgotten.append(memory.id)
        except BaseException as exc:  # noqa: BLE001
            failures.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(WRITERS)]
    threads.append(threading.Thread(target=loop_writer))
    for thread in threads:
        thread.start()

    vault_dir = str((root / ".hebbs").resolve())

    def vault_open() -> bool:
        with daemon.client(global_=True) as status:
            return any(v.path == vault_dir for v in status.status(vault=False).open_vaults)

    def progress() -> list[int]:
        return [len(ids) for ids in remembered] + [len(forgotten)]

    for _ in range(ROUNDS):
        quiet.set()
        daemon.wait_until(lambda: failures or len(paused) == len(threads), what="every client to pause")
        assert not failures, repr(failures[0])
        # Closed by now or soon: it may have closed while the last client was pausing.
        daemon.wait_until(lambda: not vault_open(), what="the idle vault to close")
        before = progress()
        quiet.clear()
        daemon.wait_until(lambda: failures or all(now > then for now, then in zip(progress(), before)),
                          what="every client to be served by the reopened vault")
    stop.set()
    for thread in threads:
        thread.join(timeout=60)
    assert not failures, repr(failures[0])

    with daemon.client(root) as client:
        ids = [i for ids in remembered for i in ids]
        assert ids and forgotten
        for memory_id in ids:
            client.get(memory_id)
        for memory_id in forgotten:
            with pytest.raises(HebbsError):
                client.get(memory_id)
    log = log_path(daemon.home).read_text()
    assert log.count("(idle)") >= ROUNDS


def test_try_use_never_hands_out_a_closing_vault(tmp_path, embedder):
    import asyncio
    from concurrent.futures import ThreadPoolExecutor

    from hebbs.engine import Engine

    home = tmp_path / "home"
    (tmp_path / "notes").mkdir()
    vault, _ = init_vault(tmp_path / "notes", home)
    # The shortest idle timeout there is (0 means never): a slot is idle as soon as it is released.
    pool = VaultPool(home, idle_timeout=1e-9, executor=ThreadPoolExecutor(2),
                     opener=lambda path, models: Engine.open(path, embedder=embedder))

    async def scenario() -> None:
        slot: VaultSlot = pool.slot(str(vault))
        assert pool.try_use(slot) is None  # not open yet: the loop must open it
        async with pool.use(slot):
            pass
        engine = pool.try_use(slot)
        assert engine is not None
        await pool.close_idle()
        assert slot.engine is engine  # counted as used: the reaper leaves it open
        engine.recall("still open")
        pool.release(slot)
        await pool.close_idle()
        assert slot.engine is None and not slot.closing
        assert pool.try_use(slot) is None

    asyncio.run(scenario())
