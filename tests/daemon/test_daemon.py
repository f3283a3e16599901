"""The daemon itself: its wire protocol under bad input, its life cycle, and many clients at once."""

from __future__ import annotations

import json
import os
import socket
import stat
import struct
import subprocess
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from hebbs.client import Client
from hebbs.paths import lock_path, log_path, pid_path, socket_path
from hebbs.protocol import MAX_FRAME

import processes

if TYPE_CHECKING:
    from daemon_fixtures import DaemonHome

pytest_plugins = ["daemon_fixtures"]


class Raw:
    """A hand-driven connection: whatever bytes a test wants, no client library in between."""

    def __init__(self, path: Path) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(30)
        self.sock.connect(str(path))

    def send_bytes(self, data: bytes) -> None:
        self.sock.sendall(data)

    def send(self, message: Any) -> None:
        body = json.dumps(message).encode()
        self.sock.sendall(struct.pack(">I", len(body)) + body)

    def recv(self) -> dict[str, Any] | None:
        header = self._exactly(4)
        if header is None:
            return None
        body = self._exactly(struct.unpack(">I", header)[0])
        return json.loads(body)

    def _exactly(self, n: int) -> bytes | None:
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                return None
            data += chunk
        return data

    def ask(self, message: Any) -> dict[str, Any]:
        self.send(message)
        reply = self.recv()
        assert reply is not None, "the daemon closed the connection"
        return reply

    def close(self) -> None:
        self.sock.close()


def _still_serving(daemon: "DaemonHome") -> None:
    with daemon.client(global_=True) as hb:
        assert hb.ping().pong


# Bad input ------------------------------------------------------------------------------------

def test_bad_frames_get_an_error_and_others_keep_being_served(shared_daemon: "DaemonHome") -> None:
    """Tried, each on its own connection while another connection stays open mid-frame (a slow
    client): a frame announcing more than 16 MiB (error MESSAGE_TOO_LARGE, then the connection is
    closed), a truncated frame, and a length prefix with no body followed by a disconnect. After
    each, a normal client is still served, and so is the connection that was kept waiting."""
    slow = Raw(shared_daemon.socket)
    slow.send_bytes(struct.pack(">I", 50) + b'{"id": 1, "comm')  # and then nothing, for now

    big = Raw(shared_daemon.socket)
    big.send_bytes(struct.pack(">I", MAX_FRAME + 1) + b"x" * 1024)
    reply = big.recv()
    assert reply is not None and reply["status"] == "error" and reply["status_code"] == "MESSAGE_TOO_LARGE"
    assert big.recv() is None  # closed
    big.close()
    _still_serving(shared_daemon)

    truncated = Raw(shared_daemon.socket)
    truncated.send_bytes(struct.pack(">I", 100) + b'{"id": 2, "command": {"type": "ping"')
    truncated.close()
    _still_serving(shared_daemon)

    header_only = Raw(shared_daemon.socket)
    header_only.send_bytes(struct.pack(">I", 40))
    header_only.close()
    _still_serving(shared_daemon)

    half_header = Raw(shared_daemon.socket)
    half_header.send_bytes(b"\x00\x00")
    half_header.close()
    _still_serving(shared_daemon)

    # The slow client finishes its frame at last, and gets its answer.
    rest = b'and": {"type": "ping"}}'
    slow.send_bytes(rest + b" " * (50 - len(b'{"id": 1, "comm') - len(rest)))
    reply = slow.recv()
    assert reply is not None and reply["status"] == "ok" and reply["data"]["pong"] is True and reply["id"] == 1
    slow.close()


