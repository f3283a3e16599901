"""A vault in PostgreSQL with pgvector, shared by every daemon attached to it (docs/scale.md).

The same seam as the RocksDB store (storage.Store): the column families become tables of one schema,
`hebbs`, with the same keys and values, so every key layout, scan and workflow stays as it is:

    hebbs.vaults(id, name, seq)                    one row per vault; `seq` is its write sequence
    hebbs.<family>(vault, key bytea, value bytea)  default (as hebbs.memories), temporal, graph, meta,
                                                   vectors_associative, query_log, pending
    hebbs.vectors(vault, key bytea, embedding vector)   the memory vectors, in pgvector
    hebbs.changes(vault, seq, ids bytea)           which memories each write touched: write_seq + change log

bytea compares bytewise, as RocksDB's default comparator does, so a prefix scan is a key range.

Every commit is one transaction. One that writes a memory record or a vector (whoever makes it: the
open vault, a workflow, a tool) takes the vault's next `seq` (an UPDATE of its row: gapless, and in
commit order, because the row lock is held to the commit), records the ids it touched in `changes`
and NOTIFYs `hebbs_<vault id>`. Each daemon's derived state (catalog, HNSW cache, BM25 on tantivy)
is local, stamped with the `seq` it reflects, and catches up by re-reading the ids named by the
changes after it: on a NOTIFY (a wake-up, never the log itself), at each write, and at open.

Writers of one vault, in every daemon, are serialized by a session advisory lock (`writer_lock`),
held across the read-modify-write of a workflow, so idempotency keys, revisions, consolidation and
contradiction checks see every other daemon's committed writes; a crashed daemon's lock dies with
its connection.

Reads may go to streaming replicas (`read_url`), with read-your-writes: the store keeps the WAL
position its reads must see (`_need_lsn`: the end of its own last commit, and the primary's position
when it last read a new head of the vault, whose records its indexes then reflect), and reads on a
replica only once that replica has replayed past it (pg_last_wal_replay_lsn(), checked again only
when the need has moved past what was last seen there); else on the primary. Reads by the thread
holding the writer lock, the head and the change log are always the primary's.

Credentials come from libpq alone (PGPASSWORD, ~/.pgpass, a service file): the URL in a vault's
config names a server and a database, never a password. psycopg is imported only here, and this
module only for a vault whose config names a store.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import psycopg
from pgvector.psycopg import register_vector
from psycopg_pool import ConnectionPool as _LibraryPool
from psycopg_pool import PoolTimeout
from psycopg_pool.base import AttemptWithBackoff

from ..errors import AccessDenied, CorruptVault, InvalidInput, StoreUnavailable, VaultBusy
from ..schema import EdgeType, Memory
from .durability import GroupCommit
from .contract import settle_ties
from .storage import (COLUMN_FAMILIES, GRAPH_FORWARD, GRAPH_REVERSE, MEMORY_PREFIX, VECTOR_PREFIX, WriteSet,
                      decode_memory, decode_vector, id_bytes, id_str, parse_edge_value)

log = logging.getLogger("hebbs.postgres")

SCHEMA = "hebbs"
TABLES = {family: ("memories" if family == "default" else family) for family in COLUMN_FAMILIES}
# How long the pool keeps reconnecting a connection it lost (a restart, a failover).
RETRY_SECONDS = 30.0
# The longest wait between two attempts to replace a lost connection: a server back (a failover done)
# is used within this, whatever unreachable_after allows. An attempt to a host that is down is refused
# at once, and one that does not answer costs connect_timeout.
RECONNECT_EVERY = 0.5
# A daemon that holds the writer lock longer than this (stopped, not crashed) makes others fail clearly.
LOCK_TIMEOUT = "60s"
# The change log keeps the last KEEP_CHANGES writes of a vault, pruned by every PRUNE_EVERY-th write: a
# running daemon is never more than a second behind (its listener), and one opened, or left behind
# further than that (cut off from the server for long), reads the vault whole instead.
KEEP_CHANGES = 100_000
PRUNE_EVERY = 1_000
_SCAN_FIRST, _SCAN_BATCH = 64, 2000
# Defaults of store.unreachable_after and store.pool_size (config.py).
UNREACHABLE_AFTER = 5.0
POOL_SIZE = 16
# A read that finds no replica connection within this wait goes to the primary, and replicas are left
# alone for REPLICA_BACKOFF seconds (one down must not slow every read).
REPLICA_WAIT, REPLICA_BACKOFF = 1.0, 10.0
# The WAL position a server has made visible to new reads: a replica's replayed end, a primary's insert
# position (one promoted since it was listed as a replica is a primary).
_VISIBLE_LSN = ("SELECT (CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn() "
                "ELSE pg_current_wal_insert_lsn() END) - '0/0'::pg_lsn")
_ID = 16
_decode_any = msgspec.msgpack.Decoder().decode
_encode = msgspec.msgpack.Encoder().encode

_DDL = f"""
CREATE EXTENSION IF NOT EXISTS vector;
CREATE SCHEMA IF NOT EXISTS {SCHEMA};
CREATE TABLE IF NOT EXISTS {SCHEMA}.vaults (
    id serial PRIMARY KEY, name text NOT NULL UNIQUE, seq bigint NOT NULL DEFAULT 0,
    created timestamptz NOT NULL DEFAULT now());
CREATE TABLE IF NOT EXISTS {SCHEMA}.changes (
    vault int NOT NULL, seq bigint NOT NULL, ids bytea NOT NULL, PRIMARY KEY (vault, seq));
CREATE TABLE IF NOT EXISTS {SCHEMA}.claims (
    vault int NOT NULL, unit text NOT NULL, version text NOT NULL, owner text, lease_until timestamptz,
    attempts int NOT NULL DEFAULT 0, done boolean NOT NULL DEFAULT false, PRIMARY KEY (vault, unit, version));
CREATE TABLE IF NOT EXISTS {SCHEMA}.vectors (
    vault int NOT NULL, key bytea NOT NULL, embedding vector NOT NULL, PRIMARY KEY (vault, key));
