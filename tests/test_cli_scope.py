"""``memcore ingest``/``query`` through the declared service, ``--scope KEY=VALUE``, and
``memcore forget`` (CliRunner, plus one real subprocess)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Mapping

import pytest
from click.testing import CliRunner

import memcore
from memcore.plugin import ComponentConfig, hit_to_dict
from memcore import Service, hookimpl
from memcore.cli import main
from memcore.testing import register_plugin

REPO = Path(__file__).resolve().parents[1]
ITEMS = "tag.items"


class TaggingConfig(ComponentConfig):
    """Settings of the test service ``tagging``."""

    kind: str = "tagging"


class TaggingService(Service):
    """Puts every item in its own index, counts inserts in its (per-scope) state, and marks
    what its ``retrieve`` returns with ``"via": "tagging"``."""

    uses_pipeline = False

    @classmethod
    def required_indexes(cls, config: Any) -> dict[str, dict[str, Any]]:
        return {ITEMS: {"kind": "exact", "space": "default"}}

    def insert(self, text: str, vector: Any = None, metadata: Mapping[str, Any] | None = None, **kwargs: Any) -> str:
        self.reject_unknown("insert", kwargs, ("id", "links", "vectors"))
        inserted = self.collection.get_state("tagging", "inserted", 0)
        item = {"text": text, "metadata": dict(metadata or {}), **{k: v for k, v in kwargs.items() if v is not None}}
        return self.collection.insert([item], indexes=[ITEMS], state={("tagging", "inserted"): inserted + 1})[0]

    def retrieve(
        self, query: str | None = None, vector: Any = None, where: Mapping[str, Any] | None = None, k: int = 10, **kwargs: Any
    ) -> list[dict[str, Any]]:
        self.reject_unknown("retrieve", kwargs)
        q = self.make_query(query, vector, where, k)
        return [{**hit_to_dict(h), "via": "tagging"} for h in self.collection.retrieve(q, index=ITEMS, k=k)]


@hookimpl
def register_services(register):
    register("tagging", TaggingService, TaggingConfig)


@pytest.fixture(autouse=True)
def _plugin_and_env(monkeypatch):
    for key in list(os.environ):
        if key.startswith("MEMCORE_") and key != "MEMCORE_DEFAULT_EMBEDDER":  # the suite's default embedder (conftest.py) stays
            monkeypatch.delenv(key)
    with register_plugin(SimpleNamespace(register_services=register_services), name="cli-tagging"):
        yield


ROWS = [
    {"id": "a1", "text": "Alice is allergic to peanuts", "scope": {"user_id": "alice"}},
    {"id": "a2", "text": "Alice flies to Lisbon in April", "scope": {"user_id": "alice", "run_id": "trip"}},
    {"id": "b1", "text": "Bob walks his beagle Biscuit", "scope": {"user_id": "bob"}},
    {"id": "b2", "text": "Bob cooks peanuts curry on Sundays", "scope": {"user_id": "bob"}},
]


def invoke(*args: Any, code: int = 0):
    result = CliRunner().invoke(main, [str(a) for a in args], env={"MEMCORE_LOG": None, "MEMCORE_LOG_LEVEL": None})
    assert result.exit_code == code, f"exit {result.exit_code}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}\n{result.exception!r}"
    return result


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.fixture
def tagging(tmp_path: Path) -> Path:
    config = tmp_path / "tagging.toml"
    config.write_text('[service]\nkind = "tagging"\n', encoding="utf-8")
    return config


@pytest.fixture
def tagged(tmp_path: Path, tagging: Path) -> Path:
    """A memory whose records went through the tagging service."""
    directory = tmp_path / "mem"
    summary = json.loads(invoke("ingest", "-c", tagging, "-p", directory, "--json", write_jsonl(tmp_path / "rows.jsonl", ROWS)).stdout)
    assert summary["service"] == "tagging" and summary["indexes"] == [ITEMS] and summary["inserted"] == len(ROWS)
    return directory


# -- ingest ------------------------------------------------------------------------------


def test_ingest_goes_through_the_declared_service(tagged, tagging):
    with memcore.open(tagging, path=tagged) as memory:
        assert memory.count(index=ITEMS) == len(ROWS)
        assert memory.count(index="vector") == 0  # nothing reached the user index behind the service
        with memory.collection.scoped({"user_id": "bob"}):
            assert memory.collection.get_state("tagging", "inserted") == 2  # the service's own state, per scope


def test_reingest_through_a_service_sends_nothing_again(tmp_path, tagged, tagging):
    again = json.loads(invoke("ingest", "-c", tagging, "-p", tagged, "--json", tmp_path / "rows.jsonl").stdout)
    assert (again["inserted"], again["existing"], again["count"]) == (0, len(ROWS), len(ROWS))
    with memcore.open(tagging, path=tagged) as memory, memory.collection.scoped({"user_id": "bob"}):
        assert memory.collection.get_state("tagging", "inserted") == 2  # still two: nothing was inserted again


def test_ingest_index_is_refused_with_another_service(tmp_path, tagging):
    data = write_jsonl(tmp_path / "rows.jsonl", ROWS)
    result = invoke("ingest", "-c", tagging, "-p", tmp_path / "mem", "--index", "vector", data, code=2)
    assert "--index writes around the 'tagging' service" in result.stderr


def test_ingest_scope_stamps_records_and_refuses_another_users(tmp_path):
    rows = [{"id": "n1", "text": "no scope of its own"}, {"id": "n2", "text": "a run of alice", "scope": {"user_id": "alice", "run_id": "r1"}}]
    data = write_jsonl(tmp_path / "alice.jsonl", rows)
    summary = json.loads(invoke("ingest", "-p", tmp_path / "mem", "--scope", "user_id=alice", "--json", data).stdout)
    assert (summary["scope"], summary["scope_count"], summary["count"]) == ({"user_id": "alice"}, 2, 2)
    with memcore.open(path=tmp_path / "mem") as memory:
        assert memory.get("n1").scope.as_dict() == {"user_id": "alice"}
        assert memory.get("n2").scope.as_dict() == {"user_id": "alice", "run_id": "r1"}
    human = invoke("ingest", "-p", tmp_path / "mem", "--scope", "user_id=alice", data).stdout
    assert 'The scope {"user_id": "alice"} holds 2.' in human
    bob = write_jsonl(tmp_path / "bob.jsonl", [{"id": "x1", "text": "fine"}, {"id": "x2", "text": "bob's", "scope": {"user_id": "bob"}}])
    result = invoke("ingest", "-p", tmp_path / "mem", "--scope", "user_id=alice", bob, code=2)
    assert "record 'x2' has scope {'user_id': 'bob'}, outside --scope {'user_id': 'alice'}" in result.stderr
    with memcore.open(path=tmp_path / "mem") as memory:
        assert memory.count() == 2  # nothing of the refused file went in


# -- query -------------------------------------------------------------------------------


def test_query_asks_a_declared_service_by_default(tagged, tagging):
    rows = json.loads(invoke("query", "-c", tagging, "-p", tagged, "--json", "peanuts").stdout)
    assert rows and all(r["via"] == "tagging" for r in rows)
    human = invoke("query", "-c", tagging, "-p", tagged, "-k", "1", "peanuts").stdout
    assert "score" in human.splitlines()[0] and "peanuts" in human


def test_query_scope_key_value_through_the_service(tagged, tagging):
    alice = json.loads(invoke("query", "-c", tagging, "-p", tagged, "--scope", "user_id=alice", "--json", "peanuts Lisbon").stdout)
    assert sorted(r["id"] for r in alice) == ["a1", "a2"]
    trip = json.loads(invoke("query", "-c", tagging, "-p", tagged, "--scope", "user_id=alice", "--scope", "run_id=trip", "--json", "x").stdout)
    assert [r["id"] for r in trip] == ["a2"]
    as_json = json.loads(invoke("query", "-c", tagging, "-p", tagged, "--scope", '{"user_id": "bob"}', "--json", "peanuts").stdout)
    assert sorted(r["id"] for r in as_json) == ["b1", "b2"]


def test_query_pipeline_index_and_service_flags(tmp_path, tagged, tagging):
    # --index searches the service's index directly (hits with provenance, no "via")
    hits = json.loads(invoke("query", "-c", tagging, "-p", tagged, "--index", ITEMS, "--json", "peanuts").stdout)
    assert hits and all("via" not in h and "provenance" in h for h in hits)
    assert "--explain needs hits with provenance" in invoke("query", "-c", tagging, "-p", tagged, "--explain", "x", code=2).stderr
    assert "give one of them" in invoke("query", "-c", tagging, "-p", tagged, "--service", "--index", ITEMS, "x", code=2).stderr
    # the default service: the pipeline by default, its retrieve with --service
    plain = tmp_path / "plain"
    invoke("ingest", "-p", plain, tmp_path / "rows.jsonl")
    piped = json.loads(invoke("query", "-p", plain, "--json", "peanuts").stdout)
    served = json.loads(invoke("query", "-p", plain, "--service", "--json", "peanuts").stdout)
    assert [h["id"] for h in piped] == [r["id"] for r in served]
    assert "provenance" in piped[0] and set(served[0]) == {"id", "text", "score", "metadata"}


def test_query_service_needs_an_existing_collection(tmp_path, tagging):
    result = invoke("query", "-c", tagging, "-p", tmp_path / "nothing", "x", code=2)
    assert "no memcore collection" in result.stderr and not (tmp_path / "nothing").exists()


@pytest.mark.parametrize(
    ("scope", "message"),
    [("user_id", "expected KEY=VALUE"), ("user_id=", "expected KEY=VALUE"), ("team=x", "unknown scope field 'team'"), ("[1]", "expected KEY=VALUE")],
)
def test_bad_scope_is_a_usage_error(tmp_path, tagged, scope, message):
    result = invoke("query", "-p", tagged, "--scope", scope, "x", code=2)
    assert message in result.stderr


def test_scope_field_given_twice_is_refused(tagged):
    result = invoke("forget", "-p", tagged, "--scope", "user_id=a", "--scope", "user_id=b", code=2)
    assert "user_id is given twice" in result.stderr


# -- forget ------------------------------------------------------------------------------


def test_forget_reports_what_went_by_kind(tagged, tagging):
    out = invoke("forget", "-c", tagging, "-p", tagged, "--scope", "user_id=bob").stdout
    assert out.splitlines() == ['Forgot {"user_id": "bob"}: 2 record(s), 1 state key(s).', f"  {ITEMS}: 2 entries"]
    again = json.loads(invoke("forget", "-c", tagging, "-p", tagged, "--scope", "user_id=bob", "--json").stdout)
    assert again == {"scope": {"user_id": "bob"}, "records": 0, "indexes": {}, "state_keys": 0}
    narrow = json.loads(invoke("forget", "-c", tagging, "-p", tagged, "--scope", "user_id=alice", "--scope", "run_id=trip", "--json").stdout)
    assert (narrow["records"], narrow["indexes"]) == (1, {ITEMS: 1})
    with memcore.open(tagging, path=tagged) as memory:
        assert [r.id for r in memory.get()] == ["a1"]


def test_forget_needs_a_collection_and_a_scope(tmp_path):
    assert "no memcore collection" in invoke("forget", "-p", tmp_path / "none", "--scope", "user_id=bob", code=2).stderr
    assert not (tmp_path / "none").exists()
    assert "Missing option '--scope'" in invoke("forget", "-p", tmp_path, code=2).stderr
    assert "Usage: memcore forget [OPTIONS]" in CliRunner().invoke(main, ["forget", "--help"], prog_name="memcore").stdout


def test_forget_in_a_real_process_leaves_the_other_user(tmp_path):
    data = write_jsonl(tmp_path / "rows.jsonl", ROWS)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMCORE_") or k == "MEMCORE_DEFAULT_EMBEDDER"}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "core"), *filter(None, [env.get("PYTHONPATH")])])

    def run(*args: Any) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "memcore.cli", *map(str, args)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)

    assert run("ingest", "-p", "mem", data).returncode == 0
    proc = run("forget", "-p", "mem", "--scope", "user_id=alice", "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {"scope": {"user_id": "alice"}, "records": 2, "indexes": {"vector": 2}, "state_keys": 0}
    proc = run("query", "-p", "mem", "--json", "peanuts Lisbon beagle")
    assert sorted(h["id"] for h in json.loads(proc.stdout)) == ["b1", "b2"]
