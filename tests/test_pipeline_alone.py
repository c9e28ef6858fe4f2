"""A recall pipeline, maybe cut by limit stages: :meth:`Pipeline.run` searches without a
context (``memcore.retrieval._pipeline.RUNS_ALONE`` and ``CUTS``) and must answer exactly what the
context path answers (issue 14, small memories)."""

from __future__ import annotations

import pytest

from memcore import Collection, Pipeline, Query
from memcore.retrieval._pipeline import CUTS, RUNS_ALONE
from memcore.plugin import PipelineContext
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
    assert type(pipe.stages[0]) is Recall and type(pipe.stages[0]) in RUNS_ALONE
    assert all(type(stage) in CUTS for stage in pipe.stages[1:])
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
