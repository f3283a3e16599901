"""Markdown note -> sections: heading path, front matter, wiki-links, tags, byte ranges, chunks.

A note is split at top-level headings whose level is at most `split_level` (default 2: `#` and `##`).
Text before the first such heading is its own section. Deeper headings stay inside their section.
A section whose text exceeds the model's token limit becomes overlapping chunks; every chunk keeps
the section's heading path, and chunks after the first repeat the heading line so that each one
reads (and embeds) as a piece of that section.

Byte offsets always refer to the file's raw bytes, so `data[byte_start:byte_end]` is the text a
section came from, even in a file with a byte-order mark, CRLF line ends or invalid UTF-8.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from collections.abc import Callable, Sequence
from itertools import accumulate
from typing import Any

import msgspec
import yaml
from markdown_it import MarkdownIt
from markdown_it.token import Token
from mdit_py_plugins.front_matter import front_matter_plugin

from ..core.memory_text import content_hash

__all__ = ["Link", "Section", "ParsedNote", "parse_note", "estimate_tokens", "content_hash", "TokenCounter"]

# Bump when the parse output for the same bytes changes: every file is then re-parsed once
# (unchanged sections keep their memory ids because they are matched by content hash).
PARSER_VERSION = 1

TokenCounter = Callable[[Sequence[str]], list[int]]

_LINE_END = re.compile(rb"\r\n|\r|\n")
# Tags: '#' at the start or after whitespace/opening punctuation; letters, digits, _, -, /.
_TAG = re.compile(r"(?<![^\s(\[{,;:!?\"'])#([\w][\w/-]*)")
_NUMERIC_TAG = re.compile(r"[\d/_-]+")
_WIKILINK = re.compile(r"(!?)\[\[([^\[\]\n]+?)\]\]")
# Sentence or line ends: where a long section may be cut into chunks.
_PIECE_END = re.compile(r"(?<=[.!?;:])\s+|\n\s*")
_WORD = re.compile(r"\S+\s*")
# A chunk is also cut when it has more characters than this per token of the limit: a run of
# characters the tokenizer maps to one [UNK] would otherwise make a memory of unbounded size.
_MAX_CHARS_PER_TOKEN = 32
# A note with more bytes that are not UTF-8 than this (and more than a tenth of its bytes) is not text.
_MAX_BAD_BYTES = 64
_SNIFF_BYTES = 1 << 16
_ATTACHMENT = re.compile(r"\.(?!md$)[A-Za-z0-9]{1,5}$")


class Link(msgspec.Struct, frozen=True, array_like=True):
    """A wiki-link: `[[target]]`, `[[target|alias]]`, `[[target#section]]`, `[[#section]]` (target "")."""

    target: str
    section: str | None = None
    alias: str | None = None


class Section(msgspec.Struct, kw_only=True):
    heading_path: list[str]
    content: str  # what becomes the memory's text
    byte_start: int
    byte_end: int
    level: int = 0  # heading level of the section's own heading; 0 for text before the first heading
    chunk: int = 0
    chunks: int = 1
    tags: list[str] = []
    links: list[Link] = []
    hash: str = ""


class ParsedNote(msgspec.Struct, kw_only=True):
    front_matter: dict[str, Any] = {}
    tags: list[str] = []  # from front matter; they apply to every section
    sections: list[Section] = []
    warnings: list[str] = []
    binary: bool = False


def estimate_tokens(texts: Sequence[str]) -> list[int]:
    """A cheap stand-in for a WordPiece tokenizer, used when no model is at hand (tests of the parser).

    It over-counts English (about 1 token per 3.5 characters plus punctuation) so chunks stay under the limit.
    """
    return [2 + len(re.findall(r"\w+|[^\w\s]", t)) + len(t) // 7 for t in texts]


_md = MarkdownIt("commonmark").use(front_matter_plugin).enable(["table", "strikethrough"])


def parse_note(data: bytes, *, split_level: int = 2, max_tokens: int = 256,
               count_tokens: TokenCounter | None = None) -> ParsedNote:
    """Parse one note's bytes. Never raises on bad input: problems become warnings on the result."""
    note = ParsedNote(warnings=[])
    if b"\x00" in data[:8192]:
        note.binary = True
        note.warnings.append("looks like a binary file (NUL bytes); not indexed")
        return note
    start = 3 if data.startswith(b"\xef\xbb\xbf") else 0  # a BOM is not text
    raw = data[start:]
    # Random bytes or another encoding's binary: thousands of sections of U+FFFD are no memory. The
    # head decides first, so a large such file is not decoded whole.
    for sample in (raw[:_SNIFF_BYTES], raw) if len(raw) > _SNIFF_BYTES else (raw,):
        text, bad = _decode(sample)
        if len(bad) > max(_MAX_BAD_BYTES, len(sample) // 10):
            note.binary = True
            of = f"its {len(sample):,}" if sample is raw else f"the first {len(sample):,}"
            note.warnings.append(f"does not look like text ({len(bad):,} of {of} bytes are not UTF-8); not indexed")
            return note
    if bad:
        first = bad[0] + start
        note.warnings.append(f"not valid UTF-8 ({len(bad)} bad byte(s), first at byte {first}); "
                             "indexed with U+FFFD in their place")
    line_starts = [0] + [m.end() for m in _LINE_END.finditer(raw)]
    tokens = _md.parse(text)
    body_from = 0
    if tokens and tokens[0].type == "front_matter":
        note.front_matter, fm_warning = _front_matter(tokens[0].content)
        if fm_warning:
            note.warnings.append(fm_warning)
        note.tags = _front_matter_tags(note.front_matter)
        body_from = _line_offset(line_starts, tokens[0].map[1], len(raw)) if tokens[0].map else 0
    note.sections = _sections(raw, tokens, line_starts, body_from, split_level)
    counter = _bounded(count_tokens or estimate_tokens, max_tokens * _MAX_CHARS_PER_TOKEN)
    note.sections = _chunk_all(note.sections, raw, max_tokens, counter)
    for section in note.sections:
        section.byte_start += start
        section.byte_end += start
        section.hash = content_hash(section.content)
    return note


# Decoding ----------------------------------------------------------------------------------------

def _decode(raw: bytes) -> tuple[str, list[int]]:
    """Text for the markdown parser, and the offsets of bytes that are not UTF-8 (each becomes U+FFFD)."""
    try:
        return raw.decode("utf-8"), []
    except UnicodeDecodeError:
        pass
    bad: list[int] = []
    escaped = raw.decode("utf-8", "surrogateescape")
    pos = 0
    for ch in escaped:
        if "\udc80" <= ch <= "\udcff":
            bad.append(pos)
            pos += 1
        else:
            pos += len(ch.encode("utf-8", "surrogatepass"))
    return raw.decode("utf-8", "replace"), bad


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", "replace")


def _line_offset(line_starts: list[int], line: int, end: int) -> int:
    return line_starts[line] if line < len(line_starts) else end


# Front matter ------------------------------------------------------------------------------------

def _front_matter(source: str) -> tuple[dict[str, Any], str | None]:
    try:
        value = yaml.safe_load(source) if source.strip() else {}
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        at = f" at line {where.line + 2}" if where is not None else ""  # +1: 0-based, +1: the opening ---
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        return {}, f"front matter is not valid YAML{at}: {problem}; front matter ignored"
    if value is None:
        return {}, None
    if not isinstance(value, dict):
        return {}, f"front matter is a YAML {type(value).__name__}, not a mapping; front matter ignored"
    return {str(k): _json_safe(v) for k, v in value.items()}, None


def _json_safe(value: Any) -> Any:
    """YAML gives dates, sets and odd keys; memory context must be plain JSON."""
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [_json_safe(v) for v in value]
    if isinstance(value, (dt.date, dt.datetime, dt.time)):
        return value.isoformat()
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return str(value)


def _front_matter_tags(fm: dict[str, Any]) -> list[str]:
    raw = fm.get("tags", fm.get("tag"))
    if isinstance(raw, str):
        items = re.split(r"[,\s]+", raw)
    elif isinstance(raw, list):
        items = [str(t) for t in raw if t is not None]
    else:
        return []
    return _dedupe(t.strip().lstrip("#") for t in items if t.strip().lstrip("#"))


def _dedupe(items: Any) -> list[str]:
    return list(dict.fromkeys(items))


# Sections ----------------------------------------------------------------------------------------

class _Split(msgspec.Struct):
    line: int
    line_end: int
    level: int
    title: str


def _sections(raw: bytes, tokens: list[Token], line_starts: list[int], body_from: int,
              split_level: int) -> list[Section]:
    splits: list[_Split] = []
    # Per top-level block: its first line and the prose it holds (outside code), for tags and links.
    blocks: list[tuple[int, str]] = []
    for i, tok in enumerate(tokens):
        if tok.type == "heading_open" and tok.level == 0 and tok.map:
            level = int(tok.tag[1:])
            if level <= split_level:
                splits.append(_Split(tok.map[0], tok.map[1], level, _inline_text(tokens[i + 1], code=True).strip()))
            continue
        if tok.type == "inline" and tok.map and not (i > 0 and tokens[i - 1].type == "heading_open"):
            blocks.append((tok.map[0], _inline_text(tok, code=False)))
    end = len(raw)
    out: list[Section] = []
    # (byte_start, byte_end, heading span end, heading path, level) for each candidate section
    spans: list[tuple[int, int, int, list[str], int]] = []
    first = _line_offset(line_starts, splits[0].line, end) if splits else end
    if first > body_from:
        spans.append((body_from, first, body_from, [], 0))
    stack: list[tuple[int, str]] = []
    for n, split in enumerate(splits):
        while stack and stack[-1][0] >= split.level:
            stack.pop()
        stack.append((split.level, split.title))
        s = _line_offset(line_starts, split.line, end)
        h = _line_offset(line_starts, split.line_end, end)
        e = _line_offset(line_starts, splits[n + 1].line, end) if n + 1 < len(splits) else end
        spans.append((s, e, h, [t for _, t in stack], split.level))
    block_i = 0
    for s, e, h, path, level in spans:
        body = raw[h:e]
        if not body.strip():
            continue  # a heading with nothing under it is not worth a memory
        chunk = raw[s:e]
        lead = len(chunk) - len(chunk.lstrip())
        trail = len(chunk.rstrip())
        tags: list[str] = []
        links: list[Link] = []
        while block_i < len(blocks) and _line_offset(line_starts, blocks[block_i][0], end) < e:
            if _line_offset(line_starts, blocks[block_i][0], end) >= s:
                prose = blocks[block_i][1]
                tags += _tags(prose)
                links += _links(prose)
            block_i += 1
        out.append(Section(heading_path=path, content=_text(chunk[lead:trail]), byte_start=s + lead,
                           byte_end=s + trail, level=level, tags=_dedupe(tags), links=list(dict.fromkeys(links))))
    return out


def _inline_text(tok: Token, *, code: bool) -> str:
    """The prose of an inline token: text and line breaks; code spans kept for titles, blanked for prose."""
    parts: list[str] = []
    for child in tok.children or ():
        if child.type == "text":
            parts.append(child.content)
        elif child.type in ("softbreak", "hardbreak"):
            parts.append("\n")
        elif child.type == "code_inline":
            parts.append(child.content if code else " ")
        elif child.type == "image":
            parts.append(" ")
    return "".join(parts)


def _tags(prose: str) -> list[str]:
    # Wiki-links may hold '#' ([[note#section]]): they are not tags.
    prose = _WIKILINK.sub(" ", prose)
    return [t.rstrip("/-") for t in _TAG.findall(prose) if not _NUMERIC_TAG.fullmatch(t)]


def _links(prose: str) -> list[Link]:
    out: list[Link] = []
    for m in _WIKILINK.finditer(prose):
        inner = m.group(2)
        target, _, alias = inner.partition("|")
        target, _, section = target.partition("#")
        target = target.strip().replace("\\", "/")
        if _ATTACHMENT.search(target):
            continue  # ![[diagram.png]] and friends are attachments, not notes
        if target.lower().endswith(".md"):
            target = target[:-3]
        section = section.strip()
        if section.startswith("^"):
            section = ""  # a block reference: link to the note as a whole
        if not target and not section:
            continue
        out.append(Link(target=target, section=section or None, alias=alias.strip() or None))
    return out


# Chunking ----------------------------------------------------------------------------------------

# Characters tokenized at once: a tokenizer's output takes about a hundred bytes per token, so the
# texts of a huge note are counted a slice at a time.
_COUNT_SLICE_CHARS = 1 << 18


def _bounded(count: TokenCounter, cap: int) -> TokenCounter:
    """`count` with bounded memory: texts are tokenized a slice of them at a time, and a text over `cap`
    characters (a section or sentence that is cut into chunks anyway, a "word" of thousands of
    characters) is counted `cap` characters at a time, the slices' counts summed."""
    overhead = count([""])[0]

    def long(text: str) -> int:
        slices = [text[i:i + cap] for i in range(0, len(text), cap)]
        return sum(bounded(slices)) - overhead * (len(slices) - 1)

    def bounded(texts: Sequence[str]) -> list[int]:
        out: list[int] = []
        group: list[str] = []
        chars = 0

        def flush() -> None:
            nonlocal chars
            if group:
                out.extend(count(group))
                group.clear()
                chars = 0

        for text in texts:
            if len(text) > cap:
                flush()
                out.append(long(text))
                continue
            if chars + len(text) > _COUNT_SLICE_CHARS:
                flush()
            group.append(text)
            chars += len(text)
        flush()
        return out

    return bounded

def _chunk_all(sections: list[Section], raw: bytes, max_tokens: int, count: TokenCounter) -> list[Section]:
    if not sections:
        return sections
    counts = count([s.content for s in sections])
    overhead = count([""])[0]  # special tokens ([CLS], [SEP]) that every text carries
    out: list[Section] = []
    for section, n in zip(sections, counts):
        if n <= max_tokens and len(section.content) <= max_tokens * _MAX_CHARS_PER_TOKEN:
            out.append(section)
        else:
            out += _chunk(section, raw, max_tokens, overhead, count)
    return out


class _ByteOffsets:
    """Character index -> byte offset within one section (identity for ASCII, a prefix table otherwise)."""

    def __init__(self, text: str) -> None:
        self._table: list[int] | None = None
        if not text.isascii():
            self._table = list(accumulate((len(ch.encode("utf-8", "surrogateescape")) for ch in text), initial=0))

    def __call__(self, i: int) -> int:
        return i if self._table is None else self._table[i]


def _clean(text: str) -> str:
    """Undo surrogateescape: invalid bytes become U+FFFD, as in the rest of the parse."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace") if not text.isascii() else text


def _chunk(section: Section, raw: bytes, max_tokens: int, overhead: int, count: TokenCounter) -> list[Section]:
    # Cut the section's own bytes, decoded losslessly, so chunk byte ranges stay exact.
    text = raw[section.byte_start:section.byte_end].decode("utf-8", "surrogateescape")
    at = _ByteOffsets(text)
    heading = ""
    body_at = 0
    if section.level:
        first_line_end = text.find("\n")
        heading = _clean(text if first_line_end < 0 else text[:first_line_end]).rstrip()
        body_at = len(text) if first_line_end < 0 else first_line_end
    prefix_tokens = count([heading])[0] - overhead if heading else 0
    budget = max(16, max_tokens - overhead - prefix_tokens - 4)  # 4: slack for joins at piece edges
    overlap = max(8, max_tokens // 8)
    max_chars = budget * _MAX_CHARS_PER_TOKEN
    pieces = _pieces(text, body_at, budget, count, overhead)
    groups: list[tuple[int, int]] = []  # piece index ranges [a, b)
    a = 0
    while a < len(pieces):
        b, used, chars = a, 0, 0
        while b < len(pieces) and (b == a or (used + pieces[b][2] <= budget
                                               and chars + pieces[b][1] - pieces[b][0] <= max_chars)):
            used += pieces[b][2]
            chars += pieces[b][1] - pieces[b][0]
            b += 1
        groups.append((a, b))
        if b >= len(pieces):
            break
        # The next chunk starts with the tail of this one (up to `overlap` tokens), so a cut never
        # separates a sentence from the one before it.
        back, kept = b, 0
        while back - 1 > a and kept + pieces[back - 1][2] <= overlap:
            back -= 1
            kept += pieces[back][2]
        a = back
    out: list[Section] = []
    for n, (a, b) in enumerate(groups):
        cs, ce = pieces[a][0], pieces[b - 1][1]
        if n == 0:
            cs = 0  # the first chunk carries the heading itself
        piece = text[cs:ce]
        lead = len(piece) - len(piece.lstrip())
        piece = piece.strip()
        if not piece:
            continue
        body = _clean(piece)
        content = body if n == 0 or not heading else heading + "\n\n" + body
        bs = section.byte_start + at(cs + lead)
        out.append(Section(heading_path=section.heading_path, content=content, byte_start=bs,
                           byte_end=bs + len(piece.encode("utf-8", "surrogateescape")), level=section.level,
                           tags=_tags_of(section, body), links=_links_of(section, body)))
    # Confirm with the real counter: a chunk still too long (tokenization differs at cut points) is halved.
    final: list[Section] = []
    for chunk, n in zip(out, count([c.content for c in out])):
        final += _halve(chunk, max_tokens, count) if n > max_tokens else [chunk]
    for i, chunk in enumerate(final):
        chunk.chunk, chunk.chunks = i, len(final)
    return final


def _tags_of(section: Section, piece: str) -> list[str]:
    # Tags and links belong to the chunk that holds them; `in` is enough since both came from this text.
    return [t for t in section.tags if "#" + t in piece]


def _links_of(section: Section, piece: str) -> list[Link]:
    return [link for link in section.links if "[[" + link.target in piece or (not link.target and "[[#" in piece)]


def _halve(section: Section, max_tokens: int, count: TokenCounter) -> list[Section]:
    text = section.content
    if count([text])[0] <= max_tokens or len(text) < 32:
        return [section]
    mid = text.rfind(" ", 0, len(text) // 2) + 1 or len(text) // 2
    left, right = text[:mid].rstrip(), text[mid:].lstrip()
    cut = section.byte_start + len(text[:mid].encode("utf-8"))
    parts = [Section(heading_path=section.heading_path, content=left, byte_start=section.byte_start,
                     byte_end=cut, level=section.level, tags=_tags_of(section, left), links=_links_of(section, left)),
             Section(heading_path=section.heading_path, content=right, byte_start=cut, byte_end=section.byte_end,
                     level=section.level, tags=_tags_of(section, right), links=_links_of(section, right))]
    return [p for part in parts for p in _halve(part, max_tokens, count) if p.content.strip()]


def _pieces(text: str, body_at: int, budget: int, count: TokenCounter, overhead: int) -> list[tuple[int, int, int]]:
    """(start, end, tokens) spans covering text[body_at:], each at most `budget` tokens."""
    spans: list[tuple[int, int]] = []
    pos = body_at
    for m in _PIECE_END.finditer(text, body_at):
        if m.end() > pos:
            spans.append((pos, m.end()))
            pos = m.end()
    if pos < len(text):
        spans.append((pos, len(text)))
    spans = [(s, e) for s, e in spans if text[s:e].strip()]
    counts = count([_clean(text[s:e]) for s, e in spans])
    out: list[tuple[int, int, int]] = []
    for (s, e), n in zip(spans, counts):
        n -= overhead
        if n <= budget and e - s <= budget * _MAX_CHARS_PER_TOKEN:
            out.append((s, e, n))
        else:
            out += _word_pieces(text, s, e, budget, count, overhead)
    return out


def _word_pieces(text: str, start: int, end: int, budget: int, count: TokenCounter,
                 overhead: int) -> list[tuple[int, int, int]]:
    """A sentence longer than a chunk: cut it at spaces (and a word longer than a chunk, at characters)."""
    words = [(m.start(), m.end()) for m in _WORD.finditer(text, start, end)]
    counts = [n - overhead for n in count([_clean(text[s:e]) for s, e in words])]
    out: list[tuple[int, int, int]] = []
    cur_s, used = None, 0
    for (s, e), n in zip(words, counts):
        if n > budget or e - s > budget * _MAX_CHARS_PER_TOKEN:
            if cur_s is not None:
                out.append((cur_s, s, used))
                cur_s, used = None, 0
            # WordPiece gives at most one token per character, so `budget` characters always fit; a
            # word that is long only in characters (one [UNK]) is cut at the character cap instead.
            step = budget if n > budget else budget * _MAX_CHARS_PER_TOKEN
            for cs in range(s, e, step):
                ce = min(cs + step, e)
                out.append((cs, ce, min(budget, ce - cs, n if n <= budget else budget)))
            continue
        if cur_s is None:
            cur_s, used = s, n
        elif used + n <= budget:
            used += n
        else:
            out.append((cur_s, s, used))
            cur_s, used = s, n
    if cur_s is not None:
        out.append((cur_s, words[-1][1], used))
    return out
