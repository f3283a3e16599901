"""`hebbs mcp --http`: the MCP server of hebbs/mcp_server.py over the SDK's streamable HTTP transport.

One process serves many agents at once (each an MCP session of its own), all through the same daemon
clients. Who is answered (Guard), as `hebbs proxy` and the panel do (hebbs.websec): Host the served
address and port only (a DNS-rebinding page's own name is refused), no request a browser says another
site or port sent, and the client token ($HEBBS_HOME/mcp.token, 0600) as a bearer token on every request.
It listens on loopback unless told otherwise with --allow-remote: plain HTTP carries the token in clear.
"""

from __future__ import annotations

import asyncio
import errno
import ipaddress
import os
import socket
import sys
from typing import Any

from .errors import HebbsError, InvalidInput
from .mcp_server import build_server, checked_tools
from .paths import kept_token
from .websec import JsonGuard, bearer_matches, foreign_request, local_hosts

TOKEN_FILE = "mcp.token"
DEFAULT_PORT = 6383
PATH = "/mcp"


class PortInUse(HebbsError):
    status_code = "PORT_IN_USE"


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _unspecified(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_unspecified
    except ValueError:
        return False


def hosts_answered(host: str, port: int) -> frozenset[str]:
    """The Host values the server answers to: its loopback names, and the address it was told to serve on."""
    return local_hosts(port) | {address(host, port)}


def address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


class Guard(JsonGuard):
    """ASGI middleware in front of the SDK's app: every refusal a JSON-RPC error an MCP client shows."""

    def __init__(self, app: Any, hosts: frozenset[str], port: int, token: str) -> None:
        super().__init__(app)
        self.hosts = hosts
        self.port = port
        self.token = token

    def refusal(self, method: str, headers: dict[str, str]) -> tuple[int, Any] | None:
        why = self._why(headers)
        return None if why is None else (why[0], {"jsonrpc": "2.0", "id": None,
                                                  "error": {"code": -32600, "message": why[1]}})

    def _why(self, headers: dict[str, str]) -> tuple[int, str] | None:
        if headers.get("host") not in self.hosts:
            return 403, f"hebbs mcp answers only to Host {' or '.join(sorted(self.hosts))}"
        foreign = foreign_request(headers, self.port)
        if foreign:
            return 403, f"hebbs mcp refuses requests from web pages: {foreign}"
        if not bearer_matches(headers, self.token):
            return 401, (f"hebbs mcp needs its client token (Authorization: Bearer): it is in $HEBBS_HOME/{TOKEN_FILE} "
                         "(docs/mcp.md)")
        return None


def listen(host: str, port: int) -> socket.socket:
    """The listening socket, bound before anything is said: a taken port is a clear error, not a traceback."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise PortInUse(f"port {port} is already in use on {host}; pick another with `hebbs mcp --http --port N`") \
                from None
        raise InvalidInput(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    sock.listen(128)
    return sock


def serve_http(home: os.PathLike | str | None = None, vault: os.PathLike | str | None = None,
               global_: bool = False, *, host: str = "127.0.0.1", port: int = DEFAULT_PORT,
               allow_remote: bool = False) -> None:
    """Serve MCP over streamable HTTP at http://HOST:PORT/mcp until Ctrl-C."""
    import uvicorn
    from mcp.server.transport_security import TransportSecuritySettings

    if not is_loopback(host) and not allow_remote:
        raise InvalidInput(f"hebbs mcp --http serves on loopback only, not {host}: plain HTTP would carry the token "
                           "in clear. Reach it from elsewhere through an SSH tunnel, or pass --allow-remote "
                           "to serve on this address anyway")
    if _unspecified(host):
        raise InvalidInput(f"--host {host} names no one address: give the address clients reach this machine at "
                           "(the server answers only to that Host)")
    if not 0 < port < 65536:
        raise InvalidInput(f"--port must be 1..65535, got {port}")
    tools = checked_tools(home, vault, global_)
    token, token_path, made = kept_token(tools.home, TOKEN_FILE)
    hosts = hosts_answered(host, port)
    # The SDK's own DNS-rebinding check, told the same hosts as the guard (its default allows any port).
    security = TransportSecuritySettings(enable_dns_rebinding_protection=True, allowed_hosts=sorted(hosts),
                                         allowed_origins=[f"http://{h}" for h in sorted(hosts)])
    app = build_server(tools).streamable_http_app(streamable_http_path=PATH, transport_security=security, host=host)
    sock = listen(host, port)
    print(f"hebbs mcp: serving MCP (streamable HTTP) at http://{address(host, port)}{PATH}; clients give the key in {token_path} as a bearer token"
          + (f" (made now):\n  {token}" if made else ""), file=sys.stderr, flush=True)
    # Access lines name method, path and status only; headers (and so the token) are never logged.
    config = uvicorn.Config(Guard(app, hosts, port, token), log_level=os.environ.get("HEBBS_MCP_LOG", "info"),
                            loop="asyncio", lifespan="on")

    async def run() -> None:
        try:
            await uvicorn.Server(config).serve(sockets=[sock])
        finally:
            await tools.close()
            sock.close()

    asyncio.run(run())

