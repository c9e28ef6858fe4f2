"""Component state written atomically with changes, eviction through Index.overflow, provenance."""

from __future__ import annotations

import pytest

import memcore
from memcore import Collection, DuplicateIdError, ValidationError
from memcore.indexes._exact import ExactIndex, ExactIndexConfig
from memcore.testing import register_plugin


@pytest.fixture(params=["memory", "sqlite"])
def collection(request, tmp_path):
    coll = Collection.create(tmp_path if request.param == "sqlite" else None)
    coll.create_index("vector", "exact")
    yield coll
    coll.close()


def test_state_is_written_with_the_insert(collection):
    collection.insert(["alpha"], state={("svc", "count"): 1})
    assert collection.get_state("svc", "count") == 1
    seq = collection.store.last_seq()
    with pytest.raises(ValidationError):
        collection.insert(["", "beta"], state={("svc", "count"): 2})
    assert collection.get_state("svc", "count") == 1 and collection.store.last_seq() == seq
    [rid] = collection.ids()
    with pytest.raises(DuplicateIdError):
        collection.insert([{"id": rid, "text": "other"}], state={("svc", "count"): 3})
    assert collection.get_state("svc", "count") == 1


def test_state_with_every_write(collection):
    [a] = collection.insert(["alpha"], indexes=[])
    collection.insert_to_index("vector", a, state={("svc", "step"): "added"})
    assert collection.get_state("svc", "step") == "added"
    collection.remove_from_index("vector", a, state={("svc", "step"): "removed"})
    assert collection.get_state("svc", "step") == "removed"
    collection.upsert([{"id": a, "text": "alpha two"}], state={("svc", "step"): "upserted"})
    collection.delete(a, state={("svc", "step"): None})
    assert collection.get_state("svc", "step") is None
    collection.set_state({("svc", "a"): [1, 2], ("svc", "b"): {"x": 1}})
    assert collection.state_items("svc") == {"a": [1, 2], "b": {"x": 1}}


@pytest.mark.parametrize("key", [("indexes", "x"), ("spaces", "x"), ("svc",), ("", "k"), "flat"])
def test_bad_state_keys(collection, key):
    with pytest.raises(ValidationError):
        collection.set_state({key: 1})


class CappedConfig(ExactIndexConfig):
    kind: str = "capped_test"
    capacity: int = 2


class CappedIndex(ExactIndex):
    """An exact index that reports everything past its capacity, oldest first."""

    def __init__(self, config, context):
        super().__init__(config, context)
        self.capacity = config.capacity
        self.order: list[str] = []

    def add(self, records):
        super().add(records)
        self.order = [i for i in self.order if i not in {r.id for r in records}] + [r.id for r in records]

    def remove(self, ids):
        super().remove(ids)
        self.order = [i for i in self.order if i not in set(ids)]

    def overflow(self):
        return self.order[: max(0, len(self.order) - self.capacity)]


class CappedPlugin:
    @memcore.hookimpl
    def register_indexes(self, register):
        register("capped_test", CappedIndex, CappedConfig)


def test_evict_takes_overflow_out_and_returns_it(tmp_path):
    with register_plugin(CappedPlugin(), name="capped-test-plugin"):
        with Collection.create(tmp_path) as coll:
            coll.create_index("stm", "capped_test", capacity=2)
            ids = coll.insert([{"id": f"t{i}", "text": f"turn {i}"} for i in range(4)])
            assert coll.evict("stm") == ids[:2]
            assert coll.ids(index="stm") == ids[2:] and coll.count() == 4  # records stay in the store
            assert coll.evict("stm") == []


def test_retrieve_hits_carry_their_provenance(collection):
    collection.insert(["red apple", "green apple", "blue sky"])
    hits = collection.retrieve("apple", index="vector", k=2)
    assert [(c.source, c.rank) for h in hits for c in h.provenance] == [("vector", 1), ("vector", 2)]
    assert "vector#1" in hits[0].explain()


def test_register_accepts_keyword_arguments():
    class KeywordPlugin:
        @memcore.hookimpl
        def register_fusions(self, register):
            from memcore.default_plugins.fusions import ConcatConfig, Concatenate

            register(name="concat_kw", factory=Concatenate, config_model=ConcatConfig)

    with register_plugin(KeywordPlugin(), name="kw-plugin") as info:
        assert info.registers == {"fusions": ["concat_kw"]}


def test_unknown_known_plugin_name_does_not_suggest_itself():
    from memcore._plugins._host import PluginHost

    registry = PluginHost(load_entry_points=False).registry
    with pytest.raises(memcore.UnknownComponentError) as err:
        registry.get("indexes", "bm25")
    assert "Did you mean" not in str(err.value) and "memcore-bm25, which provides 'bm25'" in str(err.value)


def test_a_text_index_takes_an_extras_only_query_and_decides_itself():
    from memcore.plugin import Requirements
    from memcore.embedders._embedder import prepare_query

    needs_text = Requirements(text=True)
    with pytest.raises(ValidationError, match="query text is empty"):
        prepare_query({}, memcore.Query(text="  "), needs_text)
    query = memcore.Query(extras={"graph": {"mode": "traverse"}})
    assert prepare_query({}, query, needs_text) is query
