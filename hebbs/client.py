"""The Python SDK: the engine's methods, served by the hebbs daemon over its Unix socket.

    from hebbs import Client
    with Client(global_=True) as hb:
        hb.remember("Acme uses Salesforce", importance=0.7, entity_id="acme_corp")
        for r in hb.recall("what CRM do they use"):
            print(r.score, r.memory.content)

Results are the engine's own Structs (hebbs.schema); an error frame raises the hebbs.errors class
its status code names. The first call starts the daemon if none answers, and a call made after
the daemon restarted reconnects by itself. `AsyncClient` has the same methods as coroutines.

Like the CLI, this module must not import numpy, the model or the engine.
"""

from __future__ import annotations

import enum
import itertools
import os
import re
import select
import socket
import threading
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from . import validate, writekeys
from .errors import DaemonBusy, HebbsError, InvalidInput, VaultNotInitialized
from .paths import find_project_vault, hebbs_home, resolve_vault, socket_path
from .protocol import (HEADER, PROGRESS, Close, DaemonUnavailable, Export, Feed, RememberItem, Subscribe,
                       Subscribed, SubscriptionPush, _Command, convert, decode_data, decode_response, frame_length,
                       request_frame)
from .recall.brains import BRAINS, GLOBAL
from .schema import Memory, RecallResult, RecallResults, ScoringWeights
from .client_methods import AsyncMethods, Methods
from .transport import (ProgressCallback, Vanished, aopen, apending_error, aread_reply, anext_frame,
                        closed_by_daemon, connect, export_chunk, gone, may_retry, next_frame, pending_error,
                        read_reply, start_daemon, unreachable)

if TYPE_CHECKING:
    import asyncio

# asyncio and subprocess are imported where they are used: a CLI call needs neither, and together
# they are a good part of its start-up time.

__all__ = ["Client", "AsyncClient", "Subscription", "AsyncSubscription", "start_daemon", "connect"]


# Arguments ------------------------------------------------------------------------------------

def to_micros(value: Any, field: str, *, day_end: bool = False) -> int | None:
    """A tz-aware datetime, an ISO 8601 text or microseconds since the epoch, as microseconds (an
    integer goes as given: the daemon checks its range). day_end: a date alone is its day's last microsecond."""
    if value is None or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    return validate.timestamp_us(value, field, day_end=day_end)


def _time_range(value: Any) -> tuple[int | None, int | None] | None:
    if value is None:
        return None
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        raise InvalidInput("time_range must be a pair (start, end); either may be None")
    return to_micros(value[0], "time_range start"), to_micros(value[1], "time_range end", day_end=True)


def _weights(value: Any) -> ScoringWeights | None:
    return None if value is None else validate.scoring_weights(value)


def _edge_specs(edges: Iterable[Any] | None) -> list[tuple[str, str, float]]:
    """(target id, edge type, confidence) triples as the protocol carries them; confidence defaults to 1."""
    out = []
    for edge in edges or ():
        if not isinstance(edge, (tuple, list)) or len(edge) not in (2, 3):
            raise InvalidInput(f"an edge is (target_id, edge_type[, confidence]), got {edge!r}")
        target, edge_type = edge[0], edge[1]
        confidence = edge[2] if len(edge) == 3 else 1.0
        out.append((target, getattr(edge_type, "name", edge_type), confidence))
    return out


def _remember_item(item: Any) -> RememberItem:
    if isinstance(item, RememberItem):
        return item
    if isinstance(item, Memory):
        item = {"content": item.content, "importance": item.importance, "context": item.context,
                "entity_id": item.entity_id, "created_at": item.created_at, "kind": item.kind.value,
                "source": item.source, "agent": item.agent, "session": item.session}
    if isinstance(item, str):
        item = {"content": item}
    if not isinstance(item, dict):
        raise InvalidInput(f"a batch item must be a dict with at least 'content', got {type(item).__name__}")
    item = dict(item)
    item["created_at"] = to_micros(item.get("created_at"), "created_at")
    if "kind" in item:
        item["kind"] = _kind(item["kind"])
    if "edges" in item:
        item["edges"] = _edge_specs(item["edges"])
    if "supersedes" in item:
        item["supersedes"] = list(item["supersedes"] or ())
    try:
        return convert(item, RememberItem, from_attributes=True)
    except msgspec.ValidationError as exc:
        raise InvalidInput(f"invalid batch item: {exc}") from None


