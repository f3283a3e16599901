"""The panel's pages, rendered on the server: each takes what data.py fetched and returns HTML."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from hebbs.recall import registry
from hebbs.schema import Memory, MemoryKind, ScoringWeights

from .html import (ago, bar, button_form, e, hidden, kind_badge, markdown, markdown_excerpt, memory_link, short, snippet, table, url,
                   when)

if TYPE_CHECKING:
    from .data import GraphFacets, GraphScope

NAV = [("/", "Overview"), ("/recall", "Recall"), ("/graph", "Graph"), ("/timeline", "Timeline"),
       ("/contradictions", "Contradictions"), ("/insights", "Insights"), ("/queries", "Query log")]
# The recall form offers what the engine and the protocol offer, with their defaults.
STRATEGIES = list(registry.STRATEGIES)
WEIGHTS = list(msgspec.structs.asdict(ScoringWeights()).items())


def vault_label(vault: str, home: Path) -> str:
    path = Path(vault)
    if path.resolve() == home.resolve():
        return "global brain"
    return f"{path.parent.name} ({path.parent})"


def layout(title: str, path: str, vault: str, vaults: list[str], home: Path, body: str, *, live: bool = True,
           scripts: tuple[str, ...] = ()) -> str:
    nav = "".join(f'<a href="{url(href, vault=vault)}" class="{"active" if href == path else ""}">{e(name)}</a>'
                  for href, name in NAV)
    options = "".join(f'<option value="{e(v)}" title="{e(v)}"{" selected" if v == vault else ""}>'
                      f'{e(vault_label(v, home))}</option>' for v in vaults)
    extra = "".join(f'<script src="/static/{e(s)}" defer></script>' for s in scripts)
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>{e(title)} · hebbs Memory Palace</title>
<link rel="icon" href="/static/favicon.svg"><link rel="stylesheet" href="/static/panel.css"><script src="/static/panel.js" defer></script>{extra}</head>
<body data-vault="{e(vault)}">
<header class="top"><a class="brand" href="{url("/", vault=vault)}"><span class="logo">◆</span> hebbs <b>Memory Palace</b></a>
<nav>{nav}</nav>
<form class="vault-picker" method="get" action="{e(path)}"><label>vault <select name="vault" id="vault-select">{options}</select></label>
<noscript><button>open</button></noscript></form>
<span id="live" class="live" title="live updates">● live</span></header>
<main id="main"{' data-live="1"' if live else ''}>
<h1>{e(title)}</h1>
{body}
</main></body></html>"""


def error_box(message: str) -> str:
    return f'<div class="error" role="alert">{e(message)}</div>'


def notice(message: str) -> str:
    return f'<div class="notice" role="status">{e(message)}</div>'


def notice_html(markup: str) -> str:
    """A notice whose markup the caller built (and escaped)."""
    return f'<div class="notice" role="status">{markup}</div>'


# Overview -----------------------------------------------------------------------------------------

def overview(status: Any, cards: list[dict[str, Any]], home: Path, csrf: str) -> str:
    daemon = f"""<section class="card daemon"><h2>Daemon</h2><dl class="facts">
<dt>version</dt><dd>{e(status.version)}</dd><dt>pid</dt><dd>{status.pid}</dd>
<dt>uptime</dt><dd id="uptime">{ago(status.uptime_s)}</dd><dt>model</dt><dd>{e(status.model or "loading…")}</dd>
<dt>requests</dt><dd>{status.requests}</dd><dt>open vaults</dt><dd>{len(status.open_vaults)}</dd>
<dt>home</dt><dd><code>{e(status.home)}</code></dd></dl></section>"""
    return daemon + "".join(_vault_card(card, home, csrf) for card in cards)


