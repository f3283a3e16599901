"""`hebbs proxy` end to end: the real CLI process, a real daemon, and a small OpenAI-compatible server
written here on loopback standing in for the upstream (it records what it received)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

import processes
from daemon_fixtures import free_port

pytest_plugins = ["daemon_fixtures"]

KEY = "sk-test-4f1d9c0b7e2a"
KEY_ENV = "HEBBS_TEST_UPSTREAM_KEY"
RELATED = "Which CRM does Acme use, and when is the contract renewed?"
UNRELATED = "quantum chromodynamics lattice gauge"


class StandIn(ThreadingHTTPServer):
    """An OpenAI-compatible server: echoes what it was sent, streams on request, fails on request."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.received: list[dict[str, Any]] = []

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


class Unreachable:
    """An upstream address on a port bound but never listening: it refuses every connection."""

    def __init__(self, held: socket.socket) -> None:
        self.base_url = f"http://127.0.0.1:{held.getsockname()[1]}/v1"


class _Handler(BaseHTTPRequestHandler):
    server: StandIn

    def log_message(self, *args: Any) -> None:
        pass

    def _record(self, body: Any) -> None:
        self.server.received.append({"path": self.path, "headers": {k.lower(): v for k, v in self.headers.items()}, "body": body})

    def _send(self, status: int, payload: Any, content_type: str = "application/json") -> None:
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self._record(None)
        if self.path == "/v1/models":
            return self._send(200, {"object": "list", "data": [{"id": "stand-in", "object": "model"}]})
        self._send(404, {"error": {"message": "no such path"}})

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        self._record(body)
        model = body.get("model", "")
        if model.startswith("fail-"):
            status = int(model[5:])
            return self._send(status, {"error": {"message": f"stand-in failure {status}", "type": "stand_in"}})
        systems = sum(1 for m in body["messages"] if m["role"] == "system")
        text = f"You asked: {body['messages'][-1]['content']} ({systems} system messages)"
        if model.startswith("cut-"):
            return self._cut_stream(model, text)
        if model.startswith("endless-") or model == "stall":
            return self._long_stream(model)
        if not body.get("stream"):
            return self._send(200, {"id": "chatcmpl-1", "object": "chat.completion", "model": model, "choices": [
                {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}]})
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.end_headers()
        for piece in (text[:10], text[10:]):
            event = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": model,
                     "choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}]}
            self.wfile.write(b"data: " + json.dumps(event).encode() + b"\n\n")
            self.wfile.flush()
            time.sleep(0.05)
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()
        self.close_connection = True

    def _long_stream(self, model: str) -> None:
        """`endless-MB`: MB megabytes of deltas as fast as they go, then [DONE]; `stall`: one chunk, then
        silence until the client leaves."""
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.end_headers()
        event = {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"content": "y" * 65536}}]}
        line = b"data: " + json.dumps(event).encode() + b"\n\n"
        try:
            if model == "stall":
                self.wfile.write(line)
                self.wfile.flush()
                time.sleep(60)
                return
            for _ in range(int(model[8:]) * 16):
                self.wfile.write(line)
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()
        except OSError:
            pass  # the client went away
        self.close_connection = True

    def _cut_stream(self, model: str, text: str) -> None:
        """The first chunk of a streamed answer, then the connection closes: cleanly at the end of a
        close-delimited body (`cut-close`), or short of the content-length it promised (`cut-broken`)."""
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        if model == "cut-broken":
            self.send_header("content-length", "100000")
        self.end_headers()
        event = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": model,
                 "choices": [{"index": 0, "delta": {"content": text[:10]}, "finish_reason": None}]}
        self.wfile.write(b"data: " + json.dumps(event).encode() + b"\n\n")
        self.wfile.flush()
        self.close_connection = True


