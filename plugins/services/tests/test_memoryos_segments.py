"""``memoryos``: MemoryOS's segment assignment (batch summary, summary cosine + keyword
Jaccard), segment summaries kept up to date, the event-time clock of heat recency."""

from __future__ import annotations

from collections import Counter
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from memcore.plugin import LLM, ComponentConfig
from memcore import ValidationError, hookimpl
from memcore.testing import register_plugin
from memcore_services.memoryos_clock import event_time
from memcore_services.memoryos_ltm import content_words
from memcore_services.memoryos_segments import KEYWORDS, jaccard, parse_themes, segment_score

PAGES = [
    "Alice: I adopted a grey cat named Pixel from the shelter",
    "Bob: Pixel the grey cat sleeps on the shelter sofa all day",
    "Alice: my violin teacher moved the lesson to Sunday morning",
]


def _segments(m) -> dict[str, Any]:
    """Segments with their topic (summary, keywords, words: kept under ``t:<n>``)."""
    state = m.collection.state_items("memoryos")
    return {k: {**v, **(state.get("t:" + k[2:]) or {})} for k, v in state.items() if k.startswith("s:")}


def _keywords(*texts: str) -> list[str]:
    return [w for w, _ in Counter(w for t in texts for w in content_words(t)).most_common(KEYWORDS)]


def test_theme_parsing_and_the_score():
    themes = parse_themes(
        'Sure:\n[{"theme": "Pets", "keywords": ["Cat", "cat", " shelter "], "content": "Alice adopted Pixel."},'
        ' {"theme": "x", "content": ""}, {"content": "Music lessons."}, {"content": "third"}]'
    )
    assert [(t.content, t.keywords, t.theme) for t in themes] == [("Alice adopted Pixel.", ["cat", "shelter"], "Pets"), ("Music lessons.", [], "")]
    assert [t.content for t in parse_themes('{"summaries": [{"content": "a"}]}')] == ["a"]
    assert [t.content for t in parse_themes('{"theme": "t", "content": "one"}')] == ["one"]
    for bad in ("no json here", "[]", '[{"theme": "no content"}]', "[{broken"):
        with pytest.raises(ValidationError):
            parse_themes(bad)
    assert jaccard(["a", "b"], ["b", "c"]) == pytest.approx(1 / 3) and jaccard([], ["a"]) == 0.0
    v = np.array([1.0, 0.0], np.float32)
    assert segment_score(v, ["a", "b"], np.array([0.0, 2.0]), ["b", "c"], 1.0) == pytest.approx(1 / 3)
    assert segment_score(v, ["a"], v, ["a"], 0.5) == pytest.approx(1.5)


def _threshold_between(m, a: str, b: str) -> tuple[float, float]:
    """(cosine of the two texts' embeddings, keyword Jaccard of their top words)."""
    va, vb = m.collection.spaces["default"].embed_documents([a, b])
    cos = float(va @ vb / np.linalg.norm(va) / np.linalg.norm(vb))
    return cos, jaccard(_keywords(a), _keywords(b))


@pytest.mark.parametrize("keyword_weight, joins", [(1.0, True), (0.0, False)])
def test_a_batch_joins_by_summary_cosine_plus_keyword_overlap(opener, tmp_path, keyword_weight, joins):
    """The second page's cosine alone is under the threshold; its keyword overlap lifts it over."""
    with opener(tmp_path / "probe", {"kind": "memoryos"}) as m:
        cos, jac = _threshold_between(m, PAGES[0], PAGES[1])
    assert jac > 0.1
    threshold = cos + jac / 2
    service = {"kind": "memoryos", "stm_capacity": 1, "heat_threshold": None, "segment_threshold": threshold, "keyword_weight": keyword_weight}
    with opener(tmp_path / "m", service) as m:
        ids = [m.insert(t, metadata={"session": 1}) for t in [*PAGES[:2], "Bob: bye"]]
        segments = _segments(m)
        assert sorted(len(s["pages"]) for s in segments.values()) == ([2] if joins else [1, 1])
        assert m.service.report()["segment_joins"] == int(joins)
        steps = m.service.llm_report()["steps"]
        assert steps["multi_summary"] == {"fallback:central_page": 2}
        assert steps.get("segment_summary", {}) == ({"fallback:central_page": 1} if joins else {})
        first = segments["s:1"]
        if not joins:  # a new segment: the batch's summary (its only page) and the page's top words
            assert first["summary"] == PAGES[0] and first["keywords"] == _keywords(PAGES[0]) and first["pages"] == ids[:1]


