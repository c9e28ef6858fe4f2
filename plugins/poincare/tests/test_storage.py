"""HyperAmyStorage: validation before Chroma, batching, links, delete cleanup, persistence."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from memcore import ConfigError, DimensionError, DuplicateIdError, NotFoundError, ValidationError
from memcore_poincare import HyperAmyStorage, Point


def test_upsert_normalises_and_stores_metadata(storage, abc):
    now, anger, _, points = abc
    report = storage.upsert_points(points)
    assert report.ids == ["A", "B", "C"] and report.unknown_links == {}
    got = storage.collection.get(ids=["A"], include=["embeddings", "metadatas"])
    assert np.linalg.norm(got["embeddings"][0]) == pytest.approx(1.0, abs=1e-6)
    assert got["embeddings"][0] == pytest.approx(anger / np.linalg.norm(anger), abs=1e-6)
    meta = got["metadatas"][0]
    assert (meta["v"], meta["T"], json.loads(meta["links"])) == (0.9, 0.5, ["B", "C"])
    assert meta["born"] == pytest.approx(now, abs=1e-5)  # Chroma may round a float64's last bit
    assert "last_updated" in meta and storage.collection.metadata["hnsw:space"] == "cosine"
    [a] = storage.get_points(["A"])
    assert a.links == ["B", "C"] and a.v == 0.9
    with pytest.raises(NotFoundError):
        storage.get_points(["nope"])


@pytest.mark.parametrize(
    "bad,error",
    [
        (Point("x", np.zeros(3), 0.5, 0.5, 0.0), ValidationError),
        (Point("x", np.array([1.0, np.nan, 0.0]), 0.5, 0.5, 0.0), ValidationError),
        (Point("x", np.array([1.0, np.inf, 0.0]), 0.5, 0.5, 0.0), ValidationError),
        (Point("x", np.ones(4), 0.5, 0.5, 0.0), DimensionError),
        (Point("x", np.ones((3, 1)), 0.5, 0.5, 0.0), DimensionError),
        (Point("x", np.ones(3), float("nan"), 0.5, 0.0), ValidationError),
        (Point("x", np.ones(3), 0.5, None, 0.0), ValidationError),
        (Point("x", np.ones(3), 0.5, 0.5, float("inf")), ValidationError),
        (Point("", np.ones(3), 0.5, 0.5, 0.0), ValidationError),
        (Point("x", np.ones(3), 0.5, 0.5, 0.0, links="A"), ValidationError),
        (Point("x", np.ones(3), 0.5, 0.5, 0.0, links=["A", ""]), ValidationError),
        (Point("B", np.ones(3), 0.5, 0.5, 0.0), DuplicateIdError),
    ],
)
def test_bad_points_are_typed_errors_and_change_nothing(storage, abc, bad, error):
    storage.upsert_points(abc[3])
    before = storage.collection.get(include=["embeddings", "metadatas"])
    batch = [Point("B", np.ones(3), 0.1, 0.1, 0.0), bad] if bad.id == "B" else [Point("ok", np.ones(3), 0.1, 0.1, 0.0), bad]
    with pytest.raises(error):
        storage.upsert_points(batch)
    after = storage.collection.get(include=["embeddings", "metadatas"])
    assert after["ids"] == before["ids"] and after["metadatas"] == before["metadatas"]
    assert np.array_equal(after["embeddings"], before["embeddings"])


def test_unknown_links_are_reported(storage, abc):
    storage.upsert_points(abc[3])
    with pytest.raises(ValidationError, match="ghost"):
        storage.upsert_point(Point("D", np.ones(3), 0.5, 0.5, 0.0, links=["A", "ghost"]))
    assert storage.count() == 3
    report = storage.upsert_points(
        [Point("D", np.ones(3), 0.5, 0.5, 0.0, links=["A", "ghost", "E"]), Point("E", np.ones(3), 0.1, 0.1, 0.0)], unknown_links="drop"
    )
    assert report.unknown_links == {"D": {"ghost"}}
    assert storage.get_points(["D"])[0].links == ["A", "E"]
    keep = HyperAmyStorage(client=storage.client, collection_name="particles", unknown_links="keep")
    assert keep.upsert_point(Point("F", np.ones(3), 0.5, 0.5, 0.0, links=["ghost"])).unknown_links == {"F": {"ghost"}}
    assert keep.get_points(["F"])[0].links == ["ghost"]
    with pytest.raises(ConfigError):
        HyperAmyStorage(client=storage.client, unknown_links="ignore")


def test_delete_cleans_links(storage, abc):
    storage.upsert_points(abc[3] + [Point("D", np.ones(3), 0.5, 0.5, 0.0, links=["C", "B"])])
    assert storage.delete(["C", "never"]) == 1
    assert storage.count() == 3
    points = {p.id: p for p in storage.get_points(["A", "B", "D"])}
    assert points["A"].links == ["B"] and points["D"].links == ["B"]
    assert storage.delete(["B"]) == 1
    a, d = storage.get_points(["A", "D"])
    assert a.links == [] and d.links == []
    assert storage.collection.get(ids=["A"])["metadatas"][0].get("link_to") is None  # nothing left to find
    assert storage.delete([]) == 0


def test_delete_can_keep_dangling_links(tmp_path, abc):
    s = HyperAmyStorage(tmp_path / "db", clean_links_on_delete=False)
    s.upsert_points(abc[3])
    s.delete(["B"])
    assert s.get_points(["A"])[0].links == ["B", "C"]
    s.delete(["C"], clean_links=True)
    assert s.get_points(["A"])[0].links == ["B"]


def test_batches_of_max_batch_size(storage):
    storage.batch_size = 7  # force several Chroma calls
    rng = np.random.default_rng(0)
    pts = [Point(f"p{i}", rng.standard_normal(8), float(i % 5), 0.5, 0.0, links=[f"p{(i + 1) % 30}"]) for i in range(30)]
    assert len(storage.upsert_points(pts).ids) == 30
    assert storage.count() == 30 and storage.dim == 8
    assert storage.existing([f"p{i}" for i in range(40)]) == {f"p{i}" for i in range(30)}
    assert storage.delete([f"p{i}" for i in range(0, 30, 2)]) == 15
    assert all(all(int(t[1:]) % 2 == 1 for t in p.links) for p in storage.get_points([f"p{i}" for i in range(1, 30, 2)]))


def test_reupsert_replaces_links(storage, abc):
    storage.upsert_points(abc[3])
    a = abc[3][0]
    storage.upsert_point(Point("A", a.emotion_vector, 0.3, 0.1, a.born))
    assert storage.get_points(["A"])[0].links == []
    assert storage.collection.get(ids=["A"])["metadatas"][0].get("link_to") is None
    assert storage.delete(["B"]) == 1  # nobody links to B any more


def test_persistence_across_processes(tmp_path):
    path = tmp_path / "db"
    write = textwrap.dedent(
        f"""
        import numpy as np
        from memcore_poincare import HyperAmyStorage, Point
        s = HyperAmyStorage({str(path)!r})
        s.upsert_points([Point("A", np.array([0.9, 0.1, 0.0]), 0.9, 0.5, 100.0, links=["B"]),
                         Point("B", np.array([0.9, 0.1, 0.0]), 0.2, 0.5, 100.0),
                         Point("C", np.array([0.0, 0.1, 0.9]), 0.5, 0.5, 100.0)])
        """
    )
    read = textwrap.dedent(
        f"""
        import json
        import numpy as np
        from memcore_poincare import HyperAmyRetrieval, HyperAmyStorage, Point
        s = HyperAmyStorage({str(path)!r})
        hits = HyperAmyRetrieval(s).search(Point("Q", np.array([1.0, 0.1, 0.0]), 0.9, 0.5, 100.0), top_k=3, t_now=100.0)
        print(json.dumps([s.count(), s.dim, [(h.id, h.match_type) for h in hits], s.get_points(["A"])[0].links]))
        """
    )
    for script in (write,):
        subprocess.run([sys.executable, "-c", script], check=True, timeout=120)
    out = subprocess.run([sys.executable, "-c", read], check=True, timeout=120, capture_output=True, text=True).stdout
    count, dim, hits, links = json.loads(out.strip().splitlines()[-1])
    assert (count, dim, links) == (3, 3, ["B"])
    assert [h[0] for h in hits] == ["A", "B", "C"]
