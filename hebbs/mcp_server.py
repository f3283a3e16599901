"""`hebbs mcp`: hebbs as a Model Context Protocol server over stdio, or streamable HTTP (docs/mcp.md).

An MCP-speaking agent (Claude Code, Claude Desktop, any MCP client) starts this process and calls
its tools, or, with `--http`, many agents connect to one such process on loopback; every call goes to the hebbs daemon through `hebbs.AsyncClient` (which starts the daemon
when none answers), never to an engine in this process, so the agent shares its memory with the
CLI, the SDK and every other agent on the machine. Built on the official `mcp` SDK; only this
module and hebbs/mcp_http.py (`--http`) import it, so `import hebbs` and the other commands never pay for it.

Two brains, as everywhere in hebbs: the project vault (from --vault PATH, else the nearest
`.hebbs/` above the working directory) and the global brain (HEBBS_HOME). Recall and prime read
both by default; a write goes to the default brain (the project's, or the global one with
--global) unless the call names one; a call by memory id finds the brain that holds the id.
"""

from __future__ import annotations

import contextvars
import datetime as dt
import functools
import inspect
import operator
import os
import sys
import types
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, Any, Literal, NamedTuple, Union, get_args, get_origin

from typing_extensions import NotRequired, TypedDict

import msgspec
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ToolError, UnexpectedToolError
from mcp.types import CallToolResult, InputRequiredResult, ToolAnnotations
from pydantic import Field, ValidationError

from .recall.brains import BRAINS, GLOBAL, PROJECT
from .client import AsyncClient
from .protocol import (AGENT_HEADER, COMMAND_TYPES, SESSION_HEADER, SHORT_ID_MIN, Inspection, Mcp, Micros, NoteAppend,
                       NoteWrite, _Command)
from .errors import HebbsError, InvalidInput, NotFound, VaultNotInitialized
from .paths import find_project_vault, hebbs_home, resolve_vault
from .schema import ContradictionVerdict, InsightInput, Memory, RecallResult, RecallResults

Brain = Literal["project", "global"]
Brains = Literal["project", "global", "both"]

INSTRUCTIONS = """\
hebbs is your long-term memory on this machine (nothing leaves it). It has two brains: `global`
(the user, across every project: preferences, habits, people) and `project` (this codebase or
notes folder: architecture, decisions, conventions).
- At the start of every conversation, call `prime` once, silently (cue: the user's first request),
  and keep what it returns in mind without reciting it. Read the insights resources too.
- Before answering anything that depends on earlier preferences, decisions or facts, call `recall`.
  If it says `abstained`, or nothing relevant comes back, say you do not know rather than guess.
  A result with `current: false` is an older value (`newer` names the memory that changed it):
  answer from the newer one. Results with `conflicts_with` disagree: say so rather than pick one.
- When the user states a preference, corrects you, makes a decision or tells you a new fact, call
  `remember` (one self-contained fact per call). A preference of the user goes to the global brain.
- After answering from recalled memories, call `used` once with all the ids your answer relied on
  (only those).
- When a memory is wrong, `revise` it; when the user asks you to forget, `forget` it.
- `get` reads one memory in full by id, and `source` the note section it came from; `recent` lists
  the latest memories; `index` learns or refreshes a notes folder; `status` says what each brain holds.
- A page worth keeping for the user (a runbook, a decision record) goes in a note: `note_write` (a note
  that exists: `note_read` first, keep what the user wrote, pass its version) or `note_append`.
- Never store secrets (passwords, API keys, tokens, private keys) or guesses.
"""

_encoder = msgspec.json.Encoder()


class InsightIn(TypedDict):
    content: Annotated[str, Field(description="the lesson, one sentence that stands on its own")]
    confidence: Annotated[float, Field(ge=0, le=1, description="how sure you are, 0..1")]
    source_memory_ids: Annotated[list[str], Field(description="ids of the cluster's memories that support it")]
    tags: NotRequired[list[str]]


class VerdictIn(TypedDict):
    pending_id: str
    verdict: Annotated[Literal["contradiction", "revision", "neutral"],
                       Field(description="contradiction: both stand and conflict; revision: the newer replaces "
                                         "the older; neutral: no real conflict")]
    note: NotRequired[Annotated[str, Field(description="why, in a few words")]]


