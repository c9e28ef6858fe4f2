"""The ``llm_rerank`` stage against a real local OpenAI-compatible server: the prompt it
sends, how it applies a scripted ranking, and its deterministic fallbacks (unparseable
replies, invalid rankings, 5xx beyond the retries, no query text). Protocol and parsing
only: no ranking quality is claimed."""

from __future__ import annotations

import json
import re

import pytest
from memcore import Collection, ConfigError
from memcore._util.log import configure_logging
from memcore.plugin import PipelineContext
from memcore import Contribution, Hit, Query
from memcore.testing import StageContract, build_stage

import memcore
import memcore_llm.llm_rerank as llm_rerank_module
from memcore.plugin import LLMs
from memcore_llm import ChatClient, LLMRerankConfig, LLMRerankStage, rerank_report
from memcore_llm.llm_rerank import bare_ranking, parse_ranking, parse_reply, read_reply, truncate

TEXTS = {
    "a": "alpha apples grow on the orchard hill",
    "b": "bravo boats sail across the bay",
    "c": "charlie cooks pasta with garlic",
    "d": "delta rivers flow into the sea",
    "e": "echo canyons repeat every shout",
}
QUERY = "who cooks pasta"


def llm(server, **kw):
    return {"base_url": server.url, "model": "m", "api_key_env": None, "backoff_s": 0.0, "max_retries": 1, **kw}


def make_stage(server, llm_options=None, **options) -> LLMRerankStage:
    """The stage, bound to an ``openai`` LLM named ``default`` on the test server."""
    stage = build_stage("llm_rerank", **options)
    stage.bind_llms(LLMs.of(default=ChatClient(llm(server, **(llm_options or {})))))
    return stage


def chat_body(content: str) -> dict:
    return {"choices": [{"index": 0, "message": {"role": "assistant", "content": content}}]}


@pytest.fixture
def collection():
    coll = Collection.create()
    coll.create_index("vector", "exact", space="default")
    coll.insert([{"id": i, "text": t} for i, t in TEXTS.items()])
    yield coll
    coll.close()


def seeded(collection, ids="abcde", text=QUERY) -> PipelineContext:
    """A context whose working list ``seed`` holds ``ids`` in that order (scores 0.9, 0.8, ...)."""
    ctx = PipelineContext(collection, Query(text=text, k=5))
    hits = []
    for rank, i in enumerate(ids, start=1):
        score = 1.0 - rank / 10
        hits.append(Hit(i, score, raw=score, source="seed", provenance=(Contribution("seed", rank, score),)))
    ctx.add_list("seed", hits)
    return ctx


def run(stage, ctx) -> list[str]:
    stage.run(ctx)
    return [h.id for h in ctx.current]


@pytest.fixture
def events(monkeypatch):
    """The structlog events of the stage's module, as (level, event, fields)."""
    seen: list[tuple[str, str, dict]] = []

    class Recorder:
        def info(self, event, **kw):
            seen.append(("info", event, kw))

        def warning(self, event, **kw):
            seen.append(("warning", event, kw))

    monkeypatch.setattr(llm_rerank_module, "log", Recorder())
    return seen


# -- the LLM path ------------------------------------------------------------------------------


def test_scripted_ranking_reorders_hits_and_keeps_provenance(server, collection, events):
    server.chat_reply = '{"ranking": [3, 1]}'
    ctx = seeded(collection)
    assert run(make_stage(server), ctx) == ["c", "a", "b", "d", "e"]  # unnamed passages follow in order
    assert [h.score for h in ctx.current] == [1.0, 1 / 2, 1 / 3, 1 / 4, 1 / 5]
    by_id = {h.id: h for h in ctx.lists["seed"]}
    for hit in ctx.current:
        assert hit.source == "llm_rerank"
        assert hit.raw == by_id[hit.id].score
        assert hit.provenance == by_id[hit.id].provenance
    assert [h.id for h in ctx.lists["seed"]] == list("abcde")  # the seeded list is untouched
    assert rerank_report(ctx) == {"used": "llm", "reason": None, "fallback": "keep", "sent": 5, "calls": 1}
    assert ctx.notes == {"llm_rerank": rerank_report(ctx)}  # recorded through ctx.note
    assert not hasattr(ctx, "llm_rerank")  # no private attribute on the context any more
    assert events == [("info", "stage.llm_rerank", {"stage": "llm_rerank", **rerank_report(ctx)})]


