"""Scores that mean the same for every query (issue 26, item 3): every preset ends with the
``relevance`` stage, whose final score is absolute (the query-hit cosine, monotone along the
ranking) while the ranking stays what it was; ``min_score`` on ``retrieve`` / ``query`` /
``memcore query``."""

from __future__ import annotations

import json
import math
from importlib import resources
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

import memcore
from memcore import ValidationError
from memcore.cli import main
from memcore.retrieval._relevance import RelevanceConfig, RelevanceStage, non_increasing, strictly_decreasing
from memcore.testing import StageContract, build_stage

SAMPLE = [json.loads(line) for line in resources.files("memcore").joinpath("data/sample_conversation.jsonl").read_text().splitlines() if line.strip()]
QUESTIONS = [q["question"] for q in json.loads(resources.files("memcore").joinpath("data/sample_questions.json").read_text())["questions"]]
QUESTIONS += ["quantum chromodynamics lattice gauge theory", "recipe for sourdough bread"]
UNRELATED = "quantum chromodynamics lattice gauge theory"

GOLDEN: dict[str, list[list[str]]] = {
    "basic": [
        ["s2-t01", "s2-t11", "s2-t08", "s1-t09", "s1-t03", "s4-t09"],
        ["s1-t09", "s4-t08", "s3-t10", "s4-t11", "s2-t07", "s4-t05"],
        ["s2-t10", "s2-t09", "s4-t11", "s2-t01", "s1-t09", "s2-t04"],
        ["s3-t06", "s4-t06", "s1-t01", "s2-t02", "s2-t01", "s1-t02"],
        ["s3-t14", "s3-t07", "s1-t01", "s4-t02", "s3-t10", "s4-t05"],
        ["s4-t07", "s3-t13", "s2-t11", "s4-t02", "s2-t03", "s1-t07"],
        ["s3-t12", "s4-t03", "s3-t08", "s1-t06", "s1-t11", "s3-t07"],
        ["s1-t07", "s2-t01", "s3-t06", "s2-t11", "s4-t03", "s3-t04"],
    ],
    "advanced": [
        ["s2-t01", "s1-t01", "s2-t11", "s2-t08", "s2-t10", "s1-t09"],
        ["s1-t09", "s3-t10", "s2-t07", "s4-t11", "s1-t08", "s4-t08"],
        ["s2-t10", "s2-t09", "s4-t11", "s2-t01", "s1-t09", "s3-t09"],
        ["s3-t06", "s1-t01", "s3-t05", "s1-t06", "s4-t06", "s2-t02"],
        ["s3-t14", "s1-t01", "s4-t02", "s3-t07", "s3-t13", "s3-t10"],
        ["s4-t07", "s3-t13", "s4-t02", "s2-t03", "s2-t10", "s1-t01"],
        ["s3-t12", "s4-t03", "s3-t08", "s1-t06", "s1-t11", "s3-t07"],
        ["s1-t07", "s2-t01", "s3-t06", "s2-t11", "s4-t03", "s3-t04"],
    ],
    "semantic": [
        ["s2-t01", "s2-t11", "s4-t09", "s2-t08", "s1-t09", "s1-t03"],
        ["s1-t09", "s4-t08", "s4-t11", "s1-t11", "s3-t10", "s2-t07"],
        ["s2-t10", "s2-t09", "s4-t11", "s2-t01", "s1-t09", "s2-t04"],
        ["s3-t06", "s1-t01", "s4-t06", "s2-t02", "s2-t01", "s1-t02"],
        ["s3-t14", "s1-t01", "s3-t07", "s4-t02", "s3-t10", "s2-t05"],
        ["s4-t07", "s3-t13", "s2-t11", "s4-t02", "s2-t03", "s1-t07"],
        ["s3-t12", "s4-t03", "s3-t08", "s1-t06", "s1-t11", "s2-t03"],
        ["s1-t07", "s3-t06", "s2-t11", "s2-t01", "s4-t03", "s1-t04"],
    ],
}
"""Each preset's ranking (ids of the first 6 hits) of every question on the sample
conversation, recorded with the presets as they were before the relevance stage existed."""


def open_fixed(pipeline: Any) -> memcore.Memory:
    """The fixed corpus: the packaged sample conversation, hashing space, exact + bm25 indexes."""
    memory = memcore.open(
        {
            "store": {"kind": "memory"},
            "indexes": {"vector": {"kind": "exact", "space": "default", "metric": "cosine"}, "bm25": {"kind": "bm25"}},
            "pipeline": pipeline,
        }
    )
    memory.collection.insert(SAMPLE)
    return memory


@pytest.mark.parametrize("preset", ["basic", "advanced", "semantic"])
def test_every_presets_ranking_is_unchanged(preset):
    with open_fixed(preset) as memory:
        assert [s.name for s in memory.pipeline.stages][-1] == "relevance"
        rankings = [[h.id for h in memory.query(q, k=6)] for q in QUESTIONS]
    assert rankings == GOLDEN[preset]


