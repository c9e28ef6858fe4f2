"""``memcore get/count/delete/history`` and ``memcore query`` with several queries and
``--where-document`` (CliRunner over a memory on disk)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

import memcore
from memcore.cli import main

TEXTS = [
    ("Alice travelled to Paris in May", "alice"),
    ("Bob cooks pasta on Fridays", "bob"),
    ("Alice likes the Louvre in Paris", "alice"),
    ("Draft: Bob plans a trip to Rome", "bob"),
]


@pytest.fixture
def mem(tmp_path: Path) -> tuple[Path, list[str]]:
    path = tmp_path / "mem"
    with memcore.open(path=path) as m:
        ids = list(m.insert([{"text": t, "metadata": {"speaker": who}, "scope": {"user_id": who}} for t, who in TEXTS]))
        m.update(ids[1], text="Bob cooks risotto on Fridays")
    return path, ids


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.output


def run_json(*args: str) -> object:
    code, out = run(*args, "--json")
    assert code == 0, out
    return json.loads(out)


@pytest.mark.parametrize("command", ["get", "count", "delete", "history", "query"])
def test_help(command: str) -> None:
    code, out = run(command, "--help")
    assert code == 0 and "--json" in out
    if command != "history":
        assert "--where-document" in out


def test_get_pages_and_filters(mem: tuple[Path, list[str]]) -> None:
    path, ids = mem
    assert [r["id"] for r in run_json("get", "-p", str(path))] == ids  # type: ignore[union-attr]
    assert [r["id"] for r in run_json("get", "-p", str(path), "--offset", "1", "--limit", "2")] == ids[1:3]  # type: ignore[union-attr]
    paris = run_json("get", "-p", str(path), "--where-document", '{"$contains": "Paris"}', "--where", '{"speaker": "alice"}')
    assert [r["text"] for r in paris] == [TEXTS[0][0], TEXTS[2][0]]  # type: ignore[union-attr]
    assert [r["id"] for r in run_json("get", "-p", str(path), "--scope", "user_id=bob")] == [ids[1], ids[3]]  # type: ignore[union-attr]
    code, out = run("get", "-p", str(path), ids[0])
    assert code == 0 and ids[0] in out and "Paris" in out


def test_count(mem: tuple[Path, list[str]]) -> None:
    path, _ = mem
    assert run_json("count", "-p", str(path)) == {"count": 4}
    assert run_json("count", "-p", str(path), "-d", '{"$not_contains": "Paris"}') == {"count": 2}
    assert run_json("count", "-p", str(path), "-d", '{"$contains": "Paris"}', "--scope", "user_id=bob") == {"count": 0}
    assert run("count", "-p", str(path)) == (0, "4\n")


def test_delete_by_where_document_and_history(mem: tuple[Path, list[str]]) -> None:
    path, ids = mem
    assert run_json("delete", "-p", str(path), "--where-document", '{"$contains": "Draft"}') == {"deleted": 1}
    assert run_json("count", "-p", str(path)) == {"count": 3}
    assert [v["op"] for v in run_json("history", "-p", str(path), ids[3])] == ["insert", "delete"]  # type: ignore[union-attr]
    code, out = run("history", "-p", str(path), ids[3])
    assert code == 0 and "(erased: the record was deleted)" in out and "(deleted)" in out and "Draft" not in out
    versions = run_json("history", "-p", str(path), ids[1], "--scope", "user_id=bob")
    assert [(v["op"], v["text"]) for v in versions] == [("insert", TEXTS[1][0]), ("update", "Bob cooks risotto on Fridays")]  # type: ignore[union-attr]
    code, out = run("history", "-p", str(path), ids[1])
    assert code == 0 and "update" in out and "risotto" in out


@pytest.mark.parametrize(
    "args",
    [
        ["history", "ID0", "--scope", "user_id=bob"],
        ["history", "no-such-id"],
        ["get", "--where-document", '{"$contains": ""}'],
        ["count", "--where-document", '{"$regex": "a"}'],
        ["delete", "--where-document", '{"$contains": 3}'],
        ["delete", "--where-document", '"Paris"'],
        ["delete"],
        ["get", "--offset", "-1"],
        ["query", "--where-document", '{"$nope": "x"}', "trip"],
        ["query"],
    ],
    ids=[
        "history-other-scope",
        "history-unknown",
        "empty-contains",
        "regex",
        "not-a-string",
        "not-a-dict",
        "delete-nothing",
        "offset",
        "query-bad",
        "query-none",
    ],
)
def test_bad_input_is_an_error_and_changes_nothing(mem: tuple[Path, list[str]], args: list[str]) -> None:
    path, ids = mem
    args = [ids[0] if a == "ID0" else a for a in args]
    before = run_json("get", "-p", str(path))
    code, out = run(*args[:1], "-p", str(path), *args[1:])
    assert code == 2, out
    assert "Error" in out
    assert run_json("get", "-p", str(path)) == before


def test_query_several_queries(mem: tuple[Path, list[str]], tmp_path: Path) -> None:
    path, _ = mem
    many = run_json("query", "-p", str(path), "-k", "1", "--each", "Paris Louvre", "risotto Fridays")
    assert [q["query"] for q in many] == ["Paris Louvre", "risotto Fridays"]  # type: ignore[index]
    assert [q["hits"][0]["text"] for q in many] == [TEXTS[2][0], "Bob cooks risotto on Fridays"]  # type: ignore[index]
    file = tmp_path / "questions.txt"
    file.write_text("risotto Fridays\n\nParis Louvre\n", encoding="utf-8")
    from_file = run_json("query", "-p", str(path), "-k", "1", "--queries-file", str(file))
    assert [q["query"] for q in from_file] == ["risotto Fridays", "Paris Louvre"]  # type: ignore[index]
    alone = run_json("query", "-p", str(path), "-k", "1", "risotto", "Fridays")
    assert alone[0]["text"] == "Bob cooks risotto on Fridays"  # type: ignore[index]
    code, out = run("query", "-p", str(path), "-k", "1", "--each", "Paris", "Rome")
    assert code == 0 and "## Paris" in out and "## Rome" in out


def test_query_where_document_restricts_before_k(mem: tuple[Path, list[str]]) -> None:
    path, _ = mem
    hits = run_json("query", "-p", str(path), "-k", "2", "--where-document", '{"$contains": "Paris"}', "Bob cooks risotto")
    assert sorted(h["text"] for h in hits) == sorted([TEXTS[0][0], TEXTS[2][0]])  # type: ignore[union-attr]
