"""What the two indexes see of a memory: the text that is embedded and the text BM25 indexes.

A memory's content is what the user wrote; for a section of a note that is only the section's own
text, which rarely names what the note is about ("## Procedure", "1. Click Save"). Both indexes
therefore also see where a section sits and what its note is about: the note's title (front matter
`title`, else the file name), its heading path and the note's description (front matter
`description` or `summary`), and BM25 also the note's aliases and the tags. Memories that do not come
from a file are indexed as they are.
"""

from __future__ import annotations

import hashlib
from pathlib import PurePosixPath
from typing import Any

from ..schema import Memory

__all__ = ["note_title", "embedding_text", "lexical_text", "content_hash", "diverged_from_source", "DIVERGED"]

# Set in the context of a note section's memory whose text was revised away from what its file
# holds (a revise in the Memory Palace or through the API); the next index of a changed file clears it.
DIVERGED = "diverged_from_source"


def content_hash(text: str) -> str:
    """The hash of a section's text, as the vault's manifest and a section's `section_hash` keep it."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def diverged_from_source(memory: Memory) -> bool:
    """A note section's memory whose text is no longer the text its file had when it was indexed."""
    indexed = memory.context.get("section_hash") if memory.source is not None else None
    return isinstance(indexed, str) and content_hash(memory.content) != indexed

# A file with one of these names is named by its folder (bundles: `menus/index.md`, `README.md`).
_FOLDER_NAMED = {"index", "_index", "readme"}


def note_title(memory: Memory) -> str | None:
    """The title of the note a section comes from: front matter `title`, else the file's name."""
    if memory.source is None:
        return None
    front = memory.context.get("front_matter")
    title = front.get("title") if isinstance(front, dict) else None
    if isinstance(title, str) and title.strip():
        return title.strip()
    path = PurePosixPath(memory.source.file_path)
    if path.stem.lower() in _FOLDER_NAMED and path.parent.name:
        return path.parent.name
    return path.stem


def _breadcrumb(memory: Memory) -> list[str]:
    """Title, then each heading on the way to the section, without repeats (a `# Title` heading)."""
    assert memory.source is not None
    parts: list[str] = []
    for part in [note_title(memory) or "", *memory.source.heading_path]:
        part = part.strip()
        if part and (not parts or part.lower() != parts[-1].lower()):
            parts.append(part)
    return parts


def _description(memory: Memory) -> str:
    """The note's own summary of itself: front matter `description` or `summary`."""
    front = memory.context.get("front_matter")
    if not isinstance(front, dict):
        return ""
    for key in ("description", "summary"):
        value = front.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return ""


def embedding_text(memory: Memory) -> str:
    """What the model embeds: for a note's section, its breadcrumb line, the note's description,
    then its text."""
    if memory.source is None:
        return memory.content
    head = "\n".join(part for part in (" > ".join(_breadcrumb(memory)), _description(memory)) if part)
    return f"{head}\n\n{memory.content}" if head else memory.content


def lexical_text(memory: Memory) -> str:
    """What BM25 sees: the content, and for a note's section its title, heading path, aliases and tags."""
    parts = [memory.content]
    if memory.source is not None:
        parts.extend(_breadcrumb(memory))
        parts.append(_description(memory))
        parts.extend(_strings(memory.context.get("front_matter", {}).get("aliases")
                              if isinstance(memory.context.get("front_matter"), dict) else None))
    parts.extend(_strings(memory.context.get("tags")))
    return "\n".join(parts)


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [str(v) for v in value if isinstance(v, (str, int, float))]
    return []
