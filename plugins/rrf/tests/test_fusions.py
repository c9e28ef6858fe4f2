"""Hand-computed values of weighted, dbsf and union on small lists, edge cases and bad input."""

from __future__ import annotations

import math

import pytest
from memcore import Collection, ConfigError, Contribution, Hit, ValidationError

from memcore_rrf import DBSFConfig, DistributionBasedFusion, UnionConfig, UnionFusion, WeightedConfig, WeightedFusion


def ranked(name: str, pairs: list[tuple[str, float]]) -> list[Hit]:
    """A ranked list as a recall stage makes it (score, raw, provenance)."""
    return [Hit(rid, s, raw=s, source=name, provenance=(Contribution(name, r, s),)) for r, (rid, s) in enumerate(pairs, start=1)]


# A: x 3, y 2, z 1 (mean 2, population sigma sqrt(2/3), sample sigma 1)
# B: y 10, w 6      (mean 8, population sigma 2, sample sigma sqrt(8))
LISTS = {"A": ranked("A", [("x", 3.0), ("y", 2.0), ("z", 1.0)]), "B": ranked("B", [("y", 10.0), ("w", 6.0)])}
S15 = math.sqrt(1.5)  # (3 - 2) / sqrt(2/3)


def scores(hits: list[Hit]) -> list[tuple[str, float]]:
    return [(h.id, h.score) for h in hits]


def assert_fused(hits: list[Hit], expected: list[tuple[str, float]]) -> None:
    assert [h.id for h in hits] == [rid for rid, _ in expected], scores(hits)
    for hit, (_, value) in zip(hits, expected):
        assert hit.score == pytest.approx(value, abs=1e-12), scores(hits)
        assert hit.raw == hit.score


# -- weighted --------------------------------------------------------------------------------


def test_weighted_minmax_default_weights_sum_to_one():
    # minmax: A -> x 1, y 0.5, z 0; B -> y 1, w 0; weights 1/2 each
    assert_fused(WeightedFusion().fuse(LISTS, 10), [("y", 0.75), ("x", 0.5), ("w", 0.0), ("z", 0.0)])


def test_weighted_minmax_with_weights():
    # A weighs 3, B 1 -> 0.75 / 0.25: x 0.75, y 0.75*0.5 + 0.25*1 = 0.625
    fusion = WeightedFusion(WeightedConfig(weights={"A": 3.0, "B": 1.0}))
    assert_fused(fusion.fuse(LISTS, 10), [("x", 0.75), ("y", 0.625), ("w", 0.0), ("z", 0.0)])
    raw_weights = WeightedFusion(WeightedConfig(weights={"A": 3.0}, normalize_weights=False))
    assert_fused(raw_weights.fuse(LISTS, 10), [("x", 3.0), ("y", 2.5), ("w", 0.0), ("z", 0.0)])


def test_weighted_zscore_population_and_sample():
    population = WeightedFusion(WeightedConfig(normalization="zscore"))
    # A: z = (s - 2) / sqrt(2/3); B: z = (s - 8) / 2; halved by the weights
    assert_fused(population.fuse(LISTS, 10), [("x", S15 / 2), ("y", 0.5), ("w", -0.5), ("z", -S15 / 2)])
    sample = WeightedFusion(WeightedConfig(normalization="zscore", std="sample"))
    # A: sigma 1; B: sigma sqrt(8) -> y = 0.5 * 2 / sqrt(8)
    assert_fused(sample.fuse(LISTS, 10), [("x", 0.5), ("y", 1 / math.sqrt(8)), ("w", -1 / math.sqrt(8)), ("z", -0.5)])


def test_weighted_none_sums_raw_scores():
    fusion = WeightedFusion(WeightedConfig(normalization="none", normalize_weights=False))
    assert_fused(fusion.fuse(LISTS, 10), [("y", 12.0), ("w", 6.0), ("x", 3.0), ("z", 1.0)])


def test_missing_from_a_list_contributes_nothing():
    # w is only in B: its score is B's share alone, not B's plus some value from A
    fusion = WeightedFusion(WeightedConfig(normalization="none", weights={"A": 1.0, "B": 1.0}))
    assert dict(scores(fusion.fuse(LISTS, 10)))["w"] == pytest.approx(6.0 / 2)


# -- dbsf ------------------------------------------------------------------------------------


def test_dbsf_values():
    # (s - (mean - 3 sigma)) / (6 sigma) = 0.5 + z / 6, summed over lists (weights 1)
    expected = [("y", 0.5 + (0.5 + 2 / 12)), ("x", 0.5 + S15 / 6), ("w", 4 / 12), ("z", 0.5 - S15 / 6)]
    assert_fused(DistributionBasedFusion().fuse(LISTS, 10), expected)


