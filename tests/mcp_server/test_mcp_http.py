"""`hebbs mcp --http` as a real process against a real daemon, driven by the official MCP SDK's
streamable HTTP client (mcp.client.streamable_http), and refusing what the panel and the proxy refuse."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

import processes

pytest_plugins = ["daemon_fixtures"]

INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                         "clientInfo": {"name": "curl", "version": "1"}}}
MCP_HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


class HttpServer:
    """`hebbs mcp --http --port P` started in a project folder; ready when it says where it serves."""

    def __init__(self, daemon: Any, project: Path, log: Path) -> None:
        from daemon_fixtures import free_port  # type: ignore[import-not-found]

        hebbs = str(Path(sys.executable).with_name("hebbs"))
        self.log = log
        for _ in range(5):
            self.port = free_port()
            self.process = processes.popen([hebbs, "mcp", "--http", "--port", str(self.port)], cwd=project,
                                           env=daemon.env(), stdout=log.open("wb"), stderr=subprocess.STDOUT)
            serving = f"at http://127.0.0.1:{self.port}/mcp"
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and self.process.poll() is None and serving not in log.read_text():
                time.sleep(0.1)
            if serving in log.read_text() and self.process.poll() is None:
                self.token = (Path(daemon.home) / "mcp.token").read_text().strip()
                return
            processes.stop(self.process)
            if "already in use" not in log.read_text():
                break
        raise AssertionError("hebbs mcp --http did not start:\n" + log.read_text())

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    @asynccontextmanager
    async def session(self, **headers: str) -> AsyncIterator[ClientSession]:
        """An agent's MCP session, configured as docs/mcp.md says: the URL and the token as a bearer token
        (and the agent's own headers)."""
        async with create_mcp_http_client(headers={"authorization": f"Bearer {self.token}", **headers}) as http, \
                streamable_http_client(self.url, http_client=http) as (read, write), \
                ClientSession(read, write) as session:
            await session.initialize()
            yield session

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=20)
        finally:
            processes.stop(self.process)


@pytest.fixture
def project(shared_daemon: Any) -> Iterator[Path]:
    root = shared_daemon.project()
    yield root
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def server(shared_daemon: Any, project: Path, tmp_path: Path) -> Iterator[HttpServer]:
    running = HttpServer(shared_daemon, project, tmp_path / "mcp.log")
    try:
        yield running
    finally:
        running.stop()


async def call(session: ClientSession, tool: str, **arguments: Any) -> Any:
    result = await session.call_tool(tool, arguments)
    text = result.content[0].text
    assert not result.is_error, f"{tool} failed: {text}"
    return json.loads(text)


def test_an_agent_over_http_remembers_and_recalls(server: HttpServer, shared_daemon: Any) -> None:
    """Tried: the official client's streamable HTTP transport with the token: list tools, remember, recall."""
    async def scenario() -> Any:
        async with server.session() as session:
            listed = await session.list_tools()
            stored = await call(session, "remember", content="The billing service is written in Go")
            found = await call(session, "recall", cue="which language is the billing service written in")
            return listed, stored, found

    listed, stored, found = asyncio.run(scenario())
    assert {"remember", "recall", "prime", "status"} <= {t.name for t in listed.tools}
    assert stored["brain"] == "project"
    assert found["results"][0]["id"] == stored["id"]
    assert found["results"][0]["content"] == "The billing service is written in Go"
    token_file = Path(shared_daemon.home) / "mcp.token"
    assert token_file.stat().st_mode & 0o777 == 0o600
    access = [line for line in server.log.read_text().splitlines() if "POST /mcp" in line]
    assert access and not [line for line in access if server.token in line]  # access lines never carry it


