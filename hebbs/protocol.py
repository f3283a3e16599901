"""The daemon's wire protocol: framing, and the one schema of every command and response.

A frame is a 4-byte big-endian length, then that many bytes of one JSON object. A request is
`{"id": <any>, "command": {"type": "<name>", ...}, "vault_path": "..."}`; every reply is
`{"id": ..., "status": "ok" | "error" | "progress", "status_code": "...", "data": ..., "error": ...}`.
Commands are a msgspec tagged union on "type", so decoding a request also validates it; the data
of each reply reuses the storage schema (hebbs.schema), so the SDK returns the same Structs the
engine does. docs/protocol.md shows each command with a real exchange.

This module must stay light: the CLI imports it, and a CLI call must not load numpy or the model.
"""

from __future__ import annotations

import dataclasses
import functools
import socket
import struct
from collections.abc import Callable, Iterator
from typing import Annotated, Any, ClassVar, Literal, NamedTuple, TypeVar, Union, get_args

import msgspec
from msgspec import UNSET, Meta, UnsetType

from . import validate
from .validate import INT64, MAX_NESTING, path_problem, structure_problem
from .errors import (ERRORS_BY_CODE, DaemonBusy, DaemonUnavailable, HebbsError,  # noqa: F401
                     IndexingInProgress, InvalidInput, MessageTooLarge, ProtocolError)
from .schema import (ImportSummary, Inspection, ContradictionAutoResult, ContradictionCommitted, ContradictionPrepared, ContradictionVerdict, Edge, EdgeType,
                     Insight, InsightInput, Memory, QueryLogEntry, RecallResult, RecallResults, ReflectAutoResult,
                     NoteText, NoteWritten, ReembedProgress, ReembedSummary, ReflectCommitted, ReflectPrepared,
                     ScoringWeights, Source,
                     VaultStats)
from .schema import SourceSection, decoder
from .recall.options import RecallOptions

PROTOCOL_VERSION = 1
MAX_FRAME = 16 * 1024 * 1024
HEADER = struct.Struct(">I")

OK, ERROR, PROGRESS = "ok", "error", "progress"
# The HTTP doors (the proxy, MCP over HTTP) serve many agents: a request names the agent and the session
# the memories it stores go under with these headers (Spec.scoped; docs/recall.md).
AGENT_HEADER = "x-hebbs-agent"
SESSION_HEADER = "x-hebbs-session"

# Limits checked where a request is decoded, so that no value a later layer cannot hold (a path the
# kernel refuses, a time past year 9999, an integer beyond 64 bits, a structure deeper than any
# command needs) gets past the edge: each one is an INVALID_REQUEST naming the field.
MAX_PATH_CHARS = 4096
MAX_TEXT_CHARS = 1_000_000
MAX_ID_CHARS = 64
MAX_NAME_CHARS = 512
# 9999-12-31T23:59:59.999999Z, the last instant a datetime can hold.
MAX_MICROS = 253_402_300_799_999_999
# MAX_NESTING: the deepest any request goes (request > command > items > item > context) plus room for
# a context's own nesting; msgspec's recursion would otherwise end in a RecursionError long after
# this. The engine applies the same limits to what it is given in process (validate.py).

# A filesystem path: bounded, and no NUL byte, which no system call accepts.
PathText = Annotated[str, Meta(max_length=MAX_PATH_CHARS, pattern="^[^\x00]*$")]
Text = Annotated[str, Meta(max_length=MAX_TEXT_CHARS)]
IdText = Annotated[str, Meta(max_length=MAX_ID_CHARS)]
Name = Annotated[str, Meta(max_length=MAX_NAME_CHARS)]
Micros = Annotated[int, Meta(ge=0, le=MAX_MICROS)]
# A network address (a Ray cluster's): it goes into a subprocess's arguments, which take no NUL either.
Address = Annotated[str, Meta(max_length=MAX_NAME_CHARS, pattern="^[^\x00]*$")]


# The wire-only errors live in hebbs.errors with the rest; imported here so existing
# `from hebbs.protocol import MessageTooLarge` (and the other three) keep working.
WIRE_ERRORS: dict[str, type[HebbsError]] = ERRORS_BY_CODE


def error_from_frame(status_code: str, message: str) -> HebbsError:
    """The typed exception an error frame stands for (HebbsError itself for a code we do not know)."""
    cls = WIRE_ERRORS.get(status_code, HebbsError)
    error = cls(message)
    if cls is HebbsError:
        error.status_code = status_code
    return error




# Reply data ---------------------------------------------------------------------------------

class Pong(msgspec.Struct, kw_only=True):
    pong: bool = True
    version: str
    protocol: int = PROTOCOL_VERSION
    pid: int


class SlotStatus(msgspec.Struct, kw_only=True):
    """One vault the daemon holds (a slot of its pool): how long unused, how many requests in it."""

    path: str
    idle_s: float
    in_use: int
    indexing: bool = False
    # The embedding model the vault is searched with, and the one a `reembed` in progress moves it to.
    model: str | None = None
    reembedding: str | None = None


class ModelStatus(msgspec.Struct, kw_only=True):
    """A model the daemon keeps warm: counted at `warm_mib` against its model memory budget, unloaded when
    no open vault uses it (unless it is the default, warmed at start)."""

    id: str
    dimension: int
    warm_mib: int
    vaults: list[str] = []
    default: bool = False


class PanelState(msgspec.Struct, kw_only=True):
    """Where the panel is served; `url` carries the daemon's token, so only this user's socket hears it.
    `opener` (the `panel` command's answer only) carries a one-time code instead: what a browser's
    command line, readable by every local user, may hold."""

    port: int
    url: str
    pid: int
    opener: str | None = None


class DaemonStatus(msgspec.Struct, kw_only=True):
    version: str
    protocol: int = PROTOCOL_VERSION
    pid: int
    home: str
    socket: str
    started_at: int
    uptime_s: float
    idle_timeout_s: float
    vault_idle_timeout_s: float
    # The embedding model's id once loaded (it loads in the background at start).
    model: str | None = None
    connections: int = 0
    # The connection limit, and how many clients were refused with BUSY since the start.
    max_connections: int = 0
    refused_busy: int = 0
    subscriptions: int = 0
    requests: int = 0
    open_vaults: list[SlotStatus] = []
    # The warm embedding models, and the MiB they may take together ([daemon] model_memory_mb).
    models: list[ModelStatus] = []
    model_memory_mb: int = 0
    vault: VaultStats | None = None
    # The Memory Palace, when this daemon serves it (None otherwise).
    panel: PanelState | None = None


class Stopping(msgspec.Struct, kw_only=True):
    stopping: bool = True
    pid: int


class Forgotten(msgspec.Struct, kw_only=True):
    forgotten: int


class Subscribed(msgspec.Struct, kw_only=True):
    subscription_id: str
    entity_id: str | None = None
    confidence_threshold: float


class SubscriptionPush(msgspec.Struct, kw_only=True):
    """A progress frame under the subscribe request's id: matches not pushed to it before, for a feed or
    for a memory stored later (then `dropped` counts the matches left out because the client did not
    read its pushes)."""

    subscription_id: str
    matches: list[RecallResult]
    dropped: int = 0


class Fed(msgspec.Struct, kw_only=True):
    pushed: int


class Closed(msgspec.Struct, kw_only=True):
    closed: int


class Removed(msgspec.Struct, kw_only=True):
    removed: int


class IndexCancelled(msgspec.Struct, kw_only=True):
    path: str
    # Whether a run was going (and is now stopped).
    cancelled: bool


class ExportChunk(msgspec.Struct, kw_only=True, omit_defaults=True):
    memories: list[Memory] = []
    records: list[dict[str, Any]] = []


class ExportDone(msgspec.Struct, kw_only=True):
    count: int


class ScanSummary(msgspec.Struct, kw_only=True):
    """What an index phase 1 found; `pending` counts the sections phase 2 will add, revise, update, forget."""

    files_scanned: int = 0
    files_unchanged: int = 0
    files_changed: int = 0
    files_removed: int = 0
    pending: dict[str, int] = {}
    skipped: list[str] = []
    warnings: list[str] = []
    seconds: float = 0.0



# Commands: each declared once ------------------------------------------------------------------
#
# A command is its request Struct (the fields, their defaults, and the one docstring every door
# shows) and its declaration (`@declare`): the reply's data type, the Engine method the daemon's
# generic handler calls with the fields, and how the doors treat it. The daemon's dispatch, the
# clients' retry and vault rules, the panel's refresh and RESULT_TYPES are all read from here;
# docs/architecture.md ("Adding a command") walks through adding one.

