"""Searches waiting together in the read pool run as one batch (``Memory.retrieve_many``),
each answered with what it would get alone: against a real uvicorn server, with the one read
thread held so that the searches queue up (deterministic batches, no timing)."""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator

import numpy as np
import pytest

import memcore
from memcore_server.calls import CallTimeout, Calls
from memcore_server.tenancy import ANONYMOUS


if TYPE_CHECKING:
    from conftest import Served

DIM = 8
SETTINGS: dict[str, Any] = {"spaces": {"default": {"dim": DIM}}, "indexes": {"vector": {"kind": "exact", "space": "default"}}}
VECTORS = np.random.default_rng(5).normal(size=(40, DIM)).astype(np.float32)
QUERIES = np.random.default_rng(6).normal(size=(24, DIM)).astype(np.float32)


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[memcore.Memory]:
    """A memory of 40 vectors, half alice's and half bob's (in their scopes)."""
    with memcore.open(SETTINGS, path=tmp_path / "m") as m:
        m.insert(
            [
                {"text": f"{'alice' if i % 2 else 'bob'} record {i}", "vectors": {"default": VECTORS[i]}, "scope": {"user_id": "alice" if i % 2 else "bob"}}
                for i in range(len(VECTORS))
            ]
        )
        yield m


class Held:
    """Holds the server's one read thread with a call of its own until :meth:`release`."""

    def __init__(self, server: Served):
        self.calls: Calls = server.server.config.app.state.calls
        self.started, self.released = threading.Event(), threading.Event()
        self.loop = asyncio.new_event_loop()
        future = self.loop.create_future()
        self.calls._reads.submit(self.loop, future, self._hold)
        assert self.started.wait(30)

    def _hold(self) -> None:
        self.started.set()
        assert self.released.wait(30)

    def wait_queued(self, n: int) -> None:
        deadline = time.monotonic() + 30
        while len(self.calls._reads._items) < n:
            assert time.monotonic() < deadline, "the requests never queued"
            time.sleep(0.01)

    def release(self) -> None:
        self.released.set()
        self.loop.close()


def scores_close(got: list[dict[str, Any]], want: list[dict[str, Any]]) -> None:
    assert [(r["id"], r["text"], r["metadata"]) for r in got] == [(r["id"], r["text"], r["metadata"]) for r in want]
    assert [r["score"] for r in got] == pytest.approx([float(r["score"]) for r in want], rel=1e-6, abs=1e-6)


def concurrently(server: Served, bodies: list[tuple[str | None, dict[str, Any]]], held: Held) -> list[Any]:
    """POST each body to /v1/search (with its key) from its own thread while the read thread is held."""
    with ThreadPoolExecutor(len(bodies)) as pool:
        futures = [pool.submit(server.call, "POST", "/v1/search", key, body) for key, body in bodies]
        held.wait_queued(len(bodies))
        held.release()
        return [f.result() for f in futures]


def test_queued_searches_run_as_one_batch_each_answered_as_alone(memory: memcore.Memory, served: Callable[..., Served]) -> None:
    server = served(memory, threads=1)
    bodies: list[tuple[str | None, dict[str, Any]]] = [(None, {"vector": q.tolist(), "k": 5}) for q in QUERIES[:16]]
    bodies += [(None, {"vector": q.tolist(), "k": 3, "where_document": {"$contains": "record 1"}}) for q in QUERIES[16:22]]  # another shape: its own batch
    replies = concurrently(server, bodies, Held(server))
    calls: Calls = server.server.config.app.state.calls
    assert calls.batches == 2
    for (_, body), reply in zip(bodies, replies):
        alone = memory.retrieve(vector=body["vector"], k=body["k"], where_document=body.get("where_document"))
        scores_close(server.ok(reply)["results"], alone)


def test_tenants_are_never_batched_together(memory: memcore.Memory, served: Callable[..., Served], key_settings: dict[str, Any], keys: dict[str, str]) -> None:
    server = served(memory, threads=1, keys=key_settings)
    who = ["alice", "bob", "ops"]
    bodies = [(keys[who[i % 3]], {"vector": q.tolist(), "k": 30}) for i, q in enumerate(QUERIES[:18])]
    replies = concurrently(server, bodies, Held(server))
    assert server.server.config.app.state.calls.batches == 3  # one batch per key
    for i, ((_, body), reply) in enumerate(zip(bodies, replies)):
        results = server.ok(reply)["results"]
        name = who[i % 3]
        scope = None if name == "ops" else {"user_id": name}
        scores_close(results, memory.retrieve(vector=body["vector"], k=30, scope=scope))
        if scope is not None:
            assert len(results) == 20 and all(r["text"].startswith(name) for r in results)
        else:
            assert len(results) == 30


def test_an_error_in_a_batch_is_each_requests_own(memory: memcore.Memory, served: Callable[..., Served]) -> None:
    server = served(memory, threads=1)
    good = [{"vector": q.tolist(), "k": 4} for q in QUERIES[:5]]
    bad = {"vector": [1.0] * (DIM + 1), "k": 4}  # the same shape: queued in the same batch
    alone_bad = server.call("POST", "/v1/search", None, bad)
    replies = concurrently(server, [(None, b) for b in (*good[:2], bad, *good[2:])], Held(server))
    assert replies[2].status_code == alone_bad.status_code == 400
    assert replies[2].json() == alone_bad.json()
    for body, reply in zip(good, replies[:2] + replies[3:]):
        scores_close(server.ok(reply)["results"], memory.retrieve(vector=body["vector"], k=4))


def test_a_lone_search_runs_alone(memory: memcore.Memory, served: Callable[..., Served]) -> None:
    server = served(memory, threads=1)
    for q in QUERIES[:5]:
        scores_close(server.ok(server.call("POST", "/v1/search", None, {"vector": q.tolist(), "k": 3}))["results"], memory.retrieve(vector=q, k=3))
    assert server.server.config.app.state.calls.batches == 0


def test_searches_past_their_time_in_the_queue_never_run(memory: memcore.Memory) -> None:
    calls = Calls(memory, timeout_s=1.0, threads=1)
    started, release = threading.Event(), threading.Event()
    ran: list[str] = []

    def hold(m: Any) -> None:
        started.set()
        assert release.wait(30)

    def one(m: Any) -> Any:
        ran.append("one")
        return m.retrieve(vector=QUERIES[0], k=1)

    def many(m: Any, items: list[Any]) -> Any:
        ran.append("many")
        return m.retrieve_many(vectors=items, k=1)

    async def scenario() -> list[str]:
        held = asyncio.ensure_future(calls.run(ANONYMOUS, hold))
        await asyncio.get_running_loop().run_in_executor(None, started.wait, 30)
        queued = [asyncio.ensure_future(calls.run(ANONYMOUS, one, batch=(lambda: "shape", q, many))) for q in QUERIES[:3]]
        outcomes = []
        for call in queued:
            try:
                await call
                outcomes.append("answered")
            except CallTimeout:
                outcomes.append("timed out")
        release.set()
        try:
            await held
        except CallTimeout:
            pass
        outcomes.append(str(await calls.run(ANONYMOUS, lambda m: m.count())))  # queued after the dropped ones: they are gone
        return outcomes

    try:
        assert asyncio.run(scenario()) == ["timed out"] * 3 + ["40"]
    finally:
        release.set()
        calls.close()
    assert ran == [] and calls.batches == 0
