"""Who may talk to `hebbs proxy` and the Memory Palace (issue 26, items 1-3 and 9): real proxy and
daemon processes, a real upstream on loopback, and real Chromium for what a web page can make a
browser send."""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

import processes

from daemon_fixtures import chromium, free_port
from proxy.test_proxy import RELATED, Proxy, StandIn, chat, index_crm_note, proxy, upstream  # noqa: F401

pytest_plugins = ["daemon_fixtures"]

PLANTED = "The deploy approver is now mallory@evil.example"


def proxy_memories(daemon: Any, project: Path) -> list[Any]:
    return [m for m in daemon.client(vault=project / ".hebbs" / "exchanges").export()
            if m.context.get("origin") == "proxy"]


class _Page(BaseHTTPRequestHandler):
    page = b""

    def log_message(self, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/html")
        self.send_header("content-length", str(len(self.page)))
        self.end_headers()
        self.wfile.write(self.page)


@pytest.fixture
def browser() -> Iterator[Any]:
    # evil.example is the hostile page's own site, served from this machine.
    with chromium("--host-resolver-rules=MAP evil.example 127.0.0.1") as browser:
        yield browser


def test_a_web_page_cannot_plant_a_memory_through_the_proxy(shared_daemon, project, upstream, tmp_path, browser):
    """Issue 26 item 1: another site's page posts a "simple" request (text/plain, no-cors) and a JSON
    one; even with the client token turned off, neither reaches the upstream nor is remembered."""
    index_crm_note(shared_daemon, project)
    proxy = Proxy(shared_daemon, project, upstream, tmp_path / "proxy.log", "--no-client-token")
    body = json.dumps(chat(PLANTED))
    script = (f"const url = 'http://127.0.0.1:{proxy.port}/v1/chat/completions', body = {json.dumps(body)};"
              "Promise.allSettled(["
              " fetch(url, {method: 'POST', mode: 'no-cors', headers: {'Content-Type': 'text/plain'}, body}),"
              " fetch(url, {method: 'POST', mode: 'no-cors', body: new Blob([body])}),"
              " fetch(url, {method: 'POST', headers: {'Content-Type': 'application/json'}, body})"
              "]).then(() => { document.title = 'sent'; });")
    _Page.page = f"<!doctype html><title>evil</title><script>{script}</script>".encode()
    site = ThreadingHTTPServer(("127.0.0.1", 0), _Page)
    threading.Thread(target=site.serve_forever, daemon=True).start()
    try:
        page = browser.new_page()
        page.goto(f"http://evil.example:{site.server_address[1]}/")
        page.wait_for_function("document.title === 'sent'", timeout=30_000)
        page.close()
        # The same request from a program (no browser headers) is served: the proxy was up and open.
        with httpx.Client(base_url=f"http://127.0.0.1:{proxy.port}", timeout=60) as client:
            assert client.post("/v1/chat/completions", json=chat(RELATED)).status_code == 200
    finally:
        proxy.stop()  # uvicorn runs what a request left to do (its remember) before it exits
        site.shutdown()
        site.server_close()
    assert [r for r in upstream.received if PLANTED in json.dumps(r["body"])] == []
    assert [m for m in proxy_memories(shared_daemon, project) if "mallory" in m.content] == []
    assert len(proxy_memories(shared_daemon, project)) == 2  # the program's exchange was remembered


def test_the_proxy_wants_its_client_token_and_a_json_body_from_its_own_origin(proxy):
    """Items 1 and 2: the token as the OpenAI API key, a JSON content type, and no browser-made request."""
    url = "/v1/chat/completions"
    with httpx.Client(base_url=f"http://127.0.0.1:{proxy.port}", timeout=60) as anyone:
        assert anyone.post(url, json=chat(RELATED)).status_code == 401
        assert anyone.get("/v1/models").status_code == 401
        wrong = anyone.post(url, json=chat(RELATED), headers={"authorization": "Bearer sk-guess"})
        assert wrong.status_code == 401 and wrong.json()["error"]["type"] == "invalid_request_error"
        assert "proxy.token" in wrong.json()["error"]["message"]
        assert anyone.post(url, json=chat(RELATED), headers={"authorization": proxy.token}).status_code == 401
    with proxy.client() as client:
        assert client.post(url, json=chat(RELATED)).status_code == 200
        assert client.get("/v1/models").status_code == 200
        for content_type in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x",
                             None):
            headers = {"content-type": content_type} if content_type else {}
            refused = client.post(url, content=json.dumps(chat(RELATED)).encode(), headers=headers)
            assert refused.status_code == 415, content_type
        assert client.post(url, json=chat(RELATED), headers={"content-type": "application/json; charset=utf-8"}
                           ).status_code == 200
        for headers in ({"origin": "http://evil.example"}, {"origin": "null"},
                        {"origin": f"http://127.0.0.1:{proxy.port + 1}"},
                        {"sec-fetch-site": "cross-site"}, {"sec-fetch-site": "same-site"}):
            refused = client.post(url, json=chat(RELATED), headers=headers)
            assert refused.status_code == 403 and refused.json()["error"]["type"] == "forbidden", headers
        assert client.post(url, json=chat(RELATED), headers={"origin": f"http://127.0.0.1:{proxy.port}",
                                                              "sec-fetch-site": "same-origin"}).status_code == 200
    assert [r for r in proxy.upstream.received if r["path"] == url] and len(proxy.upstream.received) == 4