# A memory id as a client may give it: the full ULID, or a unique suffix of at least SHORT_ID_MIN
# characters (what text output shows). The daemon resolves every field of this type before the engine sees it.
SHORT_ID_MIN = 6
ShortId = Annotated[str, Meta(max_length=MAX_ID_CHARS, extra={"short_id": True})]
# A ShortId that may name a forgotten memory (whose kept original still answers source): given on as
# it is when no memory ends with it.
KeptId = Annotated[str, Meta(max_length=MAX_ID_CHARS, extra={"short_id": "kept"})]
# An edge type by name (schema.EdgeType); the engine checks it, and the CLI offers the names in any case.
EdgeTypeName = Annotated[str, Meta(max_length=MAX_NAME_CHARS, extra={"choices": tuple(EdgeType.__members__),
                                                                     "upper": True, "metavar": "TYPE"},
                                         description="the edge type: " + ", ".join(EdgeType.__members__)
                                         + " (any case)")]


# The reference time for time words in a cue and for recency, microseconds (the CLI also takes ISO 8601
# text); null: the current time. Not Micros: a time before 1970 was always taken here.
AsOf = Annotated[int | None, Meta(extra={"micros": True}, description=(
    "the clock, as an ISO 8601 time (or microseconds): the reference for time words in the cue (\"last week\") "
    "and for recency; it hides nothing (for what was true then: --as-of) (default: the current time)"))]
# Who stored a memory, as recall, prime and subscribe filter by it (schema.Memory's author, agent, session).
ByAuthor = Annotated[Name | None, Meta(description="only memories this author's daemon stored (default: any author)")]
ByAgent = Annotated[Name | None, Meta(description="only memories this agent stored (default: any agent)")]
BySession = Annotated[Name | None, Meta(description="only memories of this session (default: any session)")]
# A point in time: what was true then (docs/honesty.md "What is true now").
PointInTime = Annotated[int | None, Meta(extra={"micros": True}, description=(
    "what was true at this ISO 8601 time (or microseconds; a date alone: its start, 00:00 UTC): memories "
    "created later are left out, a value changed later is the current one, and the time is the clock too"))]


def recall_strategies() -> tuple[str, ...]:
    """The strategies a recall may name: hebbs/recall/registry.py's, the one list. Called when the command
    line is generated (cli/declared.py), so that loading the protocol loads no strategy."""
    from .recall.registry import STRATEGIES

    return STRATEGIES


class Spec(NamedTuple):
    """How the doors treat a command (set by @declare; read as `Cls.spec`)."""

    # The reply's data type; None when it depends on the request (result_type says it).
    result: Any = None
    # The Engine method the daemon's generic handler calls with the command's fields (an `id` field
    # goes first, positionally); None: the command has a handler of its own (daemon/handlers.py).
    engine: str | None = None
    # It changes the vault: through the daemon's write slot, one writer at a time per vault.
    writes: bool = False
    # It changes nothing, so a client may send it again when the daemon vanished before answering.
    retryable: bool = False
    # It needs a vault (False: the daemon answers it alone; a field's name: unless that field names a
    # notes folder itself; None: it may name one, as its typed method's `vault` argument says, and a
    # `daemon=` method is given that vault's path as `vault_path`).
    vault: bool | str | None = True
    # The panel's pages show fresh data after it (None: whether it writes).
    panel: bool | None = None
    # Fields that are not the engine method's arguments.
    skip: tuple[str, ...] = ()
    # The reply's data made from what the engine returned (None: that value itself).
    reply: Callable[[Any], Any] | None = None
    # The CLI subcommand built from this declaration alone (cli/declared.py); two words ("contradictions
    # list"): an action of a subcommand the CLI writes, which sends it by this name (declared.run_named);
    # several names: each of them, served by the one shell; None: the CLI has a hand-written one, or none.
    cli: str | tuple[str, ...] | None = None
    # The MCP tool(s) that send it (hebbs/mcp_server.py builds each from its Mcp and this Struct); None:
    # no tool sends it.
    mcp: Mcp | tuple[Mcp, ...] | None = None
    # The typed method of Client and AsyncClient (built from the Struct in client.py), when it is not
    # the Engine method's name. A command with neither has no typed method, or a hand-written one.
    method: str | None = None
    # That method's parameters where they differ from the fields in order: `name=field` renames, and the
    # fields after `*` are keyword-only (None: every field in order, `id` called memory_id).
    params: str | None = None
    # What the typed method returns, made from the reply's data (None: the data itself).
    returns: Callable[[Any], Any] | None = None
    # It sends progress frames before its reply: the typed method takes a `progress` callback.
    progress: bool = False
    # The CLI's option names where they are not `--field-name`: "field=--flag, ..."; "field=NAME" makes it
    # a positional argument, "field=" leaves it out of the command line (cli/declared.py).
    flags: str | None = None
    # The CLI's own part of the subcommand, a class in hebbs.cli ("module:Class", cli/declared.py): options
    # that fill no field, what they change in the request, how it is sent and how the reply is shown.
    # None: the fields and the reply alone.
    shell: str | None = None
    # The CLI's text output: a format string over the request's fields and the reply's (None: the text
    # cli/output.py prints for the reply's type, else the reply as indented JSON).
    text: str | None = None
    # One engine call on one vault (or a call of the daemon's own, `daemon=`), which a connection's own
    # thread may run without the event loop's hand-offs (daemon/server.py): the daemon's fast path.
    direct: bool = False
    # For a command whose `vaults` field names more vaults: the one reply made of each vault's
    # (merge(answers, command), answers labelled as hebbs.recall.brains.VaultRecall); None: one vault only.
    merge: Callable[[list[Any], Any], Any] | None = None
    # The daemon's own method that answers it (daemon/server.py's Daemon), given the request's fields; None:
    # the engine's, or a handler of its own.
    daemon: str | None = None
    # Its typed method takes `brains` ("project", "global") in place of the `vaults` field, each a vault the
    # client finds (a note says when the project has none): "one", by default this client's vault alone;
    # "both", by default this client's vault and the global one (the global one alone for a global client).
    brains: Literal["one", "both"] | None = None
    # More typed methods of Client and AsyncClient over this one command (stats beside status), generated
    # beside the first; one named as the Engine method replaces the first (remember_many).
    also: tuple[Method, ...] = ()
    # The field that holds a batch (remember's `items`): the request is one item (the fields of the batch's
    # item type) or a batch, never both; the Engine method takes the batch (one item as a batch of one),
    # and the reply is a list for a batch, the one answer for one item.
    batch: str | None = None
    # The memories it stores carry the client's agent and session (its `agent` and `session`, else
    # $HEBBS_AGENT and $HEBBS_SESSION) where the call gives none: the `agent` and `session` fields, and
    # each item's of the batch.
    scoped: bool = False

    @property
    def refreshes_panel(self) -> bool:
        return self.writes if self.panel is None else self.panel

    @property
    def cli_names(self) -> tuple[str, ...]:
        return () if self.cli is None else (self.cli,) if isinstance(self.cli, str) else self.cli

    @property
    def tools(self) -> tuple[Mcp, ...]:
        return tuple(entry for entry in self._mcp if entry.resource is None)

    @property
    def resources(self) -> tuple[Mcp, ...]:
        return tuple(entry for entry in self._mcp if entry.resource is not None)

    @property
    def _mcp(self) -> tuple[Mcp, ...]:
        return () if self.mcp is None else (self.mcp,) if isinstance(self.mcp, Mcp) else self.mcp

    @property
    def client_method(self) -> str | None:
        """The first typed method of Client and AsyncClient that sends the command (None: it has none, or
        only those `also` lists)."""
        name = self.method or self.engine
        return None if self.method is None and any(m.name == name for m in self.also) else name

    def parameters(self, fields: list[str]) -> list[tuple[str, str, bool]]:
        """(parameter, field, keyword-only) of the typed method over a command with these fields, in
        the order `params` gives: the renamed and listed fields first, then the rest."""
        return _parameters(self.params if self.params is not None else "memory_id=id" if "id" in fields else "",
                           fields)


def _parameters(listed: str, fields: list[str]) -> list[tuple[str, str, bool]]:
    renamed: dict[str, str] = {}
    keyword_from = len(fields)
    for word in (w.strip() for w in listed.split(",")):
        if word == "*":
            keyword_from = len(renamed)
        elif word:
            name, _, field = word.partition("=")
            renamed[field or name] = name
    order = [*renamed, *(f for f in fields if f not in renamed)]
    return [(renamed.get(field, field), field, n >= keyword_from) for n, field in enumerate(order)]


