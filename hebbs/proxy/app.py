"""The proxy's HTTP side: Starlette on 127.0.0.1, httpx to the upstream OpenAI-compatible server.

What reaches the upstream: the client's request body (plus the recalled-memories system message)
and, when configured, `Authorization: Bearer <key>` read from the named environment variable. The
client's own Authorization header is dropped; redirects are not followed, so the key goes to the
upstream's origin only. Whatever the upstream answers (status, body, content type) goes back as is.

Who is answered (Guard): Host 127.0.0.1:PORT or localhost:PORT only; no request a browser says
another site or port sent (hebbs.websec, as the panel); the client token as the OpenAI API key
(`Authorization: Bearer`), so another local user can neither spend the upstream key nor read the
owner's memories; and a JSON content type, so no "simple" cross-site form or no-cors POST is parsed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import os
from collections.abc import AsyncIterator
from typing import Any

import httpx
import msgspec
from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from ..websec import JsonGuard, bearer_matches, foreign_request, local_hosts
from ..protocol import AGENT_HEADER, SESSION_HEADER
from .memory import Brains, Recalled, Scope, conversation_id, latest_user_text, system_message, with_memories

log = logging.getLogger("hebbs.proxy")
PASSED_HEADERS = ("content-type", "cache-control", "x-request-id", "openai-processing-ms", "retry-after")
# A chat request with a few images inlined fits; a body past this is refused before it is all read.
MAX_BODY_BYTES = 32 * 1024 * 1024
# What the proxy holds of a streamed answer to remember it: past this it passes the rest on unheld
# and remembers nothing (an answer this long is no memory), so an endless stream costs no memory.
MAX_ANSWER_CHARS = 1_000_000
MAX_LINE_BYTES = 4 * 1024 * 1024  # an SSE line longer than this is not gathered either


class ProxyConfig(msgspec.Struct, kw_only=True):
    upstream: str  # the upstream's base URL, as an OpenAI client's base_url: http://host:port/v1
    port: int = 6382
    api_key_env: str | None = None  # the NAME of the variable holding the upstream's key
    remember: bool = False
    top_k: int = 5
    timeout_seconds: float = 600.0
    # How long a streamed answer may go silent between two chunks before the proxy ends it.
    stall_seconds: float = 120.0
    # What clients give as their API key (`Authorization: Bearer`); None serves anyone on this machine.
    client_token: str | None = None
    # The agent remembered exchanges are stored by (--agent); a request's X-Hebbs-Agent header wins.
    agent: str | None = None

    def __post_init__(self) -> None:
        url = httpx.URL(self.upstream)
        if url.scheme not in ("http", "https") or not url.host:
            raise ValueError(f"--upstream must be an http(s) URL like http://127.0.0.1:8000/v1, got {self.upstream!r}")
        if not 0 < self.port < 65536:
            raise ValueError(f"--port must be from 1 to 65535, got {self.port}")
        if not 1 <= self.top_k <= 50:
            raise ValueError(f"--top-k must be from 1 to 50, got {self.top_k}")
        if not 0 < self.stall_seconds <= 86400:
            raise ValueError(f"--stall-seconds must be above 0 and at most 86400, got {self.stall_seconds}")
        if self.api_key_env is not None and not self.api_key_env.isidentifier():
            raise ValueError("--api-key-env is the NAME of an environment variable (like OPENAI_API_KEY), not the key")


class Answer(msgspec.Struct):
    """The assistant's answer as it went by to the client; only a whole one is remembered."""

    parts: list[str] = []
    whole: bool = False
    held: int = 0  # characters in parts
    too_long: bool = False  # past MAX_ANSWER_CHARS: no longer held, never remembered

    def add(self, text: str) -> None:
        if self.too_long:
            return
        self.held += len(text)
        if self.held > MAX_ANSWER_CHARS:
            self.too_long, self.parts = True, []
        else:
            self.parts.append(text)


