"""`hebbs mcp`: hebbs as a Model Context Protocol server over stdio (docs/mcp.md).

An MCP-speaking agent (Claude Code, Claude Desktop, any MCP client) starts this process and calls
its tools; every call goes to the hebbs daemon through `hebbs.AsyncClient` (which starts the daemon
when none answers), never to an engine in this process, so the agent shares its memory with the
CLI, the SDK and every other agent on the machine. Built on the official `mcp` SDK; only this
module imports it, so `import hebbs` and the other commands never pay for it.

Two brains, as everywhere in hebbs: the project vault (from --vault PATH, else the nearest
`.hebbs/` above the working directory) and the global brain (HEBBS_HOME). Recall and prime read
both by default; a write goes to the default brain (the project's, or the global one with
--global) unless the call names one; a call by memory id finds the brain that holds the id.
"""

from __future__ import annotations

import datetime as dt
import functools
import os
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, Any, Literal, NamedTuple, TypeVar

from typing_extensions import NotRequired, TypedDict

import msgspec
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ToolError, UnexpectedToolError
from mcp.types import CallToolResult, InputRequiredResult, ToolAnnotations
from pydantic import Field, ValidationError

from .recall.brains import BRAINS, GLOBAL, PROJECT
from .client import AsyncClient
from .protocol import (SHORT_ID_MIN, ContradictionCommit, ContradictionPrepare, Forget, Index, Inspect, Inspection,
                       Prime, Recall, ReflectCommit, ReflectPrepare, Reinforce, Remember, Revise, ShowSource, Status)
from .errors import HebbsError, InvalidInput, NotFound, VaultNotInitialized
from .paths import find_project_vault, hebbs_home, resolve_vault
from .schema import Memory, RecallResult, RecallResults

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
- When the user states a preference, corrects you, makes a decision or tells you a new fact, call
  `remember` (one self-contained fact per call). A preference of the user goes to the global brain.
- After answering from recalled memories, call `used` once with all the ids your answer relied on
  (only those).
- When a memory is wrong, `revise` it; when the user asks you to forget, `forget` it.
- `get` reads one memory in full by id, and `source` the note section it came from; `recent` lists
  the latest memories; `index` learns or refreshes a notes folder; `status` says what each brain holds.
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


class _Server(MCPServer):
    async def call_tool(self, name: str, arguments: dict[str, Any],
                        context: Context[Any, Any] | None = None) -> CallToolResult | InputRequiredResult:
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            # The SDK refuses arguments that do not fit a tool's schema with pydantic's multi-line text
            # and a link to its docs; an agent reads hebbs' errors better.
            if isinstance(exc, UnexpectedToolError) or not isinstance(exc.__cause__, ValidationError):
                raise
            raise ToolError(f"Error executing tool {name}: {_invalid_arguments(exc.__cause__)}") from exc.__cause__


# The tools -------------------------------------------------------------------------------------
#
# Each tool is a method of Toolbox marked with @tool: the protocol command it sends (`sends`), whose
# declaration carries the tool's text for agents (when to call it) and whose Struct's defaults the
# tool's parameters keep (tests/test_parity.py checks them), and its hints. build_server registers
# every marked method.

BrainArg = Annotated[Brain | None, Field(description="global: about the user, across projects; project: about "
                                                      "this project (default: the server's default brain)")]
IdBrainArg = Annotated[Brain | None, Field(description="the brain holding the id, as recall labelled it "
                                                        "(default: whichever brain has it)")]
ReadBrainArg = Annotated[Brains, Field(description="project, global, or both (default): one merged, labelled list")]
IdArg = Annotated[str, Field(description=f"the memory's id, or its last {SHORT_ID_MIN} or more characters")]
SinceArg = Annotated[str | None, Field(description="only memories created at or after this time, ISO 8601 "
                                                    "(e.g. 2026-03-01 or 2026-03-01T09:00:00Z)")]
UntilArg = Annotated[str | None, Field(description="only memories created before this time, ISO 8601")]


class ToolSpec(NamedTuple):
    description: str
    sends: type | None
    hints: dict[str, bool]


def tool(description: str | None = None, *, sends: type | None = None, **hints: bool) -> Callable[[F], F]:
    """Mark a Toolbox method as an MCP tool. Its description is the agent's text its command declares
    (hebbs/protocol.py, `mcp=`), unless it gives its own (a second tool over the same command)."""
    def mark(fn: F) -> F:
        text = description or (sends.spec.mcp if sends is not None else None)  # type: ignore[attr-defined]
        assert text, f"the MCP tool {fn.__name__} has no description"
        fn.mcp_tool = ToolSpec(text, sends, hints)  # type: ignore[attr-defined]
        return fn
    return mark


