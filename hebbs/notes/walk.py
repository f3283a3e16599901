"""Which files of a vault are notes: the walk, the built-in ignore rules and `.hebbsignore`.

Paths inside hebbs are relative POSIX strings ("projects/acme.md"), the same on every platform,
because they are keys of the manifest and values in memory context.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

import pathspec

from ..config import NotesConfig, notes_config

__all__ = ["VaultFilter", "walk_notes", "IGNORE_FILE", "DEFAULT_IGNORES"]

IGNORE_FILE = ".hebbsignore"
# gitignore syntax. The tool folders are skipped at any depth; the folders hebbs itself writes
# (insights/ and contradictions/ at the notes folder's root by default: workflows/reflect.py and
# contradiction_review.py) are added per vault.
DEFAULT_IGNORES = (".hebbs/", ".git/", ".obsidian/", "node_modules/")


class VaultFilter:
    """Decides whether a relative path is a note to index. Reads `.hebbsignore` once, at construction."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.warnings: list[str] = []
        # Notes (and folders, named with a trailing "/") left out with the reason, by printable name.
        self.skipped: dict[str, str] = {}
        notes = notes_config(root / ".hebbs")
        self.max_note_bytes = notes.max_note_bytes
        # The folders hebbs writes into (insights, contradiction reports) wherever config.toml puts them.
        lines = list(DEFAULT_IGNORES) + _written_folders(notes)
        try:
            lines += (root / IGNORE_FILE).read_text(encoding="utf-8", errors="replace").splitlines()
        except FileNotFoundError:
            pass
        except OSError as exc:
            self.warnings.append(f"{IGNORE_FILE}: cannot be read ({exc.strerror}); only the built-in rules apply")
        self._spec = pathspec.GitIgnoreSpec.from_lines(lines)

    def ignored(self, rel: str, is_dir: bool = False) -> bool:
        # Dot-files and dot-folders (.trash, editor swap and lock files) are never notes.
        if any(part.startswith(".") for part in rel.split("/")):
            return True
        return self._spec.match_file(rel + "/" if is_dir else rel)

    def is_note(self, rel: str) -> bool:
        """A markdown file that no rule ignores (checked for every folder on its way, as git does)."""
        if not rel.lower().endswith(".md"):
            return False
        parts = rel.split("/")
        for i in range(1, len(parts)):
            if self.ignored("/".join(parts[:i]), is_dir=True):
                return False
        return not self.ignored(rel)

    def skip(self, rel: str, reason: str) -> None:
        name = printable(rel)
        if name not in self.skipped:
            self.skipped[name] = reason
            self.warnings.append(f"{name}: {reason}")

    def admit(self, rel: str, size: int, is_dir: bool = False) -> bool:
        """Whether a note (or a folder on the walk) can be indexed at all; if not, it is recorded as skipped.

        A name that is not UTF-8 cannot be a manifest key, a memory's source or a JSON string; a note
        over [notes] max_note_bytes would take the daemon's memory."""
        if not _utf8(rel):
            self.skip(rel + "/" if is_dir else rel, "its name is not UTF-8; " +
                      ("nothing in it is indexed" if is_dir else "not indexed") + " (rename it to index it)")
            return False
        if not is_dir and size > self.max_note_bytes:
            self.skip(rel, f"{size:,} bytes, over the {self.max_note_bytes:,}-byte limit for a note "
                           f"([notes] max_note_bytes in .hebbs/config.toml); not indexed")
            return False
        return True


def printable(name: str) -> str:
    """A file system name as text anyone can print and send: the bytes of a name that is not UTF-8
    (decoded by Python with surrogateescape) shown as \\xNN."""
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def _utf8(name: str) -> bool:
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _written_folders(notes: NotesConfig) -> list[str]:
    """gitignore lines for the folders hebbs writes notes into ([notes] in config.toml)."""
    return [f"/{notes.insights_dir.strip('/')}/", f"/{notes.contradictions_dir.strip('/')}/"]


def walk_notes(root: Path, vault_filter: VaultFilter, under: Iterable[str] = ("",)) -> dict[str, Path]:
    """Notes below root (or below the given relative folders): relative path -> absolute path.

    Symlinks are followed only while they stay inside the vault; a file reachable twice (through a
    symlink) is indexed once, under its real path when that path is itself in the vault.
    """
    real_root = os.path.realpath(root)
    found: dict[str, tuple[Path, bool]] = {}  # rel -> (path, reached through a symlink)
    seen_dirs: set[str] = set()
    deferred: list[tuple[Path, str]] = []

    def inside(real: str) -> bool:
        return real == real_root or real.startswith(real_root + os.sep)

    def visit(directory: Path, rel_dir: str, via_link: bool) -> None:
        real_dir = os.path.realpath(directory)
        if real_dir in seen_dirs or not inside(real_dir):
            return
        seen_dirs.add(real_dir)
        try:
            entries = list(os.scandir(directory))
        except OSError as exc:
            vault_filter.warnings.append(f"{printable(rel_dir) or '.'}/: cannot be read ({exc.strerror or exc}); its notes "
                                         f"are left as they were")
            return
        for entry in entries:
            rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
            try:
                link = entry.is_symlink()
                if link and not inside(os.path.realpath(entry.path)):
                    if rel.lower().endswith(".md") or entry.is_dir(follow_symlinks=True):
                        vault_filter.warnings.append(f"{printable(rel)}: a link to outside the notes folder "
                                                     f"({printable(os.readlink(entry.path))}); "
                                                     f"not indexed")
                    continue
                if link and rel.lower().endswith(".md") and not os.path.exists(entry.path):
                    vault_filter.warnings.append(f"{printable(rel)}: a link to nothing ({printable(os.readlink(entry.path))}); "
                                                 "not indexed")
                    continue
                if entry.is_dir(follow_symlinks=True):
                    if not vault_filter.ignored(rel, is_dir=True) and vault_filter.admit(rel, 0, is_dir=True):
                        # Linked folders wait until every real folder is walked, so a note is found
                        # under its real path first.
                        if link:
                            deferred.append((Path(entry.path), rel))
                        else:
                            visit(Path(entry.path), rel, via_link)
                elif entry.is_file(follow_symlinks=True) and rel.lower().endswith(".md"):
                    if not vault_filter.ignored(rel) and vault_filter.admit(rel, entry.stat().st_size):
                        found[rel] = (Path(entry.path), via_link or link)
            except OSError:
                continue

    for rel_dir in under:
        rel_dir = rel_dir.strip("/")
        start = root / rel_dir if rel_dir else root
        if rel_dir and not (vault_filter.is_note(rel_dir + "/x.md") and vault_filter.admit(rel_dir, 0, is_dir=True)):
            continue
        if start.is_dir():
            visit(start, rel_dir, False)
    while deferred:
        path, rel = deferred.pop(0)
        visit(path, rel, True)
    by_real: dict[str, str] = {}
    for rel, (path, _via_link) in sorted(found.items(), key=lambda item: (item[1][1], item[0])):
        by_real.setdefault(os.path.realpath(path), rel)
    return {rel: found[rel][0] for rel in sorted(by_real.values())}
