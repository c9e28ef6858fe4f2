"""Indexes on existing data: populate on create, search-time vs build-time options, rebuild.

Uses real plugins where they are installed (faiss, bm25 of memcore-bm25); those cases
skip cleanly without them.
"""

from __future__ import annotations

import importlib.util

import pytest

import memcore
from memcore import ConfigError
from memcore.indexes._options import search_time_fields

TEXTS = [f"turn {i}: Alice talks about topic {i % 7} and the weather number {i}" for i in range(40)]

HAS_FAISS = importlib.util.find_spec("memcore_faiss") is not None
HAS_BM25 = importlib.util.find_spec("memcore_bm25") is not None


def open_with(path, indexes, **extra):
    return memcore.open({"indexes": indexes, **extra}, path=path)


def test_a_new_declared_index_is_filled_from_the_store(tmp_path, caplog):
    with open_with(tmp_path, {"vector": {"kind": "exact"}}) as memory:
        memory.insert(TEXTS)
    indexes = {"vector": {"kind": "exact"}, "near": {"kind": "exact", "metric": "l2"}}
    with open_with(tmp_path, indexes) as memory:
        assert memory.count(index="near") == len(TEXTS)  # not empty: every stored record
        top = memory.query(TEXTS[5], k=1, index="near")[0]
        assert top.record.text == TEXTS[5]
        memory.insert("one more turn")
        assert memory.count(index="near") == len(TEXTS) + 1
    with open_with(tmp_path, indexes) as memory:  # reopening does not add twice
        assert memory.count(index="near") == len(TEXTS) + 1


def test_populate_false_creates_an_empty_index(tmp_path):
    with open_with(tmp_path, {"vector": {"kind": "exact"}}) as memory:
        memory.insert(TEXTS[:5])
    with open_with(tmp_path, {"vector": {"kind": "exact"}, "fresh": {"kind": "exact", "populate": False}}) as memory:
        assert memory.count(index="fresh") == 0
        assert memory.count(index="vector") == 5
    with pytest.raises(ConfigError, match="populate must be true or false") as info:
        open_with(tmp_path, {"vector": {"kind": "exact"}, "bad": {"kind": "exact", "populate": "yes"}})
    assert info.value.location == "indexes.bad.populate"


def test_populating_logs_a_line(tmp_path, capsys):
    from memcore._util.log import configure_logging

    configure_logging("json", "info")
    try:
        with open_with(tmp_path, {"vector": {"kind": "exact"}}) as memory:
            memory.insert(TEXTS[:3])
        with open_with(tmp_path, {"vector": {"kind": "exact"}, "more": {"kind": "exact", "metric": "ip"}}):
            pass
    finally:
        configure_logging()
    err = capsys.readouterr().err
    assert '"index.populated"' in err and '"records": 3' in err


def test_populate_reports_progress(tmp_path):
    from memcore._util.progress import use_progress
    import contextlib

    seen = []

    @contextlib.contextmanager
    def reporter(label, total):
        seen.append((label, total))
        yield lambda n: seen.append(n)

    with open_with(tmp_path, {"vector": {"kind": "exact"}}) as memory:
        memory.insert(TEXTS)
        memory.collection.create_index("more", "exact", metric="ip")
        with use_progress(reporter):
            assert memory.collection.populate_index("more", batch_size=16) == len(TEXTS)
    assert seen == [("Populating more", 40), 16, 16, 8]


def test_build_time_change_names_option_values_and_command(tmp_path):
    with open_with(tmp_path, {"vector": {"kind": "exact", "metric": "cosine"}}) as memory:
        memory.insert(TEXTS[:3])
    with pytest.raises(ConfigError) as info:
        open_with(tmp_path, {"vector": {"kind": "exact", "metric": "ip"}})
    message = str(info.value)
    assert info.value.location == "indexes.vector.metric"
    assert "stored 'cosine', new 'ip'" in message and "memcore index rebuild vector" in message and "rebuild_index" in message
    if HAS_FAISS:
        with pytest.raises(ConfigError, match="stored kind 'exact', new 'faiss'"):
            open_with(tmp_path, {"vector": {"kind": "faiss"}})


def test_rebuild_with_new_options_holds_every_record(tmp_path):
    with open_with(tmp_path, {"vector": {"kind": "exact", "metric": "cosine"}}) as memory:
        memory.insert(TEXTS)
        assert memory.collection.rebuild_index("vector", metric="ip", space="default") == len(TEXTS)
    with open_with(tmp_path, {"vector": {"kind": "exact", "metric": "ip"}}) as memory:  # the new definition is stored
        assert memory.count(index="vector") == len(TEXTS)
        assert memory.collection.list_indexes()[0]["config"]["metric"] == "ip"
        assert memory.query(TEXTS[7], k=1)[0].record.text == TEXTS[7]


