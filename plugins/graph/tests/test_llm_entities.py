"""``entity_extraction = "llm"``: the graph index's entity extractor as an LLM step on the
memory's ``[llms.<name>]`` components, against memcore's fake OpenAI server
(:class:`memcore.testing.FakeOpenAIServer`, a real HTTP server on 127.0.0.1), with the ``rule`` fallback."""

from __future__ import annotations

import pytest
from memcore import ConfigError, ValidationError
from memcore.plugin import IndexContext, LLMs
from memcore.testing import FakeOpenAIServer

import memcore
from memcore_graph import GraphIndexConfig
from memcore_graph.entities import ENTITY_FALLBACK, LLMExtractor, entity_messages, make_extractor, parse_entities
from memcore_graph.index import GraphIndex

pytest.importorskip("memcore_llm")  # the ``openai`` LLM kind (the chat client)


@pytest.fixture
def server():
    with FakeOpenAIServer() as state:
        yield state


def _llm(server, **kw):
    return {"kind": "openai", "base_url": server.url, "model": "fake-chat", "api_key_env": None, "backoff_s": 0.0, "max_retries": 0, **kw}


def _open(tmp_path, server, **graph):
    settings = {
        "llms": {"default": _llm(server)},
        "indexes": {"g": {"kind": "graph", "entity_extraction": "llm", **graph}},
    }
    return memcore.open(settings, path=tmp_path)


def test_the_llm_lists_the_names_and_the_graph_links_co_mentions(tmp_path, server):
    server.chat_reply = "- Alice\n- Zurich Bank\n- Narnia"  # Narnia is not in the text: dropped
    with _open(tmp_path, server) as m:
        m.collection.insert([{"id": "a", "text": "alice joined the zurich bank last spring"}])
        index = m.collection.index("g")
        assert index.entities("a") == ("alice", "zurich bank")
        server.chat_reply = "Alice"
        m.collection.insert([{"id": "b", "text": "Where does alice work now?"}])
        assert index.mentions("alice") == ["a", "b"]
        assert index.stats()["llm_steps"] == {"llm": 2}
        chats = [r for r in server.requests if r.path == "/v1/chat/completions"]
        assert chats[0].body["messages"] == entity_messages("alice joined the zurich bank last spring")


def test_a_failing_server_or_a_reply_naming_nothing_runs_the_rule_fallback(tmp_path, server):
    with _open(tmp_path, server) as m:
        server.plan.append(("status", 500))
        m.collection.insert([{"id": "a", "text": "Alice met Bob in Lisbon"}])
        server.chat_reply = "Gandalf\nMordor"
        m.collection.insert([{"id": "b", "text": "Carol flew to Oslo"}])
        server.chat_reply = "None"
        m.collection.insert([{"id": "c", "text": "nothing to name here"}])
        index = m.collection.index("g")
        assert index.entities("a") == ("alice", "bob", "lisbon")  # rule fallback
        assert index.entities("b") == ("carol", "oslo")
        assert index.entities("c") == ()
        assert index.stats()["llm_steps"] == {"fallback:rule": 2, "llm": 1}
        assert index._extractor.reasons == {"llm_error": 1, "invalid_reply": 1}


def test_entities_survive_reopen_without_asking_the_llm_again(tmp_path, server):
    server.chat_reply = "Alice"
    with _open(tmp_path, server) as m:
        m.collection.insert([{"id": "a", "text": "Alice likes tea"}])
    asked = server.count("/v1/chat/completions")
    with _open(tmp_path, server) as m:
        assert m.collection.index("g").entities("a") == ("alice",)
    assert server.count("/v1/chat/completions") == asked


def test_no_llm_declared_means_the_rule_fallback_and_a_named_missing_llm_is_a_config_error(tmp_path):
    with memcore.open({"indexes": {"g": {"kind": "graph", "entity_extraction": "llm"}}}, path=tmp_path / "a") as m:
        m.collection.insert([{"id": "a", "text": "Alice met Bob"}])
        assert m.collection.index("g").entities("a") == ("alice", "bob")
        assert m.collection.index("g").stats()["llm_steps"] == {f"fallback:{ENTITY_FALLBACK}": 1}
    with pytest.raises(ConfigError, match="no LLM named 'judge'"):
        memcore.open({"indexes": {"g": {"kind": "graph", "entity_extraction": "llm", "llm": "judge"}}}, path=tmp_path / "b")


def test_an_index_built_by_hand_gets_its_llm_from_the_context(server):
    from memcore_llm import ChatClient, ChatConfig

    server.chat_reply = "1. Alice\n2) Bob; Lisbon"
    client = ChatClient(ChatConfig(**{k: v for k, v in _llm(server).items() if k != "kind"}))
    index = GraphIndex(GraphIndexConfig(entity_extraction="llm"), IndexContext("g", llms=LLMs.of(default=client)))
    assert isinstance(index._extractor, LLMExtractor)
    assert index._extractor.extract("Alice and Bob met in Lisbon") == ["alice", "bob", "lisbon"]
    assert isinstance(make_extractor("llm", "x"), LLMExtractor)  # no LLM: fallback only


def test_parse_entities():
    assert parse_entities("none.", "anything") == []
    assert parse_entities("* 'Alice'\n- Bob.", "Alice and Bob") == ["alice", "bob"]
    with pytest.raises(ValidationError, match="nothing found"):
        parse_entities("Gandalf", "Alice and Bob")


# Replies SmolLM2-135M (Q4_1, llama.cpp, temperature 0) gave on LoCoMo turns
# (bench/bench_llm_steps.py --record): with the task and the text in one message it repeated
# the text; with the system message and the worked example it lists names, some not in the text.
REAL = [
    ("Caroline: I went to a LGBTQ support group yesterday and it was so powerful.", "Caroline\nLGBTQ Support Group", ("caroline", "lgbtq support group")),
    ("Melanie: Yeah, I painted that lake sunrise last year! It's special to me.", "Melanie\nLemonade", ("melanie",)),
]
ECHO = "Caroline: Hey, Mel! Good to see you! How have you been?"


def test_real_model_replies_through_the_http_llm(tmp_path, server):
    with _open(tmp_path, server) as m:
        index = m.collection.index("g")
        for i, (text, reply, names) in enumerate(REAL):
            server.chat_reply = reply
            m.collection.insert([{"id": f"r{i}", "text": text}])
            assert index.entities(f"r{i}") == names
        server.chat_reply = ECHO  # the text repeated: no name, the rule fallback runs
        m.collection.insert([{"id": "e", "text": ECHO}])
        assert index.entities("e") == ("caroline", "mel")
        stats = index.stats()
        assert stats["llm_steps"] == {"llm": 2, "fallback:rule": 1} and stats["llm_fallback_reasons"] == {"invalid_reply": 1}
        sent = [r.body["messages"] for r in server.requests if r.path == "/v1/chat/completions"]
        assert [[m["role"] for m in s] for s in sent] == [["system", "user", "assistant", "user"]] * 3
        assert sent[0][-1]["content"] == "Text: " + REAL[0][0]