F = TypeVar("F", bound=Callable[..., Any])


class Toolbox:
    """The tools an agent calls, over the daemon clients of HebbsTools."""

    def __init__(self, tools: HebbsTools) -> None:
        self.tools = tools

    @classmethod
    def specs(cls) -> dict[str, ToolSpec]:
        return {name: fn.mcp_tool for name, fn in vars(cls).items() if hasattr(fn, "mcp_tool")}

    @tool(sends=Remember, read_only=False, destructive=False)
    async def remember(
        self,
        content: Annotated[str, Field(description="the fact, one self-contained sentence")],
        importance: Annotated[float, Field(ge=0, le=1, description="how much it matters, 0..1")] = 0.5,
        entity_id: Annotated[str | None, Field(description="who or what it is about: 'user', a person, a service")]
        = None,
        context: Annotated[dict[str, Any] | None, Field(
            description='e.g. {"type": "preference" | "rule" | "decision" | "fact" | "status"}')] = None,
        brain: BrainArg = None,
    ) -> str:
        tools = self.tools
        memory = await tools.client(brain).remember(content, importance=importance, entity_id=entity_id,
                                                    context=context)
        view = memory_view(memory, brain or tools.default)
        if memory.consolidated:
            # Said before: this is the existing memory, strengthened, not a new one (docs/consolidation.md).
            view["consolidated"] = True
        return dump(view)

    @tool(sends=Recall, read_only=True)
    async def recall(
        self,
        cue: Annotated[str, Field(description="what you are looking for, in words")],
        top_k: Annotated[int, Field(ge=1, le=100, description="how many results")] = 10,
        entity_id: Annotated[str | None, Field(description="only memories about this entity")] = None,
        brain: ReadBrainArg = "both",
        since: SinceArg = None,
        until: UntilArg = None,
        strategies: Annotated[list[str] | None, Field(
            description="how to search: similarity (meaning), lexical (exact words and identifiers), temporal "
                        "(newest first), causal (along cause edges), analogical, associative (used together); "
                        "default: lexical and similarity fused, which suits nearly every question")] = None,
    ) -> str:
        tools = self.tools
        wanted = tools.brains_for(brain)
        window = None if since is None and until is None else (since, until)
        found = await tools.client(wanted[0]).recall(cue, top_k=top_k, entity_id=entity_id, time_range=window,
                                                     strategies=strategies,
                                                     brains=wanted if len(wanted) > 1 else None)
        return dump(results_view(found, tools.answering(wanted)))

    @tool("List the most recent memories, newest first, from both brains by default. Call it when the user "
          "asks what happened lately or what you stored recently, or to review a time span (since, until) "
          "or one entity's latest memories. It does not judge relevance: use recall for a question.",
          sends=Recall, read_only=True)
    async def recent(
        self,
        limit: Annotated[int, Field(ge=1, le=100, description="how many memories")] = 10,
        entity_id: Annotated[str | None, Field(description="only memories about this entity")] = None,
        since: SinceArg = None,
        until: UntilArg = None,
        brain: ReadBrainArg = "both",
    ) -> str:
        tools = self.tools
        wanted = tools.brains_for(brain)
        window = None if since is None and until is None else (since, until)
        found = await tools.client(wanted[0]).recall(None, strategies=["temporal"], top_k=limit, entity_id=entity_id,
                                                     time_range=window, brains=wanted if len(wanted) > 1 else None)
        found.results.sort(key=lambda r: r.memory.created_at, reverse=True)
        view = results_view(found, tools.answering(wanted))
        for result in view["results"]:
            del result["score"], result["found_by"]  # newest first is the order; a score says nothing here
        return dump(view)

    @tool(sends=Inspect, read_only=True)
    async def get(self, id: IdArg, brain: IdBrainArg = None) -> str:
        async def inspect_in(client: AsyncClient) -> dict[str, Any]:
            seen = await client.inspect(id)
            return inspection_view(seen, _brain_of(self.tools, client))

        return dump(await self.tools.on_brain_holding(brain, inspect_in))

    @tool(sends=ShowSource, read_only=True)
    async def source(self, id: IdArg, brain: IdBrainArg = None) -> str:
        async def source_in(client: AsyncClient) -> dict[str, Any]:
            section = msgspec.to_builtins(await client.source(id))
            section["indexed_at"] = _iso(section["indexed_at"])
            if section.get("file_removed_at") is not None:
                section["file_removed_at"] = _iso(section["file_removed_at"])
            return {**section, "brain": _brain_of(self.tools, client)}

        return dump(await self.tools.on_brain_holding(brain, source_in))

    @tool(sends=Index, read_only=False, destructive=False)
    async def index(
        self,
        path: Annotated[str | None, Field(description="the notes folder, absolute or relative to the server's "
                                                      "working directory (default: this project's)")] = None,
    ) -> str:
        tools = self.tools
        if path is None:
            if not tools.has_project():
                raise ToolError(f"no project vault in {tools.cwd} or any folder above it, so no notes folder to "
                                f"refresh: give path, the notes folder to index [{InvalidInput.status_code}]")
            summary = await tools.client(PROJECT).index()
        else:
            # The request names its folder itself: any client sends it.
            summary = await tools.client(GLOBAL).index(tools.cwd / Path(path).expanduser())
        return dump(msgspec.to_builtins(summary))

    @tool(sends=Status, read_only=True)
    async def status(self) -> str:
        tools = self.tools
        daemon = await tools.client(GLOBAL).status(vault=False)
        view: dict[str, Any] = {"daemon": {"version": daemon.version, "pid": daemon.pid,
                                           "uptime_s": round(daemon.uptime_s, 1), "model": daemon.model,
                                           "open_vaults": len(daemon.open_vaults)}, "brains": {}}
        for name in BRAINS:
            try:
                stats = (await tools.client(name).status()).vault
            except VaultNotInitialized as exc:
                view["brains"][name] = {"missing": str(exc)}
                continue
            if stats is None:
                view["brains"][name] = {"missing": str(tools.client(name)._vault_error)}
            else:
                view["brains"][name] = msgspec.to_builtins(stats)
        return dump(view)

    @tool(sends=Prime, read_only=True)
    async def prime(
        self,
        cue: Annotated[str | None, Field(description="what the conversation is about")] = None,
        entity_id: Annotated[str | None, Field(description="only this entity's memories, e.g. 'user'")] = None,
        max_memories: Annotated[int, Field(ge=1, le=1000, description="how many memories in all")] = 20,
        brain: ReadBrainArg = "both",
    ) -> str:
        tools = self.tools
        wanted = tools.brains_for(brain)
        found = await tools.client(wanted[0]).prime(entity_id, cue, max_memories, brains=wanted)
        return dump(results_view(found, tools.answering(wanted)))

    @tool(sends=Revise, read_only=False, destructive=False)
    async def revise(
        self,
        id: IdArg,
        content: Annotated[str | None, Field(description="the corrected text")] = None,
        importance: Annotated[float | None, Field(ge=0, le=1)] = None,
        context: Annotated[dict[str, Any] | None, Field(description="replaces the context")] = None,
        brain: IdBrainArg = None,
    ) -> str:
        async def revise_in(client: AsyncClient) -> dict[str, Any]:
            memory = await client.revise(id, content=content, importance=importance, context=context)
            return memory_view(memory, _brain_of(self.tools, client))

        return dump(await self.tools.on_brain_holding(brain, revise_in))

    @tool(sends=Forget, read_only=False, destructive=True)
    async def forget(
        self,
        ids: Annotated[list[str], Field(min_length=1, description=f"memory ids (or their last {SHORT_ID_MIN} or "
                                                                  "more characters)")],
        brain: IdBrainArg = None,
    ) -> str:
        total = 0
        for memory_id in ids:
            # A full id that a vault does not hold forgets nothing there: try the next brain.
            total += await self.tools.on_brain_holding(brain, lambda client: client.forget([memory_id]),
                                                       found=lambda forgotten: forgotten > 0)
        return dump({"forgotten": total})

    @tool(sends=Reinforce, read_only=False, destructive=False)
    async def used(
        self,
        ids: Annotated[list[str], Field(min_length=1, description="ids of the memories you used")],
        brain: IdBrainArg = None,
    ) -> str:
        tools = self.tools
        # Every id is placed before any is counted, so an unknown one changes nothing; the daemon
        # resolves short ids and refuses unknown ones within a brain's single call.
        groups: dict[str, list[str]] = {}
        if brain is not None:
            groups[brain] = ids
        else:
            for memory_id in ids:
                name, full_id = await tools.holder(memory_id)
                groups.setdefault(name, []).append(full_id)
        done: list[dict[str, Any]] = []
        for name, group in groups.items():
            # One call per brain: memories used together get linked (CO_ACTIVATED).
            done += [{"id": m.id, "content": m.content, "used": m.access_count, "brain": name}
                     for m in await tools.client(name).reinforce(group)]
        return dump({"used": done})

    @tool(sends=ReflectPrepare, read_only=False, destructive=False)
    async def reflect_prepare(
        self,
        entity_id: Annotated[str | None, Field(description="only this entity's memories")] = None,
        since: SinceArg = None,
        max_memories: Annotated[int, Field(ge=5, le=500, description="newest first")] = 500,
        brain: BrainArg = None,
    ) -> str:
        tools = self.tools
        name = brain or tools.default
        prepared = await tools.client(name).reflect_prepare(entity_id, since, max_memories)
        tools._sessions[prepared.session_id] = name
        view = msgspec.to_builtins(prepared)
        view["brain"] = name
        return dump(view)

    @tool(sends=ReflectCommit, read_only=False, destructive=False)
    async def reflect_commit(
        self,
        session_id: Annotated[str, Field(description="from reflect_prepare")],
        insights: Annotated[list[InsightIn], Field(description="what the clusters teach")],
        brain: Annotated[Brain | None, Field(description="default: the brain the session was prepared on")] = None,
    ) -> str:
        tools = self.tools
        name = brain or tools._sessions.get(session_id) or tools.default
        committed = await tools.client(name).reflect_commit(session_id, [dict(i) for i in insights])
        return dump(msgspec.to_builtins(committed))

    @tool(sends=ContradictionPrepare, read_only=True)
    async def contradictions(
        self,
        max_results: Annotated[int, Field(ge=1, le=1000)] = 100,
        brain: BrainArg = None,
    ) -> str:
        return dump(msgspec.to_builtins(await self.tools.client(brain).contradiction_prepare(max_results)))

    @tool(sends=ContradictionCommit, read_only=False, destructive=False)
    async def contradictions_commit(
        self,
        verdicts: Annotated[list[VerdictIn], Field(min_length=1)],
        brain: BrainArg = None,
    ) -> str:
        committed = await self.tools.client(brain).contradiction_commit([dict(v) for v in verdicts])
        return dump(msgspec.to_builtins(committed))


