"""Every route of the HTTP API against a real uvicorn server: bodies, statuses, errors, limits."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any, Iterator

import httpx
import pytest

import memcore
from memcore_server.schemas import SearchOut


def call(server: Any, method: str, path: str, key: str | None, body: Any = None, **kw: Any) -> httpx.Response:
    headers = {"authorization": f"Bearer {key}"} if key else {}
    return httpx.request(method, server.url + path, json=body, headers=headers, timeout=30, **kw)


def ok(response: httpx.Response) -> Any:
    assert response.status_code == 200, response.text
    return response.json()


def error_of(response: httpx.Response, status: int, kind: str | None = None) -> str:
    """The error message of a response that must be ``status`` with the error body."""
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"type", "message"}, body
    if kind is not None:
        assert body["error"]["type"] == kind, body
    assert "Traceback" not in response.text
    return str(body["error"]["message"])


@pytest.fixture
def ops(keys: dict[str, str]) -> str:
    return keys["ops"]


def test_health_needs_no_key_and_info_describes_the_memory(server: Any, ops: str, keys: dict[str, str]) -> None:
    assert ok(call(server, "GET", "/v1/health", None)) == {"status": "ok"}
    info = ok(call(server, "GET", "/v1/info", ops))
    assert info["service"]["kind"] == "default"
    assert [i["name"] for i in info["indexes"]] == ["vector"] and "size" in info["indexes"][0]
    assert any(p["name"] == "server" and p["distribution"] == "memcore-server" for p in info["plugins"])
    assert info["limits"]["max_k"] == 1000 and info["caller"] == {"key": "ops", "admin": True, "scope": None}
    tenant = ok(call(server, "GET", "/v1/info", keys["alice"]))
    assert "size" not in tenant["indexes"][0]  # index sizes count every tenant's records
    assert tenant["caller"] == {"key": "alice", "admin": False, "scope": {"user_id": "alice"}}


def test_openapi_31_and_docs(server: Any) -> None:
    schema = ok(call(server, "GET", "/openapi.json", None))
    assert schema["openapi"].startswith("3.1")
    paths = schema["paths"]
    for route in ("/v1/insert", "/v1/insert_many", "/v1/upsert", "/v1/update", "/v1/get", "/v1/delete", "/v1/forget", "/v1/count", "/v1/search"):
        assert "post" in paths[route], route
        responses = paths[route]["post"]["responses"]
        assert {"400", "401", "403", "404", "409", "413", "423", "503"} <= set(responses) and "422" not in responses
    assert {"get", "patch", "delete"} <= set(paths["/v1/records/{id}"])
    assert schema["components"]["securitySchemes"]["HTTPBearer"]["scheme"] == "bearer"
    docs = call(server, "GET", "/docs", None)
    assert docs.status_code == 200 and "swagger" in docs.text.lower()


def test_write_read_search_delete_round_trip(server: Any, ops: str, memory: memcore.Memory) -> None:
    dim = memory.collection.spaces["default"].dim
    one = ok(call(server, "POST", "/v1/insert", ops, {"text": "the cat sat on the mat", "id": "a", "metadata": {"topic": "cats"}, "scope": {"user_id": "u"}}))
    assert one == {"id": "a"}
    many = ok(
        call(
            server,
            "POST",
            "/v1/insert_many",
            ops,
            {
                "items": [
                    {"text": "dogs bark at night", "id": "b", "metadata": {"topic": "dogs"}},
                    {"text": "a vector item", "id": "c", "vectors": {"default": [0.5] * dim}},
                ]
            },
        )
    )
    assert many == {"ids": ["b", "c"]}
    assert memory.get("a").scope == memcore.Scope(user_id="u")
    got = ok(call(server, "POST", "/v1/get", ops, {"ids": ["b", "a"]}))["records"]
    assert [r["id"] for r in got] == ["b", "a"] and got[1]["metadata"] == {"topic": "cats"} and "vectors" not in got[1]
    with_vectors = ok(call(server, "POST", "/v1/get", ops, {"ids": ["c"], "with_vectors": True}))["records"][0]
    assert len(with_vectors["vectors"]["default"]) == dim
    assert ok(call(server, "POST", "/v1/get", ops, {"where": {"topic": "dogs"}}))["records"][0]["id"] == "b"
    assert len(ok(call(server, "POST", "/v1/get", ops, {"limit": 2}))["records"]) == 2
    assert ok(call(server, "GET", "/v1/records/a", ops))["text"] == "the cat sat on the mat"
    assert ok(call(server, "POST", "/v1/count", ops, {}))["count"] == 3
    assert ok(call(server, "POST", "/v1/count", ops, {"where": {"topic": "cats"}}))["count"] == 1
    assert ok(call(server, "POST", "/v1/count", ops, {"scope": {"user_id": "u"}}))["count"] == 1
    assert ok(call(server, "POST", "/v1/count", ops, {"index": "vector"}))["count"] == 3

    reply = ok(call(server, "POST", "/v1/search", ops, {"query": "cat on a mat", "k": 2}))
    results = reply["results"]
    assert results[0]["id"] == "a" and set(results[0]) >= {"id", "text", "score", "metadata"}
    # serialised without the response model (the hot route), yet exactly what the model makes of it
    assert SearchOut.model_validate(reply).model_dump(mode="json", exclude_unset=True) == reply
    assert reply == {"results": memory.retrieve("cat on a mat", k=2)}
    by_vector = ok(call(server, "POST", "/v1/search", ops, {"vector": [0.5] * dim, "k": 1}))["results"]
    assert by_vector[0]["id"] == "c"
    filtered = ok(call(server, "POST", "/v1/search", ops, {"query": "cat", "where": {"topic": "dogs"}}))["results"]
    assert [r["id"] for r in filtered] == ["b"]
    explained = ok(call(server, "POST", "/v1/search", ops, {"query": "cat on a mat", "k": 1, "explain": True}))["results"][0]
    assert explained["id"] == "a" and explained["provenance"] and explained["explanation"].startswith("a: score")
    one_index = ok(call(server, "POST", "/v1/search", ops, {"query": "cat", "k": 1, "explain": True, "index": "vector"}))["results"]
    assert one_index[0]["source"] == "vector"

    updated = ok(call(server, "POST", "/v1/update", ops, {"id": "b", "metadata": {"loud": True}, "merge_metadata": True}))["record"]
    assert updated["metadata"] == {"topic": "dogs", "loud": True}
    patched = ok(call(server, "PATCH", "/v1/records/b", ops, {"text": "dogs bark all night"}))
    assert patched["text"] == "dogs bark all night" and patched["metadata"] == {"topic": "dogs", "loud": True}
    assert ok(call(server, "POST", "/v1/upsert", ops, {"items": [{"text": "new text for c", "id": "c"}, {"text": "d is new", "id": "d"}]})) == {
        "ids": ["c", "d"]
    }
    assert memory.get("c").text == "new text for c"

    assert ok(call(server, "DELETE", "/v1/records/d", ops)) == {"deleted": 1}
    assert ok(call(server, "POST", "/v1/delete", ops, {"where": {"topic": "dogs"}})) == {"deleted": 1}
    assert ok(call(server, "POST", "/v1/delete", ops, {"ids": ["c"]})) == {"deleted": 1}
    forgot = ok(call(server, "POST", "/v1/forget", ops, {"scope": {"user_id": "u"}}))
    assert forgot["records"] == 1 and memory.count() == 0


def test_memcore_errors_map_to_statuses(server: Any, ops: str) -> None:
    ok(call(server, "POST", "/v1/insert", ops, {"text": "x", "id": "x"}))
    assert "nope" in error_of(call(server, "GET", "/v1/records/nope", ops), 404, "NotFoundError")
    error_of(call(server, "POST", "/v1/get", ops, {"ids": ["x", "nope"]}), 404, "NotFoundError")
    error_of(call(server, "POST", "/v1/update", ops, {"id": "nope", "text": "y"}), 404, "NotFoundError")
    error_of(call(server, "POST", "/v1/delete", ops, {"ids": ["nope"]}), 404, "NotFoundError")
    error_of(call(server, "POST", "/v1/insert", ops, {"text": "different", "id": "x"}), 409, "DuplicateIdError")
    error_of(call(server, "POST", "/v1/insert", ops, {"text": "   "}), 400, "ValidationError")
    error_of(call(server, "POST", "/v1/insert", ops, {"text": "v", "vector": [1.0, 2.0]}), 400, "DimensionError")
    error_of(call(server, "POST", "/v1/count", ops, {"where": {"topic": {"$nope": 1}}}), 400, "FilterError")
    error_of(call(server, "POST", "/v1/delete", ops, {}), 400, "ValidationError")
    error_of(call(server, "POST", "/v1/search", ops, {}), 400, "ValidationError")
    error_of(call(server, "POST", "/v1/insert", ops, {"text": "x", "options": {"colour": "red"}}), 400, "ValidationError")
    error_of(call(server, "POST", "/v1/count", ops, {"index": "missing"}), 404)
    assert call(server, "GET", "/v1/records/x", ops).status_code == 200  # nothing above changed x


def test_request_validation_is_400_with_the_error_body(server: Any, ops: str) -> None:
    assert "text" in error_of(call(server, "POST", "/v1/insert", ops, {"id": "no text"}), 400, "ValidationError")
    error_of(call(server, "POST", "/v1/insert", ops, {"text": "x", "surprise": 1}), 400, "ValidationError")
    error_of(call(server, "POST", "/v1/search", ops, {"query": "x", "k": 0}), 400, "ValidationError")
    error_of(call(server, "POST", "/v1/search", ops, {"query": "x", "k": "ten"}), 400, "ValidationError")
    error_of(call(server, "POST", "/v1/get", ops, {"ids": "not-a-list"}), 400, "ValidationError")
    error_of(call(server, "GET", "/v1/nowhere", ops), 404, "NotFoundError")
    error_of(call(server, "PUT", "/v1/insert", ops, {"text": "x"}), 405)


@pytest.mark.parametrize(
    "raw",
    [b"{", b'{"text": "x",}', b"[1, 2", b"\xff\xfe not utf-8", b"", b"null", b"[]", b'"just a string"', b'{"text": "a"} trailing', b"9" * 5000],
)
def test_malformed_json_is_a_400_and_changes_nothing(server: Any, ops: str, memory: memcore.Memory, raw: bytes) -> None:
    for path in ("/v1/insert", "/v1/insert_many", "/v1/delete", "/v1/search"):
        response = httpx.post(server.url + path, content=raw, headers={"authorization": f"Bearer {ops}", "content-type": "application/json"}, timeout=30)
        error_of(response, 400)
    assert memory.count() == 0


def test_deeply_nested_json_is_refused(server: Any, ops: str) -> None:
    raw = b'{"text": "x", "metadata": {"a": ' + b"[" * 100_000 + b"]" * 100_000 + b"}}"
    response = httpx.post(server.url + "/v1/insert", content=raw, headers={"authorization": f"Bearer {ops}", "content-type": "application/json"}, timeout=30)
    assert response.status_code in (400, 413) and "Traceback" not in response.text


def test_body_limit_declared_and_streamed(memory: memcore.Memory, served: Any, keys: dict[str, str]) -> None:
    from memcore.plugin import hash_api_key

    server = served(memory, max_body_bytes=4096, keys={"ops": {"sha256": hash_api_key(keys["ops"]), "admin": True}})
    headers = {"authorization": f"Bearer {keys['ops']}", "content-type": "application/json"}
    big = json.dumps({"text": "x" * 10_000}).encode()
    assert "4096" in error_of(httpx.post(server.url + "/v1/insert", content=big, headers=headers, timeout=30), 413, "RequestTooLarge")

    def chunks() -> Iterator[bytes]:  # no Content-Length: the limit holds while the body is read
        yield b'{"text": "'
        for _ in range(100):
            yield b"y" * 1000
        yield b'"}'

    streamed = httpx.post(server.url + "/v1/insert", content=chunks(), headers=headers, timeout=30)
    error_of(streamed, 413, "RequestTooLarge")
    small = httpx.post(server.url + "/v1/insert", content=json.dumps({"text": "fits"}).encode(), headers=headers, timeout=30)
    assert small.status_code == 200 and memory.count() == 1


def test_batch_k_and_filter_limits(memory: memcore.Memory, served: Any) -> None:
    server = served(memory, max_batch=3, max_k=5, max_filter_bytes=64)
    items = [{"text": f"item {i}"} for i in range(4)]
    error_of(call(server, "POST", "/v1/insert_many", None, {"items": items}), 413, "RequestTooLarge")
    error_of(call(server, "POST", "/v1/upsert", None, {"items": items}), 413, "RequestTooLarge")
    error_of(call(server, "POST", "/v1/get", None, {"ids": ["a", "b", "c", "d"]}), 413, "RequestTooLarge")
    error_of(call(server, "POST", "/v1/delete", None, {"ids": ["a", "b", "c", "d"]}), 413, "RequestTooLarge")
    assert memory.count() == 0
    assert ok(call(server, "POST", "/v1/insert_many", None, {"items": items[:3]}))["ids"]
    assert "limit of 5" in error_of(call(server, "POST", "/v1/search", None, {"query": "item", "k": 6}), 400, "ValidationError")
    assert len(ok(call(server, "POST", "/v1/search", None, {"query": "item", "k": 5}))["results"]) == 3
    where = {"tag": {"$in": [f"value-{i}" for i in range(20)]}}
    error_of(call(server, "POST", "/v1/count", None, {"where": where}), 400, "FilterError")
    error_of(call(server, "POST", "/v1/search", None, {"query": "x", "k": 5, "where": where}), 400, "FilterError")
    error_of(call(server, "POST", "/v1/delete", None, {"where": where}), 400, "FilterError")
    assert memory.count() == 3
    text_filter = {"$or": [{"$contains": f"word-{i}"} for i in range(10)]}
    for path, body in (
        ("/v1/get", {}),
        ("/v1/count", {}),
        ("/v1/delete", {}),
        ("/v1/search", {"query": "x", "k": 5}),
        ("/v1/retrieve_many", {"queries": ["x"], "k": 5}),
    ):
        assert "where_document filter" in error_of(call(server, "POST", path, None, {**body, "where_document": text_filter}), 400, "FilterError")
    error_of(call(server, "POST", "/v1/retrieve_many", None, {"queries": ["a", "b", "c", "d"]}), 413, "RequestTooLarge")
    error_of(call(server, "POST", "/v1/retrieve_many", None, {"queries": ["a"], "k": 6}), 400, "ValidationError")
    assert [len(r) for r in ok(call(server, "POST", "/v1/retrieve_many", None, {"queries": ["a", "b", "c"], "k": 5}))["results"]] == [3, 3, 3]
    assert memory.count() == 3


@pytest.mark.parametrize("path,verb,body", [("/v1/count", "count", {}), ("/v1/search", "retrieve", {"query": "x"})])
def test_request_time_limit_is_a_504_while_the_call_still_runs(
    memory: memcore.Memory, served: Any, monkeypatch: pytest.MonkeyPatch, path: str, verb: str, body: dict[str, Any]
) -> None:
    server = served(memory, request_timeout_s=0.2)
    real = getattr(memory, verb)
    release, finished = threading.Event(), threading.Event()

    def slow(*a: Any, **kw: Any) -> Any:
        release.wait(60)  # held until the client has its answer
        finished.set()
        return real(*a, **kw)

    monkeypatch.setattr(memory, verb, slow)
    try:
        assert "0.2" in error_of(call(server, "POST", path, None, body), 504, "RequestTimeout")
        assert not finished.is_set()  # answered at the time limit, not when the call ended
    finally:
        release.set()
    assert finished.wait(30)  # the call itself completes in its thread


def test_an_unexpected_exception_is_a_bare_500(memory: memcore.Memory, served: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    server = served(memory)

    def broken(**kw: Any) -> int:
        raise RuntimeError("secret internals at /srv/db")

    monkeypatch.setattr(memory, "count", broken)
    response = call(server, "POST", "/v1/count", None, {})
    message = error_of(response, 500, "InternalError")
    assert "secret" not in response.text and "RuntimeError" not in response.text and "log" in message


def test_locked_and_unavailable_stores_map_to_423_and_503(memory: memcore.Memory, served: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    server = served(memory)
    for exc, status in (
        (memcore.LockedError("held by pid 1"), 423),
        (memcore.StoreUnavailableError("db down"), 503),
        (memcore.StorageFullError("disk full"), 507),
    ):

        def failing(*a: Any, _exc: Exception = exc, **kw: Any) -> Any:
            raise _exc

        monkeypatch.setattr(memory, "insert", failing)
        error_of(call(server, "POST", "/v1/insert", None, {"text": "x"}), status, type(exc).__name__)


def test_without_keys_calls_need_none(memory: memcore.Memory, served: Any) -> None:
    server = served(memory)
    assert ok(call(server, "POST", "/v1/insert", None, {"text": "open"}))["id"]
    assert ok(call(server, "GET", "/v1/info", None))["caller"] == {"key": None, "admin": True, "scope": None}


def test_the_hot_routes_answer_as_the_others(server: Any, ops: str, memory: memcore.Memory) -> None:
    """search, get and insert are served without FastAPI's request machinery (memcore_server.hotpath):
    their replies are what the response models make of them, their refusals name what the other routes name."""
    from memcore_server.schemas import IdOut, RecordsOut

    dim = memory.collection.spaces["default"].dim
    inserted = ok(call(server, "POST", "/v1/insert", ops, {"text": "a vector item", "id": "v", "vector": [0.5] * dim, "metadata": {"x": 1.5}}))
    assert inserted == IdOut.model_validate(inserted).model_dump(mode="json") == {"id": "v"}
    for body in ({"ids": ["v"]}, {"ids": ["v"], "with_vectors": True}, {"where": {"x": 1.5}, "limit": 5}):
        got = ok(call(server, "POST", "/v1/get", ops, body))
        assert got == RecordsOut.model_validate(got).model_dump(mode="json", exclude_unset=True) and got["records"][0]["id"] == "v"
    for hot, cold, body in (
        ("/v1/search", "/v1/retrieve_many", {"k": 0}),
        ("/v1/search", "/v1/retrieve_many", {"k": "ten"}),
        ("/v1/get", "/v1/count", {"surprise": 1}),
        ("/v1/get", "/v1/count", {"where": [1]}),
    ):
        hot_message = error_of(call(server, "POST", hot, ops, body), 400, "ValidationError")
        cold_message = error_of(call(server, "POST", cold, ops, {"queries": ["q"], **body} if "retrieve" in cold else body), 400, "ValidationError")
        assert hot_message.split(":")[0] == cold_message.split(":")[0] == f"body.{next(iter(body))}"  # the same place named
    headers = {"authorization": f"Bearer {ops}", "content-type": "text/plain"}
    for path in ("/v1/insert", "/v1/insert_many"):  # a body that is not declared JSON is refused by both
        error_of(httpx.post(server.url + path, content=b'{"text": "x"}', headers=headers, timeout=30), 400, "ValidationError")
    typed = {**headers, "content-type": "application/merge-patch+json"}  # a JSON media type of its own
    assert ok(httpx.post(server.url + "/v1/insert", content=b'{"text": "typed"}', headers=typed, timeout=30))["id"]
    error_of(call(server, "GET", "/v1/search", ops), 405)
    assert memory.count() == 2


def test_the_hot_routes_are_answered_in_front_of_fastapi_until_a_middleware_is_added(memory: memcore.Memory, served: Any) -> None:
    """search, get and insert never enter FastAPI's middleware stack (memcore_server.front), the
    other routes do; once a middleware is added to the built application, it sees every request,
    the hot routes' too (they are then served by their FastAPI routes, with the same replies)."""
    from memcore_server import create_app

    seen: list[str] = []

    class Recorder:
        def __init__(self, app: Any) -> None:
            self.app = app

        async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
            if scope["type"] == "http":
                seen.append(scope["path"])
            await self.app(scope, receive, send)

    def with_recorder(memory: memcore.Memory, config: Any) -> Any:
        app = create_app(memory, config)
        before = app.hot_routes
        app.add_middleware(Recorder)
        assert before is not None and app.hot_routes is None
        return app

    fronted = create_app(memory)
    assert fronted.hot_routes is not None and {"/v1/search", "/v1/get", "/v1/insert"} == set(fronted.hot_routes.routes)
    server = served(memory, factory=with_recorder)
    inserted = ok(call(server, "POST", "/v1/insert", None, {"text": "recorded", "id": "r"}))
    assert inserted == {"id": "r"}
    assert ok(call(server, "POST", "/v1/get", None, {"ids": ["r"]}))["records"][0]["text"] == "recorded"
    assert [r["id"] for r in ok(call(server, "POST", "/v1/search", None, {"query": "recorded", "k": 1}))["results"]] == ["r"]
    error_of(call(server, "POST", "/v1/search", None, {"k": 0}), 400, "ValidationError")
    assert seen == ["/v1/insert", "/v1/get", "/v1/search", "/v1/search"]


def test_the_embedders_are_warm_before_the_first_request(tmp_path: Path, served: Any) -> None:
    """[server] warm (the default): the server loads each space's model while it starts, so a
    first insert never waits for it inside request_timeout_s; warm = false leaves it to the first request."""
    pytest.importorskip("memcore_embed")
    settings = {"spaces": {"default": {"embedder": {"kind": "minilm", "backend": "numpy"}}}, "indexes": {"vector": {"kind": "exact", "space": "default"}}}
    for warm in (True, False):
        with memcore.open(settings, path=tmp_path / f"warm-{warm}") as memory:
            embedder = memory.collection.spaces["default"].embedder
            assert embedder is not None and not embedder.is_loaded  # type: ignore[attr-defined]
            server = served(memory, warm=warm)
            assert ok(call(server, "GET", "/v1/health", None)) == {"status": "ok"}
            assert embedder.is_loaded is warm  # type: ignore[attr-defined]
            assert ok(call(server, "POST", "/v1/insert", None, {"text": "the first memory"}))["id"]
            server.stop()
