"""The ``intent`` stage: every classification rule, the per-intent actions, and the StageContract."""

from __future__ import annotations

import json

import pytest

from memcore import Collection, ConfigError, ValidationError
from memcore.plugin import PipelineContext
from memcore import Contribution, Hit, Query
from memcore.retrieval._intent_rules import classify, entities, question_word, time_expressions
from memcore.testing import StageContract, build_stage


# -- contract --------------------------------------------------------------------------------


class TestIntentContract(StageContract):
    @pytest.fixture(
        params=[
            {},
            {"time_field": "n", "half_life": 3},
            {"intents": {"default": {"match_weight": 0.5}, "factual": {"match_weight": 0.5}}, "normalize": "none"},
            {"name": "route"},
        ],
        ids=lambda p: json.dumps(p, sort_keys=True),
    )
    def stage(self, request):
        return build_stage("intent", **request.param)


class TestIntentContractTemporalQuery(TestIntentContract):
    query_text = "what did we do last week near the river"


class TestIntentContractEntityQuery(TestIntentContract):
    query_text = "tell me about Apple and the Harbor"


# -- rules ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, intent",
    [
        ("What did Alice do last week?", "temporal"),
        ("When did Caroline go to the support group?", "temporal"),
        ("what happened yesterday", "temporal"),
        ("the trip in 2023", "temporal"),
        ("meeting on 2024-03-16", "temporal"),
        ("meeting on 16/03/2024", "temporal"),
        ("she went there in March", "temporal"),
        ("she went there in May", "temporal"),
        ("anything on Friday", "temporal"),
        ("what year did he move", "temporal"),
        ("how long ago was the party", "temporal"),
        ("plans for this weekend", "temporal"),
        ("Who is Alice Smith?", "entity"),
        ("what does NASA do", "entity"),
        ("NASA budget", "entity"),
        ("tell me about Biscuit", "entity"),
        ("what may happen next", "factual"),
        ("May I have the notes", "default"),
        ("who won the game", "factual"),
        ("how do plants grow", "factual"),
        ("where is the key", "factual"),
        ("why is the sky blue", "factual"),
        ("which one is better", "factual"),
        ("pottery class", "default"),
        ("Alice's dog", "default"),  # a capitalised word that starts the sentence is not an entity
        ("", "default"),
        ("   ", "default"),
    ],
)
def test_classification_rules(text, intent):
    assert classify(text).name == intent


def test_temporal_rule_wins_over_entity_and_question():
    got = classify("What did Alice do last week?")
    assert got.as_dict() == {"name": "temporal", "terms": ["last week"], "times": ["last week"], "entities": ["Alice"], "question": "what"}


def test_time_expressions():
    assert time_expressions("On 2024-03-16 and 16/03/2024, in May 2023, last Monday, yesterday") == [
        "2024-03-16",
        "16/03/2024",
        "may",
        "2023",
        "last monday",
        "yesterday",
    ]
    assert time_expressions("the 1990s and sept") == ["1990s", "sept"]
    assert time_expressions("May we go") == []  # "may" only capitalised and not first
    assert time_expressions("a 12345 number") == []


def test_entities():
    assert entities("New York is big and Bob likes it") == ["New York", "Bob"]
    assert entities("I met Alice in Paris. Then Bob came") == ["Alice", "Paris", "Bob"]
    assert entities("Mr. Smith and Dr. Jones") == ["Mr Smith", "Dr Jones"]
    assert entities("what about Alice's cat and Alice") == ["Alice"]
    assert entities("IBM and NASA") == ["IBM", "NASA"]
    assert entities("in March on Monday I saw The end") == []
    assert entities("nothing here") == []


def test_question_word():
    assert question_word("and who said that") == "who"
    assert question_word("tell me") is None


# -- the stage -----------------------------------------------------------------------------

RECORDS = [
    {"id": "a", "text": "Alice moved to Paris last week", "metadata": {"ts": 30}},
    {"id": "b", "text": "the weather in Paris was rainy", "metadata": {"ts": 10}},
    {"id": "c", "text": "Bob met Alice at the museum", "metadata": {"ts": 20}},
    {"id": "d", "text": "a quiet day at home"},
]
BASE = {"b": 0.9, "d": 0.8, "c": 0.7, "a": 0.6}


@pytest.fixture
def collection():
    c = Collection.create()
    c.create_index("vector", "exact", space="default")
    c.insert(RECORDS)
    yield c
    c.close()


def run(collection, text, scores=BASE, extras=None, **options) -> PipelineContext:
    ctx = PipelineContext(collection, Query(text=text, k=4, extras=extras or {}))
    ctx.add_list("seed", [Hit(i, s, provenance=(Contribution("seed", r, s),)) for r, (i, s) in enumerate(scores.items(), start=1)])
    stage = build_stage("intent", **options)
    stage.check(collection)
    stage.run(ctx)
    return ctx


