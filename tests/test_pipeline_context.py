"""The pipeline engine's context: stage notes in the trace, and the depth of a ``fuse``
stage without ``k`` (the fusion's default depth)."""

from __future__ import annotations

import pytest

import memcore
from memcore import Hit
from memcore.plugin import Stage
from memcore import Pipeline
from memcore._plugins._host import get_registry


class FixedList(Stage):
    """A recall stand-in: adds a fixed ranked list under its name."""

    def __init__(self, name: str, ids: list[str]):
        self.name = name
        self.ids = ids

    def run(self, ctx) -> None:
        ctx.add_list(self.name, [Hit(i, 1.0 - n / 100, source=self.name) for n, i in enumerate(self.ids)])


class Noting(Stage):
    """Leaves notes about its run and keeps the working list."""

    name = "noting"

    def run(self, ctx) -> None:
        ctx.note(self.name, path="primary", seen=len(ctx.current))
        ctx.note(self.name, calls=1)


@pytest.fixture
def memory():
    with memcore.open({"store": {"kind": "memory"}}) as memory:
        yield memory


def fuse_stage(options: dict) -> Stage:
    return Pipeline.from_config([{"kind": "fuse", **options}], get_registry()).stages[0]


def run(memory, stages: list[Stage]):
    return Pipeline(stages).run_context(memory.collection, memory.collection.make_query("anything", k=50))


A = ["a", "b", "c", "d", "e", "f"]
B = ["d", "g", "a", "h"]


def test_notes_are_kept_by_stage_name_and_copied_into_the_trace(memory):
    ctx = run(memory, [FixedList("one", A), Noting()])
    assert ctx.notes == {"noting": {"path": "primary", "seen": 6, "calls": 1}}
    noted = [t for t in ctx.trace if t["stage"] == "noting"]
    assert noted[0]["notes"] == {"path": "primary", "seen": 6, "calls": 1}
    assert "notes" not in [t for t in ctx.trace if t["stage"] == "one"][0]


def test_rrf_fuse_without_k_keeps_the_longest_input_list(memory):
    ctx = run(memory, [FixedList("one", A), FixedList("two", B), fuse_stage({})])
    assert len(ctx.current) == len(A)  # 8 distinct ids, cut to the longest list
    assert [h.id for h in ctx.current][:2] == ["a", "d"]  # in both lists


@pytest.mark.parametrize("fusion", ["concat"] + (["union"] if "union" in get_registry().entries["fusions"] else []))
def test_fusions_meaning_every_id_keep_every_id(memory, fusion):
    ctx = run(memory, [FixedList("one", A), FixedList("two", B), fuse_stage({"fusion": fusion})])
    assert sorted(h.id for h in ctx.current) == sorted(set(A) | set(B))


def test_fuse_with_k_keeps_k(memory):
    ctx = run(memory, [FixedList("one", A), FixedList("two", B), fuse_stage({"k": 3})])
    assert [h.id for h in ctx.current] == ["a", "d", "b"]
