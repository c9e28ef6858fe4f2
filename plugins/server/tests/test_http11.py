"""The synchronous client's connections (:mod:`memcore_server.http11`): kept alive, shared by
threads, a connection the server closed meanwhile never reused, a closed client refused."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Iterator

import pytest

import memcore
from memcore import ValidationError
from memcore_server import RemoteMemory


class _Counting(ThreadingHTTPServer):
    """Answers every POST with ``{"count": n, "deleted": n}``, n the connections opened so far; with ``close_after``
    it closes each connection after one reply without saying so (as a keep-alive timeout does)."""

    daemon_threads = True
    connections = 0
    close_after = False


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Counting

    def setup(self) -> None:
        super().setup()
        self.server.connections += 1

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        body = json.dumps({"count": self.server.connections, "deleted": self.server.connections}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        if self.server.close_after:
            self.close_connection = True

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def counting() -> Iterator[_Counting]:
    server = _Counting(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def _url(server: _Counting) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}"


def test_one_connection_carries_the_requests_of_a_thread(counting: _Counting) -> None:
    with RemoteMemory(_url(counting), retries=0) as remote:
        assert [remote.count() for _ in range(10)] == [1] * 10
    assert counting.connections == 1


def test_a_connection_the_server_closed_is_not_reused(counting: _Counting) -> None:
    counting.close_after = True
    with RemoteMemory(_url(counting), retries=0) as remote:
        for expected in range(1, 6):
            time.sleep(0.05)  # the server has closed the previous connection by now
            assert remote.count() == expected  # a fresh connection each time, no error and no retry
        time.sleep(0.05)
        assert remote.delete("x") == 6  # a write is sent once: on a new connection, not into the closed one


def test_threads_share_one_client(memory: memcore.Memory, served: Any) -> None:
    server = served(memory)
    with RemoteMemory(server.url) as remote:
        ids = remote.insert([f"memory {i}" for i in range(8)])
        errors: list[BaseException] = []

        def work(i: int) -> None:
            try:
                for _ in range(15):
                    assert remote.get(ids[i]).text == f"memory {i}"
                    assert remote.count() == 8
            except BaseException as exc:  # noqa: BLE001 - reported by the test thread
                errors.append(exc)

        threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        assert len(remote._http._idle) <= 8  # connections are reused, not one per request


def test_a_closed_client_refuses_calls(memory: memcore.Memory, served: Any) -> None:
    server = served(memory)
    remote = RemoteMemory(server.url)
    assert remote.count() == 0
    remote.close()
    with pytest.raises(ValidationError, match="closed"):
        remote.count()


def test_no_socket_is_left_to_the_garbage_collector(memory: memcore.Memory, served: Any) -> None:
    """A client dropped without close(), and the pool of a forked child, close their connections themselves."""
    import gc
    import os
    import warnings

    server = served(memory)
    remote = RemoteMemory(server.url)
    assert remote.count() == 0 and len(remote._http._idle) == 1
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        del remote
        gc.collect()
    assert [w for w in caught if issubclass(w.category, ResourceWarning)] == []

    with RemoteMemory(server.url) as parent:
        assert parent.count() == 0 and len(parent._http._idle) == 1
        child = os.fork()
        if child == 0:  # the child: no copy of the parent's connection in its pool; its own work on new ones
            code = 0 if not parent._http._idle and parent.count() == 0 else 1
            os._exit(code)
        _, status = os.waitpid(child, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert parent.count() == 0 and len(parent._http._idle) == 1  # the parent's connection still serves it