class Proxy:
    def __init__(self, daemon: Any, project: Path, upstream: StandIn | Unreachable, log: Path, *extra: str) -> None:
        self.log = log
        self.upstream = upstream
        hebbs = str(Path(sys.executable).with_name("hebbs"))
        # The client token, as a user finds it (docs/proxy.md): made at the first start, kept 0600.
        self.token_file = Path(daemon.home) / "proxy.token"
        # Ready when its log says it serves its own port: a connection alone could reach another
        # test's server that took the port between free_port and the proxy's bind, which then fails
        # with "address already in use" and is started again on another port.
        for _ in range(5):
            self.port = free_port()
            self.process = processes.popen(
                [hebbs, "proxy", "--upstream", upstream.base_url, "--port", str(self.port), "--api-key-env", KEY_ENV,
                 "--remember", "--vault", str(project), *extra],
                env=daemon.env(**{KEY_ENV: KEY}), stdout=log.open("wb"), stderr=subprocess.STDOUT)
            serving = f"Uvicorn running on http://127.0.0.1:{self.port} "
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and self.process.poll() is None and serving not in log.read_text():
                time.sleep(0.1)
            if serving in log.read_text() and self.process.poll() is None:
                self.token = self.token_file.read_text().strip() if self.token_file.exists() else ""
                return
            self.stop()
            if "address already in use" not in log.read_text():
                break
        raise AssertionError("the proxy did not start:\n" + log.read_text())

    def client(self, **kwargs: Any) -> httpx.Client:
        """An HTTP client that gives the client token as its API key, as an OpenAI client would."""
        headers = {"authorization": f"Bearer {self.token}", **kwargs.pop("headers", {})}
        return httpx.Client(base_url=f"http://127.0.0.1:{self.port}", timeout=60, headers=headers, **kwargs)

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()


@pytest.fixture
def upstream() -> Iterator[StandIn]:
    server = StandIn()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def index_crm_note(daemon: Any, project: Path) -> None:
    (project / "crm.md").write_text("# Customers\n\n## Acme\n\nAcme uses Salesforce as its CRM and renews the "
                                    "contract every March.\n", encoding="utf-8")
    daemon.hebbs("index", str(project), "--format", "json")


@pytest.fixture
def proxy(shared_daemon, project, upstream, tmp_path) -> Iterator[Proxy]:
    index_crm_note(shared_daemon, project)
    running = Proxy(shared_daemon, project, upstream, tmp_path / "proxy.log")
    yield running
    running.stop()


# Well-formed JSON to a lenient parser, and nothing the proxy can send on: each is a 400, never a 500.
HOSTILE_BODIES = [
    b'{"model": "stand-in", "messages": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
    b'{"model": "stand-in", "temperature": NaN, "messages": [{"role": "user", "content": "hi"}]}',
    b'{"model": "stand-in", "temperature": 1e999, "messages": [{"role": "user", "content": "hi"}]}',
    b'{"model": "stand-in", "temperature": -Infinity, "messages": [{"role": "user", "content": "hi"}]}',
    b'{"model": "stand-in", "messages": [{"role": "user", "content": "hi \\ud800 there"}]}',
    b'{"model": "stand-in", "messages": [{"role": "user", "content": "x"}], "user": "\\udfff"}',
    b'\xff\xfe{"messages": []}',
]


def exchanges(daemon: Any, project: Path) -> Any:
    """The vault the proxy remembers exchanges in: its own, beside the project vault."""
    return daemon.client(vault=project / ".hebbs" / "exchanges")


def chat(content: str, **extra: Any) -> dict[str, Any]:
    return {"model": "stand-in", "messages": [{"role": "system", "content": "Be brief."},
                                               {"role": "user", "content": content}], **extra}


def test_round_trip_adds_cited_memories_for_a_related_question(proxy):
    with proxy.client() as client:
        reply = client.post("/v1/chat/completions", json=chat(RELATED))
    assert reply.status_code == 200
    assert reply.json()["choices"][0]["message"]["content"].startswith("You asked: " + RELATED)
    sent = proxy.upstream.received[-1]
    messages = sent["body"]["messages"]
    assert [m["role"] for m in messages] == ["system", "system", "user"]
    assert messages[0]["content"] == "Be brief."
    memories = messages[1]["content"]
    memory_id = reply.headers["x-hebbs-memories"].split(",")[0]
    assert f"[{memory_id}]" in memories and "crm.md > Customers > Acme" in memories
    assert "Salesforce" in memories and reply.headers["x-hebbs-abstained"] == "false"
    # The key reaches the upstream in the Authorization header, and only there; the client's own is dropped.
    assert sent["headers"]["authorization"] == f"Bearer {KEY}"
    assert [name for name, value in sent["headers"].items() if KEY in value] == ["authorization"]
    assert KEY not in json.dumps(sent["body"]) and KEY not in sent["path"]
    # The client token the client gave is the proxy's alone: it never reaches the upstream.
    assert proxy.token not in json.dumps(sent)