def test_dbsf_weights_are_multipliers():
    fusion = DistributionBasedFusion(DBSFConfig(weights={"A": 2.0, "B": 0.5}))
    expected = [("x", 2 * (0.5 + S15 / 6)), ("y", 2 * 0.5 + 0.5 * (0.5 + 2 / 12)), ("z", 2 * (0.5 - S15 / 6)), ("w", 0.5 * 4 / 12)]
    assert_fused(fusion.fuse(LISTS, 10), expected)


def test_dbsf_clip_only_changes_values_beyond_three_sigma():
    # ten zeros and one 1: mean 1/11, population sigma sqrt(10)/11, so the 1 sits sqrt(10) > 3 sigmas up
    outlier = {"C": ranked("C", [("o", 1.0)] + [(f"n{i}", 0.0) for i in range(10)])}
    plain = dict(scores(DistributionBasedFusion().fuse(outlier, 20)))
    clipped = dict(scores(DistributionBasedFusion(DBSFConfig(clip=True)).fuse(outlier, 20)))
    assert plain["o"] == pytest.approx(0.5 + math.sqrt(10) / 6)
    assert clipped["o"] == 1.0
    assert plain["n0"] == clipped["n0"] == pytest.approx(0.5 - 1 / (6 * math.sqrt(10)))


# -- union -----------------------------------------------------------------------------------


def test_union_minmax_ties_broken_by_id():
    assert_fused(UnionFusion().fuse(LISTS, 10), [("x", 1.0), ("y", 1.0), ("w", 0.0), ("z", 0.0)])


def test_union_raw_scores_keep_the_best():
    fusion = UnionFusion(UnionConfig(normalization="none"))
    assert_fused(fusion.fuse(LISTS, 10), [("y", 10.0), ("w", 6.0), ("x", 3.0), ("z", 1.0)])


def test_union_dbsf_is_haystacks_distribution_based_rank_fusion():
    # normalise each list with mean +- 3 sigma, concatenate, duplicates keep their maximum
    fusion = UnionFusion(UnionConfig(normalization="dbsf"))
    expected = [("x", 0.5 + S15 / 6), ("y", 0.5 + 2 / 12), ("w", 4 / 12), ("z", 0.5 - S15 / 6)]
    assert_fused(fusion.fuse(LISTS, 10), expected)


def test_union_weights_scale_before_the_max():
    fusion = UnionFusion(UnionConfig(normalization="none", weights={"B": 0.1}))
    assert_fused(fusion.fuse(LISTS, 10), [("x", 3.0), ("y", 2.0), ("z", 1.0), ("w", 0.6)])


# -- shared behaviour ------------------------------------------------------------------------

ALL = [
    pytest.param(lambda: WeightedFusion(), id="weighted-minmax"),
    pytest.param(lambda: WeightedFusion(WeightedConfig(normalization="zscore")), id="weighted-zscore"),
    pytest.param(lambda: WeightedFusion(WeightedConfig(normalization="dbsf")), id="weighted-dbsf"),
    pytest.param(lambda: WeightedFusion(WeightedConfig(normalization="none")), id="weighted-none"),
    pytest.param(lambda: DistributionBasedFusion(), id="dbsf"),
    pytest.param(lambda: DistributionBasedFusion(DBSFConfig(std="sample")), id="dbsf-sample"),
    pytest.param(lambda: UnionFusion(), id="union"),
]


@pytest.mark.parametrize("make", ALL)
def test_provenance_keeps_every_rank_and_score(make):
    hits = {h.id: h for h in make().fuse(LISTS, 10)}
    assert hits["y"].provenance == (Contribution("A", 2, 2.0), Contribution("B", 1, 10.0))
    assert hits["w"].provenance == (Contribution("B", 2, 6.0),)
    assert {h.source for h in hits.values()} == {make().config.kind}


@pytest.mark.parametrize(
    ("make", "value"),
    [
        pytest.param(lambda: WeightedFusion(WeightedConfig(normalize_weights=False)), 1.0, id="minmax->1"),
        pytest.param(lambda: WeightedFusion(WeightedConfig(normalization="zscore")), 0.0, id="zscore->0"),
        pytest.param(lambda: WeightedFusion(WeightedConfig(normalization="zscore", std="sample")), 0.0, id="zscore-sample->0"),
        pytest.param(lambda: DistributionBasedFusion(), 0.5, id="dbsf->0.5"),
        pytest.param(lambda: DistributionBasedFusion(DBSFConfig(std="sample")), 0.5, id="dbsf-sample->0.5"),
        pytest.param(lambda: UnionFusion(), 1.0, id="union-minmax->1"),
    ],
)
def test_all_equal_scores_and_single_hits_are_finite(make, value):
    fusion = make()
    for pairs in ([("p", 5.0), ("q", 5.0), ("r", 5.0)], [("p", -2.5)], [("p", 0.0), ("q", 0.0)]):
        hits = fusion.fuse({"C": ranked("C", pairs)}, 10)
        assert [h.id for h in hits] == [rid for rid, _ in pairs]
        assert all(h.score == pytest.approx(value) and math.isfinite(h.score) for h in hits)