class HebbsTools:
    """The daemon clients behind the tools: one per brain, made on first use."""

    def __init__(self, home: os.PathLike | str | None = None, vault: os.PathLike | str | None = None,
                 global_: bool = False, cwd: os.PathLike | str | None = None) -> None:
        self.home = hebbs_home(home)
        self.vault = vault
        self.cwd = Path(cwd) if cwd is not None else Path.cwd()
        self.default: Brain = GLOBAL if global_ else PROJECT
        self._clients: dict[str, AsyncClient] = {}
        # Which brain prepared each reflection session, so its commit goes back to the same vault.
        self._sessions: dict[str, str] = {}

    def client(self, brain: str | None = None) -> AsyncClient:
        brain = brain or self.default
        if brain not in BRAINS:
            raise ToolError(f"brain must be one of {', '.join(BRAINS)}, got {brain!r}")
        if brain not in self._clients:
            if brain == GLOBAL:
                self._clients[brain] = AsyncClient(global_=True, home=self.home)
            else:
                self._clients[brain] = AsyncClient(vault=self.vault, home=self.home, cwd=self.cwd)
        return self._clients[brain]

    def brains_for(self, brain: str | None) -> list[str]:
        """The brains a read asks for: both by default, the project's first."""
        if brain in (None, "both"):
            return [PROJECT, GLOBAL]
        return [brain]

    def has_project(self) -> bool:
        """Whether there is a project brain: --vault, or a `.hebbs/` above the working directory now (the
        client looks for it again on every read over both brains)."""
        return self.vault is not None or find_project_vault(self.cwd, self.home) is not None

    def answering(self, wanted: list[str]) -> str:
        """The brain whose results come back unlabelled from a read of `wanted`: a read over both
        brains is a merged, labelled list unless the client skipped the project brain for want of a vault."""
        return GLOBAL if len(wanted) > 1 and not self.has_project() else wanted[0]

    async def on_brain_holding(self, brain: str | None, call: Callable[[AsyncClient], Awaitable[Any]],
                               found: Callable[[Any], bool] = lambda result: True) -> Any:
        """call() on the named brain, or else on the first brain (default first) that knows the id:
        where it does not raise NotFound and its result is `found`."""
        if brain is not None:
            return await call(self.client(brain))
        order = [self.default, *(b for b in BRAINS if b != self.default)]
        missing: HebbsError | None = None
        answers: list[Any] = []
        for name in order:
            try:
                answers.append(await call(self.client(name)))
            except (NotFound, VaultNotInitialized) as exc:
                # "No such memory" says more than "no such brain": keep it when any brain said it.
                if missing is None or (isinstance(exc, NotFound) and not isinstance(missing, NotFound)):
                    missing = exc
                continue
            if found(answers[-1]):
                return answers[-1]
        if answers:
            return answers[0]
        assert missing is not None
        raise missing

    async def holder(self, memory_id: str) -> tuple[str, str]:
        """(the brain holding the memory, its full id), the default brain first; changes nothing."""
        async def look(client: AsyncClient) -> tuple[str, str]:
            return _brain_of(self, client), (await client.get(memory_id)).id

        return await self.on_brain_holding(None, look)

    async def close(self) -> None:
        for client in self._clients.values():
            await client.close()


# Rendering: compact JSON an agent reads easily, with times as ISO 8601 -----------------------------

def _iso(micros: int) -> str:
    return dt.datetime.fromtimestamp(micros / 1_000_000, dt.timezone.utc).isoformat(timespec="seconds")


def memory_view(memory: Memory, brain: str | None = None) -> dict[str, Any]:
    view: dict[str, Any] = {"id": memory.id, "content": memory.content, "importance": memory.importance}
    if memory.entity_id:
        view["entity_id"] = memory.entity_id
    # Who stored it, when known: in a team's vault an agent weighs a teammate's note as theirs.
    for name in ("author", "agent", "session"):
        if getattr(memory, name):
            view[name] = getattr(memory, name)
    if memory.context:
        view["context"] = memory.context
    if memory.kind.value != "EPISODE":
        view["kind"] = memory.kind.value
    view["created_at"] = _iso(memory.created_at)
    if memory.source is not None:
        view["source"] = memory.source.file_path
    if brain is not None:
        view["brain"] = brain
    return view