@pytest.mark.parametrize("preset", ["basic", "advanced", "semantic"])
def test_the_final_score_is_the_cosine_smoothed_along_the_ranking(preset):
    with open_fixed(preset) as memory:
        space = memory.collection.spaces["default"]
        for question in QUESTIONS:
            hits = memory.query(question, k=6)
            scores = [h.score for h in hits]
            assert all(a > b for a, b in zip(scores, scores[1:])), "the final score falls strictly with the rank"
            q = space.embed_queries([question])[0]
            matrix, _ = memory.collection.vectors([h.id for h in hits], "default")
            cosines = (matrix @ q) / (np.linalg.norm(matrix, axis=1) * np.linalg.norm(q))
            assert [h.raw for h in hits] == pytest.approx(cosines.tolist(), abs=1e-6)  # raw: the hit's own cosine
            assert scores == pytest.approx(non_increasing(cosines).tolist(), abs=1e-6)
            for h in hits:
                assert -1.0 - 1e-6 <= h.score <= 1.0 + 1e-6
                assert h.source == "relevance"
                assert h.provenance[-1].source == "rescaled"  # the per-query rescaled score is kept


def test_an_unrelated_query_scores_low_where_the_rescaled_score_was_high():
    with open_fixed("basic") as memory:
        related = memory.query("Where is Alice flying for her vacation in April?", k=3)
        unrelated = memory.query(UNRELATED, k=3)
    rescaled = [h.provenance[-1].score for h in unrelated]
    assert rescaled[0] >= 1.0  # what the basic preset reported before: min-max, the top hit is >= 1 for any query
    assert unrelated[0].score < related[0].score
    assert unrelated[0].score < 0.2
    assert "rescaled#1" in unrelated[0].explain() and "from relevance" in unrelated[0].explain()


def test_relevance_false_gives_the_rescaled_scores_back():
    with open_fixed({"preset": "basic", "overrides": {"relevance": False}}) as plain, open_fixed("basic") as scored:
        for question in QUESTIONS:
            before = plain.query(question, k=6)
            after = scored.query(question, k=6)
            assert [h.id for h in before] == [h.id for h in after]
            assert [h.score for h in before] == pytest.approx([h.provenance[-1].score for h in after])


def test_non_increasing_is_the_isotonic_fit():
    assert non_increasing(np.array([0.9, 0.5, 0.7, 0.1])).tolist() == pytest.approx([0.9, 0.6, 0.6, 0.1])
    assert non_increasing(np.array([0.1, 0.2, 0.3])).tolist() == pytest.approx([0.2, 0.2, 0.2])
    assert non_increasing(np.array([0.5, 0.4])).tolist() == [0.5, 0.4]
    assert non_increasing(np.array([])).tolist() == []


def test_strictly_decreasing_lifts_ties_by_the_least():
    out = strictly_decreasing(np.array([0.6, 0.6, 0.6, 0.2, 0.0, 0.0]))
    assert all(a > b for a, b in zip(out, out[1:]))
    assert out.tolist() == pytest.approx([0.6, 0.6, 0.6, 0.2, 0.0, 0.0], abs=1e-15)
    assert out[2] == 0.6 and out[5] == 0.0 and out.min() >= 0.0  # a run ends unchanged: never below its value


def test_relevance_falls_back_to_keyword_overlap_without_a_dense_space():
    memory = memcore.open({"store": {"kind": "memory"}, "indexes": {"bm25": {"kind": "bm25"}}, "pipeline": "basic"})
    with memory:
        memory.collection.insert(SAMPLE)
        hits = memory.query("Lisbon vacation sister", k=3)
    assert hits and all(0.0 <= h.score <= 1.0 for h in hits)
    assert hits[0].score > 0


def test_monotone_false_reports_the_raw_cosine():
    with open_fixed({"preset": "advanced", "overrides": {"relevance": {"monotone": False}}}) as memory:
        for question in QUESTIONS:
            assert all(h.score == h.raw for h in memory.query(question, k=6))


def test_a_named_space_must_exist():
    with pytest.raises(memcore.ConfigError, match="no space named 'nope'"):
        open_fixed({"preset": "basic", "overrides": {"relevance": {"space": "nope"}}})


class TestRelevanceStageContract(StageContract):
    @pytest.fixture
    def stage(self):
        return build_stage("relevance")


def test_relevance_config_defaults():
    stage = RelevanceStage()
    assert stage.name == "relevance" and stage.config == RelevanceConfig()


# -- min_score ---------------------------------------------------------------------------------


@pytest.fixture
def memory():
    with open_fixed("basic") as m:
        yield m


