"""Who may use which vault of a PostgreSQL store (issue 42): `hebbs team` makes a login role per teammate
and grants it vaults; a role granted vault A does a daemon's whole work on A (index, remember, recall,
its listener's LISTEN) and cannot read, write or even name vault B, with hebbs or with SQL of its own."""

from __future__ import annotations

import json
import stat
import uuid
from pathlib import Path

import psycopg

pytest_plugins = ["daemon_fixtures"]

NOTE = """# {title}

## Secret
The {title} vault's door code is {code}.
"""


def _vault_id(admin: str, name: str) -> int:
    with psycopg.connect(admin) as conn:
        return conn.execute("SELECT id FROM hebbs.vaults WHERE name = %s", (name,)).fetchone()[0]


def test_a_role_granted_one_vault_works_there_and_cannot_reach_another(pg_server, tmp_path: Path):
    from daemon_fixtures import DaemonHome, short_tmp, wait_until

    home = DaemonHome()
    suffix = uuid.uuid4().hex[:8]
    alice, bob = f"alice_{suffix}", f"bob_{suffix}"
    vault_a, vault_b = f"a-{suffix}", f"b-{suffix}"
    admin = pg_server.url

    def url(role: str) -> str:
        return f"postgresql://{role}@127.0.0.1:{pg_server.port}/postgres?passfile={tmp_path / role}.pgpass"

    try:
        folders = {}
        for role, vault, code in ((alice, vault_a, "4711"), (bob, vault_b, "9000")):
            made = home.hebbs("team", "add-role", role, "--store", admin, "--passfile", f"{tmp_path / role}.pgpass")
            assert "may log in" in made.stdout
            assert stat.S_IMODE((tmp_path / f"{role}.pgpass").stat().st_mode) == 0o600
            granted = home.hebbs("team", "grant", role, "--store", admin, "--name", vault)
            assert f"{role} may use vault {vault!r}" in granted.stdout
            notes = folders[role] = short_tmp("hbt")
            (notes / "door.md").write_text(NOTE.format(title=vault, code=code))
            home.hebbs("init", str(notes), "--store", url(role), "--name", vault)
            # The daemon's whole work on its vault, as that role: index, remember, recall.
            indexed = home.hebbs("index", str(notes), "--format", "json")
            assert json.loads(indexed.stdout)["sections_total"] >= 1, indexed.stdout
            home.hebbs("remember", f"the {vault} alarm code is {code}1", "--vault", str(notes))
            found = home.hebbs("recall", f"{vault} door code", "--vault", str(notes), "--format", "json").stdout
            assert code in found and code + "1" in home.hebbs("recall", "alarm code", "--vault", str(notes)).stdout
        id_a, id_b = _vault_id(admin, vault_a), _vault_id(admin, vault_b)

        # Each daemon's listener is its own role's session, LISTENing on its vault's channel.
        def listening() -> set[tuple[str, str]]:
            with psycopg.connect(admin) as conn:
                return {(user, query) for user, query in conn.execute(
                    "SELECT usename, query FROM pg_stat_activity WHERE query LIKE 'LISTEN hebbs_%'").fetchall()}
        wait_until(lambda: {(alice, f"LISTEN hebbs_{id_a}"), (bob, f"LISTEN hebbs_{id_b}")} <= listening(),
                   what="both daemons to LISTEN as their roles")

        # Alice's credentials, SQL of her own: vault B does not exist for her.
        with psycopg.connect(url(alice), autocommit=True) as conn:
            assert [name for name, in conn.execute("SELECT name FROM hebbs.vaults")] == [vault_a]
            for table in ("memories", "vectors", "changes", "meta", "temporal", "claims"):
                seen = {vault for vault, in conn.execute(f"SELECT DISTINCT vault FROM hebbs.{table}")}
                assert seen <= {id_a}, (table, seen)
                assert conn.execute(f"SELECT count(*) FROM hebbs.{table} WHERE vault = %s", (id_b,)).fetchone() == (0,)
            assert conn.execute("UPDATE hebbs.vaults SET seq = seq + 1 WHERE id = %s", (id_b,)).rowcount == 0
            assert conn.execute("DELETE FROM hebbs.memories WHERE vault = %s", (id_b,)).rowcount == 0
            for statement in (f"INSERT INTO hebbs.meta (vault, key, value) VALUES ({id_b}, 'x', 'y')",
                              f"UPDATE hebbs.vaults SET name = 'mine' WHERE id = {id_a}",
                              "INSERT INTO hebbs.vaults (name) VALUES ('another')",
                              "ALTER TABLE hebbs.memories DISABLE ROW LEVEL SECURITY"):
                try:
                    conn.execute(statement)
                except psycopg.errors.InsufficientPrivilege:
                    continue
                raise AssertionError(f"alice was allowed: {statement}")
        with psycopg.connect(admin) as conn:  # B untouched by all that
            assert conn.execute("SELECT count(*) FROM hebbs.memories WHERE vault = %s", (id_b,)).fetchone()[0] >= 2

        # Alice's credentials through hebbs, naming vault B: refused, typed, and nothing of B shown.
        elsewhere = short_tmp("hbt")
        home.hebbs("init", str(elsewhere), "--store", url(alice), "--name", vault_b)
        refused = home.hebbs("recall", "door code", "--vault", str(elsewhere), check=False)
        said = refused.stdout + refused.stderr
        assert refused.returncode == 1 and "ACCESS_DENIED" in said and vault_b in said and "9000" not in said, said
        assert "Traceback" not in said
        # The panel's overview: a page with the vault refused, never an HTTP 500 (docs/palace.md).
        from test_postgres_outage import _overview

        panel = home.palace()
        status, page = _overview(panel["port"], panel["url"].split("token=", 1)[1])
        assert status == 200 and "may not use it" in page and vault_b in page and "9000" not in page

        listed = json.loads(home.hebbs("team", "list", "--store", admin, "--format", "json").stdout)
        granted = {v["vault"]: v["granted_to"] for v in listed if v["vault"] in (vault_a, vault_b)}
        assert granted == {vault_a: [alice], vault_b: [bob]}

        # Revoked, alice's own SQL reaches nothing of the schema any more (its usage came with A's role).
        assert "may no longer use" in home.hebbs("team", "revoke", alice, "--store", admin, "--name", vault_a).stdout
        with psycopg.connect(url(alice), autocommit=True) as conn:
            for table in ("memories", "vaults"):
                try:
                    conn.execute(f"SELECT count(*) FROM hebbs.{table}")
                except psycopg.errors.InsufficientPrivilege:
                    continue
                raise AssertionError(f"alice still reads hebbs.{table}")
        refused = home.hebbs("remember", "after the revoke", "--vault", str(folders[alice]), check=False)
        assert refused.returncode == 1 and "ACCESS_DENIED" in refused.stdout + refused.stderr, refused
    finally:
        home.stop()
        with psycopg.connect(admin, autocommit=True) as conn:
            for vault in (vault_a, vault_b):
                if conn.execute("SELECT 1 FROM hebbs.vaults WHERE name = %s", (vault,)).fetchone():
                    home.hebbs("team", "drop-vault", "--store", admin, "--name", vault, check=False)
            for role in (alice, bob):
                conn.execute(f'DROP ROLE IF EXISTS "{role}"')


