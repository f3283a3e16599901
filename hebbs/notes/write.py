"""Notes an agent writes: `note write` creates or replaces a note of the notes folder, `note append` extends
one, and both index it at once (its sections become memories, its wiki-links edges, its version a kept
original), as the watcher would after a person saved it.

A person may have the same note open in an editor. No edit is lost without a word:

- every note has a version, the first 16 hex digits of the SHA-256 of its bytes (`note read` says it);
- `write` of a note that exists must be given the version it replaces: another version is a CONFLICT
  (nothing written), and so is one that appears between the check and the rename;
- `append` re-reads the note just before renaming its new text over it; a note that changed meanwhile
  is read again and the text appended to that (a few times), or, when the caller gave a version, a CONFLICT;
- a new note is created with link(2), which fails when a file of that name appeared meanwhile.

What is left: a save that lands in the microseconds between that last comparison and the rename is
replaced (no editor holds a lock hebbs could take), and an editor holding unsaved changes of its own
decides what happens when it saves (docs/notes.md, "Notes the agent writes").

Only inside the notes folder: a path is relative, has no `..`, names a `.md` file the indexer would
index (no dot-folder, nothing `.hebbsignore` or hebbs' own insights and contradictions folders hold),
goes through no symbolic link, and the note stays within [notes] max_note_bytes.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import errno
import hashlib
import json
import os
import re
import tempfile
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

from ..errors import Conflict, DiskFull, InvalidInput
from ..fsutil import fsync_dir
from ..schema import NoteText, NoteWritten
from .indexer import apply_plan, index_notes, resolve_root, scan_notes, vault_lock
from .manifest import FORGOTTEN, load_manifest
from .walk import VaultFilter, printable

__all__ = ["note_read", "note_write", "note_append", "version_of"]

# A new note is private to its owner, as every file hebbs makes; a replaced note keeps its mode.
NEW_NOTE_MODE = 0o600
# How often an append reads the note again when it changed on disk while being written.
APPEND_TRIES = 5
_FRONT_MATTER = re.compile(r"\A(---[ \t]*\r?\n)(.*?)(\r?\n)(---|\.\.\.)[ \t]*(\r?\n|\Z)", re.S)
_UPDATED_LINE = re.compile(r"^updated[ \t]*:.*$", re.M)
_TOP_HEADING = re.compile(r"\A\s*#[ \t]+\S")
_NO_LINKS = {errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV, errno.EMLINK}


def version_of(data: bytes) -> str:
    """A note's version: the first 16 hex digits of the SHA-256 of its bytes."""
    return hashlib.sha256(data).hexdigest()[:16]


# Where: inside the notes folder only ---------------------------------------------------------------

def _note_path(root: Path, given: str) -> tuple[str, Path, VaultFilter]:
    """(the note's relative POSIX path, its absolute path, the folder's filter), or InvalidInput saying why
    hebbs will not write there."""
    text = given.strip()
    if not text:
        raise InvalidInput("the note's path is empty: give one inside the notes folder, e.g. agent/deploy.md")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInput(f"the note's path {printable(text)!r} is not valid UTF-8") from None
    shown = repr(text)
    if any(ord(c) < 0x20 or c == "\x7f" for c in text):
        raise InvalidInput(f"the note's path {shown} holds a control character (a line break, a tab); name it "
                           "with printable characters")
    pure = PurePosixPath(text.replace("\\", "/") if os.sep == "\\" else text)
    if pure.is_absolute():
        raise InvalidInput(f"the note's path {shown} is absolute; give it relative to the notes folder {root}")
    if ".." in pure.parts:
        raise InvalidInput(f"the note's path {shown} leads out of the notes folder {root} ('..'); hebbs writes "
                           "notes only inside it")
    rel = "/".join(part for part in pure.parts if part != ".")
    if not rel.lower().endswith(".md") or rel.rsplit("/", 1)[-1].lower() == ".md":
        raise InvalidInput(f"the note's path {shown} does not name a markdown file: it must end with .md")
    vfilter = VaultFilter(root)
    if not vfilter.is_note(rel):
        raise InvalidInput(f"{rel} is not indexed in this notes folder (a dot-folder, hebbs' insights or "
                           f"contradictions folder, or a rule of .hebbsignore): hebbs writes only notes it indexes")
    path = root
    for n, part in enumerate(rel.split("/")):
        path = path / part
        last = n == len(rel.split("/")) - 1
        try:
            if path.is_symlink():
                raise InvalidInput(f"{rel}: {path} is a symbolic link; hebbs writes notes only through real "
                                   "folders and files of the notes folder")
            if path.exists() and not (path.is_file() if last else path.is_dir()):
                raise InvalidInput(f"{rel}: {path} is not a {'file' if last else 'folder'}")
        except OSError as exc:  # a name too long for the file system, say
            raise InvalidInput(f"{rel} cannot be written ({exc.strerror or exc})") from None
    real_root = os.path.realpath(root)
    if not os.path.realpath(path).startswith(real_root + os.sep):
        raise InvalidInput(f"{rel} leads outside the notes folder {root}; hebbs writes notes only inside it")
    return rel, path, vfilter


