"""`memcore colbert serve` cannot be starved or probed: the server's own settings choose the
embedder and the limits, the body limit holds while reading, API keys, bad text refused at
the door, every error a JSON body. Real uvicorn servers on 127.0.0.1: a thread server for
the behaviour, a `memcore colbert serve` subprocess where the server's memory is measured
(VmRSS / VmHWM of its process from /proc)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

import memcore
from memcore import AuthenticationError
from memcore.plugin import hash_api_key
from memcore_colbert.access import key_ring
from memcore_colbert.client import ColbertClient

HASHING = {"embedder": {"kind": "token_hashing", "dim": 32}}
TSV = "d1\tPenguins live in Antarctica and cannot fly\nd2\tThe central bank raised interest rates\n"
ADMIN_KEY = "colbert-admin-key-0123456789"
SCOPED_KEY = "colbert-scoped-key-abcdefghij"
MiB = 1024 * 1024

HOSTILE_CONFIGS = [
    *({"embedder": {"kind": "minilm", "device": device}} for device in ("cpu:0", "cpu:1", "meta", "cuda:7", "CPU")),
    *({"embedder": {"kind": "minilm", "max_seq_length": n}} for n in (8, 16, 31, 64, 100, 128, 200)),
    *({"embedder": {"kind": "token_hashing", "dim": d}} for d in (64, 512, 4096)),
    {"embedder": {"kind": "minilm", "model_path": "/etc"}},
    {"embedder": {"kind": "minilm", "model_path": "/nonexistent/models/x"}},
    {"embedder": {"kind": "minilm", "model_path": "../../.."}},
    {"embedder": "hashing"},
    {"max_raw_tokens": 10**9},
    {"ncentroids": 65536},
]
"""The create-index configs of the issue's attacks (21): each loaded and kept another model,
or sized memory, or probed the server's directories. All are the server's to choose."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def call(url: str, method: str = "GET", body=None, raw: bytes | None = None, headers=None):
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    request = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


class ThreadServer:
    """uvicorn serving create_app(root) in a daemon thread on a free port."""

    def __init__(self, root: Path, **options):
        import uvicorn

        from memcore_colbert.server import create_app

        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.app = create_app(root, defaults=dict(HASHING), **options)
        self.server = uvicorn.Server(uvicorn.Config(self.app, host="127.0.0.1", port=self.port, log_level="error"))
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
    srv = ThreadServer(tmp_path_factory.mktemp("colbert-limits"), max_body=1_000_000, max_passages=500)
    yield srv
    srv.stop()