def result_view(result: RecallResult, brain: str | None) -> dict[str, Any]:
    label = result.vault if isinstance(result.vault, str) else brain
    view = memory_view(result.memory, label)
    view["score"] = round(result.score, 3)
    if result.confidence is not None:  # absent without a cue
        view["confidence"] = round(result.confidence, 3)
    view["found_by"] = result.strategies
    if not result.current:
        # Said where an agent reads the result: an older value is history, not the answer.
        view["current"] = False
        view["newer"] = result.newer
    if result.conflicts_with:
        view["conflicts_with"] = result.conflicts_with
    if result.marks:
        view["marks"] = result.marks
    return view


def results_view(found: RecallResults, brain: str | None) -> dict[str, Any]:
    view: dict[str, Any] = {"results": [result_view(r, brain) for r in found.results]}
    if found.confidence is not None:
        view["abstained"] = found.abstained
    if found.notes:
        view["notes"] = found.notes
    return view


def dump(value: Any) -> str:
    return _encoder.encode(value).decode()


def _tool_error(exc: HebbsError, tools: HebbsTools) -> ToolError:
    if isinstance(exc, VaultNotInitialized) and not tools.has_project():
        # The client's message names SDK arguments (vault=PATH, global_=True); say what works from here.
        return ToolError(f"no project vault in {tools.cwd} or any folder above it; pass brain='global' to use the "
                         f"global brain, or run `hebbs init` in the project, or start `hebbs mcp --vault PATH` "
                         f"[{exc.status_code}]")
    return ToolError(f"{exc} [{exc.status_code}]")


def _invalid_arguments(exc: ValidationError) -> str:
    """pydantic's report on a tool's arguments as one line in hebbs' own form."""
    problems = [f"{'.'.join(map(str, error['loc']))}: {error['msg'][:1].lower()}{error['msg'][1:]}"
                for error in exc.errors()]
    return f"{'; '.join(problems)} [{InvalidInput.status_code}]"


# The agent and session the HTTP request of the tool call running names (over stdio: none, and the
# server's $HEBBS_AGENT and $HEBBS_SESSION apply): one server over HTTP serves many agents.
_CALLER: contextvars.ContextVar[tuple[tuple[str, str], ...]] = contextvars.ContextVar("hebbs_mcp_caller", default=())


def _caller(context: Context[Any, Any] | None) -> tuple[tuple[str, str], ...]:
    """The agent and session the call's HTTP request names in its headers."""
    try:
        headers = getattr(context.request_context.request, "headers", None) if context is not None else None
    except ValueError:  # no request: a call from inside the server
        headers = None
    if headers is None:
        return ()
    named = (("agent", headers.get(AGENT_HEADER)), ("session", headers.get(SESSION_HEADER)))
    return tuple((name, value) for name, value in named if value)


class _Server(MCPServer):
    async def call_tool(self, name: str, arguments: dict[str, Any],
                        context: Context[Any, Any] | None = None) -> CallToolResult | InputRequiredResult:
        named = _CALLER.set(_caller(context))
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            # The SDK refuses arguments that do not fit a tool's schema with pydantic's multi-line text
            # and a link to its docs; an agent reads hebbs' errors better.
            if isinstance(exc, UnexpectedToolError) or not isinstance(exc.__cause__, ValidationError):
                raise
            raise ToolError(f"Error executing tool {name}: {_invalid_arguments(exc.__cause__)}") from exc.__cause__
        finally:
            _CALLER.reset(named)


# The tools -------------------------------------------------------------------------------------
#
# Each tool is built from a command's declaration (hebbs/protocol.py, `mcp=Mcp(...)`): its text for
# agents, its parameters (the Struct's fields it exposes, with their types and defaults, and the
# agent's text for each), the brain it talks to (ROUTES) and how its answer is shaped (VIEWS). It
# sends the command through the client's typed method, so what the SDK accepts the tool accepts.

BRAIN_ARGS: dict[str, tuple[Any, Any]] = {
    "write": (Annotated[Brain | None, Field(description="global: about the user, across projects; project: about "
                                                         "this project (default: the server's default brain)")], None),
    "read": (Annotated[Brains, Field(description="project, global, or both (default): one merged, labelled list")],
             "both"),
    "holder": (Annotated[Brain | None, Field(description="the brain holding the id, as recall labelled it "
                                                          "(default: whichever brain has it)")], None),
    "session": (Annotated[Brain | None, Field(description="default: the brain the session was prepared on")], None),
}
BRAIN_ARGS["each"] = BRAIN_ARGS["grouped"] = BRAIN_ARGS["holder"]
ID_TEXT = f"the memory's id, or its last {SHORT_ID_MIN} or more characters"
# The agent sends JSON objects where the daemon's Structs are: their shape as pydantic reads it.
AGENT_TYPES: dict[Any, Any] = {InsightInput: InsightIn, ContradictionVerdict: VerdictIn}


