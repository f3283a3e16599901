"""`hebbs doctor`: check every file of a vault, say what is readable, and save it.

The vault is opened read-only (RocksDB takes no lock for that), so the doctor runs beside a daemon
that holds the vault and never changes a byte of it. A database that cannot be opened at all (a lost
MANIFEST or CURRENT) is copied to a temporary directory and repaired there with RocksDB's RepairDB;
what the copy yields is reported and exported, the original stays as it was.

Every family is read end to end with checksums verified, which reads every data block of every
table file. A family that stops at a damaged block is also read backwards from its end, and each
memory whose id the other families still know is looked up on its own: what survives around the
damaged block is found, and the memories lost in it are named.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import msgspec
import rocksdict

from ..config import load_config
from ..errors import HebbsError, InvalidInput
from ..fsutil import atomic_write
from ..schema import Memory
from ..index.lexical import damaged_segment_files
from ..store.manifest import manifest_problem
from ..store.originals import DAMAGED_INDEX_FILE, INDEX_FILE, SOURCES_DIR, Originals
from ..index.vector import snapshot_intact
from ..store.storage import (COLUMN_FAMILIES, MARKER_FILE, MEMORY_PREFIX, TIMELINE_ENTITY, VECTOR_PREFIX, decode_memory,
                      id_str, memory_key, storage_options, temporal_prefix)

# What a file check may say that is no damage: a vault made before its marker existed gets one at its next open.
NOT_DAMAGE = frozenset({"vault marker"})
_FILE_IN_ERROR = re.compile(r"(/[^\s:]+\.(?:sst|log|blob))|(MANIFEST-\d+)")


class FileCheck(msgspec.Struct, kw_only=True):
    path: str
    kind: str  # sst, wal, manifest, current, options, hnsw snapshot, lexical index, config, notes manifest, ...
    size: int | None = None
    ok: bool = True
    problem: str | None = None
    # Derived files (indexes, caches) are rebuilt from RocksDB or the notes: damage there loses nothing.
    derived: bool = False


class FamilyCheck(msgspec.Struct, kw_only=True):
    family: str
    readable: int = 0
    # Keys before the damage (read forwards) and after it (read backwards); equal to readable when intact.
    damaged: bool = False
    errors: list[str] = []


class DoctorReport(msgspec.Struct, kw_only=True):
    vault: str
    healthy: bool
    # "direct": the database opened as it is; "repaired copy": only a repaired copy of it opened;
    # "failed": neither did, nothing in RocksDB is readable.
    opened: str
    files: list[FileCheck] = []
    families: list[FamilyCheck] = []
    memories_readable: int = 0
    # Ids the temporal or vectors family still lists whose record could not be read.
    memories_lost: list[str] = []
    exported: int | None = None
    export_path: str | None = None
    advice: list[str] = []
    # Any damage at all, derived files included (a vault can be healthy, every memory readable, with a
    # damaged index): what `hebbs doctor`'s exit code follows.
    damage_found: bool = False


def doctor(vault: os.PathLike | str, *, export: os.PathLike | str | None = None) -> DoctorReport:
    """Check the vault at `vault` (its directory: a notes folder's .hebbs/ or HEBBS_HOME); with
    `export`, write every readable memory there as JSON lines (what `hebbs import` reads)."""
    path = Path(vault).expanduser().absolute()
    if not path.is_dir():
        raise InvalidInput(f"no vault at {path}")
    db_path = path / "db"
    report = DoctorReport(vault=str(path), healthy=True, opened="failed")
    report.files = _side_files(path) + _db_files(db_path)
    memories: dict[str, Memory] = {}
    with _open_readable(db_path, report) as db:
        if db is not None:
            memories = _check_families(db, report)
    report.memories_readable = len(memories)
    if export is not None:
        target = Path(export).expanduser().absolute()
        body = b"".join(msgspec.json.encode(m) + b"\n" for m in sorted(memories.values(), key=lambda m: m.id))
        atomic_write(target, body)
        report.exported, report.export_path = len(memories), str(target)
    report.healthy = (report.opened == "direct" and all(f.ok or f.derived for f in report.files)
                      and not any(f.damaged for f in report.families) and not report.memories_lost)
    report.damage_found = not report.healthy or any(not f.ok and f.kind not in NOT_DAMAGE for f in report.files)
    report.advice = _advice(report, path)
    return report


def _derived_advice(check: FileCheck) -> str:
    if check.kind == "kept originals index" and check.problem and check.problem.startswith("missing"):
        return (f"{check.path} (kept originals index) is missing: `hebbs source` cannot find the versions kept "
                "before it. Restore it from a backup before the next index run, which deletes the kept versions "
                "no index lists")
    if check.kind == "kept originals index":
        # Not rebuilt from anything: the map from memories to the file versions they came from is gone.
        return (f"{check.path} (kept originals index) is damaged: `hebbs source` cannot find the versions "
                "kept before it; the next index run keeps versions again, and keeps every old blob while "
                f"{DAMAGED_INDEX_FILE} is beside it (delete that file to let them be pruned)")
    if check.kind == "kept originals":
        return (f"{check.path}: {check.problem}. `hebbs source` says so for the memories they held; "
                "those versions cannot be shown again unless restored from a backup")
    if check.kind == "lexical index" and check.problem and "checksum" in check.problem:
        # Unlike the other derived files, nothing at open notices this: the index still opens.
        return (f"{check.path} (lexical index) is damaged: the next open of the vault (the daemon's, or "
                "any) finds it and rebuilds it from the database; or remove that folder while no process "
                "has the vault open")
    return f"{check.path} ({check.kind}) is rebuilt at the next open or index run: nothing to do"


# Files -----------------------------------------------------------------------------------------

def _db_kind(name: str) -> str:
    if name.endswith(".sst"):
        return "sst"
    if name.endswith(".log"):
        return "wal"
    for prefix, kind in (("MANIFEST-", "manifest"), ("CURRENT", "current"), ("OPTIONS-", "options"),
                         ("LOCK", "lock"), ("IDENTITY", "identity"), ("LOG", "info log")):
        if name.startswith(prefix):
            return kind
    return "other"


def _db_files(db_path: Path) -> list[FileCheck]:
    if not db_path.is_dir():
        return [FileCheck(path=str(db_path), kind="database", ok=False, problem="missing")]
    files = [FileCheck(path=str(f), kind=_db_kind(f.name), size=f.stat().st_size)
             for f in sorted(db_path.iterdir()) if f.is_file()]
    for f in files:
        if f.kind == "current":
            target = Path(f.path).read_text(errors="replace").strip()
            if not (db_path / target).is_file():
                f.ok, f.problem = False, f"names {target!r}, which does not exist"
    cut = manifest_problem(db_path)
    if cut is not None:
        for f in files:
            if f.path == str(cut[0]):
                # RocksDB reads it as ending at the cut: the table files named after it would be missed.
                f.ok, f.problem = False, f"{cut[1]}; RocksDB would read only the edits before the cut"
    if not any(f.kind == "current" for f in files):
        files.append(FileCheck(path=str(db_path / "CURRENT"), kind="current", ok=False, problem="missing"))
    return files


def _side_files(path: Path) -> list[FileCheck]:
    out: list[FileCheck] = []
    marker = path / MARKER_FILE
    if not marker.is_file():
        out.append(FileCheck(path=str(marker), kind="vault marker", ok=False, derived=True,
                             problem="absent (written at the next open)"))
    config = path / "config.toml"
    if config.exists():
        check = FileCheck(path=str(config), kind="config", size=_size(config))
        try:
            load_config(path)
        except HebbsError as exc:
            check.ok, check.problem = False, str(exc)
        out.append(check)
    snapshot = path / "index"
    check = FileCheck(path=str(snapshot), kind="hnsw snapshot", derived=True)
    if snapshot.exists() and not snapshot.is_dir():
        check.ok, check.problem = False, "not a directory"
    elif (snapshot / "hnsw.meta").is_file():
        if not snapshot_intact(snapshot):
            check.ok, check.problem = False, "checksum mismatch or unreadable: the next open rebuilds it"
    out.append(check)
    lexical = path / "lexical"
    check = FileCheck(path=str(lexical), kind="lexical index", derived=True)
    if lexical.exists() and not lexical.is_dir():
        check.ok, check.problem = False, "not a directory"
    elif lexical.is_dir():
        damaged = damaged_segment_files(lexical)
        if damaged:
            names = ", ".join(f"{name} ({problem})" for name, problem in damaged)
            check.ok, check.problem = False, f"segment files fail their checksum: {names}"
    out.append(check)
    kept = path / SOURCES_DIR / INDEX_FILE
    blobs = path / SOURCES_DIR / "blobs"
    has_blobs = blobs.is_dir() and any(p.is_file() for p in blobs.glob("*/*"))
    if kept.exists() or has_blobs or (path / SOURCES_DIR / DAMAGED_INDEX_FILE).exists():
        check = FileCheck(path=str(kept), kind="kept originals index", derived=True, size=_size(kept))
        if (path / SOURCES_DIR / DAMAGED_INDEX_FILE).exists():
            check.ok, check.problem = False, f"was damaged: moved aside to {DAMAGED_INDEX_FILE}"
        elif not kept.exists():
            # The blobs are only ever written before the index that lists them is saved.
            check.ok, check.problem = False, "missing, while kept file versions are there"
        elif not Originals.readable_index(kept):
            check.ok, check.problem = False, "unreadable"
        out.append(check)
    listed = Originals.listed_versions(kept) if kept.exists() else set()
    if blobs.is_dir() or listed:
        out.append(_kept_versions(blobs, listed))
    notes_manifest = path / "vault-manifest.json"
    if notes_manifest.exists():
        check = FileCheck(path=str(notes_manifest), kind="notes manifest", derived=True,
                          size=_size(notes_manifest))
        try:  # the notes layer parses it in full; here it only has to be JSON
            msgspec.json.decode(notes_manifest.read_bytes())
        except (msgspec.DecodeError, UnicodeDecodeError, OSError) as exc:
            check.ok, check.problem = False, f"unreadable ({exc}): the next index run rebuilds it"
        out.append(check)
    return out


def _kept_versions(blobs: Path, listed: set[str]) -> FileCheck:
    """Every kept file version, decompressed and checked against the hash it is named by; and every
    version the kept originals' index lists, there."""
    check = FileCheck(path=str(blobs), kind="kept originals", derived=True)
    files = sorted(p for p in blobs.glob("*/*") if p.is_file() and not p.name.startswith("."))
    bad = [p.name for p in files if not Originals.intact_blob(p)]
    missing = sorted(listed - {p.name for p in files})
    check.size = sum(_size(p) or 0 for p in files)
    problems = []
    if bad:
        problems.append(f"{len(bad)} of {len(files)} kept file versions fail their hash ({_names(bad)})")
    if missing:
        problems.append(f"{len(missing)} of {len(listed)} kept file versions the index lists are missing "
                        f"({_names(missing)})")
    if problems:
        check.ok, check.problem = False, "; ".join(problems)
    return check


def _names(hashes: list[str]) -> str:
    return ", ".join(name[:12] for name in hashes[:10]) + (" ..." if len(hashes) > 10 else "")


def _size(path: Path) -> int | None:
    try:
        return path.stat().st_size
    except OSError:
        return None


# Opening ---------------------------------------------------------------------------------------

class _open_readable:
    """The database read-only, or a repaired copy of it; None when neither opens."""

    def __init__(self, db_path: Path, report: DoctorReport) -> None:
        self.db_path = db_path
        self.report = report
        self.db: rocksdict.Rdict | None = None
        self.copy: Path | None = None

    def __enter__(self) -> rocksdict.Rdict | None:
        if not (self.db_path / "CURRENT").exists() and not any(self.db_path.glob("*.sst")):
            return None
        if manifest_problem(self.db_path) is None:
            try:
                self.db = _open_read_only(self.db_path)
                self.report.opened = "direct"
                return self.db
            except Exception as exc:
                self.report.files.append(FileCheck(path=str(self.db_path), kind="database", ok=False,
                                                   problem=f"does not open: {exc}"))
        # else: opened as it is, it would show the version before the cut; the repair reads every table file.
        self.copy = Path(tempfile.mkdtemp(prefix="hebbs-doctor-"))
        try:
            repaired = self.copy / "db"
            shutil.copytree(self.db_path, repaired, ignore=shutil.ignore_patterns("LOCK"))
            rocksdict.Rdict.repair(str(repaired), storage_options())
            self.db = _open_read_only(repaired)
            self.report.opened = "repaired copy"
        except Exception as exc:
            self.report.files.append(FileCheck(path=str(self.db_path), kind="database", ok=False,
                                               problem=f"a repaired copy does not open either: {exc}"))
        return self.db

    def __exit__(self, *exc: object) -> None:
        if self.db is not None:
            self.db.close()
            self.db = None
        if self.copy is not None:
            shutil.rmtree(self.copy, ignore_errors=True)


def _open_read_only(path: Path) -> rocksdict.Rdict:
    opts = storage_options(create=False)
    present = set(rocksdict.Rdict.list_cf(str(path), opts))
    families = {name: opts for name in COLUMN_FAMILIES[1:] if name in present}
    return rocksdict.Rdict(str(path), options=opts, column_families=families,
                           access_type=rocksdict.AccessType.read_only(False))


# Reading ---------------------------------------------------------------------------------------

def _verifying() -> rocksdict.ReadOptions:
    opts = rocksdict.ReadOptions()
    opts.set_verify_checksums(True)
    opts.fill_cache(False)
    return opts


def _walk(view: rocksdict.Rdict, backwards: bool) -> Iterator[tuple[bytes, bytes]]:
    """Every item in one direction; raises where RocksDB cannot go on."""
    it = view.iter(_verifying())
    try:
        it.seek_to_last() if backwards else it.seek_to_first()
        step = it.prev if backwards else it.next
        while it.valid():
            yield it.key(), it.value()
            step()
        it.status()
    finally:
        del it


def _read_family(view: rocksdict.Rdict, check: FamilyCheck) -> dict[bytes, bytes]:
    items: dict[bytes, bytes] = {}
    try:
        for key, value in _walk(view, backwards=False):
            items[key] = value
        return items
    except Exception as exc:
        check.damaged = True
        check.errors.append(f"reading forwards stopped: {exc}")
    try:
        for key, value in _walk(view, backwards=True):
            if key in items:
                break
            items[key] = value
    except Exception as exc:
        check.errors.append(f"reading backwards stopped: {exc}")
    return items


def _check_families(db: rocksdict.Rdict, report: DoctorReport) -> dict[str, Memory]:
    present = set(rocksdict.Rdict.list_cf(db.path(), storage_options(create=False)))
    contents: dict[str, dict[bytes, bytes]] = {}
    for family in COLUMN_FAMILIES:
        check = FamilyCheck(family=family)
        report.families.append(check)
        if family not in present:
            # A repaired copy has no family whose tables were all lost, nor one that was only ever empty.
            why = ("missing from the repaired copy (all its tables were lost, or it was empty)"
                   if report.opened == "repaired copy" else "the column family is missing")
            check.damaged, check.errors = True, [why]
            contents[family] = {}
            continue
        contents[family] = _read_family(db.get_column_family(family), check)
        check.readable = len(contents[family])
        for error in check.errors:
            _blame_files(report, error)
    memories: dict[str, Memory] = {}
    default = contents["default"]
    known = {id_str(raw) for key, raw in contents["temporal"].items()
             if key.startswith(temporal_prefix(TIMELINE_ENTITY)) and len(raw) == 16}
    known |= {id_str(key[1:]) for key in contents["vectors"] if key.startswith(VECTOR_PREFIX) and len(key) == 17}
    view = db.get_column_family("default") if "default" in present else None
    for memory_id in known:
        key = memory_key(memory_id)
        if key not in default and view is not None:
            try:
                raw = view.get(key, read_opt=_verifying())
            except Exception:
                raw = None
            if raw is not None:
                default[key] = raw
    default_check = report.families[0]
    for key, raw in default.items():
        if not key.startswith(MEMORY_PREFIX):
            continue
        try:
            memory = decode_memory(raw)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            default_check.damaged = True
            default_check.errors.append(f"memory {id_str(key[1:])} cannot be decoded: {exc}")
            continue
        memories[memory.id] = memory
    default_check.readable = len(default)
    report.memories_lost = sorted(known - set(memories))
    if report.memories_lost and not default_check.damaged:
        # Its tables can be lost whole (a truncated file is dropped by the repair): then nothing in it
        # reads as damaged, yet the other families still list the memories it held.
        default_check.damaged = True
        default_check.errors.append(f"{len(report.memories_lost)} memories that the timeline and the vectors "
                                    f"list are not in it")
    return memories


def _blame_files(report: DoctorReport, error: str) -> None:
    for match in _FILE_IN_ERROR.finditer(error):
        name = Path(match.group(0)).name
        for f in report.files:
            if Path(f.path).name == name and f.ok:
                f.ok, f.problem = False, error


def _advice(report: DoctorReport, path: Path) -> list[str]:
    out = [_derived_advice(f) for f in report.files if not f.ok and f.derived]
    if report.healthy:
        return out or ["no damage found"]
    if report.opened != "direct":
        out.append("the database does not open as it is" + (
            "; a repaired copy does: export it" if report.opened == "repaired copy" else ""))
    if report.memories_lost:
        out.append(f"{len(report.memories_lost)} memories are in damaged blocks and cannot be read; "
                   "restore the vault from a backup to get them back")
    if report.exported is None:
        out.append(f"save what is readable: hebbs doctor --vault {path} --export memories.jsonl")
    out.append("then move the damaged vault aside, create a new one with `hebbs init`, `hebbs import "
               "memories.jsonl`, and only then `hebbs index` the notes (it adopts the imported sections; "
               "indexing first stores them twice)")
    return out
