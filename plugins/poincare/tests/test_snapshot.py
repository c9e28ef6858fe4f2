"""The mirror snapshot: a standalone storage reopens from it, incremental saves (base + deltas,
compaction), and stale, damaged or half-written snapshots are never used."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from memcore_poincare import HyperAmyRetrieval, HyperAmyStorage, ParticleProjector, Point
from memcore_poincare.mirror import ParticleMirror
from memcore_poincare.snapshot import MANIFEST, MirrorSnapshot
from memcore_poincare.storage import SNAPSHOT_DIR

NOW = 1_000_000.0


def points(n, dim=6, seed=0, start=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, dim))
    return [
        Point(
            f"p{start + i}",
            x[i],
            float(rng.uniform(0.05, 2.0)),
            0.5,
            NOW - float(rng.uniform(0, 100)),
            links=[f"p{start + (i * 7 + 1) % n}"] if i % 3 == 0 else [],
        )
        for i in range(n)
    ]


def _meta(meta: dict) -> dict:
    return {k: round(v, 4) if isinstance(v, float) else v for k, v in meta.items()}  # Chroma returns floats a few ulps off


class State(dict):
    """Every row of a mirror, by id (order-free); equal when the ids and metadata match and
    the directions agree to float32 round-off."""

    def __eq__(self, other):
        return (
            isinstance(other, dict)
            and self.keys() == other.keys()
            and all(_meta(self[k][1]) == _meta(other[k][1]) and np.allclose(self[k][0], other[k][0], atol=1e-5) for k in self)
        )


def state(mirror: ParticleMirror) -> State:
    return State({rid: (mirror.directions[mirror.rows[rid]].copy(), mirror.metadatas[mirror.rows[rid]]) for rid in mirror.ids})


def open_storage(tmp_path, **kw):
    return HyperAmyStorage(tmp_path / "db", collection_name="parts", **kw)


def _rebuilds(monkeypatch) -> list:
    calls = []
    original = ParticleMirror.from_collection.__func__

    def counting(cls, *a, **k):
        calls.append(1)
        return original(cls, *a, **k)

    monkeypatch.setattr(ParticleMirror, "from_collection", classmethod(counting))
    return calls


def truth(tmp_path) -> dict:
    """The mirror rebuilt from Chroma (the truth), through a storage that keeps no snapshot."""
    return state(ParticleMirror.from_collection(open_storage(tmp_path, snapshot=False).collection, 6, 5000))


def test_a_reopened_storage_reads_its_snapshot_not_chroma(tmp_path, monkeypatch):
    first = open_storage(tmp_path)
    first.upsert_points(points(300), unknown_links="keep")
    assert first.save_snapshot() == "base"
    first.close()  # nothing changed since: no new file
    assert first.save_snapshot() == "unchanged"
    expected = truth(tmp_path)
    monkeypatch.setattr(ParticleMirror, "from_collection", classmethod(lambda *a, **k: pytest.fail("the snapshot should have been used")))
    again = open_storage(tmp_path)
    assert state(again.particle_mirror()) == expected
    off = open_storage(tmp_path, mirror=False)
    for q in points(8, seed=9):
        kw = {"top_k": 5, "cone_width": 300, "max_neighbors": 2, "t_now": NOW}
        a = HyperAmyRetrieval(again, ParticleProjector(1.0, 2.0)).search(q, **kw)
        b = HyperAmyRetrieval(off, ParticleProjector(1.0, 2.0)).search(q, **kw)
        assert [(r.id, round(r.score, 5)) for r in a] == [(r.id, round(r.score, 5)) for r in b]


def test_saves_after_the_first_write_only_deltas_then_compact(tmp_path, monkeypatch):
    s = open_storage(tmp_path)
    s.upsert_points(points(200), unknown_links="keep")
    assert s.save_snapshot() == "base"
    folder = tmp_path / "db" / SNAPSHOT_DIR / "parts"
    base_files = sorted(p.name for p in folder.glob("mirror-base-*"))
    s.upsert_points([Point("p3", np.ones(6), 1.5, 0.5, NOW, links=["p4"])])
    s.delete(["p10", "p4"])  # p4: linked from p3 (and others): their links are cleaned, journaled too
    assert s.save_snapshot() == "delta"
    s.upsert_points(points(5, seed=3, start=1000), unknown_links="keep")
    assert s.save_snapshot() == "delta"
    assert sorted(p.name for p in folder.glob("mirror-base-*")) == base_files  # the base is not rewritten
    assert len(json.loads((folder / MANIFEST).read_text())["deltas"]) == 2
    expected = truth(tmp_path)
    assert state(s.particle_mirror()) == expected
    with monkeypatch.context() as m:
        m.setattr(ParticleMirror, "from_collection", classmethod(lambda *a, **k: pytest.fail("the snapshot should have been used")))
        reopened = open_storage(tmp_path)
        assert state(reopened.particle_mirror()) == expected
        # a delta on top of a loaded snapshot
        reopened.delete(["p20"])
        assert reopened.save_snapshot() == "delta"
    # past compact_ratio (0.5 of the rows by default): a new base, the old files go
    reopened.upsert_points(points(150, seed=4, start=2000), unknown_links="keep")
    assert reopened.save_snapshot() == "base"
    names = sorted(p.name for p in folder.iterdir())
    assert len([n for n in names if n.startswith("mirror-base-")]) == 2 and not [n for n in names if "delta" in n]
    assert sorted(p.name for p in folder.glob("mirror-base-*")) != base_files
    expected = truth(tmp_path)
    monkeypatch.setattr(ParticleMirror, "from_collection", classmethod(lambda *a, **k: pytest.fail("the snapshot should have been used")))
    assert state(open_storage(tmp_path).particle_mirror()) == expected


def test_a_write_after_the_save_makes_the_snapshot_stale(tmp_path, monkeypatch):
    first = open_storage(tmp_path)
    first.upsert_points(points(100), unknown_links="keep")
    first.close()
    first.upsert_points([Point("late", np.ones(6), 1.0, 0.5, NOW)])  # then "crash": no save
    calls = _rebuilds(monkeypatch)
    again = open_storage(tmp_path)
    assert "late" in again.particle_mirror().rows and len(calls) == 1
    assert state(again.particle_mirror()) == truth(tmp_path)


@pytest.mark.parametrize("change", ["upsert", "update", "delete"])
def test_another_writer_makes_the_snapshot_stale(tmp_path, monkeypatch, change):
    first = open_storage(tmp_path)
    first.upsert_points(points(100), unknown_links="keep")
    first.close()
    other = open_storage(tmp_path, mirror=False)  # writes without a mirror or snapshot
    if change == "upsert":
        other.upsert_points([Point("p5", -np.ones(6), 0.3, 0.5, NOW)])  # same count, new vector
    elif change == "update":
        other.collection.update(ids=["p7"], metadatas=[{"v": 1.9}])  # metadata only, straight through Chroma
    else:
        other.delete(["p8"])
    calls = _rebuilds(monkeypatch)
    again = open_storage(tmp_path)
    mirror, rebuilt = again.particle_mirror(), len(calls)
    assert state(mirror) == truth(tmp_path) and rebuilt == 1


def _folder(tmp_path):
    return tmp_path / "db" / SNAPSHOT_DIR / "parts"


@pytest.mark.parametrize(
    "damage",
    ["manifest garbage", "manifest missing", "base npy truncated", "base json flipped", "delta missing", "dimension", "wrong rows"],
)
def test_a_damaged_snapshot_is_rebuilt_from_chroma(tmp_path, monkeypatch, damage):
    s = open_storage(tmp_path)
    s.upsert_points(points(120), unknown_links="keep")
    s.save_snapshot()
    s.delete(["p1"])
    s.save_snapshot()
    folder = _folder(tmp_path)
    manifest = json.loads((folder / MANIFEST).read_text())
    base = folder / manifest["base"]["name"]
    if damage == "manifest garbage":
        (folder / MANIFEST).write_text("{not json")
    elif damage == "manifest missing":
        (folder / MANIFEST).unlink()
    elif damage == "base npy truncated":
        data = base.with_suffix(".npy").read_bytes()
        base.with_suffix(".npy").write_bytes(data[: len(data) // 2])
    elif damage == "base json flipped":  # same size, other bytes: the CRC catches it
        data = bytearray(base.with_suffix(".json").read_bytes())
        data[20] ^= 0x01
        base.with_suffix(".json").write_bytes(bytes(data))
    elif damage == "delta missing":
        (folder / (manifest["deltas"][0]["name"] + ".json")).unlink()
    elif damage == "dimension":
        (folder / MANIFEST).write_text(json.dumps({**manifest, "dim": 7}))
    else:  # a manifest that promises another row count
        (folder / MANIFEST).write_text(json.dumps({**manifest, "count": 5}))
    calls = _rebuilds(monkeypatch)
    again = open_storage(tmp_path)
    mirror, rebuilt = again.particle_mirror(), len(calls)
    assert state(mirror) == truth(tmp_path) and rebuilt == 1
    assert again.save_snapshot() == "base"  # the next save starts over


def test_half_written_files_are_ignored_and_swept(tmp_path):
    m = ParticleMirror(2)
    meta = {"v": 1.0, "T": 1.0, "born": 0.0, "links": "[]"}
    m.upsert(["a", "b"], np.eye(2, dtype=np.float32), [meta, meta])
    snap = MirrorSnapshot(tmp_path)
    assert snap.save(m, {"collection": "g1"}) == "base"
    m.delete(["a"])
    original = MirrorSnapshot._write_manifest

    def crash(self, manifest):
        raise OSError("disk gone")

    MirrorSnapshot._write_manifest = crash  # the delta files are written, the manifest is not
    try:
        with pytest.raises(OSError):
            snap.save(m, {"collection": "g1"})
    finally:
        MirrorSnapshot._write_manifest = original
    assert list(tmp_path.glob("mirror-delta-*"))  # left behind...
    (tmp_path / ".mirror-base-0123.npy.xyz.tmp").write_bytes(b"partial")  # ...as is a temp file of a killed write
    loaded = MirrorSnapshot(tmp_path).load(2, {"collection": "g1"})
    assert sorted(loaded.ids) == ["a", "b"]  # ...and ignored: the manifest names the state before the crash
    assert MirrorSnapshot(tmp_path).load(2, {"collection": "g2"}) is None  # another stamp: not used
    loaded.delete(["a"])
    assert snap.save(loaded, {"collection": "g1"}) == "delta"  # the same segment name, replaced
    assert sorted(MirrorSnapshot(tmp_path).load(2, {"collection": "g1"}).ids) == ["b"]
    loaded.upsert(["c", "d"], np.eye(2, dtype=np.float32), [meta, meta])  # past the ratio: compaction sweeps
    assert snap.save(loaded, {"collection": "g1"}) == "base"
    assert not list(tmp_path.glob(".*.tmp")) and not list(tmp_path.glob("mirror-delta-*"))


FILLED = textwrap.dedent(
    """
    import sys
    import numpy as np
    from memcore_poincare import HyperAmyStorage, Point
    rng = np.random.default_rng(0)
    with HyperAmyStorage(sys.argv[1], collection_name="parts") as s:
        s.upsert_points([Point(f"p{i}", rng.standard_normal(6), 1.0, 0.5, 1e6, links=[f"p{(i + 1) % 80}"]) for i in range(80)])
    """
)

KILLED = textwrap.dedent(
    """
    import os, sys
    import numpy as np
    from memcore_poincare import HyperAmyStorage, Point
    from memcore_poincare.snapshot import MirrorSnapshot
    s = HyperAmyStorage(sys.argv[1], collection_name="parts")
    assert s.particle_mirror() is not None
    s.upsert_points([Point("k1", np.ones(6), 1.0, 0.5, 1e6), Point("k2", -np.ones(6), 1.0, 0.5, 1e6)])
    s.delete(["p2"])
    write = MirrorSnapshot._write_segment
    def die_after_segment(self, *a, **k):
        entry = write(self, *a, **k)
        os._exit(9)  # killed between the delta segment and the manifest
    MirrorSnapshot._write_segment = die_after_segment
    s.save_snapshot()
    """
)


def test_a_process_killed_mid_save_leaves_a_usable_store(tmp_path, monkeypatch):
    # each step in its own process, as after real restarts (an embedded Chroma folder is
    # not shared by live processes)
    done = subprocess.run([sys.executable, "-c", FILLED, str(tmp_path / "db")], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert (_folder(tmp_path) / MANIFEST).is_file()
    done = subprocess.run([sys.executable, "-c", KILLED, str(tmp_path / "db")], capture_output=True, text=True, timeout=300)
    assert done.returncode == 9, done.stderr
    assert list(_folder(tmp_path).glob("mirror-delta-*"))  # the orphan segment
    calls = _rebuilds(monkeypatch)
    again = open_storage(tmp_path)
    mirror = again.particle_mirror()
    assert len(calls) == 1  # the manifest's Chroma position is older than Chroma's: rebuilt
    assert {"k1", "k2"} <= set(mirror.rows) and "p2" not in mirror.rows
    assert state(mirror) == truth(tmp_path)
    assert again.save_snapshot() == "base" and not list(_folder(tmp_path).glob("mirror-delta-*"))


def test_the_snapshot_is_dropped_when_the_mirror_lost_step(tmp_path):
    s = open_storage(tmp_path)
    s.upsert_points(points(50), unknown_links="keep")
    s.particle_mirror()
    open_storage(tmp_path, mirror=False).delete(["p0"])  # another writer while this one is open
    assert s.save_snapshot() is None and not (_folder(tmp_path) / MANIFEST).exists()


def test_no_snapshot_for_a_server_or_a_given_client_or_when_off(tmp_path):
    s = open_storage(tmp_path, snapshot=False)
    s.upsert_points(points(10), unknown_links="keep")
    assert s.save_snapshot() is None and not (tmp_path / "db" / SNAPSHOT_DIR).exists()
    given = HyperAmyStorage(None, client=s.client, collection_name="parts", mirror=True)
    given.particle_mirror()
    assert given.save_snapshot() is None