def test_the_request_holds_the_query_and_numbered_passages(server, collection):
    server.chat_reply = '{"ranking": [1]}'
    run(make_stage(server, {"max_tokens": 64}), seeded(collection, "ca"))
    assert len(server.requests) == 1
    request = server.requests[0]
    assert request.path == "/v1/chat/completions"
    assert "authorization" not in request.headers
    body = request.body
    assert (body["model"], body["temperature"], body["max_tokens"]) == ("m", 0.0, 64)
    system, user = body["messages"]
    assert system["role"] == "system" and '{"ranking"' in system["content"]
    assert user["role"] == "user"
    assert user["content"].startswith(f"Query: {QUERY}\n\nPassages:\n[1] {TEXTS['c']}\n[2] {TEXTS['a']}\n")
    assert "1-2" in user["content"]


@pytest.mark.parametrize(
    "reply",
    [
        'Sure! ```json\n{"ranking": [2, 5, 1]}\n```',
        'Here is my ranking: {"ranking": ["2", "5", "1"]} hope it helps',
        '{"ranking": [2, 5, 1, 3, 4]}',
    ],
)
def test_fenced_prose_and_string_numbers_are_accepted(server, collection, reply):
    server.chat_reply = reply
    ctx = seeded(collection)
    assert run(make_stage(server), ctx) == ["b", "e", "a", "c", "d"]
    assert rerank_report(ctx)["used"] == "llm"


def test_only_top_n_are_sent_and_the_rest_follow(server, collection):
    server.chat_reply = '{"ranking": [3, 2, 1]}'
    ctx = seeded(collection)
    assert run(make_stage(server, top_n=3), ctx) == ["c", "b", "a", "d", "e"]
    content = server.requests[0].body["messages"][1]["content"]
    assert "[3] " in content and "[4] " not in content
    assert rerank_report(ctx)["sent"] == 3
    assert [h.score for h in ctx.current] == sorted((h.score for h in ctx.current), reverse=True)


def test_batches_are_reordered_separately(server, collection):
    server.plan = [("json", chat_body('{"ranking": [2, 1]}')), ("json", chat_body('{"ranking": [2]}'))]
    ctx = seeded(collection)
    assert run(make_stage(server, top_n=4, batch=2), ctx) == ["b", "a", "d", "c", "e"]
    assert server.count("/v1/chat/completions") == 2
    second = server.requests[1].body["messages"][1]["content"]
    assert f"[1] {TEXTS['c']}\n[2] {TEXTS['d']}\n" in second and TEXTS["a"] not in second
    assert rerank_report(ctx)["calls"] == 2


def test_passages_are_truncated(server, collection):
    collection.insert([{"id": "long", "text": "word " * 400}])
    server.chat_reply = '{"ranking": [1]}'
    run(make_stage(server, max_chars=24), seeded(collection, ["long", "a"]))
    content = server.requests[0].body["messages"][1]["content"]
    assert "[1] word word word word word ...\n" in content
    assert f"[2] {TEXTS['a'][:24].rstrip()} ...\n" in content
    assert truncate("  a \n b  ", 10) == "a b"
    assert truncate("abcdef", 3) == "abc ..."
    assert truncate(None, 3) == ""


def test_hits_without_a_record_are_empty_passages(server, collection):
    server.chat_reply = '{"ranking": [2, 1]}'
    ctx = seeded(collection, ["a", "ghost"])
    assert run(make_stage(server), ctx) == ["ghost", "a"]
    assert (
        server.requests[0]
        .body["messages"][1]["content"]
        .endswith(f'[1] {TEXTS["a"]}\n[2] \n\nRank the passages 1-2 from most to least relevant to the query. Reply with JSON only: {{"ranking": [...]}}.')
    )


# -- fallbacks ---------------------------------------------------------------------------------


