"""MMR selection, similarities, the Jaccard fallback and the stage's settings."""

from __future__ import annotations

import math

import numpy as np
import pytest
from memcore import Collection, ConfigError, Contribution, Hit, Query, ValidationError
from memcore.plugin import PipelineContext
from memcore.embedders._embedder import Space
from memcore.testing import build_stage

from memcore_mmr import CandidateSimilarity, MMRConfig, MMRStage, TokenSets, mmr_select, tokenize


def matrix_column(sim: np.ndarray):
    return lambda j: sim[:, j]


def brute_force_mmr(rel, sim, top_n, lam, floor=True):
    """The formula, written out with Python loops over pairs (the test oracle); without
    ``floor`` it is Haystack's: first the most relevant, then max similarity as is."""
    selected, values = [], []
    for _ in range(min(top_n, len(rel))):
        best, best_i = None, None
        for i in range(len(rel)):
            if i in selected:
                continue
            if not selected:
                redundancy = 0.0
            else:
                redundancy = max(([0.0] if floor else []) + [sim[i][s] for s in selected])
            value = lam * rel[i] - (1 - lam) * redundancy
            if best is None or value > best or (value == best and rel[i] > rel[best_i]):
                best, best_i = value, i
        selected.append(best_i)
        values.append(best)
    return selected, values


# -- selection ---------------------------------------------------------------------------------


def test_hand_computed_example():
    # rel a .9, b .85, c .5; sim(a,b) .95, sim(a,c) .1, sim(b,c) .2; lambda .5
    rel = np.array([0.9, 0.85, 0.5])
    sim = np.array([[1.0, 0.95, 0.1], [0.95, 1.0, 0.2], [0.1, 0.2, 1.0]])
    picks, values = mmr_select(rel, matrix_column(sim), 3, 0.5)
    # a: .45; then b: .425 - .475 = -.05, c: .25 - .05 = .2 -> c; then b: .425 - .5 * .95 = -.05
    assert picks == [0, 2, 1]
    assert values == pytest.approx([0.45, 0.2, -0.05])


def test_lambda_one_reproduces_the_relevance_order():
    rng = np.random.default_rng(0)
    rel = rng.random(30)
    sim = rng.random((30, 30))
    picks, values = mmr_select(rel, matrix_column(sim), 30, 1.0)
    assert picks == sorted(range(30), key=lambda i: -rel[i])
    assert values == pytest.approx(sorted(rel, reverse=True))


def test_lambda_zero_picks_the_most_relevant_then_the_least_redundant():
    rel = np.array([1.0, 0.9, 0.8, 0.3])
    sim = np.array(
        [
            [1.0, 0.9, 0.5, 0.1],
            [0.9, 1.0, 0.4, 0.2],
            [0.5, 0.4, 1.0, 0.6],
            [0.1, 0.2, 0.6, 1.0],
        ]
    )
    picks, values = mmr_select(rel, matrix_column(sim), 4, 0.0)
    # 0 first; redundancy to {0}: 1 .9, 2 .5, 3 .1 -> 3; to {0, 3}: 1 .9, 2 .6 -> 2; then 1
    assert picks == [0, 3, 2, 1]
    assert values == pytest.approx([0.0, -0.1, -0.6, -0.9])


def test_near_duplicates_are_spread_out():
    # three clusters of near-duplicates; relevance lists cluster A first
    rng = np.random.default_rng(1)
    centres = np.eye(3)
    vectors = np.concatenate([c + 0.01 * rng.standard_normal((4, 3)) for c in centres])
    rel = np.array([0.95, 0.94, 0.93, 0.92, 0.6, 0.59, 0.58, 0.57, 0.5, 0.49, 0.48, 0.47])
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    picks, _ = mmr_select(rel, matrix_column(unit @ unit.T), 3, 0.5)
    assert sorted(p // 4 for p in picks) == [0, 1, 2]  # one of each cluster
    relevance_only, _ = mmr_select(rel, matrix_column(unit @ unit.T), 3, 1.0)
    assert [p // 4 for p in relevance_only] == [0, 0, 0]


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("lam", [0.0, 0.3, 0.5, 0.9])
def test_without_floor_matches_haystacks_formula(seed, lam):
    rng = np.random.default_rng(100 + seed)
    n = int(rng.integers(1, 25))
    vectors = rng.standard_normal((n, 6))
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    sim, rel = unit @ unit.T, rng.random(n)
    picks, values = mmr_select(rel, matrix_column(sim), n, lam, floor=False)
    expected_picks, expected_values = brute_force_mmr(rel.tolist(), sim.tolist(), n, lam, floor=False)
    assert picks == expected_picks
    assert values == pytest.approx(expected_values)


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("lam", [0.0, 0.3, 0.5, 0.9])
def test_matches_the_formula_and_values_never_increase(seed, lam):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 25))
    vectors = rng.standard_normal((n, 6))
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    sim = unit @ unit.T  # includes negative cosines
    rel = rng.random(n)
    top_n = int(rng.integers(1, n + 3))
    picks, values = mmr_select(rel, matrix_column(sim), top_n, lam)
    expected_picks, expected_values = brute_force_mmr(rel.tolist(), sim.tolist(), top_n, lam)
    assert picks == expected_picks
    assert values == pytest.approx(expected_values)
    assert all(a >= b - 1e-12 for a, b in zip(values, values[1:]))
    assert len(picks) == min(top_n, n) and len(set(picks)) == len(picks)


