"""The memcore.testing contract suites applied to the builtins, and the plugin fixtures."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Collection as AbstractSet, Sequence

import numpy as np
import pytest

import memcore
import memcore.plugin
from memcore import Collection, hookimpl
from memcore.default_plugins.fusions import ConcatConfig, Concatenate
from memcore.errors import CorruptError, PluginError, UnknownComponentError
from memcore.plugin import Index, IndexContext, Requirements, atomic_write_json
from memcore.indexes._exact import ExactIndex, ExactIndexConfig
from memcore._plugins._host import get_host, get_registry
from memcore import Hit, Query, Record
from memcore.plugin import ComponentConfig
from memcore.stores._memory import MemoryStore
from memcore.stores._sqlite import SQLiteStore
from memcore.stores._store import Store
from memcore.testing import (
    FusionContract,
    IndexContract,
    ServiceContract,
    StageContract,
    StoreContract,
    build_stage,
    make_records,
    random_unit_vectors,
    register_plugin,
)

pytest_plugins = ["memcore.testing.pytest_plugin"]


# -- indexes ---------------------------------------------------------------------------------


class TestExactIndex(IndexContract):
    @pytest.fixture(params=["cosine", "ip", "l2"])
    def make_index(self, request):
        config = ExactIndexConfig(metric=request.param)
        return lambda context: ExactIndex(config, context)


class TestExactIndexOtherSpace(IndexContract):
    """A non-default space name and dimension."""

    dim = 5
    space_names = ("dense", "other")

    @pytest.fixture
    def make_index(self):
        return lambda context: ExactIndex(ExactIndexConfig(space="dense"), context)


class OverlapConfig(ComponentConfig):
    """Settings of the in-test ``contract_overlap`` index."""

    kind: str = "contract_overlap"


class OverlapIndex(Index):
    """A tiny text index for these tests: score = number of distinct shared words."""

    requires = Requirements(text=True)
    score_range = (0.0, None)

    def __init__(self, config: OverlapConfig, context: IndexContext):
        self.name = context.name
        self.docs: dict[str, set[str]] = {}

    def add(self, records: Sequence[Record]) -> None:
        for r in records:
            self.docs[r.id] = set(re.findall(r"\w+", r.text.lower()))

    def remove(self, ids: Sequence[str]) -> None:
        for rid in ids:
            self.docs.pop(rid, None)

    def search(self, query: Query, k: int, allowed: AbstractSet[str] | None = None) -> list[Hit]:
        k = memcore.plugin.validate_k(k)
        words = set(re.findall(r"\w+", (query.text or "").lower()))
        scored = [(len(words & doc), rid) for rid, doc in self.docs.items() if allowed is None or rid in allowed]
        best = sorted((s for s in scored if s[0] > 0), key=lambda s: (-s[0], s[1]))[:k]
        return [Hit(rid, float(score), raw=float(score), source=self.name) for score, rid in best]

    def __len__(self) -> int:
        return len(self.docs)

    def save(self, directory: Path) -> None:
        atomic_write_json(Path(directory) / "overlap.json", {rid: sorted(words) for rid, words in self.docs.items()})

    def load(self, directory: Path) -> None:
        try:
            data = json.loads((Path(directory) / "overlap.json").read_text())
        except (OSError, ValueError) as exc:
            raise CorruptError(str(exc)) from None
        self.docs = {rid: set(words) for rid, words in data.items()}


@hookimpl
def register_indexes(register):
    register("contract_overlap", OverlapIndex, OverlapConfig)


OVERLAP_PLUGIN = SimpleNamespace(register_indexes=register_indexes)


class TestOverlapIndex(IndexContract):
    """The suite's text path: records and queries carry words, no vectors."""

    @pytest.fixture
    def make_index(self):
        return lambda context: OverlapIndex(OverlapConfig(), context)


# -- stores ----------------------------------------------------------------------------------