def _vault_card(card: dict[str, Any], home: Path, csrf: str) -> str:
    vault = card["vault"]
    head = f'<h2><a href="{url("/timeline", vault=vault)}">{e(vault_label(vault, home))}</a></h2>'
    if card.get("error"):
        return f'<section class="card vault">{head}{error_box(card["error"])}</section>'
    stats, summary = card["stats"], card["summary"]
    kinds = "".join(f'<span class="chip">{kind_badge(k)} {n}</span>' for k, n in sorted(stats.by_kind.items()))
    top = max([n for _, n in summary.entities] or [1])
    entities = "".join(
        f'<li><a href="{url("/timeline", vault=vault, entity=name)}">{e(name)}</a>'
        f'<meter min="0" max="{top}" value="{n}"></meter><span class="num">{n}</span></li>'
        for name, n in summary.entities)
    more = summary.entity_count - len(summary.entities)
    entity_html = (f'<ul class="entities">{entities}</ul>' + (f'<p class="muted">and {more} more {"entity" if more == 1 else "entities"}</p>' if more > 0 else "")
                   + (f'<p class="muted">{_count(summary.no_entity, "memory", "memories")} without an entity</p>'
                      if summary.no_entity else ""))
    candidates = card["candidates"]
    decay = (f'<a href="{url("/timeline", vault=vault)}">{len(candidates)}</a> below the forget threshold'
             if candidates else "none below the forget threshold")
    sweep = card.get("sweep") or "no sweep yet since the vault opened"
    pending = summary.pending_contradictions
    pending_html = (f'<a class="{"warn" if pending else ""}" href="{url("/contradictions", vault=vault)}">{pending} pending</a>')
    notes = _notes_state(card, csrf)
    return f"""<section class="card vault" data-vault-card="{e(vault)}">{head}
<p class="path"><code>{e(vault)}</code></p>
{_kept_in(stats.store)}
<div class="big"><span class="count" data-memories="{stats.memories}">{stats.memories}</span> {"memory" if stats.memories == 1 else "memories"} {kinds}
<span class="chip">superseded {stats.superseded}</span></div>
<div class="grid2"><div><h3>Entities ({summary.entity_count})</h3>{entity_html or '<p class="muted">no entities</p>'}</div>
<div><h3>Upkeep</h3><dl class="facts"><dt>contradictions</dt><dd>{pending_html}</dd>
<dt>decay</dt><dd>{decay}</dd><dt>last sweep</dt><dd>{e(sweep)}</dd>
<dt>model</dt><dd>{e(stats.model)} ({e(stats.dimension)} d)</dd><dt>writes</dt><dd>{stats.write_seq}</dd></dl>
{notes}</div></div></section>"""


def _kept_in(store: str) -> str:
    """Where the vault's records live: a team's PostgreSQL (servers, database, the vault's name there;
    never credentials) or the folder's own database."""
    where = "its own RocksDB database, in this folder" if store == "rocksdb" else store
    return f'<p class="store muted" data-store="{e(store)}">kept in {e(where)}</p>'


def _notes_state(card: dict[str, Any], csrf: str) -> str:
    if card.get("notes") is None:
        return '<p class="muted">no notes folder (memories come from agents and the CLI)</p>'
    counts: dict[str, int] = card["notes"]
    # Notes skipped (a name that is not UTF-8, over the size limit) and notes another checkout brought into a
    # shared vault (docs/scale.md) are shown only when there are some.
    order = ["synced", "modified", "diverged", "new", "pending", "removed"] + [
        state for state in ("skipped", "elsewhere") if counts.get(state)]
    labels = {"removed": "removed (orphaned memories)", "new": "new (not indexed)", "modified": "changed since indexed",
              "diverged": "diverged (revised here, not in the file)", "skipped": "skipped (hebbs list says why)",
              "elsewhere": "from another checkout"}
    chips = "".join(f'<span class="chip state-{s}">{e(labels.get(s, s))} {counts.get(s, 0)}</span>' for s in order)
    progress = ""
    if card.get("indexing"):
        p = card.get("progress")
        where = (f'{e(p.stage)} {p.done}/{p.total} <progress max="{max(p.total, 1)}" value="{p.done}"></progress>'
                 if p is not None else "starting…")
        cancel = button_form("/index/cancel", "Cancel", csrf, "danger", vault=card["vault"])
        progress = f'<div class="indexing" data-indexing="1">indexing: {where} {cancel}</div>'
    return f'<h3>Notes folder <code>{e(card["root"])}</code></h3><div class="chips">{chips}</div>{progress}'


def sweep_text(sweeper: Any) -> str | None:
    if sweeper is None or sweeper.last_report is None:
        return None
    report = sweeper.last_report
    at = getattr(sweeper, "last_pass_at", None)
    since = f"{ago(time.time() - at)} ago: " if at else ""
    return f"{since}{report.processed} looked at, {report.updated} updated, {len(report.candidates)} below threshold"


# Recall playground -----------------------------------------------------------------------------------

# The recall filters by who stored a memory (schema.Origin), each a text field of the playground.
ORIGIN_FILTERS = ("author", "agent", "session")

