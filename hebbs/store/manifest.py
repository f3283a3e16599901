"""Whether a RocksDB MANIFEST was cut short: its last record ends past the end of the file.

RocksDB reads a MANIFEST that stops inside a record as if it ended at the last whole record (a
writer that died mid-record), so a MANIFEST cut by damage opens without complaint as the version
before the cut: the table files named after it are neither read nor kept (a read-write open deletes
them as obsolete). Only the framing shows the cut, so both the open (storage.py) and `hebbs doctor`
walk it.

The framing is RocksDB's log format: 32 KiB blocks of records, each a header (checksum 4 bytes,
length 2 bytes little-endian, type 1 byte; 4 more bytes for the recyclable types) and its payload,
a logical record split over blocks as FIRST, MIDDLE..., LAST; a block's tail shorter than a header
is zero padding.
"""

from __future__ import annotations

from pathlib import Path

BLOCK = 32 * 1024
HEADER = 7
RECYCLABLE_HEADER = 11
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4
RECYCLABLE = frozenset({5, 6, 7, 8, 11})


def current_manifest(db_path: Path) -> Path | None:
    """The MANIFEST that CURRENT names, None when CURRENT is missing or names no file."""
    try:
        name = (db_path / "CURRENT").read_text(errors="replace").strip()
    except OSError:
        return None
    path = db_path / name
    return path if name and path.is_file() else None


def cut_short(data: bytes) -> str | None:
    """Why this MANIFEST's bytes end inside a record; None when it ends at a record's end."""
    offset, size = 0, len(data)
    open_fragment = False
    while offset < size:
        left = BLOCK - offset % BLOCK
        if left < HEADER:
            offset += left  # the block's zero padding
            continue
        if offset + HEADER > size:
            return f"it ends inside a record header at byte {offset} of {size}"
        kind = data[offset + 6]
        if kind == 0 and data.count(0, offset) == size - offset:
            break  # zeros to the end: space preallocated and never written
        header = RECYCLABLE_HEADER if kind in RECYCLABLE else HEADER
        length = int.from_bytes(data[offset + 4:offset + 6], "little")
        end = offset + header + length
        if end > size:
            return f"its record at byte {offset} needs {end - offset} bytes, the file ends after {size - offset}"
        if kind in (FIRST, MIDDLE, 6, 7):
            open_fragment = True
        elif kind in (FULL, LAST, 5, 8):
            open_fragment = False
        offset = end
    if open_fragment:
        return "its last record is split over blocks and its final part is missing"
    return None


def manifest_problem(db_path: Path) -> tuple[Path, str] | None:
    """(the MANIFEST, what is wrong with it) when the MANIFEST that CURRENT names was cut short."""
    path = current_manifest(db_path)
    if path is None:
        return None
    try:
        problem = cut_short(path.read_bytes())
    except OSError as exc:
        return path, f"it cannot be read ({exc.strerror})"
    return None if problem is None else (path, f"cut short: {problem}")