""" + "".join(
    f"CREATE TABLE IF NOT EXISTS {SCHEMA}.{table} (vault int NOT NULL, key bytea NOT NULL, value bytea NOT NULL, "
    f"PRIMARY KEY (vault, key));\n" for family, table in TABLES.items() if family != "vectors")
# Every table _DDL makes: a table added there is added here, or a vault opened finds it missing.
_DDL_TABLES = sorted({"vaults", "changes", "claims", *TABLES.values()})
# Whether _DDL has nothing left to make. Asked first because CREATE ... IF NOT EXISTS checks the right
# to create before it looks: a role granted one vault (pgaccess.py) may not create, and need not.
_SCHEMA_READY = (f"SELECT (SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                 f"WHERE n.nspname = '{SCHEMA}' AND c.relname = ANY(%s) AND c.relkind = 'r') = %s "
                 "AND EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'vector')")


class _Reconnecting(AttemptWithBackoff):
    """psycopg_pool's schedule of attempts to replace a lost connection, its delay capped at
    RECONNECT_EVERY. The library's delay doubles from 1 s, so a server back after a 20 s failover was
    used only at its next attempt, 31 s after the loss (bench team, part autofailover)."""

    def update_delay(self, now: float) -> None:
        super().update_delay(now)
        self.delay = min(self.delay, RECONNECT_EVERY)


class ConnectionPool(_LibraryPool):
    """psycopg_pool's pool, replacing a lost connection at least every RECONNECT_EVERY seconds."""

    def _add_connection(self, attempt: AttemptWithBackoff | None, growing: bool = False) -> None:
        # The library makes a new attempt here when given none, then passes it on to each retry.
        super()._add_connection(attempt or _Reconnecting(timeout=self.reconnect_timeout), growing)


def _served(conn: psycopg.Connection) -> None:
    """A statement the server answers, so that a pool hands out a session only once one serves it."""
    conn.execute("SELECT 1")


def _writer_session(conn: psycopg.Connection) -> None:
    conn.execute(f"SET lock_timeout = '{LOCK_TIMEOUT}'")


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _prepared_statements_refused(exc: psycopg.Error) -> bool:
    """A pooler in transaction mode hands each transaction another server session, where the prepared
    statements psycopg made in an earlier one are missing or already there (docs/scale.md)."""
    return isinstance(exc, (psycopg.errors.DuplicatePreparedStatement, psycopg.errors.InvalidSqlStatementName))


def _scalar(cursor: psycopg.Cursor[Any]) -> Any:
    """The first value of the one row a query always returns (RETURNING of an update by key, a position)."""
    row = cursor.fetchone()
    if row is None:
        raise psycopg.InterfaceError("the query returned no row")
    return row[0]


def _prefix_end(prefix: bytes) -> bytes | None:
    """The smallest key after every key that starts with prefix (None: no bound)."""
    stripped = prefix.rstrip(b"\xff")
    if not stripped:
        return None
    return stripped[:-1] + bytes([stripped[-1] + 1])


def _as_bytes(vector: Any) -> bytes:
    if hasattr(vector, "to_numpy"):
        vector = vector.to_numpy()
    return np.asarray(vector, dtype="<f4").tobytes()


