"""Issue 13 item 7: every per-query and per-index numeric option is bounded in its config model.

Out-of-range values are ConfigError (settings) or ValidationError (query modes) before
any library sees them: ``ef_search = 10**9`` took 41 s and 7.7 GB, ``2**40`` raised a raw
SWIG OverflowError.
"""

from __future__ import annotations

import importlib

import pytest

from memcore import ConfigError
from memcore._plugins._host import get_registry

HUGE = [10**10, 2**40, float("inf")]

INDEX_OPTIONS = {
    "faiss": {"factory": "HNSW32", "space": "v", "ef_search": None, "ef_construction": None},
    "faiss-ivf": {"factory": "IVF8,Flat", "space": "v", "nprobe": None, "min_train": None},
    "lsh": {"space": "v", "bits": None, "tables": None, "probes": None, "max_candidates": None},
    "bm25": {"k1": None, "delta": None, "merge_threshold": None},
    "graph": {"max_depth": None, "max_nodes": None},
}


@pytest.mark.parametrize("kind, option", [(k, o) for k, opts in INDEX_OPTIONS.items() for o, v in opts.items() if v is None])
@pytest.mark.parametrize("value", HUGE)
def test_index_options_are_bounded(kind, option, value):
    registry = get_registry()
    name = kind.split("-")[0]
    if name not in registry.names("indexes"):
        pytest.skip(f"{name} not installed")
    base = {k: v for k, v in INDEX_OPTIONS[kind].items() if v is not None}
    with pytest.raises(ConfigError):
        registry.get("indexes", name).parse_config({**base, option: value}, f"indexes.{name}")


@pytest.mark.parametrize("k", [10**6, 2**40])
def test_huge_k_is_capped_by_the_index_not_allocated(tmp_path, k):
    import memcore

    from .conftest import settings, vec

    with memcore.open(settings(), path=tmp_path / "m") as memory:
        memory.collection.insert([{"id": f"r{i}", "text": "t", "vectors": {"v": vec(i)}} for i in range(5)])
        for name in ("exact", "flat"):
            assert len(memory.collection.retrieve({"vectors": {"v": vec(1)}}, index=name, k=k)) == 5


@pytest.mark.parametrize(
    "plugin, model, field",
    [
        ("memcore_faiss", "FaissQueryMode", "ef_search"),
        ("memcore_faiss", "FaissQueryMode", "nprobe"),
        ("memcore_lsh.config", "LSHQueryMode", "probes"),
        ("memcore_lsh.config", "LSHQueryMode", "max_candidates"),
    ],
)
@pytest.mark.parametrize("value", [10**9, 2**40])
def test_query_modes_are_bounded(plugin, model, field, value):
    try:
        module = importlib.import_module(plugin)
    except ImportError:
        pytest.skip(f"{plugin} not installed")
    cls = getattr(module, model, None) or getattr(importlib.import_module(plugin + ".config"), model)
    with pytest.raises(Exception) as info:
        cls(**{field: value})
    assert "less than or equal" in str(info.value)