def send_chunked(port: int, total: int, *, chunk: int = MiB, headers: str = "") -> tuple[int, bytes]:
    """POST a chunked body of ``total`` bytes (a JSON string that never ends) while a reader
    collects the answer; returns (bytes sent, bytes received) once the server answered and
    closed, or everything was sent."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=60)
    received = bytearray()

    def read() -> None:
        try:
            while data := sock.recv(65536):
                received.extend(data)
        except OSError:
            pass

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    sent = 0
    try:
        sock.sendall(
            f"POST /api/create-index HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n{headers}\r\n".encode()
        )
        piece = b'{"index_name": "big_big", "collection_tsv_data": "' + b"a" * (chunk - 49)
        while sent < total:
            sock.sendall(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
            sent += len(piece)
            piece = b"a" * chunk
        sock.sendall(b"0\r\n\r\n")
    except OSError:  # the server answered and closed the connection: the rest is never read
        pass
    reader.join(60)
    sock.close()
    return sent, bytes(received)


def status_of(answer: bytes) -> int:
    return int(answer.split(b" ", 2)[1]) if answer.startswith(b"HTTP/1.1 ") else 0


# -- the server's settings, not the request's ------------------------------------------------


@pytest.mark.parametrize("config", HOSTILE_CONFIGS, ids=lambda c: json.dumps(c)[:60])
def test_a_request_cannot_choose_the_model_device_or_sizes(server, config):
    root = server.app.state.indexes.root
    status, body = call(f"{server.url}/api/create-index", "POST", {"index_name": "hostile_x", "collection_tsv_data": TSV, "config": config})
    assert status == 400 and body["error"]["type"] == "ValidationError", body
    message = body["error"]["message"]
    assert "chosen by the server" in message or "its own embedder" in message
    # nothing of the server's file system: neither its root nor a probed path, nor whether it exists
    assert str(root) not in message and "/etc" not in message and "nonexistent" not in message and "exist" not in message
    assert len(server.app.state.indexes._embedders) == 1  # still the one embedder of the server
    assert call(f"{server.url}/api/indexes/hostile_x")[0] == 404


def test_what_a_request_may_choose_is_accepted_and_shares_the_servers_embedder(server):
    configs = [
        {"nbits": 1, "doc_maxlen": 64},
        {"nbits": 4, "query_maxlen": 16, "seed": 7},
        {"residual_transform": "none", "buckets": "per_dim"},
        {"ncells": 2, "ndocs": 64, "centroid_score_threshold": 0.3, "exhaustive_below": 0},
        {**HASHING, "kmeans_niters": 2, "kind": "colbert", "checkpoint": "colbert-ir/colbertv2.0"},  # the server's own embedder, repeated: fine
    ]
    for i, config in enumerate(configs):
        status, body = call(f"{server.url}/api/create-index", "POST", {"index_name": f"allowed_{i}", "collection_tsv_data": TSV, "config": config})
        assert status == 200, body
        info = call(f"{server.url}/api/indexes/allowed_{i}")[1]
        assert info["config"]["embedder"] == HASHING["embedder"]
        assert all(info["config"][k] == v for k, v in config.items() if k not in ("kind", "checkpoint", "embedder"))
    assert len(server.app.state.indexes._embedders) == 1
    status, body = call(f"{server.url}/api/create-index", "POST", {"index_name": "allowed_x", "collection_tsv_data": TSV, "config": {"typo_field": 1}})
    assert status == 400 and "config.'typo_field' is not a setting a request may choose" in body["error"]["message"]


@pytest.mark.parametrize("seed, ok", [(0, True), (2**31 - 1, True), (-1, False), (2**31, False), (2**63, False), (1.5, False), ("7x", False)])
def test_seed_is_validated_against_what_training_accepts(server, seed, ok):
    # enough tokens that the index trains (k-means with this seed) at create time
    tsv = "".join(f"p{i}\tword{i % 97} term{i % 31} token{i % 13} alpha beta gamma delta epsilon zeta eta theta {i}\n" for i in range(400))
    config = {"seed": seed, "defer_training": False}
    status, body = call(f"{server.url}/api/create-index", "POST", {"index_name": "seeded_x", "collection_tsv_data": tsv, "config": config, "overwrite": True})
    if ok:
        assert status == 200, body
        assert call(f"{server.url}/api/indexes/seeded_x")[1]["compressed"] is True
    else:
        assert status == 400 and "config.seed" in body["error"]["message"], body


# -- text that could never be sent back ------------------------------------------------------


@pytest.mark.parametrize(
    "body, where",
    [
        ({"collection_tsv_data": "d1\tok\nd2\tbad \\ud800 text\n"}, "collection_tsv_data line 2"),
        ({"collection_tsv_data": "d1\\udfff\tbad pid\n"}, "collection_tsv_data line 1"),
        ({"collection_tsv_data": "d1\tok\n", "metadata": {"d1": {"title": "x\\udc80"}}}, "metadata of passage 'd1'"),
        ({"collection_tsv_data": "d1\tok\n", "metadata": {"d1": {"k\\ud83d": 1}}}, "metadata of passage 'd1'"),
    ],
)
def test_a_lone_surrogate_is_refused_at_the_door(server, body, where):
    raw = json.dumps({"index_name": "surrogate_x", **body}).replace("\\\\u", "\\u").encode()
    status, answer = call(f"{server.url}/api/create-index", "POST", raw=raw)
    assert status == 400 and where in answer["error"]["message"] and "lone surrogate" in answer["error"]["message"], answer
    assert call(f"{server.url}/api/indexes/surrogate_x")[0] == 404
    # and on an existing index: add is refused too, searches keep answering
    assert call(f"{server.url}/api/create-index", "POST", {"index_name": "surrogate_ok", "collection_tsv_data": TSV, "overwrite": True})[0] == 200
    raw = json.dumps({"index_name": "surrogate_ok", **body}).replace("\\\\u", "\\u").encode()
    assert call(f"{server.url}/api/add-to-index", "POST", raw=raw)[0] == 400
    status, found = call(f"{server.url}/api/search?query=penguins&k=5&index_name=surrogate_ok")
    assert status == 200 and [t["pid"] for t in found["topk"]][0] == "d1"


def test_a_lone_surrogate_in_a_query_is_refused(server):
    assert call(f"{server.url}/api/create-index", "POST", {"index_name": "surrogate_q", "collection_tsv_data": TSV, "overwrite": True})[0] == 200
    raw = b'{"index_name": "surrogate_q", "query": "penguins \\ud800", "k": 1}'
    status, body = call(f"{server.url}/api/search", "POST", raw=raw)
    assert status == 400 and "query holds a lone surrogate" in body["error"]["message"]
    raw = b'{"pids": ["d1\\udfff"]}'
    status, body = call(f"{server.url}/api/indexes/surrogate_q/passages", "DELETE", raw=raw)
    assert status == 400 and "lone surrogate" in body["error"]["message"]
    # an unknown field named with a lone surrogate: still a JSON 422, not a 500
    status, body = call(f"{server.url}/api/search", "POST", raw=b'{"index_name": "surrogate_q", "query": "x", "\\ud800": 1}')
    assert status == 422 and body["error"]["type"] == "RequestValidationError"


def test_a_surrogate_stored_before_the_fix_is_sent_escaped_not_a_500(tmp_path):
    srv = ThreadServer(tmp_path)
    try:
        assert call(f"{srv.url}/api/create-index", "POST", {"index_name": "legacy_x", "collection_tsv_data": TSV})[0] == 200
        served = srv.app.state.indexes.get("legacy_x")
        served.texts["d1"] = "Penguins \ud800 live in Antarctica"  # as an older server stored it
        status, body = call(f"{srv.url}/api/search?query=penguins&k=1&index_name=legacy_x")
        assert status == 200 and body["topk"][0]["text"] == "Penguins \ud800 live in Antarctica"
    finally:
        srv.stop()


# -- body size, while reading -----------------------------------------------------------------


def test_a_chunked_body_over_the_limit_gets_413_while_it_is_read(server):
    sent, answer = send_chunked(server.port, 50 * MiB)
    assert status_of(answer) == 413, answer[:300]
    assert b"exceeds the limit of 1000000 bytes" in answer
    assert sent < 50 * MiB  # the server stopped reading: the client could not send it all
    assert call(f"{server.url}/api/indexes/big_big")[0] == 404
    assert call(f"{server.url}/api/health")[0] == 200


def test_a_chunked_body_within_the_limit_is_served(server):
    body = json.dumps({"index_name": "chunked_ok", "collection_tsv_data": TSV}).encode()
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=30)
    sock.sendall(b"POST /api/create-index HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n")
    for start in range(0, len(body), 17):
        part = body[start : start + 17]
        sock.sendall(f"{len(part):x}\r\n".encode() + part + b"\r\n")
    sock.sendall(b"0\r\n\r\n")
    answer = b""
    while data := sock.recv(65536):
        answer += data
    sock.close()
    assert status_of(answer) == 200 and b'"passages":2' in answer


# -- every error a JSON body ------------------------------------------------------------------


def test_an_unexpected_failure_is_a_json_500_without_details(tmp_path):
    srv = ThreadServer(tmp_path)
    try:
        assert call(f"{srv.url}/api/create-index", "POST", {"index_name": "boom_x", "collection_tsv_data": TSV})[0] == 200

        def boom(*args, **kwargs):
            raise RuntimeError(f"secret detail {tmp_path}")

        srv.app.state.indexes.search = boom
        status, body = call(f"{srv.url}/api/search?query=x&k=1&index_name=boom_x")
        assert status == 500 and body["error"]["type"] == "InternalError"
        assert "secret" not in body["error"]["message"] and str(tmp_path) not in body["error"]["message"]
    finally:
        srv.stop()


def test_a_damaged_index_is_a_json_500_naming_no_server_path(tmp_path):
    srv = ThreadServer(tmp_path)
    try:
        assert call(f"{srv.url}/api/create-index", "POST", {"index_name": "damaged_x", "collection_tsv_data": TSV})[0] == 200
    finally:
        srv.stop()
    (tmp_path / "damaged_x" / "collection.json").write_text("{not json")
    srv = ThreadServer(tmp_path)
    try:
        status, body = call(f"{srv.url}/api/search?query=x&k=1&index_name=damaged_x")
        assert status == 500 and body["error"]["type"] == "CorruptError" and str(tmp_path) not in body["error"]["message"]
    finally:
        srv.stop()


# -- API keys -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def keyed(tmp_path_factory):
    keys = key_ring({"ops": {"sha256": hash_api_key(ADMIN_KEY), "admin": True}, "alice": {"sha256": hash_api_key(SCOPED_KEY), "scope": {"user_id": "alice"}}})
    srv = ThreadServer(tmp_path_factory.mktemp("colbert-keyed"), keys=keys, max_body=1_000_000)
    yield srv
    srv.stop()


def test_with_keys_declared_a_call_needs_a_valid_key(keyed):
    base = keyed.url
    for path in ("/api/health", "/api/indexes", "/docs", "/openapi.json"):
        status, body = call(f"{base}{path}")
        assert status == 401 and body["error"]["type"] == "AuthenticationError"
    assert call(f"{base}/api/health", headers={"Authorization": "Bearer wrong-key"})[0] == 401
    assert call(f"{base}/api/health", headers={"Authorization": f"Basic {ADMIN_KEY}"})[0] == 401
    status, body = call(f"{base}/api/create-index", "POST", {"index_name": "keyed_x", "collection_tsv_data": TSV})
    assert status == 401 and ADMIN_KEY not in json.dumps(body)
    assert call(f"{base}/api/indexes/keyed_x", headers={"Authorization": f"Bearer {ADMIN_KEY}"})[0] == 404  # nothing was created
    for key in (ADMIN_KEY, SCOPED_KEY):  # an admin key or any declared key is enough
        auth = {"Authorization": f"Bearer {key}"}
        assert call(f"{base}/api/health", headers=auth)[0] == 200
        status, body = call(f"{base}/api/create-index", "POST", {"index_name": "keyed_x", "collection_tsv_data": TSV, "overwrite": True}, headers=auth)
        assert status == 200, body
    # no key: refused before the body is read (a chunked body is not buffered)
    sent, answer = send_chunked(keyed.port, 20 * MiB)
    assert status_of(answer) == 401 and sent < 20 * MiB


def test_the_client_and_colbert_remote_send_the_key(keyed, tmp_path, monkeypatch):
    with pytest.raises(AuthenticationError, match="no API key is sent"):
        ColbertClient(keyed.url).health()
    assert ColbertClient(keyed.url, api_key=SCOPED_KEY).health()["status"] == "ok"
    monkeypatch.delenv("COLBERT_TEST_KEY", raising=False)
    with pytest.raises(AuthenticationError, match=r"read from \$COLBERT_TEST_KEY, which is NOT set"):
        ColbertClient(keyed.url, api_key_env="COLBERT_TEST_KEY").health()
    monkeypatch.setenv("COLBERT_TEST_KEY", ADMIN_KEY)
    assert ColbertClient(keyed.url, api_key_env="COLBERT_TEST_KEY").health()["status"] == "ok"
    config = {
        "indexes": {"late": {"kind": "colbert_remote", "url": keyed.url, "index_name": "remote_keyed", "config": HASHING, "api_key_env": "COLBERT_TEST_KEY"}}
    }
    with memcore.open(config, path=tmp_path / "mem") as memory:
        memory.collection.insert([{"id": "t1", "text": "Alice moved to Paris last spring"}], indexes=["late"])
        assert memory.collection.retrieve("where did Alice move", index="late", k=1)[0].id == "t1"
        (listed,) = memory.collection.list_indexes()
        assert listed["config"]["api_key_env"] == "COLBERT_TEST_KEY" and "api_key" not in listed["config"]
    # the key itself given in settings is used, but never saved with the memory
    config["indexes"]["late"] = {**config["indexes"]["late"], "api_key_env": None, "api_key": SCOPED_KEY}
    with memcore.open(config, path=tmp_path / "mem2") as memory:
        memory.collection.insert([{"id": "t2", "text": "Bob sails to Lisbon"}], indexes=["late"])
        (listed,) = memory.collection.list_indexes()
        assert "api_key" not in listed["config"]
    saved = "".join(p.read_text(errors="replace") for p in (tmp_path / "mem2").rglob("*") if p.is_file() and p.suffix in (".json", ""))
    assert SCOPED_KEY not in saved
    with pytest.raises(memcore.ConfigError, match="NAME of an environment variable"):
        memcore.open(
            {"indexes": {"late": {"kind": "colbert_remote", "url": keyed.url, "index_name": "x_y", "api_key_env": "sk live key!"}}}, path=tmp_path / "m3"
        )


# -- the server's memory, measured ----------------------------------------------------------------


def rss_kib(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM (peak) of process ``pid``, in KiB."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            fields[name] = int(value.split()[0])
    return fields


@pytest.fixture
def serve_process(tmp_path):
    """Start `memcore colbert serve` with the given options; yields a function -> (url, process)."""
    procs: list[subprocess.Popen] = []

    def start(*options: str) -> tuple[str, subprocess.Popen]:
        port = free_port()
        env = {**os.environ, "HF_HUB_OFFLINE": "1"}
        proc = subprocess.Popen(
            [sys.executable, "-m", "memcore.cli", "colbert", "serve", "--root", str(tmp_path / f"root{len(procs)}"), "--port", str(port), *options],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )
        procs.append(proc)
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 120
        while True:
            try:
                ColbertClient(url, timeout=2, api_key=ADMIN_KEY).health()
                return url, proc
            except memcore.MemcoreError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(f"server did not start: {proc.stderr.read().decode()[-2000:]}") from None
                time.sleep(0.2)

    yield start
    for proc in procs:
        if proc.poll() is None:
            proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        proc.stdout.close()
        proc.stderr.close()


MODEL_BOUND_MIB = 20
"""RSS growth allowed over 20 refused create-index attacks plus 20 accepted small indexes on
a MiniLM server. One more MiniLM model is 52-97 MB (the issue's measure), so one model loaded
by a request fails this bound; the 20 refusals allocate nothing lasting, and 20 indexes of 2
passages hold ~2 x 20 x 20 token vectors of 384 floats (< 1 MiB) plus Python objects and
allocator slack, a few MiB (measured: see docs/plugins/colbert.md)."""


def test_create_index_attacks_do_not_grow_the_server(serve_process):
    url, proc = serve_process("--embedder", "minilm")
    pid = proc.pid
    warm = {"index_name": "warm_up", "collection_tsv_data": TSV}
    status, body = call(f"{url}/api/create-index", "POST", warm)  # loads the server's one model
    assert status == 200, body
    for i in range(3):  # settle the allocator on the request path
        assert call(f"{url}/api/search?query=penguins&k=1&index_name=warm_up")[0] == 200
        assert call(f"{url}/api/create-index", "POST", {**warm, "index_name": f"warm_{i}", "config": {"nbits": 1 + i % 2}})[0] == 200
    before = rss_kib(pid)
    assert len(HOSTILE_CONFIGS) >= 20
    for i, config in enumerate(HOSTILE_CONFIGS):
        status, body = call(f"{url}/api/create-index", "POST", {"index_name": f"attack_{i}", "collection_tsv_data": TSV, "config": config})
        assert status == 400, body
    refused = rss_kib(pid)
    for i in range(20):
        config = {"doc_maxlen": 16 + 8 * i, "query_maxlen": 8 + i, "nbits": (1, 2, 4)[i % 3], "seed": i}
        status, body = call(f"{url}/api/create-index", "POST", {"index_name": f"allowed_{i}", "collection_tsv_data": TSV, "config": config})
        assert status == 200, body
    after = rss_kib(pid)
    growth = {
        "refused_rss_mib": (refused["VmRSS"] - before["VmRSS"]) / 1024,
        "refused_peak_mib": (refused["VmHWM"] - before["VmHWM"]) / 1024,
        "total_rss_mib": (after["VmRSS"] - before["VmRSS"]) / 1024,
        "total_peak_mib": (after["VmHWM"] - before["VmHWM"]) / 1024,
    }
    print(f"\nRSS before {before['VmRSS'] / 1024:.1f} MiB, growth {json.dumps({k: round(v, 1) for k, v in growth.items()})}")
    assert growth["refused_peak_mib"] < 5
    assert growth["total_rss_mib"] < MODEL_BOUND_MIB and growth["total_peak_mib"] < MODEL_BOUND_MIB


BODY_LIMIT_MIB = 8
BODY_MARGIN_MIB = 24
"""A body is held once while it is read (at most the limit plus one chunk); the margin covers
a copy of that buffer (``b"".join``) and allocator slack: limit + margin = 32 MiB, against the
200 MiB (and more) a body read whole costs."""


def test_a_200_mb_chunked_body_does_not_grow_the_server_past_the_limit(serve_process):
    digest = hash_api_key(ADMIN_KEY)
    url, proc = serve_process("--embedder", "token_hashing", "--max-body-mb", str(BODY_LIMIT_MIB), "--api-key-sha256", digest, "--log-level", "info")
    pid = proc.pid
    auth = {"Authorization": f"Bearer {ADMIN_KEY}"}
    assert call(f"{url}/api/create-index", "POST", {"index_name": "warm_up", "collection_tsv_data": TSV}, headers=auth)[0] == 200
    before = rss_kib(pid)
    port = int(url.rsplit(":", 1)[1])
    sent, answer = send_chunked(port, 200 * MiB, headers=f"Authorization: Bearer {ADMIN_KEY}\r\n")
    after = rss_kib(pid)
    peak = (after["VmHWM"] - before["VmHWM"]) / 1024
    print(
        f"\nchunked 200 MiB body, limit {BODY_LIMIT_MIB} MiB: sent {sent / MiB:.0f} MiB, RSS before {before['VmRSS'] / 1024:.1f} MiB, peak growth {peak:.1f} MiB"
    )
    assert status_of(answer) == 413, answer[:300]
    assert peak < BODY_LIMIT_MIB + BODY_MARGIN_MIB
    # unauthenticated: 401 before anything is buffered
    sent, answer = send_chunked(port, 200 * MiB)
    assert status_of(answer) == 401
    assert (rss_kib(pid)["VmHWM"] - before["VmHWM"]) / 1024 < BODY_LIMIT_MIB + BODY_MARGIN_MIB
    assert call(f"{url}/api/health", headers=auth)[0] == 200
    # the keys never reach the server's log
    assert call(f"{url}/api/health", headers={"Authorization": "Bearer a-wrong-key-zzzz"})[0] == 401
    proc.terminate()
    out, err = proc.communicate(timeout=30)
    logged = (out + err).decode(errors="replace")
    assert "colbert.unauthorized" in logged or "401" in logged
    assert ADMIN_KEY not in logged and "a-wrong-key-zzzz" not in logged