def recall_form(vault: str, csrf: str, form: dict[str, Any], entities: list[tuple[str, int]]) -> str:
    checks = "".join(
        f'<label class="check"><input type="checkbox" name="strategy" value="{s}"'
        f'{" checked" if s in form["strategies"] else ""}> {s}</label>' for s in STRATEGIES)
    sliders = "".join(
        f'<label class="slider">{name}<input type="range" name="w_{name}" min="0" max="1" step="0.05" '
        f'value="{form["weights"][name]}" data-out="out-{name}"><output id="out-{name}">{form["weights"][name]:.2f}</output></label>'
        for name, _ in WEIGHTS)
    options = '<option value="">any entity</option>' + "".join(
        f'<option value="{e(n)}"{" selected" if n == form["entity"] else ""}>{e(n)} ({c})</option>' for n, c in entities)
    directions = "".join(f'<option{" selected" if d == form["direction"] else ""}>{d}</option>'
                         for d in ("forward", "backward", "both"))
    # The session's form value is for the script, which posts a recall that counts as use (a GET must not
    # change scores); as a hidden field it would land in the address of every plain recall.
    return f"""<form class="card playground" method="get" action="/recall" id="recall-form" data-csrf="{e(csrf)}">{hidden(vault=vault, run="1")}
<label class="cue">cue <input type="search" name="cue" value="{e(form["cue"])}" placeholder="what to look for" autofocus></label>
<fieldset><legend>strategies <span class="muted">(none: lexical + similarity fused)</span></legend>{checks}
<div class="causal"><label>causal seed <input name="seed" value="{e(form["seed"])}" placeholder="memory id (optional)" size="28"></label>
<label>direction <select name="direction">{directions}</select></label>
<label>depth <input type="number" name="depth" min="1" max="10" value="{form["depth"]}"></label></div></fieldset>
<fieldset><legend>weights</legend>{sliders}</fieldset>
<fieldset class="filters"><legend>filters</legend>
<label>top-k <input type="number" name="top_k" min="1" max="1000" value="{form["top_k"]}"></label>
<label title="MMR lambda: 1 = pure relevance, score order; lower = more diverse, restatements last; 0 = diversity alone after the best">diversity <input type="number" name="mmr" min="0" max="1" step="0.05" value="{"" if form.get("mmr") is None else f'{form["mmr"]:g}'}" placeholder="default" size="5"> <span class="muted">1 = score order, 0 = most diverse</span></label>
<label>entity <select name="entity">{options}</select></label>
{"".join(f'<label>{name} <input name="{name}" value="{e(form.get(name, ""))}" placeholder="any" size="14"></label>'
         for name in ORIGIN_FILTERS)}
<label>from <input type="datetime-local" name="since" value="{e(form["since"])}"></label>
<label>to <input type="datetime-local" name="until" value="{e(form["until"])}"> <span class="muted">UTC</span></label>
<label title="what was true then: memories created later left out, a value changed later current">as of <input type="datetime-local" name="as_of" value="{e(form.get("as_of", ""))}"> <span class="muted">UTC</span></label>
<label class="check"><input type="checkbox" name="include_superseded" value="1"{" checked" if form["include_superseded"] else ""}> include superseded</label>
<label class="check"><input type="checkbox" name="reinforce" value="1"{" checked" if form["reinforce"] else ""}> count as used (reinforce)</label>
</fieldset>
<button type="submit" class="primary">Recall</button></form>"""


def recall_results(vault: str, results: Any, form: dict[str, Any], command: str, ignored: list[str]) -> str:
    out = [f'<div class="card command"><h3>Same request on the command line</h3>'
           f'<pre id="command-line"><code>{e(command)}</code></pre>'
           f'<button type="button" class="copy" data-copy="command-line">copy</button></div>']
    for note in ignored:
        out.append(notice(note))
    abstained = getattr(results, "abstained", None)
    confidence = getattr(results, "confidence", None)
    head = f'<p class="summary" id="result-count">{len(results.results)} results'
    if confidence is not None:
        head += f' · confidence <b>{float(confidence):.2f}</b>'
    if abstained:
        head += ' · <span class="warn">abstained: nothing here is a confident answer</span>'
    out.append(head + "</p>")
    for note in getattr(results, "notes", []) or []:
        out.append(notice(note))
    weights = form["weights"]
    for rank, r in enumerate(results.results, 1):
        parts = r.components
        bars = "".join(bar(getattr(parts, name), name, f"{name} {getattr(parts, name):.3f} × weight {weights[name]:.2f}"
                           f" = {getattr(parts, name) * weights[name]:.3f}", css=f"c-{name}")
                       for name, _ in WEIGHTS)
        strategies = "".join(f'<span class="chip strategy">{e(s)}</span>' for s in r.strategies)
        conf = getattr(r, "confidence", None)
        conf_html = f'<span class="chip">confidence {float(conf):.2f}</span>' if conf is not None else ""
        details = _details(r.details or {})
        m = r.memory
        out.append(f"""<article class="card result" data-memory-id="{e(m.id)}">
<div class="result-head"><span class="rank">#{rank}</span><span class="score" title="composite score">{r.score:.3f}</span>
{kind_badge(m.kind)}{f'<span class="chip entity">{e(m.entity_id)}</span>' if m.entity_id else ''}{strategies}{conf_html}{_origin_chips(m)}
{_truth_chips(r)}</div>
<p class="content">{memory_link(vault, m, 400)}</p>
<div class="bars">{bars}</div>
<p class="muted small">{e(details)} · created {when(m.created_at)} · id {e(short(m.id))}</p></article>""")
    if not results.results:
        out.append('<p class="muted">No memory matched.</p>')
    return "".join(out)