def test_a_joined_segment_gets_its_central_page_and_top_words(opener, tmp_path):
    service = {"kind": "memoryos", "stm_capacity": 1, "heat_threshold": None, "segment_threshold": -1.0}
    with opener(tmp_path, service) as m:
        ids = [m.insert(t, metadata={"session": 1}) for t in [*PAGES, "Bob: bye"]]
        (key, seg) = next(iter(_segments(m).items()))
        assert seg["pages"] == ids[:3] and seg["summary"] in PAGES and seg["keywords"] == _keywords(*PAGES)
        vecs, _ = m.collection.vectors(ids[:3], "default")
        vecs = vecs / np.linalg.norm(vecs, axis=1, keepdims=True)
        central = int(np.argmax(vecs @ (vecs.mean(axis=0) / np.linalg.norm(vecs.mean(axis=0)))))
        assert seg["summary"] == PAGES[central]
        summary_vec = np.asarray(m.collection.get_state("memoryos", "e:" + key[2:]))
        assert np.allclose(summary_vec, vecs[central], atol=1e-6)  # the central page's own vector: nothing embedded again
    with opener(tmp_path, service) as m:  # reopened: the segment's summary is read back and still used
        m.insert("Alice: the grey cat Pixel hid under the shelter sofa", metadata={"session": 1})
        (seg,) = _segments(m).values()
        assert len(seg["pages"]) == 4 and seg["keywords"] == _keywords(*PAGES, "Bob: bye")


class ThemesConfig(ComponentConfig):
    kind: str = "themes"


class ThemesLLM(LLM):
    """Two themes for every multi-summary prompt; nonsense for every other step."""

    def __init__(self, config: ThemesConfig):
        self.model = "themes"

    def complete(self, messages: Any, **options: Any) -> str:
        text = messages if isinstance(messages, str) else messages[-1]["content"]
        if "subtopic summaries" in text:
            return '[{"theme": "Pets", "keywords": ["cat", "pixel"], "content": "A cat."}, {"theme": "Music", "keywords": ["violin"], "content": "A violin."}]'
        return "?"


@pytest.fixture
def themes_llm():
    @hookimpl
    def register_llms(register):
        register("themes", ThemesLLM, ThemesConfig)

    with register_plugin(SimpleNamespace(register_llms=register_llms), name="themes-llm"):
        yield


def test_two_themes_describe_one_new_segment(opener, tmp_path, themes_llm):
    """MemoryOS inserts the batch once per theme; memcore stores a page once, so a new
    segment's summary holds both themes (and their keywords)."""
    service = {"kind": "memoryos", "stm_capacity": 1, "heat_threshold": None, "continuity": False, "segment_threshold": 2.0}
    with opener(tmp_path, service, llms={"default": {"kind": "themes"}}) as m:
        for t in [*PAGES[:2], "Bob: bye"]:
            m.insert(t, metadata={"session": 1})
        segments = _segments(m)
        assert [s["summary"] for s in segments.values()] == ["A cat. A violin."] * 2
        assert all(s["keywords"] == ["cat", "pixel", "violin"] for s in segments.values())
        assert m.service.llm_report()["steps"] == {"multi_summary": {"llm": 2}}


# -- event clock ---------------------------------------------------------------------------------


def test_event_time_parsing():
    assert event_time("1:56 pm on 8 May, 2023") == event_time("2023-05-08T13:56:00+00:00") == event_time("2023-05-08 13:56:00")
    assert event_time(1_700_000_000) == 1.7e9 and event_time("8 May, 2023") == event_time("2023-05-08")
    for bad in ("yesterday", "", True, None, float("nan"), [1]):
        with pytest.raises(ValidationError, match="date_time"):
            event_time(bad, "date_time")


def test_an_unreadable_event_time_is_refused_before_anything_is_written(opener, tmp_path):
    with opener(tmp_path, {"kind": "memoryos", "clock": "event", "stm_capacity": 1}) as m:
        m.insert("Alice: hello", metadata={"session": 1, "date_time": "1:56 pm on 8 May, 2023"})
        before = (m.collection.count(), m.collection.state_items("memoryos"))
        with pytest.raises(ValidationError, match="date_time"):
            m.insert("Bob: hi", metadata={"session": 1, "date_time": "someday"})
        assert (m.collection.count(), m.collection.state_items("memoryos")) == before
    with opener(tmp_path / "wall", {"kind": "memoryos", "stm_capacity": 1}) as m:  # the wall clock reads no event time
        m.insert("Bob: hi", metadata={"session": 1, "date_time": "someday"})


DAY = 86400.0