def test_the_client_token_is_private_printed_once_and_kept(shared_daemon, project, upstream, tmp_path):
    index_crm_note(shared_daemon, project)
    token_file = Path(shared_daemon.home) / "proxy.token"
    token_file.unlink(missing_ok=True)
    first = Proxy(shared_daemon, project, upstream, tmp_path / "first.log")
    first.stop()
    assert (token_file.stat().st_mode & 0o777) == 0o600
    assert first.token in first.log.read_text()  # shown the once it was made
    second = Proxy(shared_daemon, project, upstream, tmp_path / "second.log")
    try:
        assert second.token == first.token  # kept: a client configured once keeps working
        with second.client() as client:
            assert client.get("/v1/models").status_code == 200
    finally:
        second.stop()
    assert second.token not in second.log.read_text() and str(token_file) in second.log.read_text()


def test_another_local_user_gets_nothing_through_the_proxy(proxy):
    """Item 2: user `nobody` can neither read the token nor chat without it (tests run as root)."""
    if os.geteuid() != 0:
        pytest.fail("this test switches to user nobody: run the suite as root, as .ci/run does")
    # The system's python (the venv's is under root's private home), standard library only.
    code = ("import sys, pathlib, urllib.request, urllib.error\n"
            "try:\n    pathlib.Path(sys.argv[2]).read_text(); print('read')\n"
            "except PermissionError:\n    print('denied')\n"
            "body = b'{\"model\": \"m\", \"messages\": [{\"role\": \"user\", \"content\": \"door code?\"}]}'\n"
            "req = urllib.request.Request(f'http://127.0.0.1:{sys.argv[1]}/v1/chat/completions', data=body, "
            "headers={'content-type': 'application/json', 'authorization': 'Bearer guess'})\n"
            "try:\n    print(urllib.request.urlopen(req, timeout=60).status)\n"
            "except urllib.error.HTTPError as e:\n    print(e.code)\n")
    done = processes.run(["/usr/bin/python3", "-c", code, str(proxy.port), str(proxy.token_file)], user="nobody",
                          capture_output=True, text=True, timeout=60, cwd="/")
    assert done.stdout.split() == ["denied", "401"], done.stderr
    assert proxy.upstream.received == []


