"""End to end: two exact indexes on two spaces, pipeline [recall, recall, fuse dbsf, mmr,
limit] on SQLite through memcore.open and Memory.query, close and reopen (identical
results), and the same through ``memcore ingest`` / ``memcore query --config``."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import memcore
from memcore._plugins._host import get_registry

REPO = Path(__file__).resolve().parents[3]
EXAMPLE = REPO / "examples" / "hybrid_fusion.toml"

pytestmark = pytest.mark.skipif("dbsf" not in get_registry().names("fusions"), reason="needs the dbsf fusion of memcore-rrf (pip install -e ./plugins/rrf)")

ROWS = [
    {"id": "l1", "text": "Alice booked a flight to Lisbon for her summer vacation"},
    {"id": "l2", "text": "Alice booked a flight to Lisbon for her summer holiday"},
    {"id": "l3", "text": "Alice booked a cheap flight to Lisbon for the summer vacation"},
    {"id": "p1", "text": "Alice packed sunscreen for her trip to Portugal"},
    {"id": "c1", "text": "Alice plays chess online every night"},
    {"id": "b1", "text": "Bob adopted a beagle puppy named Biscuit"},
    {"id": "b2", "text": "Bob walks Biscuit the beagle in the park"},
    {"id": "h1", "text": "Carol flew to Lisbon last summer for a conference"},
]
QUERIES = ["Alice flight to Lisbon summer vacation", "beagle Biscuit", "summer trip"]

SETTINGS = {
    "spaces": {"default": {"embedder": "hashing"}, "small": {"embedder": {"kind": "hashing", "dim": 128, "bigrams": False}}},
    "indexes": {
        "dense": {"kind": "exact", "space": "default", "metric": "cosine"},
        "words": {"kind": "exact", "space": "small", "metric": "l2"},
    },
    "pipeline": [
        {"kind": "recall", "index": "dense", "k": 8},
        {"kind": "recall", "index": "words", "k": 8},
        {"kind": "fuse", "fusion": {"kind": "dbsf"}},
        {"kind": "mmr", "lambda": 0.5},
        {"kind": "limit"},
    ],
}


def key(hits):
    return [(h.id, round(h.score, 10), h.source, h.provenance) for h in hits]


def test_pipeline_with_dbsf_and_mmr_through_memory_query(tmp_path):
    memory = memcore.open(SETTINGS, path=tmp_path)
    for row in ROWS:
        memory.insert(row["text"], id=row["id"])
    query = memory.collection.make_query(QUERIES[0], k=3)
    ctx = memory.pipeline.run_context(memory.collection, query)
    assert list(ctx.lists) == ["dense", "words", "fused"]
    fused_top = [h.id for h in ctx.lists["fused"][:3]]
    assert set(fused_top) == {"l1", "l2", "l3"}  # relevance alone returns three near-duplicates
    hits = memory.query(QUERIES[0], k=3)
    assert [h.id for h in hits] == [h.id for h in ctx.current[:3]]
    # relevance = cosine in the default space: the first pick is the dense list's best
    assert hits[0].id == ctx.lists["dense"][0].id
    assert len({"l1", "l2", "l3"} & {h.id for h in hits}) < 3  # MMR spreads the near-duplicates
    for hit in hits:
        assert hit.source == "mmr" and hit.record is not None
        assert {c.source for c in hit.provenance} <= {"dense", "words"} and hit.provenance
        for c in hit.provenance:
            assert ctx.lists[c.source][c.rank - 1].id == hit.id
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    before = {q: key(memory.query(q, k=3)) for q in QUERIES}
    memory.close()

    reopened = memcore.open(SETTINGS, path=tmp_path)
    try:
        assert {q: key(reopened.query(q, k=3)) for q in QUERIES} == before
    finally:
        reopened.close()


@pytest.fixture
def clean_env(monkeypatch):
    for name in list(os.environ):
        if name.startswith("MEMCORE_") and name != "MEMCORE_DEFAULT_EMBEDDER":  # the suite's default embedder (conftest.py) stays
            monkeypatch.delenv(name)


def test_example_settings_through_the_cli(tmp_path, clean_env):
    click_testing = pytest.importorskip("click.testing")
    from memcore.cli import main

    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in ROWS), encoding="utf-8")
    directory = tmp_path / "mem"
    runner = click_testing.CliRunner()
    ingest = runner.invoke(main, ["ingest", "--config", str(EXAMPLE), "--path", str(directory), "--json", str(data)])
    assert ingest.exit_code == 0, ingest.output
    assert json.loads(ingest.stdout)["inserted"] == len(ROWS)
    query = runner.invoke(main, ["query", "--config", str(EXAMPLE), "--path", str(directory), "-k", "3", "--json", "--explain", QUERIES[0]])
    assert query.exit_code == 0, query.output
    rows = json.loads(query.stdout)
    assert len(rows) == 3 and all(r["source"] == "mmr" for r in rows)
    assert all({p["source"] for p in r["provenance"]} <= {"phrases", "words"} for r in rows)
    assert "phrases#" in rows[0]["explain"]

    with memcore.open(EXAMPLE, path=directory) as memory:
        in_process = memory.query(QUERIES[0], k=3)
    assert [(r["id"], r["score"]) for r in rows] == [(h.id, h.score) for h in in_process]
