"""Pipeline presets (``basic``, ``advanced``, ``semantic``), the table form with overrides,
and their errors; each preset end to end through a SQLite-backed ``memcore.open``."""

from __future__ import annotations

import pytest

import memcore
from memcore import ConfigError, UnknownComponentError
from memcore.retrieval._pipeline import PRESETS, apply_overrides
from memcore import Pipeline
from memcore._plugins._host import PluginHost, get_registry

RECORDS = [
    {"id": "t1", "text": "Alice is flying to Lisbon in April for her vacation", "metadata": {"speaker": "Alice", "turn": 1}},
    {"id": "t2", "text": "Bob adopted a beagle called Biscuit", "metadata": {"speaker": "Bob", "turn": 2}},
    {"id": "t3", "text": "Biscuit chewed Bob's running shoes last week", "metadata": {"speaker": "Bob", "turn": 3}},
    {"id": "t4", "text": "Alice takes a pottery class on Tuesdays", "metadata": {"speaker": "Alice", "turn": 4}},
    {"id": "t5", "text": "Bob is training for the West Highland Way hike", "metadata": {"speaker": "Bob", "turn": 5}},
    {"id": "t6", "text": "Alice booked a hotel in Lisbon near the river", "metadata": {"speaker": "Alice", "turn": 6}},
]
QUESTIONS = ["where is Alice flying in April", "what did Biscuit chew last week", "pottery class", "Who is training for a hike?"]


def has_stage(kind: str) -> bool:
    return kind in get_registry().entries["stages"]


def has_index(kind: str) -> bool:
    return kind in get_registry().entries["indexes"]


def kinds(pipeline: Pipeline) -> list[str]:
    return [type(s).__name__ for s in pipeline.stages]


# -- the presets ---------------------------------------------------------------------------------


def test_presets_are_the_documented_stage_lists():
    assert [e["kind"] for e in PRESETS["basic"]] == ["recall", "rerank", "limit", "relevance"]
    assert [e["kind"] for e in PRESETS["advanced"]] == ["recall", "recall", "fuse", "rerank", "limit", "relevance"]
    assert [e.get("index") for e in PRESETS["advanced"][:2]] == ["vector", "bm25"]
    assert [e["kind"] for e in PRESETS["semantic"]] == ["recall", "intent", "rerank", "mmr", "limit", "relevance"]
    # the tuned options documented in docs/settings.md and docs/concepts.md
    assert PRESETS["advanced"][2]["fusion"] == {"kind": "rrf", "k": 10.0}
    assert [e["keyword_weight"] for p in ("basic", "advanced", "semantic") for e in PRESETS[p] if e["kind"] == "rerank"] == [0.5, 0.3, 0.5]


@pytest.mark.parametrize("name", ["basic", "advanced"])
def test_core_presets_build_with_builtins_only(name):
    registry = PluginHost(load_entry_points=False).registry
    pipeline = Pipeline.from_config(name, registry)
    assert pipeline.preset == name and len(pipeline.stages) == len(PRESETS[name])


@pytest.fixture
def without_memcore_rrf(monkeypatch):
    """The builtins only, on a machine where memcore-rrf is not installed (so the hint is pip)."""
    from memcore._plugins import _providers as providers

    monkeypatch.setattr(providers, "is_installed", lambda distribution: False)
    registry = PluginHost(load_entry_points=False).registry
    assert "rrf" not in registry.names("fusions") and "concat" in registry.names("fusions")
    collection = memcore.Collection.create(registry=registry)
    collection.create_index("vector", "exact")
    collection.create_index("words", "exact", metric="l2")
    yield registry, collection
    collection.close()


HINT_RRF = 'pip install -c constraints.txt "memcore[rrf]"'


