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
        try:
            body = json.loads(await request.body())
        except ValueError:
            return _error(400, "the request body is not JSON", "invalid_request_error")
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            return _error(400, "a chat completion request needs a `messages` list", "invalid_request_error")
        question = latest_user_text(body["messages"])
        recalled = Recalled(abstained=True)
        if question and question.strip():
            recalled = await brains.recall(question, config.top_k)
            if recalled.found:
                body["messages"] = with_memories(body["messages"], system_message(recalled.found))
        ids = [f.id for f in recalled.found]
        extra = {"x-hebbs-memories": ",".join(ids), "x-hebbs-abstained": "true" if recalled.abstained else "false"}
        model = body.get("model") if isinstance(body.get("model"), str) else None

        def remember_later(answer: list[str]) -> BackgroundTask | None:
            if not config.remember or not question:
                return None
            return BackgroundTask(_remember, brains, question, answer, model, ids)

        url = base + "/chat/completions"
        if body.get("stream"):
            outgoing = http.build_request("POST", url, json=body)
            try:
                reply = await http.send(outgoing, stream=True)
            except httpx.HTTPError as exc:
                return _unreachable(exc)
            if reply.status_code >= 400:
                content = await reply.aread()
                await reply.aclose()
                return _passed(reply, content, extra)
            answer: list[str] = []
            return StreamingResponse(_relay(reply, answer), status_code=reply.status_code,
                                     headers=_headers(reply, extra), background=remember_later(answer))
        try:
            reply = await http.post(url, json=body)
        except httpx.HTTPError as exc:
            return _unreachable(exc)
        answer = [_answer_text(reply)] if reply.status_code < 300 else []
        return _passed(reply, reply.content, extra, background=remember_later(answer) if answer else None)

    async def not_found(request: Request) -> Response:
        return _error(404, f"hebbs proxy serves POST /v1/chat/completions and GET /v1/models, not {request.url.path}",
                      "not_found")

    app = Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"]),
                            Route("/v1/models", models, methods=["GET"]),
                            Route("/{path:path}", not_found, methods=["GET", "POST", "PUT", "DELETE", "PATCH"])],
                    lifespan=_closing(http))
    return HostGuard(app, config.port)


def _closing(http: httpx.AsyncClient) -> Any:
    @contextlib.asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[None]:
        yield
        await http.aclose()

    return lifespan


async def _relay(reply: httpx.Response, answer: list[str]) -> AsyncIterator[bytes]:
    """The upstream's bytes as they come; the answer's text is gathered from the SSE deltas on the way."""
    pending = b""
    try:
        async for chunk in reply.aiter_raw():
            yield chunk
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in lines:
                answer.append(_delta_text(line))
    finally:
        await reply.aclose()


def _delta_text(line: bytes) -> str:
    line = line.strip()
    if not line.startswith(b"data:") or line == b"data: [DONE]":
        return ""
    try:
        event = json.loads(line[5:])
        return "".join((c.get("delta") or {}).get("content") or "" for c in event.get("choices") or [])
    except (ValueError, AttributeError, TypeError):
        return ""


def _answer_text(reply: httpx.Response) -> str:
    try:
        choice = reply.json()["choices"][0]
        return choice["message"]["content"] or ""
    except (ValueError, KeyError, IndexError, TypeError):
        return ""


async def _remember(brains: Brains, question: str, answer: list[str], model: str | None, recalled: list[str]) -> None:
    try:
        await brains.remember(question, "".join(answer), model=model, recalled=recalled)
    except Exception as exc:  # the answer was already sent: a failed remember is logged, never raised
        log.warning("could not remember the exchange: %s", exc)


def _headers(reply: httpx.Response, extra: dict[str, str] | None = None) -> dict[str, str]:
    headers = {k: v for k, v in reply.headers.items() if k.lower() in PASSED_HEADERS}
    return {**headers, **(extra or {})}


def _passed(reply: httpx.Response, content: bytes, extra: dict[str, str] | None = None,
            background: BackgroundTask | None = None) -> Response:
    return Response(content, status_code=reply.status_code, headers=_headers(reply, extra), background=background)


def _error(status: int, message: str, kind: str) -> JSONResponse:
    return JSONResponse({"error": {"message": message, "type": kind, "code": None}}, status_code=status)


def _unreachable(exc: httpx.HTTPError) -> JSONResponse:
    # Not an upstream answer (it never gave one): said so, in the shape OpenAI clients read.
    return _error(502, f"hebbs proxy could not reach the upstream: {type(exc).__name__}: {exc}", "upstream_unreachable")


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
