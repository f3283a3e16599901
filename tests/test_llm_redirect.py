"""The LLM client never carries the API key to another origin: a redirect elsewhere is refused
(real local HTTP servers on two ports; the second must see no request at all)."""

from __future__ import annotations

import pytest
from test_llm import FakeLLM, Reply, chat

from hebbs.config import LLMConfig
from hebbs.errors import LLMError
from hebbs.llm import ChatClient

KEY = "sk-test-do-not-leak"


@pytest.fixture
def two_servers():
    configured, elsewhere = FakeLLM(), FakeLLM()
    yield configured, elsewhere
    configured.close()
    elsewhere.close()


def _client(url: str) -> ChatClient:
    return ChatClient(LLMConfig(base_url=url, model="m", max_attempts=2, backoff_seconds=0.0, timeout_seconds=5.0),
                      KEY)


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_a_redirect_to_another_port_is_refused_and_the_key_never_reaches_it(two_servers, status):
    configured, elsewhere = two_servers
    configured.script.append(Reply(status=status, body="", headers={"Location": elsewhere.url + "/chat/completions"}))
    with pytest.raises(LLMError, match="another origin") as caught:
        _client(configured.url).complete([{"role": "user", "content": "hi"}])
    assert KEY not in str(caught.value)
    assert len(configured.requests) == 1  # a refused redirect is not retried either
    assert configured.requests[0]["headers"]["Authorization"] == f"Bearer {KEY}"
    assert elsewhere.requests == []


def test_a_same_origin_redirect_is_still_followed(two_servers):
    configured, _ = two_servers
    configured.script.append(Reply(status=307, body="", headers={"Location": "/v2/chat/completions"}))
    configured.script.append(chat("hello"))
    assert _client(configured.url).complete([{"role": "user", "content": "hi"}]) == "hello"
    assert [r["path"] for r in configured.requests] == ["/v1/chat/completions", "/v2/chat/completions"]
