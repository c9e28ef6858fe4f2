"""memcore.index_handle: folding logged ops, saving with a manifest, loading with checks,
and rebuilding into the index the handle already built."""

from __future__ import annotations

import json

import numpy as np
import pytest

from memcore.plugin import IndexContext, SpaceInfo, WriteBatch
from memcore.embedders._embedder import HashingEmbedder
from memcore.indexes._handle import MANIFEST, IndexHandle, fold_ops
from memcore.indexes._exact import ExactIndex, ExactIndexConfig
from memcore import Record
from memcore.stores._store import Op
from memcore.stores._memory import MemoryStore


def op(rid, kind, seq=1):
    return Op(seq=seq, op=kind, record_id=rid, index="i")


def test_fold_ops_keeps_the_net_effect_in_order():
    ops = [op("a", "add"), op("b", "add"), op("a", "remove"), op("c", "remove"), op("b", "update"), op("a", "add")]
    removes, adds = fold_ops(ops)
    assert removes == ["c"]  # only c was in the index before the run
    assert adds == ["b", "a"]  # in the order of their last op


def test_fold_ops_for_a_durable_index_removes_what_the_run_added_then_removed():
    ops = [op("x", "add"), op("y", "add"), op("x", "remove"), op("z", "remove"), op("y", "remove"), op("y", "add")]
    assert fold_ops(ops) == (["z"], ["y"])  # a live write: x never reached the index
    assert fold_ops(ops, durable=True) == (["x", "z"], ["y"])  # a replay: x may be held already (issue 27)


def test_a_catch_up_of_a_durable_index_removes_a_record_added_and_deleted_since_its_save():
    class Durable(ExactIndex):
        durable_writes = True

    store = MemoryStore()
    ctx = IndexContext(name="i", spaces={"v": SpaceInfo("v", 4, "hashing")})
    index = Durable(ExactIndexConfig(space="v"), ctx)
    handle = IndexHandle("i", "exact", ExactIndexConfig(space="v"), index, lambda: Durable(ExactIndexConfig(space="v"), ctx))
    record = Record(id="x", text="x", vectors={"v": np.array([1.0, 0.0, 0.0, 0.0], dtype=np.float32)})
    store.apply(WriteBatch(upserts=[record], add_membership={"i": ["x"]}))
    index.add([record])  # the index persisted the add on its own, then the process died before its remove
    store.apply(WriteBatch(deletes=["x"]))
    handle.applied_seq = 0
    handle.catch_up(store)
    assert len(index) == 0


@pytest.fixture
def handle(tmp_path):
    builds = []
    embedder = HashingEmbedder()
    context = IndexContext("i", {"default": SpaceInfo("default", embedder.dim, "hashing")}, kind="exact")

    def make():
        builds.append(1)
        return ExactIndex(ExactIndexConfig(), context)

    h = IndexHandle("i", "exact", ExactIndexConfig(), make(), make, directory=tmp_path / "i")
    h.builds = builds  # type: ignore[attr-defined]
    h.embedder = embedder  # type: ignore[attr-defined]
    return h


def records(handle, texts):
    vectors = handle.embedder.embed_documents(texts)
    return [Record.create(t, id=f"r{n}", vectors={"default": v}) for n, (t, v) in enumerate(zip(texts, vectors))]


def test_save_then_load_round_trips_with_a_manifest(handle, tmp_path):
    handle.index.add(records(handle, ["a cat", "a dog"]))
    handle.applied_seq = 7
    handle.save()
    manifest = json.loads((tmp_path / "i" / MANIFEST).read_text())
    assert manifest["seq"] == 7 and manifest["count"] == 2 and manifest["kind"] == "exact" and manifest["files"]
    fresh = IndexHandle("i", "exact", ExactIndexConfig(), handle.make(), handle.make, directory=tmp_path / "i")
    assert fresh.load() == 7 and len(fresh.index) == 2 and fresh.loaded_from_disk and not fresh.pristine


def test_a_damaged_file_means_rebuild(handle, tmp_path):
    handle.index.add(records(handle, ["a cat"]))
    handle.save()
    victim = next(p for p in (tmp_path / "i").iterdir() if p.name != MANIFEST)
    victim.write_bytes(victim.read_bytes() + b"x")
    fresh = IndexHandle("i", "exact", ExactIndexConfig(), handle.make(), handle.make, directory=tmp_path / "i")
    assert fresh.load() is None  # checksum mismatch: rebuilt from the store by the collection
    assert len(fresh.index) == 0 and fresh.pristine


