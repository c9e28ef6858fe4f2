"""The ``openai`` embedder against a real local OpenAI-compatible server."""

from __future__ import annotations

import numpy as np
import pytest
import memcore
from memcore import ConfigError, DimensionError, ValidationError
from memcore._plugins._registry import Registration

from memcore_embed import EmbeddingServiceError, OpenAIEmbedder, OpenAIEmbedderConfig

TEXTS = ["alpha beta", "gamma", "delta epsilon zeta", "eta", "theta iota"]


def embedder(server, **kw) -> OpenAIEmbedder:
    fields = {"model": "fake-8", "dim": 8, "base_url": server.url, "api_key_env": None, "backoff_s": 0.01, **kw}
    return OpenAIEmbedder(OpenAIEmbedderConfig(**fields))


def test_vectors_come_back_in_input_order(server):
    out = embedder(server).embed_documents(TEXTS)  # the server lists them in reverse
    assert out.shape == (5, 8) and out.dtype == np.float32
    np.testing.assert_array_equal(out, np.stack([server.vector(t, 8) for t in TEXTS]))
    assert server.requests[0].body == {"model": "fake-8", "input": TEXTS, "encoding_format": "float"}


def test_batches_of_batch_size(server):
    emb = embedder(server, batch_size=2)
    out = emb.embed_documents(TEXTS)
    assert [r.body["input"] for r in server.requests] == [TEXTS[0:2], TEXTS[2:4], TEXTS[4:5]]
    np.testing.assert_array_equal(out, np.stack([server.vector(t, 8) for t in TEXTS]))
    assert emb.stats.requests == 3


def test_queries_equal_documents_and_model_id(server):
    emb = embedder(server)
    np.testing.assert_array_equal(emb.embed_queries(["q"]), emb.embed_documents(["q"]))
    assert (emb.dim, emb.model_id) == (8, "fake-8")


def test_send_dimensions_and_normalize(server):
    emb = embedder(server, model="fake-99", dim=6, send_dimensions=True, normalize=True)
    out = emb.embed_documents(["x", "y"])
    assert server.requests[0].body["dimensions"] == 6
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, rtol=1e-6)
    expected = server.vector("x", 6)
    np.testing.assert_allclose(out[0], expected / np.linalg.norm(expected), rtol=1e-6)


def test_empty_batch_sends_nothing(server):
    out = embedder(server).embed_documents([])
    assert out.shape == (0, 8) and not server.requests


@pytest.mark.parametrize("texts, message", [(["ok", ""], "text 1 is empty"), (["ok", 3], "text 1 is a int"), ("a string", "not a single string")])
def test_bad_input_is_rejected_before_sending(server, texts, message):
    with pytest.raises(ValidationError, match=message):
        embedder(server).embed_documents(texts)
    assert not server.requests


def test_wrong_dimension_is_a_dimension_error(server):
    server.plan = [("dim", 3)]
    with pytest.raises(DimensionError, match="returned 3-d vectors, settings declare dim=8"):
        embedder(server).embed_documents(["a", "b"])


def test_malformed_json_is_a_validation_error(server):
    server.plan = [("raw", b'{"data": [')]
    with pytest.raises(ValidationError, match="not JSON"):
        embedder(server).embed_documents(["a"])


@pytest.mark.parametrize(
    "reply, message",
    [
        ({"object": "list"}, "no 'data' list"),
        ({"data": [{"index": 0, "embedding": [0.0] * 8}]}, "1 vectors for 2 inputs"),
        ({"data": [{"index": 0, "embedding": [0.0] * 8}, {"index": 0, "embedding": [0.0] * 8}]}, "not a permutation"),
        ({"data": [{"index": 0, "embedding": [0.0] * 8}, {"embedding": [0.0] * 8}]}, "some items have an 'index'"),
        ({"data": [{"index": 0, "embedding": "AAAA"}, {"index": 1, "embedding": "AAAA"}]}, "encoding_format=float"),
        ({"data": [{"index": 0, "embedding": ["x"] * 8}, {"index": 1, "embedding": [0.0] * 8}]}, "non-numeric"),
        ({"data": [{"index": 0}, {"index": 1}]}, "needs an 'embedding'"),
    ],
)
def test_malformed_replies_are_validation_errors(server, reply, message):
    server.plan = [("json", reply)]
    with pytest.raises(ValidationError, match=message):
        embedder(server).embed_documents(["a", "b"])