def _origin_chips(m: Memory, author: bool = True) -> str:
    """Who stored it, as chips; the timeline leaves the author out (in most vaults one person's, on every line)."""
    return "".join(f'<span class="chip origin" title="{name}">{name} {e(value)}</span>'
                   for name, value in (("by", m.author if author else None), ("agent", m.agent),
                                       ("session", m.session)) if value)


def _truth_chips(r: Any) -> str:
    """What a result says of its truth (docs/honesty.md "What is true now"): an older value and the
    memory that changed it, a replaced memory, a confirmed conflict; each mark's words as its title."""
    m, chips = r.memory, []
    if not r.current and r.newer:
        label = (f"older value {m.value_change}" if m.newer_value == r.newer and m.value_change else "superseded")
        chips.append(f'<span class="chip warn" title="{e("; ".join(r.marks))}">{e(label)} · newer '
                     f'{e(short(r.newer))}</span>')
    chips += [f'<span class="chip warn" title="confirmed contradiction: which is true is not known">conflicts '
              f'with {e(short(other))}</span>' for other in r.conflicts_with]
    return "".join(chips)


# Memory ------------------------------------------------------------------------------------------

def _note_append_form(vault: str, csrf: str, m: Memory, note: Any) -> str:
    """Add to the memory's note, as `hebbs note append` does, expecting the version shown: a note saved since
    (in an editor, by an agent) is refused, not overwritten."""
    if note is None:
        return ""
    return (f'<form method="post" action="/note/append" class="note-append">'
            f'{hidden(csrf=csrf, vault=vault, id=m.id, version=note.version)}'
            f'<label>add to the note <code>{e(note.path)}</code> (version {e(note.version)})'
            f'<textarea name="text" rows="2" placeholder="markdown added at the end of the note, indexed at once">'
            f'</textarea></label><button type="submit">Add to the note</button></form>')


ACCESS_VIA = {"used": "used (an answer relied on it)", "recall": "returned by a recall that counted as use",
              "panel": "marked useful in the Memory Palace"}