def build_server(tools: HebbsTools) -> MCPServer:
    server = _Server(name="hebbs", version=_version(), instructions=INSTRUCTIONS,
                     description="Local long-term memory for agents: remember, recall, reflect.",
                     log_level="WARNING")
    box = Toolbox(tools)
    for name, spec in Toolbox.specs().items():
        server.add_tool(_answering(getattr(box, name), tools), name=name, description=spec.description,
                        structured_output=False,
                        annotations=ToolAnnotations(**{f"{k}_hint": v for k, v in spec.hints.items()}))
    for name in BRAINS:
        _register_resources(server, tools, name)
    return server


def _answering(method: Callable[..., Awaitable[str]], tools: HebbsTools) -> Callable[..., Awaitable[str]]:
    """The tool as registered: its HebbsErrors come back as tool errors the agent can read."""
    @functools.wraps(method)
    async def call(*args: Any, **kwargs: Any) -> str:
        try:
            return await method(*args, **kwargs)
        except HebbsError as exc:
            raise _tool_error(exc, tools) from None
    return call


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
    async def stats() -> str:
        try:
            status = await tools.client(brain).status()
        except HebbsError as exc:
            raise ResourceError(f"{exc} [{exc.status_code}]") from None
        if status.vault is None:
            raise ResourceError(f"no {brain} vault: {tools.client(brain)._vault_error}")
        return dump(status.vault)

    async def insights() -> str:
        try:
            found = await tools.client(brain).insights()
        except HebbsError as exc:
            raise ResourceError(f"{exc} [{exc.status_code}]") from None
        return dump([{**memory_view(i.memory), "confidence": i.confidence, "tags": i.tags,
                      "source_ids": i.source_ids} for i in found])

    who = "the user, across projects" if brain == GLOBAL else "this project"
    server.resource(f"hebbs://{brain}/stats", name=f"{brain}-stats", mime_type="application/json",
                    description=f"What the {brain} brain ({who}) holds: memory counts by kind, model, path.")(stats)
    server.resource(f"hebbs://{brain}/insights", name=f"{brain}-insights", mime_type="application/json",
                    description=f"Lessons reflection distilled in the {brain} brain ({who}), newest first. "
                                "Read them at the start of a conversation: they weigh more than one memory.")(insights)


def serve(home: os.PathLike | str | None = None, vault: os.PathLike | str | None = None, global_: bool = False) -> None:
    """Run the server on stdin/stdout until the client closes them."""
    import anyio

    tools = HebbsTools(home=home, vault=vault, global_=global_)
    if tools.home.exists() and not tools.home.is_dir():
        # Checked here, not at the first tool call: a wrong --home in an agent's config fails at start.
        raise InvalidInput(f"HEBBS_HOME {tools.home} is not a directory")
    if vault is not None:
        # A wrong --vault in an agent's config should fail at start, where its log shows it.
        resolve_vault(vault, False, tools.home)
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
