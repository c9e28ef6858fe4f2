"""A local OpenAI-compatible server for tests of HTTP embedders and LLM clients.

:class:`FakeOpenAIServer` runs a ThreadingHTTPServer on 127.0.0.1 (port 0) serving
``POST /v1/embeddings`` and ``POST /v1/chat/completions`` deterministically: an embedding is
seeded by the text's sha256 (models are named ``fake-<dim>``), a chat reply echoes the last
message (or is ``chat_reply``). Failures are scripted: ``server.plan`` is a FIFO of actions,
one consumed per request, e.g. ``("status", 429, {"Retry-After": "1"})``, ``("status", 500)``,
``("sleep", 1.5)``, ``("raw", b"not json")``, ``("json", {...})`` or ``("dim", 3)``; with an
empty plan the server answers normally. Every request is recorded in ``server.requests``::

    from memcore.testing import FakeOpenAIServer

    @pytest.fixture
    def server():
        with FakeOpenAIServer() as state:
            yield state

Used by the tests of memcore's HTTP client, memcore-embed's ``openai`` embedder and
memcore-llm's chat client (standard library and numpy only).
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np

__all__ = ["FakeOpenAI", "FakeOpenAIServer", "Recorded", "fake_vector", "model_dim"]


def fake_vector(text: str, dim: int) -> list[float]:
    """The server's deterministic embedding of ``text``: seeded by its sha256."""
    seed = int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "little")
    values: list[float] = np.random.default_rng(seed).standard_normal(dim).astype(np.float32).tolist()
    return values


def model_dim(model: str) -> int:
    """Models are named ``fake-<dim>``."""
    return int(model.rsplit("-", 1)[1])


@dataclass
class Recorded:
    """One request the server received: path, headers (lower-case names) and decoded JSON body."""

    path: str
    headers: dict[str, str]
    body: Any


@dataclass
class FakeOpenAI:
    """The server's state, shared by the handler threads: the scripted ``plan``, the recorded
    ``requests``, an optional fixed ``chat_reply`` and the ``url``."""

    plan: list[tuple[Any, ...]] = field(default_factory=list)
    requests: list[Recorded] = field(default_factory=list)
    chat_reply: str | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)
    url: str = ""

    @staticmethod
    def vector(text: str, dim: int) -> np.ndarray:
        """What the server returns for ``text`` in a ``dim``-d model."""
        return np.asarray(fake_vector(text, dim), dtype=np.float32)

    def next_action(self) -> tuple[Any, ...] | None:
        with self.lock:
            return self.plan.pop(0) if self.plan else None

    def count(self, path: str) -> int:
        with self.lock:
            return sum(1 for r in self.requests if r.path == path)


def make_handler(state: FakeOpenAI) -> type[BaseHTTPRequestHandler]:
    """The request handler class serving ``state``."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:  # quiet
            pass

        def _send(self, status: int, payload: bytes, headers: dict[str, str] | None = None) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(payload)

        def do_POST(self) -> None:  # noqa: N802 - http.server's naming
            length = int(self.headers.get("Content-Length", 0))
            body = json.loads(self.rfile.read(length) or b"null")
            with state.lock:
                state.requests.append(Recorded(self.path, {k.lower(): v for k, v in self.headers.items()}, body))
            action = state.next_action()
            dim_override = None
            try:
                if action is not None:
                    what = action[0]
                    if what == "status":
                        error = json.dumps({"error": {"message": f"scripted {action[1]}", "type": "test"}}).encode()
                        return self._send(action[1], error, action[2] if len(action) > 2 else None)
                    if what == "sleep":
                        time.sleep(action[1])
                    elif what == "raw":
                        return self._send(200, action[1])
                    elif what == "json":
                        return self._send(200, json.dumps(action[1]).encode())
                    elif what == "dim":
                        dim_override = action[1]
                if self.path == "/v1/embeddings":
                    return self._send(200, json.dumps(self._embeddings(body, dim_override)).encode())
                if self.path == "/v1/chat/completions":
                    return self._send(200, json.dumps(self._chat(body)).encode())
                return self._send(404, b'{"error": {"message": "no such route"}}')
            except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout tests)
                pass

        def _embeddings(self, body: dict[str, Any], dim_override: int | None) -> dict[str, Any]:
            dim = dim_override or body.get("dimensions") or model_dim(body["model"])
            items = [{"object": "embedding", "index": i, "embedding": fake_vector(t, dim)} for i, t in enumerate(body["input"])]
            items.reverse()  # out of order on purpose: clients must sort by index
            return {"object": "list", "data": items, "model": body["model"], "usage": {"prompt_tokens": 1, "total_tokens": 1}}

        def _chat(self, body: dict[str, Any]) -> dict[str, Any]:
            reply = state.chat_reply if state.chat_reply is not None else "echo: " + body["messages"][-1]["content"]
            return {
                "id": "chatcmpl-test",
                "object": "chat.completion",
                "model": body["model"],
                "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": reply}}],
            }

    return Handler


class FakeOpenAIServer:
    """Runs a :class:`FakeOpenAI` ThreadingHTTPServer on 127.0.0.1:<free port> in a daemon
    thread; ``with FakeOpenAIServer() as server:`` gives the state, ``server.url`` ends in /v1."""

    def __init__(self) -> None:
        self.state = FakeOpenAI()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(self.state))
        self.httpd.daemon_threads = True
        self.state.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def __enter__(self) -> FakeOpenAI:
        self.thread.start()
        return self.state

    def __exit__(self, *exc: Any) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)
