"""A vault in PostgreSQL shared by several engines (as by daemons on several machines): each engine's
catalog and indexes are its own, caught up by sequence; writers of all engines are serialized.
Real PostgreSQL with pgvector (pg_fixtures.py). The engine-level suite runs on this store too
(conftest.BOTH_STORES)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from hebbs import Engine
from hebbs.errors import KeyReused
from pg_fixtures import attach

pytest_plugins = ["daemon_fixtures"]


def _wait(predicate, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


@pytest.fixture
def pair(tmp_path: Path, pg_server, embedder):
    """Two engines, in two directories (two machines), attached to one vault."""
    name = attach(tmp_path / "a", pg_server.url)
    attach(tmp_path / "b", pg_server.url, name)
    a = Engine.open(tmp_path / "a", embedder=embedder)
    b = Engine.open(tmp_path / "b", embedder=embedder)
    yield a, b
    a.close()
    b.close()


def _recalls(engine: Engine, cue: str, memory_id: str) -> bool:
    return any(r.memory.id == memory_id for r in engine.recall(cue, top_k=5))


def test_a_write_reaches_the_other_engine_and_its_indexes(pair):
    a, b = pair
    m = a.remember("the staging database is called quokka7", entity_id="infra")
    # The writer reads its own write at once; the other engine is woken by NOTIFY and catches up.
    assert _recalls(a, "quokka7", m.id)
    _wait(lambda: b.vault.write_seq >= a.vault.write_seq)
    assert m.id in b.vault and b.get(m.id).content == m.content
    assert [r.memory.id for r in b.recall("quokka7", strategies=["lexical"])] == [m.id]  # BM25, local to b
    assert b.recall("what is the staging database called", strategies=["similarity"])[0].memory.id == m.id  # HNSW
    b.forget(m.id)
    _wait(lambda: m.id not in a.vault)
    assert not _recalls(a, "quokka7", m.id)


def test_idempotency_keys_hold_across_engines(pair):
    a, b = pair
    first = a.remember("deploys go out on Tuesdays", key="deploy-day")
    again = b.remember("deploys go out on Tuesdays", key="deploy-day")
    assert again.id == first.id and again.existing
    with pytest.raises(KeyReused, match="deploys go out on Tuesdays"):  # other text: refused, in either engine
        b.remember("deploys go out on Wednesdays", key="deploy-day")
    # b wrote nothing (the key named a's memory), so its catalog learns of it by catch-up, not at once.
    _wait(lambda: b.count() == 1)
    assert a.count() == 1


def test_concurrent_revisions_and_reinforcements_lose_nothing(pair):
    a, b = pair
    m = a.remember("version 0")
    _wait(lambda: m.id in b.vault)
    errors: list[BaseException] = []

    def work(engine: Engine, tag: str) -> None:
        try:
            for n in range(8):
                engine.revise(m.id, content=f"version {tag}{n}")
                engine.reinforce(m.id)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(engine, tag)) for engine, tag in ((a, "a"), (b, "b"))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    # Every version is either the current text or kept as a revision: no writer overwrote another's
    # read-modify-write, and every reinforcement counted.
    texts = {a.get(m.id).content, *(r.content for r in a.history(m.id))}
    assert texts == {"version 0", *(f"version {t}{n}" for t in "ab" for n in range(8))}
    assert a.get(m.id).access_count == 16


def test_a_reopened_engine_catches_up_what_others_wrote_meanwhile(tmp_path, pg_server, embedder):
    name = attach(tmp_path / "a", pg_server.url)
    attach(tmp_path / "b", pg_server.url, name)
    with Engine.open(tmp_path / "a", embedder=embedder) as a:
        kept = a.remember("the office wifi is called heron")
    with Engine.open(tmp_path / "b", embedder=embedder) as b:
        new = b.remember("the printer on floor three is named osprey")
        b.forget(kept.id)
    with Engine.open(tmp_path / "a", embedder=embedder) as a:
        assert kept.id not in a.vault and new.id in a.vault
        assert [r.memory.id for r in a.recall("osprey", strategies=["lexical"])] == [new.id]
        assert a.vault.indexed_count() == 1


def test_every_write_is_numbered_once_in_the_change_log(pair, pg_server):
    a, b = pair
    a.remember_many([{"content": f"fact {n}"} for n in range(5)])
    b.remember("one more fact")
    store = a.vault.store
    head = store.head_seq()
    assert store.touched_since(0, head) is not None  # every sequence number has its entry, none skipped
    assert len(store.touched_since(0, head)) == 6 == len(store._run(
        "SELECT 1 FROM hebbs.memories WHERE vault = %s", (store.vault_id,)))


def test_a_password_never_goes_into_the_config(tmp_path, embedder):
    from hebbs.errors import InvalidInput

    (tmp_path / "v").mkdir()
    (tmp_path / "v" / "config.toml").write_text('[store]\nurl = "postgresql://me:secret@db/x"\nname = "n"\n')
    with pytest.raises(InvalidInput, match="must not hold a password"):
        Engine.open(tmp_path / "v", embedder=embedder)
    # Nor into the replicas' URL.
    (tmp_path / "v" / "config.toml").write_text('[store]\nurl = "postgresql://db/x"\nname = "n"\n'
                                                'read_url = "postgresql://me:secret@db2/x"\n')
    with pytest.raises(InvalidInput, match="must not hold a password"):
        Engine.open(tmp_path / "v", embedder=embedder)


# Attaching folders through the CLI and daemons -------------------------------------------------

def test_init_attaches_two_folders_to_one_vault_and_status_says_where(pg_server, tmp_path):
    from daemon_fixtures import DaemonHome, short_tmp

    one, two = DaemonHome(), DaemonHome()  # two homes: two machines' daemons
    first, second = short_tmp("hbn"), short_tmp("hbn")
    name = f"team-{first.name}"
    try:
        made = one.hebbs("init", str(first), "--store", pg_server.url, "--name", name)
        assert "created vault" in made.stdout
        config = (first / ".hebbs" / "config.toml").read_text()
        assert f'url = "{pg_server.url}"' in config and f'name = "{name}"' in config
        two.hebbs("init", str(second), "--store", pg_server.url, "--name", name)
        one.hebbs("remember", "the release train leaves on Thursdays", cwd=first)
        status = two.hebbs("status", cwd=second).stdout
        where = f"PostgreSQL 127.0.0.1:{pg_server.port}/postgres vault '{name}'"
        assert f"kept in {where}" in status and "postgres@" not in status  # servers and name, no user
        assert f"kept in {where}" in two.hebbs("list", str(second), cwd=second).stdout
        assert f"kept in {where}" in _panel_overview(two)
        found = two.hebbs("recall", "when does the release train leave", cwd=second).stdout
        assert "release train leaves on Thursdays" in found
        # The default name is the folder's: a third folder of another name is another vault.
        third = short_tmp("hbn")
        one.hebbs("init", str(third), "--store", pg_server.url)
        assert f'name = "{third.name}"' in (third / ".hebbs" / "config.toml").read_text()
        assert "release train" not in one.hebbs("recall", "release train", cwd=third).stdout
        refused = one.hebbs("init", str(short_tmp("hbn")), "--store", "postgresql://me:secret@db/x", check=False)
        assert refused.returncode != 0 and "must not hold a password" in refused.stderr
        assert "Traceback" not in refused.stderr
    finally:
        one.cleanup()
        two.cleanup()


def _panel_overview(home) -> str:
    """The panel's overview page as a browser gets it (the token traded for its cookie), as text."""
    import html
    import http.client
    import re

    served = home.palace()
    port, url = served["port"], served["url"]

    def get(path: str, headers: dict[str, str]) -> http.client.HTTPResponse:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        conn.request("GET", path, headers=headers)
        response = conn.getresponse()
        response.body = response.read().decode()
        conn.close()
        return response
    cookie = get("/?token=" + url.split("token=", 1)[1], {}).getheader("Set-Cookie").split(";", 1)[0]
    # What a browser sends when the person opens the address: the panel serves a cookie nothing else.
    page = get("/", {"Cookie": cookie, "Sec-Fetch-Site": "none", "Sec-Fetch-Mode": "navigate"})
    assert page.status == 200
    return html.unescape(re.sub(r"<[^>]+>", " ", page.body))