def test_negative_similarity_is_no_bonus():
    # b is anti-similar to a: its redundancy is 0, not -1 (Haystack would add (1 - lambda))
    rel = np.array([1.0, 0.5, 0.6])
    sim = np.array([[1.0, -1.0, 0.0], [-1.0, 1.0, 0.0], [0.0, 0.0, 1.0]])
    picks, values = mmr_select(rel, matrix_column(sim), 3, 0.5)
    assert picks == [0, 2, 1] and values == pytest.approx([0.5, 0.3, 0.25])
    # Haystack's formula: b's redundancy is -1, a bonus of 0.5 that lifts it above the first pick
    picks, values = mmr_select(rel, matrix_column(sim), 3, 0.5, floor=False)
    assert picks == [0, 1, 2] and values == pytest.approx([0.5, 0.75, 0.3])


def test_ties_prefer_relevance_then_position():
    rel = np.array([0.5, 0.5, 0.7])
    picks, _ = mmr_select(rel, matrix_column(np.eye(3)), 3, 0.0)
    assert picks == [2, 0, 1]


def test_empty_and_top_n():
    assert mmr_select(np.array([]), lambda j: np.array([]), 5, 0.5) == ([], [])
    picks, _ = mmr_select(np.array([0.1, 0.3, 0.2]), matrix_column(np.eye(3)), 2, 0.5)
    assert picks == [1, 2]


# -- similarities ------------------------------------------------------------------------------


def test_tokens_and_jaccard_by_hand():
    assert tokenize("Alice's cat, the CAT!") == {"alice", "s", "cat", "the"}
    tokens = TokenSets(["red apple pie", "red apple", "green pear", None, "Pie, APPLE and red"])
    # |{red, apple} & {red, apple, pie}| / |union| = 2/3; "red apple pie" vs "pie apple and red" = 3/4
    assert tokens.column(0).tolist() == pytest.approx([1.0, 2 / 3, 0.0, 0.0, 3 / 4])
    assert tokens.column(3).tolist() == [0.0] * 5  # no text: no tokens
    assert tokens.to_tokens({"apple", "kiwi"}).tolist() == pytest.approx([1 / 4, 1 / 3, 0.0, 0.0, 1 / 5])


def test_candidate_similarity_mixes_cosine_and_jaccard():
    vectors = np.array([[1.0, 0.0], [0.0, 0.0], [3.0, 4.0], [0.0, 2.0]])
    present = np.array([True, False, True, True])
    tokens = TokenSets(["a b", "a b c", "c d", "d"])
    sim = CandidateSimilarity(vectors, present, tokens)
    # row 0 (vector) against: 0 cos 1; 1 no vector -> J(ab, abc) = 2/3; 2 cos .6; 3 cos 0
    assert sim.column(0).tolist() == pytest.approx([1.0, 2 / 3, 0.6, 0.0])
    # row 1 (no vector): Jaccard to everyone
    assert sim.column(1).tolist() == pytest.approx([2 / 3, 1.0, 1 / 4, 0.0])
    rel = sim.to_query(np.array([0.0, 5.0]), "c")
    assert rel.tolist() == pytest.approx([0.0, 1 / 3, 0.8, 1.0])


def test_candidate_similarity_zero_vector_is_similar_to_nothing():
    sim = CandidateSimilarity(np.array([[0.0, 0.0], [1.0, 0.0]]), np.array([True, True]))
    assert sim.column(0).tolist() == [0.0, 0.0]
    assert sim.to_query(np.array([1.0, 0.0]), None).tolist() == [0.0, 1.0]


# -- the stage on a collection ---------------------------------------------------------------

DUPLICATES = [
    ("a1", "the red fox jumps over the lazy dog"),
    ("a2", "the red fox jumps over the lazy dog again"),
    ("a3", "the red fox jumps over a lazy dog"),
    ("b1", "a red kite flies over the hills"),
    ("c1", "the fox den is hidden under the old oak"),
    ("d1", "stock markets fell sharply today"),
]


@pytest.fixture
def collection():
    coll = Collection.create()
    coll.create_index("vector", "exact", space="default")
    coll.insert([{"id": i, "text": t} for i, t in DUPLICATES])
    yield coll
    coll.close()


