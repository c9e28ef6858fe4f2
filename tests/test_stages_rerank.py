"""The ``rerank`` stage: each signal, its configuration errors, and the StageContract."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from memcore import Collection, ConfigError, ValidationError
from memcore.plugin import PipelineContext
from memcore import Contribution, Hit, Query
from memcore.plugin import minmax, term_overlap
from memcore.retrieval._stages import parse_time, recency_decay
from memcore.testing import StageContract, build_stage


# -- contract --------------------------------------------------------------------------------


class TestRerankContract(StageContract):
    @pytest.fixture(
        params=[
            {},
            {"keyword_weight": 0.5},
            {"keyword_weight": 0.3, "keyword_mode": "jaccard", "normalize": "none"},
            {"time_field": "n", "half_life": 4, "recency_weight": 0.5},
            {"time_field": "n", "half_life": 4, "recency_weight": 0.5, "reference": "now"},
            {"boosts": [{"where": {"parity": "odd"}, "boost": 0.5}]},
            {"boosts": [{"where": {"n": {"$gte": 10}}, "boost": 2.0}], "boost_mode": "multiply", "top_n": 3},
            {"keyword_weight": 0.2, "name": "rr", "top_n": 2},
        ],
        ids=lambda p: json.dumps(p, sort_keys=True),
    )
    def stage(self, request):
        return build_stage("rerank", **request.param)


# -- a small hand-made context ---------------------------------------------------------------

RECORDS = [
    {"id": "a", "text": "alice went hiking in the mountains", "metadata": {"ts": 100, "date": "2024-03-01", "speaker": "Alice"}},
    {"id": "b", "text": "bob bought a new bicycle", "metadata": {"ts": 300, "date": "2024-03-03T00:00:00Z", "speaker": "Bob"}},
    {"id": "c", "text": "alice and bob went hiking together", "metadata": {"ts": 200, "date": "2024-03-02", "speaker": "Bob"}},
    {"id": "d", "text": "the weather was sunny", "metadata": {"speaker": "Carol", "date": "not a date"}},
]


@pytest.fixture
def collection():
    c = Collection.create()
    c.create_index("vector", "exact", space="default")
    c.insert(RECORDS)
    yield c
    c.close()


def context(collection, scores: dict[str, float], text: str | None = "hiking", extras=None) -> PipelineContext:
    ctx = PipelineContext(collection, Query(text=text, k=4, extras=extras or {}))
    hits = []
    for rank, (rid, score) in enumerate(scores.items(), start=1):
        hits.append(Hit(rid, score, raw=score, source="seed", provenance=(Contribution("seed", rank, score),)))
    ctx.add_list("seed", hits)
    return ctx


def rerank(collection, scores, text="hiking", extras=None, **options) -> list[Hit]:
    ctx = context(collection, scores, text, extras)
    stage = build_stage("rerank", **options)
    stage.check(collection)
    stage.run(ctx)
    return ctx.current


BASE = {"a": 0.9, "b": 0.8, "c": 0.7, "d": 0.6}


def test_without_signals_the_list_passes_through_unchanged(collection):
    hits = rerank(collection, BASE)
    assert [(h.id, h.score, h.source) for h in hits] == [("a", 0.9, "seed"), ("b", 0.8, "seed"), ("c", 0.7, "seed"), ("d", 0.6, "seed")]
    assert [h.id for h in rerank(collection, BASE, top_n=2)] == ["a", "b"]


def test_keyword_overlap_query_fraction(collection):
    # content words {alice, bob, go, hiking} ("did", "and" are stopwords): a 2/4, b 1/4, c 3/4, d 0
    hits = rerank(collection, BASE, text="Did Alice and Bob go hiking?", keyword_weight=1.0, normalize="none")
    assert {h.id: h.score for h in hits} == pytest.approx({"a": 0.9 + 0.5, "b": 0.8 + 0.25, "c": 0.7 + 0.75, "d": 0.6})
    assert [h.id for h in hits] == ["c", "a", "b", "d"]
    # a query of stopwords only keeps them as its terms
    got = {h.id: h.score for h in rerank(collection, BASE, text="the", keyword_weight=1.0, normalize="none")}
    assert got == pytest.approx({"a": 1.9, "b": 0.8, "c": 0.7, "d": 1.6})


def test_keyword_overlap_jaccard(collection):
    hits = rerank(collection, BASE, text="bob bicycle", keyword_weight=1.0, keyword_mode="jaccard", normalize="none")
    got = {h.id: h.score for h in hits}
    # b: {bob, bought, a, new, bicycle} vs {bob, bicycle}: 2/5; c: {alice, and, bob, went, hiking, together}: 1/7
    assert got["b"] == pytest.approx(0.8 + 2 / 5)
    assert got["c"] == pytest.approx(0.7 + 1 / 7)
    assert got["a"] == pytest.approx(0.9) and got["d"] == pytest.approx(0.6)


def test_minmax_normalisation_is_the_default(collection):
    hits = rerank(collection, BASE, keyword_weight=0.1)
    got = {h.id: h.score for h in hits}
    # base (0.9, 0.8, 0.7, 0.6) -> (1, 2/3, 1/3, 0); "hiking" is in a and c
    assert got == pytest.approx({"a": 1.1, "b": 2 / 3, "c": 1 / 3 + 0.1, "d": 0.0})
    assert all(h.raw == BASE[h.id] for h in hits)  # raw keeps the incoming score


def test_recency_numbers_in_field_units(collection):
    hits = rerank(collection, BASE, time_field="ts", half_life=100, recency_weight=1.0, normalize="none")
    got = {h.id: h.score for h in hits}
    # reference = newest candidate (300): ages 200, 0, 100 -> 0.25, 1, 0.5; d has no ts -> 0
    assert got == pytest.approx({"a": 0.9 + 0.25, "b": 0.8 + 1.0, "c": 0.7 + 0.5, "d": 0.6})
    assert [h.id for h in hits] == ["b", "c", "a", "d"]


def test_recency_iso_strings_in_seconds(collection):
    day = 86400.0
    hits = rerank(collection, BASE, time_field="date", half_life=day, recency_weight=1.0, normalize="none")
    got = {h.id: h.score for h in hits}
    assert got == pytest.approx({"a": 0.9 + 0.25, "b": 0.8 + 1.0, "c": 0.7 + 0.5, "d": 0.6})  # "not a date" counts as missing


def test_recency_reference_from_the_query(collection):
    extras = {"recency": {"now": 400}}
    got = {h.id: h.score for h in rerank(collection, BASE, extras=extras, time_field="ts", half_life=100, recency_weight=1.0, normalize="none")}
    assert got["b"] == pytest.approx(0.8 + 0.5) and got["a"] == pytest.approx(0.9 + 0.125)
    # a reference before a record's time counts as age 0
    got = {
        h.id: h.score for h in rerank(collection, BASE, extras={"recency": {"now": 150}}, time_field="ts", half_life=100, recency_weight=1.0, normalize="none")
    }
    assert got["b"] == pytest.approx(1.8) and got["a"] == pytest.approx(0.9 + 0.5**0.5)
    iso = {"recency": {"now": "2024-03-04"}}
    got = {h.id: h.score for h in rerank(collection, BASE, extras=iso, time_field="date", half_life=86400, recency_weight=1.0, normalize="none")}
    assert got["b"] == pytest.approx(0.8 + 0.5)


@pytest.mark.parametrize("extras", [{"recency": 5}, {"recency": {"now": "yesterday"}}, {"recency": {"now": 1, "tz": "x"}}, {"recency": {"now": float("nan")}}])
def test_bad_recency_query_mode(collection, extras):
    with pytest.raises(ValidationError, match="recency"):
        rerank(collection, BASE, extras=extras, time_field="ts", recency_weight=1.0)


def test_reference_now_uses_the_wall_clock(collection):
    # timestamps of 1970: decayed to nothing against the wall clock
    got = {h.id: h.score for h in rerank(collection, BASE, time_field="ts", half_life=100, recency_weight=1.0, normalize="none", reference="now")}
    assert got == pytest.approx(BASE)


def test_additive_boosts(collection):
    boosts = [{"where": {"speaker": "Bob"}, "boost": 0.5}, {"where": {"ts": {"$gte": 300}}, "boost": 0.25}]
    hits = rerank(collection, BASE, boosts=boosts, normalize="none")
    assert {h.id: h.score for h in hits} == pytest.approx({"a": 0.9, "b": 0.8 + 0.75, "c": 0.7 + 0.5, "d": 0.6})
    assert [h.id for h in hits] == ["b", "c", "a", "d"]


def test_multiplicative_boosts(collection):
    boosts = [{"where": {"speaker": "Bob"}, "boost": 2.0}, {"where": {"speaker": {"$in": ["Bob", "Carol"]}}, "boost": 0.5}]
    got = {h.id: h.score for h in rerank(collection, BASE, boosts=boosts, boost_mode="multiply", normalize="none", keyword_weight=1.0)}
    # keyword first ("hiking" in a and c), then x2 x0.5 for Bob, x0.5 for Carol
    assert got == pytest.approx({"a": 1.9, "b": 0.8, "c": 1.7, "d": 0.3})


def test_ties_are_broken_by_id_and_provenance_is_kept(collection):
    hits = rerank(collection, {"d": 0.5, "c": 0.5, "b": 0.5, "a": 0.5}, text="nothing matches", keyword_weight=1.0)
    assert [h.id for h in hits] == ["a", "b", "c", "d"]
    assert all(h.source == "rerank" and h.provenance[0].source == "seed" for h in hits)
    assert {h.id: h.provenance[0].rank for h in hits} == {"d": 1, "c": 2, "b": 3, "a": 4}


def test_query_without_text_passes_through_a_keyword_only_rerank(collection):
    ctx = PipelineContext(collection, Query(vectors={"default": np.ones(collection.spaces["default"].dim)}, k=4))
    # equal scores in an order that is not the ids' order: a re-sort would move them
    ctx.add_list("seed", [Hit("b", 0.2, source="seed"), Hit("a", 0.2, source="seed"), Hit("c", 0.1, source="seed")])
    stage = build_stage("rerank", keyword_weight=1.0)
    stage.run(ctx)
    assert [(h.id, h.score, h.source) for h in ctx.current] == [("b", 0.2, "seed"), ("a", 0.2, "seed"), ("c", 0.1, "seed")]
    # with another signal configured the stage re-scores (and the keyword part adds 0)
    stage = build_stage("rerank", keyword_weight=1.0, boosts=[{"where": {"speaker": "Carol"}, "boost": 0.5}])
    stage.run(ctx)
    assert [(h.id, h.score) for h in ctx.current] == [("a", 1.0), ("b", 1.0), ("c", 0.0)]


def test_deleted_records_get_no_signal(collection):
    ctx = context(collection, BASE)
    collection.delete("a")
    stage = build_stage("rerank", keyword_weight=1.0, boosts=[{"where": {"speaker": "Alice"}, "boost": 5}], normalize="none")
    stage.run(ctx)
    assert {h.id: h.score for h in ctx.current}["a"] == pytest.approx(0.9)


@pytest.mark.parametrize(
    "options, match",
    [
        ({"recency_weight": 0.5}, "time_field"),
        ({"boosts": [{"where": {"x": 1}, "boost": 0}], "boost_mode": "multiply"}, "multiply"),
        ({"boosts": [{"where": {}, "boost": 1}]}, "non-empty"),
        ({"boosts": [{"where": {"x": {"$bad": 1}}, "boost": 1}]}, "bad"),
        ({"boosts": [{"where": {"x": 1}, "boost": 1, "extra": 2}]}, "Extra inputs"),
        ({"keyword_weight": -1}, "greater than or equal"),
        ({"half_life": 0}, "greater than"),
        ({"normalize": "zscore"}, "minmax"),
        ({"keyword_mode": "bm25"}, "query_fraction"),
        ({"top_n": 0}, "greater than"),
        ({"wieght": 1}, "wieght: unknown option; valid options"),
    ],
)
def test_config_errors(options, match):
    with pytest.raises(ConfigError, match=match):
        build_stage("rerank", **options)


# -- signals -------------------------------------------------------------------------------


def test_signal_helpers():
    assert minmax(np.array([2.0, 4.0, 3.0])).tolist() == [0.0, 1.0, 0.5]
    assert minmax(np.array([3.0, 3.0])).tolist() == [1.0, 1.0]
    assert parse_time(5) == 5.0 and parse_time(2.5) == 2.5
    assert parse_time("1970-01-02") == 86400.0
    assert parse_time("1970-01-01T01:00:00+01:00") == 0.0
    assert parse_time("1970-01-01T00:00:10Z") == 10.0
    for bad in (None, True, "soon", "", float("inf"), [1]):
        assert math.isnan(parse_time(bad))
    decay = recency_decay(np.array([0.0, 10.0, np.nan]), 10.0, 20.0)
    assert decay.tolist() == [0.25, 0.5, 0.0]
    assert recency_decay(np.array([1.0]), 1.0, math.nan).tolist() == [0.0]
    assert term_overlap(set(), [{"a"}], "jaccard").tolist() == [0.0]
    assert term_overlap({"a", "b"}, [{"a"}, {"a", "b", "c"}], "query_fraction").tolist() == [0.5, 1.0]


def test_repeated_ids_keep_their_first_occurrence(collection):
    ctx = PipelineContext(collection, Query(text="hiking", k=4))
    seed = [Hit("a", 0.9, provenance=(Contribution("seed", 1, 0.9),)), Hit("c", 0.5, provenance=(Contribution("seed", 2, 0.5),))]
    ctx.add_list("seed", seed)
    ctx.current = [seed[0], seed[1], Hit("a", 0.1, provenance=(Contribution("seed", 1, 0.9),))]
    stage = build_stage("rerank", keyword_weight=1.0, normalize="none")
    stage.run(ctx)
    assert [(h.id, h.score) for h in ctx.current] == [("a", pytest.approx(1.9)), ("c", pytest.approx(1.5))]


def test_token_sets_are_cached_for_short_texts_only():
    from memcore.model import _text as text_module

    short = "Alice met Bob at the Lisbon café"
    long = "word " * (text_module.CACHED_TEXT_CHARS // 5 + 1) + "tail"
    before = text_module._cached_token_set.cache_info().currsize
    first, again = text_module.token_sets([short, short])
    assert first == {"alice", "met", "bob", "at", "the", "lisbon", "café"} and again is first
    assert text_module.token_set(long) == {"word", "tail"}
    assert text_module._cached_token_set.cache_info().currsize <= before + 1  # the long text was not cached
    assert text_module.token_sets([None, ""]) == [frozenset(), frozenset()]
