"""What keeps the panel the user's own: the Host check, the per-daemon token, strict response headers.

- Only `127.0.0.1:PORT` and `localhost:PORT` are accepted as Host (a DNS-rebinding page gets 403).
- Every request but the static files needs the token: from the cookie the first visit sets (the URL
  `hebbs palace` prints carries it once), or the X-Hebbs-Token header. A request that changes
  something must also carry it in the form or the header, never in the cookie alone, so another
  site's form cannot post through the user's cookie.
- Content-Security-Policy allows this origin only: no external asset, no inline script or style.
"""

from __future__ import annotations

import os
import secrets
from http.cookies import SimpleCookie
from pathlib import Path
from typing import Any, Awaitable, Callable
from urllib.parse import parse_qsl, urlencode

from hebbs.fsutil import atomic_write

TOKEN_FILE = "panel.token"
COOKIE = "hebbs_panel"
HEADER = "x-hebbs-token"
FORM_FIELD = "token"
SAFE_METHODS = frozenset({"GET", "HEAD"})
CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
       "font-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"cross-origin-resource-policy", b"same-origin"),
]

ASGIApp = Callable[[dict, Callable[[], Awaitable[dict]], Callable[[dict], Awaitable[None]]], Awaitable[None]]


def new_token(home: Path) -> str:
    """A fresh random token for this daemon's life, kept in HEBBS_HOME (mode 0600) for the user's tools."""
    token = secrets.token_urlsafe(32)
    atomic_write(home / TOKEN_FILE, token.encode() + b"\n", mode=0o600)
    return token


def token_matches(given: str | None, token: str) -> bool:
    return given is not None and secrets.compare_digest(given.encode(), token.encode())


class Guard:
    """ASGI middleware: Host check, token check, security headers on every response."""

    def __init__(self, app: ASGIApp, token: str, port: Callable[[], int]) -> None:
        self.app = app
        self.token = token
        self.port = port

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        port = self.port()
        if headers.get("host") not in (f"127.0.0.1:{port}", f"localhost:{port}"):
            return await _deny(send, "This panel answers only to http://127.0.0.1:%d/ (Host header refused)." % port)
        path: str = scope["path"]
        if path.startswith("/static/"):
            return await self.app(scope, receive, _with_headers(send, cache=True))
        query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
        if scope["method"] in SAFE_METHODS and token_matches(query.get(FORM_FIELD), self.token):
            # The URL `hebbs palace` printed: trade the token for a cookie and drop it from the address bar.
            rest = urlencode([(k, v) for k, v in parse_qsl(scope.get("query_string", b"").decode("latin-1"))
                              if k != FORM_FIELD])
            location = path + ("?" + rest if rest else "")
            cookie = f"{COOKIE}={self.token}; Path=/; HttpOnly; SameSite=Strict"
            return await _redirect(send, location, cookie)
        cookie = SimpleCookie(headers.get("cookie", "")).get(COOKIE)
        presented = headers.get(HEADER) or (cookie.value if cookie else None)
        if not token_matches(presented, self.token):
            return await _deny(send, "This panel needs its token: open the address `hebbs palace` prints.")
        if scope["method"] not in SAFE_METHODS:
            # The form field is checked by the route (it has to read the body); the header is enough here.
            scope.setdefault("state", {})["token_in_header"] = token_matches(headers.get(HEADER), self.token)
        await self.app(scope, receive, _with_headers(send, cache=False))


def _with_headers(send: Any, cache: bool) -> Any:
    async def wrapped(message: dict) -> None:
        if message["type"] == "http.response.start":
            extra = HEADERS + [(b"cache-control", b"private, max-age=3600" if cache else b"no-store")]
            message["headers"] = [*message.get("headers", []), *extra]
        await send(message)
    return wrapped


async def _deny(send: Any, text: str) -> None:
    body = text.encode()
    await send({"type": "http.response.start", "status": 403,
                "headers": [(b"content-type", b"text/plain; charset=utf-8"), (b"content-length", str(len(body)).encode()),
                            *HEADERS, (b"cache-control", b"no-store")]})
    await send({"type": "http.response.body", "body": body})


async def _redirect(send: Any, location: str, cookie: str) -> None:
    await send({"type": "http.response.start", "status": 303,
                "headers": [(b"location", location.encode("latin-1")), (b"set-cookie", cookie.encode()),
                            (b"content-length", b"0"), *HEADERS, (b"cache-control", b"no-store")]})
    await send({"type": "http.response.body", "body": b""})


def token_file(home: Path) -> Path:
    return home / TOKEN_FILE


def remove_token(home: Path) -> None:
    try:
        os.unlink(home / TOKEN_FILE)
    except FileNotFoundError:
        pass