@pytest.mark.parametrize("body, expected", [
    (b"{not json", "invalid JSON"),
    (b'"just a string"', "must be a JSON object"),
    (b"[1, 2, 3]", "must be a JSON object"),
    (b'{"id": 7}', '"command"'),
    (b'{"id": 7, "command": "ping"}', '"command"'),
    (b'{"id": 7, "command": {"type": "teleport"}}', "unknown command 'teleport'"),
    (b'{"id": 7, "command": {"type": "recall", "cue": "x", "top_k": "ten"}, "vault_path": "/tmp"}',
     "Expected `int`, got `str` - at `$.command.top_k`"),
    (b'{"id": 7, "command": {"type": "ping", "extra": 1}}', "unknown field `extra`"),
    (b'{"id": 7, "command": {"type": "get"}}', "missing required field `id`"),
    (b'{"id": 7, "command": {"type": "ping"}, "vault_path": 5}', "vault_path"),
])
def test_malformed_requests_are_answered_with_invalid_request(shared_daemon: "DaemonHome", body: bytes,
                                                              expected: str) -> None:
    """Tried: invalid JSON, JSON that is not an object, a request without a command, an unknown
    command, a wrong field type, an unknown field, a missing field and a bad vault_path. Each gets an
    INVALID_REQUEST error naming the problem (with the request's id when it had one), and the same
    connection then answers a ping."""
    conn = Raw(shared_daemon.socket)
    conn.send_bytes(struct.pack(">I", len(body)) + body)
    reply = conn.recv()
    assert reply is not None
    assert reply["status"] == "error" and reply["status_code"] == "INVALID_REQUEST"
    assert expected in reply["error"]
    if b'"id": 7' in body:
        assert reply["id"] == 7
    assert conn.ask({"id": "after", "command": {"type": "ping"}})["status"] == "ok"
    conn.close()


def test_vault_errors_have_their_own_codes(shared_daemon: "DaemonHome", project: Path, tmp_path: Path) -> None:
    """Tried: a command without vault_path, a vault_path where no vault was initialized, a relative
    vault_path, and a missing memory. Each status code names the failure."""
    conn = Raw(shared_daemon.socket)
    assert conn.ask({"id": 1, "command": {"type": "recall", "cue": "x"}})["status_code"] == "INVALID_REQUEST"
    reply = conn.ask({"id": 2, "command": {"type": "recall", "cue": "x"}, "vault_path": str(tmp_path)})
    assert reply["status_code"] == "VAULT_NOT_INITIALIZED" and "hebbs init" in reply["error"]
    reply = conn.ask({"id": 3, "command": {"type": "recall", "cue": "x"}, "vault_path": "relative/path"})
    assert reply["status_code"] == "INVALID_REQUEST"
    reply = conn.ask({"id": 4, "command": {"type": "get", "id": "01ARZ3NDEKTSV4RRFFQ69G5FAV"},
                      "vault_path": str(project / ".hebbs")})
    assert reply["status_code"] == "NOT_FOUND" and reply["id"] == 4
    conn.close()


def test_a_second_index_run_is_refused_while_one_runs(shared_daemon: "DaemonHome", project: Path) -> None:
    """Tried: start indexing a folder of 120 notes on one connection; as soon as its first progress
    frame shows the run under way, ask for an index of the same folder on another connection: that
    gets INDEXING_IN_PROGRESS at once, the first run completes normally, and afterwards a new run works."""
    for n in range(120):
        (project / f"note{n:03}.md").write_text(f"# Note {n}\n\n## Body\nThe number {n} is discussed in note {n}.\n")
    first = Raw(shared_daemon.socket)
    first.send({"id": "a", "command": {"type": "index", "path": str(project)}})
    progress = first.recv()
    assert progress["status"] == "progress" and progress["id"] == "a"
    second = Raw(shared_daemon.socket)
    refused = second.ask({"id": "b", "command": {"type": "index", "path": str(project)}})
    assert refused["status_code"] == "INDEXING_IN_PROGRESS" and refused["id"] == "b"
    while (reply := first.recv())["status"] == "progress":
        assert set(reply["data"]) == {"stage", "done", "total"}
    assert reply["status"] == "ok" and reply["data"]["sections_added"] == 120
    again = second.ask({"id": "c", "command": {"type": "index", "path": str(project)}})
    assert again["status"] == "ok" and again["data"]["files_unchanged"] == 120
    first.close()
    second.close()


def test_subscription_pushes_arrive_as_progress_frames(shared_daemon: "DaemonHome", project: Path) -> None:
    """Tried: the raw exchange of subscribe/feed/close: pushes are progress frames carrying the
    subscribe request's id and arrive before the feed's own ok; a feed without a subscription and
    closing an unknown subscription are errors."""
    vault = str(project / ".hebbs")
    with shared_daemon.client(project) as hb:
        planted = hb.remember("The staging cluster is rebuilt every Sunday night")
    conn = Raw(shared_daemon.socket)
    assert conn.ask({"id": "f0", "command": {"type": "feed", "text": "hello"}})["status_code"] == "INVALID_REQUEST"
    sub = conn.ask({"id": "s1", "command": {"type": "subscribe", "confidence_threshold": 0.5}, "vault_path": vault})
    assert sub["status"] == "ok"
    conn.send({"id": "f1", "command": {"type": "feed", "text": "when is the staging cluster rebuilt?"}})
    push = conn.recv()
    assert push["status"] == "progress" and push["id"] == "s1"
    assert [m["memory"]["id"] for m in push["data"]["matches"]] == [planted.id]
    done = conn.recv()
    assert done["id"] == "f1" and done["data"] == {"pushed": 1}
    assert conn.ask({"id": "f2", "command": {"type": "feed", "text": "when is the staging cluster rebuilt?"}}
                    )["data"] == {"pushed": 0}
    assert conn.ask({"id": "c1", "command": {"type": "close"}})["data"] == {"closed": 1}
    assert conn.ask({"id": "c2", "command": {"type": "close", "subscription_id": "nope"}})["status_code"] == "NOT_FOUND"
    conn.close()


