"""The chroma index beyond the contract: validation, push-down, batching, generations,
memcore collections (log catch-up after a crash) and two processes on one server."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import memcore
from memcore import CorruptError, DimensionError, Query, Record, ValidationError
from memcore.plugin import IndexContext, SpaceInfo
from memcore_chroma import ChromaIndexConfig
from memcore_chroma.index import ChromaIndex


def ctx(dim=8, name="vec"):
    return IndexContext(name=name, spaces={"default": SpaceInfo("default", dim, "test")})


def recs(n, dim=8, seed=0, start=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, dim)).astype(np.float32)
    return [Record(id=f"r{start + i}", text=f"t{i}", vectors={"default": x[i]}) for i in range(n)]


def query(v):
    return Query(vectors={"default": np.asarray(v, dtype=np.float32)})


@pytest.mark.parametrize(
    "vector,error",
    [
        (np.array([np.nan] + [1.0] * 7, dtype=np.float32), ValidationError),
        (np.array([np.inf] + [1.0] * 7, dtype=np.float32), ValidationError),
        (np.zeros(8, dtype=np.float32), ValidationError),
        (np.ones(9, dtype=np.float32), DimensionError),
    ],
)
def test_bad_vectors_are_refused_before_chroma(vector, error):
    index = ChromaIndex(ChromaIndexConfig(), ctx())
    good = recs(3)
    index.add(good)
    with pytest.raises(error):
        index.add(recs(2, start=10) + [Record(id="bad", text="x", vectors={"default": vector})])
    assert len(index) == 3
    with pytest.raises(error):
        index.search(query(vector), 3)
    with pytest.raises(DimensionError):
        index.add([Record(id="novec", text="x")])
    with pytest.raises(ValidationError):
        index.search(query(good[0].vectors["default"]), 0)


def test_a_batch_is_checked_at_once_and_names_its_first_bad_record():
    index = ChromaIndex(ChromaIndexConfig(), ctx())
    batch = recs(6)
    batch[4] = Record(id="r4", text="x", vectors={"default": np.zeros(8, dtype=np.float32)})
    batch[2] = Record(id="r2", text="x", vectors={"default": np.full(8, np.nan, dtype=np.float32)})
    with pytest.raises(ValidationError, match="'r2'"):
        index.add(batch)
    assert len(index) == 0
    # a repeated id: the last vector wins (and is the one normalised)
    v = np.zeros(8, dtype=np.float32)
    v[3] = 5.0
    index.add([recs(1)[0], Record(id="r0", text="x", vectors={"default": v}), *recs(2, start=1)])
    assert len(index) == 3 and index.search(query(v), 1)[0].id == "r0"
    assert index.search(query(v), 1)[0].score == pytest.approx(1.0, abs=1e-6)


def test_float32_overflow_is_refused_for_l2_and_ip():
    for metric in ("l2", "ip"):
        index = ChromaIndex(ChromaIndexConfig(metric=metric), ctx())
        with pytest.raises(ValidationError):
            index.add([Record(id="big", text="x", vectors={"default": np.full(8, 1e30, dtype=np.float32)})])
    cosine = ChromaIndex(ChromaIndexConfig(), ctx())
    cosine.add([Record(id="big", text="x", vectors={"default": np.full(8, 1e30, dtype=np.float32)})])
    assert cosine.search(query(np.ones(8)), 1)[0].score == pytest.approx(1.0, abs=1e-5)


def test_zero_vectors_are_fine_for_l2():
    index = ChromaIndex(ChromaIndexConfig(metric="l2"), ctx())
    index.add([Record(id="z", text="z", vectors={"default": np.zeros(8, dtype=np.float32)})] + recs(3))
    assert index.search(query(np.zeros(8)), 1)[0].id == "z"


def test_allowed_is_pushed_down_as_ids(monkeypatch):
    index = ChromaIndex(ChromaIndexConfig(), ctx())
    records = recs(50)
    index.add(records)
    calls = []
    collection = index.home.collection
    original = collection.query

    def spy(**kwargs):
        calls.append(kwargs)
        return original(**kwargs)

    monkeypatch.setattr(collection, "query", spy)
    allowed = {"r3", "r7", "r11"}  # members only, as a collection passes them: one Chroma call
    hits = index.search(query(records[7].vectors["default"]), 10, allowed)
    assert [h.id for h in hits][0] == "r7" and {h.id for h in hits} == {"r3", "r7", "r11"}
    assert len(calls) == 1 and sorted(calls[0]["ids"]) == ["r11", "r3", "r7"] and calls[0]["n_results"] == 3
    batch = index.search_batch([query(records[3].vectors["default"]), query(records[11].vectors["default"])], 2, allowed)
    assert [b[0].id for b in batch] == ["r3", "r11"] and len(calls) == 2  # one Chroma call for the batch
    # an id Chroma does not hold: it refuses the query, the held ids are looked up, the query repeated
    hits = index.search(query(records[7].vectors["default"]), 10, allowed | {"missing"})
    assert {h.id for h in hits} == {"r3", "r7", "r11"} and len(calls) == 4
    assert sorted(calls[-1]["ids"]) == ["r11", "r3", "r7"]


def test_adds_are_batched_by_the_max_batch_size(monkeypatch):
    index = ChromaIndex(ChromaIndexConfig(), ctx())
    index.home._batch = 7
    sizes = []
    collection = index.home.collection
    original = collection.upsert

    def spy(**kwargs):
        sizes.append(len(kwargs["ids"]))
        return original(**kwargs)

    monkeypatch.setattr(collection, "upsert", spy)
    index.add(recs(30))
    assert sizes == [7, 7, 7, 7, 2] and len(index) == 30


def test_a_new_save_generation_replaces_the_old_one(tmp_path):
    directory = tmp_path / "idx"
    directory.mkdir()
    first = ChromaIndex(ChromaIndexConfig(), ctx())
    first.add(recs(10))
    first.save(directory)
    old = json.loads((directory / "state.json").read_text())["collection"]
    rebuilt = ChromaIndex(ChromaIndexConfig(), ctx())  # what a rebuild does: a fresh index, saved over
    rebuilt.add(recs(4, seed=1))
    rebuilt.save(directory)
    names = [c.name for c in rebuilt.home.client.list_collections()]
    new = json.loads((directory / "state.json").read_text())["collection"]
    assert new != old and new in names and old not in names
    again = ChromaIndex(ChromaIndexConfig(), ctx())
    again.load(directory)
    assert len(again) == 4


def test_load_errors_are_corrupt_errors(tmp_path):
    index = ChromaIndex(ChromaIndexConfig(), ctx())
    with pytest.raises(CorruptError):
        index.load(tmp_path)  # no state.json
    index.add(recs(3))
    directory = tmp_path / "idx"
    directory.mkdir()
    index.save(directory)
    with pytest.raises(CorruptError):
        ChromaIndex(ChromaIndexConfig(metric="l2"), ctx()).load(directory)
    with pytest.raises(CorruptError):
        ChromaIndex(ChromaIndexConfig(), ctx(dim=4)).load(directory)
    state = json.loads((directory / "state.json").read_text())
    (directory / "state.json").write_text(json.dumps({**state, "collection": "memcore-vec-000000000000"}))
    with pytest.raises(CorruptError):
        ChromaIndex(ChromaIndexConfig(), ctx()).load(directory)


def settings(**index):
    return {
        "spaces": {"default": {"embedder": {"kind": "hashing", "dim": 64}}},
        "indexes": {"vec": {"kind": "chroma", **index}},
    }


TEXTS = [f"{w} memory number {i}" for i, w in enumerate("alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima".split())]


def test_collection_reopen_and_catch_up_after_a_crash(tmp_path):
    memory = memcore.open(settings(), path=tmp_path)
    memory.collection.insert([{"text": t} for t in TEXTS[:8]])
    assert memory.query(TEXTS[3], k=1)[0].record.text == TEXTS[3]
    memory.close()
    assert (tmp_path / "indexes" / "vec" / "chroma").is_dir()
    # a process that writes after the last save and dies without closing
    script = textwrap.dedent(
        f"""
        import os, memcore
        m = memcore.open({settings()!r}, path={str(tmp_path)!r})
        ids = m.collection.insert([{{"text": t}} for t in {TEXTS[8:]!r}])
        m.collection.delete([m.query({TEXTS[0]!r}, k=1)[0].id])
        os._exit(0)
        """
    )
    subprocess.run([sys.executable, "-c", script], check=True, timeout=120)
    again = memcore.open(settings(), path=tmp_path)
    assert again.collection.count() == 11
    assert len(again.collection.index("vec")) == 11
    for text in TEXTS[1:]:
        assert again.query(text, k=1)[0].record.text == text
    assert all(h.record.text != TEXTS[0] for h in again.query(TEXTS[0], k=11))
    again.close()


def test_two_processes_on_one_server_see_each_others_vectors(chroma_server, tmp_path):
    host, port = chroma_server
    config = ChromaIndexConfig(connection={"mode": "http", "host": host, "port": port})
    index = ChromaIndex(config, ctx())
    records = recs(20)
    index.add(records)
    directory = tmp_path / "idx"
    directory.mkdir()
    index.save(directory)
    assert not (directory / "chroma").exists()  # the vectors are on the server
    probe = records[5].vectors["default"].tolist()
    script = textwrap.dedent(
        f"""
        import json, numpy as np
        from memcore import IndexContext, Query, Record, SpaceInfo
        from memcore_chroma import ChromaIndexConfig
        from memcore_chroma.index import ChromaIndex
        index = ChromaIndex(ChromaIndexConfig(connection={{"mode": "http", "host": {host!r}, "port": {port}}}),
                            IndexContext(name="vec", spaces={{"default": SpaceInfo("default", 8, "test")}}))
        index.load({str(directory)!r})
        found = index.search(Query(vectors={{"default": np.array({probe!r}, dtype=np.float32)}}), 1)[0].id
        index.add([Record(id="from-b", text="b", vectors={{"default": np.full(8, 0.5, dtype=np.float32)}})])
        print(json.dumps([len(index), found]))
        """
    )
    out = subprocess.run([sys.executable, "-c", script], check=True, timeout=120, capture_output=True, text=True).stdout
    size, found = json.loads(out.strip().splitlines()[-1])
    assert (size, found) == (21, "r5")
    assert len(index) == 21
    assert index.search(query(np.full(8, 0.5)), 1)[0].id == "from-b"
    index.close()
