"""Connection limits on a real daemon: idle and stalled connections beyond the cap, BUSY for the
excess, the descriptor limit raised at start, and a log that neither floods nor grows unbounded."""

from __future__ import annotations

import logging
import os
import shutil
import socket
import sys
import tempfile
import threading
from pathlib import Path

import pytest
from daemon_fixtures import wait_until
from daemon_harness import ForegroundDaemon, final_reply, frame, raw_connect

from hebbs.client import Client
from hebbs.errors import DaemonBusy, DaemonUnavailable

import processes

CAP = 12
IDLE = 3.0
FRAME = 1.5


@pytest.fixture
def capped_daemon():
    daemon = ForegroundDaemon("--max-connections", str(CAP), "--connection-idle-timeout", str(IDLE),
                              "--frame-timeout", str(FRAME)).start()
    yield daemon
    daemon.stop()


def _closed(sock: socket.socket, within: float) -> bool:
    """Whether the daemon closes sock within `within` seconds (EOF or reset on read)."""
    sock.settimeout(within)
    try:
        while True:
            data = sock.recv(65536)
            if not data:
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except TimeoutError:
        return False


def _busy(daemon: ForegroundDaemon) -> socket.socket:
    """A connection in the middle of sending a request (half a header): busy, so never closed to make room."""
    sock = raw_connect(daemon.socket)
    sock.sendall(b"\x00\x00")
    return sock


def test_connections_beyond_the_cap_get_busy():
    # Without capped_daemon's short timeouts: under load its stalled connections were closed (after
    # FRAME seconds) before the checks below ran, which freed a slot for the connection meant to be refused.
    # Busy connections hold the slots: an idle one would be closed for the newcomer
    # (test_idle_connections_make_room_for_a_new_cli_call).
    daemon = ForegroundDaemon("--max-connections", str(CAP), "--frame-timeout", "600").start()
    held = [_busy(daemon) for _ in range(CAP)]
    idle: list = []
    try:
        # Over the cap: the SDK raises DaemonBusy (a DaemonUnavailable), and a raw client reads BUSY.
        with pytest.raises(DaemonBusy, match="limit"):
            daemon.client(timeout=30).ping()
        with raw_connect(daemon.socket) as extra:
            try:
                extra.sendall(frame({"id": 1, "command": {"type": "ping"}}))
            except (BrokenPipeError, ConnectionResetError):
                pass  # the daemon answers BUSY and closes at once; the request may find it gone
            reply = final_reply(extra)
            assert reply is not None and reply["status_code"] == "BUSY", reply

        # A slot freed is taken again (once the daemon has seen the close).
        held.pop().close()

        def served() -> bool:
            client = daemon.client(timeout=30)
            try:
                pong = client.ping().pong
            except DaemonBusy:
                return False
            idle.append(client)  # kept open, idle: a connection the daemon knows is there, not one closing
            return pong

        wait_until(served, 30, "a closed connection's slot to be freed")
        # The cap is reached again, by the idle connection of the client just served: it makes room
        # once the daemon counts it idle, which its thread does right after sending the reply (under
        # load the next client can be faster: it is then refused BUSY, "try again shortly").
        statuses: list = []

        def status_served() -> bool:
            try:
                statuses.append(daemon.client(timeout=30).status(vault=False))
            except DaemonBusy:
                return False
            return True

        wait_until(status_served, 30, "the idle connection to make room")
        assert statuses[0].max_connections == CAP and statuses[0].refused_busy >= 2
    finally:
        for sock in held:
            sock.close()
        for client in idle:
            client.close()
        daemon.stop()