class Method(NamedTuple):
    """Another typed method over a declared command (Spec.also): generated into hebbs/client_methods.py."""

    name: str
    # Its docstring when not the command's (stats says what it answers itself), and its notes after it.
    doc: str | None = None
    notes: str | None = None
    # The type it returns (None: the reply's), made from the reply's data by `returns`.
    result: Any = None
    returns: Callable[[Any], Any] | None = None
    # Whether it sends this client's vault (None: as the declaration says).
    vault: bool | None = None
    # Its parameters as Spec.params gives them, over these fields (None: all), those in `required` without a
    # default (remember's content, which a batch leaves out).
    params: str = ""
    fields: tuple[str, ...] | None = None
    required: tuple[str, ...] = ()

    def parameters(self, fields: list[str]) -> list[tuple[str, str, bool]]:
        return _parameters(self.params, [f for f in fields if self.fields is None or f in self.fields])


class Arg(NamedTuple):
    """One parameter of an MCP tool as an agent reads it. It fills the command's field of its name (or
    `field`), with that field's type and default; several parameters filling one tuple field (since and
    until: time_range) fill it in order, null when none is given."""

    # What the agent reads (None: the field's description).
    text: str | None = None
    field: str | None = None
    # The agent must give it, though the command itself does not need it (recall's cue).
    required: bool = False
    ge: float | None = None
    le: float | None = None
    min_length: int | None = None


class Mcp(NamedTuple):
    """An MCP tool that sends a command: hebbs/mcp_server.py builds its parameters from `args` and the
    request Struct, sends it through the client's typed method, and shapes the answer with `view`."""

    # What an agent reads: when to call it.
    text: str
    # The tool's parameters, in order (a `brain` parameter follows, as `route` says).
    args: dict[str, Arg] = {}
    # Which brain it talks to (mcp_server.ROUTES): "write" (the one named, else the default), "read" (both
    # by default, one merged list), "holder" (the one holding the id), "each" (that, per id of a list),
    # "grouped" (the ids grouped by holder, one call per brain), "session" (where the session was
    # prepared); "index" and "status" are tools of their own.
    route: str = "write"
    # How the answer is shaped for an agent (mcp_server.VIEWS): "data" is the reply as it is.
    view: str = "data"
    # The tool's name when it is not the client method's.
    tool: str | None = None
    # Fields the tool sets itself, not the agent.
    fixed: dict[str, Any] = {}
    # The read-only hint (None: whether the command is retryable, i.e. changes nothing) and the destructive one.
    read_only: bool | None = None
    destructive: bool = False
    # Not a tool but a resource of each brain, hebbs://BRAIN/<resource>: `text` its description ({brain}, and
    # {who} it is about), read through the typed method `tool` names (else the client method), shaped by `view`.
    resource: str | None = None


# Tool parameters several tools share.
_SINCE = Arg("only memories created at or after this time, ISO 8601 (e.g. 2026-03-01 or 2026-03-01T09:00:00Z)",
             field="time_range")
_UNTIL = Arg("only memories created before this time, ISO 8601", field="time_range")
_ABOUT = Arg("only memories about this entity")
_AUTHOR = Arg("only memories stored by this person (as `author` shows them, e.g. 'dana@laptop')")
_AGENT = Arg("only memories stored by this agent")
_SESSION = Arg("only memories of this session or conversation")


def _merge_recall(answers: list[Any], command: Any) -> Any:
    from .recall import brains, scoring

    return brains.merge_recall(answers, scoring.check_weights(command.weights or ScoringWeights()),
                               validate.top_k(command.top_k))


def _merge_prime(answers: list[Any], command: Any) -> Any:
    from .recall import brains

    return brains.merge_prime(answers, ScoringWeights(), command.max_memories)


def declare(**spec: Any) -> Callable[[type[C]], type[C]]:
    """Attach a command's Spec to its request Struct."""
    def attach(cls: type[C]) -> type[C]:
        cls.spec = Spec(**spec)
        return cls
    return attach


class _Command(msgspec.Struct, kw_only=True, forbid_unknown_fields=True, tag_field="type", omit_defaults=True):
    spec: ClassVar[Spec]

    @classmethod
    def tag(cls) -> str:
        return cls.__struct_config__.tag  # type: ignore[return-value]


C = TypeVar("C", bound=_Command)


@declare(result=Pong, retryable=True, vault=False, method="ping", daemon="pong", direct=True)
class Ping(_Command, tag="ping"):
    """Is a daemon there? Answers Pong without touching any vault."""


@declare(result=DaemonStatus, retryable=True, vault=None, method="status", daemon="status",
         cli=("status", "daemon status"), shell="statuscmds:StatusShell",
         also=(Method("stats", "The vault's statistics (what Engine.stats() returns).", result=VaultStats,
                       returns=lambda status: status.vault, vault=True),),
         mcp=(Mcp("The state of your memory: whether the daemon runs (version, uptime, model), and what each "
                  "brain holds (memories by kind, where it lives). Call it when the user asks about hebbs itself,"
                  " or a brain seems empty or missing.",
                  route="status"),
              Mcp("What the {brain} brain ({who}) holds: memory counts by kind, model, path.", resource="stats",
                  tool="stats")))
class Status(_Command, tag="status"):
    """The daemon's state, and the request's vault statistics when vault_path is given."""


@declare(result=Stopping, vault=False, method="shutdown", daemon="stop_after_reply")
class Shutdown(_Command, tag="shutdown"):
    """Stop the daemon after replying: vaults close cleanly, the socket and PID file go."""


# [target id, edge type, confidence]: an edge from a new memory (a typed method also takes a pair, confidence 1).
EdgeSpec = tuple[str, str, float]


class RememberItem(msgspec.Struct, kw_only=True, forbid_unknown_fields=True, omit_defaults=True):
    content: Text
    importance: float = 0.5
    context: dict[str, Any] | None = None
    entity_id: Name | None = None
    # Microseconds since the epoch; the daemon's clock when absent.
    created_at: Micros | None = None
    kind: str = "EPISODE"
    source: Source | None = None
    # Ids of memories this one replaces (they are marked superseded in the same batch).
    supersedes: list[ShortId] = []
    edges: list[EdgeSpec] = []
    # Idempotency key: a memory already stored under it in this vault is returned, nothing is stored.
    key: str | None = None
    # The agent that stores it and its session (schema.Memory); a client fills in its own when absent.
    agent: Name | None = None
    session: Name | None = None


@declare(result=Memory, writes=True, engine="remember_many", batch="items", direct=True, cli="remember",
         shell="commands:RememberShell", scoped=True,
         also=(Method("remember", notes="`edges`: (target id, edge type[, confidence]); `supersedes`: ids it replaces; "
                      "`key`: a memory already stored under it is returned instead (idempotent; other text is refused: "
                      "KeyReused); without one the client gives the memory a key of its own, so sending it again "
                      "after a lost reply stores it once (docs/python-api.md). A restatement of an "
                      "existing memory folds into it (consolidated=True) unless `consolidate` is False.",
                      result=Memory, params="content, *", required=("content",),
                      fields=(*RememberItem.__struct_fields__, "consolidate")),
               Method("remember_many", notes="`items`: dicts with the fields of remember, or RememberItems; an item "
                      "without `key` gets one of the client's own, as in remember.",
                      result=list[Memory], params="items, *", required=("items",),
                      fields=("items", "check_contradictions", "consolidate"))),
         flags=("content=content, entity_id=--entity, edges=--edge, kind=, source=, items=, check_contradictions=, "
                "consolidate="),
         mcp=Mcp("Store one memory. Call it when the user states a preference, corrects you, makes a decision "
              "(with its reason) or tells you a new fact about themselves, the project, people or systems. "
              "Write one fact per memory, as a sentence that stands on its own. A preference or habit of the "
              "user goes to brain='global'; a fact about this codebase to brain='project'. Never store "
              "secrets (passwords, API keys, tokens), guesses, small talk, or what the code already says. "
              "Importance: 0.9 rules and corrections, 0.7 decisions, 0.5 facts, 0.3 details.",
              args={"content": Arg("the fact, one self-contained sentence", required=True),
                    "importance": Arg("how much it matters, 0..1", ge=0, le=1),
                    "entity_id": Arg("who or what it is about: 'user', a person, a service"),
                    "context": Arg('e.g. {"type": "preference" | "rule" | "decision" | "fact" | "status"}')},
              view="memory"))
