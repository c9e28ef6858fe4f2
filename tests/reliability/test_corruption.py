"""Issue 13: corruption cases for each index file kind (and the store, in test_typed_errors).

Every file of every installed index kind is damaged three ways (bytes flipped, truncated,
deleted); the next open still opens, the damaged index is rebuilt or recovered, and every
index returns what it returned before the damage.
"""

from __future__ import annotations

import shutil


import memcore
from memcore._plugins._host import get_registry

from .conftest import DIM, vec

KINDS = {
    "exact": {"kind": "exact", "space": "v"},
    "flat": {"kind": "faiss", "space": "v", "factory": "Flat"},
    "hnsw": {"kind": "faiss", "space": "v", "factory": "HNSW16", "ef_search": 128},
    "ivf": {"kind": "faiss", "space": "v", "factory": "IVF4,Flat", "min_train": 8, "nprobe": 4},
    "lsh": {"kind": "lsh", "space": "v", "bits": 6, "tables": 4, "fallback_exact": True},
    "bm25": {"kind": "bm25"},
    "fifo": {"kind": "fifo"},
}


def _settings():
    installed = set(get_registry().names("indexes"))
    return {
        "spaces": {"v": {"dim": DIM}},
        "indexes": {n: d for n, d in KINDS.items() if d["kind"] in installed},
        "pipeline": [{"kind": "recall", "index": "exact"}, {"kind": "limit"}],
    }


def _results(memory):
    c = memory.collection
    out = {}
    for name in sorted(i["name"] for i in c.list_indexes()):
        q = (
            {"vectors": {"v": vec(3)}}
            if name not in ("bm25", "fifo")
            else ("apple 3" if name == "bm25" else {"text": "x", "extras": {"fifo": {"mode": "newest"}}})
        )
        try:
            out[name] = [h.id for h in c.retrieve(q, index=name, k=5, with_records=False)]
        except memcore.ValidationError:
            out[name] = sorted(c.ids(index=name))
        out[name + ".size"] = len(c.index(name))
    return out


DAMAGES = {
    "flip": lambda p: p.write_bytes(bytes(b ^ 0x5A for b in p.read_bytes()[:64]) + p.read_bytes()[64:]),
    "truncate": lambda p: p.write_bytes(p.read_bytes()[: max(1, p.stat().st_size // 3)]),
    "delete": lambda p: p.unlink(),
}


def test_every_index_file_damaged_every_way_still_opens_with_the_same_results(tmp_path):
    base = tmp_path / "base"
    with memcore.open(_settings(), path=base) as memory:
        memory.collection.insert([{"id": f"r{i}", "text": f"apple {i} pear", "vectors": {"v": vec(i)}} for i in range(40)])
        memory.collection.delete("r7")
        expected = _results(memory)
    files = sorted(p.relative_to(base) for p in (base / "indexes").rglob("*") if p.is_file())
    assert len(files) >= 2 * len(expected) // 2
    cases = 0
    for rel in files:
        for name, damage in DAMAGES.items():
            work = tmp_path / "work"
            shutil.rmtree(work, ignore_errors=True)
            shutil.copytree(base, work)
            damage(work / rel)
            with memcore.open(_settings(), path=work) as memory:
                assert {i["name"]: i["status"] for i in memory.collection.list_indexes()} == {n: "ok" for n in _settings()["indexes"]}, (rel, name)
                assert _results(memory) == expected, (rel, name)
            cases += 1
    assert cases == 3 * len(files)