class Tool(NamedTuple):
    """An MCP tool as built from a declaration."""

    name: str
    command: type[_Command]
    entry: Mcp
    parameters: list[inspect.Parameter]
    # Which field each parameter fills.
    fills: dict[str, str]

    @property
    def hints(self) -> ToolAnnotations:
        read_only = self.command.spec.retryable if self.entry.read_only is None else self.entry.read_only
        return ToolAnnotations(read_only_hint=read_only, destructive_hint=None if read_only else self.entry.destructive)


def declared_tools() -> list[Tool]:
    """Every tool the declarations ask for, in their order."""
    return [_tool(command, entry) for command in COMMAND_TYPES.values() for entry in command.spec.tools]


def _tool(command: type[_Command], entry: Mcp) -> Tool:
    fields = {f.name: f for f in msgspec.structs.fields(command)}
    parameters, fills = [], {}
    for name, arg in entry.args.items():
        field = fields[arg.field or name]
        fills[name] = field.name
        text = arg.text or (ID_TEXT if name == "id" else _description(field.type))
        constraints = {k: v for k, v in (("ge", arg.ge), ("le", arg.le), ("min_length", arg.min_length)) if v is not None}
        if field.name == "time_range":  # one side of it, as ISO 8601 text
            annotation, default = str | None, None
        else:
            annotation = _agent_type(field.type, required=arg.required)
            default = inspect.Parameter.empty if arg.required or field.required else (
                field.default if field.default is not msgspec.NODEFAULT else field.default_factory())
        parameters.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default,
                                            annotation=Annotated[annotation, Field(description=text, **constraints)]))
    if entry.route in BRAIN_ARGS:
        annotation, default = BRAIN_ARGS[entry.route]
        parameters.append(inspect.Parameter("brain", inspect.Parameter.KEYWORD_ONLY, default=default,
                                            annotation=annotation))
    name = entry.tool or command.spec.client_method or command.tag()
    return Tool(name, command, entry, parameters, fills)


def _description(type_: Any) -> str | None:
    return next((m.description for m in get_args(type_)[1:] if isinstance(m, msgspec.Meta)), None) \
        if get_origin(type_) is Annotated else None


def _agent_type(type_: Any, required: bool = False) -> Any:
    """A field's type as the agent gives it: msgspec's constraints left to the daemon (which names the
    field when one fails), a time as ISO 8601 text, a Struct as the JSON object pydantic checks."""
    if type_ == Micros:
        return str
    if get_origin(type_) is Annotated and any(isinstance(m, msgspec.Meta) and (m.extra or {}).get("micros")
                                              for m in get_args(type_)[1:]):
        return str | None  # a point in time (AsOf, PointInTime), as ISO 8601 text
    if get_origin(type_) is Annotated:
        return _agent_type(get_args(type_)[0], required)
    if get_origin(type_) in (Union, types.UnionType):
        members = [_agent_type(t) for t in get_args(type_) if not (required and t is type(None))]
        return functools.reduce(operator.or_, members)
    if get_origin(type_) is list:
        return list[_agent_type(get_args(type_)[0])]  # type: ignore[misc]
    return AGENT_TYPES.get(type_, type_)


def _method_names(command: type[_Command]) -> dict[str, str]:
    """{field: the typed method's parameter} where they differ (the declaration's `params`)."""
    fields = [f.name for f in msgspec.structs.fields(command)]
    return {field: name for name, field, _ in command.spec.parameters(fields) if name != field}


class Call(NamedTuple):
    """One call of a tool: what the agent gave, and how to send it."""

    tools: HebbsTools
    tool: Tool
    brain: str | None
    values: dict[str, Any]

    async def send(self, client: AsyncClient, **extra: Any) -> Any:
        """The command, through the client's typed method, with these values (and `extra`)."""
        command = self.tool.command
        method = getattr(client, command.spec.client_method or command.tag())
        renamed = _method_names(command)
        return await method(**{renamed.get(field, field): value for field, value in {**self.values, **extra}.items()})


async def _write(call: Call) -> tuple[Any, str]:
    name = call.brain or call.tools.default
    return await call.send(call.tools.client(name)), name