class PgStore:
    """One vault in PostgreSQL: a RecordStore (contract.py), `shared` by every daemon attached to it."""

    shared = True
    read_only = False  # the server's disk is the server's: a full one answers each write

    def __init__(self, url: str, name: str, local: Path, pool: ConnectionPool, vault_id: int,
                 read_url: str | None = None, read_pool: ConnectionPool | None = None, *,
                 unreachable_after: float = UNREACHABLE_AFTER) -> None:
        self.url = url
        self.unreachable_after = unreachable_after
        self.read_url = read_url
        self._read_pool = read_pool
        self._need_lsn = 0  # what a replica must have replayed before this store reads there
        self._head_seen = -1
        self._seen_lsn: dict[tuple[str, str], int] = {}  # per replica server: the newest position it showed
        self._lsn_lock = threading.Lock()
        self._writer_thread: int | None = None
        self._replicas_down_until = 0.0
        self.reads = {"replica": 0, "primary": 0}  # counted when replicas are configured
        self.name = name
        self.path = local / "db"  # messages name the vault by its local directory, as for RocksDB
        self.vault_id = vault_id
        self._pool: ConnectionPool | None = pool
        self.group = GroupCommit("buffered", lambda: 0, lambda: None)  # a COMMIT is the acknowledgement
        self.untracked_memories: set[bytes] | None = None  # every change is in hebbs.changes
        self._lock_conn: psycopg.Connection | None = None
        # The writer lock's session comes from a pool of one, so that getting it is bounded by
        # unreachable_after: a pooler with no server connection to give queues a new session's first
        # statement without end, and a cancel does not reach a statement still in its queue.
        self._lock_pool = ConnectionPool(url, min_size=0, max_size=1, timeout=unreachable_after, open=False,
                                         kwargs={"autocommit": True, "connect_timeout": 5,
                                                 "application_name": application_name(vault_id)},
                                         configure=_writer_session, name=f"hebbs-{name}-writer",
                                         reconnect_timeout=unreachable_after)
        self._lock_pool.open(wait=False)
        self._listener: threading.Thread | None = None
        self._stop = threading.Event()
        self.channel = f"hebbs_{vault_id}"

    def __repr__(self) -> str:
        return f"PgStore({self.where})"

    @property
    def where(self) -> str:
        """Where the vault lives, for status, list and the panel: the servers, the database and the vault's
        name there; never a user or a password."""
        reads = f", reads on {servers(self.read_url)}" if self.read_url else ""
        return f"PostgreSQL {servers(self.url)} vault {self.name!r}{reads}"

    # Opening and closing ---------------------------------------------------------------------

    @classmethod
    def open(cls, url: str, name: str, local: Path, read_url: str | None = None, *,
             pool_size: int = POOL_SIZE, unreachable_after: float = UNREACHABLE_AFTER) -> "PgStore":
        # Every step is bounded by unreachable_after, through pools: a pooler with no server connection
        # to give accepts a new session and queues its first statement without end.
        setup = ConnectionPool(url, min_size=1, max_size=2, name=f"hebbs-{name}-open", open=False, configure=_served,
                               kwargs={"autocommit": True, "connect_timeout": max(2, int(unreachable_after))},
                               timeout=unreachable_after, reconnect_timeout=unreachable_after)
        user: str | None = None
        try:
            setup.open(wait=True, timeout=unreachable_after)
            with setup.connection() as conn:
                _refuse_transaction_pooler(conn, setup, url, local)
                user = conn.info.user
                with conn.transaction():
                    if not _scalar(conn.execute(_SCHEMA_READY, (_DDL_TABLES, len(_DDL_TABLES)))):
                        # Two daemons creating the schema at once would collide in the catalog: one at a time.
                        conn.execute("SELECT pg_advisory_xact_lock(hashtext('hebbs schema'))")
                        conn.execute(_DDL)
                    row = conn.execute(f"SELECT id FROM {SCHEMA}.vaults WHERE name = %s", (name,)).fetchone()
                    # A role kept to other vaults sees no row of this one, and may not make it.
                    vault_id = row[0] if row is not None else _scalar(
                        conn.execute(f"INSERT INTO {SCHEMA}.vaults (name) VALUES (%s) RETURNING id", (name,)))
        except PoolTimeout:
            raise _no_connection(url, name, unreachable_after) from None
        except psycopg.OperationalError as exc:
            raise StoreUnavailable(f"vault {name!r} of {local}: its PostgreSQL at {servers(url)} cannot be reached "
                                   f"({_first_line(exc)})") from None
        except psycopg.errors.InsufficientPrivilege as exc:
            raise _denied(name, url, user, exc) from None
        except psycopg.Error as exc:
            if _prepared_statements_refused(exc):
                raise InvalidInput(_POOLER_REFUSED.format(where=servers(url), local=local)) from None
            raise InvalidInput(f"the PostgreSQL store {redact(url)} of vault {local} refused the vault's tables: "
                               f"{str(exc).strip()} (it needs the pgvector extension)") from None
        finally:
            setup.close()
        # Connections are opened as needed, up to pool_size (store.pool_size): a pooler or a server with
        # fewer to give makes a call wait, then fail with STORE_UNAVAILABLE, never hang.
        # A pool retries a lost connection every RECONNECT_EVERY seconds at most: given up after
        # unreachable_after, it connects again at the next call, so a server back is used at once.
        pool = ConnectionPool(url, min_size=1, max_size=pool_size,
                              kwargs={"autocommit": True, "application_name": application_name(vault_id)},
                              configure=register_vector, name=f"hebbs-{name}", open=False,
                              reconnect_timeout=unreachable_after, timeout=unreachable_after)
        try:
            pool.open(wait=True, timeout=unreachable_after)
        except PoolTimeout:
            pool.close()
            raise _no_connection(url, name, unreachable_after, pool_size) from None
        read_pool = None
        if read_url:
            # Not waited for: a replica down at open only sends the reads to the primary.
            read_pool = ConnectionPool(read_url, min_size=1, max_size=pool_size, configure=register_vector,
                                       kwargs={"autocommit": True, "application_name": f"hebbs reads vault {vault_id}"},
                                       name=f"hebbs-{name}-reads", open=False, reconnect_timeout=RETRY_SECONDS)
            read_pool.open(wait=False)
        return cls(url, name, local, pool, vault_id, read_url, read_pool, unreachable_after=unreachable_after)

    def _retrying(self, what: Callable[[], Any]) -> Any:
        """Run what, again while the server cannot be reached (a restart, a failover) for up to
        unreachable_after seconds; then StoreUnavailable, naming the vault and its servers. Safe for a
        commit too: a WriteSet states final values of keys, so applying one twice changes nothing."""
        deadline = time.monotonic() + self.unreachable_after
        delay = 0.02
        while True:
            try:
                return what()
            except PoolTimeout:
                raise self._no_connection() from None
            except (psycopg.OperationalError, psycopg.errors.ReadOnlySqlTransaction,
                    psycopg.errors.AdminShutdown) as exc:
                if isinstance(exc, psycopg.errors.LockNotAvailable):
                    raise
                if time.monotonic() > deadline:
                    raise StoreUnavailable(
                        f"vault {self.name!r}: its PostgreSQL at {servers(self.url)} cannot be reached "
                        f"({_first_line(exc)}); tried for {self.unreachable_after:g}s") from None
                log.info("PostgreSQL unreachable (%s); retrying", _first_line(exc))
                time.sleep(delay)
                delay = min(delay * 2, 0.5)
            except psycopg.errors.InsufficientPrivilege as exc:
                raise _denied(self.name, self.url, None, exc) from None
            except psycopg.Error as exc:
                if _prepared_statements_refused(exc):
                    raise InvalidInput(_POOLER_REFUSED.format(where=servers(self.url), local=self.path.parent)) \
                        from None
                raise

    def _no_connection(self) -> StoreUnavailable:
        return _no_connection(self.url, self.name, self.unreachable_after, self.pool.max_size)

    @property
    def closed(self) -> bool:
        return self._pool is None

    @property
    def pool(self) -> ConnectionPool:
        if self._pool is None:
            raise CorruptVault(f"vault {self.path.parent} is closed")
        return self._pool

    def close(self) -> None:
        if self._pool is None:
            return
        self._stop.set()
        if self._listener is not None:
            self._listener.join(timeout=5)
        self._drop_lock_conn()
        self._lock_pool.close()
        pool, self._pool = self._pool, None
        pool.close()
        if self._read_pool is not None:
            self._read_pool.close()

    def _run(self, query: str, params: Any = None) -> list[tuple]:
        def attempt() -> list[tuple]:
            with self.pool.connection() as conn:
                # Binary results: bytea and vectors arrive as they are stored, with no text to parse.
                cur = conn.execute(query, params, binary=True)
                return cur.fetchall() if cur.description is not None else []
        return self._retrying(attempt)

    def _read(self, query: str, params: Any = None) -> list[tuple]:
        """A read: on a replica that has what this store must see (class doc), else on the primary."""
        def rows(conn: psycopg.Connection) -> list[tuple]:
            cur = conn.execute(query, params, binary=True)
            return cur.fetchall() if cur.description is not None else []
        return self._reading(rows)

    def _reading(self, read: Callable[[psycopg.Connection], list[tuple]]) -> list[tuple]:
        if self._read_pool is not None and threading.get_ident() != self._writer_thread:
            result = self._on_replica(read)
            if result is not None:
                return result

        def attempt() -> list[tuple]:
            with self.pool.connection() as conn:
                return read(conn)
        return self._retrying(attempt)

    def _on_replica(self, read: Callable[[psycopg.Connection], list[tuple]]) -> list[tuple] | None:
        """read's rows from a replica that has replayed past _need_lsn; None: read on the primary."""
        if time.monotonic() < self._replicas_down_until:
            self.reads["primary"] += 1
            return None
        need, pool = self._need_lsn, self._read_pool
        if pool is None:
            return None
        try:
            with pool.connection(timeout=REPLICA_WAIT) as conn:
                server = (conn.info.host, str(conn.info.port))
                if self._seen_lsn.get(server, -1) < need:
                    # Replay only moves forward, so a position seen once holds for every later read there.
                    seen = int(_scalar(conn.execute(_VISIBLE_LSN)))
                    with self._lsn_lock:
                        self._seen_lsn[server] = max(seen, self._seen_lsn.get(server, -1))
                    if seen < need:
                        self.reads["primary"] += 1
                        return None
                rows = read(conn)
            self.reads["replica"] += 1
            return rows
        except psycopg.errors.SerializationFailure:
            # Canceled by a conflict with recovery (the replica replaying a vacuum of rows this read
            # used): the primary answers instead.
            self.reads["primary"] += 1
            return None
        except (PoolTimeout, psycopg.OperationalError) as exc:
            log.info("replicas of vault %s unreachable (%s); reading on the primary for %.0f s", self.name,
                     str(exc).strip().splitlines()[0] if str(exc) else type(exc).__name__, REPLICA_BACKOFF)
            self._replicas_down_until = time.monotonic() + REPLICA_BACKOFF
            # A server that went away may come back rewound onto a new primary's timeline, behind what
            # it showed before: what was seen of every replica is asked again.
            with self._lsn_lock:
                self._seen_lsn.clear()
            self.reads["primary"] += 1
            return None

    def _must_see(self, lsn: int) -> None:
        with self._lsn_lock:
            self._need_lsn = max(self._need_lsn, lsn)

    # Sequence and change log -----------------------------------------------------------------

    def _head(self, query: str) -> tuple:
        rows = self._run(query, (self.vault_id,))
        if not rows:
            # The vault's row is gone for this role: its grant was revoked (pgaccess.py), or the vault dropped.
            raise _denied(self.name, self.url, None, None)
        return rows[0]

    def head_seq(self) -> int:
        if self._read_pool is None:
            return self._head(f"SELECT seq FROM {SCHEMA}.vaults WHERE id = %s")[0]
        # With the head, the primary's WAL position: every commit this head counts is before it, and the
        # indexes about to be brought to this head will name their records, so reads must see them.
        seq, lsn = self._head(f"SELECT seq, pg_current_wal_insert_lsn() - '0/0'::pg_lsn FROM {SCHEMA}.vaults "
                              "WHERE id = %s")
        if seq != self._head_seen:
            self._must_see(int(lsn))
            self._head_seen = seq
        return seq

    def touched_since(self, after: int, upto: int) -> list[str] | None:
        """changelog.touched_since over hebbs.changes."""
        if upto <= after:
            return []
        rows = self._run(f"SELECT seq, ids FROM {SCHEMA}.changes WHERE vault = %s AND seq > %s AND seq <= %s "
                         "ORDER BY seq", (self.vault_id, after, upto))
        if len(rows) != upto - after:
            return None
        ids: dict[str, None] = {}
        for _, raw in rows:
            raw = bytes(raw)
            for offset in range(0, len(raw), _ID):
                ids[id_str(raw[offset:offset + _ID])] = None
        return list(ids)

    def latest_sequence_number(self) -> int:
        """The vault's write sequence: every write of a memory record moves it (the catalog's stamp)."""
        return self.head_seq()

    # Writing ---------------------------------------------------------------------------------

    def commit(self, writes: WriteSet, *, durable: bool = True, tracked: bool = False,
               touched: Sequence[str] = ()) -> int | None:
        """Apply writes as one transaction. Returns the vault's new write sequence when it changed a memory
        record or vector (or `touched` names ids), else None. A commit is acknowledged by PostgreSQL
        (synchronous_commit decides what that means); durable=False commits without waiting for it.
        `tracked` is RocksDB's."""
        if not writes.ops and not writes.ranges and not touched:
            return None
        final: dict[tuple[str, bytes], bytes | None] = {}
        for family, key, value in writes.ops:
            final[(family, key)] = value
        ids = dict.fromkeys(touched)
        for family, key in final:
            if (family == "default" and key[:1] == MEMORY_PREFIX) or (family == "vectors" and key[:1] == VECTOR_PREFIX):
                ids[id_str(key[1:1 + _ID])] = None
        puts: dict[str, list[tuple]] = {}
        deletes: dict[str, list[bytes]] = {}
        for (family, key), value in final.items():
            if value is None:
                deletes.setdefault(family, []).append(key)
            elif family == "vectors":
                puts.setdefault(family, []).append((self.vault_id, key, decode_vector(value)))
            else:
                puts.setdefault(family, []).append((self.vault_id, key, value))

        def attempt() -> int | None:
            with self.pool.connection() as conn:
                with conn.transaction():
                    if not durable:
                        # What nobody is told was kept (the query log, access counts): not waited for, as
                        # RocksDB's unsynced batches are not.
                        conn.execute("SET LOCAL synchronous_commit = off")
                    seq = None
                    if ids:
                        seq = _scalar(conn.execute(f"UPDATE {SCHEMA}.vaults SET seq = seq + 1 WHERE id = %s "
                                                   "RETURNING seq", (self.vault_id,)))
                    with conn.cursor() as cur:
                        for family, begin, end in writes.ranges:
                            cur.execute(f"DELETE FROM {SCHEMA}.{TABLES[family]} WHERE vault = %s AND key >= %s "
                                        "AND key < %s", (self.vault_id, begin, end))
                        for family, keys in deletes.items():
                            cur.execute(f"DELETE FROM {SCHEMA}.{TABLES[family]} WHERE vault = %s AND key = ANY(%s)",
                                        (self.vault_id, keys))
                        for family, rows in puts.items():
                            column = "embedding" if family == "vectors" else "value"
                            cur.executemany(f"INSERT INTO {SCHEMA}.{TABLES[family]} (vault, key, {column}) "
                                            f"VALUES (%s, %s, %s) ON CONFLICT (vault, key) DO UPDATE "
                                            f"SET {column} = EXCLUDED.{column}", rows)
                        if seq is not None:
                            cur.execute(f"INSERT INTO {SCHEMA}.changes (vault, seq, ids) VALUES (%s, %s, %s)",
                                        (self.vault_id, seq, b"".join(id_bytes(mid) for mid in ids)))
                            cur.execute("SELECT pg_notify(%s, %s)", (self.channel, str(seq)))
                            if seq % PRUNE_EVERY == 0 and seq > KEEP_CHANGES:
                                cur.execute(f"DELETE FROM {SCHEMA}.changes WHERE vault = %s AND seq <= %s",
                                            (self.vault_id, seq - KEEP_CHANGES))
                if self._read_pool is not None and durable:
                    # After the COMMIT, on the same connection: a position past its commit record, which
                    # a replica must have replayed before this store reads its own write there. Not for
                    # what nobody was told was kept (the query log each recall writes): it would send the
                    # next reads to the primary until the WAL writer had shipped it.
                    self._must_see(int(_scalar(conn.execute("SELECT pg_current_wal_insert_lsn() - '0/0'::pg_lsn"))))
                return seq
        return self._retrying(attempt)

    def deferred_sync(self, *, wait: bool = True) -> contextlib.AbstractContextManager:
        return self.group.deferred(wait=wait)

    # The writer lock, across daemons ---------------------------------------------------------

    def lock_writers(self) -> None:
        """Take the vault's writer lock (blocks while another daemon writes)."""
        def attempt() -> None:
            if self._lock_conn is None or self._lock_conn.closed:
                self._drop_lock_conn()
                self._lock_conn = self._lock_pool.getconn()
            try:
                self._lock_conn.execute("SELECT pg_advisory_lock(hashtext('hebbs writer'), %s)", (self.vault_id,))
            except psycopg.OperationalError:
                self._drop_lock_conn()
                raise
        try:
            self._retrying(attempt)
            # This thread's reads now read-modify-write what every daemon committed: the primary's.
            self._writer_thread = threading.get_ident()
        except psycopg.errors.LockNotAvailable:
            raise VaultBusy(f"vault {self.name!r} on {redact(self.url)}: another daemon has held its writer lock "
                            f"for {LOCK_TIMEOUT}; is one stopped?") from None

    def unlock_writers(self) -> None:
        self._writer_thread = None
        conn = self._lock_conn
        if conn is None:
            return
        try:
            conn.execute("SELECT pg_advisory_unlock(hashtext('hebbs writer'), %s)", (self.vault_id,))
        except psycopg.Error:
            self._drop_lock_conn()  # the lock went with the connection

    def _drop_lock_conn(self) -> None:
        conn, self._lock_conn = self._lock_conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()
            with contextlib.suppress(Exception):
                self._lock_pool.putconn(conn)  # closed: the pool makes a new one when asked

    # Wake-ups from other daemons -------------------------------------------------------------

    def listen(self, on_change: Callable[[], object], interval: float = 1.0) -> None:
        """Call on_change after another daemon's commit (NOTIFY), and every `interval` seconds anyway
        (a notification is lost while the connection is down)."""
        def run() -> None:
            while not self._stop.is_set():
                try:
                    with psycopg.connect(self.url, autocommit=True, connect_timeout=5,
                                         application_name=application_name(self.vault_id)) as conn:
                        conn.execute(f"LISTEN {self.channel}")
                        on_change()  # what was missed while not listening
                        while not self._stop.is_set():
                            woke = False
                            for _ in conn.notifies(timeout=interval, stop_after=1):
                                woke = True
                            if woke or not self._stop.is_set():
                                on_change()
                except Exception as exc:  # noqa: BLE001 - a listener must outlive a failover
                    if self._stop.is_set():
                        return
                    log.info("listener of vault %s: %s; reconnecting", self.name, exc)
                    self._stop.wait(0.2)
        self._listener = threading.Thread(target=run, name=f"hebbs-listen-{self.name}", daemon=True)
        self._listener.start()

    # Reads -----------------------------------------------------------------------------------

    def get(self, family: str, key: bytes) -> bytes | None:
        if family == "vectors":
            return self.get_vectors_raw([key])[0]
        rows = self._read(f"SELECT value FROM {SCHEMA}.{TABLES[family]} WHERE vault = %s AND key = %s",
                          (self.vault_id, key))
        return bytes(rows[0][0]) if rows else None

    def get_memory(self, memory_id: str) -> Memory | None:
        raw = self.get("default", MEMORY_PREFIX + id_bytes(memory_id))
        return None if raw is None else self._decode(memory_id, raw)

    def _decode(self, memory_id: str, raw: bytes) -> Memory:
        try:
            return decode_memory(raw)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise CorruptVault(f"memory {memory_id} in {self.where} cannot be decoded: {exc}") from None

    def get_meta(self, name: str, default: Any = None) -> Any:
        raw = self.get("meta", name.encode())
        return default if raw is None else _decode_any(raw)

    def get_meta_many(self, names: list[str]) -> list[Any]:
        return [None if raw is None else _decode_any(raw) for raw in self._many("meta", [n.encode() for n in names])]

    def _many(self, family: str, keys: list[bytes]) -> list[bytes | None]:
        if not keys:
            return []
        column = "embedding" if family == "vectors" else "value"
        rows = self._read(f"SELECT key, {column} FROM {SCHEMA}.{TABLES[family]} WHERE vault = %s AND key = ANY(%s)",
                          (self.vault_id, keys))
        found = {bytes(k): (_as_bytes(v) if family == "vectors" else bytes(v)) for k, v in rows}
        return [found.get(key) for key in keys]

    def get_vectors_raw(self, keys: list[bytes]) -> list[bytes | None]:
        return self._many("vectors", keys)

    def get_memories(self, ids: list[str]) -> list[Memory | None]:
        raws = self._many("default", [MEMORY_PREFIX + id_bytes(mid) for mid in ids])
        return [None if raw is None else self._decode(mid, raw) for mid, raw in zip(ids, raws)]

    def get_vector(self, memory_id: str) -> bytes | None:
        return self._many("vectors", [VECTOR_PREFIX + id_bytes(memory_id)])[0]

    def get_vectors(self, ids: list[str]) -> list[bytes | None]:
        return self._many("vectors", [VECTOR_PREFIX + id_bytes(mid) for mid in ids])

    def scan(self, family: str, prefix: bytes = b"", *, reverse: bool = False,
             start: bytes | None = None, cached: bool = True) -> Iterator[tuple[bytes, bytes]]:
        """Items whose key starts with prefix, in key order (or reversed), from start when given; read in
        growing pages by key, so a scan left early holds no cursor open."""
        table = f"{SCHEMA}.{TABLES[family]}"
        column = "embedding" if family == "vectors" else "value"
        low, high = prefix, _prefix_end(prefix)
        if start is not None:
            if reverse:
                high = start + b"\x00"  # inclusive of start
            else:
                low = max(low, start)
        size = _SCAN_FIRST
        while True:
            where = ["vault = %s", "key >= %s"]
            params: list[Any] = [self.vault_id, low]
            if high is not None:
                where.append("key < %s")
                params.append(high)
            order = "DESC" if reverse else "ASC"
            rows = self._read(f"SELECT key, {column} FROM {table} WHERE {' AND '.join(where)} "
                              f"ORDER BY key {order} LIMIT {size}", params)
            for key, value in rows:
                yield bytes(key), (_as_bytes(value) if family == "vectors" else bytes(value))
            if len(rows) < size:
                return
            last = bytes(rows[-1][0])
            if reverse:
                high = last
            else:
                low = last + b"\x00"
            size = _SCAN_BATCH

    def memories(self) -> Iterator[Memory]:
        for key, raw in self.scan("default", MEMORY_PREFIX):
            try:
                yield decode_memory(raw)
            except (msgspec.DecodeError, msgspec.ValidationError) as exc:
                log.warning("skipping undecodable memory %s in %s: %s", id_str(key[1:]), self.where, exc)

    def vectors(self) -> Iterator[tuple[str, bytes]]:
        for key, raw in self.scan("vectors", VECTOR_PREFIX):
            yield id_str(key[1:]), raw

    def edges_from(self, memory_id: str) -> Iterator[tuple[EdgeType, str, float, int]]:
        for key, raw in self.scan("graph", GRAPH_FORWARD + id_bytes(memory_id)):
            confidence, created_at = parse_edge_value(raw)
            yield EdgeType(key[17]), id_str(key[18:34]), confidence, created_at

    def edges_to(self, memory_id: str) -> Iterator[tuple[EdgeType, str, float, int]]:
        for key, raw in self.scan("graph", GRAPH_REVERSE + id_bytes(memory_id)):
            confidence, created_at = parse_edge_value(raw)
            yield EdgeType(key[17]), id_str(key[18:34]), confidence, created_at

    def first_keys(self, family: str, n: int, start: bytes = b"") -> list[bytes]:
        rows = self._read(f"SELECT key FROM {SCHEMA}.{TABLES[family]} WHERE vault = %s AND key >= %s "
                          "ORDER BY key LIMIT %s", (self.vault_id, start, n))
        return [bytes(key) for key, in rows]

    def ends(self, family: str) -> tuple[bytes | None, bytes | None]:
        """The family's first and last keys (None, None when it is empty)."""
        first, last = self._read(f"SELECT min(key), max(key) FROM {SCHEMA}.{TABLES[family]} WHERE vault = %s",
                                 (self.vault_id,))[0]
        return (None if first is None else bytes(first)), (None if last is None else bytes(last))

    def count(self, family: str, prefix: bytes = b"") -> int:
        high = _prefix_end(prefix)
        query = f"SELECT count(*) FROM {SCHEMA}.{TABLES[family]} WHERE vault = %s AND key >= %s"
        params: list[Any] = [self.vault_id, prefix]
        if high is not None:
            query += " AND key < %s"
            params.append(high)
        return self._read(query, params)[0][0]

    # Similarity in pgvector, for a vault larger than a daemon's RAM -----------------------------

    def ensure_vector_index(self, dim: int, halfvec: bool = False) -> None:
        """An HNSW index over this vault's vectors, partial on the vault (the column is untyped so vaults
        of different models share the table)."""
        kind = "halfvec" if halfvec else "vector"
        index = f"vectors_hnsw_{self.vault_id}_{kind}"
        # Looked up first: CREATE INDEX IF NOT EXISTS asks for the table's ownership even when the index
        # is there, which a role granted one vault (pgaccess.py) does not have.
        if self._run("SELECT 1 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s "
                     "AND c.relname = %s", (SCHEMA, index)):
            return
        self._run(f"CREATE INDEX IF NOT EXISTS {index} ON {SCHEMA}.vectors USING hnsw "
                  f"((embedding::{kind}({dim})) {kind}_cosine_ops) WHERE vault = {int(self.vault_id)}")

    def drop_vector_index(self) -> None:
        """The vault's HNSW indexes cast every vector to the old model's dimension: a vector of another
        would fail the cast. ensure_vector_index builds one for the new dimension at the next open."""
        self._run(f"DROP INDEX IF EXISTS {SCHEMA}.vectors_hnsw_{int(self.vault_id)}_vector, "
                  f"{SCHEMA}.vectors_hnsw_{int(self.vault_id)}_halfvec")

    def nearest(self, vector: np.ndarray, k: int, dim: int, ef: int = 100, halfvec: bool = False) -> list[tuple[str, float]]:
        """The k nearest memories by cosine, from pgvector's HNSW index: (id, similarity)."""
        kind = "halfvec" if halfvec else "vector"

        def search(conn: psycopg.Connection) -> list[tuple]:
            with conn.transaction():
                # pgvector takes ef_search up to 1000; past ef candidates an iterative scan goes on
                # searching (pgvector 0.8), so a k larger than ef still gets k rows, in order.
                conn.execute(f"SET LOCAL hnsw.ef_search = {min(int(ef), 1000)}")
                if k > min(int(ef), 1000):
                    conn.execute("SET LOCAL hnsw.iterative_scan = strict_order")
                return conn.execute(
                    f"SELECT key, (embedding::{kind}({dim})) <=> %s::{kind}({dim}) AS d FROM {SCHEMA}.vectors "
                    f"WHERE vault = %s ORDER BY d LIMIT %s",
                    (np.asarray(vector, dtype=np.float32), self.vault_id, k)).fetchall()
        return [(id_str(bytes(key)[1:]), 1.0 - float(d)) for key, d in self._reading(search)]

    def count_vectors(self) -> int:
        return self.count("vectors", VECTOR_PREFIX)

    def vector_search(self, dim: int, ef_search: int) -> "PgVectorIndex":
        """The vault's vectors searched in pgvector (store.similar = "pgvector")."""
        return PgVectorIndex(self, dim, ef_search)

    # Work shared by several indexers of one notes tree ----------------------------------------

    def agreed_meta(self, name: str, proposed: Any) -> Any:
        """The meta value `name`: `proposed` if nobody set it yet, else what the first one set (atomic
        across daemons, so two indexers starting at once agree)."""
        self._run(f"INSERT INTO {SCHEMA}.meta (vault, key, value) VALUES (%s, %s, %s) ON CONFLICT DO NOTHING",
                  (self.vault_id, name.encode(), _encode(proposed)))
        # From the primary: a replica may not have the row another indexer set a moment ago.
        rows = self._run(f"SELECT value FROM {SCHEMA}.meta WHERE vault = %s AND key = %s", (self.vault_id, name.encode()))
        return _decode_any(bytes(rows[0][0]))

    def work_claims(self, lease: float) -> "WorkClaims":
        return WorkClaims(self, lease)