def memory_page(vault: str, csrf: str, inspection: Any, others: dict[str, Memory], chain: tuple[list[Memory], list[Memory]],
                lines: tuple[int, int] | None, original: Any = None, note: Any = None) -> str:
    m: Memory = inspection.memory
    pinned = str(m.context.get("pinned", "")).lower() == "true"
    meta = [("id", f"<code>{e(m.id)}</code>"), ("kind", kind_badge(m.kind)), ("entity", e(m.entity_id or "—")),
            ("importance", f"{m.importance:.2f}"), ("decay score", f"{m.decay_score:.3f}"),
            ("pinned", "yes (never decays)" if pinned else "no"),
            ("created", when(m.created_at)), ("updated", when(m.updated_at))]
    # Unset on memories stored before they were recorded: shown only when known.
    if m.author is not None:
        meta.append(("author", e(m.author) + (f' <span class="muted">via {e(m.daemon)}</span>' if m.daemon else "")))
    meta += [(name, e(value)) for name, value in (("agent", m.agent), ("session", m.session)) if value is not None]
    meta_html = "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in meta)
    context = {k: v for k, v in m.context.items()}
    context_html = f'<pre class="context">{e(_json(context))}</pre>' if context else '<p class="muted">no context</p>'
    if len(context) > 4:  # an indexed section's bookkeeping: there on demand, out of the way
        context_html = (f'<details class="context"><summary>{len(context)} keys: {e(", ".join(list(context)[:6]))}…'
                        f'</summary>{context_html}</details>')
    access = (f'<dl class="facts"><dt>accessed</dt><dd id="access-count">{_count(m.access_count, "time", "times")}</dd>'
              f'<dt>last access</dt><dd>{when(m.last_accessed_at)}</dd></dl>' + _access_history(m, inspection.accesses))
    if m.kind != MemoryKind.REVISION:  # looking changes no ranking: only this button counts as a use
        access += button_form("/memory/used", "This was useful (reinforce)", csrf, vault=vault, id=m.id)
    source = '<p class="muted">not indexed from a notes file</p>'
    if m.source is not None:
        heading = " › ".join(m.source.heading_path) or "(top of file)"
        where = f"lines {lines[0]}–{lines[1]}" if lines else f"bytes {m.source.byte_start}–{m.source.byte_end}"
        source = (f'<dl class="facts"><dt>file</dt><dd><code>{e(m.source.file_path)}</code></dd><dt>section</dt>'
                  f'<dd>{e(heading)}</dd><dt>where</dt><dd>{e(where)}</dd></dl>'
                  + ('<p class="chip state-modified" id="diverged">diverged: revised here, the file still holds the '
                     'text it was indexed from</p>' if m.context.get("diverged_from_source") else "")
                  + f'<a class="button" href="{url("/source", vault=vault, id=m.id)}#section">show the section in its file</a>')
    superseded = ""
    if m.superseded_by:
        newer = others.get(m.superseded_by)
        superseded = notice("superseded: a newer memory replaced this one; recall leaves it out") + (
            f'<p>replaced by {memory_link(vault, newer)}</p>' if newer else "")
    elif m.newer_value:
        newer = others.get(m.newer_value)
        superseded = notice(f"older value ({m.value_change or 'changed'}): a newer memory states another value; recall "
                            f"shows this one below it, marked") + (
            f'<p>true until {when(m.valid_until or 0)}; newer: {memory_link(vault, newer)}</p>' if newer else "")
    if m.older_value:
        older = others.get(m.older_value)
        superseded += (f'<p>newer value of {memory_link(vault, older)}'
                       f'{" (" + e(older.value_change) + ")" if older.value_change else ""}</p>' if older else "")
    if m.conflicts_with:
        superseded += notice("confirmed contradiction: this memory and " + ", ".join(short(o) for o in m.conflicts_with)
                             + " disagree; which is true is not known")
    edges_out = [ed for ed in inspection.edges if ed.source == m.id]
    edges_in = [ed for ed in inspection.edges if ed.target == m.id]

    def edge_rows(edges: list[Any], other_side: str) -> str:
        if not edges:
            return '<p class="muted">none</p>'
        rows = []
        for ed in edges:
            other_id = getattr(ed, other_side)
            other = others.get(other_id)
            label = memory_link(vault, other, 120) if other else f"<code>{e(short(other_id))}</code>"
            rows.append([f'<span class="edge-type et-{e(ed.edge_type.lower())}">{e(ed.edge_type)}</span>', label,
                         f"{ed.confidence:.2f}", when(ed.created_at)])
        return table(["type", "memory", "confidence", "since"], rows, "edges")

    history = "".join(f'<li><span class="muted">{when(h.updated_at)}</span><pre class="old">{e(h.content)}</pre></li>'
                      for h in inspection.history) or '<li class="muted">no earlier versions</li>'
    earlier, later = chain
    chain_items = ([f'<li>{memory_link(vault, x, 120)} <span class="muted">{when(x.created_at)}</span></li>' for x in earlier]
                   + [f'<li class="current">{e(snippet(m.content, 120))} <span class="muted">(this memory)</span></li>']
                   + [f'<li>{memory_link(vault, x, 120)} <span class="muted">{when(x.created_at)}</span></li>' for x in later])
    chain_html = f'<ol class="chain">{"".join(chain_items)}</ol>' if earlier or later else '<p class="muted">not part of a supersession chain</p>'
    actions = f"""<section class="card actions"><h2>Change</h2>
<form method="post" action="/memory/revise" class="revise">{hidden(csrf=csrf, vault=vault, id=m.id)}
<label>content<textarea name="content" rows="4">{e(m.content)}</textarea></label>
<div class="row"><label>importance <input type="number" name="importance" min="0" max="1" step="0.05" value="{m.importance:.2f}"></label>
<label>entity <input name="entity" value="{e(m.entity_id or '')}" placeholder="none"></label>
<button type="submit" class="primary">Revise</button></div></form>
<div class="row">{button_form("/memory/pin", "Unpin" if pinned else "Pin (never decays)", csrf, vault=vault, id=m.id, pinned="0" if pinned else "1")}
{button_form("/memory/forget", "Forget…", csrf, "danger", vault=vault, id=m.id)}</div>
<form method="post" action="/memory/supersede" class="supersede">{hidden(csrf=csrf, vault=vault, id=m.id)}
<label>supersede with a new memory<textarea name="content" rows="2" placeholder="the corrected fact"></textarea></label>
<button type="submit">Supersede</button></form>{_note_append_form(vault, csrf, m, note)}</section>"""
    return f"""{superseded}<section class="card memory"><div class="content-full markdown" id="memory-content">{markdown(m.content)}</div>
<div class="grid2"><div><h3>Metadata</h3><dl class="facts">{meta_html}</dl><h3>Context</h3>{context_html}</div>
<div><h3>Source</h3>{source}<h3>Access</h3>{access}</div></div></section>
{_kept_original(vault, m, original)}
{actions}
<section class="card"><h2>Edges out ({len(edges_out)})</h2>{edge_rows(edges_out, "target")}
<h2>Edges in ({len(edges_in)})</h2>{edge_rows(edges_in, "source")}</section>
<section class="card"><h2>Supersession chain</h2>{chain_html}</section>
<section class="card"><h2>Revision history ({len(inspection.history)})</h2><ul class="history">{history}</ul></section>"""


