"""Small HTML building blocks for the panel's server-rendered pages (escaped by default)."""

from __future__ import annotations

import datetime as dt
import html
from typing import Any
from urllib.parse import urlencode

from markdown_it import MarkdownIt
from markdown_it.rules_inline import StateInline

from hebbs.schema import Memory


def e(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def url(path: str, **params: Any) -> str:
    kept = [(k, v) for k, v in params.items() if v not in (None, "", False)]
    return e(path + ("?" + urlencode(kept, doseq=True) if kept else ""))


def when(us: int | None) -> str:
    if not us:
        return "—"
    return dt.datetime.fromtimestamp(us / 1e6, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def ago(seconds: float) -> str:
    seconds = max(0.0, seconds)
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.1f} {unit}"
    return f"{seconds:.0f} s"


def snippet(text: str, n: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[:n - 1] + "…"


def short(mid: str) -> str:
    return mid[-8:]


def kind_badge(kind: Any) -> str:
    name = getattr(kind, "value", kind)
    return f'<span class="badge kind-{e(str(name).lower())}">{e(name)}</span>'


def memory_link(vault: str, memory: Memory, n: int = 160) -> str:
    return (f'<a class="mem-link" dir="auto" href="{url("/memory", vault=vault, id=memory.id)}">'
            f'{e(snippet(memory.content, n))}</a>')


def bar(value: float, label: str, title: str = "", css: str = "") -> str:
    pct = max(0.0, min(1.0, value)) * 100
    return (f'<div class="bar {e(css)}" title="{e(title)}"><span class="bar-label">{e(label)}</span>'
            f'<span class="bar-track"><meter min="0" max="1" value="{value:.4f}"></meter></span>'
            f'<span class="bar-value">{pct:.0f}%</span></div>')


def hidden(**fields: Any) -> str:
    return "".join(f'<input type="hidden" name="{e(k)}" value="{e(v)}">' for k, v in fields.items() if v is not None)


def button_form(action: str, label: str, csrf: str, css: str = "", **fields: Any) -> str:
    return (f'<form method="post" action="{e(action)}" class="inline">{hidden(csrf=csrf, **fields)}'
            f'<button type="submit" class="{e(css)}">{e(label)}</button></form>')


def table(headers: list[str], rows: list[list[str]], css: str = "") -> str:
    """Cells are HTML already (escape what comes from data before)."""
    head = "".join(f"<th>{h}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f'<table class="{e(css)}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


# Notes are markdown: shown rendered, never as markup they carry. html=False escapes any raw HTML in
# the text; images are not rendered (the page's policy loads nothing from elsewhere anyway);
# markdown-it already refuses javascript:, vbscript:, file: and data: links. Tables (GFM) are common
# in notes; wiki-links are shown as the words they stand for (the graph shows where they lead).
_MARKDOWN = MarkdownIt("commonmark", {"html": False}).disable("image").enable("table")


def _wiki_link(state: StateInline, silent: bool) -> bool:
    """`[[Note]]`, `[[Note#Heading]]`, `[[Note|label]]` (and `![[embed]]`'s inner part): their text."""
    start = state.pos + (1 if state.src.startswith("![[", state.pos) else 0)
    if not state.src.startswith("[[", start):
        return False
    end = state.src.find("]]", start + 2)
    inner = state.src[start + 2:end] if end >= 0 else ""
    if not inner.strip() or "\n" in inner or "[" in inner:
        return False
    if not silent:
        target, _, label = inner.partition("|")
        token = state.push("text", "", 0)
        token.content = (label or target.replace("#", " › ")).strip()
    state.pos = end + 2
    return True


_MARKDOWN.inline.ruler.before("link", "wiki_link", _wiki_link)


def markdown(text: str) -> str:
    return _MARKDOWN.render(text)


def markdown_excerpt(text: str, limit: int = 1200) -> str:
    """The start of a long text, rendered: cut at a line end so a table or list stays whole up to there."""
    if len(text) <= limit:
        return markdown(text)
    cut = text.rfind("\n", 0, limit)
    return markdown(text[:cut if cut > limit // 2 else limit].rstrip() + "\n\n…")
