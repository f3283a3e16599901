"""Who may use which vault of a PostgreSQL store: one database role per vault (`hebbs team`, docs/scale.md).

Every table of the schema `hebbs` is keyed by vault first; row-level security keeps each role to the
vaults whose roles it holds:

    hebbs_vault_<id>        the vault's role (NOLOGIN): whoever is granted it uses the vault
    policy hebbs_vault_role on every table: a row is seen, written and deleted only by a member of its
                            vault's role

The policies find a vault's role by its name, not by its oid: a dump restored on another server, whose
roles were made again (pg_dumpall --roles-only), keeps who may use what.

The vault's role holds what a daemon's work on the vault needs and nothing else: the rows of its vault
in every table (select, insert, update, delete), the vault's write sequence (`UPDATE (seq)` of its row:
no rename), LISTEN and advisory locks (open to every role). The tables' owner
and superusers are not bound by the policies (PostgreSQL's rule): they run `hebbs team` and migrations.
A teammate logs in as a role of their own (`add-role`), granted one vault role per vault they may use.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import re
import secrets
from dataclasses import dataclass
from pathlib import Path

import psycopg
from psycopg import sql

from ..errors import InvalidInput, StoreUnavailable
from .postgres import _DDL, SCHEMA, TABLES, servers

POLICY = "hebbs_vault_role"
ROLE_PREFIX = "hebbs_vault_"
# Whether the session's role holds the role of the vault whose id is `id` (a role that does not exist: no).
_MAY_USE = (f"EXISTS (SELECT 1 FROM pg_roles r WHERE r.rolname = '{ROLE_PREFIX}' || id "
            "AND pg_has_role(r.oid, 'USAGE'))")
# Every table keyed by vault (hebbs.vaults is keyed by id, its own policy below).
VAULT_TABLES = ("changes", "claims", "vectors", *(table for family, table in TABLES.items() if family != "vectors"))
_SCRAM_ITERATIONS = 4096


def vault_role(vault_id: int) -> str:
    """The role of a vault: named by its id, since a vault's name may be anything and up to any length."""
    return f"{ROLE_PREFIX}{vault_id}"


def _scram_verifier(password: str) -> str:
    """The SCRAM-SHA-256 verifier PostgreSQL stores for a password (RFC 5803): sent instead of the
    password, so that no server log (log_statement = 'ddl') ever holds the password itself."""
    salt = os.urandom(16)
    salted = hashlib.pbkdf2_hmac("sha256", password.encode(), salt, _SCRAM_ITERATIONS)
    client_key = hmac.new(salted, b"Client Key", hashlib.sha256).digest()
    stored_key = hashlib.sha256(client_key).digest()
    server_key = hmac.new(salted, b"Server Key", hashlib.sha256).digest()
    b64 = lambda raw: base64.b64encode(raw).decode()  # noqa: E731 - four uses on one line
    return f"SCRAM-SHA-256${_SCRAM_ITERATIONS}:{b64(salt)}${b64(stored_key)}:{b64(server_key)}"


@dataclass
class VaultAccess:
    name: str
    id: int
    role: str | None  # None: no role yet, only the tables' owner (and superusers) use it
    members: list[str]


def _connect(url: str) -> psycopg.Connection:
    try:
        return psycopg.connect(url, autocommit=True, connect_timeout=5)
    except psycopg.OperationalError as exc:
        raise StoreUnavailable(f"PostgreSQL at {servers(url)} cannot be reached ({str(exc).strip().splitlines()[0]})") \
            from None


def _refused(url: str, exc: psycopg.Error) -> InvalidInput:
    return InvalidInput(f"PostgreSQL at {servers(url)} refused: {str(exc).strip().splitlines()[0]} (hebbs team runs "
                        f"as the role that owns the schema {SCHEMA} (the one that created it, or a superuser), "
                        "which must also be allowed to create roles)")


