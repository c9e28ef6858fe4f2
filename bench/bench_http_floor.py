#!/usr/bin/env python
"""The floor of a Python HTTP server under ``bench_server.py``'s load: servers that do no work.

Issue 23 asks for a search p50 over HTTP within 3 ms of the in-process p50 at 32 concurrent
clients. This bench measures what the transport alone costs under that load, with no memory
behind it: ``--clients`` threads each send ``--ops`` requests (a JSON body of a
``--dim``-float vector, as a search by vector sends) on one keep-alive connection, and each
server answers every request with the same canned JSON reply of ``--reply-bytes`` bytes:

- ``uvicorn``: a bare ASGI application on uvicorn (httptools, uvloop when installed, as
  ``memcore serve`` runs), which reads the body and sends the reply;
- ``asyncio``: a bare ``asyncio.Protocol`` on uvloop that splits requests by their
  ``Content-Length`` and writes the reply (no HTTP library: the least a Python server does).

The clients talk HTTP/1.1 on raw sockets (one ``sendall`` per request, the reply read by its
``Content-Length``): the least a Python client does. For each server: ops/s, p50/p99 in ms,
the server's and the clients' CPU per request. A search by ``memcore serve`` costs at least
its transport's share, so a server whose p50 here already exceeds the in-process p50 of
``bench_server.py`` + 3 ms cannot meet the goal on this machine whatever memcore does.

    python bench/bench_http_floor.py                # 32 clients x 200 requests
    python bench/bench_http_floor.py --quick        # 8 clients x 50 requests

Prints ONE JSON object on stdout (progress on stderr). Never run as a test.
"""

from __future__ import annotations

import argparse
import json
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

from _common import emit, finish_environment, free_port, header, loadavg, log, pct, process_cpu_s

SERVERS = {
    "uvicorn": textwrap.dedent(
        """
        import sys, uvicorn
        REPLY = b"x" * int(sys.argv[2])
        HEAD = {"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(REPLY)).encode())]}
        BODY = {"type": "http.response.body", "body": REPLY}

        async def app(scope, receive, send):
            if scope["type"] != "http":
                return
            more = True
            while more:
                message = await receive()
                more = message.get("more_body", False)
            await send(HEAD)
            await send(BODY)

        uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning", http="httptools",
                    loop="auto", access_log=False)
        """
    ),
    "asyncio": textwrap.dedent(
        """
        import asyncio, sys
        try:
            import uvloop
            uvloop.install()
        except ImportError:
            pass
        BODY = b"x" * int(sys.argv[2])
        REPLY = b"HTTP/1.1 200 OK\\r\\ncontent-type: application/json\\r\\ncontent-length: %d\\r\\n\\r\\n" % len(BODY) + BODY

        class Floor(asyncio.Protocol):
            def connection_made(self, transport):
                self.transport, self.buffer = transport, b""

            def data_received(self, data):
                self.buffer += data
                while True:
                    end = self.buffer.find(b"\\r\\n\\r\\n")
                    if end < 0:
                        return
                    length = 0
                    for line in self.buffer[:end].split(b"\\r\\n")[1:]:
                        name, _, value = line.partition(b":")
                        if name.strip().lower() == b"content-length":
                            length = int(value)
                    if len(self.buffer) < end + 4 + length:
                        return
                    self.buffer = self.buffer[end + 4 + length:]
                    self.transport.write(REPLY)

        async def main():
            server = await asyncio.get_running_loop().create_server(Floor, "127.0.0.1", int(sys.argv[1]))
            async with server:
                await server.serve_forever()

        asyncio.run(main())
        """
    ),
}


