"""Issue 27, items 1 and 5: services under concurrent callers, inconsistent service state
(opens, reported, repaired), idempotent retries, and crashes inside a memoryos eviction.

The ServiceContract runs the threads test on every service with its contract settings;
here each service runs it again with small capacities, so that its state-changing paths
(windows evicting, tiers migrating and forgetting, segments summarised and promoted,
distillation merging, windows rebuilt) run under the threads too.
"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from memcore import CorruptError, DuplicateIdError
from memcore.cli import main
from memcore.testing.crash_service import run_service_crash_trials
from memcore.testing.threads import check_after_threads, hammer_service

from memcore_services.hierarchical import NS as HNS
from memcore_services.memoryos import MTM, NS as MNS, STM, USER_KB

WINDOWED = {
    "kind": "hybrid",
    "indexes": {"bm25": {"kind": "bm25"}},
    "windows": {"size": 3, "group": "session", "indexes": {"bm25": {"kind": "bm25"}}},
    "pipeline": [
        {"kind": "recall", "index": "bm25"},
        {"kind": "recall", "index": "window.bm25"},
        {"kind": "expand"},
        {"kind": "fuse", "fusion": {"kind": "rrf", "k": 10.0}},
        {"kind": "limit"},
    ],
}

STRESSED = {
    "short_term_forget": ({"kind": "short_term_memory", "max_dialog": 3, "on_evict": "forget"}, True),
    "short_term_archive": ({"kind": "short_term_memory", "max_dialog": 3}, False),
    "memoryos_evicting": ({"kind": "memoryos", "stm_capacity": 2, "mtm_capacity": 2, "heat_threshold": 0.5}, False),
    "hierarchical_three_tier_delete": (
        {"kind": "hierarchical", "layout": "three_tier", "capacities": {"stm": 2, "mtm": 2, "ltm": 6}, "forget": "delete"},
        True,
    ),
    "hierarchical_functional_heat": ({"kind": "hierarchical", "layout": "functional", "migration": "heat", "capacities": {"episodic": 2}}, False),
    "vector_hash_extract_distill": ({"kind": "vector_hash", "bits": 4, "tables": 4, "distill": {"similarity": 0.0}}, False),
    "vector_hash_thoughts_distill": ({"kind": "vector_hash", "extract": False, "bits": 4, "tables": 4, "distill": {"similarity": 0.0}}, True),
    "hybrid_windows": (WINDOWED, False),
}


@pytest.mark.parametrize("scoped", [False, True], ids=["unscoped", "alice_and_bob"])
@pytest.mark.parametrize("name", list(STRESSED))
def test_threads_on_small_capacities_leave_a_consistent_memory(opener, tmp_path, name, scoped):
    service, may_forget = STRESSED[name]
    path = tmp_path / name
    memory = opener(path, service)
    scopes = ({"user_id": "alice"}, {"user_id": "bob"}) if scoped else (None,)
    report = hammer_service(memory, threads=4, items=14, seed=7, scopes=scopes)
    memory.close()
    broken = check_after_threads(lambda p: opener(p, service), path, report, may_forget=may_forget)
    assert not broken, "\n".join(broken[:20])
    assert report.calls["insert"] == 4 * 14 and report.calls["delete"] > 0


# -- memoryos: damaged state opens, is reported, is repaired ---------------------------------

MEMORYOS = {"kind": "memoryos", "stm_capacity": 2, "mtm_capacity": 3, "heat_threshold": None}


def _memoryos_with_segments(opener, path, n=16):
    memory = opener(path, MEMORYOS)
    for i in range(n):
        memory.insert(f"turn {i}: talk about topic {i % 4} and the weather", metadata={"session": f"s{i // 4}", "n": i})
    return memory


def _damage_memoryos(memory):
    """Break the state the ways threads (and a crash between an eviction's two commits of
    an older version) did: a segment listing a page that does not exist and one listed by
    another segment, a lost centroid, a counter behind its segments, an MTM page in no
    segment, and a page listed by two segment summaries."""
    c = memory.collection
    state = c.state_items(MNS)
    segments = sorted((k for k in state if k.startswith("s:")), key=lambda k: int(k[2:]))
    assert len(segments) >= 2 and c.count(index=USER_KB) >= 1, "the fixture needs segments and a summary"
    first, second = segments[0], segments[1]
    stolen = state[second]["pages"][0]
    summary = next(r for r in c.get_many(c.ids(index=USER_KB)) if r.metadata.get("kind") == "segment_summary")
    orphan = state[segments[-1]]["pages"][-1]
    c.set_state(
        {
            (MNS, first): {**state[first], "pages": [*state[first]["pages"], "no-such-page", stolen]},
            (MNS, "v:" + second[2:]): None,
            (MNS, "next_segment"): 1,
            (MNS, segments[-1]): {**state[segments[-1]], "pages": state[segments[-1]]["pages"][:-1]},
        }
    )
    twice = {"text": "a second summary of the same pages", "metadata": {**summary.metadata}}
    c.insert([twice], indexes=[USER_KB])
    return {"stolen": stolen, "orphan": orphan, "summary_pages": summary.metadata["pages"]}


def _summary_pages(memory):
    """page -> how many segment summaries list it."""
    counts: dict[str, int] = {}
    c = memory.collection
    for record in c.get_many(c.ids(index=USER_KB)):
        if record is not None and record.metadata.get("kind") == "segment_summary":
            for page in record.metadata["pages"]:
                counts[page] = counts.get(page, 0) + 1
    return counts


def test_damaged_memoryos_state_opens_is_reported_and_repaired(opener, tmp_path):
    path = tmp_path / "mos"
    memory = _memoryos_with_segments(opener, path)
    _damage_memoryos(memory)
    memory.close()

    memory = opener(path, MEMORYOS)  # opens
    kinds = {p.kind for p in memory.check_service()}
    assert {
        "segment_lists_page_not_in_mtm",
        "page_in_two_segments",
        "segment_without_centroid",
        "segment_counter_behind",
        "mtm_page_in_no_segment",
        "page_in_two_summaries",
    } <= kinds, kinds
    before = memory.count()
    result = memory.repair_service()
    assert {p.kind for p in result["repaired"]} >= kinds - {"page_state_mismatch"}
    assert result["problems"] == [], result["problems"]
    assert memory.count() == before - 1  # only the duplicate summary went (its pages belong to the first)
    assert max(_summary_pages(memory).values()) == 1
    memory.close()

    memory = opener(path, MEMORYOS)
    assert memory.check_service() == []
    for i in range(16, 30):  # inserts evict and summarise again; retrieve reads every segment
        memory.insert(f"turn {i}: talk about topic {i % 4} and the weather", metadata={"session": f"s{i // 4}", "n": i})
    assert memory.retrieve("topic 2 weather", k=5)
    assert memory.check_service() == []
    assert memory.repair_service() == {"repaired": [], "problems": []}
    memory.close()


def test_a_verb_failing_on_inconsistent_state_raises_a_typed_error_naming_the_repair(opener, tmp_path):
    path = tmp_path / "mos"
    memory = _memoryos_with_segments(opener, path)
    key = next(k for k in memory.collection.state_items(MNS) if k.startswith("s:"))
    memory.collection.set_state({(MNS, "v:" + key[2:]): [1.0], (MNS, "e:" + key[2:]): [1.0, 0.0]})  # vectors of the wrong shape
    memory.close()
    memory = opener(path, MEMORYOS)
    with pytest.raises(CorruptError, match="memcore service repair") as raised:
        memory.retrieve("topic 2 weather", k=5)
    assert not isinstance(raised.value.__cause__, CorruptError)  # the raw error is kept as the cause
    kinds = {p.kind for p in memory.check_service()}
    assert {"segment_without_centroid", "segment_summary_vector_unusable"} <= kinds
    assert memory.repair_service()["problems"] == []
    assert memory.retrieve("topic 2 weather", k=5)
    memory.close()


def test_info_check_reports_and_service_repair_fixes_memoryos(opener, tmp_path):
    path = tmp_path / "mos"
    memory = _memoryos_with_segments(opener, path)
    _damage_memoryos(memory)
    memory.close()
    config = tmp_path / "memcore.toml"
    config.write_text('[indexes]\n\n[service]\nkind = "memoryos"\nstm_capacity = 2\nmtm_capacity = 3\n')
    runner = CliRunner()
    info = runner.invoke(main, ["info", "--path", str(path), "--config", str(config), "--check", "--json"])
    assert info.exit_code == 1, info.output
    data = json.loads(info.output)
    assert data["check"]["ok"] is False and data["check"]["service"]["kind"] == "memoryos"
    assert "page_in_two_segments" in {p["kind"] for p in data["check"]["service"]["problems"]}
    text = runner.invoke(main, ["info", "--path", str(path), "--config", str(config), "--check"])
    assert text.exit_code == 1 and "memcore service repair" in text.output
    checked = runner.invoke(main, ["service", "check", "--path", str(path), "--config", str(config), "--json"])
    assert checked.exit_code == 1 and json.loads(checked.output)["problems"]
    repaired = runner.invoke(main, ["service", "repair", "--path", str(path), "--config", str(config), "--json"])
    assert repaired.exit_code == 0, repaired.output
    out = json.loads(repaired.output)
    assert out["ok"] is True and out["repaired"] and out["problems"] == []
    again = runner.invoke(main, ["service", "repair", "--path", str(path), "--config", str(config)])
    assert again.exit_code == 0 and "repaired 0 problem(s); consistent now" in again.output
    ok = runner.invoke(main, ["info", "--path", str(path), "--config", str(config), "--check", "--json"])
    assert ok.exit_code == 0, ok.output
    assert json.loads(ok.output)["check"]["service"]["problems"] == []
    assert runner.invoke(main, ["service", "repair", "--help"]).exit_code == 0
    no_config = runner.invoke(main, ["info", "--path", str(path), "--check"])
    assert "service: not checked" in no_config.output


# -- hierarchical: damaged state ----------------------------------------------------------------

HIER = {"kind": "hierarchical", "layout": "three_tier", "capacities": {"stm": 2, "mtm": 3}}


def test_damaged_hierarchical_state_opens_is_reported_and_repaired(opener, tmp_path):
    path = tmp_path / "hier"
    memory = opener(path, HIER)
    ids = [memory.insert(f"entry number {i} about subject {i}") for i in range(10)]
    alice = [memory.insert(f"alice's entry {i}", scope={"user_id": "alice"}) for i in range(4)]
    c = memory.collection
    in_ltm = c.ids(index=f"{HNS}.ltm")
    c.insert_to_index(f"{HNS}.stm", in_ltm[:1])  # an entry in two tiers (and stm over capacity)
    with c.scoped({"user_id": "alice"}):
        c.set_state({(HNS, f"r:{alice[0]}"): None, (HNS, "seq"): 1, (HNS, "r:gone"): {"tier": "stm", "entered": 1}})
    memory.close()

    memory = opener(path, HIER)
    problems = memory.check_service()
    kinds = {p.kind for p in problems}
    assert {"entry_in_two_tiers", "tier_over_capacity", "entry_without_state", "counter_behind", "state_of_missing_entry"} <= kinds, kinds
    assert any(p.scope is not None and p.scope.as_dict() == {"user_id": "alice"} for p in problems)
    result = memory.repair_service()
    assert result["problems"] == []
    tiers = {t: set(memory.collection.ids(index=f"{HNS}.{t}")) for t in ("stm", "mtm", "ltm")}
    assert not (tiers["stm"] & tiers["mtm"]) and not (tiers["stm"] & tiers["ltm"]) and not (tiers["mtm"] & tiers["ltm"])
    assert set(ids + alice) == set().union(*tiers.values())
    assert len(tiers["stm"]) <= 2
    memory.close()
    memory = opener(path, HIER)
    assert memory.check_service() == []
    memory.insert("one more entry")
    assert memory.retrieve("entry number 3", k=3)
    memory.close()


# -- idempotent retries ----------------------------------------------------------------------------


def test_hierarchical_retry_of_a_migrated_entry_is_the_same_entry(opener, tmp_path):
    memory = opener(tmp_path / "h", HIER)
    first = memory.insert("the first entry, later migrated", metadata={"n": 0})
    others = [memory.insert(f"entry {i}", metadata={"n": i}) for i in range(1, 4)]
    tier = lambda rid: [t for t in ("stm", "mtm", "ltm") if rid in memory.collection.ids(index=f"{HNS}.{t}")]  # noqa: E731
    assert tier(first) == ["mtm"]
    counts = {t: memory.collection.count(index=f"{HNS}.{t}") for t in ("stm", "mtm", "ltm")}
    assert memory.insert("the first entry, later migrated", metadata={"n": 0}) == first  # the retry
    assert tier(first) == ["mtm"], "a retry put the entry in a second tier"
    assert {t: memory.collection.count(index=f"{HNS}.{t}") for t in ("stm", "mtm", "ltm")} == counts, "a retry changed the tiers"
    assert [tier(o) for o in others] == [["mtm"], ["stm"], ["stm"]], "a retry pushed another entry on early"
    with pytest.raises(DuplicateIdError):
        memory.insert("other content under the same id", id=first)
    assert memory.check_service() == []
    memory.close()


def test_memoryos_retry_of_a_moved_or_summarised_page_changes_nothing(opener, tmp_path):
    memory = _memoryos_with_segments(opener, tmp_path / "m", n=16)
    c = memory.collection
    state = c.state_items(MNS)
    summarised = next(k[2:] for k, v in state.items() if k.startswith("p:") and v.get("tier") == "ltm")
    in_mtm = c.ids(index=MTM)[0]
    for rid in (summarised, in_mtm, c.ids(index=STM)[-1]):
        record = c.get(rid)
        seq = c.store.last_seq()
        assert memory.insert(record.text, metadata=record.metadata) == rid
        assert c.store.last_seq() == seq, f"a retry of {rid} wrote something"
    assert max(_summary_pages(memory).values()) == 1
    assert memory.check_service() == []
    memory.close()


@pytest.mark.parametrize(
    "service",
    [
        {"kind": "short_term_memory", "max_dialog": 2},
        {"kind": "vector_hash", "distill": {"similarity": 0.0}},
        {"kind": "vector_hash", "extract": False, "distill": {"similarity": 0.0}},
        WINDOWED,
        {"kind": "hybrid"},
        {"kind": "default"},
    ],
    ids=["short_term", "vector_hash_extract", "vector_hash_thoughts", "hybrid_windows", "hybrid", "default"],
)
def test_retry_of_identical_content_writes_nothing(opener, tmp_path, service):
    memory = (
        opener(tmp_path / "m", service)
        if service["kind"] != "default"
        else opener(tmp_path / "m", service, indexes={"flat": {"kind": "exact", "space": "default"}})
    )
    texts = [f"Alice said thing number {i} about the harbour" for i in range(5)]
    ids = [memory.insert(t, metadata={"session": 1, "n": i}) for i, t in enumerate(texts)]
    seq = memory.collection.store.last_seq()
    count = memory.count()
    report = memory.service.report() if hasattr(memory.service, "report") else None
    for i, t in enumerate(texts):
        assert memory.insert(t, metadata={"session": 1, "n": i}) == ids[i]
    assert memory.collection.store.last_seq() == seq, "a retry wrote something"
    assert memory.count() == count
    if report is not None:
        assert memory.service.report() == report
    memory.close()


# -- crashes inside a memoryos eviction -----------------------------------------------------------

CRASHED = {"indexes": {}, "service": {"kind": "memoryos", "stm_capacity": 2, "mtm_capacity": 1, "heat_threshold": None}}


def _no_half_evictions(memory):
    """No page in two segment summaries, and no summarised page still in the MTM."""
    out = [f"page {p} is in {n} segment summaries" for p, n in _summary_pages(memory).items() if n > 1]
    c = memory.collection
    in_mtm = set(c.ids(index=MTM))
    out += [f"summarised page {p} is still in the MTM" for p in _summary_pages(memory) if p in in_mtm]
    return out


def test_a_kill_right_after_an_evictions_summary_commit_leaves_no_half_eviction(tmp_path):
    report = run_service_crash_trials(tmp_path / "mem", 4, CRASHED, seed=3, max_delay=0.8, kill_after=USER_KB, kill_after_trials=2, verify=_no_half_evictions)
    assert report.self_killed == 2, report.as_dict()
    assert report.ok, report.as_dict()
    assert report.acknowledged > 0 and report.lost == 0


def test_random_kills_during_memoryos_evictions_lose_nothing(tmp_path):
    report = run_service_crash_trials(tmp_path / "mem", 6, CRASHED, seed=11, max_delay=1.2, verify=_no_half_evictions)
    assert report.ok, report.as_dict()
    assert report.acknowledged > 0 and report.lost == 0