class Remember(_Command, tag="remember"):
    """Store one memory (content and its fields) or a batch (items); data is a Memory or a list of them."""

    content: Annotated[Text | None, Meta(extra={"nargs": "+"}, description="the text ('-' reads it from stdin)")] = None
    importance: Annotated[float, Meta(description="0..1")] = 0.5
    context: Annotated[dict[str, Any] | None, Meta(description="a JSON object, e.g. '{\"type\": \"preference\"}' "
                                                               "(default: {})")] = None
    entity_id: Annotated[Name | None, Meta(description="who or what the memory is about (default: none)")] = None
    created_at: Annotated[Micros | None, Meta(description="ISO 8601 time or microseconds since the epoch "
                                                          "(default: now)")] = None
    kind: str = "EPISODE"
    source: Source | None = None
    supersedes: Annotated[list[ShortId], Meta(extra={"metavar": "ID"}, description=(
        "a memory this one replaces (repeatable); it stays, marked superseded"))] = []
    edges: Annotated[list[EdgeSpec], Meta(extra={"metavar": "ID:TYPE[:CONFIDENCE]"}, description=(
        f"an edge from the new memory (repeatable); TYPE is one of {', '.join(EdgeType.__members__)}; confidence "
        "0..1, default 1"))] = []
    key: Annotated[str | None, Meta(description=(
        "idempotency key: if a memory was stored under it in this vault, say so and store nothing (JSON: "
        "\"existing\": true); a different text is refused"))] = None
    agent: Annotated[Name | None, Meta(description="the agent storing it, which recall can filter by "
                                                   "(default: $HEBBS_AGENT, else none)")] = None
    session: Annotated[Name | None, Meta(description="the session or conversation it belongs to, which recall can "
                                                     "filter by (default: $HEBBS_SESSION, else none)")] = None
    items: list[RememberItem] | None = None
    # null: the vault's contradictions.check_on_remember.
    check_contradictions: bool | None = None
    # A restatement of an existing memory folds into it (docs/consolidation.md); None: the vault's setting.
    consolidate: bool | None = None


@declare(result=Memory, engine="get", retryable=True, direct=True, cli="get")
class Get(_Command, tag="get"):
    """One memory by id (a full ULID, or a unique suffix of at least 6 characters)."""

    id: ShortId


@declare(result=Memory, engine="revise", writes=True, params="memory_id=id, *", cli="revise",
         flags="entity_id=--entity, source=", shell="commands:ReviseShell", text="revised {id}",
         mcp=Mcp("Correct a memory in place (its earlier text is kept as history). Call it when the user "
              "corrects something you remembered, or a fact changed. Give only what changes.",
              args={"id": Arg(), "content": Arg("the corrected text"), "importance": Arg("0..1", ge=0, le=1),
                    "context": Arg("replaces the context")}, route="holder", view="memory"))
class Revise(_Command, tag="revise"):
    """Change a memory in place; the earlier text is kept as its history. Absent fields stay as they are."""

    id: ShortId
    content: Annotated[Text | None, Meta(description="the new text ('-' reads it from stdin) (default: unchanged)")] = None
    importance: Annotated[float | None, Meta(description="0..1 (unchanged when not given)")] = None
    context: Annotated[dict[str, Any] | None, Meta(description="a JSON object replacing the context (unchanged when "
                                                               "not given)")] = None
    # Absent: unchanged; null: no entity any more.
    entity_id: Annotated[Name | None | UnsetType, Meta(description="move the memory to this entity (unchanged when "
                                                                   "not given)")] = UNSET
    source: Source | None = None


class ReviseItem(msgspec.Struct, kw_only=True, forbid_unknown_fields=True, omit_defaults=True):
    id: ShortId
    content: Text | None = None
    importance: float | None = None
    context: dict[str, Any] | None = None
    entity_id: Name | None | UnsetType = UNSET
    source: Source | None = None


@declare(result=list[Memory], engine="revise_many", writes=True, cli="revise-many", flags="items=",
         shell="commands:ReviseManyShell")
class ReviseMany(_Command, tag="revise_many"):
    """Revise many memories in one request (changed texts embedded in batches); data is a list of Memory."""

    items: list[ReviseItem]


@declare(result=list[Memory], engine="history", retryable=True, cli="history")
class History(_Command, tag="history"):
    """A memory's earlier versions, newest first; data is a list of Memory."""

    id: ShortId


@declare(result=Edge, engine="add_edge", writes=True, cli="add-edge",
         text="added {source} -[{edge_type}]-> {target} (confidence {confidence:.2f})")
class AddEdge(_Command, tag="add_edge"):
    """Add (or replace) the edge source -[edge_type]-> target; data is the Edge."""

    source: ShortId
    edge_type: EdgeTypeName
    target: ShortId
    confidence: Annotated[float, Meta(description="0..1")] = 1.0


@declare(result=Removed, engine="remove_edge", writes=True, reply=lambda _: Removed(removed=1),
         returns=lambda _: None, cli="remove-edge", text="removed {source} -[{edge_type}]-> {target}")
class RemoveEdge(_Command, tag="remove_edge"):
    """Delete one edge; NOT_FOUND when there is none. Data is {"removed": 1}."""

    source: ShortId
    edge_type: EdgeTypeName
    target: ShortId


@declare(result=list[Edge], engine="edges", retryable=True, cli="edges", shell="commands:EdgesShell")
class Edges(_Command, tag="edges"):
    """A memory's edges: "out" (from it), "in" (to it) or "both"; data is a list of Edge."""

    id: ShortId
    direction: Annotated[Literal["out", "in", "both"], Meta(description="out: from the memory, in: to it")] = "both"


@declare(result=list[tuple[str, float]], engine="neighbors", retryable=True, cli="neighbors", flags="k=-k",
         shell="commands:NeighborsShell")
class Neighbors(_Command, tag="neighbors"):
    """The k memories whose stored vectors are nearest to this memory's (itself, revisions and superseded
    memories excluded), nearest first; data is a list of [memory id, cosine similarity]."""

    id: ShortId
    k: Annotated[int, Meta(description="how many")] = 10


@declare(result=Forgotten, engine="forget", writes=True, reply=lambda n: Forgotten(forgotten=n), params="ids, *",
         returns=lambda done: done.forgotten, cli="forget", flags="ids=ID, entity_id=--entity",
         shell="commands:ForgetShell",
         mcp=Mcp("Delete memories for good. Call it only when the user asks you to forget something, or a memory"
              " is plainly wrong and cannot be revised. Answers how many were forgotten.",
              args={"ids": Arg(f"memory ids (or their last {SHORT_ID_MIN} or more characters)", required=True,
                               min_length=1)}, route="each", view="forgotten", destructive=True))
class Forget(_Command, tag="forget"):
    """Remove memories by id, or every memory of an entity; data is Forgotten."""

    ids: list[ShortId] | None = None
    entity_id: Annotated[Name | None, Meta(description="forget every memory of this entity")] = None


@declare(result=RecallResults, engine="recall", retryable=True, skip=("vaults",), direct=True, merge=_merge_recall,
         brains="one", params="cue, *", cli="recall",
         flags="cue=cue, strategies=--strategy, entity_id=--entity, mmr_lambda=--mmr, edge_types=--edge-type, vaults=",
         shell="commands:RecallShell",
         mcp=(Mcp("Find memories relevant to a cue. Call it before answering anything that depends on the user's "
              "earlier preferences, decisions or facts about the project, and whenever the user asks what you"
              " know or remember. Searches both brains by default in one ranked list (each result says its "
              "brain). Results are ordered by score; use `confidence` (when given) to judge a match, and if "
              "the answer says `abstained` or nothing relevant comes back, say you do not know instead of "
              "answering from a weak match. Narrow it with entity_id, a time range (since, until) or "
              "strategies when the question asks for them.",
              args={"cue": Arg("what you are looking for, in words", required=True),
                    "top_k": Arg("how many results", ge=1, le=100), "entity_id": _ABOUT, "since": _SINCE,
                    "until": _UNTIL, "author": _AUTHOR, "agent": _AGENT, "session": _SESSION,
                    "strategies": Arg("how to search: similarity (meaning), lexical (exact words and identifiers), "
                                      "temporal (newest first), causal (along cause edges), analogical, associative "
                                      "(used together); default: lexical and similarity fused, which suits nearly "
                                      "every question"),
                    "as_of": Arg("what was true at this time, ISO 8601 (e.g. 2026-06-01): memories created later are "
                                 "left out and a value changed later counts as current (default: now)")},
              route="read", view="results"),
         Mcp("List the most recent memories, newest first, from both brains by default. Call it when the user "
             "asks what happened lately or what you stored recently, or to review a time span (since, until) "
             "or one entity's latest memories. It does not judge relevance: use recall for a question.",
             args={"limit": Arg("how many memories", field="top_k", ge=1, le=100), "entity_id": _ABOUT,
                   "since": _SINCE, "until": _UNTIL, "author": _AUTHOR, "agent": _AGENT, "session": _SESSION},
             route="read", view="recent", tool="recent", fixed={"cue": None, "strategies": ["temporal"]})))
