"""What the daemon's panel, `hebbs proxy` and `hebbs mcp --http` share to answer only their own user, on loopback.

A web page in the user's browser can make the browser send requests to 127.0.0.1. The browser says
where such a request came from: `Sec-Fetch-Site` (same-site or cross-site for another site, and for
another port of 127.0.0.1, which SameSite does not tell apart) and `Origin` (sent on every POST and
on cross-origin requests). Clients that are not browsers send neither. Both HTTP servers refuse a
request either header says came from elsewhere, and compare secrets in constant time.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

# What a browser says about a request another site (or another local port) made it send.
FOREIGN_SITES = frozenset({"same-site", "cross-site"})


def local_hosts(port: int) -> frozenset[str]:
    """The Host values a loopback server on `port` answers to: a DNS-rebinding page's own name is refused."""
    return frozenset({f"127.0.0.1:{port}", f"localhost:{port}"})


def foreign_request(headers: Mapping[str, str], port: int, *, own_pages: bool = False) -> str | None:
    """Why the browser's own headers say this request came from another site or port, or None.

    `headers` has lower-case names. A `Sec-Fetch-Site` of same-site or cross-site is foreign, as is an
    `Origin` other than this server's own. `Origin: null` (a sandboxed frame's, a redirect's) is
    foreign too, except for a server with `own_pages`: under `Referrer-Policy: no-referrer` the
    browser sends it with the forms of those pages, and Sec-Fetch-Site alone tells them apart."""
    site = headers.get("sec-fetch-site")
    if site in FOREIGN_SITES:
        return f"the browser says another site sent it (Sec-Fetch-Site: {site})"
    origin = headers.get("origin")
    if own_pages and origin == "null":
        return None
    if origin is not None and origin not in {f"http://{host}" for host in local_hosts(port)}:
        return f"the browser says another site sent it (Origin: {origin[:100]})"
    return None


def token_matches(given: str | None, token: str) -> bool:
    return given is not None and secrets.compare_digest(given.encode(), token.encode())


def bearer_matches(headers: Mapping[str, str], token: str) -> bool:
    """Whether the request's `Authorization` (headers with lower-case names) is `Bearer <token>`."""
    scheme, _, given = headers.get("authorization", "").partition(" ")
    return scheme.lower() == "bearer" and token_matches(given.strip(), token)


def asgi_headers(scope: Mapping[str, Any]) -> dict[str, str]:
    """An ASGI request's headers by lower-case name."""
    return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}


async def refuse(send: Callable[[dict[str, Any]], Awaitable[None]], status: int, body: Any) -> None:
    """Answer an ASGI request with `body` as JSON; a 401 names the scheme it wants (Bearer)."""
    data = json.dumps(body).encode()
    extra = [(b"www-authenticate", b"Bearer")] if status == 401 else []
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode()),
                            *extra]})
    await send({"type": "http.response.body", "body": data})


class JsonGuard:
    """ASGI middleware in front of a JSON API on loopback (`hebbs proxy`, `hebbs mcp --http`): `refusal`
    says why a request is refused, as its status and the JSON body the API's own clients read, or None
    to pass it on. What is not HTTP (the server's lifespan) always passes."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        refused = self.refusal(scope["method"], asgi_headers(scope))
        if refused is None:
            return await self.app(scope, receive, send)
        await refuse(send, *refused)

    def refusal(self, method: str, headers: dict[str, str]) -> tuple[int, Any] | None:
        raise NotImplementedError