async def _session(call: Call) -> tuple[Any, str]:
    tools = call.tools
    name = call.brain or tools._sessions.get(call.values["session_id"]) or tools.default
    return await call.send(tools.client(name)), name


async def _read(call: Call) -> tuple[Any, str]:
    tools = call.tools
    wanted = tools.brains_for(call.brain)
    return await call.send(tools.client(wanted[0]), brains=wanted), tools.answering(wanted)


async def _holder(call: Call) -> tuple[Any, str]:
    async def send(client: AsyncClient) -> tuple[Any, str]:
        return await call.send(client), _brain_of(call.tools, client)

    return await call.tools.on_brain_holding(call.brain, send)


async def _each(call: Call) -> tuple[Any, None]:
    """The command once per id, each on the brain holding it; the answers (counts) summed. A full id
    that a brain does not hold changes nothing there (a count of 0): the next brain is tried."""
    (field, ids), = call.values.items()
    total = 0
    for one in ids:
        total += await call.tools.on_brain_holding(call.brain, lambda client: call.send(client, **{field: [one]}),
                                                   found=lambda done: done > 0)
    return total, None


async def _grouped(call: Call) -> tuple[Any, None]:
    """Every id placed in its brain before any is sent, so an unknown id changes nothing; then one call
    per brain (memories used together get linked: CO_ACTIVATED)."""
    tools = call.tools
    (field, ids), = call.values.items()
    groups: dict[str, list[str]] = {}
    if call.brain is not None:
        groups[call.brain] = ids
    else:
        for memory_id in ids:
            name, full_id = await tools.holder(memory_id)
            groups.setdefault(name, []).append(full_id)
    return [(name, await call.send(tools.client(name), **{field: group})) for name, group in groups.items()], None


async def _index(call: Call) -> tuple[Any, None]:
    tools, path = call.tools, call.values["path"]
    if path is None:
        if not tools.has_project():
            raise ToolError(f"no project vault in {tools.cwd} or any folder above it, so no notes folder to "
                            f"refresh: give path, the notes folder to index [{InvalidInput.status_code}]")
        return await call.send(tools.client(PROJECT)), None
    # The request names its folder itself: any client sends it.
    return await call.send(tools.client(GLOBAL), path=tools.cwd / Path(path).expanduser()), None


async def _status(call: Call) -> tuple[Any, None]:
    """The daemon's state (asked without a vault), then each brain's statistics."""
    tools = call.tools
    daemon = await call.send(tools.client(GLOBAL), vault=False)
    view: dict[str, Any] = {"daemon": {"version": daemon.version, "pid": daemon.pid,
                                       "uptime_s": round(daemon.uptime_s, 1), "model": daemon.model,
                                       "open_vaults": len(daemon.open_vaults)}, "brains": {}}
    for name in BRAINS:
        try:
            stats = (await call.send(tools.client(name))).vault
        except VaultNotInitialized as exc:
            view["brains"][name] = {"missing": str(exc)}
            continue
        view["brains"][name] = (msgspec.to_builtins(stats) if stats is not None
                                else {"missing": str(tools.client(name)._vault_error)})
    return view, None


ROUTES: dict[str, Callable[[Call], Awaitable[tuple[Any, str | None]]]] = {
    "write": _write, "session": _session, "read": _read, "holder": _holder, "each": _each, "grouped": _grouped,
    "index": _index, "status": _status}


def _remembered(memory: Memory, brain: str, tools: HebbsTools) -> dict[str, Any]:
    view = memory_view(memory, brain)
    if memory.consolidated:
        # Said before: this is the existing memory, strengthened, not a new one (docs/consolidation.md).
        view["consolidated"] = True
    return view


def _recent(found: RecallResults, brain: str, tools: HebbsTools) -> dict[str, Any]:
    found.results.sort(key=lambda r: r.memory.created_at, reverse=True)
    view = results_view(found, brain)
    for result in view["results"]:
        del result["score"], result["found_by"]  # newest first is the order; a score says nothing here
    return view


def _section(section: Any, brain: str, tools: HebbsTools) -> dict[str, Any]:
    view = msgspec.to_builtins(section)
    view["indexed_at"] = _iso(view["indexed_at"])
    if view.get("file_removed_at") is not None:
        view["file_removed_at"] = _iso(view["file_removed_at"])
    return {**view, "brain": brain}


