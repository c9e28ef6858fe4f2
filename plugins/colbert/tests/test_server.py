"""The HTTP API server over real HTTP on 127.0.0.1 (uvicorn in a thread, and `memcore colbert serve`
in a subprocess), and the colbert_remote index kind against it."""

from __future__ import annotations

import itertools
import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

import memcore
from memcore import NotFoundError, ValidationError
from memcore.testing import IndexContract
from memcore_colbert import ColbertRemoteConfig
from memcore_colbert.client import ColbertClient
from memcore_colbert.remote import ColbertRemoteIndex

HASHING = {"embedder": {"kind": "token_hashing", "dim": 32}}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ThreadServer:
    """uvicorn serving create_app(root) in a daemon thread on a free port."""

    def __init__(self, root: Path, **options):
        import uvicorn

        from memcore_colbert.server import create_app

        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        app = create_app(root, defaults=dict(HASHING), **options)
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="error"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("the test server did not start")
            time.sleep(0.02)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(10)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    srv = ThreadServer(tmp_path_factory.mktemp("colbert-root"), max_body=1_000_000, max_passages=500)
    yield srv
    srv.stop()


def call(url: str, method: str = "GET", body=None, raw: bytes | None = None, headers=None):
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    request = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


TSV = "d1\tPenguins live in Antarctica and cannot fly\nd2\tThe central bank raised interest rates\nd3\tChocolate cake for a birthday party\n"


def test_create_add_search_delete_end_to_end(server):
    base = server.url
    status, body = call(
        f"{base}/api/create-index",
        "POST",
        {
            "index_name": "ws1_kb1_chunks",
            "collection_tsv_data": TSV,
            "hirag_metadata": {"d1": {"documentKey": "d1", "workspaceId": "ws1"}},
            "config": {"nbits": 2, "doc_maxlen": 64},
        },
    )
    assert status == 200 and body["passages"] == 3
    assert call(f"{base}/api/create-index", "POST", {"index_name": "ws1_kb1_chunks", "collection_tsv_data": TSV})[0] == 409
    status, body = call(
        f"{base}/api/add-to-index",
        "POST",
        {
            "index_name": "ws1_kb1_chunks",
            "collection_tsv_data": "d4\tBicycle tyre repair with a patch kit\n",
            "metadata": {"d4": {"documentKey": "d4"}},
        },
    )
    assert status == 200 and body["passages"] == 4
    status, body = call(f"{base}/api/search?query=penguins+fly&k=2&index_name=ws1_kb1_chunks")
    assert status == 200 and body["query"] == "penguins fly"
    top = body["topk"][0]
    assert top["pid"] == "d1" and top["rank"] == 1 and top["text"].startswith("Penguins")
    assert top["metadata"] == {"documentKey": "d1", "workspaceId": "ws1"} == top["hirag_metadata"]
    assert isinstance(top["score"], float) and len(body["topk"]) == 2
    status, body = call(f"{base}/api/search?query=tyre+patch&k=1&index_name=ws1_kb1_chunks")
    assert body["topk"][0]["pid"] == "d4" and body["topk"][0]["metadata"] == {"documentKey": "d4"}
    status, body = call(f"{base}/api/indexes/ws1_kb1_chunks/passages", "DELETE", {"pids": ["d1", "unknown"]})
    assert status == 200 and body["deleted"] == 1
    status, body = call(f"{base}/api/search?query=penguins+fly&k=5&index_name=ws1_kb1_chunks")
    assert "d1" not in [t["pid"] for t in body["topk"]]
    assert "ws1_kb1_chunks" in call(f"{base}/api/indexes")[1]["indexes"]
    assert call(f"{base}/api/indexes/ws1_kb1_chunks", "DELETE")[0] == 200
    assert call(f"{base}/api/search?query=x&k=1&index_name=ws1_kb1_chunks")[0] == 404
    assert call(f"{base}/api/indexes/ws1_kb1_chunks", "DELETE")[0] == 404


@pytest.mark.parametrize("name", ["../etc", "a/b", "..", ".hidden", "a\\b", "", "x" * 200, "a.b", "%2e%2e"])
def test_bad_index_names_are_rejected(server, name):
    root = server.server.config.app.state.indexes.root
    before = sorted(os.listdir(root.parent)), sorted(os.listdir(root))
    status, body = call(f"{server.url}/api/create-index", "POST", {"index_name": name, "collection_tsv_data": TSV})
    assert status == 400 and body["error"]["type"] == "ValidationError" and "index name" in body["error"]["message"]
    status, _ = call(f"{server.url}/api/search?" + urllib.parse.urlencode({"query": "x", "index_name": name}))
    assert status == 400
    assert call(f"{server.url}/api/indexes/{urllib.parse.quote(name, safe='')}/passages", "DELETE", {"pids": ["a"]})[0] in (400, 404)
    assert (sorted(os.listdir(root.parent)), sorted(os.listdir(root))) == before