def test_unrelated_question_adds_nothing(proxy):
    with proxy.client() as client:
        reply = client.post("/v1/chat/completions", json=chat(UNRELATED))
    assert reply.status_code == 200
    assert reply.headers["x-hebbs-abstained"] == "true" and reply.headers["x-hebbs-memories"] == ""
    assert [m["role"] for m in proxy.upstream.received[-1]["body"]["messages"]] == ["system", "user"]


def test_streaming_round_trip(proxy):
    with proxy.client() as client, client.stream("POST", "/v1/chat/completions", json=chat(RELATED, stream=True)) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        events = [line for line in r.iter_lines() if line.startswith("data: ")]
    assert events[-1] == "data: [DONE]"
    text = "".join(json.loads(e[6:])["choices"][0]["delta"]["content"] for e in events[:-1])
    assert text == f"You asked: {RELATED} (2 system messages)"
    assert proxy.upstream.received[-1]["body"]["stream"] is True


@pytest.mark.parametrize("status", [400, 429, 500, 503])
def test_upstream_errors_come_back_as_they_are(proxy, status):
    for stream in (False, True):
        with proxy.client() as client:
            reply = client.post("/v1/chat/completions", json=chat(RELATED, model=f"fail-{status}", stream=stream))
        assert reply.status_code == status
        assert reply.json() == {"error": {"message": f"stand-in failure {status}", "type": "stand_in"}}


def test_models_pass_through_and_bad_host_is_refused(proxy):
    with proxy.client() as client:
        assert client.get("/v1/models").json()["data"][0]["id"] == "stand-in"
        assert client.get("/v1/models", headers={"host": f"localhost:{proxy.port}"}).status_code == 200
        refused = client.post("/v1/chat/completions", json=chat(RELATED), headers={"host": f"evil.test:{proxy.port}"})
        assert refused.status_code == 403
        assert client.get("/v1/models", headers={"host": "127.0.0.1:1"}).status_code == 403
    assert proxy.upstream.received[-1]["path"] == "/v1/models"


def test_unreachable_upstream_is_an_error_not_an_answer(shared_daemon, project, tmp_path):
    index_crm_note(shared_daemon, project)
    # A port bound but never listening refuses every connection, and stays ours: a port freed instead
    # was once handed to the proxy itself by free_port, which then answered its own forward with 401.
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        running = Proxy(shared_daemon, project, Unreachable(held), tmp_path / "proxy.log")
        try:
            with running.client() as client:
                reply = client.post("/v1/chat/completions", json=chat(RELATED))
            assert reply.status_code == 502 and reply.json()["error"]["type"] == "upstream_unreachable"
            # The memories recalled for the request that never got through are still named.
            assert reply.headers["x-hebbs-abstained"] == "false" and reply.headers["x-hebbs-memories"]
        finally:
            running.stop()


def test_bad_requests_and_wrong_methods_are_said(proxy):
    with proxy.client() as client:
        not_json = client.post("/v1/chat/completions", content=b"{not json",
                               headers={"content-type": "application/json"})
        hostile = [client.post("/v1/chat/completions", content=body, headers={"content-type": "application/json"})
                   for body in HOSTILE_BODIES]
        no_messages = client.post("/v1/chat/completions", json={"model": "stand-in"})
        get_chat = client.get("/v1/chat/completions")
        post_models = client.post("/v1/models", json={})
        unknown = client.get("/v1/embeddings")
    for reply in (not_json, no_messages, *hostile):
        assert reply.status_code == 400 and reply.json()["error"]["type"] == "invalid_request_error"
        assert reply.headers["x-hebbs-memories"] == "" and reply.headers["x-hebbs-abstained"] == "true"
    assert get_chat.status_code == 405 and get_chat.headers["allow"] == "POST"
    assert get_chat.json()["error"]["type"] == "method_not_allowed"
    assert post_models.status_code == 405 and post_models.headers["allow"] == "GET, HEAD"
    assert unknown.status_code == 404 and unknown.json()["error"]["type"] == "not_found"
    assert proxy.upstream.received == []