def _prepared(prepared: Any, brain: str, tools: HebbsTools) -> dict[str, Any]:
    # The commit goes back to the brain that prepared the session.
    tools._sessions[prepared.session_id] = brain
    return {**msgspec.to_builtins(prepared), "brain": brain}


def _used(done: list[tuple[str, list[Memory]]], brain: None, tools: HebbsTools) -> dict[str, Any]:
    return {"used": [{"id": m.id, "content": m.content, "used": m.access_count, "brain": name}
                     for name, memories in done for m in memories]}


VIEWS: dict[str, Callable[[Any, Any, HebbsTools], Any]] = {
    "data": lambda answer, brain, tools: msgspec.to_builtins(answer),
    "memory": _remembered,
    "results": lambda found, brain, tools: results_view(found, brain),
    "recent": _recent,
    "inspection": lambda seen, brain, tools: inspection_view(seen, brain),
    "source": _section,
    "session": _prepared,
    "forgotten": lambda total, brain, tools: {"forgotten": total},
    "used": _used,
    "insights": lambda found, brain, tools: [{**memory_view(i.memory), "confidence": i.confidence, "tags": i.tags,
                                              "source_ids": i.source_ids} for i in found],
}


def _function(tool: Tool, tools: HebbsTools) -> Callable[..., Awaitable[str]]:
    """The tool as registered: its signature the declared parameters (the SDK builds the agent's schema from
    it), its HebbsErrors tool errors the agent can read."""
    route, view = ROUTES[tool.entry.route], VIEWS[tool.entry.view]

    async def run(brain: str | None = None, ctx: Context[Any, Any] | None = None, **given: Any) -> str:
        values: dict[str, Any] = dict(tool.entry.fixed)
        for name, value in given.items():
            field = tool.fills[name]
            values[field] = (*values.get(field, ()), value) if field == "time_range" else value
        # Only a note's author: on recall and prime `author` is a filter, which must stay unset unless asked.
        if tool.command in (NoteWrite, NoteAppend) and values.get("author") is None:
            # A note says who wrote it: the agent's own name, else the name its MCP client gave at initialize.
            values["author"] = _client_name(ctx)
        if values.get("time_range") == (None, None):
            values["time_range"] = None
        if tool.command.spec.scoped:
            for field, value in _CALLER.get():
                values.setdefault(field, value)
        try:
            answer, label = await route(Call(tools, tool, brain, values))
            return dump(view(answer, label, tools))
        except HebbsError as exc:
            raise _tool_error(exc, tools) from None

    run.__name__ = tool.name
    run.__doc__ = tool.entry.text
    run.__signature__ = inspect.Signature(tool.parameters, return_annotation=str)  # type: ignore[attr-defined]
    return run


def _client_name(ctx: Context[Any, Any] | None) -> str | None:
    """The name the MCP client gave in its initialize request (clientInfo.name), if any."""
    params = ctx.session.client_params if ctx is not None else None
    return params.client_info.name if params is not None and params.client_info.name else None


def build_server(tools: HebbsTools) -> MCPServer:
    server = _Server(name="hebbs", version=_version(), instructions=INSTRUCTIONS,
                     description="Local long-term memory for agents: remember, recall, reflect.",
                     log_level="WARNING")
    for tool in declared_tools():
        server.add_tool(_function(tool, tools), name=tool.name, description=tool.entry.text,
                        structured_output=False, annotations=tool.hints)
    for name in BRAINS:
        _register_resources(server, tools, name)
    return server


def inspection_view(seen: Inspection, brain: str) -> dict[str, Any]:
    memory = seen.memory
    view = memory_view(memory, brain)
    view["used"] = memory.access_count
    if memory.superseded_by:
        view["superseded_by"] = memory.superseded_by
    if seen.history:
        view["earlier_versions"] = len(seen.history)
    view["edges"] = [{"type": e.edge_type, "to" if e.source == memory.id else "from":
                      e.target if e.source == memory.id else e.source} for e in seen.edges]
    return view


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("hebbs")
    except PackageNotFoundError:
        return "0+unknown"


def _brain_of(tools: HebbsTools, client: AsyncClient) -> str:
    return next(name for name, c in tools._clients.items() if c is client)