class WorkClaims:
    """Units of work (a note file at one version) that several indexers of one vault share: each unit is
    claimed by one of them with FOR UPDATE SKIP LOCKED, held under a lease its owner renews, and taken
    over by another once that lease lapses (its owner was killed). A claim only splits the work: what
    makes a unit done twice harmless is the indexer's (idempotency keys), not the claim."""

    def __init__(self, store: PgStore, lease: float) -> None:
        self.store = store
        self.lease = float(lease)
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None

    def _units(self, units: list[tuple[str, str]]) -> tuple[list[str], list[str]]:
        return [u for u, _ in units], [v for _, v in units]

    def register(self, units: list[tuple[str, str]]) -> None:
        """Offer units (unit, version); those already offered (by anyone) stay as they are."""
        names, versions = self._units(units)
        self.store._run(f"INSERT INTO {SCHEMA}.claims (vault, unit, version) SELECT %s, u, v "
                        "FROM unnest(%s::text[], %s::text[]) AS t(u, v) ON CONFLICT DO NOTHING",
                        (self.store.vault_id, names, versions))
        if self._renewer is None:
            self._renewer = threading.Thread(target=self._renew, name="hebbs-claims", daemon=True)
            self._renewer.start()

    def take(self, units: list[tuple[str, str]], limit: int) -> list[tuple[str, str, int]]:
        """Claim up to `limit` of units that nobody holds (never claimed, or a lease lapsed), skipping rows
        another indexer is claiming right now. Returns (unit, version, attempts): attempts > 1 is a take-over."""
        names, versions = self._units(units)
        rows = self.store._run(
            f"WITH free AS (SELECT unit, version FROM {SCHEMA}.claims WHERE vault = %s AND NOT done "
            "AND (owner IS NULL OR lease_until < now()) "
            "AND (unit, version) IN (SELECT u, v FROM unnest(%s::text[], %s::text[]) AS t(u, v)) "
            "ORDER BY unit LIMIT %s FOR UPDATE SKIP LOCKED) "
            f"UPDATE {SCHEMA}.claims c SET owner = %s, lease_until = now() + make_interval(secs => %s), "
            "attempts = c.attempts + 1 FROM free WHERE c.vault = %s AND c.unit = free.unit "
            "AND c.version = free.version RETURNING c.unit, c.version, c.attempts",
            (self.store.vault_id, names, versions, limit, self.owner, self.lease, self.store.vault_id))
        return [(u, v, a) for u, v, a in rows]

    def finish(self, units: list[tuple[str, str]]) -> None:
        names, versions = self._units(units)
        self.store._run(f"UPDATE {SCHEMA}.claims SET done = true, lease_until = NULL WHERE vault = %s "
                        "AND (unit, version) IN (SELECT u, v FROM unnest(%s::text[], %s::text[]) AS t(u, v))",
                        (self.store.vault_id, names, versions))

    def unfinished(self, units: list[tuple[str, str]]) -> list[tuple[str, str]]:
        """The units not done yet (held by someone, or free again)."""
        names, versions = self._units(units)
        rows = self.store._run(
            f"SELECT unit, version FROM {SCHEMA}.claims WHERE vault = %s AND NOT done "
            "AND (unit, version) IN (SELECT u, v FROM unnest(%s::text[], %s::text[]) AS t(u, v))",
            (self.store.vault_id, names, versions))
        return [(u, v) for u, v in rows]

    def _renew(self) -> None:
        while not self._stop.wait(self.lease / 3):
            try:
                self.store._run(f"UPDATE {SCHEMA}.claims SET lease_until = now() + make_interval(secs => %s) "
                                "WHERE vault = %s AND owner = %s AND NOT done",
                                (self.lease, self.store.vault_id, self.owner))
            except Exception as exc:  # noqa: BLE001 - a lapsed lease only lets another indexer help
                log.info("renewing the index claims of vault %s: %s", self.store.name, exc)

    def close(self) -> None:
        """Stop renewing; what this indexer still holds is released for others at once."""
        self._stop.set()
        if self._renewer is not None:
            self._renewer.join(timeout=5)
        with contextlib.suppress(Exception):
            self.store._run(f"UPDATE {SCHEMA}.claims SET owner = NULL, lease_until = NULL "
                            "WHERE vault = %s AND owner = %s AND NOT done", (self.store.vault_id, self.owner))