def test_unparseable_reply_falls_back_and_says_so(server, collection, events):
    server.chat_reply = "I think passage three is best."
    ctx = seeded(collection)
    assert run(make_stage(server), ctx) == list("abcde")  # fallback keep: the incoming order
    assert [h.score for h in ctx.current] == [1.0, 1 / 2, 1 / 3, 1 / 4, 1 / 5]
    report = rerank_report(ctx)
    assert report == {"used": "fallback", "reason": "invalid_reply", "fallback": "keep", "sent": 5, "calls": 1}
    assert [(level, event) for level, event, _ in events] == [("warning", "stage.llm_rerank_failed"), ("info", "stage.llm_rerank")]
    assert events[0][2]["reason"] == "invalid_reply" and "no parseable JSON" in events[0][2]["error"]
    assert events[1][2]["used"] == "fallback"


def test_keyword_fallback_ranks_by_query_words(server, collection):
    server.chat_reply = "not json"
    ctx = seeded(collection)
    assert run(make_stage(server, fallback="keyword"), ctx) == ["c", "a", "b", "d", "e"]  # "cooks pasta"; ties keep order
    assert rerank_report(ctx)["fallback"] == "keyword"


@pytest.mark.parametrize(
    "reply",
    [
        '{"ranking": [1, 6]}',  # out of range
        '{"ranking": [0, 1]}',  # 1-based
        '{"ranking": [2, 2]}',  # repeated
        '{"ranking": []}',
        '{"ranking": [1.5]}',
        '{"ranking": [true]}',
        '{"order": [1, 2]}',
        '{"ranking": "two, one"}',  # a string ranking must be a bare ranking
        "[3, 9]",  # a bare ranking is checked like a JSON one
        "Ranking: 2 > 2",
        '[{"id": 1, "title": "x"}]',  # the object inside is read: it has no ranking (seen from SmolLM2-135M)
    ],
)
def test_invalid_rankings_fall_back(server, collection, reply):
    server.chat_reply = reply
    ctx = seeded(collection)
    assert run(make_stage(server), ctx) == list("abcde")
    assert rerank_report(ctx)["reason"] == "invalid_ranking"


@pytest.mark.parametrize(
    "reply",
    [
        "[3, 1, 2]",  # a JSON list instead of the object
        "3,1,2",
        "Ranking: 3 > 1 > 2",
        "[3] > [1] > [2]",
        "```\n3 1 2\n```",
        "Sure.\n**Ranking:** 3, 1, 2\nPassage 3 mentions pasta.",  # one labelled line in prose
        '{"ranking": "3, 1, 2"}',
    ],
)
def test_bare_rankings_are_accepted(server, collection, reply):
    server.chat_reply = reply
    ctx = seeded(collection)
    assert run(make_stage(server), ctx) == ["c", "a", "b", "d", "e"]
    assert rerank_report(ctx) == {"used": "llm", "reason": None, "fallback": "keep", "sent": 5, "calls": 1}


@pytest.mark.parametrize(
    "reply",
    [
        "I think passage 3 is best, then 1.",  # numbers are never taken from prose
        "1. Periosteal bone formation\n2. Epithelial subpopulations",  # a numbered list of texts (seen from SmolLM2-135M)
        "1. 1-2\n2. 3-4",
        "ranking: first 3 then 1",
    ],
)
def test_prose_and_lists_of_texts_are_not_rankings(server, collection, reply):
    server.chat_reply = reply
    ctx = seeded(collection)
    assert run(make_stage(server), ctx) == list("abcde")
    assert rerank_report(ctx)["reason"] == "invalid_reply"


def test_response_format_is_sent_only_when_set(server, collection):
    server.chat_reply = '{"ranking": [2]}'
    run(make_stage(server), seeded(collection))
    assert "response_format" not in server.requests[-1].body
    schema = {"type": "object", "properties": {"ranking": {"type": "array", "items": {"type": "integer"}}}}
    stage = make_stage(server, response_format={"type": "json_object", "schema": schema})
    ctx = seeded(collection)
    assert run(stage, ctx) == ["b", "a", "c", "d", "e"]
    assert server.requests[-1].body["response_format"] == {"type": "json_object", "schema": schema}
    with pytest.raises(ConfigError, match=r"pipeline\[0\]\.response_format"):
        make_stage(server, response_format="json")