def test_entity_intent_boosts_hits_naming_the_entities(collection):
    ctx = run(collection, "where does Alice live", normalize="none", intents={"entity": {"match_weight": 1.0}})
    assert ctx.query.extras["intent"]["name"] == "entity"
    assert {h.id: h.score for h in ctx.current} == pytest.approx({"b": 0.9, "d": 0.8, "c": 1.7, "a": 1.6})
    assert [h.id for h in ctx.current] == ["c", "a", "b", "d"]
    assert all(h.source == "intent" and h.provenance[0].source == "seed" for h in ctx.current)


def test_entity_phrase_must_match_whole(collection):
    ctx = run(collection, "anything about Alice Paris", normalize="none", intents={"entity": {"match_weight": 1.0}})
    assert ctx.query.extras["intent"]["entities"] == ["Alice Paris"]
    assert {h.id: h.score for h in ctx.current}["a"] == pytest.approx(1.6)  # both words in a
    assert {h.id: h.score for h in ctx.current}["c"] == pytest.approx(0.7)  # only alice


def test_temporal_intent_matches_time_terms_and_recency(collection):
    ctx = run(
        collection,
        "what happened last week",
        normalize="none",
        time_field="ts",
        half_life=10,
        intents={"temporal": {"match_weight": 1.0, "recency_weight": 1.0}},
    )
    # "last week" only in a; ts 30 (newest) -> 1, 20 -> 0.5, 10 -> 0.25, d none -> 0
    assert {h.id: h.score for h in ctx.current} == pytest.approx({"a": 0.6 + 1 + 1, "c": 0.7 + 0.5, "b": 0.9 + 0.25, "d": 0.8})
    assert [h.id for h in ctx.current] == ["a", "c", "b", "d"]


def test_default_temporal_recency_needs_a_time_field(collection):
    # defaults: temporal match_weight 0.3, recency_weight 0.2 (inactive without time_field); minmax base
    ctx = run(collection, "when did it rain")
    assert ctx.query.extras["intent"]["name"] == "temporal"
    assert [h.id for h in ctx.current] == ["b", "d", "c", "a"]  # no time terms, no field: relevance kept
    assert [h.score for h in ctx.current] == [0.9, 0.8, 0.7, 0.6]


def test_factual_and_default_keep_relevance(collection):
    for text in ("who was at the museum", "rainy weather"):
        ctx = run(collection, text)
        assert [(h.id, h.score) for h in ctx.current] == list(BASE.items())
    assert run(collection, "who met Bob").query.extras["intent"]["name"] == "entity"
    assert run(collection, "who met him").query.extras["intent"]["name"] == "factual"


def test_configured_factual_action_uses_content_words(collection):
    ctx = run(collection, "who saw the museum", normalize="none", intents={"factual": {"match_weight": 1.0}})
    # content words {saw, museum}: c has museum -> +0.5
    assert {h.id: h.score for h in ctx.current} == pytest.approx({"b": 0.9, "d": 0.8, "c": 1.2, "a": 0.6})


def test_forced_intent(collection):
    # the rules say factual; forced to temporal, the recency action applies
    ctx = run(
        collection,
        "who was there",
        extras={"intent": {"name": "temporal"}},
        normalize="none",
        time_field="ts",
        half_life=10,
        intents={"temporal": {"match_weight": 0.0, "recency_weight": 1.0}},
    )
    assert ctx.query.extras["intent"]["name"] == "temporal"
    assert [h.id for h in ctx.current] == ["a", "c", "b", "d"]
    # forced to entity: the entities the rules found are the terms
    ctx = run(collection, "rainy in Paris", extras={"intent": "entity"}, normalize="none", intents={"entity": {"match_weight": 1.0}})
    assert ctx.query.extras["intent"]["terms"] == ["paris"]
    assert [h.id for h in ctx.current] == ["b", "a", "d", "c"]


@pytest.mark.parametrize("extras", [{"intent": {"name": "sad"}}, {"intent": 3}, {"intent": {"name": "entity", "x": 1}}])
def test_bad_forced_intent(collection, extras):
    with pytest.raises(ValidationError, match="intent"):
        run(collection, "x", extras=extras)


def test_the_callers_query_is_not_mutated(collection):
    query = Query(text="what did Alice do", k=3)
    ctx = PipelineContext(collection, query)
    build_stage("intent").run(ctx)
    assert query.extras == {} and ctx.query.extras["intent"]["name"] == "entity"


def test_partial_intent_settings_merge_over_defaults():
    stage = build_stage("intent", intents={"temporal": {"recency_weight": 0.9}})
    assert stage.config.intents["temporal"].match_weight == 0.3
    assert stage.config.intents["temporal"].recency_weight == 0.9
    assert stage.config.intents["entity"].match_weight == 0.3


@pytest.mark.parametrize(
    "options, match",
    [
        ({"intents": {"spatial": {}}}, "unknown intent"),
        ({"intents": {"entity": {"boost": 1}}}, "Extra inputs"),
        ({"intents": {"entity": {"match_weight": -1}}}, "greater than or equal"),
        ({"half_life": -3}, "greater than"),
        ({"normalize": "rank"}, "minmax"),
    ],
)
def test_config_errors(options, match):
    with pytest.raises(ConfigError, match=match):
        build_stage("intent", **options)