class TestSQLiteStore(StoreContract):
    @pytest.fixture
    def store(self, tmp_path):
        store = SQLiteStore(tmp_path)
        yield store
        store.close()


class TestMemoryStore(StoreContract):
    @pytest.fixture
    def store(self):
        return MemoryStore()


class GenericPathStore(MemoryStore):
    """A store without native text filters or pages: the Store base's generic path
    (what a third-party store inherits) answers ``find_ids`` / ``find_count``."""

    find_ids = Store.find_ids
    find_count = Store.find_count


class TestGenericPathStore(StoreContract):
    @pytest.fixture
    def store(self):
        return GenericPathStore()


# -- fusions ---------------------------------------------------------------------------------


class TestConcat(FusionContract):
    @pytest.fixture
    def fusion(self):
        return Concatenate(ConcatConfig())


class TestRegisteredFusions(FusionContract):
    """The builtin strategy built through the registry, as settings build it (``rrf``: memcore-rrf's tests)."""

    @pytest.fixture
    def fusion(self):
        return Collection.create().build_fusion("concat")


# -- stages ----------------------------------------------------------------------------------


class TestBuiltinStages(StageContract):
    @pytest.fixture(
        params=[
            {"kind": "recall", "index": "vector"},
            {"kind": "recall", "index": "vector_l2", "over_fetch": 2.0, "name": "l2"},
            {"kind": "limit", "k": 3},
            {"kind": "limit"},
            {"kind": "threshold", "min_score": 0.1},
            {"kind": "filter", "where": {"parity": "odd"}},
            {"kind": "fuse", "fusion": "concat"},
            {"kind": "fuse", "fusion": "concat", "k": 4},
            {"kind": "fuse", "fusion": {"kind": "concat"}, "lists": ["seed_vector_l2"]},
        ],
        ids=lambda p: json.dumps(p, sort_keys=True),
    )
    def stage(self, request):
        options = dict(request.param)
        return build_stage(options.pop("kind"), **options)


class TestRecallAsFirstStage(StageContract):
    """A recall stage on a context without seeded lists."""

    seed_lists = False

    @pytest.fixture
    def stage(self):
        return build_stage("recall", index="vector")


# -- services --------------------------------------------------------------------------------


class TestDefaultService(ServiceContract):
    @pytest.fixture
    def open_memory(self):
        return lambda path: memcore.open(path=path)


class TestDefaultServiceWithSettings(ServiceContract):
    """The default service over two indexes fused with RRF, declared in settings."""

    @pytest.fixture
    def open_memory(self):
        settings = {
            "indexes": {"vector": {"kind": "exact"}, "words": {"kind": "exact", "metric": "l2"}},
            "pipeline": [
                {"kind": "recall", "index": "vector", "k": 20},
                {"kind": "recall", "index": "words", "k": 20},
                {"kind": "fuse", "fusion": "rrf"},
                {"kind": "limit"},
            ],
        }
        return lambda path: memcore.open(settings, path=path)


# -- register_plugin and the memcore_plugin fixture ----------------------------------------------


def test_register_plugin_makes_an_index_kind_usable():
    assert "contract_overlap" not in get_registry().names("indexes")
    with register_plugin(OVERLAP_PLUGIN, name="contract-test") as info:
        assert info.error is None
        assert info.registers == {"indexes": ["contract_overlap"]}
        assert get_host().infos["contract-test"] is info
        collection = Collection.create()
        collection.create_index("words", "contract_overlap")
        collection.insert(["Alice works in Zurich", "Bob bakes bread", "Alice bakes cakes in Bern"])
        hits = collection.retrieve("alice zurich", index="words", k=2)
        assert [h.record.text for h in hits] == ["Alice works in Zurich", "Alice bakes cakes in Bern"]
        collection.close()
    assert "contract_overlap" not in get_registry().names("indexes")
    assert "contract-test" not in get_host().infos
    with pytest.raises(UnknownComponentError):
        Collection.create().create_index("words", "contract_overlap")


