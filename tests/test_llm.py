"""The optional LLM, against a real OpenAI-compatible HTTP server on 127.0.0.1 that each test scripts."""

from __future__ import annotations

import json
import re
import threading
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from hebbs import Engine, InvalidInput
from hebbs import llm
from hebbs.config import LLMConfig
from hebbs.errors import ERRORS_BY_CODE, LLMError, LLMNotConfigured
from workflows.test_reflect import ASTRONOMY, BAKING, DEPLOY

KEY_ENV = "HEBBS_TEST_LLM_KEY"
_ID = re.compile(r"\[([0-9A-HJKMNP-TV-Z]{26})\]")


@pytest.fixture(autouse=True)
def home(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("HEBBS_HOME", str(tmp_path / "home"))
    monkeypatch.setenv(KEY_ENV, "sk-test-secret")
    return tmp_path / "home"


# The server ------------------------------------------------------------------------------------

@dataclass
class Reply:
    status: int = 200
    body: Any = None  # a dict is sent as JSON, a str as it is
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0


def chat(content: str) -> Reply:
    return Reply(body={"id": "chatcmpl-1", "object": "chat.completion", "model": "test-model", "choices": [
        {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}]})


def smart_answer(body: dict) -> Reply:
    """What a cooperative model would say to each of hebbs' three kinds of prompt."""
    prompt = body["messages"][-1]["content"]
    if '{"verdicts": [' in prompt:
        listed = prompt.split("Proposed insights:\n", 1)[1].split("\n\n", 1)[0]
        n = len([line for line in listed.splitlines() if re.match(r"\d+\. ", line)])
        return chat(json.dumps({"verdicts": [{"index": i, "valid": True, "confidence": 0.7, "reason": "supported"}
                                             for i in range(1, n + 1)]}))
    if '{"insights": [' in prompt:
        ids = _ID.findall(prompt)
        term = re.search(r"characteristic terms: (\w+)", prompt).group(1)
        return chat(json.dumps({"insights": [{"content": f"Many memories revolve around {term}.",
                                              "confidence": 0.8, "source_memory_ids": ids[:3], "tags": [term]}]}))
    if '{"verdict": ' in prompt:
        return chat('{"verdict": "contradiction", "confidence": 0.9, "reason": "They disagree."}')
    return Reply(status=400, body={"error": {"message": "unexpected prompt"}})


class FakeLLM:
    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.script: deque[Reply] = deque()
        self.answer: Callable[[dict], Reply] = smart_answer
        self.closing = threading.Event()
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with server._lock:
                    server.requests.append({"path": self.path, "headers": dict(self.headers), "body": body})
                    reply = server.script.popleft() if server.script else None
                reply = reply or server.answer(body)
                if reply.delay:
                    server.closing.wait(reply.delay)
                payload = reply.body if isinstance(reply.body, str) else json.dumps(reply.body)
                try:
                    self.send_response(reply.status)
                    for name, value in {"Content-Type": "application/json", **reply.headers}.items():
                        self.send_header(name, value)
                    self.send_header("Content-Length", str(len(payload.encode())))
                    self.end_headers()
                    self.wfile.write(payload.encode())
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up waiting: that was the test

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def prompts(self, marker: str) -> list[dict[str, Any]]:
        return [r for r in self.requests if marker in r["body"]["messages"][-1]["content"]]

    def close(self) -> None:
        self.closing.set()
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server() -> Iterator[FakeLLM]:
    fake = FakeLLM()
    yield fake
    fake.close()


def llm_table(server: FakeLLM, **overrides: Any) -> str:
    settings = {"base_url": server.url, "model": "test-model", "api_key_env": KEY_ENV, "backoff_seconds": 0.01,
                "timeout_seconds": 5.0, "max_attempts": 3, "concurrency": 2, "max_answer_tokens": 700, **overrides}
    return "[llm]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in settings.items())


def open_vault(path: Path, embedder: Any, config: str = "") -> Engine:
    path.mkdir(parents=True, exist_ok=True)
    if config:
        (path / "config.toml").write_text(config)
    return Engine.open(path, embedder=embedder)


def plant(engine: Engine) -> None:
    engine.remember_many([{"content": t} for t in DEPLOY + BAKING + ASTRONOMY], check_contradictions=False)


# Reflect ---------------------------------------------------------------------------------------

def test_reflect_through_the_llm_proposes_validates_and_commits(tmp_path, embedder, server):
    with open_vault(tmp_path / "v", embedder, llm_table(server)) as eng:
        plant(eng)
        result = eng.reflect()
        assert result.clusters == 3 and result.proposed == 3 and result.accepted == 3
        assert result.problems == [] and result.rejected == []
        stored = result.committed.insights
        assert len(stored) == 3 and {m.kind.value for m in stored} == {"INSIGHT"}
        assert {m.context["confidence"] for m in stored} == {0.7}  # the lower of proposal and validation
        for insight in stored:
            sources = [e.target for e in eng.edges(insight.id, "out") if e.edge_type == "INSIGHT_FROM"]
            assert len(sources) == 3 and all(eng.get(s).kind.value == "EPISODE" for s in sources)
        assert len(eng.insights()) == 3

    propose, validate = server.prompts('{"insights": ['), server.prompts('{"verdicts": [')
    assert len(propose) == 3 and len(validate) == 3 and len(server.requests) == 6
    for request in server.requests:
        body = request["body"]
        assert request["path"] == "/v1/chat/completions"
        assert request["headers"]["Authorization"] == "Bearer sk-test-secret"
        assert body["model"] == "test-model" and body["max_tokens"] == 700
        assert body["response_format"] == {"type": "json_object"} and "temperature" not in body
        assert [m["role"] for m in body["messages"]] == ["system", "user"]
    for requests, budget in ((propose, llm.PROPOSE_BUDGET), (validate, llm.VALIDATE_BUDGET)):
        for request in requests:
            texts = [m["content"] for m in request["body"]["messages"]]
            assert sum(embedder.count_tokens(texts)) <= budget
    assert all("Many memories revolve around" in r["body"]["messages"][-1]["content"] for r in validate)


def test_a_malformed_or_unsupported_answer_is_reported_not_fatal(tmp_path, embedder, server):
    answers = iter(["Sure! Here are some insights: none, really.",  # not JSON at all
                    "```json\n" + json.dumps({"insights": [{"content": "A", "confidence": 0.9,
                                                            "source_memory_ids": ["01J00000000000000000000000"]}]})
                    + "\n```"])

    def answer(body: dict) -> Reply:
        prompt = body["messages"][-1]["content"]
        if '{"insights": [' in prompt and "cluster 3 of 3" not in prompt:
            return chat(next(answers))
        if '{"verdicts": [' in prompt:
            return chat('{"verdicts": [{"index": 1, "valid": false, "reason": "only one memory says so"}]}')
        return smart_answer(body)

    server.answer = answer
    with open_vault(tmp_path / "v", embedder, llm_table(server, concurrency=1)) as eng:
        plant(eng)
        result = eng.reflect()
        assert result.accepted == 0 and result.committed is None and eng.insights() == []
    assert any("cluster 1: proposing insights: the answer is not JSON" in p for p in result.problems)
    assert any("cluster 2, proposal 1: cites none of the cluster's memories" in p for p in result.problems)
    assert result.proposed == 1 and len(result.rejected) == 1
    assert result.rejected[0].startswith("cluster 3: 'Many memories revolve around ")
    assert result.rejected[0].endswith(": only one memory says so")


def test_a_rate_limit_is_retried_after_the_time_the_server_asks_for(server):
    server.script.extend([Reply(status=429, body={"error": {"message": "slow down"}}, headers={"Retry-After": "0"}),
                          chat('{"ok": true}')])
    waits: list[float] = []
    client = llm.ChatClient(LLMConfig(base_url=server.url, model="m", backoff_seconds=5.0), None, sleep=waits.append)
    assert client.ask_json("hello") == {"ok": True}
    assert len(server.requests) == 2 and waits == [0.0]  # Retry-After wins over the 5 s backoff
    assert "Authorization" not in server.requests[0]["headers"]  # no api_key_env, no header


def test_server_errors_back_off_exponentially_then_fail_clearly(server):
    server.answer = lambda body: Reply(status=503, body="overloaded")
    waits: list[float] = []
    client = llm.ChatClient(LLMConfig(base_url=server.url, model="m", max_attempts=4, backoff_seconds=0.5), None,
                            sleep=waits.append)
    with pytest.raises(LLMError, match=r"failed 4 times.*HTTP 503 'overloaded'.*reflect-prepare"):
        client.complete([{"role": "user", "content": "hi"}])
    assert waits == [0.5, 1.0, 2.0] and len(server.requests) == 4


def test_a_refusal_is_not_retried(server):
    server.answer = lambda body: Reply(status=401, body={"error": {"message": "bad key"}})
    client = llm.ChatClient(LLMConfig(base_url=server.url, model="m"), "sk-wrong", sleep=lambda s: None)
    with pytest.raises(LLMError, match="refused the request: HTTP 401 .*bad key"):
        client.complete([{"role": "user", "content": "hi"}])
    assert len(server.requests) == 1


def test_a_timeout_is_retried_and_then_reported(server):
    server.script.extend([Reply(delay=3.0, body="late"), chat('{"ok": 1}')])
    client = llm.ChatClient(LLMConfig(base_url=server.url, model="m", timeout_seconds=0.3, max_attempts=2,
                                      backoff_seconds=0.0), None)
    assert client.ask_json("hello") == {"ok": 1}
    assert len(server.requests) == 2
    server.answer = lambda body: Reply(delay=3.0, body="late")
    with pytest.raises(LLMError, match=r"failed 2 times.*no answer within 0.3 s"):
        client.complete([{"role": "user", "content": "hi"}])
    assert len(server.requests) == 4


def test_an_llm_failure_commits_nothing(tmp_path, embedder, server):
    server.answer = lambda body: Reply(status=500, body="boom")
    with open_vault(tmp_path / "v", embedder, llm_table(server, max_attempts=2)) as eng:
        plant(eng)
        with pytest.raises(LLMError, match="HTTP 500"):
            eng.reflect()
        assert eng.insights() == []


def test_parse_json_answer_is_defensive():
    assert llm.parse_json_answer('{"a": 1}') == {"a": 1}
    assert llm.parse_json_answer('<think>hmm {"no": 0}</think>\nHere: {"a": [1]} done.') == {"a": [1]}
    assert llm.parse_json_answer("```json\n[1, 2]\n```") == [1, 2]
    for text in ("no json here", '{"a": '):
        with pytest.raises(llm.BadAnswer, match="not JSON"):
            llm.parse_json_answer(text)
    with pytest.raises(llm.BadAnswer, match="not a chat completion"):
        llm.answer_text(b'{"choices": []}')


# Contradictions --------------------------------------------------------------------------------

def test_contradiction_candidates_classified_by_the_llm(tmp_path, embedder, server):
    def answer(body: dict) -> Reply:
        prompt = body["messages"][-1]["content"]
        if "timeout" in prompt:
            return chat('{"verdict": "revision", "confidence": 0.95, "reason": "The later value replaces it."}')
        if "flags" in prompt:
            return chat('{"verdict": "contradiction", "confidence": 0.4, "reason": "Not sure."}')
        return chat('{"verdict": "contradiction", "confidence": 0.9, "reason": "They disagree."}')

    server.answer = answer
    with open_vault(tmp_path / "v", embedder, llm_table(server)) as eng:
        for text in ("The deploy pipeline is reliable.", "The deploy pipeline is unreliable.",
                     "The API timeout is 30 seconds.", "The API timeout is 60 seconds.",
                     "Feature flags are enabled in production.", "Feature flags are disabled in production."):
            eng.remember(text)
        assert len(eng.pending()) == 3
        result = eng.contradiction_auto()
        assert result.reviewed == 3 and result.problems == []
        assert len(result.committed.contradictions) == 1 and len(result.committed.revisions) == 1
        assert len(result.left_pending) == 1 and [p.id for p in eng.pending()] == result.left_pending
        old = next(m for m in eng.memories() if m.content == "The API timeout is 30 seconds.")
        assert old.superseded_by is not None
    assert len(server.requests) == 3
    for request in server.requests:
        texts = [m["content"] for m in request["body"]["messages"]]
        assert sum(embedder.count_tokens(texts)) <= llm.CLASSIFY_BUDGET
        prompt = texts[-1]
        assert prompt.index("A (recorded") < prompt.index("B (recorded") and "heuristic flagged" in prompt


# Configuration ---------------------------------------------------------------------------------

def test_without_an_llm_every_llm_command_says_so_and_points_to_the_two_steps(tmp_path, embedder):
    assert ERRORS_BY_CODE["LLM_NOT_CONFIGURED"] is LLMNotConfigured
    assert LLMNotConfigured.status_code == "LLM_NOT_CONFIGURED"
    with open_vault(tmp_path / "v", embedder) as eng:
        for call in (eng.reflect, eng.contradiction_auto):
            with pytest.raises(LLMNotConfigured) as caught:
                call()
            message = str(caught.value)
            assert "no LLM is configured" in message and "llm.base_url and llm.model not set" in message
            assert "hebbs reflect-prepare" in message and "hebbs reflect-commit --file insights.json" in message
        assert eng.insights() == [] and eng.count() == 0  # failed before doing anything


def test_a_missing_key_variable_is_named(tmp_path, embedder, server, monkeypatch):
    monkeypatch.delenv(KEY_ENV)
    with open_vault(tmp_path / "v", embedder, llm_table(server)) as eng:
        with pytest.raises(LLMNotConfigured, match=f"environment variable {KEY_ENV} .* not set.*reflect-prepare"):
            eng.reflect()
    assert server.requests == []


def test_the_vault_config_wins_key_by_key_over_the_user_config(tmp_path, embedder, server, home):
    home.mkdir(parents=True)
    (home / "config.toml").write_text(llm_table(server, model="user-model", max_answer_tokens=111))
    with open_vault(tmp_path / "v", embedder, '[llm]\nmodel = "vault-model"\n') as eng:
        settings = llm.settings(eng.path)
        assert (settings.base_url, settings.model, settings.max_answer_tokens) == (server.url, "vault-model", 111)
        eng.remember("The deploy pipeline is reliable.")
        eng.remember("The deploy pipeline is unreliable.")
        eng.contradiction_auto()
    assert server.requests[0]["body"]["model"] == "vault-model"
    assert server.requests[0]["body"]["max_tokens"] == 111


def test_a_key_is_never_accepted_in_a_config_file(tmp_path, embedder, home):
    home.mkdir(parents=True)
    (home / "config.toml").write_text('[llm]\nbase_url = "http://127.0.0.1:1/v1"\nmodel = "m"\napi_key = "sk-1"\n')
    with open_vault(tmp_path / "v", embedder) as eng:
        with pytest.raises(InvalidInput, match="unknown field `api_key`"):
            eng.reflect()
    with pytest.raises(InvalidInput, match="name of an environment variable"):
        open_vault(tmp_path / "w", embedder, '[llm]\napi_key_env = "sk-live-123"\n')
