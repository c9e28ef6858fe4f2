"""memcore.spaces: embedding spaces, their pins, and the batched filling of vectors."""

from __future__ import annotations

import numpy as np
import pytest

from memcore import ConfigError, DimensionError, Query, Record, ValidationError
from memcore.plugin import Embedder, Requirements
from memcore.embedders._embedder import HashingEmbedder, Space, fill_vectors, prepare_query, query_vector


class CountingEmbedder(Embedder):
    """Hashing vectors, counting the batches; ``broken`` returns the wrong shape or NaN."""

    def __init__(self, broken: str | None = None):
        self.inner = HashingEmbedder()
        self.dim = self.inner.dim
        self.model_id = "counting-v1"
        self.batches: list[int] = []
        self.broken = broken

    def embed_documents(self, texts):
        self.batches.append(len(texts))
        out = self.inner.embed_documents(texts)
        if self.broken == "shape":
            return out[:, :-1]
        if self.broken == "nan":
            out[0, 0] = np.nan
        return out


def space(embedder=None, name="default"):
    embedder = embedder or CountingEmbedder()
    return Space(name, embedder.dim, embedder, "counting")


def test_fill_vectors_embeds_only_the_missing_ones_in_one_batch():
    s = space()
    given = np.ones(s.dim, dtype=np.float32)
    records = [Record.create("a"), Record.create("b", vectors={"default": given}), Record.create("c")]
    changed = fill_vectors({"default": s}, records, ["default"])
    assert [r.text for r in changed] == ["a", "c"]
    assert s.embedder.batches == [2]
    assert records[1].vectors["default"] is given
    assert fill_vectors({"default": s}, records, ["default"]) == [] and s.embedder.batches == [2]


def test_query_vector_is_embedded_once_and_cached_on_the_query():
    s = space()
    q = Query(text="hello there")
    first = query_vector({"default": s}, q, "default")
    assert query_vector({"default": s}, q, "default") is first
    assert s.embedder.batches == [1]
    with pytest.raises(ConfigError, match="not declared"):
        query_vector({"default": s}, q, "other")
    with pytest.raises(ValidationError, match="neither text nor a vector"):
        query_vector({"default": s}, Query(text="  "), "default")


def test_prepare_query_checks_caller_vectors_and_text():
    s = space()
    with pytest.raises(DimensionError):
        prepare_query({"default": s}, Query(vectors={"default": np.ones(3)}), Requirements(spaces=("default",)))
    with pytest.raises(ValidationError, match="text is empty"):
        prepare_query({"default": s}, Query(vectors={"default": np.ones(s.dim)}), Requirements(text=True))
    q = Query(extras={"fifo": {"mode": "newest"}})
    assert prepare_query({}, q, Requirements(text=True)) is q  # a query mode may come without text


@pytest.mark.parametrize("broken, error", [("shape", DimensionError), ("nan", ValidationError)])
def test_a_misbehaving_embedder_is_caught(broken, error):
    s = space(CountingEmbedder(broken))
    with pytest.raises(error):
        s.embed_documents(["a", "b"])


def test_a_space_without_embedder_needs_given_vectors():
    s = Space("raw", 4)
    assert s.manifest() == {"dim": 4, "embedder": "none", "model_id": ""}
    with pytest.raises(ValidationError, match="no embedder"):
        fill_vectors({"raw": s}, [Record.create("x")], ["raw"])


def test_pins_refuse_another_model_or_dimension():
    s = space()
    s.check_pinned(s.manifest())
    with pytest.raises(ConfigError, match="not comparable") as info:
        s.check_pinned({**s.manifest(), "model_id": "other-model"})
    assert info.value.location == "spaces.default"
    assert s.info.dim == s.dim and s.info.embedder == "counting"