def test_server_errors_beyond_retries_fall_back_without_raising(server, collection, events):
    server.plan = [("status", 500), ("status", 503), ("status", 500)]
    server.chat_reply = '{"ranking": [5]}'  # never reached
    ctx = seeded(collection)
    stage = make_stage(server, fallback="keyword")
    assert run(stage, ctx) == ["c", "a", "b", "d", "e"]
    assert server.count("/v1/chat/completions") == 2  # the first attempt + max_retries = 1
    assert stage.client.stats.retries == 1
    assert rerank_report(ctx) == {"used": "fallback", "reason": "service_error", "fallback": "keyword", "sent": 5, "calls": 1}
    assert events[0][1] == "stage.llm_rerank_failed" and "503" in events[0][2]["error"]


def test_a_retried_5xx_then_success_uses_the_llm(server, collection):
    server.plan = [("status", 500)]
    server.chat_reply = '{"ranking": [5]}'
    ctx = seeded(collection)
    assert run(make_stage(server), ctx) == ["e", "a", "b", "c", "d"]
    assert rerank_report(ctx)["used"] == "llm"
    assert server.count("/v1/chat/completions") == 2


def test_a_failing_batch_makes_the_whole_list_fall_back(server, collection):
    server.plan = [("json", chat_body('{"ranking": [2, 1]}')), ("raw", b"not json")]
    ctx = seeded(collection)
    assert run(make_stage(server, top_n=4, batch=2), ctx) == list("abcde")
    assert rerank_report(ctx)["reason"] == "invalid_reply" and rerank_report(ctx)["calls"] == 2


def test_unreachable_server_falls_back(collection):
    stage = build_stage("llm_rerank")
    stage.bind_llms(LLMs.of(default=ChatClient({"base_url": "http://127.0.0.1:9/v1", "model": "m", "max_retries": 0, "timeout_s": 2})))
    ctx = seeded(collection)
    assert run(stage, ctx) == list("abcde")
    assert rerank_report(ctx)["reason"] == "service_error"


def test_no_query_text_falls_back_without_a_request(server, collection):
    ctx = PipelineContext(collection, Query(vectors={"default": [1.0] * 256}, k=3))
    ctx.add_list("seed", [Hit(i, 1.0, source="seed", provenance=(Contribution("seed", r, 1.0),)) for r, i in enumerate("ba", start=1)])
    stage = make_stage(server, fallback="keyword")
    assert run(stage, ctx) == ["b", "a"]
    assert server.requests == []
    assert rerank_report(ctx)["reason"] == "no_query_text"


def test_empty_input_sends_nothing(server, collection):
    ctx = PipelineContext(collection, Query(text=QUERY, k=3))
    stage = make_stage(server)
    stage.run(ctx)
    assert ctx.current == [] and server.requests == []
    assert rerank_report(ctx) == {"used": "none", "reason": None, "fallback": "keep", "sent": 0, "calls": 0}
    assert rerank_report(ctx, "other") is None


def test_named_stage_reports_under_its_name(server, collection):
    server.chat_reply = '{"ranking": [2]}'
    ctx = seeded(collection)
    run(make_stage(server, name="judge"), ctx)
    assert rerank_report(ctx) is None and rerank_report(ctx, "judge")["used"] == "llm"
    assert set(ctx.notes) == {"judge"}
    assert {h.source for h in ctx.current} == {"judge"}


def test_the_event_reaches_memcore_logging(server, collection, capsys):
    server.chat_reply = "nope"
    configure_logging("json")
    try:
        run(make_stage(server), seeded(collection))
    finally:
        configure_logging()  # back to the environment's choice
    lines = [json.loads(line) for line in capsys.readouterr().err.splitlines() if line.startswith("{")]
    event = next(e for e in lines if e["event"] == "stage.llm_rerank")
    assert (event["used"], event["reason"], event["logger"]) == ("fallback", "invalid_reply", "memcore_llm.llm_rerank")


# -- config ------------------------------------------------------------------------------------


def test_config_defaults_and_errors(server):
    config = LLMRerankConfig()
    assert (config.llm, config.top_n, config.batch, config.fallback, config.max_chars, config.name) == ("default", 20, None, "keep", 500, None)
    with pytest.raises(ConfigError, match=r"pipeline\[0\]\.llm"):
        build_stage("llm_rerank", llm={"base_url": server.url})
    with pytest.raises(ConfigError, match=r"pipeline\[0\]\.llm"):
        build_stage("llm_rerank", llm="")
    with pytest.raises(ConfigError, match=r"pipeline\[0\]\.fallback"):
        make_stage(server, fallback="random")
    with pytest.raises(ConfigError, match=r"batch \(5\) cannot exceed top_n \(3\)"):
        make_stage(server, top_n=3, batch=5)
    with pytest.raises(ConfigError, match=r"pipeline\[0\]\.max_chars"):
        make_stage(server, max_chars=0)
    with pytest.raises(ConfigError, match=r"pipeline\[0\]\.bogus"):
        make_stage(server, bogus=1)