@pytest.mark.parametrize("clock, evicted_session", [("wall", 2), ("event", 1)])
def test_the_event_clock_makes_old_segments_cold(opener, tmp_path, clock, evicted_session):
    """Session 1 (three pages, 100 days ago) against session 2 (one page, today), MTM holds
    one segment. On the wall clock both were touched just now: the longer session 1 is hotter
    and session 2 is summarised into LTM. On the event clock session 1's recency is
    exp(-100) and it is the one summarised."""
    service = {"kind": "memoryos", "stm_capacity": 1, "mtm_capacity": 1, "heat_threshold": None, "segment_threshold": -1.0, "clock": clock}
    service["heat"] = {"a": 1.0, "b": 1.0, "c": 3.0, "tau_s": DAY}
    with opener(tmp_path, service) as m:
        pages = [(t, 1, 0.0) for t in PAGES] + [("Bob: the lake was cold today", 2, 100 * DAY), ("Bob: bye", 2, 100 * DAY)]
        for t, session, at in pages:
            m.insert(t, metadata={"session": session, "timestamp": at})
        (summary,) = [m.collection.get(i) for i in m.collection.ids(index="memoryos.user_knowledge")]
        assert summary.metadata["session"] == evicted_session and m.service.report()["evicted_segments"] == 1
        (kept,) = _segments(m).values()
        assert kept["session"] == 3 - evicted_session
        if clock == "event":
            assert m.collection.get_state("memoryos", "clock") == 100 * DAY and kept["last"] == 100 * DAY


def test_segments_written_before_summaries_existed_still_take_pages(opener, tmp_path):
    """A store written by the previous version (segments without topic -- summary, keywords,
    word counts -- or summary embedding): the centroid stands in for the summary until the next join."""
    service = {"kind": "memoryos", "stm_capacity": 1, "heat_threshold": None, "segment_threshold": -1.0}
    with opener(tmp_path, service) as m:
        ids = [m.insert(t, metadata={"session": 1}) for t in PAGES[:2]]
        m.collection.set_state({("memoryos", k): None for k in m.collection.state_items("memoryos") if k[:2] in ("e:", "t:")})
    with opener(tmp_path, service) as m:
        assert ids[0] in [h["id"] for h in m.retrieve(PAGES[0], k=3)]  # the old segment is searched by its centroid
        m.insert(PAGES[2], metadata={"session": 1})
        (key, seg) = next(iter(_segments(m).items()))
        assert len(seg["pages"]) == 2 and seg["summary"] in PAGES[:2] and seg["keywords"] == _keywords(PAGES[1])
        assert m.collection.get_state("memoryos", "e:" + key[2:]) is not None


def test_a_batch_of_several_pages_is_chained_and_placed_together(opener, tmp_path):
    """The STM pushes one page out per insert; a batch of several (the service's batch path,
    driven here directly) is split into runs of one session, chained in order, and each run
    is summarised and placed as one batch."""
    with opener(tmp_path, {"kind": "memoryos", "stm_capacity": 10, "heat_threshold": None, "segment_threshold": 2.0}) as m:
        texts = [*PAGES, "Bob: the lake was cold today", "Alice: I swam anyway"]
        ids = [m.insert(t, metadata={"session": s}) for t, s in zip(texts, (1, 1, 1, 2, 2))]
        c = m.collection
        m.service._to_mtm(ids, "memoryos.stm")
        assert c.ids(index="memoryos.mtm") == ids and c.ids(index="memoryos.stm") == []
        pages = {k[2:]: v for k, v in c.state_items("memoryos").items() if k.startswith("p:")}
        assert [pages[i]["prev"] for i in ids] == [None, ids[0], ids[1], None, ids[3]]
        assert [pages[i]["next"] for i in ids] == [ids[1], ids[2], None, ids[4], None]
        assert all(pages[i]["tier"] == "mtm" for i in ids)
        segments = _segments(m)  # one per run (threshold 2: never joined)
        assert sorted(s["pages"] for s in segments.values()) == sorted([ids[:3], ids[3:]])
        assert all(s["length"] == len(s["pages"]) for s in segments.values())
        assert m.service.llm_report()["steps"]["multi_summary"] == {"fallback:central_page": 2}


def test_a_crash_before_the_move_to_the_mtm_leaves_the_page_in_the_stm(opener, tmp_path, monkeypatch):
    """A run of pages leaves the STM and joins the MTM (with its state) in one commit
    (``Collection.move``): a crash before it leaves the pages in the STM, moved by the next insert."""
    service = {"kind": "memoryos", "stm_capacity": 1, "heat_threshold": None, "segment_threshold": -1.0}
    with opener(tmp_path, service) as m:
        first = m.insert(PAGES[0], metadata={"session": 1})

        def crash(*args, **kwargs):
            raise RuntimeError("power cut")

        monkeypatch.setattr(m.collection, "move", crash)
        with pytest.raises(RuntimeError, match="power cut"):
            m.insert(PAGES[1], metadata={"session": 1})
        c = m.collection
        (second,) = [i for i in c.ids(index="memoryos.stm") if i != first]
        assert c.ids(index="memoryos.stm") == [first, second] and c.ids(index="memoryos.mtm") == []
        assert c.get_state("memoryos", f"p:{first}") is None and c.get_state("memoryos", "pending") is None
    with opener(tmp_path, service) as m:
        third = m.insert(PAGES[2], metadata={"session": 1})
        c = m.collection
        assert c.ids(index="memoryos.mtm") == [first, second] and c.ids(index="memoryos.stm") == [third]
        (seg,) = _segments(m).values()
        assert seg["pages"] == [first, second]