class PgVectorIndex:
    """The vault's vectors searched where they are, in pgvector's HNSW index, in place of the daemon's
    local HNSW (store.similar = "pgvector"): nothing is held in RAM, so a vault of any size works. The
    store keeps the vectors, so adding, removing and checkpointing are nothing to do here."""

    remote = True
    _COUNT_TTL = 2.0

    def __init__(self, store: PgStore, dim: int, ef_search: int) -> None:
        self.store = store
        self.dim = dim
        self.ef_search = ef_search
        store.ensure_vector_index(dim)
        self._count = (0, -1.0)

    def __len__(self) -> int:
        count, at = self._count
        if time.monotonic() - at > self._COUNT_TTL:
            count = self.store.count_vectors()
            self._count = (count, time.monotonic())
        return count

    def search(self, vector: np.ndarray, k: int, *, ef: int | None = None) -> list[tuple[str, float]]:
        return settle_ties(lambda n: self.store.nearest(vector, n, self.dim, ef=max(ef or self.ef_search, n)), k)

    def ids_by_label(self) -> dict[int, str]:
        """Every indexed id under a label of its own (its rank by key: pgvector has no labels); the keys
        only, no vector, so even a vault larger than RAM lists them."""
        rows = self.store._read(f"SELECT key FROM {SCHEMA}.vectors WHERE vault = %s ORDER BY key",
                                (self.store.vault_id,))
        return {n: id_str(bytes(key)[1:]) for n, (key,) in enumerate(rows)}

    def vectors(self, ids: list[str]) -> np.ndarray:
        """The stored vectors of these memories, one row each; zeros for one not stored (VectorIndex.vectors)."""
        out = np.zeros((len(ids), self.dim), dtype=np.float32)
        for row, raw in enumerate(self.store.get_vectors(ids)):
            if raw is not None:
                out[row] = np.frombuffer(raw, dtype="<f4")[:self.dim]
        return out

    def add(self, ids: list[str], vectors: np.ndarray) -> None:
        self._count = (0, -1.0)

    def remove(self, ids: list[str]) -> None:
        self._count = (0, -1.0)

    def sync(self, ids: list[str], stored: Callable[[list[str]], list[bytes | None]]) -> None:
        self._count = (0, -1.0)

    def save(self, directory: Path, write_seq: int) -> None:
        return None


