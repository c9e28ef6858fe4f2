"""``StageContract``: the behaviour every pipeline :class:`memcore.Stage` must have."""

from __future__ import annotations

from typing import Any, ClassVar, Iterator, Mapping

import pytest

from ..collection._collection import Collection
from ..retrieval._pipeline import Pipeline, PipelineContext, Stage, _trusted
from .._plugins._host import get_registry
from ..model._query import Contribution, Hit
from ..model._query import Query
from .data import make_texts
from .options import assert_options_described

__all__ = ["StageContract", "build_stage"]


def build_stage(kind: str, **options: Any) -> Stage:
    """A registered stage built the way settings build it (``{kind = ..., **options}``)."""
    return Pipeline.from_config([{"kind": kind, **options}], get_registry()).stages[0]


def _snapshot(lists: Mapping[str, list[Hit]]) -> dict[str, list[tuple[Any, ...]]]:
    return {name: [(h.id, h.provenance) for h in hits] for name, hits in lists.items()}


class StageContract:
    """Contract tests for a pipeline stage. Subclass it and provide ONE fixture, ``stage``:
    the :class:`memcore.Stage` to run (``build_stage(kind, **options)`` builds a registered
    one as settings would)::

        from memcore.testing import StageContract, build_stage

        class TestMyStage(StageContract):
            @pytest.fixture
            def stage(self):
                return build_stage("my_stage", index="vector")

    The suite runs the stage on a :class:`memcore.PipelineContext` over a small in-memory
    collection (:meth:`make_collection`): ``n_records`` records with metadata
    ``{"n": i, "parity": "even" | "odd"}`` in the hashing space ``default``, and the indexes
    of ``collection_indexes`` (by default ``vector``, exact cosine, and ``vector_l2``, exact
    L2). Before the stage runs, the context holds one recall list per index named
    ``seed_<index>`` (the first is the working list) unless ``seed_lists`` is False, so a
    reranking or fusing stage has input and a recall stage can add its own list.

    Checked: ``check(collection)`` accepts the collection; running does not crash with a
    plain query, a filtered query, or empty input lists; every hit is a held record
    (unique ids in the working list); every hit keeps a provenance whose contributions
    point at the lists it came from (``ctx.lists[source][rank - 1].id == hit.id``); the
    seeded lists and their provenance are left untouched; a filtered query's hits match
    the filter; running twice gives the same result. A stage offering the shortcuts
    :meth:`Stage.alone` / :meth:`Stage.cut` (the pipeline then skips its ``run``) answers
    exactly what its ``run`` leaves: ``alone`` the list a first stage leaves on an empty
    context, ``cut`` how many of the working list's first hits it keeps. A stage with its
    own :meth:`Stage.run_many` leaves each context of a batch as its ``run`` leaves it
    (scores to float32 rounding). Every option of the stage's config model
    (``stage.config``) has a description.
    """

    n_records: ClassVar[int] = 24
    collection_indexes: ClassVar[Mapping[str, Mapping[str, Any]]] = {
        "vector": {"kind": "exact", "space": "default", "metric": "cosine"},
        "vector_l2": {"kind": "exact", "space": "default", "metric": "l2"},
    }
    seed_lists: ClassVar[bool] = True
    seed_depth: ClassVar[int] = 10
    query_text: ClassVar[str] = ""
    query_k: ClassVar[int] = 5

    @pytest.fixture
    def stage(self) -> Stage:
        """Override: return the Stage under test."""
        pytest.fail(f"{type(self).__name__} must define the fixture 'stage' (see StageContract)")

    @pytest.fixture
    def stage_collection(self) -> Iterator[Collection]:
        """The collection the suite runs the stage on (built by :meth:`make_collection`)."""
        collection = self.make_collection()
        yield collection
        collection.close()

    # -- helpers (overridable) -------------------------------------------------------------

    def make_collection(self) -> Collection:
        """An in-memory collection with :attr:`collection_indexes` and :attr:`n_records` records."""
        collection = Collection.create()
        for name, entry in self.collection_indexes.items():
            options = dict(entry)
            collection.create_index(name, options.pop("kind"), **options)
        texts = make_texts(self.n_records, seed=3)
        collection.insert([{"id": f"s{i}", "text": t, "metadata": {"n": i, "parity": "even" if i % 2 == 0 else "odd"}} for i, t in enumerate(texts)])
        return collection

    def make_query(self, collection: Collection, where: Mapping[str, Any] | None = None) -> Query:
        """The query of a run: by default the words of a stored text (without its unique word)."""
        text = self.query_text or " ".join(collection.get("s3").text.split()[1:])
        return Query(text=text, k=self.query_k, where=dict(where) if where else None)

    def make_context(self, collection: Collection, query: Query, *, empty: bool = False) -> PipelineContext:
        """A context with one ``seed_<index>`` list per index (empty lists when ``empty``)."""
        ctx = PipelineContext(collection, query)
        if not self.seed_lists:
            return ctx
        for i, name in enumerate(self.collection_indexes):
            list_name = f"seed_{name}"
            hits = [] if empty else collection.search_index(name, query, self.seed_depth)
            for rank, hit in enumerate(hits, start=1):
                hit.source = list_name
                hit.provenance = (Contribution(list_name, rank, float(hit.score)),)
            ctx.add_list(list_name, hits, make_current=(i == 0))
        return ctx

    def run_stage(self, stage: Stage, collection: Collection, query: Query, *, empty: bool = False) -> PipelineContext:
        """Check, seed, run, and check the invariants; returns the context."""
        stage.check(collection.reader)
        ctx = self.make_context(collection, query, empty=empty)
        before = _snapshot({n: h for n, h in ctx.lists.items() if n.startswith("seed_")})
        stage.run(ctx)
        after = _snapshot({n: ctx.lists[n] for n in before})
        assert after == before, "the stage changed the seeded lists or their provenance"
        self.check_context(ctx, collection)
        return ctx

    def check_context(self, ctx: PipelineContext, collection: Collection) -> None:
        """Held ids, unique working list, provenance pointing at real list positions."""
        held = set(collection.ids())
        assert isinstance(ctx.current, list)
        ids = [h.id for h in ctx.current]
        assert len(ids) == len(set(ids)), f"duplicate ids in the working list: {ids}"
        for name, hits in [("current", ctx.current), *ctx.lists.items()]:
            for hit in hits:
                assert isinstance(hit, Hit), f"list {name!r} holds a {type(hit).__name__}"
                assert hit.id in held, f"list {name!r} holds {hit.id!r}, which the collection does not"
        for hit in ctx.current:
            assert isinstance(hit.provenance, tuple) and hit.provenance, f"hit {hit.id} has no provenance"
            for c in hit.provenance:
                assert isinstance(c, Contribution)
                assert c.source in ctx.lists, f"hit {hit.id}: provenance names unknown list {c.source!r}"
                source = ctx.lists[c.source]
                assert 1 <= c.rank <= len(source) and source[c.rank - 1].id == hit.id, (
                    f"hit {hit.id}: provenance says rank {c.rank} in {c.source!r}, which holds {[h.id for h in source]}"
                )

    # -- tests -----------------------------------------------------------------------------

    def test_is_a_stage(self, stage: Stage) -> None:
        assert isinstance(stage, Stage)

    def test_every_option_has_a_description(self, stage: Stage) -> None:
        config = getattr(stage, "config", None)
        if config is None:
            pytest.skip("the stage keeps no config model (stage.config)")
        assert_options_described(config, f"stage {stage.name!r}")

    def test_run_keeps_ids_and_provenance(self, stage: Stage, stage_collection: Collection) -> None:
        self.run_stage(stage, stage_collection, self.make_query(stage_collection))

    def test_run_with_filtered_query(self, stage: Stage, stage_collection: Collection) -> None:
        where = {"parity": "even"}
        ctx = self.run_stage(stage, stage_collection, self.make_query(stage_collection, where))
        records = ctx.records([h.id for h in ctx.current])
        assert all(r is not None and r.metadata["parity"] == "even" for r in records), "hits outside the query's where filter"

    def test_run_on_empty_input(self, stage: Stage, stage_collection: Collection) -> None:
        self.run_stage(stage, stage_collection, self.make_query(stage_collection), empty=True)

    def test_deterministic(self, stage: Stage, stage_collection: Collection) -> None:
        first = self.run_stage(stage, stage_collection, self.make_query(stage_collection))
        second = self.run_stage(stage, stage_collection, self.make_query(stage_collection))
        assert [(h.id, float(h.score)) for h in first.current] == [(h.id, float(h.score)) for h in second.current]

    def test_alone_answers_what_run_leaves(self, stage: Stage, stage_collection: Collection) -> None:
        if not _trusted(type(stage), "alone"):
            return  # no shortcut: the pipeline always runs the stage over a context
        view = stage_collection.reader
        stage.check(view)
        for where in (None, {"parity": "even"}):
            query = self.make_query(stage_collection, where)
            alone = stage.alone(view, query)
            if alone is None:
                continue  # declined for this query: the pipeline takes the context path
            ctx = PipelineContext(stage_collection, self.make_query(stage_collection, where))
            stage.run(ctx)
            assert [(h.id, float(h.score), h.provenance) for h in alone] == [(h.id, float(h.score), h.provenance) for h in ctx.current], (
                "alone() answers another list than run() leaves on an empty context"
            )

    def test_run_many_leaves_what_run_leaves(self, stage: Stage, stage_collection: Collection) -> None:
        if not _trusted(type(stage), "run_many") or next(k for k in type(stage).__mro__ if "run_many" in vars(k)) is Stage:
            return  # the base's loop of run: nothing of its own to check
        stage.check(stage_collection.reader)
        texts = [" ".join(stage_collection.get(f"s{i}").text.split()[1:]) for i in (3, 5, 8)]
        for where in (None, {"parity": "even"}):
            queries = [Query(text=t, k=self.query_k, where=dict(where) if where else None) for t in texts]
            alone = []
            for query in queries:
                ctx = self.make_context(stage_collection, query.evolve())
                stage.run(ctx)
                alone.append(ctx)
            together = [self.make_context(stage_collection, query.evolve()) for query in queries]
            stage.run_many(together)
            for one, many in zip(alone, together):
                self.check_context(many, stage_collection)
                assert [(h.id, [(c.source, c.rank) for c in h.provenance]) for h in many.current] == [
                    (h.id, [(c.source, c.rank) for c in h.provenance]) for h in one.current
                ], "run_many() leaves another list than run() of each context"
                assert [float(h.score) for h in many.current] == pytest.approx([float(h.score) for h in one.current], rel=1e-5, abs=1e-6)
                assert sorted(many.lists) == sorted(one.lists)

    def test_cut_keeps_what_run_keeps(self, stage: Stage, stage_collection: Collection) -> None:
        if not _trusted(type(stage), "cut"):
            return
        stage.check(stage_collection.reader)
        query = self.make_query(stage_collection)
        keep = stage.cut(query)
        if keep is None:
            return
        ctx = self.make_context(stage_collection, query)
        before = [h.id for h in ctx.current]
        stage.run(ctx)
        assert [h.id for h in ctx.current] == before[:keep], f"cut() says {keep} first hits are kept; run() left another list"
