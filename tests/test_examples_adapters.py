"""The framework examples run end to end, offline, and retrieve what they should:
examples/langgraph_agent.py (LangGraph + MemcoreStore on a hybrid MiniLM + BM25 memory) and
examples/llamaindex_rag.py (LlamaIndex RAG over MemcoreVectorStore, hybrid mode)."""

from __future__ import annotations

import json
from importlib import resources, util
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"

pytest.importorskip("memcore_embed", reason="the examples embed with MiniLM (memcore-embed)")


def load(name: str):
    spec = util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    module = util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_langgraph_agent_recalls_by_meaning_and_per_user(tmp_path, capsys):
    pytest.importorskip("langgraph")
    transcript = load("langgraph_agent").main(tmp_path / "memory")
    alice = dict(transcript["alice"])
    assert alice["Which city should I fly to if I want to visit my sister?"][0] == "my sister Carol lives in Lisbon and teaches piano."
    assert alice["Can you suggest a snack for me?"][0] == "I am allergic to peanuts."  # no shared word: by meaning
    bob = dict(transcript["bob"])
    assert bob["What instrument do I play?"] == ["I play the cello in a quartet."]  # none of alice's memories
    assert "recalled" in capsys.readouterr().out


def test_the_llamaindex_rag_example_finds_every_evidence_turn(tmp_path, capsys):
    pytest.importorskip("llama_index.core")
    answers = load("llamaindex_rag").main(tmp_path / "memory")
    questions = json.loads((resources.files("memcore") / "data" / "sample_questions.json").read_text(encoding="utf-8"))["questions"]
    assert len(answers) == len(questions)
    for q, (asked, found) in zip(questions, answers):
        assert asked == q["question"] and set(q["evidence"]) & set(found), f"no evidence turn retrieved for {asked!r}"
    assert capsys.readouterr().out.count("ok ") == len(questions)
