"""The ``bm25`` index on its own: input checks, query modes, tokenization, merge policy,
deletes, and persistence (pickle-free files, atomic saves, reopen, corruption)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError as PydanticValidationError

from memcore import ConfigError, CorruptError, Query, Record, ValidationError
from memcore.plugin import IndexContext

from memcore_bm25.bm25 import BM25Config, BM25Index, auto_merge_threshold
from memcore_bm25.bm25_files import STATE_FILE

TEXTS = {
    "a": "Alice went running in the park every morning",
    "b": "Bob runs a small coffee shop near the station",
    "c": "The gardens of the city museum were painted in spring",
    "d": "Carol remembers her travels to Lisbon and Porto",
    "e": "A memory of coffee and painting with Alice",
}


def make_index(name: str = "bm25", **options) -> BM25Index:
    return BM25Index(BM25Config(**options), IndexContext(name))


def filled(**options) -> BM25Index:
    index = make_index(**options)
    index.add([Record.create(t, id=i) for i, t in TEXTS.items()])
    return index


def ids(hits) -> list[str]:
    return [h.id for h in hits]


def search(index: BM25Index, text: str, k: int = 10, allowed=None, **extras) -> list[str]:
    return ids(index.search(Query(text=text, extras={"bm25": extras} if extras else {}), k, allowed))


# -- input ------------------------------------------------------------------------------------


@pytest.mark.parametrize("text", [None, "", "   \n\t "])
def test_empty_query_text_is_rejected(text):
    index = filled()
    query = Query(text=text)
    with pytest.raises(ValidationError, match="query text is empty"):
        index.validate_query(query)
    with pytest.raises(ValidationError):
        index.search(query, 5)


@pytest.mark.parametrize("k", [0, -1, True, 2.5, "3"])
def test_bad_k_is_rejected(k):
    with pytest.raises(ValidationError, match="k must be a positive integer"):
        filled().search(Query(text="coffee"), k)


@pytest.mark.parametrize(
    "extras, match",
    [
        ({"bm25": {"min_scor": 1.0}}, "min_scor"),
        ({"bm25": {"min_score": -1}}, "min_score"),
        ({"bm25": {"min_score": "high"}}, "min_score"),
        ({"bm25": "strict"}, "extras.bm25"),
        (["bm25"], "extras must be a dict"),
    ],
)
def test_bad_query_modes_are_rejected(extras, match):
    index = filled()
    with pytest.raises(ValidationError, match=match):
        index.validate_query(Query(text="coffee", extras=extras))
    with pytest.raises(ValidationError, match=match):
        index.search_batch([Query(text="coffee"), Query(text="coffee", extras=extras)], 3)


def test_min_score_mode_and_foreign_extras():
    index = filled()
    hits = index.search(Query(text="coffee alice"), 10)
    assert len(hits) >= 3
    cut = hits[1].score
    assert search(index, "coffee alice", min_score=cut) == ids(hits[:2])
    # keys of other indexes' query modes are not this index's business
    assert ids(index.search(Query(text="coffee alice", extras={"mode": "newest"}), 10)) == ids(hits)


def test_metadata_fields_are_indexed_and_checked():
    index = make_index(fields=["text", "metadata.title", "metadata.tags"])
    index.add(
        [
            Record.create("plain body", id="x", metadata={"title": "Harbour report", "tags": ["lighthouse", "storm"]}),
            Record.create("another body", id="y", metadata={"title": 2024}),
            Record.create("body without title", id="z"),
        ]
    )
    assert search(index, "harbour") == ["x"]
    assert search(index, "lighthouse") == ["x"]
    assert search(index, "2024") == ["y"]
    with pytest.raises(ValidationError, match="metadata.title"):
        index.validate([Record.create("t", id="bad", metadata={"title": {"nested": "no"}})])
    with pytest.raises(ValidationError):
        index.add([Record.create("t", id="bad", metadata={"tags": [1, 2]})])
    assert len(index) == 3


def test_config_validation():
    assert BM25Config(stopwords="none", stemmer="none").stopwords is None
    assert BM25Config(stopwords=False, stemmer=False).stemmer is None
    assert BM25Config(stopwords=["The", "a"]).stopwords == ("The", "a")
    for bad in (
        {"stopwords": "klingon"},
        {"fields": []},
        {"fields": ["title"]},
        {"fields": ["text", "text"]},
        {"method": "bm26"},
        {"k1": 0},
        {"b": 1.5},
        {"merge_threshold": 0},
        {"colour": "red"},
    ):
        with pytest.raises(PydanticValidationError):
            BM25Config(**bad)
    with pytest.raises(ConfigError, match="unknown stemmer 'klingon'.*english"):
        make_index(stemmer="klingon")


# -- search behaviour -------------------------------------------------------------------------


def test_unknown_words_and_stopwords_give_no_hits():
    index = filled()
    assert index.search(Query(text="zebra quokka"), 5) == []
    assert index.search(Query(text="the and of"), 5) == []
    assert index.search(Query(text="!!! ??"), 5) == []


def test_k_larger_than_the_corpus():
    index = filled()
    hits = index.search(Query(text="coffee"), 1000)
    assert sorted(ids(hits)) == ["b", "e"]
    index.merge()
    assert sorted(ids(index.search(Query(text="coffee"), 1000))) == ["b", "e"]


def test_stemming_stopwords_and_their_absence():
    index = filled()
    assert set(search(index, "run")) == {"a", "b"}  # running, runs -> run
    assert set(search(index, "remembered")) == {"d"}  # remembers -> rememb
    assert set(search(index, "memories")) == {"e"}  # memory -> memori
    plain = filled(stemmer="none", stopwords="none")
    assert search(plain, "run") == []
    assert set(search(plain, "the")) == {"a", "b", "c"}
    custom = filled(stemmer="none", stopwords=["Alice", "coffee"])
    assert search(custom, "alice coffee") == []


def test_repeated_query_words_count_twice():
    index = filled()
    once = index.search(Query(text="coffee alice"), 5)
    twice = index.search(Query(text="coffee coffee alice"), 5)
    assert {h.id: h.score for h in twice}["b"] == pytest.approx(2 * {h.id: h.score for h in once}["b"])


def test_batch_with_duplicate_ids_keeps_the_last():
    index = make_index()
    index.add([Record.create("first version about tulips", id="x"), Record.create("other", id="y"), Record.create("second version about roses", id="x")])
    assert len(index) == 2
    assert search(index, "tulips") == []
    assert search(index, "roses") == ["x"]


def test_allowed_is_pushed_down_in_both_segments():
    index = filled(merge_threshold=100)
    index.merge()
    index.add([Record.create("coffee with Dora", id="f")])
    assert set(search(index, "coffee")) == {"b", "e", "f"}
    everything = search(index, "coffee")
    assert search(index, "coffee", allowed={"e", "f", "zz"}) == [i for i in everything if i in {"e", "f"}]
    assert search(index, "coffee", 1, allowed={"b", "f"}) == [i for i in everything if i in {"b", "f"}][:1]
    assert search(index, "coffee", allowed={"a"}) == []
    assert search(index, "coffee", allowed=set()) == []


def test_scores_are_bm25_and_ties_break_by_id():
    index = make_index()
    index.add([Record.create("twin text here", id="z2"), Record.create("twin text here", id="z1")])
    hits = index.search(Query(text="twin"), 2)
    assert ids(hits) == ["z1", "z2"] and hits[0].score == hits[1].score > 0
    assert hits[0].raw == hits[0].score and hits[0].source == "bm25"
    assert index.score_range == (0.0, None) and "BM25" in index.score_name


# -- segments, deletes, merges ----------------------------------------------------------------


def test_deletes_are_masked_then_merged_away():
    index = filled(merge_threshold=100)
    index.merge()
    assert index.stats()["base"] == 5
    index.remove(["b", "missing"])
    assert index.stats()["base"] == 4 and index.pending == 1  # a tombstone in the bm25s segment
    assert search(index, "coffee") == ["e"]
    assert search(index, "coffee", allowed={"b", "e"}) == ["e"]
    index.add([Record.create("Bob runs a coffee roastery now", id="b")])  # back, in the fresh segment
    assert set(search(index, "roastery coffee")) == {"b", "e"}
    index.merge()
    stats = index.stats()
    assert (stats["base"], stats["fresh"], stats["pending"], len(index)) == (5, 0, 0, 5)
    assert search(index, "roastery") == ["b"]
    index.remove(list(TEXTS))
    assert len(index) == 0 and search(index, "coffee") == []
    index.merge()
    assert index.stats()["base"] == 0 and search(index, "coffee") == []


def test_merge_happens_on_the_search_after_the_threshold():
    index = make_index(merge_threshold=3)
    index.add([Record.create(t, id=i) for i, t in list(TEXTS.items())[:3]])
    assert index.pending == 3
    search(index, "coffee")
    assert index.merges == 0  # 3 is not beyond the threshold
    index.add([Record.create(TEXTS["d"], id="d")])
    assert index.merges == 0  # adding never merges: a bulk load stays linear
    assert search(index, "travels") == ["d"]
    assert index.merges == 1 and index.pending == 0 and index.stats()["base"] == 4


def test_default_threshold_follows_the_base_size():
    assert make_index().merge_threshold == auto_merge_threshold(0) == 1000
    assert auto_merge_threshold(50_000) == 1000
    assert auto_merge_threshold(250_000) == 2500
    assert make_index(merge_threshold=7).merge_threshold == 7


# -- persistence ------------------------------------------------------------------------------


def saved(index: BM25Index, directory: Path) -> BM25Index:
    directory.mkdir(exist_ok=True)
    index.save(directory)
    again = make_index(**index.config.model_dump(exclude={"kind"}))
    again.load(directory)
    return again


def all_results(index: BM25Index) -> list:
    texts = ["coffee", "alice running", "gardens painted spring", "travels lisbon", "memory"]
    return [[(h.id, round(h.score, 6)) for h in index.search(Query(text=t), 10)] for t in texts]


def test_reopen_gives_identical_results_in_every_state(tmp_path):
    index = filled(merge_threshold=50)
    assert all_results(saved(index, tmp_path / "fresh-only")) == all_results(index)
    index.merge()
    assert all_results(saved(index, tmp_path / "merged")) == all_results(index)
    index.remove(["a"])
    index.add([Record.create("Dora paints gardens with new words like zanzibar", id="f")])
    reopened = saved(index, tmp_path / "mixed")
    assert all_results(reopened) == all_results(index)
    assert reopened.stats() == index.stats()
    # the vocabulary is stable: new terms after reopening get new ids, old ones keep theirs
    for target in (index, reopened):
        target.add([Record.create("zanzibar quokka expedition", id="g")])
    assert all_results(reopened) == all_results(index)
    assert search(reopened, "quokka zanzibar") == search(index, "quokka zanzibar") == ["g", "f"]


def test_files_are_pickle_free_and_swapped_in(tmp_path):
    index = filled()
    index.merge()
    index.add([Record.create("fresh coffee", id="f")])
    index.save(tmp_path)
    names = sorted(p.name for p in tmp_path.iterdir())
    assert STATE_FILE in names and not [n for n in names if n.endswith(".tmp") or n.startswith(".")]
    for path in tmp_path.glob("*.npy"):
        np.load(path, allow_pickle=False)  # raises if anything needed pickle
    for path in tmp_path.glob("*.json"):
        json.loads(path.read_text())
    state = json.loads((tmp_path / STATE_FILE).read_text())
    assert [doc[0] for doc in state["fresh"]] == ["f"]
    # saving again without a merge rewrites only the small state file
    before = {p.name: p.stat().st_mtime_ns for p in tmp_path.iterdir()}
    index.add([Record.create("more coffee", id="g")])
    index.save(tmp_path)
    after = {p.name: p.stat().st_mtime_ns for p in tmp_path.iterdir()}
    assert [n for n in after if after[n] != before.get(n)] == [STATE_FILE]
    # a merge writes a new generation and removes the old one
    old = {n for n in names if n.startswith("seg-")}
    index.merge()
    index.save(tmp_path)
    now = {p.name for p in tmp_path.iterdir() if p.name.startswith("seg-")}
    assert now and not (now & old)


def test_save_merges_when_due(tmp_path):
    index = make_index(merge_threshold=2)
    index.add([Record.create(t, id=i) for i, t in TEXTS.items()])
    index.save(tmp_path)
    assert index.merges == 1 and json.loads((tmp_path / STATE_FILE).read_text())["fresh"] == []


def corrupt_cases():
    def truncate(d: Path):
        path = next(d.glob("seg-*.data.csc.index.npy"))
        path.write_bytes(path.read_bytes()[:20])

    def bad_json(d: Path):
        (d / STATE_FILE).write_text("{not json")

    def missing_segment(d: Path):
        next(d.glob("seg-*.tf_columns.npy")).unlink()

    def fewer_ids(d: Path):
        path = next(d.glob("seg-*.ids.json"))
        path.write_text(json.dumps(json.loads(path.read_text())[:-1]))

    def unknown_term(d: Path):
        state = json.loads((d / STATE_FILE).read_text())
        state["fresh"] = [["q", [10_000], [1]]]
        (d / STATE_FILE).write_text(json.dumps(state))

    def pickled_array(d: Path):
        path = next(d.glob("seg-*.terms.npy"))
        np.save(path, np.array([{"a": 1}], dtype=object), allow_pickle=True)

    return [truncate, bad_json, missing_segment, fewer_ids, unknown_term, pickled_array]


@pytest.mark.parametrize("damage", corrupt_cases(), ids=lambda f: f.__name__)
def test_damaged_files_raise_corrupt_error(tmp_path, damage):
    index = filled()
    index.merge()
    index.add([Record.create("fresh coffee", id="f")])
    index.save(tmp_path)
    damage(tmp_path)
    with pytest.raises(CorruptError):
        make_index().load(tmp_path)


def test_other_settings_raise_corrupt_error(tmp_path):
    """A base segment built with other scoring parameters is refused (bm25s's own
    params.index.json); in a collection the core's index.json refuses any changed setting first."""
    index = filled()
    index.merge()
    index.save(tmp_path)
    for options in ({"k1": 1.5}, {"method": "bm25+"}):
        with pytest.raises(CorruptError, match="built with"):
            make_index(**options).load(tmp_path)
    with pytest.raises(CorruptError):
        make_index().load(tmp_path / "nowhere")


def test_no_temporary_files_after_a_failed_save(tmp_path, monkeypatch):
    index = filled()
    index.merge()

    def boom(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError, match="disk full"):
        index.save(tmp_path)
    monkeypatch.undo()
    assert not [p for p in tmp_path.iterdir()]
    index.save(tmp_path)
    assert all_results(saved(index, tmp_path)) == all_results(index)