class Recall(_Command, tag="recall"):
    """Find the memories that answer a cue (without one: the most recent), ranked by one composite score;
    data is RecallResults: each result with its confidence, and whether the answer abstained."""

    cue: Annotated[Text | None, Meta(description="what to look for (none: the most recent memories)")] = None
    strategies: Annotated[list[Name] | None, Meta(
        extra={"choices": recall_strategies}, description="repeatable (default: similarity and lexical fused; temporal "
        "without a cue; causal with --seed; analogical with --analogy)")] = None
    top_k: Annotated[int, Meta(description="how many results")] = 10
    entity_id: Annotated[Name | None, Meta(description="only this entity's memories")] = None
    # [start, end] in microseconds since the epoch; either may be null (open).
    time_range: Annotated[tuple[Micros | None, Micros | None] | None, Meta(extra={"metavar": "START..END"}, description=(
        "ISO 8601 times (or microseconds); either side may be empty; a date alone as END means that whole day "
        "(UTC)"))] = None
    weights: Annotated[ScoringWeights | None, Meta(extra={"metavar": "R:T:I:F"}, description=(
        "relevance:recency:importance:reinforcement, e.g. 0.5:0.2:0.2:0.1 (default: 0.5:0.2:0.2:0.1)"))] = None
    include_superseded: Annotated[bool, Meta(description="also return memories replaced by newer ones")] = False
    # True counts every returned memory as used (the old behaviour); the default changes nothing
    # ranking reads, so the same recall twice gives the same answer. See `reinforce`.
    reinforce: Annotated[bool, Meta(description="count every returned memory as used (old behaviour; prefer "
                                                "`hebbs used ID`)")] = False
    mmr_lambda: Annotated[float | None, Meta(extra={"metavar": "LAMBDA"}, description=(
        "diversity (MMR): 1 = pure relevance, results in score order; lower = more diverse, and restatements "
        "(cosine >= 0.95) go last; 0 = diversity alone after the best (default: the vault's recall.mmr_lambda, "
        "0.9; similarity alone: 1)"))] = None
    # Causal: walk the graph from seed (a memory id; default the cue's best match).
    seed: Annotated[ShortId | None, Meta(extra={"metavar": "ID"}, description=(
        "causal: the memory to walk the graph from (default: the cue's best match)"))] = None
    direction: Annotated[Literal["forward", "backward", "both"], Meta(description=(
        "causal: follow edges from the seed (forward), to it (backward), or both"))] = "forward"
    max_depth: Annotated[int, Meta(description="causal: how many edges away, 1..20")] = 5
    edge_types: Annotated[list[EdgeTypeName] | None, Meta(description=(
        "causal: walk only these edge types (repeatable) (default: every type but FOLLOWED_BY)"))] = None
    # Analogical: weight of plain similarity against shape (null: the vault's recall.analogical_alpha),
    # and a:b::c:? as three memory ids or cues.
    alpha: Annotated[float | None, Meta(description=(
        "analogical: weight of plain similarity against shape, 0..1 (default: the vault's "
        "recall.analogical_alpha, 0.5)"))] = None
    analogy: Annotated[list[str] | None, Meta(extra={"nargs": 3, "metavar": ("A", "B", "C")}, description=(
        "analogical: A is to B as C is to ?; each a memory id or a text"))] = None
    now: AsOf = None
    as_of: PointInTime = None
    # More vault directories to search with the request's: one merged list, each result labelled (hebbs/recall/brains.py).
    vaults: list[PathText] | None = None
    # Also spread one hop along co-activation links (docs/consolidation.md); tagged `associative`.
    associate: Annotated[bool, Meta(description="also bring memories used together with the best matches (tagged "
                                                "associative)")] = False
    author: ByAuthor = None
    agent: ByAgent = None
    session: BySession = None


def _same_options(request: type[msgspec.Struct], options: type, own: tuple[str, ...]) -> None:
    """A request that carries a recall's options holds the option fields in the same order with the same
    defaults, plus its `own` fields: its declaration describes them for each door, the options say them."""
    declared = {f.name: f.default for f in msgspec.structs.fields(request) if f.name not in own}
    expected = {f.name: f.default for f in dataclasses.fields(options)}
    if list(declared.items()) != list(expected.items()):
        raise TypeError(f"{request.__name__}'s fields {declared} are not {options.__name__}'s {expected}")


_same_options(Recall, RecallOptions, own=("vaults",))


@declare(result=list[Memory], engine="reinforce", writes=True, panel=False, params="ids, *", cli="used",
         text="{short_id}  used {access_count}x  {content}",
         mcp=Mcp("Tell hebbs which recalled memories you actually used in your answer: they count as useful and "
              "rank higher next time. Call it after answering from recalled memories, naming all of them in "
              "one call (memories used together are linked); do not call it for memories you only saw. An "
              "unknown id fails the whole call and counts nothing.",
              args={"ids": Arg("ids of the memories you used", min_length=1)}, route="grouped", view="used",
              tool="used"))
class Reinforce(_Command, tag="reinforce"):
    """Count these memories as used (full ids or unique suffixes of 6+); data is the updated memories."""

    ids: list[ShortId]
    via: Annotated[str, Meta(description="how they were used, for their access log: used (an answer relied on "
                                         "them) or panel (marked useful in the Memory Palace)")] = "used"


@declare(result=RecallResults, engine="prime", retryable=True, skip=("vaults",), direct=True, merge=_merge_prime,
         brains="both", params="entity_id, similarity_cue, max_memories, *", cli="prime",
         flags="entity_id=--entity, similarity_cue=--cue, max_memories=--max, vaults=", shell="commands:PrimeShell",
         mcp=Mcp("Load context at the start of a conversation: the most recent memories plus those relevant to "
              "the cue, from both brains by default (who the user is and what this project is). Call it once,"
              " silently, before your first answer, with the user's first request as the cue; keep the "
              "results in mind and do not recite them.",
              args={"cue": Arg("what the conversation is about", field="similarity_cue"),
                    "entity_id": Arg("only this entity's memories, e.g. 'user'"),
                    "max_memories": Arg("how many memories in all", ge=1, le=1000), "author": _AUTHOR, "agent": _AGENT,
                    "session": _SESSION}, route="read", view="results"))
class Prime(_Command, tag="prime"):
    """An entity's most recent memories plus the most relevant to the cue, deduplicated, in one call."""

    entity_id: Annotated[Name | None, Meta(description="the entity (default: every entity)")] = None
    similarity_cue: Annotated[Text | None, Meta(description="what the conversation is about (default: none, recent "
                                                            "memories only)")] = None
    max_memories: Annotated[int, Meta(description="how many memories")] = 20
    now: AsOf = None
    author: ByAuthor = None
    agent: ByAgent = None
    session: BySession = None
    # More vault directories to prime from with the request's (the global brain, usually); merged.
    vaults: list[PathText] | None = None


@declare(result=Subscribed, cli="subscribe", flags="entity_id=--entity, confidence_threshold=--threshold",
         shell="commands:SubscribeShell")
class Subscribe(_Command, tag="subscribe"):
    """Open a subscription on this connection; feeds on the same connection push matches to it, and
    so does each memory stored later that a text fed finds."""

    entity_id: Annotated[Name | None, Meta(description="only this entity's memories (default: every entity)")] = None
    confidence_threshold: Annotated[float, Meta(description="minimum confidence, 0..1")] = 0.5
    author: ByAuthor = None
    agent: ByAgent = None
    session: BySession = None


@declare(result=Fed, vault=False)
class Feed(_Command, tag="feed"):
    """Text seen by the agent: matches go out as progress frames under the subscribe request's id."""

    text: Text
    # Feed only this subscription; every subscription of the connection when absent.
    subscription_id: IdText | None = None


@declare(result=Closed, vault=False)
class Close(_Command, tag="close"):
    """End one subscription of this connection, or all of them when subscription_id is absent."""

    subscription_id: IdText | None = None