def wait_listening(port: int, deadline_s: float = 30.0) -> None:
    """Return once something accepts on the port (raise after ``deadline_s``)."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"no server on port {port}")


class Connection:
    """One keep-alive HTTP/1.1 connection on a raw socket: send a request, read its reply."""

    def __init__(self, port: int, request: bytes) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.request, self.buffer = request, b""

    def call(self) -> None:
        """One request and its whole reply (by its Content-Length)."""
        self.sock.sendall(self.request)
        while (end := self.buffer.find(b"\r\n\r\n")) < 0:
            self.buffer += self.recv()
        length = 0
        for line in self.buffer[:end].split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        while len(self.buffer) < end + 4 + length:
            self.buffer += self.recv()
        self.buffer = self.buffer[end + 4 + length :]

    def recv(self) -> bytes:
        """The next bytes from the server (an error at end of stream)."""
        data = self.sock.recv(65536)
        if not data:
            raise ConnectionError("the server closed the connection")
        return data


def run(port: int, pid: int, args: argparse.Namespace, request: bytes) -> dict[str, Any]:
    """Every client thread's requests on its own connection: latency, throughput, CPU per request."""
    lat: list[float] = []
    lock = threading.Lock()
    barrier = threading.Barrier(args.clients + 1)

    def client() -> None:
        conn = Connection(port, request)
        for _ in range(5):  # the connection and both sides' caches warm
            conn.call()
        barrier.wait()
        mine = []
        for _ in range(args.ops):
            t0 = time.perf_counter()
            conn.call()
            mine.append((time.perf_counter() - t0) * 1000)
        conn.sock.close()
        with lock:
            lat.extend(mine)

    threads = [threading.Thread(target=client) for _ in range(args.clients)]
    for t in threads:
        t.start()
    load_before = loadavg()
    barrier.wait()
    t0, c0, s0 = time.perf_counter(), time.process_time(), process_cpu_s(pid)
    for t in threads:
        t.join()
    seconds, cpu, server_cpu = time.perf_counter() - t0, time.process_time() - c0, (process_cpu_s(pid) or 0.0) - (s0 or 0.0)
    return {
        "ops_per_s": round(len(lat) / seconds, 1),
        "p50_ms": round(pct(lat, 50), 2),
        "p99_ms": round(pct(lat, 99), 2),
        "server_cpu_ms_per_op": round(server_cpu * 1000 / len(lat), 3),
        "client_cpu_ms_per_op": round(cpu * 1000 / len(lat), 3),
        "load": {"before": load_before, "after": loadavg()},
    }


def main() -> None:
    """Parse the options, run each server in turn, print the JSON result."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--ops", type=int, default=200, help="requests per client")
    parser.add_argument("--dim", type=int, default=128, help="floats in each request's vector")
    parser.add_argument("--reply-bytes", type=int, default=1500, help="bytes of the canned reply (a 10-hit search reply is ~1-2 kB)")
    parser.add_argument("--servers", default="uvicorn,asyncio", help=f"comma separated, of: {', '.join(SERVERS)}")
    parser.add_argument("--rounds", type=int, default=2, help="runs of each server, alternated")
    parser.add_argument("--quick", action="store_true", help="8 clients x 50 requests, one round")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    if args.quick:
        args.clients, args.ops, args.rounds = 8, 50, 1
    names = [s for s in args.servers.split(",") if s]
    unknown = [s for s in names if s not in SERVERS]
    if unknown:
        parser.error(f"unknown server(s) {unknown}; known: {sorted(SERVERS)}")

    body = json.dumps({"vector": [0.0123456789] * args.dim, "k": 10}).encode()
    request = (
        b"POST /v1/search HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n"
        b"authorization: Bearer floor\r\ncontent-length: %d\r\n\r\n" % len(body)
    ) + body
    result = header("bench_http_floor", args)
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
    with tempfile.TemporaryDirectory() as tmp:
        for round_ in range(args.rounds):
            for name in names:
                script = Path(tmp) / f"floor_{name}.py"
                script.write_text(SERVERS[name])
                port = free_port()
                server = subprocess.Popen([sys.executable, str(script), str(port), str(args.reply_bytes)])
                try:
                    wait_listening(port)
                    log(f"round {round_ + 1}: {name}")
                    runs[name].append(run(port, server.pid, args, request))
                    log(f"  {runs[name][-1]}")
                finally:
                    server.terminate()
                    server.wait(timeout=30)
    result["runs"] = runs
    result["request_bytes"] = len(request)
    emit(finish_environment(result), args.out)


if __name__ == "__main__":
    main()
