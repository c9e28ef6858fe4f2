"""An option added to an index's config since a memory was saved reads as its default."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import memcore
from memcore.errors import ConfigError
from memcore.indexes._exact import ExactIndexConfig
from memcore.indexes._options import check_change, with_defaults

SETTINGS = {"spaces": {"default": {"dim": 4}}, "indexes": {"vector": {"kind": "exact", "space": "default"}}}


def test_a_stored_definition_without_a_new_option_is_unchanged() -> None:
    saved = {"kind": "exact", "space": "default"}  # as written before `metric` existed
    assert with_defaults(saved, ExactIndexConfig) == ExactIndexConfig().model_dump(mode="json")
    assert check_change("vector", "exact", saved, ExactIndexConfig()) == []
    with pytest.raises(ConfigError, match="metric"):  # a real change is still one
        check_change("vector", "exact", {**saved, "metric": "l2"}, ExactIndexConfig())
    assert with_defaults({**saved, "removed_option": 1}, ExactIndexConfig) == {**saved, "removed_option": 1}


def test_a_saved_index_without_a_new_option_loads_from_disk(tmp_path: Path) -> None:
    with memcore.open(SETTINGS, path=tmp_path / "m") as memory:
        memory.insert([{"text": "a", "vectors": {"default": [1.0, 0.0, 0.0, 0.0]}}])
    manifests = list((tmp_path / "m").rglob("vector/index.json"))
    assert len(manifests) == 1
    meta = json.loads(manifests[0].read_text())
    del meta["config"]["metric"]  # the save of a version before the option existed
    manifests[0].write_text(json.dumps(meta))
    with memcore.open(SETTINGS, path=tmp_path / "m") as memory:
        handle = memory.collection._handle("vector")
        assert handle.loaded_from_disk and handle.load_error is None, handle.load_error
        assert memory.count() == 1