class BadBody(ValueError):
    """A request body the proxy will not forward: said as a 400 (or 413) in OpenAI's error shape."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


def _no_constant(name: str) -> Any:
    raise BadBody(f"the request body holds {name}, which JSON does not allow")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise BadBody(f"the request body holds the number {text[:40]}, beyond what a JSON number can be")
    return value


def parse_body(raw: bytes) -> Any:
    """The request's JSON, refused (BadBody) when the proxy could not send it on as JSON: no NaN or
    infinity, no lone surrogate, nesting Python can walk."""
    try:
        body = json.loads(raw, parse_constant=_no_constant, parse_float=_finite)
    except RecursionError:
        raise BadBody("the request body nests too deeply") from None
    except UnicodeDecodeError:
        raise BadBody("the request body is not UTF-8 JSON") from None
    except BadBody:
        raise
    except ValueError:
        raise BadBody("the request body is not JSON") from None
    return body


def encode_body(body: Any) -> bytes:
    """What goes to the upstream: strict JSON in UTF-8 (a lone surrogate cannot be encoded)."""
    try:
        return json.dumps(body, ensure_ascii=False, allow_nan=False).encode("utf-8")
    except RecursionError:
        raise BadBody("the request body nests too deeply") from None
    except UnicodeEncodeError:
        raise BadBody("the request body holds a lone surrogate (\\ud800-\\udfff), which is not text") from None


async def read_body(request: Request) -> bytes:
    """The body, up to MAX_BODY_BYTES: a longer one is refused before the rest is read."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > MAX_BODY_BYTES:
        raise BadBody(f"the request body is over {MAX_BODY_BYTES // (1024 * 1024)} MiB", 413)
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise BadBody(f"the request body is over {MAX_BODY_BYTES // (1024 * 1024)} MiB", 413)
        chunks.append(chunk)
    return b"".join(chunks)


def api_key(config: ProxyConfig) -> str | None:
    if config.api_key_env is None:
        return None
    key = os.environ.get(config.api_key_env)
    if not key:
        raise ValueError(f"the environment variable {config.api_key_env} (--api-key-env) is not set")
    return key


def build_app(config: ProxyConfig, brains: Brains) -> Any:
    key = api_key(config)
    base = config.upstream.rstrip("/")
    upstream_headers = {"authorization": f"Bearer {key}"} if key else {}
    http = httpx.AsyncClient(timeout=httpx.Timeout(config.timeout_seconds, connect=10.0), follow_redirects=False,
                             headers=upstream_headers)

    async def models(request: Request) -> Response:
        try:
            reply = await http.get(base + "/models")
        except httpx.HTTPError as exc:
            return _unreachable(exc)
        return _passed(reply, reply.content)

    async def chat(request: Request) -> Response:
        nothing = _memory_headers(Recalled(abstained=True))
        try:
            body = parse_body(await read_body(request))
            if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
                raise BadBody("a chat completion request needs a `messages` list")
            encode_body(body)  # what cannot be sent on is said before anything is recalled
        except BadBody as exc:
            return _error(exc.status, str(exc), "invalid_request_error", nothing)
        question = latest_user_text(body["messages"])
        # Named before recalled memories join the messages: the conversation as the client sent it.
        scope = Scope(agent=request.headers.get(AGENT_HEADER) or config.agent,
                      session=request.headers.get(SESSION_HEADER) or conversation_id(body["messages"]))
        recalled = Recalled(abstained=True)
        if question and question.strip():
            recalled = await brains.recall(question, config.top_k)
            if recalled.found:
                body["messages"] = with_memories(body["messages"], system_message(recalled.found))
        content = encode_body(body)
        ids = [f.id for f in recalled.found]
        extra = _memory_headers(recalled)
        model = body.get("model") if isinstance(body.get("model"), str) else None

        def remember_later(answer: Answer) -> BackgroundTask | None:
            if not config.remember or not question:
                return None
            return BackgroundTask(_remember, brains, question, answer, model, ids, scope)

        url = base + "/chat/completions"
        if body.get("stream"):
            outgoing = http.build_request("POST", url, content=content, headers=JSON_HEADERS)
            try:
                reply = await http.send(outgoing, stream=True)
            except httpx.HTTPError as exc:
                return _unreachable(exc, extra)
            if reply.status_code >= 400:
                content = await reply.aread()
                await reply.aclose()
                return _passed(reply, content, extra)
            answer = Answer()
            return StreamingResponse(_relay(reply, answer, config.stall_seconds), status_code=reply.status_code,
                                     headers=_headers(reply, extra), background=remember_later(answer))
        try:
            reply = await http.post(url, content=content, headers=JSON_HEADERS)
        except httpx.HTTPError as exc:
            return _unreachable(exc, extra)
        answered = reply.status_code < 300
        return _passed(reply, reply.content, extra,
                       background=remember_later(Answer(parts=[_answer_text(reply)], whole=True)) if answered else None)

    served = [Route("/v1/chat/completions", chat, methods=["POST"]), Route("/v1/models", models, methods=["GET"])]

    async def not_served(request: Request) -> Response:
        path = request.url.path
        for route in served:
            if route.path == path:
                allow = ", ".join(sorted(route.methods or ()))
                return _error(405, f"hebbs proxy takes {allow} at {path}, not {request.method}", "method_not_allowed",
                              {"allow": allow})
        return _error(404, f"hebbs proxy serves POST /v1/chat/completions and GET /v1/models, not {path}", "not_found")

    app = Starlette(routes=[*served,
                            Route("/{path:path}", not_served, methods=["GET", "POST", "PUT", "DELETE", "PATCH"])],
                    lifespan=_closing(http))
    return Guard(app, config.port, config.client_token)