def _register_resources(server: MCPServer, tools: HebbsTools, brain: str) -> None:
    """The declared resources of one brain (`Mcp(resource=...)` in hebbs/protocol.py)."""
    who = "the user, across projects" if brain == GLOBAL else "this project"
    for command in COMMAND_TYPES.values():
        for entry in command.spec.resources:
            server.resource(f"hebbs://{brain}/{entry.resource}", name=f"{brain}-{entry.resource}",
                            mime_type="application/json",
                            description=entry.text.format(brain=brain, who=who))(_reader(tools, brain, command, entry))


def _reader(tools: HebbsTools, brain: str, command: type[_Command], entry: Mcp) -> Callable[[], Awaitable[str]]:
    async def read() -> str:
        try:
            answer = await getattr(tools.client(brain), entry.tool or command.spec.client_method or command.tag())()
        except HebbsError as exc:
            raise ResourceError(f"{exc} [{exc.status_code}]") from None
        return dump(VIEWS[entry.view](answer, None, tools))

    return read


def checked_tools(home: os.PathLike | str | None, vault: os.PathLike | str | None, global_: bool) -> HebbsTools:
    tools = HebbsTools(home=home, vault=vault, global_=global_)
    if tools.home.exists() and not tools.home.is_dir():
        # Checked here, not at the first tool call: a wrong --home in an agent's config fails at start.
        raise InvalidInput(f"HEBBS_HOME {tools.home} is not a directory")
    if vault is not None:
        # A wrong --vault in an agent's config should fail at start, where its log shows it.
        resolve_vault(vault, False, tools.home)
    return tools


def serve(home: os.PathLike | str | None = None, vault: os.PathLike | str | None = None, global_: bool = False) -> None:
    """Run the server on stdin/stdout until the client closes them."""
    import anyio

    tools = checked_tools(home, vault, global_)
    server = build_server(tools)

    async def run() -> None:
        try:
            await _run_stdio(server)
        finally:
            await tools.close()

    anyio.run(run)


class _AnsweredLines:
    """stdin's lines for the SDK's stdio transport, less those it could not parse: the SDK drops such a
    line without a reply (a request nesting deeper than its parser's limit, or holding `\\ud800`), so
    its client waits forever. Each gets a JSON-RPC error here, sent through the server's own writer."""

    def __init__(self, lines: Any) -> None:
        import anyio

        self.lines = lines
        self.write: Any = None
        self.ready = anyio.Event()

    def __aiter__(self) -> Any:
        return self._filtered()

    async def _filtered(self) -> Any:
        import json

        import mcp_types as types
        from mcp.shared.message import SessionMessage

        async for line in self.lines:
            try:
                types.jsonrpc_message_adapter.validate_json(line, by_name=False)
            except Exception as exc:  # noqa: BLE001 - whatever the SDK's parser refuses is answered
                try:
                    raw = json.loads(line)
                    request_id = raw.get("id") if isinstance(raw, dict) else None
                    code, why = types.INVALID_REQUEST, "invalid request"
                except (ValueError, RecursionError):
                    request_id, code, why = None, types.PARSE_ERROR, "parse error"
                if not (isinstance(request_id, str) or (isinstance(request_id, int) and not isinstance(request_id, bool))):
                    request_id = None
                if isinstance(request_id, str):
                    request_id = request_id.encode("utf-8", "replace").decode("utf-8")
                errors = exc.errors() if hasattr(exc, "errors") else []
                detail = errors[0].get("msg") if errors else str(exc) or type(exc).__name__
                message = f"{why}: {str(detail)[:200]}"
                message = message.encode("utf-8", "replace").decode("utf-8")
                error = types.JSONRPCError(jsonrpc="2.0", id=request_id,
                                           error=types.ErrorData(code=code, message=message))
                await self.ready.wait()
                await self.write.send(SessionMessage(error))
                continue
            yield line


async def _run_stdio(server: MCPServer) -> None:
    """server.run_stdio_async(), with every line answered (_AnsweredLines)."""
    import io

    import anyio
    from mcp.server.stdio import stdio_server

    # The SDK's own reading of fd 0, less its claim: the process reads nothing else from stdin.
    stdin = _AnsweredLines(anyio.wrap_file(io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8", errors="replace")))
    lowlevel = server._lowlevel_server
    async with stdio_server(stdin=stdin) as (read_stream, write_stream):  # type: ignore[arg-type]
        stdin.write = write_stream
        stdin.ready.set()
        await lowlevel.run(read_stream, write_stream, lowlevel.create_initialization_options())
