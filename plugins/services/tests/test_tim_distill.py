"""TiM distillation in ``vector_hash``: insert, forget, merge of the thoughts of one LSH bucket
group, by an LLM step or its fallback, never losing a thought's provenance."""

from __future__ import annotations

import json
import random
from types import SimpleNamespace
from typing import Any

import pytest
from memcore.plugin import LLM, ComponentConfig
from memcore import ValidationError, hookimpl
from memcore.testing import ServiceContract, register_plugin

from memcore_services.distill import Plan, Thought, fallback_plan, merged_metadata, parse_plan

INDEX = "vector_hash.lsh"


class ReplyConfig(ComponentConfig):
    kind: str = "reply"
    reply: str = "{}"
    mode: str = "fixed"


class ReplyLLM(LLM):
    """A local LLM component: a fixed reply, or (mode "first") deletes the group's first thought
    and inserts a merged fact naming both."""

    def __init__(self, config: ReplyConfig):
        self.config, self.model, self.prompts = config, "reply", []

    def complete(self, messages: Any, **options: Any) -> str:
        self.prompts.append(messages)
        if self.config.mode == "first":
            text = messages if isinstance(messages, str) else messages[-1]["content"]
            lines = [line[2:] for line in text.splitlines() if line.startswith("- ")]
            return json.dumps({"to_delete": lines[:1], "to_insert": [f"{lines[0]} and {lines[-1]}"] if len(lines) % 2 else []})
        return self.config.reply


@pytest.fixture
def reply_llm():
    @hookimpl
    def register_llms(register):
        register("reply", ReplyLLM, ReplyConfig)

    with register_plugin(SimpleNamespace(register_llms=register_llms), name="reply-llm"):
        yield


def _service(**distill: Any) -> dict[str, Any]:
    return {"kind": "vector_hash", "extract": False, "bits": 2, "tables": 8, "distill": {"similarity": -1.0, **distill}}


def _thoughts(m) -> dict[str, Any]:
    return {r.text: r.metadata for r in m.collection.get_many(m.collection.ids(index=INDEX))}


def test_the_fallback_merges_a_near_duplicate_into_its_neighbour(opener, tmp_path):
    with opener(tmp_path, _service(merge_threshold=0.9)) as m:
        first = m.insert("Alice works at Google in Zurich", metadata={"dia_ids": ["D1:1"]})
        m.insert("Alice works at Google in Zurich.", metadata={"dia_ids": ["D2:3"]})
        m.insert("Bob adopted a grey cat named Pixel", metadata={"dia_ids": ["D2:4"]})
        thoughts = _thoughts(m)
        assert set(thoughts) == {"Alice works at Google in Zurich", "Bob adopted a grey cat named Pixel"}
        kept = m.collection.get(first).metadata
        assert kept["dia_ids"] == ["D1:1", "D2:3"] and kept["merged_from"] == ["Alice works at Google in Zurich."]
        assert m.service.report() == {"thoughts": 2, "inserted": 0, "merged": 1, "forgotten": 0, "runs": 2}
        assert m.service.llm_report()["steps"] == {"distillation": {"fallback:merge_near_duplicates": 2}}


def test_an_llm_merges_related_thoughts_into_a_new_fact(opener, tmp_path, reply_llm):
    reply = json.dumps({"to_delete": ["Alice works at Google", "alice is an engineer"], "to_insert": ["Alice is an engineer at Google"]})
    with opener(tmp_path, _service(), llms={"default": {"kind": "reply", "reply": reply}}) as m:
        m.insert("Alice works at Google", metadata={"dia_ids": ["D1:1"], "session": 1})
        m.insert("Alice is an engineer", metadata={"dia_ids": ["D1:2"], "session": 1})
        thoughts = _thoughts(m)
        assert list(thoughts) == ["Alice is an engineer at Google"]
        meta = thoughts["Alice is an engineer at Google"]
        assert meta["dia_ids"] == ["D1:1", "D1:2"] and meta["session"] == 1
        assert sorted(meta["merged_from"]) == ["Alice is an engineer", "Alice works at Google"]
        assert m.service.report() == {"thoughts": 1, "inserted": 1, "merged": 2, "forgotten": 0, "runs": 1}
        assert m.service.llm_report() == {"model": "reply", "steps": {"distillation": {"llm": 1}}, "fallback_reasons": {}}
        assert "Alice works at Google" in m.service.llms["default"].prompts[0][-1]["content"]


