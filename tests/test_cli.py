"""The ``memcore`` command line: CliRunner tests plus real subprocesses (``python -m memcore.cli``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

import memcore
from memcore.cli import main
from memcore._util.log import configure_logging
from memcore._plugins._host import get_host

REPO = Path(__file__).resolve().parents[1]
CORE = REPO / "core"
EXAMPLES = REPO / "examples"


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    """No MEMCORE_* variable of the caller's shell changes what the commands build."""
    for key in list(os.environ):
        if key.startswith("MEMCORE_") and key != "MEMCORE_DEFAULT_EMBEDDER":  # the suite's default embedder (conftest.py) stays
            monkeypatch.delenv(key)
    yield
    configure_logging()  # undo a --log set by a test


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


def invoke(runner: CliRunner, *args: str, code: int = 0):
    result = runner.invoke(main, [str(a) for a in args], env={"MEMCORE_LOG": None, "MEMCORE_LOG_LEVEL": None})
    assert result.exit_code == code, f"exit {result.exit_code}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}\n{result.exception!r}"
    if code == 0:
        assert result.exception is None
    return result


def write_jsonl(path: Path, rows: list) -> Path:
    path.write_text("".join((row if isinstance(row, str) else json.dumps(row)) + "\n" for row in rows), encoding="utf-8")
    return path


ROWS = [
    {"id": "a1", "text": "Alice booked a flight to Lisbon for her vacation", "metadata": {"speaker": "Alice", "turn": 1}},
    {"id": "b1", "text": "Bob adopted a beagle puppy named Biscuit", "metadata": {"speaker": "Bob", "turn": 2}},
    {"id": "a2", "text": "Alice plays chess online every night", "metadata": {"speaker": "Alice", "turn": 3}},
    {"id": "b2", "text": "Bob walks Biscuit the beagle in the park", "metadata": {"speaker": "Bob", "turn": 4}},
    {"text": "A record without an id gets one from its content", "scope": {"user_id": "u1"}},
]


@pytest.fixture
def data(tmp_path: Path) -> Path:
    return write_jsonl(tmp_path / "data.jsonl", ROWS)


@pytest.fixture
def collection(runner: CliRunner, tmp_path: Path, data: Path) -> Path:
    directory = tmp_path / "mem"
    invoke(runner, "ingest", "--path", directory, data)
    return directory


def hits_json(result) -> list[dict]:
    return json.loads(result.stdout)


# -- help ------------------------------------------------------------------------------


def test_help_for_every_command(runner):
    top = invoke(runner, "--help")
    assert {"plugins", "ingest", "query", "info", "demo", "eval"} <= set(main.commands)  # + commands of installed plugins
    for name, command in main.commands.items():
        assert name in top.stdout
        result = runner.invoke(main, [name, "--help"], prog_name="memcore")
        assert result.exit_code == 0, result.output
        assert result.stdout.startswith(f"Usage: memcore {name} [OPTIONS]")
        for param in command.params:
            if isinstance(param, click.Option) and not param.hidden:
                assert param.opts[0] in result.stdout, (name, param.opts)
    assert memcore.__version__ in invoke(runner, "--version").stdout


def _commands(group: click.Group, prefix: tuple[str, ...] = ()):
    for name, command in group.commands.items():
        yield (*prefix, name), command
        if isinstance(command, click.Group):
            yield from _commands(command, (*prefix, name))


def test_every_required_option_is_enforced(runner, tmp_path, monkeypatch):
    """A missing required option is click's usage error (exit 2), never a traceback."""
    monkeypatch.chdir(tmp_path)
    checked = 0
    for path, command in _commands(main):
        required = [p for p in command.params if isinstance(p, click.Option) and p.required]
        if not required or isinstance(command, click.Group):
            continue
        result = runner.invoke(main, list(path), prog_name="memcore")
        assert result.exit_code == 2, (path, result.output, result.exception)
        assert "Missing option" in result.output or "Missing argument" in result.output, (path, result.output)
        checked += 1
    assert checked >= 2  # info --path, eval locomo --data ...