# Many clients -----------------------------------------------------------------------------------

def test_eight_concurrent_clients_lose_and_duplicate_nothing(shared_daemon: "DaemonHome", project: Path) -> None:
    """Tried: 8 threads, each with its own connection, interleave single remembers, batch remembers,
    recalls and gets on one vault. Afterwards the vault holds exactly the memories they were told
    were stored (none lost, none twice), and each client read back its own writes."""
    written: dict[int, list[str]] = {}
    errors: list[BaseException] = []

    def client(n: int) -> None:
        try:
            with shared_daemon.client(project) as hb:
                mine = []
                for i in range(6):
                    mine.append(hb.remember(f"client {n} single {i}", entity_id=f"c{n}").id)
                    batch = hb.remember_many([{"content": f"client {n} batch {i}.{j}", "entity_id": f"c{n}"}
                                              for j in range(3)])
                    mine += [m.id for m in batch]
                    hb.recall(f"client {n} single", top_k=5)
                    assert hb.get(mine[-1]).content == f"client {n} batch {i}.2"
                written[n] = mine
        except BaseException as exc:  # report in the main thread
            errors.append(exc)

    threads = [threading.Thread(target=client, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    with shared_daemon.client(project) as hb:
        stored = [m for m in hb.export()]
        assert len(stored) == 8 * 6 * 4
        assert sorted(m.id for m in stored) == sorted(i for ids in written.values() for i in ids)
        assert len({m.content for m in stored}) == len(stored)
        for n in range(8):
            assert len(hb.recall(strategies=["temporal"], entity_id=f"c{n}", top_k=100)) == 24


def test_a_reply_larger_than_the_socket_takes_at_once_arrives_whole(shared_daemon: "DaemonHome",
                                                                     project: Path) -> None:
    """Tried: a recall whose reply (about 600 kB) is far more than a Unix socket takes in one write.
    The worker that computed it writes what the socket takes and leaves the rest to the event loop:
    the client gets every byte, in order, and the same connection serves the next request."""
    # 40 memories of 2,000 words: the same 600+ kB reply as 160 of 500, a quarter of the embedding
    # (the model reads each memory's first 256 tokens whatever its length).
    texts = [f"oversized reply part {i}: " + f"word{i} " * 2000 for i in range(40)]
    with shared_daemon.client(project) as hb:
        stored = hb.remember_many([{"content": t, "entity_id": "big"} for t in texts])
        found = hb.recall(strategies=["temporal"], entity_id="big", top_k=len(texts))
        assert sorted(r.memory.id for r in found) == sorted(m.id for m in stored)
        assert {r.memory.content for r in found} == set(texts)
        assert hb.get(stored[0].id).content == texts[0]
        assert hb.ping().pong


# Life cycle -------------------------------------------------------------------------------------

def test_auto_start_permissions_and_stop(own_home: "DaemonHome") -> None:
    """Tried: the first client call on a home with no daemon starts one (PID file, socket, log, lock
    appear), the home is 0700 and the socket 0600, and shutdown removes socket and PID file."""
    assert not own_home.socket.exists()
    with own_home.client(global_=True) as hb:
        pid = hb.ping().pid
        own_home.pids.add(pid)
        assert int(pid_path(own_home.home).read_text()) == pid
        assert stat.S_IMODE(os.stat(own_home.home).st_mode) == 0o700
        assert stat.S_IMODE(os.stat(own_home.socket).st_mode) == 0o600
        assert log_path(own_home.home).exists() and lock_path(own_home.home).exists()
        hb.shutdown()
    own_home.wait_until(lambda: not own_home.alive(pid), what="the daemon to exit")
    assert not own_home.socket.exists() and not pid_path(own_home.home).exists()


def test_idle_shutdown_and_vault_idle_close(make_daemon, embedder) -> None:
    """Tried: a daemon with a 0.5 s vault idle timeout and a 3 s idle timeout. The vault it opened is
    closed when unused (its RocksDB lock released: the engine can open it in-process, and a memory
    written there is seen by the daemon when it reopens the vault); then, with no requests, the
    daemon exits by itself and cleans up its socket and PID file."""
    from hebbs import Engine

    home = make_daemon(idle_timeout=3, vault_idle_timeout=0.5)
    pid = home.start()
    root = home.project()
    with home.client(root) as hb:
        hb.remember("written through the daemon")
        vault = str((root / ".hebbs").resolve())
        home.wait_until(lambda: vault not in [v.path for v in hb.status(vault=False).open_vaults], 20,
                        "the vault to close")
        # Would raise VaultBusy if the daemon held it. With the model this process has loaded: loading
        # one here could outlast the daemon's 3 s idle timeout on a loaded machine.
        with Engine.open(root / ".hebbs", embedder=embedder) as engine:
            engine.remember("written in-process while the daemon slept")
        contents = {r.memory.content for r in hb.recall(strategies=["temporal"], top_k=10)}
        assert contents == {"written through the daemon", "written in-process while the daemon slept"}
    home.wait_until(lambda: not home.alive(pid), 30, "the idle daemon to exit")
    assert not home.socket.exists() and not pid_path(home.home).exists()


def test_stale_socket_and_pid_file_after_a_crash(own_home: "DaemonHome") -> None:
    """Tried: kill -9 a running daemon, leaving its socket and PID file behind; the next client call
    starts a fresh daemon (new pid), which removes the stale files and serves the same vault."""
    with own_home.client(global_=True) as hb:
        memory = hb.remember("remembered before the crash")
        old_pid = hb.ping().pid
    os.kill(old_pid, 9)
    own_home.wait_until(lambda: not own_home.alive(old_pid), what="the killed daemon to go")
    assert own_home.socket.exists() and pid_path(own_home.home).exists()
    with own_home.client(global_=True) as hb:
        new_pid = hb.ping().pid
        own_home.pids.add(new_pid)
        assert new_pid != old_pid
        assert int(pid_path(own_home.home).read_text()) == new_pid
        assert hb.get(memory.id).content == "remembered before the crash"
    assert "stale" in log_path(own_home.home).read_text()


def test_two_daemons_racing_to_start(own_home: "DaemonHome") -> None:
    """Tried: two daemon processes started at the same instant on one home, and two clients calling at
    once. Exactly one daemon serves (both start commands exit 0, one saying another serves); both
    clients talk to that one."""
    command = [sys.executable, "-m", "hebbs.daemon", "--detach", "--home", str(own_home.home)]
    racers = [processes.popen(command, stdin=subprocess.DEVNULL) for _ in range(2)]
    assert [p.wait(timeout=60) for p in racers] == [0, 0]
    pids: list[int] = []

    def ping() -> None:
        with own_home.client(global_=True) as hb:
            pids.append(hb.ping().pid)

    clients = [threading.Thread(target=ping) for _ in range(2)]
    for t in clients:
        t.start()
    for t in clients:
        t.join()
    own_home.pids.update(pids)
    assert len(pids) == 2 and pids[0] == pids[1] == int(pid_path(own_home.home).read_text())
    assert "another daemon serves" in log_path(own_home.home).read_text()
    # The loser reports "busy" just before it exits: give it that moment.
    own_home.wait_until(lambda: _daemons_of(own_home.home) == [pids[0]], 20, "the losing daemon to exit")


def _daemons_of(home: Path) -> list[int]:
    """The pids of live daemon processes serving home (read from /proc; nothing is signalled)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"hebbs.daemon" in argv and str(home).encode() in argv:
            found.append(int(entry.name))
    return found


def test_no_autostart_means_a_clear_error(own_home: "DaemonHome") -> None:
    """Tried: a client told not to start a daemon, on a home with none: DaemonUnavailable, naming the
    command that starts one."""
    from hebbs.protocol import DaemonUnavailable

    with pytest.raises(DaemonUnavailable, match="hebbs daemon start"):
        Client(global_=True, home=own_home.home, autostart=False).ping()
    assert not socket_path(own_home.home).exists()