@declare(panel=True, vault="path", method="index", params="path, *", progress=True,
         mcp=Mcp("Index a folder of markdown notes into memories, or refresh it after the notes changed (only "
              "changed sections are embedded again; removed notes are forgotten). Call it when the user asks "
              "you to learn, read or refresh their notes or docs. Without a path, refreshes this project's "
              "notes folder (the one holding its .hebbs/). Large folders take a while the first time.",
              args={"path": Arg("the notes folder, absolute or relative to the server's working directory "
                                "(default: this project's)")}, route="index"))
class Index(_Command, tag="index"):
    """Index a markdown notes folder into PATH/.hebbs, streaming progress frames, then a summary.

    `path` is the notes folder (default: the folder holding the request's vault directory). Without
    `phase` both phases run (data: IndexSummary). A watcher asks for them apart: phase 1 parses and
    diffs (only `paths`, when given; data: ScanSummary), phase 2 embeds and writes what phase 1
    planned (data: IndexSummary). `ray`: the address of a Ray cluster that embeds the sections
    (docs/scale.md). `full`: every section of the folder the vault does not hold is written again, even
    one whose memory was forgotten: rebuilds this checkout's share of a shared vault (docs/scale.md).
    """

    path: PathText | None = None
    phase: Literal[1, 2] | None = None
    paths: list[PathText] | None = None
    ray: Address | None = None
    full: bool = False


@declare(result=IndexCancelled, vault="path", method="index_cancel")
class IndexCancel(_Command, tag="index_cancel"):
    """Stop the index run on PATH/.hebbs (or the request's vault), wherever it was started, and wait until it
    has stopped. What it committed stays; the next run picks up the rest. Data is IndexCancelled."""

    path: PathText | None = None


@declare(retryable=True, vault="path", method="index_follow", progress=True)
class IndexFollow(_Command, tag="index_follow"):
    """Follow the index run on PATH/.hebbs started elsewhere: its progress frames, then its IndexSummary
    (null data when no run is going; a CANCELLED error when it is cancelled)."""

    path: PathText | None = None


@declare(result=ReembedSummary, method="reembed", progress=True, cli="reembed", shell="commands:ReembedShell")
class Reembed(_Command, tag="reembed"):
    """Move the vault to another embedding model: every memory embedded again, with progress reports,
    then a summary. Recall keeps the old model and its vectors until the switch, which
    writes every new vector and the model in one batch while the vault is closed for a moment; a run that
    is stopped (killed, cancelled, the client gone) keeps what it embedded, and the next run goes on from
    there. docs/embedding.md."""

    model: Annotated[str | None, Meta(description="the model to move to: a name from the registry (hebbs/models/"
                                      "registry.toml) or a model folder (default: the vault's config.toml "
                                      "`model`, else the default model)")] = None


@declare(retryable=True, vault="path", method="list", params="path, *", cli="list", flags="path=path",
         shell="statuscmds:ListShell")
class List(_Command, tag="list"):
    """The notes folder's indexed files (and their sections when asked)."""

    path: Annotated[PathText | None, Meta(extra={"nargs": "?"}, description="the notes folder (default: here)")] = None
    sections: Annotated[bool, Meta(description="list each file's sections too")] = False


# Notes the agent writes (hebbs/notes/write.py, docs/notes.md): a path inside the request vault's notes folder,
# never made absolute by a client (not a PathText).
NotePath = Annotated[str, Meta(max_length=MAX_PATH_CHARS, pattern="^[^\x00]*$", description=(
    "the note, relative to the notes folder, ending in .md (e.g. agent/deploy.md)"))]
_NOTE_ARGS = {
    "path": Arg("the note, relative to the project's notes folder, ending in .md (e.g. agent/deploy-checklist.md)"),
    "text": Arg("markdown; [[Other note]] links it to that note"),
    "title": Arg(), "tags": Arg(), "links": Arg(), "author": Arg("who writes: your name as an agent"),
    "expected_version": Arg(),
}


@declare(result=NoteText, retryable=True, method="note_read", cli="note read", shell="notecmds:NoteReadShell",
         mcp=Mcp("Read a note of the project's notes folder as it is now, with its version. Call it before "
                 "note_write replaces a note that exists (a person may have edited it: keep what they wrote), "
                 "and pass the version it returns as expected_version.",
                 args={"path": _NOTE_ARGS["path"]}, read_only=True))
class NoteRead(_Command, tag="note_read"):
    """A note of the notes folder as it is now, and its version (what `note write` is given to replace it)."""

    path: NotePath


@declare(result=NoteWritten, writes=True, method="note_write", params="path, text, *", cli="note write",
         shell="notecmds:NoteWriteShell",
         mcp=Mcp("Write a markdown note into the project's notes folder, where the user reads and edits it in "
                 "their editor; it is indexed at once (recall finds it, its [[links]] become edges). Call it "
                 "for what deserves a page of its own (a runbook, a decision record, a summary), not for one "
                 "fact (remember). A note that exists needs the version note_read returned: a CONFLICT error "
                 "means it changed since (read it again, merge, write); to add to a note, use note_append.",
                 args=_NOTE_ARGS))
class NoteWrite(_Command, tag="note_write"):
    """Create a note in the notes folder, or replace the one of `expected_version`, and index it at once.

    The note gets front matter (title, created, updated, author, tags), a `# title` heading unless the text
    starts with one, and a `Related:` line of wiki-links. A note that exists and was not given its version,
    or changed from it, is a CONFLICT naming its current version: nothing is written. Data is NoteWritten.
    """

    path: NotePath
    text: Annotated[Text, Meta(description="the note's markdown ('-' reads it from stdin)")]
    title: Annotated[Name | None, Meta(description="the note's title (default: the one it has, else its file name)")] = None
    tags: Annotated[list[Name], Meta(description="a tag for its front matter (repeatable)")] = []
    links: Annotated[list[Name], Meta(description="a note it relates to, linked as [[NAME]] (repeatable)")] = []
    author: Annotated[Name | None, Meta(description="who writes it, for its front matter (default: none)")] = None
    expected_version: Annotated[IdText | None, Meta(description=(
        "the version being replaced, as `note read` or the last write said; required when the note exists"))] = None


@declare(result=NoteWritten, writes=True, method="note_append", params="path, text, *", cli="note append",
         shell="notecmds:NoteWriteShell",
         mcp=Mcp("Add text at the end of a note of the project's notes folder (created if missing), indexed at "
                 "once. Safe while the user edits the same note: their saved text is kept and yours added "
                 "after it. Call it to log progress, an observation or a decision into a running note.",
                 args={**_NOTE_ARGS, "expected_version": Arg(
                     "only if the note is still this version (else a CONFLICT error); default: whatever it is")}))
class NoteAppend(_Command, tag="note_append"):
    """Add text (and a `Related:` line of wiki-links) at the end of a note, creating it when missing, and index it.

    A note that changed on disk while the text was written is read again and the text appended to that;
    with `expected_version`, a note of another version is a CONFLICT. Data is NoteWritten.
    """

    path: NotePath
    text: Annotated[Text, Meta(description="the markdown to add ('-' reads it from stdin)")]
    title: Annotated[Name | None, Meta(description="the title of a note it creates (default: its file name)")] = None
    tags: Annotated[list[Name], Meta(description="a tag for the front matter of a note it creates (repeatable)")] = []
    links: Annotated[list[Name], Meta(description="a note it relates to, linked as [[NAME]] (repeatable)")] = []
    author: Annotated[Name | None, Meta(description="who writes it, for the front matter of a note it creates "
                                                    "(default: none)")] = None
    expected_version: Annotated[IdText | None, Meta(description=(
        "append only if the note is still this version (default: whatever it is now)"))] = None


@declare(result=int, engine="count", retryable=True, cli="count")
class Count(_Command, tag="count"):
    """How many memories the vault holds (earlier versions not counted)."""


@declare(result=list[QueryLogEntry], engine="queries", retryable=True, cli="queries")
class Queries(_Command, tag="queries"):
    """The most recent recalls from the query log, newest first."""

    limit: Annotated[int, Meta(description="how many")] = 50


@declare(result=Inspection, engine="inspect", retryable=True, cli="inspect", shell="commands:InspectShell",
         mcp=Mcp("Read one memory by id, in full: its text, fields, how often it was used, what replaced it, and"
              " its edges to other memories. Call it when a recalled result or a note names an id you need "
              "the details of.",
              args={"id": Arg()}, route="holder", view="inspection", tool="get"))
class Inspect(_Command, tag="inspect"):
    """One memory with its edges and its earlier versions."""

    id: ShortId


@declare(result=SourceSection, engine="source", retryable=True, cli="source", shell="commands:SourceShell",
         mcp=Mcp("Read the section of a note a memory was indexed from, exactly as it was in that version of the"
              " file (with its file path, headings and lines), even if the file changed since. Call it to "
              "quote or check a note-backed memory; memories you stored yourself have no source.",
              args={"id": Arg()}, route="holder", view="source"))