# -- plugins ---------------------------------------------------------------------------


def test_plugins_json_lists_builtins(runner):
    infos = json.loads(invoke(runner, "plugins", "--json").stdout)
    builtins = [p for p in infos if p["builtin"]]
    assert builtins and all(p["name"].startswith("memcore.default_plugins") for p in builtins)
    assert all(p["error"] is None for p in builtins)
    for p in infos:
        assert set(p) >= {"name", "version", "distribution", "builtin", "hooks", "registers", "error"}
    indexes = {n for p in infos for n in p["registers"].get("indexes", [])}
    assert "exact" in indexes
    stores = next(p for p in infos if p["name"] == "memcore.default_plugins.stores")
    assert stores["registers"]["stores"] == ["sqlite", "memory"] and stores["hooks"] == ["register_stores"]


def test_plugins_shows_a_broken_plugin(runner):
    host = get_host()

    def boom():
        raise RuntimeError("cli test plugin exploded")

    host.load("cli-test-broken", boom, version="9.9", distribution="memcore-cli-test")
    try:
        human = invoke(runner, "plugins").stdout
        assert "cli-test-broken 9.9 (memcore-cli-test)  [FAILED]" in human
        assert "error: RuntimeError: cli test plugin exploded" in human
        assert "memcore.default_plugins.indexes" in human and "indexes: exact" in human
        assert "failed" in human.splitlines()[-1]
        infos = {p["name"]: p for p in json.loads(invoke(runner, "plugins", "--json").stdout)}
        assert infos["cli-test-broken"]["error"] == "RuntimeError: cli test plugin exploded"
        assert infos["cli-test-broken"]["registers"] == {}
    finally:
        host.remove("cli-test-broken")


# -- ingest and query ------------------------------------------------------------------


def test_ingest_then_query_finds_the_record(runner, tmp_path, data):
    directory = tmp_path / "mem"
    summary = json.loads(invoke(runner, "ingest", "--path", directory, "--batch-size", "2", "--json", data).stdout)
    assert summary["inserted"] == len(ROWS) and summary["records"] == len(ROWS) and summary["count"] == len(ROWS)
    assert summary["indexes"] == ["vector"] and summary["seconds"] >= 0
    # the whole pipeline (default config) and one index, both from a fresh process state
    hits = hits_json(invoke(runner, "query", "--path", directory, "-k", "2", "--json", "flight to Lisbon"))
    assert hits[0]["id"] == "a1" and hits[0]["text"] == ROWS[0]["text"] and hits[0]["metadata"] == ROWS[0]["metadata"]
    assert len(hits) == 2 and hits[0]["score"] >= hits[1]["score"] and hits[0]["provenance"][0]["rank"] == 1
    one = hits_json(
        invoke(runner, "query", "--config", EXAMPLES / "default.toml", "--path", directory, "--index", "vector", "--json", "--explain", "chess", "online")
    )
    assert one[0]["id"] == "a2" and "explain" in one[0]
    # re-ingesting the same file is a no-op
    again = json.loads(invoke(runner, "ingest", "--path", directory, "--json", data).stdout)
    assert again["inserted"] == 0 and again["existing"] == len(ROWS) and again["count"] == len(ROWS)


def test_query_human_output_and_explain(runner, collection):
    out = invoke(runner, "query", "-p", collection, "-k", "3", "--explain", "beagle Biscuit").stdout
    lines = out.splitlines()
    assert lines[0].split() == ["#", "score", "id", "text"]
    assert lines[1].split()[0] == "1" and lines[1].split()[2] in {"b1", "b2"}
    assert "why:" in lines[2] and "vector#1" in lines[2]
    assert "No hits." in invoke(runner, "query", "-p", collection, "--where", '{"speaker": "Nobody"}', "x").stdout