def test_min_score_drops_what_scores_below_it(memory):
    question = "Where is Alice flying for her vacation in April?"
    every = memory.query(question, k=6)
    cut = every[2].score
    kept = memory.query(question, k=6, min_score=cut)
    assert [h.id for h in kept] == [h.id for h in every if h.score >= cut]
    results = memory.retrieve(question, k=6, min_score=cut)
    assert [r["id"] for r in results] == [h.id for h in kept]
    assert memory.retrieve(UNRELATED, k=6, min_score=0.5) == []
    assert memory.query(question, k=6, min_score=-1.0) == every


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf, "0.5", True, [0.5]])
def test_a_bad_min_score_is_a_validation_error(memory, bad):
    with pytest.raises(ValidationError, match="min_score must be a finite number"):
        memory.retrieve("Alice", k=3, min_score=bad)
    with pytest.raises(ValidationError, match="min_score must be a finite number"):
        memory.query("Alice", k=3, min_score=bad)


def test_memcore_query_min_score(tmp_path):
    path = tmp_path / "m"
    data = tmp_path / "turns.jsonl"
    data.write_text("\n".join(json.dumps(r) for r in SAMPLE) + "\n")
    runner = CliRunner()
    assert runner.invoke(main, ["ingest", "--path", str(path), str(data)], catch_exceptions=False).exit_code == 0
    everything = json.loads(runner.invoke(main, ["query", "--path", str(path), "--json", "-k", "5", "Alice vacation Lisbon"], catch_exceptions=False).output)
    cut = everything[1]["score"]
    kept = json.loads(runner.invoke(main, ["query", "--path", str(path), "--json", "-k", "5", "--min-score", str(cut), "Alice vacation Lisbon"]).output)
    assert [h["id"] for h in kept] == [h["id"] for h in everything if h["score"] >= cut]
    assert runner.invoke(main, ["query", "--path", str(path), "--min-score", "0.99", UNRELATED]).output.strip() == "No hits."
    bad = runner.invoke(main, ["query", "--path", str(path), "--min-score", "nan", "Alice"])
    assert bad.exit_code != 0 and "min_score must be a finite number" in bad.output


@pytest.mark.parametrize("index", [{"kind": "exact"}, {"kind": "faiss", "factory": "HNSW32"}])
def test_the_relevance_stage_reuses_the_recall_cosines(tmp_path, monkeypatch, index):
    """A hit recalled by an index that scores by exact cosine keeps that cosine (no read of
    its vector back); the scores equal those computed from the stored vectors."""
    from memcore.retrieval import _pipeline, _relevance

    if index["kind"] == "faiss":
        pytest.importorskip("memcore_faiss")
    texts = ["Alice moved to Lisbon in April", "Bob adopted a beagle", "Clara rides tram 28", "Lisbon trams are yellow", "Dogs love walks"]
    settings = {"spaces": {"default": {"embedder": {"kind": "hashing", "dim": 64}}}, "indexes": {"vector": index}, "pipeline": "basic"}
    with memcore.open(settings, path=tmp_path / "m") as memory:
        memory.insert(texts)
        reads: list[int] = []
        original = _pipeline.PipelineContext.vectors
        monkeypatch.setattr(_pipeline.PipelineContext, "vectors", lambda self, ids, space: reads.append(len(ids)) or original(self, ids, space))
        reused = [(h["id"], h["score"]) for h in memory.retrieve("trams in Lisbon", k=4)]
        assert reads == []  # the recall's cosines, not the store's vectors
        monkeypatch.setattr(_relevance, "_index_cosines", lambda ctx, hits, space: None)
        read_back = [(h["id"], h["score"]) for h in memory.retrieve("trams in Lisbon", k=4)]
        assert reads  # the fallback reads the vectors
    assert [i for i, _ in reused] == [i for i, _ in read_back]
    assert np.allclose([s for _, s in reused], [s for _, s in read_back], atol=1e-5)


def test_a_hit_no_cosine_index_recalled_reads_its_vector(tmp_path, monkeypatch):
    """BM25-only hits (the advanced preset without a dense match) are scored from their vectors."""
    from memcore.retrieval import _pipeline

    pytest.importorskip("memcore_bm25")
    settings = {
        "spaces": {"default": {"embedder": {"kind": "hashing", "dim": 64}}},
        "indexes": {"vector": {"kind": "exact", "metric": "l2"}, "bm25": {"kind": "bm25"}},
        "pipeline": "advanced",
    }
    with memcore.open(settings, path=tmp_path / "m") as memory:
        memory.insert(["Alice moved to Lisbon in April", "Bob adopted a beagle"])
        reads: list[int] = []
        original = _pipeline.PipelineContext.vectors
        monkeypatch.setattr(_pipeline.PipelineContext, "vectors", lambda self, ids, space: reads.append(len(ids)) or original(self, ids, space))
        hits = memory.retrieve("Lisbon", k=2)
    assert hits and reads  # an l2 index's scores are not cosines: read back
