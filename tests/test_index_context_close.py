"""``IndexContext.directory`` (the folder an index owns) and ``Index.close`` (called once when
the collection lets go of an instance: close, drop, rebuild, redefinition, failed load)."""

from __future__ import annotations

import json
from types import SimpleNamespace

from memcore import Collection, Record, hookimpl
from memcore.indexes._exact import ExactIndex, ExactIndexConfig
from memcore.testing import register_plugin

EVENTS: list[tuple[str, object]] = []


class ProbeConfig(ExactIndexConfig):
    kind: str = "probe"


class ProbeIndex(ExactIndex):
    """The exact index, reporting its context's folder and its close calls."""

    def __init__(self, config, context):
        super().__init__(config, context)
        self.directory = context.directory
        EVENTS.append(("built", context.directory))

    def close(self) -> None:
        EVENTS.append(("closed", self.directory))


@hookimpl
def register_indexes(register):
    register("probe", ProbeIndex, ProbeConfig)


def _plugin():
    EVENTS.clear()
    return register_plugin(SimpleNamespace(register_indexes=register_indexes), name="probe-plugin")


def test_the_context_names_the_index_folder_and_close_closes_each_instance(tmp_path):
    with _plugin():
        collection = Collection.create(tmp_path / "c")
        collection.create_index("p", "probe")
        collection.insert([Record(id="a", text="hello")], indexes=["p"])
        assert EVENTS == [("built", tmp_path / "c" / "indexes" / "p")]
        collection.close()
        assert EVENTS[-1] == ("closed", tmp_path / "c" / "indexes" / "p")
        assert (tmp_path / "c" / "indexes" / "p" / "index.json").is_file()  # saved before closing
        assert [e for e, _ in EVENTS].count("closed") == 1


def test_an_in_memory_collection_gives_no_folder(tmp_path):
    with _plugin():
        collection = Collection.create(None)
        collection.create_index("p", "probe")
        collection.close()
        assert EVENTS == [("built", None), ("closed", None)]


def test_drop_closes_after_the_files_are_gone(tmp_path, monkeypatch):
    with _plugin():
        collection = Collection.create(tmp_path / "c")
        collection.create_index("p", "probe")
        collection.insert([Record(id="a", text="hello")], indexes=["p"])
        collection.flush()
        folder = tmp_path / "c" / "indexes" / "p"
        seen = []
        monkeypatch.setattr(ProbeIndex, "close", lambda self: seen.append(folder.exists()))
        collection.drop_index("p")
        assert seen == [False]
        collection.close()


def test_a_rebuild_and_a_failed_load_close_the_replaced_instance(tmp_path):
    with _plugin():
        collection = Collection.create(tmp_path / "c")
        collection.create_index("p", "probe")
        collection.insert([Record(id="a", text="hello")], indexes=["p"])
        collection.rebuild_index("p")
        assert [e for e, _ in EVENTS] == ["built", "built", "closed"]
        collection.close()
        manifest = tmp_path / "c" / "indexes" / "p" / "index.json"
        meta = json.loads(manifest.read_text())
        meta["format_version"] = 99  # the next load fails its checks
        manifest.write_text(json.dumps(meta))
        EVENTS.clear()
        reopened = Collection.create(tmp_path / "c")
        assert [e for e, _ in EVENTS] == ["built", "closed", "built"]
        assert [h.id for h in reopened.retrieve("hello", index="p")] == ["a"]
        reopened.close()
