"""``Memory.query`` on a memory whose service retrieves on its own (and whose declared
pipeline cannot run there) names the verbs to use instead of a bare pipeline error."""

from __future__ import annotations

import pytest

import memcore
from memcore.errors import ConfigError


def test_query_names_retrieve_and_the_indexes(tmp_path):
    pytest.importorskip("memcore_services")
    settings = {"spaces": {"default": {"embedder": "hashing"}}, "indexes": {}, "service": {"kind": "memoryos"}}
    with memcore.open(settings, path=tmp_path / "m") as memory:
        memory.insert("Alice moved to Lisbon", scope={"user_id": "u1"})
        with pytest.raises(ConfigError) as caught:
            memory.query("Lisbon")
        message = str(caught.value)
        assert "'memoryos' service does not use" in message
        assert "memory.retrieve(text" in message and "memory.query(text, index=NAME)" in message
        indexes = sorted(i["name"] for i in memory.collection.list_indexes())
        assert indexes and f"indexes: {', '.join(indexes)}" in message
        assert caught.value.__cause__ is memory.pipeline_error  # the pipeline's own reason, chained
        # the verbs it names work
        assert memory.retrieve("Lisbon", k=1, scope={"user_id": "u1"})[0]["text"] == "Alice moved to Lisbon"
        assert memory.query("Lisbon", index="memoryos.stm", k=1, scope={"user_id": "u1"})[0].record.text == "Alice moved to Lisbon"
