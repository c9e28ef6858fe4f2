"""``Memory.retrieve_many`` runs a batch of queries together (``Pipeline.run_many``): one
batched index search and one store read for all, with the lists a loop of ``retrieve``
gives (ids, records and order equal; scores equal up to the float32 rounding of one matrix
product against many), the same typed errors, and nothing changed on error."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pytest

import memcore
from memcore.errors import DimensionError, FilterError, ValidationError
from memcore.plugin import Stage
from memcore.retrieval._stages import Recall, RecallConfig

DIM = 16
SETTINGS: dict[str, Any] = {"spaces": {"default": {"dim": DIM}}, "indexes": {"vector": {"kind": "exact", "space": "default"}}}


def unit(rows: np.ndarray) -> np.ndarray:
    return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)


VECTORS = unit(np.random.default_rng(3).normal(size=(60, DIM)))
QUERIES = unit(np.random.default_rng(4).normal(size=(12, DIM)))


@pytest.fixture(params=["sqlite", "memory"])
def memory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[memcore.Memory]:
    store = {"kind": "memory"} if request.param == "memory" else {}
    m = memcore.open({**SETTINGS, **({"store": store} if store else {})}, path=None if store else tmp_path / "m")
    yield m
    m.close()


def fill(m: memcore.Memory) -> None:
    m.insert(
        [
            {
                "text": f"record {i}",
                "id": f"r{i:02d}",
                "metadata": {"n": i, "even": i % 2 == 0},
                "vectors": {"default": VECTORS[i]},
                "scope": {"user_id": "alice" if i % 3 else "bob"},
            }
            for i in range(len(VECTORS))
        ]
    )


def same(many: list[list[dict[str, Any]]], alone: list[list[dict[str, Any]]]) -> None:
    """Equal ids, texts and metadata in the same order; scores equal to float32 rounding."""
    assert [[(r["id"], r["text"], r["metadata"]) for r in hits] for hits in many] == [[(r["id"], r["text"], r["metadata"]) for r in hits] for hits in alone]
    for got, want in zip(many, alone):
        assert [float(r["score"]) for r in got] == pytest.approx([float(r["score"]) for r in want], rel=1e-6, abs=1e-6)


class Counting:
    """Counts the index's search and search_batch calls and the store's get_batch calls."""

    def __init__(self, m: memcore.Memory):
        self.index = m.collection.index("vector")
        self.store = m.collection.store
        self.calls: dict[str, int] = {"search": 0, "search_batch": 0, "get_batch": 0}
        for owner, name in ((self.index, "search"), (self.index, "search_batch"), (self.store, "get_batch")):
            self._wrap(owner, name)

    def _wrap(self, owner: Any, name: str) -> None:
        original = getattr(owner, name)

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] += 1
            return original(*args, **kwargs)

        setattr(owner, name, counted)

    def undo(self) -> None:
        for owner, name in ((self.index, "search"), (self.index, "search_batch"), (self.store, "get_batch")):
            delattr(owner, name)


CASES: list[dict[str, Any]] = [
    {},
    {"k": 3},
    {"k": 500},  # more than the collection holds
    {"where": {"even": True}},
    {"where": {"n": {"$gte": 40}}, "k": 30},
    {"scope": {"user_id": "bob"}},
    {"scope": {"user_id": "alice"}, "where": {"even": False}, "k": 7},
    {"min_score": 0.3},
    {"where_document": {"$contains": "record 1"}},
    {"where": {"n": {"$gt": 1000}}},  # nothing matches
]


@pytest.mark.parametrize("case", CASES, ids=[str(c) for c in CASES])
def test_vectors_batch_equals_a_loop_of_retrieve(memory: memcore.Memory, case: dict[str, Any]) -> None:
    fill(memory)
    alone = [memory.retrieve(vector=q, **case) for q in QUERIES]
    counting = Counting(memory)
    try:
        many = memory.retrieve_many(vectors=QUERIES, **case)
        listed = memory.retrieve_many(vectors=[q.tolist() for q in QUERIES], **case)  # a list of lists, as JSON gives them
    finally:
        counting.undo()
    same(many, alone)
    same(listed, alone)
    if case.get("where") != {"n": {"$gt": 1000}}:
        assert counting.calls == {"search": 0, "search_batch": 2, "get_batch": 2}  # one search and one record read per batch
    assert all(len(hits) <= case.get("k", 10) for hits in many)


def test_texts_and_text_with_vector_batches_equal_the_loop(memory: memcore.Memory) -> None:
    fill(memory)
    texts = [f"record {i}" for i in range(len(QUERIES))]
    same(memory.retrieve_many(texts, vectors=QUERIES, k=5), [memory.retrieve(t, vector=q, k=5) for t, q in zip(texts, QUERIES)])


def test_a_text_batch_equals_the_loop_with_the_hashing_embedder(tmp_path: Path) -> None:
    with memcore.open(path=tmp_path / "h") as m:
        m.insert([f"note {i} about {'apples' if i % 2 else 'zebras'} and {i % 7} pears" for i in range(40)])
        queries = ["apples", "zebras and pears", "note 3", "apples"]
        same(m.retrieve_many(queries, k=6, where=None), [m.retrieve(q, k=6) for q in queries])
        same(m.retrieve_many(queries, k=6, scope={"user_id": "nobody"}), [[] for _ in queries])


def test_an_empty_collection_gives_empty_lists(memory: memcore.Memory) -> None:
    assert memory.retrieve_many(vectors=QUERIES[:3]) == [[], [], []]


def test_one_query_and_a_repeated_query(memory: memcore.Memory) -> None:
    fill(memory)
    same(memory.retrieve_many(vectors=QUERIES[:1]), [memory.retrieve(vector=QUERIES[0])])
    twice = memory.retrieve_many(vectors=[QUERIES[0], QUERIES[0]], k=4)
    same(twice, [memory.retrieve(vector=QUERIES[0], k=4)] * 2)
    twice[0][0]["metadata"]["changed"] = True  # each result is the caller's own
    assert "changed" not in memory.retrieve(vector=QUERIES[0], k=1)[0]["metadata"]


def errors_of(call: Any) -> tuple[type, str]:
    with pytest.raises(memcore.MemcoreError) as caught:
        call()
    return type(caught.value), str(caught.value)


@pytest.mark.parametrize(
    "bad, kind",
    [
        (np.ones((3, DIM + 1), dtype=np.float32), DimensionError),  # every vector of another dimension
        ([QUERIES[0], np.ones(DIM + 2, dtype=np.float32)], DimensionError),  # the second one
        ([QUERIES[0], [float("nan")] * DIM], ValidationError),
        ([QUERIES[0], "not a vector"], ValidationError),
    ],
    ids=["dimension", "second-dimension", "nan", "text"],
)
def test_a_bad_vector_is_the_error_of_the_loop(memory: memcore.Memory, bad: Any, kind: type) -> None:
    fill(memory)
    before = memory.count()

    def loop() -> None:
        for vector in bad:
            memory.retrieve(vector=vector, k=3)

    expected = errors_of(loop)
    assert issubclass(expected[0], kind)
    assert errors_of(lambda: memory.retrieve_many(vectors=bad, k=3)) == expected
    assert memory.count() == before


@pytest.mark.parametrize(
    "call",
    [
        lambda m: m.retrieve_many(vectors=[]),
        lambda m: m.retrieve_many(vectors="text"),
        lambda m: m.retrieve_many(vectors=np.ones(DIM)),  # one vector, not a list of them
        lambda m: m.retrieve_many(["a", "b"], vectors=QUERIES[:3]),  # lengths differ
        lambda m: m.retrieve_many(vectors=QUERIES, k=0),
        lambda m: m.retrieve_many(vectors=QUERIES, min_score=float("nan")),
        lambda m: m.retrieve_many(vectors=QUERIES, scope={"team": "x"}),
        lambda m: m.retrieve_many(),
    ],
    ids=["empty", "string", "one-vector", "lengths", "k", "min-score", "scope", "nothing"],
)
def test_bad_batches_are_validation_errors_before_any_search(memory: memcore.Memory, call: Any) -> None:
    fill(memory)
    counting = Counting(memory)
    try:
        with pytest.raises(ValidationError):
            call(memory)
    finally:
        counting.undo()
    assert counting.calls == {"search": 0, "search_batch": 0, "get_batch": 0}


def test_a_bad_filter_is_a_filter_error(memory: memcore.Memory) -> None:
    fill(memory)
    with pytest.raises(FilterError):
        memory.retrieve_many(vectors=QUERIES, where={"$nope": 1})


def test_a_recall_subclass_that_rewrites_run_is_run_per_query(memory: memcore.Memory) -> None:
    """A stage subclass overriding ``run`` but not ``run_many`` gets the loop of its ``run``."""
    fill(memory)
    seen: list[int] = []

    class Noting(Recall):
        def run(self, ctx: Any) -> None:
            seen.append(ctx.query.k)
            super().run(ctx)

    stage: Stage = Noting(RecallConfig(index="vector"))
    memory.pipeline.stages[0] = stage
    alone = [memory.retrieve(vector=q, k=4) for q in QUERIES[:3]]
    seen.clear()
    same(memory.retrieve_many(vectors=QUERIES[:3], k=4), alone)
    assert seen == [4, 4, 4]


def test_async_memory_takes_vectors(memory: memcore.Memory) -> None:
    fill(memory)
    alone = [memory.retrieve(vector=q, k=3) for q in QUERIES[:4]]

    async def main() -> list[list[dict[str, Any]]]:
        wrapper = memcore.AsyncMemory(memory)
        try:
            return await wrapper.retrieve_many(vectors=QUERIES[:4], k=3)
        finally:
            wrapper._pool.shutdown()

    same(asyncio.run(main()), alone)


def test_a_few_queries_are_searched_one_by_one_exactly(memory: memcore.Memory) -> None:
    """Fewer queries than a matrix product pays for (``product_pays``): the index's single
    searches, so the scores are exactly the loop's."""
    fill(memory)
    assert memory.retrieve_many(vectors=QUERIES[:3], k=6) == [memory.retrieve(vector=q, k=6) for q in QUERIES[:3]]
