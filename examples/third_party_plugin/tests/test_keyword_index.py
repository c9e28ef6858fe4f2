"""Unit tests of the example ``keyword`` index, used directly (no collection needed), its
registration as an installed plugin, and the README's settings example end to end.

Only memcore's public faces: ``memcore`` and ``memcore.testing``."""

import json

import pytest

import memcore
from memcore import CorruptError, Hit, Query, Record, ValidationError
from memcore.plugin import IndexContext
from memcore.testing import PluginRegistrationContract
from memcore_keyword_index import KeywordIndex, KeywordIndexConfig, tokenize


def make_index(**config) -> KeywordIndex:
    return KeywordIndex(KeywordIndexConfig(**config), IndexContext(name="kw"))


def rec(rid: str, text: str) -> Record:
    return Record.create(text, id=rid)


@pytest.fixture
def index() -> KeywordIndex:
    idx = make_index()
    idx.add(
        [
            rec("a", "Alice works at Google in Zurich."),
            rec("b", "Bob works at a bakery."),
            rec("c", "Alice and Bob met in Zurich; Alice likes hiking."),
            rec("d", "The weather is nice today."),
        ]
    )
    return idx


def ids(hits: list[Hit]) -> list[str]:
    return [h.id for h in hits]


def test_tokenize_lowercases_word_runs():
    assert tokenize("Alice's e-mail: ALICE@example.com!") == ["alice", "s", "e", "mail", "alice", "example", "com"]


def test_declares_text_requirement_and_score_range():
    idx = make_index()
    assert idx.requires.text is True
    assert idx.requires.spaces == ()
    assert idx.score_range == (0.0, None)


def test_search_ranks_by_shared_tokens(index):
    hits = index.search(Query(text="alice zurich"), k=10)
    assert ids(hits) == ["a", "c"]  # both share the two tokens: equal scores, ties by id
    assert all(h.raw == 2.0 and h.source == "kw" for h in hits)
    assert hits[0].score == hits[1].score > 0


def test_rarer_token_scores_higher():
    idx = make_index()
    idx.add([rec("p", "apple banana"), rec("q", "apple cherry"), rec("r", "apple date"), rec("s", "kiwi")])
    hits = idx.search(Query(text="apple kiwi"), k=10)
    # one shared token each, but "kiwi" is in 1 record of 4 and "apple" in 3
    assert ids(hits) == ["s", "p", "q", "r"]
    assert all(h.raw == 1.0 for h in hits)
    assert hits[0].score > hits[1].score


def test_scores_are_higher_is_better_and_sorted(index):
    hits = index.search(Query(text="Alice works in Zurich"), k=10)
    scores = [h.score for h in hits]
    assert scores == sorted(scores, reverse=True)
    assert ids(hits)[0] == "a"  # alice + works + in + zurich: all four tokens
    assert hits[0].raw == 4.0


def test_k_limits_results(index):
    assert len(index.search(Query(text="alice bob zurich works"), k=2)) == 2


def test_no_shared_token_no_hit(index):
    assert index.search(Query(text="quantum chromodynamics"), k=5) == []
    assert index.search(Query(text="   "), k=5) == []


def test_query_without_text_is_rejected(index):
    with pytest.raises(ValidationError):
        index.search(Query(), k=5)


def test_min_overlap(index):
    idx = make_index(min_overlap=2)
    idx.add([rec("a", "Alice works at Google in Zurich."), rec("b", "Bob works at a bakery.")])
    assert ids(idx.search(Query(text="alice google"), k=5)) == ["a"]
    assert idx.search(Query(text="bob"), k=5) == []


def test_config_rejects_bad_values():
    with pytest.raises(ValueError, match="min_overlap"):  # pydantic's ValidationError
        KeywordIndexConfig(min_overlap=0)
    with pytest.raises(ValueError, match="min_overlaps"):
        KeywordIndexConfig(min_overlaps=2)  # typo: unknown fields are rejected


def test_allowed_restricts_hits(index):
    hits = index.search(Query(text="alice bob"), k=10, allowed={"b", "d"})
    assert ids(hits) == ["b"]
    assert index.search(Query(text="alice"), k=10, allowed=set()) == []
    assert index.search(Query(text="alice"), k=10, allowed={"unknown"}) == []


def test_allowed_large_set_same_as_filtering(index):
    allowed = {"a", "b", "c", "d", "x1", "x2", "x3", "x4", "x5", "x6"}
    full = index.search(Query(text="alice bob zurich"), k=10)
    restricted = index.search(Query(text="alice bob zurich"), k=10, allowed=allowed)
    assert [(h.id, h.score) for h in restricted] == [(h.id, h.score) for h in full]
    small = index.search(Query(text="alice bob zurich"), k=10, allowed={"c"})
    assert [(h.id, h.score) for h in small] == [(h.id, h.score) for h in full if h.id == "c"]


def test_remove(index):
    index.remove(["a", "not-there"])
    assert len(index) == 3
    assert "a" not in ids(index.search(Query(text="google alice"), k=10))
    assert index.search(Query(text="google"), k=10) == []