@pytest.mark.parametrize(
    "tsv, message",
    [
        ("d1 no tab here\n", "line 1: no tab"),
        ("d1\tok\n\td2 empty pid\n", "line 2: invalid passage id"),
        ("d1\ta\nd1\tb\n", "appears twice"),
        ("\n\n", "no passages"),
    ],
)
def test_malformed_tsv_is_rejected_and_nothing_created(server, tsv, message):
    status, body = call(f"{server.url}/api/create-index", "POST", {"index_name": "bad_tsv_x", "collection_tsv_data": tsv})
    assert status == 400 and message in body["error"]["message"]
    assert call(f"{server.url}/api/indexes/bad_tsv_x")[0] == 404


def test_other_bad_requests(server):
    base = server.url
    assert call(f"{base}/api/add-to-index", "POST", {"index_name": "nope_nope_nope", "collection_tsv_data": TSV})[0] == 404
    status, body = call(f"{base}/api/create-index", "POST", {"index_name": "m_m_m", "collection_tsv_data": TSV, "metadata": {"zz": {}}})
    assert status == 400 and "not in collection_tsv_data" in body["error"]["message"]
    status, body = call(f"{base}/api/create-index", "POST", {"index_name": "m_m_m", "collection_tsv_data": TSV, "config": {"nbits": 3}})
    assert status == 400 and "config.nbits" in body["error"]["message"]
    status, body = call(f"{base}/api/create-index", "POST", {"index_name": "m_m_m", "collection_tsv_data": TSV, "config": {"embedder": {"kind": "hashing"}}})
    assert status == 400 and "config.embedder: this server encodes every index with its own embedder" in body["error"]["message"]
    status, body = call(f"{base}/api/create-index", "POST", raw=b"{not json")
    assert status == 422 and body["error"]["type"] == "RequestValidationError"
    assert call(f"{base}/api/create-index", "POST", {"index_name": "m_m_m"})[0] == 422
    assert call(f"{base}/api/search?query=x&k=0&index_name=m_m_m")[0] == 422
    # a body over the limit is refused from its Content-Length, before it is read
    import http.client

    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    conn.putrequest("POST", "/api/create-index")
    conn.putheader("Content-Type", "application/json")
    conn.putheader("Content-Length", str(2_000_000))
    conn.endheaders()
    conn.send(b'{"index_name": "big_big_big", "collection_tsv_data": "')
    response = conn.getresponse()
    assert response.status == 413 and "exceeds the limit" in json.loads(response.read())["error"]["message"]
    conn.close()
    many = "".join(f"p{i}\tw\n" for i in range(501))
    status, body = call(f"{base}/api/create-index", "POST", {"index_name": "many_many_many", "collection_tsv_data": many})
    assert status == 400 and "more than 500 passages" in body["error"]["message"]
    assert not {"m_m_m", "big_big_big", "many_many_many"} & set(call(f"{base}/api/indexes")[1]["indexes"])


def _wait_for(predicate, what: str) -> None:
    deadline = time.monotonic() + 30
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


def test_searches_run_while_one_is_inside_and_writes_wait_for_them(server):
    """A search holding the index's lock shared does not stop other searches (with one
    exclusive lock the HTTP search below would hang); an add waits until it leaves."""
    base, name = server.url, "conc_rw_lock"
    assert call(f"{base}/api/create-index", "POST", {"index_name": name, "collection_tsv_data": TSV})[0] == 200
    lock = server.server.config.app.state.indexes.lock_of(name)
    added: dict = {}

    def add() -> None:
        added["response"] = call(f"{base}/api/add-to-index", "POST", {"index_name": name, "collection_tsv_data": "d9\tZeppelin airship hangar\n"})

    writer = threading.Thread(target=add)
    with lock.read():  # as if a long search were running
        status, body = call(f"{base}/api/search?query=penguins&k=1&index_name={name}")
        assert status == 200 and body["topk"][0]["pid"] == "d1"
        writer.start()
        _wait_for(lambda: lock.writers_waiting == 1, "the add to wait for the lock")
        assert "response" not in added and lock.readers == 1
    writer.join(30)
    assert added["response"][0] == 200 and added["response"][1]["passages"] == 4
    assert call(f"{base}/api/search?query=zeppelin+airship&k=1&index_name={name}")[1]["topk"][0]["pid"] == "d9"
    assert call(f"{base}/api/indexes/{name}", "DELETE")[0] == 200