class ShowSource(_Command, tag="source"):
    """The section a memory was indexed from, as it was in that file version (docs/notes.md)."""

    id: Annotated[KeptId, Meta(description="a memory id, or its last 6+ characters")]


@declare(result=ExportDone, cli="export", flags="include_revisions=, records=", shell="commands:ExportShell")
class Export(_Command, tag="export"):
    """Every memory, streamed as progress frames of ExportChunk, then ExportDone. records=True: everything
    the vault holds instead, as export records (docs/export.md) in ExportChunk.records."""

    include_revisions: bool = False
    records: bool = False


@declare(result=ImportSummary, engine="import_records", writes=True, cli="import", flags="records=",
         shell="commands:ImportShell")
class ImportRecords(_Command, tag="import_records"):
    """Restore export records (docs/export.md) with new ids, memories first (a later request finds the
    memories of earlier ones); data is ImportSummary."""

    records: list[dict[str, Any]]


# Reflection, contradiction review and decay (docs/reflect.md, docs/decay.md) ---------------------
# Prepares and commits write (a session, a dropped candidate, insights, edges): one at a time per
# vault. reflect and contradiction_auto wait minutes on an LLM: they run on the concurrent path so
# they never hold the vault's write slot; the engine takes its own lock for the commit inside.

@declare(result=ReflectPrepared, engine="reflect_prepare", writes=True, panel=False, cli="reflect-prepare",
         flags="entity_id=--entity",
         mcp=Mcp("First step of reflection: group a brain's memories into clusters, each with a ready prompt. "
              "Call it when the user asks you to reflect or consolidate, or a brain has gathered many "
              "memories since its last insights. Answer each cluster's prompt yourself, keep only insights "
              "the cited memories support together, then call reflect_commit with the session_id within 10 "
              "minutes.",
              args={"entity_id": Arg("only this entity's memories"), "since": _SINCE._replace(field=None),
                    "max_memories": Arg("newest first", ge=5, le=500)}, view="session"))
class ReflectPrepare(_Command, tag="reflect_prepare"):
    """Cluster the scope's memories into a session, one ready prompt per cluster; data is ReflectPrepared."""

    entity_id: Annotated[Name | None, Meta(description="only this entity's memories (default: every entity)")] = None
    since: Annotated[Micros | None, Meta(description="only memories created since (ISO 8601 or microseconds) "
                                                     "(default: all)")] = None
    max_memories: Annotated[int, Meta(description="newest first, 5..500")] = 500


@declare(result=ReflectCommitted, engine="reflect_commit", writes=True, cli="reflect-commit",
         flags="session_id=, insights=", shell="reflectcmds:ReflectCommitShell",
         mcp=Mcp("Second step of reflection: store the insights you drew from a reflect_prepare session, all or "
              "none (a bad insight changes nothing and the error names it). Insights are saved as memories of"
              " kind INSIGHT and as notes in the vault's insights/ folder.",
              args={"session_id": Arg("from reflect_prepare"), "insights": Arg("what the clusters teach")},
              route="session"))
class ReflectCommit(_Command, tag="reflect_commit"):
    """Store the insights an agent drew from a prepared session, all or none (a notes folder also gets each as a
    note in its insights folder); data is ReflectCommitted."""

    session_id: IdText
    insights: list[InsightInput]


@declare(result=list[Insight], engine="insights", retryable=True, cli="insights",
         flags="entity_id=--entity, max_results=--limit",
         mcp=Mcp("Lessons reflection distilled in the {brain} brain ({who}), newest first. Read them at the start "
                 "of a conversation: they weigh more than one memory.", resource="insights", view="insights"))
class Insights(_Command, tag="insights"):
    """The vault's insights, newest first; data is a list of Insight."""

    entity_id: Annotated[Name | None, Meta(description="only this entity's insights (default: every entity)")] = None
    min_confidence: Annotated[float, Meta(description="0..1")] = 0.0
    max_results: Annotated[int, Meta(description="how many")] = 100


# It drops candidates that no longer hold (a write) but shows nothing new: pages listing candidates
# call it, and a refresh after it would call it again.
@declare(result=ContradictionPrepared, engine="contradiction_prepare", writes=True, panel=False,
         cli="contradictions list", shell="reflectcmds:ContradictionsListShell",
         mcp=Mcp("List the queued pairs of memories that look contradictory, both sides in full. Call it when "
              "the user asks about conflicting facts, or after a reflection; then decide each pair and call "
              "contradictions_commit (ask the user when you cannot tell).",
              args={"max_results": Arg(ge=1, le=1000)}, tool="contradictions", read_only=True))
class ContradictionPrepare(_Command, tag="contradiction_prepare"):
    """The queued contradiction candidates, both sides in full; data is ContradictionPrepared."""

    max_results: int = 100


@declare(result=ContradictionCommitted, engine="contradiction_commit", writes=True, cli="contradictions commit",
         shell="reflectcmds:ContradictionsCommitShell",
         mcp=Mcp("Apply your verdicts on queued contradiction candidates in one batch: contradiction (both stand"
              " and conflict: they get linked), revision (the newer replaces the older), neutral (dismissed).",
              args={"verdicts": Arg(min_length=1)}, tool="contradictions_commit"))
class ContradictionCommit(_Command, tag="contradiction_commit"):
    """Apply verdicts on queued candidates in one batch; data is ContradictionCommitted."""

    verdicts: list[ContradictionVerdict]


@declare(result=ReflectAutoResult, engine="reflect", panel=True, cli="reflect", flags="entity_id=--entity")
class Reflect(_Command, tag="reflect"):
    """reflect_prepare then reflect_commit, the configured LLM doing the reasoning; data is ReflectAutoResult.

    Fails with LLM_NOT_CONFIGURED when the vault has no [llm], and LLM_ERROR when the server fails.
    """

    entity_id: Annotated[Name | None, Meta(description="only this entity's memories (default: every entity)")] = None
    since: Annotated[Micros | None, Meta(description="only memories created since (ISO 8601 or microseconds) "
                                                     "(default: all)")] = None
    max_memories: Annotated[int, Meta(description="newest first, 5..500")] = 500


@declare(result=ContradictionAutoResult, engine="contradiction_auto", panel=True, cli="contradictions auto",
         shell="reflectcmds:ContradictionsAutoShell")
class ContradictionAuto(_Command, tag="contradiction_auto"):
    """The configured LLM gives verdicts on the queued candidates; data is ContradictionAutoResult."""

    max_results: int = 100
    min_confidence: float = 0.7


@declare(result=Memory, engine="unconsolidate", writes=True, params="record_id=id", cli="unconsolidate",
         text="restored {id} as a memory of its own")
class Unconsolidate(_Command, tag="unconsolidate"):
    """Make a restatement record (see history) a memory of its own again; data is that Memory."""

    id: ShortId


@declare(result=list[tuple[str, str]], engine="consolidate", writes=True, params="*", cli="consolidate",
         shell="commands:ConsolidateShell")
class Consolidate(_Command, tag="consolidate"):
    """Merge every restatement in the vault into the memory it repeats; data is [[restatement, survivor], ...]."""

    dry_run: Annotated[bool, Meta(description="list what would be merged; change nothing")] = False


@declare(result=list[Memory], engine="forget_candidates", retryable=True)
class ForgetCandidates(_Command, tag="forget_candidates"):
    """Memories decayed below the forget threshold, least alive first; lists, deletes nothing."""

    # Judge decay as of this time (microseconds since the epoch); now when absent.
    now: Micros | None = None


@declare(result=PanelState, vault=False, method="panel", daemon="ensure_panel")
class Panel(_Command, tag="panel"):
    """Make sure the Memory Palace web panel is served (on `port`, else the configured one); data is PanelState."""

    port: Annotated[int, Meta(ge=1, le=65535)] | None = None


COMMAND_TYPES: dict[str, type[_Command]] = {cls.tag(): cls for cls in _Command.__subclasses__()}
Command = Union[tuple(COMMAND_TYPES.values())]  # type: ignore[valid-type]
# Generated: what each command's reply data decodes to, where the command alone says it.
RESULT_TYPES: dict[str, Any] = {tag: cls.spec.result for tag, cls in COMMAND_TYPES.items()
                                if cls.spec.result is not None}


