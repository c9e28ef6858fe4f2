"""The ``mmr`` stage passes memcore's StageContract: with vectors, with the Jaccard
fallback (no vector in the space), and with a mix of both."""

from __future__ import annotations

import json

import numpy as np
import pytest
from memcore import Collection
from memcore.embedders._embedder import Space
from memcore.testing import StageContract, build_stage, make_texts

OPTIONS = [
    {},
    {"lambda": 0.0},
    {"lambda": 1.0},
    {"lambda_param": 0.7, "top_n": 3},
    {"lambda_": 0.3, "relevance": "score", "fetch_k": 6},
    {"top_n": 50},
    {"redundancy_floor": False, "lambda": 0.2},
]


class TestMMR(StageContract):
    @pytest.fixture(params=OPTIONS, ids=lambda p: json.dumps(p, sort_keys=True))
    def stage(self, request):
        return build_stage("mmr", **request.param)


class TestMMRAfterFusion(StageContract):
    """MMR over a fused working list (its hits carry several contributions)."""

    @pytest.fixture
    def stage(self):
        return build_stage("mmr", **{"lambda": 0.6})

    def make_context(self, collection, query, *, empty=False):
        ctx = super().make_context(collection, query, empty=empty)
        build_stage("fuse", fusion="rrf").run(ctx)
        return ctx


class _SideSpaceContract(StageContract):
    """A collection with a second space ``side`` (caller-given 8-d vectors) that the
    indexes do not use: records get a ``side`` vector only when ``with_side(i)``."""

    def with_side(self, i: int) -> bool:
        raise NotImplementedError

    def make_collection(self) -> Collection:
        base = Collection.create()
        spaces = dict(base.spaces)
        base.close()
        spaces["side"] = Space("side", 8, None, "none")
        collection = Collection.create(spaces=spaces)
        for name, entry in self.collection_indexes.items():
            options = dict(entry)
            collection.create_index(name, options.pop("kind"), **options)
        rng = np.random.default_rng(5)
        items = []
        for i, text in enumerate(make_texts(self.n_records, seed=3)):
            item = {"id": f"s{i}", "text": text, "metadata": {"n": i, "parity": "even" if i % 2 == 0 else "odd"}}
            if self.with_side(i):
                item["vectors"] = {"side": rng.standard_normal(8).astype(np.float32)}
            items.append(item)
        collection.insert(items)
        return collection


class TestMMRJaccardFallback(_SideSpaceContract):
    """No record has a vector in ``side``: every similarity is token Jaccard."""

    def with_side(self, i):
        return False

    @pytest.fixture(params=[{}, {"lambda": 0.2, "top_n": 4}], ids=lambda p: json.dumps(p, sort_keys=True))
    def stage(self, request):
        return build_stage("mmr", space="side", **request.param)


class TestMMRMixedVectors(_SideSpaceContract):
    """Every third record has a ``side`` vector; the others fall back to Jaccard."""

    def with_side(self, i):
        return i % 3 == 0

    @pytest.fixture(params=[{"relevance": "score"}, {"lambda": 0.4, "relevance": "score", "top_n": 6}], ids=lambda p: json.dumps(p, sort_keys=True))
    def stage(self, request):
        return build_stage("mmr", space="side", **request.param)
