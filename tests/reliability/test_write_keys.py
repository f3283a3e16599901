"""Remember is safe to send again (issue 39, items 5 and 6), on a real daemon killed right after its commit.

A relay stands between the SDK (or the CLI) and the daemon. Armed, it lets a remember through, and
when the daemon's reply arrives (the batch is committed: the reply is sent after it) it SIGKILLs
the daemon and drops the reply: the client's outcome is unknown, exactly as after a crash just past
the commit. Before the fix the SDK raised DaemonUnavailable and the same call again stored all 300
memories a second time; the SDK now gives every memory a key of its own, so a retry (its own, or
the caller's) finds them.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from daemon_harness import ForegroundDaemon, frame, raw_connect, read_reply

from hebbs.client import Client
from hebbs.errors import DaemonUnavailable, KeyReused
from hebbs.paths import socket_path

import processes
from scratch import short_tmp

BATCH = 300


class KillingRelay:
    """A Unix socket relaying frames to the daemon's; `arm(then)` makes the next remember's reply the
    daemon's last: the daemon is SIGKILLed as that reply arrives, `then` runs, and the client's
    connection is closed without the reply."""

    def __init__(self, daemon: ForegroundDaemon) -> None:
        self.daemon = daemon
        self.home = short_tmp("hbk")
        self.path = socket_path(self.home)
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(str(self.path))
        self._listener.listen(16)
        self._armed: Callable[[], None] | None = None
        self.killed = 0
        self._threads: list[threading.Thread] = []
        accept = threading.Thread(target=self._accept, daemon=True)
        accept.start()
        self._threads.append(accept)

    def arm(self, then: Callable[[], None] = lambda: None) -> None:
        self._armed = then

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            worker = threading.Thread(target=self._relay, args=(client,), daemon=True)
            worker.start()
            self._threads.append(worker)

    def _relay(self, client: socket.socket) -> None:
        try:
            upstream = raw_connect(self.daemon.socket, timeout=300)
        except OSError:  # the daemon is down: the client sees its connection end
            client.close()
            return
        try:
            client.settimeout(300)
            while (request := read_reply(client)) is not None:
                upstream.sendall(frame(request))
                while (reply := read_reply(upstream)) is not None:
                    if reply.get("status") == "progress":
                        client.sendall(frame(reply))
                        continue
                    if self._armed is not None and request.get("command", {}).get("type") == "remember":
                        then, self._armed = self._armed, None
                        self.daemon.proc.send_signal(signal.SIGKILL)  # committed: its reply is here
                        self.daemon.proc.wait()
                        self.killed += 1
                        then()
                        return
                    client.sendall(frame(reply))
                    break
                else:
                    return
        except OSError:
            return
        finally:
            client.close()
            upstream.close()

    def client(self, vault: Path, **kwargs) -> Client:
        return Client(vault=vault, home=self.home, autostart=False, timeout=300, **kwargs)

    def close(self) -> None:
        self._listener.close()


@pytest.fixture
def relayed():
    daemon = ForegroundDaemon().start()
    relay = KillingRelay(daemon)
    yield daemon, relay
    relay.close()
    daemon.stop()


def _items(tag: str) -> list[dict]:
    return [{"content": f"{tag} batch memory {n}: the deploy of service {n} moved to Friday", "entity_id": "ops"}
            for n in range(BATCH)]


def _restart(daemon: ForegroundDaemon) -> None:
    daemon.start()  # the same home and socket: the vault's lock died with the killed daemon


def test_a_batch_killed_after_its_commit_is_stored_once_when_the_same_call_is_made_again(relayed):
    daemon, relay = relayed
    project = daemon.project()
    items = _items("first")
    client = relay.client(project)
    relay.arm()
    with pytest.raises(DaemonUnavailable) as raised:
        client.remember_many(items, consolidate=False)
    assert relay.killed == 1
    keys = raised.value.keys
    assert len(keys) == BATCH and len(set(keys)) == BATCH, "one key per memory"
    _restart(daemon)
    assert daemon.client(project).count() == BATCH  # the batch was committed before the kill

    again = client.remember_many(items, consolidate=False)  # the caller's retry: the same call
    assert len(again) == BATCH and not any(m.existing for m in again)
    assert daemon.client(project).count() == BATCH

    # From another client (another process, say), the keys the error carried do the same.
    other = relay.client(project)
    keyed = other.remember_many([{**item, "key": key} for item, key in zip(items, keys)], consolidate=False)
    assert [m.id for m in keyed] == [m.id for m in again] and all(m.existing for m in keyed)
    assert daemon.client(project).count() == BATCH


def test_the_sdk_resends_a_batch_itself_once_the_daemon_is_back(relayed):
    daemon, relay = relayed
    project = daemon.project()
    relay.arm(then=lambda: _restart(daemon))  # the daemon is back before the client's resend
    stored = relay.client(project).remember_many(_items("second"), consolidate=False)
    assert relay.killed == 1
    assert len(stored) == BATCH and len({m.id for m in stored}) == BATCH
    assert not any(m.existing for m in stored)  # the SDK's own key: stored by this call, not before
    assert daemon.client(project).count() == BATCH


def test_the_async_client_resends_a_batch_itself_too(relayed):
    import asyncio

    from hebbs.client import AsyncClient

    daemon, relay = relayed
    project = daemon.project()
    relay.arm(then=lambda: _restart(daemon))

    async def remember() -> list:
        async with AsyncClient(vault=project, home=relay.home, autostart=False) as client:
            return await client.remember_many(_items("third"), consolidate=False)

    stored = asyncio.run(remember())
    assert relay.killed == 1 and len({m.id for m in stored}) == BATCH
    assert daemon.client(project).count() == BATCH


def test_a_cli_remember_killed_after_its_commit_names_the_key_to_retry_with(relayed):
    daemon, relay = relayed
    project = daemon.project()
    env = {**os.environ, "HEBBS_HOME": str(relay.home)}
    hebbs = str(Path(sys.executable).with_name("hebbs"))
    text = "the staging database moved to the new cluster on Monday"
    relay.arm()
    failed = processes.run([hebbs, "remember", text, "--vault", str(project)], env=env, capture_output=True,
                           text=True, timeout=300)
    assert failed.returncode != 0 and "Traceback" not in failed.stderr
    assert "--key sdk-" in failed.stderr, failed.stderr
    key = failed.stderr.split("--key ")[-1].split()[0]
    _restart(daemon)
    again = processes.run([hebbs, "remember", text, "--vault", str(project), "--key", key, "--format", "json"],
                          env=env, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["existing"] is True
    assert daemon.client(project).count() == 1


def test_a_key_reused_with_other_text_is_refused_at_every_door_naming_the_stored_text():
    daemon = ForegroundDaemon().start()
    try:
        project = daemon.project()
        client = daemon.client(project)
        first = client.remember("Dana owns the deploy keys", key="owner")
        assert client.remember("Dana owns the deploy keys", key="owner").existing  # the same text: a retry

        # SDK
        with pytest.raises(KeyReused, match="Dana owns the deploy keys") as refused:
            client.remember("Eve owns the deploy keys", key="owner")
        assert refused.value.memory_id == first.id and refused.value.status_code == "KEY_REUSED"
        with pytest.raises(KeyReused, match="Dana owns the deploy keys"):
            client.remember_many([{"content": "Eve owns the deploy keys", "key": "owner"}])
        with pytest.raises(KeyReused, match="an earlier item of this batch"):  # within one batch
            client.remember_many([{"content": "one", "key": "twice"}, {"content": "two", "key": "twice"}])

        # The socket
        with raw_connect(daemon.socket) as sock:
            sock.sendall(frame({"id": 1, "command": {"type": "remember", "content": "Eve owns the deploy keys",
                                                     "key": "owner"}, "vault_path": str(project / ".hebbs")}))
            reply = read_reply(sock)
        assert reply["status_code"] == "KEY_REUSED" and "Dana owns the deploy keys" in reply["error"], reply

        # The CLI
        env = {**os.environ, "HEBBS_HOME": str(daemon.home)}
        cli = processes.run([str(Path(sys.executable).with_name("hebbs")), "remember", "Eve owns the deploy keys",
                             "--key", "owner", "--vault", str(project)], env=env, capture_output=True, text=True,
                            timeout=300)
        assert cli.returncode == 1 and "Dana owns the deploy keys" in cli.stderr and "[KEY_REUSED]" in cli.stderr

        assert client.count() == 1 and client.get(first.id).content == "Dana owns the deploy keys"
        # Revised to another text, the memory answers to that text under its key too.
        client.revise(first.id, content="Frank owns the deploy keys")
        assert client.remember("Frank owns the deploy keys", key="owner").id == first.id
        assert client.remember("Dana owns the deploy keys", key="owner").id == first.id  # the first text: a retry
    finally:
        daemon.stop()