def _access_history(m: Memory, accesses: list[Any]) -> str:
    """Newest first; the log keeps the last accesses (hebbs/store/access_log.py), the count all of them."""
    if not accesses:
        return ('<p class="muted" id="access-history">no access logged'
                + (" (earlier ones predate the access log)" if m.access_count else "") + "</p>")
    rows = "".join(f'<li data-via="{e(a.via)}"><span class="muted">{when(a.at)}</span> {e(ACCESS_VIA.get(a.via, a.via))}</li>'
                   for a in accesses)
    older = m.access_count - len(accesses)
    more = f'<p class="muted small">and {_count(older, "earlier access", "earlier accesses")} not kept in the log</p>' if older > 0 else ""
    return f'<ol class="access-history" id="access-history">{rows}</ol>{more}'


def _kept_original(vault: str, m: Memory, original: Any) -> str:
    """The section exactly as it was in the file version the memory was indexed from (`hebbs source ID`)."""
    if m.source is None:
        return ""
    if isinstance(original, str) or original is None:
        why = original or "no kept original"
        return f'<section class="card kept-original" id="kept-original"><h2>Kept original</h2><p class="muted">{e(why)}</p></section>'
    o = original
    heading = " › ".join(o.heading_path) or "(top of file)"
    version = "the file's current version" if o.latest else "an earlier version of the file"
    if o.file_removed_at is not None:
        version += f"; the file was removed {when(o.file_removed_at)}"
    return f"""<section class="card kept-original" id="kept-original"><h2>Kept original</h2>
<p class="muted small">as <code>hebbs source {e(short(m.id))}</code> shows it: the section exactly as it was when indexed</p>
<dl class="facts"><dt>file</dt><dd><code>{e(o.file)}</code></dd><dt>section</dt><dd>{e(heading)}</dd>
<dt>lines</dt><dd>{o.line_start}–{o.line_end}</dd><dt>version</dt><dd><code title="{e(o.sha256)}">{e(o.sha256[:12])}</code> ({e(version)})</dd>
<dt>indexed</dt><dd>{when(o.indexed_at)}</dd></dl>
<pre class="source original" id="original-text">{e(o.text)}</pre></section>"""


def forget_confirm(vault: str, csrf: str, memory: Memory) -> str:
    return f"""<section class="card danger-zone"><p>Forget this memory? Its vector, edges and history go too; this cannot be undone.</p>
<blockquote>{e(memory.content)}</blockquote>
<div class="row">{button_form("/memory/forget", "Yes, forget it", csrf, "danger", vault=vault, id=memory.id, confirm="yes")}
<a class="button" href="{url("/memory", vault=vault, id=memory.id)}">Keep it</a></div></section>"""


def source_page(vault: str, memory_id: str, section: Any) -> str:
    before, middle, after = section.text[:section.start], section.text[section.start:section.end], section.text[section.end:]
    return (f'<p><code>{e(section.file)}</code>, lines {section.line_start}–{section.line_end} · '
            f'<a href="{url("/memory", vault=vault, id=memory_id)}">back to the memory</a></p>'
            f'<pre class="source">{e(before)}<mark id="section">{e(middle)}</mark>{e(after)}</pre>')