def test_register_plugin_cleans_up_after_an_exception():
    with pytest.raises(RuntimeError):
        with register_plugin(OVERLAP_PLUGIN):
            raise RuntimeError("boom")
    assert "contract_overlap" not in get_registry().names("indexes")
    assert "test-plugin" not in get_host().infos


def test_register_plugin_raises_for_a_broken_plugin():
    @hookimpl
    def register_indexes(register):
        register("exact", OverlapIndex, OverlapConfig)  # taken by the builtin

    with pytest.raises(PluginError, match="already registered"):
        with register_plugin(SimpleNamespace(register_indexes=register_indexes), name="dup-test"):
            pytest.fail("the body must not run")
    assert "dup-test" not in get_host().infos
    assert get_registry().get("indexes", "exact").factory is ExactIndex

    @hookimpl
    def register_indexs(register):  # misspelled hook
        pass

    with pytest.raises(PluginError, match="unknown hook"):
        with register_plugin(SimpleNamespace(register_indexs=register_indexs), name="typo-test"):
            pass
    assert "typo-test" not in get_host().infos


def test_register_plugin_refuses_a_loaded_name():
    builtin = "memcore.default_plugins.indexes"
    with pytest.raises(PluginError, match="already loaded"):
        with register_plugin(OVERLAP_PLUGIN, name=builtin):
            pass
    assert get_host().infos[builtin].error is None
    assert "exact" in get_registry().names("indexes")


def test_memcore_plugin_fixture(memcore_plugin):
    info = memcore_plugin(OVERLAP_PLUGIN)
    assert info.registers == {"indexes": ["contract_overlap"]}
    with Collection.create() as collection:
        collection.create_index("words", "contract_overlap")
        collection.insert({"id": "x", "text": "fixture plugins work"})
        assert [h.id for h in collection.retrieve("plugins", index="words")] == ["x"]


def test_memcore_plugin_fixture_removes_its_plugins_at_teardown():
    """Drives the fixture's own generator (setup, use, teardown) inside this test, so the
    check does not depend on which test ran before."""
    from memcore.testing import pytest_plugin

    fixture = getattr(pytest_plugin.memcore_plugin, "__pytest_wrapped__", None)
    generator = (fixture.obj if fixture is not None else pytest_plugin.memcore_plugin.__wrapped__)()
    register = next(generator)
    register(OVERLAP_PLUGIN)
    assert "contract_overlap" in get_registry().names("indexes")
    with pytest.raises(StopIteration):
        next(generator)  # the teardown
    assert "contract_overlap" not in get_registry().names("indexes")
    assert "test-plugin" not in get_host().infos


# -- test data helpers -------------------------------------------------------------------------


def test_make_records_and_unit_vectors():
    vectors = random_unit_vectors(4, 8, seed=3)
    assert vectors.shape == (4, 8) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0)
    assert np.array_equal(vectors, random_unit_vectors(4, 8, seed=3))
    records = make_records(5, dim=8, spaces=("a", "b"), seed=1, start=10, links=True)
    assert [r.id for r in records] == ["r10", "r11", "r12", "r13", "r14"]
    assert all(set(r.vectors) == {"a", "b"} and r.vectors["a"].shape == (8,) for r in records)
    assert not np.array_equal(records[0].vectors["a"], records[0].vectors["b"])
    assert records[0].links == () and records[1].links[0].target == "r10"
    assert records[2].metadata == {"n": 12, "parity": "even"}
    assert len({r.text for r in records}) == 5
    assert all(math.isclose(float(np.linalg.norm(r.vectors["a"])), 1.0, rel_tol=1e-5) for r in records)
    again = make_records(5, dim=8, spaces=("a", "b"), seed=1, start=10, links=True)
    assert [r.text for r in again] == [r.text for r in records]
