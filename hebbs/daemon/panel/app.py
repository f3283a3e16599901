"""The panel's routes (Starlette): pages, the graph's JSON, the live event stream and the few actions."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import logging
import math
import shlex
from pathlib import Path
from typing import Any

import msgspec
from starlette.applications import Starlette
from starlette.datastructures import QueryParams
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from hebbs.errors import Conflict, HebbsError, InvalidInput, NotFound
from hebbs.protocol import (ContradictionCommit, ContradictionPrepare, Forget, ForgetCandidates, Insights, Inspect,
                            List, NoteAppend, NoteRead, Queries, Recall, Reinforce, Remember, Revise, ShowSource,
                            Status)
from hebbs.schema import ContradictionVerdict, MemoryKind, ScoringWeights

from . import data, pages
from .host import PanelHost
from .html import url
from .security import FORM_FIELD, Guard

STATIC = Path(__file__).parent / "static"
log = logging.getLogger("hebbs.daemon.panel")
KEEPALIVE_SECONDS = 15.0
# The panel's forms are small and urlencoded (parsed here: no multipart parser needed).
MAX_FORM_BYTES = 1024 * 1024
# Pending contradictions a page shows unless asked for more (each is two memories in full).
CONTRADICTIONS_SHOWN = 100


def build_app(service: PanelHost) -> Any:
    routes = Routes(service)
    app = Starlette(routes=[
        Route("/", routes.overview), Route("/recall", routes.recall, methods=["GET", "POST"]),
        Route("/memory", routes.memory), Route("/memory/used", routes.used, methods=["POST"]),
        Route("/api/alive", routes.alive),
        Route("/source", routes.source), Route("/graph", routes.graph), Route("/api/graph", routes.graph_json),
        Route("/timeline", routes.timeline), Route("/contradictions", routes.contradictions),
        Route("/insights", routes.insights), Route("/queries", routes.queries), Route("/events", routes.events),
        Route("/memory/revise", routes.revise, methods=["POST"]), Route("/memory/pin", routes.pin, methods=["POST"]),
        Route("/memory/supersede", routes.supersede, methods=["POST"]),
        Route("/memory/forget", routes.forget, methods=["POST"]),
        Route("/note/append", routes.note_append, methods=["POST"]),
        Route("/contradictions/verdict", routes.verdict, methods=["POST"]),
        Route("/index/cancel", routes.cancel_index, methods=["POST"]),
        Mount("/static", StaticFiles(directory=STATIC, follow_symlink=False), name="static"),
    ], exception_handlers={HTTPException: routes.http_error})
    return Guard(app, service.token, lambda: service.port or 0, service.codes, service.sessions)


class Routes:
    def __init__(self, service: PanelHost) -> None:
        self.service = service
        self.data = service.data
        self.home = service.home

    # Plumbing -----------------------------------------------------------------------------------

    def _vault(self, request: Request) -> str:
        return self.service.vaults.check(request.query_params.get("vault"))

    def _page(self, request: Request, title: str, vault: str, body: str, status: int = 200, **kw: Any) -> HTMLResponse:
        return HTMLResponse(pages.layout(title, request.url.path, vault, self.service.vaults.paths(), self.home, body, **kw),
                            status_code=status)

    async def _guarded(self, request: Request, title: str, render: Any, **kw: Any) -> HTMLResponse:
        """Render a page; a HebbsError becomes the same page with the error, never a traceback."""
        self.service.inflight += 1
        try:
            vault = str(self.home)
            try:
                vault = self._vault(request)
                body = await render(vault)
                return self._page(request, title, vault, body, **kw)
            except HebbsError as exc:
                status = 404 if isinstance(exc, NotFound) else 400
                return self._page(request, title, vault, pages.error_box(str(exc)), status=status, live=False)
        finally:
            self.service.inflight -= 1

    async def _posted(self, request: Request) -> QueryParams:
        """The posted form, once its session's form value is checked (the cookie alone never authorizes a
        change; a program gives the token in the header instead)."""
        if len(await request.body()) > MAX_FORM_BYTES:
            raise PermissionError
        form = QueryParams((await request.body()).decode("utf-8", errors="replace"))
        state = request.scope.get("state", {})
        if not (state.get("token_in_header")
                or self.service.sessions.form_value_matches(state.get("session"), form.get(FORM_FIELD))):
            raise PermissionError
        return form

    async def _form(self, request: Request) -> dict[str, str]:
        form = dict((await self._posted(request)).items())
        form["vault"] = self.service.vaults.check(form.get("vault"))
        return form

    def _refused(self, request: Request) -> HTMLResponse:
        return self._page(request, "Not allowed", str(self.home), pages.error_box(
            "a change needs this session's form value (from one of the panel's own pages) "
            "or the panel's token in the X-Hebbs-Token header"), status=403, live=False)

    async def _act(self, request: Request, act: Any) -> Response:
        try:
            form = await self._form(request)
        except PermissionError:
            return self._refused(request)
        except HebbsError as exc:
            return self._page(request, "Not done", str(self.home), pages.error_box(str(exc)), status=404, live=False)
        self.service.inflight += 1
        try:
            return await act(form)
        except HebbsError as exc:
            status = 404 if isinstance(exc, NotFound) else 409 if isinstance(exc, Conflict) else 400
            return self._page(request, "Not done", form["vault"], pages.error_box(str(exc)), status=status, live=False)
        finally:
            self.service.inflight -= 1

    async def http_error(self, request: Request, exc: HTTPException) -> HTMLResponse:
        """Starlette's own 404 and 405, as the panel's error page rather than bare text."""
        message = {404: "there is no such page in the Memory Palace", 405: "this page does not take that method"}
        return self._page(request, "Not found" if exc.status_code == 404 else "Not allowed", str(self.home),
                          pages.error_box(message.get(exc.status_code, str(exc.detail))), status=exc.status_code,
                          live=False)

    async def alive(self, request: Request) -> Response:
        """For open pages to tell a stopped daemon (no answer) from a restarted one (403: a new token)."""
        return Response(status_code=204)

    # Pages ----------------------------------------------------------------------------------------

    async def overview(self, request: Request) -> HTMLResponse:
        chosen = request.query_params.get("vault")

        async def render(vault: str) -> str:
            status = await self.data.command(Status(), None)
            # The vault selector picks one vault: its card alone, with the way back to all of them.
            paths = [vault] if chosen else self.service.vaults.paths()
            cards = await asyncio.gather(*(self._card(v) for v in paths))
            body = pages.overview(status, list(cards), self.home, _form_value(request))
            return (pages.notice_html(f'one vault of {len(self.service.vaults.paths())}: '
                                      f'<a href="/" id="all-vaults">show all vaults</a>') + body) if chosen else body

        return await self._guarded(request, "Overview", render)

    async def _card(self, vault: str) -> dict[str, Any]:
        card: dict[str, Any] = {"vault": vault}
        try:
            status = await self.data.command(Status(), vault)
            card["stats"] = status.vault
            card["summary"] = await self.data.cached_view(vault, data.summary)
            card["candidates"] = await self.data.cached(vault, ("forget_candidates",), lambda: self.data.command(
                ForgetCandidates(), vault), ttl=data.CANDIDATES_TTL_SECONDS)
            root = data.notes_root(vault, self.home)
            if root is not None:
                card["root"] = str(root)
                files = await self.data.command(List(path=str(root)), vault)
                counts: dict[str, int] = {}
                for f in files:
                    counts[f.state] = counts.get(f.state, 0) + 1
                card["notes"] = counts
            slot = self.data.slot_state(vault)
            if slot is not None:
                card["indexing"], card["progress"] = slot.indexing, slot.progress
                card["sweep"] = pages.sweep_text(slot.sweeper)
        except HebbsError as exc:
            card["error"] = str(exc)
        return card

    async def recall(self, request: Request) -> HTMLResponse:
        params = request.query_params
        if request.method == "POST":
            # A recall that counts as use changes scores: a POST with the form value, never a GET.
            try:
                params = await self._posted(request)
            except PermissionError:
                return self._refused(request)
        failed = False

        async def render(vault: str) -> str:
            nonlocal failed
            form, problems = recall_form(params, reinforce_allowed=request.method == "POST")
            entities = await self.data.cached_view(vault, data.entity_names)
            body = pages.recall_form(vault, _form_value(request), form, entities)
            results = ""
            # A link with a cue (/recall?cue=...) shows its results, as the Recall button would.
            if (params.get("run") or form["cue"]) and not problems:
                try:
                    command, ignored = recall_command(form)
                    found = await self.data.command(command, vault)
                    results = pages.recall_results(vault, found, form, command_line(vault, self.home, form), ignored)
                except HebbsError as exc:
                    problems.append(str(exc))
            if params.get("reinforce") and request.method != "POST":
                results = pages.notice("this recall did not count as use: one that does runs only from the "
                                       "Recall button (a link cannot reinforce)") + results
            if problems:
                failed = True
                # Beside the form, which keeps what was typed: the error is one field to fix, not a dead end.
                results = "".join(pages.error_box(p) for p in problems) + results
            if results:
                body += f'<div class="results" id="results">{results}</div>'
            return f'<div class="playground-grid">{body}</div>'

        response = await self._guarded(request, "Recall playground", render, live=False)
        if failed:
            response.status_code = 400
        return response

    async def memory(self, request: Request) -> HTMLResponse:
        async def render(vault: str) -> str:
            inspection = await self.data.command(Inspect(id=_required(request, "id")), vault)
            m = inspection.memory
            ids = ([x for ed in inspection.edges for x in (ed.source, ed.target)]
                   + [x for x in (m.superseded_by, m.newer_value, m.older_value) if x])
            others = await self.data.view(vault, data.memories_by_id, ids[:400])
            chain = await self.data.view(vault, data.supersession, m)
            lines = await asyncio.to_thread(data.line_range, vault, self.home, m) if m.source else None
            original = await self._kept_original(vault, m)
            note = await self._note_now(vault, m)
            return pages.memory_page(vault, _form_value(request), inspection, others, chain, lines, original, note)

        return await self._guarded(request, "Memory", render)

    async def used(self, request: Request) -> Response:
        """The person says this memory was useful: the socket's own `reinforce`, with via "panel". Only
        this button counts: opening or reloading the page is looking, which changes no ranking."""
        async def act(form: dict[str, str]) -> Response:
            memory = (await self.data.command(Inspect(id=_field(form, "id")), form["vault"])).memory
            if memory.kind == MemoryKind.REVISION:
                raise InvalidInput("a revision record is an earlier version, not a memory recall returns: "
                                   "mark the memory it belongs to instead")
            await self.data.command(Reinforce(ids=[memory.id], via="panel"), form["vault"])
            return _back("/memory", vault=form["vault"], id=memory.id)

        return await self._act(request, act)

    async def _kept_original(self, vault: str, memory: Any) -> Any:
        """The section as `hebbs source` shows it (the kept file version), or why there is none."""
        if memory.source is None:
            return None
        try:
            return await self.data.command(ShowSource(id=memory.id), vault)
        except HebbsError as exc:
            return str(exc)

    async def _note_now(self, vault: str, memory: Any) -> Any:
        """The note a memory was indexed from as it is now (its version, for the page's append form), or None:
        no note, or one hebbs would not write (the global vault has no notes folder)."""
        if memory.source is None or memory.kind == MemoryKind.REVISION:
            return None
        try:
            note = await self.data.command(NoteRead(path=memory.source.file_path), vault)
        except HebbsError:
            return None
        return note if note.exists else None

    async def source(self, request: Request) -> HTMLResponse:
        async def render(vault: str) -> str:
            inspection = await self.data.command(Inspect(id=_required(request, "id")), vault)
            section = await asyncio.to_thread(data.read_source, vault, self.home, inspection.memory)
            return pages.source_page(vault, inspection.memory.id, section)

        return await self._guarded(request, "Source", render, live=False)

    def _graph_options(self, request: Request, vault: str) -> tuple[bool, tuple[str, ...], data.GraphScope]:
        """Notes folded into one node each (the default for a notes vault), the edge types drawn (all by
        default) and the part of the vault shown (all by default), from the graph page's form."""
        q = request.query_params
        fold = q.get("fold") == "1" if "shown" in q else data.notes_root(vault, self.home) is not None
        types = tuple(t for t in data.EDGE_TYPES if t in q.getlist("type")) if "shown" in q else data.EDGE_TYPES
        hops = q.get("hops") or "1"
        if hops not in ("1", "2", "3"):
            raise InvalidInput(f"hops must be 1, 2 or 3, got {hops!r}")
        scope = data.GraphScope(folder=q.get("folder", ""), tag=q.get("tag", ""), around=q.get("around", "").strip(),
                                hops=int(hops))
        return fold, types, scope

    async def graph(self, request: Request) -> HTMLResponse:
        async def render(vault: str) -> str:
            fold, types, scope = self._graph_options(request, vault)
            facets = await self.data.cached_view(vault, data.graph_facets)
            return pages.graph_page(vault, fold, types, data.EDGE_TYPES, scope, facets)

        return await self._guarded(request, "Graph", render, live=False, scripts=("graph-canvas.js", "graph.js"))

    async def graph_json(self, request: Request) -> Response:
        try:
            vault = self._vault(request)
            fold, types, scope = self._graph_options(request, vault)
            view = await self.data.cached_view(vault, data.graph, fold, types, scope)
        except HebbsError as exc:
            return Response(json.dumps({"error": str(exc)}), 400, media_type="application/json")
        return Response(msgspec.json.encode(view), media_type="application/json")

    async def timeline(self, request: Request) -> HTMLResponse:
        async def render(vault: str) -> str:
            entity = request.query_params.get("entity") or None
            kind = request.query_params.get("kind") or None
            if kind not in (None, "EPISODE", "INSIGHT"):
                raise InvalidInput(f"kind must be EPISODE or INSIGHT, got {kind!r}")
            entities = await self.data.cached_view(vault, data.entity_names)
            memories, total = await self.data.view(vault, data.timeline, entity, kind)
            return pages.timeline_page(vault, entity, kind, entities, memories, total, request.query_params.get("done"))

        return await self._guarded(request, "Timeline", render)

    async def contradictions(self, request: Request) -> HTMLResponse:
        async def render(vault: str) -> str:
            limit = _int(request.query_params.get("limit"), "limit", CONTRADICTIONS_SHOWN)
            prepared = await self.data.command(ContradictionPrepare(max_results=max(limit, 1)), vault)
            pending = (await self.data.cached_view(vault, data.summary)).pending_contradictions
            return pages.contradictions_page(vault, _form_value(request), prepared, request.query_params.get("done"),
                                             pending)

        return await self._guarded(request, "Contradictions", render)

    async def insights(self, request: Request) -> HTMLResponse:
        async def render(vault: str) -> str:
            found = await self.data.command(Insights(max_results=200), vault)
            sources = await self.data.view(vault, data.memories_by_id, [s for i in found for s in i.source_ids])
            return pages.insights_page(vault, found, sources)

        return await self._guarded(request, "Insights", render)

    async def queries(self, request: Request) -> HTMLResponse:
        async def render(vault: str) -> str:
            return pages.queries_page(vault, await self.data.command(Queries(limit=200), vault))

        return await self._guarded(request, "Query log", render)

    # Live updates -------------------------------------------------------------------------------

    async def events(self, request: Request) -> StreamingResponse:
        feed = self.service.feed

        async def stream() -> Any:
            with feed.listen() as queue:
                yield "retry: 2000\n\n"
                while True:
                    try:
                        event = await asyncio.wait_for(queue.get(), KEEPALIVE_SECONDS)
                    except asyncio.TimeoutError:
                        yield ": keepalive\n\n"
                        continue
                    if event is None:
                        return
                    yield f"event: change\ndata: {json.dumps(event)}\n\n"

        return StreamingResponse(stream(), media_type="text/event-stream", headers={"X-Accel-Buffering": "no"})

    # Actions ------------------------------------------------------------------------------------

    async def revise(self, request: Request) -> Response:
        async def act(form: dict[str, str]) -> Response:
            entity = (form.get("entity") or "").strip() or None
            importance = _float(form.get("importance"), "importance")
            memory = await self.data.command(Revise(id=_field(form, "id"), content=form.get("content") or None,
                                                    importance=importance, entity_id=entity), form["vault"])
            return _back("/memory", vault=form["vault"], id=memory.id)

        return await self._act(request, act)

    async def pin(self, request: Request) -> Response:
        async def act(form: dict[str, str]) -> Response:
            inspection = await self.data.command(Inspect(id=_field(form, "id")), form["vault"])
            context = dict(inspection.memory.context)
            if form.get("pinned") == "1":
                context["pinned"] = True
            else:
                context.pop("pinned", None)
            await self.data.command(Revise(id=inspection.memory.id, context=context), form["vault"])
            return _back("/memory", vault=form["vault"], id=inspection.memory.id)

        return await self._act(request, act)

    async def supersede(self, request: Request) -> Response:
        async def act(form: dict[str, str]) -> Response:
            old = (await self.data.command(Inspect(id=_field(form, "id")), form["vault"])).memory
            content = (form.get("content") or "").strip()
            if not content:
                raise InvalidInput("write the new memory that supersedes this one")
            new = await self.data.command(Remember(content=content, importance=old.importance, context=old.context or None,
                                                   entity_id=old.entity_id, supersedes=[old.id]), form["vault"])
            return _back("/memory", vault=form["vault"], id=new.id)

        return await self._act(request, act)

    async def forget(self, request: Request) -> Response:
        async def act(form: dict[str, str]) -> Response:
            memory_id = _field(form, "id")
            if form.get("confirm") != "yes":
                memory = (await self.data.command(Inspect(id=memory_id), form["vault"])).memory
                return self._page(request, "Forget this memory?", form["vault"],
                                  pages.forget_confirm(form["vault"], _form_value(request), memory), live=False)
            try:
                done = await self.data.command(Forget(ids=[memory_id]), form["vault"])
            except NotFound:
                done = None
            # Another tab may have forgotten it first: that is not this click's success.
            said = ("memory forgotten" if done is not None and done.forgotten else
                    "that memory was already gone (forgotten elsewhere, perhaps in another tab)")
            return _back("/timeline", vault=form["vault"], done=said)

        return await self._act(request, act)

    async def note_append(self, request: Request) -> Response:
        """A person adds a line to a memory's note from its page: the version the page showed is expected,
        so a note saved since (in an editor, by an agent) is a CONFLICT, never overwritten."""
        async def act(form: dict[str, str]) -> Response:
            memory = (await self.data.command(Inspect(id=_field(form, "id")), form["vault"])).memory
            if memory.source is None:
                raise InvalidInput("this memory was not indexed from a note")
            written = await self.data.command(NoteAppend(path=memory.source.file_path, text=_field(form, "text"),
                                                         expected_version=_field(form, "version")), form["vault"])
            return _back("/memory", vault=form["vault"], id=written.memory_ids[-1] if written.memory_ids else memory.id)

        return await self._act(request, act)

    async def verdict(self, request: Request) -> Response:
        async def act(form: dict[str, str]) -> Response:
            verdict = ContradictionVerdict(pending_id=form.get("pending_id", ""), verdict=form.get("verdict", ""),
                                           note="decided in the Memory Palace")
            done = await self.data.command(ContradictionCommit(verdicts=[verdict]), form["vault"])
            said = {"contradiction": done.contradictions, "revision": done.revisions, "neutral": done.dismissed}
            message = (f"{verdict.verdict} recorded" if said.get(verdict.verdict) else
                       "; ".join(done.warnings) or "nothing was recorded")
            return _back("/contradictions", vault=form["vault"], done=message)

        return await self._act(request, act)


    async def cancel_index(self, request: Request) -> Response:
        async def act(form: dict[str, str]) -> Response:
            slot = self.data.slot_state(form["vault"])
            cancel = None if slot is None else slot.index_cancel
            if cancel is not None:
                cancel.set()  # the run stops at its next progress report (Handlers._stream)
            return _back("/", vault=form["vault"])

        return await self._act(request, act)


# Recall form ----------------------------------------------------------------------------------------

# The playground's defaults are the command's own (tests/test_parity.py).
RECALL_DEFAULTS = Recall()

def recall_form(q: QueryParams, reinforce_allowed: bool) -> tuple[dict[str, Any], list[str]]:
    """The playground's fields, and what is wrong with them: a bad field keeps its default, so the form
    can be shown again with the error beside it."""
    problems: list[str] = []

    def parsed(parse: Any, *args: Any) -> Any:
        try:
            return parse(*args)
        except InvalidInput as exc:
            problems.append(str(exc))
            return args[-1]

    weights = {name: parsed(_float, q.get(f"w_{name}"), name, default) for name, default in pages.WEIGHTS}
    for name, default in pages.WEIGHTS:
        if weights[name] < 0:  # said per field here: the engine's message would print the whole struct
            problems.append(f"the {name} weight must be 0 or more, got {weights[name]:g}")
            weights[name] = default
    strategies = [s for s in q.getlist("strategy") if s in pages.STRATEGIES]
    top_k = parsed(_int, q.get("top_k"), "top-k", 10)
    depth = parsed(_int, q.get("depth"), "depth", RECALL_DEFAULTS.max_depth)
    mmr = parsed(_float, q.get("mmr"), "diversity", None)
    if mmr is not None and not 0 <= mmr <= 1:
        problems.append(f"diversity (MMR lambda) must be from 0 to 1, got {mmr:g}")
        mmr = None
    direction = q.get("direction") or RECALL_DEFAULTS.direction
    if direction not in ("forward", "backward", "both"):
        problems.append(f"direction must be forward, backward or both, got {direction!r}")
        direction = RECALL_DEFAULTS.direction
    form = {"cue": (q.get("cue") or "").strip(), "strategies": strategies, "weights": weights, "top_k": top_k,
            "entity": q.get("entity") or "", "since": q.get("since") or "", "until": q.get("until") or "",
            "as_of": q.get("as_of") or "",
            "seed": (q.get("seed") or "").strip(), "direction": direction, "depth": depth, "mmr": mmr,
            "include_superseded": bool(q.get("include_superseded")),
            **{name: (q.get(name) or "").strip() for name in pages.ORIGIN_FILTERS},
            # Shown checked as asked; honoured only for a POST (the route says when it was not).
            "reinforce": bool(q.get("reinforce")) if q.get("run") else False}
    form["reinforce_now"] = form["reinforce"] and reinforce_allowed
    return form, problems


def command_line(vault: str, home: Path, form: dict[str, Any]) -> str:
    """What `hebbs recall` runs the playground's recall from a terminal."""
    words = ["hebbs"]
    path = Path(vault)
    words += ["--global"] if path.resolve() == home.resolve() else ["--vault", str(path.parent)]
    words += [Recall.spec.cli] + ([form["cue"]] if form["cue"] else [])
    for s in form["strategies"]:
        words += ["--strategy", s]
    if "causal" in form["strategies"] and form["seed"]:
        words += ["--seed", form["seed"], "--direction", form["direction"], "--max-depth", str(form["depth"])]
    if form["top_k"] != RECALL_DEFAULTS.top_k:
        words += ["--top-k", str(form["top_k"])]
    if form["entity"]:
        words += ["--entity", form["entity"]]
    for name in pages.ORIGIN_FILTERS:
        if form.get(name):
            words += [f"--{name}", form[name]]
    if form.get("mmr") is not None:
        words += ["--mmr", f'{form["mmr"]:g}']
    w = form["weights"]
    if any(abs(w[name] - default) > 1e-9 for name, default in pages.WEIGHTS):
        words += ["--weights", ":".join(f"{w[name]:g}" for name, _ in pages.WEIGHTS)]
    if form["since"] or form["until"]:
        words += ["--time-range", f'{form["since"] and form["since"] + "Z"}..{form["until"] and form["until"] + "Z"}']
    if form["as_of"]:
        words += ["--as-of", form["as_of"] + "Z"]
    if form["include_superseded"]:
        words.append("--include-superseded")
    if form["reinforce"]:
        words.append("--reinforce")  # recall changes no score unless asked
    return shlex.join(words)


def recall_command(form: dict[str, Any]) -> tuple[Recall, list[str]]:
    """The Recall command a form asks for, and notes about what this daemon's protocol cannot carry yet."""
    window = None
    if form["since"] or form["until"]:
        window = (_micros(form["since"], "from"), _micros(form["until"], "to"))
    fields: dict[str, Any] = dict(
        cue=form["cue"] or None, strategies=form["strategies"] or None, top_k=form["top_k"],
        entity_id=form["entity"] or None, time_range=window, weights=ScoringWeights(**form["weights"]),
        include_superseded=form["include_superseded"], reinforce=form["reinforce_now"], mmr_lambda=form.get("mmr"),
        as_of=_micros(form["as_of"], "as of"), **{name: form.get(name) or None for name in pages.ORIGIN_FILTERS})
    ignored: list[str] = []
    if "causal" in form["strategies"]:
        wanted = {"seed": form["seed"] or None, "direction": form["direction"], "max_depth": form["depth"]}
        # Causal parameters travel only if this protocol version has them (tolerant of older daemons).
        supported = set(Recall.__struct_fields__)
        for name, value in wanted.items():
            if name in supported:
                fields[name] = value
            elif (value not in (None, RECALL_DEFAULTS.direction, RECALL_DEFAULTS.max_depth)
                  or name == "seed" and value):
                ignored.append(f"this daemon's protocol has no causal {name} yet: recall used the default")
    return Recall(**{k: v for k, v in fields.items() if v is not None or k == "cue"}), ignored


def _micros(text: str, what: str) -> int | None:
    if not text:
        return None
    try:
        moment = dt.datetime.fromisoformat(text).replace(tzinfo=dt.timezone.utc)
    except ValueError:
        raise InvalidInput(f"{what} is not a date and time: {text!r}") from None
    return int(moment.timestamp() * 1_000_000)


def _float(raw: str | None, what: str, default: float | None = None) -> float | None:
    if raw in (None, ""):
        return default
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise InvalidInput(f"{what} must be a number, got {raw!r}")
    return value


def _int(raw: str | None, what: str, default: int) -> int:
    if raw in (None, ""):
        return default
    try:
        return int(raw)
    except ValueError:
        raise InvalidInput(f"{what} must be a whole number, got {raw!r}") from None


def _form_value(request: Request) -> str:
    """What this session's forms carry (security.Guard put it there), never the token."""
    return request.scope.get("state", {}).get("form_value", "")


def _field(form: dict[str, str], name: str) -> str:
    value = form.get(name)
    if not value:
        raise InvalidInput(f"this action needs the form field {name}")
    return value


def _required(request: Request, name: str) -> str:
    value = request.query_params.get(name)
    if not value:
        raise InvalidInput(f"this page needs ?{name}=")
    return value


def _back(path: str, **params: Any) -> RedirectResponse:
    import html

    return RedirectResponse(html.unescape(url(path, **params)), status_code=303)
