"""The fast paths of the query and insert paths give what the general paths give:
``top_k`` short-list sorting, flat metadata without a JSON round trip, parsed rows in the
record cache, single-query exact search."""

from __future__ import annotations

import random
import numpy as np
import pytest

from memcore import Collection, Record, ValidationError
from memcore.indexes._exact import top_k


class SubDict(dict):
    """Not exactly a dict: Record.create takes its general path (JSON round trip)."""


def reference(scores: np.ndarray, ids: list[str], k: int) -> list[tuple[str, float]]:
    return sorted(zip(ids, scores.tolist()), key=lambda p: (-p[1], p[0]))[:k]


@pytest.mark.parametrize("n", [1, 5, 63, 64, 65, 200, 1000])
def test_top_k_breaks_ties_by_id_on_every_path(n):
    rng = np.random.default_rng(n)
    ids = [f"id{rng.integers(0, 10**6):07d}-{i}" for i in range(n)]
    for levels in (3, 50, 10**6):  # many ties, some, none
        scores = (rng.integers(0, levels, n) / levels).astype(np.float32)
        for k in (1, 3, 10, 64, 70, n, n + 5):
            assert top_k(scores, ids, k) == reference(scores, ids, k)


METADATA = [
    {},
    {"b": 1, "a": "x", "c": None, "d": True, "e": -0.0, "f": 1.5e300, "g": 2**63 - 1, "h": -(2**63)},
    {"ünï": "çödé", "emoji": "🙂"},
    {"nested": {"z": [1, 2, {"y": None}]}, "flat": 1},
    {"list": [1, "a"]},
]


@pytest.mark.parametrize("meta", METADATA)
def test_flat_metadata_fast_path_equals_the_json_round_trip(meta):
    fast = Record.create("t", id="a", metadata=meta).metadata
    slow = Record.create("t", id="a", metadata=SubDict(meta)).metadata
    assert fast == slow and list(fast) == list(slow) == sorted(meta)
    assert fast is not meta


@pytest.mark.parametrize(
    "meta",
    [{"a": float("nan")}, {"a": float("inf")}, {"a": 2**63}, {"a": "x\x00"}, {"a\x00": 1}, {"": 1}, {"a": "\ud800"}, {"\ud800": 1}, {1: "a"}, {"a": b"x"}],
)
def test_flat_metadata_fast_path_rejects_what_the_general_path_rejects(meta):
    with pytest.raises(ValidationError):
        Record.create("t", id="a", metadata=meta)
    with pytest.raises(ValidationError):
        Record.create("t", id="a", metadata=SubDict(meta))


def test_cached_rows_never_share_metadata_with_callers(tmp_path):
    c = Collection.create(tmp_path / "c")
    c.create_index("vec", "exact")
    c.insert([{"id": "flat", "text": "a", "metadata": {"n": 1}}, {"id": "deep", "text": "b", "metadata": {"tags": ["x"], "m": {"k": 1}}}])
    for _ in range(2):
        flat, deep = c.store.get(["flat", "deep"], with_vectors=False)
        flat.metadata["n"] = 99
        deep.metadata["tags"].append("y")
        deep.metadata["m"]["k"] = 2
    assert [r.metadata for r in c.store.get(["flat", "deep"], with_vectors=False)] == [{"n": 1}, {"m": {"k": 1}, "tags": ["x"]}]
    c.close()


@pytest.mark.parametrize("metric", ["cosine", "ip", "l2"])
def test_single_query_search_equals_the_batch_path(metric):
    c = Collection.create()
    c.create_index("vec", "exact", metric=metric)
    rng = random.Random(3)
    c.insert([{"id": f"r{i}", "text": f"note {rng.randrange(5)} {i % 7}", "metadata": {"g": i % 3}} for i in range(300)])
    index = c.index("vec")
    for text in ("note 1", "note 3 4", "zzz"):
        q = c.make_query(text)
        q = q.evolve(vectors={"default": c.query_vector(q, "default")})
        for allowed in (None, {f"r{i}" for i in range(0, 300, 3)} | {"unknown"}):
            one = index.search(q, 12, allowed)
            batch = index.search_batch([q], 12, allowed)[0]
            assert [h.id for h in one] == [h.id for h in batch]
            assert [h.score for h in one] == pytest.approx([h.score for h in batch], abs=1e-5)
    c.close()
