"""The hybrid service over two granularities: entries and windows of consecutive entries."""

from __future__ import annotations

import pytest
from memcore import ConfigError, Contribution, Hit, Query
from memcore.testing import ServiceContract, StageContract, build_stage

from memcore_services.granularity import ExpandConfig, ExpandStage, shared_metadata, window_record

TURNS = [
    ("Alice", "Where did you go on holiday last month?", 1),
    ("Bob", "We drove to the coast and stayed in a tiny fishing village.", 1),
    ("Alice", "Sounds lovely.", 1),
    ("Bob", "The grilled sardines were the best part.", 1),
    ("Alice", "I started pottery classes this week.", 2),
    ("Bob", "What did you make first?", 2),
    ("Alice", "A lopsided blue bowl for my cat.", 2),
]

WINDOWED = {
    "kind": "hybrid",
    "indexes": {"bm25": {"kind": "bm25"}},
    "windows": {"size": 3, "group": "session", "indexes": {"bm25": {"kind": "bm25"}}},
    "pipeline": [
        {"kind": "recall", "index": "bm25", "over_fetch": 2.0},
        {"kind": "recall", "index": "window.bm25", "over_fetch": 2.0},
        {"kind": "expand"},
        {"kind": "fuse", "fusion": {"kind": "rrf", "k": 10.0}},
        {"kind": "limit"},
    ],
}


def _fill(m):
    return [m.insert(f"{who}: {said}", metadata={"session": s, "speaker": who, "turn": i}) for i, (who, said, s) in enumerate(TURNS)]


def test_windows_are_records_of_the_last_entries_of_their_group(opener, tmp_path):
    with opener(tmp_path, WINDOWED) as m:
        ids = _fill(m)
        names = {i["name"] for i in m.collection.list_indexes()}
        assert names == {"hybrid.bm25", "hybrid.window.bm25"}
        assert m.collection.count(index="hybrid.bm25") == len(TURNS)
        windows = [m.collection.get(f"{rid}#window") for rid in ids]
        assert windows[0].metadata["members"] == ids[:1]
        assert windows[3].metadata["members"] == ids[1:4]
        assert windows[4].metadata["members"] == ids[4:5]  # a new session starts a new window
        assert windows[6].metadata["members"] == ids[4:7]
        assert windows[3].metadata["session"] == 1 and "speaker" not in windows[3].metadata  # only shared values
        assert windows[3].text.splitlines() == [m.collection.get(i).text for i in ids[1:4]]
        assert m.collection.state_items("hybrid.windows") == {'["", 1]': ids[2:4], '["", 2]': ids[5:7]}


def test_a_window_hit_brings_its_members_and_results_are_entries(opener, tmp_path):
    with opener(tmp_path, WINDOWED) as m:
        ids = _fill(m)
        # "holiday" and "sardines" are in different turns: only a window holds both
        results = m.retrieve("holiday sardines", k=4)
        got = [r["id"] for r in results]
        assert all("#window" not in i for i in got)
        assert set(ids[1:4]) & set(got) and ids[0] in got and ids[3] in got
        assert all(r["metadata"].get("granularity") is None for r in results)


def test_a_pipeline_without_expand_still_returns_entries(opener, tmp_path):
    service = {**WINDOWED, "pipeline": [{"kind": "recall", "index": "window.bm25"}, {"kind": "limit"}]}
    with opener(tmp_path, service) as m:
        ids = _fill(m)
        results = m.retrieve("lopsided bowl pottery", k=3)
        assert [r["id"] for r in results] == ids[4:7]  # the window of turns 4-6, its members in order
        assert all(r["text"] == m.collection.get(r["id"]).text for r in results)


def test_windows_survive_reopen_and_continue_the_group(opener, tmp_path):
    with opener(tmp_path, WINDOWED) as m:
        ids = _fill(m)
    with opener(tmp_path, WINDOWED) as m:
        rid = m.insert("Bob: Does the cat use the bowl?", metadata={"session": 2})
        assert m.collection.get(f"{rid}#window").metadata["members"] == [ids[5], ids[6], rid]


def test_bad_window_settings_are_config_errors(opener, tmp_path):
    with pytest.raises(ConfigError, match="size"):
        opener(tmp_path / "a", {**WINDOWED, "windows": {"size": 1, "indexes": {"bm25": {"kind": "bm25"}}}})
    with pytest.raises(ConfigError, match="window.missing"):
        opener(tmp_path / "b", {**WINDOWED, "pipeline": [{"kind": "recall", "index": "window.missing"}, {"kind": "limit"}]})


def test_shared_metadata_and_window_record():
    assert shared_metadata([{"a": 1, "b": 2}, {"a": 1, "b": 3}, {"a": 1}]) == {"a": 1}
    assert shared_metadata([]) == {}
    w = window_record([("x", "one", {"s": 1}), ("y", "two", {"s": 1})])
    assert w == {"text": "one\ntwo", "metadata": {"s": 1, "members": ["x", "y"], "granularity": "window"}}


