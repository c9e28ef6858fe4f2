"""``IndexContract``: the behaviour every :class:`memcore.Index` must have."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Callable, ClassVar, Collection as AbstractSet, Iterator, Mapping, Sequence

import numpy as np
import pytest

from ..errors import DimensionError, ValidationError
from ..indexes._index import Index, IndexContext, Requirements, SpaceInfo
from ..model._query import Hit
from ..model._query import Query
from ..model._record import Record
from ..stores._store import WriteBatch
from ..stores._memory import MemoryStore
from ..indexes._vector_reader import VectorReader
from .data import make_records, make_texts, random_unit_vectors, space_seed
from .options import assert_options_described

__all__ = ["IndexContract"]

MakeIndex = Callable[[IndexContext], Index]


class IndexContract:
    """Contract tests for an index kind. Subclass it and provide ONE fixture, ``make_index``:
    a callable that builds a new, empty index from an :class:`memcore.IndexContext`::

        from memcore.testing import IndexContract

        class TestMyIndex(IndexContract):
            @pytest.fixture
            def make_index(self):
                return lambda context: MyIndex(MyIndexConfig(space="default"), context)

    The suite calls ``make_index`` several times per test (a fresh instance is needed to
    check ``save``/``load``). The context it passes is named ``"contract"`` and declares the
    spaces :attr:`space_names`, each of dimension :attr:`dim` (embedder ``"contract"``).
    Records and queries are made for what the index ``requires``: texts made of words
    (each led by a word unique to the record), a seeded random unit vector per required
    space, and links to the previous record when links are required. A query for a record
    carries its exact text and vectors.

    Class attributes to adjust the suite:

    - ``dim`` (16), ``space_names`` (``("default",)``): the declared spaces;
    - ``n_records`` (30): records added by most tests;
    - ``self_match_ranks_first`` (True): a query built from a stored record ranks that
      record first; set False where it does not hold (a FIFO queue, a graph walk...);
    - ``query_extras`` (``{}``): ``Query.extras`` given with every query (query modes);
    - ``seed`` (0): seed of every generated vector and text.

    Every index :meth:`new_index` made is closed after its test (an index may hold a
    client, connections, mapped files), so ``close`` runs on each state a test leaves, after
    a ``close`` of the test's own too.

    Override :meth:`records_for` / :meth:`query_for` / :meth:`random_queries` for indexes
    that need something else entirely. Every option of the index's config model
    (``index.config``) must have a description.
    """

    dim: ClassVar[int] = 16
    space_names: ClassVar[tuple[str, ...]] = ("default",)
    n_records: ClassVar[int] = 30
    self_match_ranks_first: ClassVar[bool] = True
    query_extras: ClassVar[Mapping[str, Any]] = {}
    seed: ClassVar[int] = 0

    @pytest.fixture(autouse=True)
    def _closes_what_it_made(self) -> Iterator[None]:
        """Close every index :meth:`new_index` made during the test, after it."""
        self._made: list[Index] = []
        yield
        for index in self._made:
            index.close()

    @pytest.fixture
    def make_index(self) -> MakeIndex:
        """Override: return ``callable(context: IndexContext) -> Index`` (a new empty index)."""
        pytest.fail(f"{type(self).__name__} must define the fixture 'make_index' (see IndexContract)")

    # -- helpers (overridable) -------------------------------------------------------------

    def index_context(self, name: str = "contract", vectors: VectorReader | None = None) -> IndexContext:
        """The context handed to ``make_index`` (``vectors``: the store's vectors, see :meth:`stored`)."""
        return IndexContext(name=name, spaces={s: SpaceInfo(s, self.dim, "contract") for s in self.space_names}, vectors=vectors)

    def new_index(self, make_index: MakeIndex, vectors: VectorReader | None = None) -> Index:
        """A new empty index, checked to be an Index whose required spaces are declared."""
        context = self.index_context(vectors=vectors)
        index = make_index(context)
        assert isinstance(index, Index), f"make_index returned a {type(index).__name__}, not a memcore.Index"
        getattr(self, "_made", []).append(index)
        assert isinstance(index.requires, Requirements)
        undeclared = sorted(set(index.requires.spaces) - set(context.spaces))
        if undeclared:
            pytest.fail(f"the index requires spaces {undeclared}; list them in {type(self).__name__}.space_names")
        return index

    def records_for(self, index: Index, n: int, *, start: int = 0, seed: int | None = None) -> list[Record]:
        """``n`` records with ids ``r{start}``... carrying what ``index`` requires."""
        return make_records(n, self.dim, index.requires.spaces, self.seed if seed is None else seed, start=start, links=index.requires.links)

    def query_for(self, index: Index, record: Record) -> Query:
        """The query that should find ``record`` first: its text and its vectors."""
        return Query(
            text=record.text,
            vectors={s: record.vectors[s] for s in index.requires.spaces},
            extras=dict(self.query_extras),
        )

    def random_queries(self, index: Index, n: int, seed: int = 1) -> list[Query]:
        """``n`` queries unrelated to the stored records (vocabulary words, fresh vectors)."""
        texts = [" ".join(t.split()[1:4]) for t in make_texts(n, seed=self.seed + 1000 + seed, start=10_000)]
        vectors = {s: random_unit_vectors(n, self.dim, [self.seed + 1000 + seed, space_seed(s)]) for s in index.requires.spaces}
        return [Query(text=texts[i], vectors={s: v[i] for s, v in vectors.items()}, extras=dict(self.query_extras)) for i in range(n)]

    def stored(self, records: Sequence[Record]) -> tuple[VectorReader, MemoryStore]:
        """A :class:`memcore.VectorReader` over an in-memory store holding ``records`` as
        members of the index ``"contract"`` (what a collection hands its indexes)."""
        store = MemoryStore()
        store.apply(WriteBatch(upserts=list(records), add_membership={"contract": [r.id for r in records]}))
        return VectorReader(store, "contract"), store

    def filled_index(self, make_index: MakeIndex, n: int | None = None) -> tuple[Index, list[Record]]:
        """A new index holding ``n`` (default :attr:`n_records`) generated records."""
        index = self.new_index(make_index)
        records = self.records_for(index, self.n_records if n is None else n)
        index.add(records)
        return index, records

    def all_queries(self, index: Index, records: Sequence[Record]) -> list[Query]:
        """A mix of self queries (first five records) and unrelated queries."""
        return [self.query_for(index, r) for r in records[:5]] + self.random_queries(index, 5)

    def check_hits(self, index: Index, hits: Any, k: int, held: AbstractSet[str], allowed: AbstractSet[str] | None = None) -> None:
        """The invariants of one result list."""
        assert isinstance(hits, list), f"search returned a {type(hits).__name__}, not a list"
        assert len(hits) <= k, f"{len(hits)} hits for k={k}"
        for hit in hits:
            assert isinstance(hit, Hit), f"search returned a {type(hit).__name__}, not a memcore.Hit"
            assert isinstance(hit.score, (float, int, np.floating)) and math.isfinite(hit.score), f"bad score {hit.score!r}"
        ids = [h.id for h in hits]
        assert len(set(ids)) == len(ids), f"duplicate ids in {ids}"
        assert set(ids) <= set(held), f"ids not held by the index: {sorted(set(ids) - set(held))}"
        if allowed is not None:
            assert set(ids) <= set(allowed), f"ids outside allowed: {sorted(set(ids) - set(allowed))}"
        scores = [float(h.score) for h in hits]
        assert all(a >= b for a, b in zip(scores, scores[1:])), f"scores not best first: {scores}"
        low, high = index.score_range
        eps = 1e-4
        if low is not None:
            assert all(s >= low - eps for s in scores), f"scores below the declared range {index.score_range}: {scores}"
        if high is not None:
            assert all(s <= high + eps for s in scores), f"scores above the declared range {index.score_range}: {scores}"

    # -- tests -----------------------------------------------------------------------------

    def test_every_option_has_a_description(self, make_index: MakeIndex) -> None:
        index = self.new_index(make_index)
        config = getattr(index, "config", None)
        if config is None:
            pytest.skip("the index keeps no config model (index.config)")
        assert_options_described(config, f"index {type(index).__name__}")

    def test_new_index_is_empty(self, make_index: MakeIndex) -> None:
        index = self.new_index(make_index)
        assert len(index) == 0
        queries = self.random_queries(index, 1)
        assert index.search(queries[0], 5) == []
        assert isinstance(index.stats(), dict)

    def test_add_and_len(self, make_index: MakeIndex) -> None:
        index = self.new_index(make_index)
        first = self.records_for(index, 10)
        index.add(first)
        assert len(index) == 10
        index.add(self.records_for(index, 7, start=10))
        assert len(index) == 17
        index.add([])
        index.remove([])
        assert len(index) == 17

    @pytest.mark.parametrize("k", [1, 3, 10])
    def test_search_returns_at_most_k_best_first(self, make_index: MakeIndex, k: Any) -> None:
        index, records = self.filled_index(make_index)
        held = {r.id for r in records}
        for query in self.all_queries(index, records):
            self.check_hits(index, index.search(query, k), k, held)

    def test_self_match_ranks_first(self, make_index: MakeIndex) -> None:
        if not self.self_match_ranks_first:
            pytest.skip("self_match_ranks_first is False for this index")
        index, records = self.filled_index(make_index)
        for record in records[:10]:
            hits = index.search(self.query_for(index, record), 3)
            assert hits, f"no hit for the exact query of {record.id}"
            assert hits[0].id == record.id, f"query of {record.id} ranked {[h.id for h in hits]}"

    def test_k_larger_than_len(self, make_index: MakeIndex) -> None:
        index, records = self.filled_index(make_index, 5)
        held = {r.id for r in records}
        for query in self.all_queries(index, records):
            self.check_hits(index, index.search(query, 50), 50, held)
        if self.self_match_ranks_first:
            assert index.search(self.query_for(index, records[2]), 50)[0].id == records[2].id

    def test_readd_replaces(self, make_index: MakeIndex) -> None:
        index, records = self.filled_index(make_index)
        # same ids, new texts and vectors
        replaced = self.records_for(index, 5, seed=self.seed + 99)
        assert [r.id for r in replaced] == [r.id for r in records[:5]]
        index.add(replaced)
        assert len(index) == len(records)
        held = {r.id for r in records}
        for record in replaced:
            hits = index.search(self.query_for(index, record), len(records))
            self.check_hits(index, hits, len(records), held)
            if self.self_match_ranks_first:
                assert hits[0].id == record.id, f"the new version of {record.id} is not found first: {[h.id for h in hits]}"

    def test_remove(self, make_index: MakeIndex) -> None:
        index, records = self.filled_index(make_index)
        gone = [r.id for r in records[:4]]
        index.remove(gone + ["never-added", "also-unknown"])
        assert len(index) == len(records) - 4
        held = {r.id for r in records[4:]}
        for query in self.all_queries(index, records):
            self.check_hits(index, index.search(query, len(records)), len(records), held)
        index.remove(["never-added"])
        assert len(index) == len(records) - 4
        index.remove([r.id for r in records[4:]])
        assert len(index) == 0
        assert index.search(self.query_for(index, records[5]), 5) == []

    def test_allowed_restricts_results(self, make_index: MakeIndex) -> None:
        index, records = self.filled_index(make_index)
        held = {r.id for r in records}
        allowed = {r.id for r in records[::3]} | {"not-held-1", "not-held-2"}
        for query in self.all_queries(index, records):
            self.check_hits(index, index.search(query, 10, allowed), 10, held, allowed)
        for record in records[:6]:
            hits = index.search(self.query_for(index, record), 5, allowed)
            self.check_hits(index, hits, 5, held, allowed)
            if self.self_match_ranks_first and record.id in allowed:
                assert hits and hits[0].id == record.id
        assert index.search(self.query_for(index, records[0]), 5, set()) == []
        assert index.search(self.query_for(index, records[0]), 5, {"not-held-1"}) == []

    def test_search_batch_equals_search(self, make_index: MakeIndex) -> None:
        index, records = self.filled_index(make_index)
        queries = self.all_queries(index, records)
        allowed = {r.id for r in records[::2]}
        for restrict in (None, allowed):
            batch = index.search_batch(queries, 7, restrict)
            assert isinstance(batch, list) and len(batch) == len(queries)
            for query, hits in zip(queries, batch):
                single = index.search(query, 7, restrict)
                assert [h.id for h in hits] == [h.id for h in single]
                assert [float(h.score) for h in hits] == pytest.approx([float(h.score) for h in single], rel=1e-5, abs=1e-6)
        assert index.search_batch([], 5) == []

    def test_save_load_roundtrip(self, make_index: MakeIndex, tmp_path: Path) -> None:
        index, records = self.filled_index(make_index)
        index.remove([records[1].id, records[2].id])
        directory = tmp_path / "index"
        directory.mkdir()
        index.save(directory)
        assert not [p.name for p in directory.rglob("*") if p.name.endswith(".tmp")], "temporary files left behind"
        fresh = self.new_index(make_index)
        fresh.load(directory)
        assert len(fresh) == len(index)
        self.assert_same_answers(index, fresh, records)

    def assert_same_answers(self, index: Index, fresh: Index, records: list[Record]) -> None:
        """``fresh`` (a loaded copy) answers every query, restricted or not, exactly like ``index``."""
        allowed = {r.id for r in records[::2]}
        for query in self.all_queries(index, records):
            for restrict in (None, allowed):
                before = index.search(query, 8, restrict)
                after = fresh.search(query, 8, restrict)
                assert [h.id for h in after] == [h.id for h in before]
                assert [float(h.score) for h in after] == pytest.approx([float(h.score) for h in before], rel=1e-5, abs=1e-6)

    def test_loaded_index_keeps_working(self, make_index: MakeIndex, tmp_path: Path) -> None:
        index, records = self.filled_index(make_index, 10)
        directory = tmp_path / "index"
        directory.mkdir()
        index.save(directory)
        fresh = self.new_index(make_index)
        fresh.load(directory)
        more = self.records_for(fresh, 10, start=10)
        fresh.add(more)
        fresh.remove([records[0].id])
        assert len(fresh) == 19
        held = {r.id for r in records[1:] + more}
        for query in self.all_queries(fresh, records[1:] + more):
            self.check_hits(fresh, fresh.search(query, 25), 25, held)
        if self.self_match_ranks_first:
            for record in (records[3], more[4]):
                assert fresh.search(self.query_for(fresh, record), 3)[0].id == record.id

    def test_save_load_roundtrip_reading_the_store(self, make_index: MakeIndex, tmp_path: Path) -> None:
        """With ``context.vectors`` (as in a collection) an index may leave out the vectors
        the store keeps; loaded back it answers exactly like before."""
        records = self.records_for(self.new_index(make_index), self.n_records)
        reader, store = self.stored(records)
        index = self.new_index(make_index, reader)
        index.add(records)
        gone = [records[1].id, records[2].id]
        index.remove(gone)
        store.apply(WriteBatch(deletes=gone))
        directory = tmp_path / "index"
        directory.mkdir()
        index.save(directory)
        fresh = self.new_index(make_index, reader)
        fresh.load(directory)
        assert len(fresh) == len(index)
        self.assert_same_answers(index, fresh, records)

    def test_load_with_the_store_ahead_then_catch_up(self, make_index: MakeIndex, tmp_path: Path) -> None:
        """Saved at sequence S, the store moved on (a record deleted, one rewritten) before a
        crash: load from the store's present state + the catch-up's remove/add equals an
        index that saw those changes live."""
        records = self.records_for(self.new_index(make_index), self.n_records)
        reader, store = self.stored(records)
        index = self.new_index(make_index, reader)
        index.add(records)
        directory = tmp_path / "index"
        directory.mkdir()
        index.save(directory)
        deleted, changed = records[3], records[6]
        rewritten = self.records_for(index, 1, start=6, seed=self.seed + 77)[0]
        assert rewritten.id == changed.id
        store.apply(WriteBatch(deletes=[deleted.id], upserts=[rewritten]))
        fresh = self.new_index(make_index, reader)
        fresh.load(directory)
        for target in (index, fresh):  # what the catch-up does with the logged ops
            target.remove([deleted.id, changed.id])
            target.add([rewritten])
        assert len(fresh) == len(index) == len(records) - 1
        held = [r for r in records if r.id not in (deleted.id, changed.id)] + [rewritten]
        for query in self.all_queries(index, held):
            before = index.search(query, 8)
            after = fresh.search(query, 8)
            assert [h.id for h in after] == [h.id for h in before]
            assert [float(h.score) for h in after] == pytest.approx([float(h.score) for h in before], rel=1e-5, abs=1e-6)
        if self.self_match_ranks_first:
            assert fresh.search(self.query_for(fresh, rewritten), 3)[0].id == rewritten.id

    def test_save_load_empty(self, make_index: MakeIndex, tmp_path: Path) -> None:
        index = self.new_index(make_index)
        directory = tmp_path / "index"
        directory.mkdir()
        index.save(directory)
        fresh = self.new_index(make_index)
        fresh.load(directory)
        assert len(fresh) == 0
        records = self.records_for(fresh, 3)
        fresh.add(records)
        assert len(fresh) == 3

    def test_load_replaces_contents(self, make_index: MakeIndex, tmp_path: Path) -> None:
        index, records = self.filled_index(make_index, 6)
        directory = tmp_path / "index"
        directory.mkdir()
        index.save(directory)
        other = self.new_index(make_index)
        other.add(self.records_for(other, 4, start=100))
        other.load(directory)
        assert len(other) == 6
        held = {r.id for r in records}
        for query in self.all_queries(other, records):
            self.check_hits(other, other.search(query, 20), 20, held)

    def test_validate_rejects_missing_vector(self, make_index: MakeIndex) -> None:
        index = self.new_index(make_index)
        if not index.requires.spaces:
            pytest.skip("the index requires no embedding space")
        good = self.records_for(index, 2)
        index.validate(good)
        space = index.requires.spaces[0]
        bare = good[0].evolve(vectors={s: v for s, v in good[0].vectors.items() if s != space})
        with pytest.raises(DimensionError):  # one error type per fault, in every index
            index.validate([good[1], bare])
        wrong = good[0].evolve(vectors={**good[0].vectors, space: np.ones(self.dim + 1, dtype=np.float32)})
        with pytest.raises(DimensionError):
            index.validate([wrong])

    def test_query_without_its_vector_is_a_dimension_error(self, make_index: MakeIndex) -> None:
        index, records = self.filled_index(make_index, 4)
        if not index.requires.spaces:
            pytest.skip("the index requires no embedding space")
        query = self.query_for(index, records[0])
        space = index.requires.spaces[0]
        bare = Query(text=query.text, vectors={s: v for s, v in query.vectors.items() if s != space}, extras=query.extras)
        with pytest.raises(DimensionError):
            index.search(bare, 3)

    @pytest.mark.parametrize("k", [0, -1, True, 2.5, "3"])
    def test_bad_k_is_a_validation_error(self, make_index: MakeIndex, k: Any) -> None:
        index, records = self.filled_index(make_index, 4)
        with pytest.raises(ValidationError, match="k must be a positive integer"):  # memcore.validate_k
            index.search(self.query_for(index, records[0]), k)