@pytest.mark.parametrize(
    "pipeline",
    [
        [{"kind": "recall", "index": "vector"}, {"kind": "recall", "index": "words"}, {"kind": "fuse"}],  # the fuse stage's default fusion
        {"preset": "advanced", "overrides": {"bm25": {"index": "words"}}},
    ],
    ids=["fuse-default", "advanced"],
)
def test_rrf_without_memcore_rrf_says_what_to_install(without_memcore_rrf, pipeline):
    registry, collection = without_memcore_rrf
    with pytest.raises(UnknownComponentError, match=r"unknown fusion kind 'rrf'") as info:
        Pipeline.from_config(pipeline, registry).check(collection)
    assert info.value.extra == "rrf" and HINT_RRF in str(info.value)
    assert Pipeline.from_config([{"kind": "recall", "index": "vector"}, {"kind": "fuse", "fusion": "concat"}], registry).check(collection) is None


def test_semantic_without_the_mmr_plugin_leaves_mmr_out():
    registry = PluginHost(load_entry_points=False).registry  # the builtins only: no memcore-mmr
    assert "mmr" not in registry.names("stages")
    pipeline = Pipeline.from_config("semantic", registry)
    assert [s.name for s in pipeline.stages] == ["vector", "intent", "rerank", "limit", "relevance"]
    assert pipeline.skipped == ["mmr"]


def test_an_unknown_stage_kind_without_if_installed_still_says_what_to_install():
    registry = PluginHost(load_entry_points=False).registry
    # memcore-mmr is installed but not loaded into this registry: the error names it, no pip hint
    with pytest.raises(UnknownComponentError, match=r"memcore-mmr, which provides 'mmr', is installed but did not register it") as info:
        Pipeline.from_config({"preset": "semantic", "overrides": {"mmr": {"if_installed": False}}}, registry)
    assert "pipeline[3].kind" in str(info.value)


def test_unknown_preset():
    with pytest.raises(ConfigError, match=r"unknown preset 'fancy'; presets: \['advanced', 'basic', 'semantic'\]"):
        Pipeline.from_config("fancy", get_registry())
    with pytest.raises(ConfigError, match="unknown preset"):
        Pipeline.from_config({"preset": ["basic"]}, get_registry())


# -- overrides -------------------------------------------------------------------------------


def test_override_by_kind_by_index_and_removal():
    entries = apply_overrides(
        PRESETS["advanced"],
        {"fuse": {"fusion": {"k": 20}}, "bm25": {"index": "keywords", "k": 50}, "rerank": False, "limit": {"k": 5}},
        "pipeline",
    )
    assert entries == [
        {"kind": "recall", "index": "vector", "over_fetch": 2.0},
        {"kind": "recall", "index": "keywords", "over_fetch": 2.0, "k": 50},
        {"kind": "fuse", "fusion": {"kind": "rrf", "k": 20}},
        {"kind": "limit", "k": 5},
        {"kind": "relevance"},
    ]
    assert PRESETS["advanced"][2]["fusion"] == {"kind": "rrf", "k": 10.0}  # the preset itself is untouched


def test_override_changing_a_nested_kind_replaces_that_table():
    entries = apply_overrides(PRESETS["advanced"], {"fuse": {"fusion": {"kind": "concat"}}}, "pipeline")
    assert entries[2] == {"kind": "fuse", "fusion": {"kind": "concat"}}
    entries = apply_overrides(PRESETS["basic"], {"rerank": {"kind": "threshold", "min_score": 0.1}}, "pipeline")
    assert entries[1] == {"kind": "threshold", "min_score": 0.1}


def test_override_by_name_wins_over_kind():
    entries = [{"kind": "rerank", "name": "first"}, {"kind": "rerank", "name": "second"}]
    assert apply_overrides(entries, {"second": {"top_n": 3}}, "p") == [{"kind": "rerank", "name": "first"}, {"kind": "rerank", "name": "second", "top_n": 3}]