def test_expand_orders_members_by_the_other_lists_and_keeps_provenance(opener, tmp_path):
    with opener(tmp_path, WINDOWED) as m:
        ids = _fill(m)
        from memcore.plugin import PipelineContext

        ctx = PipelineContext(m.collection, Query(text="x", k=5))
        entries = [Hit(ids[2], 1.0, source="e"), Hit(ids[0], 0.5, source="e")]
        ctx.add_list("entries", entries)
        ctx.add_list("windows", [Hit(f"{ids[2]}#window", 2.0, source="w"), Hit(f"{ids[1]}#window", 1.0, source="w")])
        ExpandStage(ExpandConfig()).run(ctx)
        assert ctx.lists["entries"] is entries  # a list without windows is left alone
        got = ctx.lists["windows"]
        assert [h.id for h in got] == [ids[2], ids[0], ids[1]]  # ids[2] then ids[0] (ranked by 'entries'), then ids[1]
        assert [h.score for h in got] == [2.0, 2.0, 2.0]
        assert all(h.provenance == (Contribution("windows", r, h.score),) for r, h in enumerate(got, start=1))
        assert ctx.current is got
        with pytest.raises(ConfigError, match="no list"):
            ExpandStage(ExpandConfig(lists=["nope"])).run(ctx)


class TestHybridWithWindows(ServiceContract):
    @pytest.fixture
    def open_memory(self, opener):
        service = {
            **WINDOWED,
            "indexes": {"dense": {"kind": "exact", "space": "default"}, "bm25": {"kind": "bm25"}},
            "pipeline": [
                {"kind": "recall", "index": "dense", "over_fetch": 2.0},
                {"kind": "recall", "index": "bm25", "over_fetch": 2.0},
                {"kind": "recall", "index": "window.bm25", "over_fetch": 2.0},
                {"kind": "expand"},
                {"kind": "fuse", "fusion": {"kind": "rrf", "k": 10.0}},
                {"kind": "limit"},
            ],
        }
        return lambda path: opener(path, service)


class TestExpandStage(StageContract):
    @pytest.fixture
    def stage(self):
        return build_stage("expand")


def test_text_field_gives_the_text_members_bring_to_their_windows(opener, tmp_path):
    service = {**WINDOWED, "windows": {**WINDOWED["windows"], "text_field": "turn"}}
    with opener(tmp_path, service) as m:
        a = m.insert("Alice: hello [context] nothing", metadata={"session": 1, "turn": "Alice: hello"})
        b = m.insert("Bob: hi there", metadata={"session": 1})  # no field: its own text
        assert m.collection.get(f"{b}#window").text == "Alice: hello\nBob: hi there"
        assert m.collection.get(f"{a}#window").metadata == {"session": 1, "turn": "Alice: hello", "members": [a], "granularity": "window"}


def test_a_deleted_entry_is_not_returned_through_its_windows(opener, tmp_path):
    with opener(tmp_path, WINDOWED) as m:
        ids = _fill(m)
        m.delete([ids[1]])
        got = [r["id"] for r in m.retrieve("coast fishing village sardines", k=7)]
        assert ids[1] not in got and ids[3] in got


def _windows(m):
    return {r.id: r for r in m.collection.get_many(m.collection.ids(where={"granularity": "window"}))}


def _assert_gone_from_windows(m, ids, gone, words):
    windows = _windows(m)
    assert not any(f"{g}#window" in windows for g in gone)
    for w in windows.values():
        assert not set(gone) & set(w.metadata["members"])
        assert w.text.splitlines() == [m.collection.get(i).text for i in w.metadata["members"]]
    for word in words:  # the deleted text is in no window index
        assert m.collection.retrieve(word, index="hybrid.window.bm25", k=10) == []
        assert all(word not in w.text for w in windows.values())


def test_deleting_an_entry_rebuilds_the_windows_that_held_it_in_one_write(opener, tmp_path):
    with opener(tmp_path, WINDOWED) as m:
        ids = _fill(m)
        seq = m.collection.store.last_seq()
        assert m.delete(ids[1]) == 1
        assert m.collection.store.last_seq() == seq + 1  # entry, its window, the rebuilt windows: one batch
        windows = _windows(m)
        assert windows[f"{ids[2]}#window"].metadata["members"] == [ids[0], ids[2]]
        assert windows[f"{ids[3]}#window"].metadata["members"] == [ids[2], ids[3]]
        assert windows[f"{ids[0]}#window"].metadata["members"] == [ids[0]]  # untouched
        _assert_gone_from_windows(m, ids, [ids[1]], ["fishing", "village"])
        # a deleted entry in the group's tail leaves it: the next window does not take it in
        m.delete(ids[3])
        assert m.collection.state_items("hybrid.windows")['["", 1]'] == [ids[2]]
        new = m.insert("Alice: Did you bring me a souvenir?", metadata={"session": 1})
        assert m.collection.get(f"{new}#window").metadata["members"] == [ids[2], new]
    with opener(tmp_path, WINDOWED) as m:  # reopened: the window index is loaded from disk
        _assert_gone_from_windows(m, ids, [ids[1], ids[3]], ["fishing", "village", "sardines"])
        assert [r["id"] for r in m.retrieve("sardines fishing", k=7) if r["id"] in (ids[1], ids[3])] == []


def test_deleting_by_filter_and_an_unknown_id_changes_nothing(opener, tmp_path):
    from memcore import NotFoundError

    with opener(tmp_path, WINDOWED) as m:
        ids = _fill(m)
        before = {k: (w.text, w.metadata) for k, w in _windows(m).items()}
        with pytest.raises(NotFoundError):
            m.delete([ids[1], "no-such-id"])
        assert {k: (w.text, w.metadata) for k, w in _windows(m).items()} == before and m.collection.count() == 2 * len(TURNS)
        assert m.delete(where={"speaker": "Bob"}) == 3
        bob = [ids[i] for i, (who, _, _) in enumerate(TURNS) if who == "Bob"]
        _assert_gone_from_windows(m, ids, bob, ["coast", "sardines", "make"])
        assert m.collection.count() == 2 * (len(TURNS) - 3)
