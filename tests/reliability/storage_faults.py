"""Building a damaged vault: the file kinds of a vault, and the ways a file gets damaged.

Shared by the storage reliability tests and bench/reliability_long.py (the long variants).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import rocksdict

# The file kinds of a vault, each found in a vault directory by one function.
FILE_KINDS = ("sst", "manifest", "current", "wal", "options", "hnsw", "lexical", "config", "notes_manifest")
# Every other kind of file a vault owns (bench/bench_reliability.py's damage matrix runs them all).
DERIVED_KINDS = ("hnsw_meta", "catalog", "lexical_term", "lexical_fast", "lexical_idx", "lexical_meta",
                 "kept_original", "kept_index", "vault_marker")
DAMAGES = ("truncate", "delete", "bitflip")


def _largest_default_sst(vault: Path) -> Path:
    """The biggest table file holding memory records (keys 0x01 + 16-byte id: only `default` has them)."""
    db = rocksdict.Rdict(str(vault / "db"), options=rocksdict.Options(raw_mode=True),
                         column_families={n: rocksdict.Options(raw_mode=True)
                                          for n in rocksdict.Rdict.list_cf(str(vault / "db")) if n != "default"},
                         access_type=rocksdict.AccessType.read_only(False))
    try:
        files = [f for f in db.live_files()
                 if f["start_key"][:1] == b"\x01" and len(f["start_key"]) == 17 and len(f["end_key"]) == 17]
    finally:
        db.close()
    best = max(files, key=lambda f: f["size"])
    return vault / "db" / best["name"].lstrip("/")


def find_file(vault: Path, kind: str) -> Path:
    db = vault / "db"
    pick: dict[str, Callable[[], Path]] = {
        "sst": lambda: _largest_default_sst(vault),
        "manifest": lambda: db / (db / "CURRENT").read_text().strip(),
        "current": lambda: db / "CURRENT",
        "wal": lambda: max(db.glob("*.log"), key=lambda p: p.stat().st_size),
        "options": lambda: sorted(db.glob("OPTIONS-*"))[-1],
        "hnsw": lambda: vault / "index" / "hnsw.bin",
        "lexical": lambda: max((p for p in (vault / "lexical").rglob("*") if p.is_file() and p.suffix != ".lock"),
                               key=lambda p: p.stat().st_size),
        "config": lambda: vault / "config.toml",
        "notes_manifest": lambda: vault / "vault-manifest.json",
        "hnsw_meta": lambda: vault / "index" / "hnsw.meta",
        "catalog": lambda: max((p for p in (vault / "index").iterdir() if p.name not in ("hnsw.bin", "hnsw.meta")),
                               key=lambda p: p.stat().st_size),
        "lexical_term": lambda: max((vault / "lexical").glob("*.term"), key=lambda p: p.stat().st_size),
        "lexical_fast": lambda: max((vault / "lexical").glob("*.fast"), key=lambda p: p.stat().st_size),
        "lexical_idx": lambda: max((vault / "lexical").glob("*.idx"), key=lambda p: p.stat().st_size),
        "lexical_meta": lambda: vault / "lexical" / "meta.json",
        "kept_original": lambda: max((vault / "sources" / "blobs").glob("*/*"), key=lambda p: p.stat().st_size),
        "kept_index": lambda: next((vault / "sources").glob("index*")),
        "vault_marker": lambda: vault / "vault.json",
    }
    return pick[kind]()


def damage(path: Path, how: str) -> None:
    if how == "delete":
        path.unlink()
        return
    data = bytearray(path.read_bytes())
    if how == "truncate":
        path.write_bytes(bytes(data[: len(data) // 2]))
        return
    # 64 bytes inverted in the middle of the file: what a bad sector or a stray write leaves.
    middle = max(0, len(data) // 2 - 32)
    for i in range(middle, min(len(data), middle + 64)):
        data[i] ^= 0xFF
    path.write_bytes(bytes(data))


def copy_vault(source: Path, target: Path) -> Path:
    shutil.copytree(source, target, symlinks=True)
    for lock in target.rglob("LOCK"):
        os.chmod(lock, 0o600)
    return target