def _notes_folder(root: os.PathLike[str] | str) -> Path:
    folder = resolve_root(root)
    if not folder.is_dir():
        raise InvalidInput(f"the notes folder {folder} is not a directory")
    return folder


def _current(path: Path, limit: int) -> bytes | None:
    """The note's bytes now (None: no such file), never through a link, never more than `limit` of them."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise InvalidInput(f"{path} cannot be read ({exc.strerror or exc}); nothing written") from None
    with os.fdopen(fd, "rb") as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise InvalidInput(f"{path} is over the {limit:,}-byte limit for a note ([notes] max_note_bytes in "
                           f".hebbs/config.toml); nothing written")
    return data


# Reading ------------------------------------------------------------------------------------------

def note_read(root: os.PathLike[str] | str, path: str) -> NoteText:
    """A note as it is now, with its version (exists=False and no version when there is none yet)."""
    folder = _notes_folder(root)
    rel, file, vfilter = _note_path(folder, path)
    data = _current(file, vfilter.max_note_bytes)
    if data is None:
        return NoteText(path=rel, file=str(file), exists=False)
    return NoteText(path=rel, file=str(file), exists=True, version=version_of(data),
                    text=data.decode("utf-8", errors="replace"))


# Writing ------------------------------------------------------------------------------------------

def note_write(engine: Any, root: os.PathLike[str] | str, path: str, text: str, *, title: str | None = None,
               tags: list[str] | None = None, links: list[str] | None = None, author: str | None = None,
               expected_version: str | None = None) -> NoteWritten:
    """Create the note, or replace the one of `expected_version`, and index it.

    The note gets front matter (title, created, updated, author, tags; a replaced note keeps its created
    time, its author and the keys a person added), a `# title` heading unless the text starts with one, and a
    `Related:` line of wiki-links. A note that exists and was not given its version, or changed from it,
    is a CONFLICT naming its current version: nothing is written."""
    folder = _notes_folder(root)
    with vault_lock(folder):
        rel, file, vfilter = _note_path(folder, path)
        current = _current(file, vfilter.max_note_bytes)
        now = _now()
        if current is None:
            if expected_version is not None:
                raise Conflict(f"{rel} no longer exists (the version read was {expected_version}); nothing "
                               f"written. Write it without a version to create it again")
        else:
            found = version_of(current)
            if expected_version is None:
                raise Conflict(f"{rel} exists (version {found}); nothing written. Read it (`note read`), keep "
                               f"what a person added, and write with that version, or append to it", found)
            if expected_version != found:
                raise Conflict(f"{rel} is version {found} now, not {expected_version}: it changed since it was "
                               f"read; nothing written. Read it again and write with that version", found)
        old_fm = _front_matter_of(current) if current is not None else {}
        fm: dict[str, Any] = {"title": title or old_fm.get("title") or _title_of(rel),
                              "created": old_fm.get("created") or now, "updated": now}
        if old_fm.get("author") or author:  # who made the note, as `created` is when
            fm["author"] = old_fm.get("author") or author
        if tags or old_fm.get("tags"):
            fm["tags"] = _tags(tags) if tags else old_fm.get("tags")
        fm.update({k: v for k, v in old_fm.items() if k not in fm})
        body = text.strip("\n")
        if not _TOP_HEADING.match(body):
            body = f"# {fm['title']}\n\n{body}" if body else f"# {fm['title']}"
        new = _front_matter_text(fm) + "\n" + body + "\n" + _related(links)
        data = _checked_size(new.encode("utf-8"), rel, vfilter.max_note_bytes)
        mode = NEW_NOTE_MODE if current is None else _mode(file)
        if not _written(file, current, data, mode, rel):
            now_there = _current(file, vfilter.max_note_bytes)
            found_now = version_of(now_there) if now_there is not None else None
            raise Conflict(f"{rel} changed while hebbs wrote it (it is "
                           f"{'version ' + found_now if found_now else 'deleted'} now); nothing written. Read it "
                           f"again and write with its version", found_now)
        return _indexed(engine, folder, rel, file, data, current, retries=0)


def note_append(engine: Any, root: os.PathLike[str] | str, path: str, text: str, *, title: str | None = None,
                tags: list[str] | None = None, links: list[str] | None = None, author: str | None = None,
                expected_version: str | None = None) -> NoteWritten:
    """Add text (and a `Related:` line of wiki-links) at the end of the note, creating it as note_write
    would when there is none, and index it. Nothing of the note but its end and its `updated` time
    changes. When the note changes on disk while the new text is written, it is read again and the text
    appended to what is there now; with `expected_version`, a note of another version is a CONFLICT."""
    if not text.strip() and not links:
        raise InvalidInput("nothing to append: give the text (or links)")
    folder = _notes_folder(root)
    with vault_lock(folder):
        rel, file, vfilter = _note_path(folder, path)
        for attempt in range(APPEND_TRIES):
            current = _current(file, vfilter.max_note_bytes)
            found = version_of(current) if current is not None else None
            if expected_version is not None and expected_version != found:
                raise Conflict(f"{rel} " + (f"is version {found} now, not {expected_version}" if found
                                            else "no longer exists") + "; nothing appended", found)
            now = _now()
            if current is None:
                fm: dict[str, Any] = {"title": title or _title_of(rel), "created": now, "updated": now}
                if author:
                    fm["author"] = author
                if tags:
                    fm["tags"] = _tags(tags)
                new = (_front_matter_text(fm) + f"\n# {fm['title']}\n\n" + text.strip("\n") + "\n"
                       + _related(links))
            else:
                new = _appended(current, text, links, now, rel)
            data = _checked_size(new.encode("utf-8"), rel, vfilter.max_note_bytes)
            if _written(file, current, data, NEW_NOTE_MODE if current is None else _mode(file), rel):
                return _indexed(engine, folder, rel, file, data, current, retries=attempt)
            if expected_version is not None:
                raise Conflict(f"{rel} changed while hebbs appended to it; nothing appended. Read it again")
        raise Conflict(f"{rel} kept changing while hebbs appended to it ({APPEND_TRIES} tries); nothing appended. "
                       f"Try again once it is saved")


def _appended(current: bytes, text: str, links: list[str] | None, now: str, rel: str) -> str:
    try:
        note = current.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidInput(f"{rel} is not UTF-8 text; hebbs appends only to text") from None
    newline = "\r\n" if "\r\n" in note else "\n"
    found = _FRONT_MATTER.match(note)
    if found:  # only its `updated` line changes: the person's front matter stays as they wrote it
        inner = found[2]
        updated = f"updated: {json.dumps(now)}"
        inner = (_UPDATED_LINE.sub(updated, inner, count=1) if _UPDATED_LINE.search(inner)
                 else inner + newline + updated)
        note = found[1] + inner + found[3] + found[4] + (found[5] or newline) + note[found.end():]
    addition = text.strip("\n") + "\n" + _related(links)
    joined = note.rstrip("\r\n") + "\n\n" + addition if note.strip() else addition
    return joined.replace("\r\n", "\n").replace("\n", newline) if newline != "\n" else joined


def _written(path: Path, current: bytes | None, data: bytes, mode: int, rel: str) -> bool:
    """_commit, its file system errors said as hebbs says them (nothing of the note changed)."""
    try:
        return _commit(path, current, data, mode)
    except OSError as exc:
        if exc.errno == errno.ENOSPC:
            raise DiskFull(f"no space left on the disk holding {path.parent}: {rel} was not written; the note is "
                           "as it was") from None
        raise InvalidInput(f"{rel} cannot be written ({exc.strerror or exc}); the note is as it was") from None


def _commit(path: Path, current: bytes | None, data: bytes, mode: int) -> bool:
    """Put data at path if the note is still `current` (None: still absent); False when it is not.

    The new text goes to a hidden file beside the note (fsynced; the indexer and the watcher skip dot
    files), then: a new note is linked into place, which fails if a file of its name appeared; an
    existing one is read again and, still the same, renamed over. Either way a reader or a crash sees
    the old note or the whole new one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        if current is None:
            try:
                os.link(tmp, path)
            except FileExistsError:
                return False
            except OSError as exc:
                if exc.errno not in _NO_LINKS:
                    raise
                # A file system without hard links (FAT, some network mounts): the same check as an
                # existing note gets, with the same last instant left between it and the rename.
                if os.path.lexists(path):
                    return False
                os.replace(tmp, path)
        else:
            if _current(path, len(current) + 1) != current:
                return False
            os.replace(tmp, path)
        fsync_dir(path.parent)
        return True
    except InvalidInput:
        return False  # it grew past the size compared while we wrote: changed
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def _indexed(engine: Any, root: Path, rel: str, file: Path, data: bytes, previous: bytes | None,
             retries: int) -> NoteWritten:
    """Index the note just written, as the watcher would: its sections remembered or revised, its links
    made edges, this version kept as an original. A folder never indexed is indexed whole first."""
    if load_manifest(root)[0].fresh:
        # A scan of one note over a new (or unreadable) manifest would reconcile the vault against that
        # note alone, forgetting every other note's memories.
        summary = index_notes(engine, root)
        manifest, _ = load_manifest(root)
    else:
        plan = scan_notes(engine, root, paths=[rel])
        summary = apply_plan(engine, root, plan)
        manifest = plan.manifest
    entry = manifest.files.get(rel)
    ids = [s.memory_id for s in entry.sections if s.memory_id and s.state != FORGOTTEN] if entry else []
    return NoteWritten(path=rel, file=str(file), version=version_of(data),
                       previous_version=version_of(previous) if previous is not None else None,
                       created=previous is None, retries=retries, sections=len(ids), memory_ids=ids,
                       warnings=[w for w in summary.warnings if w.startswith(rel)])