def test_remember_stores_the_exchange_and_the_key_stays_out_of_logs(proxy, shared_daemon, project):
    question = "Note for later: the staging database moves to Postgres 16 on Friday"
    with proxy.client() as client:
        assert client.post("/v1/chat/completions", json=chat(question)).status_code == 200
        with client.stream("POST", "/v1/chat/completions", json=chat("And streaming answers are kept too?",
                                                                    stream=True)) as r:
            r.read()
    vault = exchanges(shared_daemon, project)

    def exchange(text: str) -> list[Any]:
        return [m for m in vault.export() if m.context.get("origin") == "proxy" and text in m.content]

    shared_daemon.wait_until(lambda: len(exchange("Postgres 16")) == 2 and len(exchange("streaming answers")) == 2,
                             what="both exchanges remembered")
    asked, answered = sorted(exchange("Postgres 16"), key=lambda m: m.context["role"] != "user")
    assert asked.content == question and asked.context["role"] == "user"
    assert answered.context["role"] == "assistant" and answered.context["reply_to"] == asked.id
    assert answered.context["exchange"] == asked.context["exchange"]
    assert answered.content == f"You asked: {question} (1 system messages)"
    streamed = [m for m in exchange("streaming answers") if m.context["role"] == "assistant"][0]
    assert streamed.content == "You asked: And streaming answers are kept too? (1 system messages)"
    # Later chats cite what the user said, never what a model answered.
    with proxy.client() as client:
        reply = client.post("/v1/chat/completions", json=chat("Is staging moving to Postgres 16 on Friday?"))
    cited = reply.headers["x-hebbs-memories"].split(",")
    assert asked.id in cited and answered.id not in cited
    assert "asked by the user in an earlier chat" in proxy.upstream.received[-1]["body"]["messages"][1]["content"]
    proxy.stop()
    assert KEY not in proxy.log.read_text()
    assert "POST /v1/chat/completions" in proxy.log.read_text()


def test_one_recall_over_both_brains_labels_each_memory(proxy, shared_daemon):
    """The global brain (who the user is) and the project vault answer one recall; each memory in the
    system message names its brain, and a question neither knows still abstains."""
    home = shared_daemon.client(global_=True)
    mine = home.remember("The user's cat is called Biscuit and eats salmon every Sunday.")
    try:
        with proxy.client() as client:
            about_me = client.post("/v1/chat/completions", json=chat("What is my cat called and what does it eat?"))
            about_me_sent = proxy.upstream.received[-1]["body"]["messages"]
            about_work = client.post("/v1/chat/completions", json=chat(RELATED))
            about_work_sent = proxy.upstream.received[-1]["body"]["messages"]
            unrelated = client.post("/v1/chat/completions", json=chat(UNRELATED))
        assert about_me.status_code == 200 and about_me.headers["x-hebbs-abstained"] == "false"
        assert mine.id in about_me.headers["x-hebbs-memories"].split(",")
        assert f"[{mine.id}] (global brain; confidence" in about_me_sent[1]["content"]
        assert about_work.headers["x-hebbs-abstained"] == "false" and mine.id not in about_work.headers["x-hebbs-memories"]
        assert "(project brain, crm.md > Customers > Acme;" in about_work_sent[1]["content"]
        assert unrelated.headers["x-hebbs-abstained"] == "true" and unrelated.headers["x-hebbs-memories"] == ""
        assert [m["role"] for m in proxy.upstream.received[-1]["body"]["messages"]] == ["system", "user"]
    finally:
        home.forget([mine.id])


@pytest.mark.parametrize("cut", ["cut-close", "cut-broken"])
def test_a_stream_cut_short_is_flagged_and_not_remembered(proxy, shared_daemon, project, cut):
    """An upstream that stops after one chunk (no finish_reason, no [DONE]) did not give an answer: the
    client is told in the stream, the proxy logs it, and nothing of the exchange is remembered."""
    with proxy.client() as client, client.stream("POST", "/v1/chat/completions",
                                                 json=chat("Which port does the staging cache use?", model=cut,
                                                           stream=True)) as r:
        assert r.status_code == 200
        events = [line[6:] for line in r.iter_lines() if line.startswith("data: ")]
    assert "[DONE]" not in events
    assert json.loads(events[0])["choices"][0]["delta"]["content"] == "You asked:"
    assert json.loads(events[-1])["error"]["type"] == "upstream_incomplete"
    proxy.stop()  # uvicorn finishes what the request left running (its background remember) before it exits
    assert "not remembering the exchange" in proxy.log.read_text()
    assert [m for m in exchanges(shared_daemon, project).export() if m.context.get("origin") == "proxy"] == []