def _resolve(vault: os.PathLike | str | None, global_: bool, home: Path,
             cwd: os.PathLike | str | None) -> tuple[Path | None, HebbsError | None]:
    """The client's vault. A vault asked for by name must exist now; a project vault looked for from
    the current directory may be missing: ping, status and daemon control need none."""
    if vault is not None or global_:
        return resolve_vault(vault, global_, home, sdk=True), None
    try:
        return resolve_vault(None, False, home, Path(cwd) if cwd is not None else None, sdk=True), None
    except VaultNotInitialized as exc:
        return None, exc


def _brain_vaults(brains: Sequence[str] | str, vault_path: Path | None, home: Path,
                  cwd: os.PathLike | str | None) -> tuple[str, list[str] | None, list[str]]:
    """The vaults of `brains` ("project", "global") as (the request's vault, the others or None, notes).

    "project" is the client's own vault when that is a project vault, else the nearest one above
    cwd; when there is none, the others are searched and a note says so (an agent asking for both
    brains in a folder without a project vault still gets the global one).
    """
    wanted = [brains] if isinstance(brains, str) else list(brains)
    unknown = [b for b in wanted if b not in BRAINS]
    if unknown or not wanted:
        raise InvalidInput(f"brains must name some of {', '.join(BRAINS)}, got {brains!r}")
    paths: list[str] = []
    notes: list[str] = []
    for brain in dict.fromkeys(wanted):
        if brain == GLOBAL:
            paths.append(str(home))
        elif vault_path is not None and vault_path.resolve() != home.resolve():
            paths.append(str(vault_path))
        else:
            start = Path(cwd) if cwd is not None else Path.cwd()
            found = find_project_vault(start, home)
            if found is None:
                notes.append(f"no project vault in {start.absolute()} or above it: the project vault was skipped")
            else:
                paths.append(str(found))
    if not paths:
        raise VaultNotInitialized(f"no project vault in {Path(cwd or Path.cwd()).absolute()} or any folder above it; "
                                  "create one with `hebbs init`, or ask for the global vault")
    # One vault: its plain recall, unlabelled; several: one merged, labelled list.
    return paths[0], paths[1:] or None, notes


def _with_notes(found: RecallResults, notes: list[str]) -> RecallResults:
    found.notes[:0] = notes
    return found


def _abs(path: os.PathLike | str | None) -> str | None:
    return None if path is None else str(Path(path).expanduser().absolute())


def _kind(kind: Any) -> str:
    return kind.value if hasattr(kind, "value") else str(kind)


def _wire(value: Any, field: str, annotation: str) -> Any:
    """One typed-method argument as its request field carries it: a time as microseconds, a path
    absolute (the daemon runs elsewhere), an enum by its name, one id as a list of one; the daemon
    checks the rest, as it checks every request."""
    if value is None or value is msgspec.UNSET:
        return value
    if "tuple[Micros" in annotation:
        return _time_range(value)
    if "EdgeSpec" in annotation:
        return _edge_specs(value)
    if "RememberItem" in annotation:
        if isinstance(value, (str, bytes, dict)):
            raise InvalidInput(f"{field} must be a list of items (dicts with at least 'content')")
        return [_remember_item(item) for item in value]
    if "ScoringWeights" in annotation:
        return _weights(value)
    if "Micros" in annotation or annotation in ("AsOf", "PointInTime"):
        return to_micros(value, field)
    if "PathText" in annotation:
        if not annotation.startswith("list["):
            return _abs(value)
        return [_abs(p) for p in ([value] if isinstance(value, str) else value)]
    if isinstance(value, enum.Enum):
        return value.name
    if "list[" in annotation:
        if isinstance(value, str) and _TEXTS.search(annotation):
            return [value]
        if isinstance(value, (str, bytes, dict)):
            raise InvalidInput(f"{field} must be a list")
        return [item.name if isinstance(item, enum.Enum) else item for item in value]
    return value