def test_rebuild_fills_the_index_it_built_and_catch_up_applies_the_log(handle):
    store = MemoryStore()
    batch = records(handle, ["a cat", "a dog", "a bird"])
    store.apply(WriteBatch(upserts=batch, add_membership={"i": [r.id for r in batch]}))
    handle.builds.clear()
    first = handle.index
    assert handle.rebuild(store, lambda rs: rs) == 3
    assert handle.index is first and handle.builds == []  # pristine: filled, not built again
    assert handle.rebuild(store, lambda rs: rs) == 3
    assert handle.index is not first and handle.builds == [1]  # not pristine any more: a fresh one
    store.apply(WriteBatch(remove_membership={"i": ["r0"]}))
    assert handle.catch_up(store) == 1 and len(handle.index) == 2
    assert handle.catch_up(store) == 0


def _saved(handle, tmp_path):
    handle.index.add(records(handle, ["a cat"]))
    handle.save()
    return tmp_path / "i" / MANIFEST


@pytest.mark.parametrize(
    "change",
    [
        {"kind": "other"},
        {"config": {"space": "other"}},
        {"format_version": 99},
    ],
    ids=["kind", "config", "format_version"],
)
def test_a_manifest_of_another_kind_config_or_version_means_rebuild(handle, tmp_path, change):
    """The header checks of every index's payload, done once by the core: plugins check none."""
    manifest = _saved(handle, tmp_path)
    meta = json.loads(manifest.read_text())
    meta.update({k: ({**meta[k], **v} if isinstance(v, dict) else v) for k, v in change.items()})
    manifest.write_text(json.dumps(meta))
    fresh = IndexHandle("i", "exact", ExactIndexConfig(), handle.make(), handle.make, directory=tmp_path / "i")
    assert fresh.load() is None and fresh.pristine


class _ExactV3(ExactIndex):
    format_version = 3
    readable_versions = (1, 2)


def test_readable_versions_are_loaded_others_rebuilt(handle, tmp_path):
    """An index that still reads older formats (``readable_versions``, e.g. colbert's
    migration) is loaded from them instead of rebuilt."""
    manifest = _saved(handle, tmp_path)  # format_version 1
    context = IndexContext("i", {"default": SpaceInfo("default", handle.embedder.dim, "hashing")}, kind="exact")

    def make():
        return _ExactV3(ExactIndexConfig(), context)

    fresh = IndexHandle("i", "exact", ExactIndexConfig(), make(), make, directory=tmp_path / "i")
    assert fresh.load() is not None and len(fresh.index) == 1
    meta = json.loads(manifest.read_text())
    manifest.write_text(json.dumps({**meta, "format_version": 4}))  # newer than this index reads
    fresh = IndexHandle("i", "exact", ExactIndexConfig(), make(), make, directory=tmp_path / "i")
    assert fresh.load() is None


def test_saves_and_loads_of_one_folder_from_many_handles_never_interleave(handle, tmp_path):
    """Processes sharing a memory (postgres store) each save their own copy of an index into
    one folder: the folder's lock keeps every save whole and every load reading one save
    (each handle holds its own descriptor, as another process would)."""
    import threading

    def saver(n: int) -> None:
        mine = IndexHandle("i", "exact", ExactIndexConfig(), handle.make(), handle.make, directory=tmp_path / "i")
        mine.index.add(records(handle, [f"saver {n} text {j}" for j in range(n + 1)]))
        for seq in range(15):
            mine.applied_seq = seq
            mine.dirty = True
            mine.save()

    def loader() -> None:
        for _ in range(30):
            fresh = IndexHandle("i", "exact", ExactIndexConfig(), handle.make(), handle.make, directory=tmp_path / "i")
            loaded.append((fresh.load(), fresh.load_error))

    handle.index.add(records(handle, ["a first save"]))
    handle.save()
    loaded: list = []
    failures: list = []

    def run(target, *args) -> None:
        try:
            target(*args)
        except BaseException as exc:  # noqa: BLE001 - reported below
            failures.append(repr(exc))

    threads = [threading.Thread(target=run, args=(saver, n)) for n in range(3)] + [threading.Thread(target=run, args=(loader,))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []
    assert len(loaded) == 30 and all(seq is not None and error is None for seq, error in loaded), loaded
    assert not (tmp_path / "i" / ".previous").exists() and not (tmp_path / "i" / ".previous.tmp").exists()
