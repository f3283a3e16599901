"""The proxy's HTTP side: Starlette on 127.0.0.1, httpx to the upstream OpenAI-compatible server.

What reaches the upstream: the client's request body (plus the recalled-memories system message)
and, when configured, `Authorization: Bearer <key>` read from the named environment variable. The
client's own Authorization header is dropped; redirects are not followed, so the key goes to the
upstream's origin only. Whatever the upstream answers (status, body, content type) goes back as is.
"""

from __future__ import annotations

import contextlib
import json
import logging
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

from .memory import Brains, Recalled, latest_user_text, system_message, with_memories

log = logging.getLogger("hebbs.proxy")
PASSED_HEADERS = ("content-type", "cache-control", "x-request-id", "openai-processing-ms", "retry-after")


class ProxyConfig(msgspec.Struct, kw_only=True):
    upstream: str  # the upstream's base URL, as an OpenAI client's base_url: http://host:port/v1
    port: int = 6382
    api_key_env: str | None = None  # the NAME of the variable holding the upstream's key
    remember: bool = False
    top_k: int = 5
    timeout_seconds: float = 600.0

    def __post_init__(self) -> None:
        url = httpx.URL(self.upstream)
        if url.scheme not in ("http", "https") or not url.host:
            raise ValueError(f"--upstream must be an http(s) URL like http://127.0.0.1:8000/v1, got {self.upstream!r}")
        if not 0 < self.port < 65536:
            raise ValueError(f"--port must be from 1 to 65535, got {self.port}")
        if not 1 <= self.top_k <= 50:
            raise ValueError(f"--top-k must be from 1 to 50, got {self.top_k}")
        if self.api_key_env is not None and not self.api_key_env.isidentifier():
            raise ValueError("--api-key-env is the NAME of an environment variable (like OPENAI_API_KEY), not the key")


class Answer(msgspec.Struct):
    """The assistant's answer as it went by to the client; only a whole one is remembered."""

    parts: list[str] = []
    whole: bool = False


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
            body = json.loads(await request.body())
        except ValueError:
            return _error(400, "the request body is not JSON", "invalid_request_error", nothing)
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            return _error(400, "a chat completion request needs a `messages` list", "invalid_request_error", nothing)
        question = latest_user_text(body["messages"])
        recalled = Recalled(abstained=True)
        if question and question.strip():
            recalled = await brains.recall(question, config.top_k)
            if recalled.found:
                body["messages"] = with_memories(body["messages"], system_message(recalled.found))
        ids = [f.id for f in recalled.found]
        extra = _memory_headers(recalled)
        model = body.get("model") if isinstance(body.get("model"), str) else None

        def remember_later(answer: Answer) -> BackgroundTask | None:
            if not config.remember or not question:
                return None
            return BackgroundTask(_remember, brains, question, answer, model, ids)

        url = base + "/chat/completions"
        if body.get("stream"):
            outgoing = http.build_request("POST", url, json=body)
            try:
                reply = await http.send(outgoing, stream=True)
            except httpx.HTTPError as exc:
                return _unreachable(exc, extra)
            if reply.status_code >= 400:
                content = await reply.aread()
                await reply.aclose()
                return _passed(reply, content, extra)
            answer = Answer()
            return StreamingResponse(_relay(reply, answer), status_code=reply.status_code,
                                     headers=_headers(reply, extra), background=remember_later(answer))
        try:
            reply = await http.post(url, json=body)
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
    return HostGuard(app, config.port)


def _closing(http: httpx.AsyncClient) -> Any:
    @contextlib.asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[None]:
        yield
        await http.aclose()

    return lifespan


async def _relay(reply: httpx.Response, answer: Answer) -> AsyncIterator[bytes]:
    """The upstream's bytes as they come; the answer's text is gathered from the SSE deltas on the way.

    A stream that stops short (the upstream broke off before `[DONE]`, or closed before `[DONE]` and
    before any finish_reason) is no answer: it is not remembered, and an SSE stream ends with an error
    event, which OpenAI's clients raise as an APIError (the 200 and part of the answer are already
    sent, so the stream is the only place left to say it)."""
    pending = b""
    finished = False
    broke: httpx.HTTPError | None = None
    try:
        async for chunk in reply.aiter_raw():
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in lines:
                data = _sse_data(line)
                if data == b"[DONE]":
                    answer.whole = True  # before the yield: a client may hang up as soon as it reads [DONE]
                elif data is not None:
                    text, stop = _delta(data)
                    answer.parts.append(text)
                    finished = finished or stop
            yield chunk
    except httpx.HTTPError as exc:
        broke = exc
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


async def _remember(brains: Brains, question: str, answer: Answer, model: str | None, recalled: list[str]) -> None:
    if not answer.whole:
        return  # cut short upstream (_relay logged it) or dropped by the client: half an answer is not memory
    try:
        await brains.remember(question, "".join(answer.parts), model=model, recalled=recalled)
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


class HostGuard:
    """Only Host 127.0.0.1:PORT or localhost:PORT is served (a DNS-rebinding page gets 403), as the panel does."""

    def __init__(self, app: Any, port: int) -> None:
        self.app = app
        self.allowed = {f"127.0.0.1:{port}".encode(), f"localhost:{port}".encode()}

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and dict(scope["headers"]).get(b"host") not in self.allowed:
            body = b'{"error":{"message":"hebbs proxy answers only to Host 127.0.0.1 or localhost","type":"forbidden"}}'
            await send({"type": "http.response.start", "status": 403,
                        "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
            await send({"type": "http.response.body", "body": body})
            return
        await self.app(scope, receive, send)