# Front matter and links -----------------------------------------------------------------------------

def _front_matter_of(data: bytes) -> dict[str, Any]:
    found = _FRONT_MATTER.match(data.decode("utf-8", errors="replace"))
    if not found:
        return {}
    try:
        loaded = yaml.safe_load(found[2])
    except yaml.YAMLError:
        return {}
    return loaded if isinstance(loaded, dict) else {}


def _front_matter_text(fm: dict[str, Any]) -> str:
    # Each value as JSON, which YAML reads as it is: no quoting rule of YAML's to get wrong.
    lines = [f"{_key(key)}: {json.dumps(value, ensure_ascii=False, default=str)}" for key, value in fm.items()]
    return "---\n" + "\n".join(lines) + "\n---\n"


def _key(key: Any) -> str:
    text = str(key)
    return text if re.fullmatch(r"[A-Za-z_][\w-]*", text) else json.dumps(text, ensure_ascii=False)


def _tags(tags: list[str]) -> list[str]:
    out = [t.strip().lstrip("#") for t in tags if t.strip().lstrip("#")]
    return list(dict.fromkeys(out))


def _related(links: list[str] | None) -> str:
    """`Related: [[A]] · [[B]]`: the indexer makes each a RELATED_TO edge from the section it ends."""
    if not links:
        return ""
    names = []
    for link in links:
        name = link.strip()
        if name.startswith("[[") and name.endswith("]]"):
            name = name[2:-2].strip()
        if not name or any(c in name for c in "[]\n\r"):
            raise InvalidInput(f"link {link!r} is not a note's name (e.g. 'Deploy checklist' or "
                               "'ops/deploy#Rollback'); brackets and line breaks cannot be in one")
        names.append(f"[[{name}]]")
    return "\nRelated: " + " · ".join(dict.fromkeys(names)) + "\n"


def _checked_size(data: bytes, rel: str, limit: int) -> bytes:
    if len(data) > limit:
        raise InvalidInput(f"{rel} would be {len(data):,} bytes, over the {limit:,}-byte limit for a note "
                           "([notes] max_note_bytes in .hebbs/config.toml); nothing written")
    return data


def _title_of(rel: str) -> str:
    return rel.rsplit("/", 1)[-1][:-3].replace("-", " ").replace("_", " ").strip() or "note"


def _mode(path: Path) -> int:
    try:
        return path.stat().st_mode & 0o777
    except OSError:
        return NEW_NOTE_MODE


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
