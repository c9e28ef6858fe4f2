"""Fixtures: a real uvicorn server on 127.0.0.1 (a free port), started and stopped per test.

``served(memory, **server_settings)`` serves a memory (``create_app``, or the application
``factory=`` builds) and returns its base URL; the server
runs in a thread of the test process (uvicorn's own ``Server``, real sockets, real HTTP) and
is shut down when the test ends. Keys: ``alice`` and ``bob`` are bound to their user_id,
``ops`` is an admin key.
"""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator

import pytest
import uvicorn

import memcore
from memcore.plugin import hash_api_key
from memcore_server.app import create_app
from memcore_server.config import load_server_config
from memcore_server.idspace import id_prefix
from memcore_server.protocol import HotRoutesProtocol

if TYPE_CHECKING:
    import httpx

KEYS = {"alice": "key-alice-0123456789", "bob": "key-bob-0123456789", "ops": "key-ops-0123456789"}
KEY_SETTINGS = {
    "alice": {"sha256": hash_api_key(KEYS["alice"]), "scope": {"user_id": "alice"}},
    "bob": {"sha256": hash_api_key(KEYS["bob"]), "scope": {"user_id": "bob"}},
    "ops": {"sha256": hash_api_key(KEYS["ops"]), "admin": True},
}

SERVE_OPTIONS: dict[str, Any] = {"http": HotRoutesProtocol, "access_log": False}
"""uvicorn's options as ``memcore serve`` sets them: its protocol, no access lines (the
protocol answers the hot routes itself only then)."""


def free_port() -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Served:
    """A uvicorn server running ``app`` in a thread."""

    def __init__(self, app: Any):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning", lifespan="on", **SERVE_OPTIONS))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def start(self) -> "Served":
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)

    def call(self, method: str, path: str, key: str | None, body: Any = None) -> "httpx.Response":
        """One request with ``key`` (None: no Authorization header) and a JSON ``body``."""
        import httpx

        headers = {"authorization": f"Bearer {key}"} if key else {}
        return httpx.request(method, self.url + path, json=body, headers=headers, timeout=30)

    @staticmethod
    def ok(response: "httpx.Response") -> Any:
        """The JSON of a 200 response (AssertionError with the body otherwise)."""
        assert response.status_code == 200, response.text
        return response.json()


@pytest.fixture
def port() -> int:
    """A free TCP port on 127.0.0.1 (for a server a test starts itself)."""
    return free_port()


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[memcore.Memory]:
    """A fresh memory (SQLite store, hashing embedder, exact index)."""
    mem = memcore.open(path=tmp_path / "mem")
    try:
        yield mem
    finally:
        mem.close()


@pytest.fixture
def served() -> Iterator[Callable[..., Served]]:
    """``served(memory, **server_settings)``: a running server (stopped after the test)."""
    running: list[Served] = []

    def start(memory: memcore.Memory, factory: Callable[..., Any] = create_app, **settings: Any) -> Served:
        config = load_server_config(settings)
        server = Served(factory(memory, config)).start()
        running.append(server)
        return server

    yield start
    for server in running:
        server.stop()


@pytest.fixture
def server(memory: memcore.Memory, served: Callable[..., Served]) -> Served:
    """The memory served with the three keys (alice, bob, ops)."""
    return served(memory, keys=KEY_SETTINGS)


@pytest.fixture
def key_settings() -> dict[str, dict[str, Any]]:
    """The ``[server.keys]`` table of the ``server`` fixture."""
    return {name: dict(entry) for name, entry in KEY_SETTINGS.items()}


@pytest.fixture
def keys() -> dict[str, str]:
    """The raw keys of the ``server`` fixture: name -> key."""
    return dict(KEYS)


@pytest.fixture
def two_tenants(server: Served, keys: dict[str, str], memory: memcore.Memory) -> dict[str, str]:
    """Through the ``server`` fixture, alice and bob (keys bound to their user_id) each wrote
    two memories (ids a1, a2 / b1, b2) with the same metadata; returns the raw keys."""
    for who in ("alice", "bob"):
        items = [{"text": f"{who} likes tea number {i}", "id": f"{who[0]}{i}", "metadata": {"kind": "pref"}} for i in (1, 2)]
        assert server.ok(server.call("POST", "/v1/insert_many", keys[who], {"items": items}))["ids"] == [f"{who[0]}1", f"{who[0]}2"]
    for who in ("alice", "bob"):  # stored in the key's id namespace, stamped with its scope
        assert memory.get(id_prefix({"user_id": who}) + f"{who[0]}1").scope == memcore.Scope(user_id=who)
    return keys


class ServeProcess:
    """``memcore serve --config F --path P [options]`` as a process of its own, on a free port."""

    def __init__(self, settings: Path, path: Path, port: int, *options: str, env: dict[str, str] | None = None, port_option: bool = True):
        import os
        import subprocess
        import sys

        self.url = f"http://127.0.0.1:{port}"
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "memcore.cli",
                "serve",
                "--config",
                str(settings),
                "--path",
                str(path),
                *(["--port", str(port)] if port_option else []),
                *options,
            ],
            env={**os.environ, **(env or {})},
            text=True,
            stderr=subprocess.PIPE,
        )

    def wait(self) -> "ServeProcess":
        """Return once the server answers /v1/health (AssertionError when it exits or never does)."""
        import httpx

        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(f"memcore serve exited: {self.process.communicate()[1]}")
            try:
                httpx.get(self.url + "/v1/health", timeout=30)
                return self
            except httpx.TransportError:
                time.sleep(0.1)
        raise AssertionError("memcore serve did not start")

    def workers(self) -> list[int]:
        """The pids of its worker processes (``--workers``: children started by multiprocessing's spawn; Linux)."""
        children = Path(f"/proc/{self.process.pid}/task/{self.process.pid}/children")
        pids = [int(pid) for pid in children.read_text().split()] if children.exists() else []
        return [pid for pid in pids if b"spawn_main" in Path(f"/proc/{pid}/cmdline").read_bytes()]

    def stop(self) -> str:
        """SIGINT, wait; the server's stderr."""
        import signal

        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
        return self.process.communicate(timeout=60)[1]


@pytest.fixture
def serve_process() -> Iterator[Callable[..., ServeProcess]]:
    """``serve_process(settings_file, memory_dir, *options, env=None, port=None)``: a started
    ``memcore serve`` process (stopped after the test if the test did not stop it), on a free
    port (``--port``), or on ``port`` when given, which the settings file declares."""
    started: list[ServeProcess] = []

    def start(settings: Path, path: Path, *options: str, env: dict[str, str] | None = None, port: int | None = None) -> ServeProcess:
        server = ServeProcess(settings, path, port or free_port(), *options, env=env, port_option=port is None)
        started.append(server)
        return server.wait()

    yield start
    for server in started:
        if server.process.returncode is None:
            server.stop()


@pytest.fixture(autouse=True)
def _collect_garbage() -> Iterator[None]:
    """Collect garbage after each test, so that a socket, client or file a test leaves open
    warns (ResourceWarning) in that test rather than at some later collection."""
    yield
    import gc

    gc.collect()