@pytest.mark.skipif(not HAS_FAISS, reason="memcore-faiss not installed")
def test_faiss_search_time_option_changes_on_reopen(tmp_path):
    base = {"kind": "faiss", "factory": "HNSW16", "ef_search": 16}
    with open_with(tmp_path, {"vector": base}) as memory:
        memory.insert(TEXTS)
    with open_with(tmp_path, {"vector": {**base, "ef_search": 64}}) as memory:
        handle = memory.collection._indexes["vector"]
        assert handle.loaded_from_disk  # no rebuild: the saved graph was loaded
        assert memory.collection.index("vector").stats()["ef_search"] == 64
        assert memory.count(index="vector") == len(TEXTS)
    with open_with(tmp_path, {"vector": {**base, "ef_search": 64}}) as memory:
        assert memory.collection.list_indexes()[0]["config"]["ef_search"] == 64
    with pytest.raises(ConfigError, match="'factory'.*stored 'HNSW16', new 'HNSW32'"):
        open_with(tmp_path, {"vector": {**base, "factory": "HNSW32"}})


@pytest.fixture
def count_loads(monkeypatch):
    """Counts ``IndexHandle.load`` calls per index name."""
    from collections import Counter

    from memcore.indexes._handle import IndexHandle

    loads: Counter = Counter()
    real = IndexHandle.load

    def load(self):
        loads[self.name] += 1
        return real(self)

    monkeypatch.setattr(IndexHandle, "load", load)
    return loads


@pytest.mark.skipif(not HAS_FAISS, reason="memcore-faiss not installed")
def test_a_search_time_change_on_reopen_loads_the_index_once(tmp_path, count_loads):
    base = {"kind": "faiss", "factory": "HNSW16", "ef_search": 16}
    with open_with(tmp_path, {"vector": base}) as memory:
        memory.insert(TEXTS)
    count_loads.clear()
    with open_with(tmp_path, {"vector": {**base, "ef_search": 48}}) as memory:
        assert count_loads["vector"] == 1
        assert memory.collection._indexes["vector"].loaded_from_disk
        assert memory.collection.index("vector").stats()["ef_search"] == 48
        assert memory.collection.list_indexes()[0]["config"]["ef_search"] == 48
    count_loads.clear()
    with memcore.open({"indexes": {"vector": {**base, "ef_search": 32}}}, path=tmp_path, store={"read_only": True}) as memory:
        assert count_loads["vector"] == 1  # read-only: applied in memory, nothing written
        assert memory.collection.index("vector").stats()["ef_search"] == 32
    with open_with(tmp_path, {"vector": {**base, "ef_search": 48}}) as memory:
        assert memory.collection.list_indexes()[0]["config"]["ef_search"] == 48


def test_unchanged_options_load_each_index_once(tmp_path, count_loads):
    with open_with(tmp_path, {"vector": {"kind": "exact"}}) as memory:
        memory.insert(TEXTS[:4])
    count_loads.clear()
    with open_with(tmp_path, {"vector": {"kind": "exact"}}):
        assert dict(count_loads) == {"vector": 1}


@pytest.mark.skipif(not HAS_BM25, reason="memcore-bm25 not installed")
def test_bm25_merge_threshold_is_search_time_and_stemmer_build_time(tmp_path):
    with open_with(tmp_path, {"words": {"kind": "bm25"}}) as memory:
        memory.insert(TEXTS)
    with open_with(tmp_path, {"words": {"kind": "bm25", "merge_threshold": 5}}) as memory:
        assert memory.collection.list_indexes()[0]["config"]["merge_threshold"] == 5
        assert memory.count(index="words") == len(TEXTS)
        assert memory.query("weather number 12", k=1, index="words")[0].record.text == TEXTS[12]
    with pytest.raises(ConfigError, match="'stemmer'"):
        open_with(tmp_path, {"words": {"kind": "bm25", "stemmer": "none"}})


def test_search_time_fields_are_declared_by_the_plugins():
    from memcore._plugins._host import get_registry

    registry = get_registry()
    expected = {"faiss": {"ef_search", "nprobe"}, "bm25": {"merge_threshold"}, "lsh": {"probes", "multi_probe"}}
    for kind, fields in expected.items():
        reg = registry.entries["indexes"].get(kind)
        if reg is not None:
            assert fields <= search_time_fields(reg.config_model), kind


def test_search_time_must_name_real_fields():
    from memcore.plugin import ComponentConfig
    from memcore import PluginError
    from memcore._plugins._registry import Registry
    from typing import ClassVar

    class Bad(ComponentConfig):
        search_time: ClassVar[frozenset[str]] = frozenset({"ef_serch"})
        kind: str = "bad"
        ef_search: int = 3

    with pytest.raises(PluginError, match="ef_serch"):
        Registry.make_registration("indexes", "bad", lambda c, x: None, Bad, "test")