def test_an_llm_forgets_a_redundant_thought_and_the_new_one_keeps_its_turns(opener, tmp_path, reply_llm):
    reply = json.dumps({"to_delete": ["Alice likes tea"], "to_insert": []})
    with opener(tmp_path, _service(), llms={"default": {"kind": "reply", "reply": reply}}) as m:
        m.insert("Alice likes tea", metadata={"dia_ids": ["D1:1"]})
        new = m.insert("Alice likes green tea every morning", metadata={"dia_ids": ["D3:2"]})
        assert list(_thoughts(m)) == ["Alice likes green tea every morning"]
        meta = m.collection.get(new).metadata
        assert meta["dia_ids"] == ["D3:2", "D1:1"] and meta["merged_from"] == ["Alice likes tea"]
        assert m.service.report()["forgotten"] == 1


@pytest.mark.parametrize(
    "reply",
    [
        "no json here",
        '{"to_delete": "Alice likes tea"}',
        '{"to_delete": ["Something never said"], "to_insert": []}',
        '{"to_delete": ["Alice likes tea", "Alice likes tea a lot"], "to_insert": []}',
    ],
)
def test_an_invalid_reply_runs_the_fallback(opener, tmp_path, reply_llm, reply):
    with opener(tmp_path, _service(merge_threshold=1.0), llms={"default": {"kind": "reply", "reply": reply}}) as m:
        m.insert("Alice likes tea", metadata={"dia_ids": ["D1:1"]})
        m.insert("Alice likes tea a lot", metadata={"dia_ids": ["D1:2"]})
        assert len(_thoughts(m)) == 2  # the fallback (only identical vectors merge) changed nothing
        assert m.service.llm_report()["steps"] == {"distillation": {"fallback:merge_near_duplicates": 1}}


def test_min_neighbours_and_similarity_bound_the_group(opener, tmp_path):
    with opener(tmp_path, _service(min_neighbours=3, merge_threshold=0.0)) as m:
        for i in range(3):
            m.insert(f"Alice visited city number {i}", metadata={"dia_ids": [f"D1:{i}"]})
        assert m.service.report()["runs"] == 0 and len(_thoughts(m)) == 3
    with opener(tmp_path / "b", _service(similarity=1.0, merge_threshold=0.0)) as m:
        for i in range(3):
            m.insert(f"Alice visited city number {i}")
        assert m.service.report()["runs"] == 0


@pytest.mark.parametrize("mode", ["fallback", "llm"])
def test_no_turn_is_ever_lost_under_random_inserts(opener, tmp_path, reply_llm, mode):
    rng = random.Random(7)
    words = ["Alice", "Bob", "tea", "Zurich", "works", "likes", "cat", "violin", "bakes", "bread"]
    llms = {"default": {"kind": "reply", "mode": "first"}} if mode == "llm" else {}
    with opener(tmp_path, _service(merge_threshold=0.5, neighbours=4), llms=llms) as m:
        given = []
        for i in range(40):
            dia = f"D{i // 10 + 1}:{i % 10}"
            given.append(dia)
            m.insert(" ".join(rng.choice(words) for _ in range(4)), metadata={"dia_ids": [dia]})
            held = [d for meta in _thoughts(m).values() for d in meta.get("dia_ids", [])]
            assert set(held) == set(given)
        report = m.service.report()
        assert report["runs"] > 0 and report["merged"] + report["forgotten"] > 0
        assert report["thoughts"] == m.collection.count(index=INDEX)


def test_parse_plan_and_helpers():
    group = [Thought("a", "Alice likes tea", {}), Thought("b", "Bob likes cats", {})]
    assert parse_plan('Sure: {"to_delete": ["alice likes tea."], "to_insert": ["Alice likes green tea"]} ok', group) == Plan(["a"], ["Alice likes green tea"])
    assert parse_plan('{"to_delete": [], "to_insert": []}', group).empty
    with pytest.raises(ValidationError, match="every thought"):
        parse_plan('{"to_delete": ["Alice likes tea", "Bob likes cats"]}', group)
    with pytest.raises(ValidationError, match="not JSON"):
        parse_plan("{to_delete: nope}", group)
    with pytest.raises(ValidationError, match="JSON object"):
        parse_plan('["a"]', group)
    new = Thought("n", "Alice likes tea", {}, 1.0)
    assert fallback_plan(new, [Thought("a", "x", {}, 0.95)], 0.9) == (Plan(["n"]), "a")
    assert fallback_plan(new, [Thought("a", "x", {}, 0.5)], 0.9) == (Plan(), None)
    meta = merged_metadata({"dia_ids": ["D1:1"], "k": 1}, [Thought("x", "t", {"dia_ids": ["D1:1", "D2:2"], "source": "s"})], ["dia_ids", "source"])
    assert meta == {"dia_ids": ["D1:1", "D2:2"], "k": 1, "source": ["s"], "merged_from": ["t"]}