def test_similar_through_pgvector_finds_what_the_local_index_finds(tmp_path, pg_server, embedder):
    """store.similar = "pgvector": a daemon holds no vector in RAM (a vault larger than its memory)."""
    name = attach(tmp_path / "local", pg_server.url)
    attach(tmp_path / "remote", pg_server.url, name)
    with open(tmp_path / "remote" / "config.toml", "a") as config:
        config.write('similar = "pgvector"\n')
    facts = ["the cafeteria closes at three", "backups run nightly at two", "the VPN needs a hardware key",
             "payroll is processed on the 25th", "the lobby printer jams on A3 paper"]
    with Engine.open(tmp_path / "local", embedder=embedder) as local, \
            Engine.open(tmp_path / "remote", embedder=embedder) as remote:
        local.remember_many([{"content": f} for f in facts])
        _wait(lambda: remote.vault.write_seq == local.vault.write_seq)
        assert type(remote.vault.vector_index).__name__ == "PgVectorIndex"
        # A table this small is scanned whole; the plan shows that the HNSW index answers once it is not.
        plan = pg_server.sql("SET enable_seqscan = off; SET enable_bitmapscan = off; SET enable_sort = off; "
                             "EXPLAIN SELECT key FROM hebbs.vectors WHERE vault = "
                             f"{remote.vault.store.vault_id} ORDER BY (embedding::vector(384)) <=> "
                             f"(SELECT embedding FROM hebbs.vectors LIMIT 1)::vector(384) LIMIT 5")
        assert "hnsw" in plan
        for cue in ("when are backups taken", "which paper size breaks the printer"):
            ours = [r.memory.id for r in remote.recall(cue, strategies=["similarity"], top_k=3)]
            theirs = [r.memory.id for r in local.recall(cue, strategies=["similarity"], top_k=3)]
            assert ours == theirs
        # Past pgvector's ef_search limit (1000) an iterative scan still returns every row asked for.
        cue_vector = embedder.embed_query("printer")
        assert len(remote.vault.similar_wide(cue_vector, 1200, ef=1500)) == len(facts)
        remote.forget(ours[0])
        assert ours[0] not in [r.memory.id for r in remote.recall(cue, strategies=["similarity"], top_k=3)]


