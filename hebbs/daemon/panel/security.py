"""What keeps the panel the user's own: the Host check, the per-daemon token, strict response headers.

- Only `127.0.0.1:PORT` and `localhost:PORT` are accepted as Host (a DNS-rebinding page gets 403).
- Every request but the static files needs the token (the URL `hebbs palace` prints carries it once,
  or the X-Hebbs-Token header) or the session cookie the first visit trades it for. The browser
  `hebbs palace` opens is handed a one-time code instead (its command line is readable by every local
  user in /proc): it opens one session, once, within CODE_SECONDS, and is useless after. The cookie holds
  a separate random session value, never the token, and is named after the port: cookies ignore
  ports, so two daemons' panels on 127.0.0.1 would otherwise overwrite each other's. A request
  that changes something must also carry the token in the form or the header, never the cookie
  alone, so another site's form cannot post through the user's cookie.
- SameSite does not tell ports apart: a page on another 127.0.0.1 port is "same-site" and its
  browser requests carry the cookie. A request that only has the cookie is refused when the
  browser says it came from another site or port (Sec-Fetch-Site: same-site or cross-site, or
  another Origin: hebbs.websec, which `hebbs proxy` shares).
- Content-Security-Policy allows this origin only: no external asset, no inline script or style.
"""

from __future__ import annotations

import html
import os
import secrets
import time
from http.cookies import CookieError, SimpleCookie
from pathlib import Path
from typing import Any, Awaitable, Callable
from urllib.parse import parse_qsl, quote, urlencode

from hebbs.fsutil import atomic_write
from hebbs.websec import foreign_request, local_hosts, token_matches

__all__ = ["FORM_FIELD", "Guard", "OneTimeCodes", "new_token", "remove_token", "token_file", "token_matches"]

TOKEN_FILE = "panel.token"
COOKIE_PREFIX = "hebbs_panel_"
HEADER = "x-hebbs-token"
FORM_FIELD = "token"
CODE_FIELD = "code"
# Long enough for a browser to start, short enough that a code read from /proc later is dead.
CODE_SECONDS = 60.0
MAX_CODES = 32  # unexchanged codes kept at once: the oldest go first
SAFE_METHODS = frozenset({"GET", "HEAD"})
CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
       "font-src 'self'; worker-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
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


class OneTimeCodes:
    """What `hebbs palace` hands the browser instead of the token: each code trades for one session
    cookie, once, within CODE_SECONDS."""

    def __init__(self) -> None:
        self._codes: dict[str, float] = {}

    def issue(self) -> str:
        now = time.monotonic()
        self._codes = {c: t for c, t in self._codes.items() if t > now}
        while len(self._codes) >= MAX_CODES:
            del self._codes[next(iter(self._codes))]
        code = secrets.token_urlsafe(24)
        self._codes[code] = now + CODE_SECONDS
        return code

    def take(self, given: str | None) -> bool:
        """Whether `given` is a live code; it is spent either way."""
        if given is None:
            return False
        for code in list(self._codes):
            if secrets.compare_digest(code.encode(), given.encode()):
                return self._codes.pop(code) > time.monotonic()
        return False


def cookie_name(port: int) -> str:
    return f"{COOKIE_PREFIX}{port}"


class Guard:
    """ASGI middleware: Host check, token check, security headers on every response."""

    def __init__(self, app: ASGIApp, token: str, port: Callable[[], int], codes: OneTimeCodes) -> None:
        self.app = app
        self.token = token
        self.port = port
        self.codes = codes
        # What the cookie holds: it authorizes reading pages, never a change (which needs the token).
        self.session = secrets.token_urlsafe(32)

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        port = self.port()
        if headers.get("host") not in local_hosts(port):
            return await _deny(send, f"This panel answers only to http://127.0.0.1:{port}/ (Host header refused).")
        path: str = scope["path"]
        if path.startswith("/static/"):
            return await self.app(scope, receive, _with_headers(send, cache=True))
        query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
        if scope["method"] in SAFE_METHODS and (token_matches(query.get(FORM_FIELD), self.token)
                                                or self.codes.take(query.get(CODE_FIELD))):
            # The URL `hebbs palace` printed or opened: trade the token or the code for a cookie, and drop
            # it from the address bar.
            rest = urlencode([(k, v) for k, v in parse_qsl(scope.get("query_string", b"").decode("latin-1"))
                              if k not in (FORM_FIELD, CODE_FIELD)])
            # One leading slash: "//evil.com/x" would be another site's address to the browser.
            location = "/" + quote(path.lstrip("/"), safe="/") + ("?" + rest if rest else "")
            cookie = f"{cookie_name(port)}={self.session}; Path=/; HttpOnly; SameSite=Strict"
            return await _redirect(send, location, cookie)
        if not token_matches(headers.get(HEADER), self.token):
            cookie = _cookies(headers.get("cookie", "")).get(cookie_name(port))
            if not token_matches(cookie, self.session):
                return await _deny(send, "This panel needs its token: open the address `hebbs palace` prints. "
                                         "If the daemon restarted, its token changed: run `hebbs palace` again.")
            if foreign_request(headers, port, own_pages=True):
                return await _deny(send, "This panel refuses requests that another site or another local port "
                                         "made the browser send: open it from its own pages.")
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


def _cookies(header: str) -> dict[str, str]:
    try:
        return {name: morsel.value for name, morsel in SimpleCookie(header).items()}
    except CookieError:  # another site's malformed cookie on 127.0.0.1 is not ours to fail on
        return {}


async def _deny(send: Any, text: str) -> None:
    # A page, not plain text: a tab left open when the daemon restarted lands here on its next click.
    body = (f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Not allowed · hebbs Memory Palace</title>'
            f'<link rel="stylesheet" href="/static/panel.css"></head><body><main><h1>Not allowed</h1>'
            f'<div class="error" role="alert">{html.escape(text)}</div></main></body></html>').encode()
    await send({"type": "http.response.start", "status": 403,
                "headers": [(b"content-type", b"text/html; charset=utf-8"), (b"content-length", str(len(body)).encode()),
                            *HEADERS, (b"cache-control", b"no-store")]})
    await send({"type": "http.response.body", "body": body})


async def _redirect(send: Any, location: str, cookie: str) -> None:
    await send({"type": "http.response.start", "status": 303,
                "headers": [(b"location", location.encode("ascii")), (b"set-cookie", cookie.encode()),
                            (b"content-length", b"0"), *HEADERS, (b"cache-control", b"no-store")]})
    await send({"type": "http.response.body", "body": b""})


def token_file(home: Path) -> Path:
    return home / TOKEN_FILE


def remove_token(home: Path) -> None:
    try:
        os.unlink(home / TOKEN_FILE)
    except FileNotFoundError:
        pass
