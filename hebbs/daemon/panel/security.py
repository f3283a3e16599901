"""What keeps the panel the user's own: the Host check, the per-daemon token, browser sessions, strict headers.

- Only `127.0.0.1:PORT` and `localhost:PORT` are accepted as Host (a DNS-rebinding page gets 403).
- Every request but the static files needs the token (the URL `hebbs palace` prints carries it once,
  or the X-Hebbs-Token header, for programs) or the session cookie the first visit trades it for. The
  browser `hebbs palace` opens is handed a one-time code instead (its command line is readable by every
  local user in /proc): it opens one session, once, within CODE_SECONDS, and is useless after. Each
  trade opens a new session (sessions.py) and ends the one the browser held; sessions end idle or old.
  The cookie is named after the port: cookies ignore ports, so two daemons' panels on 127.0.0.1 would
  otherwise overwrite each other's.
- Cookies ignore ports for sending too: any server on another 127.0.0.1 port the browser visits gets
  the panel's cookie. So the cookie alone is worth little: a request riding it must carry the Fetch
  Metadata a browser sends (not_from_the_browser), and a change must also carry the session's form
  value, which only the panel's own pages hold. No page holds the token.
- SameSite does not tell ports apart: a page on another 127.0.0.1 port is "same-site" and its
  browser requests carry the cookie. A request that only has the cookie is refused when the
  browser says it came from another site or port (Sec-Fetch-Site: same-site or cross-site, or
  another Origin: hebbs.websec, which `hebbs proxy` shares).
- A connection another local user's program holds (peer.py) is refused, whatever it carries.
- Content-Security-Policy allows this origin only: no external asset, no inline script or style.
"""

from __future__ import annotations

import html
import os
import secrets
import time
from collections.abc import Mapping
from http.cookies import CookieError, SimpleCookie
from pathlib import Path
from typing import Any, Awaitable, Callable
from urllib.parse import parse_qsl, quote, urlencode

from hebbs.fsutil import atomic_write
from hebbs.websec import foreign_request, local_hosts, token_matches

from .peer import other_users_peer
from .sessions import Sessions

__all__ = ["FORM_FIELD", "Guard", "OneTimeCodes", "new_token", "not_from_the_browser", "remove_token", "token_file",
           "token_matches"]

TOKEN_FILE = "panel.token"
COOKIE_PREFIX = "hebbs_panel_"
HEADER = "x-hebbs-token"
TOKEN_FIELD = "token"  # the printed address's query field
FORM_FIELD = "csrf"  # the session's form value in every form the panel serves
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
    """ASGI middleware: Host check, token or session check, security headers on every response."""

    def __init__(self, app: ASGIApp, token: str, port: Callable[[], int], codes: OneTimeCodes,
                 sessions: Sessions) -> None:
        self.app = app
        self.token = token
        self.port = port
        self.codes = codes
        self.sessions = sessions

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
        if other_users_peer(scope.get("client"), scope.get("server")) is not None:
            # Whatever it carries: a copy of the cookie with forged browser headers would pass every other check.
            return await _deny(send, "This panel serves only the user its daemon runs as: this connection is "
                                     "another local user's.")
        held = _cookies(headers.get("cookie", "")).get(cookie_name(port))
        query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
        if scope["method"] in SAFE_METHODS and (token_matches(query.get(TOKEN_FIELD), self.token)
                                                or self.codes.take(query.get(CODE_FIELD))):
            # The URL `hebbs palace` printed or opened: trade the token or the code for a new session (the
            # one this browser held ends: a copy of its cookie is dead), and drop it from the address bar.
            rest = urlencode([(k, v) for k, v in parse_qsl(scope.get("query_string", b"").decode("latin-1"))
                              if k not in (TOKEN_FIELD, CODE_FIELD)])
            # One leading slash: "//evil.com/x" would be another site's address to the browser.
            location = "/" + quote(path.lstrip("/"), safe="/") + ("?" + rest if rest else "")
            session = self.sessions.open(replacing=held)
            # Not `__Host-`: that prefix needs `Secure`, which a plain-http origin cannot set, and it would
            # not tell ports apart either. HttpOnly keeps it from scripts; the server ends it (Max-Age is
            # only the browser's copy of the same limit).
            cookie = (f"{cookie_name(port)}={session}; Path=/; HttpOnly; SameSite=Strict; "
                      f"Max-Age={int(self.sessions.max_seconds)}")
            return await _redirect(send, location, cookie)
        state = scope.setdefault("state", {})
        if token_matches(headers.get(HEADER), self.token):
            state["token_in_header"] = True  # a program with the token: no session, no form value
            state["form_value"] = ""
        else:
            # Checked before the session is used: a refused replay does not keep a stolen session from idling out.
            refused = foreign_request(headers, port, own_pages=True) or not_from_the_browser(headers)
            if held and refused:
                return await _deny(send, "This panel refuses requests with its cookie that its own pages in "
                                         f"the browser would not make ({refused}): open it from its own pages.")
            if not self.sessions.use(held):
                return await _deny(send, "This panel needs a session: open the address `hebbs palace` prints. "
                                         "A session ends after a while unused, after a day, when the panel is "
                                         "opened again from this browser and when the daemon restarts: then run "
                                         "`hebbs palace` again.")
            state["session"] = held
            state["form_value"] = self.sessions.form_value(held)
        await self.app(scope, receive, _with_headers(send, cache=False))


def not_from_the_browser(headers: Mapping[str, str]) -> str | None:
    """Why a request riding the cookie is not one the browser the cookie was given to would send, or None.

    Browsers send Fetch Metadata (Sec-Fetch-Site, -Mode, -Dest) with every request to a loopback
    origin, which counts as potentially trustworthy even over plain http (Chromium since 76, Firefox
    since 90, Safari since 16.4). A program replaying a copy of the cookie (curl, httpx) sends none.
    Accepted are only what the panel's use makes:
    - `same-origin`, any mode: the panel's own links, forms, scripts, shared worker and event stream;
    - `none` with mode `navigate`: the user opened the address (typed, bookmarked, reloaded, or handed
      to the browser by `hebbs palace`). `none` in another mode is no navigation the user made.
    `same-site` and `cross-site` (another site, or another port of 127.0.0.1) are refused before this.
    A program that forges these headers is not stopped here: the peer check (another local user) and
    the session's end are what hold against it."""
    site, mode = headers.get("sec-fetch-site"), headers.get("sec-fetch-mode")
    if site is None or mode is None:
        return "no Sec-Fetch-Site and Sec-Fetch-Mode: not sent by a browser"
    if site == "same-origin" or (site == "none" and mode == "navigate"):
        return None
    return f"Sec-Fetch-Site: {site[:40]}, Sec-Fetch-Mode: {mode[:40]}"


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
