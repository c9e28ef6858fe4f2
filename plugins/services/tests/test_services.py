"""Own behaviour of each service: windows, tiers and migration policies, segments, heat,
summaries, triples, LLM steps and their fallbacks, reopening in a new process."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from types import SimpleNamespace
from typing import Any

import pytest

from memcore.plugin import LLM, ComponentConfig
from memcore import ConfigError, Query, ValidationError, hookimpl
from memcore.testing import register_plugin

TEXTS = [
    "Alice moved to Zurich to work at a private bank",
    "Bob adopted a small grey cat named Pixel",
    "The quarterly budget report is due next Friday",
    "Carol is learning to play the violin on Sundays",
    "Dave's dog loves chasing tennis balls in the park",
    "The team meeting moved to Tuesday morning at nine",
    "Erin bakes sourdough bread every weekend",
]


class ScriptedConfig(ComponentConfig):
    kind: str = "scripted"
    reply: str = "ok"


class ScriptedLLM(LLM):
    """A deterministic local LLM component: always answers ``reply``."""

    def __init__(self, config: ScriptedConfig):
        self.config, self.model, self.prompts = config, "scripted", []

    def complete(self, messages: Any, **options: Any) -> str:
        self.prompts.append(messages)
        return self.config.reply


@pytest.fixture
def scripted():
    @hookimpl
    def register_llms(register):
        register("scripted", ScriptedLLM, ScriptedConfig)

    with register_plugin(SimpleNamespace(register_llms=register_llms), name="scripted-llm"):
        yield


# -- short_term_memory -----------------------------------------------------------------------


@pytest.mark.parametrize("on_evict", ["archive", "forget"])
def test_short_term_window(opener, tmp_path, on_evict):
    with opener(tmp_path, {"kind": "short_term_memory", "max_dialog": 3, "on_evict": on_evict}) as m:
        ids = [m.insert(t) for t in TEXTS]
        got = m.retrieve("Pixel the cat", k=10)
        assert {r["id"] for r in got} == set(ids[-3:])  # the most recent max_dialog, whatever the query
        assert [r["id"] for r in m.retrieve("zzz qqq", k=3)] == ids[:-4:-1]  # no overlap: newest first
        assert m.retrieve("Erin bakes sourdough bread", k=1)[0]["id"] == ids[-1]
        report = m.service.report()
        assert report["window"] == 3 and report["archived" if on_evict == "archive" else "forgotten"] == 4
        assert m.collection.count() == (7 if on_evict == "archive" else 3)


# -- hierarchical ----------------------------------------------------------------------------


def test_hierarchical_config_refuses_silent_drops(opener, tmp_path):
    with pytest.raises(ConfigError, match="forget"):
        opener(tmp_path / "a", {"kind": "hierarchical", "layout": "two_tier", "capacities": {"ltm": 5}})
    with pytest.raises(ConfigError, match="unknown tiers"):
        opener(tmp_path / "b", {"kind": "hierarchical", "layout": "two_tier", "capacities": {"mtm": 5}})


def test_hierarchical_fifo_migration_moves_the_oldest(opener, tmp_path):
    with opener(tmp_path, {"kind": "hierarchical", "layout": "three_tier", "capacities": {"stm": 2, "mtm": 2}}) as m:
        ids = [m.insert(t) for t in TEXTS[:5]]
        c = m.collection
        assert c.ids(index="hierarchical.stm") == ids[3:]
        assert sorted(c.ids(index="hierarchical.mtm")) == sorted(ids[1:3])
        assert c.ids(index="hierarchical.ltm") == ids[:1]
        assert m.service.report() == {"stm": 2, "mtm": 2, "ltm": 1, "forgotten": 0}


def test_hierarchical_heat_keeps_the_visited(opener, tmp_path):
    with opener(tmp_path, {"kind": "hierarchical", "layout": "two_tier", "migration": "heat", "capacities": {"stm": 2}}) as m:
        a = m.insert(TEXTS[0])
        b = m.insert(TEXTS[1])
        for _ in range(3):
            assert m.retrieve(TEXTS[0], k=1)[0]["id"] == a  # visits raise a's heat
        m.insert(TEXTS[2])
        assert a in m.collection.ids(index="hierarchical.stm") and m.collection.ids(index="hierarchical.ltm") == [b]


def test_hierarchical_forget_is_explicit_and_counted(opener, tmp_path):
    with opener(tmp_path, {"kind": "hierarchical", "layout": "two_tier", "capacities": {"stm": 1, "ltm": 2}, "forget": "delete"}) as m:
        for t in TEXTS[:5]:
            m.insert(t)
        assert m.service.report() == {"stm": 1, "ltm": 2, "forgotten": 2}
        assert m.collection.count() == 3


def test_functional_layout_routes_by_memory_type(opener, tmp_path):
    with opener(tmp_path, {"kind": "hierarchical", "layout": "functional"}) as m:
        p = m.insert("To reset the router, hold the button ten seconds", metadata={"memory_type": "procedural"})
        e = m.insert(TEXTS[0])
        assert m.collection.ids(index="hierarchical.procedural") == [p] and m.collection.ids(index="hierarchical.episodic") == [e]
        with pytest.raises(ValidationError, match="memory_type"):
            m.insert("x", metadata={"memory_type": "dreams"})
        assert m.collection.count() == 2


# -- memoryos --------------------------------------------------------------------------------


def _summaries(m):
    c = m.collection
    return [r for r in (c.get(i) for i in c.ids(index="memoryos.user_knowledge")) if r.metadata["kind"] == "segment_summary"]


def test_memoryos_pages_flow_into_segments_and_summaries(opener, tmp_path):
    service = {"kind": "memoryos", "stm_capacity": 2, "mtm_capacity": 1, "segment_threshold": 0.99, "heat_threshold": None}
    with opener(tmp_path, service) as m:
        ids = [m.insert(t, metadata={"session": 1, "dia_ids": [f"D1:{i}"]}) for i, t in enumerate(TEXTS[:5], start=1)]
        r = m.service.report()
        assert r["stm"] == 2 and r["segments"] == 1 and r["mtm"] + r["summarised_pages"] == 3
        summaries = _summaries(m)
        assert summaries and all(s.metadata["memoryos"] == "user_knowledge" for s in summaries)
        summarised = [p for s in summaries for p in s.metadata["pages"]]
        assert set(summarised) | set(m.collection.ids(index="memoryos.mtm")) | set(m.collection.ids(index="memoryos.stm")) == set(ids)
        assert {d for s in summaries for d in s.metadata["dia_ids"]} == {f"D1:{ids.index(p) + 1}" for p in summarised}
        assert m.service.llm_report()["steps"]["summary"] == {"fallback:keyword_summary": len(summaries)}
        assert r["profile"] == 0 and r["promotions"] == 0  # heat promotion off


def test_memoryos_segments_stay_within_a_session_and_heat_counts_visits(opener, tmp_path):
    with opener(tmp_path, {"kind": "memoryos", "stm_capacity": 1, "segment_threshold": -1.0, "heat_threshold": None}) as m:
        for i, t in enumerate(TEXTS[:4]):
            m.insert(t, metadata={"session": 1 if i < 2 else 2})
        segments = {k: v for k, v in m.collection.state_items("memoryos").items() if k.startswith("s:")}
        assert sorted(len(s["pages"]) for s in segments.values()) == [1, 2] and {s["session"] for s in segments.values()} == {1, 2}
        m.retrieve(TEXTS[0], k=3)
        visited = {k: v["visits"] for k, v in m.collection.state_items("memoryos").items() if k.startswith("s:")}
        assert sum(visited.values()) >= 1


DIALOGUE = [
    ("(1 May 2023) Alice: I moved to Zurich for my new job at a bank\n(1 May 2023) Bob: That sounds like a big change", ["D1:1", "D1:2"]),
    ("(1 May 2023) Alice: My cat Pixel hates the tram\n(1 May 2023) Bob: I adopted a dog last spring", ["D1:3", "D1:4"]),
    ("(1 May 2023) Alice: The lake is lovely in summer\n(1 May 2023) Bob: We should go swimming there", ["D1:5", "D1:6"]),
    ("(1 May 2023) Alice: Are you still painting\n(1 May 2023) Bob: Yes, landscapes mostly", ["D1:7", "D1:8"]),
]


def test_memoryos_heat_promotion_fills_the_profile_and_both_knowledge_stores(opener, tmp_path):
    """A segment whose heat reaches the threshold is promoted: profile + user/assistant
    knowledge (fallbacks here), its pages marked analysed, visits and length reset; the pages
    stay in MTM."""
    service = {"kind": "memoryos", "stm_capacity": 1, "segment_threshold": -1.0, "heat_threshold": 3.0}
    with opener(tmp_path, service) as m:
        ids = [m.insert(t, metadata={"session": 1, "dia_ids": d, "speaker": "Alice"}) for t, d in DIALOGUE]
        c = m.collection
        r = m.service.report()
        # pages 1-2 reach MTM after inserts 2-3: heat = 2 pages + recency ~1 >= 3 -> promoted at once
        assert r["promotions"] == 1 and r["profile"] == 1 and r["mtm"] == 3 and r["stm"] == 1
        (seg,) = [v for k, v in c.state_items("memoryos").items() if k.startswith("s:")]
        assert seg["pages"] == ids[:3] and seg["fresh"] == [ids[2]] and seg["visits"] == 0 and seg["length"] == 1
        user = [c.get(i) for i in c.ids(index="memoryos.user_knowledge")]
        assistant = [c.get(i) for i in c.ids(index="memoryos.assistant_knowledge")]
        assert sorted(f.metadata["dia_ids"][0] for f in user) == ["D1:1", "D1:3"]  # Alice's first-person lines
        assert [f.metadata["dia_ids"] for f in assistant] == [["D1:4"]] and "adopted a dog" in assistant[0].text
        assert {f.metadata["speaker"] for f in user} == {"Alice"} and assistant[0].metadata["speaker"] == "Bob"
        assert all(f.metadata["kind"] == "fact" and f.metadata["pages"][0] in ids[:2] for f in user + assistant)
        profile = c.get("memoryos-profile")
        assert profile.metadata["memoryos"] == "profile" and "Alice" in profile.text and "zurich" in profile.text
        steps = m.service.llm_report()["steps"]
        assert steps["profile"] == {"fallback:keyword_profile": 1} and steps["knowledge"] == {"fallback:first_person_lines": 1}
        hits = m.retrieve("Which pet did Bob adopt?", k=5)
        assert any(h["id"] == assistant[0].id for h in hits)


def test_memoryos_heat_promotion_by_the_llm(opener, tmp_path, scripted):
    reply = "【User Private Data】\n- Alice moved to Zurich: new bank job, May 2023\n【Assistant Knowledge】\n- None"
    service = {"kind": "memoryos", "stm_capacity": 1, "segment_threshold": -1.0, "heat_threshold": 3.0}
    with opener(tmp_path, service, llms={"default": {"kind": "scripted", "reply": reply}}) as m:
        ids = [m.insert(t, metadata={"session": 1, "dia_ids": d}) for t, d in DIALOGUE[:3]]
        c = m.collection
        (fact,) = [c.get(i) for i in c.ids(index="memoryos.user_knowledge")]
        assert fact.text == "Alice moved to Zurich: new bank job, May 2023"
        assert fact.metadata["pages"] == [ids[0]] and fact.metadata["dia_ids"] == ["D1:1", "D1:2"]  # attributed to the page it shares words with
        assert c.count(index="memoryos.assistant_knowledge") == 0 and c.get("memoryos-profile").text == reply
        steps = m.service.llm_report()["steps"]
        assert steps["knowledge"] == {"llm": 1} and steps["profile"] == {"llm": 1}
        assert steps["continuity"] == {"fallback:same_session": 1}  # the reply is neither true nor false: invalid_reply


def test_memoryos_a_short_profile_reply_keeps_the_profile(opener, tmp_path, scripted):
    """As MemoryOS: a profile reply under 30 characters does not replace the profile (here
    there is none yet, so none is written); a knowledge reply without its sections falls
    back to first_person_lines."""
    service = {"kind": "memoryos", "stm_capacity": 1, "segment_threshold": -1.0, "heat_threshold": 3.0}
    with opener(tmp_path, service, llms={"default": {"kind": "scripted", "reply": "None"}}) as m:
        for t, d in DIALOGUE[:3]:
            m.insert(t, metadata={"session": 1, "dia_ids": d})
        r = m.service.report()
        assert r["promotions"] == 1 and r["profile"] == 0 and r["user_knowledge"] == 2
        steps = m.service.llm_report()["steps"]
        assert steps["profile"] == {"llm": 1} and steps["knowledge"] == {"fallback:first_person_lines": 1}


def test_memoryos_pages_are_chained_within_a_session(opener, tmp_path):
    with opener(tmp_path, {"kind": "memoryos", "stm_capacity": 1, "heat_threshold": None}) as m:
        ids = [m.insert(t, metadata={"session": s}) for (t, _), s in zip(DIALOGUE, (1, 1, 1, 2))] + [m.insert("Bob: bye", metadata={"session": 2})]
        pages = {k[2:]: v for k, v in m.collection.state_items("memoryos").items() if k.startswith("p:")}
        assert [pages[i]["prev"] for i in ids[:4]] == [None, ids[0], ids[1], None]
        assert [pages[i]["next"] for i in ids[:4]] == [ids[1], ids[2], None, None]
        assert pages[ids[0]]["chain"] == pages[ids[2]]["chain"] != pages[ids[3]]["chain"]
        chain = m.collection.get_state("memoryos", pages[ids[0]]["chain"])
        assert chain["pages"] == 3 and chain["meta"].startswith("Conversation of Alice, Bob on 1 May 2023; topics:")
        hits = m.retrieve("Alice cat Pixel tram", k=3, chain=True)
        hit = next(h for h in hits if h["id"] == ids[1])
        assert hit["chain"] == {"prev": ids[0], "next": ids[2], "meta": chain["meta"]}
        assert "chain" not in m.retrieve("Alice cat Pixel tram", k=3)[0]
        with pytest.raises(ValidationError, match="chains"):
            m.retrieve("cat", chains=True)


def test_memoryos_retrieve_reads_the_state_once_per_store_change(opener, tmp_path):
    with opener(tmp_path, {"kind": "memoryos", "stm_capacity": 2, "heat_threshold": None}) as m:
        for t in TEXTS:
            m.insert(t, metadata={"session": 1})
        service = m.service
        m.retrieve(TEXTS[0], k=3)
        reads = service.state.reads
        for t in TEXTS:
            m.retrieve(t, k=3)  # each counts visits: its own writes keep the cache valid
        assert service.state.reads == reads
        visits = sum(v["visits"] for k, v in m.collection.state_items("memoryos").items() if k.startswith("s:"))
        assert sum(v["visits"] for k, v in service.state.prefixed("s:").items()) == visits > 0
        key = next(iter(service.state.prefixed("s:")))
        m.collection.set_state({("memoryos", key): {**service.state.get(key), "visits": 99}})  # a write the view did not make
        assert service.state.get(key)["visits"] == 99 and service.state.reads == reads + 1


@pytest.mark.parametrize(
    "bad, match",
    [
        ({"weights": {"ltm": 1.0}}, "unknown tier"),
        ({"heat_threshold": -1}, "heat_threshold"),
        ({"knowledge_k": 0}, "knowledge_k"),
        ({"page_min_sim": 2}, "page_min_sim"),
        ({"keyword_weight": -1}, "keyword_weight"),
        ({"segment_search": "pages"}, "segment_search"),
        ({"clock": "lunar"}, "clock"),
        ({"time_keys": []}, "time_keys"),
    ],
)
def test_memoryos_config_errors(opener, tmp_path, bad, match):
    with pytest.raises(ConfigError, match=match):
        opener(tmp_path, {"kind": "memoryos", **bad})


def test_memoryos_summary_by_the_llm(opener, tmp_path, scripted):
    service = {"kind": "memoryos", "stm_capacity": 1, "mtm_capacity": 1, "segment_threshold": 0.99, "heat_threshold": None, "continuity": False}
    with opener(tmp_path, service, llms={"default": {"kind": "scripted", "reply": "Alice and Bob talked about work and pets."}}) as m:
        for t in TEXTS[:4]:
            m.insert(t)
        texts = [s.text for s in _summaries(m)]
        assert texts and set(texts) == {"Alice and Bob talked about work and pets."}
        steps = m.service.llm_report()["steps"]
        assert steps["summary"] == {"llm": len(texts)}
        assert steps["multi_summary"] == {"fallback:central_page": 3}  # the reply is no JSON theme list: invalid_reply


# -- vector_hash -----------------------------------------------------------------------------


def test_vector_hash_extracts_triples_with_the_rule_fallback(opener, tmp_path):
    with opener(tmp_path, {"kind": "vector_hash", "bits": 4, "tables": 8}) as m:
        src = m.insert("Alice: I work at a bakery in Lisbon. My sister plays the violin.", metadata={"dia_ids": ["D1:1"]})
        thoughts = [m.collection.get(i) for i in m.collection.ids(index="vector_hash.lsh")]
        assert {t.text for t in thoughts} == {"Alice work at a bakery in Lisbon", "Alice's sister plays the violin"}
        assert all(t.metadata["source"] == src and t.metadata["dia_ids"] == ["D1:1"] for t in thoughts)
        assert m.collection.get(src).text.startswith("Alice: I work")
        assert m.service.llm_report()["steps"] == {"triple_extraction": {"fallback:rule_svo": 1}}
        assert m.retrieve("Where does Alice work?", k=1)[0]["metadata"]["source"] == src


def test_vector_hash_with_an_llm_and_an_unparseable_reply(opener, tmp_path, scripted):
    llms = {
        "default": {"kind": "scripted", "reply": "Sure! (Alice, works at, Google)\n(Alice, lives in, Zurich)"},
        "bad": {"kind": "scripted", "reply": "I cannot help"},
    }
    with opener(tmp_path / "a", {"kind": "vector_hash"}, llms=llms) as m:
        m.insert("Alice: I work at Google and live in Zurich")
        assert sorted(m.collection.get(i).text for i in m.collection.ids(index="vector_hash.lsh")) == ["Alice lives in Zurich", "Alice works at Google"]
        assert m.service.llm_report() == {"model": "scripted", "steps": {"triple_extraction": {"llm": 1}}, "fallback_reasons": {}}
    with opener(tmp_path / "b", {"kind": "vector_hash", "llm": "bad"}, llms=llms) as m:
        m.insert("Alice: I work at Google")
        assert m.service.llm_report()["steps"] == {"triple_extraction": {"fallback:rule_svo": 1}}
        assert m.collection.count(index="vector_hash.lsh") == 1


def test_a_service_naming_an_undeclared_llm_is_a_config_error(opener, tmp_path):
    with pytest.raises(ConfigError, match="service.llm: no LLM named 'judge'"):
        opener(tmp_path, {"kind": "vector_hash", "llm": "judge"})


# -- hybrid ----------------------------------------------------------------------------------


def test_hybrid_declares_its_indexes_and_pipeline(opener, tmp_path):
    service = {
        "kind": "hybrid",
        "indexes": {"dense": {"kind": "exact", "space": "default"}, "words": {"kind": "bm25"}},
        "pipeline": [{"kind": "recall", "index": "dense"}, {"kind": "recall", "index": "words"}, {"kind": "fuse", "fusion": "rrf"}, {"kind": "limit"}],
        "speaker_boost": 0.5,
    }
    with opener(tmp_path, service) as m:
        assert {i["name"] for i in m.collection.list_indexes()} == {"hybrid.dense", "hybrid.words"}
        ids = [m.insert(t, metadata={"speaker": t.split()[0]}) for t in TEXTS]
        assert m.retrieve("grey cat Pixel", k=2)[0]["id"] == ids[1]
        assert m.retrieve("What does Carol play?", k=1)[0]["id"] == ids[3]
    with pytest.raises(ConfigError, match="index"):
        opener(tmp_path / "bad", {"kind": "hybrid", "pipeline": [{"kind": "recall", "index": "missing"}, {"kind": "limit"}]})


def test_hybrid_retrieve_with_a_scope_builds_one_query(opener, tmp_path, monkeypatch):
    service = {
        "kind": "hybrid",
        "indexes": {"dense": {"kind": "exact", "space": "default"}},
        "pipeline": [{"kind": "recall", "index": "dense"}, {"kind": "limit"}],
    }
    with opener(tmp_path, service) as m:
        ids = [m.insert(t, scope={"user_id": "u1" if i % 2 else "u2"}) for i, t in enumerate(TEXTS)]
        built = []
        post_init = Query.__post_init__

        def counted(self):
            built.append(self)
            post_init(self)

        monkeypatch.setattr(Query, "__post_init__", counted)
        results = m.retrieve("grey cat Pixel", k=10, scope={"user_id": "u1"})
        assert {r["id"] for r in results} == set(ids[1::2])  # the scope reached the query
        assert len(built) == 1  # the scope goes into the service's one query, not a copy


# -- reopen in a new process -----------------------------------------------------------------

SERVICES = {
    "short_term_memory": {"kind": "short_term_memory", "max_dialog": 4},
    "memoryos": {"kind": "memoryos", "stm_capacity": 2, "mtm_capacity": 2, "segment_threshold": 0.99},
    "hierarchical": {"kind": "hierarchical", "capacities": {"stm": 2, "mtm": 2}, "migration": "heat"},
    "vector_hash": {"kind": "vector_hash", "bits": 4, "tables": 8},
    "hybrid": {"kind": "hybrid"},
}


@pytest.mark.parametrize("name", sorted(SERVICES))
def test_reopen_in_a_new_process(opener, tmp_path, name):
    with opener(tmp_path, SERVICES[name]) as m:
        for t in TEXTS:
            m.insert(t, metadata={"session": 1})
        before = m.retrieve(TEXTS[3], k=3)
        state = {ns: m.collection.state_items(ns) for ns in ("stm", "memoryos", "hierarchical")}
    script = textwrap.dedent(f"""
        import json, memcore
        m = memcore.open({{"indexes": {{}}, "service": {json.dumps(SERVICES[name])}}}, path={str(tmp_path)!r})
        out = {{"count": m.collection.count(), "results": m.retrieve({TEXTS[3]!r}, k=3),
               "state": {{ns: m.collection.state_items(ns) for ns in ("stm", "memoryos", "hierarchical")}}}}
        m.insert("Gina collects vintage postcards from Lisbon", metadata={{"session": 2}})
        m.close()
        print(json.dumps(out))
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert [r["id"] for r in out["results"]] == [r["id"] for r in before]
    assert out["state"]["hierarchical"].keys() == state["hierarchical"].keys() and out["state"]["memoryos"].keys() == state["memoryos"].keys()
    with opener(tmp_path, SERVICES[name]) as again:
        assert any(r["text"].startswith("Gina") or "Gina" in r["text"] for r in again.retrieve("Gina collects vintage postcards from Lisbon", k=3))


def test_memory_query_reports_why_the_declared_pipeline_cannot_run(opener, tmp_path):
    with opener(tmp_path, {"kind": "memoryos"}) as m:  # three indexes: the default 'basic' pipeline cannot pick one
        m.insert(TEXTS[0])
        assert m.retrieve(TEXTS[0], k=1)[0]["text"] == TEXTS[0]
        with pytest.raises(ConfigError, match="name the index"):
            m.query(TEXTS[0])
        assert m.query(TEXTS[0], index="memoryos.stm")
