"""A team vault behind Debian's pgbouncer. In transaction mode (a session's advisory lock, LISTEN and
prepared statements do not survive from one transaction to the next) the vault is refused when it opens,
with a message that says so, and the daemon stops when told to; it hung with DuplicatePreparedStatement
in its log and `hebbs daemon stop` could not stop it. In session mode it is used like the server."""

from __future__ import annotations

import json
import shutil

from pg_fixtures import pooler

pytest_plugins = ["daemon_fixtures"]


def test_a_transaction_pooler_is_refused_when_the_vault_opens_and_the_daemon_stops(pg_server):
    from daemon_fixtures import DaemonHome, alive, short_tmp, wait_until

    with pooler(pg_server, "transaction") as url:
        home = DaemonHome(idle_timeout=0)
        folder = short_tmp("hbx")
        try:
            home.hebbs("init", str(folder), "--store", url, "--name", f"tx-{folder.name}")
            pid = home.start()
            for n in range(3):  # past psycopg's prepare threshold, where the statements collided
                done = home.hebbs("remember", f"note {n} through the pooler", "--vault", str(folder / ".hebbs"),
                                  "--format", "json", check=False)
                said = json.loads(done.stderr)
                assert done.returncode != 0 and said["status_code"] == "INVALID_REQUEST", said
                assert "transaction mode" in said["error"] and "session mode" in said["error"]
            stopped = home.hebbs("daemon", "stop", check=False)
            assert stopped.returncode == 0, stopped.stdout + stopped.stderr
            wait_until(lambda: not alive(pid), what="the daemon to stop")
        finally:
            home.cleanup()
            shutil.rmtree(folder, ignore_errors=True)


def test_a_session_pooler_serves_a_vault(pg_server):
    from daemon_fixtures import DaemonHome, short_tmp

    with pooler(pg_server, "session") as url:
        home = DaemonHome(idle_timeout=0)
        folder = short_tmp("hbs")
        try:
            home.hebbs("init", str(folder), "--store", url, "--name", f"se-{folder.name}")
            home.start()
            with home.client(folder, autostart=False) as client:
                for n in range(8):
                    client.remember(f"note {n} about the quarry lantern", consolidate=False)
                assert client.count() == 8
                assert client.recall("quarry lantern", top_k=3).results
        finally:
            home.cleanup()
            shutil.rmtree(folder, ignore_errors=True)


def test_a_pooler_with_fewer_connections_than_a_daemon_needs_is_an_error_not_a_hang(pg_server):
    """pgbouncer in session mode with one server connection: a daemon needs more (its pool, the wake-ups,
    the writer lock), and its calls used to wait in the pooler's queue without end."""
    from daemon_fixtures import DaemonHome, alive, short_tmp, wait_until

    with pooler(pg_server, "session", pool_size=1) as url:
        home = DaemonHome(idle_timeout=0)
        folder = short_tmp("hbf")
        try:
            home.hebbs("init", str(folder), "--store", url, "--name", f"few-{folder.name}")
            pid = home.start()
            done = home.hebbs("remember", "a note the pooler has no room for", "--vault", str(folder / ".hebbs"),
                              "--format", "json", check=False)
            said = json.loads(done.stderr)
            assert said["status_code"] == "STORE_UNAVAILABLE", said
            assert "came free" in said["error"] and "store.pool_size" in said["error"]
            assert home.hebbs("daemon", "stop", check=False).returncode == 0
            wait_until(lambda: not alive(pid), what="the daemon to stop")
        finally:
            home.cleanup()
            shutil.rmtree(folder, ignore_errors=True)


def test_a_pool_whose_connections_stay_busy_fails_typed(pg_server, tmp_path):
    """store.pool_size 1 with its one connection held: the next call fails with STORE_UNAVAILABLE naming the
    setting, where it waited 30 s and raised PoolTimeout (answered INTERNAL)."""
    import pytest

    from hebbs.errors import StoreUnavailable
    from hebbs.store.postgres import PgStore

    store = PgStore.open(pg_server.url, f"busy-{tmp_path.name}", tmp_path, pool_size=1, unreachable_after=1)
    try:
        with store.pool.connection():
            with pytest.raises(StoreUnavailable, match="store.pool_size 1"):
                store.get_meta("anything")
        assert store.get_meta("anything") is None
    finally:
        store.close()
