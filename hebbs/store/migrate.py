"""`hebbs migrate`: move a vault between its own RocksDB database and PostgreSQL, both ways.

Both stores hold the same families with the same keys (postgres.py), so a migration copies every
record as it is: memories and their revisions, vectors, edges, idempotency keys, access history,
contradiction candidates, the query log, reflection state. Ids do not change, so the kept originals
(files in the vault directory, keyed by memory id) still answer `hebbs source`. Only what belongs to
one store is left behind: RocksDB's write sequence and change log (PostgreSQL numbers its own). The
vault directory's derived indexes are removed, to be rebuilt from the new store at the next open, and
the old RocksDB database is kept beside, renamed, never deleted.
"""

from __future__ import annotations

import datetime as dt
import re
import shutil
from collections.abc import Callable
from pathlib import Path

from ..config import CONFIG_FILE as CONFIG_FILE_NAME, load_config, with_store_location
from ..errors import InvalidInput
from .changelog import PREFIX as CHANGES_PREFIX
from .contract import RecordStore
from .storage import COLUMN_FAMILIES, MARKER_FILE, Store, WriteSet, decode_vector, encode_vector

BATCH = 2000
_STORE_ONLY = (b"write_seq",)


def _copy(source: RecordStore, target: RecordStore, say: Callable[[str], None]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for family in COLUMN_FAMILIES:
        writes = WriteSet()
        n = 0
        for key, value in source.scan(family):
            if family == "meta" and (key.startswith(CHANGES_PREFIX) or key in _STORE_ONLY):
                continue
            if family == "vectors" and isinstance(target, Store):
                value = encode_vector(decode_vector(value))  # RocksDB keeps its own (float16) form
            writes.put(family, key, value)
            n += 1
            if len(writes) >= BATCH:
                target.commit(writes)
                writes = WriteSet()
        if len(writes):
            target.commit(writes)
        counts[family] = n
        if family == "meta":
            kept = sum(1 for key, _ in target.scan("meta") if not key.startswith(CHANGES_PREFIX)
                       and key not in _STORE_ONLY)
        else:
            kept = target.count(family)
        if kept != n:
            raise InvalidInput(f"migration check failed: {family} holds {kept} records in the new store, "
                               f"{n} in the old one; the vault still uses its old store")
        say(f"  {family:<20} {n} records")
    return counts


def _drop_derived(vault: Path) -> None:
    for name in ("index", "lexical"):
        shutil.rmtree(vault / name, ignore_errors=True)


def to_postgres(vault: Path, url: str, name: str, say: Callable[[str], None] = print) -> dict[str, int]:
    """Copy the vault's RocksDB database into PostgreSQL as vault `name`, then attach the directory to it."""
    from .postgres import PgStore

    config_path = vault / CONFIG_FILE_NAME
    if load_config(vault).store.url is not None:
        raise InvalidInput(f"{vault} is kept in PostgreSQL already; `hebbs migrate --to rocksdb` brings it back")
    with_store_location("", url, name)  # checked before anything is copied
    if not (vault / "db" / "CURRENT").exists():
        raise InvalidInput(f"{vault} has no RocksDB database to migrate")
    source = Store.open(vault / "db")
    try:
        target = PgStore.open(url, name, vault)
        try:
            if target.count("default") or target.count("meta"):
                raise InvalidInput(f"vault {name!r} in {target.where} is not empty; migrate into a new name (--name)")
            say(f"copying {vault} into {target.where}")
            counts = _copy(source, target, say)
        finally:
            target.close()
    finally:
        source.close()
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%S")
    (vault / "db").rename(vault / f"db.before-migrate-{stamp}")
    marker = vault / MARKER_FILE  # says "this vault had a RocksDB database": true of the renamed one now
    if marker.exists():
        marker.rename(vault / f"{MARKER_FILE}.before-migrate-{stamp}")
    text = config_path.read_text() if config_path.exists() else ""
    config_path.write_text(with_store_location(text, url, name))
    config_path.chmod(0o600)
    _drop_derived(vault)
    say(f"vault {vault} is now kept in {url} as {name!r}; its RocksDB database is kept as "
        f"{vault / f'db.before-migrate-{stamp}'}")
    return counts


def to_rocksdb(vault: Path, say: Callable[[str], None] = print) -> dict[str, int]:
    """Copy the vault out of PostgreSQL into a RocksDB database of its own, then detach the directory."""
    from .postgres import PgStore

    config_path = vault / CONFIG_FILE_NAME
    store = load_config(vault).store
    if store.url is None:
        raise InvalidInput(f"{vault} is kept in its own RocksDB database already")
    if (vault / "db").exists():
        raise InvalidInput(f"{vault / 'db'} exists; move it away first")
    source = PgStore.open(store.url, store.name or vault.name, vault)
    (vault / MARKER_FILE).unlink(missing_ok=True)  # a database left before a migration, not this one
    try:
        target = Store.open(vault / "db")
        try:
            say(f"copying {source.where} into {vault / 'db'}")
            counts = _copy(source, target, say)
        finally:
            target.close()
    finally:
        source.close()
    config_path.write_text(without_store_location(config_path.read_text()))
    _drop_derived(vault)
    say(f"vault {vault} is now kept in its own RocksDB database; its records stay in PostgreSQL too "
        f"(vault {store.name!r}) until you drop them there")
    return counts


# What [store] says of a PostgreSQL store; its durability, RocksDB's, stays.
_LOCATION_KEYS = ("url", "name", "read_url", "similar", "claim_lease", "pool_size", "unreachable_after")


def without_store_location(text: str) -> str:
    """config.toml without what its [store] table says of a PostgreSQL store (and the comment init wrote)."""
    text = re.sub(r"# Where this vault's records live:.*\n# from libpq.*\n", "", text)
    out: list[str] = []
    in_store = False
    for line in text.splitlines(keepends=True):
        header = re.match(r"\s*\[([^\]]+)\]", line)
        if header:
            in_store = header.group(1).strip() == "store"
        elif in_store and re.match(rf"\s*({'|'.join(_LOCATION_KEYS)})\s*=", line):
            continue
        out.append(line)
    return "".join(out).rstrip("\n") + "\n"
