"""The ``bm25`` index driven by a real SQLite-backed Collection and by ``memcore.open``
settings: interleaved inserts and queries, deletes, filters, close/reopen, a damaged index
rebuilt from the store, the example settings file with the CLI."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

import memcore
from memcore import Collection, ConfigError, ValidationError

from memcore_bm25.bm25_files import STATE_FILE

REPO = Path(__file__).resolve().parents[3]
EXAMPLE = REPO / "examples" / "bm25.toml"
SAMPLE = REPO / "core" / "memcore" / "data" / "sample_conversation.jsonl"

SETTINGS = {
    "indexes": {"keywords": {"kind": "bm25", "merge_threshold": 8}},
    "pipeline": [{"kind": "recall", "index": "keywords"}, {"kind": "limit"}],
}
QUERIES = ["pottery class", "hiking trip Scotland", "bread bakery", "mug teacher", "weekend plans", "xyzzy"]


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    for key in list(os.environ):
        if key.startswith("MEMCORE_") and key != "MEMCORE_DEFAULT_EMBEDDER":  # the suite's default embedder (conftest.py) stays
            monkeypatch.delenv(key)


def sample_turns() -> list[dict]:
    return [json.loads(line) for line in SAMPLE.read_text().splitlines() if line.strip()]


def results(memory, **kwargs) -> list[list[tuple[str, float]]]:
    return [[(h.id, round(h.score, 6)) for h in memory.query(q, k=5, **kwargs)] for q in QUERIES]


def reference_results(texts: dict[str, str], k: int = 5) -> list[list[tuple[str, float]]]:
    """A fresh bm25s index (English stopwords + stemmer, k1=1.2, b=0.75) over ``texts``."""
    import bm25s
    import Stemmer

    stemmer = Stemmer.Stemmer("english")
    ids = list(texts)
    tokens = bm25s.tokenize(list(texts.values()), stopwords="en", stemmer=stemmer, show_progress=False)
    retriever = bm25s.BM25(k1=1.2, b=0.75)
    retriever.index(tokens, show_progress=False)
    out = []
    for q in QUERIES:
        terms = [t for t in bm25s.tokenize([q], stopwords="en", stemmer=stemmer, return_ids=False, show_progress=False)[0] if t in retriever.vocab_dict]
        if not terms:
            out.append([])
            continue
        scores = retriever.get_scores(terms)
        ranked = sorted((i for i in range(len(ids)) if scores[i] > 0), key=lambda i: (-scores[i], ids[i]))[:k]
        out.append([(ids[i], round(float(scores[i]), 6)) for i in ranked])
    return out


def test_open_insert_retrieve_close_reopen(tmp_path):
    turns = sample_turns()
    with memcore.open(SETTINGS, path=tmp_path) as memory:
        for turn in turns[:30]:  # one turn at a time, a query after each, as an agent does
            memory.collection.insert([turn])
            memory.query(turn["text"], k=3)
        assert memory.collection.index("keywords").merges >= 3
        memory.collection.insert(turns[30:])  # a batch: stays in the fresh segment until searched
        memory.collection.delete([turns[0]["id"], turns[5]["id"]])
        before = results(memory)
        stats = memory.collection.index("keywords").stats()
        live = {t["id"]: t["text"] for t in turns if t["id"] not in (turns[0]["id"], turns[5]["id"])}
        assert stats["size"] == len(live) == memory.collection.count()
    assert before == reference_results(live)  # through the whole stack: a fresh bm25s over the live records
    assert (tmp_path / "indexes" / "keywords" / STATE_FILE).is_file()

    with memcore.open(SETTINGS, path=tmp_path) as memory:
        assert memory.collection.index("keywords").stats()["size"] == len(live)
        assert results(memory) == before
        hits = memory.retrieve("pottery class", k=2)
        assert hits and hits[0]["id"] == before[0][0][0] and "pottery" in hits[0]["text"].lower()


def test_filters_scopes_and_bad_queries_through_the_collection(tmp_path):
    with Collection.create(tmp_path) as coll:
        coll.create_index("kw", "bm25")
        coll.insert([{"id": f"t{i}", "text": f"coffee order number {i}", "metadata": {"n": i, "who": "Alice" if i % 2 else "Bob"}} for i in range(10)])
        coll.insert([{"id": "s1", "text": "secret coffee recipe"}], scope={"user_id": "u1"})
        every = [h.id for h in coll.retrieve("coffee", index="kw", k=20)]
        assert len(every) == 11
        bob = [h.id for h in coll.retrieve("coffee", index="kw", k=20, where={"who": "Bob"})]
        assert bob == [i for i in every if i in {"t0", "t2", "t4", "t6", "t8"}]
        assert [h.id for h in coll.retrieve("coffee", index="kw", k=3, where={"n": {"$gte": 7}})] == [i for i in every if i in {"t7", "t8", "t9"}]
        assert [h.id for h in coll.retrieve("coffee", index="kw", k=5, scope={"user_id": "u1"})] == ["s1"]
        assert coll.retrieve("coffee", index="kw", where={"who": "nobody"}) == []
        with pytest.raises(ValidationError):
            coll.retrieve("   ", index="kw")
        with pytest.raises(ValidationError, match="min_score"):
            coll.retrieve({"text": "coffee", "extras": {"bm25": {"min_score": "x"}}}, index="kw")
        plain = coll.retrieve("secret coffee", index="kw", k=20)
        assert plain[0].id == "s1" and plain[0].score > 0.5 > plain[1].score
        top = coll.retrieve({"text": "secret coffee", "extras": {"bm25": {"min_score": 0.5}}}, index="kw", k=20)
        assert [h.id for h in top] == ["s1"]


def test_damaged_index_is_rebuilt_from_the_store(tmp_path):
    with memcore.open(SETTINGS, path=tmp_path) as memory:
        memory.collection.insert(sample_turns())
        before = results(memory)
    index_dir = tmp_path / "indexes" / "keywords"
    segment = next(index_dir.glob("seg-*.indices.csc.index.npy"))
    segment.write_bytes(b"\x93NUMPY garbage")
    with memcore.open(SETTINGS, path=tmp_path) as memory:
        assert results(memory) == before


def test_bad_settings_fail_with_config_errors(tmp_path):
    for options, match in (({"stopwords": "klingon"}, "stopwords"), ({"stemmer": "klingon"}, "stemmer"), ({"fields": ["title"]}, "fields")):
        settings = {"indexes": {"kw": {"kind": "bm25", **options}}, "pipeline": "basic"}
        with pytest.raises(ConfigError, match=match):
            memcore.open(settings, path=tmp_path / "x")


def test_example_settings_with_the_cli(tmp_path):
    from memcore.cli import main

    runner = CliRunner()
    path = str(tmp_path / "mem")
    result = runner.invoke(main, ["ingest", "--config", str(EXAMPLE), "--path", path, str(SAMPLE)])
    assert result.exit_code == 0, result.output
    result = runner.invoke(main, ["query", "--config", str(EXAMPLE), "--path", path, "--json", "pottery", "class"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)
    assert rows and "pottery" in rows[0]["text"].lower()
    assert [(r["id"], round(r["score"], 6)) for r in rows[:5]] == reference_results({t["id"]: t["text"] for t in sample_turns()})[0]
    result = runner.invoke(main, ["query", "--config", str(EXAMPLE), "--path", path, "--index", "keywords", "-k", "2", "--json", "xyzzy"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output) == []
