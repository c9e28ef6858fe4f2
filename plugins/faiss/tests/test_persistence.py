"""save/load: native faiss files + .npz id map + JSON sidecar, identical results after reopening, CorruptError."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest

from memcore import CorruptError, Record

VARIANTS = {
    "flat-l2": {"factory": "Flat", "metric": "l2"},
    "hnsw-tombstones": {"factory": "HNSW32", "compact_fraction": 0.9},
    "ivf-pending": {"factory": "IVF8,Flat", "min_train": 1000, "nprobe": 2},
    "ivf-trained": {"factory": "IVF8,Flat", "min_train": 200, "nprobe": 2},
    "ivfpq": {"factory": "IVF4,PQ4x4", "min_train": 200, "metric": "l2"},
    "hnsw-sq8": {"factory": "HNSW16_SQ8", "min_train": 200},
}


def _queries(kit, base):
    return [kit.query(q) for q in base[:5]] + [kit.query(q) for q in kit.clustered(5, 16, seed=7)]


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_roundtrip_gives_identical_results(make, kit, tmp_path, name):
    options = VARIANTS[name]
    base = kit.clustered(400, 16)
    index = make(16, **options)
    index.add(kit.records(base[:300]))
    index.remove([f"r{i}" for i in range(0, 300, 9)])
    index.add(kit.records(base[300:], start=300))
    index.save(tmp_path)
    assert not [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == (["idmap.npz", "index.faiss", "pending.faiss", "state.json"] if name == "ivf-pending" else ["idmap.npz", "index.faiss", "state.json"])
    state = json.loads((tmp_path / "state.json").read_text())
    assert state["trained"] is (name != "ivf-pending") and state["size"] == len(index)
    fresh = make(16, **options)
    fresh.load(tmp_path)
    assert len(fresh) == len(index) and fresh.stats() == index.stats()
    allowed = {f"r{i}" for i in range(0, 400, 3)}
    for restrict in (None, allowed):
        before = index.search_batch(_queries(kit, base), 8, restrict)
        after = fresh.search_batch(_queries(kit, base), 8, restrict)
        assert [[(h.id, h.score, h.raw) for h in hits] for hits in after] == [[(h.id, h.score, h.raw) for h in hits] for hits in before]
    # and it keeps working: more adds, removals, training where it was pending
    more = kit.clustered(800, 16, seed=5)
    fresh.add(kit.records(more, start=1000))
    fresh.remove(["r1", "r1000"])
    assert len(fresh) == len(index) + 800 - 2
    assert fresh.search(kit.query(more[5]), 1)[0].id == "r1005"


def test_training_survives_save_and_load(make, kit, tmp_path):
    base = kit.clustered(300, 16)
    index = make(16, factory="IVF8,Flat", min_train=250, nprobe=8)
    index.add(kit.records(base[:200]))
    index.save(tmp_path)
    assert (tmp_path / "pending.faiss").exists()
    reopened = make(16, factory="IVF8,Flat", min_train=250, nprobe=8)
    reopened.load(tmp_path)
    assert not reopened.trained and reopened.stats()["pending"] == 200
    reopened.add(kit.records(base[200:], start=200))  # crosses the threshold after the reload
    assert reopened.trained
    reopened.save(tmp_path)
    assert not (tmp_path / "pending.faiss").exists()  # the stale buffer file is gone
    again = make(16, factory="IVF8,Flat", min_train=250, nprobe=8)
    again.load(tmp_path)
    assert again.trained and again.stats()["faiss_ntotal"] == 300
    assert again.search(kit.query(base[250]), 1)[0].id == "r250"


def test_saving_twice_overwrites_atomically(make, kit, tmp_path):
    index = make(16, factory="HNSW32")
    index.add(kit.records(kit.clustered(50, 16)))
    index.save(tmp_path)
    index.remove(["r3"])
    index.save(tmp_path)
    fresh = make(16, factory="HNSW32")
    fresh.load(tmp_path)
    assert len(fresh) == 49 and fresh.stats()["tombstones"] == 1


@pytest.fixture
def saved(make, kit, tmp_path):
    index = make(16, factory="HNSW32")
    index.add(kit.records(kit.clustered(60, 16)))
    index.save(tmp_path)
    return tmp_path


def _load_fails(make, directory, match, **options):
    fresh = make(16, **{"factory": "HNSW32", **options})
    fresh.add([])
    with pytest.raises(CorruptError, match=match):
        fresh.load(directory)
    assert len(fresh) == 0  # a failed load leaves the index as it was


def _first_change_fails(make, kit, directory, match):
    """An id saved twice is found when the id map's dicts are built: at the first change
    (a reopen that only searches never builds them), before the change touches anything."""
    fresh = make(16, factory="HNSW32")
    fresh.load(directory)
    before = [h.id for h in fresh.search(kit.query(kit.clustered(60, 16)[7]), 5)]
    with pytest.raises(CorruptError, match=match):
        fresh.add(kit.records(kit.clustered(3, 16, seed=99), start=100))
    assert len(fresh) == 60 and [h.id for h in fresh.search(kit.query(kit.clustered(60, 16)[7]), 5)] == before


def test_a_loaded_id_map_answers_searches_without_building_its_dicts(make, kit, saved):
    index = make(16, factory="HNSW32")
    index.load(saved)
    query = kit.query(kit.clustered(60, 16)[7])
    hits = index.search(query, 5)
    assert index._labels._saved is not None  # searching read the saved arrays in place
    index.remove([hits[0].id])
    assert index._labels._saved is None  # a change built the dicts
    assert [h.id for h in index.search(query, 5)][:4] == [h.id for h in hits[1:]]


def test_an_id_map_with_gaps_maps_labels_by_search(make, kit, tmp_path):
    """After removals the saved labels are not 0..n-1: ids are found by binary search."""
    index = make(16, factory="HNSW32")
    index.add(kit.records(kit.clustered(60, 16)))
    index.remove(["r5", "r17"])  # below the compaction fraction: tombstones, labels with gaps
    index.save(tmp_path)
    fresh = make(16, factory="HNSW32")
    fresh.load(tmp_path)
    assert not fresh._labels._saved._dense
    for q in (3, 7, 31):
        query = kit.query(kit.clustered(60, 16)[q])
        assert [h.id for h in fresh.search(query, 8)] == [h.id for h in index.search(query, 8)]
    assert fresh._labels.to_arrays()["text"].tobytes() == index._labels.to_arrays()["text"].tobytes()


def test_missing_or_garbled_files(make, saved):
    (saved / "state.json").write_text("{not json")
    _load_fails(make, saved, "state.json")
    (saved / "state.json").write_text("[]")
    _load_fails(make, saved, "not a JSON object")


def test_truncated_faiss_file(make, saved):
    data = (saved / "index.faiss").read_bytes()
    (saved / "index.faiss").write_bytes(data[: len(data) // 2])
    _load_fails(make, saved, "cannot read index.faiss")
    (saved / "index.faiss").unlink()
    _load_fails(make, saved, "missing")


def test_mismatched_settings(make, saved):
    _load_fails(make, saved, "not what 'Flat' builds", factory="Flat")  # (in a collection the core's index.json refuses it first)
    _load_fails(make, saved, "metric", metric="l2")
    fresh = make(8, factory="HNSW32")
    with pytest.raises(CorruptError, match="dim"):
        fresh.load(saved)


def test_files_from_another_save(make, kit, saved, tmp_path_factory):
    other = tmp_path_factory.mktemp("other")
    index = make(16, factory="HNSW32")
    index.add(kit.records(kit.clustered(10, 16)))
    index.save(other)
    (saved / "index.faiss").write_bytes((other / "index.faiss").read_bytes())
    _load_fails(make, saved, "does not match the sidecar")


def _rewrite_idmap(directory, **changes):
    with np.load(directory / "idmap.npz", allow_pickle=False) as data:
        arrays = {name: data[name] for name in data.files}
    arrays.update(changes)
    for name in [n for n, v in arrays.items() if v is None]:
        del arrays[name]
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    (directory / "idmap.npz").write_bytes(buf.getvalue())
    return arrays


def test_inconsistent_id_map(make, kit, saved):
    with np.load(saved / "idmap.npz", allow_pickle=False) as data:
        labels, offsets, text = data["labels"], data["offsets"], data["text"]
    duplicate = labels.copy()
    duplicate[1] = duplicate[0]
    _rewrite_idmap(saved, labels=duplicate)
    _load_fails(make, saved, "inconsistent id map")
    _rewrite_idmap(saved, labels=labels + 1000)  # past the label counter
    _load_fails(make, saved, "inconsistent id map")
    same = offsets.copy()
    same[2] = same[1]  # an empty id
    _rewrite_idmap(saved, labels=labels, offsets=same)
    _load_fails(make, saved, "inconsistent id map")
    twice = np.frombuffer(b"r0r0" + text.tobytes()[4:], dtype=np.uint8)  # "r1" renamed "r0": an id twice
    _rewrite_idmap(saved, offsets=offsets, text=twice)
    _first_change_fails(make, kit, saved, "inconsistent id map")
    _rewrite_idmap(saved, text=np.frombuffer(b"\xff\xfe" + text.tobytes()[2:], dtype=np.uint8))
    _load_fails(make, saved, "malformed id map")
    _rewrite_idmap(saved, text=text, labels=labels.astype(np.float64))
    _load_fails(make, saved, "malformed id map")
    _rewrite_idmap(saved, labels=None)
    _load_fails(make, saved, "cannot read idmap.npz")
    (saved / "idmap.npz").write_bytes(b"not a zip")
    _load_fails(make, saved, "cannot read idmap.npz")
    (saved / "idmap.npz").unlink()
    _load_fails(make, saved, "cannot read idmap.npz")


def test_idmap_counts_are_checked_against_the_sidecar(make, saved):
    state = json.loads((saved / "state.json").read_text())
    state["size"] += 1
    (saved / "state.json").write_text(json.dumps(state))
    _load_fails(make, saved, "the sidecar counts")


def test_unicode_ids_roundtrip(make, kit, tmp_path):
    index = make(16, factory="HNSW32")
    names = ["é", "日本語", "a\nb", "\ud800x", "x" * 512, "🙂"]  # accents, CJK, a newline, a lone surrogate, the longest id, astral
    index.add([Record(id=name, text="t", vectors={"default": v}) for name, v in zip(names, kit.clustered(len(names), 16))])
    index.remove(["é"])
    index.save(tmp_path)
    fresh = make(16, factory="HNSW32")
    fresh.load(tmp_path)
    assert sorted(fresh._labels.label_of) == sorted(names[1:]) and fresh.stats() == index.stats()


def test_saves_with_a_json_id_map_still_load(make, kit, saved):
    """Saves written before idmap.npz kept the id map as JSON lists in state.json."""
    index = make(16, factory="HNSW32")
    index.load(saved)
    state = json.loads((saved / "state.json").read_text())
    for key in ("id_map", "size", "tombstone_count"):
        del state[key]
    state |= index._labels.to_json()
    (saved / "state.json").write_text(json.dumps(state))
    (saved / "idmap.npz").unlink()
    old = make(16, factory="HNSW32")
    old.load(saved)
    assert old._labels.label_of == index._labels.label_of and old.stats() == index.stats()
    assert [h.id for h in old.search(kit.query(kit.clustered(60, 16)[7]), 3)] == [h.id for h in index.search(kit.query(kit.clustered(60, 16)[7]), 3)]
    state["labels"][1] = state["labels"][0]
    (saved / "state.json").write_text(json.dumps(state))
    _load_fails(make, saved, "inconsistent id map")
    del state["labels"]
    (saved / "state.json").write_text(json.dumps(state))
    _load_fails(make, saved, "malformed id map")


def test_files_are_faiss_native_npz_and_json(saved):
    assert sorted(p.name for p in saved.iterdir()) == ["idmap.npz", "index.faiss", "state.json"]
    with np.load(saved / "idmap.npz", allow_pickle=False) as data:  # plain arrays: loads with pickle refused
        assert sorted(data.files) == ["labels", "offsets", "text", "tombstones"] and all(data[name].dtype != object for name in data.files)
    assert (saved / "index.faiss").read_bytes()[:4] == b"IHNf"  # faiss' IndexHNSWFlat fourcc, not a pickle
    json.loads((saved / "state.json").read_text())