_POOLER_REFUSED = ("vault {local}: {where} is a connection pooler in transaction mode (prepared statements do "
                   "not survive from one transaction to the next there), which a hebbs vault cannot use: its "
                   "writer lock and wake-ups live in a session. Point store.url at the server, or at a pooler "
                   "in session mode (docs/scale.md)")


def _denied(name: str, url: str, user: str | None, exc: psycopg.Error | None) -> AccessDenied:
    """The server refuses this role the vault (pgaccess.py): not granted, or revoked."""
    who = f"role {user!r}" if user else "the role of store.url"
    # No error: the vault's row is gone from view, revoked or dropped (hebbs team drop-vault).
    said = f" ({_first_line(exc)})" if exc is not None else " any more, or the vault was dropped"
    return AccessDenied(f"vault {name!r} in PostgreSQL {servers(url)}: {who} may not use it{said}; a team lead "
                        f"grants it with `hebbs team grant ROLE --name {name}` (docs/scale.md)")


def _no_connection(url: str, name: str, seconds: float, pool_size: int = POOL_SIZE) -> StoreUnavailable:
    """A pool that gave no connection in time: the server is down, or every connection it or a pooler in
    front of it gives is busy: a new session tells which."""
    try:
        with psycopg.connect(url, autocommit=True, connect_timeout=2):
            pass
    except psycopg.Error as exc:
        return StoreUnavailable(f"vault {name!r}: its PostgreSQL at {servers(url)} cannot be reached "
                                f"({_first_line(exc)}); tried for {seconds:g}s")
    return StoreUnavailable(
        f"vault {name!r}: no connection to {servers(url)} came free within {seconds:g}s: this daemon's are "
        f"busy (store.pool_size {pool_size}), or the server or pooler gives fewer than the daemon needs "
        f"(store.pool_size + 2; docs/scale.md)")