def run(collection, stage, text="red fox over the lazy dog", k=3, **query):
    ctx = PipelineContext(collection, Query(text=text, k=k, **query))
    hits = collection.search_index("vector", ctx.query, 6)
    ctx.add_list("vector", hits)
    stage.run(ctx)
    return ctx


def test_stage_spreads_near_duplicate_records(collection):
    ctx = run(collection, build_stage("mmr", **{"lambda": 1.0}))
    relevance_order = [h.id for h in ctx.current]
    assert relevance_order == [h.id for h in ctx.lists["vector"][:3]]
    assert sorted(relevance_order) == ["a1", "a2", "a3"]  # the near-duplicates lead by relevance
    diverse = run(collection, build_stage("mmr", **{"lambda": 0.5})).current
    assert diverse[0].id == "a1" and {h.id for h in diverse[1:]}.isdisjoint({"a2", "a3"})


def test_stage_output_scores_raw_provenance(collection):
    ctx = run(collection, build_stage("mmr", **{"lambda": 0.7, "top_n": 4}))
    by_id = {h.id: h for h in ctx.lists["vector"]}
    hits = ctx.current
    assert len(hits) == 4 and all(h.source == "mmr" for h in hits)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert hits[0].score == pytest.approx(0.7 * by_id[hits[0].id].score, rel=1e-6)  # first: lambda * cosine
    for hit in hits:
        assert hit.raw == by_id[hit.id].score
        assert hit.provenance == (Contribution("vector", [h.id for h in ctx.lists["vector"]].index(hit.id) + 1, by_id[hit.id].score),)
    assert all(h.source == "vector" for h in ctx.lists["vector"])  # inputs untouched


def test_relevance_from_stored_vectors_equals_the_cosine_of_the_index(collection):
    # lambda 1: MMR value = cosine(query, stored vector) = the exact index's cosine score
    ctx = run(collection, build_stage("mmr", **{"lambda": 1.0, "top_n": 6}))
    by_id = {h.id: h.score for h in ctx.lists["vector"]}
    assert [(h.id, pytest.approx(by_id[h.id], abs=1e-6)) for h in ctx.current] == [(h.id, h.score) for h in ctx.current]


def test_relevance_score_uses_normalised_incoming_scores(collection):
    ctx = PipelineContext(collection, Query(text="anything", k=3))
    ctx.add_list(
        "given", [Hit(i, s, source="given", provenance=(Contribution("given", r, s),)) for r, (i, s) in enumerate([("d1", 9.0), ("b1", 5.0), ("c1", 1.0)], 1)]
    )
    build_stage("mmr", **{"lambda": 1.0, "relevance": "score"}).run(ctx)
    assert [(h.id, h.score) for h in ctx.current] == [("d1", 1.0), ("b1", 0.5), ("c1", 0.0)]


def test_top_n_defaults_to_query_k_and_fetch_k_limits_candidates(collection):
    assert len(run(collection, build_stage("mmr"), k=2).current) == 2
    assert len(run(collection, build_stage("mmr", top_n=5), k=2).current) == 5
    limited = run(collection, build_stage("mmr", fetch_k=2, top_n=5), k=5)
    assert [h.id for h in limited.current] == [h.id for h in limited.lists["vector"][:2]]


def test_empty_working_list(collection):
    ctx = PipelineContext(collection, Query(text="x", k=3))
    build_stage("mmr").run(ctx)
    assert ctx.current == []


def side_collection(with_side: set[str]) -> Collection:
    base = Collection.create()
    spaces = {**base.spaces, "side": Space("side", 2, None, "none")}
    base.close()
    coll = Collection.create(spaces=spaces)
    coll.create_index("vector", "exact", space="default")
    side = {"a1": [1.0, 0.0], "a2": [0.0, 1.0], "a3": [1.0, 0.1], "b1": [0.0, 1.0], "c1": [1.0, 1.0], "d1": [-1.0, 0.0]}
    coll.insert([{"id": i, "text": t, **({"vectors": {"side": side[i]}} if i in with_side else {})} for i, t in DUPLICATES])
    return coll


def test_jaccard_fallback_when_no_record_has_a_vector_in_the_space():
    coll = side_collection(set())
    try:
        query = "red fox over the lazy dog"
        ctx = run(coll, build_stage("mmr", space="side", **{"lambda": 1.0, "top_n": 6}), text=query)
        q = tokenize(query)
        expected = {i: len(q & tokenize(t)) / len(q | tokenize(t)) for i, t in DUPLICATES}
        assert [h.score for h in ctx.current] == pytest.approx(sorted(expected.values(), reverse=True))
        for hit in ctx.current:
            assert hit.score == pytest.approx(expected[hit.id])
        diverse = run(coll, build_stage("mmr", space="side", **{"lambda": 0.5}), text=query).current
        assert diverse[0].id == "a1" and {"a2", "a3"}.isdisjoint(h.id for h in diverse[1:])
    finally:
        coll.close()