# A list of these takes one text alone as a list of one (an id, a strategy, an edge type).
_TEXTS = re.compile(r"list\[(ShortId|Name|str|EdgeTypeName)\]")


# What both clients share: the vault, request ids and frames, retry rules, reply decoding ------

class _BaseClient(Methods):
    """Everything but the transport, as httpx splits Client and AsyncClient. The typed methods, one per
    command, are generated from their declarations into hebbs/client_methods.py (`Methods`; AsyncClient
    awaits them, `AsyncMethods`): each sends through `call`, which builds the request and hands it to
    `_send`, the one thing the two transports do differently. Defaults are the request Structs' own
    (tests/test_parity.py)."""

    vault_path: Path | None
    home: Path

    def __init__(self, vault: os.PathLike | str | None, global_: bool, home: os.PathLike | str | None,
                 autostart: bool, cwd: os.PathLike | str | None, agent: str | None = None,
                 session: str | None = None) -> None:
        self.home = hebbs_home(home)
        # What the memories this client stores say about who stored them (Spec.scoped): an empty
        # variable is no agent, as an unset one.
        self.agent = agent or os.environ.get("HEBBS_AGENT") or None
        self.session = session or os.environ.get("HEBBS_SESSION") or None
        self.autostart = autostart
        self.cwd = cwd
        self.vault_path, self._vault_error = _resolve(vault, global_, self.home, cwd)
        self._ids = itertools.count(1)
        # Remembers whose outcome stayed unknown: the same call again reuses their keys (hebbs/writekeys.py).
        self._unsettled = writekeys.Unsettled()

    def call(self, command: type[_Command], progress: ProgressCallback | None = None, *,
             vault: bool | None = None, method: str | None = None, **fields: Any) -> Any:
        """Send a declared command given as its typed method's arguments, as every generated method does
        (`hb.call(Recall, cue="...", brains="global")` is `hb.recall("...", brains="global")`): each argument
        as its field carries it (a time as microseconds, a path absolute, one id as a list); `brains` (a
        command declared with them) as the vaults the request names; `vault` (a command that may name
        one, declared `vault=None`) whether this client's vault goes with it; `method`, one of the
        declaration's further methods (`also`: stats, remember_many) when not the first. `request` sends
        a request Struct as it is."""
        brains = fields.pop("brains", None)
        unknown = sorted(set(fields) - set(command.__struct_fields__))
        if unknown:
            raise InvalidInput(f"{command.tag()} has no field {', '.join(map(repr, unknown))}; its fields: "
                               f"{', '.join(command.__struct_fields__)}")
        values = {f: _wire(v, f, command.__annotations__[f]) for f, v in fields.items()}
        request = command(**values)
        if command.spec.scoped:
            self._scoped(request)
        if command.spec.brains == "both" and brains is None:
            brains = [GLOBAL] if self.vault_path is not None and self.vault_path.resolve() == self.home.resolve() \
                else BRAINS
        returns = command.spec.returns
        if method is not None:
            other = next((m for m in command.spec.also if m.name == method), None)
            if other is None:
                raise InvalidInput(f"{command.tag()} has no further method {method!r}"
                                   + (f"; it has {', '.join(m.name for m in command.spec.also)}"
                                      if command.spec.also else ""))
            returns = other.returns
            vault = other.vault  # True: this client's vault, which must exist
        elif vault is not None:  # the client's vault if it has one (status: the daemon's state alone without)
            vault = vault and self.vault_path is not None
        if brains is None:
            return self._send(request, vault=vault, progress=progress, then=returns)
        vault, request.vaults, notes = _brain_vaults(brains, self.vault_path, self.home, self.cwd)
        return self._send(request, vault=vault, then=lambda found: _with_notes(found, notes))

    def _send(self, command: _Command, *, vault: bool | str | None = None, progress: ProgressCallback | None = None,
              then: Callable[[Any], Any] | None = None) -> Any:
        raise NotImplementedError

    def _scoped(self, request: Any) -> None:
        """This client's agent and session on the request's one memory or each item of its batch, where
        they give none."""
        for target in request.items if request.items is not None else [request]:
            if target.agent is None:
                target.agent = self.agent
            if target.session is None:
                target.session = self.session

    def _vault(self) -> str:
        if self.vault_path is None:
            assert self._vault_error is not None
            raise self._vault_error
        return str(self.vault_path)

    def _frame(self, command: _Command, vault: bool | str | None) -> tuple[int, bytes]:
        """A new request id and the frame that carries the command (to this client's vault if `vault`,
        to the vault directory `vault` names if it is one, and as the command's declaration says if None)."""
        if vault is None:
            vault = command.spec.vault
            if isinstance(vault, str):  # the client's vault unless the request names a folder itself
                vault = getattr(command, vault) is None
        vault_path = vault if isinstance(vault, str) else self._vault() if vault else None
        request_id = next(self._ids)
        return request_id, request_frame(request_id, command, vault_path)