@pytest.mark.parametrize(
    "overrides, match",
    [
        ({"recall": {"k": 5}}, r"'recall' addresses 2 stages; address one by its index or name: \['vector', 'bm25'\]"),
        ({"rerank_stage": {}}, r"no stage of the preset is addressed by 'rerank_stage'; use one of \[.*'bm25'.*'rerank'.*\]"),
        ({"rerank": 3}, "a table of stage options, or false"),
        ({"rerank": True}, "a table of stage options, or false"),
    ],
)
def test_override_errors(overrides, match):
    with pytest.raises(ConfigError, match=match) as info:
        Pipeline.from_config({"preset": "advanced", "overrides": overrides}, get_registry())
    assert info.value.location and info.value.location.startswith("pipeline.overrides.")


@pytest.mark.parametrize(
    "spec, match",
    [
        ({"overrides": {}}, "'preset' \\(required\\)"),
        ({"preset": "basic", "stages": []}, "'preset' \\(required\\) and 'overrides'"),
        ({"preset": "basic", "overrides": ["x"]}, "overrides must be a table"),
    ],
)
def test_pipeline_table_errors(spec, match):
    with pytest.raises(ConfigError, match=match):
        Pipeline.from_config(spec, get_registry())


def test_overridden_options_are_validated_by_the_stage():
    with pytest.raises(ConfigError, match=r"pipeline\[3\]\.keyword_weight"):
        Pipeline.from_config({"preset": "advanced", "overrides": {"rerank": {"keyword_weight": -1}}}, get_registry())


# -- errors against a collection ------------------------------------------------------------------


def test_advanced_without_a_bm25_index_explains_the_preset(tmp_path):
    with pytest.raises(ConfigError) as info:
        memcore.open({"pipeline": "advanced"}, path=tmp_path)
    message = str(info.value)
    assert "no index named 'bm25'" in message
    assert "pipeline preset 'advanced': its recall stages search the indexes ['bm25', 'vector']" in message
    assert 'overrides = {<stage> = {index = "<your index>"}}' in message


def test_basic_picks_the_vector_index_among_several(tmp_path):
    settings = {"indexes": {"vector": {"kind": "exact"}, "other": {"kind": "exact", "metric": "l2"}}, "pipeline": "basic"}
    with memcore.open(settings, path=tmp_path) as memory:
        memory.collection.insert(RECORDS)
        hits = memory.query("pottery", k=2)
        assert hits[0].id == "t4" and hits[0].provenance[0].source == "vector"
    settings = {"indexes": {"a": {"kind": "exact"}, "b": {"kind": "exact"}}, "pipeline": "basic"}
    with pytest.raises(ConfigError, match=r"name the index to search .* \(pipeline preset 'basic'"):
        memcore.open(settings, path=tmp_path / "two")


# -- end to end, through SQLite, with reopen ----------------------------------------------------------


def answers(memory) -> list[list[tuple[str, float]]]:
    return [[(h.id, round(h.score, 9)) for h in memory.query(q, k=3)] for q in QUESTIONS]


def roundtrip(settings, path):
    with memcore.open(settings, path=path) as memory:
        memory.collection.insert(RECORDS)
        first = answers(memory)
        assert all(len(a) == 3 for a in first)
    with memcore.open(settings, path=path) as memory:
        assert answers(memory) == first
        assert memory.collection.count() == len(RECORDS)
    return first


def test_basic_preset_end_to_end(tmp_path):
    first = roundtrip({"pipeline": "basic"}, tmp_path)
    assert first[2][0][0] == "t4"