def _secure(conn: psycopg.Connection) -> None:
    """The schema and the policies, made once (idempotent)."""
    conn.execute("SELECT pg_advisory_xact_lock(hashtext('hebbs schema'))")
    conn.execute(_DDL)
    conn.execute(f"ALTER TABLE {SCHEMA}.vaults ENABLE ROW LEVEL SECURITY")
    conn.execute(f"DROP POLICY IF EXISTS {POLICY} ON {SCHEMA}.vaults")
    conn.execute(f"CREATE POLICY {POLICY} ON {SCHEMA}.vaults USING ({_MAY_USE})")
    for table in VAULT_TABLES:
        conn.execute(f"ALTER TABLE {SCHEMA}.{table} ENABLE ROW LEVEL SECURITY")
        conn.execute(f"DROP POLICY IF EXISTS {POLICY} ON {SCHEMA}.{table}")
        # One look at the vaults (a hashed subplan), not one per row.
        conn.execute(f"CREATE POLICY {POLICY} ON {SCHEMA}.{table} USING (vault IN "
                     f"(SELECT id FROM {SCHEMA}.vaults WHERE {_MAY_USE}))")


def _vault_role(conn: psycopg.Connection, name: str) -> str:
    """The role of vault `name` (the vault and its role made when missing), with its privileges."""
    conn.execute(f"INSERT INTO {SCHEMA}.vaults (name) VALUES (%s) ON CONFLICT (name) DO NOTHING", (name,))
    vault_id = conn.execute(f"SELECT id FROM {SCHEMA}.vaults WHERE name = %s", (name,)).fetchone()[0]  # type: ignore[index]
    role = vault_role(vault_id)
    if conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)).fetchone() is None:
        conn.execute(sql.SQL("CREATE ROLE {} NOLOGIN").format(sql.Identifier(role)))
    ident = sql.Identifier(role)
    conn.execute(sql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(sql.Identifier(SCHEMA), ident))
    conn.execute(sql.SQL("GRANT SELECT, INSERT, UPDATE, DELETE ON {} TO {}").format(
        sql.SQL(", ").join(sql.Identifier(SCHEMA, table) for table in VAULT_TABLES), ident))
    conn.execute(sql.SQL("GRANT SELECT, UPDATE (seq) ON {} TO {}").format(sql.Identifier(SCHEMA, "vaults"), ident))
    return role


def add_role(url: str, role: str, passfile: Path) -> str:
    """A login role for a teammate, with a generated password written to `passfile` (libpq's format,
    0600, one line per server of `url`), which the teammate's URL names. Returns that URL (passfile=
    naming the file where it is now: the teammate puts their own path)."""
    if not re.fullmatch(r"[a-z_][a-z0-9_]{0,62}", role):
        # The name goes into a password file too, where ':' and '\\' would need escaping, and unquoted
        # into psql and URLs by whoever uses it: plain names only.
        raise InvalidInput(f"a role name is lower-case letters, digits and _ (at most 63, not starting with a "
                           f"digit), not {role!r}")
    password = secrets.token_urlsafe(24)  # letters, digits, - and _: nothing pgpass would need escaped
    try:
        # Made before the role: a role whose password went nowhere would be of no use to anyone.
        fd = os.open(passfile, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        raise InvalidInput(f"{passfile} exists; name another file (--passfile)") from None
    with os.fdopen(fd, "w") as out:
        try:
            lines, their_url = _create_login(url, role, password, passfile)
        except BaseException:
            passfile.unlink(missing_ok=True)
            raise
        out.write(lines)
    return their_url


def _create_login(url: str, role: str, password: str, passfile: Path) -> tuple[str, str]:
    """Create the login role; its password file's lines, and the teammate's URL."""
    with _connect(url) as conn:
        try:
            if conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)).fetchone() is not None:
                raise InvalidInput(f"role {role!r} exists in PostgreSQL at {servers(url)}; grant it a vault "
                                   "(hebbs team grant) or choose another name")
            conn.execute(sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(
                sql.Identifier(role), sql.Literal(_scram_verifier(password))))
        except psycopg.Error as exc:
            raise _refused(url, exc) from None
        info = conn.info
        hosts, ports, dbname = info.host.split(","), str(info.port).split(","), info.dbname
    from psycopg.conninfo import conninfo_to_dict

    given = conninfo_to_dict(url)
    hosts = str(given.get("host") or ",".join(hosts)).split(",")
    ports = str(given.get("port") or ",".join(ports)).split(",")
    ports = ports * len(hosts) if len(ports) == 1 else ports
    lines = "".join(f"{host}:{port}:{dbname}:{role}:{password}\n" for host, port in zip(hosts, ports))
    where = ",".join(f"{host}:{port}" for host, port in zip(hosts, ports))
    return lines, f"postgresql://{role}@{where}/{dbname}?passfile={passfile}"