def test_drop_vault_removes_its_rows_and_its_role(pg_server):
    from daemon_fixtures import DaemonHome, short_tmp

    home = DaemonHome()
    suffix = uuid.uuid4().hex[:8]
    notes = short_tmp("hbt")
    (notes / "door.md").write_text(NOTE.format(title="gone", code="1234"))
    try:
        home.hebbs("team", "grant", "postgres", "--store", pg_server.url, "--name", f"gone-{suffix}")
        home.hebbs("init", str(notes), "--store", pg_server.url, "--name", f"gone-{suffix}")
        home.hebbs("index", str(notes))
        vault_id = _vault_id(pg_server.url, f"gone-{suffix}")
        home.hebbs("daemon", "stop")
        dropped = home.hebbs("team", "drop-vault", "--store", pg_server.url, "--name", f"gone-{suffix}")
        assert f"dropped vault 'gone-{suffix}'" in dropped.stdout and "memories" in dropped.stdout
        with psycopg.connect(pg_server.url) as conn:
            for table in ("memories", "vectors", "changes", "meta", "temporal", "claims"):
                assert conn.execute(f"SELECT count(*) FROM hebbs.{table} WHERE vault = %s",
                                    (vault_id,)).fetchone() == (0,)
            assert conn.execute("SELECT count(*) FROM hebbs.vaults WHERE id = %s", (vault_id,)).fetchone() == (0,)
            assert conn.execute("SELECT count(*) FROM pg_roles WHERE rolname = %s",
                                (f"hebbs_vault_{vault_id}",)).fetchone() == (0,)
        again = home.hebbs("team", "drop-vault", "--store", pg_server.url, "--name", f"gone-{suffix}", check=False)
        assert again.returncode == 1 and "no vault" in again.stdout + again.stderr
    finally:
        home.stop()


def test_add_role_refuses_a_name_or_a_file_it_cannot_keep(pg_server, tmp_path: Path):
    from daemon_fixtures import DaemonHome

    home = DaemonHome()
    role = f"carol_{uuid.uuid4().hex[:8]}"
    kept = tmp_path / "kept.pgpass"
    kept.write_text("someone else's\n")
    try:
        bad = home.hebbs("team", "add-role", "Carol:x", "--store", pg_server.url, "--passfile", str(tmp_path / "c"),
                         check=False)
        assert bad.returncode == 1 and "INVALID_REQUEST" in bad.stdout + bad.stderr and not (tmp_path / "c").exists()
        taken = home.hebbs("team", "add-role", role, "--store", pg_server.url, "--passfile", str(kept), check=False)
        assert taken.returncode == 1 and "exists" in taken.stdout + taken.stderr
        assert kept.read_text() == "someone else's\n"
        with psycopg.connect(pg_server.url) as conn:  # no role whose password went nowhere
            assert conn.execute("SELECT count(*) FROM pg_roles WHERE rolname = %s", (role,)).fetchone() == (0,)
    finally:
        home.stop()