def test_each_agent_over_http_stores_under_its_own_agent_and_session(server: HttpServer) -> None:
    """Issue 44 item 3: one server, many agents: each names itself with X-Hebbs-Agent and X-Hebbs-Session
    (docs/mcp.md); what it stores goes under them, and recall filters by them."""
    async def scenario() -> Any:
        async with server.session(**{"x-hebbs-agent": "coder", "x-hebbs-session": "pr-311"}) as coder, \
                server.session(**{"x-hebbs-agent": "reviewer"}) as reviewer:
            mine = await call(coder, "remember", content="The search indexer batches 500 documents per commit")
            theirs = await call(reviewer, "remember", content="The search indexer commit batch should be 1000")
            only = await call(reviewer, "recall", cue="search indexer batch size", agent="coder")
            return mine, theirs, only

    mine, theirs, only = asyncio.run(scenario())
    assert (mine["agent"], mine["session"]) == ("coder", "pr-311")
    assert theirs["agent"] == "reviewer" and "session" not in theirs
    assert [r["id"] for r in only["results"]] == [mine["id"]]


def test_two_agents_at_once_share_the_memory(server: HttpServer) -> None:
    """Tried: two sessions open together on one server; what one remembers the other recalls."""
    async def scenario() -> Any:
        async with server.session() as first, server.session() as second:
            stored = await asyncio.gather(
                call(first, "remember", content="The deploy pipeline retries flaky integration tests twice"),
                call(second, "remember", content="Rollback of the payment service took four minutes"))
            found = await asyncio.gather(call(first, "recall", cue="how long did the payment rollback take"),
                                         call(second, "recall", cue="how often are flaky tests retried"))
            return stored, found

    (pipeline, rollback), (by_first, by_second) = asyncio.run(scenario())
    assert by_first["results"][0]["id"] == rollback["id"]
    assert by_second["results"][0]["id"] == pipeline["id"]


@pytest.mark.parametrize("headers, status, says", [
    ({}, 401, "client token"),
    ({"authorization": "Bearer hebbs-not-the-token"}, 401, "client token"),
    ({"host": "evil.example:{port}"}, 403, "answers only to Host"),
    ({"host": "127.0.0.1:1"}, 403, "answers only to Host"),
    ({"origin": "http://evil.example"}, 403, "refuses requests from web pages"),
    ({"origin": "http://127.0.0.1:1"}, 403, "refuses requests from web pages"),
    ({"sec-fetch-site": "cross-site"}, 403, "refuses requests from web pages"),
])
def test_requests_it_must_refuse(server: HttpServer, headers: dict[str, str], status: int, says: str) -> None:
    """Tried: an initialize with no token, a wrong one, a foreign Host (DNS rebinding), and a browser's
    cross-site Origin or Sec-Fetch-Site (each of the last three with the right token)."""
    sent = {**MCP_HEADERS, **({} if status == 401 else {"authorization": f"Bearer {server.token}"})}
    sent.update({name: value.format(port=server.port) for name, value in headers.items()})
    answer = httpx.post(server.url, json=INITIALIZE, headers=sent, timeout=60)
    assert answer.status_code == status, answer.text
    assert says in answer.json()["error"]["message"]
    if status == 401:
        assert answer.headers["www-authenticate"] == "Bearer"
    right = httpx.post(server.url, json=INITIALIZE, timeout=60,
                       headers={**MCP_HEADERS, "authorization": f"Bearer {server.token}"})
    assert right.status_code == 200, right.text  # the same request, as it should be, is answered


def test_it_listens_on_loopback_unless_told(shared_daemon: Any, project: Path) -> None:
    """Tried: a non-loopback --host without --allow-remote, every address at once even with it, and --port
    without --http: each refused with its reason, nothing served."""
    remote = shared_daemon.hebbs("mcp", "--http", "--host", "192.0.2.7", "--port", "6399", cwd=project, check=False)
    assert remote.returncode != 0 and "loopback only" in remote.stderr and "Traceback" not in remote.stderr
    wide = shared_daemon.hebbs("mcp", "--http", "--host", "0.0.0.0", "--allow-remote", "--port", "6399", cwd=project,
                               check=False)
    assert wide.returncode != 0 and "names no one address" in wide.stderr and "Traceback" not in wide.stderr
    stdio = shared_daemon.hebbs("mcp", "--port", "6399", cwd=project, check=False)
    assert stdio.returncode != 0 and "are for --http" in stdio.stderr
