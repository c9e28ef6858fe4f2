"""The Embedder interface: the optional token methods, their helper and build_embedder."""

from __future__ import annotations

import numpy as np
import pytest

import memcore
import memcore.plugin
from memcore import ConfigError, UnknownComponentError
from memcore.plugin import Embedder, build_embedder, unit_token_rows


class Plain(Embedder):
    dim = 4

    def embed_documents(self, texts):
        return np.ones((len(texts), 4), dtype=np.float32)


class Tokens(Plain):
    def embed_document_tokens(self, texts, *, max_length=None):
        return unit_token_rows([np.arange(1, 9, dtype=np.float32).reshape(2, 4) * (i + 1) for i, _ in enumerate(texts)], max_length)


def test_token_methods_are_optional():
    plain = Plain()
    assert not plain.supports_tokens
    with pytest.raises(ConfigError, match="gives no token vectors"):
        plain.embed_document_tokens(["a"])
    with pytest.raises(ConfigError, match="gives no token vectors"):
        plain.embed_query_tokens(["a"])


def test_query_tokens_default_to_document_tokens():
    tokens = Tokens()
    assert tokens.supports_tokens
    docs = tokens.embed_document_tokens(["a", "b"])
    queries = tokens.embed_query_tokens(["a", "b"], max_length=1)
    assert [d.shape for d in docs] == [(2, 4), (2, 4)]
    assert [q.shape for q in queries] == [(1, 4), (1, 4)]
    np.testing.assert_allclose(queries[1][0], docs[1][0])


def test_unit_token_rows():
    rows = unit_token_rows([np.array([[3.0, 4.0], [0.0, 0.0], [1.0, 0.0]])], max_length=2)
    assert rows[0].dtype == np.float32 and rows[0].shape == (2, 2)
    np.testing.assert_allclose(rows[0], [[0.6, 0.8], [0.0, 0.0]])
    assert unit_token_rows([np.zeros((0, 3))])[0].shape == (0, 3)


def test_build_embedder_through_the_registry():
    emb = build_embedder({"kind": "hashing", "dim": 32})
    assert emb.dim == 32 and isinstance(emb, memcore.plugin.Embedder)
    assert build_embedder("hashing").dim == 256
    with pytest.raises(UnknownComponentError):
        build_embedder("no-such-embedder", location="indexes.x.embedder")
    with pytest.raises(ConfigError, match="indexes.x.embedder.dim"):
        build_embedder({"kind": "hashing", "dim": 1}, location="indexes.x.embedder")
    with pytest.raises(ConfigError, match="kind"):
        build_embedder({"dim": 8})