def test_query_where_filters(runner, collection):
    hits = hits_json(invoke(runner, "query", "-p", collection, "--where", '{"speaker": "Bob"}', "--json", "Alice Lisbon chess"))
    assert {h["id"] for h in hits} == {"b1", "b2"}
    hits = hits_json(invoke(runner, "query", "-p", collection, "-w", '{"turn": {"$gte": 3}}', "--json", "Lisbon"))
    assert {h["id"] for h in hits} == {"a2", "b2"}
    scoped = hits_json(invoke(runner, "query", "-p", collection, "--scope", '{"user_id": "u1"}', "--json", "record"))
    assert [h["text"] for h in scoped] == [ROWS[4]["text"]]


def test_query_errors_exit_2(runner, collection, tmp_path):
    bad_json = invoke(runner, "query", "-p", collection, "--where", "{speaker: Bob}", "x", code=2)
    assert "--where" in bad_json.stderr and "not valid JSON" in bad_json.stderr
    not_object = invoke(runner, "query", "-p", collection, "--where", "[1]", "x", code=2)
    assert "JSON object" in not_object.stderr
    bad_op = invoke(runner, "query", "-p", collection, "--where", '{"turn": {"$near": 1}}', "x", code=2)
    assert bad_op.stderr.startswith("Error: ") and "$near" in bad_op.stderr and "Traceback" not in bad_op.output
    no_index = invoke(runner, "query", "-p", collection, "--index", "nope", "x", code=2)
    assert "Error: no index named 'nope'" in no_index.stderr
    missing = invoke(runner, "query", "-p", tmp_path / "nothing-here", "x", code=2)
    assert "no memcore collection" in missing.stderr
    assert not (tmp_path / "nothing-here").exists()


def test_ingest_bad_line_inserts_nothing(runner, tmp_path, collection):
    rows = [{"id": f"n{i}", "text": f"new record number {i}"} for i in range(5)]
    for bad, message in [
        ('{"text": "ok", ', "invalid JSON"),
        ('{"id": "x", "metadata": {}}', 'missing required field "text"'),
        ('{"text": "   "}', "text must not be empty"),
        ('{"text": "x", "color": "red"}', "unknown field(s) ['color']"),
        ('{"text": "x", "metadata": [1]}', "metadata must be a dict"),
        ('["text"]', "expected a JSON object"),
    ]:
        path = write_jsonl(tmp_path / "bad.jsonl", [*rows, "", bad, rows[0]])
        result = invoke(runner, "ingest", "-p", collection, "--batch-size", "1", path, code=2)
        assert result.stderr.startswith(f"Error: {path}:7: "), result.stderr
        assert message in result.stderr
        assert "Traceback" not in result.output
    # nothing was inserted: the collection still holds the fixture's records only
    info = json.loads(invoke(runner, "info", "-p", collection, "--json").stdout)
    assert info["records"] == len(ROWS)
    # and a bad file never creates a collection
    fresh = tmp_path / "fresh"
    invoke(runner, "ingest", "-p", fresh, path, code=2)
    assert not fresh.exists()


def test_ingest_refuses_conflicting_ids(runner, tmp_path, collection):
    dup = write_jsonl(tmp_path / "dup.jsonl", [{"id": "d", "text": "one"}, {"id": "d", "text": "one"}, {"id": "d", "text": "two"}])
    result = invoke(runner, "ingest", "-p", collection, dup, code=2)
    assert f"{dup}:3" in result.stderr and "line 1" in result.stderr
    clash = write_jsonl(tmp_path / "clash.jsonl", [{"id": "new", "text": "fine"}, {"id": "a1", "text": "not what a1 says"}])
    result = invoke(runner, "ingest", "-p", collection, clash, code=2)
    assert "'a1'" in result.stderr and "nothing was inserted" in result.stderr
    assert json.loads(invoke(runner, "info", "-p", collection, "--json").stdout)["records"] == len(ROWS)