def test_parse_ranking():
    assert parse_ranking({"ranking": [2]}, 3) == [1, 0, 2]
    assert parse_ranking({"ranking": [3, 2, 1]}, 3) == [2, 1, 0]
    assert parse_ranking({"ranking": [" 2 "]}, 2) == [1, 0]
    assert parse_ranking({"ranking": "3 > 1"}, 3) == [2, 0, 1]
    for bad in ({"ranking": [4]}, {"ranking": [1, 1]}, {"ranking": None}, {}, {"ranking": [-1]}, {"ranking": "x"}, {"ranking": ""}):
        with pytest.raises(memcore.ValidationError):
            parse_ranking(bad, 3)


@pytest.mark.parametrize(
    "text, numbers",
    [
        ("[3, 1, 2]", [3, 1, 2]),
        ("3,1,2", [3, 1, 2]),
        (" 3, 1, 2. ", [3, 1, 2]),
        ("3 1 2", [3, 1, 2]),
        ("3\n1\n2", [3, 1, 2]),
        ("3; 1; 2", [3, 1, 2]),
        ("3 > 1 > 2", [3, 1, 2]),
        ("3 -> 1 -> 2", [3, 1, 2]),
        ("[3] > [1] > [2]", [3, 1, 2]),
        ("[ 3 ],[1]", [3, 1]),
        ('["3", "1"]', [3, 1]),
        ("[3, 1, 2,]", [3, 1, 2]),
        ("2", [2]),
        ("Ranking: 3 > 1 > 2", [3, 1, 2]),
        ("ranking = [3, 1]", [3, 1]),
        ("The ranking is 3, 1, 2.", [3, 1, 2]),
        ("Final ranking: [2, 1]", [2, 1]),
        ("Here you go.\n**Ranking:** 3, 1\nBecause 3 mentions pasta.", [3, 1]),
        ("```\n3, 1, 2\n```", [3, 1, 2]),
        ("```text\n[3, 1]\n```", [3, 1]),
        ("12, 3", [12, 3]),
    ],
)
def test_bare_ranking_formats(text, numbers):
    assert bare_ranking(text) == numbers


@pytest.mark.parametrize(
    "text",
    [
        "",
        "I think passage 3 is best.",
        "Passage 3 > passage 1",
        "1. Periosteal bone formation",
        "1. 1-2\n2. 3-4",
        "3, 1, and 2",
        "3.5, 1",
        "-1, 2",
        "The best passages are 3 and 1.\nThanks",
        "ranking: first 3",
        "rankings: 3, 1",
        '{"ranking": [3, 1]',  # broken JSON is not a bare ranking either
    ],
)
def test_prose_is_not_a_bare_ranking(text):
    assert bare_ranking(text) is None


def test_bare_ranking_is_linear_on_long_replies():
    """The grammar is unambiguous: a long almost-ranking fails fast instead of backtracking."""
    assert bare_ranking("1  " * 20000 + "x") is None
    assert bare_ranking("1 , " * 20000 + "x") is None
    assert len(bare_ranking(", ".join(["1"] * 20000))) == 20000


def test_read_reply_and_parse_reply():
    assert read_reply('ok {"ranking": [2, 1]} done') == {"ranking": [2, 1]}
    assert read_reply("[2, 1]") == {"ranking": [2, 1]}
    assert read_reply('{"other": 1}') == {"other": 1}  # an object is the reply, even without a ranking
    with pytest.raises(memcore.ValidationError, match="no parseable JSON object.*nor a bare ranking"):
        read_reply("passage two")
    assert parse_reply("Ranking: 2", 3) == [1, 0, 2]
    with pytest.raises(memcore.ValidationError, match="passages are 1-3"):
        parse_reply("[4, 1]", 3)


# -- contract and integration ----------------------------------------------------------------


