"""A recall pipeline, maybe cut by limit stages: :meth:`Pipeline.run` searches without a
context (the public :meth:`Stage.alone` and :meth:`Stage.cut`) and must answer exactly what the
context path answers (issue 14, small memories)."""

from __future__ import annotations

import pytest

from memcore import Collection, Pipeline, Query
from memcore.plugin import CollectionReader, Hit, PipelineContext, Stage
from memcore._plugins._host import get_registry
from memcore.retrieval._stages import Limit, LimitConfig, Recall, RecallConfig


@pytest.fixture(params=["sqlite", "memory"])
def col(request, tmp_path):
    c = Collection.create(tmp_path / "c" if request.param == "sqlite" else None)
    c.create_index("vec", "exact")
    c.insert([{"id": f"r{i}", "text": f"note {i} about apples and pears {i % 3}", "metadata": {"i": i, "even": i % 2 == 0}} for i in range(30)])
    yield c
    c.close()


def facts(hits):
    return [(h.id, h.score, h.raw, h.source, h.provenance, h.record) for h in hits]


@pytest.mark.parametrize(
    "stages",
    [
        [{"kind": "recall"}],
        [{"kind": "recall", "index": "vec", "over_fetch": 2.0, "name": "dense"}],
        [{"kind": "recall", "index": "vec", "k": 3}],
        [{"kind": "recall", "over_fetch": 2.0}, {"kind": "limit"}],
        [{"kind": "recall", "over_fetch": 3.0}, {"kind": "limit", "k": 12}, {"kind": "limit", "k": 4}],
    ],
    ids=["defaults", "over_fetch_named", "fixed_depth", "limit", "two_limits"],
)
@pytest.mark.parametrize("where", [None, {"even": True}], ids=["all", "filtered"])
def test_run_alone_equals_the_context_path(col, stages, where):
    pipe = Pipeline.from_config(stages, get_registry())
    probe = col.make_query("apples", k=5, where=where)
    assert type(pipe.stages[0]) is Recall and pipe.stages[0].alone(col.reader, probe) is not None
    assert all(stage.cut(probe) is not None for stage in pipe.stages[1:])
    for text in ["apples 4", "pears 2 note", "note 17"]:
        q = col.make_query(text, k=5, where=where)
        ctx = pipe.run_context(col, q)
        expected = col.attach_records(ctx.current[: q.k])
        got = pipe.run(col, text, k=5, where=where)
        assert facts(got) == facts(expected)
        assert [c.source for h in got for c in h.provenance] == [pipe.stages[0].name] * len(got)
        assert facts(pipe.run(col, text, k=5, where=where, with_records=False)) == [f[:5] + (None,) for f in facts(expected)]


def test_a_recall_without_check_names_its_index_on_the_direct_path_too(col):
    pipe = Pipeline([Recall(RecallConfig())])  # built by hand, check() never called
    hits = pipe.run(col, "apples", k=2)
    assert pipe.stages[0].index == "vec" and pipe.stages[0].name == "vec"
    assert [c.source for h in hits for c in h.provenance] == ["vec", "vec"]


def test_subclasses_take_the_context_path(col):
    seen: list[str] = []

    class CountingRecall(Recall):
        def run(self, ctx: PipelineContext) -> None:
            seen.append("stage")
            super().run(ctx)

    class TracingPipeline(Pipeline):
        def run_context(self, collection, query, *, with_records=False):
            seen.append("pipeline")
            return super().run_context(collection, query, with_records=with_records)

    class CountingLimit(Limit):
        def run(self, ctx: PipelineContext) -> None:
            seen.append("limit")
            super().run(ctx)

    assert len(Pipeline([CountingRecall(RecallConfig(index="vec"))]).run(col, "apples", k=2)) == 2
    assert seen == ["stage"]  # a subclass may override run: never called directly
    seen.clear()
    assert len(Pipeline([Recall(RecallConfig(index="vec")), CountingLimit(LimitConfig(k=1))]).run(col, "apples", k=2)) == 1
    assert seen == ["limit"]  # a later stage that is not an exact cut: the context path
    seen.clear()
    assert len(TracingPipeline([Recall(RecallConfig(index="vec"))]).run(col, "apples", k=2)) == 2
    assert seen == ["pipeline"]  # an overridden run_context is honoured


def test_bad_queries_fail_alike_on_the_direct_path(col):
    from memcore.errors import ValidationError

    pipe = Pipeline.from_config([{"kind": "recall"}], get_registry())
    with pytest.raises(ValidationError):
        pipe.run(col, "   ")
    with pytest.raises(ValidationError):
        pipe.run(col, Query(text="apples"), k=0)


def test_a_plugin_stage_can_answer_alone_and_cut(col):
    """The shortcuts are public: a stage of any plugin uses them like the builtins."""
    seen: list[str] = []

    class Newest(Stage):
        def run(self, ctx: PipelineContext) -> None:
            seen.append("run")
            ctx.add_list("newest", self.alone(ctx.collection, ctx.query))

        def alone(self, collection: CollectionReader, query: Query) -> list[Hit]:
            seen.append("alone")
            return [Hit(rid, 1.0 / (i + 1)) for i, rid in enumerate(reversed(collection.ids()))]

    class FirstTwo(Stage):
        def run(self, ctx: PipelineContext) -> None:
            ctx.current = ctx.current[: self.cut(ctx.query)]

        def cut(self, query: Query) -> int:
            return 2

    hits = Pipeline([Newest(), FirstTwo()]).run(col, "apples", k=5)
    assert [h.id for h in hits] == ["r29", "r28"] and seen == ["alone"]
    assert all(h.record is not None for h in hits)
    seen.clear()
    ctx = Pipeline([Newest(), FirstTwo()]).run_context(col, col.make_query("apples", k=5))
    assert [h.id for h in ctx.current] == ["r29", "r28"] and seen == ["run", "alone"]
    seen.clear()
    assert [h.id for h in Pipeline([Newest(), Limit(LimitConfig(k=3))]).run(col, "apples", k=5)] == ["r29", "r28", "r27"]
    assert seen == ["alone"]


def test_a_stage_without_shortcuts_takes_the_context_path(col):
    class Passthrough(Stage):
        def run(self, ctx: PipelineContext) -> None:
            pass

    recall = Recall(RecallConfig(index="vec"))
    assert Stage.alone(recall, col.reader, col.make_query("apples")) is None and Passthrough().cut(col.make_query("apples")) is None
    ctx = Pipeline([recall, Passthrough()]).run_context(col, col.make_query("apples", k=2))
    assert len(Pipeline([recall, Passthrough()]).run(col, "apples", k=2)) == 2 and [t["stage"] for t in ctx.trace] == ["vec", "passthrough"]