def test_the_change_log_is_pruned_and_a_daemon_left_behind_reads_the_vault_again(tmp_path, pg_server, embedder,
                                                                                   monkeypatch):
    from hebbs.store import postgres

    monkeypatch.setattr(postgres, "KEEP_CHANGES", 6)
    monkeypatch.setattr(postgres, "PRUNE_EVERY", 3)
    name = attach(tmp_path / "a", pg_server.url)
    attach(tmp_path / "b", pg_server.url, name)
    with Engine.open(tmp_path / "a", embedder=embedder) as a:
        first = a.remember("the first note, from before b opened")
        # b hears nothing from the others (no listener): it stays behind until it is asked to catch up.
        monkeypatch.setattr(postgres.PgStore, "listen", lambda self, on_change, interval=1.0: None)
        with Engine.open(tmp_path / "b", embedder=embedder) as b:
            ids = [a.remember(f"note {n} about the walrus{n} migration").id for n in range(20)]
            a.forget(first.id)
            vault_id = a.vault.store.vault_id
            kept = int(pg_server.sql(f"SELECT count(*) FROM hebbs.changes WHERE vault = {vault_id}"))
            assert kept <= 6 + 3  # the log keeps the last KEEP_CHANGES writes, pruned every PRUNE_EVERY
            # Its catalog as it was (count() would catch up first, as every read of the store does).
            assert len(list(b.vault.entries())) == 1 and first.id in b.vault
            b.vault.catch_up()  # its stamp is older than the log: the vault is read again, not refused
            assert b.count() == a.count() == 20 and first.id not in b.vault
            assert [r.memory.id for r in b.recall("walrus7", strategies=["lexical"], top_k=1)] == [ids[7]]