def test_a_long_message_is_not_fed_back_as_its_own_memory(proxy, shared_daemon, project):
    """The cue is cut to its first characters; the check for the message itself must not be."""
    message = " ".join(f"Step {i}: copy the nightly backup of the billing ledger to the cold-storage bucket "
                       f"and verify checksum {i * 7919}." for i in range(40))
    assert len(message) > 3500
    vault = exchanges(shared_daemon, project)

    def asked() -> list[Any]:
        return [m for m in vault.export() if m.context.get("role") == "user" and m.content == message]

    with proxy.client() as client:
        assert client.post("/v1/chat/completions", json=chat(message)).status_code == 200
        shared_daemon.wait_until(lambda: len(asked()) == 1, what="the message remembered")
        again = client.post("/v1/chat/completions", json=chat(message))
    assert again.status_code == 200 and asked()[0].id not in again.headers["x-hebbs-memories"].split(",")


def test_exchanges_are_kept_apart_from_the_sources_and_each_keeps_its_own_reply(proxy, shared_daemon, project):
    """Issue 30 items 4 and 5: remembered exchanges are not sources. They are kept in a vault of their
    own (context type "exchange"), so a notes question asked of the project vault gets the note first
    (before the fix the stored answer ranked first at confidence 0.97, the question second); through
    the proxy they come after the sources. Two exchanges that got the same answer keep two answers,
    each replying to its own question (before, the second was folded into the first)."""
    question = "Which CRM does Acme use, and when is the contract renewed?"
    with proxy.client() as client:
        for _ in range(2):
            assert client.post("/v1/chat/completions", json=chat(question)).status_code == 200
    vault = exchanges(shared_daemon, project)
    shared_daemon.wait_until(lambda: len(list(vault.export())) == 4, what="both exchanges remembered")
    stored = list(vault.export())
    assert {m.context["type"] for m in stored} == {"exchange"}
    answers = [m for m in stored if m.context["role"] == "assistant"]
    questions = {m.id for m in stored if m.context["role"] == "user"}
    assert len(answers) == 2 and answers[0].content == answers[1].content
    assert {a.context["reply_to"] for a in answers} == questions and len(questions) == 2
    # The project vault holds the notes only: a notes question finds the note.
    with shared_daemon.client(vault=project) as notes:
        found = notes.recall(question, top_k=3)
    assert "Salesforce" in found.results[0].memory.content
    assert all(r.memory.context.get("origin") != "proxy" for r in found.results)
    # Through the proxy the earlier question comes after the note.
    with proxy.client() as client:
        reply = client.post("/v1/chat/completions", json=chat("When is the Acme CRM contract renewed?"))
    cited = reply.headers["x-hebbs-memories"].split(",")
    assert cited[0] == found.results[0].memory.id and set(cited[1:]) & questions


def test_earlier_exchanges_keep_a_share_when_notes_fill_top_k(shared_daemon, project, upstream, tmp_path):
    """Issue 44: with `--exchanges after` (the default) notes that fill top_k crowded out every earlier
    exchange (before the fix the injected message held the two notes only); relevant earlier exchanges
    keep at least a quarter of top_k (one of two here)."""
    (project / "crm.md").write_text(
        "# Customers\n\n## Acme\n\nAcme uses Salesforce as its CRM and renews the contract every March.\n\n"
        "## Acme renewal\n\nThe Acme CRM contract renewal in March is negotiated by the sales lead.\n\n"
        "## Acme CRM admins\n\nTwo people administer the Acme Salesforce CRM and prepare the March renewal.\n",
        encoding="utf-8")
    shared_daemon.hebbs("index", str(project), "--format", "json")
    question = "When is the Acme CRM contract renewed?"
    with shared_daemon.client(vault=project) as notes:
        found = notes.recall(question, top_k=4)
    assert len([r for r in found.results if (r.confidence or 0.0) >= (found.threshold or 0.0)]) >= 2  # notes fill 2
    running = Proxy(shared_daemon, project, upstream, tmp_path / "proxy.log", "--top-k", "2")
    try:
        earlier = "Remind me who negotiates the Acme CRM contract renewal"
        with running.client() as client:
            assert client.post("/v1/chat/completions", json=chat(earlier)).status_code == 200
            vault = exchanges(shared_daemon, project)
            shared_daemon.wait_until(lambda: len(list(vault.export())) == 2, what="the exchange remembered")
            asked = [m.id for m in vault.export() if m.context["role"] == "user"]
            reply = client.post("/v1/chat/completions", json=chat(question))
        cited = reply.headers["x-hebbs-memories"].split(",")
        injected = upstream.received[-1]["body"]["messages"][1]["content"]
        assert len(cited) == 2 and cited[1] == asked[0]
        assert earlier in injected and "asked by the user in an earlier chat" in injected
    finally:
        running.stop()