# The synchronous client -----------------------------------------------------------------------

class Client(_BaseClient):
    """Talks to the daemon of `home` about one vault: `vault` (a notes folder or its .hebbs dir),
    the global vault (`global_=True`), or else the nearest project vault above the current directory.

    One connection, one request at a time: threads sharing a Client take turns (give each its own
    Client to run them side by side; they are cheap), or use AsyncClient. `timeout` bounds each
    socket operation (None: wait as long as the daemon works). `agent` and `session` (default:
    $HEBBS_AGENT, $HEBBS_SESSION) go on each memory it stores that does not name its own.
    """

    def __init__(self, vault: os.PathLike | str | None = None, global_: bool = False,
                 home: os.PathLike | str | None = None, *, autostart: bool = True, timeout: float | None = None,
                 cwd: os.PathLike | str | None = None, agent: str | None = None, session: str | None = None) -> None:
        super().__init__(vault, global_, home, autostart, cwd, agent, session)
        self.timeout = timeout
        self._sock: socket.socket | None = None
        # Two threads on one connection interleave their frames: one read the other's reply header
        # as a length (a "frame of 2 GB refused"), or waited forever for a reply already taken.
        self._turn = threading.Lock()
        self._turn_owner: int | None = None

    # Transport --------------------------------------------------------------------------------

    def _connection(self) -> socket.socket:
        if self._sock is None:
            self._sock = connect(self.home, autostart=self.autostart, timeout=self.timeout)
        return self._sock

    def _drop(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def request(self, command: _Command, *, vault: bool | str | None = None,
                progress: ProgressCallback | None = None) -> Any:
        """Send one command and return its reply's data, decoded to the command's result type.

        `vault`: this client's vault (True), none (False), the vault directory given, or (None) as the
        command's declaration says."""
        if self._turn_owner == threading.get_ident():
            raise InvalidInput("a Client cannot send a request from inside a progress callback of its own "
                               "request; use another Client")
        with self._turn:
            self._turn_owner = threading.get_ident()
            fingerprint, sent, keys = self._unsettled.prepare(command, (vault, self.vault_path))
            try:
                try:
                    result = self._request(sent, vault, progress)
                except TimeoutError:
                    raise DaemonUnavailable(f"no reply from the daemon within {self.timeout:g}s (this Client's "
                                            "timeout); the request may still complete there") from None
            except DaemonUnavailable as exc:
                if not isinstance(exc, DaemonBusy):  # BUSY: refused before the request was read
                    self._unsettled.unknown(fingerprint, sent, keys, exc)
                raise
            except HebbsError:
                self._unsettled.settled(fingerprint)  # answered: whatever it was, nothing is pending
                raise
            finally:
                self._turn_owner = None
            self._unsettled.settled(fingerprint)
            return writekeys.own_results(result, command, sent)

    def _request(self, command: _Command, vault: bool | str, progress: ProgressCallback | None) -> Any:
        request_id, frame = self._frame(command, vault)
        for attempt in range(2):
            if self._sock is not None and closed_by_daemon(self._sock):
                self._drop()
            sock = self._connection()
            try:
                try:
                    sock.sendall(frame)
                except OSError as exc:
                    error = pending_error(sock)
                    if error is not None:
                        raise error from None
                    raise Vanished(str(exc), sent=False) from None
                return read_reply(sock, request_id, command, progress)
            except Vanished as exc:
                self._drop()
                if may_retry(attempt, exc, command):
                    continue
                raise gone(exc, command) from None
            except BaseException:
                self._drop()  # a half-read reply would poison the next call
                raise
        raise AssertionError("unreachable")

    def _send(self, command: _Command, *, vault: bool | str | None = None, progress: ProgressCallback | None = None,
              then: Callable[[Any], Any] | None = None) -> Any:
        result = self.request(command, vault=vault, progress=progress)
        return result if then is None else then(result)

    def close(self) -> None:
        self._drop()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def memories(self, *, include_revisions: bool = False) -> Iterator[Memory]:
        """Every memory of the vault, streamed (what `export` sends)."""
        return self.export(include_revisions=include_revisions)

    def export(self, *, include_revisions: bool = False) -> Iterator[Memory]:
        """Every memory of the vault, streamed (on a connection of its own, so a half-read export is harmless)."""
        return self._stream(Export(include_revisions=include_revisions))

    def export_records(self) -> Iterator[dict[str, Any]]:
        """Everything the vault holds as export records (docs/export.md), streamed, a versioned header first."""
        return self._stream(Export(records=True))

    def _stream(self, command: Export) -> Iterator[Any]:
        side = Client(self._vault(), home=self.home, autostart=self.autostart, timeout=self.timeout)
        request_id, frame = side._frame(command, vault=True)
        # The reply is read frame by frame: yield each chunk as it arrives.
        sock = side._connection()
        try:
            sock.sendall(frame)
            while (chunk := export_chunk(next_frame(sock, request_id), command.records)) is not None:
                yield from chunk
        except Vanished as exc:
            raise DaemonUnavailable(f"the daemon went away during export: {exc}") from None
        finally:
            side.close()

    def subscribe(self, entity_id: str | None = None, confidence_threshold: float = 0.5, *,
                  author: str | None = None, agent: str | None = None, session: str | None = None) -> "Subscription":
        """A stream of memories matching what you feed it (on a connection of its own); `author`, `agent`
        and `session` narrow it as they narrow recall."""
        return Subscription(Client(self._vault(), home=self.home, autostart=self.autostart, timeout=self.timeout),
                            Subscribe(entity_id=entity_id, confidence_threshold=confidence_threshold,
                                      author=author, agent=agent, session=session))


class Subscription:
    """An open subscription: feed() sends text and returns the new matches it pushed.

    If the daemon restarts, the next feed subscribes again; matches already delivered are
    remembered here too, so none is delivered twice.
    """

    def __init__(self, client: Client, request: Subscribe) -> None:
        self._client = client
        self.request = request  # sent again when the daemon restarted
        self.delivered: set[str] = set()
        self.info = self._open()

    def _open(self) -> Subscribed:
        return self._client.request(self.request)

    @property
    def id(self) -> str:
        return self.info.subscription_id

    def feed(self, text: str) -> list[RecallResult]:
        pushed: list[RecallResult] = []

        def collect(push: SubscriptionPush) -> None:
            pushed.extend(push.matches)

        for attempt in range(2):
            try:
                self._client.request(Feed(text=text, subscription_id=self.id), progress=collect)
                break
            except DaemonUnavailable:
                if attempt:
                    raise
                self.info = self._open()
        return self._fresh(pushed)

    def wait(self, timeout: float | None = None) -> list[RecallResult]:
        """The matches the daemon pushed on its own for memories stored since the subscription opened
        (each found by a text fed before, as a feed would find it): waits up to timeout seconds for a
        push (None: until one comes); [] when none came in time, or the daemon went away (the next
        feed subscribes again)."""
        sock = self._client._sock
        if sock is None:
            return []
        pushed: list[RecallResult] = []
        wait: float | None = timeout
        try:
            while select.select([sock], [], [], wait)[0]:
                reply = next_frame(sock, None)
                if reply.status == PROGRESS:
                    pushed.extend(decode_data(reply.data, SubscriptionPush).matches)
                wait = 0  # and whatever else came with it
        except Vanished:
            self._client._drop()
        return self._fresh(pushed)

    def fileno(self) -> int:
        """The subscription's connection, for select() beside other input (readable: call wait(0));
        -1 when it has none (the daemon went away: the next feed subscribes again)."""
        sock = self._client._sock
        return -1 if sock is None else sock.fileno()

    def _fresh(self, pushed: list[RecallResult]) -> list[RecallResult]:
        fresh = [r for r in pushed if r.memory.id not in self.delivered]
        self.delivered.update(r.memory.id for r in fresh)
        return fresh

    def close(self) -> None:
        try:
            self._client.request(Close(subscription_id=self.id), vault=False)
        except HebbsError:
            pass
        finally:
            self._client.close()

    def __enter__(self) -> "Subscription":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# The asynchronous client ----------------------------------------------------------------------

class AsyncClient(AsyncMethods, _BaseClient):
    """The same methods as Client, as coroutines. Concurrent calls use a small pool of connections."""

    def __init__(self, vault: os.PathLike | str | None = None, global_: bool = False,
                 home: os.PathLike | str | None = None, *, autostart: bool = True,
                 cwd: os.PathLike | str | None = None, agent: str | None = None, session: str | None = None) -> None:
        super().__init__(vault, global_, home, autostart, cwd, agent, session)
        self._idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []

    async def _open(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        import asyncio

        path = socket_path(self.home)
        try:
            return await aopen(path)
        except (FileNotFoundError, ConnectionRefusedError):
            if not self.autostart:
                raise DaemonUnavailable(
                    f"no hebbs daemon answers on {path}; start one with `hebbs daemon start`") from None
        except OSError as exc:
            raise unreachable(path, exc) from None
        await asyncio.to_thread(start_daemon, self.home)
        try:
            return await aopen(path)
        except OSError as exc:
            raise unreachable(path, exc) from None

    async def request(self, command: _Command, *, vault: bool | str | None = None,
                      progress: ProgressCallback | None = None) -> Any:
        fingerprint, sent, keys = self._unsettled.prepare(command, (vault, self.vault_path))
        try:
            result = await self._request(sent, vault, progress)
        except DaemonUnavailable as exc:
            if not isinstance(exc, DaemonBusy):
                self._unsettled.unknown(fingerprint, sent, keys, exc)
            raise
        except HebbsError:
            self._unsettled.settled(fingerprint)
            raise
        self._unsettled.settled(fingerprint)
        return writekeys.own_results(result, command, sent)

    async def _request(self, command: _Command, vault: bool | str | None, progress: ProgressCallback | None) -> Any:
        request_id, frame = self._frame(command, vault)
        for attempt in range(2):
            conn = self._idle.pop() if self._idle else await self._open()
            reader, writer = conn
            if reader.at_eof() or writer.is_closing():  # closed by the daemon while idle in the pool
                writer.close()
                conn = await self._open()
                reader, writer = conn
            try:
                try:
                    writer.write(frame)
                    await writer.drain()
                except (ConnectionError, OSError) as exc:
                    error = await apending_error(reader)
                    if error is not None:
                        raise error from None
                    raise Vanished(str(exc), sent=False) from None
                result = await aread_reply(reader, request_id, command, progress)
            except Vanished as exc:
                writer.close()
                if may_retry(attempt, exc, command):
                    continue
                raise gone(exc, command) from None
            except BaseException:
                writer.close()
                raise
            self._idle.append(conn)
            return result
        raise AssertionError("unreachable")

    async def close(self) -> None:
        while self._idle:
            _, writer = self._idle.pop()
            writer.close()

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _send(self, command: _Command, *, vault: bool | str | None = None,
                    progress: ProgressCallback | None = None, then: Callable[[Any], Any] | None = None) -> Any:
        result = await self.request(command, vault=vault, progress=progress)
        return result if then is None else then(result)

    def memories(self, *, include_revisions: bool = False) -> AsyncIterator[Memory]:
        """Every memory of the vault, streamed (`async for m in hb.memories()`)."""
        return self.export(include_revisions=include_revisions)

    async def export(self, *, include_revisions: bool = False) -> AsyncIterator[Memory]:
        async for memory in self._stream(Export(include_revisions=include_revisions)):
            yield memory

    async def export_records(self) -> AsyncIterator[dict[str, Any]]:
        async for record in self._stream(Export(records=True)):
            yield record

    async def _stream(self, command: Export) -> AsyncIterator[Any]:
        request_id, frame = self._frame(command, vault=True)
        reader, writer = await self._open()
        try:
            writer.write(frame)
            await writer.drain()
            while (chunk := export_chunk(await anext_frame(reader), command.records)) is not None:
                for memory in chunk:
                    yield memory
        except Vanished as exc:
            raise DaemonUnavailable(f"the daemon went away during export: {exc}") from None
        finally:
            writer.close()

    async def subscribe(self, entity_id: str | None = None, confidence_threshold: float = 0.5, *,
                        author: str | None = None, agent: str | None = None,
                        session: str | None = None) -> "AsyncSubscription":
        subscription = AsyncSubscription(AsyncClient(self._vault(), home=self.home, autostart=self.autostart),
                                         Subscribe(entity_id=entity_id, confidence_threshold=confidence_threshold,
                                                   author=author, agent=agent, session=session))
        await subscription._subscribe()
        return subscription


class AsyncSubscription:
    """Subscription for AsyncClient: `await sub.feed(text)` returns the new matches."""

    def __init__(self, client: AsyncClient, request: Subscribe) -> None:
        self._client = client
        self.request = request
        self.delivered: set[str] = set()
        self.info: Subscribed | None = None

    async def _subscribe(self) -> None:
        # The subscription lives on one connection: drop any pooled others so the feed reuses it.
        await self._client.close()
        self.info = await self._client.request(self.request)

    @property
    def id(self) -> str:
        assert self.info is not None
        return self.info.subscription_id

    async def feed(self, text: str) -> list[RecallResult]:
        pushed: list[RecallResult] = []
        for attempt in range(2):
            try:
                await self._client.request(Feed(text=text, subscription_id=self.id),
                                           progress=lambda push: pushed.extend(push.matches))
                break
            except (DaemonUnavailable, HebbsError) as exc:
                # NOT_FOUND: the connection that held the subscription was replaced; subscribe again.
                if attempt or not (isinstance(exc, DaemonUnavailable) or exc.status_code == "NOT_FOUND"):
                    raise
                await self._subscribe()
        return self._fresh(pushed)

    async def wait(self, timeout: float | None = None) -> list[RecallResult]:
        """As Subscription.wait: the matches pushed for memories stored since, waiting up to timeout
        seconds (None: until one comes); [] when none came in time."""
        import asyncio

        if not self._client._idle:
            return []
        reader, writer = self._client._idle[-1]
        pushed: list[RecallResult] = []
        wait = timeout
        try:
            while True:
                try:
                    async with asyncio.timeout(wait):
                        header = await reader.readexactly(HEADER.size)
                except TimeoutError:
                    break
                body = await reader.readexactly(frame_length(header))
                reply = decode_response(body)
                if reply.status == PROGRESS:
                    pushed.extend(decode_data(reply.data, SubscriptionPush).matches)
                wait = 0
        except (asyncio.IncompleteReadError, ConnectionError):
            self._client._idle.remove((reader, writer))
            writer.close()
        return self._fresh(pushed)

    def _fresh(self, pushed: list[RecallResult]) -> list[RecallResult]:
        fresh = [r for r in pushed if r.memory.id not in self.delivered]
        self.delivered.update(r.memory.id for r in fresh)
        return fresh

    async def close(self) -> None:
        try:
            await self._client.request(Close(subscription_id=self.id), vault=False)
        except HebbsError:
            pass
        finally:
            await self._client.close()

    async def __aenter__(self) -> "AsyncSubscription":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