@pytest.fixture(params=["llm", "unparseable", "keyword-fallback"])
def contract_stage(request, server):
    if request.param == "llm":
        server.chat_reply = '{"ranking": [3, 1, 2]}'
        return make_stage(server)
    server.chat_reply = "no ranking here"
    return make_stage(server, top_n=6, batch=3, fallback="keyword" if request.param == "keyword-fallback" else "keep")


class TestLLMRerankContract(StageContract):
    @pytest.fixture
    def stage(self, contract_stage):
        return contract_stage


class TestLLMRerankAfterFusion(StageContract):
    """Over a fused working list (hits with several contributions)."""

    @pytest.fixture
    def stage(self, server):
        server.chat_reply = '{"ranking": [2, 4]}'
        return make_stage(server, top_n=8, batch=4)

    def make_context(self, collection, query, *, empty=False):
        ctx = super().make_context(collection, query, empty=empty)
        build_stage("fuse", fusion="rrf").run(ctx)
        return ctx


def test_through_memcore_open(server, tmp_path):
    settings = {
        "llms": {"default": {"kind": "openai", "base_url": server.url, "model": "m", "api_key_env": ""}},
        "pipeline": [
            {"kind": "recall", "over_fetch": 2.0},
            {"kind": "llm_rerank"},
            {"kind": "limit"},
        ],
    }
    memory = memcore.open(settings, path=tmp_path)
    try:
        for i, text in TEXTS.items():
            memory.insert(text, id=i)
        query = memory.collection.make_query("pasta garlic cooks", k=2)
        baseline = memory.collection.search_index("vector", query, 4)
        server.chat_reply = '{"ranking": [4, 3]}'
        hits = memory.query("pasta garlic cooks", k=2)
        assert [h.id for h in hits] == [baseline[3].id, baseline[2].id]
        assert [h.source for h in hits] == ["llm_rerank", "llm_rerank"] and hits[0].score > hits[1].score
        assert hits[0].record is not None and hits[0].record.text == TEXTS[baseline[3].id]
        assert all(c.source == "vector" for h in hits for c in h.provenance)
        sent = server.requests[-1].body["messages"][1]["content"]
        assert len(re.findall(r"^\[\d+\] ", sent, flags=re.M)) == 4  # recall depth: k * over_fetch

        server.chat_reply = "?"
        ctx = memory.pipeline.run_context(memory.collection, query)
        assert rerank_report(ctx)["used"] == "fallback"
        assert [h.id for h in ctx.current[:2]] == [h.id for h in baseline[:2]]
        assert [t["stage"] for t in ctx.trace] == ["vector", "llm_rerank", "limit"]
        # Pipeline.run_context copies the stage's notes into its trace entry, and only its
        assert ctx.trace[1]["notes"] == rerank_report(ctx) == ctx.notes["llm_rerank"]
        assert "notes" not in ctx.trace[0] and "notes" not in ctx.trace[2]
    finally:
        memory.close()


# -- LLMs named in settings ------------------------------------------------------------------


def test_no_declared_llm_runs_the_fallback(collection):
    stage = build_stage("llm_rerank", fallback="keyword")
    stage.bind_llms(LLMs())
    ctx = seeded(collection)
    assert run(stage, ctx) == ["c", "a", "b", "d", "e"]
    assert rerank_report(ctx) == {"used": "fallback", "reason": "no_llm", "fallback": "keyword", "sent": 5, "calls": 0}


def test_an_undeclared_named_llm_is_a_config_error():
    stage = build_stage("llm_rerank", llm="judge")
    with pytest.raises(ConfigError, match=r"no LLM named 'judge'"):
        stage.bind_llms(LLMs())


def test_the_stage_uses_the_llm_declared_in_settings(server, tmp_path):
    server.chat_reply = '{"ranking": [2, 1]}'
    settings = {
        "store": "memory",
        "llms": {"judge": {"kind": "openai", **llm(server)}},
        "pipeline": [{"kind": "recall", "over_fetch": 1.0}, {"kind": "llm_rerank", "llm": "judge", "top_n": 2}, {"kind": "limit"}],
    }
    with memcore.open(settings) as memory:
        for rid, text in TEXTS.items():
            memory.insert(text, id=rid)
        hits = memory.query(QUERY, k=2)
        assert len(hits) == 2 and hits[0].source == "llm_rerank"
        assert server.requests, "the declared LLM was not called"
        assert isinstance(memory.llms["judge"], ChatClient)