def test_ingest_into_chosen_index_and_memory_store(runner, tmp_path, data):
    config = tmp_path / "two.toml"
    config.write_text(
        'pipeline = [{kind = "recall", index = "vector"}, {kind = "limit"}]\n\n'
        '[indexes.vector]\nkind = "exact"\n\n[indexes.ip]\nkind = "exact"\nmetric = "ip"\n'
    )
    summary = json.loads(invoke(runner, "ingest", "-c", config, "-p", tmp_path / "two", "--index", "ip", "--json", data).stdout)
    assert summary["indexes"] == ["ip"]
    info = {i["name"]: i for i in json.loads(invoke(runner, "info", "-p", tmp_path / "two", "--json").stdout)["indexes"]}
    assert info["ip"]["count"] == len(ROWS) and info["vector"]["count"] == 0
    result = invoke(runner, "ingest", "-c", EXAMPLES / "memory_store.toml", "--json", data)
    assert json.loads(result.stdout)["inserted"] == len(ROWS)
    assert "in-memory" in result.stderr


# -- info ------------------------------------------------------------------------------


def test_info_without_config(runner, collection):
    data = json.loads(invoke(runner, "info", "--path", collection, "--json").stdout)
    assert data["records"] == len(ROWS)
    [index] = data["indexes"]
    assert index["name"] == "vector" and index["kind"] == "exact" and index["count"] == len(ROWS)
    assert index["config"]["metric"] == "cosine" and index["bytes"] > 0 and isinstance(index["seq"], int)
    assert data["spaces"]["default"]["embedder"] == "hashing"
    assert data["store"]["bytes"] > 0 and data["bytes"] >= data["store"]["bytes"] + index["bytes"]
    human = invoke(runner, "info", "-p", collection).stdout
    assert "records: 5" in human and "vector" in human and "exact" in human


def test_info_with_config_adds_live_stats(runner, collection):
    data = json.loads(invoke(runner, "info", "-p", collection, "-c", EXAMPLES / "default.toml", "--json").stdout)
    [index] = data["indexes"]
    assert index["size"] == len(ROWS) and index["score"] == "cosine similarity" and index["stats"]


def test_info_errors(runner, tmp_path):
    assert "no memcore collection" in invoke(runner, "info", "-p", tmp_path, code=2).stderr
    assert "not a directory" in invoke(runner, "info", "-p", tmp_path / "missing", code=2).stderr
    assert not (tmp_path / "store.sqlite3").exists()
    (tmp_path / "store.sqlite3").write_bytes(b"")  # e.g. left behind by a crashed tool: not a store
    assert "memcore store" in invoke(runner, "info", "-p", tmp_path, code=2).stderr
    assert "memcore store" in invoke(runner, "query", "-p", tmp_path, "hi", code=2).stderr


# -- config errors ---------------------------------------------------------------------


def test_unknown_index_kind_names_installed_kinds(runner, tmp_path, data):
    config = tmp_path / "bad.toml"
    config.write_text('[indexes.vector]\nkind = "exactt"\nspace = "default"\n')
    for args in (["ingest", "-c", config, "-p", tmp_path / "m", data], ["query", "-c", config, "-p", tmp_path / "m", "hi"]):
        result = invoke(runner, *args, code=2)
        assert result.stderr.startswith("Error: indexes.vector.kind: unknown index kind 'exactt'")
        assert "Installed:" in result.stderr and "exact" in result.stderr and "Did you mean 'exact'?" in result.stderr
        assert "Traceback" not in result.output
    missing = invoke(runner, "query", "-c", tmp_path / "nope.toml", "-p", tmp_path, "hi", code=2)
    assert "does not exist" in missing.stderr


def test_log_option_configures_logging(runner, tmp_path, data):
    args = ["--log", "json", "ingest", "-p", str(tmp_path / "mem"), "--json", str(data)]
    result = runner.invoke(main, args, env={"MEMCORE_LOG": None, "MEMCORE_LOG_LEVEL": None})
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["inserted"] == len(ROWS)  # stdout stays pure JSON
    events = [json.loads(line) for line in result.stderr.splitlines() if line.startswith("{")]
    assert any(e["event"] == "index.created" and e["name"] == "vector" for e in events), result.stderr
    assert "MEMCORE_LOG" not in os.environ  # the runner restored the environment
    quiet = runner.invoke(main, ["--log", "off", "ingest", "-p", str(tmp_path / "mem2"), str(data)], env={"MEMCORE_LOG": None})
    assert quiet.exit_code == 0 and "index.created" not in quiet.stderr