def test_advanced_preset_with_an_override_end_to_end(tmp_path):
    settings = {
        "spaces": {"default": {"embedder": {"kind": "hashing", "dim": 256}}, "words": {"embedder": {"kind": "hashing", "dim": 512, "bigrams": False}}},
        "indexes": {"vector": {"kind": "exact"}, "words": {"kind": "exact", "space": "words"}},
        "pipeline": {"preset": "advanced", "overrides": {"bm25": {"index": "words"}, "fuse": {"fusion": {"k": 20}}}},
    }
    first = roundtrip(settings, tmp_path)
    with memcore.open(settings, path=tmp_path) as memory:
        hit = memory.query(QUESTIONS[2], k=1)[0]
        assert hit.id == "t4" and {c.source for c in hit.provenance} == {"vector", "words", "rescaled"}
        assert hit.source == "relevance" and -1.0 <= hit.score <= 1.0  # the final score: the query-hit cosine
        assert hit.provenance[-1].score == pytest.approx(1.0 + 0.3 * 1.0)  # the rerank's: top of the list + every query word
    with memcore.open(
        {**settings, "pipeline": {**settings["pipeline"], "overrides": {**settings["pipeline"]["overrides"], "relevance": False}}}, path=tmp_path
    ) as memory:
        hit = memory.query(QUESTIONS[2], k=1)[0]
        assert hit.raw == pytest.approx(2 / 21)  # rank 1 in both lists, rrf k = 20 (before the rerank)
        assert hit.source == "rerank" and hit.score == pytest.approx(1.0 + 0.3 * 1.0)
    assert first[2][0][0] == "t4"


@pytest.mark.skipif(not has_index("bm25"), reason="the bm25 index (memcore-bm25) is not installed")
def test_advanced_preset_with_bm25_end_to_end(tmp_path):
    settings = {"indexes": {"vector": {"kind": "exact"}, "bm25": {"kind": "bm25"}}, "pipeline": "advanced"}
    first = roundtrip(settings, tmp_path)
    assert first[1][0][0] == "t3"


@pytest.mark.skipif(not has_stage("mmr"), reason="the mmr stage (memcore-mmr) is not installed")
def test_semantic_preset_from_one_line_of_settings(tmp_path):
    config = tmp_path / "memcore.toml"
    config.write_text('pipeline = "semantic"\n', encoding="utf-8")
    first = roundtrip(config, tmp_path / "mem")
    assert first[0][0][0] == "t1"
    with memcore.open(config, path=tmp_path / "mem") as memory:
        assert [s.name for s in memory.pipeline.stages] == ["vector", "intent", "rerank", "mmr", "limit", "relevance"]


def test_pipeline_table_from_a_toml_file(tmp_path):
    config = tmp_path / "memcore.toml"
    config.write_text(
        '[pipeline]\npreset = "basic"\n\n[pipeline.overrides.rerank]\nkeyword_weight = 0.5\nboosts = [{where = {speaker = "Bob"}, boost = 0.25}]\n',
        encoding="utf-8",
    )
    with memcore.open(config, path=tmp_path / "mem") as memory:
        rerank = memory.pipeline.stages[1]
        assert rerank.config.keyword_weight == 0.5 and rerank.config.boosts[0].boost == 0.25
        memory.collection.insert(RECORDS)
        hits = memory.query("Alice", k=6)
        assert hits[0].source == "relevance" and all(h.provenance[0].source == "vector" for h in hits)
        bob = [h for h in hits if h.record.metadata["speaker"] == "Bob"]
        assert bob and all(h.provenance[-1].score >= 0.25 for h in bob)  # the rerank's score, kept in the list "rescaled"


def test_pipeline_preset_from_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMCORE_PIPELINE", '{"preset": "basic", "overrides": {"limit": {"k": 2}}}')
    with memcore.open(None, path=tmp_path) as memory:
        memory.collection.insert(RECORDS)
        assert len(memory.query("Alice", k=5)) == 2


def test_if_installed_is_only_a_way_out_for_missing_kinds():
    with_mmr = Pipeline.from_config("semantic", get_registry())
    assert "mmr" in [s.name for s in with_mmr.stages] and with_mmr.skipped == []
    with pytest.raises(UnknownComponentError):
        Pipeline.from_config([{"kind": "no-such-stage"}], get_registry())
    assert Pipeline.from_config([{"kind": "no-such-stage", "if_installed": True}, {"kind": "limit"}], get_registry()).skipped == ["no-such-stage"]
    with pytest.raises(ConfigError, match="if_installed"):
        Pipeline.from_config([{"kind": "limit", "if_installed": "yes"}], get_registry())
