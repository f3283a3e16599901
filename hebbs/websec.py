"""What the daemon's panel and `hebbs proxy` share to answer only their own user, on loopback.

A web page in the user's browser can make the browser send requests to 127.0.0.1. The browser says
where such a request came from: `Sec-Fetch-Site` (same-site or cross-site for another site, and for
another port of 127.0.0.1, which SameSite does not tell apart) and `Origin` (sent on every POST and
on cross-origin requests). Clients that are not browsers send neither. Both HTTP servers refuse a
request either header says came from elsewhere, and compare secrets in constant time.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping

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