# -- demo ------------------------------------------------------------------------------


def test_demo_json(runner, tmp_path):
    data = json.loads(invoke(runner, "demo", "--path", tmp_path / "demo", "--embedder", "hashing", "--json").stdout)
    assert data["records"] >= 40 and data["k"] == 3
    assert data["components"] == {
        "store": "sqlite",
        "spaces": {"default": "hashing"},
        "indexes": {"vector": "exact"},
        "pipeline": "basic",
        "service": "default",
    }
    assert 5 <= data["total"] == len(data["questions"])
    assert data["found"] == sum(q["found"] for q in data["questions"])
    assert data["hits@3"] == data["found"] / data["total"] >= 0.8
    for q in data["questions"]:
        assert len(q["hits"]) == 3 and q["expected"]
        assert q["found"] == any(h["id"] in q["expected"] for h in q["hits"])
    # the collection was kept at --path and is a normal collection
    info = json.loads(invoke(runner, "info", "-p", tmp_path / "demo", "--json").stdout)
    assert info["records"] == data["records"]


def test_demo_human(runner):
    out = invoke(runner, "demo", "--embedder", "hashing").stdout
    assert "Q1." in out and "hits@3:" in out.splitlines()[-1]


def test_sample_data_is_consistent():
    from memcore.cli.demo import load_sample

    records, questions = load_sample()
    ids = [r["id"] for r in records]
    assert len(ids) == len(set(ids)) and 40 <= len(ids) <= 60
    assert {r["metadata"]["speaker"] for r in records} == {"Alice", "Bob"}
    assert len({r["metadata"]["session"] for r in records}) == len({r["metadata"]["date"] for r in records}) >= 3
    assert all(set(r["metadata"]) == {"speaker", "session", "date", "turn"} for r in records)
    assert all(set(q["evidence"]) <= set(ids) for q in questions)


# -- real processes --------------------------------------------------------------------


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMCORE_") or k == "MEMCORE_DEFAULT_EMBEDDER"}
    env["PYTHONPATH"] = os.pathsep.join([str(CORE), *filter(None, [env.get("PYTHONPATH")])])
    return subprocess.run([sys.executable, "-m", "memcore.cli", *map(str, args)], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def test_subprocess_plugins_json(tmp_path):
    proc = run_cli("plugins", "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    infos = json.loads(proc.stdout)
    assert [p["name"] for p in infos if p["builtin"]] and all(p["name"].startswith("memcore.default_plugins") for p in infos if p["builtin"])


def test_subprocess_ingest_query_and_errors(tmp_path):
    data = write_jsonl(tmp_path / "data.jsonl", ROWS)
    proc = run_cli("ingest", "--config", EXAMPLES / "default.toml", "--path", "mem", "--json", data, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["inserted"] == len(ROWS)
    proc = run_cli(
        "query", "--config", EXAMPLES / "default.toml", "--path", "mem", "--where", '{"speaker": "Bob"}', "-k", "1", "--json", "beagle puppy", cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    assert [h["id"] for h in json.loads(proc.stdout)] == ["b1"]
    bad = write_jsonl(tmp_path / "bad.jsonl", [ROWS[0], "{oops"])
    proc = run_cli("ingest", "--path", "mem2", bad, cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.strip() == f"Error: {bad}:2: invalid JSON (Expecting property name enclosed in double quotes at column 2)"
    assert not (tmp_path / "mem2").exists()


def test_ingest_keeps_links(runner, tmp_path):
    data = tmp_path / "linked.jsonl"
    data.write_text(
        '{"id": "a", "text": "Alice went to Lisbon"}\n{"id": "b", "text": "She loved the tiles", "links": [{"target": "a", "relation": "follows"}]}\n'
    )
    invoke(runner, "ingest", "-p", tmp_path / "mem", data)
    with memcore.open(path=tmp_path / "mem") as memory:
        [link] = memory.collection.get("b").links
    assert (link.target, link.relation) == ("a", "follows")