JSON_HEADERS = {"content-type": "application/json"}


def _closing(http: httpx.AsyncClient) -> Any:
    @contextlib.asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[None]:
        yield
        await http.aclose()

    return lifespan


async def _relay(reply: httpx.Response, answer: Answer, stall_seconds: float) -> AsyncIterator[bytes]:
    """The upstream's bytes as they come; the answer's text is gathered from the SSE deltas on the way.

    A stream that stops short (the upstream broke off before `[DONE]`, or closed before `[DONE]` and
    before any finish_reason) is no answer: it is not remembered, and an SSE stream ends with an error
    event, which OpenAI's clients raise as an APIError (the 200 and part of the answer are already
    sent, so the stream is the only place left to say it). An upstream silent for `stall_seconds`
    in the middle of its answer broke off too."""
    pending = b""
    finished = False
    broke: Exception | None = None
    chunks = reply.aiter_raw()
    try:
        while True:
            try:
                chunk = await asyncio.wait_for(anext(chunks), stall_seconds)
            except StopAsyncIteration:
                break
            pending += chunk
            *lines, pending = pending.split(b"\n")
            if len(pending) > MAX_LINE_BYTES:
                answer.add("x" * (MAX_ANSWER_CHARS + 1))  # a line this long is not held: no answer to keep
                pending = b""
            for line in lines:
                data = _sse_data(line)
                if data == b"[DONE]":
                    answer.whole = True  # before the yield: a client may hang up as soon as it reads [DONE]
                elif data is not None and not answer.too_long:
                    text, stop = _delta(data)
                    answer.add(text)
                    finished = finished or stop
            yield chunk
    except httpx.HTTPError as exc:
        broke = exc
    except asyncio.TimeoutError:
        broke = TimeoutError(f"no byte for {stall_seconds:g} s in the middle of the answer")
    finally:
        await reply.aclose()
    # Some servers send no [DONE]: for them a finish_reason and a clean close end the answer.
    answer.whole = answer.whole or (finished and broke is None)
    if answer.whole:
        return
    why = f"{type(broke).__name__}: {broke}" if broke else "it closed before a finish_reason or [DONE]"
    log.warning("the upstream's streamed answer stopped short (%s): not remembering the exchange", why)
    if reply.headers.get("content-type", "").startswith("text/event-stream"):
        error = {"message": f"hebbs proxy: the upstream's stream stopped short ({why})", "type": "upstream_incomplete",
                 "code": None}
        # The blank line first ends any event the upstream left open; an extra one dispatches nothing.
        yield b"\n\ndata: " + json.dumps({"error": error}).encode() + b"\n\n"