def test_concurrent_searches_and_adds_over_http(server):
    base, name = server.url, "conc_many_clients"
    assert call(f"{base}/api/create-index", "POST", {"index_name": name, "collection_tsv_data": TSV})[0] == 200
    errors: list = []
    done = threading.Event()
    searches = itertools.count()

    def searcher() -> None:
        while not done.is_set():
            status, body = call(f"{base}/api/search?query=penguins+antarctica&k=3&index_name={name}")
            if status != 200 or body["topk"][0]["pid"] != "d1":
                errors.append((status, body))
            next(searches)

    def adder() -> None:
        try:
            for batch in range(8):
                tsv = "".join(f"n{batch}_{i}\tnote {batch} {i} about gardening and tomatoes\n" for i in range(20))
                status, body = call(f"{base}/api/add-to-index", "POST", {"index_name": name, "collection_tsv_data": tsv})
                if status != 200:
                    errors.append((status, body))
        finally:
            done.set()

    threads = [threading.Thread(target=searcher) for _ in range(6)] + [threading.Thread(target=adder)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors and not any(t.is_alive() for t in threads)
    assert next(searches) >= 6
    status, body = call(f"{base}/api/indexes/{name}")
    assert status == 200 and body["passages"] == 3 + 8 * 20
    assert call(f"{base}/api/search?query=zeppelin+penguins&k=1&index_name={name}")[1]["topk"][0]["pid"] == "d1"
    assert call(f"{base}/api/indexes/{name}", "DELETE")[0] == 200


def test_client_and_restart_keep_the_index(tmp_path):
    srv = ThreadServer(tmp_path)
    try:
        client = ColbertClient(srv.url)
        client.create_index("w_k_t", [("a", "alpha beta gamma"), ("b", "delta epsilon")], {"a": {"n": 1}}, {"nbits": 1})
        assert client.search("w_k_t", "gamma", 1)[0]["pid"] == "a"
        with pytest.raises(NotFoundError):
            client.search("missing_index_x", "gamma", 1)
        with pytest.raises(ValidationError):
            client.create_index("w_k_t", [("a", "again")])
    finally:
        srv.stop()
    assert (tmp_path / "w_k_t" / "plan.json").is_file() and (tmp_path / "w_k_t" / "hirag_metadata.json").is_file()
    srv = ThreadServer(tmp_path)
    try:
        top = ColbertClient(srv.url).search("w_k_t", "gamma", 1)[0]
        assert top["pid"] == "a" and top["metadata"] == {"n": 1}
    finally:
        srv.stop()


_names = itertools.count()


class TestRemoteContract(IndexContract):
    """colbert_remote against the thread server: the same contract as every index."""

    @pytest.fixture
    def make_index(self, server):
        def build(context):
            name = f"contract_{os.getpid()}_{next(_names)}"
            return ColbertRemoteIndex(ColbertRemoteConfig(url=server.url, index_name=name, config=HASHING), context)

        return build


def test_memcore_colbert_serve_subprocess_and_remote_memory(tmp_path):
    port = free_port()
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "memcore.cli",
            "colbert",
            "serve",
            "--root",
            str(tmp_path / "root"),
            "--port",
            str(port),
            "--embedder",
            "token_hashing",
            "--config",
            '{"nbits": 2}',
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                if ColbertClient(url, timeout=2).health()["status"] == "ok":
                    break
            except memcore.MemcoreError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(f"server did not start: {proc.stderr.read().decode()[-2000:]}") from None
                time.sleep(0.2)
        config = {"indexes": {"late": {"kind": "colbert_remote", "url": url, "index_name": "ws_kb_turns"}}}
        with memcore.open(config, path=tmp_path / "mem") as memory:
            memory.collection.insert(
                [
                    {"id": "t1", "text": "Alice moved to Paris last spring", "metadata": {"speaker": "Bob"}},
                    {"id": "t2", "text": "The quarterly report is due on Friday"},
                ],
                indexes=["late"],
            )
            hits = memory.collection.retrieve("where did Alice move", index="late", k=1)
            assert hits[0].id == "t1"
        top = ColbertClient(url).search("ws_kb_turns", "Alice Paris", 1)[0]
        assert top["pid"] == "t1" and top["metadata"] == {"speaker": "Bob"}
    finally:
        proc.terminate()
        proc.wait(10)


def test_the_old_spelling_colbert_remote_still_opens_with_a_warning(server, tmp_path):
    config = {"indexes": {"late": {"kind": "colbert-remote", "url": server.url, "index_name": f"renamed_{os.getpid()}", "config": HASHING}}}
    with pytest.warns(DeprecationWarning, match="index kind 'colbert-remote' .*is deprecated: write 'colbert_remote'"):
        memory = memcore.open(config, path=tmp_path / "mem")
    with memory:
        (listed,) = memory.collection.list_indexes()
        assert listed["kind"] == "colbert_remote" and listed["config"]["kind"] == "colbert_remote"
        memory.collection.insert([{"id": "t1", "text": "Alice moved to Paris last spring"}], indexes=["late"])
        assert memory.collection.retrieve("where did Alice move", index="late", k=1)[0].id == "t1"
