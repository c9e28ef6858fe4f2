"""memcore's HTTP client (``memcore.http_client``, shared by memcore-embed's ``openai`` embedder
and memcore-llm's chat client): retries, backoff, Retry-After, errors, against a real local server."""

from __future__ import annotations

import socket
from email.utils import format_datetime
from datetime import datetime, timedelta, timezone

import pytest
from memcore.plugin import EndpointConfig, JsonHttpClient
from memcore import EndpointError, ValidationError
from memcore._util.http import parse_retry_after
from memcore.testing import FakeOpenAIServer


@pytest.fixture
def server():
    """A fresh deterministic OpenAI-compatible server; ``server.url`` ends in /v1."""
    with FakeOpenAIServer() as state:
        yield state


def client(server, **kw) -> JsonHttpClient:
    return JsonHttpClient(EndpointConfig(**{"base_url": server.url, "api_key_env": None, "backoff_s": 0.01, **kw}))


PAYLOAD = {"model": "fake-4", "input": ["a"]}


def test_plain_post_returns_the_decoded_reply(server):
    http = client(server)
    body = http.post("embeddings", PAYLOAD)
    assert len(body["data"][0]["embedding"]) == 4
    assert http.stats.requests == 1 and http.stats.retries == 0
    assert server.requests[0].path == "/v1/embeddings"
    assert server.requests[0].body == PAYLOAD
    assert server.requests[0].headers["content-type"] == "application/json"


def test_retry_after_is_honoured_and_the_retry_counted(server):
    server.plan = [("status", 429, {"Retry-After": "1"})]
    http = client(server, max_retries=2)
    body = http.post("embeddings", PAYLOAD)
    assert len(body["data"]) == 1
    assert server.count("/v1/embeddings") == 2
    assert http.stats.retries == 1
    assert http.stats.retry_delays[0] >= 1.0  # the header, not the 0.01 s backoff


def test_retry_after_is_capped_by_max_backoff(server):
    server.plan = [("status", 503, {"Retry-After": "3600"})]
    http = client(server, max_retries=1, max_backoff_s=0.05)
    http.post("embeddings", PAYLOAD)
    assert http.stats.retry_delays == [pytest.approx(0.05)]


def test_5xx_every_time_fails_after_max_retries(server):
    server.plan = [("status", 500)] * 10
    http = client(server, max_retries=2)
    with pytest.raises(EndpointError, match=r"after 3 attempt\(s\): HTTP 500: scripted 500") as info:
        http.post("embeddings", PAYLOAD)
    assert (info.value.status, info.value.attempts) == (500, 3)
    assert server.count("/v1/embeddings") == 3
    assert http.stats.retries == 2 and http.stats.failures == 1


def test_backoff_grows_exponentially_with_jitter(server):
    server.plan = [("status", 502)] * 3
    http = client(server, max_retries=3, backoff_s=0.02, max_backoff_s=1.0)
    http.post("embeddings", PAYLOAD)
    d = http.stats.retry_delays
    assert len(d) == 3
    for attempt, delay in enumerate(d):  # backoff_s * 2**attempt scaled by [0.5, 1]
        assert 0.5 * 0.02 * 2**attempt <= delay <= 0.02 * 2**attempt


def test_client_errors_are_not_retried(server):
    server.plan = [("status", 400)]
    http = client(server, max_retries=5)
    with pytest.raises(EndpointError, match="HTTP 400: scripted 400") as info:
        http.post("embeddings", PAYLOAD)
    assert info.value.attempts == 1 and server.count("/v1/embeddings") == 1


def test_unauthorised_names_the_key_variable(server, monkeypatch):
    monkeypatch.delenv("MEMCORE_EMBED_TEST_KEY", raising=False)
    server.plan = [("status", 401)]
    http = JsonHttpClient(EndpointConfig(base_url=server.url, api_key_env="MEMCORE_EMBED_TEST_KEY"))
    with pytest.raises(EndpointError, match=r"\$MEMCORE_EMBED_TEST_KEY, which is NOT set"):
        http.post("embeddings", PAYLOAD)


def test_unknown_route_hints_at_base_url(server):
    http = JsonHttpClient(EndpointConfig(base_url=server.url.removesuffix("/v1"), api_key_env=None))
    with pytest.raises(EndpointError, match="usually ends in /v1") as info:
        http.post("embeddings", PAYLOAD)
    assert info.value.status == 404


def test_timeout_is_an_error(server):
    server.plan = [("sleep", 2.0)]
    http = client(server, timeout_s=0.3, max_retries=0)
    with pytest.raises(EndpointError, match="timed out") as info:
        http.post("embeddings", PAYLOAD)
    assert info.value.status is None


def test_timeout_is_retried(server):
    server.plan = [("sleep", 2.0)]
    http = client(server, timeout_s=0.3, max_retries=1)
    assert len(http.post("embeddings", PAYLOAD)["data"]) == 1
    assert http.stats.retries == 1


def test_connection_refused_is_retried_then_fails():
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    http = JsonHttpClient(EndpointConfig(base_url=f"http://127.0.0.1:{port}/v1", api_key_env=None, max_retries=1, backoff_s=0.01))
    with pytest.raises(EndpointError, match="connection error") as info:
        http.post("embeddings", PAYLOAD)
    assert info.value.attempts == 2


def test_malformed_json_is_a_validation_error(server):
    server.plan = [("raw", b"<html>not json</html>")]
    http = client(server, max_retries=3)
    with pytest.raises(ValidationError, match="not JSON"):
        http.post("embeddings", PAYLOAD)
    assert server.count("/v1/embeddings") == 1  # a bad reply is not retried


def test_api_key_is_read_from_the_environment_at_call_time(server, monkeypatch):
    monkeypatch.delenv("MEMCORE_EMBED_TEST_KEY", raising=False)
    http = JsonHttpClient(EndpointConfig(base_url=server.url, api_key_env="MEMCORE_EMBED_TEST_KEY"))
    http.post("embeddings", PAYLOAD)
    assert "authorization" not in server.requests[-1].headers
    monkeypatch.setenv("MEMCORE_EMBED_TEST_KEY", "sk-test-123")
    http.post("embeddings", PAYLOAD)
    assert server.requests[-1].headers["authorization"] == "Bearer sk-test-123"
    assert "sk-test-123" not in repr(http.config)


def test_base_url_trailing_slash_and_empty_key_env():
    config = EndpointConfig(base_url=" http://localhost:8080/v1/ ", api_key_env="")
    assert config.base_url == "http://localhost:8080/v1"
    assert config.api_key_env is None


def test_parse_retry_after():
    assert parse_retry_after(None) is None
    assert parse_retry_after("7") == 7.0
    assert parse_retry_after("-3") == 0.0
    assert parse_retry_after("soon") is None
    now = datetime(2030, 1, 1, tzinfo=timezone.utc)
    later = format_datetime(now + timedelta(seconds=30), usegmt=True)
    assert parse_retry_after(later, now=now.timestamp()) == pytest.approx(30.0)
    assert parse_retry_after(format_datetime(now - timedelta(seconds=30), usegmt=True), now=now.timestamp()) == 0.0