def short_id_fields(cls: type[msgspec.Struct], kind: Any = None) -> tuple[str, ...]:
    """The fields of a request Struct that hold ShortIds (alone, optional, or in a list); of one kind
    ("kept": KeptId) when given."""
    return tuple(f.name for f in msgspec.structs.fields(cls)
                 if (found := _short_id_kind(f.type)) and (kind is None or found == kind))


def _short_id_kind(type_: Any) -> Any:
    for meta in getattr(type_, "__metadata__", ()):
        if isinstance(meta, Meta) and meta.extra and meta.extra.get("short_id"):
            return meta.extra["short_id"]
    return next((kind for arg in get_args(type_) if arg is not Ellipsis and (kind := _short_id_kind(arg))), None)


class Request(msgspec.Struct, kw_only=True, forbid_unknown_fields=True, omit_defaults=True):
    id: Any = None
    command: Command
    vault_path: PathText | None = None


class BadRequest(InvalidInput):
    """A request refused at the edge; request_id is its id when it had a usable one."""

    def __init__(self, message: str, request_id: Any = None) -> None:
        super().__init__(message)
        self.request_id = request_id


MAX_REQUEST_ID_CHARS = 256
_decode_any = msgspec.json.Decoder().decode

def convert(value: Any, type_: Any, **options: Any) -> Any:
    """msgspec.convert, safe to call from many threads at once (see schema.decoder)."""
    decoder("json", type_)
    return msgspec.convert(value, type_, **options)


def decode_request(body: bytes) -> Request:
    """Decode and validate one request frame, naming what is wrong (BadRequest, with the id when usable).

    Whatever a client sends, the result is a Request whose every value the engine can hold, or a
    BadRequest: never another exception. Messages quote at most a few dozen characters of the input.
    """
    try:
        raw = _decode_any(body)
    except UnicodeDecodeError as exc:
        raise BadRequest(f"the request is not valid UTF-8 (byte {exc.start}: {exc.reason})") from None
    except RecursionError:
        raise BadRequest(f"the request nests deeper than {MAX_NESTING} levels") from None
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise BadRequest(f"invalid JSON: {exc}") from None
    if not isinstance(raw, dict):
        raise BadRequest(f"a request must be a JSON object, got {type(raw).__name__}")
    request_id = raw.get("id")
    if not (request_id is None or isinstance(request_id, (bool, float))
            or (isinstance(request_id, int) and INT64[0] <= request_id <= INT64[1])
            or (isinstance(request_id, str) and len(request_id) <= MAX_REQUEST_ID_CHARS)):
        raise BadRequest(f"id must be null, a number that fits in 64 bits or a string of at most "
                         f"{MAX_REQUEST_ID_CHARS} characters")
    problem = structure_problem(raw, "the request", lambda n: excerpt(str(n)))
    if problem:
        raise BadRequest(problem, request_id)
    command = raw.get("command")
    if not isinstance(command, dict) or not isinstance(command.get("type"), str):
        raise BadRequest('a request needs "command": {"type": "<name>", ...}', request_id)
    if command["type"] not in COMMAND_TYPES:
        raise BadRequest(f"unknown command {excerpt(command['type'])}; known: {', '.join(sorted(COMMAND_TYPES))}",
                         request_id)
    try:
        request = convert(raw, Request)
    except msgspec.ValidationError as exc:
        raise BadRequest(f"invalid {command['type']} request: {exc}", request_id) from None
    for field, value in _paths(request):
        problem = path_problem(value)
        if problem:
            raise BadRequest(f"invalid {command['type']} request: {field} {problem}", request_id)
    return request


def _paths(request: Request) -> Iterator[tuple[str, str]]:
    """Every path a request names (its PathText fields), with the field's name."""
    if request.vault_path is not None:
        yield "vault_path", request.vault_path
    for name in _path_fields(type(request.command)):
        value = getattr(request.command, name)
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, str):
                yield f"`{name}`", item


@functools.cache
def _path_fields(cls: type) -> tuple[str, ...]:
    annotations: dict[str, Any] = {}
    for klass in reversed(cls.__mro__):
        annotations.update(getattr(klass, "__annotations__", {}))
    return tuple(name for name in cls.__struct_fields__ if "PathText" in str(annotations.get(name, "")))


def clip(text: str, limit: int) -> str:
    """text, cut to limit characters (saying how long it was) when longer."""
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


def excerpt(value: Any, limit: int = 60) -> str:
    """repr(value), cut to about limit characters: what a message or a log line may quote of client input."""
    text = value if isinstance(value, str) else repr(value)
    if len(text) > limit:
        text = f"{text[:limit]}... ({len(text)} characters)"
    return repr(text) if isinstance(value, str) else text


class Response(msgspec.Struct, kw_only=True):
    id: Any = None
    status: str = OK
    status_code: str = "OK"
    data: Any = None
    error: str | None = None


class RawResponse(msgspec.Struct, kw_only=True):
    """A reply as the client first reads it: data stays raw until we know which type it has."""

    id: Any = None
    status: str
    status_code: str = "OK"
    data: msgspec.Raw = msgspec.Raw(b"null")
    error: str | None = None



def result_type(command: _Command) -> Any:
    """What the reply data of this request decodes to: RESULT_TYPES, or what the request itself decides."""
    if command.spec.batch is not None:
        return command.spec.result if getattr(command, command.spec.batch) is None else list[command.spec.result]
    # The markdown-vault Structs live with the indexer; imported only when those commands are used.
    if isinstance(command, IndexFollow):
        from .notes.indexer import IndexSummary

        return IndexSummary | None
    if isinstance(command, Index):
        if command.phase == 1:
            return ScanSummary
        from .notes.indexer import IndexSummary

        return IndexSummary
    if isinstance(command, List):
        from .notes.status import FileStatus

        return list[FileStatus]
    return RESULT_TYPES[command.tag()]


def progress_type(command: _Command) -> Any:
    if isinstance(command, (Subscribe, Feed)):
        return SubscriptionPush
    if isinstance(command, Export):
        return ExportChunk
    if isinstance(command, (Index, IndexFollow)):
        from .notes.indexer import Progress

        return Progress
    if isinstance(command, Reembed):
        return ReembedProgress
    return dict[str, Any]


# Framing ------------------------------------------------------------------------------------

_encoder = msgspec.json.Encoder()


def encode_frame(message: Any) -> bytes:
    """Length prefix plus JSON; a body over MAX_FRAME raises MessageTooLarge before anything is sent."""
    body = _encoder.encode(message)
    if len(body) > MAX_FRAME:
        raise MessageTooLarge(f"message is {len(body)} bytes; the limit is {MAX_FRAME}")
    return HEADER.pack(len(body)) + body


def frame_length(header: bytes) -> int:
    """The body length a header announces; MessageTooLarge when over the limit."""
    (length,) = HEADER.unpack(header)
    if length > MAX_FRAME:
        raise MessageTooLarge(f"frame of {length} bytes refused; the limit is {MAX_FRAME}")
    return length


def _recv_exactly(sock: socket.socket, n: int) -> bytes | None:
    chunks: list[bytes] = []
    remaining = n
    while remaining:
        chunk = sock.recv(min(remaining, 1 << 20))
        if not chunk:
            if remaining == n:
                return None
            raise ProtocolError(f"connection closed {n - remaining} bytes into a {n}-byte read")
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def recv_frame(sock: socket.socket) -> bytes | None:
    """One frame body from a blocking socket; None when the peer closed between frames."""
    header = _recv_exactly(sock, HEADER.size)
    if header is None:
        return None
    body = _recv_exactly(sock, frame_length(header))
    if body is None:
        raise ProtocolError("connection closed after a frame header")
    return body


def decode_response(body: bytes) -> RawResponse:
    try:
        return decoder("json", RawResponse).decode(body)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise ProtocolError(f"invalid reply from the daemon: {exc}") from None


def decode_data(raw: msgspec.Raw, type_: Any) -> Any:
    try:
        return decoder("json", type_).decode(raw)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise ProtocolError(f"unexpected reply data from the daemon: {exc}") from None


def request_frame(request_id: Any, command: _Command, vault_path: str | None) -> bytes:
    try:
        return encode_frame(Request(id=request_id, command=command, vault_path=vault_path))
    except UnicodeEncodeError as exc:  # a lone surrogate: no UTF-8 text can carry it
        raise InvalidInput(f"this {command.__struct_config__.tag} cannot be sent: a text holds a lone surrogate "
                           f"{exc.object[exc.start]!r}, which is not valid Unicode") from None
    except (TypeError, msgspec.EncodeError) as exc:  # e.g. a context holding something JSON cannot carry
        raise InvalidInput(f"this {command.__struct_config__.tag} cannot be sent: {exc}") from None