def test_a_failing_postgres_program_says_what_it_printed(pg_server):
    """The local cluster's errors carry the program's own words (a test that fails on one says why),
    where CalledProcessError named only the command and its exit code."""
    from scripts.postgres_local import ToolFailed

    with pytest.raises(ToolFailed) as failed:
        pg_server.sql("select no_such_column from pg_class")
    assert 'column "no_such_column" does not exist' in str(failed.value)
    assert failed.value.returncode != 0 and "psql" in failed.value.cmd[0]


@pytest.mark.parametrize("args, said", [
    (["start", "{file}"], "cannot start PostgreSQL in {file}: [Errno 17] File exists"),
    (["start", "{dir}", "--port", "70000"], "argument --port: '70000' is not a TCP port (1-65535)"),
    (["stop", "{dir}"], "no server is running in {dir}"),
])
def test_the_local_server_command_says_what_is_wrong(tmp_path: Path, args: list[str], said: str) -> None:
    """`python -m scripts.postgres_local` (docs/scale.md) given a file for its folder, a port that is
    none, or a folder with no server: one line saying so, never a traceback."""
    import sys

    import processes

    places = {"file": str(tmp_path / "a-file"), "dir": str(tmp_path / "pg")}
    Path(places["file"]).write_text("not a folder")
    done = processes.run([sys.executable, "-m", "scripts.postgres_local", *(a.format(**places) for a in args)],
                         capture_output=True, text=True, timeout=120)
    assert done.returncode != 0 and "Traceback" not in done.stderr, done.stderr
    assert said.format(**places) in done.stderr
    assert not (tmp_path / "pg").exists()  # nothing made for a command that failed


def test_a_port_taken_before_the_server_binds_it_is_replaced(monkeypatch: pytest.MonkeyPatch) -> None:
    """free_port's port is free only when it is chosen: here the test holds it, deterministically, when
    the primary and then the replica first try to bind theirs. Each starts on another port, and both serve."""
    import socket

    from scripts import postgres_local
    from pg_fixtures import running_cluster

    held = socket.socket()
    held.bind(("127.0.0.1", 0))
    held.listen(1)
    taken = held.getsockname()[1]
    handed: list[int] = []

    def free_port() -> int:
        # Every second port handed out is the held one: the first try of each server fails to bind.
        port = taken if len(handed) % 2 == 0 else real_free_port()
        handed.append(port)
        return port

    real_free_port = postgres_local.free_port
    monkeypatch.setattr(postgres_local, "free_port", free_port)
    try:
        with running_cluster(replicas=1) as cluster:
            assert handed.count(taken) == 2 and len(handed) == 4
            primary, replica = cluster.servers
            assert taken not in (primary.port, replica.port)
            primary.sql("CREATE TABLE moved (n int); INSERT INTO moved VALUES (7)")
            _wait(lambda: replica.sql("SELECT count(*) FROM pg_tables WHERE tablename = 'moved'") == "1")
            assert replica.sql("SELECT n FROM moved") == "7"
            assert f"127.0.0.1:{replica.port}" in cluster.multi_host_url()
    finally:
        held.close()