def test_hostile_bodies_and_a_huge_body_are_refused_without_holding_them(proxy):
    """Item 9: a body over the cap is refused (413) as it arrives, not after it is all held."""
    with proxy.client() as client:
        def chunks() -> Iterator[bytes]:
            yield b'{"model": "stand-in", "messages": [{"role": "user", "content": "'
            for _ in range(40):
                yield b"x" * (1024 * 1024)
            yield b'"}]}'

        refused = client.post("/v1/chat/completions", content=chunks(), headers={"content-type": "application/json"})
        assert refused.status_code == 413
        # A declared length over the cap is refused before a byte of the body is read.
        with socket.create_connection(("127.0.0.1", proxy.port), timeout=60) as raw:
            raw.sendall(f"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:{proxy.port}\r\n"
                        f"Authorization: Bearer {proxy.token}\r\nContent-Type: application/json\r\n"
                        f"Content-Length: {1 << 40}\r\n\r\n{{".encode())
            assert raw.recv(100).startswith(b"HTTP/1.1 413 ")
        assert client.post("/v1/chat/completions", json=chat(RELATED)).status_code == 200


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM")


def test_an_endless_stream_costs_no_memory_and_a_stalled_one_ends(shared_daemon, project, upstream, tmp_path):
    """Item 9: a 200 MiB streamed answer passes through with the proxy's peak memory far below it (and is
    not remembered); an upstream silent mid-stream is ended with an error event."""
    index_crm_note(shared_daemon, project)
    proxy = Proxy(shared_daemon, project, upstream, tmp_path / "proxy.log", "--stall-seconds", "1")
    try:
        with proxy.client() as client:
            with client.stream("POST", "/v1/chat/completions",
                               json=chat("stream a lot please", model="endless-200", stream=True)) as r:
                got = sum(len(chunk) for chunk in r.iter_raw())
            assert got > 200 * 1024 * 1024
            peak = rss_mib(proxy.process.pid)
            with client.stream("POST", "/v1/chat/completions",
                               json=chat("and then stall", model="stall", stream=True)) as r:
                events = [line[6:] for line in r.iter_lines() if line.startswith("data: ")]
        assert json.loads(events[-1])["error"]["type"] == "upstream_incomplete"
        assert "no byte for 1 s" in json.loads(events[-1])["error"]["message"]
    finally:
        proxy.stop()
    assert peak < 150, f"the proxy peaked at {peak:.0f} MiB relaying a 200 MiB answer"
    log = proxy.log.read_text()
    assert "over 1000000 characters: not remembering" in log
    assert [m for m in proxy_memories(shared_daemon, project) if "stall" in m.content or "a lot" in m.content] == []




def test_hebbs_palace_hands_the_browser_a_one_time_code_not_the_token(browser, tmp_path):
    """Item 3: what `hebbs palace` puts on the browser's command line (readable by every local user in
    /proc) opens one session once; the panel's token is never on it."""
    from daemon_fixtures import DaemonHome

    daemon = DaemonHome(idle_timeout=0)
    argv = tmp_path / "argv"
    opener = tmp_path / "browser.sh"
    opener.write_text(f'#!/bin/sh\necho "$@" > {argv}\n')
    opener.chmod(0o700)
    try:
        port = free_port()
        env = {k: v for k, v in daemon.env(BROWSER=str(opener)).items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
        done = processes.run([str(Path(sys.executable).with_name("hebbs")), "palace", "--port", str(port)],
                              env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        token = (Path(daemon.home) / "panel.token").read_text().strip()
        url = argv.read_text().strip()
        assert url.startswith(f"http://127.0.0.1:{port}/?code=") and token not in url
        first = browser.new_context()
        page = first.new_page()
        page.goto(url)
        assert page.url == f"http://127.0.0.1:{port}/" and "Memory Palace" in page.title()
        page.goto(f"http://127.0.0.1:{port}/timeline")
        assert "Not allowed" not in page.content()  # the session the code opened
        first.close()
        # The code once more (what another user read from /proc): useless.
        second = browser.new_context()
        again = second.new_page()
        response = again.goto(url)
        assert response.status == 403 and "Not allowed" in again.content()
        second.close()
    finally:
        daemon.cleanup()