def test_a_batch_left_pending_by_an_older_version_is_resumed(opener, tmp_path):
    """Before ``Collection.move`` a batch left the STM (listed under ``pending``) and joined the
    MTM in two commits; a memory killed between the two resumes the batch on its next insert."""
    service = {"kind": "memoryos", "stm_capacity": 1, "heat_threshold": None, "segment_threshold": -1.0}
    with opener(tmp_path, service) as m:
        first = m.insert(PAGES[0], metadata={"session": 1})
        c = m.collection
        (second,) = c.insert([{"text": PAGES[1], "metadata": {"session": 1}}], indexes=["memoryos.stm"])
        c.remove_from_index("memoryos.stm", [first], state={("memoryos", "pending"): [first]})  # the older version's first commit
    with opener(tmp_path, service) as m:
        m.insert(PAGES[2], metadata={"session": 1})
        c = m.collection
        assert c.ids(index="memoryos.mtm") == [first, second] and c.get_state("memoryos", "pending") is None
        (seg,) = _segments(m).values()
        assert seg["pages"] == [first, second]


class ReplyLLM(LLM):
    """An LLM that always gives one reply (a real SmolLM2-135M reply, as recorded)."""

    def __init__(self, reply: str):
        self.reply = reply

    def complete(self, prompt: Any, **kwargs: Any) -> str:
        return self.reply


ECHO_PAGE = "(1:56 pm on 8 May, 2023) Melanie: Wow, that's cool, Caroline! What got you interested in counseling?"


@pytest.mark.parametrize(
    "reply",
    [
        ECHO_PAGE,  # the dialogue line itself
        "Melanie: Wow, that's cool, Caroline! What got you interested in counseling?",  # its text, speaker kept
        "Summary:\nwow, that's  cool, Caroline! What got you interested",  # a copied stretch (case, spaces)
    ],
)
def test_summary_steps_refuse_a_reply_that_repeats_the_dialogue(reply):
    from memcore_services.memoryos_ltm import Page, ask_meta_info, ask_profile
    from memcore_services.memoryos_segments import ask_multi_summary

    page = Page("p1", ECHO_PAGE)
    with pytest.raises(ValidationError, match="meta_info reply"):
        ask_meta_info(ReplyLLM(reply), None, page)
    with pytest.raises(ValidationError, match="profile reply"):
        ask_profile(ReplyLLM(reply + "\nThe user likes to ask questions."), None, [page])
    with pytest.raises(ValidationError, match="multi_summary reply"):
        ask_multi_summary(ReplyLLM('[{"theme": "t", "keywords": ["counseling"], "content": "' + reply.replace("\n", " ") + '"}]'), [page])


def test_summary_steps_keep_a_real_summary():
    from memcore_services.memoryos_ltm import Page, ask_meta_info, ask_profile
    from memcore_services.memoryos_segments import ask_multi_summary

    page = Page("p1", ECHO_PAGE)
    summary = "Melanie asks Caroline why she became interested in counseling."
    assert ask_meta_info(ReplyLLM(summary), None, page) == summary
    assert ask_profile(ReplyLLM(summary), None, [page]) == summary
    themes = ask_multi_summary(ReplyLLM('[{"theme": "Career", "keywords": ["counseling"], "content": "' + summary + '"}]'), [page])
    assert [t.content for t in themes] == [summary]


@pytest.mark.parametrize(
    "reply, step",
    [
        ('{"summary": "Merged summary", "keywords": ["key1","key2"]}', "segment_summary"),  # recorded from SmolLM2
        ('{"summary": "Alice adopted a cat.", "keywords": ["key1", "key2"]}', "segment_summary"),
        ('[{"theme": "Brief theme", "keywords": ["key1", "key2"], "content": "summary"}]', "multi_summary"),
    ],
)
def test_segment_steps_refuse_the_prompts_example_values(reply, step):
    from memcore_services.memoryos_ltm import Page
    from memcore_services.memoryos_segments import Theme, ask_multi_summary, ask_segment_summary

    with pytest.raises(ValidationError, match=f"{step} reply repeats the prompt's example"):
        if step == "segment_summary":
            ask_segment_summary(ReplyLLM(reply), "Alice has a cat.", ["cat"], Theme("Pixel sleeps.", ["pixel"]))
        else:
            ask_multi_summary(ReplyLLM(reply), [Page("p1", ECHO_PAGE)])