def test_exchanges_carry_the_agent_and_one_session_per_conversation(shared_daemon, project, upstream, tmp_path):
    """Issue 44 item 3: the proxy stores each exchange under an agent (--agent, or the request's
    X-Hebbs-Agent) and a session: the request's X-Hebbs-Session, else one id per conversation, the same for
    every request of a chat (each repeats its history) and another for a chat that opens differently."""
    running = Proxy(shared_daemon, project, upstream, tmp_path / "proxy.log", "--agent", "coder")
    vault = exchanges(shared_daemon, project)

    def stored(n: int) -> list[Any]:
        shared_daemon.wait_until(lambda: len([m for m in vault.export() if m.context.get("role") == "user"]) == n,
                                 what=f"{n} exchanges remembered")
        return sorted((m for m in vault.export() if m.context.get("role") == "user"), key=lambda m: m.created_at)

    try:
        with running.client() as client:
            first = chat("Which queue does the billing worker read from?")
            assert client.post("/v1/chat/completions", json=first).status_code == 200
            stored(1)
            again = {**first, "messages": [*first["messages"], {"role": "assistant", "content": "billing-jobs"},
                                           {"role": "user", "content": "And how many workers read it?"}]}
            assert client.post("/v1/chat/completions", json=again).status_code == 200
            stored(2)
            other = chat("What port does the metrics exporter listen on?")
            assert client.post("/v1/chat/completions", json=other,
                               headers={"x-hebbs-agent": "reviewer"}).status_code == 200
            stored(3)
            named = chat("Where are the deploy keys kept?")
            assert client.post("/v1/chat/completions", json=named,
                               headers={"x-hebbs-session": "ticket-42"}).status_code == 200
            asked = stored(4)
    finally:
        running.stop()
    assert [m.agent for m in asked] == ["coder", "coder", "reviewer", "coder"]
    assert asked[0].session == asked[1].session and asked[0].session.startswith("chat-")
    assert asked[2].session not in (asked[0].session, None) and asked[3].session == "ticket-42"
    # Each answer is stored under its question's agent and session.
    answers = [m for m in vault.export() if m.context.get("role") == "assistant"]
    assert {(m.agent, m.session) for m in answers} == {(m.agent, m.session) for m in asked}
    # And recall narrows to one conversation.
    found = vault.recall("workers billing queue", top_k=5, session=asked[0].session)
    assert found.results and {r.memory.session for r in found.results} == {asked[0].session}


def test_two_values_of_a_fact_are_injected_as_a_change_and_a_conflict_as_one(proxy, shared_daemon, project):
    """Issue 41, finding 3: the proxy injected two disagreeing memories as plain memories. Now the
    older value says it is no longer current and names the newer one, and a confirmed conflict says
    the two disagree."""
    now = time.time_ns() // 1000
    day = 86_400 * 1_000_000
    with shared_daemon.client(vault=project) as client:
        old = client.remember("The user has 2 cats named Miso and Tofu", created_at=now - 3 * day)
        new = client.remember("The user has 3 cats named Miso and Tofu", created_at=now - 2 * day)
        a = client.remember("The team's standup is at 9:30 every morning")
        b = client.remember("The team has no standup meeting at all")
        client.add_edge(a.id, "CONTRADICTS", b.id)
    with proxy.client() as client:
        client.post("/v1/chat/completions", json=chat("How many cats does the user have?"))
        cats = proxy.upstream.received[-1]["body"]["messages"][1]["content"]
        client.post("/v1/chat/completions", json=chat("When is the team's standup?"))
        standup = proxy.upstream.received[-1]["body"]["messages"][1]["content"]
    line = next(line for line in cats.splitlines() if line.startswith(f"[{old.id}]"))
    assert f"OLDER VALUE (2 -> 3), no longer current: [{new.id}] is newer" in line
    assert cats.index(f"[{new.id}]") < cats.index(f"[{old.id}]")
    line = next(line for line in standup.splitlines() if line.startswith(f"[{a.id}]"))
    assert f"CONFLICT: disagrees with [{b.id}]" in line
