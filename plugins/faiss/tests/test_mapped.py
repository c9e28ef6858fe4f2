"""A saved faiss index is read back memory-mapped (issue 25: a reopen reads almost nothing):
the same answers as before saving, the first write reads it into memory and goes on from the
same state, and a later save replacing the file leaves the mapped index untouched."""

from __future__ import annotations

import pytest

from memcore_faiss import mapped
from memcore_faiss.mapped import mapped_spans

VARIANTS = {
    "flat": {"factory": "Flat", "metric": "l2"},
    "hnsw": {"factory": "HNSW32", "compact_fraction": 0.9},
    "hnsw-sq8": {"factory": "HNSW16_SQ8", "min_train": 200},
    "ivf": {"factory": "IVF8,Flat", "min_train": 200, "nprobe": 2},
    "pq": {"factory": "PQ4x4", "min_train": 200},
}


def _answers(index, kit, base, allowed=None):
    queries = [kit.query(q) for q in base[:6]] + [kit.query(q) for q in kit.clustered(4, 16, seed=7)]
    return [[(h.id, h.score, h.raw) for h in hits] for hits in index.search_batch(queries, 8, allowed)]


def _built(make, kit, options):
    base = kit.clustered(400, 16)
    index = make(16, **options)
    index.add(kit.records(base[:300]))
    index.remove([f"r{i}" for i in range(0, 300, 9)])
    index.add(kit.records(base[300:], start=300))
    return index, base


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_a_loaded_index_is_mapped_and_answers_as_before(make, kit, tmp_path, name):
    index, base = _built(make, kit, VARIANTS[name])
    index.save(tmp_path)
    fresh = make(16, **VARIANTS[name])
    fresh.load(tmp_path)
    assert fresh._file is not None  # mapped, not read
    assert mapped_spans(fresh._faiss, fresh._main.index)  # its codes (and graph) are views of the file
    allowed = {f"r{i}" for i in range(0, 400, 3)}
    for restrict in (None, allowed):
        assert _answers(fresh, kit, base, restrict) == _answers(index, kit, base, restrict)
    assert fresh.stats() == index.stats()


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_the_first_write_reads_it_into_memory_and_goes_on(make, kit, tmp_path, monkeypatch, name):
    options = {**VARIANTS[name], "omp_threads": 1}  # HNSW adds are deterministic in one thread
    index, base = _built(make, kit, options)
    index.save(tmp_path)
    fresh = make(16, **options)
    fresh.load(tmp_path)
    with monkeypatch.context() as patch:  # the same save read into memory, as before mapping
        patch.setattr(mapped, "_FD_DIR", tmp_path / "no-such-dir")
        reference = make(16, **options)
        reference.load(tmp_path)
    assert fresh._file is not None and reference._file is None
    more = kit.clustered(60, 16, seed=5)
    for target in (reference, fresh):
        target.remove(["r1", "r2", "r300"])
        target.add(kit.records(more, start=1000))
    assert fresh._file is None and not mapped_spans(fresh._faiss, fresh._main.index)
    assert _answers(fresh, kit, base) == _answers(reference, kit, base)
    if name != "pq":  # 4-bit codes of 4 dims: too coarse to find a vector as its own neighbour
        assert fresh.search(kit.query(more[5]), 1)[0].id == "r1005"


def test_a_compaction_of_a_mapped_graph(make, kit, tmp_path):
    options = {"factory": "HNSW32", "compact_fraction": 0.9, "omp_threads": 1}
    index, base = _built(make, kit, options)
    index.save(tmp_path)
    fresh = make(16, **options)
    fresh.load(tmp_path)
    for target in (index, fresh):
        target.remove([f"r{i}" for i in range(1, 200, 2)])  # tombstones only: the mapped graph stays
    assert fresh._file is not None
    for target in (index, fresh):
        target.compact()  # a new graph of the live vectors
    assert fresh._file is None and fresh.stats()["tombstones"] == 0
    assert _answers(fresh, kit, base) == _answers(index, kit, base)


def test_a_save_replacing_the_file_leaves_the_mapped_index_as_loaded(make, kit, tmp_path, monkeypatch):
    options = {**VARIANTS["hnsw"], "omp_threads": 1}
    index, base = _built(make, kit, options)
    index.save(tmp_path)
    before = _answers(index, kit, base)
    fresh = make(16, **options)
    fresh.load(tmp_path)
    with monkeypatch.context() as patch:
        patch.setattr(mapped, "_FD_DIR", tmp_path / "no-such-dir")
        reference = make(16, **options)
        reference.load(tmp_path)
    other = make(16, **options)
    other.add(kit.records(kit.clustered(500, 16, seed=11), prefix="x"))
    other.save(tmp_path)  # a writer's later save: new files renamed over the mapped ones
    assert _answers(fresh, kit, base) == before
    for target in (reference, fresh):  # read into memory: the file it loaded, not the one that replaced it
        target.add(kit.records(kit.clustered(3, 16, seed=12), start=2000))
    assert len(fresh) == len(index) + 3
    answers = _answers(fresh, kit, base)
    assert answers == _answers(reference, kit, base) and not any(hit[0].startswith("x") for hits in answers for hit in hits)


def test_without_proc_fd_the_file_is_read_as_before(make, kit, tmp_path, monkeypatch):
    options = VARIANTS["hnsw"]
    index, base = _built(make, kit, options)
    index.save(tmp_path)
    monkeypatch.setattr(mapped, "_FD_DIR", tmp_path / "no-such-dir")
    fresh = make(16, **options)
    fresh.load(tmp_path)
    assert fresh._file is None and not mapped_spans(fresh._faiss, fresh._main.index)
    assert _answers(fresh, kit, base) == _answers(index, kit, base)


def test_populate_maps_the_spans_in(make, kit, tmp_path):
    index, _ = _built(make, kit, VARIANTS["hnsw"])
    index.save(tmp_path)
    fresh = make(16, **VARIANTS["hnsw"])
    fresh.load(tmp_path)
    spans = mapped_spans(fresh._faiss, fresh._main.index)
    assert sorted(nbytes for _, nbytes in spans) == sorted(
        [index._main.ntotal * 16 * 4, fresh._faiss.downcast_index(fresh._main.index).hnsw.neighbors.size() * 4]
    )
    assert all(mapped.populate(span) for span in spans)
    assert not mapped.populate((spans[0][0], 0))