def test_mixed_vectors_and_jaccard():
    coll = side_collection({"a1", "b1", "c1"})
    try:
        ctx = PipelineContext(coll, Query(text="red fox", k=6, vectors={"side": np.array([1.0, 0.0], dtype=np.float32)}))
        ctx.add_list("vector", coll.search_index("vector", ctx.query, 6))
        build_stage("mmr", space="side", **{"lambda": 1.0, "top_n": 6}).run(ctx)
        got = {h.id: h.score for h in ctx.current}
        q = tokenize("red fox")
        assert got["a1"] == pytest.approx(1.0)  # cosine to the query's side vector
        assert got["b1"] == pytest.approx(0.0, abs=1e-9)
        assert got["c1"] == pytest.approx(1 / math.sqrt(2))
        for rid in ("a2", "a3", "d1"):  # no side vector: Jaccard to the query text
            text = dict(DUPLICATES)[rid]
            assert got[rid] == pytest.approx(len(q & tokenize(text)) / len(q | tokenize(text)))
    finally:
        coll.close()


def test_query_without_text_or_vector_for_the_space_is_a_validation_error():
    coll = side_collection({"a1"})
    try:
        ctx = PipelineContext(coll, Query(vectors={"default": np.ones(256, dtype=np.float32)}, k=3))
        ctx.add_list("vector", coll.search_index("vector", ctx.query, 6))
        with pytest.raises(ValidationError, match='relevance = "score"'):
            build_stage("mmr", space="side").run(ctx)
        build_stage("mmr", space="side", relevance="score").run(ctx)  # works on the scores
        assert len(ctx.current) == 3
    finally:
        coll.close()


# -- settings ----------------------------------------------------------------------------------


@pytest.mark.parametrize("key", ["lambda", "lambda_", "lambda_param"])
def test_lambda_spellings(key):
    assert build_stage("mmr", **{key: 0.25}).config.lambda_ == 0.25
    assert MMRConfig.model_validate({key: 0.25}).lambda_ == 0.25


def test_defaults():
    config = MMRStage().config
    assert (config.lambda_, config.top_n, config.fetch_k, config.space, config.relevance, config.redundancy_floor) == (
        0.5,
        None,
        None,
        "default",
        "similarity",
        True,
    )
    assert config.model_dump(by_alias=True)["lambda"] == 0.5


@pytest.mark.parametrize(
    ("options", "where"),
    [
        ({"lambda": 1.5}, "lambda"),
        ({"lambda": -0.1}, "lambda"),
        ({"lambda": math.nan}, "lambda"),
        ({"top_n": 0}, "top_n"),
        ({"fetch_k": -3}, "fetch_k"),
        ({"relevance": "bm25"}, "relevance"),
        ({"lamda": 0.5}, "lamda"),
        ({"lambda": 0.5, "lambda_": 0.4}, "lambda_"),
    ],
)
def test_bad_settings_are_config_errors(options, where):
    with pytest.raises(ConfigError) as info:
        build_stage("mmr", **options)
    assert info.value.location == f"pipeline[0].{where}"


def test_unknown_space_fails_the_check():
    coll = Collection.create()
    try:
        with pytest.raises(ConfigError, match="no embedding space 'dense'"):
            build_stage("mmr", space="dense").check(coll)
        build_stage("mmr").check(coll)
    finally:
        coll.close()


def test_no_vector_in_the_space_and_no_query_text_is_a_validation_error():
    coll = side_collection(set())
    try:
        ctx = PipelineContext(coll, Query(vectors={"default": np.ones(256, dtype=np.float32)}, k=3))
        ctx.add_list("vector", coll.search_index("vector", ctx.query, 6))
        with pytest.raises(ValidationError, match="no hit has a vector in space 'side' and the query has no text"):
            build_stage("mmr", space="side").run(ctx)
    finally:
        coll.close()


def test_repeated_ids_in_the_working_list_are_selected_once(collection):
    ctx = PipelineContext(collection, Query(text="red fox", k=6))
    hits = collection.search_index("vector", ctx.query, 3)
    ctx.add_list("vector", hits)
    ctx.current = hits + hits
    build_stage("mmr", top_n=6).run(ctx)
    assert sorted(h.id for h in ctx.current) == sorted(h.id for h in hits)


def test_run_refuses_an_undeclared_space(collection):
    ctx = PipelineContext(collection, Query(text="red fox", k=3))
    ctx.add_list("vector", collection.search_index("vector", ctx.query, 3))
    with pytest.raises(ConfigError, match="no embedding space 'dense'"):
        build_stage("mmr", space="dense").run(ctx)