def test_readd_replaces(index):
    index.add([rec("d", "Now it is about Google.")])
    assert len(index) == 4
    assert index.search(Query(text="weather"), k=5) == []
    assert set(ids(index.search(Query(text="google"), k=5))) == {"a", "d"}


def test_repeated_id_in_batch_last_wins():
    idx = make_index()
    idx.add([rec("x", "first version"), rec("x", "second version")])
    assert len(idx) == 1
    assert idx.search(Query(text="first"), k=5) == []
    assert ids(idx.search(Query(text="second"), k=5)) == ["x"]


def test_ties_broken_by_id():
    idx = make_index()
    idx.add([rec("b", "same words"), rec("a", "same words"), rec("c", "same words")])
    assert ids(idx.search(Query(text="same"), k=3)) == ["a", "b", "c"]


def test_save_load_roundtrip(index, tmp_path):
    index.save(tmp_path)
    assert json.loads((tmp_path / "keyword.json").read_text())["format_version"] == 1
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    fresh = make_index()
    fresh.load(tmp_path)
    assert len(fresh) == len(index)
    for text in ["alice zurich", "bob", "weather today", "hiking google"]:
        q = Query(text=text)
        assert [(h.id, h.score, h.raw) for h in fresh.search(q, k=10)] == [(h.id, h.score, h.raw) for h in index.search(q, k=10)]


def test_load_replaces_contents(index, tmp_path):
    index.save(tmp_path)
    other = make_index()
    other.add([rec("z", "something else entirely")])
    other.load(tmp_path)
    assert len(other) == 4
    assert other.search(Query(text="entirely"), k=5) == []


def test_load_corrupt_raises(tmp_path):
    (tmp_path / "keyword.json").write_text("{not json")
    with pytest.raises(CorruptError):
        make_index().load(tmp_path)
    (tmp_path / "keyword.json").write_text(json.dumps({"format_version": 99, "docs": {}}))
    with pytest.raises(CorruptError, match="format version"):
        make_index().load(tmp_path)
    with pytest.raises(CorruptError):
        make_index().load(tmp_path / "missing")


class TestKeywordRegistration(PluginRegistrationContract):
    """The installed distribution: entry point, what it registers, light to load, public imports only."""

    plugin = "keyword"
    module = "memcore_keyword_index"
    distribution = "memcore-keyword-index"
    registers = {"indexes": {"keyword": (KeywordIndex, KeywordIndexConfig)}}
    # the standard library counts: list its modules too
    allowed_imports = {"__future__", "json", "math", "re", "pathlib", "typing", "memcore", "pydantic"}


def test_the_registered_kind_builds_a_working_index(tmp_path, monkeypatch):
    monkeypatch.delenv("MEMCORE_PLUGINS", raising=False)
    monkeypatch.delenv("MEMCORE_DISABLE_PLUGINS", raising=False)
    settings = {"indexes": {"vector": {"kind": "exact"}, "notes": {"kind": "keyword", "min_overlap": 1}}}
    with memcore.open(settings, path=tmp_path) as memory:
        rid = memory.insert("memcore plugins are found through entry points")
        assert ids(memory.query("entry points", index="notes", k=1)) == [rid]


def test_end_to_end_through_settings(tmp_path, monkeypatch):
    """The README's settings example: open, insert, filtered retrieve, reopen, rebuild."""
    monkeypatch.delenv("MEMCORE_PLUGINS", raising=False)
    monkeypatch.delenv("MEMCORE_DISABLE_PLUGINS", raising=False)
    settings = tmp_path / "memcore.toml"
    settings.write_text('pipeline = [{kind = "recall", index = "notes"}]\n\n[indexes.notes]\nkind = "keyword"\nmin_overlap = 1\n')
    directory = tmp_path / "mem"
    memory = memcore.open(settings, path=directory)
    try:
        memory.collection.insert(
            [
                {"id": "alice", "text": "Alice works at Google in Zurich.", "metadata": {"who": "alice"}},
                {"id": "bob", "text": "Bob works at a bakery.", "metadata": {"who": "bob"}},
            ]
        )
        assert ids(memory.collection.retrieve("alice google", index="notes", k=3)) == ["alice"]
        hits = memory.collection.retrieve("works", index="notes", k=3, where={"who": "bob"})
        assert ids(hits) == ["bob"]
        assert hits[0].record.text == "Bob works at a bakery."
    finally:
        memory.close()
    assert (directory / "indexes" / "notes" / "keyword.json").exists()

    memory = memcore.open(settings, path=directory)
    try:
        assert ids(memory.collection.retrieve("works", index="notes", k=3)) == ["alice", "bob"]
    finally:
        memory.close()

    # a lost index file is rebuilt from the store
    (directory / "indexes" / "notes" / "keyword.json").unlink()
    memory = memcore.open(settings, path=directory)
    try:
        assert ids(memory.collection.retrieve("bakery", index="notes", k=3)) == ["bob"]
    finally:
        memory.close()