def test_nan_in_a_reply_is_rejected(server):
    server.plan = [("raw", b'{"data": [{"index": 0, "embedding": [NaN, 0, 0, 0, 0, 0, 0, 0]}]}')]
    with pytest.raises(ValidationError, match="NaN or infinite"):
        embedder(server).embed_documents(["a"])


def test_reply_without_index_keeps_list_order(server):
    server.plan = [("json", {"data": [{"embedding": [float(i)] * 8} for i in range(3)]})]
    out = embedder(server).embed_documents(["a", "b", "c"])
    np.testing.assert_array_equal(out[:, 0], [0.0, 1.0, 2.0])


def test_rate_limit_then_success(server):
    server.plan = [("status", 429, {"Retry-After": "1"})]
    emb = embedder(server, max_retries=1)
    np.testing.assert_array_equal(emb.embed_documents(["a"])[0], server.vector("a", 8))
    assert emb.stats.retries == 1 and server.count("/v1/embeddings") == 2


def test_server_errors_exhaust_the_retries(server):
    server.plan = [("status", 500)] * 5
    emb = embedder(server, max_retries=2)
    with pytest.raises(EmbeddingServiceError) as info:
        emb.embed_documents(["a"])
    assert isinstance(info.value, memcore.MemcoreError)
    assert info.value.attempts == 3 and server.count("/v1/embeddings") == 3


def test_timeout(server):
    server.plan = [("sleep", 2.0)]
    with pytest.raises(EmbeddingServiceError, match="timed out"):
        embedder(server, timeout_s=0.3, max_retries=0).embed_documents(["a"])


def test_auth_header_sent_when_the_variable_is_set(server, monkeypatch):
    monkeypatch.setenv("MEMCORE_EMBED_TEST_KEY", "secret-xyz")
    embedder(server, api_key_env="MEMCORE_EMBED_TEST_KEY").embed_documents(["a"])
    assert server.requests[0].headers["authorization"] == "Bearer secret-xyz"


def test_through_memcore_open_insert_retrieve_reopen(server, tmp_path):
    settings = {
        "spaces": {"default": {"embedder": {"kind": "openai", "base_url": server.url, "model": "fake-16", "dim": 16, "api_key_env": ""}}},
        "indexes": {"vector": {"kind": "exact", "space": "default"}},
    }
    docs = ["the first memory", "a second one", "and a third"]
    with memcore.open(settings, path=tmp_path) as memory:
        ids = [memory.insert(text) for text in docs]
        first = memory.query("a second one", k=3)
    assert first[0].id == ids[1] and first[0].raw == pytest.approx(1.0, abs=1e-5)  # cosine, before the preset's rerank
    stored = server.count("/v1/embeddings")
    with memcore.open(settings, path=tmp_path) as memory:
        assert memory.collection.count() == 3
        again = memory.query("a second one", k=3)
    assert [(h.id, h.score) for h in again] == [(h.id, h.score) for h in first]
    assert server.count("/v1/embeddings") == stored + 1  # reopening re-embeds only the query


def test_changing_the_model_of_a_space_is_refused(server, tmp_path):
    def settings(model):
        return {"spaces": {"default": {"embedder": {"kind": "openai", "base_url": server.url, "model": model, "dim": 8, "api_key_env": ""}}}}

    with memcore.open(settings("fake-8"), path=tmp_path) as memory:
        memory.insert("something")
    with pytest.raises(memcore.ConfigError, match="was created with"):
        memcore.open(settings("other-8"), path=tmp_path)


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"base_url": "ftp://example.org/v1"}, "http:// or https://"),
        ({"api_key_env": "sk-live-abcdef"}, "NAME of an environment variable"),
        ({"timeout_s": 0}, "greater than 0"),
        ({"max_retries": -1}, "greater than or equal to 0"),
        ({"surprise": 1}, "surprise: unknown option; valid options"),
    ],
)
def test_bad_endpoint_settings_are_config_errors(fields, message):
    reg = Registration("embedders", "openai", OpenAIEmbedder, OpenAIEmbedderConfig, "embed")
    with pytest.raises(ConfigError, match=message):
        reg.parse_config({"model": "m", "dim": 4, **fields}, "spaces.default.embedder")