@pytest.mark.parametrize("make", ALL)
def test_equal_fused_scores_are_ordered_by_id(make):
    hits = make().fuse({"C": ranked("C", [("b", 1.0), ("c", 1.0), ("a", 1.0)])}, 10)
    assert [h.id for h in hits] == ["a", "b", "c"]


@pytest.mark.parametrize("make", ALL)
def test_empty_and_k(make):
    fusion = make()
    assert fusion.fuse({}, 5) == [] and fusion.fuse({"A": [], "B": []}, 5) == []
    assert [h.id for h in fusion.fuse(LISTS, 2)] == [h.id for h in fusion.fuse(LISTS, 100)][:2]
    for bad in (0, -1, True, 2.0, "3", None):
        with pytest.raises(ValidationError, match="k must be a positive integer"):
            fusion.fuse(LISTS, bad)


@pytest.mark.parametrize("make", ALL)
@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_non_finite_input_scores_are_refused(make, bad):
    lists = {**LISTS, "bad": ranked("bad", [("x", 1.0), ("v", bad)])}
    with pytest.raises(ValidationError, match=r"list 'bad': hit 'v' has a non-finite score"):
        make().fuse(lists, 10)


def test_repeated_id_in_one_list_scores_its_first_occurrence():
    lists = {"A": ranked("A", [("x", 3.0), ("y", 2.0), ("x", 1.0)])}
    hits = WeightedFusion(WeightedConfig(normalization="none")).fuse(lists, 10)
    assert scores(hits) == [("x", 3.0), ("y", 2.0)]
    assert hits[0].provenance == (Contribution("A", 1, 3.0), Contribution("A", 3, 1.0))


def test_an_empty_list_still_counts_in_the_weight_sum():
    # Haystack / LlamaIndex: weights are normalised over every input list
    fused = dict(scores(WeightedFusion().fuse({**LISTS, "C": []}, 10)))
    assert fused["y"] == pytest.approx(0.5 / 3 + 1 / 3)


def test_zero_weights_everywhere_give_zero_scores():
    fusion = WeightedFusion(WeightedConfig(weights={"A": 0.0, "B": 0.0}))
    hits = fusion.fuse(LISTS, 10)
    assert [h.id for h in hits] == ["w", "x", "y", "z"] and all(h.score == 0.0 for h in hits)


# -- settings --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("entry", "location"),
    [
        ({"kind": "weighted", "normalization": "l2"}, "fusion.normalization"),
        ({"kind": "weighted", "weights": {"A": -1.0}}, "fusion.weights.A"),
        ({"kind": "dbsf", "weights": {"A": math.nan}}, "fusion.weights.A"),
        ({"kind": "dbsf", "weights": {"A": math.inf}}, "fusion.weights.A"),
        ({"kind": "dbsf", "std": "biased"}, "fusion.std"),
        ({"kind": "union", "clip": True}, "fusion.clip"),
        ({"kind": "dbsf", "normalization": "minmax"}, "fusion.normalization"),
    ],
)
def test_bad_settings_are_config_errors(entry, location):
    collection = Collection.create()
    try:
        with pytest.raises(ConfigError) as info:
            collection.build_fusion(entry)
        assert info.value.location == location
    finally:
        collection.close()


def test_built_from_settings():
    collection = Collection.create()
    try:
        fusion = collection.build_fusion({"kind": "weighted", "normalization": "zscore", "weights": {"A": 2}})
        assert isinstance(fusion, WeightedFusion) and fusion.normalization == "zscore" and fusion.config.weights == {"A": 2.0}
        assert isinstance(collection.build_fusion("dbsf"), DistributionBasedFusion)
        assert isinstance(collection.build_fusion({"kind": "union"}), UnionFusion)
    finally:
        collection.close()


@pytest.mark.parametrize("make", ALL)
def test_provenance_equals_the_cores_merge_provenance(make):
    from memcore.plugin import merge_provenance
    from memcore.testing import make_ranked_lists

    for seed in range(4):
        lists = make_ranked_lists(seed, sizes=(12, 0, 9, 15))
        expected = merge_provenance(lists)
        for hit in make().fuse(lists, 100):
            assert hit.provenance == tuple(expected[hit.id])