# Graph, timeline ------------------------------------------------------------------------------------

def graph_page(vault: str, fold: bool, types: tuple[str, ...], all_types: tuple[str, ...], scope: GraphScope,
               facets: GraphFacets) -> str:
    checks = "".join(f'<label class="check"><input type="checkbox" name="type" value="{t}"{" checked" if t in types else ""}>'
                     f' <span class="edge-type et-{t.lower()}">{t}</span></label>' for t in all_types)
    options = {"shown": "1", "fold": "1" if fold else "0", "type": list(types), "folder": scope.folder,
               "tag": scope.tag, "around": scope.around, "hops": str(scope.hops)}
    src = url("/api/graph", vault=vault, **options)

    def choices(name: str, chosen: str, counted: list[tuple[str, int]], everything: str) -> str:
        listed = "".join(f'<option value="{e(value)}"{" selected" if value == chosen else ""}>{e(value)} ({n})</option>'
                         for value, n in counted)
        return f'<select name="{name}"><option value="">{everything}</option>{listed}</select>'

    hops = "".join(f'<option value="{n}"{" selected" if n == scope.hops else ""}>{n}</option>' for n in (1, 2, 3))
    narrow = (f'<label>folder {choices("folder", scope.folder, facets.folders, "every folder")}</label>'
              if facets.folders else "")
    narrow += f'<label>tag {choices("tag", scope.tag, facets.tags, "any tag")}</label>' if facets.tags else ""
    narrow += (f'<label>around <input type="search" name="around" value="{e(scope.around)}" '
               f'placeholder="a note\'s path or a memory\'s id"></label><label>within <select name="hops">{hops}</select>'
               ' links</label>')
    return f"""<form method="get" action="/graph" class="graph-tools card auto-submit" id="graph-options">{hidden(vault=vault, shown="1")}
<label class="check"><input type="checkbox" name="fold" value="1"{" checked" if fold else ""}> one node per note (sections folded in)</label>
<span class="legend" id="edge-types">{checks}</span><span id="graph-scope">{narrow}</span><noscript><button>show</button></noscript></form>
<div class="graph-tools card"><label>colour by <select id="graph-color"><option value="kind">kind</option>
<option value="entity">entity</option></select></label>
<label>focus <input type="search" id="graph-search" placeholder="search memories"></label>
<span id="graph-status" class="muted">loading…</span></div>
<div id="graph" class="graph" data-src="{src}" data-vault="{e(vault)}"></div>"""


def timeline_page(vault: str, entity: str | None, kind: str | None, entities: list[tuple[str, int]],
                  memories: list[Memory], total: int, message: str | None = None) -> str:
    options = '<option value="">every entity</option>' + "".join(
        f'<option value="{e(n)}"{" selected" if n == entity else ""}>{e(n)} ({c})</option>' for n, c in entities)
    kinds = '<option value="">every kind</option>' + "".join(
        f'<option{" selected" if k == kind else ""}>{k}</option>' for k in ("EPISODE", "INSIGHT"))
    form = (f'<form method="get" action="/timeline" class="card filters auto-submit">{hidden(vault=vault)}'
            f'<label>entity <select name="entity">{options}</select></label>'
            f'<label>kind <select name="kind">{kinds}</select></label><noscript><button>show</button></noscript></form>')
    shown = f'<p class="muted">{_count(total, "memory", "memories")}' + (f", the newest {len(memories)} shown" if total > len(memories) else "") + ", oldest first</p>"
    items, day = [], None
    for m in memories:
        this_day = when(m.created_at)[:10]
        if this_day != day:
            items.append(f'<li class="day">{e(this_day)}</li>')
            day = this_day
        # Rendered as the memory page renders it (notes are markdown: headings, tables, wiki-links).
        items.append(f'<li class="event{" superseded" if m.superseded_by else ""}"><div class="event-head">'
                     f'<time>{when(m.created_at)[11:19]}</time>{kind_badge(m.kind)}'
                     f'{f"<span class=chip>{e(m.entity_id)}</span>" if m.entity_id and not entity else ""}'
                     f'{_origin_chips(m, author=False)}<a class="mem-link" href="{url("/memory", vault=vault, id=m.id)}">open</a></div>'
                     f'<div class="markdown event-content" dir="auto">{markdown_excerpt(m.content)}</div></li>')
    return (notice(message) if message else "") + form + shown + f'<section class="card"><ol class="timeline">{"".join(items)}</ol></section>'


# Contradictions, insights, query log -----------------------------------------------------------------

