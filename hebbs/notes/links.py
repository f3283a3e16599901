"""Wiki-links -> RELATED_TO edges: resolving a link target the way Obsidian does, and removing edges."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..errors import NotFound
from .manifest import Manifest
from .parse import Link

__all__ = ["LinkIndex", "resolve_links", "remove_edges", "link_text"]


def link_text(link: Link) -> str:
    return link.target + ("#" + link.section if link.section else "")


class LinkIndex:
    """Resolves a wiki-link target the way Obsidian does: exact path, else file name (nearest folder wins)."""

    def __init__(self, files: Iterable[str]) -> None:
        self.by_path: dict[str, str] = {}
        self.by_name: dict[str, list[str]] = {}
        for rel in sorted(files, key=lambda r: (r.count("/"), r)):
            key = rel[:-3].lower()
            self.by_path[key] = rel
            self.by_name.setdefault(key.rsplit("/", 1)[-1], []).append(rel)

    def resolve(self, target: str, from_file: str) -> str | None:
        if not target:
            return from_file
        key = target.strip().strip("/").lower()
        if key in self.by_path:
            return self.by_path[key]
        names = self.by_name.get(key.rsplit("/", 1)[-1], [])
        if "/" in key:
            names = [n for n in names if n[:-3].lower().endswith("/" + key)]
        if not names:
            return None
        folder = from_file.rsplit("/", 1)[0] if "/" in from_file else ""
        same = [n for n in names if (n.rsplit("/", 1)[0] if "/" in n else "") == folder]
        return (same or names)[0]


def resolve_links(manifest: Manifest) -> tuple[set[tuple[str, str]], list[tuple[str, str]]]:
    """(RELATED_TO edges as (source id, target id), unresolved links as (file, link text))."""
    index = LinkIndex(manifest.files)
    edges: set[tuple[str, str]] = set()
    unresolved: list[tuple[str, str]] = []
    for rel, entry in manifest.files.items():
        for s in entry.sections:
            for link in s.links:
                target_file = index.resolve(link.target, rel)
                if target_file is None:
                    unresolved.append((rel, link_text(link)))
                    continue
                targets = manifest.files[target_file].sections
                if link.section:
                    wanted = [p.strip().lower() for p in link.section.split("#") if p.strip()]
                    named = [t for t in targets
                             if [h.lower() for h in t.heading_path[-len(wanted):]] == wanted]
                    targets = named or targets  # a missing heading still links to the note
                if s.memory_id is None:
                    continue
                for t in targets:
                    if t.memory_id and t.memory_id != s.memory_id:
                        edges.add((s.memory_id, t.memory_id))
    return edges, unresolved


def remove_edges(engine: Any, pairs: list[tuple[str, str]]) -> int:
    """Remove RELATED_TO edges whose wiki-link is gone; how many existed."""
    removed = 0
    for source, target in pairs:
        try:
            engine.remove_edge(source, "RELATED_TO", target)
            removed += 1
        except NotFound:
            continue
    return removed