def test_the_local_server_listens_on_the_port_its_url_names(tmp_path: Path) -> None:
    """`python -m scripts.postgres_local start DIR --port N` on a folder an earlier start made (here one
    that failed on a taken port): the server listens on N, the port of the URL it prints, where it kept
    listening on the first start's port and printed a URL nobody answered."""
    import socket
    import subprocess
    import sys

    import processes
    from daemon_fixtures import free_port
    from scripts.postgres_local import Cluster, Server

    def local(*args: str) -> subprocess.CompletedProcess:
        return processes.run([sys.executable, "-m", "scripts.postgres_local", *args], capture_output=True,
                             text=True, timeout=120)

    folder = tmp_path / "pg"
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen(1)
        first = local("start", str(folder), "--port", str(held.getsockname()[1]))
    assert first.returncode == 1 and "Address already in use" in first.stderr and "Traceback" not in first.stderr
    port = free_port()
    try:
        started = local("start", str(folder), "--port", str(port))
        assert started.returncode == 0, started.stderr
        assert f"postgresql://postgres@127.0.0.1:{port}/postgres" in started.stdout
        assert Server(folder, "primary", port, Cluster(folder).account).sql("SELECT 1") == "1"
    finally:
        local("stop", str(folder))


def test_the_local_server_refuses_a_connection_without_its_password(pg_server) -> None:
    """The local server trusts nobody: a connection without the password is refused, from this user and
    from another OS user, who cannot read the 0600 password file; with the file named in the URL (what
    `start` prints) it is let in."""
    import os
    import stat
    import subprocess

    import psycopg

    from scripts.postgres_local import runnable_binaries

    bare = f"host=127.0.0.1 port={pg_server.port} user=postgres dbname=postgres passfile=/nonexistent connect_timeout=5"
    with pytest.raises(psycopg.OperationalError, match="password"):
        psycopg.connect(bare)
    passfile = pg_server.passfile
    mode = passfile.stat()
    assert stat.S_IMODE(mode.st_mode) == 0o600
    assert mode.st_uid == (os.geteuid() if pg_server.account is None else pg_server.account[0])
    assert "passfile=" in pg_server.url and "password" not in pg_server.url.replace("passfile", "")
    with psycopg.connect(pg_server.url, connect_timeout=5) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)
    # Another local user, given the file's path: cannot read it, so libpq has no password to send.
    if os.geteuid() == 0:
        psql = runnable_binaries(pg_server.account) / "psql"

        def as_nobody() -> None:
            os.setgroups([])
            os.setgid(65534)
            os.setuid(65534)

        done = subprocess.run([str(psql), "-w", "-AtX", "-c", "SELECT 1",
                               f"host=127.0.0.1 port={pg_server.port} user=postgres dbname=postgres "
                               f"passfile={passfile}"], capture_output=True, text=True, timeout=60,
                              preexec_fn=as_nobody, env={"PATH": os.environ.get("PATH", ""), "HOME": "/nonexistent"})
        assert done.returncode != 0 and "password" in done.stderr, (done.returncode, done.stderr)


def test_a_local_server_made_before_passwords_asks_for_one_when_started_again(tmp_path: Path) -> None:
    """A folder whose server trusted every local user (made before this release): `start` gives the
    superuser a password, writes the password file and stops trusting."""
    import psycopg

    from scripts.postgres_local import Cluster

    cluster = Cluster(tmp_path / "pg")
    try:
        server = cluster.start_primary()
        server.sql("SELECT 1")
        server.stop()
        hba = server.data / "pg_hba.conf"
        hba.write_text(hba.read_text().replace("scram-sha-256", "trust"))
        server.passfile.unlink()
        again = Cluster(tmp_path / "pg")
        restarted = again.start_primary(server.port)
        assert restarted.passfile.exists()
        with psycopg.connect(restarted.url, connect_timeout=5) as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
        with pytest.raises(psycopg.OperationalError, match="password"):
            psycopg.connect(f"host=127.0.0.1 port={restarted.port} user=postgres dbname=postgres "
                            "passfile=/nonexistent connect_timeout=5")
    finally:
        cluster.remove()