def _refuse_transaction_pooler(conn: psycopg.Connection, pool: ConnectionPool, url: str, local: Path) -> None:
    """InvalidInput when conn goes through a pooler in transaction mode (pgbouncer's pool_mode =
    transaction): a session advisory lock taken there would be held by whichever session the pooler
    picked, and LISTEN would listen nowhere. Seen as one server session serving two client connections
    (a pooler hands the session conn left idle to the next client), or as conn's session changing
    between its transactions: a server or a session pooler does neither."""
    mine = {_scalar(conn.execute("SELECT pg_backend_pid()")) for _ in range(3)}
    with pool.connection() as other:
        theirs = _scalar(other.execute("SELECT pg_backend_pid()"))
    if len(mine) > 1 or theirs in mine:
        raise InvalidInput(_POOLER_REFUSED.format(where=servers(url), local=local))


def application_name(vault_id: int) -> str:
    """What a daemon's sessions on a vault call themselves (pg_stat_activity.application_name), for the
    monitoring queries of docs/scale.md (sessions and busy ones per vault): its id, not its name, since
    every role on the server sees every session's application_name (pgaccess.py keeps names to those
    granted the vault)."""
    return f"hebbs vault {vault_id}"


def servers(url: str) -> str:
    """HOST:PORT[,HOST:PORT...]/DATABASE of a URL or libpq string (a service file's name when it names
    one): which servers, without the user or any secret."""
    try:
        from psycopg.conninfo import conninfo_to_dict
        parts = {k: str(v) for k, v in conninfo_to_dict(url).items()}
    except Exception:  # noqa: BLE001 - a string libpq would refuse anyway: shown without its secrets
        return redact(url)
    hosts = (parts.get("host") or parts.get("hostaddr") or "").split(",")
    ports = (parts.get("port") or "5432").split(",")
    ports = ports * len(hosts) if len(ports) == 1 else ports
    where = ",".join(f"{host or 'localhost'}:{port}" for host, port in zip(hosts, ports))
    if "service" in parts and not parts.get("host"):
        where = f"service {parts['service']}"
    return f"{where}/{parts.get('dbname', '')}" if parts.get("dbname") else where


def redact(url: str) -> str:
    """The URL without a password (one should never be there; a URL from elsewhere may hold one)."""
    try:
        from psycopg.conninfo import conninfo_to_dict, make_conninfo
        parts = conninfo_to_dict(url)
    except Exception:  # noqa: BLE001 - shown as given minus what looks like a secret
        return url.split("@")[-1]
    if "password" in parts:
        parts["password"] = "***"
        return make_conninfo("", **parts)
    return url


def encode(value: Any) -> bytes:
    return _encode(value)