def grant(url: str, vault: str, role: str) -> str:
    """Let `role` use vault `vault` (made when missing): the vault's role granted to it. Returns the vault's role."""
    with _connect(url) as conn:
        try:
            with conn.transaction():
                _secure(conn)
                if conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)).fetchone() is None:
                    raise InvalidInput(f"no role {role!r} in PostgreSQL at {servers(url)} (hebbs team add-role "
                                       f"{role} makes one)")
                granted = _vault_role(conn, vault)
                conn.execute(sql.SQL("GRANT {} TO {}").format(sql.Identifier(granted), sql.Identifier(role)))
        except psycopg.Error as exc:
            raise _refused(url, exc) from None
    return granted


def revoke(url: str, vault: str, role: str) -> bool:
    """Take vault `vault` from `role` (what its daemons hold open fails at their next call). False: it had none."""
    with _connect(url) as conn:
        try:
            with conn.transaction():
                _secure(conn)
                row = conn.execute(f"SELECT id FROM {SCHEMA}.vaults WHERE name = %s", (vault,)).fetchone()
                if row is None:
                    raise InvalidInput(f"no vault {vault!r} in PostgreSQL at {servers(url)}")
                granted = vault_role(row[0])
                held = conn.execute("SELECT 1 FROM pg_auth_members m JOIN pg_roles g ON g.oid = m.roleid "
                                    "JOIN pg_roles r ON r.oid = m.member WHERE g.rolname = %s AND r.rolname = %s",
                                    (granted, role)).fetchone()
                if held is not None:
                    conn.execute(sql.SQL("REVOKE {} FROM {}").format(sql.Identifier(granted), sql.Identifier(role)))
        except psycopg.Error as exc:
            raise _refused(url, exc) from None
    return held is not None


def listing(url: str) -> list[VaultAccess]:
    """Every vault of the store, its role and the roles that hold it (directly)."""
    with _connect(url) as conn:
        try:
            rows = conn.execute(
                f"SELECT v.name, v.id, g.rolname, coalesce(array_agg(r.rolname ORDER BY r.rolname) "
                f"FILTER (WHERE r.rolname IS NOT NULL), '{{}}') FROM {SCHEMA}.vaults v "
                f"LEFT JOIN pg_roles g ON g.rolname = '{ROLE_PREFIX}' || v.id "
                "LEFT JOIN pg_auth_members m ON m.roleid = g.oid LEFT JOIN pg_roles r ON r.oid = m.member "
                "GROUP BY v.name, v.id, g.rolname ORDER BY v.name").fetchall()
        except psycopg.errors.UndefinedTable:
            return []
        except psycopg.Error as exc:
            raise _refused(url, exc) from None
    return [VaultAccess(name, vault_id, role, list(members)) for name, vault_id, role, members in rows]


def drop_vault(url: str, vault: str) -> dict[str, int]:
    """Remove vault `vault` from the store: every row of it in every table, its pgvector indexes and its
    role (whoever held it loses it). Returns the rows removed, by table. Its daemons must be stopped:
    one still running would make it again, empty, at its next write."""
    with _connect(url) as conn:
        try:
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(hashtext('hebbs schema'))")
                row = conn.execute(f"SELECT id FROM {SCHEMA}.vaults WHERE name = %s", (vault,)).fetchone()
                if row is None:
                    raise InvalidInput(f"no vault {vault!r} in PostgreSQL at {servers(url)}")
                vault_id = row[0]
                removed = {table: conn.execute(f"DELETE FROM {SCHEMA}.{table} WHERE vault = %s", (vault_id,)).rowcount
                           for table in VAULT_TABLES}
                for kind in ("vector", "halfvec"):
                    conn.execute(f"DROP INDEX IF EXISTS {SCHEMA}.vectors_hnsw_{int(vault_id)}_{kind}")
                conn.execute(f"DELETE FROM {SCHEMA}.vaults WHERE id = %s", (vault_id,))
                role = vault_role(vault_id)
                if conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)).fetchone() is not None:
                    # Its privileges first: a role that holds any cannot be dropped.
                    conn.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(role)))
                    conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))
        except psycopg.Error as exc:
            raise _refused(url, exc) from None
    return removed
