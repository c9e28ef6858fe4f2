"""The OpenAI-compatible chat client against a real local server."""

from __future__ import annotations

import pytest

import memcore
from memcore import ConfigError, EndpointError, ValidationError
from pydantic import BaseModel

from memcore_llm import ChatClient
from memcore_llm.chat import parse_json_reply


def chat(server, **kw) -> ChatClient:
    return ChatClient({"base_url": server.url, "model": "tiny-chat", "api_key_env": None, "backoff_s": 0.01, **kw})


def test_complete_sends_the_conversation_and_returns_the_reply(server):
    client = chat(server)
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Where does Alice work?"}]
    assert client.complete(messages) == "echo: Where does Alice work?"
    request = server.requests[0]
    assert request.path == "/v1/chat/completions"
    assert request.body == {"model": "tiny-chat", "messages": messages, "temperature": 0.0, "max_tokens": 512}


def test_a_string_is_one_user_message_and_overrides_apply(server):
    client = chat(server, max_tokens=None)
    client.complete("hi", temperature=0.7, max_tokens=20, stop=["\n"], seed=3)
    body = server.requests[0].body
    assert body["messages"] == [{"role": "user", "content": "hi"}]
    assert (body["temperature"], body["max_tokens"], body["stop"], body["seed"]) == (0.7, 20, ["\n"], 3)


@pytest.mark.parametrize(
    "messages, message",
    [
        ([], "non-empty"),
        ([{"role": "robot", "content": "x"}], r"messages\[0\]\.role"),
        ([{"role": "user"}], r"messages\[0\]\.content"),
        ([{"role": "user", "content": "x", "tools": []}], r"messages\[0\]\.tools"),
        (None, "non-empty"),
    ],
)
def test_bad_messages_are_rejected_before_sending(server, messages, message):
    with pytest.raises(ValidationError, match=message):
        chat(server).complete(messages)
    assert not server.requests


def test_unknown_or_bad_overrides_are_rejected(server):
    with pytest.raises(ValidationError, match="temprature"):
        chat(server).complete("x", temprature=0.1)
    with pytest.raises(ValidationError, match="max_tokens"):
        chat(server).complete("x", max_tokens=0)
    assert not server.requests


def test_reply_without_content_is_a_validation_error(server):
    server.plan = [("json", {"choices": []})]
    with pytest.raises(ValidationError, match="choices"):
        chat(server).complete("x")
    server.plan = [("json", {"choices": [{"message": {"role": "assistant", "content": None}}]})]
    with pytest.raises(ValidationError, match="NoneType"):
        chat(server).complete("x")


def test_malformed_json_reply(server):
    server.plan = [("raw", b"Internal oops")]
    with pytest.raises(ValidationError, match="not JSON"):
        chat(server).complete("x")


def test_complete_json_tolerates_fences(server):
    server.chat_reply = 'Here you go:\n```json\n{"subject": "Alice", "relation": "works_at", "object": "Google"}\n```\n'
    assert chat(server).complete_json("extract") == {"subject": "Alice", "relation": "works_at", "object": "Google"}


class Triple(BaseModel):
    subject: str
    relation: str
    object: str
    confidence: float = 1.0


def test_complete_json_with_a_schema(server):
    server.chat_reply = '{"subject": "Alice", "relation": "works_at", "object": "Google"}'
    assert chat(server).complete_json("extract", schema=Triple) == {"subject": "Alice", "relation": "works_at", "object": "Google", "confidence": 1.0}
    server.chat_reply = '{"subject": "Alice"}'
    with pytest.raises(ValidationError, match="does not fit Triple"):
        chat(server).complete_json("extract", schema=Triple)


def test_complete_json_unparseable(server):
    server.chat_reply = "I cannot answer that in JSON, sorry."
    with pytest.raises(ValidationError, match="no parseable JSON object"):
        chat(server).complete_json("extract")


@pytest.mark.parametrize(
    "reply, expected",
    [
        ('{"a": 1}', {"a": 1}),
        ('  \n{"a": [1, 2]}\n', {"a": [1, 2]}),
        ('```json\n{"a": 1}\n```', {"a": 1}),
        ('```JSON {"a": 1} ```', {"a": 1}),
        ('```\n{"a": 1}\n```', {"a": 1}),
        ('Sure! The answer is {"a": {"b": 2}} as requested.', {"a": {"b": 2}}),
        ('```python\nx = 1\n```\n```json\n{"a": 3}\n```', {"a": 3}),
    ],
)
def test_parse_json_reply(reply, expected):
    assert parse_json_reply(reply) == expected


@pytest.mark.parametrize("reply, message", [("[1, 2, 3]", "JSON list, expected a JSON object"), ('{"a": 1', "no parseable"), ("", "no parseable")])
def test_parse_json_reply_refuses(reply, message):
    with pytest.raises(ValidationError, match=message):
        parse_json_reply(reply)


def test_rate_limited_then_answers(server):
    server.plan = [("status", 429, {"Retry-After": "0"})]
    client = chat(server, max_retries=1)
    assert client.complete("ping") == "echo: ping"
    assert client.stats.retries == 1 and server.count("/v1/chat/completions") == 2


def test_server_errors_exhaust_the_retries(server):
    server.plan = [("status", 503)] * 4
    with pytest.raises(EndpointError, match=r"after 3 attempt\(s\): HTTP 503") as info:
        chat(server, max_retries=2).complete("ping")
    assert info.value.status == 503


def test_timeout(server):
    server.plan = [("sleep", 2.0)]
    with pytest.raises(EndpointError, match="timed out"):
        chat(server, timeout_s=0.3, max_retries=0).complete("ping")


def test_auth_header(server, monkeypatch):
    monkeypatch.setenv("MEMCORE_EMBED_TEST_KEY", "sk-chat")
    chat(server, api_key_env="MEMCORE_EMBED_TEST_KEY").complete("x")
    assert server.requests[0].headers["authorization"] == "Bearer sk-chat"


def test_declared_in_settings(server):
    with memcore.open(
        {"store": "memory", "llms": {"default": {"kind": "openai", "base_url": server.url, "model": "tiny-chat", "api_key_env": "", "temperature": 0.2}}}
    ) as memory:
        client = memory.llms["default"]
        assert isinstance(client, ChatClient) and isinstance(client, memcore.plugin.LLM)
        assert (client.config.temperature, client.config.timeout_s, client.config.max_retries) == (0.2, 60.0, 3)
        assert client.model == "tiny-chat"
        assert client.complete("hello") == "echo: hello"


def test_settings_errors():
    def open_with(entry):
        return memcore.open({"store": "memory", "llms": {"default": entry}})

    with pytest.raises(ConfigError, match=r"^llms\.default\.model: Field required"):
        open_with({"kind": "openai", "base_url": "http://127.0.0.1:1/v1"})
    with pytest.raises(ConfigError, match=r"^llms\.default\.temperature"):
        open_with({"kind": "openai", "model": "m", "temperature": 5})
    with pytest.raises(ConfigError, match=r"^llms\.default\.api_key"):
        open_with({"kind": "openai", "model": "m", "api_key": "sk-123"})
    with pytest.raises(ConfigError, match="llms.default"):
        open_with({"model": "m"})
    with pytest.raises(ConfigError, match=r"llms\.default\.kind: unknown llm kind 'gpt'"):
        open_with("gpt")