class TestVectorHashDistilling(ServiceContract):
    """With distillation on (fallback merging only near-duplicates)."""

    @pytest.fixture
    def open_memory(self, opener):
        return lambda path: opener(path, {"kind": "vector_hash", "extract": False, "bits": 4, "tables": 8, "distill": {"merge_threshold": 0.98}})


# SmolLM2-135M (Q4_1, llama.cpp, temperature 0) on the distillation chat: it merged the two
# Caroline thoughts but also deleted the unrelated Melanie one (recorded with
# bench/bench_llm_steps.py); with the old one-message prompt it wrote prose lists, no JSON.
REAL_GROUP = ["Caroline went to a LGBTQ support group", "Melanie painted a lake sunrise", "Caroline attended an LGBTQ support group yesterday"]
REAL_REPLY = (
    '{"to_delete": ["Caroline went to a LGBTQ support group", "Melanie painted a lake sunrise"], '
    '"to_insert": ["Caroline attended an LGBTQ support group yesterday"]}'
)
# SmolLM2 on recorded LoCoMo thoughts: a thought split in two (neither half is in the group),
# and fragments proposed as merged facts
REAL_SPLIT = '{"to_delete": ["Caroline said", "How have you been"], "to_insert": ["Caroline said", "Gonna continue my education"]}'
REAL_PROSE = '"The thoughts to remove are:\n- Caroline went to a LGBTQ support group.\n- Melanie painted a lake sunrise.\n- The thoughts to insert are:'


def test_parse_plan_keeps_a_thought_the_model_deleted_without_cover():
    group = [Thought(str(i), t, {}) for i, t in enumerate(REAL_GROUP)]
    # its merged fact is the third thought, which stays: nothing to insert again
    assert parse_plan(REAL_REPLY, group) == Plan(["0"], [])
    with pytest.raises(ValidationError, match="JSON object"):
        parse_plan(REAL_PROSE, group)
    # merged facts must come from the group: the prompt's example, or anything made up, is dropped
    example = '{"to_delete": ["Caroline went to a LGBTQ support group"], "to_insert": ["Anna works as a baker at a bakery"]}'
    assert parse_plan(example, group) == Plan(["0"], [])  # still covered: the other Caroline thought stays
    with pytest.raises(ValidationError, match="no grounded change"):
        parse_plan('{"to_delete": ["Melanie painted a lake sunrise"], "to_insert": ["Anna works as a baker"]}', group)
    split = [Thought("h", "Caroline said How have you been", {}), Thought("e", "Caroline said Gonna continue my education", {})]
    with pytest.raises(ValidationError, match="no grounded change"):  # nothing of the group deleted; the facts are fragments or held already
        parse_plan(REAL_SPLIT, split)
    merged = '{"to_delete": ["Caroline said How have you been"], "to_insert": ["Caroline said How have you been and continues her education"]}'
    assert parse_plan(merged, split) == Plan(["h"], ["Caroline said How have you been and continues her education"])


def test_a_real_reply_through_the_service_never_loses_the_unrelated_thought(opener, tmp_path, reply_llm):
    with opener(tmp_path, _service(), llms={"default": {"kind": "reply", "reply": REAL_REPLY}}) as m:
        for i, text in enumerate(REAL_GROUP):
            m.insert(text, metadata={"dia_ids": [f"D1:{i}"]})
        thoughts = _thoughts(m)
        assert "Melanie painted a lake sunrise" in thoughts and "Caroline went to a LGBTQ support group" not in thoughts
        assert {d for meta in thoughts.values() for d in meta.get("dia_ids", [])} == {"D1:0", "D1:1", "D1:2"}
        sent = m.service.llms["default"].prompts[-1]
        assert [x["role"] for x in sent] == ["system", "user", "assistant", "user"]