def contradictions_page(vault: str, csrf: str, prepared: Any, message: str | None, pending: int) -> str:
    out = [notice(message)] if message else []
    shown = len(prepared.candidates)
    if pending > shown:
        out.append(f'<p class="muted" id="candidates-shown">{shown} of {pending} pending shown: settle these and the next '
                   f'come up, or <a href="{url("/contradictions", vault=vault, limit=pending)}">show all {pending}</a></p>')
    if not prepared.candidates:
        out.append('<p class="muted" id="no-candidates">No contradiction candidates pending.</p>')
    for c in prepared.candidates:
        sides = "".join(
            f"""<div class="side"><h3>{label}</h3><p class="content">{memory_link(vault, m, 600)}</p>
<p class="muted small">{e(m.entity_id or "no entity")} · {when(m.created_at)}{f" · <code>{e(m.source.file_path)}</code> › {e(' › '.join(m.source.heading_path))}" if m.source else ""}</p></div>"""
            for label, m in (("A", c.memory_a), ("B", c.memory_b)))
        reasons = "".join(f"<li>{e(r)}</li>" for r in c.reasons)
        verdicts = "".join(button_form("/contradictions/verdict", label, csrf, css, vault=vault, pending_id=c.pending_id,
                                       verdict=verdict)
                           for verdict, label, css in (("contradiction", "Contradiction: keep both, linked", "danger"),
                                                       ("revision", "Revision: newer supersedes older", "primary"),
                                                       ("neutral", "Neutral: dismiss", "")))
        out.append(f"""<article class="card candidate" data-pending-id="{e(c.pending_id)}">
<p class="muted small">confidence {c.confidence:.2f} · similarity {c.similarity:.2f} · queued {when(c.created_at)}</p>
<div class="sides">{sides}</div><ul class="reasons">{reasons}</ul><div class="row verdicts">{verdicts}</div></article>""")
    if prepared.dropped:
        out.append(notice(f"{_count(prepared.dropped, 'candidate', 'candidates')} dropped: a side was forgotten or replaced since"))
    return "".join(out)


def insights_page(vault: str, insights: list[Any], sources: dict[str, Memory]) -> str:
    if not insights:
        return '<p class="muted">No insights yet: `hebbs reflect-prepare` starts a reflection.</p>'
    out = []
    for i in insights:
        conf = "" if i.confidence is None else f'<span class="chip">confidence {i.confidence:.2f}</span>'
        tags = "".join(f'<span class="chip">{e(t)}</span>' for t in i.tags)
        src = "".join(f"<li>{memory_link(vault, sources[s], 200) if s in sources else f'<code>{e(short(s))}</code> (gone)'}</li>"
                      for s in i.source_ids)
        out.append(f"""<article class="card insight"><p class="content">{memory_link(vault, i.memory, 600)}</p>
<p>{conf}{tags}<span class="muted small"> {when(i.memory.created_at)}</span></p>
<h3>drawn from {_count(len(i.source_ids), "memory", "memories")}</h3><ul class="sources">{src}</ul></article>""")
    return "".join(out)


def queries_page(vault: str, entries: list[Any]) -> str:
    if not entries:
        return '<p class="muted">No recalls logged yet.</p>'
    rows = []
    for q in entries:
        again = url("/recall", vault=vault, cue=q.cue or "", entity=q.entity_id or "",
                    strategy=[s for s in q.strategies if s in STRATEGIES], top_k=max(q.result_count, 1), run="1")
        cue = e(q.cue) if q.cue is not None else '<span class="muted">(no cue)</span>'
        rows.append([when(q.at), f'<a href="{again}" title="open in the playground">{cue}</a>', e(", ".join(q.strategies)),
                     e(q.entity_id or ""), f'<span class="num">{q.result_count}</span>',
                     f'<span class="num">{q.latency_ms:.1f} ms</span>'])
    return f'<section class="card">{table(["at", "cue", "strategies", "entity", "results", "latency"], rows, "queries")}</section>'


def _details(details: dict[str, Any]) -> str:
    """A result's strategy facts on one line: numbers to 3 places, nested facts (confidence features) inline."""
    def show(value: Any) -> str:
        if isinstance(value, float):
            return f"{value:.3f}"
        if isinstance(value, dict):
            return "(" + ", ".join(f"{k} {show(v)}" for k, v in value.items()) + ")"
        return str(value)

    return ", ".join(f"{k.replace('_', ' ')} {show(v)}" for k, v in details.items())


def _count(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def _json(value: Any) -> str:
    import json

    return json.dumps(value, indent=2, ensure_ascii=False, default=str)