def test_idle_connections_make_room_for_a_new_cli_call():
    """Issue 39, item 9: with the default limits (256 connections, 600 s idle timeout), 300 idle
    connections held every slot and each new CLI call got BUSY for ten minutes. Now the connection
    idle longest is closed for a newcomer; an SDK client whose idle connection went reconnects."""
    daemon = ForegroundDaemon().start()
    idle: list[socket.socket] = []
    try:
        kept = daemon.client(timeout=30)
        assert kept.ping().pong
        idle = [raw_connect(daemon.socket) for _ in range(300)]
        env = {**os.environ, "HEBBS_HOME": str(daemon.home)}
        done = processes.run([str(Path(sys.executable).with_name("hebbs")), "status", "--global", "--format", "json"],
                             env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        assert kept.ping().pong  # its connection was the longest idle: closed, and it reconnected
        assert daemon.client(timeout=30).status(vault=False).connections <= 256
        log = daemon.log()
        assert "closed the connection idle longest" in log and "Traceback" not in log
    finally:
        for sock in idle:
            sock.close()
        daemon.stop()


def test_idle_or_stalled_connections_are_closed(capped_daemon):
    daemon = capped_daemon
    idle = [raw_connect(daemon.socket) for _ in range(CAP - 4)]
    # Stalled: half a header, and a header announcing 100 bytes followed by 10.
    half_header = raw_connect(daemon.socket)
    half_header.sendall(b"\x00\x00")
    half_body = raw_connect(daemon.socket)
    half_body.sendall(frame(b"{" + b" " * 99)[:14])
    # A client that sends requests and never reads the replies (an export of a big vault would do;
    # here many pings whose replies fill the socket buffers).
    deaf = raw_connect(daemon.socket)
    deaf_sender = threading.Thread(target=_flood_without_reading, args=(deaf,), daemon=True)
    deaf_sender.start()
    working = daemon.client(timeout=30)
    assert working.ping().pong  # the CAP-th connection

    # The stalled ones go after FRAME seconds, the idle ones after IDLE seconds of silence.
    assert _closed(half_header, FRAME + 5) and _closed(half_body, FRAME + 5)
    assert all(_closed(s, IDLE + 5) for s in idle)
    deaf_sender.join(FRAME + 10)
    assert not deaf_sender.is_alive(), "the connection that never read its replies is still open"

    # Room again: new clients are served, and the one that stayed (idle past the timeout) reconnects.
    assert daemon.client(timeout=30).ping().pong
    assert working.ping().pong
    log = daemon.log()
    assert "Traceback" not in log
    assert "stalled" in log and "idle" in log


def _flood_without_reading(sock: socket.socket) -> None:
    request = frame({"id": 1, "command": {"type": "status"}})
    try:
        for _ in range(200_000):
            sock.sendall(request)
    except OSError:
        pass  # the daemon closed it: what the test waits for


def test_a_storm_of_refused_connections_logs_a_few_lines():
    # The cap without capped_daemon's 3 s idle timeout: the held connections must stay held for all
    # 300 attempts. Under load the attempts took longer than 3 s, the daemon closed idle ones and let
    # pings in (220 of 300 refused).
    daemon = ForegroundDaemon("--max-connections", str(CAP), "--frame-timeout", "600").start()
    held = [_busy(daemon) for _ in range(CAP)]
    try:
        refused = 0
        for _ in range(300):
            try:
                Client(global_=True, home=daemon.home, autostart=False, timeout=10).ping()
            except DaemonUnavailable:
                refused += 1
        assert refused == 300
        lines = [line for line in daemon.log().splitlines() if "refusing a connection" in line]
        assert 1 <= len(lines) <= 12, len(lines)  # rate-limited: 10 a minute, then one summary
    finally:
        for s in held:
            s.close()
        daemon.stop()


def test_the_sdk_raises_daemon_unavailable_not_blocking_io_error_when_the_daemon_cannot_accept(monkeypatch):
    monkeypatch.setattr("hebbs.transport.CONNECT_TIMEOUT", 0.5)
    home = Path(tempfile.mkdtemp(prefix="hbq", dir="/tmp"))
    # A daemon that stopped accepting: its queue of new connections is full (connect gives EAGAIN).
    swamped = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    swamped.bind(str(home / "daemon.sock"))
    swamped.listen(0)
    queued = []
    try:
        while True:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.setblocking(False)
            try:
                s.connect(str(home / "daemon.sock"))
            except BlockingIOError:
                s.close()
                break
            queued.append(s)
        with pytest.raises(DaemonUnavailable, match="not accepting connections"):
            Client(global_=True, home=home, autostart=False).ping()
        swamped.close()
        with pytest.raises(DaemonUnavailable):  # and nobody listening at all
            Client(global_=True, home=home, autostart=False).ping()
    finally:
        for s in queued:
            s.close()
        swamped.close()
        shutil.rmtree(home, ignore_errors=True)


def test_the_descriptor_limit_is_raised_at_start_and_the_cap_fits_in_it():
    raised = ForegroundDaemon(fd_limits=(256, 4096)).start()
    try:
        assert raised.soft_fd_limit() == 4096
        assert raised.client().status(vault=False).max_connections == 256  # the default fits in 4096
    finally:
        raised.stop()
    tight = ForegroundDaemon("--max-connections", "1000", fd_limits=(300, 300)).start()
    try:
        assert tight.soft_fd_limit() == 300
        assert tight.client().status(vault=False).max_connections == 100  # 300 less the reserve
        assert "leaves room for 100 connections" in tight.log()
    finally:
        tight.stop()


def test_log_lines_are_rate_limited_cut_and_rotated(tmp_path: Path):
    from hebbs.daemon.logsetup import BACKUPS, MAX_RECORD_CHARS, setup_logging

    saved = os.dup(1), os.dup(2)
    handler = setup_logging(tmp_path / "daemon.log", "INFO", max_bytes=20_000)
    try:
        log = logging.getLogger("hebbs.test.rotation")
        for n in range(2000):
            log.warning("the same complaint, again")  # one call site and template: rate-limited
            log.info(f"distinct line {n} {'y' * 50}" if n % 10 else f"long {n} {'z' * 100_000}")
        files = sorted(p.name for p in tmp_path.iterdir())
        assert files == ["daemon.log"] + [f"daemon.log.{i}" for i in range(1, BACKUPS + 1)], files
        assert all(p.stat().st_size <= 20_000 + MAX_RECORD_CHARS + 200 for p in tmp_path.iterdir())
        text = "".join(p.read_text() for p in tmp_path.iterdir())
        assert text.count("the same complaint") <= 11
        assert "characters cut" in text
        # Native output (fd 1 and 2) follows the log into the current file after each rotation.
        os.write(2, b"native library says hello\n")
        assert "native library says hello" in (tmp_path / "daemon.log").read_text()
    finally:
        logging.getLogger().removeHandler(handler)
        handler.close()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)


def test_daemon_limits_come_from_config_toml_unless_a_flag_or_variable_says_otherwise():
    configured = ForegroundDaemon()
    (configured.home / "config.toml").write_text("[daemon]\nmax_connections = 7\nframe_timeout = 12.5\n")
    try:
        configured.start()
        assert configured.client().status(vault=False).max_connections == 7
    finally:
        configured.stop()
    flagged = ForegroundDaemon("--max-connections", "9")
    (flagged.home / "config.toml").write_text("[daemon]\nmax_connections = 7\n")
    try:
        flagged.start()
        assert flagged.client().status(vault=False).max_connections == 9
    finally:
        flagged.stop()


def test_a_broken_daemon_section_stops_the_start_with_a_clear_error(tmp_path: Path):
    home = tmp_path / "h"
    home.mkdir()
    (home / "config.toml").write_text("[daemon]\nmax_conections = 7\n")
    run = processes.run([sys.executable, "-m", "hebbs.daemon", "--home", str(home)], capture_output=True,
                         text=True, timeout=60)
    assert run.returncode == 2
    assert "max_conections" in run.stderr and "Traceback" not in run.stderr