def _sse_data(line: bytes) -> bytes | None:
    line = line.strip()
    return line[5:].strip() if line.startswith(b"data:") else None


def _delta(data: bytes) -> tuple[str, bool]:
    """The text of one chunk's deltas, and whether a choice finished in it."""
    try:
        choices = json.loads(data).get("choices") or []
        text = "".join((c.get("delta") or {}).get("content") or "" for c in choices)
        return text, any(c.get("finish_reason") for c in choices)
    except (ValueError, AttributeError, TypeError):
        return "", False


def _answer_text(reply: httpx.Response) -> str:
    try:
        choice = reply.json()["choices"][0]
        return choice["message"]["content"] or ""
    except (ValueError, KeyError, IndexError, TypeError):
        return ""


async def _remember(brains: Brains, question: str, answer: Answer, model: str | None, recalled: list[str],
                    scope: Scope) -> None:
    if not answer.whole:
        return  # cut short upstream (_relay logged it) or dropped by the client: half an answer is not memory
    if answer.too_long:
        log.warning("the answer was over %d characters: not remembering the exchange", MAX_ANSWER_CHARS)
        return
    try:
        await brains.remember(question, "".join(answer.parts), model=model, recalled=recalled, scope=scope)
    except Exception as exc:  # the answer was already sent: a failed remember is logged, never raised
        log.warning("could not remember the exchange: %s", exc)


def _headers(reply: httpx.Response, extra: dict[str, str] | None = None) -> dict[str, str]:
    headers = {k: v for k, v in reply.headers.items() if k.lower() in PASSED_HEADERS}
    return {**headers, **(extra or {})}


def _passed(reply: httpx.Response, content: bytes, extra: dict[str, str] | None = None,
            background: BackgroundTask | None = None) -> Response:
    return Response(content, status_code=reply.status_code, headers=_headers(reply, extra), background=background)


def _memory_headers(recalled: Recalled) -> dict[str, str]:
    return {"x-hebbs-memories": ",".join(f.id for f in recalled.found),
            "x-hebbs-abstained": "true" if recalled.abstained else "false"}


def _error(status: int, message: str, kind: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": {"message": message, "type": kind, "code": None}}, status_code=status,
                        headers=headers)


def _unreachable(exc: httpx.HTTPError, headers: dict[str, str] | None = None) -> JSONResponse:
    # Not an upstream answer (it never gave one): said so, in the shape OpenAI clients read.
    return _error(502, f"hebbs proxy could not reach the upstream: {type(exc).__name__}: {exc}", "upstream_unreachable",
                  headers)


class Guard(JsonGuard):
    """Who the proxy answers (see the module's docstring); every refusal in OpenAI's error shape."""

    def __init__(self, app: Any, port: int, token: str | None) -> None:
        super().__init__(app)
        self.port = port
        self.token = token

    def refusal(self, method: str, headers: dict[str, str]) -> tuple[int, Any] | None:
        why = self._why(method, headers)
        if why is None:
            return None
        status, kind, message = why
        return status, {"error": {"message": message, "type": kind, "code": None}}

    def _why(self, method: str, headers: dict[str, str]) -> tuple[int, str, str] | None:
        if headers.get("host") not in local_hosts(self.port):
            return 403, "forbidden", "hebbs proxy answers only to Host 127.0.0.1 or localhost"
        foreign = foreign_request(headers, self.port)
        if foreign:
            return 403, "forbidden", f"hebbs proxy refuses requests from web pages: {foreign}"
        if self.token is not None:
            if not bearer_matches(headers, self.token):
                return (401, "invalid_request_error",
                        "hebbs proxy needs its client token as the API key (Authorization: Bearer): "
                        "it is in $HEBBS_HOME/proxy.token (docs/proxy.md)")
        if method not in ("GET", "HEAD", "OPTIONS"):
            media = headers.get("content-type", "").split(";", 1)[0].strip().lower()
            if media != "application/json":
                return (415, "invalid_request_error",
                        f"hebbs proxy takes a JSON body (Content-Type: application/json), not {media or 'none'}")
        return None
